"""The fuzz's timing report: every target's median, 99th percentile and max per call."""

from __future__ import annotations

from envs.testing.fuzz.timing import Collector, percentile


def test_percentile_is_nearest_rank():
    values = [float(v) for v in range(1, 101)]  # 1 .. 100
    assert percentile(values, 0.50) == 50.0 and percentile(values, 0.99) == 99.0
    assert percentile([3.0], 0.99) == 3.0 and percentile([], 0.5) == 0.0
    assert percentile([5.0, 1.0, 3.0], 0.5) == 3.0  # unsorted input


def test_the_report_gives_p50_p99_and_max_per_target():
    collector = Collector(enforce_bounds=False)
    for i in range(200):
        collector.call("env[x]", 0.01 if i < 198 else 4.0, what=f"input {i}", bound=2.0)
    collector.call("verify[y]", 0.5, what="one", bound=2.0)
    stats = collector.as_json()
    assert stats["env[x]"]["p50_s"] == 0.01 and stats["env[x]"]["p99_s"] == 0.01
    assert stats["env[x]"]["max_s"] == 4.0 and stats["env[x]"]["over_bound"] == 2
    assert stats["verify[y]"]["p50_s"] == stats["verify[y]"]["p99_s"] == 0.5
    header, _, row, _ = collector.table().splitlines()
    assert "p50 s/call | p99 s/call | max s/call" in header
    assert row.startswith("| env[x] | 0 | 0 | 0 | 2 | 0.010 | 0.010 | 4.000 |")
