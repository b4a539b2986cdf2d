"""One SFT row of the embedded model's transcripts: an observation's chat and the reply."""

from __future__ import annotations

from typing import Any

from agents.prompts import build_messages


def chat_row(obs: dict[str, str], reply: str, role: str) -> dict[str, Any]:
    """One SFT row: the chat messages of observation `obs` and `reply` as the assistant's."""
    return {
        "messages": [*build_messages(obs), {"role": "assistant", "content": reply}],
        "role": role,
    }
