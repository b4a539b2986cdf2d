"""``bench.py soak`` (also ``scripts/soak.py`` and ``mathteams soak``): the env server and the
reward server under load and faults, on loopback, bounded in count and time.

What runs. Both servers start as processes of their own (``python -m envs.serving.cli``,
``python -m rewards.serving.cli``) on free loopback ports. ``sessions`` client threads each hold
one session of the env server (half over HTTP, half over the WebSocket; sessions of
``math/reflection-v0`` (AEC) and ``math/debate-v0`` (Parallel) alternate) and play episodes with
scripted or random text (`agents.ScriptedPolicy`, `agents.RandomTextPolicy`; no model), a few
episodes per session before closing it and opening the next. ``verify_threads`` threads call the
reward server's ``POST /verify`` (`rewards.RemoteVerifier`, no retries) with batches whose right
verdicts are known. Meanwhile, the faults:

- client kills: ``kills`` times, at random moments, a random client dies mid-episode: it drops its
  connection without closing its session (half of them right after sending a step, before the
  answer), and its thread goes on as a new client;
- server restarts: the env server is killed (SIGKILL, a crash) at 30 % of the run and started
  again on the same port; the reward server is stopped (SIGTERM) at 55 % and started again;
- protocol faults, one every ``fault_every_s``: requests each server must refuse (unknown or lost
  sessions, malformed or oversized bodies, unknown envs and verifiers, a step before a reset,
  after the episode, out of turn, a non-string action, WebSocket messages out of order).

The contract checked (every breach is a violation; the run fails with any):

- A session whose client did not die is never lost while its server runs: every call on it
  succeeds until its client closes it. The one exception is a server restart: sessions live in
  the env server's memory (`envs.serving.sessions`), so a restart loses them all; then each call
  on such a session fails with a clear error naming what happened (``UNREACHABLE`` or
  ``CONNECTION_LOST`` while the server is down or as the WebSocket drops, 404 ``SESSION_LOST``
  from the new run, which names the restart) and the client can open a new session once the
  server is back (every client does, and is counted as recovered).
- A killed client's session: over the WebSocket, the server closes it with the connection
  (``SESSION_CLOSED`` naming it); over HTTP it stays open (it is not lost: its client may come
  back) until the idle reaper closes it after ``idle_timeout_s`` (``SESSION_CLOSED``, "expired").
  After the run, once every client closed its session, the server holds no session.
- Every fault is answered with the expected status and a message (no hang: no call runs into
  the client's timeout; no 5xx without a message), and every verdict is right.
- Memory: the resident memory (``VmRSS`` of ``/proc/PID/status``) of each server process, after a
  warm-up, stays within ``memory_tolerance`` (10 %) of its value at the end of the warm-up, at the
  middle and the end of the process's time under load (checked for processes whose time under
  load after the warm-up is at least the warm-up's; the others are reported only).

Reported: step latency (p50, p99, per transport and overall, successful steps only, as the client
waits), verify latency, counts (sessions, episodes, steps, verify batches), faults injected per
kind, errors seen per kind (explained by the contract, or violations), and each server process's
resident memory at the start (after warm-up), the middle and the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import random
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks.common import add_json_argument
from benchmarks.soak_base import Record, SoakConfig, Window, percentile
from benchmarks.soak_clients import Client, verify_loop
from benchmarks.soak_faults import Faults
from benchmarks.soak_servers import ServerProcess, env_server, reward_server, rss_kb

NAME = "soak"

# ---------------------------------------------------------------------- the soak


class Soak:
    """One soak run: the servers, the clients, the faults and the checks (`run_soak`)."""

    def __init__(self, config: SoakConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.env_server = env_server(config)
        self.reward_server = reward_server(config)
        self.record = Record(0.0, 0.0)
        self.clients: list[Client] = []
        self.checks: list[tuple[float, str, str, str, float]] = []  # (due, id, transport, what, t)
        self.checks_lock = threading.Lock()

    # The killed clients' sessions

    def killed(self, session_id: str, transport: str) -> None:
        """Schedule the checks of a killed client's session."""
        now = time.monotonic()
        idle = self.config.idle_timeout_s
        reaped = now + idle + min(max(idle / 4, 0.01), 5.0) + 5.0  # the reaper's interval, slack
        with self.checks_lock:
            if transport == "ws":
                self.checks.append((now + 2.0, session_id, transport, "closed", now))
            else:
                self.checks.append((now + 0.5, session_id, transport, "open", now))
                self.checks.append((reaped, session_id, transport, "closed", now))

    def run_checks(self, final: bool = False) -> None:
        """Run the due checks (with `final`, all of them, waiting until each is due)."""
        import httpx

        while True:
            with self.checks_lock:
                self.checks.sort()
                if not self.checks or (not final and self.checks[0][0] > time.monotonic()):
                    return
                due, session_id, transport, want, killed_at = self.checks.pop(0)
            time.sleep(max(0.0, due - time.monotonic()))
            self._check_killed(httpx, session_id, transport, want, killed_at)

    def _check_killed(
        self, httpx: Any, session_id: str, transport: str, want: str, t: float
    ) -> None:
        record, what = self.record, f"killed {transport} client's session {session_id}"
        for attempt in range(20):  # a WebSocket close, or a reap, may take a moment more
            try:
                answer = httpx.get(f"{self.env_server.url}/sessions/{session_id}", timeout=30)
            except httpx.TransportError:
                if record.in_restart("env"):
                    record.explain("killed-session check during env restart")
                    return
                record.violation(f"{what}: the env server did not answer")
                return
            body = (
                answer.json()
                if answer.headers.get("content-type", "").startswith("application/json")
                else {}
            )
            code = body.get("code") if isinstance(body, dict) else None
            if code == "SESSION_LOST":  # the server restarted since: lost with every session
                record.count("killed sessions then lost to a restart")
                return
            if want == "open":
                if answer.status_code == 200:
                    record.count("killed HTTP sessions kept open")
                else:
                    record.violation(
                        f"{what}: lost right after its client died: {answer.text[:300]}"
                    )
                return
            if answer.status_code == 404 and code == "SESSION_CLOSED":
                record.count(f"killed {transport} sessions closed by the server")
                return
            if answer.status_code != 200 or attempt == 19:
                record.violation(
                    f"{what} not closed as it should be: {answer.status_code} {answer.text[:300]}"
                )
                return
            time.sleep(1.0)

    # The run

    def _sample_rss(self) -> None:
        record = self.record
        while True:
            now = time.monotonic()
            for server in (self.env_server, self.reward_server):
                pid, run = server.pid, server.runs
                kb = None if pid is None or not server.serving else rss_kb(pid)
                if kb is not None:
                    with record.lock:
                        record.rss.append((now, server.name, run, kb))
            if record.over():
                return
            time.sleep(min(1.0, max(0.05, self.config.seconds / 200)))

    def _restart(self, server: ServerProcess, sig: int) -> None:
        record = self.record
        window = Window(server.name, time.monotonic())
        with record.lock:
            record.windows.append(window)
        server.run_id = None  # from now on, sessions of the killed run are lost
        server.signal(sig)
        server.start(self.config.startup_timeout_s)
        window.ended = time.monotonic()
        with record.lock:  # the run's time under load does not count the downtime
            record.deadline += window.ended - window.began
        record.count(f"fault: {server.name} server restarted ({signal.Signals(sig).name})")

    def run(self) -> dict[str, Any]:
        # A client killed by shutting its WebSocket's socket makes websockets' reader thread log
        # "unexpected internal error" (EOFError): the soak's own doing, and the calls that
        # follow raise anyway.
        quiet = logging.getLogger("websockets")
        level, quiet.level = quiet.level, logging.CRITICAL
        try:
            return self._run()
        finally:
            quiet.setLevel(level)

    def _run(self) -> dict[str, Any]:
        config = self.config
        self.env_server.start(config.startup_timeout_s)
        self.reward_server.start(config.startup_timeout_s)
        threads: list[threading.Thread] = []
        try:
            began = time.monotonic()
            self.record = record = Record(began, began + config.seconds)
            self.clients = [Client(self, i) for i in range(config.sessions)]
            faults = Faults(self)
            workers: list[tuple[str, Callable[[], None]]] = [
                (f"soak-client-{c.index}", c.run) for c in self.clients
            ]
            workers += [
                (f"soak-verify-{i}", lambda i=i: verify_loop(self, i))
                for i in range(config.verify_threads)
            ]
            workers += [("soak-faults", faults.loop), ("soak-rss", self._sample_rss)]
            for name, target in workers:
                thread = threading.Thread(
                    target=self._guarded(target, name), name=name, daemon=True
                )
                thread.start()
                threads.append(thread)
            self._schedule(began)
            for thread in threads:
                thread.join(timeout=2 * config.client_timeout_s + 30)
                if thread.is_alive():
                    record.violation(f"thread {thread.name} still running after the run")
            ended = time.monotonic()
            drained = self._drain()
            self.run_checks(final=True)
            return self._report(ended - began, drained)
        finally:
            self.env_server.stop()
            self.reward_server.stop()
            with contextlib.suppress(Exception):
                from rewards.remote import close_clients

                close_clients()

    def _guarded(self, target: Callable[[], None], name: str) -> Callable[[], None]:
        def run() -> None:
            try:
                target()
            except Exception as exc:  # noqa: BLE001 - a thread's crash is a finding
                self.record.violation(f"thread {name} crashed: {exc!r:.600}")

        return run

    def _schedule(self, began: float) -> None:
        """Kills and restarts at their moments, due checks in between, until the deadline."""
        config, record = self.config, self.record
        events: list[tuple[float, str]] = []
        for _ in range(config.kill_count):
            events.append((began + config.seconds * self.rng.uniform(0.05, 0.9), "kill"))
        if "env" in config.restarts:
            events.append((began + 0.3 * config.seconds, "env"))
        if "rewards" in config.restarts:
            events.append((began + 0.55 * config.seconds, "rewards"))
        events.sort()
        while not record.over():
            self.run_checks()
            if events and time.monotonic() >= events[0][0]:
                _, what = events.pop(0)
                if what == "kill":
                    self.rng.choice(self.clients).kill.set()
                    continue
                began_restart = time.monotonic()
                if what == "env":
                    self._restart(self.env_server, signal.SIGKILL)
                else:
                    self._restart(self.reward_server, signal.SIGTERM)
                downtime = time.monotonic() - began_restart
                events = [(moment + downtime, later) for moment, later in events]
                continue
            time.sleep(0.05)
        for _, what in events:
            record.violation(f"the scheduled {what} did not happen before the deadline")
        for client in self.clients:
            if client.kill.is_set():  # asked to die, never reached a step again
                client.kill.clear()
                record.count("kills not carried out (the run ended first)")

    def _drain(self) -> int | None:
        """Wait until the env server holds no session (the killed HTTP clients' ones are reaped
        after idle_timeout_s); returns what it still holds at the end of the wait."""
        import httpx

        idle = self.config.idle_timeout_s
        deadline = time.monotonic() + idle + min(max(idle / 4, 0.01), 5.0) + 10.0
        held = None
        while time.monotonic() < deadline:
            try:
                held = httpx.get(self.env_server.url + "/health", timeout=30).json()["sessions"]
            except (httpx.TransportError, ValueError, KeyError) as exc:
                self.record.violation(f"the env server's /health failed after the run: {exc!r}")
                return None
            if held == 0:
                return 0
            self.run_checks()
            time.sleep(0.25)
        self.record.violation(f"the env server still holds {held} sessions after the run")
        return held

    # The report

    def _memory(self) -> dict[str, Any]:
        """Per server process: its resident memory after warm-up, at the middle and at the end of
        its time under load, and the check."""
        config, record = self.config, self.record
        out: dict[str, Any] = {}
        for name in ("env", "rewards"):
            runs = sorted({run for _, n, run, _ in record.rss if n == name})
            for run in runs:
                samples = [(t, kb) for t, n, r, kb in record.rss if n == name and r == run]
                samples = [(t, kb) for t, kb in samples if t <= record.deadline]
                if not samples:
                    continue
                first = max(samples[0][0], record.began)
                warm = first + config.warmup
                after = [(t, kb) for t, kb in samples if t >= warm]
                entry: dict[str, Any] = {"first_kb": samples[0][1], "samples": len(samples)}
                step = max(1, len(samples) // 40)  # about 40 points of (seconds into the run, kB)
                entry["series"] = [(round(t - record.began, 1), kb) for t, kb in samples[::step]]
                if after:
                    start, end = after[0], after[-1]
                    middle = min(after, key=lambda s: abs(s[0] - (start[0] + end[0]) / 2))
                    span = end[0] - start[0]
                    entry.update(
                        start_kb=start[1],
                        middle_kb=middle[1],
                        end_kb=end[1],
                        max_kb=max(kb for _, kb in after),
                        span_s=round(span, 1),
                    )
                    checked = config.check_memory and span >= config.warmup
                    entry["checked"] = checked
                    if checked:
                        for label, (_, kb) in (("middle", middle), ("end", end)):
                            change = kb / start[1] - 1
                            if abs(change) > config.memory_tolerance:
                                record.violation(
                                    f"{name} server run {run}: resident memory at the {label} "
                                    f"{kb} kB is {change:+.1%} from {start[1]} kB after warm-up"
                                )
                out[f"{name} run {run}"] = entry
        return out

    def _report(self, seconds: float, drained: int | None) -> dict[str, Any]:
        record = self.record
        memory = self._memory()
        for client in self.clients:
            if client.lost_at is not None:
                record.violation(f"client {client.index} never opened a session after the restart")
        latency: dict[str, Any] = {}
        every = record.latency["http"] + record.latency["ws"]
        for label, values in (("all", every), *record.latency.items()):
            latency[label] = {
                "steps": len(values),
                "p50_ms": _ms(percentile(values, 50)),
                "p99_ms": _ms(percentile(values, 99)),
            }
        counts = dict(record.counts)
        faults = {
            k.removeprefix("fault: "): v for k, v in counts.items() if k.startswith("fault: ")
        }
        figures = {
            "config": {**asdict(self.config), "kills": self.config.kill_count},
            "seconds": round(seconds, 1),
            "counts": {k: v for k, v in counts.items() if not k.startswith("fault: ")},
            "faults": faults,
            "errors_explained": dict(record.explained),
            "step_latency": latency,
            "verify_latency": {
                "batches": len(record.verify_latency),
                "p50_ms": _ms(percentile(record.verify_latency, 50)),
                "p99_ms": _ms(percentile(record.verify_latency, 99)),
            },
            "memory": memory,
            "sessions_held_after": drained,
            "violations": list(record.violations),
            "passed": not record.violations and record.counts["violations"] == 0,
        }
        return figures


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(1000 * seconds, 1)


def run_soak(config: SoakConfig) -> dict[str, Any]:
    """Run one soak (the module docstring says what and what it checks); returns its figures,
    ``passed`` False with the ``violations`` when the contract was breached."""
    return Soak(config).run()


def print_report(figures: dict[str, Any]) -> None:
    """The figures as a table."""
    config, counts = figures["config"], figures["counts"]
    print(
        f"soak: {config['sessions']} sessions for {figures['seconds']:.0f} s, "
        f"{config['verify_threads']} verify threads"
    )
    print(f"{'step latency':24} {'steps':>9} {'p50 ms':>9} {'p99 ms':>9}")
    for label, row in figures["step_latency"].items():
        print(f"  {label:22} {row['steps']:9d} {row['p50_ms'] or 0:9.1f} {row['p99_ms'] or 0:9.1f}")
    row = figures["verify_latency"]
    print(
        f"  {'verify batch':22} {row['batches']:9d} {row['p50_ms'] or 0:9.1f} {row['p99_ms'] or 0:9.1f}"
    )
    print("counts:")
    for key, value in sorted(counts.items()):
        print(f"  {key:54} {value:8d}")
    print("faults injected:")
    for key, value in sorted(figures["faults"].items()):
        print(f"  {key:54} {value:8d}")
    print("errors seen, explained by the contract:")
    for key, value in sorted(figures["errors_explained"].items()):
        print(f"  {key:54} {value:8d}")
    print("resident memory (MiB): first, after warm-up, middle, end (checked within tolerance)")
    for key, entry in figures["memory"].items():
        shown = [entry.get(k) for k in ("first_kb", "start_kb", "middle_kb", "end_kb")]
        text = " ".join("    -   " if kb is None else f"{kb / 1024:8.1f}" for kb in shown)
        print(f"  {key:18} {text}  {'checked' if entry.get('checked') else 'not checked'}")
    print(f"sessions held by the env server after the run: {figures['sessions_held_after']}")
    verdict = (
        "PASSED" if figures["passed"] else f"FAILED ({counts.get('violations', 0)} violations)"
    )
    print(verdict)
    for line in figures["violations"][:30]:
        print(f"  {line}")


def add_parser(subparsers: Any) -> None:
    """Register the ``soak`` command."""
    parser = subparsers.add_parser(
        NAME,
        help="the env and reward servers under load and faults: contract, latency, memory",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    add_arguments(parser)
    parser.set_defaults(func=run)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The soak's flags (``bench.py soak`` and ``scripts/soak.py`` share them)."""
    defaults = SoakConfig()
    parser.add_argument("--sessions", type=int, default=defaults.sessions)
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--minutes", type=float, default=None, help="run length (default 10)")
    length.add_argument("--seconds", type=float, default=None, help="run length in seconds")
    parser.add_argument(
        "--kills", type=int, default=None, help="client kills (default: one per 20 s)"
    )
    parser.add_argument(
        "--restart",
        action="append",
        choices=["env", "rewards", "none"],
        default=None,
        help="servers restarted in the middle (repeatable; default both; none: no restart)",
    )
    parser.add_argument("--verify-threads", type=int, default=defaults.verify_threads)
    parser.add_argument("--idle-timeout", type=float, default=defaults.idle_timeout_s)
    parser.add_argument("--server-workers", type=int, default=defaults.server_workers)
    parser.add_argument("--warmup", type=float, default=None, help="seconds (default 10%%, <= 60)")
    parser.add_argument("--no-memory-check", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    add_json_argument(parser)


def config_from_args(args: argparse.Namespace) -> SoakConfig:
    seconds = 600.0 if args.minutes is None and args.seconds is None else None
    if seconds is None:
        seconds = args.seconds if args.seconds is not None else 60.0 * args.minutes
    restarts = tuple(r for r in (args.restart or ["env", "rewards"]) if r != "none")
    return SoakConfig(
        sessions=args.sessions,
        seconds=seconds,
        kills=args.kills,
        restarts=restarts,
        verify_threads=args.verify_threads,
        idle_timeout_s=args.idle_timeout,
        server_workers=args.server_workers,
        warmup_s=args.warmup,
        check_memory=not args.no_memory_check,
        seed=args.seed,
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the soak, print its table; exits with status 1 (after writing --json) on a breach."""
    figures = run_soak(config_from_args(args))
    print_report(figures)
    if not figures["passed"]:
        if args.json is not None:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
        raise SystemExit(1)
    return figures


def make_parser() -> argparse.ArgumentParser:
    """The parser of ``scripts/soak.py`` and ``mathteams soak``: the soak's flags."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    add_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``scripts/soak.py`` and ``mathteams soak``: ``bench.py soak`` with the same flags."""
    args = make_parser().parse_args(argv)
    figures = run(args)
    if args.json is not None:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    return 0
