"""math/tool-v0: plans, programs run in the sandbox, verdicts; and answer checks by execution."""

from __future__ import annotations

import random
import re
import time

import pytest

import envs
from agents.scripted import ScriptedPolicy
from envs import program, tool
from envs.core import clip
from envs.program import extract_code
from envs.sandbox import SandboxConfig
from envs.tool import gsm8k_program, validate_by_execution

PROBLEM = {"id": "p/1", "question": "Ann has 2 pens and buys 3 more. How many pens?", "answer": "5"}
FAST = {"timeout_s": 2.0, "cpu_s": 1, "memory_mb": 256, "max_output_bytes": 8192}


def make(**kwargs):
    return envs.make("math/tool-v0", **{"sandbox": FAST, **kwargs})


def play(env, replies, problem=PROBLEM):
    """Step an episode with per-agent reply lists; return the acting order and rewards."""
    env.reset(seed=0, options={"problem": problem})
    order, rewards = [], []
    while env.agents and not all(env.terminations.values()):
        agent = env.agent_selection
        order.append(agent)
        env.step(replies[agent].pop(0))
        rewards.append(dict(env.rewards))
    return order, rewards


def test_turn_order_rewards_and_execution_infos():
    env = make(rounds=2, wrapped=False, per_step_rewards=True)  # each turn graded as it is taken
    replies = {
        "analyzer_0": ["Start with 2 pens, add the 3 bought."],
        "executor_0": ["```python\nprint(2 + 3 + 1)\n```", "Fixed:\n```python\nprint(2 + 3)\n```"],
        "verifier_0": ["6 is one too many. Verdict: incorrect", "Verdict: correct"],
    }
    order, rewards = play(env, replies)
    assert order == env.schedule == ["analyzer_0"] + ["executor_0", "verifier_0"] * 2
    # executor wrong (0), verifier right to reject (1), executor right (1), verifier right (1)
    assert [r[a] for r, a in zip(rewards, order, strict=True)] == [0.0, 0.0, 1.0, 1.0, 1.0]
    assert rewards[-1]["analyzer_0"] == 1.0  # the final answer's score, at the end
    info = env.infos["executor_0"]
    assert info["extracted"] == "5" and info["answer_source"] == "output"
    assert info["exec_exit_code"] == 0 and info["code_block"] is True
    assert info["exec_timed_out"] is False and info["exec_output_truncated"] is False
    assert info["exec_violation"] is None and info["round"] == 1
    assert env.infos["verifier_0"]["reviewed_correct"] is True
    assert all(env.infos[a]["final_correct"] for a in env.agents)


def test_observations_show_plan_program_output_and_its_answer_but_not_the_reference():
    env = make(rounds=1)
    env.reset(options={"problem": PROBLEM})
    env.step("Add the numbers.")
    executor_obs = env.observe("executor_0")
    assert "Add the numbers." in executor_obs["prompt"] and executor_obs["role"] == "executor"
    assert "```python" in executor_obs["instruction"]
    env.step("```python\nx = 2 + 3\nprint('result:', x)\n```")
    verifier_obs = env.observe("verifier_0")
    assert "x = 2 + 3" in verifier_obs["prompt"] and "exit status 0" in verifier_obs["prompt"]
    assert "result: 5" in verifier_obs["prompt"] and "Verdict" in verifier_obs["instruction"]
    assert "[execution]" in verifier_obs["transcript"]
    # the answer the task scores, in the form the other roles read answers in
    assert "Its answer: \\boxed{5}" in verifier_obs["prompt"]
    env.reset(options={"problem": {**PROBLEM, "answer": "6"}})
    env.step("Add the numbers.")
    env.step("```python\nprint(2 + 3)\n```")
    assert "Its answer: \\boxed{5}" in env.observe("verifier_0")["prompt"]
    assert "6" not in env.observe("verifier_0")["prompt"].split("Its output:")[1]
    # a huge answer (model output is untrusted) is clipped, like the run shown above it
    env.reset(options={"problem": PROBLEM})
    env.step("Add the numbers.")
    env.step("```python\nprint('\\\\boxed{' + '7' * 5000 + '}')\n```")
    assert len(env.infos["executor_0"]["extracted"]) > tool.ANSWER_CHARS
    shown = env.observe("verifier_0")["prompt"].split("Its answer: ")[1]
    clipped = clip(env.infos["executor_0"]["extracted"], tool.ANSWER_CHARS)
    assert len(clipped) == tool.ANSWER_CHARS and shown.startswith("\\boxed{" + clipped + "}")
    assert len(env.observe("verifier_0")["prompt"]) < 3000


