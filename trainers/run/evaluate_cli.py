"""``mathteams evaluate`` (``python scripts/evaluate.py``): evaluate policies on any registered env x task, with the metrics multi-agent papers report.

    python scripts/evaluate.py                                   # embedded model, reflection, unknown task
    python scripts/evaluate.py --env_id math/debate-v0 --num_problems 100 --json out.json
    python scripts/evaluate.py --task gsm8k --data_path ../shared/data/gsm8k/test.jsonl --model_name_or_path Qwen/Qwen2.5-0.5B-Instruct

Flags use the training scripts' names (``scripts/train_<env>.py``): --env_id, --data_path,
--model_name_or_path, --role_models ROLE=PATH,..., --max_completion_length (tokens per turn),
--num_envs, and the env's own options (--rounds, --num_agents, --refiner_mode...: one group
derived from its options dataclass). A training run's own before/after evaluation plays the same env with
--split and the problem count as its only overrides. A model a training run saved carries that
protocol (``final/mathteams.json``: env, task, levels, env options, tokens per turn, temperature;
`trainers.run.protocol`): evaluated, it plays it unless a flag overrides a value. The old dashed names (--num-problems,
--max-new-tokens, --model, --role-model, --role-adapters, ...) still work, with a warning.

Leads (unless --no_compare) with the team against the same model alone on the same problems,
compute-matched: the team's majority vote (maj1@turnK), final answer and first answer (pass1@turn1)
beside the model alone given the team's first-turn prompt (math/solve-v0's where they agree) with
k independent samples per problem (mean pass@1 and majority vote maj@k, for each k of --alone-k:
by default 1, 3 and the team's generations per episode), tokens per episode on both sides, and
paired bootstrap intervals on team - alone; procedural tasks per level. The model alone is also
matched in tokens: the first k whose samples spend the team's tokens per episode (enough samples
are drawn for it, up to 10 per problem), and the stronger of the two baselines is named. A team
with a tool (math/tool-v0) is also set against the same model alone WITH the same interpreter
(math/code-v0: the executor writes one program, run in the same sandbox), sampled and matched
the same way, in a second table ("alone + tool"; ``compare_tool`` in --json). Then the
verification gap per level (the accuracy of the first answers the first review accepted minus
that of all first answers) beside the critic's true-positive and true-negative rates, fixes,
breaks and the model alone's pass@k - maj@k; then accuracy (the final answer), pass@k (with
--samples >= k), pass1@turnK, the wrong->right / right->wrong flip rates per round and
per-agent metrics. --plot writes accuracy against generations and tokens (the alone maj@k curve,
the team's answers as points).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import envs
from envs.tasks import is_procedural
from envs.tasks.problems import ProblemSet
from trainers.algorithms.checkpoint import atomic_path
from trainers.embedded import EMBEDDED_TASK
from trainers.evaluation.evaluate import EvalConfig, evaluate
from trainers.evaluation.report.plots import plot_compute
from trainers.evaluation.report.tables import markdown_report
from trainers.evaluation.splits import as_levels
from trainers.run.args import comma_items
from trainers.run.cli import defer_task_defaults, run_task
from trainers.run.options import add_group, option_kwargs
from trainers.run.problem_args import add_problem_flags, problem_arguments, problem_set_of
from trainers.run.protocol import describe, read_protocol


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


# Old flag -> its name in the training scripts' vocabulary; other dashed flags map to underscores.
RENAMED = {
    "--env": "--env_id",
    "--model": "--model_name_or_path",
    "--role-model": "--role_models",
    "--role-adapters": "--role_adapters_dir",  # training's --role_adapters is a bool
    "--max-new-tokens": "--max_completion_length",
}


def current_flags(argv: list[str]) -> list[str]:
    """`argv` with each deprecated flag (`RENAMED`, or dashes inside a name) renamed, warning
    once per flag (FutureWarning)."""
    out = []
    for arg in argv:
        flag, sep, value = arg.partition("=")
        if flag.startswith("--") and (flag in RENAMED or "-" in flag[2:]):
            new = RENAMED.get(flag, "--" + flag[2:].replace("-", "_"))
            warnings.warn(f"{flag} is deprecated; use {new}", FutureWarning, stacklevel=2)
            arg = new + sep + value
        out.append(arg)
    return out


DEFAULT_ENV = "math/reflection-v0"


def _given(argv: list[str], flag: str) -> str | None:
    """The value of `flag` in `argv` (its last one), before the full parse, or None."""
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument(flag, default=None)
    return getattr(pre.parse_known_args(argv)[0], flag[2:])


def chosen_env(argv: list[str], protocol: dict[str, Any] | None = None) -> str:
    """The ``--env_id`` of `argv` (its last one), before the full parse: its options group
    depends on it; else the `protocol`'s, else the default. An unknown id is left to the full
    parse, which names the choices."""
    env_id = _given(argv, "--env_id") or (protocol or {}).get("env_id") or DEFAULT_ENV
    return env_id if env_id in envs.list_envs() else DEFAULT_ENV


def trained_protocol(argv: list[str]) -> tuple[dict[str, Any] | None, str | None]:
    """The protocol the evaluated model was trained in (`trainers.run.protocol`: the
    mathteams.json of ``--role_adapters_dir``, else of ``--model_name_or_path``) and its
    folder; (None, None) for a model without one. A protocol of another env than ``--env_id``
    does not apply."""
    for flag in ("--role_adapters_dir", "--model_name_or_path"):
        folder = _given(argv, flag)
        protocol = read_protocol(folder)
        if protocol is not None:
            env_id = _given(argv, "--env_id")
            if env_id is not None and env_id != protocol["env_id"]:
                print(f"{folder} was trained on {protocol['env_id']}: its protocol does not apply")
                return None, None
            return protocol, folder
    return None, None


def protocol_defaults(protocol: dict[str, Any], option_names: list[str]) -> dict[str, Any]:
    """The parser defaults that play `protocol`: its task, tokens per turn, temperature and the
    env's options (a sequence as the flag writes it: ``solver,critic``). Options the env's group
    has no flag for go to ``env_option``'s defaults."""
    defaults: dict[str, Any] = {"env_id": protocol["env_id"], "task": protocol.get("task")}
    for name in ("max_completion_length", "temperature"):
        if protocol.get(name) is not None:
            defaults[name] = protocol[name]
    extra = []
    for name, value in protocol.get("env_options", {}).items():
        if name in option_names:
            defaults[name] = ",".join(value) if isinstance(value, list) else value
        else:
            extra.append((name, value))
    if extra:
        defaults["env_option"] = extra
    return {k: v for k, v in defaults.items() if v is not None}


