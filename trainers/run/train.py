"""One train function per algorithm, what `trainers.run.cli` runs for ``scripts/train_<env>.py``:
evaluate the start model, train it (`trainers.algorithms`), save it, evaluate the result and write
the run's files (`trainers.run.experiment`). Each takes the script's `Job` and the
algorithm's config and returns the run's figures."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from trainers.algorithms.checkpoint import resume_checkpoint
from trainers.algorithms.dpo import CPUDPOConfig, build_dpo_trainer, preference_pairs
from trainers.algorithms.grpo import build_grpo_trainer
from trainers.algorithms.grpo_config import CPUGRPOConfig
from trainers.algorithms.ppo import VALUE_HEAD, CPUPPOConfig, build_ppo_trainer
from trainers.algorithms.rounds import NoTrainingDataError, Stage, Update, play_rounds
from trainers.algorithms.sft import (
    CPUSFTConfig,
    build_sft_trainer,
    parse_roles,
    sft_rows,
)
from trainers.evaluation.evaluate import evaluate
from trainers.evaluation.report.console import Console, install
from trainers.evaluation.report.tables import markdown_report
from trainers.rollout.records import Episode
from trainers.run.args import Job
from trainers.run.bridge import eval_config
from trainers.run.budget import budget_minutes, callbacks
from trainers.run.experiment import finish_run, is_main, start_run
from trainers.run.validation import validation_check
from trainers.run.warmup import default_steps, warm_start

# rows_per_case: what a row's turn answered (`sft_rows`' ``under_review``)
CASES = {True: "on_right", False: "on_wrong", None: "first"}


def train_online(
    job: Job,
    config: Any,
    algo: str,
    build: Callable[..., Any],
    extra_files: Sequence[str] = (),
) -> dict[str, Any]:
    """Evaluate the start, train with the trainer `build` makes (GRPO's or PPO's builder, which
    play the env while they train), evaluate the result; return the figures. `extra_files` are
    what a complete checkpoint holds besides `Trainer`'s own (PPO's value head)."""
    out, results = start_run(job, config, algo)
    start = warm_up(job, config, results, out)
    warmed = results.get("warmup", {})
    spent = 0.0 if warmed.get("reused") else warmed.get("seconds", 0.0)  # not its evaluation
    trainer = online_trainer(job, config, build, start, out, spent)
    began = time.perf_counter()
    trainer.train(resume_from_checkpoint=resume_checkpoint(config, extra_files=extra_files))
    results["train_seconds"] = time.perf_counter() - began
    results["train_steps"] = trainer.state.global_step
    final = out / "final"
    trainer.save_model(str(final))
    return finish_run(job, config, results, final, trainer.state.log_history)


def online_trainer(
    job: Job, config: Any, build: Callable[..., Any], start: str, out: Path, spent: float = 0.0
) -> Any:
    """The trainer `build` makes for `job` from the model `start`, with the run's callbacks (its
    time budget, less `spent` already) and its console: a bar over the budget and a compact
    line, not transformers' bar and metric dicts (its log in `out`/log.jsonl)."""
    trainer = build(
        start,
        job.env_id,
        job.protocol("train").env_kwargs(),
        config,
        role_weights=job.rollout.weights(),
        train_problems=job.train_problems,
        num_envs=job.num_envs,
        callbacks=callbacks(job, spent),
        **job.builder_kwargs(),
    )
    console = Console(budget_minutes(job, spent), log_path=out / "log.jsonl", env_id=job.env_id)
    install(trainer, console)
    return trainer


def warm_up(job: Job, config: Any, results: dict[str, Any], out: Path) -> str:
    """The model RL starts from: the start model, or its warm-up SFT (`trainers.run.warmup`),
    evaluated on the held-out problems (``results["warmup"]``)."""
    start = results["start_model"]
    steps = job.warmup.warmup_sft_steps
    if steps is None:
        steps = default_steps(job, start)
    if not steps:
        return start
    if config.world_size > 1:
        raise ValueError(
            f"--warmup_sft_steps {steps} runs in one process; warm up without accelerate "
            "(a run with --max_steps 1 leaves the warmed model in OUTPUT_DIR/warmup), then "
            "launch from it with --model_name_or_path OUTPUT_DIR/warmup --warmup_sft_steps 0"
        )
    path, figures = warm_start(job, config, start, out / "warmup", steps)
    if job.eval.eval_problems and is_main(config):
        figures["eval"] = evaluate(eval_config(job, path, config))
        print("after the warm-up SFT, before RL:")
        print(markdown_report(figures["eval"]))
    results["warmup"] = figures
    results["rl_start_model"] = path
    return path


def train_grpo(job: Job, config: CPUGRPOConfig) -> dict[str, Any]:
    """Evaluate the start, train with multi-agent GRPO, evaluate the result; return the figures."""
    return train_online(job, config, "grpo", build_grpo_trainer)


def train_ppo(job: Job, config: CPUPPOConfig) -> dict[str, Any]:
    """Evaluate the start, train with multi-agent PPO, evaluate the result; return the figures."""
    return train_online(job, config, "ppo", build_ppo_trainer, extra_files=(VALUE_HEAD,))


