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
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

logger = logging.getLogger(__name__)

VIOLATION_EXIT = 86
SETUP_EXIT = 87  # the bootstrap failed: a fault of the sandbox or machine, not of the program
TOKEN_VAR = "MATHTEAMS_SANDBOX"
PROGRAM = "program.py"
# -P (no cwd on sys.path) exists from Python 3.11; without it the cwd is the temp dir anyway.
SAFE_PATH = ("-P",) if sys.version_info >= (3, 11) else ()
_BOXED = re.compile(r"\\boxed\{((?:[^{}]|\{[^{}]*\})*)\}")

# The child's bootstrap, run with `python -c` before the program. It sets the limits, installs
# the audit hook and runs program.py as __main__. The hook's globals are a private dict with a
# copy of builtins and the C functions it needs bound at install time, so the program cannot
# patch what the hook relies on (os.path, builtins) and cannot reach the hook (gc walks denied).
_BOOTSTRAP = r"""
import sys, posix, builtins, resource, _imp

def _hook(event, args):
    if event == "open":
        path, mode, flags = args
        if type(path) is int:
            return  # wraps an fd that is already open (and was checked when it was opened)
        write = (type(mode) is str and any(c in mode for c in "wax+")) or (
            type(flags) is int and flags > 0 and flags & WRITE_FLAGS)
        if mode is None:  # os.open: only inside the temp dir, so no outside dir fd is had
            write = True  # (its dir_fd is not in the event; with the cwd pinned to the temp
                          # dir, a path that stays inside from there stays inside from any
                          # dir fd inside it, as no symlink can be made there)
        _check(event, path, None, write)
    elif event == "os.chdir":
        target = args[0]
        where = _readlink("/proc/self/fd/%d" % target) if type(target) is int else _resolve(
            target, None)
        if where != TMP:
            _deny(event, "the working directory stays the temp dir")
    elif event == "import":
        name = args[0]
        if name in DENY_IMPORTS or name.startswith("_test") or name in PRELOADED:
            _deny(event, name)
    elif event in PATH_EVENTS:
        for path_at, fd_at, write in PATH_EVENTS[event]:
            fd = args[fd_at] if fd_at is not None else None
            _check(event, args[path_at], fd, write)
    elif event in DENY_EVENTS or event.startswith(DENY_PREFIXES):
        _deny(event, "")

def _deny(event, detail):
    text = "blocked: " + event + (" (" + detail + ")" if detail else "")
    _write(STATUS_FD, text.encode("utf-8", "replace")[:2000])
    _exit(VIOLATION_EXIT)

def _check(event, path, dir_fd, write):
    if type(path) is int:
        return
    if path is None:
        path = "."  # os.listdir() and os.scandir(): the cwd
    resolved = _resolve(path, dir_fd)
    if resolved is None:
        _deny(event, "path of type " + type(path).__name__ + "; pass a str")
    if _under(resolved, (TMP,)) or resolved in DEVICES:
        return
    if not write and _under(resolved, READ_ROOTS) and not _under(resolved, HIDDEN):
        return
    _deny(event, ("write " if write else "read ") + resolved)

def _under(path, roots):
    for root in roots:
        if path == root or path.startswith(root + "/") or root == "/":
            return True
    return False

def _resolve(path, dir_fd):
    kind = type(path)
    if kind is bytes:
        path = path.decode("utf-8", "surrogateescape")
    elif kind is not str:
        if not (isinstance(path, PurePath) and kind.__fspath__ is FSPATH and kind.__str__ is STR):
            return None
        path = STR(path)
    if not path.startswith("/"):
        at_cwd = dir_fd is None or dir_fd == -1 or dir_fd == -100
        base = _getcwd() if at_cwd else _readlink("/proc/self/fd/%d" % dir_fd)
        path = base + "/" + path
    done, rest, hops = "", [p for p in path.split("/") if p][::-1], 0
    while rest:
        name = rest.pop()
        if name == ".":
            continue
        if name == "..":
            done = done[: done.rfind("/")]
            continue
        candidate = done + "/" + name
        try:
            mode = _lstat(candidate).st_mode
        except (OSError, ValueError):
            done = candidate  # missing: the kernel fails the call itself, keep it lexical
            continue
        if mode & 0o170000 != 0o120000:
            done = candidate
            continue
        hops += 1
        if hops > 40:
            return None
        target = _readlink(candidate)
        if target.startswith("/"):
            done = ""
        rest.extend([p for p in target.split("/") if p][::-1])
    return done or "/"

UNSAFE_OS = ("mknod", "mkfifo", "nice", "setpriority", "sched_setscheduler", "sched_setparam",
             "sched_setaffinity", "chroot", "pidfd_open", "setns", "unshare", "setsid",
             "setpgid", "setpgrp", "tcsetpgrp")

def _install(argv):
    tmp, status_fd, mem, cpu, fsize, nofile, nproc, extra = argv
    R = resource
    limits = [(R.RLIMIT_CORE, 0, 0), (R.RLIMIT_AS, int(mem), int(mem)),
              (R.RLIMIT_CPU, int(cpu), int(cpu) + 1), (R.RLIMIT_FSIZE, int(fsize), int(fsize)),
              (R.RLIMIT_NOFILE, int(nofile), int(nofile))]
    if int(nproc) >= 0:
        limits.append((R.RLIMIT_NPROC, int(nproc), int(nproc)))
    for what, soft, hard in limits:
        R.setrlimit(what, (soft, hard))
    # Import every compiled-in module now, then forbid re-importing them and remove the one
    # function that re-creates them outside the import system (which would bring back the
    # functions deleted below).
    for name in sys.builtin_module_names:
        __import__(name)
    del _imp.create_builtin
    import os, pathlib, _signal, time
    # Functions with no audit event that reach outside the temp dir or the process: files
    # made anywhere, scheduling, other processes by pidfd, the system clock.
    for mod, names in ((posix, UNSAFE_OS), (os, UNSAFE_OS), (_signal, ("pidfd_send_signal",)),
                       (time, ("clock_settime", "clock_settime_ns"))):
        for name in names:
            if hasattr(mod, name):
                delattr(mod, name)
    private = {"__builtins__": dict(builtins.__dict__)}
    for fn in (_hook, _deny, _check, _under, _resolve):
        private[fn.__name__] = type(fn)(fn.__code__, private, fn.__name__)
    private.update(
        PurePath=pathlib.PurePath, FSPATH=pathlib.PurePath.__fspath__,
        STR=pathlib.PurePath.__str__, _lstat=posix.lstat, _readlink=posix.readlink,
        _getcwd=posix.getcwd, _write=posix.write, _exit=posix._exit)
    roots = [private["_resolve"](p, None) for p in list(sys.path) + extra.split("\n") if p]
    private.update(
        TMP=private["_resolve"](tmp, None), STATUS_FD=int(status_fd),
        READ_ROOTS=tuple(r for r in roots if r), HIDDEN=tuple(
            r + "/" + sub for r in roots if r for sub in ("site-packages", "dist-packages")
            if r + "/" + sub not in roots),
        DEVICES=("/dev/null", "/dev/urandom", "/dev/zero"), WRITE_FLAGS=0o1103,
        VIOLATION_EXIT=86, PRELOADED=frozenset(sys.builtin_module_names),
        DENY_IMPORTS=frozenset(("_posixsubprocess", "_ctypes", "ctypes", "_xxsubinterpreters",
                                "_xxinterpchannels", "_tkinter", "readline", "_ctypes_test")),
        DENY_EVENTS=frozenset(("os.system", "os.fork", "os.forkpty", "os.kill", "os.killpg",
                               "os.link", "os.symlink", "signal.pthread_kill", "sys.addaudithook",
                               "resource.setrlimit", "resource.prlimit", "gc.get_objects",
                               "gc.get_referrers", "gc.get_referents", "fcntl.ioctl",
                               "os.startfile", "webbrowser.open", "pty.spawn")),
        DENY_PREFIXES=("socket.", "ctypes.", "subprocess.", "os.exec", "os.spawn",
                       "os.posix_spawn", "sqlite3.", "_winapi.", "winreg.", "msvcrt."),
        PATH_EVENTS={
            "os.listdir": ((0, None, False),), "os.scandir": ((0, None, False),),
            "os.listxattr": ((0, None, False),),
            "os.getxattr": ((0, None, False),), "os.walk": ((0, None, False),),
            "os.fwalk": ((0, 4, False),), "os.chmod": ((0, 2, True),),
            "os.chown": ((0, 3, True),), "os.mkdir": ((0, 2, True),),
            "os.remove": ((0, 1, True),), "os.rmdir": ((0, 1, True),),
            "os.rename": ((0, 2, True), (1, 3, True)), "os.truncate": ((0, None, True),),
            "os.utime": ((0, 3, True),), "os.setxattr": ((0, None, True),),
            "os.removexattr": ((0, None, True),),
        },
    )
    sys.path.extend(p for p in extra.split("\n") if p)
    sys.addaudithook(private["_hook"])

def _run():
    try:
        with open("program.py", "rb") as handle:
            source = handle.read()
        _install(sys.argv[1:])
    except BaseException as exc:  # a fault of the sandbox, reported to the parent as such
        posix.write(int(sys.argv[2]), ("setup failed: %r" % (exc,)).encode("utf-8", "replace"))
        posix._exit(87)
    main = type(sys)("__main__")
    main.__file__, main.__builtins__ = "program.py", builtins
    sys.modules["__main__"] = main
    sys.argv = ["program.py"]
    try:
        code = compile(source, "program.py", "exec")
        exec(code, main.__dict__)
    except SystemExit:
        raise
    except BaseException as exc:
        tb = exc.__traceback__
        exc = exc.with_traceback(tb.tb_next if tb is not None else None)  # hide this frame
        sys.__excepthook__(type(exc), exc, exc.__traceback__)
        sys.exit(1)

_run()
"""


