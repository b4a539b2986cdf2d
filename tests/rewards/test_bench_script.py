"""scripts/bench.py runs and writes its figures (run by the ``run_script`` fixture: in this
process by default, as a command too under ``-m slow``)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.rewards.helpers import generated_gsm8k


def test_help(run_script) -> None:
    result = run_script("bench.py", "--help")
    assert result.returncode == 0
    assert "verifiers" in result.stdout
    assert run_script("bench.py", "verifiers", "--help").returncode == 0


def test_verifiers_benchmark_on_a_local_file(run_script, tmp_path: Path) -> None:
    data = tmp_path / "gsm8k.jsonl"
    data.write_text("\n".join(json.dumps(row) for row in generated_gsm8k(40)) + "\n")
    out = tmp_path / "figures.json"
    result = run_script("bench.py", "verifiers", "--data-path", str(data), "--json", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    figures = json.loads(out.read_text())
    assert figures["verifications"] == 80  # each solution right and with a changed final
    assert figures["ours_match_expected"] == 80
    assert figures["verdicts_differ"] == 0
    assert figures["verdicts_differ_same_extracted_answer"] == 0
    assert figures["ours_per_s"] > figures["plain_math_verify_per_s"]


def test_verifiers_benchmark_on_math_solutions(run_script, tmp_path: Path) -> None:
    rows = [
        {"solution": "So $x = \\boxed{\\frac{14}{3}}$.", "answer": "\\frac{14}{3}"},
        {"solution": "It is $15\\frac{39}{40}$, or \\boxed{\\frac{639}{40}}.", "answer": "639/40"},
        {"solution": "Thus \\boxed{3\\sqrt{13}}.", "answer": "3\\sqrt{13}"},
    ]
    data = tmp_path / "math.jsonl"
    data.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    out = tmp_path / "figures.json"
    result = run_script(
        "bench.py", "verifiers", "--data-path", str(data), "--repeat", "1", "--json", str(out)
    )
    assert result.returncode == 0, result.stderr[-2000:]
    figures = json.loads(out.read_text())
    assert figures["source"].endswith("(MATH solutions)")
    assert figures["verifications"] == 6  # each solution against its answer and another one
    assert figures["ours_match_expected"] == 6


def test_robustness_benchmark_writes_rates(run_script, tmp_path: Path) -> None:
    out = tmp_path / "robustness.json"
    result = run_script(
        "bench.py", "robustness", "--verifiers", "gsm8k", "label", "--json", str(out)
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "| gsm8k |" in result.stdout
    figures = json.loads(out.read_text())
    assert set(figures["verifiers"]) == {"gsm8k", "label"}
    for rates in figures["verifiers"].values():
        assert rates["items"] == rates["attacks"] + rates["correct"] > 0
        assert 0.0 <= rates["fp_rate"] <= 1.0
        assert 0.0 <= rates["fn_rate"] <= 1.0
        latency = rates["latency"]  # per call, the warm-up call left out
        assert latency["calls"] == rates["items"]
        assert 0.0 <= latency["p50_s"] <= latency["p99_s"] <= latency["max_s"]
    assert "gsm8k: " in result.stdout and " p99 " in result.stdout


def test_percentiles_are_nearest_rank() -> None:
    from benchmarks.robustness import percentiles

    figures = percentiles([float(i) for i in range(1, 201)])
    assert (figures["calls"], figures["p50_s"], figures["p99_s"], figures["max_s"]) == (
        200,
        100.5,
        198.0,
        200.0,
    )
    assert percentiles([])["p99_s"] is None


def test_hostile_cases_hold_every_kind_of_hostile_input() -> None:
    from benchmarks import corpus
    from benchmarks.robustness import hostile_cases

    cases = hostile_cases(corpus.load_corpus(corpus.CORPUS))
    ids = [case_id for case_id, _text, _reference in cases]
    assert len(ids) == len(set(ids))
    for prefix in ("latex-", "huge-", "issue42-", "slow-", "special-", "nest-", "big-"):
        assert any(case_id.startswith(prefix) for case_id in ids), prefix
    assert not any(case_id.startswith("notation-") for case_id in ids)  # correct answers
    assert ("issue42-00", "\\boxed{" + "(" * 100 + "7" + ")" * 100 + "}", "7") in cases


PARITY_TABLE = """
import pytest
from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify


def compare_strings(gold, pred, match_types=("latex", "expr"), precision=6, strict=True):
    targets = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
    return verify(parse(gold, targets), parse(pred, targets), float_rounding=precision)


@pytest.mark.parametrize(
    "gold,pred,expected",
    [
        ("$\\\\frac{1}{2}$", "so it is \\\\boxed{0.5}", 1),
        ("7", "The answer is 8", 0),
        ("\\\\boxed{1} no no no no no \\\\boxed{2}", "$\\\\boxed{1,2}$", 0),
    ],
)
def test_table(gold, pred, expected):
    assert compare_strings(gold, pred, match_types=["latex", "expr"]) == expected
"""


def test_parity_runs_math_verifys_tables_plain_and_with_the_math_verifier(
    run_script, tmp_path: Path
) -> None:
    """A table in math-verify's own form: plain math-verify passes it all, and the math verifier
    (swapped in for ``compare_strings``) is named on the case it reads differently (a reference
    with two boxed values)."""
    tests = tmp_path / "Math-Verify" / "tests"
    tests.mkdir(parents=True)
    (tests / "__init__.py").write_text("")
    (tests / "test_all.py").write_text(PARITY_TABLE)
    out = tmp_path / "parity.json"
    result = run_script("bench.py", "parity", "--tests", str(tests), "--json", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    figures = json.loads(out.read_text())
    assert figures["cases"] == 3
    assert figures["plain_right"] == 3
    assert figures["math_right"] == 2
    assert len(figures["math_misses"]) == 1 and "no no no" in figures["math_misses"][0]


def test_parity_names_a_folder_without_the_tables(run_script, tmp_path: Path) -> None:
    result = run_script("bench.py", "parity", "--tests", str(tmp_path))
    assert result.returncode != 0
    assert "no math-verify tests" in result.stdout + result.stderr
