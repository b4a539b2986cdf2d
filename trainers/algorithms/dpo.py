"""Preference pairs from a reviewed team's rollouts and TRL's `DPOTrainer` (SFT -> DPO's stage 2).

Design
------
**Which envs.** Any env whose facts state answering and reviewing roles
(`envs.options.EnvFacts`): reflection (solver, critic, refiner) and the tool env (analyzer,
executor, verifier). The pairs read the roles from the episode's env, not from their names: an
episode's first answer turn (reflection's solver, the tool env's first executor), its later
answer turns (the revisions: reflection's refiner, the executor after round 0) and its review
turns (the facts' ``review_roles``: critic, verifier). Each pair's ``role`` and ``kind`` is the
role of the turn whose prompt it is on. Below, reflection's names:

**Pairs without extra inference.** Every pair is cut from episodes already played (the same
rollouts SFT uses); nothing is generated to build them. A pair needs one prompt and two replies
to it, so only replies to the *same* prompt are paired:

- ``solver`` (first answers): the G sampled episodes of a problem share the solver's prompt (the
  problem), so a correct first answer is chosen over a wrong one of the same problem.
- ``refiner`` (initial vs refined answer against the reference): in one episode the refiner's
  prompt shows the answer under review and the critic's feedback. When the revision and the
  reviewed answer differ in correctness, the correct text is chosen and the wrong one rejected
  *on the refiner's prompt*: repeating a correct answer beats breaking it, and a correct
  revision beats repeating a wrong answer. The reviewed answer's text was written for the
  solver's (or an earlier refiner's) prompt, but it is a full answer in the same format, so it
  is a meaningful reply to the refiner's prompt too.
- ``critic`` (reviews: feedback that led to a correct refinement vs feedback that did not):
  critic turns are grouped by (problem, critic prompt): the same answer under review, sampled
  in different episodes. A reply whose verdict matched the truth *and* whose episode's next
  refinement was correct is chosen over a reply with a wrong verdict whose next refinement was
  wrong. With ``critic_outcome=False`` only the verdict counts (more pairs, weaker signal).

A turn whose env's arithmetic audit failed (reflection's ``audit``: it stated a false equation)
is never chosen, whatever its answer or verdict: it counts as wrong.

Pairs are deduplicated on (prompt, chosen, rejected) and at most ``max_pairs_per_group`` come from
one group. Rows use TRL's conversational format: ``prompt`` = system + user messages,
``chosen`` / ``rejected`` = one assistant message each, plus ``role``, ``kind``, ``problem_id``.

**Training.** Each round (`trainers.algorithms.rounds`) plays fresh problems with the latest model
and cuts its pairs from that play. One `DPOTrainer` on one shared model over every role's pairs (the
default; TRL loads the frozen reference from the same folder: the round's start model), with
TRL's ``sft`` loss (the NLL of the chosen reply) beside the DPO loss by default: RPO, which kept
the team's arithmetic where DPO alone broke it. ``--dpo_roles critic`` trains on one role's pairs only,
which is how a separate model per role is trained (run once per role with its own
``--model_name_or_path``). ``--sft_first`` runs the SFT stage (`trainers.algorithms.sft`) on each
round's rollouts first and starts that round's DPO (policy and reference) from the SFT model: the
pipeline (`trainers.run.train.train_dpo`).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from datasets import Dataset
from trl import DPOConfig, DPOTrainer

from agents.prompts import build_messages
from envs.roles import role_of
from trainers.algorithms.sft import RolloutSettings, good_turn, offline_trainer, parse_roles
from trainers.algorithms.trainable import no_gradient_checkpointing
from trainers.rollout.records import (
    Episode,
    Turn,
    answer_roles_of,
    is_review,
    review_roles_of,
)


def _reply(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


def _pair(
    prompt_turn: Turn, chosen: str, rejected: str, kind: str, problem_id: str
) -> dict[str, Any]:
    return {
        "prompt": build_messages(prompt_turn.observation),
        "chosen": _reply(chosen),
        "rejected": _reply(rejected),
        "role": role_of(prompt_turn.agent),
        "kind": kind,
        "problem_id": problem_id,
    }


def _cross(good: list[Turn], bad: list[Turn], limit: int) -> Iterable[tuple[Turn, Turn]]:
    """Up to `limit` (good, bad) pairs, spreading over both lists before reusing a turn."""
    pairs = sorted(
        itertools.product(range(len(good)), range(len(bad))), key=lambda ij: (ij[0] + ij[1], ij)
    )
    for i, j in pairs[:limit]:
        yield good[i], bad[j]


def _answer_correct(turn: Turn) -> bool | None:
    """Whether an answer turn was right; a right answer whose env's arithmetic audit failed (it
    stated a false equation) counts as wrong. None: not an answer turn."""
    value = turn.info.get("correct")
    if value is None:
        return None
    return bool(value) and not turn.info.get("audit_failed")


def refiner_pairs(episode: Episode) -> list[dict[str, Any]]:
    """Previous answer vs revised answer, on the revising turn's prompt: every answer turn after
    the episode's first (reflection's refiner, the tool env's executor after round 0)."""
    out = []
    previous: Turn | None = None
    answering = answer_roles_of(episode)
    for turn in episode.turns:
        role = role_of(turn.agent)
        if role not in answering:
            continue
        if previous is not None:
            now, before = _answer_correct(turn), _answer_correct(previous)
            if now is not None and before is not None and now != before:
                good, bad = (turn, previous) if now else (previous, turn)
                if good.text.strip() and bad.text.strip() and good.text != bad.text:
                    out.append(_pair(turn, good.text, bad.text, role, episode.problem_id))
        previous = turn
    return out


