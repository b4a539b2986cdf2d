"""`CPUGRPOConfig`: TRL's `GRPOConfig` with the defaults of a short CPU run, and the batch size
derived from the env's turn slots (`trainers.algorithms.grpo` trains with it)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from trl import GRPOConfig

import envs as envs_pkg
from trainers.algorithms.rows import turn_slots
from trainers.algorithms.trainable import no_gradient_checkpointing


@dataclass
class CPUGRPOConfig(GRPOConfig):
    """TRL's `GRPOConfig` with defaults for a short CPU run of the embedded model.

    A micro-batch holds whole episodes: per_device_train_batch_size = turn slots x num_generations
    (reflection with 2 rounds: 5 slots x 4 = 20, one problem); one optimizer step sees
    gradient_accumulation_steps problems, all generated in one batched rollout.
    """

    _argument_group_name = (
        "GRPO (TRL's GRPOConfig, CPU defaults)"  # --help's section (`trainers.run.parser`)
    )

    output_dir: str = field(default="outputs/train", metadata={"help": "Where to write."})
    use_cpu: bool = field(default=True, metadata={"help": "Train on the CPU."})
    bf16: bool = field(default=False, metadata={"help": "bf16 mixed precision."})
    gradient_checkpointing: bool | None = no_gradient_checkpointing()
    learning_rate: float = field(default=5e-5, metadata={"help": "Adam learning rate."})
    num_generations: int = field(default=4, metadata={"help": "G samples per problem."})
    per_device_train_batch_size: int = field(
        default=20, metadata={"help": "Rows per micro-batch (turn slots x num_generations)."}
    )
    gradient_accumulation_steps: int = field(
        default=8, metadata={"help": "Micro-batches per optimizer step (problems per step)."}
    )
    max_completion_length: int = field(
        default=96,
        metadata={
            "help": "Tokens per turn: 96 (the embedded critic's checks need ~70), or a task "
            "family's run default (a colouring's critic scans every edge: 160); None below: set "
            "by the task."
        },
    )
    max_steps: int = field(
        default=1000, metadata={"help": "Optimizer steps (the time budget usually ends first)."}
    )
    logging_steps: int = field(default=1, metadata={"help": "Log every N steps."})
    save_steps: int = field(
        default=200,
        metadata={
            "help": "Checkpoint every N steps (and every --save_minutes of training, whichever "
            "comes first; final/ is saved at the end either way)."
        },
    )
    save_total_limit: int | None = field(
        default=2, metadata={"help": "Checkpoints kept (the oldest are deleted; None: all)."}
    )
    report_to: list[str] = field(default_factory=lambda: ["none"], metadata={"help": "Loggers."})
    beta: float = field(default=0.0, metadata={"help": "KL coefficient (0: no ref model)."})
    lr_scheduler_type: str = field(default="constant", metadata={"help": "LR schedule."})

    DERIVED: ClassVar[tuple[str, ...]] = ("per_device_train_batch_size",)

    @classmethod
    def derived_defaults(cls, parsed: Any) -> dict:
        """`DERIVED`'s defaults from the parsed flags (`trainers.run.cli.RunParser`): a
        micro-batch holds whole episodes, every turn slot of the env they ask for (``env_id``
        and its options: ``rounds``, ``num_agents``) x the G generations
        (``num_generations``); the slots come from the env's options' facts, no env built."""
        spec = envs_pkg.spec(parsed.env_id)
        if spec.options is None:  # an env registered without its options: ask a made one
            slots = turn_slots(envs_pkg.make(parsed.env_id))
        else:
            names = {f.name for f in dataclasses.fields(spec.options)}
            shape = {k: getattr(parsed, k) for k in ("rounds", "num_agents") if k in names}
            shape = {k: v for k, v in shape.items() if v is not None}
            slots = spec.facts(**shape).turns
        return {"per_device_train_batch_size": slots * parsed.num_generations}
