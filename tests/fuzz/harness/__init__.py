"""Transitional alias: the fuzz harness is `envs.testing.fuzz`, installed with the package.

Kept only for the test modules that still import these names from here (``tests/conftest.py``,
``tests/rewards/test_safety.py``, ``tests/rewards/test_verifiers.py``); import them from
`envs.testing.fuzz` instead, and delete this package once none does.
"""

from __future__ import annotations

from envs.testing.fuzz import loopback_math_verifier, table

__all__ = ["loopback_math_verifier", "table"]
