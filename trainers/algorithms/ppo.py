"""Multi-agent PPO: a value head, GAE over each agent's turns, TRL's clipped loss per token.

TRL removed its `PPOTrainer`; this one reuses `GRPOTrainer` for everything but the advantages.

Design
------
**Rows.** As in `trainers.algorithms.grpo`: one row per agent turn with its exact token ids (the
turn-slot dataset and the `TurnRollout` rollout function), so each agent's loss covers its own
tokens only. The advantages read each row's agent and weighted reward from the rows' columns,
which TRL adds to the generation batch's inputs (`compat.rollout_columns`).

**Value head.** ``Linear(hidden_size, 1)`` on the policy's last hidden state at the turn's last
prompt token: V(turn) estimates the agent's return from that turn on, given everything it saw.
The hidden state is computed without gradient (the value loss does not shape the policy's
representation, which keeps TRL's policy loss and optimizer untouched); the head has its own
Adam optimizer (``value_learning_rate``) and is fitted after each rollout with PPO's clipped value
loss ``0.5 * max((V - R)^2, (V_old + clip(V - V_old, +-cliprange_value) - R)^2)`` for
``value_epochs`` passes. Under several processes its gradients are averaged (all-reduce).

**GAE over the agents' turns.** Each agent's turns in one episode form its trajectory (rows of
the same episode are found from the row layout: the s-th row of a block of G is sample s). A
turn's reward is the one the env gave for it (the rollout engine attributes per-turn rewards,
including the debate env's influence-aware bonus and a shared team reward), weighted per role.
With V of the agent's next turn (0 after its last):

    delta_t = r_t + gamma * V_{t+1} - V_t,   A_t = delta_t + gamma * lam * A_{t+1},   R_t = A_t + V_t

Turn-level, not token-level, GAE: the reward arrives once per turn and the value head only sees
turn starts, so every completion token of a turn gets its turn's advantage (padding and masked
tokens get 0). The advantages (optionally whitened over the batch's trainable turns) replace
GRPO's group advantages as a (batch, tokens) tensor, which `GRPOTrainer._compute_loss` takes as
is: the policy loss is TRL's clipped surrogate (``epsilon``, ``num_iterations``, ``beta``).

**Models.** One shared model (with one value head) plays every role, or, with the per-role
builders of `trainers.roles` (``role_adapters``, ``role_models``, as GRPO takes them), a LoRA
adapter or a full model per role, each model with its own value head.

**Checkpoints.** ``value_head.pt`` (head and its optimizer) is written into every checkpoint
(before the files `Trainer` writes last) and the final model folder, and loaded on
``resume_from_checkpoint``; a checkpoint without it is incomplete (`trainers.algorithms.checkpoint`).
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from trainers import compat
from trainers.algorithms.grpo import (
    MultiAgentGRPOTrainer,
    TurnRollout,
    build_grpo_trainer,
)
from trainers.algorithms.grpo_config import CPUGRPOConfig
from trainers.algorithms.rows import parse_slot_prompt

logger = logging.getLogger(__name__)
VALUE_HEAD = "value_head.pt"


@dataclass
class CPUPPOConfig(CPUGRPOConfig):
    """`CPUGRPOConfig` (TRL's `GRPOConfig` with CPU defaults) plus PPO's value and GAE settings."""

    _argument_group_name = "PPO (TRL's GRPOConfig with a value head, CPU defaults)"  # --help's section (`trainers.run.parser`)

    output_dir: str = field(default="outputs/ppo", metadata={"help": "Where to write."})
    gamma: float = field(default=1.0, metadata={"help": "Discount across an agent's turns."})
    lam: float = field(default=0.95, metadata={"help": "GAE lambda."})
    cliprange_value: float = field(default=0.2, metadata={"help": "Value clipping range."})
    value_learning_rate: float = field(default=1e-3, metadata={"help": "Value head Adam LR."})
    value_epochs: int = field(default=2, metadata={"help": "Value head passes per rollout."})
    whiten_advantages: bool = field(
        default=True, metadata={"help": "Normalise advantages over the batch's turns."}
    )

    def __post_init__(self) -> None:
        for name in ("gamma", "lam"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name}={value}; it must be in [0, 1]")
        if self.cliprange_value <= 0 or self.value_learning_rate <= 0 or self.value_epochs < 1:
            raise ValueError(
                "cliprange_value and value_learning_rate must be > 0 and value_epochs >= 1, got "
                f"{self.cliprange_value}, {self.value_learning_rate}, {self.value_epochs}"
            )
        super().__post_init__()


def turn_gae(
    rewards: Sequence[float], values: Sequence[float], gamma: float, lam: float
) -> tuple[list[float], list[float]]:
    """Advantages and returns of one agent's successive turns (the last one is terminal)."""
    advantages = [0.0] * len(rewards)
    running = 0.0
    for t in reversed(range(len(rewards))):
        next_value = values[t + 1] if t + 1 < len(rewards) else 0.0
        delta = rewards[t] + gamma * next_value - values[t]
        running = delta + gamma * lam * running
        advantages[t] = running
    return advantages, [a + v for a, v in zip(advantages, values, strict=True)]


def trajectories(prompts: Sequence[str], group_size: int) -> dict[tuple[str, int], list[int]]:
    """Row indices of each episode, by (problem, sample), in slot (acting) order.

    Rows come in blocks of G equal slot prompts; row ``k * G + s`` is sample ``s`` (see
    `trainers.algorithms.rows.rows_from_episodes`).
    """
    episodes: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
    for index, prompt in enumerate(prompts):
        problem_id, slot = parse_slot_prompt(prompt)
        episodes[(problem_id, index % group_size)].append((slot, index))
    return {key: [i for _, i in sorted(rows)] for key, rows in episodes.items()}


def episode_gae(
    prompts: Sequence[str],
    agents: Sequence[str | None],
    rewards: Sequence[float | None],
    values: Sequence[float],
    group_size: int,
    gamma: float,
    lam: float,
) -> tuple[list[float], list[float], list[bool]]:
    """Per-row advantages, returns and a trainable flag (rows with a reward), GAE per agent."""
    advantages, returns = [0.0] * len(prompts), [0.0] * len(prompts)
    trainable = [r is not None and a is not None for r, a in zip(rewards, agents, strict=True)]
    for rows in trajectories(prompts, group_size).values():
        by_agent: dict[str, list[int]] = defaultdict(list)
        for i in rows:
            if trainable[i]:
                by_agent[str(agents[i])].append(i)
        for turns in by_agent.values():
            adv, ret = turn_gae(
                [float(rewards[i]) for i in turns], [values[i] for i in turns], gamma, lam
            )
            for i, a, r in zip(turns, adv, ret, strict=True):
                advantages[i], returns[i] = a, r
    return advantages, returns, trainable


class MultiAgentPPOTrainer(MultiAgentGRPOTrainer):
    """`GRPOTrainer` whose advantages come from a value head and GAE over each agent's turns."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        rollout = kwargs.get("rollout_func")
        if isinstance(rollout, TurnRollout) and rollout.branch:
            raise ValueError(
                "PPO runs GAE along each episode's turns, and a branched rollout's turns reply "
                "to a shared history, not to each other: train PPO without branch_turns"
            )
        if isinstance(rollout, TurnRollout) and rollout.mask_uniform_groups:
            raise ValueError(
                "mask_uniform_groups drops GRPO groups of equal rewards; PPO's advantages come "
                "from a value head, not the group: train PPO without mask_uniform_groups"
            )
        if isinstance(rollout, TurnRollout) and rollout.turn_credit != "reward":
            raise ValueError(
                f"turn_credit={rollout.turn_credit!r} pays a row its later rewards too; PPO's GAE "
                "already credits each turn with them: train PPO with turn_credit='reward'"
            )
        super().__init__(*args, **kwargs)
        hidden = self.accelerator.unwrap_model(self.model).config.get_text_config().hidden_size
        device = self.accelerator.device
        torch.manual_seed(self.args.seed)
        self.value_head = torch.nn.Linear(hidden, 1).to(device)
        torch.nn.init.zeros_(self.value_head.weight)
        torch.nn.init.zeros_(self.value_head.bias)
        self.value_optimizer = torch.optim.Adam(
            self.value_head.parameters(), lr=self.args.value_learning_rate
        )

    # ------------------------------------------------------------------ values
    @torch.no_grad()
    def turn_features(
        self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, model: Any = None
    ) -> torch.Tensor:
        """Last hidden state at each row's last prompt token (prompts are left-padded).

        `model` defaults to the trainer's; per-role training passes each role's module.
        """
        model = model if model is not None else self.accelerator.unwrap_model(self.model)
        out = model(input_ids=prompt_ids, attention_mask=prompt_mask, output_hidden_states=True)
        return out.hidden_states[-1][:, -1, :].float()

    def fit_values(self, features: torch.Tensor, old: torch.Tensor, returns: torch.Tensor) -> float:
        """PPO's clipped value loss on the rollout's turns; returns the last pass's loss."""
        clip = self.args.cliprange_value
        loss_value = 0.0
        for _ in range(self.args.value_epochs):
            new = self.value_head(features).squeeze(-1)
            clipped = old + (new - old).clamp(-clip, clip)
            loss = 0.5 * torch.max((new - returns) ** 2, (clipped - returns) ** 2).mean()
            self.value_optimizer.zero_grad()
            loss.backward()
            if self.accelerator.num_processes > 1:
                for param in self.value_head.parameters():
                    torch.distributed.all_reduce(param.grad)
                    param.grad /= self.accelerator.num_processes
            self.value_optimizer.step()
            loss_value = float(loss.detach())
        return loss_value

    # ------------------------------------------------------------------ advantages
    @compat.hook
    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        # The rollout's rows carry each row's agent and weighted turn reward; TRL has added them
        # to the batch's input rows, next to the slot prompt the rollout answered.
        rows = compat.rollout_columns(inputs, ("prompt", "agent", "turn_reward"))
        mode = "train" if self.model.training else "eval"
        group = self.num_generations if mode == "train" else self.num_generations_eval
        features = self.turn_features(output["prompt_ids"], output["prompt_mask"])
        values = self.value_head(features).squeeze(-1).detach()
        adv, ret, trainable = episode_gae(
            rows["prompt"],
            rows["agent"],
            rows["turn_reward"],
            values.tolist(),
            group,
            self.args.gamma,
            self.args.lam,
        )
        device = values.device
        keep = torch.tensor(trainable, device=device)
        advantages = torch.tensor(adv, device=device)
        returns = torch.tensor(ret, device=device)
        if keep.any():
            value_loss = self.fit_values(features[keep], values[keep], returns[keep])
            residual = (returns[keep] - values[keep]).var(unbiased=False)
            spread = returns[keep].var(unbiased=False)
            explained = float(1 - residual / spread) if spread > 0 else 0.0
            compat.log_metric(self, mode, "ppo/value_loss", value_loss)
            compat.log_metric(self, mode, "ppo/explained_variance", explained)
            compat.log_metric(self, mode, "ppo/advantage_mean", float(advantages[keep].mean()))
            compat.log_metric(self, mode, "ppo/return_mean", float(returns[keep].mean()))
            compat.log_metric(self, mode, "ppo/value_mean", float(values[keep].mean()))
            if self.args.whiten_advantages and int(keep.sum()) > 1:
                kept = advantages[keep]
                advantages[keep] = (kept - kept.mean()) / (kept.std() + 1e-8)
        advantages = torch.where(keep, advantages, torch.zeros_like(advantages))
        mask = output["completion_mask"].float()
        if output.get("tool_mask") is not None:
            mask = mask * output["tool_mask"].float()
        output["advantages"] = advantages.unsqueeze(1) * mask
        return output

    # ------------------------------------------------------------------ checkpoints
    def save_value_head(self, folder: str | os.PathLike) -> Path:
        path = Path(folder) / VALUE_HEAD
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(
            {"head": self.value_head.state_dict(), "optimizer": self.value_optimizer.state_dict()},
            path,
        )
        return path

    def load_value_head(self, folder: str | os.PathLike) -> bool:
        path = Path(folder) / VALUE_HEAD
        if not path.is_file():
            return False
        state = torch.load(path, map_location=self.accelerator.device, weights_only=True)
        self.value_head.load_state_dict(state["head"])
        self.value_optimizer.load_state_dict(state["optimizer"])
        return True

    def resume_value_head(self, folder: str | os.PathLike) -> None:
        """The checkpoint's value head, or a warning that it starts fresh."""
        if not self.load_value_head(folder):
            logger.warning("%s has no %s: the value head starts fresh", folder, VALUE_HEAD)

    @compat.hook
    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: Any = None) -> None:
        super()._load_from_checkpoint(resume_from_checkpoint, model)
        self.resume_value_head(resume_from_checkpoint)

    @compat.hook
    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        # A checkpoint save calls this first (`_internal_call`), so the head is on disk before the
        # optimizer, RNG and trainer_state.json, the last file a complete checkpoint gets.
        super().save_model(output_dir, _internal_call)
        if self.args.should_save:
            self.save_value_head(output_dir or self.args.output_dir)


def build_ppo_trainer(
    model_path: str,
    env_id: str = "math/reflection-v0",
    env_kwargs: Mapping[str, Any] | None = None,
    args: CPUPPOConfig | None = None,
    role_weights: Mapping[str, float] | None = None,
    train_problems: int | Sequence[str] | None = None,
    num_envs: int = 64,
    **trainer_kwargs: Any,
) -> MultiAgentPPOTrainer:
    """A `MultiAgentPPOTrainer` on every agent's turns of `env_id` (arguments as GRPO's)."""
    args = args or CPUPPOConfig()
    return build_grpo_trainer(
        model_path,
        env_id,
        env_kwargs,
        args,
        role_weights,
        train_problems,
        num_envs,
        trainer_cls=MultiAgentPPOTrainer,
        **trainer_kwargs,
    )
