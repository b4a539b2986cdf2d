"""Rounds of rollout -> SFT / DPO (`trainers.algorithms.rounds`): fresh problems each round, the time
budget, the files a round leaves and resuming after the newest complete round."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainers.algorithms.dpo import CPUDPOConfig
from trainers.algorithms.rounds import Stage, completed_rounds, rollout_figures, round_config
from trainers.algorithms.sft import CPUSFTConfig, rollout_episodes
from trainers.rollout.records import Episode, Turn
from trainers.run.args import Job


def sft_script(run_script, out, *extra):
    """``train_reflection.py sft``, 4 problems x 4 samples a round, 1 step, on the embedded model
    and its task: its rounds hold good turns whatever the sampling stream (7 to 12 in 16
    episodes on every seed tried), where the random tiny model's held one in a hundred episodes
    or none."""
    return run_script(
        "train_reflection.py",
        "sft",
        *("--max_steps", "1", "--eval_problems", "0", "--train_problems", "12"),
        *("--rollout_problems", "4", "--rollout_samples", "4", "--max_completion_length", "48"),
        *("--rounds", "1", "--output_dir", str(out), *extra),
    )


def test_each_round_plays_fresh_problems_wrapping_around_the_training_set(tiny_model, tmp_path):
    env = Job.of(
        env_id="math/reflection-v0", task="arithmetic", difficulty=[1], rounds=1, train_problems=5
    )
    config = CPUSFTConfig(
        output_dir=str(tmp_path), rollout_problems=3, rollout_samples=1, max_completion_length=2
    )
    first = rollout_episodes(env, tiny_model, config, offset=0)
    second = rollout_episodes(env, tiny_model, config, offset=3)
    ids = [e.problem_id for e in first], [e.problem_id for e in second]
    assert len(set(ids[0] + ids[1])) == 5  # the 5 training problems, none of them twice ...
    assert ids[1][2] == ids[0][0]  # ... but the 6th, which wraps to the first


def test_round_config_gives_each_round_its_folder_and_seed_and_never_resumes(tmp_path):
    config = CPUDPOConfig(output_dir=str(tmp_path), seed=7, resume_from_checkpoint="true")
    second = round_config(config, 1, tmp_path / "rounds" / "round-2")
    assert (second.seed, second.resume_from_checkpoint) == (8, None)
    assert second.output_dir == str(tmp_path / "rounds" / "round-2" / "run")
    assert (config.seed, config.output_dir) == (7, str(tmp_path))  # the run's config is kept
    assert second.loss_type == ["sigmoid", "sft"]  # DPO's default: RPO (DPO + NLL of chosen)


def test_rollout_figures_are_each_agents_reward_and_share_of_good_turns():
    def turn(agent, reward, **info):
        return Turn(agent, {}, "x", [1], [2], [-0.1], reward, info, 0, 0)

    episodes = [
        Episode("e", "p", 0, 0, [turn("solver_0", 1.0, correct=True), turn("critic_0", 0.0)]),
        Episode(
            "e",
            "p",
            0,
            1,
            [
                turn("solver_0", 0.0, correct=False),
                turn("critic_0", 1.0, verdict=True, reviewed_correct=True),
            ],
        ),
    ]
    assert rollout_figures(episodes) == {
        "agents/critic_0/reward": 0.5,
        "agents/critic_0/accuracy": 0.5,
        "agents/solver_0/reward": 0.5,
        "agents/solver_0/accuracy": 0.5,
    }


def test_sft_runs_rounds_keeps_the_newest_and_resumes_after_it(run_script, tmp_path):
    out = tmp_path / "run"
    result = sft_script(run_script, out, "--iterations", "2")
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    rounds = metrics["rounds"]
    assert [r["round"] for r in rounds] == [1, 2] and rounds[0]["steps"] == 1
    # round 2 trains too unless the tiny model's play gave it nothing (then it says so)
    assert metrics["train_steps"] == 1 + (0 if "skipped" in rounds[1] else 1)
    assert metrics["rollout_episodes"] == 2 * 4 * 4 and rounds[0]["rows"] >= 1
    # a round's time holds its rollouts' and its trainer's (each rounded to 0.1 s)
    assert rounds[0]["seconds"] >= rounds[0]["rollout_seconds"] + rounds[0]["train_seconds"] - 0.1
    # each round logs its rollouts' figures at the step it started from, then its SFT steps
    starts = [row for row in metrics["log_history"] if "agents/solver_0/accuracy" in row]
    assert [(row["round"], row["step"]) for row in starts] == [(1, 0), (2, 1)]
    assert [p.name for p in (out / "rounds").iterdir()] == ["round-2"]  # one model on disk
    final = (out / "final" / "model.safetensors").read_bytes()
    assert final == (out / "rounds" / "round-2" / "model" / "model.safetensors").read_bytes()

    result = sft_script(run_script, out, "--iterations", "3", "--resume_from_checkpoint", "true")
    assert result.returncode == 0, result.stderr[-3000:]
    resumed = json.loads((out / "metrics.json").read_text())["rounds"]
    assert resumed[:2] == rounds and resumed[2]["round"] == 3  # rounds 1-2 not played again
    assert [p.name for p in (out / "rounds").iterdir()] == ["round-3"]


def test_the_time_budget_leaves_no_room_for_a_second_round(run_script, tmp_path):
    out = tmp_path / "run"
    result = sft_script(run_script, out, "--iterations", "5", "--max_train_minutes", "0.0001")
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(json.loads((out / "metrics.json").read_text())["rounds"]) == 1


def test_iterations_below_one_are_refused(run_script, tmp_path):
    result = sft_script(run_script, tmp_path / "run", "--iterations", "0")
    assert result.returncode != 0 and "sft: iterations=0; it must be >= 1" in result.stderr
    with pytest.raises(ValueError, match="budget share 0; it must be in"):
        Stage("dpo", lambda *args: None, 1, share=0)


def test_stages_share_the_budget_and_each_plays_at_least_one_round(tmp_path, monkeypatch):
    """SFT rounds while they fit in their share of the budget, then the DPO stage's round (its
    first always runs); a resumed run that had reached DPO does not go back to SFT."""
    import shutil

    from trainers.algorithms import rounds
    from trainers.run import train as run_train

    model = tmp_path / "start"
    model.mkdir()
    (model / "config.json").write_text("{}")
    monkeypatch.setattr(rounds, "rollout_episodes", lambda *args, **kwargs: [])
    monkeypatch.setattr(run_train, "finish_run", lambda env, config, results, *rest: results)
    clock = iter(range(0, 10_000, 10))  # every reading 10 s after the last
    monkeypatch.setattr(rounds.time, "perf_counter", lambda: next(clock))

    def update(model, episodes, config, out):
        shutil.copytree(model, out / "model")
        return out / "model", {"steps": 1, "log_history": []}

    env = Job.of(
        env_id="math/reflection-v0",
        eval_problems=0,
        model_name_or_path=str(model),
        max_train_minutes=2,
    )
    config = CPUDPOConfig(output_dir=str(tmp_path / "run"))
    stages = [rounds.Stage("sft", update, 100, share=0.5), rounds.Stage("dpo", update, 1)]
    played = [r["stage"] for r in run_train.train_rounds(env, config, "dpo", stages)["rounds"]]
    assert played[-1] == "dpo" and played.count("dpo") == 1
    assert 1 <= played.count("sft") < 100  # the 60 s share stopped the SFT rounds
    config.resume_from_checkpoint = "true"
    again = run_train.train_rounds(env, config, "dpo", stages)["rounds"]
    assert [r["stage"] for r in again] == played  # every stage was done: nothing replayed


def test_a_damaged_round_file_is_played_again(tmp_path):
    rounds = tmp_path / "rounds"
    model = rounds / "round-1" / "model"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    state = {"records": [{"round": 1, "model": str(model)}], "history": []}
    (rounds / "round-1" / "round.json").write_text(json.dumps(state))
    (rounds / "round-2").mkdir()
    (rounds / "round-2" / "round.json").write_text('{"records": [')  # cut off mid-write
    assert completed_rounds(rounds) == state
    (model / "config.json").unlink()  # the round's model is gone: nothing to resume from
    assert completed_rounds(rounds) is None
    assert completed_rounds(Path(tmp_path / "nothing")) is None


@pytest.mark.parametrize("algo", ["sft", "dpo"])
def test_offline_algorithms_default_to_time_bounded_rounds(algo):
    from trainers.run.cli import make_parser

    parser, _ = make_parser(algo, "math/reflection-v0")
    job, config = parser.parse_args_and_config([])
    assert job.max_train_minutes == 15
    if algo == "sft":
        assert config.iterations == 100  # the budget ends them
    else:  # SFT rounds in 3/4 of the budget, then one DPO round
        assert config.sft_first and config.iterations == 1
        assert (config.sft_iterations, config.sft_budget) == (100, 0.75)
        assert (config.learning_rate, config.sft_learning_rate) == (1e-5, 5e-5)


def test_a_later_round_with_nothing_to_train_keeps_its_model(tiny_model, tmp_path, monkeypatch):
    """Round 1 finding nothing is an error (a setting must change); a later one keeps the model
    it was given, records why, and the next round plays on."""
    import shutil

    from trainers.algorithms import rounds
    from trainers.run import train as run_train

    monkeypatch.setattr(rounds, "rollout_episodes", lambda *args, **kwargs: [])
    calls = []

    def update(model, episodes, config, out):
        calls.append(model)
        if len(calls) == 2:
            raise rounds.NoTrainingDataError("no good turn")
        shutil.copytree(model, out / "model")
        return out / "model", {"steps": 1, "log_history": [{"loss": 1.0, "step": 1}]}

    env = Job.of(env_id="math/reflection-v0", eval_problems=0, model_name_or_path=tiny_model)
    config = CPUSFTConfig(output_dir=str(tmp_path / "run"), iterations=3)
    results = run_train.train_rounds(env, config, "sft", [rounds.Stage("sft", update, 3)])
    assert [r.get("skipped") for r in results["rounds"]] == [None, "no good turn", None]
    assert calls[2] == str(tmp_path / "run" / "rounds" / "round-2" / "model")
    assert results["train_steps"] == 2 and (tmp_path / "run" / "final" / "config.json").is_file()

    def nothing(model, episodes, config, out):
        raise rounds.NoTrainingDataError("no good turn")

    with pytest.raises(rounds.NoTrainingDataError, match="no good turn"):
        config = CPUSFTConfig(output_dir=str(tmp_path / "r2"))
        run_train.train_rounds(env, config, "sft", [rounds.Stage("sft", nothing, 3)])
