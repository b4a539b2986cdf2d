"""The rollout engine against its documented env protocol: plain PettingZoo envs written here,
made by a factory, and the pre-step hook (`prepare_steps`) that replaced its import of the tool
env."""

from __future__ import annotations

import functools

import pytest
from gymnasium import spaces
from pettingzoo import AECEnv, ParallelEnv

import envs
from agents import RoleMap, ScriptedPolicy
from envs import program
from trainers.rollout.engine import RolloutEngine, prepare_steps


class EchoEnv(AECEnv):
    """Two agents, ``lead_asker_0`` then ``answer_bot_0`` (roles with underscores), one turn each;
    the answerer is paid 1 when its reply is the asker's question reversed. It follows only the
    engine's protocol: no task, no turn_results, none of this project's env internals."""

    metadata = {"name": "test/echo-v0", "is_parallelizable": False}
    answer_roles = ("answer_bot",)
    prepared: list[list[tuple[str, str]]] = []  # what each prepare_steps call was handed

    def __init__(self) -> None:
        super().__init__()
        self.possible_agents = ["lead_asker_0", "answer_bot_0"]
        self._space = spaces.Dict({"prompt": spaces.Text(200)})

    @classmethod
    def prepare_steps(cls, steps):
        cls.prepared.append([(env.unwrapped.agent_selection, action) for env, action in steps])

    def observation_space(self, agent):
        return self._space

    def action_space(self, agent):
        return spaces.Text(200)

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.problem = (options or {}).get("problem_id", "none")
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = {a: {} for a in self.agents}
        self.question = ""
        self.agent_selection = "lead_asker_0"

    def observe(self, agent):
        if agent == "lead_asker_0":
            return {"prompt": f"ask about {self.problem}"}
        return {"prompt": f"reverse {self.question}"}

    def step(self, action):
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[agent] = 0.0
        self._clear_rewards()
        if agent == "lead_asker_0":
            self.question = action
            self.infos[agent] = {"round": 0}
            self.agent_selection = "answer_bot_0"
        else:
            self.rewards[agent] = float(action == self.question[::-1])
            self.infos[agent] = {"round": 0, "correct": bool(self.rewards[agent])}
            self.terminations = dict.fromkeys(self.agents, True)
        self._accumulate_rewards()
        if all(self.terminations.values()):
            self._deads_step_first()


