"""``bench.py step``: where a step of the main job goes (``python scripts/train_reflection.py``'s
GRPO on its defaults): generation (prefill and decode forwards), the env and its verifier, the
rest of the rollout (sampling, batching), the logprob pass, the loss's forward, backward, the
optimizer, logging, and what is left.

The job is the training script's own (`trainers.run.cli.make_parser`: its defaults, then any
flags given after ``--``), built as a run builds it, without the evaluations. Phases are timed
through public hooks only: the trainer's ``rollout_func``, ``compute_loss`` (the loss's forward:
log-probabilities and the loss arithmetic), ``log`` and its accelerator's ``backward``, the
optimizer's ``step``, the model's forward hooks in the rollout (a forward with one new token a
row is decode, a wider one prefill), its backbone's forward hooks without gradients outside the
rollout and the loss (the logprob pass, of the old or reference policy), the fused step's call
(`agents.fused_decode.FusedDecoder`, decode or prefill by the same width: it runs the model's
arithmetic without calling its forward) and the env copies' ``step`` (the env and its
verifier). The first step (warm-up) is left out.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.common import add_json_argument, cuda_sync

NAME = "step"
PHASES = (
    "prefill",
    "decode",
    "env+verifier",
    "rollout other",
    "logprob pass",
    "loss forward",
    "backward",
    "optimizer",
    "logging",
    "other",
)


def add_parser(subparsers: Any) -> None:
    """Register the ``step`` command."""
    parser = subparsers.add_parser(
        "step",
        help="where a step of the main job (train_reflection.py's GRPO) goes, phase by phase",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--steps", type=int, default=6, help="timed steps (after one warm-up)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: as is)")
    parser.add_argument("--env", default="math/reflection-v0", help="the env whose job is timed")
    parser.add_argument(
        "job", nargs=argparse.REMAINDER, help="the job's flags after --, e.g. -- --task reach"
    )
    add_json_argument(parser)
    parser.set_defaults(func=run)


class Clock:
    """Seconds per phase, and the phase the code is in (a stack: the rollout holds decodes)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.stack: list[str] = []

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.stack.append(name)
        began = time.perf_counter()
        try:
            yield
        finally:
            cuda_sync()
            self.seconds[name] += time.perf_counter() - began
            self.stack.pop()

    def wrap(self, owner: Any, attribute: str, name: str | Callable[..., str]) -> None:
        """Time every call of ``owner.attribute`` as phase `name` (or the phase `name` gives
        for the call's arguments)."""
        original: Callable[..., Any] = getattr(owner, attribute)

        def timed(*args: Any, **kwargs: Any) -> Any:
            with self.phase(name(*args, **kwargs) if callable(name) else name):
                return original(*args, **kwargs)

        setattr(owner, attribute, timed)

    def wrapping(
        self, owner: Any, attribute: str, name: str | Callable[..., str]
    ) -> Callable[[], None]:
        """`wrap`, returning the undo (for a class attribute, which outlives the run)."""
        own = owner.__dict__.get(attribute)
        self.wrap(owner, attribute, name)

        def undo() -> None:
            if own is None:  # inherited: uncover the base class's again
                delattr(owner, attribute)
            else:
                setattr(owner, attribute, own)

        return undo

    def hook_forwards(self, model: Any) -> None:
        """Time the model's forwards in the rollout, and its backbone's forwards without
        gradients outside the rollout and the loss (the logprob pass: TRL's pass and the
        shared-prefix one both run the backbone), named as the module docstring says."""
        import torch

        def timed(module: Any, name: Callable[[int], str | None]) -> None:
            began: list[float] = []

            def before(module: Any, args: Any, kwargs: Any) -> None:
                cuda_sync()
                began.append(time.perf_counter())

            def after(module: Any, args: Any, kwargs: Any, output: Any) -> None:
                cuda_sync()
                seconds = time.perf_counter() - began.pop()
                ids = kwargs.get("input_ids", args[0] if args else None)
                phase = name(ids.shape[-1] if ids is not None else 0)
                if phase is not None:
                    self.seconds[phase] += seconds

            module.register_forward_pre_hook(before, with_kwargs=True)
            module.register_forward_hook(after, with_kwargs=True)

        def in_rollout(width: int) -> str | None:
            if self.stack and self.stack[-1] == "rollout":
                return _generation_phase(width)
            return None

        def logprob_pass(width: int) -> str | None:
            outside = not {"rollout", "loss forward"} & set(self.stack)
            return "logprob pass" if outside and not torch.is_grad_enabled() else None

        timed(model, in_rollout)
        timed(getattr(model, "base_model", model), logprob_pass)


