"""Role maps: which policy plays which role, and batching requests so each model generates once.

Three set-ups share one type, `RoleMap` (a read-only `Mapping[str, Policy]`):

- one shared model for every role: `RoleMap.shared(policy, ["solver", "critic", "refiner"])`;
- a different model per role (any architectures): `RoleMap({"solver": p1, "critic": p2})`;
- one base model with a LoRA adapter per role: `build_lora_role_map(model, tokenizer, roles)`,
  one `PeftModel` holding several named adapters; a mixed batch of roles runs in one
  `model.generate` call through peft's per-row `adapter_names`.

The rollout engine hands `(agent, observation)` requests to `RoleMap.generate`, with each
agent's role, which groups them by underlying model (`group_requests`) and scatters the results
back to request order.

Agent names and roles: the rule (``critic_0`` plays ``critic``) lives with the envs, in
`envs.roles.role_of`, which this package may not import (it sits beside `envs`, not above it).
So callers that know the roles hand them over (``roles=``; the rollout engine does). A caller
that does not, gets the same rule applied here (`_suffix_role`: a trailing ``_<digits>``
stripped, so role names may hold underscores); a test checks that the two agree.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.base import Generation, GenerationArguments, GenerativePolicy, Observation, Policy
from agents.hf import HFPolicy, is_peft_model

Request = tuple[str, Observation]


def _suffix_role(agent: str) -> str:
    """The role of an agent name when no caller gave one: `envs.roles.role_of`'s rule (see the
    module docstring)."""
    head, _, tail = agent.rpartition("_")
    return head if head and tail.isdigit() else agent


@dataclass
class RequestGroup:
    """Requests that one underlying model serves in one call.

    Args:
        runner (`Policy`): The policy whose model runs the group.
        indices (`list[int]`): Positions of the group's rows in the original request list.
        members (`list[Policy]`): The role policy of each row (its prompt format and adapter).
        observations (`list[Mapping[str, str]]`): The observation of each row.
    """

    runner: Policy
    indices: list[int] = field(default_factory=list)
    members: list[Policy] = field(default_factory=list)
    observations: list[Observation] = field(default_factory=list)

    def generate(self) -> list[Generation]:
        """Runs the group: one `generate_from_ids` call for HF policies sharing a model."""
        if isinstance(self.runner, HFPolicy):
            return _generate_hf_group(self.runner, self.members, self.observations)
        if isinstance(self.runner, GenerativePolicy):
            return self.runner.generate(self.observations)
        # Scripted policies have no tokens: empty ids tell a trainer there is nothing to train.
        texts = self.runner.act(self.observations)
        return [Generation(text, [], [], [], "stop") for text in texts]

    def act(self) -> list[str]:
        """Runs the group and returns texts only."""
        if isinstance(self.runner, HFPolicy):
            return [g.text for g in self.generate()]
        return self.runner.act(self.observations)


def batch_key(policy: Policy) -> tuple[Any, ...]:
    """Policies with equal keys can share one generate call.

    HF policies share a call when they wrap the same model object and tokenizer and decode with
    equal arguments; their prompt formats and adapters may differ row by row. Any other policy
    only batches with itself.
    """
    if isinstance(policy, HFPolicy):
        args: GenerationArguments = policy.generation_args
        return ("hf", id(policy.model), id(policy.tokenizer), repr(args))
    return ("policy", id(policy))


def group_requests(
    requests: Sequence[Request],
    policies: Mapping[str, Policy] | RoleMap,
    roles: Sequence[str] | None = None,
) -> list[RequestGroup]:
    """Groups `(agent, observation)` requests so each underlying model gets one call.

    Args:
        requests (`Sequence[tuple[str, Mapping[str, str]]]`): Agent (or role) names and their
            observations, e.g. `[("solver_0", obs_a), ("critic_0", obs_b)]`.
        policies (`Mapping[str, Policy]`): A `RoleMap` or plain dict of role to policy.
        roles (`Sequence[str] | None`): Each request's role, from the caller (`policy_for`).

    Returns:
        Groups in order of first appearance; together their `indices` cover every request once.
    """
    role_map = policies if isinstance(policies, RoleMap) else RoleMap(policies)
    if roles is not None and len(roles) != len(requests):
        raise ValueError(f"{len(roles)} roles for {len(requests)} requests; pass one per request")
    groups: dict[tuple[Any, ...], RequestGroup] = {}
    for index, (agent, observation) in enumerate(requests):
        policy = role_map.policy_for(agent, None if roles is None else roles[index])
        group = groups.setdefault(batch_key(policy), RequestGroup(runner=policy))
        group.indices.append(index)
        group.members.append(policy)
        group.observations.append(observation)
    return list(groups.values())


class RoleMap(Mapping[str, Policy]):
    """A read-only role -> policy mapping that batches mixed-role requests.

    Keys are roles (`"solver"`) or agent names (`"solver_0"`). `policy_for("solver_1")` tries
    the exact agent name, then its role (given by the caller, else the name without its `_<n>`
    suffix), then `"*"`.

    Args:
        policies (`Mapping[str, Policy]`): Role or agent name to policy.

    Raises:
        TypeError: If a value has no `act` method.
    """

    def __init__(self, policies: Mapping[str, Policy]) -> None:
        for role, policy in policies.items():
            if not isinstance(policy, Policy):
                raise TypeError(
                    f"policy for role {role!r} is {type(policy).__name__}, which has no "
                    "act(observations) method; pass a Policy such as HFPolicy or ScriptedPolicy."
                )
        self._policies = dict(policies)

    @classmethod
    def shared(cls, policy: Policy, roles: Sequence[str] = ("*",)) -> RoleMap:
        """One policy (one model) for every role; `"*"` matches any agent."""
        return cls(dict.fromkeys(roles, policy))

    def __getitem__(self, role: str) -> Policy:
        return self._policies[role]

    def __iter__(self) -> Iterator[str]:
        return iter(self._policies)

    def __len__(self) -> int:
        return len(self._policies)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k!r}: {type(v).__name__}" for k, v in self._policies.items())
        return f"RoleMap({{{inner}}})"

    def policy_for(self, agent: str, role: str | None = None) -> Policy:
        """The policy for an agent name, falling back to its role and then `"*"`.

        Args:
            agent: the agent's name (``"critic_0"``).
            role: its role, from a caller that knows it (`envs.roles.role_of`); None: the name
                without its ``_<n>`` suffix.

        Raises:
            KeyError: If nothing matches; the message lists the known roles.
        """
        if agent in self._policies:
            return self._policies[agent]
        role = _suffix_role(agent) if role is None else role
        if role != agent and role in self._policies:
            return self._policies[role]
        if "*" in self._policies:
            return self._policies["*"]
        raise KeyError(
            f"no policy for agent {agent!r}; the role map has {sorted(self._policies)}. Add the "
            f"role (e.g. {role!r}) or a '*' entry for every other agent."
        )

    def group(
        self, requests: Sequence[Request], roles: Sequence[str] | None = None
    ) -> list[RequestGroup]:
        """`group_requests(requests, self, roles)`."""
        return group_requests(requests, self, roles)

    def generate(
        self, requests: Sequence[Request], roles: Sequence[str] | None = None
    ) -> list[Generation]:
        """One `Generation` per request, in request order, one model call per group.

        `roles` gives each request's role (`policy_for`). Policies without `generate` (scripted
        ones) give records with empty token lists.
        """
        results: list[Generation | None] = [None] * len(requests)
        for group in self.group(requests, roles):
            for index, generation in zip(group.indices, group.generate(), strict=True):
                results[index] = generation
        return [g for g in results if g is not None]

    def act(self, requests: Sequence[Request], roles: Sequence[str] | None = None) -> list[str]:
        """One text per request, in request order, one model call per group."""
        results: list[str | None] = [None] * len(requests)
        for group in self.group(requests, roles):
            for index, text in zip(group.indices, group.act(), strict=True):
                results[index] = text
        return [t for t in results if t is not None]


def _generate_hf_group(
    runner: HFPolicy, members: Sequence[Policy], observations: Sequence[Observation]
) -> list[Generation]:
    # Each row is formatted by its own role policy (system prompt override) and batched per
    # member, then every row runs through the runner's model in one generate_from_ids call.
    prompt_ids: list[list[int] | None] = [None] * len(observations)
    by_member: dict[int, list[int]] = {}
    for row, member in enumerate(members):
        by_member.setdefault(id(member), []).append(row)
    for rows in by_member.values():
        member = members[rows[0]]
        assert isinstance(member, HFPolicy)  # guaranteed by batch_key
        encoded = member.encode([observations[r] for r in rows])
        for row, ids in zip(rows, encoded, strict=True):
            prompt_ids[row] = ids
    adapter_names = None
    if is_peft_model(runner.model):
        adapter_names = [m.adapter_name for m in members if isinstance(m, HFPolicy)]
    return runner.generate_from_ids([p or [] for p in prompt_ids], adapter_names=adapter_names)


def add_lora_adapters(model: Any, roles: Sequence[str], lora_config: Any = None) -> Any:
    """`model` as a `PeftModel` holding one named LoRA adapter per role (missing ones added).

    Args:
        model (`PreTrainedModel` or `PeftModel`): The base model, or a peft model to which the
            missing role adapters are added. The base weights are shared, never copied.
        roles (`Sequence[str]`): Role names; each becomes an adapter name.
        lora_config (`peft.LoraConfig`, `Mapping[str, LoraConfig]` or `None`, defaults to `None`):
            One config for every role, one per role, or `None` for rank 8 on all linear layers.

    Raises:
        ValueError: If `roles` is empty or repeats a name.
    """
    from peft import LoraConfig, get_peft_model  # optional dependency, needed only here

    if not roles or len(set(roles)) != len(roles):
        raise ValueError(f"roles={list(roles)}; pass at least one role and no duplicates.")
    default = LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", task_type="CAUSAL_LM")

    def config_for(role: str) -> Any:
        if isinstance(lora_config, Mapping):
            return lora_config[role]
        return lora_config or default

    peft_model = model
    if not is_peft_model(model):
        peft_model = get_peft_model(model, config_for(roles[0]), adapter_name=roles[0])
    for role in roles:
        if role not in peft_model.peft_config:
            peft_model.add_adapter(role, config_for(role))
    return peft_model


def build_lora_role_map(
    model: Any,
    tokenizer: Any,
    roles: Sequence[str],
    lora_config: Any = None,
    generation_args: GenerationArguments | None = None,
    system_prompt_overrides: Mapping[str, str] | None = None,
) -> RoleMap:
    """One base model, one LoRA adapter per role, all in a single `PeftModel`.

    Args:
        model (`PreTrainedModel` or `PeftModel`): The base model, or a peft model to which the
            missing role adapters are added. The base weights are shared, never copied.
        tokenizer (`PreTrainedTokenizerBase`): The base model's tokenizer.
        roles (`Sequence[str]`): Role names; each becomes an adapter name.
        lora_config (`peft.LoraConfig`, `Mapping[str, LoraConfig]` or `None`, defaults to `None`):
            One config for every role, one per role, or `None` for rank 8 on all linear layers.
        generation_args (`GenerationArguments` or `None`, defaults to `None`): Shared decoding
            settings, so mixed-role batches run in one `generate` call.
        system_prompt_overrides (`Mapping[str, str]` or `None`, defaults to `None`): Per-role
            system prompts replacing the observation's instruction.

    Returns:
        A `RoleMap` of `HFPolicy` objects that share one `PeftModel` and differ in `adapter_name`.

    Raises:
        ValueError: If `roles` is empty or repeats a name.
    """
    peft_model = add_lora_adapters(model, roles, lora_config)
    overrides = system_prompt_overrides or {}
    return RoleMap(
        {
            role: HFPolicy(
                peft_model,
                tokenizer,
                generation_args,
                system_prompt_override=overrides.get(role),
                adapter_name=role,
            )
            for role in roles
        }
    )
