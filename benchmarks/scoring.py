"""Scoring verifiers on the robustness corpus (`benchmarks.corpus`): each verifier's
false-positive and false-negative rates per category and its time per item, against plain
math-verify and TRL's accuracy reward run in an isolated process (`IsolatedBaseline`)
(``python scripts/bench.py robustness``)."""

from __future__ import annotations

import multiprocessing
import statistics
import time
from collections.abc import Callable
from typing import Any

APPLIES = {
    "math": ("number", "expression"),
    "gsm8k": ("number",),
    "label": ("label",),
    "learned": ("number", "expression"),
    "remote": ("number", "expression"),
    "math_verify": ("number", "expression"),
    "trl_accuracy_reward": ("number", "expression"),
}
BASELINES = ("math_verify", "trl_accuracy_reward")
WARM_UP = {
    "number": ("\\boxed{\\sqrt{4}}", "2"),
    "expression": ("\\boxed{x+1}", "1+x"),
    "label": ("Answer: neutral", "neutral"),
}


def _baseline_call(name: str, text: str, reference: str) -> float:
    """One verdict of a baseline, called the way its users call it."""
    if name == "math_verify":
        from math_verify import parse, verify

        return float(verify(parse(f"${reference}$"), parse(text)))
    from trl.rewards import accuracy_reward

    score = accuracy_reward([[{"role": "assistant", "content": text}]], [f"${reference}$"])[0]
    return -1.0 if score is None else float(score)  # None: TRL skips the row (gold unparsed)


def _baseline_worker(connection: Any) -> None:
    import logging

    logging.disable(logging.CRITICAL)
    while True:
        request = connection.recv()
        if request is None:
            return
        started = time.perf_counter()
        try:
            score, error = _baseline_call(*request), ""
        except Exception as exc:  # noqa: BLE001 - a baseline's crash is a figure, not a stop
            score, error = 0.0, type(exc).__name__
        connection.send((score, time.perf_counter() - started, error))


class IsolatedBaseline:
    """A baseline in a forked child with a hard deadline per call: plain math-verify has no
    bound of its own that always holds (`rewards.symbolic` explains why), and one input of the
    corpus must not stop the bench."""

    def __init__(self, name: str, deadline_s: float) -> None:
        self.name, self.deadline_s = name, deadline_s
        self._start()

    def _start(self) -> None:
        context = multiprocessing.get_context("fork")
        self.connection, child = context.Pipe()
        self.process = context.Process(target=_baseline_worker, args=(child,), daemon=True)
        self.process.start()

    def __call__(self, text: str, reference: str) -> tuple[float, float, str]:
        """(score, seconds, error); a call past the deadline scores 0 with error "timeout"."""
        self.connection.send((self.name, text, reference))
        if self.connection.poll(self.deadline_s):
            return self.connection.recv()
        self.close()
        self._start()
        return 0.0, self.deadline_s, "timeout"

    def close(self) -> None:
        self.process.kill()
        self.process.join()


def _rates(rows: list[dict[str, Any]]) -> dict[str, Any]:
    correct = [r for r in rows if r["expected"] == 1]
    attacks = [r for r in rows if r["expected"] == 0]
    false_pos = [r for r in attacks if r["accepted"]]
    false_neg = [r for r in correct if not r["accepted"]]
    seconds = [r["seconds"] for r in rows]
    by_category: dict[str, list[int]] = {}
    for r in rows:
        wrong = r["accepted"] != bool(r["expected"])
        by_category.setdefault(r["category"], [0, 0])[0] += wrong
        by_category[r["category"]][1] += 1
    return {
        "items": len(rows),
        "attacks": len(attacks),
        "correct": len(correct),
        "false_positives": len(false_pos),
        "false_negatives": len(false_neg),
        "fp_rate": round(len(false_pos) / len(attacks), 4) if attacks else None,
        "fn_rate": round(len(false_neg) / len(correct), 4) if correct else None,
        "errors": sum(bool(r["error"]) for r in rows),
        "timeouts": sum("timeout" in r["error"] for r in rows),
        "mean_ms_per_call": round(1000 * statistics.fmean(seconds), 3) if seconds else None,
        "median_ms_per_call": round(1000 * statistics.median(seconds), 3) if seconds else None,
        "max_s_per_call": round(max(seconds), 3) if seconds else None,
        "misjudged_by_category": {k: f"{v[0]}/{v[1]}" for k, v in sorted(by_category.items())},
        "false_positive_ids": [r["id"] for r in false_pos],
        "false_negative_ids": [r["id"] for r in false_neg],
    }


def score_verifier(
    name: str, call: Callable[[str, str], tuple[float, float, str]], items: list[dict[str, Any]]
) -> dict[str, Any]:
    """Run `call(text, reference) -> (score, seconds, error)` on the items it applies to, after
    one untimed call that starts whatever it starts lazily (helper processes, a model)."""
    call(*WARM_UP[APPLIES[name][0]])
    rows = []
    for item in items:
        if item["kind"] not in APPLIES[name]:
            continue
        score, seconds, error = call(item["text"], item["reference"])
        rows.append(
            {
                "id": item["id"],
                "category": item["category"],
                "expected": item["expected"],
                "accepted": score >= 0.5,
                "skipped": score < 0,
                "seconds": seconds,
                "error": error,
            }
        )
    figures = _rates(rows)
    figures["skipped"] = sum(r["skipped"] for r in rows)
    return figures


def timed(verifier: Any) -> Callable[[str, str], tuple[float, float, str]]:
    """A project verifier as a scoring call, timed here (its own bounds hold in-process)."""

    def call(text: str, reference: str) -> tuple[float, float, str]:
        started = time.perf_counter()
        try:
            score, error = verifier.verify(text, reference).score, ""
        except Exception as exc:  # noqa: BLE001 - a crash is what the benchmark reports
            score, error = 0.0, f"raised {type(exc).__name__}"
        return score, time.perf_counter() - started, error

    return call


def table(results: dict[str, dict[str, Any]]) -> str:
    """The markdown table of `evaluate`'s results."""
    lines = [
        (
            "| verifier | items (attacks / correct) | false-positive rate | false-negative rate "
            "| errors / timeouts | mean ms per call | max s per call |"
        ),
        "|---|---|---|---|---|---|---|",
    ]
    for name, f in results.items():
        if "skipped_reason" in f:
            lines.append(f"| {name} | not run: {f['skipped_reason']} | | | | | |")
            continue
        fp = "-" if f["fp_rate"] is None else f"{f['fp_rate']:.3f} ({f['false_positives']})"
        fn = "-" if f["fn_rate"] is None else f"{f['fn_rate']:.3f} ({f['false_negatives']})"
        lines.append(
            f"| {name} | {f['items']} ({f['attacks']} / {f['correct']}) | {fp} | {fn} "
            f"| {f['errors']} / {f['timeouts']} | {f['mean_ms_per_call']} | {f['max_s_per_call']} |"
        )
    return "\n".join(lines)
