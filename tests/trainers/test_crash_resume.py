"""A training run killed mid-checkpoint resumes from its last complete checkpoint, identically.

The slow test SIGKILLs a real ``scripts/train_reflection.py`` process while it writes a checkpoint;
the fast ones fake the same wreckage (a half-written newest checkpoint) in-process. Both then resume
with ``--resume_from_checkpoint true`` and compare every later checkpoint (weights, optimizer,
scheduler, RNG states, PPO's value head, log history) with an uninterrupted run of the same seed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from rewards.base import Verdict
from trainers.algorithms import checkpoint as ckpt

REPO = Path(__file__).resolve().parents[2]
VOLATILE = {"step_time", "train_runtime", "train_samples_per_second", "train_steps_per_second"}


class DigitVerifier:
    """A graded score (digits in the reply, up to 6) so the tiny model's samples differ in reward.

    The arithmetic verifier scores the tiny model 0 everywhere: no advantage, no gradient, and a
    resumed run would match the uninterrupted one trivially.
    """

    name = "digits"

    def verify(self, response: str, reference: str) -> Verdict:
        return Verdict(min(1.0, sum(c.isdigit() for c in response) / 6), None, "digit count")


def script_args(model: str, out: Path, algo: str = "grpo", steps: int = 4, evals: int = 1):
    """A run of `steps` steps checkpointing each but the last (``final/`` is saved then)."""
    return [
        algo,
        *("--model_name_or_path", model, "--output_dir", str(out)),
        *("--max_steps", str(steps), "--save_steps", "1", "--save_total_limit", "10"),
        *("--seed", "3"),
        *("--eval_problems", str(evals), "--eval_samples", "1", "--train_problems", "4"),
        *("--rounds", "1", "--num_generations", "2", "--per_device_train_batch_size", "6"),
        *("--gradient_accumulation_steps", "1", "--max_completion_length", "8"),
        *("--num_envs", "4", "--learning_rate", "0.01", "--disable_tqdm", "true"),
        *("--verifier", f"{__name__}:DigitVerifier"),
    ]


def digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def assert_close(a, b, where: str) -> None:
    """Nested state (dicts, lists, tensors, arrays, numbers) equal up to float rounding."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            assert_close(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_close(x, y, f"{where}[{i}]")
    elif isinstance(a, torch.Tensor):
        assert torch.allclose(a.double(), b.double(), rtol=1e-5, atol=1e-7), where
    elif isinstance(a, float):
        assert a == pytest.approx(b, rel=1e-5, abs=1e-7), where
    elif hasattr(a, "shape"):  # numpy RNG key arrays: exact
        assert (a == b).all(), where
    else:
        assert a == b, where


def assert_same_checkpoint(ref: Path, got: Path, extra: tuple[str, ...] = ()) -> None:
    """Weights, optimizer, scheduler, RNG states, extra torch files and log history all match."""
    assert not ckpt.checkpoint_problems(got, extra_files=extra), got
    assert_close(load_file(ref / "model.safetensors"), load_file(got / "model.safetensors"), "w")
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth", *extra):
        # our own files (rng_state holds numpy and python RNG tuples, not only tensors)
        assert_close(
            torch.load(ref / name, weights_only=False),
            torch.load(got / name, weights_only=False),
            name,
        )
    assert log_rows(ref / "trainer_state.json") == log_rows(got / "trainer_state.json")


def log_rows(trainer_state: Path) -> list[dict]:
    rows = json.loads(trainer_state.read_text())["log_history"]
    return [{k: v for k, v in row.items() if k not in VOLATILE} for row in rows]


def run_in_process(argv: list[str]) -> dict:
    from trainers.run.cli import run_script

    return run_script("math/reflection-v0", argv)