@dataclass(frozen=True)
class SandboxConfig:
    """Limits of one sandboxed run.

    Args:
        timeout_s (`float`, 5.0): wall-clock limit; the process group is killed past it.
        cpu_s (`int`, 5): CPU-seconds limit (RLIMIT_CPU; SIGXCPU, then SIGKILL one second later).
        memory_mb (`int`, 512): address-space limit (RLIMIT_AS), in MiB; at least 64.
        max_output_bytes (`int`, 65536): bytes of stdout plus stderr kept; past it the child
            is killed and `output_truncated` set.
        max_file_bytes (`int`, 1048576): largest file the program may write (RLIMIT_FSIZE).
        max_open_files (`int`, 64): RLIMIT_NOFILE.
        python (`str`, `sys.executable`): the interpreter that runs the program.
        extra_read_paths (`tuple[str, ...]`, ()): more directories the program may read and
            import from (appended to `sys.path`), e.g. pure-Python packages. (sympy cannot be
            one: it imports ctypes, which stays denied.)
        user (`int | None`, None): run as this uid (and its gid, no supplementary groups), e.g.
            65534 when the parent is root; the interpreter must be readable by it.
        network_namespace (`bool | None`, None): run inside `unshare -n` (an empty network
            namespace); None uses it where it works, True requires it.
        hash_seed (`int`, 0): PYTHONHASHSEED of the child, so set order is reproducible.
        tmp_root (`str | None`, None): where temp dirs are made (the system default if None).

    Raises:
        ValueError: if a limit is not positive or of the wrong type.
    """

    timeout_s: float = 5.0
    cpu_s: int = 5
    memory_mb: int = 512
    max_output_bytes: int = 65536
    max_file_bytes: int = 1 << 20
    max_open_files: int = 64
    python: str = sys.executable
    extra_read_paths: tuple[str, ...] = ()
    user: int | None = None
    network_namespace: bool | None = None
    hash_seed: int = 0
    tmp_root: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.timeout_s, bool) or not isinstance(self.timeout_s, (int, float)):
            raise ValueError(  # noqa: TRY004 - every bad SandboxConfig field is a ValueError
                f"timeout_s must be a number of seconds, got {self.timeout_s!r}"
            )
        if not 0 < self.timeout_s <= 3600:
            raise ValueError(f"timeout_s must be in (0, 3600] seconds, got {self.timeout_s!r}")
        minimums = {
            "cpu_s": 1,
            "memory_mb": 64,
            "max_output_bytes": 1,
            "max_file_bytes": 0,
            "max_open_files": 8,
            "hash_seed": 0,
        }
        for name, low in minimums.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
        if not isinstance(self.python, str) or not self.python:
            raise ValueError(f"python must be the path of an interpreter, got {self.python!r}")
        if isinstance(self.extra_read_paths, str) or not all(
            isinstance(p, str) and os.path.isabs(p) for p in self.extra_read_paths
        ):
            raise ValueError(
                f"extra_read_paths must be a tuple of absolute paths, got {self.extra_read_paths!r}"
            )
        if self.user is not None and (
            isinstance(self.user, bool) or not isinstance(self.user, int)
        ):
            raise ValueError(f"user must be a uid (int) or None, got {self.user!r}")
        if self.network_namespace not in (None, True, False):
            raise ValueError(
                f"network_namespace must be None, True or False, got {self.network_namespace!r}"
            )


