"""The limits of a sandboxed run (`SandboxConfig`) and what the run did (`ExecResult`)."""

from __future__ import annotations

import os
import re
import sys
import warnings
from dataclasses import dataclass, field

# An operator's opt-in to hook mode for every SandboxConfig that does not name its isolation
# (a machine without bubblewrap; the test suite sets it there). It still warns.
ISOLATION_VAR = "MATHTEAMS_SANDBOX_ISOLATION"
_BOXED = re.compile(r"\\boxed\{((?:[^{}]|\{[^{}]*\})*)\}")


@dataclass(frozen=True)
class SandboxConfig:
    """Limits of one sandboxed run.

    Args:
        isolation (`str`, "bwrap"): "bwrap" runs the child under bubblewrap (new user, pid,
            network, ipc, uts and mount namespaces, a seccomp filter, no capabilities; see
            `envs.sandbox`), which must be installed; "hook" runs it with only the audit hook
            and rlimits, which is not a security boundary (a warning says so). The default is
            the environment variable ``MATHTEAMS_SANDBOX_ISOLATION`` where set, else "bwrap".
        audit_hook (`bool`, True): install the in-process audit hook (a second layer under
            bwrap). False is allowed with bwrap only, e.g. for packages that need ctypes.
        timeout_s (`float`, 5.0): wall-clock limit; the process group is killed past it.
        cpu_s (`int`, 5): CPU-seconds limit (RLIMIT_CPU; SIGXCPU, then SIGKILL one second later).
            It counts the kernel's time to fault memory in, which grows while the host reclaims
            page cache (filling 256 MiB: 0.13 s idle, up to 0.9 s under reclaim, measured): a
            budget far below ``memory_mb / 256`` seconds can stop a memory hog by CPU before
            RLIMIT_AS does.
        memory_mb (`int`, 512): address-space limit (RLIMIT_AS), in MiB; at least 64.
        max_output_bytes (`int`, 65536): bytes of stdout plus stderr kept; past it the child
            is killed and `output_truncated` set.
        max_file_bytes (`int`, 1048576): largest file the program may write (RLIMIT_FSIZE).
        max_open_files (`int`, 64): RLIMIT_NOFILE.
        max_disk_bytes (`int`, 16777216): size of the work dir (a tmpfs) under bwrap, so the
            total the program can store; not enforced in hook mode.
        python (`str`, `sys.executable`): the interpreter that runs the program.
        extra_read_paths (`tuple[str, ...]`, ()): more directories the program may read and
            import from (appended to `sys.path`), e.g. pure-Python packages. (sympy cannot be
            one: it imports ctypes, which stays denied.)
        user (`int | None`, None): run as this uid (and its gid, no supplementary groups). Under
            bwrap it is the uid bwrap runs as on the host (inside, the program is uid 65534
            anyway); None means the caller's uid, except when the caller is root: then 65534,
            so the program is no host root even without capabilities (``user=0`` opts out).
            The interpreter must be one that uid can run: where ``python`` is not (a Python
            under ``/root``), the same version from /usr/bin or /usr/local/bin is used
            (`envs.sandbox.bwrap.sandbox_python`). In hook mode None is the caller's uid.
        network_namespace (`bool | None`, None): hook mode only: run inside `unshare -n` (an
            empty network namespace); None uses it where it works, True requires it. Under
            bwrap the network is always a fresh namespace.
        hash_seed (`int`, 0): PYTHONHASHSEED of the child, so set order is reproducible.
        tmp_root (`str | None`, None): hook mode only: where temp dirs are made (the system
            default if None); under bwrap the work dir is a tmpfs with nothing on the host.

    Raises:
        ValueError: if a limit is not positive or of the wrong type, or fields contradict.

    Warns:
        UserWarning: with ``isolation="hook"``: it is not a security boundary.
    """

    isolation: str = field(default_factory=lambda: os.environ.get(ISOLATION_VAR, "bwrap"))
    audit_hook: bool = True
    timeout_s: float = 5.0
    cpu_s: int = 5
    memory_mb: int = 512
    max_output_bytes: int = 65536
    max_file_bytes: int = 1 << 20
    max_open_files: int = 64
    max_disk_bytes: int = 16 << 20
    python: str = sys.executable
    extra_read_paths: tuple[str, ...] = ()
    user: int | None = None
    network_namespace: bool | None = None
    hash_seed: int = 0
    tmp_root: str | None = None

    def __post_init__(self) -> None:
        self._check_isolation()
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
            "max_disk_bytes": 4096,
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

    def _check_isolation(self) -> None:
        if self.isolation not in ("bwrap", "hook"):
            raise ValueError(f"isolation must be 'bwrap' or 'hook', got {self.isolation!r}")
        if not isinstance(self.audit_hook, bool):
            raise ValueError(  # noqa: TRY004 - every bad SandboxConfig field is a ValueError
                f"audit_hook must be True or False, got {self.audit_hook!r}"
            )
        if self.isolation == "bwrap" and self.network_namespace is False:
            raise ValueError(
                "network_namespace=False contradicts isolation='bwrap', which always gives the "
                "program a fresh network namespace; drop it, or use isolation='hook'"
            )
        if self.isolation == "hook" and not self.audit_hook:
            raise ValueError(
                "audit_hook=False with isolation='hook' would leave the program unconfined; "
                "use isolation='bwrap'"
            )
        if self.isolation == "hook":
            warnings.warn(
                "SandboxConfig(isolation='hook'): the audit hook is not a security boundary "
                "(code that gets around it runs as the caller's user, with the caller's files "
                "and network); use isolation='bwrap' for untrusted code",
                UserWarning,
                stacklevel=4,  # the caller of SandboxConfig(...)
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