# ---------------------------------------------------------------- checkpoint checks, no training
def fake_checkpoint(folder: Path, step: int, world_size: int = 1) -> Path:
    folder.mkdir(parents=True)
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    save_file({"w": torch.ones(3)}, folder / "model.safetensors")
    names = ["optimizer.pt", "scheduler.pt", "value_head.pt"]
    names += (
        [f"rng_state_{i}.pth" for i in range(world_size)] if world_size > 1 else ["rng_state.pth"]
    )
    for name in names:
        torch.save({"x": torch.arange(step + 1)}, folder / name)
    return folder


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda f: (f / "trainer_state.json").unlink(), "trainer_state.json is missing"),
        (
            lambda f: (f / "trainer_state.json").write_text('{"global_st'),
            "trainer_state.json is unreadable",
        ),
        (lambda f: (f / "trainer_state.json").write_text('{"global_step": 1}'), "at step 1"),
        (lambda f: (f / "model.safetensors").unlink(), "no model weights"),
        (lambda f: truncate(f / "model.safetensors"), "model.safetensors is damaged"),
        (lambda f: truncate(f / "optimizer.pt"), "optimizer.pt is damaged"),
        (lambda f: (f / "scheduler.pt").unlink(), "scheduler.pt is missing"),
        (lambda f: (f / "rng_state.pth").write_bytes(b"\0" * 64), "rng_state.pth is damaged"),
        (lambda f: truncate(f / "value_head.pt"), "value_head.pt is damaged"),
    ],
)
def test_a_damaged_checkpoint_is_reported_with_what_is_wrong(tmp_path, damage, problem):
    folder = fake_checkpoint(tmp_path / "checkpoint-2", 2)
    assert ckpt.checkpoint_problems(folder, extra_files=("value_head.pt",)) == []
    damage(folder)
    problems = ckpt.checkpoint_problems(folder, extra_files=("value_head.pt",))
    assert len(problems) == 1 and problem in problems[0], problems


def test_every_process_needs_its_rng_state(tmp_path):
    folder = fake_checkpoint(tmp_path / "checkpoint-1", 1, world_size=2)
    assert ckpt.checkpoint_problems(folder, world_size=2) == []
    (folder / "rng_state_1.pth").unlink()
    assert ckpt.checkpoint_problems(folder, world_size=2) == ["rng_state_1.pth is missing"]


class Config:
    def __init__(self, output_dir: Path, resume: str | None) -> None:
        self.output_dir, self.resume_from_checkpoint = str(output_dir), resume
        self.world_size, self.process_index = 1, 0


def test_resume_true_takes_the_newest_complete_checkpoint_and_sets_broken_ones_aside(
    tmp_path, caplog
):
    for step in (1, 2, 3):
        fake_checkpoint(tmp_path / f"checkpoint-{step}", step)
    (tmp_path / "checkpoint-3" / "optimizer.pt").unlink()  # killed during its save
    (tmp_path / "checkpoint-10").mkdir()  # killed right after mkdir (10 sorts after 3 by number)
    before = digest(tmp_path / "checkpoint-2")
    with caplog.at_level(logging.WARNING, logger="trainers.algorithms.checkpoint"):
        chosen = ckpt.resume_checkpoint(Config(tmp_path, "true"))
    assert chosen == str(tmp_path / "checkpoint-2")
    assert digest(tmp_path / "checkpoint-2") == before
    skipped = [r.getMessage() for r in caplog.records if "skipping incomplete" in r.getMessage()]
    assert len(skipped) == 2 and "checkpoint-10" in skipped[0] and "optimizer.pt" in skipped[1]
    assert (tmp_path / "incomplete-checkpoint-3" / "model.safetensors").is_file()
    assert [p.name for p in ckpt.checkpoints(tmp_path)] == ["checkpoint-2", "checkpoint-1"]


def test_resume_values(tmp_path, caplog):
    assert ckpt.resume_checkpoint(Config(tmp_path, None)) is None
    assert ckpt.resume_checkpoint(Config(tmp_path, "false")) is None
    with caplog.at_level(logging.WARNING, logger="trainers.algorithms.checkpoint"):
        assert ckpt.resume_checkpoint(Config(tmp_path / "new", "latest")) is None  # first launch
    assert "training from the start" in caplog.text
    broken = fake_checkpoint(tmp_path / "checkpoint-4", 4)
    (broken / "rng_state.pth").unlink()
    with pytest.raises(
        ValueError, match=r"rng_state.pth is missing.*--resume_from_checkpoint true"
    ):
        ckpt.resume_checkpoint(Config(tmp_path, str(broken)))  # an explicit path must be whole
    good = fake_checkpoint(tmp_path / "checkpoint-5", 5)
    assert ckpt.resume_checkpoint(Config(tmp_path, str(good))) == str(good)


