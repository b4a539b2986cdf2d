"""Instruction-variant ensemble, a Parallel environment with one round.

| Id          | ``math/ensemble-v0``                                                   |
|-------------|------------------------------------------------------------------------|
| Agents      | ``variant_0`` ... ``variant_{K-1}``                                    |
| Turn order  | simultaneous, one round                                                |
| Observation | Dict of text; each agent's ``instruction`` is a different variant       |
| Action      | any string (clipped to ``max_action_chars``)                           |
| Reward      | the verifier's score of the agent's own answer                         |

Each agent reads the problem under its own instruction variant (`envs.tasks.prompts.VARIANTS`,
cycled, or ``instructions=``) and answers once. The team answer is the majority vote over the
agents' extracted answers, equivalent answers voting together; ties go to the answer of the lowest
agent index. It is reported in every agent's info as ``team_answer`` / ``team_correct`` (with
``team_votes``); rewards stay per agent. The one round ends the episode, so rewards and grades are
returned at once; the verifier's ``reason`` (it may name the reference) is kept for the
trainer in ``env.turn_results`` (or returned with ``per_step_rewards=True``).

Arguments:
    task, data_path, split, verifier, task_kwargs: the task (see `envs.tasks`).
    num_agents (`int`, 3): K.
    instructions (`Sequence[str] | None`): instruction templates; ``{answer_format}`` is filled.
    max_action_chars (`int`, 8192), max_obs_chars (`int`, 32768), render_mode (None | "ansi").
    per_step_rewards (`bool`, False): return full infos (the verifier's ``reason`` too).
    options (`EnsembleOptions | None`): all of the above as one object (`envs.options`);
        task_options (`TaskOptions | None`): the task arguments and text bounds as one object;
        keyword arguments override either's fields.

Version history:
    v0: initial release.
    v0 (no peeking): the verifier's ``reason`` left out of the returned infos (``turn_results``
        keep it; ``per_step_rewards=True`` returns it).
    v0 (held-out splits): the ``arithmetic`` and ``unknown`` tasks keep their problem format
        and levels; a problem's split is now a hash of its text (no text in two splits) and
        its id reads ``<task>/<split>/d<level>/s<seed>/<k>``, problem k of its level and split.
"""

from __future__ import annotations

from typing import Any

from envs.debate import DebateEnv
from envs.options import EnsembleOptions
from envs.tasks import prompts


class EnsembleEnv(DebateEnv):
    """A one-round `DebateEnv` whose agents differ by instruction; see the module docstring.

    Its options (`EnsembleOptions`) fix the debate's round count and pay; the agents' default
    instructions are the variants."""

    metadata = {"name": "math/ensemble-v0", "render_modes": ["ansi"], "is_parallelizable": True}
    options_class = EnsembleOptions  # type: ignore[assignment]
    agent_prefix = EnsembleOptions.AGENT_PREFIX
    answer_roles = EnsembleOptions.ANSWER_ROLES  # envs.roles
    default_instructions = prompts.VARIANTS
    _role = "solver"


def env(**kwargs: Any) -> EnsembleEnv:
    """Make an `EnsembleEnv` (`wrapped` is accepted and ignored, as for every Parallel env)."""
    kwargs.pop("wrapped", None)
    return EnsembleEnv(**kwargs)
