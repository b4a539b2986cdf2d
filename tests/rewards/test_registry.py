"""The verifier registry: names, import paths and errors."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rewards import NumericVerifier, Verdict, get_verifier, list_verifiers, register_verifier
from rewards import registry as registry_module


class _AlwaysRight:
    """A throwaway verifier.

    Examples:
        >>> _AlwaysRight().verify("x", "y").score
        1.0
    """

    name = "always_right"

    def verify(self, response: str, reference: str) -> Verdict:
        return Verdict(1.0, response, "always")


ALWAYS_RIGHT = _AlwaysRight()


@pytest.fixture
def throwaway() -> Iterator[str]:
    register_verifier("always_right", _AlwaysRight)
    yield "always_right"
    registry_module._REGISTRY.pop("always_right", None)


def test_builtin_names() -> None:
    names = list_verifiers()
    expected = {"math", "gsm8k", "label", "similarity", "unique_chars", "partial_numeric"}
    assert expected | {"format", "composite", "exact", "numeric", "math_verify"} <= set(names)
    assert names == sorted(names)


def test_register_and_get(throwaway: str) -> None:
    assert throwaway in list_verifiers()
    assert get_verifier(throwaway).verify("a", "b").score == 1.0


def test_duplicate_raises_unless_override(throwaway: str) -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_verifier(throwaway, _AlwaysRight)
    register_verifier(throwaway, NumericVerifier, override=True)
    assert isinstance(get_verifier(throwaway), NumericVerifier)


def test_builtin_names_are_protected() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_verifier("math", NumericVerifier)


def test_options_reach_the_factory() -> None:
    assert get_verifier("gsm8k", rel_tol=0.1).rel_tol == 0.1
    assert get_verifier("boxed_format").style == "boxed"
    with pytest.raises(TypeError):
        get_verifier("gsm8k", no_such_option=1)


def test_unknown_name_lists_valid_names_and_suggests() -> None:
    with pytest.raises(ValueError) as error:
        get_verifier("gms8k")
    message = str(error.value)
    assert "Did you mean 'gsm8k'" in message
    assert "math" in message and "label" in message  # the valid names are listed


def test_unknown_name_without_close_match() -> None:
    with pytest.raises(ValueError, match="Valid names") as error:
        get_verifier("zzzzzz")
    assert "Did you mean" not in str(error.value)


IMPORT_PATHS = [
    "rewards.verifiers:NumericVerifier",  # module:Class
    "rewards.verifiers.NumericVerifier",  # dotted
    "rewards:NumericVerifier",  # re-exported name
]


@pytest.mark.parametrize("path", IMPORT_PATHS)
def test_import_paths(path: str) -> None:
    verifier = get_verifier(path, rel_tol=0.5)
    assert isinstance(verifier, NumericVerifier) and verifier.rel_tol == 0.5


def test_import_path_to_an_instance() -> None:
    assert get_verifier(f"{__name__}:ALWAYS_RIGHT") is ALWAYS_RIGHT


BAD_PATHS = [
    "no_such_module_xyz:Thing",  # module missing
    "rewards.verifiers:NoSuchClass",  # attribute missing
    "rewards.",  # empty attribute
]


@pytest.mark.parametrize("path", BAD_PATHS)
def test_bad_import_paths(path: str) -> None:
    with pytest.raises(ValueError, match=r"could not import|unknown verifier"):
        get_verifier(path)


def test_factory_must_build_a_verifier() -> None:
    register_verifier("not_a_verifier", lambda: object())
    try:
        with pytest.raises(TypeError, match="no name and verify"):
            get_verifier("not_a_verifier")
    finally:
        registry_module._REGISTRY.pop("not_a_verifier", None)


def test_bad_registrations() -> None:
    with pytest.raises(ValueError):
        register_verifier("", _AlwaysRight)
    with pytest.raises(TypeError):
        register_verifier("x_not_callable", 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        get_verifier(3)  # type: ignore[arg-type]
