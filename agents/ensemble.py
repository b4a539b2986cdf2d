"""Instruction-variant ensembles and a factory that picks one by name.

- `MajorityVoteEnsemble`: ask K instruction variants (one batched `act` call) and return a
  response carrying the majority answer. Agents cannot import `rewards`, so the caller passes the
  answer-extraction function (e.g. `rewards`' boxed-answer extractor).
- `HiddenStateEnsemble` (in `agents.hidden_state`): K variants decoded as one sequence through
  averaged last-layer hidden states.

Example:
    >>> ensemble = make_ensemble("majority_vote", policy=policy, instructions=variants,
    ...                          vote_fn=extract_boxed)  # doctest: +SKIP
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agents.base import Observation, Policy
from agents.hidden_state import HiddenStateEnsemble
from agents.prompts import expand_instructions

VoteFn = Callable[[str], "str | None"]


@dataclass(frozen=True)
class Vote:
    """The outcome of one majority vote.

    Args:
        text (`str`): The first response voting for the winner (all responses abstaining: the
            first response).
        answer (`str` or `None`): The winning answer; `None` when every response abstained.
        count (`int`): Votes for the winner.
        answers (`list[str | None]`): Each variant's extracted answer (`None` abstains).
        responses (`list[str]`): Each variant's response.
    """

    text: str
    answer: str | None
    count: int
    answers: list[str | None]
    responses: list[str]


def majority(answers: Sequence[str | None]) -> tuple[str | None, int]:
    """The most common non-`None` answer and its count; ties go to the answer seen first."""
    counts = Counter(a for a in answers if a is not None)
    if not counts:
        return None, 0
    best = max(counts.values())
    winner = next(a for a in answers if a is not None and counts[a] == best)
    return winner, best


class MajorityVoteEnsemble:
    """Asks K instruction variants and returns the majority answer's response.

    Args:
        policy (`Policy`): Answers all N x K variant observations in one `act` call.
        instructions (`Sequence[str]`): The K system prompts; each replaces the observation's
            `"instruction"`.
        vote_fn (`Callable[[str], str | None]`): Maps a response to the answer it votes for,
            already normalized for comparison; `None` abstains.

    Raises:
        ValueError: If `instructions` is empty.
    """

    def __init__(self, policy: Policy, instructions: Sequence[str], vote_fn: VoteFn) -> None:
        if not instructions:
            raise ValueError("instructions is empty; pass at least one instruction variant.")
        self.policy = policy
        self.instructions = list(instructions)
        self.vote_fn = vote_fn

    def vote(self, observations: Sequence[Observation]) -> list[Vote]:
        """One `Vote` per observation, from one batched call of the wrapped policy."""
        k = len(self.instructions)
        responses = self.policy.act(expand_instructions(observations, self.instructions))
        if len(responses) != len(observations) * k:
            raise ValueError(
                f"the wrapped policy returned {len(responses)} texts for "
                f"{len(observations) * k} observations; a Policy returns one text per observation."
            )
        votes = []
        for i in range(len(observations)):
            texts = list(responses[i * k : (i + 1) * k])
            answers = [self.vote_fn(t) for t in texts]
            winner, count = majority(answers)
            index = answers.index(winner) if winner is not None else 0
            votes.append(Vote(texts[index], winner, count, answers, texts))
        return votes

    def act(self, observations: Sequence[Observation]) -> list[str]:
        """One response per observation, carrying its majority answer."""
        return [v.text for v in self.vote(observations)]


def _hidden(mode: str) -> Callable[..., HiddenStateEnsemble]:
    def build(**kwargs: Any) -> HiddenStateEnsemble:
        return HiddenStateEnsemble(mode=mode, **kwargs)

    return build


ENSEMBLES: dict[str, Callable[..., Policy]] = {
    "majority_vote": MajorityVoteEnsemble,
    "hidden_state_mean": _hidden("mean"),
    "hidden_state_weighted": _hidden("weighted"),
}


def make_ensemble(name: str, **kwargs: Any) -> Policy:
    """Builds an ensemble by name.

    Args:
        name (`str`): One of `ENSEMBLES`: `"majority_vote"` (kwargs `policy`, `instructions`,
            `vote_fn`), `"hidden_state_mean"` or `"hidden_state_weighted"` (kwargs `model`,
            `tokenizer`, `instructions`, optional `weights`, `generation_args`).
        **kwargs: Passed to the constructor.

    Returns:
        The ensemble, itself a `Policy`.

    Raises:
        ValueError: On an unknown name, with the closest valid ones.
    """
    if name not in ENSEMBLES:
        close = difflib.get_close_matches(name, ENSEMBLES, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown ensemble {name!r}; valid names: {sorted(ENSEMBLES)}.{hint}")
    return ENSEMBLES[name](**kwargs)
