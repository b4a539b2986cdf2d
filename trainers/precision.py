"""Mixed precision that trains: the half-precision attention guard, and bf16's choice on a CPU.

**Why ``--bf16 true`` ended in NaN gradients on a GPU** (the H200 run of ``docs/results.md``, "On
a GPU": step 10's gradient norm was NaN; the same job in float32 trained 92 steps clean). The
cause is PyTorch's cuDNN attention backward, the default `scaled_dot_product_attention` backend
for bf16 and fp16 on H100/H200 since torch 2.11. Its backward pass returns NaN in the query
gradient when three things hold together (pytorch/pytorch#196678, reduced from TRL #7181):

1. an explicit attention mask is passed;
2. the sequence length is 64 mod 128;
3. some query row's log-sum-exp is below ln(FLT_MAX), about -88.7.

A multi-agent training batch meets (1) and (3) on every step. Its prompts are left-padded, so
transformers hands SDPA a boolean mask. A padding position of a prompt is a query with nothing to
attend to: it is causally limited to keys the padding mask removes. Its log-sum-exp is -inf
(`tests/trainers/test_precision.py` records both on the embedded model). Condition (2) depends on
the width of each forward pass, which changes from step to step (the length-grouped chunks of
`trainers.algorithms.microbatch` are cut to their own rows' widths). So the NaN comes on the
first step with a chunk 64 mod 128 wide, not on step 1. cuDNN's attention runs only in half
precision, which is why float32 never met it. On the CPU no SDPA kernel has the bug: a
fully masked row gives zeros there, and bf16 autocast trains finite (measured, same test).

The other usual suspects were ruled out here:

- Masks cast to bf16: transformers 5 passes SDPA a boolean mask, not an fp32 minimum.
- bf16 optimizer state: the model is float32 under autocast, so AdamW holds float32 state.
- A bf16 LM head: it shifts log-probabilities by about 1e-2, but with ``num_iterations=1`` the
  ratio is exactly 1 and no gradient term divides by it.

`guard_attention` turns cuDNN's SDPA backend off (``torch.backends.cuda.enable_cudnn_sdp(False)``)
for a run that trains in bf16 or fp16 on CUDA. SDPA then takes the flash or memory-efficient
kernel, both clean on the bug's reproduction. This costs a few percent of attention time, which
is small next to a step. The project's trainers call it as they are built; `load_environment`'s
rollout calls it on its first call, for a stock `GRPOTrainer`. ``MATHTEAMS_CUDNN_SDPA=1`` leaves
cuDNN on, for a torch whose kernel is fixed.

**bf16 on a CPU** runs about 20x slower per step than float32 at the embedded size, on this
project's 2-core machines: autocast casts each small matmul's inputs, and CPUs without bf16
matrix units emulate it. `cpu_precision` turns a CPU run's ``--bf16 true`` into float32 and says
so; ``MATHTEAMS_CPU_BF16=1`` keeps bf16, for a CPU with AMX.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import torch

__all__ = ["cpu_precision", "guard_attention", "trains_half_on_cuda"]

logger = logging.getLogger(__name__)

KEEP_CUDNN = "MATHTEAMS_CUDNN_SDPA"
KEEP_CPU_BF16 = "MATHTEAMS_CPU_BF16"


def _half(args: Any) -> bool:
    return bool(getattr(args, "bf16", False) or getattr(args, "fp16", False))


def trains_half_on_cuda(args: Any, device: torch.device | str | None) -> bool:
    """Whether a run with TRL/transformers config `args` on `device` trains in bf16 or fp16 on
    CUDA (where cuDNN's attention backward can return NaN; module docstring)."""
    return _half(args) and device is not None and torch.device(device).type == "cuda"


def guard_attention(args: Any, device: torch.device | str | None) -> bool:
    """Turn cuDNN's SDPA backend off when `args` trains in half precision on CUDA `device`
    (module docstring); returns whether it did. Process-wide, as torch's flag is; idempotent."""
    if not trains_half_on_cuda(args, device) or os.environ.get(KEEP_CUDNN) == "1":
        return False
    if torch.backends.cuda.cudnn_sdp_enabled():
        torch.backends.cuda.enable_cudnn_sdp(False)
        logger.info(
            "half-precision training on CUDA: cuDNN's attention backend is off (its backward "
            "returns NaN gradients for left-padded rows at some widths; trainers.precision). "
            "%s=1 keeps it.",
            KEEP_CUDNN,
        )
    return True


def cpu_precision(config: Any) -> bool:
    """Train a CPU run (``use_cpu``, or no CUDA) in float32 when its config asks for bf16/fp16,
    saying so (module docstring); returns whether it changed `config`."""
    on_cpu = getattr(config, "use_cpu", False) or not torch.cuda.is_available()
    if not (_half(config) and on_cpu) or os.environ.get(KEEP_CPU_BF16) == "1":
        return False
    asked = "bf16" if getattr(config, "bf16", False) else "fp16"
    logger.warning(
        "--%s on the CPU: about 20x slower per step than float32 here (autocast emulates half "
        "precision without matrix units), so this run trains in float32. %s=1 keeps %s.",
        asked,
        KEEP_CPU_BF16,
        asked,
    )
    config.bf16 = False
    config.fp16 = False
    if hasattr(config, "mixed_precision"):  # TrainingArguments derives it in __post_init__
        config.mixed_precision = "no"
    return True
