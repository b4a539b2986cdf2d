"""Hostile programs against the bubblewrap sandbox, with the evidence taken from outside it.

Each attack runs twice where it makes sense: with the audit hook (the default) and with
``audit_hook=False``, which stands for a program that got around the hook: what it cannot do then
is stopped by the kernel (namespaces, seccomp, read-only mounts). The evidence is on the host: a
marker path that must not exist, a planted secret that must not show up in the output, a
listener that must get no connection, a victim process that must survive, no sandboxed process
left in /proc, nothing left in the temp root. The module skips, with the reason, where bwrap
cannot run; CI installs it (see ``.ci/run``).
"""

from __future__ import annotations

import os
import platform
import re
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from envs.sandbox import (
    ExecResult,
    SandboxConfig,
    bwrap,
    run_code,
    seccomp,
)
from envs.sandbox.cleanup import remove_tree
from tests.utils import HOOK_WARNING, bwrap_problem, own_sandbox_pids, skip_unless_bwrap_runs

# isolation named: the suite may default to hook mode where bwrap is missing
FAST = {
    "isolation": "bwrap",
    "timeout_s": 3.0,
    "cpu_s": 2,
    "memory_mb": 256,
    "max_output_bytes": 20_000,
}
needs_bwrap = pytest.mark.skipif(
    bwrap_problem() is not None, reason=f"bubblewrap cannot run here: {bwrap_problem()}"
)
LAYERS = pytest.mark.parametrize("audit_hook", [False, True], ids=["kernel-only", "with-hook"])
ARCH = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(), platform.machine())
NR = seccomp.SYSCALLS.get(ARCH, {})


@pytest.fixture(autouse=True)
def no_survivors():
    """After every test: no process of any sandbox run of ours is left."""
    yield
    assert own_sandbox_pids(live_only=False) == [], "a sandboxed process outlived its run"


def run(code: str, audit_hook: bool = True, **changes) -> ExecResult:
    result = run_code(code, SandboxConfig(**{**FAST, "audit_hook": audit_hook, **changes}))
    assert isinstance(result, ExecResult)
    return result


def said(result: ExecResult) -> str:
    return result.stdout + result.stderr + (result.violation or "")


@pytest.fixture
def victim():
    """A process of the parent's that the program tries to kill, stop or trace."""
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)  # its own process group
    yield proc
    assert proc.poll() is None, "the victim process was killed from inside the sandbox"
    assert _state(proc.pid) in "SR", f"the victim was left in state {_state(proc.pid)}"
    proc.kill()
    proc.wait()


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


# ------------------------------------------------------------------ files


@needs_bwrap
@LAYERS
def test_nothing_outside_the_work_dir_can_be_written(tmp_path, audit_hook):
    prefix = bwrap.interpreter_layout(sys.executable)[1]
    name = f"mathteams-marker-{uuid.uuid4().hex}"
    markers = [
        tmp_path / name,  # a host directory the sandbox does not see
        Path(prefix) / name,  # the interpreter's prefix: visible, read-only
        Path("/tmp") / name,
        Path.cwd() / name,  # the repository
        Path("/dev/shm") / name,
    ]
    targets = [str(m) for m in markers] + [
        f"/proc/self/root{prefix}/{name}",
        f"/proc/1/root/tmp/{name}",
        f"/proc/1/cwd/../tmp/{name}",
    ]
    code = f"""
import os
for path in {targets!r}:
    try:
        with open(path, "w") as f:
            f.write("pwned")
        print("WROTE", path)
    except OSError as err:
        print("no", path, type(err).__name__)
for make in (lambda p: os.mkdir(p), lambda p: os.symlink("/", p)):
    try:
        make({str(markers[0])!r})
    except (OSError, AttributeError) as err:
        print("no", type(err).__name__)
"""
    result = run(code, audit_hook)
    # the one writable place besides the work dir: the sandbox's own, private /dev/shm
    wrote = [line for line in result.stdout.splitlines() if line.startswith("WROTE")]
    assert wrote in ([], [f"WROTE /dev/shm/{name}"]), wrote
    assert not any(m.exists() for m in markers), [m for m in markers if m.exists()]


