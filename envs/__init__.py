"""Multi-agent text environments for math reasoning (PettingZoo), with tasks and a registry.

import envs
env = envs.make("math/reflection-v0", task="arithmetic")
env.reset(seed=0)
for agent in env.agent_iter():
    obs, reward, terminated, truncated, info = env.last()
    env.step(None if terminated or truncated else my_policy(obs))

The same env served by ``python scripts/serve_envs.py`` (`envs.serving.server`) is
``envs.remote("http://127.0.0.1:8001", "math/reflection-v0")`` (`envs.serving.client`).
``import envs`` loads no networking code: `envs.remote` and the other client names
(`RemoteAECEnv`, `RemoteParallelEnv`, `EnvServerError`, `EnvRequestError`) import
`envs.serving` on first use.
"""

from __future__ import annotations

from typing import Any

from envs.errors import (
    DataLoadError,
    DuplicateEnvError,
    DuplicateTaskError,
    RegistryError,
    UnknownEnvError,
    UnknownTaskError,
)
from envs.options import (
    CodeOptions,
    DebateOptions,
    EnsembleOptions,
    EnvFacts,
    ReflectionOptions,
    SolveOptions,
    TaskOptions,
    ToolOptions,
)
from envs.registry import EnvSpec, deregister, list_envs, make, register, spec
from envs.sandbox import ExecResult, SandboxConfig, run_code, run_many
from envs.tasks import (
    EmbeddedPart,
    FamilyProbe,
    Levels,
    Task,
    TaskFamily,
    default_levels,
    deregister_task,
    families,
    generated_task,
    get_family,
    list_tasks,
    make_task,
    procedural_tasks,
    register_family,
    register_generated,
    register_task,
)
from envs.tasks.problems import DEFAULT_TASK
from envs.tasks.sources import ListSource, Problem, ProblemSource, load_jsonl, make_problem
from envs.tasks.splits import overlap

# The built-in table: entry points are strings, so listing envs imports no env module; each
# env's options class (`envs.options`, no env module either) states its options and its facts.
register("math/solve-v0", "envs.solve:env", options=SolveOptions)
# A run (training or evaluation) of reflection plays `unknown`, the embedded model's task. The
# critic is paid for its verdict (the env's default; paying it by the revision's outcome taught
# it to accept). Every role's turn earns 0 when it states a false equation (`--audit ""` turns
# it off): paid by the verdict alone, a critic sharing weights with a mostly right solver learns
# to write "= 0: it checks" under any subtraction (envs/reflection.py). After a rejection the
# refiner solves afresh (`revise` applies the critic's check): on validation, a refiner applying
# the trained critic's checks broke 60% of right answers (team final answer 0.18), one solving
# afresh 7% (0.86; docs/results.md, "Credit and protocol options, chosen on validation").
# A task family declares its own run defaults per env, with the reasons beside them, in its folder
# (`envs.tasks.family.TaskFamily.run_defaults`; `EnvSpec.run_defaults` reads them first).
REFLECTION_RUNS = {
    "*": {"audit": "solver,critic,refiner", "refiner_mode": "resolve"},
}
register(
    "math/reflection-v0",
    "envs.reflection:env",
    options=ReflectionOptions,
    run_task=DEFAULT_TASK,
    run_options=REFLECTION_RUNS,
)
register("math/debate-v0", "envs.debate:env", options=DebateOptions)
register("math/ensemble-v0", "envs.ensemble:env", options=EnsembleOptions)
# The embedded recipe writes tool transcripts (the warm-up's demonstrations) of `unknown` only.
register("math/tool-v0", "envs.tool:env", options=ToolOptions, run_task=DEFAULT_TASK)
register("math/code-v0", "envs.code:env", options=CodeOptions)


def _register_gymnasium() -> None:
    import gymnasium

    if "math/solve-v0" not in gymnasium.registry:
        gymnasium.register(
            "math/solve-v0", entry_point="envs.solve:SolveGymEnv", disable_env_checker=False
        )


_register_gymnasium()


# The env server's client, loaded on first use: `import envs` stays free of networking code.
_SERVING_NAMES = frozenset(
    {"EnvRequestError", "EnvServerError", "RemoteAECEnv", "RemoteParallelEnv", "remote"}
)


def __getattr__(name: str) -> Any:
    if name in _SERVING_NAMES:
        from envs import serving

        return getattr(serving, name)
    raise AttributeError(f"module 'envs' has no attribute {name!r}")


def check_env(env, **kwargs):
    """Run PettingZoo's API tests and the project's text checks; see `envs.checks.check_env`."""
    from envs.checks import check_env as _check_env

    return _check_env(env, **kwargs)


__all__ = [
    "DataLoadError",
    "DuplicateEnvError",
    "DuplicateTaskError",
    "EmbeddedPart",
    "EnvFacts",
    "EnvSpec",
    "ExecResult",
    "FamilyProbe",
    "Levels",
    "ListSource",
    "Problem",
    "ProblemSource",
    "RegistryError",
    "SandboxConfig",
    "Task",
    "TaskFamily",
    "TaskOptions",
    "UnknownEnvError",
    "UnknownTaskError",
    "check_env",
    "default_levels",
    "deregister",
    "deregister_task",
    "families",
    "generated_task",
    "get_family",
    "list_envs",
    "list_tasks",
    "load_jsonl",
    "make",
    "make_problem",
    "make_task",
    "overlap",
    "procedural_tasks",
    "register",
    "register_family",
    "register_generated",
    "register_task",
    "run_code",
    "run_many",
    "spec",
]
