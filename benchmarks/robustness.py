"""``bench.py robustness``: false-positive and false-negative rates and time per call of every
verifier (and plain math-verify and TRL's ``accuracy_reward``) on the committed corpus of correct
answers in many notations and of attacks (`benchmarks.corpus`, written by
``scripts/robustness.py``), with each verifier's p50, p99 and max seconds per call.

``bench.py robustness --hostile`` times only the ``math`` verifier, on every hostile input at
hand (`hostile_cases`): the corpus's attacks and huge inputs, the fuzz's building blocks
(`envs.testing.fuzz.generators`: inputs that were once slow, special numbers, deep nestings of
each kind, long numbers) against its references, and the structural cases of issue 42 (100
redundant parentheses, ``(1+x)^{100000}``, towers, factorials)."""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import corpus as robustness
from benchmarks import scoring
from benchmarks.common import add_json_argument

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
    parser.add_argument(
        "--hostile",
        action="store_true",
        help="time only the math verifier on every hostile input (the corpus's attacks, the "
        "fuzz's building blocks, issue 42's cases): p50, p99 and max seconds per call and the "
        "slowest calls",
    )
    add_json_argument(parser)
    parser.set_defaults(func=run)


def percentiles(seconds: list[float]) -> dict[str, float | int | None]:
    """``calls``, ``p50_s``, ``p99_s`` (nearest rank) and ``max_s`` of a list of durations."""
    if not seconds:
        return {"calls": 0, "p50_s": None, "p99_s": None, "max_s": None}
    ordered = sorted(seconds)
    rank = max(0, math.ceil(0.99 * len(ordered)) - 1)
    return {
        "calls": len(ordered),
        "p50_s": round(statistics.median(ordered), 4),
        "p99_s": round(ordered[rank], 4),
        "max_s": round(ordered[-1], 4),
    }


def _latency_line(name: str, figures: dict[str, Any]) -> str:
    return (
        f"{name}: {figures['calls']} calls, per call p50 {figures['p50_s']} s, "
        f"p99 {figures['p99_s']} s, max {figures['max_s']} s"
    )


# Issue 42's hostile answers (boxed) and references: redundant nesting, huge powers and towers.
_STRUCTURAL_CASES = (
    ("(" * 100 + "7" + ")" * 100, "7"),
    ("(" * 100 + "x+1" + ")" * 100, "x+1"),
    ("\\left(" * 100 + "7" + "\\right)" * 100, "7"),
    ("{" * 40 + "7" + "}" * 40, "7"),
    ("(1+x)^{100000}", "(1+x)^{100000}"),
    ("(1+x)^{100000}", "18"),
    ("(1+x)^{100000}", "2\\sqrt{3}"),
    ("x^{100000}", "2"),
    ("10^{10^{10}}", "18"),
    ("(10^{10})!", "18"),
    ("100000!", "18"),
    ("+".join(["\\frac{1}{2}"] * 300), "150"),
    ("\\frac{" * 20 + "1" + "}{2}" * 20, "7"),
)
_FUZZ_REFERENCES = ("18", "7", "\\frac{1}{2}", "x^2+2x+1", "(1, 2)", "2^{10}", "\\pi", "x")


def hostile_cases(items: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """``(id, response, reference)`` for every hostile input: the corpus's attacks and huge
    items for ``math`` (`items`), the fuzz's building blocks (when hypothesis is installed: the
    fuzz is a dev tool) against its references, and `_STRUCTURAL_CASES`."""
    cases = [
        (item["id"], item["text"], item["reference"])
        for item in items
        if item["kind"] in scoring.APPLIES["math"]
        and (item["expected"] == 0 or item["category"] == "huge")
    ]
    cases += [
        (f"issue42-{i:02d}", f"\\boxed{{{text}}}", reference)
        for i, (text, reference) in enumerate(_STRUCTURAL_CASES)
    ]
    try:
        from envs.testing.fuzz import generators as fuzz
    except ImportError:  # hypothesis is a dev dependency
        return cases
    cases += [(f"slow-{name}", text, "18") for name, (text, _s) in fuzz.KNOWN_SLOW.items()]
    for number in fuzz.SPECIAL_NUMBERS:
        cases += [(f"special-{number}|{r}", f"\\boxed{{{number}}}", r) for r in _FUZZ_REFERENCES]
    for template in fuzz.NESTINGS:
        for depth in (10, 40, 100, 1000):
            for mode in ("balanced", "unclosed", "closers"):
                text = "\\boxed{" + fuzz._nest(template, depth, mode) + "}"
                cases += [(f"nest-{template[0]}{depth}{mode}|{r}", text, r) for r in ("7", "18")]
    for kind in ("int", "neg", "grouped", "tiny", "frac", "percent"):
        for digits in (30, 200, 2000):
            text = "\\boxed{" + fuzz._big_number(digits, kind) + "}"
            cases += [(f"big-{kind}{digits}|{r}", text, r) for r in ("18", "\\frac{1}{2}")]
    return cases


def run_hostile(items: list[dict[str, Any]]) -> dict[str, Any]:
    """Time the ``math`` verifier on `hostile_cases`; print p50, p99, max and the slowest."""
    from rewards import get_verifier

    verifier = get_verifier("math")
    verifier.verify(*scoring.WARM_UP["expression"])  # start the helper outside the timing
    rows = []
    for case_id, text, reference in hostile_cases(items):
        started = time.perf_counter()
        verdict = verifier.verify(text, reference)
        seconds = time.perf_counter() - started
        rows.append(
            {
                "id": case_id,
                "seconds": seconds,
                "score": verdict.score,
                "reason": verdict.reason[:100],
            }
        )
    figures = percentiles([row["seconds"] for row in rows])
    slowest = sorted(rows, key=lambda row: -row["seconds"])[:10]
    figures["timeouts"] = sum("timeout" in row["reason"] for row in rows)
    figures["slowest"] = [{**row, "seconds": round(row["seconds"], 4)} for row in slowest]
    print(_latency_line("math on hostile inputs", figures) + f", {figures['timeouts']} timeouts")
    for row in slowest:
        print(f"  {row['seconds']:.3f} s  {row['id'][:50]!r}: {row['reason']}")
    return {"hostile": figures}


def _robustness_call(name: str, args: argparse.Namespace, stack: Any) -> Any:
    """The scoring call for one verifier name (see `benchmarks.corpus`), or None."""
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
    if args.hostile:
        return {"corpus": str(args.corpus), **run_hostile(items)}
    results: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        for name in args.verifiers:
            call = _robustness_call(name, args, stack)
            if call is None:
                results[name] = {"skipped_reason": "no --learned DIR given"}
                continue
            seconds: list[float] = []
            results[name] = scoring.score_verifier(name, _recording(call, seconds), items)
            results[name]["latency"] = percentiles(seconds[1:])  # not the warm-up call
            print(f"{name}: done", file=sys.stderr)
    print(f"corpus: {args.corpus} ({len(items)} items)")
    print(scoring.table(results))
    for name, figures in results.items():
        if "latency" in figures:
            print(_latency_line(name, figures["latency"]))
    return {"corpus": str(args.corpus), "items": len(items), "verifiers": results}


def _recording(call: Any, seconds: list[float]) -> Any:
    """`call`, appending the seconds of each of its calls to `seconds`."""

    def recorded(text: str, reference: str) -> tuple[float, float, str]:
        result = call(text, reference)
        seconds.append(result[1])
        return result

    return recorded
