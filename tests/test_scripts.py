"""Every script answers --help; one command run per script; tiny end-to-end runs.

Each script is run as a command (a fresh interpreter, from the repository root) exactly once in
the default run: its smoke test below (`SMOKE`), the cheapest real run where one takes about a
second and ``--help`` otherwise; ``serve_rewards.py``'s is in ``tests/rewards/test_server.py``.
The other end-to-end runs go through the ``run_script`` fixture: in this process by default,
and as commands too under ``-m slow``.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from tests.utils import ACCELERATE_2PROC, REPO, run_command, run_in_process

SCRIPTS = sorted(p.name for p in (REPO / "scripts").glob("*.py"))
# script -> (arguments, what its stdout must contain); "{tmp}" is the test's tmp_path.
SMOKE = {
    "bench.py": (["verifiers", "--generate", "20", "--repeat", "1"], "verdicts differ:       0"),
    "build_embedded.py": (["--help"], "usage"),  # a build trains for minutes
    "evaluate.py": (
        ["--num_problems", "1", "--samples", "1", "--max_completion_length", "4", "--rounds", "1"],
        "pass1@turnK",
    ),
    "fuzz.py": (["--examples", "1", "--only", "^extract$", "--json", "{tmp}/f.json"], "0 failures"),
    "models.py": (["list"], "smollm2-135m-instruct"),  # a fetch: tests/agents/test_models.py
    "play.py": (["--seed", "2"], "return per agent:"),
    "probe_critic.py": (
        ["--problems", "8", "--show", "1"],
        "its own solver's answers",
    ),
    "probe_coloring.py": (
        # the unknown model (no coloring model is shipped): it plays, badly, which is all to see
        [
            *("--model", "trainers/embedded/model", "--problems", "2", "--difficulty", "1"),
            *("--drills", "4", "--max_new_tokens", "8"),
        ],
        "scan drills (4): marks right",
    ),
    "probe_embedded.py": (["--help"], "usage"),  # a run: test_probe_embedded_end_to_end
    "robustness.py": (["--check"], "identical to a fresh build"),
    # Training runs end to end: test_train_script_end_to_end and tests/trainers, in-process.
    "train_debate.py": (["--help"], "usage"),
    "train_ensemble.py": (["--help"], "usage"),
    "train_reflection.py": (["--help"], "usage"),
    "train_solve.py": (["--help"], "usage"),
    "train_tool.py": (["--help"], "usage"),
    "train_verifier.py": (["--help"], "usage"),  # a run: test_train_verifier_script_in_process
}
SMOKE_ELSEWHERE = {
    "serve_envs.py": "tests/envs/test_server.py::test_killed_server_gives_a_clear_error_not_a_default",
    "serve_rewards.py": "tests/rewards/test_server.py::test_serve_script_one_command",
    "soak.py": "tests/envs/test_soak.py::test_short_soak_keeps_the_contract_through_a_kill_and_restarts",
}


def test_every_script_has_one_smoke_run():
    assert sorted([*SMOKE, *SMOKE_ELSEWHERE]) == SCRIPTS
    assert not set(SMOKE) & set(SMOKE_ELSEWHERE)


@pytest.mark.parametrize("script", sorted(SMOKE))
def test_smoke(script, tmp_path):
    args, expected = SMOKE[script]
    # A generous timeout: on a shared machine a command's imports alone have taken minutes.
    arguments = [a.replace("{tmp}", str(tmp_path)) for a in args]
    result = run_command(script, *arguments, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    output = result.stdout.lower() if expected == "usage" else result.stdout
    assert expected in output, result.stdout[-3000:]
    if script == "fuzz.py":
        summary = json.loads((tmp_path / "f.json").read_text())
        assert summary["targets"]["extract"]["inputs"] >= 1 and summary["failures"] == 0


@pytest.mark.parametrize("script", SCRIPTS)
def test_help(script):
    result = run_in_process(script, "--help")
    assert result.returncode == 0, result.stderr
    assert "usage" in result.stdout.lower()


def test_play_prints_transcript_and_returns():
    result = run_in_process("play.py", "--seed", "2")
    assert result.returncode == 0, result.stderr
    assert "[critic_0]" in result.stdout and "Verdict:" in result.stdout
    returns = json.loads(result.stdout.rsplit("return per agent:", 1)[1])
    assert returns == {"solver_0": 0.0, "critic_0": 2.0, "refiner_0": 2.0}


def test_evaluate_end_to_end(tiny_model, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "scripts"))
    monkeypatch.chdir(REPO)
    import evaluate

    out = tmp_path / "m.json"
    results = evaluate.main(
        [
            "--model_name_or_path",
            tiny_model,
            "--num_problems",
            "3",
            "--samples",
            "2",
            "--k",
            "1",
            "2",
            "--max_completion_length",
            "8",
            "--rounds",
            "1",
            "--json",
            str(out),
            "--save_episodes",
            str(tmp_path / "e.jsonl"),
            "--plot",
            str(tmp_path / "compute.png"),
        ]
    )
    saved = json.loads(out.read_text())
    assert saved["metrics"]["episodes"] == 6 and "pass@2" in saved["metrics"]
    assert set(results["single_agent"]) >= {"pass1@turn1", "maj1@turnK", "accuracy"}
    assert len((tmp_path / "e.jsonl").read_text().splitlines()) == 6
    # matched in tokens too: the k whose alone samples spend the team's tokens, with a curve
    compare = saved["compare"]
    assert compare["tokens_k"] in compare["ks"] and compare["baseline_k"] in compare["ks"]
    assert compare["tokens_k"] <= compare["alone_samples"] <= 10
    assert compare["curve"]["k"] == list(range(1, compare["alone_samples"] + 1))
    assert (tmp_path / "compute.png").read_bytes()[:4] == b"\x89PNG"


def test_evaluate_plot_needs_the_comparison(capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "scripts"))
    import evaluate

    with pytest.raises(SystemExit):
        evaluate.main(["--no_compare", "--plot", "x.png"])
    assert "--plot draws the team against the model alone" in capsys.readouterr().err


@pytest.mark.parametrize("ensemble", ["majority_vote", "hidden_state_mean"])
def test_evaluate_with_an_ensemble(tiny_model, monkeypatch, ensemble):
    monkeypatch.syspath_prepend(str(REPO / "scripts"))
    import evaluate

    from trainers.evaluation import policies

    built = []

    def spy(name, policy, size, answer_format):
        built.append((name, size))
        return real(name, policy, size, answer_format)

    real = policies.build_ensemble
    monkeypatch.setattr(policies, "build_ensemble", spy)
    results = evaluate.main(
        [
            "--model_name_or_path",
            tiny_model,
            "--env_id",
            "math/solve-v0",
            "--num_problems",
            "2",
            "--max_completion_length",
            "6",
            "--ensemble",
            ensemble,
            "--ensemble_size",
            "2",
        ]
    )
    assert results["metrics"]["episodes"] == 2
    assert built == [(ensemble, 2)]  # the flag reaches the role map (it once did not)


def test_ensemble_plays_the_answering_roles_only(tiny_model):
    from trainers.evaluation.policies import build_role_map

    roles = build_role_map(tiny_model, ensemble="majority_vote", answer_roles=("solver", "refiner"))
    team = roles.policy_for("solver_0")
    assert roles.policy_for("refiner_0") is team
    assert roles.policy_for("critic_0") is not team


def test_evaluate_rejects_malformed_role_model(capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "scripts"))
    import evaluate

    with pytest.raises(SystemExit):
        evaluate.main(["--role_models", "critic"])
    assert "ROLE=PATH" in capsys.readouterr().err


def test_evaluate_speaks_the_training_scripts_vocabulary(monkeypatch):
    """One name per thing in training and evaluation; the old dashed names still parse, with a
    warning, and --role-adapters (a folder) is --role_adapters_dir, not training's bool."""
    from trainers.run import evaluate_cli as evaluate
    from trainers.run.cli import make_parser

    with pytest.warns(FutureWarning, match="--max-new-tokens is deprecated"):
        old = evaluate.current_flags(
            ["--max-new-tokens", "8", "--role-adapters=out/final", "--model", "m", "--k", "1"]
        )
    assert old == [
        "--max_completion_length", "8", "--role_adapters_dir=out/final",
        "--model_name_or_path", "m", "--k", "1",
    ]  # fmt: skip
    args = evaluate.make_parser().parse_args([*old, "--role_models", "critic=./c,refiner=./r"])
    assert (args.max_completion_length, args.role_adapters_dir) == (8, "out/final")
    training = flags(make_parser("grpo", "math/reflection-v0")[0].format_help())
    shared = flags(evaluate.make_parser().format_help()) & training
    assert shared >= {
        "env_id", "task", "data_path", "split", "model_name_or_path", "role_models",
        "max_completion_length", "num_envs", "rounds", "seed", "temperature",
        "refiner_mode", "audit", "critic_reward",  # the env's options group, in both
    }  # fmt: skip
    assert "role_adapters" not in flags(evaluate.make_parser().format_help())
    every = flags(evaluate.make_parser().format_help())  # every env's options, once each
    assert {"num_agents", "rounds", "influence_discount", "audit", "max_output_chars"} <= every


