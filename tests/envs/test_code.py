"""math/code-v0: one executor alone with the tool env's sandboxed interpreter."""

from __future__ import annotations

import warnings

import pytest

import envs
from envs import code, program
from envs.code import CodeEnv, code_prompt
from envs.options import CodeOptions
from envs.program import DEFAULT_SANDBOX

PROBLEM = {"id": "p/1", "question": "Ann has 2 pens and buys 3 more. How many pens?", "answer": "5"}
FAST = {"timeout_s": 2.0, "cpu_s": 1, "memory_mb": 256, "max_output_bytes": 8192}


def make(**kwargs):
    return envs.make("math/code-v0", **{"sandbox": FAST, "wrapped": False, **kwargs})


def play(reply, problem=PROBLEM, **kwargs):
    env = make(**kwargs)
    env.reset(seed=0, options={"problem": problem})
    env.step(reply)
    return env


def test_a_right_program_earns_the_score_and_ends_the_episode():
    env = play("Count them.\n```python\nprint(2 + 3)\n```")
    info = env.infos["executor_0"]
    assert env.rewards["executor_0"] == 1.0 and env.terminations["executor_0"]
    assert info["extracted"] == "5" and info["correct"] and info["final_correct"]
    assert info["answer_source"] == "output" and info["code_block"] is True
    assert info["exec_exit_code"] == 0 and info["final_answer"] == "5"
    assert "reason" not in info  # the verifier's reason stays in turn_results
    assert "reason" in env.turn_results[0]["infos"]["executor_0"]
    assert env.turns[0][1].endswith("[execution]\nexit status 0\nstdout:\n5")


def test_boxed_output_wins_over_the_last_line_and_a_wrong_program_scores_zero():
    assert play("```python\nprint(r'\\boxed{5}')\nprint('done')\n```").rewards["executor_0"] == 1.0
    env = play("```python\nprint(2 + 4)\n```")
    assert env.rewards["executor_0"] == 0.0 and env.infos["executor_0"]["extracted"] == "6"
    assert env.infos["executor_0"]["final_correct"] is False


def test_a_crashing_program_falls_back_to_the_text_outside_code_blocks():
    env = play("The answer is \\boxed{5}.\n```python\nprint(1 / 0)\n```")
    info = env.infos["executor_0"]
    assert info["exec_exit_code"] == 1 and info["answer_source"] == "text" and info["correct"]
    env = play("```python\nprint(5)\nraise SystemExit(3)\n```")  # printed 5, but exit status 3
    info = env.infos["executor_0"]
    assert info["exec_exit_code"] == 3 and info["answer_source"] is None
    assert env.rewards["executor_0"] == 0.0


@pytest.mark.parametrize(
    ("program", "stopped"),
    [
        ("while True:\n    pass", ("timeout", "cpu limit")),
        ("while True:\n    print('x' * 1000)", ("output limit",)),
        ("print('y' * 10**7)\nprint(5)", ("output limit",)),
        ("import os\nos.system('echo hi')", ("violation",)),
    ],
    ids=["infinite loop", "endless output", "huge output", "shell"],
)
def test_hostile_programs_are_stopped_and_score_zero(program, stopped):
    env = play(f"```python\n{program}\n```", sandbox={**FAST, "timeout_s": 1.0})
    info = env.infos["executor_0"]
    killed = "timeout" if info["exec_timed_out"] else info["exec_killed_reason"]
    assert killed in stopped and info["answer_source"] is None
    assert env.rewards["executor_0"] == 0.0 and info["extracted"] is None
    # the transcript holds the output clipped to max_output_chars, not the flood
    assert len(env.turns[0][1]) < len(program) + 2 * env.options.max_output_chars + 200


