"""What the verifier tests share besides fixtures: GSM8K-style data, generated here or read
from shared/data."""

from __future__ import annotations

import json
import random
from pathlib import Path

# The shared data sits next to the checkout: <repo>/../shared/data (see shared/data/README.md).
SHARED_DATA_CANDIDATES = (
    Path(__file__).resolve().parents[2].parent / "shared" / "data",
    Path("/work/shared/data"),
)


def shared_data_dir() -> Path | None:
    """The first shared data folder that exists, or None."""
    return next((path for path in SHARED_DATA_CANDIDATES if path.is_dir()), None)


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def generated_gsm8k(count: int = 300, seed: int = 7) -> list[dict[str, str]]:
    """GSM8K-style solutions with the features of the real ones: calculator annotations
    ``<<a*b=c>>``, dollar amounts, thousands commas (also in the final), percentages and
    decimals in intermediate steps, and a final ``#### N`` line."""
    rng = random.Random(seed)
    rows = []
    for index in range(count):
        price, count_a, extra = rng.randint(2, 90), rng.randint(2, 40), rng.randint(1, 5000)
        cost = price * count_a
        pct = rng.choice([10, 20, 25, 50])
        discount = cost * pct / 100
        total = cost + extra
        final = f"{total:,}" if total >= 1000 and index % 2 else str(total)
        lines = [
            (
                f"Each item costs ${price}, so {count_a} items cost {price}*{count_a}="
                f"<<{price}*{count_a}={cost}>>{cost} dollars."
            ),
            (
                f"A {pct}% discount would save {cost}*{pct / 100}="
                f"<<{cost}*{pct / 100}={discount}>>{discount} dollars, but it does not apply."
            ),
            f"Adding the ${extra:,} fee gives {cost}+{extra}=$<<{cost}+{extra}={total}>>{total:,}.",
            f"#### {final}",
        ]
        rows.append({"question": f"generated {index}", "answer": "\n".join(lines)})
    return rows


def changed_final(answer: str, rng: random.Random) -> str:
    """The same solution with a different final answer (same style: commas kept)."""
    body, final = answer.rsplit("####", 1)
    value = int(final.strip().replace(",", "")) + rng.choice([-7, -2, -1, 1, 2, 9, 100])
    written = f"{value:,}" if "," in final else str(value)
    return f"{body}#### {written}"
