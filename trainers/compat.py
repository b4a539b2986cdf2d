"""Every touch of TRL's and transformers' private API, and the versions it was written against.

The multi-agent trainers build on TRL's `GRPOTrainer` (and transformers' `Trainer` under it) where
TRL offers no public hook: they override private methods, read private attributes and import
from modules outside TRL's top-level API. None of that carries a compatibility promise, so this
module is the one place that does it, and it fails loudly when the installed versions do not fit.

Design
------
**Versions.** `SUPPORTED` holds the ranges ``pyproject.toml`` pins (a test keeps the two equal).
`check_versions` runs at import. trl and transformers (`STRICT`), whose private API is used here,
must be inside their range: outside it an `ImportError` names the installed version, the
supported range, the private names that need it, and the ``pip install`` that fixes it.
``MATHTEAMS_ALLOW_UNSUPPORTED=1`` turns that error into a warning, to try a new release; the
private-API check below still runs, and still raises. torch, accelerate, peft and datasets are
used through their public API only, as are math-verify, gymnasium and pettingzoo (but for the
helpers below): outside their tested range they warn.

**Private names**, each declared once here (a `Private`) and checked by `check_private_api` at
import, which raises an `AttributeError` naming the class, the attribute and the installed
version when one is gone:

- `HOOKS`: upstream methods that project classes *override* (`_prepare_inputs`,
  `_compute_loss`, ... and `save_model`, whose ``_internal_call`` parameter is private). An
  override cannot move into this module, so each overriding method is decorated with `hook`,
  which refuses a name not declared here; the check verifies that every declared method still
  exists upstream and still takes, in order, the leading parameters the overrides rely on (they
  call ``super()._x(a, b)`` positionally, which would break silently if upstream reordered them;
  TRL 1.14 did change `_get_per_token_logps_and_entropies`). Inside a `hook` method,
  ``super().<its own name>`` is the one private touch allowed outside this module.
- `ATTRIBUTES`: upstream attributes the project reads or writes, only through the accessors
  below (`buffered_inputs`, `log_metric`, `tied_weight_keys`, ...). Those set in
  ``GRPOTrainer.__init__`` exist only on an instance: `check_trainer` checks them on the trainer
  as it is built (`trainers.algorithms.microbatch.LengthGroupedMixin`).
- `INTERNAL`: names imported from modules outside TRL's and transformers' top-level API
  (`add_fused_lm_head` appeared in ``trl.trainer.utils`` in TRL 1.15; ``VLLMClient`` moved from
  ``trl.extras`` to ``trl.generation``), re-exported from here; ``VLLMClient`` is resolved on
  first use, since importing its module pulls in the vLLM client's optional dependencies.
- Behaviour with no promise: `rollout_columns` reads the columns of the rollout function's rows
  where ``_generate_and_score_completions`` puts them for the reward functions, into the
  generation batch's input rows (in place); it raises, naming the columns there, if TRL stops.

**Subclassed classes.** `BASES` declares every trl / transformers class a project class
subclasses (a `Base`), with the methods the subclasses override, checked at import by
`check_private_api`: a subclass depends on how upstream's code drives it, more than a caller does.
Most are documented extension points (`GRPOTrainer`, TRL's configs, `TrainerCallback`, logits
processors, stopping criteria); ``internal`` marks the one that is not: transformers'
`DynamicLayer`, the cache layer continuous batching's `agents.kv_cache.BufferLayer` extends (it
relies on how transformers' attention calls a cache layer). `agents/` may not import `trainers`,
so, as with the PettingZoo helpers below, its subclasses import their base themselves and are
declared here; `tests/test_private_api.py` fails on a class of the packages whose trl or
transformers base `BASES` does not declare, and on a declared base no class subclasses.

`PETTINGZOO_HELPERS` lists PettingZoo's `AECEnv` bookkeeping helpers (``_was_dead_step``, ...):
underscore names, but the env-author API PettingZoo's own environments use. `envs/` calls them
directly (it may not import `trainers`); they are declared here so the private-API test knows
them and `check_private_api` checks they exist.

`tests/test_private_api.py` parses every project file and fails, with file:line, on any private
upstream name (a declared one, or an ``obj._x`` whose name the project never defines) used
outside this module and outside a `hook` method's ``super()`` call.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import os
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

ALLOW_UNSUPPORTED = "MATHTEAMS_ALLOW_UNSUPPORTED"

SUPPORTED: dict[str, str] = {
    "trl": ">=1.16,<1.17",
    "transformers": ">=5.23,<5.24",
    "torch": ">=2.13,<3",
    "accelerate": ">=1.15,<2",
    "peft": ">=0.21,<0.22",
    "datasets": ">=5.2,<6",
    "math-verify": ">=0.9,<0.10",
    "gymnasium": ">=1.4,<2",
    "pettingzoo": ">=1.27,<2",
}
"""Tested ranges, as ``pyproject.toml`` pins them (its comment says why each bound)."""

STRICT = ("trl", "transformers")
"""Distributions whose private API is used here: outside `SUPPORTED` is an error, not a warning."""


@dataclass(frozen=True)
class Private:
    """One upstream private name the project relies on.

    Args:
        owner (`str`): ``"module:Class"`` holding the name, or ``"module"`` for a module-level one.
        name (`str`): the attribute, method or function name.
        dist (`str`): the distribution that ships it (named in version errors).
        params (`tuple[str, ...]`, ()): for a method, the leading parameters relied on, in order.
        instance (`bool`, False): set in ``__init__``, so checked on an instance (`check_trainer`).
    """

    owner: str
    name: str
    dist: str
    params: tuple[str, ...] = ()
    instance: bool = False

    @property
    def where(self) -> str:
        """``Class.name`` (or ``module.name``) as error messages show it."""
        module, _, cls = self.owner.partition(":")
        return f"{cls or module}.{self.name}"


_GRPO = "trl.trainer.grpo_trainer:GRPOTrainer"
_TRAINER = "transformers.trainer:Trainer"

HOOKS: dict[str, Private] = {
    p.name: p
    for p in (
        Private(_GRPO, "_prepare_inputs", "trl", ("self", "generation_batch")),
        Private(_GRPO, "_generate_and_score_completions", "trl", ("self", "inputs")),
        Private(
            _GRPO,
            "_get_per_token_logps_and_entropies",
            "trl",
            ("self", "model", "input_ids", "attention_mask", "logits_to_keep", "batch_size"),
        ),
        Private(_GRPO, "_compute_loss", "trl", ("self", "model", "inputs")),
        Private(
            _TRAINER,
            "_load_from_checkpoint",
            "transformers",
            ("self", "resume_from_checkpoint", "model"),
        ),
        Private(_TRAINER, "_save", "transformers", ("self", "output_dir", "state_dict")),
        Private(_TRAINER, "save_model", "transformers", ("self", "output_dir", "_internal_call")),
    )
}
"""Upstream methods overridden by project classes (each override is marked with `hook`)."""

ATTRIBUTES: dict[str, Private] = {
    p.name: p
    for p in (
        Private(_GRPO, "_buffered_inputs", "trl", instance=True),
        Private(_GRPO, "_step", "trl", instance=True),
        Private(_GRPO, "_metrics", "trl", instance=True),
        Private(
            "transformers.modeling_utils:PreTrainedModel", "_tied_weights_keys", "transformers"
        ),
    )
}
"""Upstream attributes read or written through this module's accessors."""

