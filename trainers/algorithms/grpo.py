"""Multi-turn, multi-agent GRPO on TRL's `GRPOTrainer`, fed by the rollout engine.

Design
------
**One row per agent turn.** Each row TRL trains on is ONE turn of one episode: its prompt is that
turn's exact prompt token ids, its completion that turn's completion ids and sampled logprobs, as
`RolloutEngine` recorded them. So each agent's loss covers its own tokens only, and nothing is
re-tokenized. The row's reward is the turn's reward (already attributed per turn by the engine)
times a per-role weight (`role_weights`, default 1).

**Advantages grouped by (problem, agent, round).** TRL normalises rewards over consecutive blocks
of `num_generations` (G) rows (mean, and std with `scale_rewards="group"`). The rows are laid out
so that each block holds the same turn slot (the same agent in the same round) of the G sampled
episodes of one problem; TRL's own GRPO normalisation then compares, e.g., the G critics of round
1 on problem 17 with each other, and nothing else. Grouping is per agent (``debater_0`` and
``debater_1`` are separate groups), which keeps every group at exactly G rows as TRL requires.

**How the rows fit TRL's hooks.** TRL's `rollout_func` must return exactly one row
per prompt it receives, while an episode yields several turns. Rather than overriding
`_generate_and_score_completions` (a 600-line method) we make the dataset rows *turn slots*: one
row per (problem, slot), slot 0..S-1 where S is the env's most turns per episode (`max_turns`, times
the agents acting at once for Parallel envs). The prompt column encodes ``"<problem_id>#<slot>"``.
TRL's sampler repeats each row G times, so the rollout function receives blocks of G equal
prompts; it runs G episodes of every distinct problem in the batch with the engine (all turns of
all copies batched) and answers each block with slot ``s`` of those G episodes. With
`shuffle_dataset=False` (we shuffle the problems once ourselves) and a generation batch that is a
multiple of S * G, every problem's S slots arrive in one batch and no turn is wasted; otherwise
the mapping is still correct (each block gets fresh episodes) but plays more episodes.

Alternatives considered: (a) one row per episode and role, the role's turns concatenated with
`env_mask` masking the others' tokens. Unsound here: each turn's prompt is rebuilt from the
observation, so later prompts are not prefix-extensions of earlier ones and one token stream
cannot hold them. (b) per-token advantages of shape (B, T), which `_compute_loss` accepts, need an
override of the scoring method; they are what `trainers.algorithms.ppo` uses.

**Missing and untrainable turns.** An episode that ends early (``stop_on_accept``) has fewer than
S turns, and a scripted agent's turn has no tokens. Such a slot becomes a padding row: one pad
prompt token, one eos completion token, ``env_mask`` 0 (no loss, not counted in TRL's lengths) and
reward `None`, which TRL treats as unscorable: excluded from the group baseline, advantage 0.

**Micro-batches.** A generation batch mixes short turns (a solver's prompt is the problem) and
long ones (a refiner's holds an answer and a review). `MultiAgentGRPOTrainer` (the default) sorts
the rows TRL buffered by length and cuts each micro-batch to its own rows' width
(`trainers.algorithms.microbatch`), instead of running every micro-batch at the batch's widest
row; the optimizer step is unchanged.

**Logging.** The reward function `turn_reward` returns the weighted turn rewards and, through
TRL's `log_metric` hook, logs per agent ``agents/<agent>/reward`` (unweighted), ``/accuracy`` (the
turn's ``info["correct"]``) and ``/completion_length``; they reach `report_to` with TRL's own
metrics (``rewards/turn_reward/mean`` there is the weighted reward over trainable turns).

**Models.** One shared model plays every role (the trainer's model, so rollouts always use the
current weights), or, with ``role_adapters=True``, one LoRA adapter per role on a frozen shared
base (`trainers.roles.adapters`: rollouts batch all roles in one ``generate``, and every forward
pass of the loss runs each role's rows under its own adapter), or, with ``role_models``, a full
model per role (`trainers.roles.models`: the other roles' models are attached to the first role's,
so TRL's one optimizer trains them all, and the same per-role dispatch runs each row through its
role's model).

Notes: ``mask_truncated_completions`` judges truncation by the last token, so a turn ended by a
stop string counts as truncated; on CPU pass ``use_cpu=True, bf16=False``; with ``beta > 0`` the
reference model is loaded from `model_path`, so give a saved folder.
"""

