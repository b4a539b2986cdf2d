"""``bench.py train``: one multi-agent GRPO step against one plain TRL GRPO step on the same
model and rows per step, in time per processed token."""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from benchmarks.common import add_json_argument, cuda_sync, peak_rss, qwen_05b

NAME = "train"


def add_parser(subparsers: Any) -> None:
    """Register the ``train`` command."""
    parser = subparsers.add_parser(
        "train",
        help="one multi-agent GRPO step vs one plain TRL GRPO step (seconds per token)",
        description=(
            "Times optimizer steps of the multi-agent GRPO trainer (trainers/algorithms/grpo.py: "
            "rollout engine, env copies, one row per agent turn) and of a plain TRL GRPOTrainer on "
            "the same model, the same rows per step (the reflection env's turn slots x problems x "
            "G against as many single-turn prompts x G), the same token budget and sampling. "
            "Sampled lengths differ, so each step's time is divided by the tokens it processed "
            "(prompt + completion, TRL's num_tokens); the ratio is multi-agent / plain."
        ),
    )
    _add_workload_arguments(parser)
    _add_trainer_arguments(parser)
    add_json_argument(parser)
    parser.set_defaults(func=run)


def _add_workload_arguments(parser: argparse.ArgumentParser) -> None:
    """What each step trains on and how long it is timed: model, env, rows, lengths, repeats."""
    parser.add_argument("--model", default=None, help="model folder; default: the embedded model")
    parser.add_argument(
        "--env",
        default="math/reflection-v0",
        help="math/solve-v0 isolates the machinery's overhead (one turn, like plain TRL); "
        "multi-turn envs also pay for their turns being sequential",
    )
    parser.add_argument("--problems", type=int, default=4, help="problems per optimizer step")
    parser.add_argument("--generations", type=int, default=4, help="G samples per problem")
    parser.add_argument("--rounds", type=int, default=1, help="reflection rounds")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--steps", type=int, default=3, help="timed steps (after one warm-up)")
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="alternating multi-agent/plain runs; the ratio is the median of theirs",
    )