def flags(help_text: str) -> set[str]:
    """The flag names a parser's --help lists (``--max_completion_length`` -> its name)."""
    return set(re.findall(r"^ {2}(?:-\w, )?--([a-z][a-z0-9_]*)", help_text, re.MULTILINE))


@pytest.mark.parametrize(
    ("script", "extra"),
    [
        ("train_reflection.py", []),
        ("train_debate.py", []),
        ("train_reflection.py", ["--role_adapters", "true", "--lora_r", "4"]),
        ("train_reflection.py", ["--role_models", "all", "--beta", "0.1"]),
        ("train_tool.py", ["--warmup_sft_steps", "2"]),
    ],
)
def test_train_script_end_to_end(run_script, tiny_model, tmp_path, script, extra):
    """One GRPO step of a training script on the tiny model: eval, train, eval, outputs.

    With ``--role_adapters true`` the final folder holds one adapter per role, which the "after"
    evaluation plays on top of the start model; with ``--role_models all`` (and ``--beta``, a
    reference per role) it holds one complete model per role, which the "after" evaluation plays.
    ``--warmup_sft_steps`` SFTs the start model on demonstrations first; RL starts from that."""
    out = tmp_path / "run"
    result = run_script(
        script,
        "grpo",
        *("--model_name_or_path", tiny_model, "--max_steps", "1"),
        *("--eval_problems", "2", "--eval_samples", "1", "--train_problems", "4"),
        *("--max_completion_length", "6", "--rounds", "1", "--num_generations", "2"),
        *("--per_device_train_batch_size", "6", "--gradient_accumulation_steps", "1"),
        *("--output_dir", str(out), *extra),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert {"before", "after", "summary", "log_history"} <= set(metrics)
    if script == "train_reflection.py":  # the script's default: every role's arithmetic audited
        assert metrics["env_kwargs"]["audit"] == ["solver", "critic", "refiner"]
    assert any(k.startswith("agents/") for row in metrics["log_history"] for k in row)
    assert (out / "curves.png").stat().st_size > 0
    if "--warmup_sft_steps" in extra:
        assert metrics["warmup"]["steps"] == 2 and metrics["warmup"]["data"] == "embedded"
        assert metrics["rl_start_model"] == str(out / "warmup")
        assert metrics["warmup"]["eval"]["config"]["model"] == str(out / "warmup")
        assert metrics["start_model"] == tiny_model == metrics["before"]["config"]["model"]
    elif "--role_models" in extra:
        assert any("kl" in row for row in metrics["log_history"])  # each role's KL to its start
        roles = ["critic", "refiner", "solver"]
        assert sorted(metrics["after"]["config"]["role_models"]) == roles
        for role in roles:
            assert metrics["after"]["config"]["role_models"][role] == str(out / "final" / role)
            assert (out / "final" / role / "model.safetensors").is_file()
    elif extra:
        from trainers.roles.adapters import saved_roles

        assert saved_roles(out / "final") == ["critic", "refiner", "solver"]
        assert metrics["after"]["config"]["role_adapters_dir"] == str(out / "final")
        assert metrics["after"]["config"]["model"] == tiny_model
    else:
        assert (out / "final" / "config.json").is_file()
        # The trained model carries its protocol: evaluated with the defaults (sizes aside), it
        # plays what it trained in (--rounds 1, the script's audit), as the run's own "after" did.
        from trainers.run.evaluate_cli import main as evaluate_main

        played = evaluate_main(
            ["--model_name_or_path", str(out / "final"), "--num_problems", "2", "--no_compare"]
        )["config"]
        after = metrics["after"]["config"]
        for key in ("env_id", "task", "difficulty", "env_options", "max_completion_length"):
            assert json.loads(json.dumps(played[key])) == after[key], key
        assert played["env_options"]["rounds"] == 1
        # From Python, the folder alone: the run's own after-training evaluation, replayed.
        from trainers.evaluation.evaluate import evaluate

        assert evaluate(model=str(out / "final"))["config"] == after
        card = (out / "final" / "README.md").read_text()
        assert "None" not in card and after["env_id"] in card and "`unknown`" in card
        saved = json.loads((out / "final" / "mathteams.json").read_text())
        assert saved["protocol"]["base_model"] == tiny_model
        assert not list(out.glob("checkpoint-*"))  # one step: final/ only, no duplicate


def test_role_adapters_are_refused_by_algorithms_that_train_the_whole_model():
    from trainers.run.cli import run_script

    with pytest.raises(SystemExit, match="--role_adapters applies to grpo and ppo, not dpo"):
        run_script("math/reflection-v0", ["dpo", "--role_adapters", "true"])
    with pytest.raises(SystemExit, match="--role_models applies to grpo and ppo, not sft"):
        run_script("math/reflection-v0", ["sft", "--role_models", "all"])


def test_an_unknown_flag_is_one_line_naming_it():
    from trainers.run.cli import run_script

    with pytest.raises(SystemExit) as raised:
        run_script("math/solve-v0", ["--max_steps", "1", "--bogus", "3"])
    message = str(raised.value.code)
    assert "unrecognized arguments: --bogus 3" in message and "grpo --help" in message
    assert "\n" not in message


def test_role_models_flag_is_parsed_or_refused_with_the_expected_form():
    from trainers.run.args import ModelArguments

    assert ModelArguments(role_models="").role_model_paths() is False
    assert ModelArguments(role_models="all").role_model_paths() is True
    got = ModelArguments(role_models="critic=./c, refiner=./r").role_model_paths()
    assert got == {"critic": "./c", "refiner": "./r"}
    with pytest.raises(ValueError, match="must read ROLE=PATH"):
        ModelArguments(role_models="critic")
    with pytest.raises(ValueError, match="not both"):
        ModelArguments(role_models="all", role_adapters=True)


def test_train_script_reads_a_yaml_config_and_flags_override(tmp_path):
    from trainers.run.cli import make_parser

    config = tmp_path / "c.yaml"
    config.write_text("max_steps: 7\nlearning_rate: 0.001\nrole_weights: 'critic=0.5'\n")
    parser, _ = make_parser("grpo", "math/reflection-v0")
    job, grpo = parser.parse_args_and_config(["--config", str(config), "--max_steps", "3"])
    assert (grpo.max_steps, grpo.learning_rate) == (3, 0.001)
    assert job.rollout.weights() == {"critic": 0.5} and job.env_id == "math/reflection-v0"
    assert grpo.per_device_train_batch_size == 20  # 5 turn slots x 4 generations


def test_turn_credit_flag_reaches_the_trainer_builder():
    from trainers.run.cli import make_parser

    parser, _ = make_parser("grpo", "math/reflection-v0")
    job = parser.parse_args_and_config([])[0]
    assert job.builder_kwargs()["turn_credit"] == "reward"
    job = parser.parse_args_and_config(["--turn_credit", "return", "--stop_on_accept", "true"])[0]
    assert job.builder_kwargs()["turn_credit"] == "return"
    with pytest.raises(SystemExit):  # argparse names the choices
        parser.parse_args_and_config(["--turn_credit", "returns"])


@pytest.mark.parametrize("algo", ["grpo", "ppo", "sft", "dpo"])
def test_train_scripts_default_to_no_gradient_checkpointing(algo):
    """TRL turns it on; recomputing a small model's forward pass only costs time. A flag turns it
    back on for a large model."""
    from trainers.run.cli import make_parser

    parser, _ = make_parser(algo, "math/reflection-v0")
    assert parser.parse_args_and_config([])[1].gradient_checkpointing is False
    flagged = parser.parse_args_and_config(["--gradient_checkpointing", "true"])[1]
    assert flagged.gradient_checkpointing is True


def test_train_script_rejects_an_unknown_algorithm(run_script):
    result = run_script("train_debate.py", "nope")
    assert result.returncode != 0
    assert "unknown algorithm 'nope'" in result.stderr and "grpo" in result.stderr


def bench_figures(run_script, tmp_path, command, *args):
    """``bench.py command *args --json ...``: checks it succeeded and returns its figures."""
    out = tmp_path / f"{command}.json"
    result = run_script("bench.py", command, *args, "--json", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(out.read_text())


def test_bench_train_times_both_trainers(run_script, tiny_model, tmp_path):
    figures = bench_figures(
        run_script,
        tmp_path,
        "train",
        *("--model", tiny_model, "--problems", "1", "--steps", "1", "--max-new-tokens", "4"),
        *("--repeats", "2"),
    )
    assert figures["rows_per_step"] == 3 * 4  # reflection rounds=1: 3 turn slots x G=4
    for name in ("multi_agent", "plain_trl"):
        row = figures[name]
        assert row["steps"] == 2 and row["tokens_per_step"] > 0  # 1 timed step x 2 repeats
        # generation is part of the step, and the split adds up to the step's time per token
        assert 0 < row["generate_ms_per_1k_tokens"] < row["ms_per_1k_tokens"]
        split = row["generate_ms_per_1k_tokens"] + row["other_ms_per_1k_tokens"]
        assert split == pytest.approx(row["ms_per_1k_tokens"])
    assert len(figures["ratios"]) == 2 and min(figures["ratios"]) > 0
    assert figures["ratio"] == pytest.approx(sum(figures["ratios"]) / 2)  # the median of two


def test_bench_step_splits_a_step_of_the_main_job_into_its_phases(run_script, tiny_model, tmp_path):
    out = tmp_path / "step.json"  # the bench's flags, then the job's after --
    result = run_script(
        "bench.py",
        *("step", "--json", str(out), "--steps", "1", "--"),
        *("--model_name_or_path", tiny_model, "--train_problems", "16", "--rounds", "1"),
        *("--max_completion_length", "6", "--num_generations", "2"),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    figures = json.loads(out.read_text())
    phases = figures["phases"]
    assert figures["steps"] == 1 and set(phases) >= {"prefill", "decode", "backward", "other"}
    # a step generates, steps its envs and learns; the phases add up to the step. Decode is
    # timed whether the model's forward or the fused decode step (the default on CPU) runs it
    assert phases["prefill"] > 0 and phases["env+verifier"] > 0 and phases["backward"] > 0
    assert phases["decode"] > 0
    assert sum(phases.values()) == pytest.approx(figures["seconds_per_step"], rel=0.02)


def test_bench_step_times_the_old_policys_logprob_pass(run_script, tiny_model, tmp_path):
    """With two iterations a generation, the old policy's log-probabilities are a pass of their
    own (the shared-prefix one on CPU, which runs the backbone, not the model's forward)."""
    out = tmp_path / "step.json"
    result = run_script(
        "bench.py",
        *("step", "--json", str(out), "--steps", "2", "--"),
        *("--model_name_or_path", tiny_model, "--train_problems", "16", "--rounds", "1"),
        *("--max_completion_length", "6", "--num_generations", "2", "--num_iterations", "2"),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    phases = json.loads(out.read_text())["phases"]
    assert phases["logprob pass"] > 0 and phases["loss forward"] > 0


def test_bench_rollout_alternates_every_loop_and_reports_per_repeat_ratios(
    run_script, tiny_model, tmp_path
):
    figures = bench_figures(
        run_script,
        tmp_path,
        "rollout",
        *("--model", tiny_model, "--problems", "3", "--max-new-tokens", "4", "--repeats", "3"),
    )
    naive = figures["naive"]["runs_tokens_per_s"]
    assert len(naive) == 3 and min(naive) > 0
    for mode in ("continuous", "lockstep"):
        row = figures[mode]
        assert len(row["runs_tokens_per_s"]) == 3 and row["tokens"] > 0
        expected = [m / n for m, n in zip(row["runs_tokens_per_s"], naive, strict=True)]
        assert row["ratios"] == pytest.approx(expected)
        assert row["ratio"] == pytest.approx(sorted(expected)[1])  # the median of three
        assert row["tokens_per_s"] == pytest.approx(sorted(row["runs_tokens_per_s"])[1])
    assert figures["continuous"]["batching"]["decode_waste"] == 0.0
    assert figures["ratio"] == figures["continuous"]["ratio"]


def test_bench_train_qwen_config_model_on_cpu(tmp_path, monkeypatch):
    """``--qwen-0.5b``: both trainers load rollout's random-weight model of Qwen2.5-0.5B's
    architecture from one saved folder (here its config shrunk to two narrow layers, for speed)."""
    from benchmarks import common
    from benchmarks.cli import make_parser

    qwen = common.QWEN25_05B  # what rollout and train build
    shrunk = {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
    }
    for key, value in shrunk.items():
        monkeypatch.setitem(qwen, key, value)
    args = make_parser().parse_args(
        [
            *("train", "--qwen-0.5b", "--device", "cpu", "--problems", "1", "--generations", "2"),
            *("--steps", "1", "--repeats", "1", "--max-new-tokens", "4"),
        ]
    )
    figures = args.func(args)
    assert figures["model"] == "qwen2.5-0.5b-config (random)"
    assert (figures["device"], figures["precision"]) == ("cpu", "float32")
    assert 0 < figures["params"] < 1e6  # the shrunk config, not the 0.5B one
    for name in ("multi_agent", "plain_trl"):
        assert figures[name]["steps"] == 1 and figures[name]["tokens_per_step"] > 0
        assert "peak_gpu_gib" not in figures[name]  # GPU memory on --device cuda only


@pytest.mark.slow
def test_train_script_under_accelerate_launch_two_processes(tiny_model, tmp_path):
    """`accelerate launch` with 2 gloo processes on the CPU: each trains on its own problems.

    Slow: two processes and a launcher are three interpreters' imports (minutes on a busy
    machine), and nothing in one process can stand in for them."""
    out = tmp_path / "run"
    result = subprocess.run(
        [
            *ACCELERATE_2PROC,
            "scripts/train_reflection.py",
            "grpo",
            *("--model_name_or_path", tiny_model, "--max_steps", "2"),
            *("--eval_problems", "1", "--eval_samples", "1", "--train_problems", "8"),
            *("--max_completion_length", "4", "--rounds", "1", "--num_generations", "2"),
            *("--per_device_train_batch_size", "6", "--gradient_accumulation_steps", "1"),
            *("--output_dir", str(out)),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["processes"] == 2
    steps = [row for row in metrics["log_history"] if "num_tokens" in row]
    # 2 processes x 1 problem x 3 turn slots x 2 generations per step: 12 rows, 2 problems.
    assert steps[0]["epoch"] == pytest.approx(2 / 8)
    header = "| metric (95% CI, bootstrap over problems) | before | after | change |"
    assert result.stdout.count(header) == 1  # main process only


@pytest.mark.parametrize("path", sorted((REPO / "scripts" / "configs").glob("*_grpo*.yaml")))
def test_shipped_grpo_configs_parse(path):
    """Every shipped GRPO config names only real fields (TrlParser refuses unknown keys)."""
    import envs
    from trainers.run.cli import make_parser

    env_id = f"math/{path.stem.split('_')[0]}-v0"
    parser, _ = make_parser("grpo", env_id)  # with the env's run defaults (EnvSpec.run_task)
    job, config = parser.parse_args_and_config(["--config", str(path)])
    assert config.output_dir.startswith("outputs/")
    envs.make(env_id, **job.protocol().env_kwargs())  # the script's defaults and the config agree
    if path.stem == "reflection_grpo_norm":
        assert job.model.trainable_params == r"^model\.norm\." and config.learning_rate == 0.3


def test_probe_embedded_names_every_number_of_the_scripted_replies():
    import re

    import envs
    from trainers.embedded import probe_embedded
    from trainers.embedded.transcripts import check_reply, repair_reply, solve_reply, work_reply

    problems = envs.make_task("unknown", split="test", size=20, difficulty=[1, 2, 3]).source
    for problem in problems:
        start = problem["metadata"]["start"]
        for claimed in (start, start + 3, max(start - 2, 0)):
            for reply, kinds_of in (
                (check_reply(problem, claimed), probe_embedded.critic_kinds),
                (repair_reply(problem, claimed), probe_embedded.refiner_kinds),
                (work_reply(problem, claimed), probe_embedded.solver_kinds),
                (solve_reply(problem, claimed), probe_embedded.solver_kinds),
            ):
                kinds = kinds_of(reply)
                numbers = [m.start() for m in re.finditer(r"(?<![\d-])-?\d+", reply)]
                assert [offset for offset, _ in kinds] == numbers, reply
    with pytest.raises(ValueError, match="not a scripted critic check"):
        probe_embedded.critic_kinds("The answer is 4.")


def test_probe_embedded_end_to_end(tiny_model, capsys):
    from trainers.embedded import probe_embedded

    assert probe_embedded.main(["--model", tiny_model, "--problems", "4"]) == 0
    table = capsys.readouterr().out.splitlines()
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ") for line in table[2:]}
    assert "critic step: worked out" in rows and "refiner: answer, copied" in rows
    assert "solver step: worked out" in rows and "solver: answer at a glance" in rows
    for cells in rows.values():
        assert 0.0 <= float(cells[1]) <= 1.0 and 0.0 <= float(cells[2]) <= 1.0
        assert int(cells[3].strip(" |")) > 0
