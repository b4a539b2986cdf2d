"""The evaluation (`trainers.evaluation.evaluate`) with SmolLM2-135M-Instruct playing every role
of math/reflection-v0 on 2 held-out problems, greedy and short, against the same model alone at
the same compute: every part of the results and of the markdown report is there, and agrees with
the episodes it played."""

from __future__ import annotations

import math

import pytest

from agents import HFPolicy, RoleMap
from envs.tasks.problems import ProblemSet
from tests.real_model.helpers import NAME
from trainers.evaluation.evaluate import EvalConfig, evaluate
from trainers.evaluation.report.tables import markdown_report
from trainers.rollout.records import load_episodes

AGENTS = ("solver_0", "critic_0", "refiner_0")
TOKENS = 24


@pytest.fixture(scope="module")
def evaluated(real_model, tmp_path_factory):
    """The evaluation's results and its saved episodes (the session's model, by its policy)."""
    episodes = tmp_path_factory.mktemp("evaluation") / "episodes.jsonl"
    config = EvalConfig.of(
        env_id="math/reflection-v0",
        problems=ProblemSet("arithmetic", count=2),
        model=NAME,
        greedy=True,
        max_completion_length=TOKENS,
        env_options={"rounds": 1},
        num_envs=4,
        save_episodes=episodes,
    )
    policy = HFPolicy(real_model.model, real_model.tokenizer, config.generation_args())
    return evaluate(config, RoleMap.shared(policy)), load_episodes(episodes)


def test_the_results_hold_the_team_the_model_alone_and_every_agent(evaluated):
    """2 test-split problems, one episode each; per agent its 2 turns, tokens as the episodes
    spent them and a finite reward; the comparison with the model alone matched at the team's 3
    generations; greedy samples alone are one sample repeated (pass@1 = maj@3 = pass@3)."""
    results, episodes = evaluated
    metrics = results["metrics"]
    assert (metrics["problems"], metrics["episodes"], len(episodes)) == (2, 2, 2)
    assert all(e.problem_id.startswith("arithmetic/test/") for e in episodes)
    assert sorted(metrics["agents"]) == sorted(AGENTS)
    for agent, row in metrics["agents"].items():
        turns = [t for e in episodes for t in e.turns if t.agent == agent]
        assert row["turns"] == len(turns) == 2
        spent = sum(len(t.completion_ids) for t in turns) / len(turns)
        assert row["completion_tokens"] == pytest.approx(spent) and spent <= TOKENS
        assert math.isfinite(row["reward"]) and 0.0 <= row["accuracy"] <= 1.0
    spent = sum(len(t.completion_ids) for e in episodes for t in e.turns)
    assert metrics["generated_tokens"] == spent
    assert metrics["tokens_per_episode"] == pytest.approx(spent / 2)
    compare = results["compare"]
    assert compare["team_generations"] == compare["matched_k"] == 3
    assert compare["alone_samples"] == 3 and compare["alone_prompt"] == "math/solve-v0"
    figures = compare["figures"]
    assert {"team/vote", "team/final", "team/first", "alone/pass@1", "alone/maj@3"} <= set(figures)
    assert figures["alone/pass@1"] == figures["alone/maj@3"] == figures["alone/pass@3"]
    assert sorted(results["per_problem"]) == sorted(e.problem_id for e in episodes)
    for row in results["per_problem"].values():
        assert {"team/vote", "team/final", "team/first", "alone/maj@3", "level"} <= set(row)


def test_the_markdown_report_has_every_table_and_a_row_per_agent(evaluated):
    """The report's title, the team-against-alone tables, the verification table, the split
    sizes, the metric table, and one row per agent holding its figures."""
    results, _ = evaluated
    report = markdown_report(results)
    lines = report.splitlines()
    assert lines[0] == "## math/reflection-v0: 2 problems, 2 episodes"
    for head in (
        "| team - alone (paired by problem) | all |",
        "| figure | all |",
        "| per level | all |",
        "| level | train | validation | test |",
        "| metric | value |",
        "| agent | turns | reward | accuracy | parse errors | tokens/turn |",
    ):
        assert any(line.startswith(head) for line in lines), head
    assert "| team: final answer - alone: maj@3 (matched" in report
    for agent, row in results["metrics"]["agents"].items():
        cells = f"| {agent} | 2 | {row['reward']:.3f} | {row['accuracy']:.3f} | "
        assert sum(line.startswith(cells) for line in lines) == 1, agent
