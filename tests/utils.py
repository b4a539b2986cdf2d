"""Test helpers: running the scripts, fixture writers, the location of the optional shared
data, and what the sandbox tests share (whether bubblewrap runs here, our own sandboxed
processes)."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import runpy
import subprocess
import sys
import traceback
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


def run_command(script: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python scripts/<script> args`` from the repository root, in a fresh interpreter."""
    return subprocess.run(
        [sys.executable, f"scripts/{script}", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_in_process(script: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``scripts/<script> args`` run as ``__main__`` in this process, as `run_command` runs it:
    the repository root as working directory, stdout and stderr captured, the exit status that
    ``SystemExit`` gives (a message goes to stderr with status 1), and for any other exception
    its traceback on stderr and status 1, as the interpreter would end the command.
    `timeout` is not enforced (kept for the same call signature as `run_command`)."""
    del timeout
    path = REPO / "scripts" / script
    out, err = io.StringIO(), io.StringIO()
    saved = sys.argv, list(sys.path), os.getcwd()
    code: object = 0
    try:
        sys.argv = [str(path), *args]
        os.chdir(REPO)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                runpy.run_path(str(path), run_name="__main__")
            except SystemExit as exit_:
                code = exit_.code
                if code is not None and not isinstance(code, int):
                    print(code, file=sys.stderr)
                    code = 1
            except Exception:  # noqa: BLE001 - a command prints it and exits 1; so does this
                traceback.print_exc(file=sys.stderr)
                code = 1
    finally:
        sys.argv, sys.path[:] = saved[0], saved[1]
        os.chdir(saved[2])
    return subprocess.CompletedProcess(
        [str(path), *args], code or 0, out.getvalue(), err.getvalue()
    )


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
