"""Keep a long-lived server's resident memory flat under glibc's allocator.

The env server's Python heap stays flat under load (the soak, `benchmarks.soak`, with
``tracemalloc``: about 47 MiB traced from the first minute to the fifth), but its resident size
kept growing about 2 MiB a minute: memory freed by its worker threads stays in glibc's per-thread
arenas, fragmented, instead of going back to the system. Two glibc calls fix it where they exist:
`limit_arenas` caps the arenas before the worker threads start (`mallopt(M_ARENA_MAX)`), and
`trim` hands the free pages back (`malloc_trim(0)`), which the server calls now and then. Both
are no-ops on another C library (musl, macOS), where they return False.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
from typing import Any

logger = logging.getLogger(__name__)

M_ARENA_MAX = -8  # glibc's malloc.h
ARENAS = 2
"""Arenas the server's threads share: enough for its few workers, few enough to fragment little."""
TRIM_EVERY_S = 30.0
"""How often the server hands its free heap pages back (`trim` takes about a millisecond)."""


@functools.lru_cache(maxsize=1)
def _glibc() -> Any:
    """glibc, or None on another C library."""
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    if not (hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim")):
        return None
    return libc


def limit_arenas(arenas: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas at `arenas` (call before the threads start); False where it
    cannot (another C library, or glibc refused)."""
    libc = _glibc()
    if libc is None:
        return False
    done = bool(libc.mallopt(ctypes.c_int(M_ARENA_MAX), ctypes.c_int(arenas)))
    if not done:
        logger.warning(
            "mallopt(M_ARENA_MAX, %d) was refused; the arenas stay glibc's default", arenas
        )
    return done


def trim() -> bool:
    """Return the heap's free pages to the system (glibc's ``malloc_trim(0)``); False where
    there is no glibc. Its result (whether any memory was released) is not an error either way."""
    libc = _glibc()
    if libc is None:
        return False
    libc.malloc_trim(ctypes.c_size_t(0))
    return True
