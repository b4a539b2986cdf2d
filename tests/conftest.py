"""Shared fixtures. Tests never download: data is generated here, models are built locally.

Timings are reported, not asserted, where a busy shared machine could fail them: the
``report_time`` and ``report_fuzz`` fixtures record figures (as the test's user properties, so
they also reach a JUnit XML report and cross ``pytest -n``), and the end of the run lists them
under "reported timings", each call over its bound marked.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.utils import HOOK_WARNING, bwrap_problem, run_command, run_in_process, write_jsonl

TIME_PROPERTY = "reported_time"  # (what, seconds, bound)
FUZZ_PROPERTY = "reported_fuzz"  # {"target": name, **fields of envs.testing.fuzz.Stats}
FUZZ_JSON_VAR = "MATHTEAMS_FUZZ_JSON"
_REPORTED: dict[str, list[Any]] = {TIME_PROPERTY: [], FUZZ_PROPERTY: []}


def pytest_configure(config: pytest.Config) -> None:
    """Where bubblewrap cannot run, programs of the suite's envs run in hook mode (an explicit,
    warning opt-in); the sandbox's own bwrap tests name their isolation and skip with the
    reason."""
    from envs.sandbox.config import ISOLATION_VAR

    if ISOLATION_VAR in os.environ or bwrap_problem() is None:
        return
    os.environ[ISOLATION_VAR] = "hook"
    config.addinivalue_line("filterwarnings", HOOK_WARNING)


@pytest.fixture(scope="session", autouse=True)
def _close_process_lived_connections() -> Any:
    """At the end of the run, stop the loopback reward servers the fuzz's `remote` verifier
    started and close the pooled connections of `rewards.RemoteVerifier`, both kept for the
    process's life, so that the run leaves no socket open (``-W always::ResourceWarning``)."""
    yield
    import sys

    if "envs.testing.fuzz.verifiers" in sys.modules:
        sys.modules["envs.testing.fuzz.verifiers"].stop_loopback_servers()
    if "rewards.remote" in sys.modules:
        sys.modules["rewards.remote"].close_clients()


@pytest.fixture
def report_time(record_property) -> Callable[[str, float, float], None]:
    """``report_time(what, seconds, bound)``: a duration and the bound it should stay under,
    reported at the end of the run instead of asserted."""

    def report(what: str, seconds: float, bound: float) -> None:
        record_property(TIME_PROPERTY, (what, round(seconds, 4), bound))

    return report


@pytest.fixture
def report_fuzz(record_property) -> Callable[[str, Any], None]:
    """``report_fuzz(target_name, stats)``: a fuzz target's `envs.testing.fuzz.Stats`, reported."""

    def report(target: str, stats: Any) -> None:
        record_property(FUZZ_PROPERTY, {"target": target, **vars(stats)})

    return report


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Runs where the terminal summary is written (the controller under pytest -n).
    if report.when == "call":
        for key, value in report.user_properties:
            if key in _REPORTED:
                _REPORTED[key].append(value)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """Every figure over its bound, and the few closest to theirs (all of them with -v)."""
    times, fuzz = _REPORTED[TIME_PROPERTY], _REPORTED[FUZZ_PROPERTY]
    if not (times or fuzz):
        return
    shown = None if config.option.verbose > 0 else 5
    write = terminalreporter.write_line
    terminalreporter.section("reported timings (not asserted here)")
    if times:
        ranked = sorted(times, key=lambda t: t[1] / t[2] if t[2] > 0 else float("inf"))[::-1]
        over = [t for t in ranked if t[1] > t[2]]
        write(f"{len(times)} timed calls, {len(over)} over their bound; nearest their bound:")
        for what, seconds, bound in over + [t for t in ranked if t not in over][:shown]:
            write(f"  {'OVER ' if seconds > bound else ''}{seconds:.3f} s (bound {bound} s) {what}")
    if fuzz:
        from envs.testing.fuzz import table

        stats = {row["target"]: {k: v for k, v in row.items() if k != "target"} for row in fuzz}
        ranked = sorted(stats, key=lambda name: -stats[name]["worst_ratio"])
        keep = [n for n in ranked if stats[n]["over_bound"]] + ranked[:shown]
        over = sum(s["over_bound"] for s in stats.values())
        inputs = sum(s["inputs"] for s in stats.values())
        write(
            f"fuzz: {len(stats)} targets, {inputs} inputs, {over} calls over their bound; "
            f"nearest their bound (worst s/bound):"
        )
        write(table({name: stats[name] for name in dict.fromkeys(keep)}))
        path = os.environ.get(FUZZ_JSON_VAR)
        if path:
            Path(path).write_text(json.dumps(stats, indent=2) + "\n", encoding="utf-8")
            write(f"fuzz summary written to {path}")


@pytest.fixture(
    params=[
        pytest.param(run_in_process, id="in-process"),
        pytest.param(run_command, id="command", marks=pytest.mark.slow),
    ]
)
def run_script(request) -> Callable[..., Any]:
    """``run_script(name, *args, timeout=300)`` runs ``scripts/<name>`` and returns a
    `subprocess.CompletedProcess`: in this process in the default run, and as a command in a
    fresh interpreter under ``-m slow`` (each command pays the torch/transformers imports again,
    seconds to a minute on a busy machine). Each script's one command run in the default run is
    its smoke test in ``tests/test_scripts.py``."""
    return request.param


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> str:
    """The tiny embedded-recipe model (random-ish weights, local tokenizer), built once."""
    from tests.trainers.helpers import TINY
    from trainers.embedded import build_embedded

    return str(build_embedded(TINY, tmp_path_factory.mktemp("embedded") / "model"))


@pytest.fixture
def gsm8k_file(tmp_path: Path) -> Path:
    rows = [
        {
            "question": f"Sam has {i} apples and buys {i + 2} more. How many now?",
            "answer": f"Sam has {i}+{i + 2}=<<{i}+{i + 2}={2 * i + 2}>>{2 * i + 2}.\n#### {2 * i + 2:,}",
        }
        for i in range(1, 12)
    ]
    rows.append(
        {
            "question": "A house costs $1,500 plus $625. Total?",
            "answer": "1500+625=<<1500+625=2125>>2125\n#### 2,125",
        }
    )
    return write_jsonl(tmp_path / "gsm8k.jsonl", rows)