from __future__ import annotations

import dataclasses
import logging
import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

import envs as envs_pkg
from agents.base import GenerationArguments
from agents.hf import HFPolicy
from agents.roles import RoleMap, build_lora_role_map
from envs.roles import env_roles
from envs.tasks.sources import chosen_problems
from trainers.algorithms.microbatch import LengthGroupedMixin
from trainers.algorithms.rows import (
    mask_uniform_groups,
    parse_slot_prompt,
    rows_from_episodes,
    slot_dataset,
    turn_reward,
    turn_slots,
)
from trainers.algorithms.trainable import freeze_except, no_gradient_checkpointing
from trainers.precision import guard_attention
from trainers.roles.adapters import add_role_adapters, with_role_adapters
from trainers.roles.models import (
    check_shared_tokenizer,
    load_role_models,
    resolve_role_paths,
    role_modules,
    with_role_models,
)
from trainers.rollout.engine import RolloutEngine
from trainers.rollout.records import Episode

logger = logging.getLogger(__name__)


def rollout_policy(trainer: GRPOTrainer, model: Any, generation: GenerationArguments) -> HFPolicy:
    """The policy the rollout samples with: the trainer's model, or TRL's vLLM server.

    With ``use_vllm=True, vllm_mode="server"`` every process sends its turns to the server (the
    main process through TRL's client, which also pushes the weights before each rollout; the
    others through a generation-only client of their own). Colocate mode is not supported here.
    """
    tokenizer = trainer.processing_class
    if not getattr(trainer, "use_vllm", False):
        return HFPolicy(model, tokenizer, generation)
    args = trainer.args
    if args.vllm_mode != "server":
        raise ValueError(
            f"vllm_mode={args.vllm_mode!r}: the multi-agent rollout samples through a vLLM "
            "server only; start `trl vllm-serve --model ...` and pass --vllm_mode server"
        )
    from agents.vllm import VLLMServerPolicy

    client = getattr(getattr(trainer, "vllm_generation", None), "vllm_client", None)
    if client is None:  # a non-main process: generation only, weights are pushed by the main one
        from trainers.compat import VLLMClient

        base_url = (
            args.vllm_server_base_url or f"http://{args.vllm_server_host}:{args.vllm_server_port}"
        )
        client = VLLMClient(base_url=base_url, connection_timeout=args.vllm_server_timeout)
    return VLLMServerPolicy(model, tokenizer, generation, client=client)