def test_failed_programs_are_contained_and_reported():
    env = make(rounds=3, wrapped=False, sandbox={**FAST, "timeout_s": 1.0})
    env.reset(options={"problem": PROBLEM})
    env.step("plan")
    env.step("```python\nwhile True:\n    pass\n```")
    info = env.infos["executor_0"]
    assert info["exec_timed_out"] or info["exec_killed_reason"] == "cpu limit"
    assert env.rewards["executor_0"] == 0.0 and info["answer_source"] is None
    assert "killed" in env.observe("verifier_0")["prompt"]
    assert "Its answer: none" in env.observe("verifier_0")["prompt"]
    env.step("Verdict: incorrect")
    env.step("```python\nimport socket\nsocket.socket().connect(('127.0.0.1', 9))\n```")
    assert env.infos["executor_0"]["exec_violation"].startswith("blocked: socket")
    assert "stopped by the sandbox" in env.observe("executor_0")["prompt"]
    env.step("Verdict: incorrect")
    # not code: the program fails, the answer stated in the text still counts
    env.step("Two plus three is five, so the answer is \\boxed{5}.")
    info = env.infos["executor_0"]
    assert info["answer_source"] == "text" and info["correct"] and info["exec_exit_code"] == 1


def test_stop_on_accept_and_team_reward():
    env = make(rounds=3, stop_on_accept=True, team_reward=True, wrapped=False)
    env.reset(options={"problem": PROBLEM})
    env.step("plan")
    assert env.rewards == dict.fromkeys(env.agents, 0.0)
    env.step("print(5)")
    env.step("Verdict: correct")
    assert all(env.terminations.values()) and len(env.turns) == 3
    assert env.rewards == dict.fromkeys(env.agents, 1.0)


def test_identical_programs_run_once(monkeypatch):
    calls = []
    real = program.run_code

    def counting(code, config):
        calls.append(code)
        return real(code, config)

    monkeypatch.setattr(program, "run_code", counting)
    env = make(rounds=2, wrapped=False)
    env.reset(options={"problem": PROBLEM})
    for text in ("plan", "print(5)", "Verdict: incorrect", "print(5)", "Verdict: correct"):
        env.step(text)
    assert calls == ["print(5)"]
    assert make(cache_size=0, wrapped=False).cache_size == 0


def test_run_pending_runs_the_programs_of_many_copies_at_once(monkeypatch):
    copies = [make(rounds=1, wrapped=False) for _ in range(4)]
    for env in copies:
        env.reset(options={"problem": PROBLEM})
        env.step("plan")
    replies = [f"```python\nimport time\ntime.sleep(0.6)\nprint({n})\n```" for n in (5, 5, 6, 7)]
    steps = list(zip(copies, replies, strict=True))
    steps.append((make(wrapped=False), "print(1)"))  # not reset: no executor turn, passed over
    began = time.monotonic()
    assert program.run_pending(steps, max_workers=4) == 3  # the two identical programs run once
    assert time.monotonic() - began < 1.8  # in parallel: 3 x 0.6 s one after another
    assert program.run_pending(steps[:4]) == 0  # already run ahead

    def no_run(code, config):
        raise AssertionError("the step ran its program again")

    monkeypatch.setattr(program, "run_code", no_run)
    for env, reply in zip(copies, replies, strict=True):
        env.step(reply)
    assert [env.infos["executor_0"]["extracted"] for env in copies] == ["5", "5", "6", "7"]
    assert [env.rewards["executor_0"] for env in copies] == [1.0, 1.0, 0.0, 0.0]


