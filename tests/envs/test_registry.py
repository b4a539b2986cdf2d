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


# ---------------------------------------------------------------- options and facts on the spec


def test_every_builtin_spec_carries_its_options_class():
    for env_id in envs.list_envs("math"):
        spec = envs.spec(env_id)
        assert spec.options is not None, env_id
        env = envs.make(env_id, wrapped=False)
        assert isinstance(env.options, spec.options)
        assert spec.max_turns == env.max_turns == spec.facts().max_turns


def test_facts_come_without_building_an_env(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("an env was built to learn a static fact")

    monkeypatch.setattr(envs.registry, "make", refuse)
    from envs import roles

    monkeypatch.setattr(roles, "make", refuse)
    facts = envs.spec("math/reflection-v0").facts(rounds=3)
    assert facts.max_turns == 7 and facts.review_roles == ("critic",)
    assert roles.answer_roles("math/tool-v0") == ("executor",)
    assert roles.review_roles("math/tool-v0") == ("verifier",)
    assert roles.env_roles("math/debate-v0", num_agents=2) == ["debater"]
    assert set(roles.review_roles()) == {"critic", "verifier"}


def test_options_for_checks_once_with_the_envs_errors():
    spec = envs.spec("math/reflection-v0")
    assert spec.options_for(rounds=3, audit=["critic"]).audit == ("critic",)
    with pytest.raises(ValueError, match="critic_reward must be one of"):
        spec.options_for(critic_reward="vibes")
    with pytest.raises(TypeError, match="takes no option 'num_agents'"):
        spec.options_for(num_agents=2)


def test_a_spec_without_options_says_so_and_still_answers_by_building(throwaway):
    from envs.roles import answer_roles, env_roles

    with pytest.raises(RegistryError, match="without an options class"):
        envs.spec(throwaway).facts()
    assert answer_roles(throwaway) == ("solver",) and env_roles(throwaway) == ["solver"]


def test_register_refuses_an_options_class_without_facts():
    class NotOptions:
        pass

    with pytest.raises(RegistryError, match="facts"):
        envs.register("test/bad_options-v0", "envs.solve:env", options=NotOptions)
    assert "test/bad_options-v0" not in envs.list_envs()


def test_defaults_are_the_envs_own_options_with_their_defaults(throwaway):
    defaults = envs.spec("math/debate-v0").defaults()
    assert (defaults["num_agents"], defaults["rounds"]) == (3, 2) and "task" not in defaults
    assert envs.spec(throwaway).defaults() == {}  # no options class: the spec's kwargs


def test_a_spec_states_what_a_run_of_it_plays():
    """Run defaults live where the env is registered; training and evaluation both read them."""
    reflection = envs.spec("math/reflection-v0")
    assert reflection.run_task == "unknown"
    assert reflection.run_defaults("coloring")["refiner_mode"] == "patch"
    assert reflection.run_defaults("unknown")["refiner_mode"] == "resolve"
    assert reflection.run_defaults("unknown+reach") == reflection.run_defaults("*")
    assert envs.spec("math/debate-v0").run_defaults("unknown") == {}
