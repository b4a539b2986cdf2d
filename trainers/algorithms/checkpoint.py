"""Crash-safe resume: the newest *complete* checkpoint, and run files written atomically.

transformers' `Trainer` writes ``checkpoint-N/`` in place: the weights (and PPO's
``value_head.pt``), ``optimizer.pt``, ``scheduler.pt``, ``rng_state*.pth``, and last
``trainer_state.json``. Its `get_last_checkpoint` returns the highest-numbered folder whether or not
that sequence finished, so a run killed during a save would resume from a half-written folder
(and fail, or silently restart the value head). `resume_checkpoint` instead walks the checkpoints
newest first, checks each one (every file present and structurally whole: JSON parses, safetensors
headers cover their file, torch zip archives have their central directory) and resumes from the
first complete one; an incomplete one is logged and renamed ``incomplete-checkpoint-N`` (kept for
inspection, out of the way of `Trainer`'s checkpoint rotation).

What one checkpoint restores, with the loaders of `Trainer` and `MultiAgentPPOTrainer`: weights,
optimizer and scheduler state, the python / numpy / torch (and CUDA) RNG states, the global step
(so the data sampler skips the batches already seen, and GRPO's rollout seeds, which follow the
step, repeat) and the log history. Not checked: a file whose bytes were lost *inside* (a power
cut before the page cache was flushed can leave a right-sized file of zeros; the zip and
safetensors checks read headers, not every byte); DeepSpeed and FSDP checkpoint layouts are
accepted on their ``trainer_state.json`` and RNG files alone.

``--resume_from_checkpoint true`` (or ``latest``) on a training script resumes from the newest
complete checkpoint in ``output_dir`` and starts afresh, with a warning, when there is none; so the
same command line serves the first launch and every relaunch after a crash.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import tempfile
import time
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")  # transformers' PREFIX_CHECKPOINT_DIR pattern
LATEST = frozenset({"true", "latest", "last", "auto"})
NEVER = frozenset({"", "false", "none", "no"})
WEIGHT_FILES = ("model.safetensors", "adapter_model.safetensors", "pytorch_model.bin")
INDEX_FILES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")


def _json_problem(path: Path) -> tuple[Any, str | None]:
    try:
        return json.loads(path.read_text()), None
    except FileNotFoundError:
        return None, f"{path.name} is missing"
    except (OSError, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return None, f"{path.name} is unreadable ({exc})"


def _archive_problem(path: Path) -> str | None:
    """Why `path` is not a whole torch archive (zip) or safetensors file; None when it is."""
    if not path.is_file():
        return f"{path.name} is missing"
    from safetensors import SafetensorError, safe_open

    try:
        if path.suffix == ".safetensors":
            with safe_open(str(path), "pt"):  # checks the header covers the whole file
                pass
        else:
            with zipfile.ZipFile(path) as archive:  # the central directory is written last
                size = path.stat().st_size
                if any(i.header_offset + i.compress_size > size for i in archive.infolist()):
                    return f"{path.name} is truncated"
    except (OSError, ValueError, zipfile.BadZipFile, SafetensorError) as exc:
        return f"{path.name} is damaged ({type(exc).__name__}: {exc})"
    return None


def _weights_problems(folder: Path) -> list[str]:
    for name in WEIGHT_FILES:
        if (folder / name).exists():
            problem = _archive_problem(folder / name)
            return [problem] if problem else []
    for name in INDEX_FILES:
        if (folder / name).exists():
            index, problem = _json_problem(folder / name)
            if problem:
                return [problem]
            shards = sorted(set(index.get("weight_map", {}).values()))
            return [p for p in (_archive_problem(folder / s) for s in shards) if p]
    adapters = sorted(p.parent for p in folder.glob("*/adapter_config.json"))
    if adapters:  # one named adapter per role, in <folder>/<role>/ (trainers.roles.adapters)
        weights = [a / "adapter_model.safetensors" for a in adapters]
        return [f"{w.parent.name}/{p}" for w in weights if (p := _archive_problem(w))]
    models = sorted(p.parent for p in folder.glob("*/config.json"))
    if models:  # one complete model per role, in <folder>/<role>/ (trainers.roles.models)
        return [f"{m.name}/{p}" for m in models for p in _weights_problems(m)]
    return [f"no model weights ({' / '.join(WEIGHT_FILES + INDEX_FILES)})"]


def checkpoint_problems(
    folder: str | os.PathLike, world_size: int = 1, extra_files: Sequence[str] = ()
) -> list[str]:
    """Why `folder` cannot be resumed from; an empty list when it is complete.

    Args:
        folder (`str | PathLike`): a ``checkpoint-N`` folder.
        world_size (`int`, 1): processes of the run (one ``rng_state_<i>.pth`` each when > 1).
        extra_files (`Sequence[str]`, ()): torch files the trainer adds, e.g. ``value_head.pt``.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return [f"{folder} is not a folder"]
    state, problem = _json_problem(folder / "trainer_state.json")
    problems = [problem] if problem else []
    match = CHECKPOINT_RE.match(folder.name)
    if state is not None and match and state.get("global_step") != int(match.group(1)):
        problems.append(f"trainer_state.json is at step {state.get('global_step')}")
    deepspeed = (folder / "latest").is_file()  # DeepSpeed keeps weights and optimizer itself
    files = [*extra_files]
    if not deepspeed:
        problems += _weights_problems(folder)
        files += ["optimizer.pt", "scheduler.pt"]
    if world_size > 1:
        files += [f"rng_state_{i}.pth" for i in range(world_size)]
    else:
        files.append("rng_state.pth")
    problems += [p for p in (_archive_problem(folder / f) for f in files) if p]
    return problems


