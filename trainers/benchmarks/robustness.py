"""``bench.py robustness``: false-positive and false-negative rates and time per call of every
verifier (and plain math-verify and TRL's ``accuracy_reward``) on the committed corpus of correct
answers in many notations and of attacks (`trainers.benchmarks.corpus`, written by
``scripts/robustness.py``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from trainers.benchmarks import corpus as robustness
from trainers.benchmarks import scoring
from trainers.benchmarks.common import add_json_argument

NAME = "robustness"

ROBUSTNESS_VERIFIERS = (
    "math",
    "gsm8k",
    "label",
    "learned",
    "remote",
    "math_verify",
    "trl_accuracy_reward",
)


def add_parser(subparsers: Any) -> None:
    """Register the ``robustness`` command."""
    parser = subparsers.add_parser(
        "robustness",
        help="how often each verifier is fooled (false positives) or misses (false negatives)",
        description=(
            "Scores every verifier on the robustness corpus (tests/data/robustness.jsonl, "
            "written by scripts/robustness.py): correct answers in many notations and attacks "
            "(answer spraying, hedges, close numbers, unit and format tricks, LaTeX that breaks "
            "parsers, prompt injection, huge and deeply nested inputs). Baselines run in a "
            "child process with a hard deadline per call."
        ),
    )
    parser.add_argument(
        "--corpus", type=Path, default=None, help="a corpus file (default: robustness.CORPUS)"
    )
    parser.add_argument(
        "--verifiers",
        nargs="+",
        default=list(ROBUSTNESS_VERIFIERS),
        choices=ROBUSTNESS_VERIFIERS,
        help="which to score (default: all)",
    )
    parser.add_argument(
        "--learned",
        type=Path,
        default=None,
        metavar="DIR",
        help="a learned verifier's model folder (python scripts/train_verifier.py --scripted "
        "writes one to outputs/verifier/model); without it the learned row is not run",
    )
    parser.add_argument(
        "--deadline", type=float, default=60.0, help="seconds a baseline call may take"
    )
    add_json_argument(parser)
    parser.set_defaults(func=run)


def _robustness_call(name: str, args: argparse.Namespace, stack: Any) -> Any:
    """The scoring call for one verifier name (see `trainers.benchmarks.corpus`), or None."""
    from rewards import RemoteVerifier, get_verifier

    if name in scoring.BASELINES:
        baseline = scoring.IsolatedBaseline(name, args.deadline)
        stack.callback(baseline.close)
        return baseline
    if name == "learned":
        if args.learned is None:
            return None
        from trainers.verifier.model import LearnedVerifier

        return scoring.timed(LearnedVerifier(args.learned))
    if name == "remote":
        from rewards.serving.http import BackgroundServer
        from rewards.serving.server import create_app

        server = BackgroundServer(create_app({"math": get_verifier("math")})).start()
        stack.callback(server.stop)
        return scoring.timed(RemoteVerifier(server.url, verifier="math"))
    return scoring.timed(get_verifier(name))


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Score each verifier on the corpus and print the table."""
    import contextlib
    import logging

    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    if args.corpus is None and not robustness.CORPUS.is_file():  # installed, not a checkout
        args.corpus = "the corpus built in memory (identical to tests/data/robustness.jsonl)"
        items = robustness.parse_corpus(robustness.render(robustness.build_corpus()))
    else:
        args.corpus = args.corpus or robustness.CORPUS
        items = robustness.load_corpus(args.corpus)
    results: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        for name in args.verifiers:
            call = _robustness_call(name, args, stack)
            if call is None:
                results[name] = {"skipped_reason": "no --learned DIR given"}
                continue
            results[name] = scoring.score_verifier(name, call, items)
            print(f"{name}: done", file=sys.stderr)
    print(f"corpus: {args.corpus} ({len(items)} items)")
    print(scoring.table(results))
    return {"corpus": str(args.corpus), "items": len(items), "verifiers": results}