def test_atomic_write_keeps_the_old_file_when_the_writer_fails(tmp_path):
    path = tmp_path / "metrics.json"
    ckpt.write_json_atomic(path, {"before": 1})
    with pytest.raises(RuntimeError), ckpt.atomic_path(path) as tmp:
        tmp.write_text('{"half": ')
        raise RuntimeError("killed")
    assert json.loads(path.read_text()) == {"before": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]  # no temp file left


# ---------------------------------------------------------------- in-process resume (fast)
@pytest.mark.parametrize("algo", ["grpo", "ppo"])
def test_resume_after_a_half_written_checkpoint_continues_like_the_uninterrupted_run(
    tiny_model, tmp_path, caplog, algo
):
    """Run 4 steps; fake a crash while checkpoint-3 was written; resume; compare with the run."""
    extra = ("value_head.pt",) if algo == "ppo" else ()
    ref, crashed = tmp_path / "ref", tmp_path / "crashed"
    run_in_process(script_args(tiny_model, ref, algo))
    crashed.mkdir()
    for step in (1, 2):
        shutil.copytree(ref / f"checkpoint-{step}", crashed / f"checkpoint-{step}")
    half = shutil.copytree(ref / "checkpoint-3", crashed / "checkpoint-3")
    (half / "trainer_state.json").unlink()  # the kill came before the last file
    truncate(half / "optimizer.pt")
    metrics = json.loads((ref / "metrics.json").read_text())
    metrics["before"]["metrics"]["accuracy"] = 0.123  # a marker: the before-eval is reused
    (crashed / "metrics.json").write_text(json.dumps({"before": metrics["before"]}))
    kept = {step: digest(crashed / f"checkpoint-{step}") for step in (1, 2)}

    with caplog.at_level(logging.WARNING, logger="trainers.algorithms.checkpoint"):
        resumed = run_in_process(
            [*script_args(tiny_model, crashed, algo), "--resume_from_checkpoint", "true"]
        )

    assert "skipping incomplete checkpoint" in caplog.text and "optimizer.pt" in caplog.text
    assert (crashed / "incomplete-checkpoint-3").is_dir()
    assert_same_checkpoint(ref / "checkpoint-3", crashed / "checkpoint-3", extra)
    assert {step: digest(crashed / f"checkpoint-{step}") for step in (1, 2)} == kept
    assert resumed["before"]["metrics"]["accuracy"] == 0.123
    saved = json.loads((crashed / "metrics.json").read_text())
    assert saved["before"]["metrics"]["accuracy"] == 0.123 and "after" in saved
    final_ref = load_file(ref / "final" / "model.safetensors")
    assert_close(final_ref, load_file(crashed / "final" / "model.safetensors"), "final")
    if algo == "ppo":
        assert_close(
            torch.load(ref / "final" / "value_head.pt"),
            torch.load(crashed / "final" / "value_head.pt"),
            "final value head",
        )


