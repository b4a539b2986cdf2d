"""What several benchmark commands share: the repository's paths, the ``--json`` flag, GPU
synchronisation for timings, peak memory, the random-weight model of Qwen2.5-0.5B's
configuration, and servers started in processes of their own (`free_port`, `start_module`,
`wait_healthy`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# The folder that holds the project's packages: in a checkout (pip install -e), the repository.
REPO = Path(__file__).resolve().parents[1]

# Qwen2.5-0.5B's architecture (config values, no download); vocab follows the local tokenizer.
QWEN25_05B = {
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "rope_theta": 1_000_000.0,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
    "max_position_embeddings": 32768,
}


def add_json_argument(parser: argparse.ArgumentParser) -> None:
    """The ``--json PATH`` flag every command takes (``bench.py`` writes the figures there)."""
    parser.add_argument("--json", type=Path, default=None, help="write the figures to this file")


def cuda_sync() -> None:
    """Wait for queued GPU work (timings on a GPU), when CUDA is in use; else nothing."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def qwen_05b(tokenizer: Any, dtype: Any = None) -> Any:
    """A model of Qwen2.5-0.5B's architecture (`QWEN25_05B`) with random weights (seed 0), sized
    to `tokenizer`'s vocabulary and using its special tokens; `dtype` default float32."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        **QWEN25_05B,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return AutoModelForCausalLM.from_config(config, dtype=dtype or torch.float32)


@contextmanager
def peak_rss(every_s: float = 0.02) -> Iterator[list[int]]:
    """The process's peak resident memory (bytes) while the block runs, sampled from
    /proc/self/statm (where there is none, the process's lifetime peak, ru_maxrss)."""
    import os
    import resource
    import threading

    peak = [0]
    done = threading.Event()
    page = os.sysconf("SC_PAGE_SIZE")

    def sample() -> None:
        while True:
            with open("/proc/self/statm") as statm:
                peak[0] = max(peak[0], int(statm.read().split()[1]) * page)
            if done.wait(every_s):
                return

    if not os.path.exists("/proc/self/statm"):
        yield peak
        peak[0] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield peak
    finally:
        done.set()
        sampler.join()


def free_port() -> int:
    """A free TCP port on loopback (the OS's choice)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_module(module: str, args: Sequence[str], **popen: Any) -> Any:
    """``python -m module args`` in a process of its own, importing this checkout's packages
    (`REPO` first on ``PYTHONPATH``); `popen`: `subprocess.Popen`'s other arguments."""
    import os
    import subprocess

    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    command = [sys.executable, "-m", module, *args]
    return subprocess.Popen(command, env={**os.environ, "PYTHONPATH": path}, **popen)


def wait_healthy(
    name: str,
    url: str,
    process: Any,
    timeout_s: float,
    output: Callable[[], str],
    request_timeout_s: float = 5.0,
) -> Any:
    """Poll ``url/health`` until it answers 200 and return that response. Raises RuntimeError
    naming the `name` server when `process` exits first (with the tail of `output()`, its
    stderr) or `timeout_s` passes."""
    import time

    import httpx

    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=request_timeout_s) as client:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the {name} server exited: {output()[-2000:]}")
            try:
                answer = client.get(url + "/health")
                if answer.status_code == 200:
                    return answer
            except httpx.TransportError:
                pass  # not listening yet
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the {name} server did not answer on {url} within {timeout_s} s"
                )
            time.sleep(0.1)
