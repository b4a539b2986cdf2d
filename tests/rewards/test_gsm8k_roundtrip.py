"""Round trip: every GSM8K reference solution scores 1.0 against its own final, 0.0 otherwise."""

from __future__ import annotations

import random

import pytest

from rewards import get_verifier
from tests.rewards.helpers import changed_final, read_jsonl, shared_data_dir


def _failures(verifier_name: str, rows: list[dict]) -> list[str]:
    verifier = get_verifier(verifier_name)
    rng = random.Random(0)
    failures = []
    for index, row in enumerate(rows):
        solution = row["answer"]
        final = solution.rsplit("####", 1)[1].strip()
        right = verifier.verify(solution, final)
        wrong = verifier.verify(changed_final(solution, rng), final)
        if right.score != 1.0 or wrong.score != 0.0:
            failures.append(f"line {index + 1}: final {final!r}: {right} / changed: {wrong}")
    return failures


@pytest.mark.parametrize("verifier", ["math", "gsm8k"])
@pytest.mark.parametrize("split", ["test", "train"])
def test_shared_gsm8k_round_trip(verifier: str, split: str) -> None:
    data = shared_data_dir()
    if data is None or not (data / "gsm8k" / f"{split}.jsonl").exists():
        pytest.skip(
            f"GSM8K {split}.jsonl not found under <repo>/../shared/data or /work/shared/data"
        )
    rows = read_jsonl(data / "gsm8k" / f"{split}.jsonl")
    assert len(rows) > 1000  # the real file, not a stub
    failures = _failures(verifier, rows)
    assert not failures, "\n".join(failures[:20])


@pytest.mark.parametrize("verifier", ["math", "gsm8k"])
def test_generated_gsm8k_round_trip(verifier: str, gsm8k_generated: list[dict]) -> None:
    assert any("," in row["answer"].rsplit("####", 1)[1] for row in gsm8k_generated)
    failures = _failures(verifier, gsm8k_generated)
    assert not failures, "\n".join(failures[:20])


def test_generated_gsm8k_agrees_with_plain_math_verify(gsm8k_generated: list[dict]) -> None:
    """The fast path decides exactly as plain math-verify on the full solutions."""
    from math_verify import parse, verify

    ours = get_verifier("math")
    rng = random.Random(1)
    for row in gsm8k_generated[:120]:
        final = row["answer"].rsplit("####", 1)[1].strip()
        for response in (row["answer"], changed_final(row["answer"], rng)):
            expected = verify(parse(final), parse(response))
            assert ours.verify(response, final).correct == expected, response[-60:]