@needs_bwrap
@LAYERS
def test_secrets_of_the_host_do_not_leak(tmp_path, monkeypatch, audit_hook):
    secret = f"TOP-SECRET-{uuid.uuid4().hex}"
    secret_file = tmp_path / "secret.txt"
    secret_file.write_text(secret)
    shm_file = Path("/dev/shm") / f"mathteams-secret-{uuid.uuid4().hex}"
    shm_file.write_text(secret)
    monkeypatch.setenv("MATHTEAMS_PARENT_SECRET", secret)
    repo_file = Path(__file__).resolve()
    code = f"""
import os, glob
print(dict(os.environ))
for path in [{str(secret_file)!r}, {str(shm_file)!r}, {str(repo_file)!r}, "/etc/shadow",
             "/etc/passwd", "/proc/1/environ", "/proc/{os.getpid()}/environ",
             *glob.glob("/proc/*/environ"), *glob.glob("/dev/shm/*")]:
    try:
        print(path, open(path, "rb").read()[:300])
    except OSError as err:
        print("no", path, type(err).__name__)
for where in ("/", "/dev/shm", "/root", "/home", "/tmp", {str(tmp_path)!r}):
    try:
        print(where, os.listdir(where))
    except OSError as err:
        print("no", where, type(err).__name__)
"""
    try:
        result = run(code, audit_hook)
    finally:
        shm_file.unlink()
    assert secret not in said(result) and "MATHTEAMS_PARENT_SECRET" not in said(result)
    if not audit_hook:  # the kernel's answer, not the hook's: these paths do not exist inside
        assert f"no {secret_file} FileNotFoundError" in result.stdout
        assert f"no {repo_file} FileNotFoundError" in result.stdout
        assert "/dev/shm []" in result.stdout  # a private, empty /dev/shm


@needs_bwrap
def test_site_packages_are_not_visible_unless_configured(tmp_path):
    import pettingzoo  # a package of the test environment, not of the sandbox

    code = "import pettingzoo\nprint(pettingzoo.__file__)"
    slow_ok = {"timeout_s": 30.0}  # importing a package is not what is tested: room on a busy host
    assert "ModuleNotFoundError" in run(code, audit_hook=False, **slow_ok).stderr
    package_root = str(Path(pettingzoo.__file__).parents[1])
    result = run(code, audit_hook=False, extra_read_paths=(package_root,), **slow_ok)
    assert result.ok and result.stdout.startswith(package_root), result.stderr


@needs_bwrap
def test_symlinks_to_host_files_lead_nowhere(tmp_path):
    secret = f"TOP-SECRET-{uuid.uuid4().hex}"
    (tmp_path / "secret.txt").write_text(secret)
    code = f"""
import os
for i, target in enumerate([{str(tmp_path / "secret.txt")!r}, {str(tmp_path)!r}, "/etc/passwd",
                            "/proc/1/root/etc/passwd", "../../../../etc/passwd"]):
    os.symlink(target, f"link{{i}}")
    try:
        print(open(f"link{{i}}").read())
    except OSError as err:
        print("no", target, type(err).__name__)
"""
    result = run(code, audit_hook=False)
    assert result.ok, result.stderr
    assert secret not in said(result) and "root:" not in said(result)
    assert result.stdout.count("FileNotFoundError") == 5


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0, reason="a global sysctl is writable only by root")
def test_host_sysctls_stay_read_only():
    """Where the caller is root, the sandbox's uid is root on the host (no capabilities): the
    kernel's global sysctls would be writable through /proc but for its read-only mount."""
    path = Path("/proc/sys/kernel/printk_ratelimit")
    before = path.read_text()
    code = f"""
for path, value in (({str(path)!r}, "{int(before) + 1}"), ("/proc/sys/kernel/hostname", "pwned")):
    try:
        with open(path, "w") as f:
            f.write(value)
        print("WROTE", path)
    except OSError as err:
        print("no", path, type(err).__name__)
"""
    try:
        result = run(code, audit_hook=False)
    finally:
        if path.read_text() != before:
            path.write_text(before)
    assert path.read_text() == before and "WROTE" not in result.stdout
    assert socket.gethostname() != "pwned"


DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")


def _device_stats() -> dict[str, tuple[int, int, int]]:
    return {
        path: (st.st_mtime_ns, st.st_atime_ns, st.st_mode)
        for path in DEVICES
        if os.path.exists(path)
        for st in [os.stat(path)]
    }


@needs_bwrap
@pytest.mark.parametrize("user", [None, "caller"], ids=["default-uid", "caller-uid"])
def test_no_host_device_node_can_be_changed(user):
    """bwrap's --dev bound the host's device nodes: a program that opened /dev/zero and called
    os.utime on it set the host node's times (its owner when the caller is root). Now the
    sandbox's /dev holds no device node at all and stdin is a pipe, not the host's /dev/null:
    nothing reachable is a host node, whichever uid the program runs as."""
    before = _device_stats()
    code = f"""
import os, stat
for name in sorted(os.listdir("/dev")):
    mode = os.lstat("/dev/" + name).st_mode
    print("entry", name, stat.S_ISLNK(mode) or stat.S_ISDIR(mode))
print("stdin", stat.S_ISFIFO(os.fstat(0).st_mode))
for path in {DEVICES!r}:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as err:
        print("no", path, type(err).__name__)
        continue
    for attempt in (lambda: os.utime(fd, (0, 0)), lambda: os.utime(fd), lambda: os.fchmod(fd, 0o777)):
        try:
            attempt()
            print("CHANGED", path)
        except OSError:
            pass
for fd in (0, 1, 2):
    try:
        os.utime(fd, (0, 0))
    except OSError:
        pass
"""
    uid = os.geteuid() if user == "caller" else None
    result = run(code, audit_hook=False, user=uid)
    assert result.ok, result.observation()
    entries = [line.split() for line in result.stdout.splitlines() if line.startswith("entry")]
    assert sorted(name for _, name, _ in entries) == ["fd", "shm", "stderr", "stdin", "stdout"]
    assert all(plain == "True" for _, _, plain in entries)  # links and /dev/shm only
    assert "stdin True" in result.stdout and "CHANGED" not in result.stdout
    assert result.stdout.count("FileNotFoundError") == len(DEVICES)
    assert _device_stats() == before


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0, reason="the uid drop applies when the caller is root")
def test_a_root_caller_runs_programs_as_an_unprivileged_host_uid():
    """Where the caller is root, the sandbox's uid 65534 mapped to host root (no capabilities,
    but the owner of root's files wherever a bind let it reach them). By default bwrap now runs
    as host uid 65534, so the program is nobody on the host too; ``user=0`` opts out."""
    code = "print(open('/proc/self/uid_map').read().split())"
    assert run(code, audit_hook=False).stdout.strip() == "['65534', '65534', '1']"
    assert run(code, audit_hook=False, user=0).stdout.strip() == "['65534', '0', '1']"
    # the program still runs Python, one that uid 65534 can read, and the audit hook still holds
    assert run("print(sum(range(10)))").answer() == "45"


def test_an_interpreter_the_sandbox_uid_cannot_run_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(bwrap, "runnable_by", lambda python, uid: False)
    monkeypatch.setattr(bwrap, "SYSTEM_BIN", ())
    monkeypatch.setattr(bwrap.os, "geteuid", lambda: 0)
    bwrap.system_python.cache_clear()
    try:
        with pytest.raises(RuntimeError) as caught:
            bwrap.sandbox_python(SandboxConfig(**FAST), bwrap.UNPRIVILEGED_UID)
    finally:
        bwrap.system_python.cache_clear()
    message = str(caught.value)
    assert "uid 65534" in message and "cannot run the interpreter" in message
    assert "SandboxConfig(user=0)" in message and "SandboxConfig(python=...)" in message


# ------------------------------------------------------------------ network


