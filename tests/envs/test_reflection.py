from __future__ import annotations

import pytest

import envs
from envs.reflection import parse_verdict

PROBLEM = {"id": "p/1", "question": "Ann has 2 pens and buys 3 more. How many pens?", "answer": "5"}


def play(env, replies):
    """Step through an episode with replies per agent; return (agent, reward, info) per turn."""
    env.reset(seed=0, options={"problem": PROBLEM})
    turns, queues = [], {a: list(r) for a, r in replies.items()}
    for agent in env.agent_iter():
        obs, reward, terminated, truncated, info = env.last()
        if terminated or truncated:
            turns.append((agent, reward, "done", info))
            env.step(None)
            continue
        turns.append((agent, reward, obs, info))
        env.step(queues[agent].pop(0))
    return turns


def make(**kwargs):
    return envs.make("math/reflection-v0", **kwargs)


def test_turn_order_and_per_role_rewards():
    # per_step_rewards: each turn's grade as it is taken (the trainer's view; test_no_peeking.py
    # has what the agents are shown)
    env = make(rounds=2, wrapped=False, per_step_rewards=True)
    replies = {
        "solver_0": ["2 + 3 = 6. \\boxed{6}"],
        "critic_0": ["2 + 3 is 5, not 6. Verdict: incorrect", "Looks fine. Verdict: correct"],
        "refiner_0": ["Fixed: 2 + 3 = 5. \\boxed{5}", "Still \\boxed{5}"],
    }
    env.reset(seed=0, options={"problem": PROBLEM})
    order, rewards = [], []
    while env.agents and not all(env.terminations.values()):
        agent = env.agent_selection
        order.append(agent)
        env.step(replies[agent].pop(0))
        rewards.append(env.rewards[agent])
    assert order == ["solver_0", "critic_0", "refiner_0", "critic_0", "refiner_0"]
    # solver wrong (0), critic right to reject (1), refiner right (1), critic right to accept (1)...
    assert rewards == [0.0, 1.0, 1.0, 1.0, 1.0]
    assert (
        env.infos["critic_0"]["reviewed_correct"] is True
        and env.infos["critic_0"]["verdict"] is True
    )
    assert all(env.infos[a]["final_correct"] for a in env.agents)


def test_observations_carry_state_but_not_the_answer():
    env = make(rounds=1)
    seen = play(
        env,
        {
            "solver_0": ["I get \\boxed{4}"],
            "critic_0": ["Wrong. Verdict: incorrect"],
            "refiner_0": ["\\boxed{5}"],
        },
    )
    critic_obs = next(obs for agent, _, obs, _ in seen if agent == "critic_0" and obs != "done")
    refiner_obs = next(obs for agent, _, obs, _ in seen if agent == "refiner_0" and obs != "done")
    assert "\\boxed{4}" in critic_obs["prompt"] and "Verdict" in critic_obs["instruction"]
    assert "Wrong. Verdict: incorrect" in refiner_obs["prompt"]
    assert "\\boxed{4}" in refiner_obs["transcript"] and refiner_obs["role"] == "refiner"
    for _, _, obs, _ in seen:
        if obs != "done":
            assert set(obs) == {"role", "instruction", "question", "transcript", "prompt"}


def test_infos_carry_problem_turn_and_correctness():
    env = make(rounds=1)
    seen = play(
        env,
        {
            "solver_0": ["\\boxed{5}"],
            "critic_0": ["Verdict: correct"],
            "refiner_0": ["no answer at all"],
        },
    )
    final = {agent: info for agent, _, obs, info in seen if obs == "done"}
    assert final["solver_0"] == {
        **final["solver_0"],
        "problem_id": "p/1",
        "turn": 0,
        "extracted": "5",
        "correct": True,
    }
    assert final["refiner_0"]["parse_error"] is True and final["refiner_0"]["score"] == 0.0
    assert final["refiner_0"]["turn"] == 2 and final["critic_0"]["turn"] == 1


