"""Warm start: SFT on demonstrations of an env's roles before RL (``--warmup_sft_steps``).

RL improves what a policy already does now and then; it cannot find a reply format it never
writes. The embedded model is built without ``math/tool-v0`` rows (`EmbeddedRecipe`'s
``tool_fraction`` 0), so its executor answers in prose and is right 2% of the time, and GRPO
sees a reward in 5% of its groups: without a warm-up, ``train_tool.py`` moved its headline by
only +0.008 (an earlier build: `git show 93f0224:docs/results.md`, "Every script's defaults
(v13)"). A short SFT on demonstrations first (a cold start, as in DeepSeek-R1 before its RL)
teaches the format; GRPO or PPO then trains on the policy's own play (with it the team's vote
goes 0.033 -> 0.787: docs/results.md, "The other scripts' defaults").

**Demonstrations.** ``--warmup_data embedded`` (the default): transcripts of the embedded
recipe (`trainers.embedded.transcripts.sft_rows`) on the task's *training* problems, played
through the real envs (the tool programs run in the sandbox), every problem giving the env's
roles a row; a third of each batch replays the recipe's other rows (the solver, critic, refiner
and the drills) so the roles the model already plays are kept. Only the ``unknown`` task has
such transcripts. Or a JSONL file, one ``{"messages": [...]}`` chat per line (the last message the
assistant's reply, the one the loss is on), for any model and task.

**Default.** ``--warmup_sft_steps`` left unset warms up `AUTO_STEPS` steps when the start model
is an embedded build (its folder has ``recipe.json``) whose SFT rows have none of some role of
the env and the task is ``unknown``; else 0. So ``train_tool.py`` warms up the shipped model and
no other script does.

**Sharpening.** The embedded model carries its fitted logit scale times ``sharpen`` folded into
the final norm (`trainers.embedded.calibrate`): sampled at T=1 it is the SFT model at T=1/4.65,
and its confident errors start a new format's SFT at a loss of ~15. The warm-up divides the fold
out, trains, and multiplies it back in, so the loss starts at ~2.7 and sampling keeps its
temperature.

**Budget.** ``--max_train_minutes`` bounds warm-up and RL together: RL gets what the warm-up
left (at least `trainers.run.budget.MIN_MINUTES`). The warmed model is saved in ``output_dir/warmup/`` and, with
evaluations on, evaluated on the held-out problems (``metrics.json``'s ``warmup.eval``), so the
run shows what SFT gave and what RL added; a resumed run reuses a finished warm-up.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import envs
from envs.roles import env_roles
from trainers.embedded import EmbeddedRecipe
from trainers.evaluation.report.console import Console, install
from trainers.run.args import Job

logger = logging.getLogger(__name__)

AUTO_STEPS = (
    500  # the embedded tool team acts as one (docs/results.md, "The other scripts' defaults")
)
REPLAY_SHARE = 1 / 3  # of the embedded demonstrations: rows of roles other than the env's
BATCH = 16
PROBLEM_CHUNK = 400
DONE = "warmup.json"
# The task whose tool transcripts (analyzer, executor, verifier) the embedded recipe writes
# (`trainers.embedded.transcripts.program_reply`): the warm-up's demonstrations are of it.
TRANSCRIPT_TASK = "unknown"


def embedded_manifest(model_path: str | Path) -> dict[str, Any] | None:
    """The ``recipe.json`` of an embedded build in `model_path`, or None (not one)."""
    path = Path(model_path) / "recipe.json"
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path} is not readable JSON ({exc}); rebuild the model") from exc
    return manifest if isinstance(manifest, dict) and "recipe" in manifest else None


def default_steps(job: Job, model_path: str) -> int:
    """`AUTO_STEPS` when an embedded build starts an env with a role it was never trained on
    (``unknown`` task); else 0."""
    manifest = embedded_manifest(model_path)
    if manifest is None or job.env.task != TRANSCRIPT_TASK or job.env.data_path:
        return 0
    trained = set(manifest.get("sft", {}).get("rows_per_role", {}))
    return AUTO_STEPS if set(env_roles(job.env_id)) - trained else 0


def folded_scale(model_path: str | Path) -> float:
    """The logit scale folded into an embedded build's final norm (1.0 for other models)."""
    manifest = embedded_manifest(model_path) or {}
    calibration = manifest.get("sft", {}).get("calibration") or {}
    return float(calibration.get("logit_scale", 1.0)) * float(calibration.get("sharpen", 1.0))


def embedded_demonstrations(
    job: Job, model_path: str, rows: int, seed: int
) -> list[dict[str, Any]]:
    """`rows` chat rows: the env's roles from the embedded recipe's transcripts of training
    problems, with `REPLAY_SHARE` of the recipe's other rows and drills, shuffled."""
    from trainers.embedded.transcripts import drill_rows, sft_rows

    if job.env.task != TRANSCRIPT_TASK or job.env.data_path:
        raise ValueError(
            f"--warmup_data embedded has transcripts of the {TRANSCRIPT_TASK!r} task only, not "
            f"task={job.env.task!r}{' with --data_path' if job.env.data_path else ''}; pass "
            '--warmup_data PATH.jsonl (one {"messages": [...]} chat per line)'
        )
    manifest = embedded_manifest(model_path)
    recipe = EmbeddedRecipe(**_tuples(manifest["recipe"])) if manifest else EmbeddedRecipe()
    roles = set(env_roles(job.env_id))
    wanted = math.ceil(rows * (1 - REPLAY_SHARE))
    own: list[dict[str, Any]] = []
    other: list[dict[str, Any]] = []
    chunk = 0
    while len(own) < wanted:
        problems = envs.make_task(
            TRANSCRIPT_TASK,
            split="train",
            size=min(PROBLEM_CHUNK, wanted),  # a problem gives each role at least one row
            difficulty=list(job.env.difficulty),
            seed=seed + 7919 * chunk,  # a fresh draw per chunk
            repeat=True,  # a small level's train problems cycle
        ).source
        made = sft_rows(
            list(problems),
            seed + chunk,
            recipe.review_fraction,
            recipe.second_round,
            recipe.team_fraction,
            recipe.work_fraction,
            recipe.rework_fraction,
            tool_fraction=1.0 if "executor" in roles else recipe.tool_fraction,
        )
        new = [r for r in made if r["role"] in roles]
        if not new:
            raise ValueError(
                f"the embedded recipe's transcripts have no rows for the roles {sorted(roles)} "
                f"of {job.env_id}; pass --warmup_data PATH.jsonl"
            )
        own += new
        other += [r for r in made if r["role"] not in roles]
        chunk += 1
    rng = random.Random(seed)
    replay = rows - wanted
    other += drill_rows(replay, recipe.drill_facts, seed)
    picked = own[:wanted] + rng.sample(other, min(replay, len(other)))
    rng.shuffle(picked)
    return picked


