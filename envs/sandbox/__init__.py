"""Run model-written Python in a throw-away, resource-limited child process (stdlib only).

    from envs.sandbox import SandboxConfig, run_code, run_many
    result = run_code("print(6 * 7)", SandboxConfig(timeout_s=2))
    result.stdout, result.exit_code, result.answer()     # "42\\n", 0, "42"
    run_many(["print(1)", "while True: pass"], max_workers=4)

By default (``isolation="bwrap"``) the child runs under bubblewrap, the boundary: the kernel
enforces what the table's "bwrap" column says whatever the program does, including getting
around the audit hook, which stays inside as a second layer. ``isolation="hook"`` (opt-in, it
warns) has only the hook column: defence in depth, not a security boundary.

| threat                  | bwrap (kernel)                         | hook mode (in-process)       |
|-------------------------|----------------------------------------|------------------------------|
| endless loop            | wall-clock timeout: SIGKILL to bwrap   | same, SIGKILL to the process |
|                         | and the namespace's init, so to every  | group; RLIMIT_CPU            |
|                         | process in it; RLIMIT_CPU              |                              |
| memory hog              | RLIMIT_AS                              | RLIMIT_AS                    |
| output flood            | output read with a byte cap, the child | same; RLIMIT_FSIZE; disk use |
|                         | killed past it; RLIMIT_FSIZE; the work | not bounded in total         |
|                         | dir is a tmpfs of ``max_disk_bytes``,  |                              |
|                         | /dev/shm a private 1 MiB tmpfs         |                              |
| fork bomb, subprocesses | seccomp: fork, vfork, clone without    | hook denies fork/spawn/exec/ |
|                         | CLONE_THREAD fail with EPERM (threads  | system,                      |
|                         | work); new pid namespace; nothing      | ``_posixsubprocess``;        |
|                         | outlives its init                      | RLIMIT_NPROC 0 (not for      |
|                         |                                        | root); escaped processes     |
|                         |                                        | swept by their environment   |
|                         |                                        | token                        |
| signals, ptrace, SIGIO  | new pid namespace (host pids do not    | hook denies os.kill/killpg,  |
| to other processes      | exist inside); seccomp denies ptrace,  | pidfd functions deleted,     |
|                         | process_vm_readv/writev, kcmp,         | fcntl F_SETOWN/F_SETSIG      |
|                         | pidfd_getfd; new session               | denied                       |
| network                 | new network namespace: only a loopback | hook denies ``socket.*``;    |
|                         | of its own; abstract unix sockets are  | ``unshare -n`` where it      |
|                         | per namespace too                      | works                        |
| host files, secrets     | mount namespace: only the              | hook: reads only in the temp |
|                         | interpreter's prefix (site-packages    | dir, stdlib,                 |
|                         | hidden), system library dirs and       | extra_read_paths (symlinks   |
|                         | ``extra_read_paths``, read-only; no    | resolved); clean environment |
|                         | /etc, /home, repository, host          |                              |
|                         | /dev/shm; ``--clearenv``               |                              |
| writing host files      | everything but the tmpfs work dir and  | hook: writes only in the     |
|                         | /dev/shm is read-only or absent; /proc | temp dir; the temp dir       |
|                         | read-only (see below); /dev holds no   | removed without following    |
|                         | host device node, stdin is a pipe      |                              |
|                         |                                        | symlinks or opening FIFOs    |
| the kernel, namespaces  | seccomp: mount, umount2, pivot_root,   | none                         |
|                         | chroot, setns, unshare, clone with     |                              |
|                         | namespace flags, keyctl/add_key/       |                              |
|                         | request_key, bpf, perf_event_open,     |                              |
|                         | io_uring, userfaultfd, module and      |                              |
|                         | kexec loading, open_by_handle_at,      |                              |
|                         | clocks, ... (`envs.sandbox.seccomp`);  |                              |
|                         | other ABIs (i386, x32) denied;         |                              |
|                         | ``--cap-drop ALL``; uid/gid 65534 in a |                              |
|                         | new user namespace, host uid 65534     |                              |
|                         | too when the caller is root (``user``) |                              |
| the parent (run_code)   | a setup channel the program never      | same                         |
|                         | holds tells a sandbox failure apart;   |                              |
|                         | whatever the program writes to the     |                              |
|                         | status channel, exits with or prints   |                              |
|                         | is an `ExecResult`                     |                              |
| interpreter crash       | death by signal; RLIMIT_CORE 0         | same                         |

Under bwrap a denied system call fails with EPERM (the program sees an ordinary OSError); the
hook ends the program at once (exit status 86) with ``violation`` naming the operation, e.g.
``"blocked: socket.__new__"``. Functions with no audit event that reach outside (mknod,
mkfifo, nice, chroot, pidfd_open, setsid, clock_settime, ...) are deleted from the child's
modules, and compiled-in modules cannot be re-created to get them back. ``audit_hook=False``
(bwrap only) leaves the kernel alone in charge, e.g. for packages that need ctypes.

The sandbox's uid maps to the caller's on the host: where the caller is root, the program is
host root without any capability. That is why /proc is mounted read-only (the kernel's global
sysctls, e.g. ``kernel/core_pattern``, are writable by uid 0 through DAC alone). For a second
kernel barrier run bwrap as an unprivileged user: ``user=65534`` (the interpreter must then be
readable by it). Under bwrap an exit status in 129..192 reads as death by that signal (bwrap
reports a signal as 128 + its number).

Not enforced: CPU and memory of the machine as a whole (no cgroup limits: many runs at once
share it); time-based side channels; kernel bugs in the system calls left allowed. Hook mode
leaves exposed whatever gets around the hook (e.g. a CPython bug): such code runs with the
caller's uid, files, network and processes; as root without ``user`` nothing but the hook
protects files and RLIMIT_NPROC does not apply (threads work). A relative ``os.open(...,
dir_fd=...)`` is checked by the hook against the cwd (the event does not carry the dir fd);
sound because the cwd is pinned to the work dir, dir fds can only be opened inside it and no
symlink can be made there.

Layout: `config` (`SandboxConfig`, `ExecResult`), `process` (one child: start, collect under the
limits, stop, sweep), `bwrap` (the bubblewrap command line), `seccomp` (the BPF filter), `child`
(the bootstrap the child runs before the program).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from envs.sandbox.cleanup import TOKEN_VAR, sandbox_pids
from envs.sandbox.config import ExecResult, SandboxConfig
from envs.sandbox.process import SandboxRun

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
