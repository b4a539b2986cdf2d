"""`envs.core.TaskOptions` and the checks every env shares: one task signature, one message."""

from __future__ import annotations

import inspect

import pytest

import envs
from envs.core import TaskOptions, check_count

ROUNDS_ENVS = ["math/reflection-v0", "math/debate-v0", "math/tool-v0"]
AGENTS_ENVS = ["math/debate-v0", "math/ensemble-v0"]


@pytest.mark.parametrize("env_id", ROUNDS_ENVS)
@pytest.mark.parametrize("rounds", [True, False, 0, -1, 1.5, "2", None])
def test_every_env_that_takes_rounds_refuses_a_bad_one_alike(env_id, rounds):
    with pytest.raises(ValueError, match=rf"^rounds must be an int >= 1, got {rounds!r}$"):
        envs.make(env_id, rounds=rounds)


@pytest.mark.parametrize("env_id", AGENTS_ENVS)
@pytest.mark.parametrize("num_agents", [True, 0, 2.0])
def test_every_env_that_takes_num_agents_refuses_a_bad_one_alike(env_id, num_agents):
    with pytest.raises(ValueError, match=rf"^num_agents must be an int >= 1, got {num_agents!r}$"):
        envs.make(env_id, num_agents=num_agents)


@pytest.mark.parametrize("env_id", envs.list_envs())
@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"max_action_chars": 63}, ValueError, "max_action_chars must be an int >= 64, got 63"),
        ({"max_obs_chars": True}, ValueError, "max_obs_chars must be an int >= 64, got True"),
        ({"render_mode": "human"}, ValueError, "render_mode must be None or 'ansi'"),
        ({"per_step_rewards": 1}, TypeError, "per_step_rewards must be a bool, got 1"),
        ({"bogus": 1}, TypeError, "got an unexpected keyword argument 'bogus'"),
        ({"difficulty": 3}, TypeError, r"'difficulty' is the task's.*task_kwargs=\{'difficulty'"),
    ],
)
def test_every_env_checks_its_task_arguments_alike(env_id, kwargs, error, message):
    with pytest.raises(error, match=message):
        envs.make(env_id, **kwargs)


@pytest.mark.parametrize(
    ("env_id", "kwargs", "message"),
    [
        (
            "math/debate-v0",
            {"refiner_mode": "patch"},
            "'refiner_mode' is an option of math/reflection-v0, not of this env",
        ),
        (
            "math/reflection-v0",
            {"num_agents": 3},
            "is an option of math/debate-v0, math/ensemble-v0,",
        ),
        ("math/reflection-v0", {"round": 3}, "did you mean 'rounds'"),
        ("math/reflection-v0", {"tsak": "reach"}, "did you mean 'task'"),
    ],
)
def test_an_unexpected_keyword_names_the_envs_that_take_it_or_a_near_name(env_id, kwargs, message):
    with pytest.raises(TypeError, match=message):
        envs.make(env_id, **kwargs)


def test_a_deregistered_env_is_no_longer_named_as_taking_an_option():
    debate = envs.spec("math/debate-v0")
    envs.register("test/debatecopy-v0", debate.entry_point, options=debate.options)
    try:
        with pytest.raises(TypeError, match="math/ensemble-v0, test/debatecopy-v0, not of"):
            envs.make("math/reflection-v0", num_agents=3)
    finally:
        envs.deregister("test/debatecopy-v0")
    with pytest.raises(TypeError, match="math/ensemble-v0, not of this env"):
        envs.make("math/reflection-v0", num_agents=3)


@pytest.mark.parametrize("env_id", envs.list_envs())
def test_every_env_lists_the_task_arguments_in_its_signature(env_id):
    raw = envs.make(env_id, wrapped=False).unwrapped
    params = inspect.signature(type(raw).__init__).parameters
    assert set(TaskOptions.names()) <= set(params)
    assert all(params[name].kind is inspect.Parameter.KEYWORD_ONLY for name in TaskOptions.names())
    assert params["max_obs_chars"].default == 32768
    assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


@pytest.mark.parametrize("env_id", envs.list_envs())
def test_task_options_as_one_object_or_as_keywords_make_the_same_env(env_id):
    options = TaskOptions(split="test", max_obs_chars=4096, render_mode="ansi")
    by_object = envs.make(env_id, task_options=options).unwrapped
    by_keywords = envs.make(env_id, split="test", max_obs_chars=4096, render_mode="ansi").unwrapped
    for raw in (by_object, by_keywords):
        assert raw.max_obs_chars == 4096 and raw.render_mode == "ansi"
    assert by_object.task.source[0] == by_keywords.task.source[0]
    overridden = envs.make(env_id, task_options=options, max_obs_chars=2048).unwrapped
    assert overridden.max_obs_chars == 2048 and overridden.render_mode == "ansi"
    with pytest.raises(TypeError, match="task_options must be a TaskOptions"):
        envs.make(env_id, task_options={"split": "test"})


def test_check_count():
    assert check_count("n", 3, 1) == 3
    assert check_count("cache_size", 0, 0) == 0
    with pytest.raises(ValueError, match="cache_size must be an int >= 0, got -1"):
        check_count("cache_size", -1, 0)


@pytest.mark.parametrize("env_id", ["math/solve-v0", "math/reflection-v0", "math/tool-v0"])
def test_every_aec_env_starts_its_step_with_the_same_checks(env_id):
    env = envs.make(env_id, wrapped=False)
    env.reset(seed=0)
    agent = env.agent_selection
    with pytest.raises(TypeError, match=rf"action of '{agent}' must be a str"):
        env.step(3)
    while env.agents:  # play it out; then the next step is refused
        agent = env.agent_selection
        dead = env.terminations[agent] or env.truncations[agent]
        env.step(None if dead else "\\boxed{1} Verdict: correct")
    with pytest.raises(RuntimeError, match="the episode is over: call reset"):
        env.step("more")
