"""Run model-written Python in a throw-away, resource-limited child process (stdlib only).

    from envs.sandbox import SandboxConfig, run_code, run_many
    result = run_code("print(6 * 7)", SandboxConfig(timeout_s=2))
    result.stdout, result.exit_code, result.answer()     # "42\\n", 0, "42"
    run_many(["print(1)", "while True: pass"], max_workers=4)

What is enforced, and how:

| threat                          | defence                                                             |
|---------------------------------|---------------------------------------------------------------------|
| endless loop                    | wall-clock timeout: SIGKILL to the whole process group; RLIMIT_CPU  |
| memory hog                      | RLIMIT_AS (a `MemoryError`, or death by signal)                     |
| output flood                    | stdout/stderr read with a byte cap, the child killed past it;       |
|                                 | RLIMIT_FSIZE on files it writes                                     |
| fork bomb, subprocesses         | audit hook denies os.fork/forkpty/posix_spawn/exec/system,          |
|                                 | subprocess.Popen and importing ``_posixsubprocess``; RLIMIT_NPROC 0 |
|                                 | (not applied to root); the process group is killed at the end and   |
|                                 | any process still carrying the run's environment token is killed    |
| network                         | audit hook denies every ``socket.*`` event; ``network_namespace``   |
|                                 | (auto where ``unshare -n`` works, e.g. as root) a fresh, empty      |
|                                 | network namespace                                                   |
| files outside its directory     | audit hook: writes, renames, deletes, mkdir, chmod only inside the  |
|                                 | temp dir (symlinks resolved, links denied); reads only inside it    |
|                                 | and the interpreter's stdlib (not site-packages) plus               |
|                                 | ``extra_read_paths``; the temp dir is deleted afterwards            |
| the training process            | fresh interpreter (``-S -s -P -B``), clean environment, no inherited|
|                                 | fds but its pipes, own session, os.kill/killpg, ctypes, gc object   |
|                                 | walks and ``resource.setrlimit`` denied                             |
| interpreter crash (segfault)    | reported as death by signal; RLIMIT_CORE 0                          |

A denied operation ends the program at once (exit status 86) with ``violation`` naming it,
e.g. ``"blocked: socket.__new__"``. Functions with no audit event that reach outside (mknod,
mkfifo, nice, chroot, pidfd_open, setsid, clock_settime, ...) are deleted from the child's
modules, and compiled-in modules cannot be re-created to get them back.

``user=65534`` (or any unprivileged uid) adds what the kernel enforces: RLIMIT_NPROC (no
process or thread at all), file permissions, no capabilities. With a network namespace the
namespace is made as root and ``unshare --setuid/--setgid`` drops to the user; otherwise Popen
switches the user (the interpreter must then be readable by that uid).

Not enforced: the audit hook is defence in depth, not a security boundary (PEP 578): code that
gets around it (e.g. through a CPython bug) runs with the parent's user id, so as root, without
``user``, nothing but the hook protects files and RLIMIT_NPROC does not apply (threads work).
For hostile code use ``user`` or a container. Disk use is bounded per file (RLIMIT_FSIZE), not
in total. A relative ``os.open(..., dir_fd=...)`` is checked against the cwd (the event does not
carry the dir fd); that is sound because the cwd is pinned to the temp dir, dir fds can only be
opened inside it and no symlink can be made there.

Layout: `config` (`SandboxConfig`, `ExecResult`), `process` (one child: start, collect under the
limits, stop, sweep), `child` (the bootstrap the child runs before the program).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from envs.sandbox.config import ExecResult, SandboxConfig
from envs.sandbox.process import TOKEN_VAR, SandboxRun, sandbox_pids

__all__ = [
    "TOKEN_VAR",
    "ExecResult",
    "Executor",
    "SandboxConfig",
    "isolation_error",
    "run_code",
    "run_many",
    "sandbox_pids",
]


def run_code(code: str, config: SandboxConfig | None = None) -> ExecResult:
    """Run `code` as a Python program in a fresh sandboxed process; see the module docstring.

    Args:
        code (`str`): the program (any text: what does not compile is reported as an error).
        config (`SandboxConfig | None`): the limits; defaults to `SandboxConfig()`.

    Returns:
        The `ExecResult`. Nothing the program does makes this raise.

    Raises:
        TypeError: if `code` is not a str or `config` not a `SandboxConfig`.
        RuntimeError: if the sandbox itself cannot start (no bubblewrap, no user namespaces,
            no interpreter, no `unshare` when required) - a fault of the machine, never of
            the program; the message names what to install or change.
    """
    if not isinstance(code, str):
        raise TypeError(f"code must be a str (a Python program), got {type(code).__name__}")
    config = SandboxConfig() if config is None else config
    if not isinstance(config, SandboxConfig):
        raise TypeError(f"config must be a SandboxConfig, got {type(config).__name__}")
    try:
        return SandboxRun(code, config).execute()
    except OSError as err:
        raise RuntimeError(f"the sandbox could not run the program: {err}") from err


def isolation_error(config: SandboxConfig | None = None) -> str | None:
    """Why `run_code` cannot run under `config` (default: `SandboxConfig()`, bwrap) on this
    machine, e.g. bubblewrap missing or user namespaces disabled; None when it can.

    Runs one trivial program (a fraction of a second); tests use it to skip with the reason.
    """
    try:
        result = run_code("print('ok')", config)
    except RuntimeError as err:
        return str(err)
    if result.stdout != "ok\n":
        return f"a trivial program did not run: {result.observation(500)}"
    return None


class Executor:
    """Runs many programs at once on a bounded pool of threads, each waiting on its own child.

    Args:
        config (`SandboxConfig | None`): limits of every run.
        max_workers (`int | None`): children alive at once; defaults to `os.cpu_count()`.

    Raises:
        ValueError: if `max_workers` is not a positive int.
    """

    def __init__(self, config: SandboxConfig | None = None, max_workers: int | None = None) -> None:
        workers = os.cpu_count() or 1 if max_workers is None else max_workers
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"max_workers must be a positive int or None, got {max_workers!r}")
        self.config = SandboxConfig() if config is None else config
        self.max_workers = workers
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="sandbox")

    def submit(self, code: str) -> Future[ExecResult]:
        """Schedule one program; the future holds its `ExecResult`."""
        return self._pool.submit(run_code, code, self.config)

    def map(self, codes: Iterable[str]) -> list[ExecResult]:
        """Run every program; results in the order given."""
        return [future.result() for future in [self.submit(code) for code in codes]]

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True)

    def __enter__(self) -> Executor:  # noqa: PYI034 - typing.Self needs Python 3.11 only
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


def run_many(
    codes: Sequence[str], config: SandboxConfig | None = None, max_workers: int | None = None
) -> list[ExecResult]:
    """Run many programs in parallel (at most `max_workers` children at once), in order."""
    with Executor(config, max_workers) as executor:
        return executor.map(codes)
