"""``bench.py verifiers``: verifications per second of the ``math`` verifier against plain
math-verify (``verify(parse(ref), parse(response))``) on the same GSM8K-style inputs, and where
their verdicts differ."""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import REPO, add_json_argument

NAME = "verifiers"
DEFAULT_GSM8K = REPO.parent / "shared" / "data" / "gsm8k" / "test.jsonl"


def add_parser(subparsers: Any) -> None:
    """Register the ``verifiers`` command."""
    parser = subparsers.add_parser(
        "verifiers",
        help="math verifier vs plain math-verify: verifications per second and verdict agreement",
        description=(
            "Times MathVerifier.verify and plain math-verify verify(parse(ref), parse(response)) "
            "on GSM8K reference solutions: each solution once with its own final answer and once "
            "with the final changed, so half the verdicts should be correct."
        ),
    )
    parser.add_argument(
        "--data-path",
        type=Path,
        default=DEFAULT_GSM8K if DEFAULT_GSM8K.exists() else None,
        help="GSM8K JSONL (question, answer ending in '#### N') or MATH JSONL (solution, answer: "
        "each solution against its answer and another problem's); default ../shared/data/gsm8k/"
        "test.jsonl when present, else generated GSM8K-style solutions",
    )
    parser.add_argument("--limit", type=int, default=None, help="use only the first N problems")
    parser.add_argument(
        "--generate",
        type=int,
        default=None,
        metavar="N",
        help="use N generated GSM8K-style solutions instead of a file (500 when no file is found)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed for changed finals and data")
    parser.add_argument("--repeat", type=int, default=3, help="timed passes; the best one counts")
    parser.add_argument("--show", type=int, default=10, help="differing verdicts to print")
    add_json_argument(parser)
    parser.set_defaults(func=run)


def _generated_solutions(count: int, seed: int) -> list[dict[str, str]]:
    """GSM8K-style solutions: calculator annotations, dollars, thousands commas, '#### N'."""
    rng = random.Random(seed)
    rows = []
    for index in range(count):
        a, b, c = rng.randint(2, 60), rng.randint(2, 40), rng.randint(1, 900)
        product = a * b
        total = product * c if index % 7 == 0 else product + c
        op = "*" if index % 7 == 0 else "+"
        final = f"{total:,}" if index % 5 == 0 else str(total)
        answer = (
            f"Each box holds {a} * {b} = <<{a}*{b}={product}>>{product} items.\n"
            f"So the total is {product} {op} {c} = $<<{product}{op}{c}={total}>>{total:,}.\n"
            f"#### {final}"
        )
        rows.append({"question": f"generated problem {index}", "answer": answer})
    return rows


def _load_pairs(args: argparse.Namespace) -> tuple[list[tuple[str, str, bool]], str]:
    if args.data_path is not None and args.generate is None:
        lines = Path(args.data_path).read_text(encoding="utf-8").splitlines()
        rows = [json.loads(line) for line in lines if line.strip()]
        source = str(args.data_path) + (
            " (MATH solutions)" if rows and "solution" in rows[0] else ""
        )
    else:
        count = args.generate or 500
        rows = _generated_solutions(count, args.seed)
        source = f"generated ({count} GSM8K-style solutions)"
    rows = rows[: args.limit] if args.limit else rows
    if rows and "solution" in rows[0]:
        return _math_pairs(rows), source
    rng = random.Random(args.seed)
    pairs = []
    for row in rows:
        body, final = row["answer"].rsplit("####", 1)
        final = final.strip()
        wrong = int(final.replace(",", "")) + rng.choice([-3, -2, -1, 1, 2, 3, 10])
        pairs.append((row["answer"], final, True))
        pairs.append((f"{body}#### {wrong}", final, False))
    return pairs, source


def _math_pairs(rows: Sequence[dict[str, str]]) -> list[tuple[str, str, bool]]:
    """MATH rows (``solution``, ``answer``): each solution against its own answer, and against
    the next answer of another value (by `rewards.extract.canonical_answer`)."""
    from rewards.extract import canonical_answer

    pairs = []
    for index, row in enumerate(rows):
        pairs.append((row["solution"], row["answer"], True))
        key = canonical_answer(row["answer"])
        for step in range(1, len(rows)):
            other = rows[(index + step) % len(rows)]["answer"]
            if canonical_answer(other) != key:
                pairs.append((row["solution"], other, False))
                break
    return pairs


def _rate(
    fn: Callable[[str, str], bool],
    pairs: Sequence[tuple[str, str, bool]],
    repeat: int,
    before: Callable[[], None] = lambda: None,
) -> tuple[list[bool], float, float]:
    """Verdicts, verifications per second and seconds of the fastest of `repeat` passes;
    `before` runs ahead of each pass (it clears caches, so later passes are not flattered)."""
    best = float("inf")
    verdicts: list[bool] = []
    for _ in range(max(1, repeat)):
        before()
        started = time.perf_counter()
        verdicts = [fn(response, reference) for response, reference, _ in pairs]
        best = min(best, time.perf_counter() - started)
    return verdicts, len(pairs) / best, best