class CountParallelEnv(ParallelEnv):
    """Two agents say numbers for `rounds` rounds; each is paid its number. No ``round``
    attribute and no ``round`` info: the engine numbers rounds by its own step count."""

    metadata = {"name": "test/count-v0"}

    def __init__(self, rounds: int = 2) -> None:
        self.possible_agents = ["counter_0", "counter_1"]
        self.rounds = rounds

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.steps = 0
        return {a: {"prompt": "say a number"} for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.steps += 1
        done = self.steps >= self.rounds
        rewards = {a: float(actions[a]) for a in self.agents}
        observations = {a: {"prompt": f"you said {actions[a]}"} for a in self.agents}
        infos = {a: {"said": actions[a]} for a in self.agents}
        flags = dict.fromkeys(self.agents, done)
        agents = list(self.agents)
        if done:
            self.agents = []
        return observations, rewards, flags, dict.fromkeys(agents, False), infos


def test_a_plain_aec_env_from_a_factory_is_rolled_out():
    EchoEnv.prepared.clear()
    roles = RoleMap(
        {"lead_asker": ScriptedPolicy(["abc", "xyz"]), "answer_bot": ScriptedPolicy(["cba"])}
    )
    engine = RolloutEngine(EchoEnv, roles, num_envs=2)
    assert engine.env_id == "test/echo-v0" and engine.task is None
    episodes = engine.run(["p0", "p1"])
    assert [[t.agent for t in e.turns] for e in episodes] == [["lead_asker_0", "answer_bot_0"]] * 2
    assert [e.problem_id for e in episodes] == ["p0", "p1"]
    assert episodes[0].turns[0].observation == {"prompt": "ask about p0"}
    assert [[t.reward for t in e.turns] for e in episodes] == [[0.0, 1.0], [0.0, 0.0]]
    assert {e.answer_roles for e in episodes} == {("answer_bot",)}  # as the env declares
    assert episodes[0].turns[1].info == {"round": 0, "correct": True}
    # The hook ran once per turn, on both copies' coming steps, before either was stepped.
    assert EchoEnv.prepared == [
        [("lead_asker_0", "abc"), ("lead_asker_0", "xyz")],
        [("answer_bot_0", "cba"), ("answer_bot_0", "cba")],
    ]
    with pytest.raises(ValueError, match="no `task` attribute"):
        engine.problem_ids(2)


def test_roles_with_underscores_reach_their_policies():
    # "answer_bot_0" plays "answer_bot", not "answer" (the role rule of envs.roles).
    bot, wrong = ScriptedPolicy(["cba"]), ScriptedPolicy(["no"])
    roles = RoleMap({"lead_asker": ScriptedPolicy(["abc"]), "answer_bot": bot, "answer": wrong})
    (episode,) = RolloutEngine(EchoEnv, roles).run(["p"])
    assert [t.text for t in episode.turns] == ["abc", "cba"]


def test_a_plain_parallel_env_from_a_factory_is_rolled_out():
    engine = RolloutEngine(functools.partial(CountParallelEnv, rounds=3), ScriptedPolicy(["2"]))
    assert engine.parallel and engine.env_id == "test/count-v0"
    (episode,) = engine.run(["only"])
    assert [(t.agent, t.round) for t in episode.turns] == [
        (agent, r) for r in range(3) for agent in ("counter_0", "counter_1")
    ]
    assert [t.reward for t in episode.turns] == [2.0] * 6
    assert episode.turns[-1].info == {"said": "2"}


def test_a_factory_takes_no_env_kwargs_and_an_env_must_be_an_id_or_a_callable():
    with pytest.raises(ValueError, match=r"functools\.partial"):
        RolloutEngine(EchoEnv, ScriptedPolicy(["x"]), {"rounds": 2})
    with pytest.raises(TypeError, match="callable returning an env"):
        RolloutEngine(3, ScriptedPolicy(["x"]))  # type: ignore[arg-type]


def test_an_env_that_does_not_meet_the_protocol_is_refused_naming_what_it_lacks():
    class NoAgents:
        """Has reset and step, but no possible agents: not a team env."""

        unwrapped = property(lambda self: self)

        def reset(self, seed=None, options=None): ...

        def step(self, action): ...

    with pytest.raises(TypeError, match=r"lacks possible_agents \(envs\.core\.TeamEnv"):
        RolloutEngine(NoAgents, ScriptedPolicy(["x"]))


def test_a_registered_env_from_a_factory_plays_as_from_its_id():
    by_id = RolloutEngine("math/reflection-v0", ScriptedPolicy(["\\boxed{1}"]), {"rounds": 1})
    by_factory = RolloutEngine(
        lambda: envs.make("math/reflection-v0", rounds=1), ScriptedPolicy(["\\boxed{1}"])
    )
    assert by_factory.env_id == "math/reflection-v0"
    ids = by_id.problem_ids(3)
    assert by_factory.problem_ids(3) == ids
    one, other = by_id.run(ids, seed=5), by_factory.run(ids, seed=5)
    assert [e.to_dict() for e in one] == [e.to_dict() for e in other]


def test_prepare_steps_calls_each_env_class_hook_once_with_its_own_steps():
    EchoEnv.prepared.clear()
    echoes = [EchoEnv(), EchoEnv()]
    for env in echoes:
        env.reset()
    plain = envs.make("math/solve-v0")  # no hook: passed over
    plain.reset(seed=0)
    prepare_steps([(echoes[0], "a"), (plain, "b"), (echoes[1], "c")])
    assert EchoEnv.prepared == [[("lead_asker_0", "a"), ("lead_asker_0", "c")]]


def test_the_tool_envs_programs_run_through_its_hook(monkeypatch):
    batches = []
    run_many = program.run_many

    def counting(codes, config, max_workers=None):
        batches.append(len(codes))
        return run_many(codes, config, max_workers)

    monkeypatch.setattr(program, "run_many", counting)
    team = RoleMap(
        {
            "analyzer": ScriptedPolicy(["Add."]),
            "executor": ScriptedPolicy(["```python\nprint(2 + 3)\n```"]),
            "verifier": ScriptedPolicy(["Verdict: correct"]),
        }
    )
    engine = RolloutEngine("math/tool-v0", team, {"rounds": 1}, num_envs=3)
    episodes = engine.run(engine.problem_ids(3))
    # One batch for the executors' turn of the three copies; identical programs run once.
    assert batches == [1]
    assert all(e.turns[1].info["exec_exit_code"] == 0 for e in episodes)