def _trainer(args: argparse.Namespace, out: str) -> Any:
    """The job's GRPO trainer, built as a run builds it (no evaluation, no warm-up)."""
    from trainers.algorithms.grpo import build_grpo_trainer
    from trainers.embedded import resolve_model
    from trainers.run.cli import make_parser
    from trainers.run.train import online_trainer
    from trainers.run.warmup import default_steps

    parser, _ = make_parser("grpo", args.env)
    flags = [a for a in args.job if a != "--"]
    job, config = parser.parse_args_and_config(
        [*flags, "--output_dir", out, "--max_steps", str(args.steps + 1), "--eval_problems", "0"]
    )
    model = resolve_model(job.model.model_name_or_path, job.env.task)
    if default_steps(job, model):
        print(f"(the job's warm-up SFT of {default_steps(job, model)} steps is not timed)")
    return online_trainer(job, config, build_grpo_trainer, model, Path(out))


def run(args: argparse.Namespace) -> dict[str, Any]:
    import tempfile

    import torch
    from transformers import TrainerCallback

    from agents.fused_decode import FusedDecoder

    if args.threads:
        torch.set_num_threads(args.threads)
    clock = Clock()
    with tempfile.TemporaryDirectory() as out:
        trainer = _trainer(args, out)
        clock.hook_forwards(trainer.model)
        clock.wrap(trainer, "rollout_func", "rollout")
        clock.wrap(trainer, "compute_loss", "loss forward")
        clock.wrap(trainer, "log", "logging")
        clock.wrap(trainer.accelerator, "backward", "backward")
        env_step = _wrap_env_steps(clock, args.env)
        fused_call = clock.wrapping(FusedDecoder, "__call__", _fused_phase)
        create = trainer.create_optimizer

        def create_optimizer(*a: Any, **k: Any) -> Any:
            optimizer = create(*a, **k)
            clock.wrap(optimizer, "step", "optimizer")
            return optimizer

        trainer.create_optimizer = create_optimizer
        steps: list[dict[str, float]] = []

        class Steps(TrainerCallback):
            def on_step_begin(self, *_: Any, **__: Any) -> None:
                cuda_sync()
                self.began, self.before = time.perf_counter(), dict(clock.seconds)

            def on_step_end(self, *_: Any, **__: Any) -> None:
                cuda_sync()
                row = {k: v - self.before.get(k, 0.0) for k, v in clock.seconds.items()}
                row["total"] = time.perf_counter() - self.began
                steps.append(row)

        trainer.add_callback(Steps())
        try:
            trainer.train()
        finally:
            env_step()
            fused_call()
    return _report(steps[1:], args)


def _generation_phase(width: int) -> str:
    """A generation forward's phase by its new tokens a row: decode for one, prefill for more."""
    return "decode" if width == 1 else "prefill"


def _fused_phase(decoder: Any, input_ids: Any, *args: Any, **kwargs: Any) -> str:
    """A fused call's phase (`_generation_phase` of its width)."""
    return _generation_phase(input_ids.shape[-1])


def _wrap_env_steps(clock: Clock, env_id: str) -> Callable[[], None]:
    """Time every ``step`` of `env_id`'s env class (the env and its verifier) as "env";
    returns the undo."""
    import envs

    made = envs.make(env_id)
    cls = type(made.unwrapped)
    made.close()
    return clock.wrapping(cls, "step", "env")


def _report(steps: list[dict[str, float]], args: argparse.Namespace) -> dict[str, Any]:
    """Each phase's seconds per step (mean over the timed steps) and share of the step."""
    import torch

    if not steps:
        raise SystemExit("no step was timed: pass --steps >= 1")
    mean = {k: statistics.fmean(s.get(k, 0.0) for s in steps) for k in {*steps[0], "total"}}
    rollout, total = mean.get("rollout", 0.0), mean["total"]
    forwards = mean.get("prefill", 0.0) + mean.get("decode", 0.0)
    env = mean.get("env", 0.0)
    inner = {
        "prefill": mean.get("prefill", 0.0),
        "decode": mean.get("decode", 0.0),
        "env+verifier": env,
        "rollout other": max(0.0, rollout - forwards - env),
        "logprob pass": mean.get("logprob pass", 0.0),
        "loss forward": mean.get("loss forward", 0.0),
        "backward": mean.get("backward", 0.0),
        "optimizer": mean.get("optimizer", 0.0),
        "logging": mean.get("logging", 0.0),
    }
    inner["other"] = max(0.0, total - rollout - sum(v for k, v in inner.items() if k in PHASES[4:]))
    print(f"{len(steps)} timed steps of {args.env}'s job, {torch.get_num_threads()} torch threads")
    print(f"{'phase':<16} {'s/step':>8} {'share':>7}")
    for name in PHASES:
        print(f"{name:<16} {inner[name]:>8.3f} {inner[name] / total:>7.1%}")
    print(f"{'step':<16} {total:>8.3f} {1:>7.0%}")
    return {
        "env": args.env,
        "threads": torch.get_num_threads(),
        "steps": len(steps),
        "seconds_per_step": total,
        "phases": inner,
    }
