"""The soak's server processes (`benchmarks.soak`): the env and reward servers, each a
subprocess on a free loopback port that can be killed, restarted and measured (``VmRSS``)."""

from __future__ import annotations

import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import free_port, start_module, wait_healthy
from benchmarks.soak_base import ENVS, SoakConfig

# ---------------------------------------------------------------------- server processes


def rss_kb(pid: int) -> int | None:
    """The resident memory of process `pid` in KiB (``VmRSS`` of /proc/PID/status), or None."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


class ServerProcess:
    """One server (`module`'s command line) in its own process on a fixed loopback port, which
    can be killed and started again on the same port. ``runs`` counts its starts."""

    def __init__(self, name: str, module: str, args: Sequence[str]) -> None:
        self.name, self.module, self.args = name, module, list(args)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None
        self.log: Any = None
        self.runs = 0
        self.run_id: str | None = None  # the env server's run id (GET /health)
        self.started_at = 0.0  # monotonic time it answered its first /health
        self.serving = False  # between its first /health answer and its kill or stop

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def start(self, timeout_s: float) -> None:
        if self.log is not None:
            self.log.close()
        self.log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed on the next start/stop
        self.process = start_module(
            self.module,
            ["--port", str(self.port), *self.args],
            stdout=subprocess.DEVNULL,
            stderr=self.log,
        )
        answer = wait_healthy(self.name, self.url, self.process, timeout_s, self.log_tail)
        self.run_id = answer.json().get("run_id")
        self.runs += 1
        self.started_at = time.monotonic()
        self.serving = True

    def log_tail(self) -> str:
        if self.log is None:
            return ""
        self.log.seek(0)
        return self.log.read()[-2000:]

    def signal(self, sig: int) -> None:
        """Send `sig` and wait for the process to end (SIGKILL after 30 s)."""
        self.serving = False
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(sig)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)

    def stop(self) -> None:
        self.signal(signal.SIGTERM)
        if self.log is not None:
            self.log.close()
            self.log = None


def env_server(config: SoakConfig) -> ServerProcess:
    args = []
    for env_id in ENVS:
        args += ["--env", env_id]
    args += [
        "--max-sessions",
        str(2 * config.sessions + config.kill_count + 32),
        "--idle-timeout",
        str(config.idle_timeout_s),
        "--step-timeout",
        str(config.client_timeout_s / 2),
        "--workers",
        str(config.server_workers),
        "--max-body-bytes",
        str(config.max_body_bytes),
        "--log-level",
        "warning",
    ]
    return ServerProcess("env", "envs.serving.cli", args)


def reward_server(config: SoakConfig) -> ServerProcess:
    args = ["--verifier", "math", "--max-batch", str(config.max_batch), "--batch-workers", "1"]
    args += ["--request-timeout-s", str(config.client_timeout_s / 2), "--log-level", "warning"]
    return ServerProcess("rewards", "rewards.serving.cli", args)
