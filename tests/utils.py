"""Test helpers: fixture writers and the location of the optional shared data."""

from __future__ import annotations

import json
from pathlib import Path

# Real public data (GSM8K, ANLI) lives beside the repository on project machines only.
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path
