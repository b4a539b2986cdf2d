"""What the layers below a run read of its settings: `RunSource`, which the run's parsed groups
(`trainers.run.args.Job`) provide. The SFT/DPO rounds (`trainers.algorithms.rounds`), their
rollouts (`trainers.algorithms.sft.rollout_episodes`) and the held-out guard
(`trainers.evaluation.held_out`) type against it, not against the run's record above them."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class RunSource(Protocol):
    """The env a run trains on and how it plays it.

    Attributes:
        env_id: the registered env.
        train_problems: training problems (the task's train split).
        num_envs: env copies the rollout engine runs at once.
        max_train_minutes: the training loop's wall-clock budget (None: none).
        allow_overlap: whether evaluation problems may occur among the training problems.
    """

    @property
    def env_id(self) -> str: ...

    @property
    def train_problems(self) -> int: ...

    @property
    def num_envs(self) -> int: ...

    @property
    def max_train_minutes(self) -> float | None: ...

    @property
    def allow_overlap(self) -> bool: ...

    def protocol(self, split: str | None = None, config: Any = None) -> Any:
        """What the run trains on (an `envs.protocol.Protocol`; ``split="train"``: its training
        problems), whose ``env_kwargs()`` make its env."""
        ...

    def train_set(self, split: str | None = None, count: int | None = None) -> Any:
        """The training problems (an `envs.tasks.problems.ProblemSet`; its first `count`)."""
        ...
