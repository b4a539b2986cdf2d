"""One sandboxed child process: its command line, starting it, collecting its output under the
limits and stopping it; in hook mode, `envs.sandbox.cleanup` sweeps up whatever escaped its
process group and removes its temp dir."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import os
import secrets
import select
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from envs.sandbox.bwrap import INSTALL_HINT, WORKDIR, bwrap_argv, sandbox_python, sandbox_uid
from envs.sandbox.cleanup import TOKEN_VAR, remove_tree, sweep
from envs.sandbox.config import ExecResult, SandboxConfig
from envs.sandbox.seccomp import build_filter

logger = logging.getLogger(__name__)

VIOLATION_EXIT = 86
PROGRAM = "program.py"
# -P (no cwd on sys.path) exists from Python 3.11; without it the cwd is the temp dir anyway.
SAFE_PATH = ("-P",) if sys.version_info >= (3, 11) else ()
# The child's bootstrap, run with `python -c` before the program (see `envs.sandbox.child`).
_BOOTSTRAP = (Path(__file__).parent / "child.py").read_text(encoding="utf-8")
CHANNEL_BYTES = 4096  # kept of the status, setup and info channels
NAMESPACE_GRACE_S = 5.0  # how long the sandbox's pid namespace may take to die after bwrap


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


def _hook_prefix(config: SandboxConfig) -> tuple[list[str], dict]:
    """Hook mode: what goes before the interpreter (``unshare -n``), and the Popen arguments
    that switch the child's user (if any)."""
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
        ids = _user_ids(config)
    return [*prefix, config.python], ids


def _user_ids(config: SandboxConfig) -> dict:
    """Popen arguments that run the child as `config.user` (and its gid, no other groups)."""
    if config.user is None:
        return {}
    return {"user": config.user, "group": config.user, "extra_groups": []}


def _bootstrap_args(config: SandboxConfig, work: str, status_fd: int, setup_fd: int) -> list[str]:
    """The interpreter's flags, the bootstrap and its arguments (see `envs.sandbox.child`)."""
    if config.isolation == "bwrap":
        nproc = -1  # the seccomp filter allows no new process; threads stay possible
    else:
        nproc = -1 if (config.user is None and os.geteuid() == 0) else 0
    limits = (
        config.memory_mb << 20,
        config.cpu_s,
        config.max_file_bytes,
        config.max_open_files,
        nproc,
    )
    return [
        *("-S", "-s", *SAFE_PATH, "-B", "-u", "-X", "utf8", "-c", _BOOTSTRAP),
        work,
        str(status_fd),
        str(setup_fd),
        "1" if config.audit_hook else "0",
        *map(str, limits),
        "\n".join(config.extra_read_paths),
    ]


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # an empty group: nothing left to kill
        os.killpg(pgid, signal.SIGKILL)


