"""Chat formatting: observations to chat messages, and their crossing with instruction variants.

The environment writes each role's system prompt into `observation["instruction"]` and the user
message into `observation["prompt"]`; agents only arrange them as chat messages.
"""

from __future__ import annotations

from collections.abc import Sequence

from agents.base import Observation


def build_messages(
    observation: Observation, system_prompt: str | None = None
) -> list[dict[str, str]]:
    """Turns one observation into chat messages.

    Args:
        observation (`Mapping[str, str]`): Must hold `"prompt"`; `"instruction"` is optional.
        system_prompt (`str` or `None`, defaults to `None`): Replaces the observation's
            instruction when given.

    Returns:
        `[{"role": "system", ...}, {"role": "user", ...}]`, without the system message when the
        instruction is empty (some chat templates reject system messages).

    Raises:
        KeyError: If the observation has no `"prompt"`.
        TypeError: If the prompt or instruction is not a string.
    """
    if "prompt" not in observation:
        raise KeyError(
            f"observation has keys {sorted(observation)} but no 'prompt'; environments must put "
            "the user message under 'prompt' (and the system prompt under 'instruction')."
        )
    prompt = observation["prompt"]
    instruction = observation.get("instruction", "") if system_prompt is None else system_prompt
    for name, value in (("prompt", prompt), ("instruction", instruction)):
        if not isinstance(value, str):
            raise TypeError(f"observation[{name!r}] is {type(value).__name__}; expected str.")
    messages = [{"role": "system", "content": instruction}] if instruction else []
    messages.append({"role": "user", "content": prompt})
    return messages


def with_instruction(observation: Observation, instruction: str) -> dict[str, str]:
    """Returns a copy of the observation whose instruction is replaced."""
    return {**observation, "instruction": instruction}


def expand_instructions(
    observations: Sequence[Observation], instructions: Sequence[str]
) -> list[dict[str, str]]:
    """Crosses observations with instruction variants, problem-major.

    Args:
        observations (`Sequence[Mapping[str, str]]`): N observations.
        instructions (`Sequence[str]`): K instruction variants.

    Returns:
        N * K observations: row `i * K + k` is observation `i` under instruction `k`.
    """
    return [with_instruction(obs, inst) for obs in observations for inst in instructions]
