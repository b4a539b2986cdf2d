"""Transitional alias of `envs.testing.fuzz.generators` (see ``tests/fuzz/harness``)."""

from __future__ import annotations

from envs.testing.fuzz.generators import references_for

__all__ = ["references_for"]
