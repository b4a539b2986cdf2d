"""The policy protocol, generation records and generation arguments.

A policy turns a batch of observations into texts (`Policy.act`). Observations follow the envs'
contract: a `Mapping[str, str]` with at least `"instruction"` (the role's system prompt) and
`"prompt"` (the user message); `"role"`, `"question"` and `"transcript"` may also be present.

Model-backed policies also implement `generate`, returning `Generation` records that carry the
exact token ids and per-token log-probabilities, so training never re-tokenizes text.

A model-backed policy may also let another decoder run its rows token by token
(`StepwisePolicy`): continuous batching (`agents.batching`, the rollout engine's default) does,
for every policy that offers it (`as_stepwise`), whatever its class.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

Observation = Mapping[str, str]
FinishReason = Literal["stop", "length"]


@runtime_checkable
class Policy(Protocol):
    """Anything that answers a batch of observations with one text each."""

    def act(self, observations: Sequence[Observation]) -> list[str]:
        """Returns one action text per observation, in order."""
        ...


@runtime_checkable
class GenerativePolicy(Policy, Protocol):
    """A policy backed by a model, which also reports token ids and log-probabilities."""

    def generate(self, observations: Sequence[Observation]) -> list[Generation]:
        """Returns one `Generation` per observation, in order."""
        ...


@runtime_checkable
class StepwisePolicy(GenerativePolicy, Protocol):
    """A generative policy whose rows another decoder may run token by token, batched with other
    rows of the same model: continuous batching (`agents.batching.ContinuousBatcher`) prefills and
    decodes them through `model` with the policy's own settings, and the policy formats the
    prompts and builds the records, so they are those its own `generate` would make.

    What it offers (`agents.hf.HFPolicy` has them all):

    - ``model``: the transformers causal LM (or peft model) its rows run through;
    - ``tokenizer``: its tokenizer (``pad_token_id``; ``decode`` to find stop strings);
    - ``generation_args`` (`GenerationArguments`): how its rows decode;
    - ``eos_ids``: the token ids that end a row;
    - ``adapter_name``: the peft adapter its rows run with (None: the model's active one);
    - ``encode``, ``next_seed``, ``build_generations``: below.

    Policies with equal `stepwise_key` decode in one batch, each row formatted by its own policy.
    """

    model: Any
    tokenizer: Any
    generation_args: GenerationArguments
    eos_ids: list[int]
    adapter_name: str | None

    def encode(self, observations: Sequence[Observation]) -> list[list[int]]:
        """The prompt token ids of each observation, as `generate` feeds them (no padding)."""
        ...

    def next_seed(self) -> int | None:
        """The seed of the next sampling stream (None: unseeded, torch's global RNG)."""
        ...

    def build_generations(
        self, prompt_ids: list[list[int]], completions: Any, logprobs: Any
    ) -> list[Generation]:
        """`Generation` records from padded ``(rows, steps)`` tensors of sampled ids and their
        logprobs, cut (eos, padding, stop strings) as `generate` cuts them."""
        ...


def as_stepwise(policy: Policy) -> StepwisePolicy | None:
    """`policy` when it offers everything `StepwisePolicy` declares, else None: the question a
    decoder asks before running a policy's rows itself (the rollout engine, for continuous
    batching). A policy whose replies are sampled elsewhere says so with a false
    ``decodes_locally`` (`agents.vllm.VLLMServerPolicy`: its model is the trainer's copy, the
    server samples), and is never decoded here."""
    if not getattr(policy, "decodes_locally", True):
        return None
    return policy if isinstance(policy, StepwisePolicy) else None


def stepwise_key(policy: StepwisePolicy) -> tuple[int, int, str]:
    """Stepwise policies with equal keys decode in one batch: the same model and tokenizer objects
    and equal decoding arguments (their prompt formats and adapters may differ row by row)."""
    return (id(policy.model), id(policy.tokenizer), repr(policy.generation_args))


@dataclass(frozen=True)
class Generation:
    """One sampled completion with the tokens and log-probabilities that produced it.

    Args:
        text (`str`): The decoded completion, special tokens and any stop string removed.
        prompt_ids (`list[int]`): The prompt tokens exactly as fed to the model (no padding).
        completion_ids (`list[int]`): The sampled tokens (no padding), up to and including the
            eos token or the token that completed a stop string.
        logprobs (`list[float]`): One per completion token: `log_softmax(logits / temperature)`
            at the sampled token, the distribution TRL's trainers compute.
        finish_reason (`str`): `"stop"` (eos or stop string) or `"length"` (`max_new_tokens`).
    """

    text: str
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    finish_reason: FinishReason

    def __post_init__(self) -> None:
        if len(self.logprobs) != len(self.completion_ids):
            raise ValueError(
                f"Generation got {len(self.completion_ids)} completion ids but "
                f"{len(self.logprobs)} logprobs; there must be exactly one logprob per token."
            )
        if self.finish_reason not in ("stop", "length"):
            raise ValueError(f"finish_reason={self.finish_reason!r}; expected 'stop' or 'length'.")

    @property
    def num_tokens(self) -> int:
        """Number of completion tokens."""
        return len(self.completion_ids)


@dataclass
class GenerationArguments:
    """How a model-backed policy decodes.

    Args:
        max_new_tokens (`int`, defaults to `256`): Most tokens generated per completion.
        temperature (`float`, defaults to `1.0`): Softmax temperature. It also sets the
            distribution of the reported logprobs, so keep it equal to the trainer's temperature.
        top_p (`float`, defaults to `1.0`): Nucleus sampling mass; `1.0` disables it.
        top_k (`int`, defaults to `0`): Keep only the `top_k` most likely tokens; `0` disables it.
        do_sample (`bool`, defaults to `True`): Sample; `False` means greedy decoding.
        stop_strings (`list[str]`, defaults to `[]`): Generation of a row ends at the first of
            these; the text is cut before it and the tokens keep it.
        seed (`int` or `None`, defaults to `None`): Seeds a policy-local RNG so that the same
            sequence of calls gives the same samples; `None` uses torch's global RNG.
        max_batch_size (`int` or `None`, defaults to `None`): Most rows per `generate` call; larger
            batches are split into chunks. `None` means one call for the whole batch.
    """

    max_new_tokens: int = field(
        default=256, metadata={"help": "Most tokens generated per completion."}
    )
    temperature: float = field(
        default=1.0,
        metadata={"help": "Softmax temperature; also sets the distribution of reported logprobs."},
    )
    top_p: float = field(default=1.0, metadata={"help": "Nucleus sampling mass; 1.0 disables."})
    top_k: int = field(default=0, metadata={"help": "Top-k filtering; 0 disables it."})
    do_sample: bool = field(
        default=True, metadata={"help": "Sample from the distribution; False means greedy."}
    )
    stop_strings: list[str] = field(
        default_factory=list,
        metadata={"help": "Strings that end a completion (text cut before, tokens kept)."},
    )
    seed: int | None = field(
        default=None,
        metadata={"help": "Seed of a policy-local RNG for reproducible sampling; None: global."},
    )
    max_batch_size: int | None = field(
        default=None,
        metadata={"help": "Most rows per model.generate call; None means no chunking."},
    )

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens={self.max_new_tokens}; it must be at least 1.")
        if not self.temperature > 0:
            raise ValueError(
                f"temperature={self.temperature}; it must be > 0 (it divides the logits). "
                "For greedy decoding set do_sample=False and leave temperature at 1.0."
            )
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p={self.top_p}; pass a value in (0, 1], 1.0 to disable it.")
        if self.top_k < 0:
            raise ValueError(f"top_k={self.top_k}; pass a value >= 0, 0 to disable it.")
        if isinstance(self.stop_strings, str):
            raise TypeError(
                f"stop_strings={self.stop_strings!r} is a single string; pass a list, "
                f"e.g. [{self.stop_strings!r}]."
            )
        self.stop_strings = list(self.stop_strings)
        if any(not isinstance(s, str) or s == "" for s in self.stop_strings):
            raise ValueError(
                f"stop_strings={self.stop_strings!r} holds an empty or non-string entry; "
                "remove it (an empty stop string would end every completion at once)."
            )
        if self.seed is not None and self.seed < 0:
            raise ValueError(f"seed={self.seed}; pass a non-negative int or None.")
        if self.max_batch_size is not None and self.max_batch_size < 1:
            raise ValueError(
                f"max_batch_size={self.max_batch_size}; pass a positive int, or None for no "
                "chunking."
            )