INTERNAL: dict[str, Private] = {
    p.name: p
    for p in (
        Private("trl.trainer.utils", "split_tensor_dict", "trl"),
        Private("trl.trainer.utils", "add_fused_lm_head", "trl"),
        Private("trl.trainer.utils", "disable_dropout_in_model", "trl"),
        Private("transformers.trainer", "TRAINING_ARGS_NAME", "transformers"),
        Private("trl.generation.vllm_client", "VLLMClient", "trl"),
    )
}
"""Names imported from outside TRL's and transformers' top-level API, re-exported here."""

LAZY = frozenset({"VLLMClient"})
"""`INTERNAL` names resolved on first use instead of at import."""

PETTINGZOO_HELPERS: dict[str, Private] = {
    name: Private("pettingzoo.utils.env:AECEnv", name, "pettingzoo")
    for name in (
        "_was_dead_step",
        "_accumulate_rewards",
        "_clear_rewards",
        "_deads_step_first",
        "_cumulative_rewards",
    )
}
"""PettingZoo's env-author bookkeeping API, called by `envs/` directly (see the docstring)."""


@dataclass(frozen=True)
class Base:
    """One upstream class that project classes subclass.

    Args:
        owner (`str`): ``"module:Class"``, the module that defines it (the class's
            ``__module__``, which may differ from where it is imported).
        dist (`str`): the distribution that ships it (named in version errors).
        overrides (`tuple[str, ...]`, ()): its public methods the subclasses override or extend
            (a private one is a `HOOKS` entry); each is checked to exist at import.
        internal (`bool`, False): not a documented extension point: the subclasses rely on how
            upstream's own code drives the class, with no compatibility promise at all.
    """

    owner: str
    dist: str
    overrides: tuple[str, ...] = ()
    internal: bool = False

    @property
    def where(self) -> str:
        """The class's name, as error messages show it."""
        return self.owner.partition(":")[2]


