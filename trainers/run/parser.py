"""The training scripts' parser: TRL's `TrlParser` over the run's argument groups
(`trainers.run.args`), the env's options group (`trainers.run.options`) and an algorithm's
config, parsed once."""

from __future__ import annotations

from typing import Any

from trl import TrlParser

from trainers.run.args import GROUPS, Job
from trainers.run.options import option_kwargs, options_group


class RunParser(TrlParser):
    """TRL's `TrlParser` over `trainers.run.args.GROUPS`, `env_id`'s options group and an
    algorithm's config, in one parse: ``--help`` prints one section per group (the env and its
    options first, TRL's config last), and `parse_args_and_config` returns ``(Job, config,
    ...)``.

    A config may derive defaults from the parsed env (`CPUGRPOConfig.derived_defaults`: the
    batch is every turn slot x G). Those fields default to None in the parser and are filled in
    the parsed namespace, before the config is built, unless a flag or --config set them. So are
    the env options whose default depends on the task (``task_defaults``, set by
    `trainers.run.cli.make_parser`).
    """

    def __init__(self, config_cls: type, env_id: str) -> None:
        self.env_id = env_id
        self.options_cls = options_group(env_id)
        groups = (GROUPS[0], *([self.options_cls] if self.options_cls else []), *GROUPS[1:])
        super().__init__((*groups, config_cls))
        self.usage = "%(prog)s [ALGORITHM] [--config FILE.yaml] [--FIELD VALUE ...]"
        self.groups = len(groups)
        self.derive = getattr(config_cls, "derived_defaults", None)
        if self.derive is not None:
            self.set_defaults(**dict.fromkeys(config_cls.DERIVED))
        self.task_defaults: Any = None  # task -> option defaults (`trainers.run.cli`)

    def parse_known_args(self, args=None, namespace=None):
        namespace, rest = super().parse_known_args(args, namespace)
        if self.task_defaults is not None:  # options whose default depends on the task
            for name, value in self.task_defaults(getattr(namespace, "task", None)).items():
                if getattr(namespace, name, None) is None:
                    setattr(namespace, name, value)
        if self.derive is not None:
            for name, value in self.derive(namespace).items():
                if getattr(namespace, name, None) is None:
                    setattr(namespace, name, value)
        return namespace, rest

    def parse_args_and_config(self, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        out = super().parse_args_and_config(*args, **kwargs)
        parsed = list(out[: self.groups])
        options = option_kwargs(self.env_id, parsed.pop(1)) if self.options_cls else {}
        env, rollout, model, evaluation, warmup = parsed
        job = Job(env, options, rollout, model, evaluation, warmup)
        return (job, *out[self.groups :])
