"""SFT of a team's roles on their own good turns (stage 1 of the SFT -> DPO pipeline).

It trains any env whose facts state answering and reviewing roles (`envs.options.EnvFacts`:
reflection's solver, refiner and critic; the tool env's executor and verifier, whose analyzer's
plans are never scored and so give no rows); ``mathteams train`` offers it for those
(`trainers.run.cli.ALGOS`).

Design
------
**Rows from rollouts.** Each round (`trainers.algorithms.rounds`: expert iteration, bounded by the
time budget and ``iterations``) the latest model plays ``rollout_samples`` episodes of each of
``rollout_problems`` fresh training problems through the rollout engine. A turn becomes a chat row
(``messages`` = the observation exactly as the policy saw it, formatted by
`agents.prompts.build_messages`, plus the reply as the assistant message) when it was good:

- answering roles (solver, refiner, executor): ``info["correct"]`` is true;
- reviewing roles (the env's facts' ``review_roles``: critic, verifier): it gave a verdict and
  the verdict matched the truth of the answer it reviewed (``info["verdict"] ==
  info["reviewed_correct"]``);
- and, where the env audits the role's arithmetic (reflection's ``audit``), every equation it
  states holds: a right verdict reached through ``23 - 21 = 0`` teaches the shortcut.

Rows are deduplicated on (prompt, reply). ``roles`` selects which roles' turns are kept, so the
solver/refiner and the critic can be trained as separate models (``--sft_roles critic``) or one
shared model on all of them (the default).

**Loss on the trained role only.** TRL's `SFTTrainer` with ``assistant_only_loss=True``: the chat
template's ``{% generation %}`` markers make the loss cover the assistant reply and nothing of
the system prompt, the problem or the other agents' text quoted in the prompt. A template without
the markers that TRL cannot patch (most instruct models' own: SmolLM2's) trains the same way on
prompt-completion rows instead (the reply as the completion of the messages before it,
`marks_replies`).
"""

from __future__ import annotations

import copy
import random
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from datasets import Dataset
from trl import SFTConfig, SFTTrainer, get_training_chat_template

from agents.base import GenerationArguments
from agents.hf import HFPolicy
from agents.prompts import build_messages
from envs.roles import role_of
from trainers.algorithms.trainable import freeze_except, no_gradient_checkpointing
from trainers.precision import guard_attention
from trainers.rollout.engine import RolloutEngine
from trainers.rollout.records import Episode, Turn, answer_roles_of, is_review, review_roles_of
from trainers.rollout.source import RunSource


def good_turn(turn: Turn, reviewing: Collection[str]) -> bool:
    """A correct answer, or a review's verdict that matched the truth of the reviewed answer (a
    turn of one of `reviewing`, its episode's review roles: `review_roles_of`); not a turn its
    env's arithmetic audit failed (``info["audit_failed"]``: it stated a false equation,
    `envs.reflection`)."""
    if turn.info.get("audit_failed"):
        return False
    if is_review(turn, reviewing):  # a review (critic, verifier): its verdict
        verdict = turn.info.get("verdict")
        return verdict is not None and verdict == turn.info.get("reviewed_correct")
    return bool(turn.info.get("correct"))


def chat_row(turn: Turn, reply: str | None = None) -> list[dict[str, str]]:
    """The turn's prompt messages plus `reply` (default: the turn's own text) as assistant."""
    text = turn.text if reply is None else reply
    return [*build_messages(turn.observation), {"role": "assistant", "content": text}]


