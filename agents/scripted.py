"""Test doubles: policies with no model, for env and trainer tests and reward ceilings."""

from __future__ import annotations

import random
import string
from collections import deque
from collections.abc import Callable, Mapping, Sequence

from agents.base import Observation

# Printable ASCII plus the unicode that breaks naive text handling: accents (precomposed and
# combining), zero-width and bidi controls, CJK, math symbols, emoji (astral plane), NBSP.
ODD_UNICODE = "éü\u0301ß\u200b\u200d\u202e\u00a0中文∑∫√π≤≥→😀🧮𝟙\ufeff"
DEFAULT_CHARSET = string.ascii_letters + string.digits + string.punctuation + " \n\t" + ODD_UNICODE


class ScriptedPolicy:
    """Answers with canned replies, cycling, or with a function of the observation.

    Args:
        replies (`Sequence[str]` or `Callable[[Mapping[str, str]], str]`): Replies used in turn
            across calls (the i-th observation ever seen gets `replies[i % len(replies)]`), or a
            function computing the reply.
        history_size (`int`, defaults to `1024`): How many recent observations `history` keeps.

    Raises:
        TypeError: If `replies` is a single string (it would cycle through its characters).
        ValueError: If `replies` is an empty sequence.
    """

    def __init__(
        self,
        replies: Sequence[str] | Callable[[Observation], str],
        history_size: int = 1024,
    ) -> None:
        if isinstance(replies, str):
            raise TypeError(f"replies={replies!r} is a str; pass a list such as [{replies!r}].")
        if not callable(replies) and len(replies) == 0:
            raise ValueError("replies is empty; pass at least one reply or a function.")
        self.replies = replies if callable(replies) else list(replies)
        self.history: deque[Observation] = deque(maxlen=history_size)
        self._count = 0

    def act(self, observations: Sequence[Observation]) -> list[str]:
        """One reply per observation."""
        texts = []
        for observation in observations:
            self.history.append(observation)
            if callable(self.replies):
                texts.append(self.replies(observation))
            else:
                texts.append(self.replies[self._count % len(self.replies)])
            self._count += 1
        return texts

    def reset(self) -> None:
        """Restarts the cycle and clears the history."""
        self._count = 0
        self.history.clear()


class OraclePolicy:
    """Answers with the reference answer the caller looks up: a reward ceiling.

    Observations never carry the reference, so `answer_fn` finds it, e.g. by the observation's
    `"question"` in a dict built from the task's problems (see `from_answers`).

    Args:
        answer_fn (`Callable[[Mapping[str, str]], str | None]`): The answer for an observation;
            `None` when unknown.
        template (`str`, defaults to `"The answer is \\\\boxed{{{answer}}}."`): `str.format`
            template with an `{answer}` field (braces doubled).
        fallback (`str`, defaults to `""`): The reply when `answer_fn` returns `None`.

    Raises:
        ValueError: If the template has no `{answer}` field or other fields.
    """

    def __init__(
        self,
        answer_fn: Callable[[Observation], str | None],
        template: str = "The answer is \\boxed{{{answer}}}.",
        fallback: str = "",
    ) -> None:
        fields = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
        if fields != {"answer"}:
            raise ValueError(
                f"template={template!r} has fields {sorted(fields)}; it needs exactly one "
                "'{answer}' field (write literal braces as '{{' and '}}')."
            )
        self.answer_fn = answer_fn
        self.template = template
        self.fallback = fallback

    @classmethod
    def from_answers(
        cls, answers: Mapping[str, str], key: str = "question", **kwargs: str
    ) -> OraclePolicy:
        """An oracle looking answers up by one observation field.

        Args:
            answers (`Mapping[str, str]`): Field value (e.g. question text) to reference answer.
            key (`str`, defaults to `"question"`): The observation field to look up.
            **kwargs: `template`, `fallback`.

        Returns:
            The policy.
        """
        table = dict(answers)
        return cls(lambda obs: table.get(obs.get(key, "")), **kwargs)

    def act(self, observations: Sequence[Observation]) -> list[str]:
        """The templated answer for each observation, or the fallback."""
        texts = []
        for observation in observations:
            answer = self.answer_fn(observation)
            texts.append(self.fallback if answer is None else self.template.format(answer=answer))
        return texts


class RandomTextPolicy:
    """Random strings, odd unicode included, reproducible from a seed.

    Args:
        seed (`int`, defaults to `0`): Seeds a private RNG; the same seed and calls give the
            same texts.
        max_len (`int`, defaults to `64`): Longest text, in characters.
        min_len (`int`, defaults to `0`): Shortest text (0 allows the empty string).
        charset (`str`, defaults to `DEFAULT_CHARSET`): Characters to draw from.

    Raises:
        ValueError: If the lengths are inconsistent or the charset is empty.
    """

    def __init__(
        self,
        seed: int = 0,
        max_len: int = 64,
        min_len: int = 0,
        charset: str = DEFAULT_CHARSET,
    ) -> None:
        if not 0 <= min_len <= max_len:
            raise ValueError(f"min_len={min_len}, max_len={max_len}; need 0 <= min_len <= max_len.")
        if not charset:
            raise ValueError("charset is empty; pass at least one character.")
        self.max_len = max_len
        self.min_len = min_len
        self.charset = charset
        self._rng = random.Random(seed)

    def act(self, observations: Sequence[Observation]) -> list[str]:
        """One random string per observation (the observation is ignored)."""
        rng = self._rng
        return [
            "".join(rng.choices(self.charset, k=rng.randint(self.min_len, self.max_len)))
            for _ in observations
        ]