@pytest.mark.parametrize(
    "reply",
    [
        "```python\nprint(2 + 3)\n```",
        "```python\nprint(r'\\boxed{5}')\nprint(7)\n```",
        "I think \\boxed{5}.\n```python\nprint(1/0)\n```",
        "print(6)",
        "Here:\n```python\nprint(5)",
        "no program at all",
        "",
    ],
)
def test_the_answer_is_taken_as_the_tool_envs_executor_takes_it(reply):
    team = envs.make("math/tool-v0", sandbox=FAST, wrapped=False, per_step_rewards=True)
    team.reset(seed=0, options={"problem": PROBLEM})
    team.step("a plan")
    team.step(reply)
    alone = play(reply, per_step_rewards=True)
    keys = ("extracted", "correct", "score", "answer_source", "code_block", "exec_exit_code")
    want = {k: team.infos["executor_0"][k] for k in keys}
    assert {k: alone.infos["executor_0"][k] for k in keys} == want


def test_the_prompt_is_the_tool_executors_less_the_plan_and_holds_no_reference():
    env = make()
    env.reset(seed=0, options={"problem": PROBLEM})
    obs = env.observe("executor_0")
    team = envs.make("math/tool-v0", wrapped=False)
    team.reset(seed=0, options={"problem": PROBLEM})
    team.step("PLAN")
    team_obs = team.observe("executor_0")
    assert obs["role"] == "executor" and obs["instruction"] == team_obs["instruction"]
    assert obs["prompt"] == code_prompt(PROBLEM["question"])
    assert team_obs["prompt"] == obs["prompt"].replace(
        "\n\nWrite the Python program.", "\n\nPlan:\nPLAN\n\nWrite the Python program."
    )
    assert "Plan" not in obs["prompt"] and obs["transcript"] == ""


def test_the_same_sandbox_defaults_and_the_team_names_its_counterpart():
    assert make(sandbox=None).sandbox == DEFAULT_SANDBOX == envs.make("math/tool-v0").sandbox
    assert envs.spec("math/tool-v0").facts().alone_with_tool == "math/code-v0"
    assert envs.spec("math/code-v0").options is CodeOptions
    facts = envs.spec("math/code-v0").facts()
    assert facts.agents == ("executor_0",) and facts.answer_roles == ("executor",)
    assert facts.max_turns == 1 == make().max_turns


def test_pettingzoo_api_and_check_env():
    """`check_env` runs PettingZoo's `api_test` and the project's checks (no peeking...)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # as tests/test_conformance.py
        envs.check_env(lambda: envs.make("math/code-v0", sandbox=FAST))


def test_episodes_are_deterministic_for_a_seed():
    def episode(seed):
        env = make(task="unknown")
        env.reset(seed=seed)
        question = env.observe("executor_0")["question"]
        env.step("```python\nprint(12)\n```")
        info = env.infos["executor_0"]
        return question, env.rewards["executor_0"], info["extracted"], info["problem_id"]

    assert episode(3) == episode(3)
    assert len({episode(s)[0] for s in range(6)}) > 1  # seeds pick different problems


def test_run_pending_runs_ahead_and_identical_programs_run_once(monkeypatch):
    copies = [make() for _ in range(3)]
    for env in copies:
        env.reset(seed=0, options={"problem": PROBLEM})
    replies = ["```python\nprint(5)\n```", "```python\nprint(5)\n```", "print(7)"]
    assert CodeEnv.prepare_steps is not None
    assert program.run_pending(list(zip(copies, replies, strict=True))) == 2
    assert code.CodeEnv.pending_program(copies[0], replies[0]) is None  # run ahead already

    def no_run(program, config):
        raise AssertionError("the step ran its program again")

    monkeypatch.setattr(program, "run_code", no_run)
    for env, reply in zip(copies, replies, strict=True):
        env.step(reply)
    assert [env.rewards["executor_0"] for env in copies] == [1.0, 1.0, 0.0]
    assert copies[0].pending_program("print(1)") is None  # the episode is over


def test_bad_arguments_and_actions():
    with pytest.raises(ValueError, match="cache_size"):
        make(cache_size=-1)
    with pytest.raises(TypeError, match="rounds"):
        make(rounds=2)  # not an option of the env alone
    env = envs.make("math/code-v0")
    env.reset(seed=0)
    with pytest.raises(TypeError, match="executor_0"):
        env.step(3)
