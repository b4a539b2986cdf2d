"""``bench.py sandbox``: wall time per sandboxed run (``print(1)``), hook mode against
bubblewrap, and ``run_many`` throughput (runs per second) at a few worker counts."""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

from benchmarks.common import add_json_argument

NAME = "sandbox"


def add_parser(subparsers: Any) -> None:
    """Register the ``sandbox`` command."""
    parser = subparsers.add_parser(
        "sandbox",
        help="sandbox overhead per run (hook vs bwrap) and run_many throughput",
        description=(
            "Times run_code('print(1)') one after another in each isolation mode (the median "
            "is the per-run overhead: interpreter start-up, the bootstrap, and under bwrap the "
            "namespaces and mounts), then run_many over --programs short programs at each "
            "--workers count, in runs per second."
        ),
    )
    parser.add_argument("--runs", type=int, default=30, help="sequential runs per mode")
    parser.add_argument("--programs", type=int, default=64, help="programs per run_many batch")
    parser.add_argument(
        "--workers",
        type=int,
        action="append",
        default=None,
        help="run_many max_workers (repeatable; default 2 and 8)",
    )
    parser.add_argument(
        "--isolation",
        action="append",
        default=None,
        choices=["hook", "bwrap"],
        help="modes to time (repeatable; default both)",
    )
    add_json_argument(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Per-run wall time and run_many throughput of each isolation mode."""
    import warnings

    from envs.sandbox import SandboxConfig, run_code, run_many

    figures: dict[str, Any] = {"runs": args.runs, "programs": args.programs, "modes": {}}
    for isolation in args.isolation or ["hook", "bwrap"]:
        with warnings.catch_warnings():  # hook mode's warning, once is enough
            warnings.simplefilter("ignore")
            config = SandboxConfig(isolation=isolation)
        run_code("print(1)", config)  # warm-up: caches, the interpreter probe
        times = []
        for _ in range(args.runs):
            began = time.perf_counter()
            result = run_code("print(1)", config)
            times.append(time.perf_counter() - began)
            if result.stdout != "1\n":
                raise RuntimeError(f"{isolation}: print(1) gave {result.observation()}")
        mode: dict[str, Any] = {
            "median_ms": 1000 * statistics.median(times),
            "p90_ms": 1000 * sorted(times)[int(0.9 * (len(times) - 1))],
            "run_many": {},
        }
        codes = [f"print(sum(range({n})))" for n in range(args.programs)]
        for workers in args.workers or [2, 8]:
            began = time.perf_counter()
            results = run_many(codes, config, max_workers=workers)
            elapsed = time.perf_counter() - began
            if not all(r.ok for r in results):
                raise RuntimeError(f"{isolation}: a run_many program failed")
            mode["run_many"][str(workers)] = {
                "seconds": elapsed,
                "runs_per_s": len(codes) / elapsed,
            }
        figures["modes"][isolation] = mode
        many = ", ".join(
            f"{w} workers {m['runs_per_s']:.1f} runs/s" for w, m in mode["run_many"].items()
        )
        print(
            f"{isolation:>5}: print(1) median {mode['median_ms']:.1f} ms "
            f"(p90 {mode['p90_ms']:.1f} ms); run_many x{args.programs}: {many}"
        )
    figures["cpu_count"] = os.cpu_count()
    return figures
