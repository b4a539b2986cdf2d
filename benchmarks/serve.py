"""``bench.py serve``: the env server under load (``scripts/serve_envs.py``): steps per second
of many concurrent sessions over HTTP and WebSocket, and the overhead per step against the same
episodes in-process."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.common import add_json_argument, free_port, start_module, wait_healthy

NAME = "serve"


def add_parser(subparsers: Any) -> None:
    """Register the ``serve`` command."""
    parser = subparsers.add_parser(
        "serve",
        help="env server under load: steps per second and overhead per step, HTTP and WebSocket",
        description=(
            "Starts the env server (scripts/serve_envs.py) in its own process, then plays "
            "--episodes episodes in each of --sessions concurrent sessions (one client thread "
            "each, scripted replies from agents.ScriptedPolicy), over each --transport. The same "
            "episodes (seeds and replies) are played in-process, one after another, as the "
            "baseline. Reports steps per second (all sessions together), the mean time a client "
            "waits per step, and the overhead per step against the in-process step; checks that "
            "served and in-process episodes earn the same rewards."
        ),
    )
    parser.add_argument("--env", default="math/reflection-v0", help="env id")
    parser.add_argument("--task", default="arithmetic", help="task name")
    parser.add_argument("--sessions", type=int, default=64, help="concurrent sessions")
    parser.add_argument("--episodes", type=int, default=8, help="episodes per session")
    parser.add_argument(
        "--transport",
        action="append",
        default=None,
        choices=["http", "ws"],
        help="transports to time (repeatable; default both)",
    )
    parser.add_argument("--workers", type=int, default=8, help="the server's env threads")
    add_json_argument(parser)
    parser.set_defaults(func=run)


def _serve_reply(observation: Any) -> str:
    """A reply that looks like model output and depends only on the observation."""
    if observation.get("role") in ("critic", "verifier"):
        return "Step two adds instead of subtracting, so the total is off.\nVerdict: incorrect"
    guess = len(observation.get("question", "")) % 17 + len(observation.get("transcript", "")) % 3
    return (
        "First I write down what is known. Then I apply each change in order, one equation per "
        "sentence, and check the result by working backwards. "
        f"The final answer is \\boxed{{{guess}}}."
    )


def _serve_episode(env: Any, seed: int) -> tuple[int, float, float]:
    """One episode with scripted replies: (env calls, seconds inside env calls, reward sum)."""
    from pettingzoo import ParallelEnv

    from agents import ScriptedPolicy

    policy = ScriptedPolicy(_serve_reply)
    calls, waited, earned = 1, 0.0, 0.0
    began = time.perf_counter()
    if isinstance(env.unwrapped, ParallelEnv):
        observations, _ = env.reset(seed=seed)
        waited += time.perf_counter() - began
        while env.agents:
            agents = list(env.agents)
            replies = policy.act([observations[a] for a in agents])
            began = time.perf_counter()
            observations, rewards, _, _, _ = env.step(dict(zip(agents, replies, strict=True)))
            waited += time.perf_counter() - began
            calls += 1
            earned += sum(rewards.values())
        return calls, waited, earned
    env.reset(seed=seed)
    waited += time.perf_counter() - began
    for _agent in env.agent_iter():
        observation, reward, terminated, truncated, _ = env.last()
        earned += reward
        action = None if terminated or truncated else policy.act([observation])[0]
        began = time.perf_counter()
        env.step(action)
        waited += time.perf_counter() - began
        calls += 1
    return calls, waited, earned


def _cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) a process has used so far, from /proc (None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def _env_server(env_id: str, sessions: int, workers: int) -> Iterator[tuple[str, int]]:
    """The env server (``scripts/serve_envs.py``'s main) on a free loopback port, in its own
    process (importing this checkout's packages); yields its URL and process id."""
    import subprocess

    port = free_port()
    args = [  # envs.serving.cli: scripts/serve_envs.py's main, where the packages are importable
        "--port",
        str(port),
        "--env",
        env_id,
        "--max-sessions",
        str(2 * sessions + 8),
        "--workers",
        str(workers),
        "--log-level",
        "warning",
    ]
    server = start_module(
        "envs.serving.cli", args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy("env", url, server, 300, server.stderr.read, request_timeout_s=1)
        yield url, server.pid
    finally:
        server.terminate()
        server.wait(timeout=30)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Steps per second and per-step overhead of served sessions against in-process envs."""
    import envs

    seeds = [[s * 1000 + e for e in range(args.episodes)] for s in range(args.sessions)]
    kwargs = {"task": args.task}
    figures: dict[str, Any] = {
        "env": args.env,
        "sessions": args.sessions,
        "episodes_per_session": args.episodes,
        "server_workers": args.workers,
        "cpu_count": os.cpu_count(),
        "load_average_before": list(os.getloadavg()),
    }
    base, earned = _in_process(envs.make(args.env, **kwargs), seeds)
    figures["in_process"] = base
    steps = base["steps"]
    print(f"{args.env}: {args.sessions} sessions x {args.episodes} episodes = {steps} env calls")
    print(
        f"{'mode':12} {'steps/s':>9} {'us/step':>9} {'wait us/step':>13} {'overhead us':>12} "
        f"{'CPU us/step: client + server':>29}"
    )
    print(
        f"{'in-process':12} {base['steps_per_s']:9.0f} {base['us_per_step']:9.1f} "
        f"{base['us_per_step']:13.1f} {0:12.1f} {base['cpu_us_per_step']:29.1f}"
    )
    with _env_server(args.env, args.sessions, args.workers) as (url, pid):
        for transport in args.transport or ["http", "ws"]:
            remotes = [
                envs.remote(url, args.env, transport=transport, timeout_s=300, **kwargs)
                for _ in range(args.sessions)
            ]
            row = figures[transport] = _served(transport, remotes, seeds, pid, base, earned)
            server_us = row["server_cpu_us_per_step"]
            shown = "?" if server_us is None else f"{server_us:.0f}"
            split = f"{row['client_cpu_us_per_step']:.0f} + {shown}"
            print(
                f"{transport:12} {row['steps_per_s']:9.0f} {row['us_per_step']:9.1f} "
                f"{row['client_wait_us_per_step']:13.1f} {row['overhead_us_per_step']:12.1f} "
                f"{split:>29}"
            )
    figures["load_average_after"] = list(os.getloadavg())
    print(
        "us/step: wall time per step over all sessions; wait: mean time one client waits for a "
        "step; overhead: us/step minus in-process us/step; CPU: processor time per step of the "
        "client process and of the server process (less sensitive to a shared machine)"
    )
    return figures


def _in_process(local: Any, seeds: list[list[int]]) -> tuple[dict[str, Any], float]:
    """The baseline: every session's episodes played in-process, one after another. Returns its
    figures and the rewards earned (the served episodes must earn the same)."""
    _serve_episode(local, -1)  # warm-up: imports, caches
    began, cpu = time.perf_counter(), time.process_time()
    played = [_serve_episode(local, seed) for row in seeds for seed in row]
    elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu
    steps = sum(p[0] for p in played)
    return {
        "steps": steps,
        "seconds": elapsed,
        "steps_per_s": steps / elapsed,
        "us_per_step": 1e6 * elapsed / steps,
        "cpu_us_per_step": 1e6 * cpu / steps,
    }, sum(p[2] for p in played)


def _served(
    transport: str,
    remotes: list[Any],
    seeds: list[list[int]],
    pid: int,
    base: dict[str, Any],
    earned: float,
) -> dict[str, Any]:
    """The same episodes over `transport`, one client thread per session in `remotes` (closed
    after), all started together; checks they match the in-process ones (`base`, `earned`)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    sessions = len(remotes)
    _serve_episode(remotes[0], -1)  # warm-up: the connection pool, the server's imports
    start = threading.Barrier(sessions + 1)

    def play(index: int) -> list[Any]:
        start.wait()
        return [_serve_episode(remotes[index], seed) for seed in seeds[index]]

    with ThreadPoolExecutor(sessions) as pool:
        futures = [pool.submit(play, i) for i in range(sessions)]
        start.wait()
        began, cpu, server_cpu = time.perf_counter(), time.process_time(), _cpu_seconds(pid)
        results = [p for future in futures for p in future.result()]
        wall, cpu = time.perf_counter() - began, time.process_time() - cpu
        server_end = _cpu_seconds(pid)
    for env in remotes:
        env.close()
    steps, served_steps = base["steps"], sum(r[0] for r in results)
    served_earned = sum(r[2] for r in results)
    if served_steps != steps or abs(served_earned - earned) > 1e-6:
        raise RuntimeError(
            f"{transport}: served episodes differ from in-process ones ({served_steps} "
            f"calls, rewards {served_earned} vs {steps} calls, rewards {earned})"
        )
    server_us = (
        None
        if server_cpu is None or server_end is None
        else 1e6 * (server_end - server_cpu) / served_steps
    )
    return {
        "steps": served_steps,
        "seconds": wall,
        "steps_per_s": served_steps / wall,
        "us_per_step": 1e6 * wall / served_steps,
        "client_wait_us_per_step": 1e6 * sum(r[1] for r in results) / served_steps,
        "overhead_us_per_step": 1e6 * wall / served_steps - base["us_per_step"],
        "client_cpu_us_per_step": 1e6 * cpu / served_steps,
        "server_cpu_us_per_step": server_us,
    }
