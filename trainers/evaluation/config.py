"""What an evaluation plays (`EvalConfig`), and the env kwargs it gives the team's env or a
baseline's (the model alone's ``math/solve-v0``, or ``math/code-v0`` with the tool:
`env_kwargs_for`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.base import GenerationArguments
from envs.registry import spec
from envs.tasks import is_procedural
from envs.tasks.problems import ProblemSet
from trainers.embedded import EMBEDDED_TASK
from trainers.evaluation.splits import Levels, as_levels

ALONE_ENV = "math/solve-v0"  # what the same model plays alone (`trainers.evaluation.alone`)


@dataclass
class EvalConfig:
    """What to evaluate; see ``scripts/evaluate.py --help`` for each field."""

    env_id: str = "math/reflection-v0"
    task: str = EMBEDDED_TASK
    data_path: str | None = None
    split: str | None = None
    difficulty: Sequence[int] | Mapping[str, Sequence[int]] | None = None
    num_problems: int = 200
    offset: int = 0
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

    def problem_set(self) -> ProblemSet:
        """The problems it plays (`envs.tasks.problems.ProblemSet`): a generated task's test split
        by default (held out by construction, `envs.tasks.splits`), at `levels`."""
        procedural = is_procedural(self.task)
        return ProblemSet(
            self.task,
            split=(self.split or "test") if procedural else self.split,
            levels=self.levels() if procedural else None,
            count=self.num_problems,
            offset=self.offset,
            data_path=self.data_path,
        )

    def env_kwargs(self) -> dict[str, Any]:
        """The team env's kwargs: its problems' (`problem_set`) and its own options."""
        return self.problem_set().env_kwargs(self.env_options)

    def __post_init__(self) -> None:
        if is_procedural(self.task) and not self.difficulty:
            self.difficulty = self.levels()

    def levels(self, candidates: Any = None) -> Levels:
        """The levels of a generated task to evaluate: `difficulty` as given, else those of
        `candidates` (default: the task's declared defaults) that hold their share of the
        problems as distinct texts of the split (`ProblemSet.held`); a mixed task's, per
        member."""
        if self.difficulty:
            return as_levels(self.difficulty)
        problems = ProblemSet(
            self.task,
            split=self.split or "test",
            levels=as_levels(candidates) or None,
            count=self.num_problems,
            offset=self.offset,
        )
        return problems.held().level_list()

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