BASES: dict[str, Base] = {
    b.owner: b
    for b in (
        Base(_GRPO, "trl", ("training_step",)),  # its private overrides: `HOOKS`
        Base("trl.trainer.grpo_config:GRPOConfig", "trl"),
        Base("trl.trainer.sft_config:SFTConfig", "trl", ("__post_init__",)),
        Base("trl.trainer.dpo_config:DPOConfig", "trl", ("__post_init__",)),
        Base("trl.scripts.utils:TrlParser", "trl", ("parse_known_args", "parse_args_and_config")),
        Base(
            "transformers.trainer_callback:TrainerCallback",
            "transformers",
            ("on_train_begin", "on_step_end"),
        ),
        Base(
            "transformers.generation.logits_process:LogitsProcessor", "transformers", ("__call__",)
        ),
        Base(
            "transformers.generation.stopping_criteria:StoppingCriteria",
            "transformers",
            ("__call__",),
        ),
        Base(
            "transformers.cache_utils:DynamicLayer",
            "transformers",
            ("lazy_initialization", "update", "get_seq_length", "get_mask_sizes", "reset"),
            internal=True,
        ),
    )
}
"""Upstream classes project classes subclass, by ``"module:Class"`` (see the module docstring)."""

PUBLIC_SUBMODULES = ("trl.rewards",)
"""Submodules of trl / transformers that are documented public API (importable anywhere)."""


