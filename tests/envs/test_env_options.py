"""`envs.options`: each env's options as one checked dataclass, and the static facts they imply,
checked against the envs themselves."""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys
from pathlib import Path

import pytest
from pettingzoo import ParallelEnv

import envs
from envs.options import (
    DebateOptions,
    EnsembleOptions,
    EnvFacts,
    ReflectionOptions,
    SolveOptions,
    TaskOptions,
    ToolOptions,
)
from envs.roles import env_roles
from envs.sandbox import SandboxConfig

REPO = Path(__file__).resolve().parents[2]
OPTIONS = {
    "math/solve-v0": SolveOptions,
    "math/reflection-v0": ReflectionOptions,
    "math/debate-v0": DebateOptions,
    "math/ensemble-v0": EnsembleOptions,
    "math/tool-v0": ToolOptions,
}
# A few option sets per env (the registry's defaults apply under them).
CASES = [
    ("math/solve-v0", {}),
    ("math/reflection-v0", {}),
    ("math/reflection-v0", {"rounds": 1}),
    ("math/reflection-v0", {"rounds": 3, "stop_on_accept": True, "audit": ["critic"]}),
    ("math/debate-v0", {}),
    ("math/debate-v0", {"num_agents": 2, "rounds": 3}),
    ("math/debate-v0", {"num_agents": 1, "rounds": 1}),
    ("math/ensemble-v0", {}),
    ("math/ensemble-v0", {"num_agents": 5}),
    ("math/tool-v0", {"rounds": 1}),
    ("math/tool-v0", {"rounds": 2, "stop_on_accept": True}),
]
# Every reply rejects and states a wrong answer: no critic or verifier accepts, so no episode
# stops early and every slot is played.
REPLY = "I get \\boxed{123456}. Verdict: incorrect"


def options_of(env_id: str, kwargs: dict) -> TaskOptions:
    """The options `envs.make(env_id, **kwargs)` builds: the registry's defaults under them."""
    return OPTIONS[env_id](**{**envs.spec(env_id).kwargs, **kwargs})


def played_slots(env) -> list[tuple[str, ...]]:
    """The agents that acted at each step of one episode, every reply `REPLY`."""
    slots = []
    if isinstance(env.unwrapped, ParallelEnv):
        env.reset(seed=0)
        while env.agents:
            slots.append(tuple(env.agents))
            env.step(dict.fromkeys(env.agents, REPLY))
        return slots
    env.reset(seed=0)
    for agent in env.agent_iter():
        _, _, terminated, truncated, _ = env.last()
        if terminated or truncated:
            env.step(None)
            continue
        slots.append((agent,))
        env.step(REPLY)
    return slots


@pytest.mark.parametrize(("env_id", "kwargs"), CASES, ids=str)
def test_facts_are_what_the_env_is_and_does(env_id, kwargs):
    facts = options_of(env_id, kwargs).facts()
    env = envs.make(env_id, **kwargs)
    raw = env.unwrapped
    assert isinstance(facts, EnvFacts)
    assert facts.agents == tuple(raw.possible_agents)
    assert facts.answer_roles == tuple(raw.answer_roles)
    assert facts.roles == tuple(env_roles(env))
    assert set(facts.review_roles) <= set(facts.roles)
    assert facts.max_turns == raw.max_turns
    assert tuple(played_slots(env)) == facts.slots


def test_facts_state_the_schedules():
    reflection = ReflectionOptions(rounds=2).facts()
    assert reflection.slots == (
        ("solver_0",),
        ("critic_0",),
        ("refiner_0",),
        ("critic_0",),
        ("refiner_0",),
    )
    assert reflection.review_roles == ("critic",)
    assert reflection.answer_roles == ("solver", "refiner")
    tool = ToolOptions(rounds=1).facts()
    assert tool.slots == (("analyzer_0",), ("executor_0",), ("verifier_0",))
    assert tool.review_roles == ("verifier",) and tool.answer_roles == ("executor",)
    debate = DebateOptions(num_agents=2, rounds=2).facts()
    assert debate.slots == (("debater_0", "debater_1"),) * 2 and debate.review_roles == ()
    assert EnsembleOptions(num_agents=2).facts().slots == (("variant_0", "variant_1"),)
    assert SolveOptions().facts().slots == (("solver_0",),)
    with pytest.raises(NotImplementedError):
        TaskOptions().facts()


BAD = [
    ("math/reflection-v0", {"rounds": 0}),
    ("math/reflection-v0", {"critic_reward": "vibes"}),
    ("math/reflection-v0", {"revision_reward": "more"}),
    ("math/reflection-v0", {"improvement_bonus": -1}),
    ("math/reflection-v0", {"improvement_bonus": "1"}),
    ("math/reflection-v0", {"counterfactual_weight": float("inf")}),
    ("math/reflection-v0", {"refiner_mode": "redo"}),
    ("math/reflection-v0", {"audit": "critic"}),
    ("math/reflection-v0", {"audit": ["judge"]}),
    ("math/reflection-v0", {"max_obs_chars": 10}),
    ("math/debate-v0", {"num_agents": 0}),
    ("math/debate-v0", {"rounds": True}),
    ("math/debate-v0", {"influence_discount": 2}),
    ("math/debate-v0", {"instructions": ["a", 3]}),
    ("math/debate-v0", {"revision_reward": "x"}),
    ("math/ensemble-v0", {"num_agents": 2.0}),
    ("math/ensemble-v0", {"instructions": [None, 1]}),
    ("math/ensemble-v0", {"render_mode": "human"}),
    ("math/tool-v0", {"rounds": -1}),
    ("math/tool-v0", {"cache_size": -1}),
    ("math/tool-v0", {"max_output_chars": 63}),
    ("math/tool-v0", {"sandbox": 5}),
    ("math/tool-v0", {"sandbox": {"timeout_s": 0}}),
    ("math/tool-v0", {"verifier_reward": "outcome"}),
    ("math/tool-v0", {"counterfactual_weight": True}),
    ("math/solve-v0", {"per_step_rewards": "yes"}),
]


