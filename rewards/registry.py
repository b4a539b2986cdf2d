"""Verifier registry: names to factories.

Built-in names: ``math`` (alias ``math_verify``), ``gsm8k`` (alias ``numeric``), ``exact``,
``label``, ``reach`` (a chain of steps to a target, `rewards.reach`), ``similarity``,
``unique_chars``, ``partial_numeric``, ``format`` (``boxed_format`` is
``format`` with ``style="boxed"``), ``composite`` and ``remote`` (a verifier served by a reward
server, `rewards.remote.RemoteVerifier`; also named ``"remote:http://HOST:PORT/NAME"``); a task
family registers its own verifiers with it (`envs.tasks.family`, once `envs` is imported). A name
that is not registered may be an import path, ``"pkg.module:Class"`` or ``"pkg.module.Class"``; the object found is called with
the options (or returned as is when it already is a verifier and no options are given).
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rewards.base import Verdict, Verifier
from rewards.reach import ReachVerifier
from rewards.remote import RemoteVerifier, parse_remote_name
from rewards.shaping import (
    FormatVerifier,
    PartialNumericVerifier,
    SimilarityVerifier,
    UniqueCharsVerifier,
)
from rewards.verifiers import ExactVerifier, LabelVerifier, MathVerifier, NumericVerifier

__all__ = [
    "CompositeVerifier",
    "build_verifiers",
    "get_verifier",
    "list_verifiers",
    "register_verifier",
]

VerifierFactory = Callable[..., Verifier]

_REGISTRY: dict[str, VerifierFactory] = {}


def register_verifier(name: str, factory: VerifierFactory, override: bool = False) -> None:
    """Register `factory(**options) -> Verifier` under `name`.

    Args:
        name: the registry name.
        factory: a verifier class or any callable returning a verifier.
        override: replace an existing registration instead of raising.

    Raises:
        ValueError: the name is empty or taken (and `override` is False).
        TypeError: the factory is not callable.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"verifier name must be a non-empty str, got {name!r}")
    if not callable(factory):
        raise TypeError(f"verifier factory for {name!r} must be callable, got {factory!r}")
    if name in _REGISTRY and not override:
        raise ValueError(
            f"verifier {name!r} is already registered; pass override=True to replace it"
        )
    _REGISTRY[name] = factory


def deregister_verifier(name: str) -> None:
    """Remove the verifier `name` (a task family's, when its task is deregistered); an unknown
    name raises `KeyError`."""
    if name not in _REGISTRY:
        raise KeyError(f"no verifier named {name!r}; registered: {', '.join(list_verifiers())}")
    del _REGISTRY[name]


def list_verifiers() -> list[str]:
    """Registered verifier names, sorted."""
    return sorted(_REGISTRY)


def _import_path(path: str) -> Any:
    module_name, sep, attribute = path.partition(":")
    if not sep:
        module_name, _, attribute = path.rpartition(".")
    if not module_name or not attribute:
        raise ImportError(f"{path!r} is not 'pkg.module:Name' or 'pkg.module.Name'")
    module = importlib.import_module(module_name)
    target = module
    for part in attribute.split("."):
        target = getattr(target, part)
    return target


def get_verifier(name: str, **options: Any) -> Verifier:
    """Build a verifier by registry name or import path.

    Args:
        name: a registered name (see `list_verifiers`) or ``"pkg.module:Class"``.
        **options: passed to the factory, e.g. ``get_verifier("gsm8k", rel_tol=0.01)``.

    Returns:
        The verifier.

    Raises:
        ValueError: unknown name (with the valid names and a "did you mean"), or an import path
            that does not resolve.
        TypeError: the factory built something without ``name`` and ``verify``.

    Examples:
        >>> get_verifier("math").name
        'math'
        >>> get_verifier("maths")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: unknown verifier 'maths'. Did you mean 'math'...
    """
    if not isinstance(name, str):
        raise TypeError(f"verifier name must be a str, got {type(name).__name__}")
    if name.startswith("remote:"):
        return RemoteVerifier(**{**parse_remote_name(name), **options})
    factory = _REGISTRY.get(name)
    if factory is None and ("." in name or ":" in name):
        try:
            factory = _import_path(name)
        except (ImportError, AttributeError) as exc:
            raise ValueError(f"could not import verifier {name!r}: {exc}") from exc
        if isinstance(factory, Verifier) and not isinstance(factory, type) and not options:
            return factory
    if factory is None:
        close = difflib.get_close_matches(name, list(_REGISTRY), n=3, cutoff=0.6)
        hint = f" Did you mean {' or '.join(map(repr, close))}?" if close else ""
        raise ValueError(
            f"unknown verifier {name!r}.{hint} Valid names: {', '.join(list_verifiers())}, "
            "or an import path 'pkg.module:Class'"
        )
    verifier = factory(**options)
    if not isinstance(verifier, Verifier):
        raise TypeError(
            f"verifier factory {name!r} returned {type(verifier).__name__}, which has no "
            "name and verify(response, reference)"
        )
    return verifier


