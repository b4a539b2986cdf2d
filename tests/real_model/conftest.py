"""The real-model tests run the stack on a pretrained model fetched into the local cache
(``mathteams models get smollm2-135m-instruct``, `agents.models`): SmolLM2-135M-Instruct, a
Llama model with its own tokenizer and chat template. Without it (a fresh clone) every test here
skips, naming the command that fetches it. The model is loaded once per session; tests that
train load their own copy from the cache folder, so the shared one never changes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agents import models
from tests.real_model.helpers import FETCH, NAME

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skips every test of this package when the model is not in the cache."""
    if models.is_fetched(NAME):
        return
    skip = pytest.mark.skip(reason=f"{NAME} is not in the model cache; fetch it with `{FETCH}`")
    for item in items:
        if HERE in Path(item.fspath).resolve().parents:
            item.add_marker(skip)


@dataclass(frozen=True)
class RealModel:
    """The session's model (eval mode, never trained), its tokenizer and its cache folder."""

    model: Any
    tokenizer: Any
    path: str


@pytest.fixture(scope="session")
def real_model() -> RealModel:
    """SmolLM2-135M-Instruct, loaded by name as users load it (`HFPolicy.from_pretrained`)."""
    from agents.hf import HFPolicy

    policy = HFPolicy.from_pretrained(NAME)
    return RealModel(policy.model.eval(), policy.tokenizer, models.resolve_model_name(NAME))


@pytest.fixture(scope="session")
def real_policy(real_model: RealModel) -> Callable[..., Any]:
    """``real_policy(**generation)``: an `HFPolicy` on the session's model with its own
    decoding settings (greedy unless told otherwise)."""
    from agents.base import GenerationArguments
    from agents.hf import HFPolicy

    def make(**generation: Any) -> HFPolicy:
        args = GenerationArguments(**{"do_sample": False, **generation})
        return HFPolicy(real_model.model, real_model.tokenizer, args)

    return make