def make_parser(env_id: str = DEFAULT_ENV) -> argparse.ArgumentParser:
    """The evaluation's parser; `env_id`'s own options (rounds, agents, rewards, protocol) are
    one group of it, derived from the env's options dataclass (`trainers.run.options`), as in
    the training scripts."""
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    _add_problem_flags(parser, env_id)
    _add_model_flags(parser)
    _add_sampling_flags(parser)
    _add_comparison_flags(parser)
    _add_env_flags(parser, env_id)
    _add_output_flags(parser)
    return parser


def _add_problem_flags(parser: argparse.ArgumentParser, env_id: str = DEFAULT_ENV) -> None:
    """The env, and the problems it plays: a group derived from `ProblemSet`'s fields
    (`trainers.run.problem_args`), as the training scripts' is."""
    parser.add_argument("--env_id", default=DEFAULT_ENV, choices=envs.list_envs())
    group = problem_arguments(
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
        defaults={"task": run_task(env_id) or EMBEDDED_TASK, "count": 200},
        helps={
            "task": "default: the task a run of the env plays (envs.EnvSpec.run_task; unknown)",
            "levels": "levels of a generated task (default: the task's declared defaults, or "
            "the trained protocol's, that hold their share of --num_problems as distinct "
            "problems of the split)",
        },
    )
    add_problem_flags(parser, group, choices={"task": envs.list_tasks()})
    parser.set_defaults(problem_group=group)


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
        default=[],
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
    parser.add_argument("--ensemble_size", type=int, default=3, help="K instruction variants")