def _add_trainer_arguments(parser: argparse.ArgumentParser) -> None:
    """How the trainers run: the multi-agent pass's options, device, precision, random Qwen."""
    parser.add_argument(
        "--no-length-grouping",
        action="store_true",
        help="multi-agent micro-batches as TRL splits them (shuffled, padded to the widest row)",
    )
    parser.add_argument(
        "--no-shared-prefix",
        action="store_true",
        help="multi-agent log-probabilities without running shared prompt prefixes once "
        "(trainers.algorithms.shared_prefix; on by default on CPU)",
    )
    parser.add_argument(
        "--device",
        default="cpu",
        choices=["cpu", "cuda"],
        help="where both trainers run (cuda: use_cpu=False, peak GPU memory reported)",
    )
    parser.add_argument(
        "--precision",
        default="auto",
        choices=["auto", "bf16", "fp32"],
        help="auto: bf16 mixed precision on a GPU that supports it, else float32 (bf16 on the CPU "
        "is slower than float32; trainers.precision)",
    )
    parser.add_argument(
        "--qwen-0.5b",
        dest="qwen",
        action="store_true",
        help="random-weight model of Qwen2.5-0.5B's configuration (as rollout's), float32 "
        "weights saved to a temporary folder both trainers load, instead of --model",
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Seconds per processed token: multi-agent GRPO step vs plain TRL GRPO step."""
    setup = _setup(args)
    figures = _header(setup)
    rows = _plain_rows(setup)
    runs = _alternating_runs(setup, rows, figures)
    ratios = [
        m["ms_per_1k_tokens"] / p["ms_per_1k_tokens"]
        for m, p in zip(runs["multi_agent"], runs["plain_trl"], strict=True)
    ]
    figures["ratios"] = ratios
    figures["ratio"] = statistics.median(ratios)
    _report(figures, runs, setup.cuda)
    return figures


@dataclass
class _Setup:
    """What both trainers share: the flags, the model (a folder), the env and its turn slots."""

    args: argparse.Namespace
    model: str
    env: Any
    env_kwargs: dict[str, Any]
    slots: int
    cuda: bool
    bf16: bool

    @property
    def steps(self) -> int:
        """Optimizer steps per run: the timed ones and one warm-up."""
        return self.args.steps + 1

    @property
    def problems(self) -> int:
        """Problems a run trains on: ``--problems`` per step."""
        return self.args.problems * self.steps

    def config(self, out: str) -> Any:
        """The GRPOConfig both trainers run with (the same rows per step and token budget)."""
        from trl import GRPOConfig

        return GRPOConfig(
            output_dir=out,
            use_cpu=not self.cuda,
            bf16=self.bf16,
            report_to=[],
            save_strategy="no",
            disable_tqdm=True,
            logging_steps=1,
            max_steps=self.steps,
            learning_rate=1e-5,
            num_generations=self.args.generations,
            per_device_train_batch_size=self.slots * self.args.generations,
            gradient_accumulation_steps=self.args.problems,
            max_completion_length=self.args.max_new_tokens,
            temperature=1.0,
            beta=0.0,
            seed=0,
        )


def _setup(args: argparse.Namespace) -> _Setup:
    """Check the device, resolve the model, import math-verify (untimed) and make the env."""
    import torch

    import envs
    from rewards import get_verifier
    from trainers.algorithms.rows import turn_slots
    from trainers.embedded import resolve_model

    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise SystemExit("bench.py train --device cuda: torch sees no CUDA device")
    if args.precision == "bf16" and not (cuda and torch.cuda.is_bf16_supported()):
        raise SystemExit("bench.py train --precision bf16: needs --device cuda on a GPU with bf16")
    bf16 = args.precision != "fp32" and cuda and torch.cuda.is_bf16_supported()
    model = resolve_model(args.model)
    get_verifier("math").verify("\\boxed{x + 1}", "2")  # one-time math-verify import, untimed
    env_kwargs: dict[str, Any] = {"split": "train"}
    if args.env in ("math/reflection-v0", "math/debate-v0"):
        env_kwargs["rounds"] = args.rounds
    env = envs.make(args.env, **env_kwargs)
    return _Setup(args, model, env, env_kwargs, turn_slots(env), cuda, bf16)


def _header(setup: _Setup) -> dict[str, Any]:
    """The figures known before any run: model, env, device, precision, rows per step."""
    import torch

    args = setup.args
    return {
        "model": "qwen2.5-0.5b-config (random)" if args.qwen else setup.model,
        "env": args.env,
        "device": torch.cuda.get_device_name() if setup.cuda else "cpu",
        "precision": "bf16 mixed (float32 weights)" if setup.bf16 else "float32",
        "gradient_checkpointing": setup.config("unused").gradient_checkpointing,
        "rows_per_step": setup.slots * args.generations * args.problems,
        "max_new_tokens": args.max_new_tokens,
        "length_grouped": not args.no_length_grouping,
        "shared_prefix": not args.no_shared_prefix and not setup.cuda,
    }


def _plain_rows(setup: _Setup) -> list[dict[str, Any]]:
    """The plain run answers as many single-turn prompts: first-turn prompts of more problems."""
    from agents.prompts import build_messages

    env = setup.env
    source = env.unwrapped.task.source
    rows = []
    for index in range(setup.problems * setup.slots):
        first = env.reset(options={"problem_id": source[index % len(source)]["id"]})
        # AEC: the first acting agent's observation; Parallel: (observations, infos), the first's
        obs = env.observe(env.agent_selection) if first is None else next(iter(first[0].values()))
        rows.append(
            {"prompt": build_messages(obs), "reference": source[index % len(source)]["answer"]}
        )
    return rows


def _multi_trainer(setup: _Setup, out: str) -> Any:
    """The multi-agent GRPO trainer of trainers/algorithms/grpo.py on the env."""
    from trainers.algorithms.grpo import build_grpo_trainer

    return build_grpo_trainer(
        setup.model,
        setup.args.env,
        setup.env_kwargs,
        setup.config(out),
        train_problems=setup.problems,
        length_grouped=not setup.args.no_length_grouping,
        shared_prefix=False if setup.args.no_shared_prefix else None,
    )


def _plain_trainer(setup: _Setup, out: str, rows: list[dict[str, Any]]) -> Any:
    """A stock TRL GRPOTrainer on `rows`, rewarded by the math verifier."""
    from datasets import Dataset
    from trl import GRPOTrainer

    from rewards import get_verifier

    verifier = get_verifier("math")

    def correct(completions: list[Any], reference: list[str], **_: Any) -> list[float]:
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        return [verifier.verify(t, r).score for t, r in zip(texts, reference, strict=True)]

    from trainers.precision import guard_attention

    plain_args = setup.config(out)
    plain_args.shuffle_dataset = False
    trainer = GRPOTrainer(
        model=setup.model,
        reward_funcs=[correct],
        args=plain_args,
        train_dataset=Dataset.from_list(rows),
    )
    # the same attention kernels as the multi-agent trainer's (trainers.precision)
    guard_attention(trainer.args, trainer.accelerator.device)
    return trainer


def _alternating_runs(
    setup: _Setup, rows: list[dict[str, Any]], figures: dict[str, Any]
) -> dict[str, list[dict[str, Any]]]:
    """``--repeats`` timed runs of each trainer, alternating; sets ``figures["params"]``.

    Alternating repeats: this machine's speed drifts over minutes, so each ratio compares runs
    made back to back, and the figure is their median."""
    import gc
    import tempfile

    import torch
    from transformers import AutoTokenizer

    runs: dict[str, list[dict[str, Any]]] = {"multi_agent": [], "plain_trl": []}
    with tempfile.TemporaryDirectory() as tmp:
        if setup.args.qwen:  # saved once: each trainer loads the same weights from a folder
            tokenizer = AutoTokenizer.from_pretrained(setup.model)
            setup.model = f"{tmp}/qwen-0.5b"
            qwen_05b(tokenizer).save_pretrained(setup.model)  # float32
            tokenizer.save_pretrained(setup.model)
        makers = (
            ("multi_agent", lambda out: _multi_trainer(setup, out)),
            ("plain_trl", lambda out: _plain_trainer(setup, out, rows)),
        )
        for repeat in range(setup.args.repeats):
            for name, make in makers:
                gc.collect()  # the previous trainer's memory freed, the peaks counted from here
                if setup.cuda:
                    torch.cuda.empty_cache()
                    torch.cuda.reset_peak_memory_stats()
                with peak_rss() as peak_rss_bytes:
                    trainer = make(f"{tmp}/{name}{repeat}")
                    figures.setdefault("params", sum(p.numel() for p in trainer.model.parameters()))
                    timed = _timed_train(trainer)
                timed["peak_rss_gib"] = peak_rss_bytes[0] / 2**30
                if setup.cuda:
                    timed["peak_gpu_gib"] = torch.cuda.max_memory_allocated() / 2**30
                runs[name].append(timed)
                del trainer
    return runs


def _report(figures: dict[str, Any], runs: dict[str, list[dict[str, Any]]], cuda: bool) -> None:
    """Print the figures, pooling each trainer's runs into ``figures[name]``."""
    ratios = figures["ratios"]
    print(
        f"{figures['env']}, {figures['rows_per_step']} rows per step, model {figures['model']} "
        f"({figures['params'] / 1e6:.1f}M params) on {figures['device']}, {figures['precision']}"
    )
    for name, timed in runs.items():
        row = figures[name] = _pooled(timed)
        row["peak_rss_gib_per_run"] = [t["peak_rss_gib"] for t in timed]
        row["peak_rss_gib"] = max(row["peak_rss_gib_per_run"])
        peak = f", peak process RSS {row['peak_rss_gib']:.2f} GiB"
        if cuda:
            row["peak_gpu_gib_per_run"] = [t["peak_gpu_gib"] for t in timed]
            row["peak_gpu_gib"] = max(row["peak_gpu_gib_per_run"])
            peak += f", peak GPU memory {row['peak_gpu_gib']:.2f} GiB"
        print(
            f"{name:12} {row['seconds_per_step']:7.2f} s/step {row['tokens_per_step']:9.0f} "
            f"tokens/step {row['ms_per_1k_tokens']:8.1f} ms per 1k tokens "
            f"(generation {row['generate_ms_per_1k_tokens']:.1f}, "
            f"the rest {row['other_ms_per_1k_tokens']:.1f}){peak}"
        )
    print(
        "ratio (multi-agent / plain TRL, time per token): "
        f"{figures['ratio']:.2f} (target <= 1.10; per repeat: "
        f"{', '.join(f'{r:.2f}' for r in ratios)})"
    )


@contextmanager
def _timed_generate() -> Iterator[list[float]]:
    """Times every `model.generate` call made inside the block (plain TRL generates with it, the
    multi-agent trainer in lockstep mode too) and every `ContinuousBatcher.step` (its default)."""
    from transformers import GenerationMixin

    from agents.batching import ContinuousBatcher

    seconds: list[float] = []
    patched = [(GenerationMixin, "generate"), (ContinuousBatcher, "step")]
    originals = [getattr(owner, name) for owner, name in patched]

    def timing(original: Any) -> Any:
        def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
            cuda_sync()
            began = time.perf_counter()
            try:
                return original(self, *args, **kwargs)
            finally:
                cuda_sync()
                seconds.append(time.perf_counter() - began)

        return timed

    for (owner, name), original in zip(patched, originals, strict=True):
        setattr(owner, name, timing(original))
    try:
        yield seconds
    finally:
        for (owner, name), original in zip(patched, originals, strict=True):
            setattr(owner, name, original)


def _timed_train(trainer: Any) -> dict[str, Any]:
    """Train, timing each optimizer step and the `generate` calls inside it; the first (warm-up)
    step is left out."""
    from transformers import TrainerCallback

    class Clock(TrainerCallback):
        def __init__(self) -> None:
            self.began = 0.0
            self.seconds: list[float] = []
            self.generating: list[float] = []
            self.generated_before = 0.0

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            cuda_sync()
            self.began = time.perf_counter()
            self.generated_before = sum(generate_seconds)

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            cuda_sync()
            self.seconds.append(time.perf_counter() - self.began)
            self.generating.append(sum(generate_seconds) - self.generated_before)

    clock = Clock()
    trainer.add_callback(clock)
    with _timed_generate() as generate_seconds:
        trainer.train()
    totals = [row["num_tokens"] for row in trainer.state.log_history if "num_tokens" in row]
    tokens = [b - a for a, b in zip([0.0, *totals[:-1]], totals, strict=True)]
    seconds, generating, tokens = clock.seconds[1:], clock.generating[1:], tokens[1:]
    timed = {"steps": len(seconds), "seconds": sum(seconds), "tokens": sum(tokens)}
    return _pooled([{**timed, "generate_seconds": sum(generating)}])


def _pooled(timed: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per-step and per-token figures of timed runs taken together."""
    steps = sum(t["steps"] for t in timed)
    seconds = sum(t["seconds"] for t in timed)
    generating = sum(t["generate_seconds"] for t in timed)
    tokens = sum(t["tokens"] for t in timed)
    return {
        "steps": steps,
        "seconds": seconds,
        "generate_seconds": generating,
        "tokens": tokens,
        "seconds_per_step": seconds / steps,
        "tokens_per_step": tokens / steps,
        "ms_per_1k_tokens": 1e6 * seconds / tokens,
        "generate_ms_per_1k_tokens": 1e6 * generating / tokens,
        "other_ms_per_1k_tokens": 1e6 * (seconds - generating) / tokens,
    }
