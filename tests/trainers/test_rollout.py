from __future__ import annotations

import pytest

from agents import OraclePolicy, RoleMap, ScriptedPolicy
from trainers.evaluation.metrics import compute_metrics
from trainers.rollout.engine import RolloutEngine
from trainers.rollout.records import Episode, answer_roles_of, load_episodes, save_episodes


class CountingPolicy(ScriptedPolicy):
    """A scripted policy that records the size of every batch it is asked for."""

    def __init__(self, replies):
        super().__init__(replies)
        self.batches: list[int] = []

    def act(self, observations):
        self.batches.append(len(observations))
        return super().act(observations)


def test_turns_are_batched_across_env_copies():
    policy = CountingPolicy(["\\boxed{1}", "Verdict: incorrect"])
    engine = RolloutEngine("math/reflection-v0", policy, {"rounds": 1}, num_envs=8)
    episodes = engine.run(engine.problem_ids(8))
    # 8 copies, 3 turns each: one batch of 8 per turn, not 24 calls of one.
    assert policy.batches == [8, 8, 8]
    assert [t.agent for t in episodes[0].turns] == ["solver_0", "critic_0", "refiner_0"]


def test_waves_and_groups():
    policy = CountingPolicy(["\\boxed{1}"])
    engine = RolloutEngine("math/solve-v0", policy, num_envs=4)
    episodes = engine.run(engine.problem_ids(3), group_size=2)
    assert policy.batches == [4, 2]
    assert [(e.group, e.sample) for e in episodes] == [
        (0, 0),
        (0, 1),
        (1, 0),
        (1, 1),
        (2, 0),
        (2, 1),
    ]
    assert episodes[0].problem_id == episodes[1].problem_id != episodes[2].problem_id


def oracle_for(engine):
    answers = {p["question"]: p["answer"] for p in engine.task.source}
    return OraclePolicy(lambda obs: answers[obs["question"]])


def test_rewards_attributed_to_each_agents_turns():
    engine = RolloutEngine("math/reflection-v0", ScriptedPolicy(["x"]), {"rounds": 1}, num_envs=4)
    roles = RoleMap(
        {
            "solver": ScriptedPolicy(["I get \\boxed{-1}"]),
            "critic": ScriptedPolicy(["Verdict: incorrect"]),
            "refiner": oracle_for(engine),
        }
    )
    engine.policies = roles
    episodes = engine.run(engine.problem_ids(4))
    for episode in episodes:
        assert [t.reward for t in episode.turns] == [0.0, 1.0, 1.0]
        assert episode.returns == {"solver_0": 0.0, "critic_0": 1.0, "refiner_0": 1.0}
        assert (
            episode.turns[2].info["correct"] is True and episode.turns[1].info["verdict"] is False
        )
    metrics = compute_metrics(episodes)
    assert metrics["pass1@turn1"] == 0.0 and metrics["accuracy"] == 1.0
    assert metrics["flip/wrong->right@1"] == 1.0


def test_team_reward_reaches_every_agents_last_turn():
    engine = RolloutEngine(
        "math/reflection-v0", ScriptedPolicy(["x"]), {"rounds": 1, "team_reward": True}, num_envs=2
    )
    engine.policies = RoleMap(
        {"*": oracle_for(engine), "critic": ScriptedPolicy(["Verdict: correct"])}
    )
    for episode in engine.run(engine.problem_ids(2)):
        assert [t.reward for t in episode.turns] == [1.0, 1.0, 1.0]