class TurnRollout:
    """TRL `rollout_func`: plays the batch's problems with the trainer's model, returns turn rows
    (`trainers.algorithms.rows`), whose columns carry each row's agent, round and reward.

    Args:
        env_id (`str`), env_kwargs (`Mapping`): the env the engine plays.
        role_weights (`Mapping[str, float]`, None): reward weight per role or agent name.
        num_envs (`int`, 64): env copies the engine runs at once.
        branch (`bool`, False): branched rollouts: the G samples of every turn reply to one shared
            history, so each turn's group baseline compares replies (`RolloutEngine.run`).
        role_adapters (`Sequence[str]`, ()): these roles play with their own LoRA adapter of the
            trainer's model (a `PeftModel` from `trainers.roles.adapters.add_role_adapters`), all
            in one ``generate``.
        role_models (`Sequence[str]`, ()): these roles play with their own model: the trainer's
            model plays the first, the models attached to it (`trainers.roles.models`) the others.
        With neither, the trainer's model (or TRL's vLLM server) plays every role.
        mask_uniform_groups (`bool`, False): rows of a turn group whose G rewards are all equal
            leave the loss (`rows.mask_uniform_groups`).
        turn_credit (`str`, "reward"): a row is paid its turn's reward, or (``"return"``) its
            agent's return from that turn on (`rows.rows_from_episodes`, "Turn credit").
    """

    def __init__(
        self,
        env_id: str,
        env_kwargs: Mapping[str, Any] | None = None,
        role_weights: Mapping[str, float] | None = None,
        num_envs: int = 64,
        branch: bool = False,
        *,
        role_adapters: Sequence[str] = (),
        role_models: Sequence[str] = (),
        mask_uniform_groups: bool = False,
        turn_credit: str = "reward",
    ) -> None:
        if role_adapters and role_models:
            raise ValueError("a rollout plays with role adapters or with role models, not both")
        self.env_id, self.env_kwargs = env_id, dict(env_kwargs or {})
        self.role_weights, self.num_envs = dict(role_weights or {}), num_envs
        self.branch, self.mask_uniform_groups = branch, mask_uniform_groups
        self.turn_credit = turn_credit
        self.role_adapters, self.role_models = list(role_adapters), list(role_models)
        self.engine: RolloutEngine | None = None
        self._model: Any = None
        self.calls = 0
        self._step_calls: tuple[int, int] = (-1, 0)  # (global step, rollouts within it)

    def _engine(self, trainer: GRPOTrainer) -> RolloutEngine:
        model = trainer.accelerator.unwrap_model(trainer.model)
        if self.engine is None or self._model is not model:
            args = trainer.args
            generation = GenerationArguments(
                max_new_tokens=args.max_completion_length or 256,
                temperature=args.temperature,
                top_p=args.top_p,
                top_k=args.top_k or 0,
            )
            tokenizer = trainer.processing_class
            policies: Any
            if self.role_adapters:  # one adapter per role on the shared base, mixed-role batches
                policies = build_lora_role_map(
                    model, tokenizer, self.role_adapters, None, generation
                )
            elif self.role_models:  # a full model per role
                modules = role_modules(model, self.role_models)
                policies = RoleMap(
                    {role: HFPolicy(m, tokenizer, generation) for role, m in modules.items()}
                )
            else:
                policies = rollout_policy(trainer, model, generation)
            self.engine = RolloutEngine(self.env_id, policies, self.env_kwargs, self.num_envs)
            self._model = model
            # a stock GRPOTrainer's bf16 on CUDA: the cuDNN attention guard (trainers.precision)
            guard_attention(args, trainer.accelerator.device)
        return self.engine

    def __call__(self, prompts: list[str], trainer: GRPOTrainer) -> dict[str, list[Any]]:
        group = trainer.num_generations if trainer.model.training else trainer.num_generations_eval
        problems = list(dict.fromkeys(parse_slot_prompt(p)[0] for p in prompts))
        engine = self._engine(trainer)
        # Env seeds follow the optimizer step (not a call counter), so a run resumed from a
        # checkpoint plays the same episodes as the uninterrupted run.
        step = trainer.state.global_step
        within = self._step_calls[1] + 1 if self._step_calls[0] == step else 0
        self._step_calls = (step, within)
        seed = trainer.args.seed + 1_000_003 * step + 7_919 * within
        self.calls += 1
        played = engine.run(problems, group_size=group, seed=seed, branch=self.branch)
        episodes: dict[str, list[Episode]] = defaultdict(list)
        for episode in played:
            episodes[episode.problem_id].append(episode)
        tokenizer = trainer.processing_class
        eos = trainer.eos_token_ids[0] if trainer.eos_token_ids else tokenizer.eos_token_id
        rows = rows_from_episodes(
            prompts,
            episodes,
            group,
            self.role_weights,
            tokenizer.pad_token_id,
            eos,
            self.turn_credit,
        )
        if self.mask_uniform_groups:
            mask_uniform_groups(rows, group)
        return rows


class MultiAgentGRPOTrainer(LengthGroupedMixin, GRPOTrainer):
    """TRL's `GRPOTrainer` training on length-grouped micro-batches cut to their own rows'
    widths (`trainers.algorithms.microbatch`): a multi-turn batch mixes short and long turns, and
    TRL would otherwise run every micro-batch at the widest row's width. The update is unchanged."""