def _tuples(recipe: dict[str, Any]) -> dict[str, Any]:
    """A recipe dict from JSON with its lists back as tuples (the dataclass's field types), less
    any field this version's `EmbeddedRecipe` no longer has."""
    known = {f.name for f in dataclasses.fields(EmbeddedRecipe)}
    return {k: tuple(v) if isinstance(v, list) else v for k, v in recipe.items() if k in known}


def file_demonstrations(path: str) -> list[dict[str, Any]]:
    """Chat rows from a JSONL file, each line ``{"messages": [{"role", "content"}, ...]}``
    ending with the assistant's reply; a bad line is refused with its number."""
    rows = []
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"--warmup_data {path!r}: no such file (expected a JSONL of chats)")
    for number, line in enumerate(file.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            messages = row["messages"]
            ok = (
                isinstance(messages, list)
                and messages
                and all(
                    isinstance(m, dict)
                    and isinstance(m.get("role"), str)
                    and isinstance(m.get("content"), str)
                    for m in messages
                )
                and messages[-1]["role"] == "assistant"
            )
        except (ValueError, KeyError, TypeError):
            ok = False
        if not ok:
            raise ValueError(
                f'{path}:{number}: expected {{"messages": [{{"role": ..., "content": ...}}, '
                "...]}} ending with an assistant message"
            )
        rows.append({"messages": messages, "role": "demonstration"})
    if not rows:
        raise ValueError(f"--warmup_data {path!r} holds no chats")
    return rows


def warmup_config(job: Job, config: Any, out: Path, steps: int) -> Any:
    """The warm-up's `CPUSFTConfig` (loss on the assistant replies only): cosine schedule,
    rows up to 1024 tokens (a second-round executor row of the embedded tool transcripts reaches
    ~600, past the 512 the build trained on)."""
    from trainers.algorithms.sft import CPUSFTConfig

    return CPUSFTConfig(
        output_dir=str(out / "trainer"),
        max_steps=steps,
        per_device_train_batch_size=BATCH,
        learning_rate=job.warmup.warmup_learning_rate,
        lr_scheduler_type="cosine",
        warmup_steps=max(1, steps // 20),
        use_cpu=getattr(config, "use_cpu", True),
        bf16=getattr(config, "bf16", False),
        logging_steps=max(1, steps // 20),
        seed=config.seed,
        data_seed=config.seed,
        max_length=1024,
        disable_tqdm=getattr(config, "disable_tqdm", False),
    )


def warm_start(
    job: Job, config: Any, model_path: str, out: Path, steps: int
) -> tuple[str, dict[str, Any]]:
    """SFT `model_path` for `steps` steps on the demonstrations; save to `out`; return (the
    saved model's path, figures). A finished warm-up already in `out` is reused (its figures
    then say ``"reused": True``)."""
    import torch

    from trainers.algorithms.sft import build_sft_trainer

    done = out / DONE
    if done.is_file():
        figures = json.loads(done.read_text())
        if figures.get("start_model") == model_path and figures.get("max_steps") == steps:
            logger.info("reusing the finished warm-up in %s", out)
            return str(out), {**figures, "reused": True}
    began = time.perf_counter()
    if job.warmup.warmup_data == "embedded":
        rows = embedded_demonstrations(job, model_path, steps * BATCH, config.seed)
    else:
        rows = file_demonstrations(job.warmup.warmup_data)
    made = time.perf_counter() - began
    trainer = build_sft_trainer(model_path, rows, warmup_config(job, config, out, steps))
    install(trainer, Console())  # a bar over the warm-up's steps; its logs stay in log_history
    scale = folded_scale(model_path)
    norm = trainer.model.get_decoder().norm.weight  # before train() builds the optimizer
    with torch.no_grad():
        norm.div_(scale)
    trainer.train()
    with torch.no_grad():
        norm.mul_(scale)
    trainer.save_model(str(out))
    trainer.processing_class.save_pretrained(str(out))
    figures = {
        "start_model": model_path,
        "max_steps": steps,
        "steps": trainer.state.global_step,
        "data": job.warmup.warmup_data,
        "rows": len(rows),
        "rows_per_role": dict(Counter(row["role"] for row in rows)),
        "folded_scale": scale,
        "rows_seconds": round(made, 1),
        "seconds": round(time.perf_counter() - began, 1),
        "loss_curve": [round(h["loss"], 4) for h in trainer.state.log_history if "loss" in h],
    }
    done.write_text(json.dumps(figures, indent=2) + "\n")
    return str(out), figures
