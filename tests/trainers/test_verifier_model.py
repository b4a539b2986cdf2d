"""The learned verifier: data from rollouts or scripts, balancing, training, serving."""

from __future__ import annotations

import importlib.util
import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

import envs
from agents import ScriptedPolicy
from rewards import Verdict, Verifier
from trainers.rollout.engine import RolloutEngine
from trainers.verifier.data import (
    balance_rows,
    correlation,
    problem_difficulty,
    rows_from_episodes,
    scripted_rows,
)
from trainers.verifier.model import (
    LearnedVerifier,
    auc_score,
    evaluate_verifier,
    train_verifier,
)

REPO = Path(__file__).resolve().parents[2]


def separable_rows(count: int, seed: int) -> list[dict]:
    """Right answers say so in words, wrong ones in other words: learnable in a few steps."""
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        correct = i % 2 == 0
        words = "checked and sure" if correct else "a wild guess"
        reference = str(rng.randint(1, 99))
        rows.append(
            {
                "problem_id": f"sep/d{1 + i % 3}/{i}",
                "response": f"This is {words}: \\boxed{{{reference}}}.",
                "reference": reference,
                "correct": correct,
            }
        )
    return rows


@pytest.fixture(scope="module")
def one_thread():
    """Tiny matrices: one torch thread avoids contention on a shared CPU (often 10x faster)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, one_thread):
    out = tmp_path_factory.mktemp("verifier")
    held_out = separable_rows(64, seed=1)
    metrics = train_verifier(
        separable_rows(256, seed=0),
        out,
        eval_rows=held_out,
        max_steps=40,
        batch_size=16,
        learning_rate=3e-3,
        max_length=32,
        model_kwargs={"hidden_size": 32, "num_layers": 1, "vocab_size": 300},
    )
    return metrics, held_out


# ------------------------------------------------------------------------ data and balancing


def test_scripted_rows_are_labelled_right_and_skew_with_difficulty() -> None:
    rows = scripted_rows(500, seed=0)
    math = envs.make_task("arithmetic").verifier
    assert all(math.verify(r["response"], r["reference"]).correct == r["correct"] for r in rows)
    accuracy = {}
    for level in range(1, 6):
        mine = [r["correct"] for r in rows if f"/d{level}/" in r["problem_id"]]
        accuracy[level] = sum(mine) / len(mine)
    assert accuracy[1] > 0.85 and accuracy[5] < 0.45, accuracy


def test_balance_by_level_equalizes_every_bin_and_removes_the_correlation() -> None:
    rows = scripted_rows(600, seed=0)
    kept, report = balance_rows(rows, by="level")
    assert report["by"] == "level" and report["before"]["corr"] < -0.3
    assert abs(report["after"]["corr"]) < 1e-9
    counts = Counter((r["problem_id"].split("/")[2], r["correct"]) for r in kept)
    for level in ("d1", "d2", "d3", "d4", "d5"):
        assert counts[(level, True)] == counts[(level, False)] > 0
        assert report["bins"][f"level {level[1]:s}"]["kept_each"] == counts[(level, True)]
    assert report["after"]["right"] == report["after"]["wrong"] == len(kept) // 2


def test_balance_by_rollout_accuracy() -> None:
    rng = random.Random(0)
    rows = []
    for problem in range(200):  # ids without a level: difficulty = the problem's failure rate
        skill = rng.random()
        rows += [
            {
                "problem_id": f"p/{problem}",
                "response": "r",
                "reference": "1",
                "correct": rng.random() < skill,
            }
            for _ in range(8)
        ]
    kept, report = balance_rows(rows, by="auto", bins=8, seed=1)
    assert report["by"] == "accuracy" and report["before"]["corr"] < -0.5
    assert abs(report["after"]["corr"]) < 0.1, report["after"]
    for entry in report["bins"].values():
        assert entry["kept_each"] == min(entry["right"], entry["wrong"])
    assert sum(r["correct"] for r in kept) * 2 == len(kept)


def test_problem_difficulty_and_errors() -> None:
    rows = [
        {"problem_id": "a", "correct": True},
        {"problem_id": "a", "correct": False},
        {"problem_id": "b", "correct": True},
    ]
    assert problem_difficulty(rows) == {"a": 0.5, "b": 0.0}
    with pytest.raises(ValueError, match="use by='accuracy'"):
        problem_difficulty(rows, by="level")
    with pytest.raises(ValueError, match="expected 'auto'"):
        problem_difficulty(rows, by="size")
    assert correlation([1, 1], [0, 1]) is None


def test_rows_from_rollout_episodes() -> None:
    task = envs.make_task("arithmetic", size=20, difficulty=[1, 3])
    answers = {p["question"]: p["answer"] for p in task.source}
    flips = iter(range(10_000))

    def reply(observation):  # every other answer is off by one
        answer = int(answers[observation["question"]]) + next(flips) % 2
        return f"The answer is \\boxed{{{answer}}}."

    env_kwargs = {"task": "arithmetic", "task_kwargs": {"size": 20, "difficulty": [1, 3]}}
    engine = RolloutEngine("math/solve-v0", ScriptedPolicy(reply), env_kwargs, num_envs=8)
    episodes = engine.run(engine.problem_ids(20), group_size=2)
    rows = rows_from_episodes(episodes, engine.task)
    assert len(rows) == 40 and sum(r["correct"] for r in rows) == 20
    math = envs.make_task("arithmetic").verifier
    for row in rows:
        assert row["reference"] == task.source.get(row["problem_id"])["answer"]
        assert math.verify(row["response"], row["reference"]).correct == row["correct"]
    by_id = {p["id"]: p["answer"] for p in task.source}
    assert rows_from_episodes([e.to_dict() for e in episodes], by_id) == rows
    critics = rows_from_episodes(episodes, engine.task, roles=("critic",))
    assert critics == []


def test_auc_score() -> None:
    assert auc_score([True, False], [0.9, 0.1]) == 1.0
    assert auc_score([True, False], [0.1, 0.9]) == 0.0
    assert auc_score([True, False, True, False], [0.5] * 4) == 0.5
    assert auc_score([True, True], [0.2, 0.3]) is None


# ------------------------------------------------------------------------ training and the verifier


def test_training_beats_chance_on_a_separable_set(trained) -> None:
    metrics, held_out = trained
    assert metrics["eval_loss_after"] < metrics["eval_loss_before"] - 0.1, metrics
    verifier = LearnedVerifier(metrics["model_path"])
    report = evaluate_verifier(verifier, held_out, rule="math")
    assert report["accuracy"] >= 0.9 and report["auc"] >= 0.95, report
    assert report["rule_accuracy"] == 0.5  # every answer matches: the rule says all correct
    assert sum(report["confusion"].values()) == len(held_out)


def test_learned_verifier_protocol_and_odd_text(trained) -> None:
    verifier = LearnedVerifier(trained[0]["model_path"], name="learned", batch_size=4)
    assert isinstance(verifier, Verifier) and verifier.name == "learned"
    odd = ["", "x" * 1_000_000, "\x00\x01\x1b[31m\ud800\udfff", "\u202e\ufeff 🤖 \\boxed{", "5"]
    verdicts = verifier.verify_batch(odd, ["5"] * len(odd))
    assert all(isinstance(v, Verdict) and 0.0 <= v.score <= 1.0 for v in verdicts)
    singles = [verifier.verify(text, "5") for text in odd]
    for one, many in zip(singles, verdicts, strict=True):
        assert one.score == pytest.approx(many.score, abs=1e-4)
    assert verifier.verify(None, "5").score == 0.0  # type: ignore[arg-type]
    assert verifier.verify_batch([], []) == []
    with pytest.raises(ValueError, match="reference"):
        verifier.verify("5", "")
    with pytest.raises(ValueError, match="1 responses but 2"):
        verifier.verify_batch(["5"], ["5", "6"])


def test_served_learned_verifier_through_the_client(trained) -> None:
    pytest.importorskip("fastapi")
    from rewards import RemoteVerifier, build_verifiers, get_verifier
    from rewards.serving.http import BackgroundServer
    from rewards.serving.server import create_app

    path = trained[0]["model_path"]
    served = build_verifiers([("trainers.verifier.model:LearnedVerifier", {"path": path})])
    assert list(served) == ["learned"]
    local = LearnedVerifier(path)
    rows = trained[1][:10]
    responses, references = [r["response"] for r in rows], [r["reference"] for r in rows]
    with BackgroundServer(create_app(served)) as server:
        remote = get_verifier(f"remote:{server.url}/learned")
        got = remote.verify_batch(responses, references)
        assert RemoteVerifier(server.url, "learned").served() == ["learned"]
    want = local.verify_batch(responses, references)
    assert [v.score for v in got] == pytest.approx([v.score for v in want], abs=1e-5)
    assert [v.extracted for v in got] == [v.extracted for v in want]


def _script():
    spec = importlib.util.spec_from_file_location(
        "train_verifier", REPO / "scripts/train_verifier.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCRIPT_ARGS = [
    "--scripted", "--train-problems", "120", "--eval-problems", "60", "--steps", "3",
    "--hidden-size", "16", "--num-layers", "1", "--batch-size", "8", "--threads", "1",
]  # fmt: skip


def _check_results(stdout: str, results: Path, out: Path) -> None:
    assert "agreement learned/rule" in stdout and "serve it:" in stdout
    data = json.loads(results.read_text())
    assert data["balance"]["after"]["right"] == data["balance"]["after"]["wrong"]
    assert data["eval"]["rule_accuracy"] == 1.0
    assert 0.0 <= data["eval"]["agreement_with_rule"] <= 1.0
    assert (out / "model" / "verifier.json").is_file()


def test_train_verifier_script_in_process(tmp_path, capsys, one_thread) -> None:
    out, results = tmp_path / "verifier", tmp_path / "results.json"
    script = _script()
    script.main([*SCRIPT_ARGS, "--output-dir", str(out), "--json", str(results)])
    _check_results(capsys.readouterr().out, results, out)
    with pytest.raises(SystemExit):
        script.main(["--help"])
    shown = capsys.readouterr().out
    assert "--scripted" in shown and "--base-model" in shown


@pytest.mark.slow
def test_train_verifier_script_command(tmp_path) -> None:
    out, results = tmp_path / "verifier", tmp_path / "results.json"
    command = [
        sys.executable, "scripts/train_verifier.py", *SCRIPT_ARGS,
        "--output-dir", str(out), "--json", str(results),
    ]  # fmt: skip
    run = subprocess.run(
        command, cwd=REPO, capture_output=True, text=True, timeout=600, check=False
    )
    assert run.returncode == 0, run.stderr[-3000:]
    _check_results(run.stdout, results, out)