def test_team_reward_is_shared_at_the_end():
    env = make(rounds=1, team_reward=True)
    seen = play(
        env,
        {
            "solver_0": ["\\boxed{4}"],
            "critic_0": ["Verdict: incorrect"],
            "refiner_0": ["\\boxed{5}"],
        },
    )
    final_rewards = {agent: reward for agent, reward, obs, _ in seen if obs == "done"}
    assert final_rewards == {"solver_0": 1.0, "critic_0": 1.0, "refiner_0": 1.0}
    mid = [reward for agent, reward, obs, _ in seen if obs != "done"]
    assert mid == [0.0, 0.0, 0.0]


def test_stop_on_accept_ends_early():
    env = make(rounds=3, stop_on_accept=True, wrapped=False)
    env.reset(options={"problem": PROBLEM})
    env.step("\\boxed{5}")
    env.step("All good. Verdict: correct")
    assert all(env.terminations.values()) and len(env.turns) == 2
    assert env.rewards["critic_0"] == 1.0


@pytest.mark.parametrize(
    ("solver", "critic", "refiner", "verdict_reward", "outcome_reward"),
    [
        ("\\boxed{4}", "Verdict: incorrect", "\\boxed{5}", 1.0, 1.0),  # right call, fixed
        ("\\boxed{4}", "Verdict: incorrect", "\\boxed{6}", 1.0, 0.0),  # right call, still wrong
        ("\\boxed{4}", "Verdict: correct", "\\boxed{5}", 0.0, 1.0),  # wrong call, fixed anyway
        ("\\boxed{5}", "Verdict: incorrect", "\\boxed{7}", 0.0, 0.0),  # broke a right answer
    ],
)
def test_critic_reward_verdict_or_outcome(solver, critic, refiner, verdict_reward, outcome_reward):
    paid = {}
    for mode in ("verdict", "balanced", "outcome"):
        env = make(rounds=1, critic_reward=mode, wrapped=False)
        env.reset(options={"problem": PROBLEM})
        env.step(solver)
        env.step(critic)
        at_critic_turn = env.rewards["critic_0"]
        env.step(refiner)
        paid[mode] = env._cumulative_rewards["critic_0"]  # since the critic's own turn
        # The critic's info still grades its verdict, whatever pays it.
        assert env.infos["critic_0"]["correct"] is (verdict_reward == 1.0)
        # The outcome is paid when the refiner answers, never at the critic's own turn.
        if mode == "outcome":
            assert at_critic_turn == 0.0
        # Only "balanced" asks the trainer to weight the verdict by its class.
        assert env.infos["critic_0"].get("balance_reviews", False) is (mode == "balanced")
    assert paid == {
        "verdict": verdict_reward,
        "balanced": verdict_reward,
        "outcome": outcome_reward,
    }


def test_outcome_critic_that_accepts_is_paid_by_the_accepted_answer():
    for answer, expected in (("\\boxed{5}", 1.0), ("\\boxed{4}", 0.0)):
        env = make(rounds=2, stop_on_accept=True, critic_reward="outcome", wrapped=False)
        env.reset(options={"problem": PROBLEM})
        env.step(answer)
        env.step("Verdict: correct")
        assert all(env.terminations.values()) and env.rewards["critic_0"] == expected


def test_audit_pays_nothing_for_a_false_equation_of_an_audited_role():
    solver = "2 + 3 = 6, so \\boxed{5}"  # right answer, false arithmetic
    critic = "2 + 3 = 5. 5 - 5 = 1.\nVerdict: correct"  # right verdict, false arithmetic
    refiner = "2 + 3 = 5. \\boxed{5}"
    for audit in ((), ("critic",), ("solver", "critic", "refiner")):
        env = make(rounds=1, audit=audit, wrapped=False)
        env.reset(options={"problem": PROBLEM})
        paid = {}
        replies = (solver, critic, refiner)
        for agent, text in zip(("solver_0", "critic_0", "refiner_0"), replies, strict=True):
            env.step(text)
            paid[agent] = env.rewards[agent]
        assert paid == {
            "solver_0": 0.0 if "solver" in audit else 1.0,
            "critic_0": 0.0 if "critic" in audit else 1.0,
            "refiner_0": 1.0,
        }
        # Counted whether audited or not; the infos still grade the answer and the verdict.
        assert env.infos["solver_0"]["false_equations"] == 1
        assert env.infos["critic_0"]["false_equations"] == 1
        assert env.infos["refiner_0"]["false_equations"] == 0
        assert env.infos["solver_0"]["correct"] and env.infos["critic_0"]["correct"]
        failed = {a for a in env.infos if env.infos[a].get("audit_failed")}
        assert failed == {f"{r}_0" for r in audit if r != "refiner"}


