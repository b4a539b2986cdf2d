"""The training scripts' parser: TRL's `TrlParser` over the run's argument groups
(`trainers.run.args`) and an algorithm's config, parsed once."""

from __future__ import annotations

from typing import Any

from trl import TrlParser

from trainers.run.args import GROUPS, RunArguments


class RunParser(TrlParser):
    """TRL's `TrlParser` over `trainers.run.args.GROUPS` and an algorithm's config, in one
    parse: ``--help`` prints one section per group (env and run first, TRL's config last), and
    `parse_args_and_config` returns ``(RunArguments, config, ...)``.

    A config may derive defaults from the parsed env (`CPUGRPOConfig.derived_defaults`: the
    batch is every turn slot x G). Those fields default to None in the parser and are filled in
    the parsed namespace, before the config is built, unless a flag or --config set them.
    """

    def __init__(self, config_cls: type) -> None:
        super().__init__((*GROUPS, config_cls))
        self.usage = "%(prog)s [ALGORITHM] [--config FILE.yaml] [--FIELD VALUE ...]"
        self.groups = len(GROUPS)
        self.derive = getattr(config_cls, "derived_defaults", None)
        if self.derive is not None:
            self.set_defaults(**dict.fromkeys(config_cls.DERIVED))

    def parse_known_args(self, args=None, namespace=None):
        namespace, rest = super().parse_known_args(args, namespace)
        if self.derive is not None:
            for name, value in self.derive(namespace).items():
                if getattr(namespace, name, None) is None:
                    setattr(namespace, name, value)
        return namespace, rest

    def parse_args_and_config(self, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        out = super().parse_args_and_config(*args, **kwargs)
        return (RunArguments.merge(*out[: self.groups]), *out[self.groups :])
