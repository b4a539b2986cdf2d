"""The soak's short form (`benchmarks.soak`): both servers in processes of their own,
8 sessions for a few seconds, one client killed mid-episode, each server restarted once, and
refused requests throughout. Asserts the contract (no session lost but to its client's death or
a restart, each loss and fault answered with a clear error, recovery after the restart, no
session left on the server), never a timing or a memory figure: those depend on the machine's
load, and the full soak (``python scripts/soak.py``, 10 minutes) reports them."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("websockets")

from benchmarks.soak import SoakConfig, percentile, run_soak


def test_short_soak_keeps_the_contract_through_a_kill_and_restarts():
    figures = run_soak(
        SoakConfig(
            sessions=8,
            seconds=8.0,
            kills=1,
            restarts=("env", "rewards"),
            verify_threads=2,
            idle_timeout_s=4.0,
            check_memory=False,
            fault_every_s=0.2,
        )
    )
    assert figures["passed"], "\n".join(figures["violations"])
    counts, faults = figures["counts"], figures["faults"]
    assert counts["steps"] > 0 and counts["verify batches"] > 0
    assert faults["env server restarted (SIGKILL)"] == 1
    assert faults["rewards server restarted (SIGTERM)"] == 1
    kills = sum(n for kind, n in faults.items() if kind.startswith("client killed"))
    assert kills + counts.get("kills not carried out (the run ended first)", 0) == 1
    assert counts["sessions opened"] >= 8
    # every client whose session the restart took opened another one
    assert counts.get("clients recovered after a restart", 0) == counts.get(
        "sessions lost to a restart", 0
    )
    assert figures["sessions_held_after"] == 0
    for entry in figures["memory"].values():
        assert entry["first_kb"] > 0


def test_percentile_is_nearest_rank():
    assert percentile([], 50) is None
    assert percentile([3.0], 99) == 3.0
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0 and percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
