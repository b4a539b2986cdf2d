from __future__ import annotations

import pytest

import envs

PROBLEM = {"id": "p/1", "question": "Ann has 2 pens and buys 3 more. How many pens?", "answer": "5"}


def test_debate_rounds_show_others_answers():
    env = envs.make("math/debate-v0", num_agents=2, rounds=2, per_step_rewards=True)
    obs, infos = env.reset(options={"problem": PROBLEM})
    assert set(obs) == {"debater_0", "debater_1"} and infos["debater_0"]["problem_id"] == "p/1"
    obs, rewards, terms, _, infos = env.step({"debater_0": "\\boxed{5}", "debater_1": "\\boxed{6}"})
    assert rewards == {"debater_0": 1.0, "debater_1": 0.0} and not any(terms.values())
    assert "\\boxed{6}" in obs["debater_0"]["prompt"] and "\\boxed{5}" in obs["debater_0"]["prompt"]
    assert "Your previous answer:\n\\boxed{5}" in obs["debater_0"]["prompt"]
    obs, rewards, terms, _, infos = env.step({"debater_0": "\\boxed{5}", "debater_1": "\\boxed{5}"})
    assert all(terms.values()) and env.agents == []
    assert infos["debater_1"]["round"] == 1 and infos["debater_1"]["team_correct"] is True


def test_influence_reward_credits_teammates_later_correctness():
    env = envs.make(
        "math/debate-v0", num_agents=3, rounds=2, influence_discount=0.5, per_step_rewards=True
    )
    env.reset(options={"problem": PROBLEM})
    _, rewards, *_ = env.step(dict.fromkeys(env.agents, "\\boxed{5}"))
    assert rewards == dict.fromkeys(env.agents, 1.0)  # no bonus in round 0
    _, rewards, _, _, infos = env.step(
        {"debater_0": "\\boxed{5}", "debater_1": "\\boxed{5}", "debater_2": "\\boxed{7}"}
    )
    # debater_0: own 1 + 0.5 * mean(1, 0); debater_2: own 0 + 0.5 * mean(1, 1)
    assert rewards == {"debater_0": 1.25, "debater_1": 1.25, "debater_2": 0.5}
    assert infos["debater_2"]["influence_bonus"] == 0.5


def test_team_answer_majority_and_tie_break():
    env = envs.make("math/ensemble-v0", num_agents=4)
    env.reset(options={"problem": PROBLEM})
    # 6 and 5 tie at two votes each; 6 came first, so the team answers 6 (wrong).
    _, rewards, terms, _, infos = env.step(
        {
            "variant_0": "\\boxed{6}",
            "variant_1": "\\boxed{5}",
            "variant_2": "\\boxed{5}",
            "variant_3": "\\boxed{6}",
        }
    )
    assert all(terms.values()) and rewards["variant_1"] == 1.0 and rewards["variant_0"] == 0.0
    assert infos["variant_1"]["team_answer"] == "6" and infos["variant_1"]["team_correct"] is False
    assert infos["variant_1"]["team_votes"] == 2
    env.reset(options={"problem": PROBLEM})
    _, _, _, _, infos = env.step(
        {
            "variant_0": "no idea",
            "variant_1": "\\boxed{5}",
            "variant_2": "It is \\boxed{5.0}",
            "variant_3": "\\boxed{6}",
        }
    )
    assert infos["variant_0"]["team_correct"] is True and infos["variant_0"]["team_votes"] == 2


def test_ensemble_agents_get_different_instructions():
    env = envs.make("math/ensemble-v0", num_agents=3)
    obs, _ = env.reset(seed=3)
    assert len({o["instruction"] for o in obs.values()}) == 3
    assert len({o["prompt"] for o in obs.values()}) == 1
    custom = envs.make("math/ensemble-v0", num_agents=2, instructions=["A {answer_format}", "B"])
    obs, _ = custom.reset(seed=3)
    assert obs["variant_0"]["instruction"].startswith("A give the final answer")
    assert obs["variant_1"]["instruction"] == "B"


@pytest.mark.parametrize("env_id", ["math/debate-v0", "math/ensemble-v0"])
def test_parallel_action_errors(env_id):
    env = envs.make(env_id)
    env.reset(seed=0)
    first, *rest = env.agents
    with pytest.raises(ValueError, match=rf"missing actions for \['{first}'\]"):
        env.step(dict.fromkeys(rest, "x"))
    with pytest.raises(ValueError, match=r"not in play \['ghost_9'\]"):
        env.step({**dict.fromkeys(env.agents, "x"), "ghost_9": "x"})
    with pytest.raises(TypeError, match=rf"'{first}'.*got bytes"):
        env.step({**dict.fromkeys(env.agents, "x"), first: b"5"})
    assert env.round == 0  # nothing was consumed by the failed steps


def test_solve_env_aec_and_gymnasium():
    import gymnasium

    env = envs.make("math/solve-v0")
    env.reset(options={"problem": PROBLEM})
    env.step("\\boxed{5}")
    assert env.rewards["solver_0"] == 1.0 and env.terminations["solver_0"]
    genv = gymnasium.make("math/solve-v0")
    obs, info = genv.reset(seed=0, options={"problem": PROBLEM})
    assert "How many pens?" in obs["prompt"] and info["problem_id"] == "p/1"
    obs, reward, terminated, truncated, info = genv.step("It is \\boxed{5}")
    assert (reward, terminated, truncated, info["correct"]) == (1.0, True, False, True)
    with pytest.raises(RuntimeError, match="reset"):
        genv.step("again")


def test_reset_pins_problem_by_id_and_seed():
    env = envs.make("math/solve-v0", task_kwargs={"difficulty": 3})
    env.reset(seed=7)
    first = env.unwrapped.problem
    env.reset(seed=7)
    assert env.unwrapped.problem == first
    env.reset(options={"problem_id": first["id"]})
    assert env.unwrapped.problem == first and first["metadata"]["difficulty"] == 3
    with pytest.raises(KeyError):
        env.reset(options={"problem_id": "nope"})


def test_debate_improvement_reward_pays_each_revision_for_its_change():
    env = envs.make(
        "math/debate-v0",
        num_agents=3,
        rounds=2,
        revision_reward="improvement",
        improvement_bonus=1.0,
        per_step_rewards=True,
    )
    env.reset(options={"problem": PROBLEM})
    _, rewards, *_ = env.step(
        {"debater_0": "\\boxed{5}", "debater_1": "\\boxed{6}", "debater_2": "\\boxed{5}"}
    )
    assert rewards == {"debater_0": 1.0, "debater_1": 0.0, "debater_2": 1.0}  # round 0: scores
    _, rewards, _, _, infos = env.step(
        {"debater_0": "\\boxed{6}", "debater_1": "\\boxed{5}", "debater_2": "\\boxed{5}"}
    )
    # debater_0 gave up a right answer (-1), debater_1 fixed its own (2), debater_2 kept it (1)
    assert rewards == {"debater_0": -1.0, "debater_1": 2.0, "debater_2": 1.0}
    assert [infos[a]["improvement"] for a in env.possible_agents] == [-1.0, 1.0, 0.0]
    with pytest.raises(ValueError, match="revision_reward must be one of"):
        envs.make("math/debate-v0", revision_reward="gain")
