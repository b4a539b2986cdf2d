"""The fuzz tests' Hypothesis profiles and their summary: inputs tried, failures, slowest call.

``MATHTEAMS_FUZZ_PROFILE=long`` (or ``--hypothesis-profile long``) raises the budget;
``MATHTEAMS_FUZZ_JSON=path`` also writes the summary as JSON.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.fuzz.harness import COLLECTOR, register_profiles

register_profiles()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not COLLECTOR.stats:
        return
    terminalreporter.section("fuzz summary (tests/fuzz)")
    terminalreporter.write_line(COLLECTOR.table())
    path = os.environ.get("MATHTEAMS_FUZZ_JSON")
    if path:
        Path(path).write_text(json.dumps(COLLECTOR.as_json(), indent=2) + "\n", encoding="utf-8")
        terminalreporter.write_line(f"fuzz summary written to {path}")
