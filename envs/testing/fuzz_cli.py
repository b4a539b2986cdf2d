"""Fuzz every environment and every verifier with adversarial text, with a large budget.

Runs the properties of ``envs.testing.fuzz`` (the same ones the test suite runs with a small
budget) outside pytest: every env in ``envs.list_envs()`` on the ``arithmetic`` task and on a
task with LaTeX/fraction references, every verifier in ``rewards.list_verifiers()`` (responses, bad
references, from a thread), ``verify_batch``, the TRL reward adapter, the extraction functions
and the inputs the fuzz once found slow. Every time bound is enforced here (the test suite only
reports them). Failing examples are counted, not shrunk, and the run goes on; it prints a table
(target, inputs tried, failures, symbolic timeouts, calls over their bound, slowest call) and
exits 1 on any failure. Needs Hypothesis (``pip install 'mathteams[fuzz]'``).

The ``symbolic[<kind>]`` targets time the `math` verifier on answers costly to check
symbolically (huge binomials, integrals of towers, sums with huge bounds, towers of ``e``, ...);
a second table gives their p50, p99 and max seconds per call, per kind and over all of them.

    python scripts/fuzz.py --examples 2000 --json fuzz.json
    python scripts/fuzz.py --examples 200 --only 'env\\[' --env-examples math/tool-v0=20
    python scripts/fuzz.py --examples 50 --seed 0 --only '^symbolic\\['
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--examples", type=int, default=2000, help="Hypothesis examples per target (2000)"
    )
    parser.add_argument("--json", metavar="PATH", help="also write the table as JSON here")
    parser.add_argument("--only", metavar="REGEX", help="run only targets whose name matches")
    parser.add_argument(
        "--env-examples",
        metavar="ENV_ID=N",
        action="append",
        default=[],
        help="examples for one env (repeatable), e.g. math/tool-v0=200 for a slow env",
    )
    parser.add_argument(
        "--math-budget-s",
        "--math-timeout",
        dest="math_budget_s",
        type=float,
        default=None,
        help="symbolic budget of the math-verify based verifiers, seconds per answer (default: "
        "their own, 1 s; --math-timeout is its older name)",
    )
    parser.add_argument("--seed", type=int, default=None, help="Hypothesis seed (random)")
    parser.add_argument(
        "--max-failures", type=int, default=3, help="stop a target after this many failures (3)"
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=None,
        help="stop a target's examples after this many seconds (no limit); the table shows "
        "how many inputs each target got",
    )
    return parser


def _env_examples(entries: list[str]) -> dict[str, int]:
    """The ``--env-examples`` entries as ``{env_id: examples}``."""
    counts = {}
    for entry in entries:
        env_id, sep, value = entry.partition("=")
        if not sep or not value.isdigit():
            raise SystemExit(f"--env-examples: expected ENV_ID=N, got {entry!r}")
        counts[env_id] = int(value)
    return counts


def symbolic_summary(collector: Any) -> dict[str, dict[str, float]]:
    """Seconds per `math` call on each kind of costly answer (the ``symbolic[<kind>]`` targets)
    and on all of them together (``all``): calls, p50, p99, max, symbolic timeouts."""
    from envs.testing.fuzz.timing import percentile

    with collector.lock:
        runs = {
            name[len("symbolic[") : -1]: (list(durations), collector.stats[name].timeouts)
            for name, durations in sorted(collector.durations.items())
            if name.startswith("symbolic[") and durations
        }
    if not runs:
        return {}
    every = [seconds for durations, _ in runs.values() for seconds in durations]
    runs["all"] = (every, sum(timeouts for _, timeouts in runs.values()))
    return {
        kind: {
            "calls": len(durations),
            "p50_s": round(percentile(durations, 0.50), 4),
            "p99_s": round(percentile(durations, 0.99), 4),
            "max_s": round(max(durations), 4),
            "timeouts": timeouts,
        }
        for kind, (durations, timeouts) in runs.items()
    }


def symbolic_table(summary: dict[str, dict[str, float]]) -> str:
    """`symbolic_summary` as a markdown table."""
    rows = [
        "| costly answers | calls | p50 s | p99 s | max s | symbolic timeouts |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for kind, s in summary.items():
        rows.append(
            f"| {kind} | {s['calls']} | {s['p50_s']:.3f} | {s['p99_s']:.3f} | {s['max_s']:.3f} | "
            f"{s['timeouts']} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    """The command: 1 when any target failed, else 0."""
    return 1 if run(argv)["failures"] else 0


def run(argv: list[str] | None = None) -> dict[str, Any]:
    """Fuzz the targets, print the table and return the summary (``--json``'s content)."""
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.examples < 1:
        raise SystemExit(f"--examples must be >= 1, got {args.examples}")
    try:  # envs.testing.fuzz says what to install when Hypothesis is missing
        from envs.testing import fuzz as harness
    except ImportError as err:
        raise SystemExit(f"{parser.prog}: {err}") from err
    import hypothesis

    counts = _env_examples(args.env_examples)
    harness.register_profiles()
    base = hypothesis.settings(hypothesis.settings.get_profile("long"), derandomize=False)
    started = time.perf_counter()
    targets = harness.all_targets(args.math_budget_s, env_scale={}, pattern=args.only)
    if not targets:
        raise SystemExit(f"no target matches {args.only!r}")
    for target in targets:
        env_id = target.name[4:].split(":")[0] if target.name.startswith("env[") else None
        examples = counts.get(env_id, round(args.examples * target.scale))
        _fuzz_target(harness, target, base, examples, args)
    summary = _report(harness.COLLECTOR, args.examples, started)
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


def _fuzz_target(
    harness: Any, target: Any, base: Any, examples: int, args: argparse.Namespace
) -> None:
    """Fuzz one target with `examples` examples and print its line: inputs, failures, slowest."""
    t0 = time.perf_counter()
    stats = harness.run_target(
        target,
        base,
        examples,
        collect=True,
        seed=args.seed,
        max_failures=args.max_failures,
        max_seconds=args.max_seconds,
        enforce_bounds=True,
    )
    abandoned = (
        f", {stats.nondeterministic} runs abandoned (draws differed on replay)"
        if stats.nondeterministic
        else ""
    )
    print(
        f"{target.name}: {stats.inputs} inputs, {stats.failures} failures, "
        f"max {stats.max_s:.3f} s/call ({time.perf_counter() - t0:.0f} s){abandoned}",
        flush=True,
    )


def _report(collector: Any, examples: int, started: float) -> dict[str, Any]:
    """Print the tables, each target's first failure and the totals; return the summary."""
    print()
    print(collector.table())
    symbolic = symbolic_summary(collector)
    if symbolic:
        print()
        print(symbolic_table(symbolic))
    total = collector.as_json()
    failures = {name: s["first_failure"] for name, s in total.items() if s["failures"]}
    for name, first in failures.items():
        print(f"\nFIRST FAILURE of {name}: {first}")
    summary = {
        "examples_per_target": examples,
        "seconds": round(time.perf_counter() - started, 1),
        "inputs": sum(s["inputs"] for s in total.values()),
        "failures": sum(s["failures"] for s in total.values()),
        "targets": total,
        "symbolic": symbolic,
    }
    print(f"\n{summary['inputs']} inputs, {summary['failures']} failures in {summary['seconds']} s")
    return summary


if __name__ == "__main__":
    sys.exit(main())
