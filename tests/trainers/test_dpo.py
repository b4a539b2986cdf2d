"""SFT rows and DPO preference pairs from reflection and tool episodes, both TRL stages on a tiny
model, and the envs SFT and DPO apply to."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from trl import DPOTrainer

import envs
from envs.options import ScheduledOptions
from trainers.algorithms.dpo import CPUDPOConfig, build_dpo_trainer, preference_pairs, refiner_pairs
from trainers.algorithms.sft import CPUSFTConfig, build_sft_trainer, sft_rows
from trainers.rollout.records import Episode, Turn


def turn(agent, text, prompt, index, **info):
    return Turn(
        agent=agent,
        observation={"instruction": f"You are the {agent}.", "prompt": prompt},
        text=text,
        prompt_ids=[1, 2],
        completion_ids=[3],
        logprobs=[-0.1],
        reward=0.0,
        info=info,
        index=index,
        round=0,
    )


def episode(pid, sample, solver_ok, verdict, refiner_ok, solver_text=None, review="R"):
    """solver -> critic -> refiner; texts say what they are so pairs can be checked."""
    s_text = solver_text or f"{pid} solver {'right' if solver_ok else 'wrong'} {sample}"
    turns = [
        turn("solver_0", s_text, f"Q {pid}", 0, correct=solver_ok),
        turn(
            "critic_0",
            f"{pid} critic says {verdict} {sample}",
            f"Q {pid} answer {review}",
            1,
            verdict=verdict,
            reviewed_correct=solver_ok,
        ),
        turn(
            "refiner_0",
            f"{pid} refiner {'right' if refiner_ok else 'wrong'} {sample}",
            f"Q {pid} fix {sample}",
            2,
            correct=refiner_ok,
        ),
    ]
    return Episode("math/reflection-v0", pid, 0, sample, turns)


def contents(row):
    return row["prompt"][-1]["content"], row["chosen"][0]["content"], row["rejected"][0]["content"]


def test_sft_rows_keep_good_turns_of_the_trained_roles():
    episodes = [
        episode("p", 0, solver_ok=True, verdict=True, refiner_ok=True),
        episode("p", 1, solver_ok=False, verdict=True, refiner_ok=False),  # critic wrong
    ]
    rows = sft_rows(episodes)
    texts = [r["messages"][-1]["content"] for r in rows]
    assert texts == ["p solver right 0", "p critic says True 0", "p refiner right 0"]
    assert rows[0]["messages"][:2] == [
        {"role": "system", "content": "You are the solver_0."},
        {"role": "user", "content": "Q p"},
    ]
    assert [r["role"] for r in sft_rows(episodes, "critic")] == ["critic"]
    assert {r["role"] for r in sft_rows(episodes, ["solver", "refiner"])} == {"solver", "refiner"}
    assert len(sft_rows(episodes + episodes)) == 3  # deduplicated


def test_sft_rows_say_what_they_answered_and_balance_evens_it_per_role():
    """``under_review``: the truth of the answer a critic reviewed or a refiner revised. With
    `balance`, per role, the larger case is cut to the smaller's size."""
    episodes = [  # 3 right solver answers the critic accepts and refiner keeps, 1 wrong fixed
        *(episode(f"r{i}", 0, solver_ok=True, verdict=True, refiner_ok=True) for i in range(3)),
        episode("w", 0, solver_ok=False, verdict=False, refiner_ok=True),
    ]
    rows = sft_rows(episodes)
    cases = [(r["role"], r["under_review"]) for r in rows]
    assert cases.count(("critic", True)) == cases.count(("refiner", True)) == 3
    assert ("critic", False) in cases and ("refiner", False) in cases
    assert cases.count(("solver", None)) == 3  # first answers: no answer under review
    balanced = sft_rows(episodes, balance=True, seed=1)
    kept = [(r["role"], r["under_review"]) for r in balanced]
    for role in ("critic", "refiner"):
        assert kept.count((role, True)) == kept.count((role, False)) == 1
    assert kept.count(("solver", None)) == 3
    assert [r for r in rows if r in balanced] == balanced  # a subset, in the same order
    assert sft_rows(episodes, balance=True, seed=1) == balanced  # the draw is seeded
    only_right = sft_rows(episodes[:3], balance=True)  # one case only: every row stays
    assert only_right == sft_rows(episodes[:3])