@pytest.mark.parametrize(
    ("reply", "code", "fenced"),
    [
        ("```python\nprint(1)\n```", "print(1)\n", True),
        ("Plan.\n```py\na = 1\n```\nthen\n```python\nprint(a)\n```", "a = 1\n\nprint(a)\n", True),
        ("```\nprint(2)\n```", "print(2)\n", True),  # unlabelled block
        ("```text\nnot code\n```\n```python\nprint(3)\n```", "print(3)\n", True),
        ("Here:\n```python\nprint(4)", "print(4)", True),  # cut off before the closing fence
        ("print(5)", "print(5)", False),  # the whole reply
        ("", "", False),
    ],
)
def test_extract_code(reply, code, fenced):
    assert extract_code(reply)[:2] == (code, fenced)


def test_bad_arguments():
    with pytest.raises(ValueError, match="rounds"):
        envs.make("math/tool-v0", rounds=0)
    with pytest.raises(TypeError, match="sandbox must be"):
        envs.make("math/tool-v0", sandbox=5)
    with pytest.raises(ValueError, match="timeout_s"):
        envs.make("math/tool-v0", sandbox={"timeout_s": -1})
    with pytest.raises(TypeError, match=r"'analyzer_0'.*got int"):
        env = envs.make("math/tool-v0")
        env.reset(seed=0)
        env.step(3)


# ---------------------------------------------------------------- scripted episodes

STEPS = [
    (r"(?:buys|finds) (\d+) more|(?:buys|finds) (\d+)|gives \w+ (\d+)", "+"),
    (r"gives away (\d+)|loses (\d+)|uses (\d+)", "-"),
    (r"becomes (\d+) times as large", "*"),
    (r"shares the \w+ equally among (\d+) boxes", "//"),
]


def program_for(question: str) -> str:
    """A program computing an `arithmetic` word problem from its sentences (no answer lookup)."""
    sentences = [s for s in re.split(r"(?<=\.)\s+", question) if s]
    start = re.search(r"has (\d+)", sentences[0]).group(1)
    lines = [f"n = {start}"]
    for sentence in sentences[1:]:
        if "doubles" in sentence or "triples" in sentence:
            lines.append(f"n *= {2 if 'doubles' in sentence else 3}")
            continue
        for pattern, op in STEPS:
            match = re.search(pattern, sentence)
            if match:
                lines.append(f"n {op}= {next(g for g in match.groups() if g)}")
                break
    return "```python\n" + "\n".join(lines) + "\nprint(n)\n```"


def verifier_reply(obs):
    return "Verdict: correct" if "exit status 0" in obs["prompt"] else "Verdict: incorrect"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_scripted_team_reaches_reward_one_by_running_code(seed):
    """Scripted agents that never see the answer: the executor's program computes it."""
    policies = {
        "analyzer_0": ScriptedPolicy(["Track the count through each sentence."]),
        "executor_0": ScriptedPolicy(lambda obs: program_for(obs["question"])),
        "verifier_0": ScriptedPolicy(verifier_reply),
    }
    env = make(rounds=1, task_kwargs={"difficulty": 3})
    env.reset(seed=seed)
    returns, infos = dict.fromkeys(env.possible_agents, 0.0), {}
    for agent in env.agent_iter():
        obs, reward, terminated, truncated, infos[agent] = env.last()
        returns[agent] += reward
        env.step(None if terminated or truncated else policies[agent].act([obs])[0])
    raw = env.unwrapped
    assert returns == {"analyzer_0": 1.0, "executor_0": 1.0, "verifier_0": 1.0}, raw.render()
    assert infos["executor_0"]["answer_source"] == "output"
    assert infos["executor_0"]["exec_exit_code"] == 0 and infos["executor_0"]["final_correct"]
    assert "print(n)" in raw.code and "n = " in raw.code


# ---------------------------------------------------------------- GSM8K answers by execution

NAMES = ["Ann", "Ben", "Cleo", "Dev"]


