"""The training scripts' arguments, parsed once by `trainers.run.parser.RunParser` (a
`TrlParser`) next to the env's options group (`trainers.run.options.options_group`) and the
algorithm's config (`CPUGRPOConfig`, ... in `trainers.algorithms`):

- `EnvArguments`: the env, its task and problems;
- the env's own options (rounds, rewards, protocol), derived from its options dataclass;
- `RolloutArguments`: how episodes are played and paid (copies, role weights, branching) and the
  run's time budget;
- `ModelArguments`: the start model and what of it trains (a small dataclass, not TRL's
  `ModelConfig`: that one's fields -- dtype, attention, quantisation, ``use_peft`` with its own
  LoRA defaults -- would be accepted here and silently ignored, as no builder reads them);
- `EvalArguments`: the before/after evaluation, which plays the training env with its own split
  and problem count as the only overrides (`trainers.run.bridge.eval_config`);
- `WarmupArguments`: the SFT warm-up before RL (`trainers.run.warmup`).

`Job` holds the parsed groups apart, what the train functions take. Each group checks its own
fields in ``__post_init__``, the env's options class its options; ``--help`` prints one section
per group.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import envs
from envs.protocol import Protocol
from envs.tasks import default_levels, is_procedural
from envs.tasks.mixed import is_mixed
from envs.tasks.problems import ProblemSet
from trainers.embedded import EMBEDDED_TASK
from trainers.evaluation.splits import Levels
from trainers.run.options import option_kwargs
from trainers.run.problem_args import problem_arguments


def comma_items(text: str) -> list[str]:
    """The stripped, non-empty items of a comma-separated flag (``"a, b,"`` -> ``["a", "b"]``)."""
    return [part.strip() for part in text.split(",") if part.strip()]


TrainProblemArguments = problem_arguments(
    "TrainProblemArguments",
    {
        "task": "task",
        "data_path": "data_path",
        "split": "split",
        "levels": "difficulty",
        "count": "train_problems",
        "verifier": "verifier",
    },
    group="env (the env, its task, split and problems; its options below)",
    defaults={"task": EMBEDDED_TASK, "levels": [], "count": 2000},
    helps={
        "task": "Task name, or several joined by '+' to train on all of them at once "
        "(e.g. 'unknown+arithmetic+reach'; envs.tasks.mixed).",
        "split": "Training split of the task.",
        "levels": "Levels of a generated task (reach, unknown, a task family, arithmetic); "
        "default: the task's declared default levels (envs.tasks.Levels).",
        "count": "Number of training problems.",
    },
)


@dataclass
class EnvArguments(TrainProblemArguments):
    """Which env a training script plays, on which task and problems: the env id, and the
    training problems as a group derived from `envs.tasks.problems.ProblemSet`'s fields
    (`trainers.run.problem_args`).

    The env's own options (rounds, rewards, protocol...) are not here: each env states them in
    its options dataclass (`envs.options`), and the scripts add them as their own argument group
    (`trainers.run.options.options_group`).

    Args:
        env_id (`str`, set by the script): the registered env.
        task (`str`, "unknown"), data_path (`str | None`), split (`str | None`): the task
            (default: the one the embedded model is built on); several joined by ``+``
            (``unknown+arithmetic+reach``) train on all of them, interleaved (`envs.tasks.mixed`).
        difficulty (`list[int]`): levels of a generated task (default: the task's declared
            defaults; a mixed task's: the same given levels for each member, else each
            member's own).
        train_problems (`int`, 2000): training problems (the task's train split).
        verifier (`str | None`): a verifier name instead of the task's own, e.g. "math".
    """

    env_id: str = field(default="math/reflection-v0", metadata={"help": "Registered env id."})

    def __post_init__(self) -> None:
        if not self.difficulty and not is_mixed(self.task) and is_procedural(self.task):
            self.difficulty = default_levels(self.task)
        if self.train_problems < 1:
            raise ValueError(f"train_problems must be >= 1, got {self.train_problems}")

    def levels(self) -> Levels:
        """The training levels: `difficulty`, or a mixed task's per member (the same given
        levels for each, else each member's declared defaults)."""
        return self.problem_set().level_list()

    def problem_set(self, split: str | None = None, count: int | None = None) -> ProblemSet:
        """The training problems (`envs.tasks.problems.ProblemSet`): a generated task's levels
        cycled (`repeat`, 10,000 problems a level unless `count`), from `split` (default: its own,
        the train split of a generated task)."""
        given = self.problem_values()
        return ProblemSet(
            **{
                **given,
                "split": split or given["split"],
                "levels": given["levels"] or None,
                "count": count or 10_000,
                "verifier": None,  # the env's option (`Job.env_options`), beside its own
                "repeat": True,
            }
        )


@dataclass
class RolloutArguments:
    """How the run plays and pays its episodes, and its time budget.

    Args:
        max_train_minutes (`float | None`, 15): wall-clock budget of the training loop (GRPO,
            PPO: its steps; SFT, DPO: its rounds, rollouts included,
            `trainers.algorithms.rounds`); the scripts' defaults are time-bounded by it.
        save_minutes (`float | None`, 10): GRPO, PPO: a checkpoint every this many minutes of
            training, beside the config's ``save_steps`` (`trainers.run.budget.Checkpoints`).
        num_envs (`int`, 64): env copies the rollout engine runs at once.
        role_weights (`str`, ""): reward weight per role, e.g. "solver=1,critic=0.5".
        branch_turns (`bool`, False): GRPO: branched rollouts; every turn's G samples reply to
            one shared history, so each turn's group baseline compares replies, not histories.
        mask_uniform_groups (`bool`, False): GRPO: drop from the loss the turn groups whose G
            rewards are all equal (zero advantage: no signal), so they do not dilute the
            token-normalised loss of the groups that carry one.
        turn_credit (`str`, "reward"): GRPO: a turn row is paid its turn's reward, or
            (``"return"``) its agent's summed rewards from that turn to the episode's end, so a
            turn that continues an episode is credited with what follows (for ``stop_on_accept``
            and team rewards; `trainers.algorithms.rows`).
    """

    _argument_group_name = "rollouts and budget (how episodes are played and paid; the time)"

    max_train_minutes: float | None = field(
        default=15.0,
        metadata={"help": "Training time budget in minutes (GRPO, PPO: steps; SFT, DPO: rounds)."},
    )
    save_minutes: float | None = field(
        default=10.0,
        metadata={
            "help": "GRPO, PPO: a checkpoint every N minutes of training, beside --save_steps "
            "(--save_total_limit of them kept)."
        },
    )
    num_envs: int = field(default=64, metadata={"help": "Env copies run at once."})
    role_weights: str = field(
        default="", metadata={"help": "Reward weight per role, e.g. 'solver=1,critic=0.5'."}
    )
    branch_turns: bool = field(
        default=False,
        metadata={
            "help": "GRPO: sample every turn G times from one shared history (a branched "
            "rollout), so a turn's group baseline compares replies, not the histories before them."
        },
    )
    mask_uniform_groups: bool = field(
        default=False,
        metadata={
            "help": "GRPO: leave out of the loss the turn groups whose rewards are all equal "
            "(no signal), so they do not dilute the token-normalised loss."
        },
    )

    turn_credit: str = field(
        default="reward",
        metadata={
            "help": "GRPO: pay a turn row its turn's reward ('reward'), or its agent's return "
            "from that turn to the episode's end ('return': credits continuing an episode; for "
            "stop_on_accept and team rewards).",
            "choices": ["reward", "return"],
        },
    )

    def __post_init__(self) -> None:
        if self.turn_credit not in ("reward", "return"):
            raise ValueError(f"turn_credit must be 'reward' or 'return', got {self.turn_credit!r}")
        if self.max_train_minutes is not None and not self.max_train_minutes > 0:
            raise ValueError(f"max_train_minutes must be > 0, got {self.max_train_minutes}")
        if self.save_minutes is not None and not self.save_minutes > 0:
            raise ValueError(f"save_minutes must be > 0 or None, got {self.save_minutes}")
        if self.num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {self.num_envs}")
        self.weights()  # validate early

    def weights(self) -> dict[str, float]:
        """`role_weights` as a dict, or a ValueError saying the expected form."""
        out = {}
        for part in comma_items(self.role_weights):
            role, sep, value = part.partition("=")
            try:
                out[role.strip()] = float(value)
            except ValueError:
                sep = ""
            if not sep or not role.strip():
                raise ValueError(
                    f"role_weights entry {part!r} must read ROLE=NUMBER, e.g. 'critic=0.5'"
                )
        return out


@dataclass
class ModelArguments:
    """The start model and what of it trains.

    Args:
        model_name_or_path (`str | None`): hub id or folder; None trains the embedded model.
        role_adapters (`bool`, False): GRPO/PPO train one LoRA adapter per role (rank `lora_r`,
            alpha `lora_alpha`) on the frozen start model instead of the whole shared model.
        trainable_params (`str`, ""): train only the parameters matching this regex (every
            algorithm; in dpo, its SFT rounds too).
        role_models (`str`, ""): GRPO/PPO train a full model per role: "all" gives every role its
            own copy of the start model; "critic=PATH,..." starts those roles from PATH (the rest
            from the start model).
        lora_r (`int`, 8), lora_alpha (`int`, 16): rank and alpha of each role's adapter.
    """

    _argument_group_name = "model (the start model and what of it trains)"

    model_name_or_path: str | None = field(
        default=None, metadata={"help": "Hub id or folder; default: the embedded model."}
    )
    role_adapters: bool = field(
        default=False,
        metadata={"help": "GRPO/PPO: train a LoRA adapter per role on the frozen start model."},
    )
    lora_r: int = field(default=8, metadata={"help": "Rank of each role's LoRA adapter."})
    lora_alpha: int = field(default=16, metadata={"help": "Alpha of each role's LoRA adapter."})
    trainable_params: str = field(
        default="",
        metadata={
            "help": "Train only the parameters whose names match this regex (e.g. '^model\\.norm\\.' "
            "for the final RMSNorm); the rest stay frozen. Empty: train all."
        },
    )
    role_models: str = field(
        default="",
        metadata={
            "help": "GRPO/PPO: train a full model per role: 'all' (each role a copy of the start "
            "model) or 'ROLE=PATH,...' (those roles start from PATH, the rest from the start model)."
        },
    )

    def __post_init__(self) -> None:
        if self.lora_r < 1 or self.lora_alpha < 1:
            raise ValueError(
                f"lora_r and lora_alpha must be >= 1, got {self.lora_r}, {self.lora_alpha}"
            )
        self.role_model_paths()
        if self.role_models and self.role_adapters:
            raise ValueError("pass --role_models or --role_adapters, not both")
        if self.trainable_params:
            try:
                re.compile(self.trainable_params)
            except re.error as exc:
                raise ValueError(
                    f"trainable_params {self.trainable_params!r} is not a regex: {exc}"
                ) from exc

    def role_model_paths(self) -> bool | dict[str, str]:
        """`role_models` as the trainers take it: False, True ("all") or {role: path}."""
        text = self.role_models.strip()
        if text in ("", "all"):
            return text == "all"
        out = {}
        for part in comma_items(text):
            role, sep, path = part.partition("=")
            if not sep or not role.strip() or not path.strip():
                raise ValueError(
                    f"role_models entry {part!r} must read ROLE=PATH (e.g. 'critic=./critic'), "
                    "or pass 'all' for a copy of the start model per role"
                )
            out[role.strip()] = path.strip()
        return out

    def builder_kwargs(self) -> dict:
        """The trainer builders' model arguments (role adapters, role models, trainable)."""
        return {
            "role_adapters": self.role_adapters,
            "lora_r": self.lora_r,
            "lora_alpha": self.lora_alpha,
            "role_models": self.role_model_paths(),
            "trainable": self.trainable_params or None,
        }


EvalProblemArguments = problem_arguments(
    "EvalProblemArguments",
    {
        "count": "eval_problems",
        "split": "eval_split",
        "levels": "eval_difficulty",
        "data_path": "eval_data_path",
    },
    group="evaluation (before and after training, on held-out problems)",
    defaults={"count": 200},
    helps={
        "count": "Held-out problems for evaluation.",
        "split": "Split of the before/after evaluation: 'test' (generated tasks' default; "
        "reports) or 'validation' (choose settings on it); other tasks: their default split.",
        "levels": "Levels of a generated task to evaluate (default: the training levels that "
        "hold their share of --eval_problems as distinct problems of the split).",
        "data_path": "Local JSONL of held-out problems (with --data_path, which trains).",
    },
)


@dataclass
class EvalArguments(EvalProblemArguments):
    """The before/after evaluation on held-out problems. It plays the training env
    (`EnvArguments`: task, levels, rounds, agents, verifier, rewards, protocol) with these
    overrides only: the problems, a group derived from `envs.tasks.problems.ProblemSet`'s fields
    (``eval_split``, ``eval_problems``, ``eval_difficulty``, ``eval_data_path``;
    `Job.eval_set`), the episodes per problem and the temperature
    (`trainers.run.bridge.eval_config`). Its tokens per turn are training's
    (``max_completion_length``, every algorithm's config).

    Args:
        eval_problems (`int`, 200): held-out problems evaluated before and after training.
        eval_samples (`int`, 2): episodes per held-out problem.
        eval_split (`str | None`): the split they come from: generated tasks "test" (report) or
            "validation" (choose settings on it); other tasks: their own default split.
        eval_difficulty (`list[int] | None`): levels of a generated task to evaluate; None: the
            training levels that hold their share of `eval_problems` as distinct texts of the
            split (`ProblemSet.held`).
        eval_data_path (`str | None`): a local JSONL file of held-out problems; needed with
            `data_path`, whose problems the run trains on.
        allow_overlap (`bool`, False): train even when evaluation problems occur among the
            training problems (the run refuses to start otherwise: `trainers.evaluation.held_out`).
        eval_temperature (`float | None`): sampling temperature of the before/after evaluations;
            None: the training temperature (GRPO/PPO's `temperature`, else 1.0).
    """

    eval_samples: int = field(default=2, metadata={"help": "Episodes per held-out problem."})
    allow_overlap: bool = field(
        default=False,
        metadata={
            "help": "Train even when evaluation problems occur among the training problems "
            "(refused by default)."
        },
    )
    eval_temperature: float | None = field(
        default=None,
        metadata={"help": "Temperature of the before/after evaluations (default: training's)."},
    )

    def __post_init__(self) -> None:
        if self.eval_problems < 0:
            raise ValueError(f"eval_problems must be >= 0, got {self.eval_problems}")
        if self.eval_split is not None and self.eval_split == "train":
            raise ValueError(
                "eval_split 'train' evaluates on the problems the run trains on; pass 'test' "
                "(report) or 'validation' (choose settings)"
            )
        if self.eval_temperature is not None and not self.eval_temperature > 0:
            raise ValueError(f"eval_temperature must be > 0, got {self.eval_temperature}")


@dataclass
class WarmupArguments:
    """GRPO/PPO's SFT warm-up on demonstrations of the env's roles (`trainers.run.warmup`).

    Args:
        warmup_sft_steps (`int | None`): GRPO/PPO: SFT steps on demonstrations of the env's
            roles before RL (`trainers.run.warmup`); None: 500 when an embedded build starts an
            env with a role it was never trained on (``train_tool.py`` on the shipped model),
            else 0.
        warmup_data (`str`, "embedded"): the warm-up's demonstrations: "embedded" (the embedded
            recipe's transcripts, ``unknown`` task) or a JSONL of ``{"messages": [...]}`` chats.
        warmup_learning_rate (`float`, 2e-3): the warm-up's peak learning rate (cosine).
    """

    _argument_group_name = "warm-up (GRPO/PPO: SFT on demonstrations before RL)"

    warmup_sft_steps: int | None = field(
        default=None,
        metadata={
            "help": "GRPO/PPO: SFT steps on demonstrations of the env's roles before RL; default: "
            "500 when the embedded model has never played a role of the env, else 0."
        },
    )
    warmup_data: str = field(
        default="embedded",
        metadata={
            "help": "Warm-up demonstrations: 'embedded' (the embedded recipe's transcripts of "
            'the unknown task) or a JSONL file of {"messages": [...]} chats.'
        },
    )
    warmup_learning_rate: float = field(
        default=2e-3, metadata={"help": "Peak learning rate of the warm-up SFT (cosine)."}
    )

    def __post_init__(self) -> None:
        if self.warmup_sft_steps is not None and self.warmup_sft_steps < 0:
            raise ValueError(f"warmup_sft_steps must be >= 0, got {self.warmup_sft_steps}")
        if not self.warmup_learning_rate > 0:
            raise ValueError(f"warmup_learning_rate must be > 0, got {self.warmup_learning_rate}")


GROUPS = (EnvArguments, RolloutArguments, ModelArguments, EvalArguments, WarmupArguments)


@dataclass(frozen=True)
class Job:
    """A training run's parsed groups, kept apart (as TRL's scripts keep ``script_args``,
    ``training_args`` and ``model_args``): what the train functions take beside the algorithm's
    config. ``options`` holds the env's own options as the env takes them (``{"rounds": 2,
    "audit": ("critic",), ...}``), checked here once by the env's options class.

    `Job.of` builds one from flat names (``Job.of(env_id=..., eval_problems=0, rounds=1)``), for
    tests and notebooks.
    """

    env: EnvArguments
    options: Mapping[str, Any] = field(default_factory=dict)
    rollout: RolloutArguments = field(default_factory=RolloutArguments)
    model: ModelArguments = field(default_factory=ModelArguments)
    eval: EvalArguments = field(default_factory=EvalArguments)
    warmup: WarmupArguments = field(default_factory=WarmupArguments)

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", dict(self.options))
        self.protocol("train")  # the env's own errors, before any model loads

    @classmethod
    def of(cls, **values: Any) -> Job:
        """A `Job` from flat names: each group's fields go to it, the rest are the env's
        options (a sequence option may be written as on the command line, ``audit="critic,
        refiner"``); a name that is neither raises, naming what is accepted."""
        groups: dict[str, Any] = {}
        for name, group in zip(("env", "rollout", "model", "eval", "warmup"), GROUPS, strict=True):
            names = {f.name for f in dataclasses.fields(group)}
            groups[name] = group(**{k: values.pop(k) for k in list(values) if k in names})
        env_id = groups["env"].env_id
        known = envs.spec(env_id).options
        allowed = {f.name for f in dataclasses.fields(known)} if known else set()
        unknown = sorted(set(values) - allowed)
        if unknown:
            raise TypeError(
                f"Job.of() got unexpected arguments {unknown}: neither a field of "
                f"{', '.join(g.__name__ for g in GROUPS)} nor an option of {env_id}"
            )
        return cls(options={**values, **option_kwargs(env_id, values)}, **groups)

    # The run's settings that the layers below read (`trainers.rollout.source.RunSource`).
    @property
    def env_id(self) -> str:
        return self.env.env_id

    @property
    def train_problems(self) -> int:
        return self.env.train_problems

    @property
    def num_envs(self) -> int:
        return self.rollout.num_envs

    @property
    def max_train_minutes(self) -> float | None:
        return self.rollout.max_train_minutes

    @property
    def allow_overlap(self) -> bool:
        return self.eval.allow_overlap

    def env_options(self) -> dict[str, Any]:
        """The env's kwargs beyond its task and problems, as training and evaluation both pass
        them: the verifier (if chosen) and the env's own options."""
        verifier = {"verifier": self.env.verifier} if self.env.verifier else {}
        return {**verifier, **self.options}

    def protocol(self, split: str | None = None, config: Any = None) -> Protocol:
        """What the run trains on (`envs.protocol.Protocol`): the env, its training problems
        (`train_set`, from `split`), its options, the start model and, from the algorithm's
        `config` where given, its tokens per turn and temperature."""
        return Protocol(
            self.env_id,
            self.train_set(split),
            self.env_options(),
            getattr(config, "max_completion_length", None),
            getattr(config, "temperature", None),
            self.model.model_name_or_path,
        )

    def train_set(self, split: str | None = None, count: int | None = None) -> ProblemSet:
        """The problems the run trains on (`EnvArguments.problem_set`, from `split`; the first
        `count` of them where given)."""
        return self.env.problem_set(split, count)

    def eval_protocol(self, config: Any = None) -> Protocol:
        """What its before/after evaluation plays: the training env and options on the
        held-out problems (the training task and levels, `ProblemSet.evaluated`: a generated
        task's "test" split unless ``--eval_split``, the levels that hold their share of
        ``--eval_problems`` unless ``--eval_difficulty`` names them; ``--eval_data_path`` for a
        file task's), ``--eval_temperature`` or the config's, the config's tokens per turn."""
        env, given = self.env, self.eval.problem_values()
        problems = ProblemSet(
            env.task,
            split=given["split"],
            levels=given["levels"] or None,
            count=given["count"],
            data_path=given["data_path"] or env.data_path,
            verifier=env.verifier,
        ).evaluated(env.difficulty)
        temperature = self.eval.eval_temperature or getattr(config, "temperature", None)
        return dataclasses.replace(
            self.protocol(config=config), problems=problems, temperature=temperature
        )

    def builder_kwargs(self) -> dict[str, Any]:
        """The trainer builders' arguments from the model and rollout groups."""
        return {
            **self.model.builder_kwargs(),
            "branch_turns": self.rollout.branch_turns,
            "mask_uniform_groups": self.rollout.mask_uniform_groups,
            "turn_credit": self.rollout.turn_credit,
        }
