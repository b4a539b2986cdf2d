"""How a model plays a task family's roles: the family's own probe (`envs.tasks.family.
FamilyProbe`), with the model loaded here.

    mathteams probe FAMILY --model DIR [the family's flags]
    python scripts/probe_FAMILY.py --model DIR

The family (a registered `envs.TaskFamily` with a probe, `probe_families`) declares its flags
and the lines it prints; this module loads the model (default: the one that plays the family,
`trainers.embedded.model_for`) as a policy and makes ``math/reflection-v0`` on the family as a
run plays it (the family's run protocol, `transcripts.family_protocol`). ``FAMILY --help``
shows the family's own description and flags.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import envs


def probe_families() -> list[str]:
    """The registered task families with a probe."""
    return [family.name for family in envs.families() if family.probe is not None]


def make_parser(family: str | None = None) -> argparse.ArgumentParser:
    """The probe's parser: the model's flags, and with `family` the family's own flags and
    description (without: the family is its first argument, and the flags are the model's)."""
    probe = envs.get_family(family).probe if family else None
    parser = argparse.ArgumentParser(
        description=probe.description if probe else __doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if probe is None:
        parser.add_argument("family", choices=probe_families(), help="the task family to probe")
    parser.add_argument("--model", default=None, help="a model folder (default: the shipped one)")
    parser.add_argument("--sample", action="store_true", help="sample at T=1 (default: greedy)")
    parser.add_argument("--max_new_tokens", type=int, default=_tokens(family))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    if probe is not None:
        probe.add_arguments(parser)
    return parser


def _tokens(family: str | None) -> int:
    """A turn's tokens: the family's run's (`max_completion_length`), else 96."""
    run = envs.spec("math/reflection-v0").run_defaults(family) if family else {}
    return int(run.get("max_completion_length", 96))


def probe_env(family: str) -> Any:
    """``math/reflection-v0`` on `family` as a run plays it, unwrapped."""
    from trainers.embedded.transcripts import family_protocol

    return envs.make("math/reflection-v0", task=family, **family_protocol(family)).unwrapped


def main(argv: list[str] | None = None) -> int:
    """Probe the family named first in `argv` (``FAMILY --model DIR``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in probe_families():
        make_parser().parse_args(argv)  # the family is missing or unknown: says so, exits
    family, argv = argv[0], argv[1:]
    args = make_parser(family).parse_args(argv)
    args.family = family
    import torch

    from agents.base import GenerationArguments
    from agents.hf import HFPolicy
    from trainers.embedded import resolve_model

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    generation = GenerationArguments(
        max_new_tokens=args.max_new_tokens, temperature=1.0, do_sample=args.sample
    )
    policy = HFPolicy.from_pretrained(resolve_model(args.model, args.family), generation)
    probe = envs.get_family(args.family).probe
    for line in probe.run(policy, probe_env(args.family), args):
        print(line, flush=True)
    return 0
