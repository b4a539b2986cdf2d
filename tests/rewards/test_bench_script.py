"""scripts/bench.py runs and writes its figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from .conftest import generated_gsm8k

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "scripts" / "bench.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        check=False,
    )


def test_help() -> None:
    result = _run("--help")
    assert result.returncode == 0
    assert "verifiers" in result.stdout
    assert _run("verifiers", "--help").returncode == 0


def test_verifiers_benchmark_on_a_local_file(tmp_path: Path) -> None:
    data = tmp_path / "gsm8k.jsonl"
    data.write_text("\n".join(json.dumps(row) for row in generated_gsm8k(40)) + "\n")
    out = tmp_path / "figures.json"
    result = _run("verifiers", "--data-path", str(data), "--json", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    figures = json.loads(out.read_text())
    assert figures["verifications"] == 80  # each solution right and with a changed final
    assert figures["ours_match_expected"] == 80
    assert figures["verdicts_differ"] == 0
    assert figures["verdicts_differ_same_extracted_answer"] == 0
    assert figures["ours_per_s"] > figures["plain_math_verify_per_s"]