def build_verifiers(
    specs: Sequence[str | tuple[str, Mapping[str, Any]]],
) -> dict[str, Verifier]:
    """Build the verifiers to serve, keyed by the name clients use.

    Args:
        specs: each a registry name (``"math"``), an import path (``"pkg.module:Class"``), or
            ``"ALIAS=SPEC"``; optionally paired with the factory's keyword arguments. A
            registry name is served under itself, an import path under the built verifier's
            ``name``.

    Raises:
        ValueError: an unknown verifier, or two served under one name.
    """
    served: dict[str, Verifier] = {}
    for entry in specs:
        spec, options = (entry, {}) if isinstance(entry, str) else (entry[0], dict(entry[1]))
        alias, sep, target = spec.partition("=")
        if not sep:
            alias, target = "", spec
        verifier = get_verifier(target.strip(), **options)
        key = alias.strip() or (verifier.name if ("." in target or ":" in target) else target)
        if key in served:
            raise ValueError(f"two verifiers would be served as {key!r}; name one 'ALIAS={target}'")
        served[key] = verifier
    if not served:
        raise ValueError("a reward server needs at least one verifier, e.g. ['math']")
    return served


class CompositeVerifier:
    """Weighted mean of several verifiers' scores.

    Args:
        components: ``{verifier or registry name: weight}``; weights are >= 0 with a positive sum.

    Examples:
        >>> v = CompositeVerifier({"gsm8k": 3.0, "format": 1.0})
        >>> v.verify("\\\\boxed{18}", "18").score
        1.0
        >>> v.verify("18", "18").score  # right, but not boxed
        0.75
    """

    name = "composite"

    def __init__(self, components: Mapping[str | Verifier, float]) -> None:
        if not components:
            raise ValueError("composite verifier: components must name at least one verifier")
        parts: list[tuple[Verifier, float]] = []
        for component, weight in components.items():
            verifier = get_verifier(component) if isinstance(component, str) else component
            if not isinstance(verifier, Verifier):
                raise TypeError(
                    f"composite verifier: {component!r} has no verify(response, reference)"
                )
            if not weight >= 0:
                raise ValueError(
                    f"composite verifier: weight of {component!r} must be >= 0, got {weight!r}"
                )
            parts.append((verifier, float(weight)))
        self.total = sum(weight for _, weight in parts)
        if not self.total > 0:
            raise ValueError("composite verifier: the weights must have a positive sum")
        self.parts = tuple(parts)

    def verify(self, response: str, reference: str) -> Verdict:
        """Score one response with every component and average by weight."""
        verdicts = [(v, w, v.verify(response, reference)) for v, w in self.parts]
        score = sum(w * verdict.score for _, w, verdict in verdicts) / self.total
        extracted = next((d.extracted for _, _, d in verdicts if d.extracted is not None), None)
        reason = "; ".join(
            f"{v.name}={d.score:.2f} x{w:g}" + (f" ({d.reason})" if d.score < 1 else "")
            for v, w, d in verdicts
        )
        return Verdict(min(1.0, max(0.0, score)), extracted, reason)


def _boxed_format(**options: Any) -> FormatVerifier:
    return FormatVerifier(**{"style": "boxed", **options})


for _name, _factory in {
    "math": MathVerifier,
    "math_verify": MathVerifier,
    "gsm8k": NumericVerifier,
    "numeric": NumericVerifier,
    "exact": ExactVerifier,
    "label": LabelVerifier,
    "reach": ReachVerifier,
    "similarity": SimilarityVerifier,
    "unique_chars": UniqueCharsVerifier,
    "partial_numeric": PartialNumericVerifier,
    "format": FormatVerifier,
    "boxed_format": _boxed_format,
    "composite": CompositeVerifier,
    "remote": RemoteVerifier,
}.items():
    register_verifier(_name, _factory)
