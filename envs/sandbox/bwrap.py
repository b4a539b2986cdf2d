"""The bubblewrap command line of a sandboxed run (see `envs.sandbox` for what it enforces)."""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess

from envs.sandbox.config import SandboxConfig

WORKDIR = "/sandbox"  # the program's private tmpfs inside the sandbox (nothing on the host)
SANDBOX_ID = "65534"  # uid and gid inside the sandbox's user namespace
SHM_BYTES = 1 << 20
UNPRIVILEGED_UID = 65534  # the host uid bwrap runs as by default when the caller is root
DEV_LINKS = (
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
)
# System library directories the interpreter's compiled modules link against. Where the host
# has /lib as a symlink to usr/lib (merged /usr), the sandbox gets the same symlink.
SYSTEM_LIBS = ("/usr/lib", "/usr/lib64", "/usr/lib32", "/lib", "/lib64", "/lib32")
INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`; Fedora: `dnf install "
    "bubblewrap`), or opt in to SandboxConfig(isolation='hook'), an audit hook in the child "
    "process that is not a security boundary"
)


@functools.lru_cache(maxsize=1)
def bwrap_path() -> str:
    """The bwrap executable.

    Raises:
        RuntimeError: if it is not on PATH, naming the package to install.
    """
    path = shutil.which("bwrap")
    if path is None:
        raise RuntimeError(
            f"the sandbox needs bubblewrap (`bwrap`), not found on PATH: {INSTALL_HINT}"
        )
    return path


