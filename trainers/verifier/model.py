"""A learned verifier: a sequence classifier that scores P(correct) of a response.

`LearnedVerifier` implements the `Verifier` protocol over an `AutoModelForSequenceClassification`
folder (label 1 = correct), so it goes wherever a rule verifier goes: an env, a TRL reward
function, or the reward server (``python scripts/serve_rewards.py --verifier
trainers.verifier.model:LearnedVerifier --verifier-kwargs '{"path": "DIR"}'``), where
`verify_batch` scores a whole request in batched forward passes.

The pipeline (`scripts/train_verifier.py` runs it end to end):

1. rows ``{problem_id, response, reference, correct}`` from recorded episodes or scripted
   without any model (`trainers.verifier.data`: `rows_from_episodes`, `scripted_rows`);
2. `balance_rows` (same module): as many right as wrong answers within each difficulty bin, so
   that the classifier cannot learn "hard problem -> wrong";
3. `train_verifier`: transformers' `Trainer` on a tiny Qwen2 classifier built from a config
   (`agents.tiny` tokenizer, random weights) or on any classifier folder or hub id;
4. `evaluate_verifier`: accuracy, AUC, confusion matrix against the labels, and agreement with
   the rule verifier.

The model reads ``"Response: ...\\nReference answer: ..."``, truncated from the left so the end of
the response (where answers sit) stays next to the reference.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from rewards import Verdict, extract_answer, get_verifier
from rewards.screen import not_a_string
from trainers.verifier.data import problem_difficulty

logger = logging.getLogger(__name__)

__all__ = [
    "LearnedVerifier",
    "auc_score",
    "build_classifier",
    "evaluate_verifier",
    "format_input",
    "train_verifier",
]

CONFIG_FILE = "verifier.json"


def _clean(text: str, limit: int) -> str:
    """The last `limit` characters, with lone surrogates replaced (tokenizers reject them)."""
    tail = text[-limit:] if len(text) > limit else text
    return tail.encode("utf-8", "replace").decode("utf-8")


def format_input(response: str, reference: str, limit: int = 4000) -> str:
    """The classifier's input text for one (response, reference) pair."""
    return f"Response: {_clean(response, limit)}\nReference answer: {_clean(reference, 200)}"


# ---------------------------------------------------------------------------- the verifier


class LearnedVerifier:
    """P(correct) from a sequence-classification model folder.

    Args:
        path: a folder written by `train_verifier` (or any 2-label classifier, label 1 correct).
        name: the verifier's name (the reward server serves it under this).
        device: torch device (default: cuda when available, else cpu).
        batch_size: pairs per forward pass in `verify_batch`.
        max_length: tokens per pair (default: the folder's ``verifier.json`` or 256).

    Model output never makes `verify` raise: non-strings score 0, any text (empty, huge, control
    characters, lone surrogates) is cleaned and truncated first. A bad reference raises
    ValueError, as rule verifiers do.
    """

    def __init__(
        self,
        path: str | Path,
        name: str = "learned",
        device: str | None = None,
        batch_size: int = 32,
        max_length: int | None = None,
    ) -> None:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        folder = Path(path)
        settings = {}
        if (folder / CONFIG_FILE).is_file():
            settings = json.loads((folder / CONFIG_FILE).read_text())
        self.name, self.batch_size = name, batch_size
        self.max_length = int(max_length or settings.get("max_length", 256))
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.tokenizer = AutoTokenizer.from_pretrained(str(path))
        self.tokenizer.truncation_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model = AutoModelForSequenceClassification.from_pretrained(str(path))
        if self.model.config.num_labels != 2:
            raise ValueError(
                f"{path}: a learned verifier needs a 2-label classifier (1 = correct), "
                f"got num_labels={self.model.config.num_labels}"
            )
        self.model.config.pad_token_id = self.tokenizer.pad_token_id
        self.model.to(self.device).eval()
        self._lock = threading.Lock()  # one forward at a time (server threads share the model)

    def __repr__(self) -> str:
        return f"LearnedVerifier(name={self.name!r}, device={self.device})"

    def verify(self, response: str, reference: str) -> Verdict:
        """One verdict (a batch of one)."""
        return self.verify_batch([response], [reference])[0]

    def verify_batch(self, responses: Sequence[str], references: Sequence[str]) -> list[Verdict]:
        """Verdicts for every pair, `batch_size` pairs per forward pass.

        Raises:
            ValueError: the lengths differ, or a reference is not a non-empty str.
        """
        if len(responses) != len(references):
            raise ValueError(f"{len(responses)} responses but {len(references)} references")
        verdicts: list[Verdict | None] = [None] * len(responses)
        pending = []
        for index, (response, reference) in enumerate(zip(responses, references, strict=True)):
            if not isinstance(reference, str) or not reference.strip():
                raise ValueError(
                    f"learned verifier: reference must be a non-empty str, got {reference!r:.80}"
                )
            verdicts[index] = not_a_string(response)
            if verdicts[index] is None:
                pending.append(index)
        for start in range(0, len(pending), self.batch_size):
            chunk = pending[start : start + self.batch_size]
            texts = [format_input(responses[i], references[i], self.max_length * 8) for i in chunk]
            for index, p in zip(chunk, self.probabilities(texts), strict=True):
                verdicts[index] = Verdict(
                    min(1.0, max(0.0, p)),
                    extract_answer(responses[index]),
                    f"learned verifier {self.name}: P(correct)={p:.3f}",
                )
        return [v for v in verdicts if v is not None]

    def probabilities(self, texts: Sequence[str]) -> list[float]:
        """P(label 1) for each formatted text, in one forward pass."""
        batch = self.tokenizer(
            list(texts),
            padding=True,
            truncation=True,
            max_length=self.max_length,
            return_tensors="pt",
        ).to(self.device)
        with self._lock, torch.inference_mode():
            logits = self.model(**batch).logits.float()
        return torch.softmax(logits, dim=-1)[:, 1].tolist()


