"""Verify many responses at once, on every core.

Fast-path verifications take microseconds, so a process pool only pays off for large or slow
batches: `verify_batch` times the first few items serially and starts a pool only when the rest
would take longer serially than `serial_below_s` (default 0.5 s).
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import os
import pickle
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from rewards.base import Verdict, Verifier
from rewards.registry import get_verifier

__all__ = ["verify_batch"]

logger = logging.getLogger(__name__)

_PROBE_ITEMS = 16
_CHUNKS_PER_WORKER = 4


def _cpu_count() -> int:
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def _verify_chunk(verifier: Verifier, pairs: Sequence[tuple[str, str]]) -> list[Verdict]:
    return [verifier.verify(response, reference) for response, reference in pairs]


def _picklable(verifier: Verifier) -> bool:
    try:
        pickle.dumps(verifier)
    except (pickle.PicklingError, TypeError, AttributeError):
        return False
    return True


def _default_context() -> multiprocessing.context.BaseContext:
    # forkserver: no fork of a caller that may run threads (torch, tokenizers); spawn elsewhere.
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def verify_batch(
    verifier: Verifier | str,
    responses: Sequence[str],
    references: Sequence[str],
    num_workers: int | None = None,
    *,
    serial_below_s: float = 0.5,
    mp_context: str | None = None,
) -> list[Verdict]:
    """Verify ``responses[i]`` against ``references[i]`` for every i, results in input order.

    Args:
        verifier: a verifier or its registry name (it must pickle to run in a pool).
        responses: model outputs.
        references: one reference per response.
        num_workers: pool size (default: the CPUs this process may use); 1 means serial.
        serial_below_s: stay serial when the whole batch would take less than this serially
            (estimated from the first items); 0 always uses the pool for more than a few items.
        mp_context: a multiprocessing start method (default forkserver where available).

    Returns:
        One `Verdict` per response.

    Raises:
        ValueError: the sequences differ in length, or num_workers < 1; a bad reference raises
            as the verifier does.

    Examples:
        >>> [v.score for v in verify_batch("gsm8k", ["#### 1", "#### 3"], ["1", "2"])]
        [1.0, 0.0]
    """
    resolved = get_verifier(verifier) if isinstance(verifier, str) else verifier
    pairs = list(zip(responses, references, strict=False))
    if len(pairs) != len(responses) or len(pairs) != len(references):
        raise ValueError(
            f"verify_batch: {len(responses)} responses but {len(references)} references"
        )
    workers = _cpu_count() if num_workers is None else num_workers
    if workers < 1:
        raise ValueError(f"verify_batch: num_workers must be >= 1, got {num_workers!r}")
    probe = min(len(pairs), _PROBE_ITEMS)
    started = time.perf_counter()
    results = _verify_chunk(resolved, pairs[:probe])
    rest = pairs[probe:]
    estimate = (time.perf_counter() - started) / max(probe, 1) * len(rest)
    serial = not rest or workers == 1 or estimate < serial_below_s
    # A daemonic process (a multiprocessing.Pool worker) may not start children.
    if serial or multiprocessing.current_process().daemon or not _picklable(resolved):
        return results + _verify_chunk(resolved, rest)
    return results + _verify_pooled(resolved, rest, workers, mp_context)


def _verify_pooled(
    verifier: Verifier, pairs: list[tuple[str, str]], workers: int, mp_context: str | None
) -> list[Verdict]:
    """`pairs` verified in a process pool of at most `workers`, a few chunks each, in order;
    serially when the pool cannot start or breaks."""
    workers = min(workers, len(pairs))
    size = math.ceil(len(pairs) / (workers * _CHUNKS_PER_WORKER))
    chunks = [pairs[i : i + size] for i in range(0, len(pairs), size)]
    context = multiprocessing.get_context(mp_context) if mp_context else _default_context()
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            return [
                v
                for chunk in pool.map(_verify_chunk, [verifier] * len(chunks), chunks)
                for v in chunk
            ]
    except (OSError, BrokenProcessPool) as exc:
        logger.warning("verify_batch: process pool failed (%s); verifying serially", exc)
        return _verify_chunk(verifier, pairs)
