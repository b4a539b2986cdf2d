"""One sandboxed child process: its command line, starting it, collecting its output under the
limits, stopping it, and sweeping up whatever escaped its process group."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from envs.sandbox.config import ExecResult, SandboxConfig

logger = logging.getLogger(__name__)

VIOLATION_EXIT = 86
SETUP_EXIT = 87  # the bootstrap failed: a fault of the sandbox or machine, not of the program
TOKEN_VAR = "MATHTEAMS_SANDBOX"
PROGRAM = "program.py"
# -P (no cwd on sys.path) exists from Python 3.11; without it the cwd is the temp dir anyway.
SAFE_PATH = ("-P",) if sys.version_info >= (3, 11) else ()
# The child's bootstrap, run with `python -c` before the program (see `envs.sandbox.child`).
_BOOTSTRAP = (Path(__file__).parent / "child.py").read_text(encoding="utf-8")


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
    found: list[int] = []
    pending = [entry for entry in os.listdir("/proc") if entry.isdigit()]
    for attempt in range(21):  # one scan, then up to 20 re-reads 1 ms apart
        if attempt:
            time.sleep(0.001)
        unsettled = []
        for entry in pending:
            verdict = _environ_verdict(entry, needles, live_only)
            if verdict is None:
                unsettled.append(entry)
            elif verdict:
                found.append(int(entry))
        pending = unsettled
        if not pending:
            break
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


class SandboxRun:
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
