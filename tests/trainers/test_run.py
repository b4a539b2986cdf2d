"""The run helpers shared by every training script: the time budget."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from transformers import TrainerControl, TrainerState

from trainers.evaluation.report import plots
from trainers.evaluation.report import summary as report
from trainers.run import budget as time_budget
from trainers.run.args import Job
from trainers.run.bridge import eval_config


def test_time_budget_stops_once_the_minutes_have_passed(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(time_budget.time, "perf_counter", lambda: clock[0])
    budget = time_budget.TimeBudget(minutes=0.5)
    state, control = TrainerState(), TrainerControl()
    budget.on_train_begin(None, state, control)
    for step, now in enumerate((110.0, 129.9), start=1):
        clock[0], state.global_step = now, step
        budget.on_step_end(None, state, control)
        assert not control.should_training_stop and not control.should_save
    clock[0], state.global_step = 130.0, 3
    budget.on_step_end(None, state, control)
    assert control.should_training_stop and budget.stopped_at == 3
    assert not control.should_save  # final/ is saved next: no checkpoint duplicates it


def test_checkpoints_by_time_and_never_on_the_step_training_stops(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(time_budget.time, "perf_counter", lambda: clock[0])
    saver = time_budget.Checkpoints(minutes=1)
    state, control = TrainerState(), TrainerControl()
    saver.on_train_begin(None, state, control)
    clock[0] = 59.0
    assert not saver.on_step_end(None, state, control).should_save
    clock[0] = 60.0
    assert saver.on_step_end(None, state, control).should_save
    saver.on_save(None, state, control)
    control.should_save = False
    clock[0] = 100.0  # 40 s after that checkpoint
    assert not saver.on_step_end(None, state, control).should_save
    control.should_save = True  # save_steps asked: not the clock's to undo
    assert saver.on_step_end(None, state, control).should_save
    control.should_save = False
    # the step save_steps (or max_steps) asks for, when training stops on it: final/ instead
    control.should_save = control.should_training_stop = True
    assert not saver.on_step_end(None, state, control).should_save
    with pytest.raises(ValueError, match="save_minutes"):
        time_budget.Checkpoints(0)


def test_time_budget_comes_from_the_env_arguments_and_is_checked():
    (saver,) = time_budget.callbacks(Job.of(max_train_minutes=None, save_minutes=None))
    assert saver.seconds is None
    budget, saver = time_budget.callbacks(Job.of())  # the scripts' defaults: 15 and 10 minutes
    assert isinstance(budget, time_budget.TimeBudget) and budget.seconds == 900
    assert isinstance(saver, time_budget.Checkpoints) and saver.seconds == 600
    with pytest.raises(ValueError, match="save_minutes"):
        Job.of(save_minutes=0)
    with pytest.raises(ValueError, match="max_train_minutes"):
        Job.of(max_train_minutes=0)
    with pytest.raises(ValueError, match="minutes"):
        time_budget.TimeBudget(-1)


def _results(before_team, after_team, before_alone, after_alone):
    def evaluation(team, alone):
        return {
            "metrics": {
                "pass1@turn1": team - 0.1,
                "maj1@turnK": team,
                "ci95": {"maj1@turnK": [team - 0.05, team + 0.05]},
            },
            "single_agent": {"pass1@turn1": alone, "ci95": {"pass1@turn1": [alone - 0.04, alone]}},
        }

    return {
        "before": evaluation(before_team, before_alone),
        "after": evaluation(after_team, after_alone),
    }


def test_summary_keeps_before_after_and_adds_intervals():
    rows = report.summary(_results(0.5, 0.7, 0.45, 0.55))
    assert rows["before"] == {
        "pass1@turn1": pytest.approx(0.4),
        "maj1@turnK": 0.5,
        "single_agent_pass1@turn1": 0.45,
    }
    assert rows["after"]["maj1@turnK"] == 0.7
    assert rows["ci95"]["after"] == {
        "maj1@turnK": [pytest.approx(0.65), pytest.approx(0.75)],
        "single_agent_pass1@turn1": [pytest.approx(0.51), 0.55],
    }
    table = report.summary_table(rows)
    assert "| team: maj1@turnK | 0.500 [0.450, 0.550] | 0.700 [0.650, 0.750] | +0.200 |" in table
    assert "| same model alone: pass1@turn1 | 0.450 [0.410, 0.450] |" in table
    assert "| team: pass1@turn1 | 0.400 | 0.600 | +0.200 |" in table  # no interval: none shown
    assert "| team maj1@turnK - same model alone, after | | | +0.150 |" in table


def _compared(team_vote, alone_maj, problems=6, seed_shift=0.0, tokens_k=None, tpr=None):
    """An evaluation with a comparison: per problem, the team's vote is right on the first
    `team_vote` share of problems and the alone maj@5 on the first `alone_maj` share; levels 1
    and 2 alternate. With `tokens_k` (3 or 5) the alone side is also matched in tokens, has
    maj@3 (right nowhere) and pass@k (right everywhere) and a curve; with `tpr` the team's
    critic accepts that share of right answers (level 2: half of it), its TNR 0.5 and no gap."""
    from trainers.evaluation.compare import compare_team_alone

    if tokens_k is not None:
        evaluation = _compared(team_vote, alone_maj, problems, seed_shift, None, tpr)
        ids = list(evaluation["per_problem"])
        alone = {p: {"alone/maj@3": 0.0, "alone/pass@3": 1.0, "alone/pass@5": 1.0} for p in ids}
        for p in ids:
            alone[p].update({k: v for k, v in evaluation["per_problem"][p].items() if "@" in k})
            evaluation["per_problem"][p].update(alone[p])
        team = {p: {k: v for k, v in row.items() if k.startswith("team/")}
                for p, row in evaluation["per_problem"].items()}  # fmt: skip
        compare = compare_team_alone(team, alone, (1, 3, 5), 5, resamples=200, tokens_k=tokens_k)
        compare.update(
            matched_k=5,
            tokens_k=tokens_k,
            tokens_k_capped=False,
            tokens_per_episode={"team": 100.0, "alone@1": 20.0, "alone@5": 100.0},
            spent={"team/first": {"generations": 1.0, "tokens": 20.0},
                   "team/final": {"generations": 5.0, "tokens": 100.0},
                   "team/vote": {"generations": 5.0, "tokens": 100.0}},
            curve={"k": [1, 2, 3, 4, 5], "alone/maj": [0.5, 0.5, 0.0, 0.4, alone_maj],
                   "alone/pass": [0.5, 0.75, 1.0, 1.0, 1.0],
                   "generations": [1.0, 2.0, 3.0, 4.0, 5.0],
                   "tokens": [20.0, 40.0, 60.0, 80.0, 100.0]},
        )  # fmt: skip
        evaluation["compare"] = compare
        return evaluation

    ids = [f"unknown/test/d{1 + i % 2}/s0/{i}" for i in range(problems)]
    team = {
        p: {
            "team/vote": float(i < team_vote * problems),
            "team/final": float(i < team_vote * problems) + seed_shift,
            "team/first": 0.0,
        }
        for i, p in enumerate(ids)
    }
    alone = {
        p: {
            "alone/pass@1": 0.5,
            **{f"alone/maj@{k}": float(i < alone_maj * problems) for k in (1, 5)},
        }
        for i, p in enumerate(ids)
    }
    compare = compare_team_alone(team, alone, (1, 5), 5, resamples=200)
    compare.update(
        matched_k=5, tokens_per_episode={"team": 100.0, "alone@1": 20.0, "alone@5": 100.0}
    )
    per_problem = {p: {**team[p], **alone[p], "level": 1 + i % 2} for i, p in enumerate(ids)}
    metrics = {"maj1@turnK": team_vote, "accuracy": team_vote, "pass1@turn1": 0.0}
    if tpr is not None:
        review = {"solver/accuracy": 0.0, "review/tnr": 0.5, "review/gap": None}
        metrics.update(review, **{"review/tpr": tpr, "agents": {"critic_0": {}, "solver_0": {}}})
        metrics["levels"] = {
            "1": {**review, "review/tpr": tpr},
            "2": {**review, "review/tpr": tpr / 2},
        }
    return {
        "config": {"seed": 0},
        "metrics": metrics,
        "single_agent": {"pass1@turn1": 0.5},
        "compare": compare,
        "per_problem": per_problem,
    }


def test_summary_leads_with_team_minus_alone_and_pairs_after_with_before():
    results = {"before": _compared(1 / 3, 2 / 3), "after": _compared(2 / 3, 2 / 3)}
    rows = report.summary(results)
    # the existing keys stay; the comparison's figures and tokens join them
    assert rows["before"]["maj1@turnK"] == pytest.approx(1 / 3)
    assert rows["before"]["single_agent_pass1@turn1"] == 0.5
    assert rows["after"]["team/vote"] == pytest.approx(2 / 3)
    assert rows["after"]["alone/maj@5"] == pytest.approx(2 / 3)
    assert rows["after"]["tokens/alone@5"] == 100.0
    assert rows["compare"]["matched_k"] == 5
    gap = rows["compare"]["before"]["team/vote - alone/maj@5"]
    assert gap["diff"] == pytest.approx(-1 / 3) and gap["problems"] == 6
    assert rows["compare"]["after"]["team/final - alone/maj@5"]["diff"] == pytest.approx(0.0)
    # after - before, paired by problem: the team gained 2 of 6 problems, the alone none
    change = rows["paired"]["team/vote"]
    assert change["diff"] == pytest.approx(1 / 3) and change["ci95"][0] >= 0.0
    assert rows["paired"]["alone/maj@5"] == {"diff": 0.0, "ci95": [0.0, 0.0], "problems": 6}
    assert rows["levels"]["after"]["1"]["problems"] == 3
    table = report.summary_table(rows)
    lines = table.splitlines()
    assert lines[0] == "| team - same model alone (paired by problem, 95% CI) | before | after |"
    assert lines[2].startswith("| team: majority vote - alone: maj@5 (compute-matched) | -0.333 [")
    assert lines[3].startswith("| team: final answer - alone: maj@5 (compute-matched) |")
    assert "| after - before (paired by problem, 95% CI) | change |" in table
    assert "| team: majority vote (maj1@turnK) | +0.333 [" in table
    assert "| alone: maj@5 | +0.000 [+0.000, +0.000] |" in table
    assert "| team: final answer | 0.333 [" in table
    assert "| tokens per episode: team | 100.0 | 100.0 | +0.0 |" in table
    assert "| team: maj1@turnK |" not in table  # the comparison's team/vote stands for it
    assert "| level 1 (3) |" in table
    assert table.index("team - same model alone") < table.index("| metric (95% CI")


def test_summary_matches_tokens_and_shows_the_verification_gap_before_and_after():
    """Matched in tokens at k = 3 before and k = 5 after (the team grew longer): the tokens rows
    pair each evaluation with its own k, the baseline is named per evaluation, levels show the
    alone maj@k in tokens, and the verification gap table reads before -> after per level."""
    results = {
        "before": _compared(1 / 3, 2 / 3, tokens_k=3, tpr=0.5),
        "after": _compared(2 / 3, 2 / 3, tokens_k=4, tpr=1.0),
    }
    results["after"]["compare"]["tokens_k"] = 4  # no maj@4: the after cells stay empty
    rows = report.summary(results)
    assert rows["compare"]["tokens_k"] == {"before": 3, "after": 4}
    assert rows["compare"]["baseline_k"] == {"before": 5, "after": 5}  # maj@3 is 0 everywhere
    table = report.summary_table(rows)
    lines = table.splitlines()
    assert lines[2].startswith("| team: majority vote - alone: maj@5 (compute-matched) |")
    tokened = next(line for line in lines if "matched in tokens" in line)
    # before: the vote (right on 2 of 6) against maj@3 (right on none): +0.333
    assert tokened.startswith(
        "| team: majority vote - alone: maj@k matched in tokens (k = 3 -> 4) | +0.333 ["
    )
    assert tokened.endswith("] |  |")  # no maj@4 after
    assert "The baseline to beat (the stronger of the two matched): k = 5." in table
    assert not any(line.startswith("| team: majority vote - alone: maj@3 |") for line in lines)
    assert "| team: majority vote - alone: maj@1 |" in table
    assert "| alone: pass@3 |" not in table  # shown as the headroom
    level_head = next(line for line in lines if line.startswith("| level (problems) |"))
    assert "alone: maj@k in tokens (k = 3 -> 4): before -> after |" in level_head
    assert "| verification gap, before -> after | all | level 1 | level 2 |" in table
    assert "| critic TPR (right answers accepted) | 0.500 -> 1.000 | 0.500 -> 1.000 | " in table
    assert "| 0.250 -> 0.500 |" in table  # level 2's TPR
    assert "| verification gap (accepted - all first answers) | n/a -> n/a |" in table
    assert "| alone pass@5 - maj@5 (headroom) | +0.333 -> +0.333 |" in table
    same = report.summary(
        {"before": _compared(1 / 3, 2 / 3, tokens_k=5), "after": _compared(1 / 3, 2 / 3, 5)}
    )
    same_table = report.summary_table(same)
    assert "(compute-matched and in tokens)" in same_table
    assert "matched in tokens (k" not in same_table and "baseline to beat" not in same_table


def test_compute_plot_before_and_after(tmp_path):
    from trainers.evaluation.report.plots import has_curve, plot_compute

    before, after = _compared(1 / 3, 2 / 3, tokens_k=3), _compared(2 / 3, 2 / 3, tokens_k=5)
    assert has_curve(before) and not has_curve(_compared(1 / 3, 2 / 3)) and not has_curve(None)
    plot_compute({"before": before, "after": after}, tmp_path / "compute.png", "test")
    assert (tmp_path / "compute.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="compared the team with the model alone"):
        plot_compute({"before": _compared(1 / 3, 2 / 3)}, tmp_path / "none.png")
    assert not (tmp_path / "none.png").exists()


def test_after_minus_before_shifts_with_one_side():
    before = _compared(1 / 3, 2 / 3)
    base = report.after_minus_before({"before": before, "after": _compared(1 / 3, 2 / 3)})
    assert base["team/final"]["diff"] == 0.0 and base["team/final"]["ci95"] == [0.0, 0.0]
    shifted = report.after_minus_before(
        {"before": before, "after": _compared(1 / 3, 2 / 3, seed_shift=0.25)}
    )
    assert shifted["team/final"]["diff"] == pytest.approx(0.25)
    assert shifted["team/final"]["ci95"] == pytest.approx([0.25, 0.25])
    assert report.after_minus_before({"before": {}, "after": before}) == {}  # an old "before"


def test_curves_mark_the_comparison(tmp_path):
    rows = report.summary({"before": _compared(1 / 3, 2 / 3), "after": _compared(2 / 3, 2 / 3)})
    history = [{"step": s, "agents/solver_0/accuracy": s % 2} for s in range(1, 5)]
    plots.plot_curves(history, tmp_path / "curves.png", "test", rows)
    assert (tmp_path / "curves.png").read_bytes()[:4] == b"\x89PNG"


def test_curves_are_smoothed_and_mark_the_evaluations(tmp_path):
    assert plots.smooth([0.0, 1.0, 1.0, 1.0], 2) == [0.0, 0.5, 1.0, 1.0]
    history = [
        {"step": s, "agents/solver_0/accuracy": s % 2, "agents/solver_0/reward": 0.5}
        for s in range(1, 21)
    ]
    rows = report.summary(_results(0.5, 0.7, 0.45, 0.55))
    plots.plot_curves(history, tmp_path / "curves.png", "test", rows)
    assert (tmp_path / "curves.png").read_bytes()[:4] == b"\x89PNG"


def test_evaluation_samples_at_the_eval_temperature_else_the_training_one():
    from types import SimpleNamespace

    config = SimpleNamespace(temperature=1.5, max_completion_length=32, seed=0)
    assert eval_config(Job.of(), "m", config).protocol.temperature == 1.5
    assert eval_config(Job.of(eval_temperature=1.0), "m", config).protocol.temperature == 1.0
    assert eval_config(Job.of(), "m", SimpleNamespace(seed=0)).protocol.temperature == 1.0
    with pytest.raises(ValueError, match="eval_temperature must be > 0"):
        Job.of(eval_temperature=0)


def test_evaluation_gives_every_algorithm_its_own_tokens_per_turn():
    """Every algorithm's config names its tokens per turn `max_completion_length`; the
    evaluation must use them (a 64-token cap cut the embedded critic's checks off before their
    verdict)."""
    from types import SimpleNamespace

    from trainers.algorithms.dpo import CPUDPOConfig

    grpo = SimpleNamespace(max_completion_length=32, seed=0)
    assert eval_config(Job.of(), "m", grpo).protocol.max_completion_length == 32
    dpo = SimpleNamespace(max_completion_length=80, seed=0)
    assert eval_config(Job.of(), "m", dpo).protocol.max_completion_length == 80
    assert eval_config(Job.of(), "m", SimpleNamespace(seed=0)).protocol.max_completion_length == 96
    assert CPUDPOConfig.__dataclass_fields__["max_completion_length"].default >= 96


def test_audit_reaches_the_env_as_a_tuple_of_roles():
    import envs

    kwargs = Job.of(audit=" critic, refiner ").protocol().env_kwargs()
    assert kwargs["audit"] == ("critic", "refiner")
    assert envs.make("math/reflection-v0", **kwargs).unwrapped.audit == ("critic", "refiner")
    assert "audit" not in Job.of().protocol().env_kwargs()
    assert Job.of(audit="", critic_reward="outcome").protocol().env_kwargs()["audit"] == ()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"audit": "critics"}, "audit must be a sequence of roles from"),
        ({"audit": "solver", "env_id": "math/debate-v0"}, "nor an option of math/debate-v0"),
    ],
)
def test_bad_audit_is_refused_before_any_model_loads(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        Job.of(**kwargs)


def test_evaluation_plays_the_env_the_run_trains():
    """Every env option of the training run reaches the evaluation's team env (the protocol
    changes what is played); the model alone gets the verifier only."""
    from types import SimpleNamespace

    from trainers.evaluation.config import ALONE_ENV

    job = Job.of(
        refiner_mode="resolve",
        revision_reward="improvement",
        critic_reward="counterfactual",
        verifier="math",
        audit="critic",
    )
    train = job.protocol("train").env_kwargs()
    config = eval_config(job, "m", SimpleNamespace(seed=0))
    team = config.protocol.env_kwargs(job.env_id)
    for key in ("refiner_mode", "revision_reward", "critic_reward", "verifier", "audit"):
        assert team[key] == train[key], key
    assert config.protocol.env_kwargs(ALONE_ENV).keys() & set(config.env_options()) == {"verifier"}
    import envs

    assert envs.make(job.env_id, **team).unwrapped.refiner_mode == "resolve"
    assert envs.make(ALONE_ENV, **config.protocol.env_kwargs(ALONE_ENV)) is not None


@pytest.mark.parametrize(
    ("env_id", "argv", "rows"),
    [
        ("math/reflection-v0", [], 20),  # 5 turn slots x G=4
        ("math/reflection-v0", ["--rounds", "3"], 28),  # 7 slots: the flag, not the default
        ("math/reflection-v0", ["--rounds", "3", "--per_device_train_batch_size", "8"], 8),
        ("math/debate-v0", ["--num_agents", "2"], 16),  # 2 agents x 2 rounds x 4
    ],
)
def test_grpo_batch_default_follows_the_env_the_flags_ask_for(env_id, argv, rows, tmp_path):
    from trainers.run.cli import make_parser

    parser, _ = make_parser("grpo", env_id)
    _, config, _ = parser.parse_args_and_config(argv, return_remaining_strings=True)
    assert config.per_device_train_batch_size == rows
    yaml = tmp_path / "run.yaml"
    yaml.write_text("rounds: 3\n")
    argv = ["--config", str(yaml)]
    parser, _ = make_parser("grpo", "math/reflection-v0")
    _, config, _ = parser.parse_args_and_config(argv, return_remaining_strings=True)
    assert config.per_device_train_batch_size == 28  # a --config file's rounds count too


def test_argument_groups_are_parsed_once_into_one_record(monkeypatch):
    """One parse of argv fills every group (env, model, evaluation, warm-up) and the config;
    --help lists them in that order, each in its own section, TRL's config last."""
    from trl import TrlParser

    from trainers.run.args import GROUPS
    from trainers.run.cli import make_parser

    calls = []
    real = TrlParser.parse_known_args

    def counted(self, *args, **kwargs):
        calls.append(args)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(TrlParser, "parse_known_args", counted)
    parser, _ = make_parser("grpo", "math/reflection-v0", {"audit": "critic"})
    argv = ["--rounds", "3", "--lora_r", "4", "--eval_problems", "7", "--warmup_sft_steps", "2"]
    args, config = parser.parse_args_and_config(argv)
    assert len(calls) == 1  # the batch default is derived from this parse, not a second one
    assert isinstance(args, Job)
    got = (args.options["rounds"], args.model.lora_r, args.eval.eval_problems)
    assert (*got, args.warmup.warmup_sft_steps) == (3, 4, 7, 2)
    assert args.options["audit"] == ("critic",) and config.per_device_train_batch_size == 28
    sections = re.findall(r"^(\S[^\n]*):$", parser.format_help(), re.MULTILINE)
    names = [cls._argument_group_name for cls in GROUPS]
    options = "env options (math/reflection-v0)"
    assert sections[-7:] == [names[0], options, *names[1:], "GRPO (TRL's GRPOConfig, CPU defaults)"]