def test_outcome_critic_reward_reaches_the_critic_turn_of_its_round():
    engine = RolloutEngine(
        "math/reflection-v0",
        ScriptedPolicy(["x"]),
        {"rounds": 2, "critic_reward": "outcome"},
        num_envs=2,
    )
    oracle = oracle_for(engine)

    class FixThenBreak:
        """Round 0 (first batch): the right answer; round 1: a wrong one."""

        calls = 0

        def act(self, observations):
            self.calls += 1
            return (
                oracle.act(observations) if self.calls == 1 else ["\\boxed{-1}"] * len(observations)
            )

    refiner = FixThenBreak()
    engine.policies = RoleMap(
        {
            "solver": ScriptedPolicy(["I get \\boxed{-1}"]),
            "critic": ScriptedPolicy(["Verdict: correct"]),  # wrong call in round 0
            "refiner": refiner,
        }
    )
    for episode in engine.run(engine.problem_ids(2)):
        assert [t.agent for t in episode.turns] == [
            "solver_0",
            "critic_0",
            "refiner_0",
            "critic_0",
            "refiner_0",
        ]
        assert [t.reward for t in episode.turns] == [0.0, 1.0, 1.0, 0.0, 0.0]
        assert episode.turns[1].info["correct"] is False  # its verdict alone would have paid 0


def test_copies_ending_at_different_turns():
    policy = CountingPolicy(["\\boxed{1}", "Verdict: correct", "\\boxed{2}", "Verdict: incorrect"])
    engine = RolloutEngine(
        "math/reflection-v0", policy, {"rounds": 3, "stop_on_accept": True}, num_envs=4
    )
    episodes = engine.run(engine.problem_ids(2), group_size=2)
    lengths = sorted(len(e.turns) for e in episodes)
    assert lengths[0] < lengths[-1] <= 7  # some copies stopped on accept, the others went on
    assert sum(policy.batches) == sum(lengths)


def test_parallel_env_records_one_turn_per_agent_per_round():
    engine = RolloutEngine(
        "math/debate-v0", ScriptedPolicy(["x"]), {"num_agents": 3, "rounds": 2}, num_envs=4
    )
    engine.policies = RoleMap({"*": oracle_for(engine)})
    episodes = engine.run(engine.problem_ids(2))
    turns = episodes[0].turns
    assert len(turns) == 6 and [t.round for t in turns] == [0, 0, 0, 1, 1, 1]
    assert all(t.reward == 1.0 for t in turns)
    assert compute_metrics(episodes)["maj1@turnK"] == 1.0


def test_episodes_round_trip_through_jsonl(tmp_path):
    engine = RolloutEngine("math/debate-v0", ScriptedPolicy(["é \\boxed{3} 🙂"]), num_envs=2)
    episodes = engine.run(engine.problem_ids(2))
    path = save_episodes(tmp_path / "eps.jsonl", episodes)
    assert load_episodes(path) == episodes
    path.write_text(path.read_text() + "{broken\n")
    with pytest.raises(ValueError, match=r"eps\.jsonl:3"):
        load_episodes(path)


def test_bad_arguments():
    with pytest.raises(ValueError, match="num_envs"):
        RolloutEngine("math/solve-v0", ScriptedPolicy(["x"]), num_envs=0)
    engine = RolloutEngine("math/solve-v0", ScriptedPolicy(["x"]))
    with pytest.raises(ValueError, match="group_size"):
        engine.run(["a"], group_size=0)
    with pytest.raises(ValueError, match="has 1000"):
        engine.problem_ids(2000)


def test_episode_from_dict_requires_fields():
    with pytest.raises(KeyError):
        Episode.from_dict({"env_id": "x"})


# ---------------------------------------------------------------- branched rollouts


class AlternatingOracle(OraclePolicy):
    """Right on even calls, wrong (`-1`) on odd ones: the samples of one turn differ."""

    def __init__(self, engine):
        answers = {p["question"]: p["answer"] for p in engine.task.source}
        self.calls = 0

        def answer(obs):
            self.calls += 1
            return answers[obs["question"]] if self.calls % 2 else "-1"

        super().__init__(answer)


def branched_reflection(group_size=4, problems=2, **env_kwargs):
    engine = RolloutEngine(
        "math/reflection-v0", ScriptedPolicy(["x"]), {"rounds": 1, **env_kwargs}, num_envs=8
    )
    critic = CountingPolicy(["Verdict: correct", "Verdict: incorrect"])
    engine.policies = RoleMap(
        {
            "solver": AlternatingOracle(engine),
            "critic": critic,
            "refiner": AlternatingOracle(engine),
        }
    )
    episodes = engine.run(engine.problem_ids(problems), group_size=group_size, branch=True)
    return engine, critic, episodes


