"""The bubblewrap command line of a sandboxed run (see `envs.sandbox` for what it enforces)."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess

from envs.sandbox.config import SandboxConfig

WORKDIR = "/sandbox"  # the program's private tmpfs inside the sandbox (nothing on the host)
SANDBOX_ID = "65534"  # uid and gid inside the sandbox's user namespace
SHM_BYTES = 1 << 20
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


@functools.lru_cache(maxsize=8)
def interpreter_layout(python: str) -> tuple[str, str, tuple[str, ...]]:
    """Where the interpreter lives: its real executable, its installation prefix (stdlib and
    libpython) and the site-packages directories under it that the sandbox hides.

    A virtual environment's ``python`` resolves to its base interpreter: the child runs with
    ``-S``, so the environment's packages would not be used anyway.

    Raises:
        RuntimeError: if the interpreter cannot be run.
    """
    real = os.path.realpath(python)
    probe = "import sys, site\nprint(sys.base_prefix)\nprint(*site.getsitepackages(), sep='\\n')"
    try:
        done = subprocess.run(
            [real, "-S", "-I", "-c", probe], capture_output=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise RuntimeError(f"cannot run the sandbox interpreter {python!r}: {err}") from err
    if done.returncode != 0:
        stderr = done.stderr.decode("utf-8", "replace")[-500:]
        raise RuntimeError(f"the sandbox interpreter {python!r} failed to start: {stderr}")
    prefix, *sites = done.stdout.decode("utf-8", "surrogateescape").splitlines()
    hidden = tuple(s for s in sites if os.path.isdir(s) and _within(s, prefix))
    return real, prefix, hidden


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


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
    real, prefix, hidden = interpreter_layout(config.python)
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
    argv += ["--proc", "/proc", "--remount-ro", "/proc", "--dev", "/dev"]
    argv += ["--size", str(SHM_BYTES), "--tmpfs", "/dev/shm"]
    argv += ["--size", str(config.max_disk_bytes + program_bytes), "--tmpfs", WORKDIR]
    argv += ["--file", str(program_fd), f"{WORKDIR}/program.py", "--chdir", WORKDIR]
    argv.append("--clearenv")
    for name, value in env.items():
        argv += ["--setenv", name, value]
    return [*argv, "--", real]
