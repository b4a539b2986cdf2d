"""Problem sources: the `Problem` record, in-memory and JSONL sources, hub loading.

Every loading error is a `DataLoadError` naming the file, the line and the field, and what to do.
Loaded files are cached by (path, size, mtime, parser) so that many env copies share one read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

from envs.errors import DataLoadError


class Problem(TypedDict):
    """One problem: ``{id, question, answer, metadata}`` (reasoning-gym's item shape plus an id)."""

    id: str
    question: str
    answer: str
    metadata: dict[str, Any]


def make_problem(
    problem_id: Any, question: Any, answer: Any, metadata: Mapping[str, Any] | None = None
) -> Problem:
    """Build a `Problem`, checking the field types (a user-supplied problem is checked here)."""
    for field_name, value in (("id", problem_id), ("question", question), ("answer", answer)):
        if not isinstance(value, str) or (field_name != "question" and not value.strip()):
            raise ValueError(f"problem field {field_name!r} must be a non-empty str, got {value!r}")
    return Problem(id=problem_id, question=question, answer=answer, metadata=dict(metadata or {}))


class ProblemSource:
    """A finite, indexable collection of problems, also addressable by id."""

    name: str = "problems"

    def __len__(self) -> int:
        raise NotImplementedError

    def __getitem__(self, index: int) -> Problem:
        raise NotImplementedError

    def __iter__(self) -> Iterator[Problem]:
        return (self[i] for i in range(len(self)))

    def get(self, problem_id: str) -> Problem:
        """Return the problem with this id, or raise `KeyError` naming it."""
        raise NotImplementedError


class ListSource(ProblemSource):
    """Problems held in memory (a loaded file or a user's list)."""

    def __init__(self, problems: Sequence[Problem], name: str = "problems") -> None:
        if not problems:
            raise ValueError(f"problem source {name!r} is empty: it needs at least one problem")
        self.name = name
        self._problems = tuple(problems)
        self._by_id = {p["id"]: i for i, p in enumerate(self._problems)}
        if len(self._by_id) != len(self._problems):
            raise ValueError(f"problem source {name!r} has duplicate problem ids")

    def __len__(self) -> int:
        return len(self._problems)

    def __getitem__(self, index: int) -> Problem:
        problem = self._problems[index]
        return Problem(**{**problem, "metadata": dict(problem["metadata"])})

    def get(self, problem_id: str) -> Problem:
        try:
            return self[self._by_id[problem_id]]
        except KeyError:
            raise KeyError(
                f"no problem with id {problem_id!r} in {self.name!r} "
                f"({len(self)} problems, ids like {self._problems[0]['id']!r})"
            ) from None


def chosen_problems(source: ProblemSource, chosen: int | Sequence[str] | None) -> list[Problem]:
    """The problems a run plays: all of `source` (None), its first n (an int), or the given
    ids (each looked up: an unknown id raises the source's `KeyError` naming it)."""
    if chosen is None or isinstance(chosen, int):
        count = len(source) if chosen is None else min(chosen, len(source))
        return [source[i] for i in range(count)]
    return [source.get(str(pid)) for pid in chosen]


RowParser = Callable[[Mapping[str, Any], int, str], Problem]
_CACHE: dict[tuple[Any, ...], ListSource] = {}


def load_jsonl(path: str | os.PathLike[str], parse_row: RowParser, name: str) -> ListSource:
    """Read a JSONL file, one problem per line, through `parse_row(row, index, where)`.

    `parse_row` raises `KeyError(field)` for a missing field or `ValueError` for a bad value;
    both become a `DataLoadError` naming the file and line.
    """
    file = Path(path).expanduser()
    if not file.is_file():
        raise DataLoadError(
            f"{name}: data file {str(file)!r} does not exist; pass data_path= the path of a local "
            "JSONL file (one JSON object per line), or leave data_path unset to load from the hub"
        )
    stat = file.stat()
    key = (str(file.resolve()), stat.st_size, stat.st_mtime_ns, parse_row, name)
    if key in _CACHE:
        return _CACHE[key]
    problems = []
    with file.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{file}:{line_no}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise DataLoadError(
                    f"{name}: {where} is not valid JSON ({err.msg} at column {err.colno}); "
                    "each line must hold one JSON object"
                ) from None
            if not isinstance(row, dict):
                raise DataLoadError(
                    f"{name}: {where} holds a {type(row).__name__}, expected a JSON object"
                )
            problems.append(_parse(parse_row, row, len(problems), where, name))
    if not problems:
        raise DataLoadError(f"{name}: {file} holds no problems (the file is empty)")
    source = _CACHE[key] = ListSource(problems, name=name)
    return source


def load_hub(
    hub_id: str, config: str | None, split: str, parse_row: RowParser, name: str
) -> ListSource:
    """Load a split from the Hugging Face Hub through `datasets` (cached per process)."""
    key = ("hub", hub_id, config, split, parse_row, name)
    if key in _CACHE:
        return _CACHE[key]
    try:
        import datasets
    except ImportError:
        raise DataLoadError(
            f"{name}: loading {hub_id!r} from the hub needs the `datasets` package: "
            "pip install 'mathteams[data]', or pass data_path= a local JSONL file"
        ) from None
    try:
        dataset = datasets.load_dataset(hub_id, config, split=split)
    except Exception as err:
        raise DataLoadError(
            f"{name}: could not load {hub_id!r} (config {config!r}, split {split!r}) from the "
            f"Hugging Face Hub: {type(err).__name__}: {err}. If this machine is offline, pass "
            "data_path= a local JSONL copy of the split"
        ) from err
    problems = [
        _parse(parse_row, row, i, f"{hub_id}[{split}][{i}]", name) for i, row in enumerate(dataset)
    ]
    source = _CACHE[key] = ListSource(problems, name=name)
    return source


def _parse(
    parse_row: RowParser, row: Mapping[str, Any], index: int, where: str, name: str
) -> Problem:
    try:
        return parse_row(row, index, where)
    except KeyError as err:
        field = err.args[0] if err.args else "?"
        raise DataLoadError(
            f"{name}: {where} has no field {field!r} (fields present: {sorted(row)}); "
            f"each row needs {field!r}"
        ) from None
    except (TypeError, ValueError) as err:
        raise DataLoadError(f"{name}: {where}: {err}") from None


def require(row: Mapping[str, Any], *fields: str) -> Any:
    """Return the first of `fields` present in `row` (raise `KeyError(fields[0])` if none)."""
    for field in fields:
        if field in row and row[field] is not None:
            return row[field]
    raise KeyError(fields[0])
