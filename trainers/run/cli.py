"""The shared entry point of the ``scripts/train_<env>.py`` scripts and ``mathteams train ENV``
(TRL-style parsing).

Each algorithm is one `ALGOS` entry: the module that holds it (in `trainers.algorithms`), the
name of its config dataclass there (a TRL config subclass with CPU defaults), the name of its train
function ``train(job: Job, config) -> dict`` in `trainers.run.train`, and which envs it applies
to: a test of the env's static facts (`envs.options.EnvFacts`, read with no env built; None: every
env). SFT and DPO cut their rows from answers and reviews of them (`reviewed`): reflection, the
tool env, any env whose facts state both. Nothing of TRL is imported until an algorithm is
picked. What a run of an env plays beyond its options class's defaults is stated where the env
is registered (`envs.EnvSpec.run_task`, `envs.EnvSpec.run_options`, the reasons beside them), so
a script, ``mathteams train`` and ``mathteams evaluate`` play the same protocol.
"""

from __future__ import annotations

import dataclasses
import importlib
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envs.options import EnvFacts

TRAIN_MODULE = "trainers.run.train"


def reviewed(facts: EnvFacts) -> bool:
    """Whether an env's turns hold answers and reviews of them (its facts' ``answer_roles`` and
    ``review_roles`` both non-empty): what SFT's good turns (right answers, right verdicts) and
    DPO's pairs (first answers, revisions, reviews) are cut from."""
    return bool(facts.answer_roles) and bool(facts.review_roles)


@dataclass(frozen=True)
class Algo:
    module: str
    config: str
    train: str
    # The envs it applies to, a test of their facts; None: every registered env.
    applies: Callable[[EnvFacts], bool] | None = None

    def load(self) -> tuple[type, Any]:
        config = getattr(importlib.import_module(self.module), self.config)
        return config, getattr(importlib.import_module(TRAIN_MODULE), self.train)

    def applies_to(self, env_id: str) -> bool:
        """Whether it applies to the registered `env_id`: always without a test; else the test
        of the env's facts (an env registered without an options class states none: no)."""
        if self.applies is None:
            return True
        import envs

        env_spec = envs.spec(env_id)
        return env_spec.options is not None and self.applies(env_spec.facts())


ALGOS: dict[str, Algo] = {
    "grpo": Algo("trainers.algorithms.grpo_config", "CPUGRPOConfig", "train_grpo"),
    "ppo": Algo("trainers.algorithms.ppo", "CPUPPOConfig", "train_ppo"),
    "sft": Algo("trainers.algorithms.sft", "CPUSFTConfig", "train_sft", reviewed),
    "dpo": Algo("trainers.algorithms.dpo", "CPUDPOConfig", "train_dpo", reviewed),
}
ADAPTER_ALGOS = ("grpo", "ppo")  # the ones that can train a LoRA adapter or a model per role


def task_defaults(env_id: str, task: str | None) -> dict[str, Any]:
    """`env_id`'s run defaults for `task` (`envs.EnvSpec.run_options`: the task's entry, else
    ``"*"``; a mixed task reads ``"*"``), which training and evaluation both apply."""
    import envs

    return envs.spec(env_id).run_defaults(task)


def run_task(env_id: str) -> str | None:
    """The task a run of `env_id` plays when none is given (`envs.EnvSpec.run_task`)."""
    import envs

    return envs.spec(env_id).run_task


def available(env_id: str) -> list[str]:
    """Algorithms that apply to `env_id` (`Algo.applies_to`) and whose module is present."""
    names = []
    for name, algo in ALGOS.items():
        if not algo.applies_to(env_id):
            continue
        if importlib.util.find_spec(algo.module) is None:
            continue
        names.append(name)
    return names


def make_parser(algo: str, env_id: str, defaults: dict[str, Any] | None = None) -> tuple[Any, Any]:
    """A `RunParser` over the run's argument groups and the algorithm's config, and the train
    function.

    `defaults` are the script's own defaults for any field (a --config file and flags override).
    Defaults the algorithm derives from the env (GRPO's batch: every turn slot x G) are derived
    after parsing, from the parsed env (its ``--rounds``, ``--num_agents``, flags or --config).
    """
    names = available(env_id)
    if algo not in names:
        raise SystemExit(f"unknown algorithm {algo!r} for {env_id}; available: {', '.join(names)}")
    from trainers.run.parser import RunParser

    config_cls, train = ALGOS[algo].load()
    parser = RunParser(config_cls, env_id)
    script_defaults: dict[str, Any] = {
        "env_id": env_id,
        "output_dir": f"outputs/{env_id.split('/')[1]}_{algo}",
    }
    task = run_task(env_id)
    if task:
        script_defaults["task"] = task
    script_defaults.update(defaults or {})
    parser.set_defaults(**script_defaults)
    from trainers.run.args import GROUPS

    groups = (*GROUPS, parser.options_cls, config_cls)
    fields = {f.name for group in groups if group is not None for f in dataclasses.fields(group)}
    parser.task_defaults = defer_task_defaults(parser, env_id, fields, set(defaults or {}))
    return parser, train