def parse_roles(roles: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """``"solver,refiner"`` -> ``("solver", "refiner")``; empty or None -> None (every role)."""
    if roles is None:
        return None
    items = roles.split(",") if isinstance(roles, str) else list(roles)
    names = tuple(r.strip() for r in items if r.strip())
    return names or None


def sft_rows(
    episodes: Iterable[Episode],
    roles: str | Sequence[str] | None = None,
    balance: bool = False,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Chat rows (``messages``, ``role``, ``problem_id``, ``under_review``) of the good turns of
    `roles`. ``under_review``: whether the answer the turn reviewed (critic) or revised (refiner)
    was right; None for a first answer. With `balance`, `balance_rows` evens those cases."""
    keep = parse_roles(roles)
    rows, seen = [], set()
    for episode in episodes:
        answering, reviewing = answer_roles_of(episode), review_roles_of(episode)
        previous: Turn | None = None
        for turn in episode.turns:
            role = role_of(turn.agent)
            review = is_review(turn, reviewing)
            under_review = turn.info.get("reviewed_correct") if review else None
            if under_review is None and previous is not None and role in answering:
                under_review = bool(previous.info.get("correct"))
            if role in answering:
                previous = turn
            if keep is not None and role not in keep:
                continue
            if not turn.text.strip() or not good_turn(turn, reviewing):
                continue
            key = (turn.observation.get("instruction"), turn.observation.get("prompt"), turn.text)
            if key in seen:
                continue
            seen.add(key)
            rows.append(
                {
                    "messages": chat_row(turn),
                    "role": role,
                    "problem_id": episode.problem_id,
                    "under_review": under_review,
                }
            )
    return balance_rows(rows, seed) if balance else rows


def balance_rows(rows: Sequence[dict[str, Any]], seed: int = 0) -> list[dict[str, Any]]:
    """`rows` with, per role, as many rows on a right answer under review as on a wrong one: the
    larger case is cut to the smaller's size (a seeded draw; order kept). A role with one case
    only, and first answers (``under_review`` None), keep every row.

    Why: as the team improves, most answers under review are right, so a critic's good turns
    would be mostly ``correct`` verdicts and a refiner's mostly kept answers, and the rarer
    skills (rejecting, repairing) would get ever fewer rows. On the embedded team the two did
    not differ beyond the runs' intervals (an earlier build: `git show 93f0224:docs/results.md`,
    "SFT and DPO in rounds")."""
    cases: dict[tuple[str, bool], list[int]] = {}
    for i, row in enumerate(rows):
        if row["under_review"] is not None:
            cases.setdefault((row["role"], row["under_review"]), []).append(i)
    rng = random.Random(seed)
    dropped: set[int] = set()
    for (role, truth), indices in cases.items():
        other = cases.get((role, not truth), [])
        if other and len(indices) > len(other):
            dropped.update(set(indices) - set(rng.sample(indices, len(other))))
    return [row for i, row in enumerate(rows) if i not in dropped]


@dataclass
class RolloutSettings:
    """How SFT and DPO play the training problems their rows and pairs are cut from, and how
    their rounds are chosen between (`trainers.algorithms.rounds`).

    Round selection (on by default, ``select_on_validation``): the start model and each round's
    model are scored on ``validation_problems`` x ``validation_samples`` episodes of validation
    problems (generated tasks: their validation split; a user's JSONL or a hub split: the
    training problems after the first ``train_problems``, which no round plays), by
    ``select_metric`` (any numeric key of the evaluation's metrics, higher is better; default
    the team's majority vote ``maj1@turnK``). The best-scoring model, the start model included,
    becomes ``final/``; a stage stops after ``patience`` rounds in a row without a better score
    (0 or None: never early). The checks' time counts inside ``--max_train_minutes``; with
    ``--eval_problems 0`` (no evaluation at all) there is none, and the newest round is kept.
    """

    rollout_problems: int = field(
        default=256, metadata={"help": "Training problems rolled out to build the data."}
    )
    rollout_samples: int = field(default=4, metadata={"help": "Episodes per problem (G)."})
    rollout_temperature: float = field(default=1.0, metadata={"help": "Rollout temperature."})
    max_completion_length: int = field(
        default=96,
        metadata={
            "help": "Tokens per turn, of the rollouts and the evaluations (the embedded critic's "
            "checks need ~70)."
        },
    )
    sft_balance: bool = field(
        default=True,
        metadata={
            "help": "SFT: per role, as many rows on right answers under review as on wrong ones."
        },
    )
    iterations: int = field(
        default=100,
        metadata={
            "help": "Rounds of rollout -> training, each on fresh problems played by the "
            "latest model (the time budget, --max_train_minutes, usually ends them first)."
        },
    )
    select_on_validation: bool = field(
        default=True,
        metadata={
            "help": "Score the start model and each round's on validation problems, keep the "
            "best as final/ and stop after --patience rounds without improvement."
        },
    )
    validation_problems: int = field(
        default=100,
        metadata={
            "help": "Validation problems per check (generated tasks: their validation split; "
            "others: the training problems after --train_problems, which rollouts never play)."
        },
    )
    validation_samples: int = field(
        default=1, metadata={"help": "Episodes per validation problem."}
    )
    select_metric: str = field(
        default="maj1@turnK",
        metadata={"help": "The evaluation's metric to maximise, e.g. maj1@turnK or accuracy."},
    )
    patience: int | None = field(
        default=2,
        metadata={
            "help": "Stop a stage's rounds after this many rounds in a row without a better "
            "validation score (0: never stop early)."
        },
    )

    def __post_init__(self) -> None:
        if self.validation_problems < 1 or self.validation_samples < 1:
            raise ValueError(
                f"validation_problems={self.validation_problems} and validation_samples="
                f"{self.validation_samples} must both be >= 1 (--select_on_validation false "
                "turns the validation check off)"
            )
        if self.patience is not None and self.patience < 0:
            raise ValueError(f"patience={self.patience}; it must be >= 0 (0: no early stop)")
        if not self.select_metric:
            raise ValueError("select_metric is empty; e.g. 'maj1@turnK'")
        parent = getattr(super(), "__post_init__", None)
        if parent is not None:
            parent()


@dataclass
class CPUSFTConfig(RolloutSettings, SFTConfig):
    """TRL's `SFTConfig` with defaults for a short CPU run, plus the rollout settings and the
    rounds' selection on validation problems (`RolloutSettings`).

    ``sft_roles``: comma-separated roles whose turns are trained (empty: every role).
    """

    _argument_group_name = "SFT (TRL's SFTConfig, CPU defaults, rollout rounds)"  # --help's section (`trainers.run.parser`)

    output_dir: str = field(default="outputs/sft", metadata={"help": "Where to write."})
    use_cpu: bool = field(default=True, metadata={"help": "Train on the CPU."})
    bf16: bool = field(default=False, metadata={"help": "bf16 mixed precision."})
    gradient_checkpointing: bool | None = no_gradient_checkpointing()
    assistant_only_loss: bool = field(
        default=True, metadata={"help": "Loss on the assistant reply only."}
    )
    # 2e-4 broke an earlier embedded team on its own right turns, 5e-5 kept it level (`git show
    # 93f0224:docs/results.md`, "The reflection pipelines with the audit").
    learning_rate: float = field(default=5e-5, metadata={"help": "Adam learning rate."})
    per_device_train_batch_size: int = field(default=16, metadata={"help": "Rows per batch."})
    max_steps: int = field(default=60, metadata={"help": "Optimizer steps."})
    max_length: int | None = field(default=1024, metadata={"help": "Tokens per row."})
    logging_steps: float = field(default=1, metadata={"help": "Log every N steps."})
    save_strategy: str = field(default="no", metadata={"help": "Checkpointing."})
    report_to: list[str] = field(default_factory=lambda: ["none"], metadata={"help": "Loggers."})
    lr_scheduler_type: str = field(default="constant", metadata={"help": "LR schedule."})
    sft_roles: str = field(default="", metadata={"help": "Roles to train, e.g. 'critic'."})


def rollout_episodes(
    job: RunSource, model_path: str, config: Any, seed: int | None = None, offset: int = 0
) -> list[Episode]:
    """Play `config.rollout_samples` episodes of `config.rollout_problems` training problems,
    from index `offset` of the first ``job.train_problems`` (wrapping around them)."""
    if config.rollout_problems < 1 or config.rollout_samples < 1:
        raise ValueError(
            f"rollout_problems={config.rollout_problems} and rollout_samples="
            f"{config.rollout_samples} must both be >= 1"
        )
    generation = GenerationArguments(
        max_new_tokens=config.max_completion_length,
        temperature=config.rollout_temperature,
        seed=config.seed if seed is None else seed,
    )
    policy = HFPolicy.from_pretrained(model_path, generation)
    engine = RolloutEngine(
        job.env_id,
        policy,
        job.protocol("train").env_kwargs(),
        num_envs=job.num_envs,
        progress=True,
    )
    source = engine.task.source
    pool = min(job.train_problems or len(source), len(source))
    count = min(config.rollout_problems, pool)
    ids = [source[(offset + i) % pool]["id"] for i in range(count)]
    return engine.run(ids, group_size=config.rollout_samples, seed=generation.seed)


def build_sft_trainer(
    model_path: str,
    rows: Sequence[dict[str, Any]],
    args: SFTConfig,
    trainable: str | None = None,
    **kwargs: Any,
) -> SFTTrainer:
    """TRL's `SFTTrainer` on chat rows (only their ``messages`` are used); with `trainable` (a
    regex) only the parameters whose names match it train."""
    if not rows:
        raise ValueError("no SFT rows: nothing to train on")
    if args.assistant_only_loss and not marks_replies(model_path):
        # The same loss without the markers: the reply as the completion of the messages before
        # it, so the loss covers the reply (and its end-of-turn text) and nothing of the prompt.
        dataset = Dataset.from_list(
            [{"prompt": r["messages"][:-1], "completion": r["messages"][-1:]} for r in rows]
        )
        args = copy.copy(args)  # the caller's config is left as it was
        args.assistant_only_loss, args.completion_only_loss = False, True
    else:
        dataset = Dataset.from_list([{"messages": r["messages"]} for r in rows])
    return offline_trainer(SFTTrainer, model_path, args, dataset, trainable, **kwargs)


def marks_replies(model_path: str) -> bool:
    """Whether `SFTTrainer` can confine an ``assistant_only_loss`` to the replies with the chat
    template of `model_path`'s tokenizer: the template has ``{% generation %}`` markers, or TRL
    ships a marked copy of it (`trl.get_training_chat_template`). Most instruct models' own
    templates have none (SmolLM2's ChatML template, for one), and TRL refuses those."""
    from transformers import AutoTokenizer

    try:
        get_training_chat_template(AutoTokenizer.from_pretrained(model_path))
    except ValueError:
        return False
    return True


def offline_trainer(
    trainer_cls: type,
    model_path: str,
    args: Any,
    dataset: Dataset,
    trainable: str | None = None,
    **kwargs: Any,
) -> Any:
    """A TRL trainer of `trainer_cls` (SFT, DPO) on `dataset` from `model_path` and its tokenizer;
    with `trainable` (a regex) only the parameters whose names match it train."""
    from transformers import AutoTokenizer

    trainer = trainer_cls(
        model=model_path,
        args=args,
        train_dataset=dataset,
        processing_class=AutoTokenizer.from_pretrained(model_path),
        **kwargs,
    )
    if trainable:  # before train() builds the optimizer from the parameters that require grad
        freeze_except(trainer.model, trainable)
    guard_attention(trainer.args, trainer.accelerator.device)  # bf16 on CUDA: trainers.precision
    return trainer
