"""What an evaluation plays (`EvalConfig`), and the env kwargs it gives the team's env or a
baseline's (the model alone's ``math/solve-v0``, or ``math/code-v0`` with the tool:
`env_kwargs_for`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agents.base import GenerationArguments
from envs.registry import spec
from envs.tasks.problems import ProblemSet
from trainers.embedded import EMBEDDED_TASK
from trainers.evaluation.splits import Levels, as_levels

ALONE_ENV = "math/solve-v0"  # what the same model plays alone (`trainers.evaluation.alone`)


def _default_problems() -> ProblemSet:
    return ProblemSet(EMBEDDED_TASK, count=200)


@dataclass
class EvalConfig:
    """What to evaluate; see ``scripts/evaluate.py --help`` for each field.

    ``problems`` (`envs.tasks.problems.ProblemSet`) is what it plays: 200 problems of the
    embedded model's task by default. A generated task's set is completed once, here: its split
    is "test" unless given (held out by construction, `envs.tasks.splits`), its levels those
    given, else the task's declared defaults that hold their share of the set as distinct texts
    of the split (`ProblemSet.held`).
    """

    env_id: str = "math/reflection-v0"
    problems: ProblemSet = field(default_factory=_default_problems)
    model: str | None = None
    role_models: dict[str, str] = field(default_factory=dict)
    role_adapters_dir: str | None = None  # one LoRA adapter per role: <dir>/<role>/
    ensemble: str | None = None
    ensemble_size: int = 3
    samples: int = 1
    ks: Sequence[int] = (1,)
    temperature: float = 1.0
    greedy: bool = False
    max_completion_length: int = 96  # tokens per turn, the training configs' name
    num_envs: int = 64
    seed: int = 0
    compare: bool = True
    # The same model alone gets k independent samples per problem for each k here (mean pass@1
    # and maj@k); None: 1, 3 and the team's generations per episode (`team_generations`).
    alone_ks: Sequence[int] | None = None
    intervals: bool = True
    save_episodes: Path | None = None
    progress: bool = False
    device: str | None = None
    # The team env's own kwargs beyond the task (``{"rounds": 2, "refiner_mode": "resolve",
    # "verifier": "math"}``): the same env the run trained, played as it trained. The model
    # alone plays solve-v0 with the same ``verifier``.
    env_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.problems, ProblemSet):
            raise TypeError(
                f"EvalConfig.problems must be an envs.tasks.problems.ProblemSet, got "
                f"{self.problems!r}"
            )
        problems = self.problems
        if problems.generated:
            split = problems.split or "test"
            problems = replace(problems, split=split)
            if not problems.levels:
                problems = problems.held()
            self.problems = replace(problems, levels=problems.level_list())

    @property
    def task(self) -> str:
        """The task it plays (``problems.task``)."""
        return self.problems.task

    def levels(self) -> Levels:
        """The levels of a generated task it plays (a mixed task's, per member); [] for a
        file task."""
        return self.problems.level_list()

    def env_kwargs(self) -> dict[str, Any]:
        """The team env's kwargs: its problems' and its own options."""
        return self.problems.env_kwargs(self.env_options)

    def as_dict(self) -> dict[str, Any]:
        """Its fields as JSON values, the problems' under the evaluation's own names (task,
        data_path, split, difficulty, num_problems, offset): the ``config`` of its results."""
        problems = self.problems
        flat: dict[str, Any] = {"env_id": self.env_id}
        flat.update(
            task=problems.task,
            data_path=problems.data_path,
            split=problems.split,
            difficulty=as_levels(problems.level_list()) if problems.generated else None,
            num_problems=problems.count,
            offset=problems.offset,
        )
        for key, value in vars(self).items():
            if key not in ("env_id", "problems"):
                flat[key] = value
        return json.loads(json.dumps(flat, default=str))

    def generation_args(self) -> GenerationArguments:
        return GenerationArguments(
            max_new_tokens=self.max_completion_length,
            temperature=self.temperature,
            do_sample=not self.greedy,
            seed=self.seed,
        )


def env_kwargs_for(config: EvalConfig, env_id: str) -> dict[str, Any]:
    """The config's env kwargs, for the team's env or a baseline: for the model alone's
    solve-v0, or another env than the team's (math/code-v0, the model alone with the tool),
    the team env's own options are left out, but for the verifier and those of the baseline's
    own options it shares (the tool's sandbox, cache and output bound)."""
    kwargs = config.env_kwargs()
    if env_id == ALONE_ENV or env_id != config.env_id:
        own = getattr(spec(env_id).options, "own_names", tuple)
        shared = {"verifier", *own()}
        for key in config.env_options:
            if key not in shared:  # the team env's own options
                kwargs.pop(key, None)
    return kwargs
