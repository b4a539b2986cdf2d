"""``mathteams evaluate`` (``python scripts/evaluate.py``): evaluate policies on any registered env x task, with the metrics multi-agent papers report.

    python scripts/evaluate.py                                   # embedded model, reflection, unknown task
    python scripts/evaluate.py --env_id math/debate-v0 --num_problems 100 --json out.json
    python scripts/evaluate.py --task gsm8k --data_path ../shared/data/gsm8k/test.jsonl --model_name_or_path Qwen/Qwen2.5-0.5B-Instruct

Flags use the training scripts' names (``scripts/train_<env>.py``): --env_id, --data_path,
--model_name_or_path, --role_models ROLE=PATH,..., --max_completion_length (tokens per turn),
--num_envs, and the env's own options (--rounds, --num_agents, --refiner_mode...: one group
derived from its options dataclass). A training run's own before/after evaluation plays the same env with
--split and the problem count as its only overrides. A model a training run saved carries its
run's own after-training evaluation (``final/mathteams.json``: the env, task, levels, env options,
tokens per turn, temperature, samples; `trainers.evaluation.saved`): evaluated, it replays it
unless a flag overrides a value. The old dashed names (--num-problems,
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

import json
import sys
import time
import warnings
from dataclasses import replace
from typing import Any

import envs
from envs.tasks.problems import DEFAULT_TASK, ProblemSet
from trainers.algorithms.checkpoint import atomic_path
from trainers.evaluation.config import NUM_PROBLEMS
from trainers.evaluation.evaluate import EvalConfig, evaluate
from trainers.evaluation.report.plots import plot_compute
from trainers.evaluation.report.tables import markdown_report
from trainers.evaluation.saved import Saved, read_saved, trained_evaluation
from trainers.run.args import comma_items
from trainers.run.evaluate_args import ProblemArguments, make_parser
from trainers.run.options import group_defaults, option_kwargs

# Old flag -> its name in the training scripts' vocabulary; other dashed flags map to underscores.
RENAMED = {
    "--env": "--env_id",
    "--model": "--model_name_or_path",
    "--role-model": "--role_models",
    "--role-adapters": "--role_adapters_dir",  # training's --role_adapters is a bool
    "--max-new-tokens": "--max_completion_length",
}
# The players' and sampling flags -> `EvalConfig.of`'s names for them.
FLAT = {
    "model_name_or_path": "model",
    **{n: n for n in ("role_adapters_dir", "ensemble", "ensemble_size", "device")},
    **{n: n for n in ("samples", "greedy", "num_envs", "seed", "save_episodes")},
    "k": "ks",
    "alone_k": "alone_ks",
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


def trained(args: Any) -> tuple[Saved | None, str | None]:
    """What the evaluated model carries (`trainers.evaluation.saved`: the mathteams.json of
    ``--role_adapters_dir``, else of ``--model_name_or_path``) and its folder; (None, None) for
    a model without one, or one trained on another env than ``--env_id`` (said)."""
    for folder in (args.role_adapters_dir, args.model_name_or_path):
        saved = read_saved(folder)
        if saved is None:
            continue
        if args.env_id is not None and args.env_id != saved.protocol.env_id:
            print(f"{folder} was trained on {saved.protocol.env_id}: its evaluation does not apply")
            return None, None
        return saved, folder
    return None, None


def resolve(args: Any, error: Any) -> EvalConfig:
    """The `EvalConfig` parsed `args` ask for: each flag given, else the evaluated model's
    own evaluation (`trained`), else the env's run defaults for the task, else `EvalConfig`'s.
    `error` is the parser's (an option of another env, a malformed --role_models)."""
    saved, folder = trained(args)
    base = EvalConfig() if saved is None else trained_evaluation(saved, folder)
    env_id = args.env_id or base.env_id  # the defaults' env is envs.protocol.DEFAULT_ENV
    _refuse_foreign_options(args, env_id, error)
    problems = _problems(args, saved, base, env_id)
    run = envs.spec(env_id).run_defaults(problems.task)
    flat = _given(args, error)
    config = base.replaced(
        env_id=env_id,
        problems=problems,
        env_options=_options(args, saved, base, env_id, run),
        max_completion_length=args.max_completion_length
        or (None if saved is None else base.protocol.max_completion_length)
        or run.get("max_completion_length"),
        temperature=base.protocol.temperature if args.temperature is None else args.temperature,
        progress=True,
        **flat,
    )
    if saved is not None:
        print(
            f"plays the evaluation {folder} was trained for (flags override): "
            f"{config.protocol.describe()}"
        )
    return config