def test_turns_that_failed_the_arithmetic_audit_are_never_good():
    """A right answer or verdict reached through a false equation (reflection's ``audit``) is
    neither an SFT row nor a chosen reply; as a rejected one it loses to a clean right reply."""
    clean = episode("p", 0, solver_ok=True, verdict=True, refiner_ok=True, solver_text="A")
    sloppy = episode("p", 1, solver_ok=True, verdict=True, refiner_ok=True, solver_text="B")
    for t in sloppy.turns:
        t.info["audit_failed"] = True
    texts = [r["messages"][-1]["content"] for r in sft_rows([clean, sloppy])]
    assert texts == ["A", "p critic says True 0", "p refiner right 0"]
    rows = preference_pairs([clean, sloppy])
    assert ("Q p", "A", "B") in [contents(r) for r in rows if r["kind"] == "solver"]
    assert {r["chosen"][0]["content"] for r in rows} <= {t.text for t in clean.turns}


def test_refiner_pairs_choose_the_correct_answer_on_the_refiners_prompt():
    fixed = episode("p", 0, solver_ok=False, verdict=False, refiner_ok=True)
    ((row,),) = [refiner_pairs(fixed)]
    assert contents(row) == ("Q p fix 0", "p refiner right 0", "p solver wrong 0")
    assert row["role"] == "refiner" and row["kind"] == "refiner"
    broken = episode("p", 1, solver_ok=True, verdict=False, refiner_ok=False)
    assert contents(refiner_pairs(broken)[0]) == (
        "Q p fix 1",
        "p solver right 1",
        "p refiner wrong 1",
    )
    same = episode("p", 2, solver_ok=True, verdict=True, refiner_ok=True)
    assert refiner_pairs(same) == []  # equal correctness: no preference


def test_solver_and_critic_pairs_need_the_same_prompt():
    episodes = [
        episode("p", 0, solver_ok=True, verdict=True, refiner_ok=True, solver_text="A", review="A"),
        episode(
            "p", 1, solver_ok=True, verdict=False, refiner_ok=False, solver_text="A", review="A"
        ),
        episode("p", 2, solver_ok=False, verdict=False, refiner_ok=False),
        episode("q", 0, solver_ok=False, verdict=True, refiner_ok=False),  # lone wrong critic
    ]
    rows = preference_pairs(episodes)
    by_kind = {}
    for row in rows:
        by_kind.setdefault(row["kind"], []).append(contents(row))
    assert by_kind["solver"] == [("Q p", "A", "p solver wrong 2")]
    # Same prompt (same reviewed answer "A"): the right verdict that led to a right refinement
    # is chosen over the wrong verdict that led to a wrong one.
    assert by_kind["critic"] == [("Q p answer A", "p critic says True 0", "p critic says False 1")]
    assert ("Q p fix 1", "A", "p refiner wrong 1") in by_kind["refiner"]
    assert all(r["problem_id"] in ("p", "q") for r in rows)
    assert [r["kind"] for r in preference_pairs(episodes, roles="critic")] == ["critic"]


def test_pairs_are_deduplicated_and_bounded_per_group():
    wrong = [episode("p", s, solver_ok=False, verdict=False, refiner_ok=False) for s in range(4)]
    right = [episode("p", 9, solver_ok=True, verdict=True, refiner_ok=True, solver_text="A")]
    rows = preference_pairs(wrong + right, max_pairs_per_group=2)
    assert sum(r["kind"] == "solver" for r in rows) == 2
    assert len(preference_pairs(wrong + right + right, max_pairs_per_group=2)) == len(rows)
    with pytest.raises(ValueError, match="max_pairs_per_group"):
        preference_pairs(wrong, max_pairs_per_group=0)


def test_sft_masks_the_prompt_and_a_step_changes_the_weights(tiny_model, tmp_path):
    rows = sft_rows([episode("p", 0, solver_ok=True, verdict=True, refiner_ok=True)])
    args = CPUSFTConfig(
        output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=3, learning_rate=1e-2
    )
    trainer = build_sft_trainer(tiny_model, rows, args)
    example = trainer.train_dataset[0]
    ids, labels = example["input_ids"], example["labels"]  # -100: no loss
    trained = [t for t in labels if t != -100]
    reply = trainer.processing_class.decode(trained, skip_special_tokens=True)
    assert reply == "p solver right 0" and 0 < len(trained) < len(ids) / 2
    before = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    result = trainer.train()
    assert torch.isfinite(torch.tensor(result.training_loss))
    assert any(not torch.equal(before[k], v) for k, v in trainer.model.named_parameters())