def test_branched_turns_answer_one_shared_history():
    _, critic, episodes = branched_reflection()
    assert [(e.group, e.sample) for e in episodes] == [(g, s) for g in range(2) for s in range(4)]
    assert all(e.branched for e in episodes)
    # as many generations as independent episodes: one batch of 2 problems x 4 per turn
    assert critic.batches == [8]
    for group in (episodes[:4], episodes[4:]):
        for level, agent in enumerate(["solver_0", "critic_0", "refiner_0"]):
            turns = [e.turns[level] for e in group]
            assert {t.agent for t in turns} == {agent}
            assert [t.index for t in turns] == [level] * 4
            # every sample of a turn saw the same history ...
            assert all(t.observation == turns[0].observation for t in turns)
        # ... and the critic's history holds one of the solver's replies (the trunk's)
        solver_texts = {e.turns[0].text for e in group}
        critic_prompt = group[0].turns[1].observation["prompt"]
        assert sum(text in critic_prompt for text in solver_texts) == 1


def test_branched_replies_are_paid_on_their_own_step():
    _, _, episodes = branched_reflection()
    for group in (episodes[:4], episodes[4:]):
        solver = [e.turns[0] for e in group]
        assert [t.reward for t in solver] == [float(t.info["correct"]) for t in solver]
        assert sorted(t.reward for t in solver) == [0.0, 0.0, 1.0, 1.0]  # right, wrong alternate
        critic = [e.turns[1] for e in group]
        # one reviewed answer per group; the verdicts alternate, so half of them are right
        assert len({t.info["reviewed_correct"] for t in critic}) == 1
        assert sorted(t.reward for t in critic) == [0.0, 0.0, 1.0, 1.0]
        refiner = [e.turns[2] for e in group]
        assert [t.reward for t in refiner] == [float(t.info["correct"]) for t in refiner]


def test_branched_parallel_env_forks_joint_rounds():
    engine = RolloutEngine("math/debate-v0", ScriptedPolicy(["x"]), {"rounds": 2}, num_envs=6)
    engine.policies = RoleMap({"debater": AlternatingOracle(engine)})
    episodes = engine.run(engine.problem_ids(2), group_size=2, branch=True)
    assert len(episodes) == 4
    for group in (episodes[:2], episodes[2:]):
        for e in group:
            assert [(t.agent, t.round, t.index) for t in e.turns] == [
                (f"debater_{i}", r, 3 * r + i) for r in range(2) for i in range(3)
            ]
        for slot in range(6):
            assert group[0].turns[slot].observation == group[1].turns[slot].observation
            for e in group:
                turn = e.turns[slot]
                assert turn.reward == float(turn.info["correct"])


def test_branched_needs_immediate_rewards():
    engine = RolloutEngine("math/reflection-v0", ScriptedPolicy(["x"]), {"team_reward": True})
    with pytest.raises(ValueError, match="immediate_rewards"):
        engine.run(engine.problem_ids(1), group_size=2, branch=True)
    engine = RolloutEngine(
        "math/reflection-v0", ScriptedPolicy(["x"]), {"critic_reward": "outcome"}
    )
    with pytest.raises(ValueError, match="immediate_rewards"):
        engine.run(engine.problem_ids(1), group_size=2, branch=True)


def test_branched_refuses_an_env_that_does_not_replay(monkeypatch):
    from envs.reflection import ReflectionEnv

    observe, calls = ReflectionEnv.observe, []

    def drifting(self, agent):
        calls.append(agent)
        return {**observe(self, agent), "prompt": f"call {len(calls)}"}

    monkeypatch.setattr(ReflectionEnv, "observe", drifting)
    engine = RolloutEngine("math/reflection-v0", ScriptedPolicy(["x"]), {"rounds": 1})
    with pytest.raises(RuntimeError, match="not deterministic under replay"):
        engine.run(engine.problem_ids(1), group_size=2, branch=True)