def _refuse_foreign_options(args: Any, env_id: str, error: Any) -> None:
    """`error` naming each option given that `env_id` does not take, and the envs that do."""
    takers = args.option_takers
    wrong = [n for n in takers if getattr(args, n) is not None and env_id not in takers[n]]
    if wrong:
        named = "; ".join(f"--{n} is {', '.join(takers[n])}'s" for n in wrong)
        error(
            f"{env_id} takes no option {', '.join('--' + n for n in wrong)} ({named}): pass "
            f"--env_id {takers[wrong[0]][0]} or drop it"
        )


def _problems(args: Any, saved: Saved | None, base: EvalConfig, env_id: str) -> ProblemSet:
    """The problems: the flags given over the trained model's evaluation's (its task's; its
    training levels held for the count) or the env's run task's, completed
    (`ProblemSet.evaluated`)."""
    given = {k: getattr(args, f) for k, f in ProblemArguments.PROBLEM_FLAGS.items()}
    given = {k: v for k, v in given.items() if v is not None}
    task = given.get("task") or (
        base.task if saved is not None else envs.spec(env_id).run_task or DEFAULT_TASK
    )
    if saved is not None and task == base.task:  # the run's problems, its training levels
        problems, inherited = base.problems, saved.protocol.problems.levels
    else:
        problems, inherited = ProblemSet(task, count=NUM_PROBLEMS), None
    levels = given.pop("levels", None) or None
    return replace(problems, **given, levels=levels).evaluated(inherited)


def _options(
    args: Any, saved: Saved | None, base: EvalConfig, env_id: str, run: dict[str, Any]
) -> dict[str, Any]:
    """The team env's options: those given over the trained model's (else the env's options
    group's defaults with its run defaults for the task), then ``--env_option``'s."""
    names = [n for n, takers in args.option_takers.items() if env_id in takers]
    given = {n: getattr(args, n) for n in names if getattr(args, n) is not None}
    if saved is not None:
        options = dict(base.env_options())
    else:
        defaults = {**group_defaults(env_id), **{k: v for k, v in run.items() if k in names}}
        options = option_kwargs(env_id, defaults)
    return {**options, **option_kwargs(env_id, given), **dict(args.env_option or [])}


def _given(args: Any, error: Any) -> dict[str, Any]:
    """The players' and the sampling flags given, under `EvalConfig.of`'s names."""
    flat = {name: getattr(args, flag) for flag, name in FLAT.items()}
    flat = {name: value for name, value in flat.items() if value is not None}
    if args.no_compare:
        flat["compare"] = False
    if args.role_models is not None:
        items = [item for text in args.role_models for item in comma_items(text)]
        bad = [r for r in items if "=" not in r]
        if bad:
            error(f"--role_models takes ROLE=PATH,... (e.g. critic=./critic), got {bad}")
        flat["role_models"] = dict(r.split("=", 1) for r in items)
    return flat


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = current_flags(list(sys.argv[1:] if argv is None else argv))
    parser = make_parser(__doc__)
    args = parser.parse_args(argv)
    config = resolve(args, parser.error)
    if args.plot is not None and (not config.compare or config.env_id == "math/solve-v0"):
        parser.error("--plot draws the team against the model alone: drop --no_compare")
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