# ---------------------------------------------------------------------------------- versions
def installed_version(dist: str) -> str | None:
    """The installed version of distribution `dist`, or None when it is not installed."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _uses(dist: str) -> list[str]:
    declared = [*HOOKS.values(), *ATTRIBUTES.values(), *INTERNAL.values()]
    return [p.where for p in declared if p.dist == dist]


def version_problem(dist: str, version: str | None) -> str | None:
    """Why `version` of `dist` is outside `SUPPORTED` (None when it is inside or not installed)."""
    if version is None:
        return None
    spec = SUPPORTED[dist]
    try:
        inside = SpecifierSet(spec).contains(Version(version), prereleases=True)
    except InvalidVersion:
        inside = False
    if inside:
        return None
    if dist in STRICT:
        why = (
            f"supports {dist}{spec} because it uses {dist}'s private API ({', '.join(_uses(dist))})"
        )
    else:
        why = f"was tested with {dist}{spec} (it uses only {dist}'s public API, so it may work)"
    return f"{dist} {version} is installed; mathteams {why}. Fix: pip install '{dist}{spec}'"


def check_versions(versions: Mapping[str, str | None] | None = None) -> list[str]:
    """Compare installed versions with `SUPPORTED`; return the warnings given.

    Args:
        versions (`Mapping[str, str | None]`, None): versions to check instead of the installed
            ones (tests).

    Raises:
        ImportError: trl or transformers outside its range, unless the environment variable
            ``MATHTEAMS_ALLOW_UNSUPPORTED=1`` is set (then it warns).
    """
    found = {dist: installed_version(dist) for dist in SUPPORTED}
    found.update(versions or {})
    errors, warned = [], []
    for dist in SUPPORTED:
        problem = version_problem(dist, found.get(dist))
        if problem is None:
            continue
        if dist in STRICT and os.environ.get(ALLOW_UNSUPPORTED) != "1":
            errors.append(problem)
        else:
            warned.append(problem)
    if errors:
        raise ImportError(
            "; ".join(errors) + f". (Set {ALLOW_UNSUPPORTED}=1 to try it anyway: the private "
            "API the trainers use is still checked at import.)"
        )
    for message in warned:
        warnings.warn(message, UserWarning, stacklevel=2)
    return warned


# ------------------------------------------------------------------------------ private API
def _versions_note(dist: str) -> str:
    return (
        f"{dist} {installed_version(dist)} is installed; mathteams was written against "
        f"{dist}{SUPPORTED[dist]}"
    )


def _missing(private: Private | Base, detail: str) -> AttributeError:
    return AttributeError(
        f"{private.where} ({private.owner.replace(':', '.')}) {detail}; mathteams relies on "
        f"it. {_versions_note(private.dist)}: pip install '{private.dist}{SUPPORTED[private.dist]}'"
    )


def resolve(owner: str) -> Any:
    """The class (``"module:Class"``) or module (``"module"``) `owner` names."""
    module, _, cls = owner.partition(":")
    found: Any = importlib.import_module(module)
    return getattr(found, cls) if cls else found


def _params(function: Any) -> tuple[str, ...]:
    return tuple(inspect.signature(function).parameters)


def check_hook(private: Private) -> None:
    """Raise `AttributeError` unless `private`'s method exists with its leading parameters."""
    owner = resolve(private.owner)
    method = getattr(owner, private.name, None)
    if not callable(method):
        raise _missing(private, "does not exist")
    params = _params(method)
    if params[: len(private.params)] != private.params:
        raise _missing(
            private,
            f"takes ({', '.join(params)}); the overrides expect ({', '.join(private.params)}, ...)",
        )


def check_attribute(private: Private) -> None:
    """Raise `AttributeError` unless `private` exists on its class or module (not instances)."""
    owner = resolve(private.owner)
    annotated = any(private.name in getattr(k, "__annotations__", {}) for k in _mro(owner))
    if not (hasattr(owner, private.name) or annotated):
        raise _missing(private, "does not exist")


def _mro(owner: Any) -> Iterable[Any]:
    return owner.__mro__ if isinstance(owner, type) else (owner,)


def check_base(base: Base) -> None:
    """Raise `AttributeError` unless `base` is a class with every method it declares overridden."""
    try:
        owner = resolve(base.owner)
    except (ImportError, AttributeError) as exc:
        raise _missing(base, f"does not exist ({exc})") from exc
    if not isinstance(owner, type):
        raise _missing(base, f"is a {type(owner).__name__}, not a class")
    for name in base.overrides:
        check_hook(Private(base.owner, name, base.dist))


def check_private_api() -> None:
    """Check every declared hook, subclassed class, class attribute and internal name (not
    `LAZY` ones)."""
    for private in HOOKS.values():
        check_hook(private)
    for base in BASES.values():
        check_base(base)
    for private in [*ATTRIBUTES.values(), *INTERNAL.values(), *PETTINGZOO_HELPERS.values()]:
        if not private.instance and private.name not in LAZY:
            check_attribute(private)


def check_trainer(trainer: Any) -> None:
    """Raise `AttributeError` unless `trainer` has every instance attribute in `ATTRIBUTES`."""
    for private in ATTRIBUTES.values():
        if private.instance and not hasattr(trainer, private.name):
            raise _missing(private, f"is not set on this {type(trainer).__name__}")


F = TypeVar("F", bound=Callable[..., Any])


