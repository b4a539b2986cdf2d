"""``bench.py envs``: agent turns per second of every env with scripted agents (the overhead
per turn, verification included)."""

from __future__ import annotations

import argparse
import time
from typing import Any

from benchmarks.common import add_json_argument

NAME = "envs"


def add_parser(subparsers: Any) -> None:
    """Register the ``envs`` command."""
    parser = subparsers.add_parser(
        "envs",
        help="environment steps per second with scripted agents; overhead per agent turn",
        description=(
            "Plays episodes of every registered env (or --env) with scripted agents whose replies "
            "look like model output (a few sentences of working and a boxed answer, right or "
            "wrong), and reports agent turns per second and microseconds per agent turn, "
            "verification included."
        ),
    )
    parser.add_argument("--env", action="append", default=None, help="env id (repeatable)")
    parser.add_argument("--episodes", type=int, default=300, help="episodes per env")
    parser.add_argument("--task", default="arithmetic", help="task name")
    parser.add_argument("--data-path", default=None, help="local JSONL for the task")
    add_json_argument(parser)
    parser.set_defaults(func=run)


def _reply(problem: dict[str, Any], agent: str, turn: int) -> str:
    if agent.startswith("critic"):
        return "Step two adds instead of subtracting, so the total is off.\nVerdict: incorrect"
    answer = problem["answer"] if (turn + len(agent)) % 2 else problem["answer"] + "1"
    return (
        "First I write down what is known. Then I apply each change in order, one equation per "
        f"sentence, and check the result by working backwards. The final answer is \\boxed{{{answer}}}."
    )


def _play_env(env: Any, seed: int) -> int:
    """One episode with scripted replies; returns the number of agent turns played."""
    from pettingzoo import ParallelEnv

    turns = 0
    if isinstance(env.unwrapped, ParallelEnv):
        env.reset(seed=seed)
        problem = env.unwrapped.problem
        while env.agents:
            env.step({a: _reply(problem, a, turns) for a in env.agents})
            turns += len(env.possible_agents)
        return turns
    env.reset(seed=seed)
    problem = env.unwrapped.problem
    for agent in env.agent_iter():
        _, _, terminated, truncated, _ = env.last()
        if terminated or truncated:
            env.step(None)
            continue
        env.step(_reply(problem, agent, turns))
        turns += 1
    return turns


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Agent turns per second of each env with scripted agents."""
    import envs

    figures: dict[str, Any] = {"episodes": args.episodes, "task": args.task, "envs": {}}
    print(f"{'env':22} {'episodes':>8} {'turns':>7} {'turns/s':>10} {'us/turn':>9}")
    for env_id in args.env or envs.list_envs():
        env = envs.make(env_id, task=args.task, data_path=args.data_path)
        _play_env(env, seed=-1)  # warm-up: imports, caches
        start = time.perf_counter()
        turns = sum(_play_env(env, seed) for seed in range(args.episodes))
        elapsed = time.perf_counter() - start
        row = {
            "turns": turns,
            "seconds": elapsed,
            "turns_per_s": turns / elapsed,
            "us_per_turn": 1e6 * elapsed / turns,
        }
        figures["envs"][env_id] = row
        print(
            f"{env_id:22} {args.episodes:8d} {turns:7d} {row['turns_per_s']:10.0f} "
            f"{row['us_per_turn']:9.1f}"
        )
    worst = max(r["us_per_turn"] for r in figures["envs"].values())
    figures["worst_us_per_turn"] = worst
    print(f"worst overhead per agent turn: {worst:.1f} us (target < 1000 us)")
    return figures
