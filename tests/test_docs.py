"""The newcomer's pages stay short: the README is what it is, the two commands, what they show and
where to read on (at most 200 lines); docs/results.md the current figures of what ships (at most
400: history lives in git and the issue notes)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("page", "limit"), [("README.md", 200), ("docs/results.md", 400)])
def test_pages_stay_within_their_length(page, limit):
    lines = len((REPO / page).read_text(encoding="utf-8").splitlines())
    assert lines <= limit, f"{page} is {lines} lines, over {limit}: cut before adding"