@needs_bwrap
@LAYERS
def test_no_connection_reaches_the_host(audit_hook):
    listeners = []
    for family, address in ((socket.AF_INET, ("127.0.0.1", 0)), (socket.AF_INET, ("0.0.0.0", 0))):
        listener = socket.socket(family)
        listener.bind(address)
        listener.listen(4)
        listener.setblocking(False)
        listeners.append(listener)
    abstract = socket.socket(socket.AF_UNIX)
    abstract_name = f"\0mathteams-{uuid.uuid4().hex}"
    abstract.bind(abstract_name)
    abstract.listen(4)
    abstract.setblocking(False)
    ports = [listener.getsockname()[1] for listener in listeners]
    hosts = ["127.0.0.1", "localhost", socket.gethostname(), "10.0.2.2", "172.17.0.1"]
    code = f"""
import socket
for host in {hosts!r}:
    for port in {ports!r}:
        try:
            socket.create_connection((host, port), timeout=0.5)
            print("CONNECTED", host, port)
        except OSError as err:
            print("no", host, port, type(err).__name__)
try:
    s = socket.socket(socket.AF_UNIX)
    s.connect({abstract_name!r})
    print("CONNECTED abstract")
except OSError as err:
    print("no abstract", type(err).__name__)
"""
    try:
        result = run(code, audit_hook, timeout_s=10.0)
        for listener in [*listeners, abstract]:
            with pytest.raises(BlockingIOError):
                listener.accept()  # no connection arrived
    finally:
        for listener in [*listeners, abstract]:
            listener.close()
    assert "CONNECTED" not in result.stdout


# ------------------------------------------------------------------ processes


@needs_bwrap
@LAYERS
def test_processes_of_the_host_cannot_be_signalled_or_traced(victim, audit_hook):
    code = f"""
import ctypes, os, signal
libc = ctypes.CDLL(None, use_errno=True)
def attempt(name, call):
    try:
        out = call()
        print(name, out, ctypes.get_errno())
    except (OSError, AttributeError) as err:
        print(name, "no", type(err).__name__)
attempt("kill", lambda: os.kill({victim.pid}, signal.SIGKILL))
attempt("stop", lambda: os.kill({victim.pid}, signal.SIGSTOP))
attempt("killpg", lambda: os.killpg({os.getpgid(victim.pid)}, signal.SIGKILL))
attempt("kill-parent", lambda: os.kill({os.getpid()}, 0))
attempt("kill-all", lambda: os.kill(-1, signal.SIGKILL))
attempt("pidfd_open", lambda: libc.syscall(434, {victim.pid}, 0))
attempt("ptrace", lambda: libc.ptrace(16, {victim.pid}, 0, 0))  # PTRACE_ATTACH
attempt("mem", lambda: open("/proc/{victim.pid}/mem", "rb").read(1))
"""
    result = run(code, audit_hook)
    if audit_hook:
        assert result.violation and "ctypes" in result.violation
    else:  # the kernel: the pid is not in the sandbox's pid namespace
        assert "kill no ProcessLookupError" in result.stdout
        assert "kill-parent no ProcessLookupError" in result.stdout
        assert "ptrace -1 1\n" in result.stdout  # EPERM from the seccomp filter


@needs_bwrap
def test_the_seccomp_filter_denies_escape_calls_but_not_threads():
    denied = ["unshare", "setns", "mount", "umount2", "keyctl", "bpf", "perf_event_open"]
    denied += ["process_vm_readv", "ptrace", "pivot_root", "chroot", "add_key", "request_key"]
    calls = {name: NR[name] for name in denied}
    code = f"""
import ctypes, os, subprocess, threading
libc = ctypes.CDLL(None, use_errno=True)
for name, nr in {calls!r}.items():
    if name == "unshare":
        out = libc.syscall(nr, 0x10000000, 0, 0, 0, 0, 0)  # CLONE_NEWUSER
    else:
        out = libc.syscall(nr, 0, 0, 0, 0, 0, 0)
    print(name, out, ctypes.get_errno())
for name, start in (("fork", os.fork), ("subprocess", lambda: subprocess.run(["true"]))):
    try:
        if start() == 0:
            os._exit(0)
        print(name, "STARTED")
    except OSError as err:
        print(name, "denied", err.errno)
box = []
thread = threading.Thread(target=box.append, args=(42,))
thread.start()
thread.join()
print("thread", box)
"""
    result = run(code, audit_hook=False)
    assert result.ok, result.stderr
    for name in denied:
        assert f"{name} -1 1\n" in result.stdout, name  # EPERM
    assert "fork denied 1" in result.stdout and "subprocess denied 1" in result.stdout
    assert "thread [42]" in result.stdout


