"""Every docstring example in rewards/ runs (each verifier documents a pass and a fail)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import rewards

MODULES = sorted(info.name for info in pkgutil.iter_modules(rewards.__path__, "rewards."))


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_every_module_is_covered() -> None:
    assert {"rewards.extract", "rewards.verifiers", "rewards.shaping"} <= set(MODULES)