def immediate_rewards(env_id: str, env_kwargs: dict[str, Any], env: Any) -> bool:
    """Whether `env_id` with `env_kwargs` pays every reward on the step it is for: its options'
    facts say (`envs.options.EnvFacts`); an env registered without options, its own attribute
    (`env`, one made with those kwargs)."""
    env_spec = envs_pkg.spec(env_id)
    if env_spec.options is not None:
        return env_spec.facts(**env_kwargs).immediate_rewards
    return bool(getattr(env.unwrapped, "immediate_rewards", False))


def resolve_problems(env: Any, train_problems: int | Sequence[str] | None) -> list[str]:
    """Problem ids: all of the env's task (`None`), the first `n` (int), or the given ids (each
    one of the task's: `envs.tasks.sources.chosen_problems`)."""
    return [p["id"] for p in chosen_problems(env.unwrapped.task.source, train_problems)]


class EnvBundle(Mapping[str, Any]):
    """What a stock TRL `GRPOTrainer` needs to train a registered env: ``**bundle`` gives it
    ``train_dataset``, ``rollout_func`` and ``reward_funcs``, and `config` holds the `GRPOConfig`
    values the bundle relies on. Built by `load_environment`.

    Attributes:
        env_id (`str`), env_kwargs (`dict`): the env.
        slots (`int`): turn slots per problem (rows per problem in `train_dataset`).
        problems (`list[str]`): the training problem ids, in dataset order.
        env: an instance of the env (for its agents, roles and task).
        config (`dict`): ``{"shuffle_dataset": False}``: the dataset holds each problem's turn
            slots next to each other and is shuffled by problem already.
    """

    def __init__(
        self,
        env_id: str,
        env_kwargs: Mapping[str, Any],
        slots: int,
        problems: list[str],
        rollout_func: TurnRollout,
        env: Any,
    ) -> None:
        self.env_id, self.env_kwargs, self.env = env_id, dict(env_kwargs), env
        self.slots, self.problems = slots, problems
        self.config: dict[str, Any] = {"shuffle_dataset": False}
        self._items = {
            "train_dataset": slot_dataset(problems, slots),
            "rollout_func": rollout_func,
            "reward_funcs": [turn_reward],
        }

    def __getitem__(self, key: str) -> Any:
        if key not in self._items:
            raise KeyError(f"an env bundle holds {sorted(self._items)}, not {key!r}")
        return self._items[key]

    def __iter__(self) -> Any:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def batch_rows(self, num_generations: int, problems_per_batch: int = 1) -> int:
        """Rows of a generation batch that plays `problems_per_batch` whole problems with
        `num_generations` samples each: make ``per_device_train_batch_size *
        steps_per_generation`` (times the processes) this, or a multiple of it."""
        return self.slots * num_generations * problems_per_batch

    def __repr__(self) -> str:
        return (
            f"EnvBundle({self.env_id!r}, {len(self.problems)} problems x {self.slots} slots, "
            f"config={self.config})"
        )


PER_ROLE = (None, "adapters", "models")  # who plays each role: the trainer's model, or per role