def test_critic_without_verdict_gets_zero_and_parse_error():
    env = make(rounds=1, wrapped=False)
    env.reset(options={"problem": PROBLEM})
    env.step("\\boxed{5}")
    env.step("hmm, not sure")
    assert env.rewards["critic_0"] == 0.0 and env.infos["critic_0"]["parse_error"] is True


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Verdict: correct", True),
        ("verdict - INCORRECT.", False),
        ("**Verdict:** incorrect", False),  # markdown bold around the label
        ("Verdict: correct ... on second thought Verdict: incorrect", False),  # last one counts
        ("\\boxed{correct}", True),
        # Without a verdict line, a verdict said in words (a pretrained instruct model's reply to
        # the "instruct" prompts' one-word question): the reply is the word, or it says it.
        ("Correct.", True),
        ("**Incorrect**\nThe sum is 7.", False),
        ("The proposed solution is incorrect.", False),
        ("The proposed solution is: incorrect.", False),
        ("The answer is not correct: 3 + 4 is 7.", False),
        ("The answer is correct", True),
        ("The final answer is correct. Verdict: incorrect", False),  # the verdict line decides
        ("Correct the second step: 3 + 4 is 7.", None),  # a verb, not a verdict
        ("the answer is 7", None),
        ("", None),
    ],
)
def test_parse_verdict(text, expected):
    assert parse_verdict(text) is expected


def test_non_string_action_raises_type_error_naming_agent():
    env = make()
    env.reset(seed=0)
    with pytest.raises(TypeError, match=r"'solver_0'.*got list"):
        env.step(["a"])


def test_step_before_reset_and_after_end_raise():
    env = make(rounds=1)
    with pytest.raises(Exception, match="reset"):
        env.step("x")
    raw = make(rounds=1, wrapped=False)
    raw.reset(seed=0)
    for _ in range(3):
        raw.step("\\boxed{1}")
    for _ in range(3):
        raw.step(None)
    assert raw.agents == []
    with pytest.raises(RuntimeError, match="reset"):
        raw.step("again")


def test_dead_agent_must_step_none():
    raw = make(rounds=1, wrapped=False)
    raw.reset(seed=0)
    for _ in range(3):
        raw.step("\\boxed{1}")
    with pytest.raises(ValueError, match="only valid action is None"):
        raw.step("late reply")


def test_render_ansi_returns_transcript():
    env = make(rounds=1, render_mode="ansi")
    play(env, {"solver_0": ["S"], "critic_0": ["C"], "refiner_0": ["R"]})
    assert env.render() == "[solver_0]\nS\n\n[critic_0]\nC\n\n[refiner_0]\nR"
    with pytest.raises(ValueError, match="render_mode"):
        make(render_mode="human")


def test_huge_action_is_clipped_and_flagged():
    env = make(rounds=1, wrapped=False, max_action_chars=1000)
    env.reset(seed=0, options={"problem": PROBLEM})
    env.step("x" * 1_000_000 + " \\boxed{5}")
    assert env.infos["solver_0"]["action_clipped"] is True and env.rewards["solver_0"] == 1.0
    assert len(env.observe("critic_0")["prompt"]) < 2000


@pytest.mark.parametrize(
    "kwargs",
    [{"rounds": 0}, {"rounds": "2"}, {"max_action_chars": 3}, {"critic_reward": "votes"}],
)
def test_bad_arguments_raise(kwargs):
    with pytest.raises(ValueError):
        make(**kwargs)


@pytest.mark.parametrize("audit", ["critic", ("judge",)])
def test_bad_audit_is_refused_with_its_reason(audit):
    with pytest.raises(ValueError, match="sequence of roles"):
        make(audit=audit)