def _has_exited(pid: int) -> bool:
    """Whether the child has exited, without reaping it (its pid stays its group's id)."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _memfd(name: str, data: bytes) -> int:
    """An anonymous in-memory file holding `data`, positioned at its start."""
    fd = os.memfd_create(name)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _exit_code(status: int, isolation: str) -> int:
    """The program's exit code, negative for death by signal. bwrap reports a signal as
    128 + its number (so under bwrap an exit status in 129..192 reads as that signal)."""
    code = os.waitstatus_to_exitcode(status)
    if isolation == "bwrap" and 128 < code <= 192 and (code - 128) in signal.valid_signals():
        return -(code - 128)
    return code


class SandboxRun:
    """One child process: start, collect output under the limits, stop, clean up."""

    def __init__(self, code: str, config: SandboxConfig) -> None:
        self.config = config
        self.code = code
        self.buffers = {name: bytearray() for name in ("stdout", "stderr", *_CHANNELS)}
        self.killed_by_us: str | None = None
        self.truncated = False
        self.namespace_pidfd: int | None = None  # bwrap: the pid namespace's init process
        self._fds: list[int] = []  # the parent's ends, closed when the run is over

    def execute(self) -> ExecResult:
        config = self.config
        # The pid prefix lets a caller find the runs of its own process (`sandbox_pids`).
        token = f"{os.getpid()}.{secrets.token_hex(8)}".encode()
        began = time.monotonic()
        tmp = None
        try:
            status_r, status_w = self._pipe()
            setup_r, setup_w = self._pipe()
            channels = {status_r: "status", setup_r: "setup"}
            if config.isolation == "bwrap":
                env = _child_env(config, WORKDIR, token)
                info_r, info_w = self._pipe()
                channels[info_r] = "info"
                config, command, ids, fds = self._bwrap_command(config, env, info_w)
                child_fds = (status_w, setup_w, info_w, *fds)
                work, cwd = WORKDIR, "/"
            else:
                tmp = tempfile.mkdtemp(prefix="mathteams-sandbox-", dir=config.tmp_root)
                self._write_program(tmp)
                env = _child_env(config, tmp, token)
                command, ids = _hook_prefix(config)
                child_fds = (status_w, setup_w)
                work, cwd = tmp, tmp
            command += _bootstrap_args(config, work, status_w, setup_w)
            # stdin: a pipe at EOF, not the host's /dev/null (an fd the program could change)
            stdin_r, stdin_w = self._pipe()
            self._close(stdin_w)
            proc = subprocess.Popen(
                command,
                cwd=cwd,
                env=env,
                stdin=stdin_r,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=child_fds,
                close_fds=True,
                start_new_session=True,
                **ids,
            )
            for fd in (*child_fds, stdin_r):  # the child has them now; EOF on ours when it is done
                self._close(fd)
            try:
                self._collect(proc, channels, began)
            finally:
                code = self._reap(proc)
                if config.isolation == "hook":  # bwrap: nothing outlives the pid namespace
                    sweep(token)
                for fd, name in channels.items():
                    self._drain(fd, name)
        finally:
            for fd in list(self._fds):
                self._close(fd)
            if tmp is not None:
                remove_tree(tmp)
        return self._result(code, time.monotonic() - began, proc)

    def _bwrap_command(
        self, config: SandboxConfig, env: dict[str, str], info_fd: int
    ) -> tuple[SandboxConfig, list[str], dict, tuple[int, ...]]:
        """(the run's config, the bwrap command, the Popen user arguments, the fds it reads):
        bwrap runs as `sandbox_uid` on the host, with an interpreter that uid can run."""
        program = self.code.encode("utf-8", "surrogatepass")
        program_fd = self._keep(_memfd("program.py", program))
        seccomp_fd = self._keep(_memfd("seccomp", build_filter()))
        uid = sandbox_uid(config)  # bwrap itself runs as that uid on the host
        ids = {} if uid is None else {"user": uid, "group": uid, "extra_groups": []}
        python = sandbox_python(config, uid)
        if python != config.python:
            config = dataclasses.replace(config, python=python)
        command = bwrap_argv(
            config,
            env,
            program_fd=program_fd,
            program_bytes=len(program),
            seccomp_fd=seccomp_fd,
            info_fd=info_fd,
        )
        return config, command, ids, (program_fd, seccomp_fd)

    def _pipe(self) -> tuple[int, int]:
        read, write = os.pipe()
        return self._keep(read), self._keep(write)

    def _keep(self, fd: int) -> int:
        self._fds.append(fd)
        return fd

    def _close(self, fd: int) -> None:
        self._fds.remove(fd)
        os.close(fd)

    def _write_program(self, tmp: str) -> None:
        path = os.path.join(tmp, PROGRAM)
        with open(path, "w", encoding="utf-8", errors="surrogatepass") as handle:
            handle.write(self.code)
        if self.config.user is not None:
            os.chown(tmp, self.config.user, self.config.user)
            os.chown(path, self.config.user, self.config.user)

    def _collect(
        self, proc: subprocess.Popen[bytes], channels: dict[int, str], began: float
    ) -> None:
        config = self.config
        assert proc.stdout is not None and proc.stderr is not None
        streams = {proc.stdout.fileno(): "stdout", proc.stderr.fileno(): "stderr", **channels}
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
                            self._kill(proc)
                        elif not self._read(key.fd, key.data, selector):
                            self._stop(proc, "output limit")
                            return
                    if pidfd is None and not exited:
                        exited = _has_exited(proc.pid)
                        if exited:
                            self._kill(proc)
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
            if name == "info":
                self._watch_namespace()
            return True
        if name in _CHANNELS:
            self._keep_channel(name, chunk)
            return True
        room = (
            self.config.max_output_bytes - len(self.buffers["stdout"]) - len(self.buffers["stderr"])
        )
        self.buffers[name] += chunk[: max(room, 0)]
        if len(chunk) > room:
            self.truncated = True
            return False
        return True

    def _drain(self, fd: int, name: str) -> None:
        """After the child is gone: keep what is left in a channel (a status written just
        before a timeout, bwrap's report); its writers are dead, so this cannot block."""
        os.set_blocking(fd, False)  # a process the kill has not reached yet may hold it
        with contextlib.suppress(BlockingIOError):
            while len(self.buffers[name]) < CHANNEL_BYTES:
                chunk = os.read(fd, CHANNEL_BYTES)
                if not chunk:
                    break
                self._keep_channel(name, chunk)

    def _keep_channel(self, name: str, chunk: bytes) -> None:
        """Append to a channel's buffer up to `CHANNEL_BYTES`; the rest is dropped."""
        buffer = self.buffers[name]
        buffer += chunk[: max(CHANNEL_BYTES - len(buffer), 0)]

    def _watch_namespace(self) -> None:
        """bwrap has said which host pid is its pid namespace's init: hold a pidfd on it, to
        kill it and to wait for the namespace (and every process in it) to be gone."""
        try:
            pid = int(json.loads(self.buffers["info"].decode("utf-8"))["child-pid"])
            self.namespace_pidfd = self._keep(os.pidfd_open(pid))
        except (ValueError, KeyError, TypeError, OSError) as err:
            # bwrap failed before starting the sandbox (its stderr says why); nothing to watch
            logger.debug("no sandbox init pid from bwrap (%s)", err)

    def _stop(self, proc: subprocess.Popen[bytes], reason: str) -> None:
        self.killed_by_us = reason
        self._kill(proc)

    def _kill(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL the child's process group and, under bwrap, its pid namespace's init (the
        kernel then kills every process in the namespace)."""
        if self.namespace_pidfd is not None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self.namespace_pidfd, signal.SIGKILL)
        _kill_group(proc.pid)

    def _reap(self, proc: subprocess.Popen[bytes]) -> int:
        """Kill what is left, reap the child, close its pipes; under bwrap, wait until its pid
        namespace is gone. Returns the exit code (negative: a signal)."""
        self._kill(proc)
        _, status, _ = os.wait4(proc.pid, 0)
        proc.returncode = code = _exit_code(status, self.config.isolation)
        for handle in (proc.stdout, proc.stderr):
            if handle is not None:
                handle.close()
        if self.namespace_pidfd is not None:
            gone, _, _ = select.select([self.namespace_pidfd], [], [], NAMESPACE_GRACE_S)
            if not gone:
                logger.warning(
                    "the sandbox's pid namespace outlived bwrap by %s s", NAMESPACE_GRACE_S
                )
        return code

    def _result(self, code: int, duration: float, proc: subprocess.Popen[bytes]) -> ExecResult:
        setup = bytes(self.buffers["setup"])
        if setup != b"ok":
            self._check_started(setup, proc)
        violation = self.buffers["status"].decode("utf-8", "replace").strip() or None
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

    def _check_started(self, setup: bytes, proc: subprocess.Popen[bytes]) -> None:
        """The program never ran: the sandbox failed to start it. Only the bootstrap (before
        the program) and bwrap can write to the setup channel, so this is never the program's
        doing. Raises RuntimeError, unless we stopped it first (a machine too slow to start it
        within the time limit gets an ordinary timeout result)."""
        stderr = self.buffers["stderr"].decode("utf-8", "replace").strip()[-1000:]
        detail = setup.decode("utf-8", "replace") or stderr or f"exit status {proc.returncode}"
        if self.killed_by_us is not None:
            logger.warning(
                "the sandbox was stopped (%s) before it started the program: %s",
                self.killed_by_us,
                detail,
            )
            return
        hint = f"; {INSTALL_HINT}" if self.config.isolation == "bwrap" else ""
        raise RuntimeError(f"the sandbox could not start the program: {detail}{hint}")


_CHANNELS = ("status", "setup", "info")


def _child_env(config: SandboxConfig, work: str, token: bytes) -> dict[str, str]:
    """The program's whole environment (nothing is inherited)."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": work,
        "TMPDIR": work,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONHASHSEED": str(config.hash_seed),
        "OMP_NUM_THREADS": "1",  # numeric libraries from extra_read_paths: one thread each
        "OPENBLAS_NUM_THREADS": "1",
        TOKEN_VAR: token.decode(),
    }