@functools.lru_cache(maxsize=16)
def runnable_by(python: str, uid: int) -> bool:
    """Whether host user `uid` can start `python` (every directory on its path searchable, the
    binary and its standard library readable)."""
    try:
        done = subprocess.run(
            [python, "-S", "-I", "-c", "import encodings, os"],
            user=uid,
            group=uid,
            extra_groups=[],
            cwd="/",
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def sandbox_python(config: SandboxConfig, uid: int | None) -> str:
    """The interpreter the sandbox runs as `uid`: ``config.python`` where that uid can start it,
    else the same major.minor version from a system directory (`SYSTEM_BIN`) that it can (a
    root caller's Python often lives under ``/root``, which uid 65534 cannot enter; the program
    runs with ``-S``, so only the standard library matters).

    Raises:
        RuntimeError: if neither can be run by `uid`, naming the ways out.
    """
    if uid is None or uid == os.geteuid() or runnable_by(config.python, uid):
        return config.python
    return system_python(config.python, uid)


@functools.lru_cache(maxsize=8)
def system_python(python: str, uid: int) -> str:
    """`sandbox_python`'s fallback for `python`, which `uid` cannot run (logged once)."""
    version = interpreter_layout(python)[3]
    for folder in SYSTEM_BIN:
        candidate = os.path.join(folder, f"python{version}")
        if os.access(candidate, os.X_OK) and runnable_by(candidate, uid):
            logger.info(
                "sandbox: uid %d cannot run %s; running programs with %s (Python %s)",
                uid,
                python,
                candidate,
                version,
            )
            return candidate
    raise RuntimeError(
        f"the sandbox runs programs as uid {uid} (the caller is root) and that uid cannot run "
        f"the interpreter {python!r}, nor a python{version} in {', '.join(SYSTEM_BIN)}: "
        f"install Python {version} where uid {uid} can read it (e.g. the system package), pass "
        "SandboxConfig(python=...) an interpreter it can run, or SandboxConfig(user=0) to run "
        "as root (the sandbox's uid then maps to host root)"
    )


@functools.lru_cache(maxsize=8)
def interpreter_layout(python: str) -> tuple[str, str, tuple[str, ...], str]:
    """Where the interpreter lives: its real executable, its installation prefix (stdlib and
    libpython), the site-packages directories under it that the sandbox hides, and its
    major.minor version (``"3.11"``).

    A virtual environment's ``python`` resolves to its base interpreter: the child runs with
    ``-S``, so the environment's packages would not be used anyway.

    Raises:
        RuntimeError: if the interpreter cannot be run.
    """
    real = os.path.realpath(python)
    probe = (
        "import sys, site\nprint('%d.%d' % sys.version_info[:2])\nprint(sys.base_prefix)\n"
        "print(*site.getsitepackages(), sep='\\n')"
    )
    try:
        done = subprocess.run(
            [real, "-S", "-I", "-c", probe], capture_output=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise RuntimeError(f"cannot run the sandbox interpreter {python!r}: {err}") from err
    if done.returncode != 0:
        stderr = done.stderr.decode("utf-8", "replace")[-500:]
        raise RuntimeError(f"the sandbox interpreter {python!r} failed to start: {stderr}")
    version, prefix, *sites = done.stdout.decode("utf-8", "surrogateescape").splitlines()
    hidden = tuple(s for s in sites if os.path.isdir(s) and _within(s, prefix))
    return real, prefix, hidden, version


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def dev_argv() -> list[str]:
    """The sandbox's ``/dev``: a private tmpfs with the standard fd links and a small
    ``/dev/shm``, read-only itself once built, and no device node at all.

    Not bwrap's ``--dev``: its ``null``, ``zero``, ``urandom``... are bind mounts of the host's
    nodes, and a program that opens one can change the host node (``os.utime`` on an open
    ``/dev/zero`` set its times; where the caller is root the sandbox's uid owns it). bwrap
    cannot bind a device read-only (its read-only remount adds ``nodev``), so none is bound:
    Python needs none (``os.urandom`` is the ``getrandom`` syscall), and a program that opens
    ``/dev/null`` gets ``FileNotFoundError``. Its stdin is a pipe at EOF, not the host's
    ``/dev/null``.
    """
    argv = ["--tmpfs", "/dev"]
    for name, target in DEV_LINKS:
        argv += ["--symlink", target, f"/dev/{name}"]
    return [*argv, "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]


SYSTEM_BIN = ("/usr/bin", "/usr/local/bin", "/bin")  # where a readable interpreter is looked for
logger = logging.getLogger(__name__)


def sandbox_uid(config: SandboxConfig) -> int | None:
    """The host uid bwrap (and so the program) runs as: ``config.user``, else
    `UNPRIVILEGED_UID` when the caller is root, else None (the caller's own)."""
    if config.user is not None:
        return config.user
    return UNPRIVILEGED_UID if os.geteuid() == 0 else None


def bwrap_argv(
    config: SandboxConfig,
    env: dict[str, str],
    *,
    program_fd: int,
    program_bytes: int,
    seccomp_fd: int,
    info_fd: int,
) -> list[str]:
    """The bwrap command up to (and including) the interpreter; the caller appends its flags.

    Args:
        config (`SandboxConfig`): the run's limits (`python`, `extra_read_paths`,
            `max_disk_bytes`).
        env (`dict[str, str]`): the program's whole environment (bwrap clears the rest).
        program_fd (`int`): readable fd holding the program, copied to ``WORKDIR/program.py``.
        program_bytes (`int`): its size, added to the work dir's tmpfs size.
        seccomp_fd (`int`): readable fd holding the BPF filter (`envs.sandbox.seccomp`).
        info_fd (`int`): writable fd where bwrap reports the sandbox's init pid as JSON.

    Raises:
        RuntimeError: if bwrap or the interpreter is missing.
    """
    real, prefix, hidden, _ = interpreter_layout(config.python)
    argv = [
        bwrap_path(),
        *("--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc"),
        *("--unshare-uts", "--unshare-cgroup-try", "--uid", SANDBOX_ID, "--gid", SANDBOX_ID),
        *("--hostname", "sandbox", "--die-with-parent", "--new-session", "--cap-drop", "ALL"),
        *("--info-fd", str(info_fd), "--seccomp", str(seccomp_fd)),
    ]
    for path in SYSTEM_LIBS:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    argv += ["--ro-bind", prefix, prefix]
    if not _within(real, prefix):
        argv += ["--ro-bind", real, real]
    for site in hidden:  # an empty, read-only directory over it, unless asked for
        if not any(_within(extra, site) for extra in config.extra_read_paths):
            argv += ["--tmpfs", site, "--remount-ro", site]
    for extra in config.extra_read_paths:
        argv += ["--ro-bind", extra, extra]
    # /proc read-only: the sandbox's uid maps to the caller's, and where that is root the
    # kernel's global sysctls under /proc/sys would otherwise be writable by it.
    argv += ["--proc", "/proc", "--remount-ro", "/proc", *dev_argv()]
    argv += ["--size", str(config.max_disk_bytes + program_bytes), "--tmpfs", WORKDIR]
    argv += ["--file", str(program_fd), f"{WORKDIR}/program.py", "--chdir", WORKDIR]
    argv.append("--clearenv")
    for name, value in env.items():
        argv += ["--setenv", name, value]
    return [*argv, "--", real]