def test_audit_also_gates_the_outcome_and_the_team_reward():
    sloppy_critic = "5 - 5 = 1.\nVerdict: incorrect"
    replies = ("\\boxed{4}", sloppy_critic, "\\boxed{5}")  # wrong, flagged, fixed
    for audit in ((), ("critic",)):
        env = make(rounds=1, critic_reward="outcome", audit=audit, wrapped=False)
        env.reset(options={"problem": PROBLEM})
        for text in replies:
            env.step(text)
        # The fix its feedback led to pays the critic only when its check holds.
        assert env._cumulative_rewards["critic_0"] == (0.0 if audit else 1.0)
        env = make(rounds=1, team_reward=True, audit=audit, wrapped=False)
        env.reset(options={"problem": PROBLEM})
        for text in replies:
            env.step(text)
        assert env.rewards == {
            "solver_0": 1.0,
            "critic_0": 0.0 if audit else 1.0,
            "refiner_0": 1.0,
        }


@pytest.mark.parametrize(
    ("solver", "refiner", "score_pay", "improvement_pay"),
    [
        ("\\boxed{4}", "\\boxed{5}", 1.0, 2.0),  # a fix
        ("\\boxed{5}", "\\boxed{5}", 1.0, 1.0),  # a right answer kept
        ("\\boxed{4}", "\\boxed{6}", 0.0, 0.0),  # a wrong answer left wrong
        ("\\boxed{5}", "\\boxed{7}", 0.0, -1.0),  # a break
    ],
)
def test_improvement_shaped_refiner_pays_the_change_it_makes(
    solver, refiner, score_pay, improvement_pay
):
    for mode, bonus, expected in (
        ("score", 1.0, score_pay),
        ("improvement", 1.0, improvement_pay),
        # bonus 3: a fix 4, a kept right answer 1, a break -3
        ("improvement", 3.0, score_pay + 3.0 * (improvement_pay - score_pay)),
    ):
        env = make(rounds=1, revision_reward=mode, improvement_bonus=bonus, per_step_rewards=True)
        env.reset(options={"problem": PROBLEM})
        env.step(solver)
        assert env.rewards["solver_0"] == (1.0 if solver == "\\boxed{5}" else 0.0)  # unshaped
        env.step("Verdict: incorrect")
        env.step(refiner)
        assert env.rewards["refiner_0"] == expected, (mode, bonus)
        change = env.infos["refiner_0"]["improvement"]
        assert change == (1.0 if refiner == "\\boxed{5}" else 0.0) - (solver == "\\boxed{5}")


def test_improvement_refiner_second_round_is_measured_against_the_first_revision():
    env = make(rounds=2, revision_reward="improvement", per_step_rewards=True)
    env.reset(options={"problem": PROBLEM})
    refiner_pay = []
    for text in (
        "\\boxed{4}",
        "Verdict: incorrect",
        "\\boxed{5}",
        "Verdict: incorrect",
        "\\boxed{9}",
    ):
        acting = env.agent_selection
        env.step(text)
        if acting == "refiner_0":
            refiner_pay.append(env.rewards["refiner_0"])
    assert refiner_pay == [2.0, -1.0]  # fixed 4 -> 5, then broke 5 -> 9


@pytest.mark.parametrize(
    ("solver", "critic", "refiner", "pay"),
    [
        ("\\boxed{4}", "Verdict: incorrect", "\\boxed{5}", 2.0),  # right call, led to a fix
        ("\\boxed{4}", "Verdict: incorrect", "\\boxed{6}", 1.0),  # right call, not acted on
        ("\\boxed{5}", "Verdict: correct", "\\boxed{5}", 1.0),  # kept a right answer right
        ("\\boxed{4}", "Verdict: correct", "\\boxed{4}", 0.0),  # let a wrong answer stand
        ("\\boxed{5}", "Verdict: incorrect", "\\boxed{7}", -1.0),  # wrong call, led to a break
        ("\\boxed{5}", "Verdict: incorrect", "\\boxed{5}", 0.0),  # wrong call, ignored
    ],
)
def test_counterfactual_critic_is_paid_its_verdict_and_what_it_changed(
    solver, critic, refiner, pay
):
    env = make(rounds=1, critic_reward="counterfactual", per_step_rewards=True)
    assert env.unwrapped.immediate_rewards is False  # part of the pay comes a turn later
    env.reset(options={"problem": PROBLEM})
    env.step(solver)
    env.step(critic)
    verdict_part = env.rewards["critic_0"]
    assert verdict_part == float(env.infos["critic_0"]["correct"])
    env.step(refiner)
    assert verdict_part + env.rewards["critic_0"] == pay
    env = make(rounds=1, critic_reward="counterfactual", counterfactual_weight=0.5, wrapped=False)
    env.reset(options={"problem": PROBLEM})
    for text in (solver, critic, refiner):
        env.step(text)
    assert env._cumulative_rewards["critic_0"] == verdict_part + 0.5 * (pay - verdict_part)