@dataclass(frozen=True)
class ExecResult:
    """What one sandboxed run did.

    Args:
        stdout, stderr (`str`): the output (UTF-8, undecodable bytes replaced), at most
            `max_output_bytes` together.
        exit_code (`int | None`): the exit status; negative: killed by that signal.
        timed_out (`bool`): killed at the wall-clock limit.
        killed_reason (`str | None`): why it was stopped early ("timeout", "output limit",
            "cpu limit", "violation", "signal SIGSEGV", ...), None if it ran to its end.
        output_truncated (`bool`): output went past `max_output_bytes`.
        duration_s (`float`): wall-clock seconds of the run.
        violation (`str | None`): the denied operation, e.g. "blocked: socket.connect".
    """

    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool = False
    killed_reason: str | None = None
    output_truncated: bool = False
    duration_s: float = 0.0
    violation: str | None = None

    @property
    def ok(self) -> bool:
        """The program ran to its end and exited with status 0."""
        return self.exit_code == 0 and self.killed_reason is None

    def answer(self) -> str | None:
        """The program's answer: the last ``\\boxed{}`` in stdout, else its last non-empty line.

        None when the run was not `ok` or printed nothing.
        """
        if not self.ok:
            return None
        boxed = _BOXED.findall(self.stdout)
        if boxed:
            return boxed[-1].strip()
        lines = [line.strip() for line in self.stdout.splitlines() if line.strip()]
        return lines[-1] if lines else None

    def observation(self, max_chars: int = 4000) -> str:
        """A short text for an agent: the status line, then stdout and stderr (tails kept)."""
        if self.violation:
            status = f"stopped by the sandbox: {self.violation}"
        elif self.timed_out:
            status = f"killed: wall-clock time limit reached after {self.duration_s:.1f} s"
        elif self.killed_reason == "output limit":
            status = "killed: output limit reached (output truncated)"
        elif self.killed_reason == "cpu limit" or (self.killed_reason or "").startswith("SIGKILL"):
            status = f"killed: CPU time or memory limit reached ({self.killed_reason})"
        elif self.killed_reason:
            status = f"killed by {self.killed_reason} (the program crashed)"
        else:
            status = f"exit status {self.exit_code}"
        if "MemoryError" in self.stderr[-2000:]:
            status += " (out of memory)"
        parts = [status]
        budget = max(max_chars - len(status) - 40, 0)
        for name, text in (("stdout", self.stdout), ("stderr", self.stderr)):
            if text:
                keep = budget // 2 if self.stdout and self.stderr else budget
                if len(text) > keep:
                    text = "..." + text[len(text) - keep :]
                parts.append(f"{name}:\n{text.rstrip()}")
        if len(parts) == 1:
            parts.append("(no output)")
        return "\n".join(parts)[:max_chars]