@needs_bwrap
@LAYERS
def test_a_program_that_stops_itself_is_still_killed_at_the_deadline(audit_hook):
    code = "import os, signal\nprint('stopping', flush=True)\nsignal.raise_signal(signal.SIGSTOP)"
    began = time.monotonic()
    result = run(code, audit_hook, timeout_s=1.0)
    assert time.monotonic() - began < 5
    assert result.timed_out and result.stdout == "stopping\n"


@pytest.mark.filterwarnings(HOOK_WARNING)
@pytest.mark.parametrize(
    ("isolation", "audit_hook"),
    [("bwrap", False), ("bwrap", True), ("hook", True)],
    ids=["bwrap-kernel-only", "bwrap-with-hook", "hook"],
)
def test_sigio_cannot_be_aimed_at_the_parent_or_a_victim(victim, isolation, audit_hook):
    """F_SETOWN makes the kernel send SIGIO (default: terminate) to a process of the
    program's choice when its pipe becomes writable again, which happens as the parent reads."""
    skip_unless_bwrap_runs(isolation)
    received: list[int] = []
    previous = {
        sig: signal.signal(sig, lambda number, frame: received.append(number))
        for sig in (signal.SIGIO, signal.SIGURG)
    }
    # stdout's pipe aims SIGKILL at the victim's process group, stderr's SIGIO at the parent
    # (handled above, so a regression fails the test instead of killing the test runner)
    code = f"""
import fcntl, os, sys
for fd, owner, sig in ((1, -{os.getpgid(victim.pid)}, 9), (2, {os.getpid()}, 0)):
    try:
        fcntl.fcntl(fd, fcntl.F_SETOWN, owner)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)
        if sig:
            fcntl.fcntl(fd, 10, sig)  # F_SETSIG
        print("owner", owner, flush=True)
    except OSError as err:
        print("no", owner, type(err).__name__, flush=True)
for _ in range(100):
    for stream, text in ((sys.stdout, "x"), (sys.stderr, "y")):
        stream.write(text * 4096)
        stream.flush()
"""
    try:
        result = run_code(
            code,
            SandboxConfig(
                **{**FAST, "max_output_bytes": 1 << 20, "isolation": isolation},
                audit_hook=audit_hook,
            ),
        )
        time.sleep(0.2)  # a signal on its way would have arrived by now
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    assert received == []
    if isolation == "hook":
        assert result.violation and "fcntl.fcntl" in result.violation


# ------------------------------------------------------------------ the audit hook


@needs_bwrap
@pytest.mark.parametrize(
    "trick",
    [
        # the hook's own failure (recursion limit inside it) aborts the call, never allows it
        (
            "import sys\nsys.setrecursionlimit(60)\ndef deep(n):\n"
            "    return deep(n + 1) if n < 40 else attack()\ndeep(0)"
        ),
        # a finalizer running while the hook runs
        (
            "import gc\nclass F:\n    def __del__(self):\n        attack()\n"
            "a = F(); a.self = a; del a\ngc.collect()\nattack()"
        ),
        # a signal handler firing in the middle of hooked calls
        (
            "import signal\nsignal.signal(signal.SIGALRM, lambda *a: attack())\n"
            "signal.setitimer(signal.ITIMER_REAL, 0.001, 0.001)\n"
            "for _ in range(3000):\n    open('program.py').close()"
        ),
        # audit events raised by the program itself, with odd arguments
        (
            "import sys\nfor args in [(None, None, None), ('/', 'r', 0), (b'x',)]:\n"
            "    try:\n        sys.audit('open', *args)\n    except Exception as e:\n"
            "        print(type(e).__name__)\nattack()"
        ),
        # a thread
        "import threading\nt = threading.Thread(target=attack)\nt.start()\nt.join()",
    ],
    ids=["recursion", "gc-finalizer", "signal-handler", "sys.audit-reentry", "thread"],
)
def test_tricks_against_the_audit_hook_are_contained_by_the_kernel(tmp_path, trick):
    marker = tmp_path / "escaped"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    attack = f"""
def attack():
    import socket
    for step in (lambda: open({str(marker)!r}, "w").write("x"),
                 lambda: socket.create_connection(("127.0.0.1", {listener.getsockname()[1]}), 1)):
        try:
            step()
        except Exception:
            pass
"""
    try:
        result = run(attack + trick, audit_hook=True)
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()
    assert not marker.exists()
    assert isinstance(result, ExecResult)