def load_environment(
    env_id: str = "math/reflection-v0",
    *,
    train_problems: int | Sequence[str] | None = None,
    seed: int = 0,
    role_weights: Mapping[str, float] | None = None,
    num_envs: int = 64,
    rollout_cls: type[TurnRollout] = TurnRollout,
    branch_turns: bool = False,
    per_role: str | None = None,
    mask_uniform_groups: bool = False,
    turn_credit: str = "reward",
    **env_kwargs: Any,
) -> EnvBundle:
    """Any registered env, ready for a stock TRL `GRPOTrainer`: no project trainer class.

    ::

        bundle = load_environment("math/reflection-v0", task="unknown", rounds=2)
        args = GRPOConfig(output_dir="out", num_generations=4,
                          per_device_train_batch_size=bundle.batch_rows(4), **bundle.config)
        GRPOTrainer(model=model_path, args=args, **bundle).train()

    Every agent's turns train the one model (see the module docstring for the rows and
    grouping); `build_grpo_trainer` adds length-grouped micro-batches, role adapters and role
    models on top of this.

    Args:
        env_id (`str`): a registered env id (`envs.list_envs()`).
        train_problems (`int | Sequence[str]`, None): problem ids, or the first n, or all.
        seed (`int`, 0): shuffles the problems (once, here: `config` turns TRL's shuffle off).
        role_weights (`Mapping[str, float]`, None): reward weight per role or agent name.
        num_envs (`int`, 64): env copies the rollout engine runs at once.
        rollout_cls (`type[TurnRollout]`): the rollout function's class.
        branch_turns (`bool`, False): branched rollouts: every turn's G samples reply to one
            shared history (the env must pay each reward on its own step: `immediate_rewards`).
        per_role (`str`, None): ``"adapters"``: each of the env's roles plays with its own LoRA
            adapter of the trainer's model, ``"models"``: with its own model (`TurnRollout`), as
            the per-role trainers of `trainers.roles` train them (`build_grpo_trainer`'s
            ``role_adapters`` and ``role_models``). None: the trainer's model plays every role.
        mask_uniform_groups (`bool`, False): turn groups whose G rewards are all equal leave
            the loss (`rows.mask_uniform_groups`).
        turn_credit (`str`, "reward"): ``"return"`` pays each row its agent's return from that
            turn on, not its turn's reward: for envs whose policy ends the episode
            (``stop_on_accept``) or pays a team reward (`rows.rows_from_episodes`).
        **env_kwargs: the env's own kwargs (``task``, ``rounds``, ``critic_reward``, ...).
    """
    if per_role not in PER_ROLE:
        raise ValueError(f"per_role={per_role!r}; expected one of {PER_ROLE}")
    probe = envs_pkg.make(env_id, **env_kwargs)
    problems = resolve_problems(probe, train_problems)
    if not problems:
        raise ValueError(
            "no training problems: pass train_problems as a count >= 1 or a list of ids"
        )
    random.Random(seed).shuffle(problems)
    if branch_turns and not immediate_rewards(env_id, env_kwargs, probe):
        raise ValueError(
            f"branch_turns needs an env that pays every reward on the step it is for; {env_id} "
            f"with {env_kwargs} does not (`immediate_rewards` is False: e.g. team_reward=True, "
            "or reflection's critic_reward='outcome')"
        )
    roles = env_roles(probe) if per_role else []
    rollout = rollout_cls(
        env_id,
        env_kwargs,
        role_weights,
        num_envs,
        branch=branch_turns,
        role_adapters=roles if per_role == "adapters" else (),
        role_models=roles if per_role == "models" else (),
        mask_uniform_groups=mask_uniform_groups,
        turn_credit=turn_credit,
    )
    return EnvBundle(env_id, env_kwargs, turn_slots(probe), problems, rollout, probe)