def gsm8k_row(rng: random.Random, wrong: bool = False) -> dict[str, str]:
    """A GSM8K-style row: a question, a solution with calculator annotations, '#### answer'."""
    name, price, count, paid = rng.choice(NAMES), rng.randint(2, 9), rng.randint(2, 9), 100
    cost = price * count
    change = paid - cost
    solution = (
        f"{name} pays {count} * {price} = $<<{count}*{price}={cost}>>{cost} for the apples.\n"
        f"The change is {paid} - {cost} = $<<{paid}-{cost}={change}>>{change}.\n"
        f"#### {change + (1 if wrong else 0)}"
    )
    question = f"{name} buys {count} apples at ${price} each and pays with ${paid}. Change?"
    return {"question": question, "answer": solution}


def test_gsm8k_answers_are_validated_by_execution():
    rng = random.Random(0)
    rows = [gsm8k_row(rng) for _ in range(4)] + [gsm8k_row(rng, wrong=True)]
    verdicts = []
    for row in rows:
        final = row["answer"].rsplit("####", 1)[1].strip()
        verdict, result = validate_by_execution(gsm8k_program(row["answer"]), final)
        assert result.ok, result.stderr
        verdicts.append(verdict.correct)
    assert verdicts == [True, True, True, True, False]  # the corrupted row is caught
    failing, result = validate_by_execution("print(1/0)", "3")
    assert failing.score == 0.0 and "no answer" in failing.reason and result.exit_code == 1
    with pytest.raises(ValueError, match="calculator annotation"):
        gsm8k_program("No calculations here.\n#### 4")


def test_validate_by_execution_reads_boxed_output_and_custom_config():
    verdict, result = validate_by_execution(
        "print('so the answer is \\\\boxed{12}')", "12", "math", SandboxConfig(**FAST)
    )
    assert verdict.correct and result.answer() == "12"


def test_oracle_program_policy_reaches_reward_one():
    """`OraclePolicy` with a code template: the executor's program prints the looked-up answer."""
    from agents.scripted import OraclePolicy

    executor = OraclePolicy.from_answers(
        {PROBLEM["question"]: PROBLEM["answer"]}, template="```python\nprint({answer!r})\n```"
    )
    env = make(rounds=1, wrapped=False)
    env.reset(options={"problem": PROBLEM})
    env.step("plan")
    env.step(executor.act([env.observe("executor_0")])[0])
    assert env.rewards["executor_0"] == 1.0 and env.infos["executor_0"]["answer_source"] == "output"
    env.step("Verdict: correct")
    assert env._cumulative_rewards == dict.fromkeys(env.possible_agents, 1.0)


def test_improvement_executor_and_counterfactual_verifier_pay_the_change():
    env = make(
        rounds=2,
        wrapped=False,
        per_step_rewards=True,
        revision_reward="improvement",
        verifier_reward="counterfactual",
    )
    replies = {
        "analyzer_0": ["Add the pens."],
        "executor_0": ["```python\nprint(2 + 3)\n```", "```python\nprint(2 + 3 + 1)\n```"],
        "verifier_0": ["Verdict: incorrect", "Verdict: incorrect"],
    }
    order, rewards = play(env, replies)
    paid = [r[a] for r, a in zip(rewards, order, strict=True)]
    # executor right (1); verifier wrongly rejects (0); executor breaks it (-1) and the verifier
    # bears the break (-1, paid on the executor's step); last verifier right to reject (1)
    assert paid == [0.0, 1.0, 0.0, -1.0, 1.0]
    assert rewards[3]["verifier_0"] == -1.0
    assert env.infos["executor_0"]["improvement"] == -1.0
    with pytest.raises(ValueError, match="verifier_reward must be one of"):
        make(verifier_reward="outcome")


def test_the_agents_are_named_from_their_roles_by_the_options():
    """The env names its agents once, through its options (``<role>_0``), as its facts do; the
    program runner's executor is the same agent (math/code-v0's one agent)."""
    from envs.options import ToolOptions

    named = (tool.ANALYZER, tool.EXECUTOR, tool.VERIFIER)
    assert named == ("analyzer_0", "executor_0", "verifier_0")
    assert named == ToolOptions().facts().agents
    assert program.ProgramRunner.EXECUTOR == tool.EXECUTOR
    assert tuple(envs.make("math/tool-v0", wrapped=False).possible_agents) == named
