"""One decode step of a Llama-family model for every running row, on the model's own weights.

A decode step of a small model is mostly Python and dispatch, not arithmetic: the embedded
model's forward (4 layers, 128 wide) spends most of its time in transformers' module calls, its
4-D mask construction and its output objects. `FusedDecoder` runs the same arithmetic as the
model's forward for one new token per row, straight on the model's parameters: embedding, per
layer RMSNorm, q/k/v projections (with their biases, Qwen2's), the model's own rotary module,
the new keys and values written in place into the batcher's cache (`agents.kv_cache.BufferLayer`),
attention under the rows' padding mask, the output projection, the SwiGLU
MLP, the final norm and the head. The batcher also runs its prompts through it (many new tokens a
row, each attending to the ones before it).

A small model's step is mostly fixed cost per call, so its weights are packed when the decoder is
built (at most `PACK_MAX` numbers): a layer's q/k/v projections, with copies of q and k whose
output rows are rotated half a head (rotary embedding's ``rotate_half``, a sign and a permutation,
exact), are one matrix, and the MLP's gate and up projections another. A decode step then takes 3
projections a layer instead of 6, and the rotary embedding 3 elementwise operations for q and k
together. Packing copies the weights, so a decoder decodes the model as it was when built: the
batcher builds one per rollout, whose weights are fixed (as its prefix store also assumes).
Larger models, whose step is mostly arithmetic, are read from their parameters at every call.

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

__all__ = ["PACK_MAX", "SUPPORTED", "FusedDecoder", "fused_decoder"]

# Causal-LM classes whose decoder layer is exactly: RMSNorm -> attention (q/k/v/o projections,
# rotary position embedding, no q/k norm) -> residual -> RMSNorm -> SwiGLU MLP -> residual.
SUPPORTED = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM")

PACK_MAX = 1 << 24
"""Numbers the packed weights may hold (a copy of every layer's attention and MLP projections:
64 MiB in float32); past it the decoder reads the model's parameters at every call."""


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
        self.packed = self._pack() if self._pack_size() <= PACK_MAX else None

    def _pack_size(self) -> int:
        layer = self.inner.layers[0]
        attention, mlp = layer.self_attn, layer.mlp
        rows = 2 * attention.q_proj.out_features + 3 * attention.k_proj.out_features
        rows += mlp.gate_proj.out_features + mlp.up_proj.out_features
        return rows * attention.q_proj.in_features * len(self.inner.layers)

    def _pack(self) -> list[tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]]:
        """Per layer: [q; k; v; rotate_half(q); rotate_half(k)] as one weight (and bias), and
        [gate; up] as another (new tensors: `torch.cat` copies)."""
        packed = []
        for layer in self.inner.layers:
            attention, mlp = layer.self_attn, layer.mlp
            projections = (attention.q_proj, attention.k_proj, attention.v_proj)
            weights = [p.weight for p in projections]
            weights += [self._rotated(p.weight) for p in projections[:2]]
            bias = None
            if attention.q_proj.bias is not None:
                biases = [p.bias for p in projections]
                biases += [self._rotated(p.bias) for p in projections[:2]]
                bias = torch.cat(biases).detach()
            qkv = torch.cat(weights).detach()
            gate_up = torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]).detach()
            packed.append((qkv, bias, gate_up))
        return packed

    def _rotated(self, weight: torch.Tensor) -> torch.Tensor:
        """The projection whose output is ``rotate_half`` of `weight`'s, head by head."""
        heads = weight.view(-1, self.head_dim, *weight.shape[1:])
        return _rotate_half(heads.transpose(1, -1)).transpose(1, -1).reshape(weight.shape)

    @torch.no_grad()
    def __call__(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        mask: torch.Tensor,
        layers: Sequence[Any],
    ) -> torch.Tensor:
        """Runs `input_ids` (rows x new tokens: one each when decoding, a prompt's when
        prefilling) at `positions` (the same shape) after the states the cache's `layers` hold,
        under `mask` (rows x the layers' columns and the new ones: 1 where a row attends; a new
        token also attends only to the new tokens before it); writes their keys and values into
        the layers and returns the logits of each row's last token (rows x vocab)."""
        inner, (rows, new) = self.inner, input_ids.shape
        hidden = functional.embedding(input_ids, inner.embed_tokens.weight)  # rows x new x hidden
        cos, sin = inner.rotary_emb(hidden, positions)
        cos, sin = cos[:, :, None], sin[:, :, None]  # rows x new x 1 x head dim: for every head
        bias = self._bias(mask, new, hidden.dtype)
        for index, (layer, cache) in enumerate(zip(inner.layers, layers, strict=True)):
            attention = layer.self_attn
            x = self._norm(hidden, layer.input_layernorm)
            q, k, v = self._qkv(index, layer, x, cos, sin)  # rows x heads x new x head dim
            keys, values = cache.update(k, v)
            # a key/value head serves a group of query heads (grouped-query attention)
            out = functional.scaled_dot_product_attention(
                q, keys, values, attn_mask=bias, scale=self.scaling, enable_gqa=self.groups > 1
            )
            out = out.transpose(1, 2).reshape(rows, new, -1)
            hidden = hidden + functional.linear(out, attention.o_proj.weight)
            x = self._norm(hidden, layer.post_attention_layernorm)
            hidden = hidden + self._mlp(index, layer, x)
        hidden = self._norm(hidden[:, -1], inner.norm)
        head = self.model.lm_head
        return functional.linear(hidden, head.weight, head.bias)

    @staticmethod
    def _bias(mask: torch.Tensor, new: int, dtype: torch.dtype) -> torch.Tensor:
        """`mask` as the additive bias scaled_dot_product_attention takes (rows x 1 x new x
        columns, in the queries' dtype): 0 where a new token attends, the dtype's lowest
        elsewhere, which covers the columns after it among the new ones."""
        allowed = mask[:, None, None, :].bool()
        if new > 1:
            columns = mask.shape[1]
            offsets = torch.arange(columns, device=mask.device) - (columns - new)
            causal = offsets[None, :] <= torch.arange(new, device=mask.device)[:, None]
            allowed = allowed & causal
        bias = torch.zeros(allowed.shape, dtype=dtype, device=mask.device)
        return bias.masked_fill_(~allowed, torch.finfo(dtype).min)

    def _qkv(
        self, index: int, layer: Any, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Layer `index`'s queries and keys (rotary embedded) and values of the normed hidden
        states `x` (rows x new x hidden), each heads x new tokens x head dim a row."""
        rows, new, _ = x.shape
        heads, kv_heads, dim = self.heads, self.kv_heads, self.head_dim
        attention = layer.self_attn
        turned = None
        if self.packed is None:
            weights = (attention.q_proj, attention.k_proj, attention.v_proj)
            q, k, v = (functional.linear(x, p.weight, p.bias) for p in weights)
            qk = torch.cat([q, k], dim=-1)
        else:
            weight, bias, _ = self.packed[index]
            plain = (heads + 2 * kv_heads) * dim
            if new > 1:  # a prompt: rotating its projections costs less than more products
                weight, bias = weight[:plain], None if bias is None else bias[:plain]
            out = functional.linear(x, weight, bias)
            qk, v = out[..., : plain - kv_heads * dim], out[..., plain - kv_heads * dim : plain]
            if new == 1:  # the packed weight's last rows gave the rotated q and k
                turned = out[..., plain:].view(rows, new, heads + kv_heads, dim)
        qk = qk.view(rows, new, heads + kv_heads, dim)
        turned = _rotate_half(qk) if turned is None else turned
        qk = (qk * cos + turned * sin).transpose(1, 2)
        v = v.view(rows, new, kv_heads, dim).transpose(1, 2)
        return qk[:, :heads], qk[:, heads:], v

    def _mlp(self, index: int, layer: Any, x: torch.Tensor) -> torch.Tensor:
        """Layer `index`'s SwiGLU MLP of the normed hidden states `x`."""
        mlp = layer.mlp
        if self.packed is not None:
            gate, up = functional.linear(x, self.packed[index][2]).chunk(2, dim=-1)
        else:
            gate = functional.linear(x, mlp.gate_proj.weight)
            up = functional.linear(x, mlp.up_proj.weight)
        return functional.linear(functional.silu(gate) * up, mlp.down_proj.weight)

    @staticmethod
    def _norm(hidden: torch.Tensor, norm: Any) -> torch.Tensor:
        """transformers' Llama RMSNorm; in float32, torch's fused kernel of the same arithmetic."""
        if hidden.dtype == torch.float32:
            return functional.rms_norm(
                hidden, (hidden.shape[-1],), norm.weight, norm.variance_epsilon
            )
        return _rms_norm(hidden, norm)