def build_grpo_trainer(
    model_path: str,
    env_id: str = "math/reflection-v0",
    env_kwargs: Mapping[str, Any] | None = None,
    args: GRPOConfig | None = None,
    role_weights: Mapping[str, float] | None = None,
    train_problems: int | Sequence[str] | None = None,
    num_envs: int = 64,
    trainer_cls: type[GRPOTrainer] = MultiAgentGRPOTrainer,
    rollout_cls: type[TurnRollout] = TurnRollout,
    role_adapters: bool = False,
    lora_r: int = 8,
    lora_alpha: int = 16,
    role_models: bool | Mapping[str, str] = False,
    trainable: str | None = None,
    branch_turns: bool = False,
    mask_uniform_groups: bool = False,
    turn_credit: str = "reward",
    **trainer_kwargs: Any,
) -> GRPOTrainer:
    """A `GRPOTrainer` training one shared model on every agent's turns of `env_id`.

    Args:
        model_path (`str`): a saved model folder (or hub id) with a chat-template tokenizer.
        env_id (`str`, "math/reflection-v0"), env_kwargs (`Mapping`, None): the env and its kwargs.
        args (`GRPOConfig`, None): TRL's config; `shuffle_dataset` is turned off (the problems
            are shuffled here, once, with `args.seed`) so a problem's turn slots stay together.
        role_weights (`Mapping[str, float]`, None): reward weight per role (``"critic"``) or
            agent (``"critic_0"``); default 1.
        train_problems (`int | Sequence[str]`, None): problem ids, or the first n, or all.
        num_envs (`int`, 64): env copies the rollout engine runs at once.
        trainer_cls, rollout_cls: the trainer and rollout classes (PPO subclasses the trainer).
        role_adapters (`bool`, False): train one LoRA adapter per role (rank `lora_r`, alpha
            `lora_alpha`) on the frozen shared base instead of the whole model; see
            `trainers.roles.adapters`.
        role_models (`bool | Mapping[str, str]`, False): train a full model per role: `True`
            gives every role its own copy of `model_path`; a mapping ``{role: path}`` starts
            those roles from their paths (the rest from `model_path`). See `trainers.roles.models`.
        trainable (`str`, None): a regex; only parameters whose names match it train (e.g.
            ``"norm"``), the rest are frozen. Not with `role_adapters` (the adapters are what
            trains there).
        branch_turns (`bool`, False): branched rollouts (`load_environment`).
        mask_uniform_groups (`bool`, False): turn groups whose G rewards are all equal leave
            the loss (`load_environment`).
        turn_credit (`str`, "reward"): a row's reward, or its agent's return (`load_environment`).
        **trainer_kwargs: passed to `GRPOTrainer` (callbacks, peft_config, eval_dataset, ...).
    """
    if role_adapters and role_models:
        raise ValueError("pass role_adapters or role_models, not both")
    if role_adapters and trainable:
        raise ValueError("trainable applies to full models; role adapters train the adapters")
    args = args or GRPOConfig(output_dir="outputs/grpo")
    bundle = load_environment(
        env_id,
        train_problems=train_problems,
        seed=args.seed,
        role_weights=role_weights,
        num_envs=num_envs,
        rollout_cls=rollout_cls,
        branch_turns=branch_turns,
        mask_uniform_groups=mask_uniform_groups,
        turn_credit=turn_credit,
        per_role="models" if role_models else "adapters" if role_adapters else None,
        **dict(env_kwargs or {}),
    )
    use_bundle_config(args, bundle)
    model, trainer_cls, role_kwargs = per_role_model(
        model_path,
        env_roles(bundle.env),
        args,
        trainer_cls,
        role_adapters=role_adapters,
        lora_r=lora_r,
        lora_alpha=lora_alpha,
        role_models=role_models,
    )
    trainer_kwargs.update(role_kwargs)
    if not isinstance(model, str) and trainer_kwargs.get("processing_class") is None:
        # TRL loads the tokenizer only when given a path
        trainer_kwargs["processing_class"] = AutoTokenizer.from_pretrained(model_path)
    trainer = trainer_cls(model=model, args=args, **bundle, **trainer_kwargs)
    if trainable:  # before train() builds the optimizer from the parameters that require grad
        freeze_except(trainer.model, trainable)
    return trainer


def use_bundle_config(args: GRPOConfig, bundle: EnvBundle) -> None:
    """Set the config values `bundle` relies on (``shuffle_dataset=False``) on `args`, and warn
    when a generation batch cannot hold whole problems (every turn slot x the G samples)."""
    for key, value in bundle.config.items():
        setattr(args, key, value)
    if args.generation_batch_size % bundle.batch_rows(args.num_generations):
        logger.warning(
            "generation_batch_size=%d is not a multiple of turn slots x num_generations = %d x %d; "
            "a problem's turns will be split across batches and more episodes played than needed",
            args.generation_batch_size,
            bundle.slots,
            args.num_generations,
        )