def defer_task_defaults(
    parser: Any, env_id: str, fields: set[str], keep: set[str] = frozenset()
) -> Any:
    """Make the options of `parser` whose default depends on the task (the env's run options,
    `envs.EnvSpec.run_tables`, less
    `keep`) default to None, and return ``task -> {option: default}``: the task's value or the
    parser's own default, for each option no flag or --config set (the training scripts'
    `RunParser` and ``scripts/evaluate.py`` fill them after parsing). Options not among the
    parser's `fields` (an algorithm without max_completion_length) are left alone."""
    import envs

    tasked = {name for table in envs.spec(env_id).run_tables().values() for name in table}
    tasked = (tasked & set(fields)) - set(keep)
    base = {name: parser.get_default(name) for name in tasked}
    parser.set_defaults(**dict.fromkeys(tasked))

    def defaults_for(task: str | None) -> dict[str, Any]:
        chosen = task_defaults(env_id, task)
        return {**base, **{k: v for k, v in chosen.items() if k in tasked}}

    return defaults_for


# Old flag -> its one name now (tokens per turn: TRL's per-turn cap, in training and evaluation).
RENAMED = {"--rollout_max_new_tokens": "--max_completion_length"}


def current_flags(argv: Sequence[str]) -> list[str]:
    """`argv` with each deprecated flag (`RENAMED`) renamed, with a FutureWarning."""
    out = []
    for arg in argv:
        flag, sep, value = arg.partition("=")
        if flag in RENAMED:
            warnings.warn(f"{flag} is deprecated; use {RENAMED[flag]}", FutureWarning, stacklevel=2)
            arg = RENAMED[flag] + sep + value
        out.append(arg)
    return out


def run_script(
    env_id: str,
    argv: Sequence[str],
    doc: str | None = None,
    defaults: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``[algo] [flags]``: the algorithm defaults to grpo; flags override a --config file, which
    overrides the script's `defaults`."""
    argv = current_flags(argv)
    algo = argv.pop(0) if argv and not argv[0].startswith("-") else "grpo"
    if argv[:1] in (["-h"], ["--help"]) and doc:
        print(doc)
        print(f"algorithms for {env_id}: {', '.join(available(env_id))}\n")
    parser, train = make_parser(algo, env_id, defaults)
    job, config, unknown = parser.parse_args_and_config(argv, return_remaining_strings=True)
    if unknown:
        raise SystemExit(  # one line, not argparse's page-long usage of every GRPOConfig field
            f"{parser.prog}: unrecognized arguments: {' '.join(unknown)} "
            f"(`{parser.prog} {algo} --help` lists every field)"
        )
    if job.env.env_id != env_id:
        raise SystemExit(
            f"{parser.prog}: --env_id {job.env.env_id} with {env_id}'s options; train it with "
            f"its own script or `mathteams train {job.env.env_id}`"
        )
    for flag in ("role_adapters", "role_models"):
        if getattr(job.model, flag) and algo not in ADAPTER_ALGOS:
            raise SystemExit(
                f"--{flag} applies to {' and '.join(ADAPTER_ALGOS)}, not {algo}; "
                f"{algo} trains the whole shared model"
            )
    from trainers.evaluation.held_out import OverlapError
    from trainers.precision import cpu_precision

    cpu_precision(config)  # --bf16 on a CPU: float32, said in the log

    try:
        return train(job, config)
    except OverlapError as err:  # a refusal before training, not a crash: one line, no traceback
        raise SystemExit(f"{parser.prog}: {err}") from None


def train_command(env_id: str, argv: Sequence[str]) -> dict[str, Any]:
    """``mathteams train ENV [ALGO] [flags]``: `run_script` for a registered `env_id` (the
    command, `mathteams.cli.train`, turns ENV's short name into it and refuses an unknown one)."""
    return run_script(env_id, argv, doc=f"Train the agents of `{env_id}`.")