def hook(method: F) -> F:
    """Mark `method` as the override of the declared upstream method of the same name.

    Raises:
        TypeError: the name is not in `HOOKS` (declare it there, with the upstream class and the
            parameters the override relies on, so the import-time check covers it).
    """
    declared = HOOKS.get(method.__name__)
    if declared is None:
        raise TypeError(
            f"{method.__qualname__} is marked as an upstream hook override, but trainers.compat "
            f"declares no hook {method.__name__!r} (declared: {sorted(HOOKS)}); add it to HOOKS"
        )
    method.compat_hook = declared  # type: ignore[attr-defined]  # read by the private-API test
    return method


# -------------------------------------------------------------------------------- accessors
def _get(obj: Any, name: str) -> Any:
    try:
        return getattr(obj, name)
    except AttributeError as exc:
        raise _missing(ATTRIBUTES[name], f"is not set on this {type(obj).__name__}") from exc


def buffered_inputs(trainer: Any) -> Any:
    """`GRPOTrainer`'s buffered micro-batches of the current generation batch."""
    return _get(trainer, "_buffered_inputs")


def set_buffered_inputs(trainer: Any, batches: list[dict[str, Any]]) -> None:
    """Replace `GRPOTrainer`'s buffered micro-batches (the next `_prepare_inputs` calls use them)."""
    _get(trainer, "_buffered_inputs")
    trainer._buffered_inputs = batches


def micro_step(trainer: Any) -> int:
    """`GRPOTrainer`'s micro-step counter (which buffered micro-batch comes next)."""
    return _get(trainer, "_step")


def log_metric(trainer: Any, mode: str, name: str, value: float) -> None:
    """Add `value` to `GRPOTrainer`'s `name` metric of `mode` (``train``/``eval``); TRL logs
    the mean of each metric's values at its next log step, with its own metrics."""
    metrics: Mapping[str, defaultdict[str, list[float]]] = _get(trainer, "_metrics")
    metrics[mode][name].append(value)


def rollout_columns(
    inputs: Sequence[Mapping[str, Any]], names: Iterable[str]
) -> dict[str, list[Any]]:
    """Columns `names` of a generation batch's input rows after
    ``GRPOTrainer._generate_and_score_completions`` ran on them: TRL adds the columns of the rows
    the rollout function returned (all but the token ids and logprobs) to those input rows, in
    place, so the reward functions get them."""
    names = list(names)
    missing = [name for name in names if any(name not in row for row in inputs)]
    if missing:
        found = sorted(set().union(*(row.keys() for row in inputs))) if inputs else []
        raise RuntimeError(
            f"the generation batch's rows lack the rollout columns {missing} (they hold "
            f"{found}): a rollout function whose rows carry them (TurnRollout) is needed, and "
            f"TRL {installed_version('trl')} no longer adds them to the input rows"
        )
    return {name: [row[name] for row in inputs] for name in names}


def tied_weight_keys(module: Any) -> set[str]:
    """Names of `module`'s parameters tied to another (transformers' ``_tied_weights_keys``);
    loading a state dict may leave them missing."""
    return set(getattr(module, "_tied_weights_keys", None) or ())


# ---------------------------------------------------------------------------- at import time
def internal(name: str) -> Any:
    """The `INTERNAL` name `name`, imported from its upstream module.

    Raises:
        ImportError: the module does not import (the message keeps the original error).
        AttributeError: the module has no such name, naming the installed version.
    """
    private = INTERNAL[name]
    try:
        module = resolve(private.owner)
    except ImportError as exc:
        raise ImportError(
            f"cannot import {private.owner}.{name} ({exc}); {_versions_note(private.dist)}"
        ) from exc
    if not hasattr(module, name):
        raise _missing(private, "does not exist")
    return getattr(module, name)


def __getattr__(name: str) -> Any:
    """`LAZY` names, resolved on first use (``from trainers.compat import VLLMClient``)."""
    if name not in LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return internal(name)


check_versions()
check_private_api()
split_tensor_dict = internal("split_tensor_dict")
add_fused_lm_head = internal("add_fused_lm_head")
disable_dropout_in_model = internal("disable_dropout_in_model")
TRAINING_ARGS_NAME: str = internal("TRAINING_ARGS_NAME")