@pytest.mark.parametrize(("env_id", "kwargs"), BAD, ids=str)
def test_the_options_raise_what_the_env_raises(env_id, kwargs):
    with pytest.raises((ValueError, TypeError)) as by_options:
        OPTIONS[env_id](**kwargs)
    with pytest.raises((ValueError, TypeError)) as by_env:
        envs.make(env_id, **kwargs)
    assert type(by_env.value) is type(by_options.value)
    assert str(by_env.value) == str(by_options.value)


@pytest.mark.parametrize("env_id", sorted(OPTIONS))
def test_every_field_has_one_line_of_help_and_is_a_keyword_of_the_env(env_id):
    cls = OPTIONS[env_id]
    raw_cls = type(envs.make(env_id, wrapped=False).unwrapped)
    assert raw_cls.options_class is cls
    params = inspect.signature(raw_cls).parameters
    assert set(params) == {*cls.names(), "options", "task_options"}
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values())
    for f in dataclasses.fields(cls):
        text = f.metadata.get("help")
        assert isinstance(text, str) and text and "\n" not in text, f.name
        assert params[f.name].default == f.default


def test_an_env_reads_its_settings_from_its_options():
    env = envs.make("math/reflection-v0", rounds=3, task="unknown", audit=["critic"]).unwrapped
    assert isinstance(env.options, ReflectionOptions)
    assert env.options.rounds == env.rounds == 3 and env.audit == ("critic",)
    assert env.schedule == [a for (a,) in env.options.facts().slots]
    with pytest.raises(AttributeError):
        env.rounds = 4


@pytest.mark.parametrize("env_id", sorted(OPTIONS))
def test_options_as_one_object_make_the_env_the_keywords_make(env_id):
    cls = OPTIONS[env_id]
    options = options_of(env_id, {"split": "test", "max_obs_chars": 4096})
    by_object = envs.make(env_id, options=options).unwrapped
    assert by_object.options == options
    by_keywords = envs.make(env_id, split="test", max_obs_chars=4096).unwrapped
    assert by_keywords.options == options
    overridden = envs.make(env_id, options=options, max_obs_chars=2048).unwrapped
    assert overridden.options == dataclasses.replace(options, max_obs_chars=2048)
    # task_options: a TaskOptions gives its task fields, the env's own class all of them
    by_task = envs.make(env_id, task_options=TaskOptions(split="test", max_obs_chars=4096))
    assert by_task.unwrapped.options == options
    assert envs.make(env_id, task_options=options).unwrapped.options == options
    with pytest.raises(TypeError, match="options or task_options, not both"):
        envs.make(env_id, options=options, task_options=TaskOptions())
    with pytest.raises(TypeError, match=f"options must be a {cls.__name__} or None"):
        envs.make(env_id, options=TaskOptions())


def test_reflection_env_still_takes_task_options_and_keywords():
    from envs.reflection import ReflectionEnv

    env = ReflectionEnv(task_options=TaskOptions(task="unknown", split="test"), rounds=2)
    assert env.options == ReflectionOptions(task="unknown", split="test", rounds=2)
    assert envs.make("math/reflection-v0", rounds=3, task="unknown").unwrapped.max_turns == 7


def test_options_store_normal_forms_and_are_frozen():
    options = ReflectionOptions(audit=["critic", "solver"], improvement_bonus=2)
    assert options.audit == ("critic", "solver") and options.improvement_bonus == 2.0
    assert isinstance(options.improvement_bonus, float)
    assert DebateOptions(instructions=["a {answer_format}"]).instructions == ("a {answer_format}",)
    assert DebateOptions(influence_discount=1).influence_discount == 1.0
    tool = ToolOptions(sandbox={"timeout_s": 2.0, "isolation": "bwrap"})
    assert isinstance(tool.sandbox, SandboxConfig) and tool.sandbox.timeout_s == 2.0
    assert ToolOptions().sandbox is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.rounds = 3  # type: ignore[misc]
    # an ensemble's debate settings are fixed, not arguments
    assert EnsembleOptions().rounds == 1 and "rounds" not in EnsembleOptions.names()
    with pytest.raises(TypeError):
        EnsembleOptions(rounds=2)  # type: ignore[call-arg]


def test_the_options_module_imports_no_env_module_and_no_pettingzoo():
    code = (
        "import sys, envs.options\n"
        "heavy = ['pettingzoo', 'envs.core', 'envs.reflection', 'envs.tool', 'envs.debate',"
        " 'envs.ensemble', 'envs.solve']\n"
        "print(','.join(m for m in heavy if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""
