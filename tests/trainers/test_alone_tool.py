"""The tool team against the same model alone WITH the same interpreter (math/code-v0),
compute-matched and paired, end to end on CPU with scripted policies."""

from __future__ import annotations

import pytest

import envs
from agents import RoleMap, ScriptedPolicy
from envs.tasks.problems import ProblemSet
from tests.trainers.helpers import Counted
from trainers.evaluation.alone import tool_baseline
from trainers.evaluation.config import EvalConfig


class PlannedProgrammer:
    """An executor whose program prints the right answer when it is shown a plan (in the team)
    and a wrong one without (alone with the interpreter), except on level 1 problems, which it
    gets right either way."""

    def __init__(self, answers, easy):
        self.answers, self.easy = answers, easy
        self.prompts = []

    def act(self, observations):
        out = []
        for obs in observations:
            self.prompts.append(obs["prompt"])
            right = "Plan:" in obs["prompt"] or obs["question"] in self.easy
            value = self.answers[obs["question"]] if right else "-1"
            out.append(f"Here it is.\n```python\nprint({value!r})\n```")
        return out


def _config(**kwargs):
    settings = {
        "env_id": "math/tool-v0",
        "problems": ProblemSet("arithmetic", levels=[1, 2], count=4),
        "env_options": {"rounds": 2, "sandbox": {"timeout_s": 2.0, "cpu_s": 1}},
        "intervals": False,
        "num_envs": 8,
    }
    return EvalConfig.of(**{**settings, **kwargs})


def _evaluate(config):
    from trainers.evaluation.evaluate import evaluate

    source = envs.make(
        "math/code-v0", **config.protocol.env_kwargs("math/code-v0")
    ).unwrapped.task.source
    answers = {p["question"]: p["answer"] for p in source}
    easy = {p["question"] for p in source if "/d1/" in p["id"]}
    executor = PlannedProgrammer(answers, easy)
    policies = RoleMap(
        {
            "analyzer": Counted(ScriptedPolicy(["Compute it."]), 4),
            "executor": Counted(executor, 4),
            "verifier": Counted(ScriptedPolicy(["Verdict: correct"]), 10),
            "*": Counted(ScriptedPolicy(["\\boxed{-1}"]), 4),  # the model alone, no tool
        }
    )
    return evaluate(config, policies), executor


def test_only_a_team_that_names_a_tool_baseline_gets_one():
    assert tool_baseline("math/tool-v0") == "math/code-v0"
    for env_id in ("math/solve-v0", "math/reflection-v0", "math/code-v0"):
        assert tool_baseline(env_id) is None


def test_the_baseline_keeps_the_tools_options_and_drops_the_teams_own():
    config = _config()
    kwargs = config.protocol.env_kwargs("math/code-v0")
    assert kwargs["sandbox"] == {"timeout_s": 2.0, "cpu_s": 1} and "rounds" not in kwargs
    assert "sandbox" not in config.protocol.env_kwargs("math/solve-v0")
    assert config.protocol.env_kwargs("math/tool-v0")["rounds"] == 2


def test_evaluate_compares_the_tool_team_with_the_model_alone_with_the_interpreter():
    """The team: a plan, a right program, a verifier that accepts (vote and final right). The
    model alone with the interpreter: the same executor without a plan, right only on level 1.
    The team spends 4 + 2 x (4 + 10) = 32 tokens, a program 4: matched in generations at k = 5,
    in tokens at k = 8, so code-v0 gets 8 samples per problem."""
    from trainers.evaluation.report.tables import markdown_report

    results, executor = _evaluate(_config())
    c = results["compare_tool"]
    assert c["alone_env"] == "math/code-v0" and c["alone_prompt"] == "math/code-v0 (executor_0)"
    assert c["team_generations"] == 5 and c["matched_k"] == 5 and c["tokens_k"] == 8
    assert c["alone_samples"] == 8 and c["ks"] == [1, 3, 5, 8]
    assert results["single_agent_tool"]["episodes"] == 4 * 8
    assert c["tokens_per_episode"]["team"] == 32.0 and c["alone_tokens_per_sample"] == 4.0
    levels = {pid: row["level"] for pid, row in results["per_problem"].items()}
    easy_share = sum(level == 1 for level in levels.values()) / len(levels)
    f = c["figures"]
    assert f["team/vote"] == f["team/final"] == 1.0
    assert f["alone/pass@1"] == f["alone/maj@5"] == f["alone/maj@8"] == pytest.approx(easy_share)
    diff = c["paired"]["team/vote - alone/maj@5"]
    assert diff["diff"] == pytest.approx(1 - easy_share) and diff["problems"] == 4
    assert c["paired"]["team/final - alone/maj@8"]["diff"] == pytest.approx(1 - easy_share)
    assert c["levels"]["1"]["team/vote - alone/maj@5"]["diff"] == 0.0
    assert c["levels"]["2"]["team/final - alone/maj@8"]["diff"] == 1.0
    assert c["levels"]["2"]["alone/pass@1"] == 0.0
    # the model alone without a tool stays, beside it
    assert results["compare"]["alone_prompt"].startswith("math/solve-v0")
    assert results["compare"]["figures"]["alone/maj@5"] == 0.0
    # per problem, each side under its own name
    some = next(iter(results["per_problem"].values()))
    assert {"alone/maj@5", "alone_tool/maj@5", "alone_tool/pass@1"} <= set(some)
    # the executor alone saw tool-v0's executor prompt less the plan
    alone_prompts = [p for p in executor.prompts if "Plan:" not in p]
    assert len(alone_prompts) == 4 * 8
    assert all(p.endswith("\n\nWrite the Python program.") for p in alone_prompts)
    report = markdown_report(results)
    assert "| team - alone (paired by problem) |" in report
    assert "| team - alone + tool (paired by problem) | all | level 1 | level 2 |" in report
    assert "against the model alone with the tool (math/code-v0)" in report
    row = next(line for line in report.splitlines() if "alone + tool: maj@5 (matched" in line)
    assert row.startswith("| team: majority vote - alone + tool: maj@5 (matched, baseline) | +")
    assert "| alone + tool: pass@1 (mean of its samples) |" in report
    assert report.index("team - alone (paired") < report.index("team - alone + tool (paired")


def test_no_tool_baseline_without_the_comparison():
    results, _ = _evaluate(
        _config(compare=False, problems=ProblemSet("arithmetic", levels=[1, 2], count=2))
    )
    assert "compare_tool" not in results and "compare" not in results