def _add_sampling_flags(parser: argparse.ArgumentParser) -> None:
    """How episodes are sampled: samples per problem, decoding, device, batching, seed."""
    parser.add_argument("--samples", type=int, default=1, help="episodes per problem (for pass@k)")
    parser.add_argument("--k", type=int, nargs="+", default=[1], help="pass@k values")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--greedy", action="store_true", help="greedy decoding (default: sample)")
    parser.add_argument(
        "--device", default=None, help="where the models run, e.g. cuda (default: cpu)"
    )
    parser.add_argument(
        "--max_completion_length",
        type=int,
        default=EvalConfig.max_completion_length,
        help="tokens per turn (the training scripts' name)",
    )
    parser.add_argument("--num_envs", type=int, default=64, help="env copies batched per turn")
    parser.add_argument("--seed", type=int, default=0)


def _add_comparison_flags(parser: argparse.ArgumentParser) -> None:
    """The team against the same model alone: whether, and the k its votes are over."""
    parser.add_argument(
        "--no_compare", action="store_true", help="skip the same-model-alone baseline"
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


def _add_env_flags(parser: argparse.ArgumentParser, env_id: str) -> None:
    """The team env's kwargs: --env_option for any, and `env_id`'s options group (its names in
    the parsed ``option_names``)."""
    parser.add_argument(
        "--env_option",
        type=_env_option,
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help="a kwarg of the team env beyond its options group (repeatable), e.g. verifier=math; "
        "its options have their own flags (--refiner_mode resolve)",
    )
    parser.set_defaults(option_names=add_group(parser, env_id))


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


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = current_flags(list(sys.argv[1:] if argv is None else argv))
    protocol, folder = trained_protocol(argv)
    env_id = chosen_env(argv, protocol)
    parser = make_parser(env_id)
    fields = {*parser.get_default("option_names"), "max_completion_length"}
    defaults_for = defer_task_defaults(parser, env_id, fields)
    if protocol is not None:  # the trained protocol, then the task's defaults, then the env's
        parser.set_defaults(**protocol_defaults(protocol, parser.get_default("option_names")))
    args = parser.parse_args(argv)
    for name, value in defaults_for(args.task).items():  # as the training scripts do
        if getattr(args, name) is None:
            setattr(args, name, value)
    if protocol is not None:
        if (
            args.difficulty is None
            and args.task == protocol.get("task")
            and is_procedural(args.task)
        ):
            trained = ProblemSet(
                args.task,
                split=args.split or "test",
                levels=as_levels(protocol.get("difficulty")) or None,
                count=args.num_problems,
                offset=args.offset,
            )
            args.difficulty = trained.held().level_list()
        print(describe(protocol, folder))
    items = [item for text in args.role_models for item in comma_items(text)]
    bad = [r for r in items if "=" not in r]
    if bad:
        parser.error(f"--role_models takes ROLE=PATH,... (e.g. critic=./critic), got {bad}")
    if args.plot is not None and (args.no_compare or args.env_id == "math/solve-v0"):
        parser.error("--plot draws the team against the model alone: drop --no_compare")
    role_models = dict(r.split("=", 1) for r in items)
    config = EvalConfig(
        env_id=args.env_id,
        problems=problem_set_of(args.problem_group, args),
        model=args.model_name_or_path,
        role_models=role_models,
        role_adapters_dir=args.role_adapters_dir,
        ensemble=args.ensemble,
        ensemble_size=args.ensemble_size,
        samples=args.samples,
        ks=args.k,
        temperature=args.temperature,
        greedy=args.greedy,
        device=args.device,
        max_completion_length=args.max_completion_length,
        num_envs=args.num_envs,
        seed=args.seed,
        compare=not args.no_compare,
        alone_ks=args.alone_k,
        save_episodes=args.save_episodes,
        progress=True,
        env_options={
            **option_kwargs(args.env_id, {n: getattr(args, n) for n in args.option_names}),
            **dict(args.env_option or []),
        },
    )
    start = time.perf_counter()
    results = evaluate(config)
    results["seconds"] = time.perf_counter() - start
    print(markdown_report(results))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    if args.plot is not None:
        with atomic_path(args.plot) as tmp:
            plot_compute({"": results}, tmp, f"{config.env_id} {config.task}")
        print(f"wrote {args.plot}")
    return results
