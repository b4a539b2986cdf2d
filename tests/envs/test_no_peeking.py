"""No peeking: what an agent is handed before a turn never tells whether an answer is right, no
info carries the reference, and the trainer still reads every turn's grade (`turn_results`)."""

from __future__ import annotations

import pytest

import envs
from agents import RoleMap, ScriptedPolicy
from trainers.rollout import engine as engine_module
from trainers.rollout.engine import RolloutEngine

REFERENCE = "97531"  # distinctive: no substring check can match it by chance
PROBLEM = {"id": "p/1", "question": "What is 97000 + 531?", "answer": REFERENCE}
RIGHT, WRONG = f"So the answer is \\boxed{{{REFERENCE}}}.", "So the answer is \\boxed{20}."
REPLIES = {
    "solver_0": [WRONG],
    "critic_0": ["Verdict: incorrect", "Verdict: correct"],
    "analyzer_0": ["Add the two numbers."],
    "executor_0": [f"```python\nprint({REFERENCE})\n```", "```python\nprint(20)\n```"],
    "verifier_0": ["Verdict: correct", "Verdict: incorrect"],
}
AEC = {
    "math/reflection-v0": {"rounds": 2},
    "math/tool-v0": {"rounds": 2, "sandbox": {"timeout_s": 2.0, "cpu_s": 1, "memory_mb": 256}},
    "math/solve-v0": {},
}
PARALLEL = {"math/debate-v0": {"num_agents": 3, "rounds": 2}, "math/ensemble-v0": {"num_agents": 3}}


def aec_play(env, replies, problem=PROBLEM):
    """The README's loop; returns (agent, reward, info, acts) per `last()` and every info held."""
    env.reset(seed=0, options={"problem": problem})
    queues = {a: list(r) for a, r in replies.items()}
    handed, held = [], []
    for agent in env.agent_iter():
        _, reward, terminated, truncated, info = env.last()
        acts = not (terminated or truncated)
        handed.append((agent, reward, dict(info), acts))
        env.step(queues[agent].pop(0) if acts else None)
        held.extend(dict(i) for i in env.unwrapped.infos.values())
    return handed, held


# No reply states the reference, so an info holding it can only have it from the env.
ALL_WRONG = {
    **REPLIES,
    "executor_0": ["```python\nprint(20)\n```"] * 2,
    "refiner_0": [WRONG, WRONG],
}


def refiner_replies(first_revision):
    return {**REPLIES, "refiner_0": [first_revision, RIGHT]}


def test_refiners_second_turn_is_handed_the_same_whether_its_first_was_right():
    """The round-2 refiner's `last()` was its round-1 reward and graded info: 1.0 and
    ``correct`` when it was right, the reference in a ``reason`` when not. The same replies
    are played against the reference they state and against another one."""
    other = {**PROBLEM, "answer": "86420"}
    replies = refiner_replies(RIGHT)
    seen, told = {}, {}
    for problem in (PROBLEM, other):
        handed, _ = aec_play(envs.make("math/reflection-v0", rounds=2), replies, problem)
        refiner = [(r, i) for a, r, i, acts in handed if a == "refiner_0" and acts]
        assert len(refiner) == 2
        seen[problem["answer"]] = refiner[1]
        reward, info = refiner[1]
        assert reward == 0.0 and not {"correct", "score", "reason"} & set(info)
        # the trainer's view (per_step_rewards) does tell, as the envs used to
        env = envs.make("math/reflection-v0", rounds=2, per_step_rewards=True)
        handed, _ = aec_play(env, replies, problem)
        told[problem["answer"]] = [(r, i) for a, r, i, acts in handed if a == "refiner_0" and acts]
    assert seen[REFERENCE] == seen["86420"]
    assert told[REFERENCE][1][0] == 1.0 and told["86420"][1][0] == 0.0
    assert "86420" in told["86420"][1][1]["reason"]


def test_critic_is_not_handed_what_it_reviewed():
    handed, _ = aec_play(envs.make("math/reflection-v0", rounds=2), refiner_replies(RIGHT))
    critic = [i for a, _, i, acts in handed if a == "critic_0" and acts]
    assert critic[1]["verdict"] is False and "reviewed_correct" not in critic[1]


@pytest.mark.parametrize("env_id", list(AEC))
def test_aec_no_info_carries_the_reference_and_grades_arrive_at_the_end(env_id):
    env = envs.make(env_id, **AEC[env_id])
    handed, held = aec_play(env, ALL_WRONG)
    for info in held + [i for _, _, i, _ in handed]:
        assert REFERENCE not in repr(info), info
    raw = env.unwrapped
    # the trainer's record keeps the full grade, the verifier's reason included
    assert any("reason" in i for r in raw.turn_results for i in r["infos"].values())
    # each agent's return arrives whole; it equals the sum of its per-turn rewards
    returns = {}
    for agent, reward, _, _ in handed:
        returns[agent] = returns.get(agent, 0.0) + reward
    per_turn = dict.fromkeys(raw.possible_agents, 0.0)
    for record in raw.turn_results:
        for agent, reward in record["rewards"].items():
            per_turn[agent] += reward
    assert returns == pytest.approx(per_turn)
    finals = {a: i for a, _, i, acts in handed if not acts}
    assert set(finals) == set(raw.possible_agents)
    assert all("final_correct" in info and "reason" not in info for info in finals.values())