def test_episodes_record_their_envs_answer_roles(tmp_path):
    """Every episode carries the answering roles its env declares, branched ones too, through
    JSONL; one saved before episodes recorded them asks the registered env."""
    engine = RolloutEngine("math/debate-v0", ScriptedPolicy(["\\boxed{3}"]), num_envs=2)
    episodes = engine.run(engine.problem_ids(1), group_size=2)
    assert [e.answer_roles for e in episodes] == [("debater",)] * 2
    _, _, branched = branched_reflection(group_size=2, problems=1)
    assert {e.answer_roles for e in branched} == {("solver", "refiner")}
    path = save_episodes(tmp_path / "e.jsonl", episodes + branched)
    assert load_episodes(path) == episodes + branched
    saved_before = {k: v for k, v in branched[0].to_dict().items() if k != "answer_roles"}
    assert Episode.from_dict(saved_before).answer_roles is None
    assert answer_roles_of(Episode.from_dict(saved_before)) == ("solver", "refiner")
    assert answer_roles_of(saved_before) == ("solver", "refiner")


def test_branched_episodes_round_trip_through_jsonl(tmp_path):
    _, _, episodes = branched_reflection(group_size=2, problems=1)
    path = save_episodes(tmp_path / "e.jsonl", episodes)
    assert load_episodes(path) == episodes
    assert Episode.from_dict({**episodes[0].to_dict()} | {"branched": False}).branched is False


def hf_policy(tiny_model, **generation):
    from agents import GenerationArguments, HFPolicy

    args = {"max_new_tokens": 24, "do_sample": False, **generation}
    return HFPolicy.from_pretrained(tiny_model, GenerationArguments(**args))


def turns_of(episodes):
    return [
        [(t.agent, t.prompt_ids, t.completion_ids, t.reward, t.finish_reason) for t in e.turns]
        for e in episodes
    ]


@pytest.mark.parametrize("env_id", ["math/reflection-v0", "math/debate-v0"])
def test_continuous_batching_plays_the_episodes_lockstep_plays(tiny_model, env_id):
    # Greedy decoding: each reply depends on its prompt only, so the two modes must agree turn
    # for turn, whatever the order in which copies' turns ran (AEC and Parallel envs).
    policy = hf_policy(tiny_model)
    kwargs = {"rounds": 1}
    continuous = RolloutEngine(env_id, policy, kwargs, num_envs=3, continuous=True)
    lockstep = RolloutEngine(env_id, policy, kwargs, num_envs=3, continuous=False)
    problems = continuous.problem_ids(5)  # more problems than copies: copies start new ones
    a = continuous.run(problems, group_size=2, seed=4)
    b = lockstep.run(problems, group_size=2, seed=4)
    assert [(e.problem_id, e.group, e.sample) for e in a] == [
        (e.problem_id, e.group, e.sample) for e in b
    ]
    assert turns_of(a) == turns_of(b)
    for x, y in zip(a, b, strict=True):
        assert [t.logprobs for t in x.turns] == [
            pytest.approx(t.logprobs, abs=1e-4) for t in y.turns
        ]
    counts = continuous.last_batching
    assert counts["generated"] == sum(len(t.completion_ids) for e in a for t in e.turns)
    assert counts["decode_slots"] == counts["generated"]  # no seat idles in continuous mode
    waste = lockstep.last_batching
    assert waste["decode_slots"] >= waste["generated"] and waste["calls"] >= 3


def test_continuous_batching_is_asked_of_the_policy_not_its_class(tiny_model):
    # A policy that is no HFPolicy but offers stepwise decoding (agents.base.StepwisePolicy) is
    # batched continuously, and plays what the HF policy it hands over plays.
    from tests.agents.helpers import Stepwise

    policy = hf_policy(tiny_model)
    kwargs = {"rounds": 1}
    stepwise = RolloutEngine("math/reflection-v0", Stepwise(policy), kwargs, num_envs=2)
    problems = stepwise.problem_ids(3)
    a = stepwise.run(problems, seed=1)
    assert "steps" in stepwise.last_batching and "calls" not in stepwise.last_batching
    b = RolloutEngine("math/reflection-v0", policy, kwargs, num_envs=2).run(problems, seed=1)
    assert turns_of(a) == turns_of(b)
    lockstep = RolloutEngine(
        "math/reflection-v0", Stepwise(policy), kwargs, num_envs=2, continuous=False
    )
    assert turns_of(lockstep.run(problems, seed=1)) == turns_of(a)  # greedy: the same replies
    assert "calls" in lockstep.last_batching