def per_role_model(
    model_path: str,
    roles: Sequence[str],
    args: GRPOConfig,
    trainer_cls: type[GRPOTrainer],
    *,
    role_adapters: bool = False,
    lora_r: int = 8,
    lora_alpha: int = 16,
    role_models: bool | Mapping[str, str] = False,
) -> tuple[Any, type[GRPOTrainer], dict[str, Any]]:
    """The model, trainer class and extra trainer kwargs of `build_grpo_trainer`'s per-role
    training (`trainers.roles`): a model per role of `roles` (`role_models`), a LoRA adapter per
    role on `model_path` (`role_adapters`), or, with neither, `model_path` and `trainer_cls` as
    they are."""
    if role_models:
        paths = resolve_role_paths(roles, model_path, role_models)
        check_shared_tokenizer(paths)
        model = load_role_models(paths, args.model_init_kwargs)
        return model, with_role_models(trainer_cls), {"role_models": paths}
    if role_adapters:
        base = AutoModelForCausalLM.from_pretrained(model_path, **(args.model_init_kwargs or {}))
        model = add_role_adapters(base, roles, r=lora_r, alpha=lora_alpha)
        return model, with_role_adapters(trainer_cls), {"role_adapters": list(roles)}
    return model_path, trainer_cls, {}


@dataclass
class CPUGRPOConfig(GRPOConfig):
    """TRL's `GRPOConfig` with defaults for a short CPU run of the embedded model.

    A micro-batch holds whole episodes: per_device_train_batch_size = turn slots x num_generations
    (reflection with 2 rounds: 5 slots x 4 = 20, one problem); one optimizer step sees
    gradient_accumulation_steps problems, all generated in one batched rollout.
    """

    _argument_group_name = (
        "GRPO (TRL's GRPOConfig, CPU defaults)"  # --help's section (`trainers.run.parser`)
    )

    output_dir: str = field(default="outputs/train", metadata={"help": "Where to write."})
    use_cpu: bool = field(default=True, metadata={"help": "Train on the CPU."})
    bf16: bool = field(default=False, metadata={"help": "bf16 mixed precision."})
    gradient_checkpointing: bool | None = no_gradient_checkpointing()
    learning_rate: float = field(default=5e-5, metadata={"help": "Adam learning rate."})
    num_generations: int = field(default=4, metadata={"help": "G samples per problem."})
    per_device_train_batch_size: int = field(
        default=20, metadata={"help": "Rows per micro-batch (turn slots x num_generations)."}
    )
    gradient_accumulation_steps: int = field(
        default=8, metadata={"help": "Micro-batches per optimizer step (problems per step)."}
    )
    max_completion_length: int = field(
        default=96,
        metadata={
            "help": "Tokens per turn: 96 (the embedded critic's checks need ~70), or a task "
            "family's run default (a colouring's critic scans every edge: 160); None below: set "
            "by the task."
        },
    )
    max_steps: int = field(
        default=1000, metadata={"help": "Optimizer steps (the time budget usually ends first)."}
    )
    logging_steps: int = field(default=1, metadata={"help": "Log every N steps."})
    save_steps: int = field(default=20, metadata={"help": "Checkpoint every N steps."})
    report_to: list[str] = field(default_factory=lambda: ["none"], metadata={"help": "Loggers."})
    beta: float = field(default=0.0, metadata={"help": "KL coefficient (0: no ref model)."})
    lr_scheduler_type: str = field(default="constant", metadata={"help": "LR schedule."})

    DERIVED: ClassVar[tuple[str, ...]] = ("per_device_train_batch_size",)

    @classmethod
    def derived_defaults(cls, parsed: Any) -> dict:
        """`DERIVED`'s defaults from the parsed flags (`trainers.run.cli.RunParser`): a
        micro-batch holds whole episodes, every turn slot of the env they ask for (``env_id``
        and its options: ``rounds``, ``num_agents``) x the G generations
        (``num_generations``); the slots come from the env's options' facts, no env built."""
        spec = envs_pkg.spec(parsed.env_id)
        if spec.options is None:  # an env registered without its options: ask a made one
            slots = turn_slots(envs_pkg.make(parsed.env_id))
        else:
            names = {f.name for f in dataclasses.fields(spec.options)}
            shape = {k: getattr(parsed, k) for k in ("rounds", "num_agents") if k in names}
            shape = {k: v for k, v in shape.items() if v is not None}
            slots = spec.facts(**shape).turns
        return {"per_device_train_batch_size": slots * parsed.num_generations}