def _next_answer(episode: Episode, index: int, answering: tuple[str, ...]) -> Turn | None:
    """The first answer turn after turn `index`: the revision a review led to."""
    for turn in episode.turns[index + 1 :]:
        if role_of(turn.agent) in answering:
            return turn
    return None


def solver_pairs(episodes: Sequence[Episode], limit: int) -> list[dict[str, Any]]:
    """A correct first answer over a wrong one to the same prompt (reflection's solver: the
    problem, which the G sampled episodes of a problem share); at most `limit` pairs per
    prompt. An episode's first answer is its first turn of an answer role."""
    groups: dict[tuple[str, str], list[Turn]] = defaultdict(list)
    for episode in episodes:
        answering = answer_roles_of(episode)
        first = next((t for t in episode.turns if role_of(t.agent) in answering), None)
        if first is not None and first.text.strip():
            groups[(episode.problem_id, first.observation.get("prompt", ""))].append(first)
    rows = []
    for (problem_id, _), turns in groups.items():
        good = [t for t in turns if _answer_correct(t)]
        bad = [t for t in turns if _answer_correct(t) is False]
        for g, b in _cross(good, bad, limit):
            if g.text != b.text:
                rows.append(_pair(g, g.text, b.text, role_of(g.agent), problem_id))
    return rows


def critic_pairs(
    episodes: Sequence[Episode], limit: int, critic_outcome: bool = True
) -> list[dict[str, Any]]:
    """A review whose verdict matched the truth (and, with `critic_outcome`, whose episode's next
    answer, the revision, was correct) over one that did not, to the same prompt (the same
    answer under review, in different episodes); at most `limit` pairs per prompt. Reviews are
    the turns of the env's review roles (`review_roles_of`: reflection's critic, the tool env's
    verifier)."""
    groups: dict[tuple[str, str, str], list[tuple[Turn, bool, bool | None]]] = defaultdict(list)
    for episode in episodes:
        answering, reviewing = answer_roles_of(episode), review_roles_of(episode)
        for index, turn in enumerate(episode.turns):
            if not is_review(turn, reviewing) or not turn.text.strip():
                continue
            refined = _next_answer(episode, index, answering)
            outcome = None if refined is None else _answer_correct(refined)
            obs = turn.observation
            key = (episode.problem_id, obs.get("instruction", ""), obs.get("prompt", ""))
            groups[key].append((turn, good_turn(turn, reviewing), outcome))
    rows = []
    for (problem_id, _, _), entries in groups.items():
        good = [t for t, hit, outcome in entries if hit and (outcome or not critic_outcome)]
        bad = [
            t for t, hit, outcome in entries if not hit and (outcome is False or not critic_outcome)
        ]
        for g, b in _cross(good, bad, limit):
            if g.text != b.text:
                rows.append(_pair(g, g.text, b.text, role_of(g.agent), problem_id))
    return rows


def _unique(rows: Iterable[dict[str, Any]], roles: tuple[str, ...] | None) -> list[dict[str, Any]]:
    """`rows` without repeated (prompt, chosen, rejected), of `roles` only (None: every role)."""
    unique, seen = [], set()
    for row in rows:
        key = (
            tuple(m["content"] for m in row["prompt"]),
            row["chosen"][0]["content"],
            row["rejected"][0]["content"],
        )
        if key in seen or (roles is not None and row["role"] not in roles):
            continue
        seen.add(key)
        unique.append(row)
    return unique


def preference_pairs(
    episodes: Sequence[Episode],
    max_pairs_per_group: int = 4,
    roles: str | Sequence[str] | None = None,
    critic_outcome: bool = True,
) -> list[dict[str, Any]]:
    """DPO rows from played episodes of a reviewed team (see the module docstring): revision,
    first-answer and review pairs, deduplicated.

    Args:
        episodes: rollouts, several samples per problem for solver and critic pairs.
        max_pairs_per_group (`int`, 4): most pairs from one group (one prompt).
        roles (`str | Sequence[str]`, None): keep only these roles' pairs (None: all).
        critic_outcome (`bool`, True): a chosen critic reply must also have led to a correct
            refinement, and a rejected one to a wrong one.
    """
    if max_pairs_per_group < 1:
        raise ValueError(f"max_pairs_per_group={max_pairs_per_group}; it must be >= 1")
    rows = [pair for e in episodes for pair in refiner_pairs(e)[:max_pairs_per_group]]
    rows += solver_pairs(episodes, max_pairs_per_group)
    rows += critic_pairs(episodes, max_pairs_per_group, critic_outcome)
    return _unique(rows, parse_roles(roles))


