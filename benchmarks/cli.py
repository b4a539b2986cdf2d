"""Benchmarks, one subcommand each: ``python scripts/bench.py <command> --help``.

Commands:
    rollout     generated tokens per second of the batched rollout engine vs the naive loop.
    train       one multi-agent GRPO step vs a plain TRL GRPO step, time per processed token.
    step        where a step of the main job goes: prefill, decode, env and verifier, the
                logprob pass, the loss, backward, the optimizer, logging.
    envs        agent turns per second of every env with scripted agents (overhead per turn).
    verifiers   verifications per second of the ``math`` verifier against plain math-verify
                (``verify(parse(ref), parse(response))``) on the same GSM8K-style inputs.
    parity      the ``math`` verifier and plain math-verify on math-verify's own regression
                tables (``--tests``: a clone of its repository).
    robustness  false-positive and false-negative rates and time per call of every verifier
                (and plain math-verify and TRL's ``accuracy_reward``) on the committed corpus
                of correct answers in many notations and of attacks (``scripts/robustness.py``).
    sandbox     wall time per sandboxed run (``print(1)``), hook mode vs bubblewrap, and
                ``run_many`` throughput (runs per second) at a few worker counts.
    serve       the env server under load (``scripts/serve_envs.py``): steps per second of many
                concurrent sessions over HTTP and WebSocket, and the overhead per step against
                the same episodes in-process.
    soak        the env and reward servers under load and faults for minutes (client kills, a
                restart of each, refused requests): the sessions' contract, step latency p50 and
                p99, the servers' resident memory (also ``scripts/soak.py``, ``mathteams soak``).

Each command is one module of ``benchmarks/`` (``verifiers.py``, ``envs.py``, ...;
shared helpers in ``common.py``). To add a command, write a module there with ``NAME``,
``add_parser(subparsers)``, which registers its flags and ``set_defaults(func=run)``, and
``run(args)``, which returns a JSON-serialisable dict of figures, and append it to `COMMANDS`.
Also ``mathteams bench <command>``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from benchmarks import (
    envs,
    parity,
    robustness,
    rollout,
    sandbox,
    serve,
    soak,
    step,
    train,
    verifiers,
)

# The commands in the order --help lists them: command name -> its module.
COMMANDS = {
    m.NAME: m
    for m in (verifiers, parity, envs, rollout, train, step, robustness, sandbox, serve, soak)
}


def make_parser() -> argparse.ArgumentParser:
    """The parser with one subcommand per entry of `COMMANDS` (its prog: the command's name)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS.values():
        module.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one benchmark command; write its figures as JSON when ``--json`` is given."""
    args = make_parser().parse_args(argv)
    figures = args.func(args)
    path = getattr(args, "json", None)
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
