"""LLM agents for the math environments: policies, role maps, ensembles, test doubles.

`import agents` stays light: the protocol, prompts and test doubles import eagerly, while
everything needing torch, transformers or peft (`HFPolicy`, role maps, ensembles, the tiny model)
imports on first attribute access, so env and trainer tests using `ScriptedPolicy` pay no torch
import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agents.base import (
    FinishReason,
    Generation,
    GenerationArguments,
    GenerativePolicy,
    Observation,
    Policy,
)
from agents.prompts import (
    build_messages,
    expand_instructions,
    with_instruction,
)
from agents.scripted import DEFAULT_CHARSET, OraclePolicy, RandomTextPolicy, ScriptedPolicy

if TYPE_CHECKING:
    from agents.ensemble import ENSEMBLES, MajorityVoteEnsemble, Vote, make_ensemble
    from agents.hf import HFPolicy
    from agents.hidden_state import EnsembleGeneration, HiddenStateEnsemble
    from agents.roles import RequestGroup, RoleMap, build_lora_role_map, group_requests
    from agents.tiny import build_tiny_model, build_tokenizer

_LAZY = {
    "HFPolicy": "agents.hf",
    "RoleMap": "agents.roles",
    "RequestGroup": "agents.roles",
    "build_lora_role_map": "agents.roles",
    "group_requests": "agents.roles",
    "ENSEMBLES": "agents.ensemble",
    "MajorityVoteEnsemble": "agents.ensemble",
    "Vote": "agents.ensemble",
    "make_ensemble": "agents.ensemble",
    "EnsembleGeneration": "agents.hidden_state",
    "HiddenStateEnsemble": "agents.hidden_state",
    "build_tiny_model": "agents.tiny",
    "build_tokenizer": "agents.tiny",
}

__all__ = [
    "DEFAULT_CHARSET",
    "ENSEMBLES",
    "EnsembleGeneration",
    "FinishReason",
    "Generation",
    "GenerationArguments",
    "GenerativePolicy",
    "HFPolicy",
    "HiddenStateEnsemble",
    "MajorityVoteEnsemble",
    "Observation",
    "OraclePolicy",
    "Policy",
    "RandomTextPolicy",
    "RequestGroup",
    "RoleMap",
    "ScriptedPolicy",
    "Vote",
    "build_lora_role_map",
    "build_messages",
    "build_tiny_model",
    "build_tokenizer",
    "expand_instructions",
    "group_requests",
    "make_ensemble",
    "with_instruction",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module 'agents' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