@pytest.mark.parametrize("env_id", list(AEC))
def test_aec_per_step_rewards_shows_the_trainers_record(env_id):
    """``per_step_rewards=True``: each step's rewards and infos as graded, as the envs did."""
    env = envs.make(env_id, per_step_rewards=True, **AEC[env_id])
    env.reset(seed=0, options={"problem": PROBLEM})
    queues = {a: list(r) for a, r in refiner_replies(WRONG).items()}
    raw = env.unwrapped
    while raw.agents and not all(raw.terminations.values()):
        agent = raw.agent_selection
        env.step(queues[agent].pop(0))
        record = raw.turn_results[-1]
        assert record["agents"] == [agent] and record["rewards"] == raw.rewards
        assert record["infos"][agent] == raw.infos[agent]


@pytest.mark.parametrize("env_id", list(PARALLEL))
def test_parallel_rounds_hand_nothing_graded_until_the_last(env_id):
    def play(problem=PROBLEM, answer=RIGHT, per_step_rewards=False):
        """Agent 0 states `answer` each round, the others a wrong one."""
        env = envs.make(env_id, per_step_rewards=per_step_rewards, **PARALLEL[env_id])
        env.reset(seed=0, options={"problem": problem})
        rounds = []
        while env.agents:
            actions = {a: answer if a.endswith("_0") else WRONG for a in env.agents}
            rounds.append(env.step(actions)[1:])
        return env.unwrapped, rounds

    raw, right = play()
    _, wrong = play({**PROBLEM, "answer": "86420"})
    for (rewards, _, _, infos), (other, _, _, other_infos) in zip(
        right[:-1], wrong[:-1], strict=True
    ):
        assert rewards == other and set(rewards.values()) == {0.0}
        assert infos == other_infos
        graded = {"correct", "score", "reason", "team_correct", "influence_bonus"}
        assert all(not graded & set(info) for info in infos.values())
    for _, _, _, infos in play(answer=WRONG)[1]:
        assert REFERENCE not in repr(infos)
    rewards, terms, _, infos = right[-1]
    assert all(terms.values())
    first = next(iter(infos))  # the agent that answered right
    assert infos[first]["correct"] is True and "team_correct" in infos[first]
    assert "reason" not in infos[first]
    assert rewards[first] == len(right) * 1.0  # one per round, paid at the end
    # the sum paid at the end is the sum of the per-round rewards the trainer reads
    per_round = dict.fromkeys(raw.possible_agents, 0.0)
    for record in raw.turn_results:
        for agent, reward in record["rewards"].items():
            per_round[agent] += reward
    assert rewards == pytest.approx(per_round)
    _, stepwise = play(per_step_rewards=True)
    assert [r for r, *_ in stepwise] == [record["rewards"] for record in raw.turn_results]


@pytest.mark.parametrize(
    ("env_id", "kwargs"),
    [
        ("math/reflection-v0", {"rounds": 2}),
        ("math/reflection-v0", {"rounds": 1, "critic_reward": "outcome"}),
        ("math/reflection-v0", {"rounds": 1, "team_reward": True}),
        ("math/debate-v0", {"rounds": 2, "influence_discount": 0.5}),
        ("math/ensemble-v0", {}),
    ],
)
def test_engine_records_the_same_turns_as_when_grades_were_shown(env_id, kwargs, monkeypatch):
    """The rollout engine's turns (rewards, infos) are those it recorded when the env showed
    every grade at once: read then from the shown rewards and infos."""
    task = envs.make(env_id, **kwargs).unwrapped.task
    answers = {p["question"]: p["answer"] for p in task.source}
    calls = []

    def sometimes_right(obs):  # right on every third reply, so rewards are mixed
        calls.append(obs)
        answer = answers[obs["question"]] if len(calls) % 3 == 0 else "-1"
        return f"\\boxed{{{answer}}}"

    policy = RoleMap(
        {
            "*": ScriptedPolicy(sometimes_right),
            "critic": ScriptedPolicy(["Verdict: incorrect", "Verdict: correct"]),
        }
    )

    def turns(env_kwargs):
        engine = RolloutEngine(env_id, policy, env_kwargs, num_envs=4)
        episodes = engine.run(engine.problem_ids(6), seed=3)
        return [[(t.agent, t.reward, t.info, t.round) for t in e.turns] for e in episodes]

    now = turns(kwargs)
    calls.clear()
    with monkeypatch.context() as patch:  # the engine before the trainer's record existed
        patch.setattr(engine_module, "_graded", lambda raw, rewards, infos: (rewards, infos))
        before = turns({**kwargs, "per_step_rewards": True})
    assert now == before
    assert any(reward for episode in now for _, reward, _, _ in episode)
    assert all("correct" in info for episode in now for _, _, info, _ in episode)


def test_branched_rollouts_still_pay_each_reply():
    engine = RolloutEngine("math/reflection-v0", ScriptedPolicy(["x"]), {"rounds": 1}, num_envs=8)
    engine.policies = RoleMap(
        {
            "*": ScriptedPolicy(["\\boxed{1}", "\\boxed{2}"]),
            "critic": ScriptedPolicy(["Verdict: incorrect", "Verdict: correct"]),
        }
    )
    episodes = engine.run(engine.problem_ids(2), group_size=4, branch=True)
    for episode in episodes:
        for turn in episode.turns:
            assert turn.reward == float(turn.info["correct"])


def test_per_step_rewards_must_be_a_bool():
    with pytest.raises(TypeError, match="per_step_rewards must be a bool"):
        envs.make("math/solve-v0", per_step_rewards="yes")
