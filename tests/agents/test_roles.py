"""Role maps: shared model, one model per role (different architectures), LoRA per role."""

from __future__ import annotations

import pytest
import torch
from peft import LoraConfig
from transformers import AutoModelForCausalLM

from agents.base import Generation, GenerationArguments
from agents.hf import HFPolicy
from agents.roles import RoleMap, build_lora_role_map, group_requests
from agents.scripted import ScriptedPolicy
from agents.tiny import build_tiny_model, build_tokenizer
from tests.agents.helpers import GREEDY, count_generate_calls

# peft calls a transformers helper deprecated in 5.x; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing`:FutureWarning")

# init_lora_weights=False draws B at random too, so an untrained adapter changes the output.
LORA = LoraConfig(
    r=4, lora_alpha=32, target_modules="all-linear", init_lora_weights=False, task_type="CAUSAL_LM"
)


def ids(generations: list[Generation]) -> list[list[int]]:
    return [g.completion_ids for g in generations]


def test_policy_for_falls_back_to_role_then_star() -> None:
    solver, other = ScriptedPolicy(["s"]), ScriptedPolicy(["o"])
    roles = RoleMap({"solver": solver, "critic_1": other})
    assert roles.policy_for("solver_0") is solver
    assert roles.policy_for("solver_12") is solver
    assert roles.policy_for("critic_1") is other
    with pytest.raises(KeyError, match="'critic'"):  # the message suggests the role to add
        roles.policy_for("critic_0")
    shared = RoleMap.shared(solver)
    assert shared.policy_for("refiner_0") is solver
    assert dict(RoleMap.shared(solver, ["a", "b"])) == {"a": solver, "b": solver}
    with pytest.raises(TypeError, match="no act"):
        RoleMap({"solver": object()})  # type: ignore[dict-item]


def test_shared_model_serves_all_roles_in_one_call(
    model, tokenizer, observations, monkeypatch
) -> None:
    policy = HFPolicy(model, tokenizer, GREEDY)
    roles = RoleMap.shared(policy, ["solver", "critic", "refiner"])
    requests = list(
        zip(["solver_0", "critic_0", "refiner_0", "solver_0"], observations, strict=True)
    )
    calls = count_generate_calls(model, monkeypatch)
    generations = roles.generate(requests)
    assert calls == [4]
    assert ids(generations) == ids(policy.generate(observations))
    assert roles.act(requests) == [g.text for g in generations]


def test_same_model_different_prompts_still_one_call(
    model, tokenizer, observations, monkeypatch
) -> None:
    solver = HFPolicy(model, tokenizer, GREEDY, system_prompt_override="You solve.")
    critic = HFPolicy(model, tokenizer, GREEDY, system_prompt_override="You criticize.")
    roles = RoleMap({"solver": solver, "critic": critic})
    requests = [("solver_0", observations[0]), ("critic_0", observations[0])]
    assert len(roles.group(requests)) == 1
    calls = count_generate_calls(model, monkeypatch)
    mixed = roles.generate(requests)
    assert calls == [2]
    assert mixed[0].prompt_ids == solver.encode(observations[:1])[0]
    assert mixed[1].prompt_ids == critic.encode(observations[:1])[0]
    assert ids(mixed) == ids(solver.generate(observations[:1]) + critic.generate(observations[:1]))


def test_different_generation_args_are_separate_groups(model, tokenizer, observations) -> None:
    fast = HFPolicy(model, tokenizer, GREEDY)
    long = HFPolicy(model, tokenizer, GenerationArguments(max_new_tokens=4, do_sample=False))
    groups = group_requests(
        [("a", observations[0]), ("b", observations[1])], {"a": fast, "b": long}
    )
    assert [g.runner for g in groups] == [fast, long]
    assert [g.indices for g in groups] == [[0], [1]]


def test_different_architectures_per_role(tokenizer, observations) -> None:
    llama_tokenizer = build_tokenizer(["a different corpus for the llama critic"] * 20)
    qwen = HFPolicy(build_tiny_model(tokenizer, arch="qwen2", seed=1), tokenizer, GREEDY)
    llama = HFPolicy(
        build_tiny_model(llama_tokenizer, arch="llama", hidden_size=32, seed=2),
        llama_tokenizer,
        GREEDY,
    )
    roles = RoleMap({"solver": qwen, "critic": llama})
    requests = [
        ("solver_0", observations[0]),
        ("critic_0", observations[1]),
        ("solver_0", observations[2]),
        ("critic_0", observations[3]),
    ]
    groups = roles.group(requests)
    assert [g.indices for g in groups] == [[0, 2], [1, 3]]
    mixed = roles.generate(requests)
    solver_alone = qwen.generate([observations[0], observations[2]])
    critic_alone = llama.generate([observations[1], observations[3]])
    assert ids(mixed) == ids([solver_alone[0], critic_alone[0], solver_alone[1], critic_alone[1]])
    assert mixed[1].prompt_ids == llama.encode(observations[1:2])[0]  # its own tokenizer


def test_scripted_roles_mix_with_models(model, tokenizer, observations) -> None:
    roles = RoleMap(
        {"solver": HFPolicy(model, tokenizer, GREEDY), "critic": ScriptedPolicy(["ok"])}
    )
    out = roles.generate([("critic_0", observations[0]), ("solver_0", observations[1])])
    assert out[0] == Generation("ok", [], [], [], "stop")  # no tokens: nothing to train
    assert out[1].completion_ids
    assert roles.act([("critic_0", observations[0])]) == ["ok"]


