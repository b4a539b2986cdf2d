from __future__ import annotations

import pytest

import envs
from envs.errors import DuplicateEnvError, RegistryError, UnknownEnvError


@pytest.fixture
def throwaway():
    env_id = "test/throwaway-v0"
    envs.register(env_id, "envs.solve:env", max_turns=1)
    yield env_id
    envs.deregister(env_id)


def test_builtins_are_registered():
    assert {"math/solve-v0", "math/reflection-v0", "math/debate-v0", "math/ensemble-v0"} <= set(
        envs.list_envs()
    )
    assert envs.list_envs("math") == [e for e in envs.list_envs() if e.startswith("math/")]


def test_make_merges_spec_kwargs_with_overrides():
    env = envs.make("math/reflection-v0", rounds=3, wrapped=False)
    assert env.rounds == 3 and env.max_turns == 7
    assert envs.make("math/reflection-v0", wrapped=False).rounds == 2


def test_unknown_id_suggests_close_match():
    with pytest.raises(UnknownEnvError, match="Did you mean 'math/debate-v0'"):
        envs.make("math/debat-v0")


def test_malformed_id_names_the_expected_format():
    with pytest.raises(RegistryError, match="namespace/name-vN"):
        envs.spec("Reflection")


def test_duplicate_registration_raises_unless_override(throwaway):
    with pytest.raises(DuplicateEnvError, match="override=True"):
        envs.register(throwaway, "envs.solve:env")
    spec = envs.register(throwaway, "envs.debate:env", override=True, rounds=1)
    assert spec.kwargs == {"rounds": 1} and envs.spec(throwaway).entry_point == "envs.debate:env"


def test_registered_env_is_made_and_listed(throwaway):
    assert throwaway in envs.list_envs()
    env = envs.make(throwaway)
    env.reset(seed=1)
    assert env.agents == ["solver_0"]


def test_bad_entry_point_is_reported():
    envs.register("test/broken-v0", "envs.solve:nope")
    try:
        with pytest.raises(RegistryError, match="no attribute 'nope'"):
            envs.make("test/broken-v0")
    finally:
        envs.deregister("test/broken-v0")
