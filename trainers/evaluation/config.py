"""What an evaluation plays: `EvalConfig`, a `envs.protocol.Protocol` (the env, its problems and
options, tokens per turn, temperature) with who plays it (`Players`) and what evaluation alone
adds (samples, seeds, baselines, output).

A model a training run saved carries its run's own evaluation (``final/mathteams.json``,
`trainers.evaluation.saved`): ``saved.for_model(folder)`` reads it, so
``evaluate(model="RUN/final")`` replays the run's after-training evaluation, and names override
it (``evaluate(model="RUN/final", samples=4)``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.base import GenerationArguments
from envs.protocol import Protocol, ProtocolError
from envs.tasks.problems import ProblemSet
from trainers.evaluation.splits import Levels, as_levels

ALONE_ENV = "math/solve-v0"  # what the same model plays alone (`trainers.evaluation.alone`)
TOKENS_PER_TURN = 96  # the training configs' max_completion_length, where none is given
TEMPERATURE = 1.0
NUM_PROBLEMS = 200  # what an evaluation plays unless told (a run's saves its own count)


def _default_protocol() -> Protocol:
    return Protocol(problems=ProblemSet(count=NUM_PROBLEMS))


@dataclass(frozen=True)
class Players:
    """Who plays: the model (default: the embedded one), a model per role, one LoRA adapter per
    role (``<role_adapters_dir>/<role>/``), an ensemble of instruction variants, and where the
    models run."""

    model: str | None = None
    role_models: Mapping[str, str] = field(default_factory=dict)
    role_adapters_dir: str | None = None
    ensemble: str | None = None
    ensemble_size: int = 3
    device: str | None = None


PLAYERS = tuple(f.name for f in dataclasses.fields(Players))
PROTOCOL = ("env_id", "max_completion_length", "temperature", "base_model")


@dataclass
class EvalConfig:
    """What to evaluate; see ``scripts/evaluate.py --help`` for each field.

    ``protocol`` is what it plays: 200 problems of the default task on reflection unless
    given. Its problems are completed once (`envs.tasks.problems.ProblemSet.evaluated`: a
    generated task's "test" split unless given, the levels given or those of the task's
    defaults that hold their share); its tokens per turn default to 96, its temperature to 1.

    `EvalConfig.of` builds one from flat names (``EvalConfig.of(env_id=..., model=...,
    temperature=0.7, env_options={"rounds": 1})``), for tests and notebooks.
    """

    protocol: Protocol = field(default_factory=_default_protocol)
    players: Players = field(default_factory=Players)
    samples: int = 1
    ks: Sequence[int] = (1,)
    greedy: bool = False
    num_envs: int = 64
    seed: int = 0
    compare: bool = True
    # The same model alone gets k independent samples per problem for each k here (mean pass@1
    # and maj@k); None: 1, 3 and the team's generations per episode (`team_generations`).
    alone_ks: Sequence[int] | None = None
    intervals: bool = True
    save_episodes: Path | None = None
    progress: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.protocol, Protocol):
            raise TypeError(
                f"EvalConfig.protocol must be an envs.protocol.Protocol, got {self.protocol!r}"
            )
        if not isinstance(self.players, Players):
            raise TypeError(f"EvalConfig.players must be a Players, got {self.players!r}")
        self.ks = tuple(self.ks)
        if self.alone_ks is not None:
            self.alone_ks = tuple(self.alone_ks)
        protocol = self.protocol
        self.protocol = dataclasses.replace(
            protocol,
            problems=protocol.problems.evaluated(),
            max_completion_length=protocol.max_completion_length or TOKENS_PER_TURN,
            temperature=TEMPERATURE if protocol.temperature is None else protocol.temperature,
        )

    @classmethod
    def of(cls, **values: Any) -> EvalConfig:
        """An `EvalConfig` from flat names: the protocol's (env_id, problems, env_options,
        max_completion_length, temperature, base_model), the players' (model, role_models,
        role_adapters_dir, ensemble, ensemble_size, device) and its own fields."""
        return cls().replaced(**values)

    def replaced(self, **values: Any) -> EvalConfig:
        """This config with the flat names of `of` replaced; an unknown name raises, naming the
        accepted ones."""
        protocol = {k: values.pop(k) for k in PROTOCOL if k in values}
        if "problems" in values:
            protocol["problems"] = values.pop("problems")
        if "env_options" in values:
            protocol["options"] = values.pop("env_options")
        moved = protocol.get("env_id", self.env_id) != self.env_id
        if moved and "options" not in protocol:  # the old env's options are not the new one's
            protocol["options"] = {}
        players = {k: values.pop(k) for k in PLAYERS if k in values}
        own = {f.name for f in dataclasses.fields(self)} - {"protocol", "players"}
        unknown = sorted(set(values) - own)
        if unknown:
            raise TypeError(
                f"EvalConfig got unexpected arguments {unknown}: expected some of "
                f"{sorted({*PROTOCOL, 'problems', 'env_options', *PLAYERS, *own})}"
            )
        return dataclasses.replace(
            self,
            protocol=dataclasses.replace(self.protocol, **protocol),
            players=dataclasses.replace(self.players, **players),
            **values,
        )

    # What the layers below read.
    @property
    def env_id(self) -> str:
        return self.protocol.env_id

    @property
    def problems(self) -> ProblemSet:
        return self.protocol.problems

    @property
    def task(self) -> str:
        return self.protocol.task

    @property
    def model(self) -> str | None:
        return self.players.model

    def levels(self) -> Levels:
        """The levels of a generated task it plays (a mixed task's, per member); [] for a
        file task."""
        return self.problems.level_list()

    def env_options(self) -> dict[str, Any]:
        """The team env's kwargs beyond its problems: the verifier (if chosen) and its own
        options."""
        verifier = self.problems.verifier
        return {**({"verifier": verifier} if verifier else {}), **self.protocol.options}

    def as_dict(self) -> dict[str, Any]:
        """Its fields as JSON values under the evaluation's flat names (env_id, task,
        data_path, split, difficulty, num_problems, offset, the players', ...): the ``config``
        of its results."""
        problems, protocol = self.problems, self.protocol
        flat: dict[str, Any] = {
            "env_id": self.env_id,
            "task": problems.task,
            "data_path": problems.data_path,
            "split": problems.split,
            "difficulty": as_levels(problems.level_list()) if problems.generated else None,
            "num_problems": problems.count,
            "offset": problems.offset,
            **dataclasses.asdict(self.players),
            "max_completion_length": protocol.max_completion_length,
            "temperature": protocol.temperature,
            "env_options": self.env_options(),
        }
        for f in dataclasses.fields(self):
            if f.name not in ("protocol", "players"):
                flat[f.name] = getattr(self, f.name)
        return json.loads(json.dumps(flat, default=str))

    def to_dict(self) -> dict[str, Any]:
        """Its JSON form (`from_dict` reads it): the protocol's, the players', its own fields."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["protocol"] = self.protocol.to_dict()
        data["players"] = dataclasses.asdict(self.players)
        return json.loads(json.dumps(data, default=str))

    @classmethod
    def from_dict(cls, data: Any, where: str = "an evaluation") -> EvalConfig:
        """The config `data` (`to_dict`'s form) holds; `ProtocolError` names `where` and the
        expected keys when it is not one."""
        names = [f.name for f in dataclasses.fields(cls)]
        if not isinstance(data, Mapping) or set(data) - set(names):
            got = sorted(data) if isinstance(data, Mapping) else type(data).__name__
            raise ProtocolError(f"{where}: expected an object with keys {names}, got {got}")
        values = dict(data)
        values["protocol"] = Protocol.from_dict(data.get("protocol", {}), f"{where}: protocol")
        try:
            values["players"] = Players(**data.get("players", {}))
            if values.get("save_episodes"):
                values["save_episodes"] = Path(values["save_episodes"])
            return cls(**values)
        except (TypeError, ValueError) as exc:
            raise ProtocolError(f"{where}: {exc}") from None

    def generation_args(self) -> GenerationArguments:
        return GenerationArguments(
            max_new_tokens=self.protocol.max_completion_length,
            temperature=self.protocol.temperature,
            do_sample=not self.greedy,
            seed=self.seed,
        )
