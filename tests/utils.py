"""Test helpers: fixture writers, the location of the optional shared data, and what the
sandbox tests share (whether bubblewrap runs here, our own sandboxed processes)."""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# `accelerate launch` with 2 gloo processes on this CPU (run from REPO), then the script and its args
ACCELERATE_2PROC = [
    sys.executable,
    "-m",
    "accelerate.commands.launch",
    "--config_file",
    "scripts/configs/accelerate/cpu_2proc.yaml",
    "--main_process_port",
    "0",
]
# Real public data (GSM8K, ANLI) lives beside the repository on project machines only.
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# filterwarnings entry for hook mode's "not a security boundary" warning
HOOK_WARNING = "ignore:SandboxConfig\\(isolation='hook'\\):UserWarning"


@functools.cache
def bwrap_problem() -> str | None:
    """Why bubblewrap cannot run a sandboxed program here, or None (checked once)."""
    from envs.sandbox import SandboxConfig, isolation_error

    return isolation_error(SandboxConfig(isolation="bwrap"))


def skip_unless_bwrap_runs(isolation: str = "bwrap") -> None:
    """Skip the calling test, with the reason, when it wants bwrap and bwrap cannot run."""
    if isolation == "bwrap" and bwrap_problem() is not None:
        pytest.skip(f"bubblewrap cannot run here: {bwrap_problem()}")


def own_sandbox_pids(live_only: bool = True) -> list[int]:
    """Sandboxed processes started by this test process (their token begins with our pid):
    other test processes may be running sandboxes at the same time (pytest -n)."""
    from envs.sandbox import TOKEN_VAR, sandbox_pids

    return sandbox_pids(f"{TOKEN_VAR}={os.getpid()}.".encode(), live_only=live_only)
