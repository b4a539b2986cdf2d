"""The soak's settings and shared record (`benchmarks.soak`): `SoakConfig`, the
contract's constants, latency windows and the thread-safe `Record` of counts, errors and
violations."""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

ENVS = ("math/reflection-v0", "math/debate-v0")
# Errors a call on a session of a killed server run may end with (`EnvServerError.code`).
RESTART_CODES = frozenset({"UNREACHABLE", "CONNECTION_LOST", "SESSION_LOST"})
GRACE_S = 3.0  # after a restarted server answers, connection errors still count as its restart


@dataclass
class SoakConfig:
    """What a soak runs (`run_soak`); the command line's flags set the same fields."""

    sessions: int = 64
    seconds: float = 600.0
    task: str = "arithmetic"
    kills: int | None = None  # None: one per 20 s of run, at least one
    restarts: tuple[str, ...] = ("env", "rewards")
    verify_threads: int = 4
    idle_timeout_s: float = 30.0
    server_workers: int = 8
    client_timeout_s: float = 60.0
    fault_every_s: float = 0.5
    warmup_s: float | None = None  # None: 10 % of the run, at most 60 s
    check_memory: bool = True
    memory_tolerance: float = 0.10
    seed: int = 0
    startup_timeout_s: float = 300.0
    max_body_bytes: int = 1 << 20
    max_batch: int = 64

    def __post_init__(self) -> None:
        if self.sessions < 1 or self.seconds <= 0 or self.verify_threads < 0:
            raise ValueError("sessions >= 1, seconds > 0 and verify_threads >= 0 are needed")
        unknown = set(self.restarts) - {"env", "rewards"}
        if unknown:
            raise ValueError(f"restarts must name 'env' and/or 'rewards', got {sorted(unknown)}")

    @property
    def kill_count(self) -> int:
        return max(1, int(self.seconds // 20)) if self.kills is None else self.kills

    @property
    def warmup(self) -> float:
        return min(60.0, 0.1 * self.seconds) if self.warmup_s is None else self.warmup_s


# ---------------------------------------------------------------------- the shared record


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank `q`-th percentile (0-100) of `values`, or None for none."""
    if not values:
        return None
    ranked = sorted(values)
    return ranked[min(len(ranked), max(1, math.ceil(q / 100 * len(ranked)))) - 1]


@dataclass
class Window:
    """A server restart: from its kill until it answers again (plus `GRACE_S`)."""

    server: str
    began: float
    ended: float = float("inf")

    def holds(self, moment: float) -> bool:
        return self.began <= moment <= self.ended + GRACE_S


@dataclass
class Record:
    """What every thread of a soak reports to; `lock` guards it all."""

    began: float
    deadline: float
    lock: threading.Lock = field(default_factory=threading.Lock)
    counts: Counter = field(default_factory=Counter)
    faults: Counter = field(default_factory=Counter)
    explained: Counter = field(default_factory=Counter)  # errors the contract allows, by kind
    violations: list[str] = field(default_factory=list)
    latency: dict[str, list[float]] = field(default_factory=lambda: {"http": [], "ws": []})
    verify_latency: list[float] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)
    rss: list[tuple[float, str, int, int]] = field(default_factory=list)  # (t, server, run, kB)

    def over(self) -> bool:
        return time.monotonic() >= self.deadline

    def count(self, key: str, n: int = 1) -> None:
        with self.lock:
            self.counts[key] += n

    def violation(self, message: str) -> None:
        with self.lock:
            self.counts["violations"] += 1
            if len(self.violations) < 200:
                self.violations.append(f"{time.monotonic() - self.began:7.1f}s {message}")

    def explain(self, kind: str) -> None:
        with self.lock:
            self.explained[kind] += 1

    def in_restart(self, server: str, moment: float | None = None) -> bool:
        moment = time.monotonic() if moment is None else moment
        with self.lock:
            return any(w.server == server and w.holds(moment) for w in self.windows)


def error_kind(exc: BaseException) -> str:
    code = getattr(exc, "code", None)
    status = getattr(exc, "status", None)
    if code:
        return code if status is None else f"{status} {code}"
    return f"HTTP {status}" if status is not None else type(exc).__name__