@dataclass
class CPUDPOConfig(RolloutSettings, DPOConfig):
    """TRL's `DPOConfig` with defaults for a short CPU run, plus rollout and pair settings and
    the rounds' selection on validation problems (`RolloutSettings`: ``select_on_validation``,
    ``validation_problems``, ``validation_samples``, ``select_metric``, ``patience``)."""

    _argument_group_name = "DPO (TRL's DPOConfig, CPU defaults, rollout rounds)"  # --help's section (`trainers.run.parser`)

    output_dir: str = field(default="outputs/dpo", metadata={"help": "Where to write."})
    use_cpu: bool = field(default=True, metadata={"help": "Train on the CPU."})
    bf16: bool = field(default=False, metadata={"help": "bf16 mixed precision."})
    gradient_checkpointing: bool | None = no_gradient_checkpointing()
    # After the SFT rounds of --sft_first, a DPO round at 5e-5 left an earlier embedded team at
    # 0.757 maj1@turnK (its refiner broke 18% of right answers); at 1e-5, 0.860 (`git show
    # 93f0224:docs/results.md`, "SFT and DPO in rounds").
    learning_rate: float = field(default=1e-5, metadata={"help": "Adam learning rate."})
    beta: float = field(default=0.1, metadata={"help": "DPO temperature (KL strength)."})
    # DPO alone on the team's pairs cost an earlier SFT'd embedded team 0.13 maj1@turnK in one
    # round; with the NLL of the chosen reply beside it (RPO) it gained (`git show
    # 93f0224:docs/results.md`, "SFT and DPO in rounds").
    loss_type: list[str] = field(
        default_factory=lambda: ["sigmoid", "sft"],
        metadata={"help": "TRL's DPO losses, summed: 'sigmoid' (DPO) plus 'sft' (NLL, RPO)."},
    )
    per_device_train_batch_size: int = field(default=8, metadata={"help": "Pairs per batch."})
    max_steps: int = field(default=60, metadata={"help": "Optimizer steps."})
    max_length: int | None = field(default=1024, metadata={"help": "Tokens per sequence."})
    logging_steps: float = field(default=1, metadata={"help": "Log every N steps."})
    save_strategy: str = field(default="no", metadata={"help": "Checkpointing."})
    report_to: list[str] = field(default_factory=lambda: ["none"], metadata={"help": "Loggers."})
    lr_scheduler_type: str = field(default="constant", metadata={"help": "LR schedule."})
    max_pairs_per_group: int = field(default=4, metadata={"help": "Most pairs per prompt."})
    dpo_roles: str = field(default="", metadata={"help": "Roles whose pairs train, e.g. 'critic'."})
    critic_outcome: bool = field(
        default=True, metadata={"help": "Critic pairs also need the refinement outcome."}
    )
    # On by default: on an earlier embedded team one DPO round alone left it level, SFT rounds
    # first then the DPO round lifted it (`git show 93f0224:docs/results.md`, "SFT and DPO in
    # rounds"); today's pipeline: docs/results.md, "SFT -> DPO rounds, chosen on validation".
    sft_first: bool = field(
        default=True,
        metadata={"help": "SFT rounds first, then DPO (false: DPO rounds only)."},
    )
    iterations: int = field(
        default=1,
        metadata={
            "help": "DPO rounds, each on fresh problems played by the latest model (more than "
            "one broke the embedded team's refiner: `git show 93f0224:docs/results.md`, 'SFT and "
            "DPO in rounds')."
        },
    )
    sft_iterations: int = field(
        default=100,
        metadata={"help": "SFT rounds first when --sft_first (sft_budget usually ends them)."},
    )
    sft_budget: float = field(
        default=0.75,
        metadata={"help": "Share of --max_train_minutes the SFT rounds may use (--sft_first)."},
    )
    sft_steps: int = field(default=60, metadata={"help": "Steps per SFT round (--sft_first)."})
    # As `CPUSFTConfig.learning_rate`: 2e-4 broke an earlier embedded team's SFT -> DPO
    # (`git show 93f0224:docs/results.md`, "The reflection pipelines with the audit").
    sft_learning_rate: float = field(default=5e-5, metadata={"help": "SFT LR when --sft_first."})


def build_dpo_trainer(
    model_path: str,
    rows: Sequence[dict[str, Any]],
    args: DPOConfig,
    trainable: str | None = None,
    **kwargs: Any,
) -> DPOTrainer:
    """TRL's `DPOTrainer` on conversational pair rows; the reference model is `model_path`. With
    `trainable` (a regex) only the parameters whose names match it train."""
    if not rows:
        raise ValueError("no preference pairs: nothing to train on")
    dataset = Dataset.from_list([{k: r[k] for k in ("prompt", "chosen", "rejected")} for r in rows])
    return offline_trainer(DPOTrainer, model_path, args, dataset, trainable, **kwargs)
