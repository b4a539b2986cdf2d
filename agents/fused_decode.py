"""One decode step of a Llama-family model for every running row, on the model's own weights.

A decode step of a small model is mostly Python and dispatch, not arithmetic: the embedded
model's forward (4 layers, 128 wide) spends most of its time in transformers' module calls, its
4-D mask construction and its output objects. `FusedDecoder` runs the same arithmetic as the
model's forward for one new token per row, straight on the model's parameters: embedding, per
layer RMSNorm, q/k/v projections (with their biases, Qwen2's), the model's own rotary module,
the new keys and values written in place into the batcher's cache (`agents.kv_cache.BufferLayer`),
attention under the rows' padding mask, the output projection, the SwiGLU
MLP, the final norm and the head. It reads the parameters at every step, so a model that trains
between rollouts is decoded as it is now.

It serves the architectures whose forward it repeats exactly (`SUPPORTED`: Llama, Mistral,
Qwen2 with SiLU MLPs) and no model wrapped in adapters; `fused_decoder` returns None for any
other, and the batcher then calls the model as before. The same tokens and log-probabilities
within float tolerance: ``tests/agents/test_fused_decode.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.nn import functional

__all__ = ["SUPPORTED", "FusedDecoder", "fused_decoder"]

# Causal-LM classes whose decoder layer is exactly: RMSNorm -> attention (q/k/v/o projections,
# rotary position embedding, no q/k norm) -> residual -> RMSNorm -> SwiGLU MLP -> residual.
SUPPORTED = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM")

ELEMENTWISE_MAX = 1 << 22
"""Attention runs as elementwise products and sums while their products (rows x query heads x
columns x head dim) are at most this many numbers: for small models, whose decode step is mostly
per-call overhead, two passes over the keys cost less than batched matrix products of one query
a row; for larger ones the matrix products, which do not hold the products in memory, win."""


def fused_decoder(model: Any) -> FusedDecoder | None:
    """A `FusedDecoder` for `model`, or None when its forward is not one the fused step repeats
    (another architecture, an activation other than SiLU, an MLP or attention with biases the
    step does not read, adapters, a pretraining tensor-parallel split)."""
    if type(model).__name__ not in SUPPORTED:
        return None
    config = model.config
    if getattr(config, "hidden_act", None) != "silu":
        return None
    if getattr(config, "pretraining_tp", 1) != 1 or getattr(config, "mlp_bias", False):
        return None
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if layers is None or getattr(inner, "rotary_emb", None) is None:
        return None
    attention = layers[0].self_attn
    if hasattr(attention, "q_norm") or getattr(attention.o_proj, "bias", None) is not None:
        return None
    for module in model.modules():  # PEFT's LoRA layers, or any adapter hooked into a linear
        if hasattr(module, "lora_A") or hasattr(module, "base_layer"):
            return None
    return FusedDecoder(model)


def _rms_norm(hidden: torch.Tensor, norm: Any) -> torch.Tensor:
    """transformers' Llama RMSNorm: in float32, scaled by the weight in the input's dtype."""
    dtype = hidden.dtype
    states = hidden.to(torch.float32)
    states = states * torch.rsqrt(states.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon)
    return norm.weight * states.to(dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class FusedDecoder:
    """The decode step of one model (module docstring); call it with the rows' last tokens
    (rows x 1), their positions (rows x 1), the attention mask over the cache's columns with the
    new one (rows x columns) and the cache's layers; it returns the rows' next-token logits
    (rows x vocab), having written the new keys and values into the layers."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.inner = model.model
        config = model.config
        self.heads = config.num_attention_heads
        self.kv_heads = getattr(config, "num_key_value_heads", None) or self.heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        self.scaling = self.inner.layers[0].self_attn.scaling
        self.groups = self.heads // self.kv_heads

    @torch.no_grad()
    def __call__(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        mask: torch.Tensor,
        layers: Sequence[Any],
    ) -> torch.Tensor:
        inner, rows = self.inner, input_ids.shape[0]
        heads, kv_heads, dim = self.heads, self.kv_heads, self.head_dim
        hidden = functional.embedding(input_ids[:, 0], inner.embed_tokens.weight)  # rows x hidden
        cos, sin = inner.rotary_emb(hidden, positions)
        cos, sin = cos[:, :1], sin[:, :1]  # rows x 1 x head dim: one for every head
        # the padding mask as an additive bias, in the scores' layout (rows x 1 x 1 x columns)
        bias = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device)
        bias = bias.masked_fill_(mask == 0, torch.finfo(torch.float32).min)[:, None, None, :]
        small = rows * heads * mask.shape[1] * dim <= ELEMENTWISE_MAX
        for layer, cache in zip(inner.layers, layers, strict=True):
            attention = layer.self_attn
            x = self._norm(hidden, layer.input_layernorm)
            q = functional.linear(x, attention.q_proj.weight, attention.q_proj.bias)
            k = functional.linear(x, attention.k_proj.weight, attention.k_proj.bias)
            v = functional.linear(x, attention.v_proj.weight, attention.v_proj.bias)
            q = q.view(rows, heads, dim)
            k = k.view(rows, kv_heads, dim)
            q = q * cos + _rotate_half(q) * sin
            k = k * cos + _rotate_half(k) * sin
            keys, values = cache.update(k[:, :, None], v.view(rows, kv_heads, 1, dim))
            # rows x key/value heads x group x head dim: a key/value head serves a group of
            # query heads (grouped-query attention; a group of one otherwise)
            q = q.view(rows, kv_heads, self.groups, dim)
            if small:  # one query a row: elementwise products beat batched matrix products
                scores = (keys[:, :, None] * q[:, :, :, None]).sum(-1)
            else:
                scores = torch.matmul(q, keys.transpose(2, 3))
            scores = scores.float() * self.scaling + bias  # rows x kv heads x group x columns
            weights = torch.softmax(scores, dim=-1).to(q.dtype)
            if small:
                out = (weights[..., None] * values[:, :, None]).sum(-2)
            else:
                out = torch.matmul(weights, values)
            out = out.reshape(rows, heads * dim)
            hidden = hidden + functional.linear(out, attention.o_proj.weight)
            x = self._norm(hidden, layer.post_attention_layernorm)
            mlp = layer.mlp
            gated = functional.silu(functional.linear(x, mlp.gate_proj.weight)) * functional.linear(
                x, mlp.up_proj.weight
            )
            hidden = hidden + functional.linear(gated, mlp.down_proj.weight)
        hidden = self._norm(hidden, inner.norm)
        head = self.model.lm_head
        return functional.linear(hidden, head.weight, head.bias)

    @staticmethod
    def _norm(hidden: torch.Tensor, norm: Any) -> torch.Tensor:
        """transformers' Llama RMSNorm; in float32, torch's fused kernel of the same arithmetic."""
        if hidden.dtype == torch.float32:
            return functional.rms_norm(
                hidden, (hidden.shape[-1],), norm.weight, norm.variance_epsilon
            )
        return _rms_norm(hidden, norm)
