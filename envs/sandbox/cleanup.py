"""After a sandboxed run (hook mode): finding the processes that escaped its process group by
the token in their environment (`sandbox_pids`), killing them (`sweep`), and removing its temp
dir whatever the program left in it (`remove_tree`)."""

from __future__ import annotations

import logging
import os
import signal
import stat
import time

__all__ = ["TOKEN_VAR", "remove_tree", "sandbox_pids", "sweep"]

logger = logging.getLogger(__name__)

TOKEN_VAR = "MATHTEAMS_SANDBOX"
"""The environment variable that marks a run's processes with its token."""


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


def sweep(token: bytes) -> int:
    """Kill processes whose environment holds the run's token (escaped the process group)."""
    killed = 0
    for pid in sandbox_pids(f"{TOKEN_VAR}=".encode() + token + b"\0", live_only=False):
        try:
            os.kill(pid, signal.SIGKILL)
            killed += 1
        except ProcessLookupError:
            continue
    return killed


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def remove_tree(path: str) -> None:
    """Delete a hook-mode temp dir, whatever the (now dead) program left in it.

    Iterative and fd-relative: no recursion and no long paths (a chain of 2000 directories
    is fine), symlinks are unlinked and never followed, FIFOs and sockets are unlinked and never
    opened (O_DIRECTORY|O_NONBLOCK), directories the program made unreadable are opened up.
    Failures are logged, never raised: the run's result does not depend on them.
    """
    names: list[str] = []  # the path from `path` down to the directory `fd` is open on
    fd = -1
    try:
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return  # the program removed it itself
        if not stat.S_ISDIR(mode):  # the program put something else in its place
            os.unlink(path)
            return
        os.chmod(path, 0o700)
        fd = os.open(path, _DIR_FLAGS)
        while True:
            child = _empty_or_first_dir(fd)
            if child is not None:
                os.chmod(child, 0o700, dir_fd=fd)  # a directory: no symlink to follow
                below = os.open(child, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = below
                names.append(child)
                continue
            if not names:
                break
            parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = parent
            os.rmdir(names.pop(), dir_fd=fd)
        os.close(fd)
        fd = -1
        os.rmdir(path)
    except OSError as err:
        logger.warning("could not remove the sandbox directory %s: %s", path, err)
    finally:
        if fd >= 0:
            os.close(fd)


def _empty_or_first_dir(fd: int) -> str | None:
    """Unlink every non-directory in the directory open on `fd`; return a subdirectory's
    name, or None once it is empty."""
    os.fchmod(fd, 0o700)
    for name in os.listdir(fd):
        if stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
            return name
        os.unlink(name, dir_fd=fd)
    return None
