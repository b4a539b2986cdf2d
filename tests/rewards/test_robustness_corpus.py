"""The committed robustness corpus: regenerated bit for bit, and no attack in it pays."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import corpus as robustness
from benchmarks import scoring
from rewards import get_verifier


@pytest.fixture(scope="module")
def items() -> list[dict]:
    return robustness.load_corpus()


def test_regenerating_the_corpus_gives_the_committed_file() -> None:
    assert robustness.CORPUS.read_text(encoding="utf-8") == robustness.render(
        robustness.build_corpus()
    )
    assert robustness.main(["--check"]) == 0


def test_the_corpus_is_small_and_covers_every_category(items: list[dict]) -> None:
    assert robustness.CORPUS.stat().st_size < 100_000  # huge inputs are stored as recipes
    assert {item["category"] for item in items} == set(robustness.CATEGORIES)
    assert len({item["id"] for item in items}) == len(items)
    for kind in ("number", "expression", "label"):
        assert {item["expected"] for item in items if item["kind"] == kind} == {0, 1}, kind
    assert max(len(item["text"]) for item in items) >= 1_000_000  # a huge input is in it


def test_a_changed_corpus_fails_the_check(tmp_path: Path) -> None:
    out = tmp_path / "robustness.jsonl"
    out.write_text(robustness.CORPUS.read_text(encoding="utf-8").replace("18", "19", 1))
    assert robustness.main(["--check", "--out", str(out)]) == 1
    assert robustness.main(["--write", "--out", str(out)]) == 0
    assert robustness.main(["--check", "--out", str(out)]) == 0


@pytest.mark.parametrize(
    ("name", "options"), [("math", {"timeout": 1.0}), ("gsm8k", {}), ("label", {})]
)
def test_no_attack_pays_and_nothing_raises(items: list[dict], name: str, options: dict) -> None:
    verifier = get_verifier(name, **options)
    call = scoring.timed(verifier)
    figures = scoring.score_verifier(name, call, items)
    assert figures["items"] > 0
    assert figures["errors"] == 0
    assert figures["false_positive_ids"] == []
