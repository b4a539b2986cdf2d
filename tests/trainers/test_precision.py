"""bf16 that trains (`trainers.precision`): the cuDNN attention guard and the CPU's float32."""

from __future__ import annotations

import logging
import math

import pytest
import torch

from tests.trainers.helpers import grpo_config, shaped
from trainers import precision
from trainers.algorithms.grpo import build_grpo_trainer
from trainers.algorithms.grpo_config import CPUGRPOConfig
from trainers.algorithms.sft import CPUSFTConfig, offline_trainer


@pytest.fixture
def cudnn_flag():
    """torch's process-wide cuDNN SDPA flag, on at the start and restored at the end."""
    before = torch.backends.cuda.cudnn_sdp_enabled()
    torch.backends.cuda.enable_cudnn_sdp(True)
    yield
    torch.backends.cuda.enable_cudnn_sdp(before)


@pytest.fixture
def as_if_cuda(monkeypatch):
    """The guard's device check answers as on a GPU: the code that runs there, on the CPU."""
    monkeypatch.setattr(
        precision, "trains_half_on_cuda", lambda args, device: precision._half(args)
    )


class _Recorder:
    """Wraps torch's SDPA, which transformers' attention calls: per call, whether a mask was passed, the query
    length, and how many query rows attend to no key (log-sum-exp -inf)."""

    def __init__(self) -> None:
        self.calls: list[tuple[bool, int, int]] = []
        self.inner = torch.nn.functional.scaled_dot_product_attention

    def __call__(self, query, key, value, attn_mask=None, *args, **kwargs):
        unattended = 0
        if attn_mask is not None and attn_mask.dtype == torch.bool:
            unattended = int((~attn_mask.any(-1)).sum())
        self.calls.append((attn_mask is not None, query.shape[-2], unattended))
        return self.inner(query, key, value, attn_mask, *args, **kwargs)


def test_a_bf16_training_step_meets_the_cudnn_bugs_conditions_and_is_finite_on_the_cpu(
    tiny_model, tmp_path, monkeypatch
):
    """A real multi-agent GRPO step under CPU bf16 autocast: its forward passes give SDPA an
    explicit mask with query rows that attend to nothing (two of the three conditions of cuDNN's
    NaN backward; the third is the width, 64 mod 128), and its gradient norm is finite here, where
    no kernel has the bug."""
    recorder = _Recorder()
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", recorder)
    trainer = build_grpo_trainer(
        tiny_model,
        "math/reflection-v0",
        {"rounds": 1},
        grpo_config(tmp_path, bf16=True, logging_steps=1),
        train_problems=3,
        num_envs=8,
    )
    trainer.reward_funcs[0] = shaped
    trainer.train()
    masked = [call for call in recorder.calls if call[0]]
    assert masked, "no SDPA call received an explicit mask"
    assert any(unattended for _, _, unattended in masked)
    norms = [log["grad_norm"] for log in trainer.state.log_history if "grad_norm" in log]
    assert norms and all(math.isfinite(n) for n in norms)


@pytest.mark.parametrize(
    ("flags", "device", "guarded"),
    [
        ({"bf16": True}, "cuda", True),
        ({"fp16": True}, "cuda:1", True),
        ({}, "cuda", False),
        ({"bf16": True}, "cpu", False),
        ({"bf16": True}, None, False),
    ],
)
def test_the_guard_turns_cudnn_attention_off_only_for_half_precision_on_cuda(
    cudnn_flag, flags, device, guarded
):
    args = type("Args", (), {"bf16": False, "fp16": False, **flags})()
    assert precision.guard_attention(args, device) is guarded
    assert torch.backends.cuda.cudnn_sdp_enabled() is not guarded


def test_the_guard_can_be_told_to_keep_cudnn(cudnn_flag, monkeypatch):
    monkeypatch.setenv(precision.KEEP_CUDNN, "1")
    args = type("Args", (), {"bf16": True, "fp16": False})()
    assert precision.guard_attention(args, "cuda") is False
    assert torch.backends.cuda.cudnn_sdp_enabled()


def test_the_project_trainers_guard_a_bf16_run_as_they_are_built(
    cudnn_flag, as_if_cuda, tiny_model, tmp_path
):
    build_grpo_trainer(
        tiny_model,
        "math/solve-v0",
        {},
        grpo_config(tmp_path, bf16=True, per_device_train_batch_size=2),
        train_problems=2,
    )
    assert not torch.backends.cuda.cudnn_sdp_enabled()

    torch.backends.cuda.enable_cudnn_sdp(True)
    from datasets import Dataset
    from trl import SFTTrainer

    rows = [
        {"messages": [{"role": "user", "content": "1+1"}, {"role": "assistant", "content": "2"}]}
    ]
    sft = CPUSFTConfig(output_dir=str(tmp_path / "sft"), bf16=True, report_to="none", max_steps=1)
    offline_trainer(SFTTrainer, tiny_model, sft, Dataset.from_list(rows))
    assert not torch.backends.cuda.cudnn_sdp_enabled()


def test_a_float32_build_leaves_cudnn_alone(cudnn_flag, as_if_cuda, tiny_model, tmp_path):
    build_grpo_trainer(
        tiny_model,
        "math/solve-v0",
        {},
        grpo_config(tmp_path, per_device_train_batch_size=2),
        train_problems=2,
    )
    assert torch.backends.cuda.cudnn_sdp_enabled()


def test_a_cpu_run_asked_for_bf16_trains_in_float32_and_says_so(tmp_path, caplog, monkeypatch):
    config = CPUGRPOConfig(output_dir=str(tmp_path), bf16=True)
    assert config.mixed_precision == "bf16"
    with caplog.at_level(logging.WARNING, logger="trainers.precision"):
        assert precision.cpu_precision(config) is True
    assert (config.bf16, config.fp16, config.mixed_precision) == (False, False, "no")
    assert "--bf16 on the CPU" in caplog.text and "float32" in caplog.text

    float32 = CPUGRPOConfig(output_dir=str(tmp_path))
    assert precision.cpu_precision(float32) is False

    monkeypatch.setenv(precision.KEEP_CPU_BF16, "1")
    kept = CPUGRPOConfig(output_dir=str(tmp_path), bf16=True)
    assert precision.cpu_precision(kept) is False and kept.bf16


def test_the_bf16_check_finds_finite_gradients_on_the_cpu(tiny_model):
    from transformers import AutoModelForCausalLM

    from benchmarks.bf16 import check, padded_batch

    ids, mask = padded_batch(40, 4, 100)
    assert mask[0].all() and not mask[3, :32].any() and mask[3, 32:].all()  # 8 kept at least
    assert (ids[mask == 0] == 0).all()
    model = AutoModelForCausalLM.from_pretrained(tiny_model).train()
    figures = check(model, "cpu", widths=(40, 64))
    assert figures["widths"] == {w: {"cudnn_on": 0, "guarded": 0} for w in ("40", "64")}