def test_sft_without_generation_markers_trains_the_replies_as_completions(tiny_model, tmp_path):
    """A chat template that marks no reply, of no model TRL knows (most instruct models' own:
    SmolLM2's, `tests/real_model`): SFT goes prompt-completion instead of failing, the caller's
    config untouched, and its loss covers the reply and its end of turn only."""
    import shutil

    from transformers import AutoTokenizer

    from trainers.algorithms.sft import marks_replies

    folder = tmp_path / "unmarked"
    shutil.copytree(tiny_model, folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    for marker in ("{% generation %}", "{% endgeneration %}"):
        tokenizer.chat_template = tokenizer.chat_template.replace(marker, "")
    tokenizer.save_pretrained(folder)
    assert marks_replies(tiny_model) and not marks_replies(str(folder))
    rows = sft_rows([episode("p", 0, solver_ok=True, verdict=True, refiner_ok=True)])
    args = CPUSFTConfig(output_dir=str(tmp_path / "out"), max_steps=1, learning_rate=1e-2)
    trainer = build_sft_trainer(str(folder), rows, args)
    assert args.assistant_only_loss and not trainer.args.assistant_only_loss
    example = trainer.train_dataset[0]
    trained = [t for t in example["labels"] if t != -100]
    assert example["input_ids"][-len(trained) :] == trained  # the reply ends the row
    assert tokenizer.decode(trained).strip() == "p solver right 0<|im_end|>"
    assert torch.isfinite(torch.tensor(trainer.train().training_loss))


def test_a_dpo_step_changes_the_weights_with_a_finite_loss(tiny_model, tmp_path):
    episodes = [
        episode("p", 0, solver_ok=False, verdict=False, refiner_ok=True),
        episode("p", 1, solver_ok=True, verdict=True, refiner_ok=True),
    ]
    rows = preference_pairs(episodes)
    args = CPUDPOConfig(
        output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=2, learning_rate=1e-2
    )
    trainer = build_dpo_trainer(tiny_model, rows, args)
    before = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    trainer.train()
    losses = [row["loss"] for row in trainer.state.log_history if "loss" in row]
    assert losses and all(torch.isfinite(torch.tensor(loss)) for loss in losses)
    assert any(not torch.equal(before[k], v) for k, v in trainer.model.named_parameters())
    with pytest.raises(ValueError, match="no preference pairs"):
        build_dpo_trainer(tiny_model, [], args)


def dpo_script(run_script, tiny_model, out, *extra):
    """``train_reflection.py dpo`` on the tiny model: rollouts, optional SFT, one DPO step."""
    return run_script(
        "train_reflection.py",
        "dpo",
        *("--model_name_or_path", tiny_model, "--max_steps", "1"),
        *("--eval_problems", "1", "--eval_samples", "1", "--rollout_problems", "8"),
        *("--rollout_samples", "4", "--max_completion_length", "8", "--rounds", "1"),
        *("--iterations", "1"),
        # level-1 arithmetic: the tiny model's replies sometimes land on its small answers,
        # so the rollouts hold good turns to train on
        *("--task", "arithmetic", "--difficulty", "1", "--output_dir", str(out), *extra),
    )


def played(monkeypatch):
    """Rounds play these episodes instead of the tiny model's (which are seldom right, so its
    own play would leave a round nothing to train on): per problem a wrong solver answer that
    the critic rejects and the refiner fixes, and a right one accepted and kept."""
    from trainers.algorithms import rounds

    episodes = [
        episode(f"p{i}", sample, solver_ok=bool(sample), verdict=bool(sample), refiner_ok=True)
        for i in range(4)
        for sample in (0, 1)
    ]
    monkeypatch.setattr(rounds, "rollout_episodes", lambda *args, **kwargs: episodes)


def pipeline_args(tiny_model, out, **extra):
    from trainers.run.args import Job

    env = Job.of(
        env_id="math/reflection-v0",
        model_name_or_path=tiny_model,
        eval_problems=1,
        eval_samples=1,
        rounds=1,
        task="arithmetic",
        difficulty=[1],
    )
    # Round selection has its own tests (test_rounds.py): off here, so final/ is the last round.
    extra = {"select_on_validation": False, **extra}
    config = CPUDPOConfig(
        output_dir=str(out), max_steps=1, sft_steps=1, sft_iterations=1, sft_first=True, **extra
    )
    return env, config


def test_dpo_runs_the_sft_then_dpo_pipeline(tiny_model, tmp_path, monkeypatch):
    from trainers.run.train import train_dpo

    played(monkeypatch)
    out = tmp_path / "run"
    metrics = train_dpo(*pipeline_args(tiny_model, out))
    sft, dpo = metrics["rounds"]  # one SFT round (sft_iterations 1), then one DPO round
    assert (sft["stage"], dpo["stage"]) == ("sft", "dpo")
    assert dpo["pairs_per_kind"] == {"solver": 4, "refiner": 4}  # every critic was right
    assert sft["rows_per_case"] == {
        "solver/first": 4,
        "critic/on_right": 4,
        "critic/on_wrong": 4,
        "refiner/on_right": 4,
        "refiner/on_wrong": 4,
    }
    assert dpo["steps"] == sft["steps"] == 1 and metrics["train_steps"] == 2
    assert {"before", "after", "summary"} <= set(metrics)
    assert json.loads((out / "metrics.json").read_text())["rounds"][1]["pairs"] == 8
    assert (out / "final" / "config.json").is_file()
    assert [p.name for p in (out / "rounds").iterdir()] == ["round-2"]
    stages = [row.get("stage") for row in metrics["log_history"]]
    assert stages.index("sft") < stages.index("dpo")  # the SFT stage's rows come first


def test_sft_and_dpo_train_only_the_parameters_matching_trainable(tiny_model, tmp_path):
    episodes = [
        episode("p", 0, solver_ok=False, verdict=False, refiner_ok=True),
        episode("p", 1, solver_ok=True, verdict=True, refiner_ok=True),
    ]
    sft_args = CPUSFTConfig(output_dir=str(tmp_path / "sft"), max_steps=1, learning_rate=1e-1)
    dpo_args = CPUDPOConfig(
        output_dir=str(tmp_path / "dpo"), max_steps=1, per_device_train_batch_size=2
    )
    dpo_args.learning_rate = 1e-1
    for trainer in (
        build_sft_trainer(tiny_model, sft_rows(episodes), sft_args, trainable=r"^model\.norm\."),
        build_dpo_trainer(tiny_model, preference_pairs(episodes), dpo_args, trainable="norm"),
    ):
        before = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
        trainer.train()
        changed = {k for k, v in trainer.model.named_parameters() if not torch.equal(before[k], v)}
        if isinstance(trainer, DPOTrainer):
            assert changed and all("norm" in k for k in changed)
            assert any("layernorm" in k for k in changed)
        else:
            assert changed == {"model.norm.weight"}
    with pytest.raises(ValueError, match="matches no parameter"):
        build_dpo_trainer(tiny_model, preference_pairs(episodes), dpo_args, trainable="nothing")


def test_dpo_trains_only_the_final_norm_when_asked(tiny_model, tmp_path, monkeypatch):
    """trainable_params reaches both stages of the pipeline: the final model differs from the
    start model in the matching weights only."""
    from safetensors.torch import load_file

    from trainers.run.train import train_dpo

    played(monkeypatch)
    out = tmp_path / "run"
    env, config = pipeline_args(tiny_model, out, learning_rate=0.1, sft_learning_rate=0.1)
    env.model.trainable_params, env.eval.eval_problems = r"^model\.norm\.", 0
    metrics = train_dpo(env, config)
    assert [r["steps"] for r in metrics["rounds"]] == [1, 1]
    start = load_file(Path(tiny_model) / "model.safetensors")
    weights = load_file(out / "final" / "model.safetensors")
    changed = {k for k in start if not torch.equal(start[k], weights[k])}
    assert changed == {"model.norm.weight"}, changed


def test_dpo_script_says_what_to_change_when_no_pair_is_found(run_script, tiny_model, tmp_path):
    result = dpo_script(
        run_script,
        tiny_model,
        tmp_path / "run",
        *("--rollout_samples", "1", "--dpo_roles", "solver", "--sft_first", "false"),
    )
    assert result.returncode != 0
    assert "gave no preference pair" in result.stderr and "--rollout_samples" in result.stderr


def tool_episode(pid, sample, first_ok, verdict, second_ok, first_text=None):
    """math/tool-v0's turns: analyzer (a plan, never scored), executor, verifier, executor."""
    first = first_text or f"{pid} program {'right' if first_ok else 'wrong'} {sample}"
    turns = [
        turn("analyzer_0", f"{pid} plan {sample}", f"Q {pid}", 0, correct=False),
        turn("executor_0", first, f"Q {pid} plan", 1, correct=first_ok),
        turn(
            "verifier_0",
            f"{pid} verifier says {verdict} {sample}",
            f"Q {pid} run {first}",
            2,
            verdict=verdict,
            reviewed_correct=first_ok,
            correct=verdict == first_ok,
        ),
        turn(
            "executor_0",
            f"{pid} program {'right' if second_ok else 'wrong'} again {sample}",
            f"Q {pid} fix {sample}",
            3,
            correct=second_ok,
        ),
    ]
    return Episode("math/tool-v0", pid, 0, sample, turns)


def test_pairs_and_rows_read_the_tool_envs_roles_from_its_facts():
    """On math/tool-v0 (answer role executor, review role verifier) the first program, the
    revised one and the verifier's reviews give pairs, as reflection's solver, refiner and critic
    do; the analyzer's plans give neither pairs nor rows."""
    episodes = [
        tool_episode("p", 0, first_ok=False, verdict=False, second_ok=True, first_text="A"),
        tool_episode("p", 1, first_ok=True, verdict=True, second_ok=True, first_text="B"),
        tool_episode("p", 2, first_ok=False, verdict=True, second_ok=False, first_text="A"),
    ]
    rows = preference_pairs(episodes)
    assert {(r["role"], r["kind"]) for r in rows} == {
        ("executor", "executor"),
        ("verifier", "verifier"),
    }
    found = [contents(r) for r in rows]
    assert ("Q p plan", "B", "A") in found  # a right first program over a wrong one
    assert ("Q p fix 0", "p program right again 0", "A") in found  # the fix over the program
    # the same program under review: the right verdict that led to a fix over the wrong one
    assert ("Q p run A", "p verifier says False 0", "p verifier says True 2") in found
    assert [r["kind"] for r in preference_pairs(episodes, roles="verifier")] == ["verifier"]
    sft = sft_rows(episodes)
    assert {r["role"] for r in sft} == {"executor", "verifier"}
    cases = {(r["role"], r["under_review"]) for r in sft}
    assert ("verifier", False) in cases and ("executor", False) in cases


@dataclass(frozen=True)
class JudgedOptions(ScheduledOptions):
    """A test team: a writer answers, a judge reviews, the writer revises."""

    ROLES = ("writer", "judge")
    FIRST = "writer"
    CYCLE = ("judge", "writer")
    ANSWER_ROLES = ("writer",)
    REVIEW_ROLES = ("judge",)


@dataclass(frozen=True)
class UnjudgedOptions(JudgedOptions):
    """The same team with nobody reviewing."""

    REVIEW_ROLES = ()


def test_sft_and_dpo_apply_to_every_env_whose_facts_hold_answers_and_reviews():
    from trainers.run.cli import available

    assert available("math/reflection-v0") == ["grpo", "ppo", "sft", "dpo"]
    assert available("math/tool-v0") == ["grpo", "ppo", "sft", "dpo"]
    for env_id in ("math/debate-v0", "math/solve-v0", "math/code-v0", "math/ensemble-v0"):
        assert available(env_id) == ["grpo", "ppo"], env_id
    registered = {
        "test/judged-v0": JudgedOptions,
        "test/unjudged-v0": UnjudgedOptions,
        "test/stated-v0": None,  # no options class: no facts stated
    }
    for env_id, options in registered.items():
        envs.register(env_id, lambda **_: None, options=options)
    try:
        assert available("test/judged-v0") == ["grpo", "ppo", "sft", "dpo"]
        assert available("test/unjudged-v0") == ["grpo", "ppo"]
        assert available("test/stated-v0") == ["grpo", "ppo"]
    finally:
        for env_id in registered:
            envs.deregister(env_id)
