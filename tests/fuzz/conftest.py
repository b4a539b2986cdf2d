"""The fuzz tests' Hypothesis profiles (``envs.testing.fuzz.PROFILES``).

``MATHTEAMS_FUZZ_PROFILE=long`` (or ``--hypothesis-profile long``) raises the budget. What the
fuzz measured (inputs tried, calls over their time bound, slowest call) is reported at the end of
the run (see ``report_fuzz`` in ``tests/conftest.py``); ``MATHTEAMS_FUZZ_JSON=path`` also writes
it as JSON.
"""

from __future__ import annotations

from envs.testing.fuzz import register_profiles

register_profiles()