# ------------------------------------------------------------------ the parent's side


@pytest.mark.filterwarnings(HOOK_WARNING)
@pytest.mark.parametrize(
    ("isolation", "audit_hook"),
    [("bwrap", False), ("bwrap", True), ("hook", True)],
    ids=["bwrap-kernel-only", "bwrap-with-hook", "hook"],
)
@pytest.mark.parametrize(
    ("action", "status"),
    [
        ("os.write(fd, b'setup failed: forged')", 87),
        ("os.write(fd, b'blocked: forged ' + bytes(range(256)) * 100)", 86),
        ("os.write(fd, b'\\xff\\xfe' * 30000)", 86),
        ("os.dup2(1, fd)\n    print('ok', flush=True)", 86),
        ("os.close(fd)", 87),
        ("pass", 137),
        ("pass", 255),
    ],
    ids=["setup-failed", "blocked-binary", "garbage", "dup2", "closed", "exit-137", "exit-255"],
)
def test_forged_status_messages_become_ordinary_results(
    tmp_path, isolation, audit_hook, action, status
):
    skip_unless_bwrap_runs(isolation)
    # the status channel is one of the pipes the program inherited: write to every one
    code = f"""
import os, stat
for fd in range(3, 64):
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            continue
    except OSError:
        continue
    {action}
os._exit({status})
"""
    root = tmp_path / "root"
    root.mkdir()
    config = SandboxConfig(
        **{**FAST, "isolation": isolation}, audit_hook=audit_hook, tmp_root=str(root)
    )
    result = run_code(code, config)
    assert isinstance(result, ExecResult) and not result.ok
    assert len(result.violation or "") <= 4096
    assert list(root.iterdir()) == []


def _deep_chain(top: Path, depth: int) -> None:
    """`depth` nested directories under `top`, made through dir fds (the path is too long)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            below = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = below
        os.mkfifo("fifo", dir_fd=fd)
        with open(os.open("f", os.O_WRONLY | os.O_CREAT, dir_fd=fd), "w") as handle:
            handle.write("x")
    finally:
        os.close(fd)


def _remove_within(path: Path, seconds: float) -> None:
    """Run `remove_tree` in a thread: it must return (not hang on a FIFO) and not raise."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            remove_tree(str(path))
        except BaseException as err:  # noqa: BLE001 - reported by the assert below
            errors.append(err)

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), "removing the temp dir hung"
    assert errors == []


def test_hook_mode_temp_dir_removal_survives_hostile_shapes(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    work = tmp_path / "work"
    work.mkdir()
    _deep_chain(work, 2000)
    os.mkfifo(work / "fifo")
    (work / "to-file").symlink_to(outside / "keep.txt")
    (work / "to-dir").symlink_to(outside)
    (work / "loop").symlink_to(work / "loop")
    locked = work / "locked" / "inner"
    locked.mkdir(parents=True)
    (locked / "f").write_text("x")
    locked.chmod(0)
    (work / "locked").chmod(0)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(work / "sock"))
    server.close()
    os.chmod(work, 0o500)
    _remove_within(work, 60)
    assert not work.exists()
    assert (outside / "keep.txt").read_text() == "keep"  # symlinks were not followed
    # the work path itself replaced by a FIFO, a symlink to a directory, or gone
    os.mkfifo(work)
    _remove_within(work, 5)
    assert not work.exists()
    work.symlink_to(outside)
    _remove_within(work, 5)
    assert not work.is_symlink() and (outside / "keep.txt").exists()
    _remove_within(work, 5)


