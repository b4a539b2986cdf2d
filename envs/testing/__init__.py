"""Test tools installed with the package, as ``pettingzoo.test`` ships ``api_test``.

- `envs.testing.fuzz`: property-based fuzzing of every registered env and verifier with
  adversarial text (needs Hypothesis: ``pip install 'mathteams[fuzz]'``). ``scripts/fuzz.py``
  runs it with a large budget, ``tests/fuzz/`` with a small one.

``import envs`` does not import this package, and importing it imports no subpackage: a tool
and its optional dependency load only when asked for.
"""