# ---------------------------------------------------------------------------------- running


@functools.lru_cache(maxsize=4)
def _unshare_net_works(python: str) -> bool:
    """Whether `unshare -n` can start the interpreter here (root or user namespaces)."""
    tool = shutil.which("unshare")
    if tool is None:
        return False
    try:
        done = subprocess.run(
            [tool, "-n", python, "-S", "-c", "pass"], capture_output=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        logger.info("unshare -n is unusable here (%s); running without a network namespace", err)
        return False
    return done.returncode == 0


def _command(config: SandboxConfig, tmp: str, status_fd: int) -> tuple[list[str], dict]:
    """The child's command line, and the Popen arguments that switch its user (if any)."""
    prefix: list[str] = []
    ids: dict = {}
    if config.network_namespace is not False and _unshare_net_works(config.python):
        prefix = [shutil.which("unshare") or "unshare", "-n"]
        if config.user is not None:  # make the namespace as root, then drop to the user
            prefix += ["--setuid", str(config.user), "--setgid", str(config.user)]
    elif config.network_namespace:
        raise RuntimeError(
            "network_namespace=True but `unshare -n` does not work here (it needs root or "
            "unprivileged user namespaces); pass network_namespace=None to run without it"
        )
    elif config.user is not None:
        ids = {"user": config.user, "group": config.user, "extra_groups": []}
    nproc = -1 if (config.user is None and os.geteuid() == 0) else 0
    limits = (
        config.memory_mb << 20,
        config.cpu_s,
        config.max_file_bytes,
        config.max_open_files,
        nproc,
    )
    command = [
        *prefix,
        config.python,
        *("-S", "-s", *SAFE_PATH, "-B", "-u", "-X", "utf8", "-c", _BOOTSTRAP),
        tmp,
        str(status_fd),
        *map(str, limits),
        "\n".join(config.extra_read_paths),
    ]
    return command, ids


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # an empty group: nothing left to kill
        os.killpg(pgid, signal.SIGKILL)


def _has_exited(pid: int) -> bool:
    """Whether the child has exited, without reaping it (its pid stays its group's id)."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def sandbox_pids(*needles: bytes, live_only: bool = True) -> list[int]:
    """Pids of processes whose environment holds every one of `needles` (e.g. the token
    variable ``MATHTEAMS_SANDBOX=``, or ``HOME=<tmp_root>/`` for the runs under one root);
    zombies are left out unless `live_only` is False. Processes we may not read are skipped.

    A process caught inside ``exec`` shows an empty environment for a moment (the kernel
    switches to the new memory map before it lays out the new environment), so live
    user processes that read empty are read again, briefly, before they are judged."""
    found, unsettled = [], []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            verdict = _environ_verdict(entry, needles, live_only)
            if verdict is True:
                found.append(int(entry))
            elif verdict is None:
                unsettled.append(entry)
    for _ in range(20):
        if not unsettled:
            break
        time.sleep(0.001)
        retry, unsettled = unsettled, []
        for entry in retry:
            verdict = _environ_verdict(entry, needles, live_only)
            if verdict is True:
                found.append(int(entry))
            elif verdict is None:
                unsettled.append(entry)
    return sorted(found)


_PF_KTHREAD = 0x00200000


def _environ_verdict(pid: str, needles: tuple[bytes, ...], live_only: bool) -> bool | None:
    """True if the process's environment holds every needle; False if not, or if it is
    unreadable, gone, a kernel thread, or a zombie left out by `live_only`; None if it reads
    empty while the process is a live user process: it is inside ``exec``, read it again."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environ = handle.read()
        if environ and not live_only:
            return all(needle in environ for needle in needles)
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
    except OSError:
        return False  # exited meanwhile, or not ours to read (then not ours to kill either)
    if fields[0] == b"Z" or int(fields[6]) & _PF_KTHREAD:
        return False  # a zombie's environment is gone with its memory; threads have none
    if not environ:
        return None
    return all(needle in environ for needle in needles)


def _sweep(token: bytes) -> int:
    """Kill processes whose environment holds the run's token (escaped the process group)."""
    killed = 0
    for pid in sandbox_pids(f"{TOKEN_VAR}=".encode() + token + b"\0", live_only=False):
        try:
            os.kill(pid, signal.SIGKILL)
            killed += 1
        except ProcessLookupError:
            continue
    return killed


def _remove_tree(path: str) -> None:
    """Delete the temp dir even where the program made parts of it unreadable."""
    try:
        os.chmod(path, 0o700)
        for root, dirs, _ in os.walk(path):
            for name in dirs:
                os.chmod(os.path.join(root, name), 0o700, follow_symlinks=False)
        shutil.rmtree(path)
    except OSError as err:
        logger.warning("could not remove the sandbox directory %s: %s", path, err)


class _Run:
    """One child process: start, collect output under the limits, stop, clean up."""

    def __init__(self, code: str, config: SandboxConfig) -> None:
        self.config = config
        self.buffers = {"stdout": bytearray(), "stderr": bytearray(), "status": bytearray()}
        self.killed_by_us: str | None = None
        self.truncated = False
        self.code = code

    def execute(self) -> ExecResult:
        config = self.config
        tmp = tempfile.mkdtemp(prefix="mathteams-sandbox-", dir=config.tmp_root)
        token = secrets.token_hex(8).encode()
        began = time.monotonic()
        try:
            with open(
                os.path.join(tmp, PROGRAM), "w", encoding="utf-8", errors="surrogatepass"
            ) as f:
                f.write(self.code)
            if config.user is not None:
                os.chown(tmp, config.user, config.user)
                os.chown(os.path.join(tmp, PROGRAM), config.user, config.user)
            status_r, status_w = os.pipe()
            try:
                proc = self._start(tmp, status_w, token)
            finally:
                os.close(status_w)
            try:
                self._collect(proc, status_r, began)
            finally:
                _kill_group(proc.pid)
                _, status, _ = os.wait4(proc.pid, 0)
                proc.returncode = os.waitstatus_to_exitcode(status)
                for handle in (proc.stdout, proc.stderr):
                    if handle is not None:
                        handle.close()
                os.close(status_r)
                _sweep(token)
        finally:
            _remove_tree(tmp)
        return self._result(proc.returncode, time.monotonic() - began)

    def _start(self, tmp: str, status_w: int, token: bytes) -> subprocess.Popen[bytes]:
        config = self.config
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": tmp,
            "TMPDIR": tmp,
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "PYTHONHASHSEED": str(config.hash_seed),
            TOKEN_VAR: token.decode(),
        }
        command, ids = _command(config, tmp, status_w)
        return subprocess.Popen(
            command,
            cwd=tmp,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(status_w,),
            close_fds=True,
            start_new_session=True,
            **ids,
        )

    def _collect(self, proc: subprocess.Popen[bytes], status_r: int, began: float) -> None:
        config = self.config
        assert proc.stdout is not None and proc.stderr is not None
        streams = {proc.stdout.fileno(): "stdout", proc.stderr.fileno(): "stderr"}
        streams[status_r] = "status"
        pidfd = os.pidfd_open(proc.pid) if hasattr(os, "pidfd_open") else None
        exited = False
        with selectors.DefaultSelector() as selector:
            for fd, name in streams.items():
                os.set_blocking(fd, False)
                selector.register(fd, selectors.EVENT_READ, name)
            if pidfd is not None:
                selector.register(pidfd, selectors.EVENT_READ, "exit")
            try:
                while True:
                    pipes_open = any(k.data != "exit" for k in selector.get_map().values())
                    if exited and not pipes_open:
                        return
                    remaining = began + config.timeout_s - time.monotonic()
                    if remaining <= 0:
                        self._stop(proc, "timeout")
                        return
                    wait = remaining if pidfd is not None else min(remaining, 0.01)
                    for key, _ in selector.select(wait):
                        if key.data == "exit":
                            exited = True
                            selector.unregister(key.fd)
                            # descendants still holding the pipes must not keep us waiting
                            _kill_group(proc.pid)
                        elif not self._read(key.fd, key.data, selector):
                            self._stop(proc, "output limit")
                            return
                    if pidfd is None and not exited:
                        exited = _has_exited(proc.pid)
                        if exited:
                            _kill_group(proc.pid)
            finally:
                if pidfd is not None:
                    os.close(pidfd)

    def _read(self, fd: int, name: str, selector: selectors.BaseSelector) -> bool:
        """Read what is there; False when the output cap is passed."""
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return True
        if not chunk:
            selector.unregister(fd)
            return True
        buffer = self.buffers[name]
        if name == "status":
            buffer += chunk[: max(4096 - len(buffer), 0)]
            return True
        room = (
            self.config.max_output_bytes - len(self.buffers["stdout"]) - len(self.buffers["stderr"])
        )
        buffer += chunk[: max(room, 0)]
        if len(chunk) > room:
            self.truncated = True
            return False
        return True

    def _stop(self, proc: subprocess.Popen[bytes], reason: str) -> None:
        self.killed_by_us = reason
        _kill_group(proc.pid)

    def _result(self, code: int, duration: float) -> ExecResult:
        violation = self.buffers["status"].decode("utf-8", "replace").strip() or None
        if code == SETUP_EXIT and violation and violation.startswith("setup failed"):
            raise RuntimeError(f"the sandbox could not start the program: {violation}")
        reason = self.killed_by_us
        if reason is None and violation and code == VIOLATION_EXIT:
            reason = "violation"
        elif reason is None and code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            reason = {"SIGXCPU": "cpu limit", "SIGKILL": "SIGKILL (cpu or memory limit)"}.get(
                name, f"signal {name}"
            )
        if violation and code != VIOLATION_EXIT:
            violation = None  # the program wrote to the status pipe itself; not ours
        return ExecResult(
            stdout=self.buffers["stdout"].decode("utf-8", "replace"),
            stderr=self.buffers["stderr"].decode("utf-8", "replace"),
            exit_code=code,
            timed_out=reason == "timeout",
            killed_reason=reason,
            output_truncated=self.truncated,
            duration_s=duration,
            violation=violation,
        )


def run_code(code: str, config: SandboxConfig | None = None) -> ExecResult:
    """Run `code` as a Python program in a fresh sandboxed process; see the module docstring.

    Args:
        code (`str`): the program (any text: what does not compile is reported as an error).
        config (`SandboxConfig | None`): the limits; defaults to `SandboxConfig()`.

    Returns:
        The `ExecResult`. Nothing the program does makes this raise.

    Raises:
        TypeError: if `code` is not a str or `config` not a `SandboxConfig`.
        RuntimeError: if the sandbox itself cannot start (no interpreter, no `unshare` when
            required) - a fault of the machine, not of the program.
    """
    if not isinstance(code, str):
        raise TypeError(f"code must be a str (a Python program), got {type(code).__name__}")
    config = SandboxConfig() if config is None else config
    if not isinstance(config, SandboxConfig):
        raise TypeError(f"config must be a SandboxConfig, got {type(config).__name__}")
    try:
        return _Run(code, config).execute()
    except OSError as err:
        raise RuntimeError(f"the sandbox could not run the program: {err}") from err


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