@pytest.mark.filterwarnings(HOOK_WARNING)
@pytest.mark.parametrize(
    ("isolation", "audit_hook"),
    [("bwrap", False), ("bwrap", True), ("hook", True)],
    ids=["bwrap-kernel-only", "bwrap-with-hook", "hook"],
)
def test_a_deep_directory_chain_and_fifos_leave_nothing_behind(tmp_path, isolation, audit_hook):
    skip_unless_bwrap_runs(isolation)
    code = """
import os
fd = os.open(".", os.O_RDONLY)
depth = 0
try:
    for depth in range(2000):
        os.mkdir("d", dir_fd=fd)
        below = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = below
except (OSError, RuntimeError) as err:
    print("stopped", type(err).__name__)
print("depth", depth)
for name in ("program.py", "fifo"):
    try:
        os.remove(name)
        os.mkfifo(name)
    except (OSError, AttributeError) as err:
        print("no fifo", type(err).__name__)
"""
    root = tmp_path / "root"
    root.mkdir()
    config = SandboxConfig(
        **{**FAST, "timeout_s": 20.0, "cpu_s": 15, "isolation": isolation},
        audit_hook=audit_hook,
        tmp_root=str(root),
    )
    result = run_code(code, config)  # the hook may stop it early, or the limits: any result
    if not audit_hook:
        assert "depth 1999" in result.stdout
    assert list(root.iterdir()) == []


# ------------------------------------------------------------------ setup errors


def test_missing_bwrap_names_the_package_and_the_opt_in(monkeypatch):
    monkeypatch.setattr(bwrap.shutil, "which", lambda name: None)
    bwrap.bwrap_path.cache_clear()
    try:
        with pytest.raises(RuntimeError, match="apt-get install bubblewrap") as caught:
            run_code("print(1)", SandboxConfig(**FAST))
    finally:
        bwrap.bwrap_path.cache_clear()
    assert "isolation='hook'" in str(caught.value)


def test_a_bwrap_that_cannot_make_namespaces_is_a_clear_error(monkeypatch, tmp_path):
    fake = tmp_path / "bwrap"
    fake.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace, likely because the "
        "kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n"
    )
    fake.chmod(stat.S_IRWXU)
    monkeypatch.setattr(bwrap, "bwrap_path", lambda: str(fake))
    with pytest.raises(RuntimeError) as caught:  # as the caller: the fake is private to it
        run_code("print(1)", SandboxConfig(**FAST, user=os.geteuid()))
    message = str(caught.value)
    assert "non-privileged user namespaces" in message and "bubblewrap" in message


# ------------------------------------------------------------------ the filter itself


def _header_numbers(path: str) -> dict[str, int]:
    text = Path(path).read_text()
    return {m[1]: int(m[2]) for m in re.finditer(r"#define __NR(?:3264)?_(\w+)\s+(\d+)\b", text)}


@pytest.mark.parametrize(
    ("arch", "header"),
    [
        ("x86_64", "/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
        ("aarch64", "/usr/include/asm-generic/unistd.h"),
    ],
)
def test_syscall_numbers_match_the_kernel_headers(arch, header):
    if not os.path.exists(header):
        pytest.skip(f"{header} is not installed (linux-libc-dev)")
    numbers = _header_numbers(header)
    table = seccomp.SYSCALLS[arch]
    assert {name: numbers.get(name) for name in table} == table
    assert set(seccomp.DENIED) - set(table) <= {"fork", "vfork", "iopl", "ioperm", "uselib"}


def test_the_filter_is_well_formed_for_both_architectures():
    for machine in ("x86_64", "aarch64", "arm64"):
        program = seccomp.build_filter(machine)
        assert len(program) % 8 == 0 and 40 < len(program) // 8 < 255
    with pytest.raises(RuntimeError, match="x86_64 and aarch64"):
        seccomp.build_filter("riscv64")
