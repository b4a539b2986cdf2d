"""Run under ``accelerate launch`` (2 processes) by `test_per_role_training_under_two_processes`.

Builds a per-role GRPO trainer (``adapters`` or ``models``), trains two optimizer steps of two
micro-batches each on every process (each process plays its own problems), then checks that every
process holds the same trained weights and that they moved: the gradients were averaged across
processes. Prints ``PER-ROLE DDP OK <max difference>`` on the main process.

    python -m accelerate.commands.launch --config_file scripts/configs/accelerate/cpu_2proc.yaml \
        tests/trainers/per_role_ddp_check.py MODEL TMP_DIR {adapters,models}
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import torch

from tests.trainers.helpers import grpo_config
from trainers.algorithms.grpo import build_grpo_trainer


def spread_reward(completions, completion_ids, turn_reward, **kwargs):
    """A reward with spread on any model, for every role's turns."""
    rows = zip(turn_reward, completion_ids, strict=True)
    return [None if r is None else (sum(c) % 97) / 100 for r, c in rows]


def trained(trainer) -> list[torch.Tensor]:
    model = trainer.accelerator.unwrap_model(trainer.model)
    return [p.detach().clone().double() for p in model.parameters() if p.requires_grad]


def main(model_path: str, tmp: str, layout: str) -> None:
    args = grpo_config(
        Path(tmp),
        gradient_accumulation_steps=2,
        max_completion_length=6,
        max_steps=2,
        learning_rate=5e-2,
    )
    trainer = build_grpo_trainer(
        model_path,
        "math/reflection-v0",
        {"rounds": 1},
        args,
        train_problems=16,
        num_envs=8,
        role_adapters=layout == "adapters",
        role_models=layout == "models",
        lora_r=4,
    )
    trainer.reward_funcs[0] = spread_reward
    before = trained(trainer)
    trainer.train()
    after = trained(trainer)
    moved = max((a - b).abs().max().item() for a, b in zip(after, before, strict=True))
    # every process's weights, side by side: equal if the gradients were averaged
    flat = torch.cat([p.reshape(-1) for p in after]).unsqueeze(0)
    gathered = trainer.accelerator.gather(flat)
    if trainer.accelerator.is_main_process:
        assert gathered.shape[0] == 2, gathered.shape
        differ = (gathered[0] - gathered[1]).abs().max().item()
        assert differ < 1e-6, f"the processes' weights differ by {differ}: gradients not averaged"
        assert moved > 1e-4, f"training moved no weight (max change {moved})"
        print(f"PER-ROLE DDP OK {differ:.2e} moved {moved:.2e}")


if __name__ == "__main__":
    main(*sys.argv[1:4])