# ---------------------------------------------------------------- a real SIGKILL (slow)
# Runs the script unchanged, with one patch: the save of checkpoint-<PAUSE> stops after the
# weights (and PPO's value head), before optimizer/RNG/trainer_state, and waits to be killed.
WRAPPER = """
import os, runpy, sys, time
import transformers

pause, flag = int(os.environ["CRASH_PAUSE_AT"]), os.environ["CRASH_FLAG"]
save = transformers.Trainer._save_optimizer_and_scheduler

def paused(self, output_dir):
    if self.state.global_step == pause:
        open(flag, "w").write(output_dir)
        time.sleep(600)
    return save(self, output_dir)

transformers.Trainer._save_optimizer_and_scheduler = paused
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def launch(argv: list[str], log: Path, pause: int = 0, flag: Path | None = None):
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        "OMP_NUM_THREADS": "1",  # same float reductions in every process, and CPU to spare
        "CRASH_PAUSE_AT": str(pause),
        "CRASH_FLAG": str(flag or log.with_suffix(".flag")),
    }
    command = [sys.executable, "-c", WRAPPER, "scripts/train_reflection.py", *argv]
    with log.open("w") as handle:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(command, cwd=REPO, env=env, stdout=handle, stderr=subprocess.STDOUT)


def wait_for(proc: subprocess.Popen, flag: Path, log: Path, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not flag.exists():
        if proc.poll() is not None:
            raise AssertionError(f"run ended before the pause: {log.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("the run never reached the paused save")
        time.sleep(0.1)


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["grpo", "ppo"])
def test_sigkill_during_a_checkpoint_save_then_resume_matches_the_uninterrupted_run(
    tiny_model, tmp_path, algo
):
    extra = ("value_head.pt",) if algo == "ppo" else ()
    ref, crashed, flag = tmp_path / "ref", tmp_path / "crashed", tmp_path / "paused"
    steps, pause = 4, 3
    reference = launch(script_args(tiny_model, ref, algo, steps), tmp_path / "ref.log")
    victim = launch(script_args(tiny_model, crashed, algo, steps), tmp_path / "v.log", pause, flag)
    wait_for(victim, flag, tmp_path / "v.log")
    os.kill(victim.pid, signal.SIGKILL)
    assert victim.wait(timeout=30) == -signal.SIGKILL
    assert flag.read_text() == str(crashed / f"checkpoint-{pause}")
    assert ckpt.checkpoint_problems(crashed / f"checkpoint-{pause}", extra_files=extra)
    kept = {p.name: digest(p) for p in ckpt.checkpoints(crashed) if p.name != f"checkpoint-{pause}"}
    assert sorted(kept) == [f"checkpoint-{s}" for s in range(1, pause)]
    before = json.loads((crashed / "metrics.json").read_text())["before"]
    assert reference.wait(timeout=300) == 0, (tmp_path / "ref.log").read_text()[-3000:]

    log = tmp_path / "resumed.log"
    resumed = launch(
        [*script_args(tiny_model, crashed, algo, steps), "--resume_from_checkpoint", "true"], log
    )
    assert resumed.wait(timeout=300) == 0, log.read_text()[-3000:]

    assert f"skipping incomplete checkpoint {crashed / f'checkpoint-{pause}'}" in log.read_text()
    for step in range(pause, steps):  # the last step saves final/, no checkpoint
        assert_same_checkpoint(ref / f"checkpoint-{step}", crashed / f"checkpoint-{step}", extra)
    assert {name: digest(crashed / name) for name in kept} == kept
    metrics = json.loads((crashed / "metrics.json").read_text())
    assert metrics["before"] == before  # kept, not evaluated again
    ref_metrics = json.loads((ref / "metrics.json").read_text())
    strip = [{k: v for k, v in r.items() if k not in VOLATILE} for r in metrics["log_history"]]
    ref_rows = [
        {k: v for k, v in r.items() if k not in VOLATILE} for r in ref_metrics["log_history"]
    ]
    assert_close(ref_rows, strip, "log_history")
    assert_close(ref_metrics["after"]["metrics"], metrics["after"]["metrics"], "after")


def test_a_checkpoint_inside_a_generation_batch_is_flagged(tmp_path, caplog):
    config = Config(tmp_path, "true")
    config.gradient_accumulation_steps, config.num_iterations = 2, 1
    config.steps_per_generation = 2  # one generation per optimizer step: every step is a boundary
    assert not ckpt.warn_mid_generation(config, tmp_path / "checkpoint-3")
    config.num_iterations = 2  # completions reused for two optimizer steps
    assert not ckpt.warn_mid_generation(config, tmp_path / "checkpoint-4")
    with caplog.at_level(logging.WARNING, logger="trainers.algorithms.checkpoint"):
        assert ckpt.warn_mid_generation(config, tmp_path / "checkpoint-3")
    assert "micro-step 6" in caplog.text and "not repeat" in caplog.text