def test_audit_keeps_the_cost_of_a_break_but_none_of_the_pay():
    sloppy = "5 - 5 = 1.\nVerdict: incorrect"  # a false check
    for refiner, expected in (("\\boxed{7}", -1.0), ("\\boxed{5}", 0.0)):
        env = make(
            rounds=1,
            critic_reward="counterfactual",
            revision_reward="improvement",
            audit=("critic", "refiner"),
            per_step_rewards=True,
        )
        env.reset(options={"problem": PROBLEM})
        env.step("\\boxed{5}")
        env.step(sloppy)
        assert env.rewards["critic_0"] == 0.0 and env.infos["critic_0"]["audit_failed"]
        env.step(refiner)
        assert env.rewards["critic_0"] == expected  # the break it caused still costs
    env = make(rounds=1, revision_reward="improvement", audit=("refiner",), per_step_rewards=True)
    env.reset(options={"problem": PROBLEM})
    env.step("\\boxed{5}")
    env.step("Verdict: incorrect")
    env.step("5 + 1 = 7, so \\boxed{7}")  # a break with a false equation: still -1
    assert env.rewards["refiner_0"] == -1.0 and env.infos["refiner_0"]["audit_failed"]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"revision_reward": "delta"}, ValueError, "revision_reward must be one of"),
        ({"improvement_bonus": -1.0}, ValueError, "improvement_bonus must be a finite"),
        ({"improvement_bonus": float("nan")}, ValueError, "improvement_bonus"),
        ({"improvement_bonus": "2"}, TypeError, "improvement_bonus must be a number"),
        ({"counterfactual_weight": float("inf")}, ValueError, "counterfactual_weight"),
        ({"critic_reward": "counterfactuals"}, ValueError, "counterfactual"),
    ],
)
def test_bad_credit_options_name_what_was_expected(kwargs, error, match):
    with pytest.raises(error, match=match):
        make(**kwargs)


def test_resolve_refiner_solves_afresh_after_a_rejection_only():
    env = make(rounds=2, refiner_mode="resolve", wrapped=False, per_step_rewards=True)
    env.reset(options={"problem": PROBLEM})
    solver_view = env.observe("solver_0")
    env.step("\\boxed{4}")
    env.step("4 is one short.\nVerdict: incorrect")
    fresh = env.observe("refiner_0")
    # The solver's instruction and prompt: neither the rejected answer nor the critic's check.
    assert fresh["prompt"] == solver_view["prompt"]
    assert fresh["instruction"] == solver_view["instruction"] and fresh["role"] == "refiner"
    env.step("\\boxed{5}")
    assert env.infos["refiner_0"]["improvement"] == 1.0
    env.step("Verdict: correct")
    kept = env.observe("refiner_0")  # after an acceptance: the usual revise prompt
    assert "\\boxed{5}" in kept["prompt"] and "Verdict: correct" in kept["prompt"]
    revise = make(rounds=1, wrapped=False)
    revise.reset(options={"problem": PROBLEM})
    revise.step("\\boxed{4}")
    revise.step("Verdict: incorrect")
    assert "\\boxed{4}" in revise.observe("refiner_0")["prompt"]  # the default revises
    with pytest.raises(ValueError, match="refiner_mode must be one of"):
        make(refiner_mode="retry")


def test_the_agents_are_named_from_their_roles_by_the_options():
    """The env names its agents once, through its options (``<role>_0``), as its facts do."""
    from envs import reflection
    from envs.options import ReflectionOptions

    named = (reflection.SOLVER, reflection.CRITIC, reflection.REFINER)
    assert named == ("solver_0", "critic_0", "refiner_0")
    assert named == ReflectionOptions().facts().agents
    assert tuple(envs.make("math/reflection-v0", wrapped=False).possible_agents) == named