def _clear_caches() -> None:
    """Empty the functools caches of the number parsing the fast verifier runs (those of
    `rewards.numeric` and `rewards.verifiers`; found by what they are, not by private name)."""
    from rewards import numeric, verifiers

    for module in (numeric, verifiers):
        for value in vars(module).values():
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Time both verifiers on the same inputs and compare their verdicts."""
    import logging

    logging.getLogger("math_verify").setLevel(logging.ERROR)
    pairs, source = _load_pairs(args)
    figures = _compare(pairs, source, args.repeat)
    _print_figures(figures, pairs, args.show)
    return figures


def _compare(pairs: Sequence[tuple[str, str, bool]], source: str, repeat: int) -> dict[str, Any]:
    """The figures: both verifiers' rates over `pairs` and where their verdicts differ."""
    from math_verify import parse, verify

    from rewards import MathVerifier, extract_answer

    ours = MathVerifier()

    def ours_fn(response: str, reference: str) -> bool:
        return ours.verify(response, reference).correct

    # MATH answers are LaTeX: math-verify finds them only inside math delimiters.
    wrap = "${}$" if source.endswith("(MATH solutions)") else "{}"

    def plain_fn(response: str, reference: str) -> bool:
        return bool(verify(parse(wrap.format(reference)), parse(response)))

    for fn in (ours_fn, plain_fn):  # warm up imports and caches outside the timing
        for response, reference, _ in pairs[:20]:
            fn(response, reference)
    our_verdicts, our_rate, our_s = _rate(ours_fn, pairs, repeat, _clear_caches)
    plain_verdicts, plain_rate, plain_s = _rate(plain_fn, pairs, repeat)
    differ = [
        i for i, (a, b) in enumerate(zip(our_verdicts, plain_verdicts, strict=True)) if a != b
    ]
    # Same comparison, but math-verify is handed our extracted answer: isolates the fast path's
    # number rules from the two extractors' differences.
    same_input = [
        bool(verify(parse(wrap.format(ref)), parse(extract_answer(resp) or "")))
        for resp, ref, _ in pairs
    ]
    differ_same_input = sum(a != b for a, b in zip(our_verdicts, same_input, strict=True))
    expected = [want for _, _, want in pairs]
    return {
        "source": source,
        "verifications": len(pairs),
        "repeat": repeat,
        "ours_per_s": round(our_rate, 1),
        "plain_math_verify_per_s": round(plain_rate, 1),
        "speedup": round(our_rate / plain_rate, 2),
        "ours_seconds": round(our_s, 3),
        "plain_seconds": round(plain_s, 3),
        "verdicts_differ": len(differ),
        "verdicts_differ_same_extracted_answer": differ_same_input,
        "ours_match_expected": sum(a == b for a, b in zip(our_verdicts, expected, strict=True)),
        "plain_match_expected": sum(a == b for a, b in zip(plain_verdicts, expected, strict=True)),
        "differing": [
            {
                "index": i,
                "reference": pairs[i][1],
                "expected": pairs[i][2],
                "ours": our_verdicts[i],
                "plain": plain_verdicts[i],
                "ours_extracted": extract_answer(pairs[i][0]),
                "plain_extracted": [str(x) for x in parse(pairs[i][0])],
            }
            for i in differ
        ],
    }


def _print_figures(
    figures: dict[str, Any], pairs: Sequence[tuple[str, str, bool]], show: int
) -> None:
    """The comparison as text, with the first `show` differing verdicts."""
    source, differ = figures["source"], figures["verdicts_differ"]
    our_rate, our_s = figures["ours_per_s"], figures["ours_seconds"]
    plain_rate, plain_s = figures["plain_math_verify_per_s"], figures["plain_seconds"]
    print(f"inputs: {source}; {len(pairs)} verifications (half correct, half changed finals)")
    print(f"ours (math verifier):  {our_rate:10.1f} verifications/s ({our_s:.3f} s)")
    print(f"plain math-verify:     {plain_rate:10.1f} verifications/s ({plain_s:.3f} s)")
    print(f"speedup:               {figures['speedup']:10.2f}x")
    print(
        f"verdicts differ:       {differ} (expected verdict: ours "
        f"{figures['ours_match_expected']}/{len(pairs)}, plain {figures['plain_match_expected']}"
        f"/{len(pairs)}); with math-verify given our extracted answer: "
        f"{figures['verdicts_differ_same_extracted_answer']}"
    )
    for item in figures["differing"][:show]:
        print(
            f"  #{item['index']}: ref {item['reference']} expected {item['expected']} "
            f"ours {item['ours']} ({item['ours_extracted']!r}) "
            f"plain {item['plain']} ({item['plain_extracted']})"
        )
