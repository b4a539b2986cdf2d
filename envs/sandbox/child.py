"""The sandboxed child's bootstrap (see `envs.sandbox`): run as ``python -c <this file's source>``.

It sets the limits, installs the audit hook (unless told not to) and runs program.py as
__main__. The hook's globals are a private dict with a copy of builtins and the C functions it
needs bound at install time, so the program cannot patch what the hook relies on (os.path,
builtins) and cannot reach the hook (gc walks denied). It imports nothing of this project: the
child has no site-packages. Never import this module: the parent reads its source.

Arguments: work dir, status fd, setup fd, hook (1 or 0), RLIMIT_AS, RLIMIT_CPU, RLIMIT_FSIZE,
RLIMIT_NOFILE, RLIMIT_NPROC (-1: unset), extra read paths joined by newlines.

Two channels to the parent: the setup fd gets b"ok" (or "setup failed: ...") and is closed
before the program runs, so the program can never write to it; only it tells the parent that the
sandbox itself failed. The status fd carries the hook's "blocked: ..." and stays open: the
program can write there too, so the parent treats what it reads as a plain observation.
"""

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
    elif event == "fcntl.fcntl":
        if args[1] in DENY_FCNTL:  # SIGIO/SIGURG to another process (F_SETOWN and kin)
            _deny(event, "command %d" % args[1])
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
    tmp, status_fd, _setup_fd, hook, mem, cpu, fsize, nofile, nproc, extra = argv
    R = resource
    limits = [(R.RLIMIT_CORE, 0, 0), (R.RLIMIT_AS, int(mem), int(mem)),
              (R.RLIMIT_CPU, int(cpu), int(cpu) + 1), (R.RLIMIT_FSIZE, int(fsize), int(fsize)),
              (R.RLIMIT_NOFILE, int(nofile), int(nofile))]
    if int(nproc) >= 0:
        limits.append((R.RLIMIT_NPROC, int(nproc), int(nproc)))
    for what, soft, hard in limits:
        R.setrlimit(what, (soft, hard))
    sys.path.extend(p for p in extra.split("\n") if p)
    if hook == "1":
        _install_hook(tmp, status_fd, extra)

def _install_hook(tmp, status_fd, extra):
    # Import every compiled-in module now, then forbid re-importing them and remove the one
    # function that re-creates them outside the import system (which would bring back the
    # functions deleted below).
    import warnings
    with warnings.catch_warnings():  # e.g. Debian's compiled-in spwd warns it is deprecated
        warnings.simplefilter("ignore")
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
        DENY_FCNTL=frozenset((8, 10, 15)),  # F_SETOWN, F_SETSIG, F_SETOWN_EX
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
    sys.addaudithook(private["_hook"])

def _run():
    setup_fd = int(sys.argv[3])
    try:
        with open("program.py", "rb") as handle:
            source = handle.read()
        _install(sys.argv[1:])
        posix.write(setup_fd, b"ok")
        posix.close(setup_fd)
    except BaseException as exc:  # a fault of the sandbox, reported to the parent as such
        posix.write(setup_fd, ("setup failed: %r" % (exc,)).encode("utf-8", "replace"))
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

if __name__ == "__main__":
    _run()