def run_sft_stage(
    model_path: str,
    episodes: Sequence[Episode],
    config: CPUSFTConfig,
    roles: Any,
    out: Path,
    trainable: str | None = None,
) -> tuple[Path, dict[str, Any]]:
    """SFT `model_path` on the good turns of `episodes` (only the parameters matching the regex
    `trainable`, when given); save to `out`; return (path, figures)."""
    rows = sft_rows(episodes, roles, config.sft_balance, config.seed)
    if not rows:
        raise NoTrainingDataError(
            f"the {len(episodes)} rollout episodes hold no good turn of roles "
            f"{parse_roles(roles) or 'any'}; roll out more problems (--rollout_problems), more "
            "samples (--rollout_samples) or use a stronger start model"
        )
    trainer = build_sft_trainer(model_path, rows, config, trainable)
    install(trainer, Console())  # a bar over the round's steps; its logs stay in log_history
    began = time.perf_counter()
    trainer.train(resume_from_checkpoint=resume_checkpoint(config))
    trainer.save_model(str(out))
    trainer.processing_class.save_pretrained(str(out))
    figures = {
        "rows": len(rows),
        "rows_per_role": dict(Counter(r["role"] for r in rows)),
        "rows_per_case": dict(Counter(f"{r['role']}/{CASES[r['under_review']]}" for r in rows)),
        "train_seconds": round(time.perf_counter() - began, 1),
        "steps": trainer.state.global_step,
        "log_history": trainer.state.log_history,
    }
    return out, figures


def sft_update(config: CPUSFTConfig, trainable: str | None) -> Update:
    """A round of SFT on the good turns of its rollouts (of ``config.sft_roles``)."""

    def update(model: str, episodes: Sequence[Episode], round_config: Any, out: Path):
        return run_sft_stage(
            model, episodes, round_config, config.sft_roles, out / "model", trainable
        )

    return update


def train_rounds(job: Job, config: Any, algo: str, stages: Sequence[Stage]) -> dict[str, Any]:
    """Evaluate the start, run each stage's rounds of rollout -> update in turn, each scored on
    the validation problems (`trainers.run.validation`), keep the best model
    (`trainers.algorithms.rounds.play_rounds`) and evaluate it; return the figures."""
    out, results = start_run(job, config, algo)
    began = time.perf_counter()  # the time budget counts the validation checks
    validation, why_not = validation_check(job, config, results["start_model"])
    figures, final, history = play_rounds(
        job, config, stages, out, results["start_model"], validation, why_not, began
    )
    results.update(figures)
    return finish_run(job, config, results, final, history)


def train_sft(job: Job, config: CPUSFTConfig) -> dict[str, Any]:
    """Evaluate the start; rounds of rollout -> SFT on the good turns (expert iteration,
    `trainers.algorithms.rounds`); evaluate the result."""
    update = sft_update(config, job.model.trainable_params or None)
    return train_rounds(job, config, "sft", [Stage("sft", update, config.iterations)])


def sft_stage_config(config: CPUDPOConfig, out: Path) -> CPUSFTConfig:
    """The config of an SFT round of a DPO run with ``--sft_first`` (`config`: the round's)."""
    return CPUSFTConfig(
        output_dir=str(out),
        max_steps=config.sft_steps,
        learning_rate=config.sft_learning_rate,
        use_cpu=config.use_cpu,
        bf16=config.bf16,
        seed=config.seed,
        sft_balance=config.sft_balance,
        report_to=config.report_to,
        disable_tqdm=config.disable_tqdm,
    )


def dpo_update(config: CPUDPOConfig, trainable: str | None) -> Update:
    """A round of DPO on the preference pairs of its rollouts; the reference is the round's
    start model."""

    def update(model: str, episodes: Sequence[Episode], round_config: Any, out: Path):
        rows = preference_pairs(
            episodes, config.max_pairs_per_group, config.dpo_roles or None, config.critic_outcome
        )
        if not rows:
            raise NoTrainingDataError(
                f"the {len(episodes)} rollout episodes gave no preference pair (roles "
                f"{config.dpo_roles or 'all'}): a pair needs a right and a wrong reply to one "
                "prompt. Roll out more problems (--rollout_problems) or samples "
                "(--rollout_samples), raise --rollout_temperature, or pass --critic_outcome false"
            )
        trainer = build_dpo_trainer(model, rows, round_config, trainable)
        install(trainer, Console())  # a bar over the round's steps; its logs stay in log_history
        began = time.perf_counter()
        trainer.train()
        trainer.save_model(str(out / "model"))
        trainer.processing_class.save_pretrained(str(out / "model"))
        return out / "model", {
            "steps": trainer.state.global_step,
            "pairs": len(rows),
            "pairs_per_kind": dict(Counter(r["kind"] for r in rows)),
            "train_seconds": round(time.perf_counter() - began, 1),
            "log_history": trainer.state.log_history,
        }

    return update


def train_dpo(job: Job, config: CPUDPOConfig) -> dict[str, Any]:
    """Evaluate the start; with ``--sft_first``, rounds of rollout -> SFT on the good turns for
    ``sft_budget`` of the time budget; then rounds of rollout -> DPO on the pairs (``iterations``
    of them, 1 by default); evaluate the result (`trainers.algorithms.rounds`)."""
    trainable = job.model.trainable_params or None
    stages = [Stage("dpo", dpo_update(config, trainable), config.iterations)]
    if config.sft_first:

        def sft_round(model: str, episodes: Sequence[Episode], round_config: Any, out: Path):
            stage = sft_stage_config(round_config, out / "run")
            return sft_update(stage, trainable)(model, episodes, stage, out)

        sft = Stage("sft", sft_round, config.sft_iterations, config.sft_budget)
        stages.insert(0, sft)
    return train_rounds(job, config, "dpo", stages)