def lora_roles(model, tokenizer, args=GREEDY) -> RoleMap:
    return build_lora_role_map(model, tokenizer, ["solver", "critic"], LORA, generation_args=args)


def test_lora_adapters_differ_and_base_is_shared(model, tokenizer, observations) -> None:
    base_out = ids(HFPolicy(model, tokenizer, GREEDY).generate(observations))
    embedding = model.get_input_embeddings().weight
    roles = lora_roles(model, tokenizer)
    solver, critic = roles["solver"], roles["critic"]
    assert solver.model is critic.model  # one PeftModel ...
    assert solver.model.get_base_model() is model  # ... wrapping the original base in place
    assert model.get_input_embeddings().weight is embedding  # base weights not copied
    assert set(solver.model.peft_config) == {"solver", "critic"}
    solver_out, critic_out = ids(solver.generate(observations)), ids(critic.generate(observations))
    assert solver_out != critic_out
    assert solver_out != base_out
    base = HFPolicy(solver.model, tokenizer, GREEDY, adapter_name="__base__")
    assert ids(base.generate(observations)) == base_out


def test_lora_mixed_batch_is_one_call_and_matches_separate_calls(
    model, tokenizer, observations, monkeypatch
) -> None:
    roles = lora_roles(model, tokenizer)
    solver, critic = roles["solver"], roles["critic"]
    separate_solver = ids(solver.generate(observations))
    separate_critic = ids(critic.generate(observations))

    def no_reload(*args, **kwargs):
        raise AssertionError("the base model must not be reloaded")

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", no_reload)
    monkeypatch.setattr(AutoModelForCausalLM, "from_config", no_reload)
    requests = [("solver_0" if i % 2 == 0 else "critic_0", observations[i // 2]) for i in range(8)]
    calls = count_generate_calls(solver.model, monkeypatch)
    mixed = ids(roles.generate(requests))
    assert calls == [8]
    expected = [(separate_solver if i % 2 == 0 else separate_critic)[i // 2] for i in range(8)]
    assert mixed == expected
    assert solver.model.active_adapter == "solver"  # no adapter switching happened


def test_adapter_name_selects_adapter(model, tokenizer, observations) -> None:
    roles = lora_roles(model, tokenizer)
    peft_model = roles["solver"].model
    critic_out = ids(roles["critic"].generate(observations))
    peft_model.set_adapter("critic")
    active = HFPolicy(peft_model, tokenizer, GREEDY)  # adapter_name=None: the active adapter
    assert ids(active.generate(observations)) == critic_out
    peft_model.set_adapter("solver")
    assert ids(active.generate(observations)) == ids(roles["solver"].generate(observations))
    with pytest.raises(ValueError, match="not loaded"):
        HFPolicy(peft_model, tokenizer, GREEDY, adapter_name="refiner")


def test_lora_role_map_adds_missing_adapters_and_validates(model, tokenizer) -> None:
    roles = lora_roles(model, tokenizer)
    peft_model = roles["solver"].model
    more = build_lora_role_map(peft_model, tokenizer, ["solver", "refiner"], LORA)
    assert more["refiner"].model is peft_model
    assert set(peft_model.peft_config) == {"solver", "critic", "refiner"}
    with pytest.raises(ValueError, match="no duplicates"):
        build_lora_role_map(peft_model, tokenizer, ["a", "a"])


def test_lora_sampling_mixed_batch_is_seeded(tokenizer, observations) -> None:
    args = GenerationArguments(max_new_tokens=8, seed=7)
    requests = [("solver_0", observations[0]), ("critic_0", observations[0])] * 2

    def sample() -> list[list[int]]:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)  # LoRA init draws from the global RNG
            roles = lora_roles(build_tiny_model(tokenizer, seed=0), tokenizer, args)
        return ids(roles.generate(requests))

    first = sample()
    assert first == sample()
    assert first[0] != first[2]  # two samples of one request differ


def test_policy_for_takes_the_role_a_caller_gives():
    bot, other = ScriptedPolicy(["b"]), ScriptedPolicy(["o"])
    roles = RoleMap({"answer_bot": bot, "answer": other, "*": other})
    assert roles.policy_for("answer_bot_0") is bot  # the suffix only is stripped
    assert roles.policy_for("bot_7", role="answer_bot") is bot  # the caller's role wins
    assert roles.policy_for("answer_bot_0", role="judge") is other  # no "judge": the "*" entry
    requests = [("x_0", {"prompt": "p"}), ("y_0", {"prompt": "q"})]
    assert roles.act(requests, roles=["answer_bot", "answer"]) == ["b", "o"]
    with pytest.raises(ValueError, match="1 roles for 2 requests"):
        roles.generate(requests, roles=["answer"])


@pytest.mark.parametrize(
    "agent",
    [
        "critic_0",
        "debater_12",
        "solver",
        "my_agent",
        "_3",
        "a_b_1",
        "lead_critic_0",
        "x_",
        "a_\u00b2",
    ],
)
def test_the_role_map_reads_names_by_the_envs_role_rule(agent):
    # agents may not import envs (layers), so a caller that gives no role gets the same rule
    # applied in agents.roles; this keeps the two from drifting apart.
    from agents.roles import _suffix_role
    from envs.roles import role_of

    assert _suffix_role(agent) == role_of(agent)
