"""Round trip on the ANLI dev files: the gold label scores 1.0, the other labels 0.0."""

from __future__ import annotations

import pytest

from rewards import LabelVerifier
from tests.rewards.helpers import read_jsonl, shared_data_dir

FULL = {"e": "entailment", "n": "neutral", "c": "contradiction"}


@pytest.mark.parametrize("round_name", ["R1", "R2", "R3"])
def test_shared_anli_round_trip(round_name: str) -> None:
    data = shared_data_dir()
    path = None if data is None else data / "anli" / f"{round_name}_dev.jsonl"
    if path is None or not path.exists():
        pytest.skip(f"ANLI {round_name}_dev.jsonl not found under <repo>/../shared/data")
    verifier = LabelVerifier()
    failures = []
    for index, row in enumerate(read_jsonl(path)):
        gold = row["label"]
        for letter, label in FULL.items():
            response = f"The premise says: {row['context'][:80]}\nAnswer: {label}"
            score = verifier.verify(response, gold).score
            if score != float(letter == gold):
                failures.append(f"line {index + 1}: gold {gold}, answered {label}: {score}")
    assert not failures, "\n".join(failures[:10])


def test_generated_label_round_trip() -> None:
    verifier = LabelVerifier()
    for gold in ("e", "n", "c", "entailment", "neutral", "contradiction"):
        for style in ("Answer: {}", "\\boxed{{{}}}", "<answer>{}</answer>", "So it is {}."):
            for label in FULL.values():
                expected = float(label == FULL.get(gold, gold))
                assert verifier.verify(style.format(label), gold).score == expected