def test_lockstep_refills_a_finished_copy_with_the_next_problem():
    # One-turn episodes: 5 problems on 2 copies run 2 + 2 + 1, each call as wide as it can be.
    policy = CountingPolicy(["\\boxed{1}"])
    engine = RolloutEngine("math/solve-v0", policy, num_envs=2)
    episodes = engine.run(engine.problem_ids(5))
    assert policy.batches == [2, 2, 1]
    assert [e.group for e in episodes] == [0, 1, 2, 3, 4]
    # reflection: a copy whose episode ends mid-way is refilled while the others go on
    policy = CountingPolicy(["\\boxed{1}", "Verdict: correct"])
    engine = RolloutEngine("math/reflection-v0", policy, {"rounds": 1}, num_envs=2)
    episodes = engine.run(engine.problem_ids(3))
    assert len(episodes) == 3 and all(len(e.turns) >= 2 for e in episodes)
    assert sum(policy.batches) == sum(len(e.turns) for e in episodes)


def test_continuous_needs_one_hf_model_for_every_role(tiny_model):
    with pytest.raises(ValueError, match="continuous=True needs"):
        RolloutEngine("math/solve-v0", ScriptedPolicy(["x"]), continuous=True).run(["0"])
    mixed = RoleMap({"solver": hf_policy(tiny_model), "*": ScriptedPolicy(["Verdict: correct"])})
    engine = RolloutEngine("math/reflection-v0", mixed, {"rounds": 1}, num_envs=2)
    episodes = engine.run(engine.problem_ids(2))  # None: falls back to lockstep calls
    assert engine.last_batching["calls"] == 1  # the solver's one HF call; scripted ones count 0
    assert all(e.turns[0].completion_ids for e in episodes)


def test_a_slow_step_holds_up_its_own_copy_only(tiny_model):
    # One copy's env step blocks until every other episode has ended. Stepped by worker threads,
    # the others play on meanwhile and release it; stepped inline, nothing else could run.
    import threading

    from pettingzoo.utils.wrappers import BaseWrapper

    import envs

    released, others_done = [], threading.Event()
    episodes_done: list[str] = []

    class SlowFirstProblem(BaseWrapper):
        def step(self, action):
            if self.unwrapped.problem["id"] == problems[0] and action is not None:
                released.append(others_done.wait(timeout=20))
            super().step(action)

    def make():
        return SlowFirstProblem(envs.make("math/solve-v0"))

    def finished(episode):
        episodes_done.append(episode.problem_id)
        if len(episodes_done) == len(problems) - 1 and problems[0] not in episodes_done:
            others_done.set()

    engine = RolloutEngine(make, hf_policy(tiny_model), num_envs=4, step_workers=2)
    problems = engine.problem_ids(6)
    episodes = engine.run(problems, callback=finished)
    assert released == [True]
    assert episodes_done[-1] == problems[0]  # the slow copy ended last, the others went on
    assert [e.problem_id for e in episodes] == problems


def test_stepping_in_threads_samples_what_stepping_inline_samples(tiny_model):
    policy = hf_policy(tiny_model, do_sample=True, seed=3)
    runs = []
    for workers in (0, 3):
        engine = RolloutEngine(
            "math/reflection-v0", policy, {"rounds": 1}, num_envs=3, step_workers=workers
        )
        runs.append(engine.run(engine.problem_ids(4), group_size=2, seed=1))
        policy = hf_policy(tiny_model, do_sample=True, seed=3)  # the same seed stream again
    assert turns_of(runs[0]) == turns_of(runs[1])
    assert len({tuple(t.completion_ids) for e in runs[0] for t in e.turns}) > 4
