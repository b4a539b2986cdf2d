"""The TRL rows of multi-agent GRPO and PPO, cut from played episodes: one row per agent turn.

The training dataset holds *turn slots*: one row per (problem, slot), its prompt
``"<problem_id>#<slot>"`` (`slot_dataset`), S slots per problem (`turn_slots`). The rollout
function (`trainers.algorithms.grpo.TurnRollout`) answers each block of G equal slot prompts with
slot ``s`` of G episodes of that problem (`rows_from_episodes`): the turn's exact token ids and
sampled logprobs, ``env_mask``, its reward times its role's weight, and the row's ``agent``,
``round`` and ``correct``. Those columns are the rollout's per-row state: TRL hands them to the
reward function (`turn_reward`) and with the batch's inputs to the trainer (PPO's advantages), and
the per-role trainers read each row's role from them (`trainers.roles.dispatch`). A missing or
token-less turn gives a padding row with reward `None`. Why rows are laid out this way: the design
notes of `trainers.algorithms.grpo`.

**Turn credit** (`TURN_CREDIT`). A row is paid its turn's own reward (``"reward"``, the default),
or its agent's return from that turn to the episode's end (``"return"``: the turn's reward plus
the agent's later turns' rewards). Either way its baseline is the mean of its own slot's group
(the G episodes' turns at that slot, padding left out), one term whatever the episode's length.
With ``"return"`` that baseline does not depend on the row's own action, so the advantages give
the policy gradient of each agent's episode return, also when the policy sets the episode's length
(``stop_on_accept``). With ``"reward"`` a turn is credited nothing for what its action does to the
agent's later turns: a critic that rejects is not paid for the better answer it leads to, and a
team reward lands only on the agent's last turn. That is the length bias of normalising rewards
per turn index and summing them (verl RFC #7244), which here it equals exactly: the summed later
terms of a slot's group cancel. tests/trainers/test_turn_credit.py measures both.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from datasets import Dataset
from pettingzoo import ParallelEnv

from envs.roles import role_of
from envs.tasks.mixed import task_of
from trainers.rollout.records import Episode, Turn, is_review, review_roles_for

SLOT_SEP = "#"
TURN_CREDIT = ("reward", "return")  # what a row is paid: its turn's reward, or the agent's return


def slot_prompt(problem_id: str, slot: int) -> str:
    """The prompt column of a (problem, turn slot) row: ``"<problem_id>#<slot>"``."""
    return f"{problem_id}{SLOT_SEP}{slot}"


def parse_slot_prompt(prompt: str) -> tuple[str, int]:
    """Inverse of `slot_prompt`."""
    problem_id, sep, slot = str(prompt).rpartition(SLOT_SEP)
    if not sep or not slot.isdigit():
        raise ValueError(
            f"prompt {prompt!r} is not a turn-slot prompt '<problem_id>#<slot>'; build the dataset "
            "with trainers.algorithms.rows.slot_dataset."
        )
    return problem_id, int(slot)


def turn_slots(env: Any) -> int:
    """Most turns one episode of `env` records: `max_turns` (AEC), times the agents (Parallel)."""
    raw = env.unwrapped
    agents = len(raw.possible_agents) if isinstance(raw, ParallelEnv) else 1
    return int(raw.max_turns) * agents


def slot_dataset(problem_ids: Sequence[str], slots: int) -> Dataset:
    """One row per (problem, slot), problem-major: `prompt`, `problem_id`, `slot`."""
    rows = [(pid, s) for pid in problem_ids for s in range(slots)]
    return Dataset.from_dict(
        {
            "prompt": [slot_prompt(pid, s) for pid, s in rows],
            "problem_id": [pid for pid, _ in rows],
            "slot": [s for _, s in rows],
        }
    )


def _trainable(turn: Turn | None) -> bool:
    return turn is not None and bool(turn.completion_ids) and bool(turn.prompt_ids)


def rows_from_episodes(
    prompts: Sequence[str],
    episodes: Mapping[str, Sequence[Episode]],
    group_size: int,
    role_weights: Mapping[str, float] | None = None,
    pad_token_id: int = 0,
    eos_token_id: int = 0,
    turn_credit: str = "reward",
) -> dict[str, list[Any]]:
    """TRL rows for `prompts` (blocks of `group_size` equal slot prompts) from played episodes.

    Row ``k * G + s`` is slot ``slot`` of ``episodes[problem_id][s]``, where block ``k`` names
    ``problem_id#slot``; a missing or token-less turn gives a padding row (see module docstring).
    `turn_credit`: ``"reward"`` pays a row its turn's reward, ``"return"`` its agent's return from
    that turn on (module docstring, "Turn credit"); the weights apply to either.

    Returns:
        ``prompt_ids``, ``completion_ids``, ``logprobs``, ``env_mask`` (TRL's rollout keys) and
        ``turn_reward`` (weighted; `None` on padding), ``turn_raw_reward``, ``agent``, ``round``,
        ``correct`` and ``reviewed`` (a review's truth of the answer under review, else None),
        forwarded to the reward function.
    """
    if len(prompts) % group_size:
        raise ValueError(f"{len(prompts)} prompts do not split into groups of {group_size}")
    if turn_credit not in TURN_CREDIT:
        raise ValueError(f"turn_credit={turn_credit!r}; expected one of {TURN_CREDIT}")
    weights = dict(role_weights or {})
    class_weights = review_class_weights(episodes)
    to_go = returns_to_go(episodes) if turn_credit == "return" else {}
    reviewing: dict[str, tuple[str, ...]] = {}  # env id -> its review roles (`review_roles_for`)
    out: dict[str, list[Any]] = defaultdict(list)
    for start in range(0, len(prompts), group_size):
        block = prompts[start : start + group_size]
        for turn, env_id in _slot_turns(block, start, episodes):
            if _trainable(turn):
                weight = float(weights.get(turn.agent, weights.get(role_of(turn.agent), 1.0)))
                if turn.info.get("balance_reviews"):
                    weight *= class_weights.get(bool(turn.info.get("reviewed_correct")), 1.0)
                if env_id not in reviewing:
                    reviewing[env_id] = review_roles_for(env_id)
                review = is_review(turn, reviewing[env_id])
                row = _turn_row(turn, weight, to_go.get(id(turn), turn.reward), review)
            else:
                row = _padding_row(pad_token_id, eos_token_id)
            row["agent"] = turn.agent if turn is not None else None
            row["round"] = turn.round if turn is not None else None
            for key, value in row.items():
                out[key].append(value)
    return dict(out)


def _slot_turns(
    block: Sequence[str], start: int, episodes: Mapping[str, Sequence[Episode]]
) -> list[tuple[Turn | None, str]]:
    """The turns a block of G equal slot prompts (rows `start`...) trains on: turn ``slot`` of
    each of the G episodes of its problem (None where an episode ended sooner), each with its
    episode's env id."""
    group_size = len(block)
    if len(set(block)) != 1:
        raise ValueError(f"rows {start}..{start + group_size - 1} are not one group: {block}")
    problem_id, slot = parse_slot_prompt(block[0])
    group = episodes[problem_id]
    if len(group) < group_size:
        raise ValueError(f"problem {problem_id!r} has {len(group)} episodes, need {group_size}")
    turns = [(e.turns[slot] if slot < len(e.turns) else None, e.env_id) for e in group[:group_size]]
    keys = {(t.agent, t.round) for t, _ in turns if t is not None}
    if len(keys) > 1:
        raise ValueError(
            f"slot {slot} of problem {problem_id!r} holds different turns {sorted(keys)} "
            "across samples; this env's turn order is not fixed, so slots cannot group it."
        )
    return turns


def returns_to_go(episodes: Mapping[str, Sequence[Episode]]) -> dict[int, float]:
    """Each turn's (keyed by ``id``) agent return from it on: its reward plus the rewards of the
    same agent's later turns in its episode (undiscounted)."""
    out: dict[int, float] = {}
    for group in episodes.values():
        for episode in group:
            later: dict[str, float] = defaultdict(float)
            for turn in reversed(episode.turns):
                later[turn.agent] += turn.reward
                out[id(turn)] = later[turn.agent]
    return out


def _turn_row(turn: Turn, weight: float, credit: float, review: bool) -> dict[str, Any]:
    """A trainable turn's row: its exact token ids and sampled logprobs, its weighted `credit`
    (the turn's reward or its agent's return from it on), and, for a `review`, the truth of the
    answer it reviewed (``reviewed``)."""
    return {
        "prompt_ids": list(turn.prompt_ids),
        "completion_ids": list(turn.completion_ids),
        "logprobs": list(turn.logprobs),
        "env_mask": [1] * len(turn.completion_ids),
        "turn_reward": credit * weight,
        "turn_raw_reward": turn.reward,
        "correct": turn.info.get("correct"),
        "reviewed": turn.info.get("reviewed_correct") if review else None,
    }


def _padding_row(pad_token_id: int, eos_token_id: int) -> dict[str, Any]:
    """A row with nothing to train: one pad prompt token, one eos, no loss, no reward."""
    return {
        "prompt_ids": [pad_token_id],
        "completion_ids": [eos_token_id],
        "logprobs": [0.0],
        "env_mask": [0],
        "turn_reward": None,
        "turn_raw_reward": None,
        "correct": None,
        "reviewed": None,
    }


def mask_uniform_groups(rows: dict[str, list[Any]], group_size: int) -> int:
    """Take out of the loss (``env_mask`` all 0) the rows of every group of `group_size`
    (one turn slot of one problem) whose trainable rows all earned the same reward: GRPO gives
    them zero advantage, so they carry no signal, but TRL's token-normalised losses ("dapo",
    "bnpo") still count their tokens in the denominator, diluting the groups that do carry one
    (DAPO's dynamic sampling drops them for the same reason). Returns the rows masked."""
    masked = 0
    rewards = rows["turn_reward"]
    for start in range(0, len(rewards), group_size):
        block = range(start, start + group_size)
        trainable = [i for i in block if rewards[i] is not None]
        if len(trainable) < 2 or len({rewards[i] for i in trainable}) > 1:
            continue
        for i in trainable:
            rows["env_mask"][i] = [0] * len(rows["env_mask"][i])
        masked += len(trainable)
    return masked


def review_class_weights(episodes: Mapping[str, Sequence[Episode]]) -> dict[bool, float]:
    """Weights for the verdict rewards of reviews marked ``balance_reviews`` (the reflection env's
    ``critic_reward="balanced"``): the answers under review split into right and wrong, and each
    class gets ``n / (2 * n_class)``, so both carry half the weight of the batch and a critic that
    says "incorrect" every time earns what one that says "correct" every time earns. A batch
    holding one class only is left unweighted."""
    counts = {True: 0, False: 0}
    for group in episodes.values():
        for episode in group:
            for turn in episode.turns:
                if turn.info.get("balance_reviews"):
                    counts[bool(turn.info.get("reviewed_correct"))] += 1
    total = counts[True] + counts[False]
    if not counts[True] or not counts[False]:
        return {}
    return {truth: total / (2 * n) for truth, n in counts.items()}


def turn_reward(
    completions: list[Any],
    turn_reward: list[float | None],
    agent: list[str | None],
    completion_ids: list[list[int]],
    turn_raw_reward: list[float | None] | None = None,
    correct: list[bool | None] | None = None,
    log_metric: Callable[[str, float], None] | None = None,
    reviewed: list[bool | None] | None = None,
    problem_id: list[str] | None = None,
    **kwargs: Any,
) -> list[float | None]:
    """The rollout's weighted turn rewards (`None` on padding rows); logs per-agent metrics:
    reward, accuracy, completion length and, for a reviewer (rows with ``reviewed``), the
    balanced accuracy of its verdicts (`review_balanced_accuracy`); and, when the batch holds
    problems of several tasks (a mixed task, `envs.tasks.mixed`), per task ``tasks/<task>/reward``
    and ``/accuracy`` over its trainable turns."""
    if log_metric is not None and problem_id is not None:
        _log_tasks(log_metric, turn_raw_reward or turn_reward, turn_reward, correct, problem_id)
    if log_metric is not None:
        raw = turn_raw_reward or turn_reward
        by_agent: dict[str, list[int]] = defaultdict(list)
        for i, (name, reward) in enumerate(zip(agent, turn_reward, strict=True)):
            if name is not None and reward is not None:
                by_agent[name].append(i)
        for name, rows in sorted(by_agent.items()):
            log_metric(f"agents/{name}/reward", sum(raw[i] for i in rows) / len(rows))
            if correct is not None:
                log_metric(
                    f"agents/{name}/accuracy", sum(bool(correct[i]) for i in rows) / len(rows)
                )
            lengths = [len(completion_ids[i]) for i in rows]
            log_metric(f"agents/{name}/completion_length", sum(lengths) / len(lengths))
            if correct is not None and reviewed is not None:
                balanced = review_balanced_accuracy(
                    [reviewed[i] for i in rows], [correct[i] for i in rows]
                )
                if balanced is not None:
                    log_metric(f"agents/{name}/balanced_accuracy", balanced)
    return list(turn_reward)


def _log_tasks(
    log_metric: Callable[[str, float], None],
    raw: Sequence[float | None],
    weighted: Sequence[float | None],
    correct: Sequence[bool | None] | None,
    problem_id: Sequence[str],
) -> None:
    """`turn_reward`'s per-task metrics: the trainable rows grouped by the task their problem
    id names (``reach/train/d2/...``), logged only when there are several."""
    by_task: dict[str, list[int]] = defaultdict(list)
    for i, (pid, reward) in enumerate(zip(problem_id, weighted, strict=True)):
        if reward is not None:
            by_task[task_of(pid)].append(i)
    if len(by_task) < 2:
        return
    for task, rows in sorted(by_task.items()):
        log_metric(f"tasks/{task}/reward", sum(raw[i] or 0.0 for i in rows) / len(rows))
        if correct is not None:
            log_metric(f"tasks/{task}/accuracy", sum(bool(correct[i]) for i in rows) / len(rows))


def review_balanced_accuracy(
    truths: Sequence[bool | None], hits: Sequence[bool | None]
) -> float | None:
    """The mean of a reviewer's hit rate on right answers and on wrong ones (`truths`: whether
    each reviewed answer was right; `hits`: whether its verdict matched), over the classes
    present; None when no row is a review. A critic that says "correct" every time scores 0.5."""
    classes: dict[bool, list[bool]] = {True: [], False: []}
    for truth, hit in zip(truths, hits, strict=True):
        if truth is not None:
            classes[bool(truth)].append(bool(hit))
    rates = [sum(h) / len(h) for h in classes.values() if h]
    return sum(rates) / len(rates) if rates else None
