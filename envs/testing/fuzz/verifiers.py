"""The verifiers under test, as the fuzz builds them: each registered one with its defaults,
a composite of several, and the remote client against a reward server on loopback; math-verify
imported and its helper process timed before any call is timed."""

from __future__ import annotations

import atexit
import time
from typing import Any

from envs.testing.fuzz.timing import in_thread
from rewards import CompositeVerifier, get_verifier

_WARM: list[bool] = []


def warm_up(attempts: int = 3) -> None:
    """Import math-verify (and sympy) once, outside any timing: the first symbolic check pays it.

    On a busy machine the imports alone can outlast the verifier's timeout, which interrupts
    them; each attempt gets further (the modules that finished stay imported), so a few are
    made before this fails."""
    if _WARM:
        return
    verdict = None
    for _ in range(attempts):
        verdict = get_verifier("math").verify("\\boxed{x+1}", "1+x")
        if verdict.score == 1.0:
            _WARM.append(True)
            return
    raise AssertionError(f"math-verify could not check x+1 = 1+x in {attempts} attempts: {verdict}")


_SERVERS: dict[str, Any] = {}


def loopback_math_verifier(**math_options: Any) -> Any:
    """A `RemoteVerifier` for `math` (with `math_options`) on a loopback reward server of this
    process, started once per option set and kept until `stop_loopback_servers` (at exit at the
    latest): the `remote` verifier needs a live server. Needs the ``server`` extra (fastapi,
    uvicorn, httpx)."""
    from rewards import RemoteVerifier
    from rewards.serving.http import BackgroundServer
    from rewards.serving.server import create_app

    key = repr(sorted(math_options.items()))
    if key not in _SERVERS:
        app = create_app({"math": get_verifier("math", **math_options)})
        if not _SERVERS:
            atexit.register(stop_loopback_servers)
        _SERVERS[key] = BackgroundServer(app).start()
    return RemoteVerifier(_SERVERS[key].url, verifier="math", retries=0)


def stop_loopback_servers() -> int:
    """Stop the reward servers `loopback_math_verifier` started and close the process's pooled
    connections to reward servers (`rewards.remote.close_clients`); returns how many servers
    stopped. A later `loopback_math_verifier` starts a new one. Called at exit, and by a test
    session's end (``tests/conftest.py``), so that no socket is left open."""
    from rewards.remote import close_clients

    servers = list(_SERVERS.values())
    _SERVERS.clear()
    close_clients()  # first: the servers' shutdown then finds no kept-alive connection waiting
    for server in servers:
        server.stop()
    return len(servers)


def build_verifier(name: str, math_budget_s: float | None = None) -> Any:
    """The verifier registered as `name`, built with its defaults.

    Args:
        name: a name from ``rewards.list_verifiers()``.
        math_budget_s: the symbolic budget of the math-verify based verifiers, seconds per
            answer (None: their default, ``budget_s``).
    """
    warm_up()
    math_options = {} if math_budget_s is None else {"budget_s": math_budget_s}
    if name == "composite":  # the only verifier that needs options: a few of the others
        return CompositeVerifier(
            {
                get_verifier("math", **math_options): 2.0,
                "partial_numeric": 1.0,
                "format": 1.0,
                "similarity": 0.5,
            }
        )
    if name in ("math", "math_verify"):
        return get_verifier(name, **math_options)
    if name == "remote":  # the client, against a real reward server on loopback
        remote = loopback_math_verifier(**math_options)
        remote.served = get_verifier("math", **math_options)  # what the server runs, for budgets
        return remote
    return get_verifier(name)


_HELPER_START_S: list[float] = []


def helper_start_s() -> float:
    """Seconds a math-verify helper process takes to start here (measured once, from a thread)."""
    if not _HELPER_START_S:
        from rewards.symbolic import shutdown_workers

        shutdown_workers()  # measure a cold start, as after a helper is killed
        started = time.perf_counter()
        verify = get_verifier("math").verify
        verdict = in_thread(verify, "\\boxed{x+1}", "1+x", wait=300)
        assert verdict.score == 1.0, verdict
        _HELPER_START_S.append(time.perf_counter() - started)
    return _HELPER_START_S[0]
