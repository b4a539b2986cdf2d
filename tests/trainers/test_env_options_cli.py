"""Adding an option to an env is one edit, in its options dataclass: the option then shows in
the training scripts' and the evaluation's --help, reaches the training env and the evaluation's
team env, and is checked by the dataclass itself before any model loads."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

import envs
from envs.options import SolveOptions
from envs.solve import SolveEnv

ECHO = "test/echo-v0"


@dataclass(frozen=True)
class EchoOptions(SolveOptions):
    """math/solve-v0's options plus the one option this test adds (the one edit)."""

    shout: bool = field(default=False, metadata={"help": "reply in capitals"})
    volume: int = field(default=3, metadata={"help": "how loud, 1 to 11"})

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 1 <= self.volume <= 11:
            raise ValueError(f"volume must be in 1..11, got {self.volume}")


class EchoEnv(SolveEnv):
    options_class = EchoOptions


@pytest.fixture
def echo():
    envs.register(ECHO, lambda wrapped=True, **kwargs: EchoEnv(**kwargs), options=EchoOptions)
    yield ECHO
    envs.deregister(ECHO)


def test_the_option_shows_in_the_training_help_and_reaches_the_training_env(echo):
    from trainers.run.cli import make_parser

    parser, _ = make_parser("grpo", echo)
    text = parser.format_help()
    assert "env options (test/echo-v0)" in text and "--shout" in text and "how loud" in text
    job, _ = parser.parse_args_and_config(["--shout", "true", "--volume", "11"])
    assert (job.options["shout"], job.options["volume"]) == (True, 11)
    env = envs.make(echo, **job.protocol("train").env_kwargs())
    assert (env.options.shout, env.options.volume) == (True, 11)
    with pytest.raises(ValueError, match=r"volume must be in 1\.\.11"):  # before any model loads
        parser.parse_args_and_config(["--volume", "12"])


def test_the_option_reaches_the_evaluation_and_not_the_model_alone(echo):
    from trainers.evaluation.config import ALONE_ENV
    from trainers.run.evaluate_args import make_parser
    from trainers.run.evaluate_cli import resolve

    parser = make_parser()
    assert "--shout" in parser.format_help()
    args = parser.parse_args(["--env_id", echo, "--task", "arithmetic", "--shout", "--volume", "7"])
    config = resolve(args, parser.error)
    assert config.protocol.options == {"shout": True, "volume": 7}
    team = config.protocol.env_kwargs(echo)
    assert envs.make(echo, **team).options.volume == 7
    assert not {"shout", "volume"} & set(config.protocol.env_kwargs(ALONE_ENV))


def test_a_run_and_its_evaluation_play_the_same_options(echo):
    from types import SimpleNamespace

    from trainers.run.args import Job
    from trainers.run.bridge import eval_config

    job = Job.of(env_id=echo, task="arithmetic", volume=5, eval_problems=4)
    evaluation = eval_config(job, "m", SimpleNamespace(seed=0)).protocol.env_kwargs()
    assert evaluation["volume"] == job.protocol().env_kwargs()["volume"] == 5
    with pytest.raises(TypeError, match="nor an option of test/echo-v0"):
        Job.of(env_id=echo, loudness=5)


def test_only_options_a_command_line_can_write_are_flags():
    """The tool env's sandbox (a SandboxConfig) and the ensemble's instruction templates (a
    list a comma would split) keep their defaults; every other option is a flag."""
    from trainers.run.options import options_group

    for env_id in envs.list_envs("math"):
        spec = envs.spec(env_id)
        own = {f.name for f in dataclasses.fields(spec.options)} - set(envs.TaskOptions.names())
        group = options_group(env_id)
        flagged = {f.name for f in dataclasses.fields(group)} if group else set()
        assert own - flagged <= {"sandbox", "instructions"}, env_id


@pytest.mark.parametrize(
    ("argv", "task", "refiner_mode", "audit"),
    [
        ([], "unknown", "resolve", ("solver", "critic", "refiner")),
        (["--task", "coloring"], "coloring", "patch", ()),
        (["--task", "unknown+reach"], "unknown+reach", "resolve", ("solver", "critic", "refiner")),
        (["--task", "coloring", "--refiner_mode", "revise"], "coloring", "revise", ()),
        (["--task", "unknown", "--audit", "critic"], "unknown", "resolve", ("critic",)),
    ],
)
def test_the_main_jobs_option_defaults_follow_its_task(argv, task, refiner_mode, audit):
    """The main job's option defaults follow its task: coloring patches (and its critic's scan
    gets more tokens), the other tasks re-solve and audit; a flag always wins
    (`envs.EnvSpec.run_options`)."""
    from trainers.run.cli import make_parser

    parser, _ = make_parser("grpo", "math/reflection-v0")
    job, config = parser.parse_args_and_config(argv)
    assert job.env.task == task
    assert job.options["refiner_mode"] == refiner_mode and job.options["audit"] == audit
    # coloring's critic scans every edge: more tokens a turn than the other tasks' 96
    assert config.max_completion_length == (160 if task == "coloring" else 96)
    job, config = parser.parse_args_and_config([*argv, "--max_completion_length", "50"])
    assert config.max_completion_length == 50
