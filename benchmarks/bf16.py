"""The bf16 check (``python -m benchmarks.bf16``): does a left-padded training pass give
finite gradients under bf16 autocast, with torch's cuDNN attention backend on and with the
project's guard (`trainers.precision.guard_attention`, cuDNN off)?

For each width (64 mod 128 meets the cuDNN backward bug's length condition; the others do not),
a batch of rows left-padded to that width goes forward and backward under bf16 autocast, as a
training micro-batch does; the figure is the count of non-finite gradient elements. On a CPU,
where no SDPA kernel has the bug, every count is 0. On an H100/H200 with torch >= 2.11 the
cuDNN column is where the NaN of ``--bf16 true`` shows, and the guard's column is 0.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import torch

WIDTHS = (192, 256, 320, 448)  # 192, 320, 448: 64 mod 128


def padded_batch(width: int, rows: int, vocab: int, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """`rows` random token rows left-padded to `width` (row i keeps width - 17 * i tokens, at
    least 8), and their attention mask."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, vocab, (rows, width), generator=generator)
    mask = torch.ones_like(ids)
    for i in range(rows):
        mask[i, : min(17 * i, width - 8)] = 0
    return ids * mask, mask


def nonfinite_gradients(model: Any, ids: torch.Tensor, mask: torch.Tensor, device: str) -> int:
    """Non-finite gradient elements after one bf16-autocast forward and backward of `model` on
    the batch (next-token loss over the real tokens)."""
    model.zero_grad(set_to_none=True)
    ids, mask = ids.to(device), mask.to(device)
    with torch.autocast(torch.device(device).type, dtype=torch.bfloat16):
        logits = model(input_ids=ids, attention_mask=mask).logits
    logps = logits.float()[:, :-1].log_softmax(-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    keep = mask[:, 1:].bool()
    (-(logps * keep).sum() / keep.sum()).backward()
    return sum(
        int((~torch.isfinite(p.grad)).sum()) for p in model.parameters() if p.grad is not None
    )


def check(model: Any, device: str, widths: tuple[int, ...] = WIDTHS, rows: int = 8) -> dict:
    """Per width, the non-finite gradient elements with cuDNN attention on and off."""
    vocab = model.config.vocab_size
    before = torch.backends.cuda.cudnn_sdp_enabled()
    out: dict[str, Any] = {"device": device, "torch": torch.__version__, "widths": {}}
    try:
        for width in widths:
            ids, mask = padded_batch(width, rows, vocab)
            counts = {}
            for name, cudnn in (("cudnn_on", True), ("guarded", False)):
                torch.backends.cuda.enable_cudnn_sdp(cudnn)
                counts[name] = nonfinite_gradients(model, ids, mask, device)
            out["widths"][str(width)] = counts
    finally:
        torch.backends.cuda.enable_cudnn_sdp(before)
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="model folder; default: the embedded one")
    parser.add_argument(
        "--qwen-0.5b",
        dest="qwen",
        action="store_true",
        help="Qwen2.5-0.5B's architecture, random weights ",
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--widths", type=int, nargs="+", default=list(WIDTHS))
    args = parser.parse_args(argv)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from benchmarks.common import qwen_05b
    from trainers.embedded import resolve_model

    path = resolve_model(args.model)
    if args.qwen:
        model = qwen_05b(AutoTokenizer.from_pretrained(path))
    else:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    figures = check(model.to(args.device).train(), args.device, tuple(args.widths))
    print(json.dumps(figures, indent=1))
    return figures


if __name__ == "__main__":
    main()