# ---------------------------------------------------------------------------- data


def build_classifier(
    texts: Iterable[str],
    arch: str = "qwen2",
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    vocab_size: int = 512,
    seed: int = 0,
) -> tuple[Any, Any]:
    """A tiny 2-label classifier with random weights and a tokenizer trained on `texts`."""
    from transformers import AutoModelForSequenceClassification, LlamaConfig, Qwen2Config

    from agents.tiny import build_tokenizer

    tokenizer = build_tokenizer(texts, vocab_size=vocab_size)
    configs = {"qwen2": Qwen2Config, "llama": LlamaConfig}
    if arch not in configs:
        raise ValueError(f"arch={arch!r}; expected one of {sorted(configs)}")
    config = configs[arch](
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        max_position_embeddings=1024,
        num_labels=2,
        id2label={0: "wrong", 1: "correct"},
        label2id={"wrong": 0, "correct": 1},
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForSequenceClassification.from_config(config)
    return model, tokenizer


def _load_base(base_model: str) -> tuple[Any, Any]:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base_model)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForSequenceClassification.from_pretrained(
        base_model,
        num_labels=2,
        id2label={0: "wrong", 1: "correct"},
        label2id={"wrong": 0, "correct": 1},
    )
    model.config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def train_verifier(
    train_rows: Sequence[Mapping[str, Any]],
    output_dir: str | Path,
    eval_rows: Sequence[Mapping[str, Any]] | None = None,
    base_model: str | None = None,
    max_steps: int = 300,
    batch_size: int = 32,
    learning_rate: float = 1e-3,
    max_length: int = 192,
    seed: int = 0,
    model_kwargs: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Train a verifier on rows and save it to ``output_dir/model`` (a `LearnedVerifier` folder).

    Args:
        train_rows: rows with ``response``, ``reference``, ``correct``.
        output_dir: where the model folder (``model/``) and the trainer's files go.
        eval_rows: rows whose loss is measured before and after training.
        base_model: a classifier or LM folder / hub id to start from; None builds a tiny
            classifier with random weights (`build_classifier`, options in `model_kwargs`).
        max_steps, batch_size, learning_rate, seed: the training run.
        max_length: tokens per pair.

    Returns:
        ``{"model_path", "train_loss", "loss_curve", "eval_loss_before", "eval_loss_after",
        "runtime_s"}``.
    """
    from transformers import DataCollatorWithPadding, Trainer

    if not train_rows:
        raise ValueError("train_verifier: no training rows")
    model, tokenizer = _starting_model(train_rows, base_model, seed, model_kwargs)
    tokenizer.truncation_side = "left"
    output = Path(output_dir)
    args = _training_arguments(output / "trainer", max_steps, batch_size, learning_rate, seed)
    eval_set = _labelled(eval_rows, tokenizer, max_length) if eval_rows else None
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=_labelled(train_rows, tokenizer, max_length),
        eval_dataset=eval_set,
        data_collator=DataCollatorWithPadding(tokenizer),
        processing_class=tokenizer,
    )
    before = trainer.evaluate()["eval_loss"] if eval_set is not None else None
    result = trainer.train()
    after = trainer.evaluate()["eval_loss"] if eval_set is not None else None
    path = _save_verifier(trainer.model, tokenizer, output / "model", max_length)
    return {
        "model_path": str(path),
        "train_loss": result.training_loss,
        "loss_curve": [h["loss"] for h in trainer.state.log_history if "loss" in h],
        "eval_loss_before": before,
        "eval_loss_after": after,
        "runtime_s": result.metrics.get("train_runtime"),
    }


def _starting_model(
    train_rows: Sequence[Mapping[str, Any]],
    base_model: str | None,
    seed: int,
    model_kwargs: Mapping[str, Any] | None,
) -> tuple[Any, Any]:
    """`train_verifier`'s model and tokenizer before training: `base_model` loaded as a
    classifier, or (None) a tiny random one whose tokenizer is trained on the first 4,000 rows'
    inputs (`build_classifier`, options in `model_kwargs`)."""
    if base_model is not None:
        return _load_base(base_model)
    texts = [format_input(r["response"], r["reference"]) for r in train_rows]
    return build_classifier(texts[:4000], seed=seed, **(model_kwargs or {}))


def _save_verifier(model: Any, tokenizer: Any, path: Path, max_length: int) -> Path:
    """Save a trained verifier as a `LearnedVerifier` folder at `path`: the model, its
    tokenizer and `CONFIG_FILE` (the tokens per pair and the input's form)."""
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    (path / CONFIG_FILE).write_text(
        json.dumps({"max_length": max_length, "input": "Response: ...\\nReference answer: ..."})
    )
    return path


def _labelled(rows: Sequence[Mapping[str, Any]], tokenizer: Any, max_length: int) -> Any:
    """`rows` as a tokenized dataset: the model's input text and ``label`` 1 when correct."""
    import datasets

    data = {
        "text": [format_input(r["response"], r["reference"]) for r in rows],
        "label": [int(bool(r["correct"])) for r in rows],
    }
    return datasets.Dataset.from_dict(data).map(
        lambda b: tokenizer(b["text"], truncation=True, max_length=max_length),
        batched=True,
        remove_columns=["text"],
    )


def _training_arguments(
    folder: Path, max_steps: int, batch_size: int, learning_rate: float, seed: int
) -> Any:
    """transformers' `TrainingArguments` of a verifier run: cosine schedule, no checkpoints, the
    GPU when there is one."""
    from transformers import TrainingArguments

    return TrainingArguments(
        output_dir=str(folder),
        max_steps=max_steps,
        per_device_train_batch_size=batch_size,
        per_device_eval_batch_size=64,
        learning_rate=learning_rate,
        lr_scheduler_type="cosine",
        warmup_steps=max(1, max_steps // 20),
        weight_decay=0.0,
        logging_steps=max(1, max_steps // 20),
        save_strategy="no",
        report_to=[],
        use_cpu=not torch.cuda.is_available(),
        seed=seed,
        data_seed=seed,
        disable_tqdm=True,
    )


# ---------------------------------------------------------------------------- evaluation


def auc_score(labels: Sequence[bool], scores: Sequence[float]) -> float | None:
    """ROC AUC by the rank-sum (Mann-Whitney) formula, ties counted half; None for one class."""
    pairs = sorted(zip(scores, labels, strict=True))
    positives = sum(bool(label) for _, label in pairs)
    negatives = len(pairs) - positives
    if not positives or not negatives:
        return None
    rank_sum, i = 0.0, 0
    while i < len(pairs):
        j = i
        while j < len(pairs) and pairs[j][0] == pairs[i][0]:
            j += 1
        mid_rank = (i + j + 1) / 2  # ranks i+1..j share their mean
        rank_sum += mid_rank * sum(bool(label) for _, label in pairs[i:j])
        i = j
    return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)


def _confusion(predicted: Sequence[bool], actual: Sequence[bool]) -> dict[str, int]:
    pairs = list(zip(predicted, actual, strict=True))
    return {
        "tp": sum(p and a for p, a in pairs),
        "fp": sum(p and not a for p, a in pairs),
        "tn": sum(not p and not a for p, a in pairs),
        "fn": sum(not p and a for p, a in pairs),
    }


def evaluate_verifier(
    verifier: Any, rows: Sequence[Mapping[str, Any]], rule: Any = "math"
) -> dict[str, Any]:
    """Score `rows` with a (learned) verifier and with the rule verifier, against the labels.

    Returns:
        ``rows``, ``accuracy`` / ``auc`` / ``confusion`` of the verifier against the rows'
        ``correct`` labels, the rule verifier's ``rule_accuracy``, ``agreement_with_rule``
        (same right/wrong call), ``confusion_vs_rule``, and ``accuracy_by_difficulty``.
    """
    rule = get_verifier(rule) if isinstance(rule, str) else rule
    responses = [r["response"] for r in rows]
    references = [r["reference"] for r in rows]
    batch = getattr(verifier, "verify_batch", None)
    verdicts = (
        batch(responses, references)
        if callable(batch)
        else [verifier.verify(a, b) for a, b in zip(responses, references, strict=True)]
    )
    ruled = [rule.verify(a, b).correct for a, b in zip(responses, references, strict=True)]
    labels = [bool(r["correct"]) for r in rows]
    calls = [v.correct for v in verdicts]
    n = max(len(rows), 1)
    difficulty = problem_difficulty(rows) if rows else {}
    by_bin: dict[float, list[bool]] = defaultdict(list)
    for row, call, label in zip(rows, calls, labels, strict=True):
        by_bin[difficulty[row["problem_id"]]].append(call == label)
    return {
        "rows": len(rows),
        "positives": sum(labels),
        "accuracy": sum(c == y for c, y in zip(calls, labels, strict=True)) / n,
        "auc": auc_score(labels, [v.score for v in verdicts]),
        "confusion": _confusion(calls, labels),
        "rule_accuracy": sum(r == y for r, y in zip(ruled, labels, strict=True)) / n,
        "agreement_with_rule": sum(c == r for c, r in zip(calls, ruled, strict=True)) / n,
        "confusion_vs_rule": _confusion(calls, ruled),
        "accuracy_by_difficulty": {
            f"{key:g}": sum(hits) / len(hits) for key, hits in sorted(by_bin.items())
        },
    }
