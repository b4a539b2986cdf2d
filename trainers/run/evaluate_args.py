"""``mathteams evaluate``'s flags: one `argparse` parser, the flags users type, each defaulting
to None ("not given") so that what is not given comes from the evaluated model's own evaluation
(`trainers.evaluation.saved`), then from the env's run defaults, then from `EvalConfig`'s
(`trainers.run.evaluate_cli.resolve`). The problems are a group derived from
`envs.tasks.problems.ProblemSet`'s fields and the envs' options one group derived from their
options dataclasses (`trainers.run.problem_args`, `trainers.run.options`), as in the training
scripts; every env's options are flags, and one the chosen env does not take is refused there.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import envs
from envs.protocol import DEFAULT_ENV
from trainers.evaluation.config import NUM_PROBLEMS
from trainers.run.options import add_all_groups
from trainers.run.problem_args import add_problem_flags, problem_arguments

ProblemArguments = problem_arguments(
    "EvaluateProblemArguments",
    {
        "task": "task",
        "data_path": "data_path",
        "split": "split",
        "levels": "difficulty",
        "count": "num_problems",
        "offset": "offset",
    },
    group="problems (which problems the team and the model alone play)",
    defaults={"task": None, "levels": None, "count": None, "offset": None},
    helps={
        "task": "default: the trained model's, else the task a run of the env plays "
        "(envs.EnvSpec.run_task; unknown)",
        "levels": "levels of a generated task (default: the trained model's, else the task's "
        "declared defaults, that hold their share of --num_problems as distinct problems of "
        "the split)",
        "count": f"how many problems (default: the trained model's evaluation's, else {NUM_PROBLEMS})",
        "offset": "the first problem's index (default: 0)",
    },
)


def _ks(text: str) -> list[int]:
    try:
        ks = [int(k) for k in text.split(",") if k.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected ints like 1,3,5, got {text!r}") from None
    if not ks or any(k < 1 for k in ks):
        raise argparse.ArgumentTypeError(f"expected ints >= 1 like 1,3,5, got {text!r}")
    return ks


def _env_option(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with VALUE read as JSON where it parses (``2``, ``true``, ``["critic"]``),
    else as a string (``resolve``)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(
            f"expected KEY=VALUE like refiner_mode=resolve, got {text!r}"
        )
    try:
        return key.strip(), json.loads(value)
    except json.JSONDecodeError:
        return key.strip(), value


def make_parser(description: str | None = None) -> argparse.ArgumentParser:
    """The evaluation's parser: every flag defaults to None, not given (the module's doc)."""
    parser = argparse.ArgumentParser(
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    _add_problem_flags(parser)
    _add_model_flags(parser)
    _add_sampling_flags(parser)
    _add_comparison_flags(parser)
    _add_env_flags(parser)
    _add_output_flags(parser)
    return parser


def _add_problem_flags(parser: argparse.ArgumentParser) -> None:
    """The env, and the problems it plays: a group derived from `ProblemSet`'s fields
    (`trainers.run.problem_args`), as the training scripts' is."""
    parser.add_argument(
        "--env_id",
        default=None,
        choices=envs.list_envs(),
        help=f"default: the trained model's, else {DEFAULT_ENV}",
    )
    add_problem_flags(parser, ProblemArguments, choices={"task": envs.list_tasks()})


def _add_model_flags(parser: argparse.ArgumentParser) -> None:
    """Who plays: the model, per-role models or adapters, an ensemble of instruction variants."""
    parser.add_argument(
        "--model_name_or_path",
        default=None,
        help="hub id or local folder; default: the shipped embedded model",
    )
    parser.add_argument(
        "--role_models",
        action="append",
        default=None,
        metavar="ROLE=PATH,...",
        help="a different model for some roles, e.g. critic=./critic,refiner=./refiner "
        "(a run with --role_models writes final/<role>/; repeatable)",
    )
    parser.add_argument(
        "--role_adapters_dir",
        default=None,
        metavar="FOLDER",
        help="one LoRA adapter per role in FOLDER/<role>/ on top of --model_name_or_path (the "
        "final/ of a run with --role_adapters true)",
    )
    parser.add_argument(
        "--ensemble",
        default=None,
        choices=["majority_vote", "hidden_state_mean", "hidden_state_weighted"],
        help="answer with an ensemble of instruction variants (answering roles)",
    )
    parser.add_argument(
        "--ensemble_size", type=int, default=None, help="K instruction variants (default: 3)"
    )


def _add_sampling_flags(parser: argparse.ArgumentParser) -> None:
    """How episodes are sampled: samples per problem, decoding, device, batching, seed."""
    parser.add_argument(
        "--samples", type=int, default=None, help="episodes per problem, for pass@k (default: 1)"
    )
    parser.add_argument("--k", type=int, nargs="+", default=None, help="pass@k values (default: 1)")
    parser.add_argument(
        "--temperature", type=float, default=None, help="default: the trained model's, else 1.0"
    )
    parser.add_argument(
        "--greedy", action="store_true", default=None, help="greedy decoding (default: sample)"
    )
    parser.add_argument(
        "--device", default=None, help="where the models run, e.g. cuda (default: cpu)"
    )
    parser.add_argument(
        "--max_completion_length",
        type=int,
        default=None,
        help="tokens per turn, the training scripts' name (default: the trained model's, else "
        "the env's run default for the task, else 96)",
    )
    parser.add_argument(
        "--num_envs", type=int, default=None, help="env copies batched per turn (default: 64)"
    )
    parser.add_argument("--seed", type=int, default=None, help="default: 0")


def _add_comparison_flags(parser: argparse.ArgumentParser) -> None:
    """The team against the same model alone: whether, and the k its votes are over."""
    parser.add_argument(
        "--no_compare",
        action="store_true",
        default=None,
        help="skip the same-model-alone baseline",
    )
    parser.add_argument(
        "--alone_k",
        type=_ks,
        default=None,
        metavar="K,K,...",
        help="samples per problem the model alone votes over (maj@k), e.g. 1,3,5 "
        "(default: 1, 3 and the team's generations per episode; the k matched in tokens "
        "joins them)",
    )


def _add_env_flags(parser: argparse.ArgumentParser) -> None:
    """The team env's kwargs: --env_option for any, and every env's options as one group (the
    envs taking each option in the parsed ``option_takers``)."""
    parser.add_argument(
        "--env_option",
        type=_env_option,
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help="a kwarg of the team env beyond its options group (repeatable), e.g. verifier=math; "
        "its options have their own flags (--refiner_mode resolve)",
    )
    parser.set_defaults(option_takers=add_all_groups(parser))


def _add_output_flags(parser: argparse.ArgumentParser) -> None:
    """What is written beside the printed report: episodes, metrics, the compute plot."""
    parser.add_argument("--save_episodes", type=Path, default=None, help="write episodes as JSONL")
    parser.add_argument("--json", type=Path, default=None, help="write the metrics as JSON")
    parser.add_argument(
        "--plot",
        type=Path,
        default=None,
        metavar="PATH",
        help="write accuracy against compute as a PNG: the model alone's maj@k for k = 1..its "
        "samples against generations and tokens, the team's answers as points",
    )
