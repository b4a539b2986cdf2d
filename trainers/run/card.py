"""The model card a run writes into ``final/README.md``: the base model (a hub id, a catalog
model's hub id, or the embedded default), the env, the task, the protocol it was trained in, the
before/after figures, and the commands that evaluate it.

TRL's own draft (`trl.trainer.base_trainer.BaseTrainer.create_model_card`) names a start model
that is a local folder "None" and writes into the output folder at each checkpoint; the
multi-agent trainers write none (`trainers.algorithms.grpo.MultiAgentGRPOTrainer`), this one
instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from envs.protocol import Protocol
from trainers.algorithms.checkpoint import atomic_path

CARD_FILE = "README.md"
FIGURES = ("accuracy", "team/final", "team/vote", "alone/maj@3")


def base_model_id(name: str | None) -> tuple[str | None, str]:
    """The start model's hub id (None when it has none: a local folder, the embedded model)
    and how the card names it."""
    if not name:
        return None, "the embedded default model (`trainers.embedded`, shipped with mathteams)"
    from agents.models import CATALOG

    if name in CATALOG:
        hub = CATALOG[name].hub_id
        return hub, f"[{hub}](https://huggingface.co/{hub}) (`mathteams models get {name}`)"
    if Path(name).exists():
        return None, f"the local model `{name}`"
    return name, f"[{name}](https://huggingface.co/{name})"


def _figure(evaluation: dict[str, Any], key: str) -> float | None:
    """`key` of one evaluation: its team metric, else its comparison's figure, else None."""
    compared = evaluation.get("compare", {}).get("figures", {})
    return evaluation.get("metrics", {}).get(key, compared.get(key))


def _figures(results: dict[str, Any]) -> list[str]:
    """Markdown table rows of the before/after figures the run measured."""
    rows = []
    for key in FIGURES:
        before, after = (_figure(results.get(w, {}), key) for w in ("before", "after"))
        if before is not None and after is not None:
            rows.append(f"| {key} | {before:.3f} | {after:.3f} |")
    return rows


def model_card(protocol: Protocol, results: dict[str, Any]) -> str:
    """The card's text for a model trained in `protocol`, with the run's `results`."""
    hub, named = base_model_id(protocol.base_model)
    header = ["---", "library_name: transformers"]
    if hub:
        header.append(f"base_model: {hub}")
    header += ["tags:", "- mathteams", "- multi-agent", "- trl", f"- {results['algo']}", "---"]
    levels = protocol.problems.level_list()
    figures = _figures(results)
    lines = [
        *header,
        "",
        f"# {protocol.env_id}, trained with {results['algo'].upper()}",
        "",
        f"Fine-tuned from {named} with mathteams to play the agents of `{protocol.env_id}` on "
        f"the task `{protocol.task}`" + (f", levels {levels}." if levels else "."),
        f"It was trained for {results.get('train_steps', '?')} steps.",
        "",
        "## Protocol",
        "",
        "What the run played (also in `mathteams.json`, which evaluation reads):",
        "",
        "```json",
        json.dumps(protocol.to_dict(), indent=2),
        "```",
    ]
    if figures:
        lines += ["", "## Held-out figures", "", "| figure | before | after |", "|---|---|---|"]
        lines += figures
    lines += [
        "",
        "## Evaluate it",
        "",
        "```bash",
        "mathteams evaluate --model_name_or_path path/to/final   # replays the run's evaluation",
        "```",
        "",
        "```python",
        "from trainers.evaluation.evaluate import evaluate",
        'results = evaluate(model="path/to/final")',
        "```",
        "",
    ]
    return "\n".join(lines)


def write_card(final: str | Path, protocol: Protocol, results: dict[str, Any]) -> Path:
    """Write `model_card` into `final`/README.md (atomically) and return its path."""
    path = Path(final) / CARD_FILE
    with atomic_path(path) as tmp:
        tmp.write_text(model_card(protocol, results), encoding="utf-8")
    return path