def checkpoints(output_dir: str | os.PathLike) -> list[Path]:
    """The ``checkpoint-N`` folders of `output_dir`, newest (highest N) first."""
    root = Path(output_dir)
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := CHECKPOINT_RE.match(p.name))]
    return [p for _, p in sorted(found, reverse=True) if p.is_dir()]


def set_aside(folder: Path) -> Path:
    """Rename an incomplete checkpoint ``incomplete-checkpoint-N[-<ns>]``; return the new path."""
    target = folder.with_name(f"incomplete-{folder.name}")
    if target.exists():
        target = folder.with_name(f"incomplete-{folder.name}-{time.time_ns()}")
    folder.rename(target)
    return target


def latest_complete_checkpoint(
    output_dir: str | os.PathLike,
    world_size: int = 1,
    extra_files: Sequence[str] = (),
    move_incomplete: bool = False,
) -> Path | None:
    """The newest complete checkpoint of `output_dir`, skipping (with a warning) broken ones.

    Args:
        output_dir (`str | PathLike`): the run's folder.
        world_size (`int`, 1), extra_files (`Sequence[str]`, ()): as `checkpoint_problems`.
        move_incomplete (`bool`, False): rename each skipped newer folder with `set_aside`.
    """
    for folder in checkpoints(output_dir):
        problems = checkpoint_problems(folder, world_size, extra_files)
        if not problems:
            return folder
        where = folder
        if move_incomplete:
            with contextlib.suppress(FileNotFoundError):  # another process moved it first
                where = set_aside(folder)
        logger.warning(
            "skipping incomplete checkpoint %s (%s); it is now %s",
            folder,
            "; ".join(problems),
            where,
        )
    return None


def resume_checkpoint_requested(config: Any) -> bool:
    """Whether ``config.resume_from_checkpoint`` asks to resume (``true``, ``latest`` or a path)."""
    value = getattr(config, "resume_from_checkpoint", None)
    return not (value is None or value is False or str(value).strip().lower() in NEVER)


def resume_checkpoint(config: Any, extra_files: Sequence[str] = ()) -> str | None:
    """What to pass to ``trainer.train(resume_from_checkpoint=...)`` for `config`.

    ``config.resume_from_checkpoint``: None / ``false``: start afresh; ``true`` / ``latest``: the
    newest complete checkpoint of ``config.output_dir`` (afresh, with a warning, when none);
    a path: that checkpoint, which must be complete.

    Args:
        config (`TrainingArguments`): the run's config (``output_dir``, ``world_size``,
            ``process_index``, ``resume_from_checkpoint``).
        extra_files (`Sequence[str]`, ()): files the trainer adds to its checkpoints.

    Raises:
        ValueError: an explicit checkpoint path that is incomplete, naming what is wrong.
    """
    value = config.resume_from_checkpoint
    if not resume_checkpoint_requested(config):
        return None
    world = int(getattr(config, "world_size", 1) or 1)
    if value is True or str(value).strip().lower() in LATEST:
        found = latest_complete_checkpoint(
            config.output_dir,
            world,
            extra_files,
            move_incomplete=getattr(config, "process_index", 0) == 0,
        )
        if found is None:
            logger.warning(
                "no complete checkpoint in %s: training from the start", config.output_dir
            )
            return None
        logger.info("resuming from %s", found)
        warn_mid_generation(config, found)
        return str(found)
    problems = checkpoint_problems(value, world, extra_files)
    if problems:
        raise ValueError(
            f"resume_from_checkpoint={value!r} cannot be resumed from: {'; '.join(problems)}. "
            "Pass --resume_from_checkpoint true to use the newest complete checkpoint instead."
        )
    warn_mid_generation(config, Path(value))
    return str(value)


def warn_mid_generation(config: Any, folder: Path) -> bool:
    """Warn (and return True) when a GRPO/PPO checkpoint falls inside a generation batch.

    TRL's `GRPOTrainer` generates once every ``steps_per_generation * num_iterations`` micro-steps
    and keeps the completions in memory, not in checkpoints; resumed between two generations, it
    generates afresh, so the run goes on soundly but not exactly as the uninterrupted one would.
    """
    every = getattr(config, "steps_per_generation", None)
    match = CHECKPOINT_RE.match(folder.name)
    if not every or not match:
        return False
    every *= getattr(config, "num_iterations", 1) or 1
    micro_steps = int(match.group(1)) * config.gradient_accumulation_steps
    if micro_steps % every == 0:
        return False
    logger.warning(
        "%s falls inside a generation batch (one every steps_per_generation x num_iterations = "
        "%d micro-steps; the checkpoint is at micro-step %d): the buffered completions are not "
        "checkpointed, so the resumed run samples new ones and will not repeat the "
        "uninterrupted run exactly. Save at multiples of %d micro-steps for exact resumes.",
        folder,
        every,
        micro_steps,
        every,
    )
    return True


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success it replaces `path` in one rename.

    A reader, or a run killed mid-write, sees the old file or the new one, never a mix.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
    os.close(fd)
    try:
        yield Path(tmp)
        with open(tmp, "rb+") as handle:  # on disk before the rename, so a power cut keeps one
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_json_atomic(path: str | os.PathLike, data: Any) -> None:
    """`data` as indented JSON at `path`, written with `atomic_path`."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