def test_one_tokens_per_turn_name_reaches_training_and_evaluation():
    """--max_completion_length caps every turn of the rollouts and of the evaluations, for
    every algorithm; the old SFT/DPO name still works, with a warning."""
    from trainers.run.cli import current_flags, make_parser

    for algo in ("grpo", "ppo", "sft", "dpo"):
        parser, _ = make_parser(algo, "math/reflection-v0")
        args, config = parser.parse_args_and_config(["--max_completion_length", "40"])
        assert config.max_completion_length == 40
        assert eval_config(args, "m", config).protocol.max_completion_length == 40
    with pytest.warns(FutureWarning, match="--rollout_max_new_tokens is deprecated"):
        assert current_flags(["dpo", "--rollout_max_new_tokens=8"]) == [
            "dpo",
            "--max_completion_length=8",
        ]


def test_evaluation_env_is_the_training_env_with_split_and_size_overridden():
    args = Job.of(
        env_id="math/reflection-v0",
        rounds=3,
        critic_reward="balanced",
        refiner_mode="resolve",
        audit="critic",
        verifier="math",
        eval_problems=12,
        eval_split="validation",
        eval_difficulty=[2],
    )
    train = args.protocol("train").env_kwargs()
    evaluation = eval_config(args, "m", SimpleNamespace(seed=0)).protocol.env_kwargs()
    overridden = {"split", "task_kwargs"}
    assert {k: v for k, v in train.items() if k not in overridden} == {
        k: v for k, v in evaluation.items() if k not in overridden
    }
    assert (train["split"], evaluation["split"]) == ("train", "validation")
    assert evaluation["task_kwargs"] == {"difficulty": [2], "size": 12}
