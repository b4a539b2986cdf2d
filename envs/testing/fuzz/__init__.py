"""Property-based fuzzing of every environment and every verifier with adversarial text.

Used by ``scripts/fuzz.py`` (a large budget, every time bound enforced, a summary table) and by
the test suite's ``tests/fuzz/`` (a small, derandomized budget; time bounds reported, not
enforced, since the suite runs on shared machines), and usable on your own env or verifier once
registered. Needs Hypothesis, an optional dependency: ``pip install 'mathteams[fuzz]'`` (the
``dev`` extra has it too). It imports envs and rewards, never torch.

A `Target` is one thing under test and one property: ``target.check(data)`` draws its inputs
from a Hypothesis ``st.data()`` object, runs them, records the time of every call in
`COLLECTOR` and raises ``AssertionError`` (or the unexpected exception) when the property fails.
`run_target` runs one; `all_targets` lists them all.

Properties:

- environments (every id in ``envs.list_envs()``, with the ``arithmetic`` task and with
  `ODD_TASK`, whose references are LaTeX, fractions, intervals and matrices): full episodes in
  which every action is adversarial text, now and then a non-string; the only exception allowed
  is the documented ``TypeError`` naming the agent for a non-string action (after which the
  episode goes on); rewards are finite floats, infos carry the documented keys and no reference,
  observations lie in their spaces, the episode ends within ``max_turns``, and each step stays
  within `STEP_BOUND_S` plus the verifier's symbolic budget for each answer math-verify checked
  (plus the sandbox's time limit in an env that runs the agents' programs);
- verifiers (every name in ``rewards.list_verifiers()``): ``verify(response, reference)``
  returns a `Verdict` with a finite score in [0, 1] and a str reason, raises nothing for
  adversarial responses, only ``ValueError`` for adversarial references, and returns within
  `CALL_BOUND_S` plus its symbolic budget (``symbolic_budget``), also from a non-main thread;
- ``rewards.verify_batch``, the TRL adapter ``rewards.as_reward_func`` and the extraction
  functions of ``rewards.extract`` on the same inputs;
- the inputs the fuzz once found slow (`KNOWN_SLOW`), each within its own bound;
- the `math` verifier on each kind of answer that is costly to check symbolically
  (``symbolic[<kind>]``: huge binomials, integrals of towers, sums with huge bounds, towers of
  ``e``, ...; `symbolic_answer`), timed per kind.

Modules, in the order they build on each other: `generators` (what is fed in), `timing` (bounds,
records, the watchdog), `verifiers` (the verifiers under test), `properties` (what must hold),
`targets`, `runner` (profiles, runs).
"""

from __future__ import annotations

try:
    import hypothesis  # noqa: F401 - only to fail here, with the fix, when it is missing
except ImportError as err:  # pragma: no cover - depends on the install
    raise ImportError(
        "envs.testing.fuzz needs Hypothesis, an optional dependency: "
        "pip install 'mathteams[fuzz]' (or pip install hypothesis)"
    ) from err

from envs.testing.fuzz.generators import (
    KNOWN_SLOW,
    ODD_TASK,
    SYMBOLIC_CLASSES,
    TASKS,
    adversarial_text,
    symbolic_answer,
)
from envs.testing.fuzz.runner import (
    COLLECT_CHUNK,
    PROFILE_VAR,
    PROFILES,
    current_profile,
    register_profiles,
    run_target,
)
from envs.testing.fuzz.targets import (
    ENV_SCALE_VAR,
    Target,
    all_targets,
    batch_target,
    env_scales,
    env_target,
    extract_target,
    known_slow_target,
    reference_target,
    reward_func_target,
    symbolic_target,
    thread_target,
    verify_target,
)
from envs.testing.fuzz.timing import (
    CALL_BOUND_S,
    COLLECTOR,
    STEP_BOUND_S,
    Collector,
    Hang,
    Stats,
    table,
)
from envs.testing.fuzz.verifiers import (
    build_verifier,
    loopback_math_verifier,
    stop_loopback_servers,
)

__all__ = [
    "CALL_BOUND_S",
    "COLLECTOR",
    "COLLECT_CHUNK",
    "ENV_SCALE_VAR",
    "KNOWN_SLOW",
    "ODD_TASK",
    "PROFILES",
    "PROFILE_VAR",
    "STEP_BOUND_S",
    "SYMBOLIC_CLASSES",
    "TASKS",
    "Collector",
    "Hang",
    "Stats",
    "Target",
    "adversarial_text",
    "all_targets",
    "batch_target",
    "build_verifier",
    "current_profile",
    "env_scales",
    "env_target",
    "extract_target",
    "known_slow_target",
    "loopback_math_verifier",
    "reference_target",
    "register_profiles",
    "reward_func_target",
    "run_target",
    "stop_loopback_servers",
    "symbolic_answer",
    "symbolic_target",
    "table",
    "thread_target",
    "verify_target",
]
