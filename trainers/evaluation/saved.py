"""A trained model carries what its run played: ``final/mathteams.json``.

A training run writes, beside the weights it saves, its training `envs.protocol.Protocol` (the
env, the task and levels of its problems, the env's options, tokens per turn, temperature, the
base model) and its after-training evaluation (an `EvalConfig`, its protocol inside), with the
algorithm (`saved_data`). ``mathteams evaluate --model_name_or_path DIR`` and
``evaluate(model=DIR)`` read it (`read_saved`) and play that evaluation unless told otherwise:
evaluated with the env's own defaults instead, a model trained by the main job played another
protocol and scored a tenth of its trained figure.

The file is JSON, one object: ``format`` (2), ``algo``, ``protocol`` (`Protocol.to_dict`) and
``evaluation`` (`EvalConfig.to_dict`, with the folder's own paths written relative to it, so a
moved folder still plays itself). A format-1 file (env_id, task, difficulty, env_options, tokens,
temperature at the top) is read as the protocol it names.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from envs.protocol import Protocol, ProtocolError
from envs.tasks.problems import ProblemSet
from trainers.evaluation.config import NUM_PROBLEMS, EvalConfig

SAVED_FILE = "mathteams.json"
FORMAT = 2
HERE = "."  # the folder itself, in the file's players' paths


@dataclass(frozen=True)
class Saved:
    """What a saved model's file holds: its training protocol, its run's evaluation (None in a
    format-1 file: evaluate it with the protocol's task and levels) and the algorithm."""

    protocol: Protocol
    evaluation: EvalConfig | None
    algo: str | None


def _relative(path: str | None, folder: Path) -> str | None:
    """`path` written relative to `folder` where it lies inside it (``.``, ``./critic``)."""
    if not path:
        return path
    try:
        inner = Path(path).resolve().relative_to(folder.resolve())
    except ValueError:
        return path
    return HERE if str(inner) == "." else f"{HERE}/{inner}"


def _absolute(path: str | None, folder: Path) -> str | None:
    """`_relative`'s inverse: a path the file wrote relative to `folder`, under it."""
    if path == HERE:
        return str(folder)
    if path and path.startswith(HERE + "/"):
        return str(folder / path[2:])
    return path


def _players(evaluation: EvalConfig, folder: Path, write: bool) -> EvalConfig:
    """`evaluation` with its players' paths made relative to `folder` (`write`) or back."""
    move = _relative if write else _absolute
    players = evaluation.players
    return replace(
        evaluation,
        players=replace(
            players,
            model=move(players.model, folder),
            role_adapters_dir=move(players.role_adapters_dir, folder),
            role_models={r: move(p, folder) for r, p in players.role_models.items()},
        ),
    )


def saved_data(
    folder: str | Path, protocol: Protocol, evaluation: EvalConfig | None, algo: str
) -> dict[str, Any]:
    """What `folder`/mathteams.json holds for a run that trained in `protocol` with `algo` and
    evaluated as `evaluation` (its paths inside `folder` written relative to it); the run
    writes it (`trainers.run.experiment`)."""
    data: dict[str, Any] = {"format": FORMAT, "algo": algo, "protocol": protocol.to_dict()}
    if evaluation is not None:
        evaluation = _players(evaluation, Path(folder), True)
    data["evaluation"] = None if evaluation is None else evaluation.to_dict()
    return data


def read_saved(model: str | Path | None) -> Saved | None:
    """What a local model folder carries (its mathteams.json), or None: a hub id, a catalog
    name, a folder without one, or no model. A file that is not one raises `ProtocolError`,
    naming the file and the expected keys."""
    if not model:
        return None
    folder = Path(model)
    path = folder / SAVED_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(
            f"{path} is not readable JSON ({exc}); delete it or rewrite it"
        ) from None
    if isinstance(data, dict) and data.get("format") == 1:
        return Saved(_format_one(data, path), None, data.get("algo"))
    keys = ("format", "algo", "protocol", "evaluation")
    if not isinstance(data, dict) or set(data) - set(keys) or data.get("format") != FORMAT:
        got = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise ProtocolError(
            f"{path} is not a saved run of format {FORMAT}: expected an object with the keys "
            f"{', '.join(keys)} and format {FORMAT}; got {got}"
        )
    protocol = Protocol.from_dict(data.get("protocol"), f"{path}: protocol")
    evaluation = data.get("evaluation")
    if evaluation is not None:
        evaluation = _players(
            EvalConfig.from_dict(evaluation, f"{path}: evaluation"), folder, False
        )
    return Saved(protocol, evaluation, data.get("algo"))


def _format_one(data: dict[str, Any], path: Path) -> Protocol:
    """The protocol a format-1 file names (its task on its levels, the env's options)."""
    expected = {"format", "env_id", "task", "difficulty", "env_options"}
    expected |= {"max_completion_length", "temperature", "algo"}
    if set(data) - expected or not isinstance(data.get("env_options", {}), dict):
        raise ProtocolError(f"{path}: a format-1 file holds {sorted(expected)}; got {sorted(data)}")
    return Protocol.from_dict(
        {
            "env_id": data.get("env_id"),
            "problems": {"task": data.get("task") or "unknown", "levels": data.get("difficulty")},
            "options": data.get("env_options", {}),
            "max_completion_length": data.get("max_completion_length"),
            "temperature": data.get("temperature"),
        },
        str(path),
    )


def trained_evaluation(saved: Saved, folder: str | Path) -> EvalConfig:
    """The evaluation to replay for a saved model: its run's own, or (a format-1 file) its
    protocol's task and levels on the held-out split, played by the folder's model."""
    if saved.evaluation is not None:
        return saved.evaluation
    protocol = saved.protocol
    problems = ProblemSet(protocol.task, count=NUM_PROBLEMS, verifier=protocol.problems.verifier)
    problems = problems.evaluated(protocol.problems.levels)
    return EvalConfig(protocol=replace(protocol, problems=problems)).replaced(model=str(folder))


def for_model(model: str | Path, **values: Any) -> EvalConfig:
    """The evaluation `model` (a folder a training run saved) carries: its run's own
    after-training evaluation (`trained_evaluation`), with `EvalConfig.of`'s flat names
    replaced; a folder without one (or a hub id) gets the defaults."""
    saved = read_saved(model)
    if saved is None:
        return EvalConfig.of(model=str(model), **values)
    return trained_evaluation(saved, model).replaced(**values)
