"""The shared entry point of the ``scripts/train_<env>.py`` scripts (TRL-style parsing)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

ALGOS = ("grpo",)


def make_parser(algo: str, env_id: str) -> Any:
    """A `TrlParser` over (EnvArguments, the algorithm's config); ``--config x.yaml`` works."""
    from trl import TrlParser

    from trainers.args import CPUGRPOConfig, EnvArguments

    if algo not in ALGOS:
        raise SystemExit(f"unknown algorithm {algo!r}; available: {', '.join(ALGOS)}")
    import envs
    from trainers.grpo import turn_slots

    parser = TrlParser((EnvArguments, CPUGRPOConfig))
    # A step holds whole episodes: every turn slot of the env for each of the G generations.
    batch = turn_slots(envs.make(env_id)) * CPUGRPOConfig.num_generations
    parser.set_defaults(
        env_id=env_id,
        output_dir=f"outputs/{env_id.split('/')[1]}_{algo}",
        per_device_train_batch_size=batch,
    )
    return parser


def run_script(env_id: str, argv: Sequence[str], doc: str | None = None) -> dict[str, Any]:
    """``[algo] [flags]``: the algorithm defaults to grpo; flags override a --config file."""
    argv = list(argv)
    algo = argv.pop(0) if argv and not argv[0].startswith("-") else "grpo"
    if argv[:1] in (["-h"], ["--help"]) and doc:
        print(doc)
    env_args, config = make_parser(algo, env_id).parse_args_and_config(argv)
    from trainers.run import train_grpo

    return train_grpo(env_args, config)
