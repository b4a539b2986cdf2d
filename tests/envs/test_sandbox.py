"""The sandbox contains hostile programs: each attack is stopped with a clear observation, no
process outlives its run and the temp dir is gone afterwards. Every test using the `config`
fixture runs twice: under bubblewrap (skipped, with the reason, where it cannot run) and in
hook mode. Kernel-level evidence from outside the sandbox is in `test_sandbox_escapes.py`."""

from __future__ import annotations

import ast
import contextlib
import io
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from envs.sandbox import (
    TOKEN_VAR,
    ExecResult,
    Executor,
    SandboxConfig,
    run_code,
    run_many,
)
from tests.utils import HOOK_WARNING, own_sandbox_pids, skip_unless_bwrap_runs

FAST = {"timeout_s": 2.0, "cpu_s": 1, "memory_mb": 256, "max_output_bytes": 20_000}
pytestmark = pytest.mark.filterwarnings(HOOK_WARNING)


@pytest.fixture(params=["bwrap", "hook"])
def config(request, tmp_path):
    """Small limits and a private temp root; after the test: no sandbox process, no temp dir."""
    skip_unless_bwrap_runs(request.param)
    root = tmp_path / "sandboxes"
    root.mkdir()
    yield SandboxConfig(**FAST, isolation=request.param, tmp_root=str(root))
    assert own_sandbox_pids() == [], "a sandboxed process outlived its run"
    assert list(root.iterdir()) == [], "a sandbox temp dir was left behind"


def run(code: str, config: SandboxConfig, **changes) -> ExecResult:
    if changes:
        config = SandboxConfig(**{**config.__dict__, **changes})
    return run_code(code, config)


def test_a_plain_program_runs_and_its_answer_is_read(config):
    code = "import math, fractions, itertools\nprint('work')\nprint(math.comb(6, 2) + 27)"
    result = run(code, config)
    assert result.ok and result.exit_code == 0 and result.stdout == "work\n42\n"
    assert result.answer() == "42" and result.violation is None
    assert run("print('so \\\\boxed{7/2} it is')\nprint('bye')", config).answer() == "7/2"
    assert "exit status 0" in result.observation() and "42" in result.observation()


def test_errors_are_reported_with_the_program_traceback(config):
    result = run("def f():\n    return 1 / 0\nf()", config)
    assert result.exit_code == 1 and not result.ok and result.answer() is None
    assert 'File "program.py", line 2, in f' in result.stderr
    assert "ZeroDivisionError" in result.observation()
    assert "<string>" not in result.stderr  # the bootstrap's frames are hidden
    syntax = run("print(", config)
    assert syntax.exit_code == 1 and "SyntaxError" in syntax.stderr
    for odd in ("print(1)\x00", "print('\ud800')", ""):  # null byte, lone surrogate, empty
        assert isinstance(run(odd, config), ExecResult)


def test_infinite_loop_hits_the_wall_clock_limit(config):
    began = time.monotonic()
    result = run("import time\nwhile True:\n    time.sleep(0.05)", config, timeout_s=1.0)
    assert result.timed_out and result.killed_reason == "timeout" and result.exit_code == -9
    assert time.monotonic() - began < 5
    assert "wall-clock time limit" in result.observation()


def test_busy_loop_hits_the_cpu_limit(config):
    result = run("while True:\n    pass", config, timeout_s=20.0, cpu_s=1)
    assert result.killed_reason == "cpu limit" and result.exit_code == -signal.SIGXCPU
    assert not result.timed_out and "CPU time" in result.observation()
    # ignoring SIGXCPU does not help: the hard limit one second later is a SIGKILL
    code = "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass"
    result = run(code, config, timeout_s=20.0, cpu_s=1)
    assert result.exit_code == -signal.SIGKILL and not result.timed_out


@pytest.mark.parametrize(
    ("code", "blocked"),
    [
        ("import os\nwhile True:\n    os.fork()", "os.fork"),
        # where _posixsubprocess is compiled in (Debian's Python), at subprocess.Popen; where
        # multiprocessing starts by fork (3.11.2), at os.fork
        (
            "import subprocess\nsubprocess.run(['sh', '-c', ':(){ :|:& };:'])",
            ("_posixsubprocess", "subprocess.Popen"),
        ),
        ("import os\nos.system('sleep 30 &')", "os.system"),
        ("import os\nos.posix_spawn('/bin/sleep', ['sleep', '30'], {})", "os.posix_spawn"),
        ("import os\nos.execv('/bin/sleep', ['sleep', '30'])", "os.exec"),
        (
            "import multiprocessing as mp\nmp.Process(target=print).start()",
            ("subprocess", "os.fork"),
        ),
        ("import pty\npty.fork()", "os.forkpty"),
        ("import os\nos.kill(os.getppid(), 9)", "os.kill"),
    ],
    ids=[
        "fork-bomb",
        "subprocess",
        "os.system",
        "posix_spawn",
        "exec",
        "multiprocessing",
        "pty",
        "kill-parent",
    ],
)
def test_no_process_is_created_or_signalled(config, code, blocked):
    result = run(code, config)
    names = (blocked,) if isinstance(blocked, str) else blocked
    assert result.killed_reason == "violation"
    assert any(name in result.violation for name in names), result.violation
    assert "stopped by the sandbox: blocked:" in result.observation()


def test_memory_hog_gets_a_memory_error(config):
    # The appending hog faults in the whole 256 MiB before RLIMIT_AS stops it, and RLIMIT_CPU
    # counts the kernel's time to find those pages: 0.13 s of system time on an idle machine,
    # 0.5-0.9 s while the host reclaims page cache for it (measured). FAST's 1 CPU-second then
    # races the memory limit, so the hog gets the sandbox's default CPU budget (SandboxConfig).
    for code in ("x = bytearray(2 * 1024**3)", "x = []\nwhile True:\n    x.append(' ' * 10**6)"):
        result = run(code, config, cpu_s=SandboxConfig().cpu_s)
        assert result.exit_code == 1 and "MemoryError" in result.stderr
        assert "out of memory" in result.observation()


@pytest.mark.parametrize(
    "code", ["while True:\n    print('y' * 100)", "print('x' * 10**7)"], ids=["flood", "one-line"]
)
def test_huge_output_is_capped_and_the_program_stopped(config, code):
    result = run(code, config)
    assert result.output_truncated and result.killed_reason == "output limit"
    assert len(result.stdout.encode()) + len(result.stderr.encode()) <= config.max_output_bytes
    assert result.answer() is None and len(result.observation(500)) <= 500


def test_reads_outside_the_sandbox_are_denied(config, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-42")
    for code in (
        "print(open('/etc/passwd').read())",
        f"print(open({str(secret)!r}).read())",
        "print(open('/proc/self/root/etc/passwd').read())",  # through a symlink
        f"import os\nprint(os.read(os.open({str(secret)!r}, os.O_RDONLY), 99))",
        "import os\nprint(os.listdir('/'))",
        "import os\nos.chdir('/')\nprint(open('etc/passwd').read())",
    ):
        result = run(code, config)
        assert result.killed_reason == "violation", code
        assert "TOP-SECRET" not in result.stdout and "root:" not in result.stdout


def test_writes_outside_the_sandbox_are_denied(config, tmp_path):
    target = tmp_path / "planted.txt"
    for code in (
        f"open({str(target)!r}, 'w').write('pwned')",
        f"import os\nos.close(os.open({str(target)!r}, os.O_CREAT | os.O_WRONLY))",
        f"import os\nos.symlink({str(tmp_path)!r}, 'out')\nopen('out/planted.txt', 'w')",
        f"import os\nos.mkdir({str(tmp_path / 'newdir')!r})",
        f"import shutil\nshutil.copy('program.py', {str(target)!r})",
        "import os\nos.mkfifo('/tmp/fifo-from-sandbox')",
    ):
        result = run(code, config)
        assert not result.ok, code
        assert result.violation or "AttributeError" in result.stderr, code
    assert not target.exists() and not (tmp_path / "newdir").exists()
    assert not os.path.exists("/tmp/fifo-from-sandbox")


def test_files_inside_the_sandbox_dir_work(config):
    code = (
        "import os, shutil, tempfile, pathlib\n"
        "os.makedirs('a/b')\n"
        "pathlib.Path('a/b/n.txt').write_text('41')\n"
        "with tempfile.NamedTemporaryFile('w') as f:\n"
        "    f.write('x')\n"
        "n = int(open('a/b/n.txt').read()) + 1\n"
        "shutil.rmtree('a')\n"
        "print(sorted(os.listdir()), n)"
    )
    result = run(code, config)
    assert result.ok, result.stderr + str(result.violation)
    assert result.stdout.strip() == "['program.py'] 42"


@pytest.mark.parametrize("network_namespace", [None, False], ids=["auto-netns", "no-netns"])
def test_sockets_are_denied_and_nothing_connects(config, network_namespace):
    if config.isolation == "bwrap" and network_namespace is False:
        pytest.skip("bwrap always makes a network namespace")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        code = f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=1)"
        result = run(code, config, network_namespace=network_namespace)
        assert result.killed_reason == "violation" and "socket" in result.violation
        with pytest.raises(BlockingIOError):
            listener.accept()  # no connection arrived
    finally:
        listener.close()


def test_interpreter_crashes_are_contained(config):
    ctypes = run("import ctypes\nctypes.string_at(0)", config)
    assert ctypes.violation and "ctypes" in ctypes.violation
    abort = run("import os\nos.abort()", config)
    assert abort.exit_code == -signal.SIGABRT and "SIGABRT" in abort.observation()
    deep_c_recursion = "import sys\nsys.setrecursionlimit(10**8)\ndef f():\n    f.__call__()\nf()"
    segv = run(deep_c_recursion, config)
    assert segv.exit_code == -signal.SIGSEGV and segv.killed_reason == "signal SIGSEGV"
    assert "crashed" in segv.observation()


def test_the_sandbox_cannot_be_switched_off_from_inside(config):
    for code, blocked in [
        ("import resource\nresource.setrlimit(resource.RLIMIT_CPU, (-1, -1))", "resource"),
        ("import gc\nprint(len(gc.get_objects()))", "gc.get_objects"),
        ("import sys\ndel sys.modules['posix']\nimport posix", "import (posix)"),
        ("import sys\nsys.addaudithook(lambda *a: None)", "sys.addaudithook"),
    ]:
        result = run(code, config)
        assert result.violation and blocked in result.violation, code
    # the hook does not use anything the program can patch
    patched = "import builtins, os\nbuiltins.isinstance = lambda *a: True\nos.path.realpath = str\n"
    result = run(patched + "open('/etc/passwd')", config)
    assert result.violation and "/etc/passwd" in result.violation


def test_clean_environment_and_no_inherited_files(config):
    os.environ["MATHTEAMS_TEST_SECRET"] = "leak"
    try:
        code = "import os, sys\nprint(sorted(os.environ))\nprint(sys.path)\nprint(os.getcwd())"
        result = run(code, config)
    finally:
        del os.environ["MATHTEAMS_TEST_SECRET"]
    assert result.ok and "MATHTEAMS_TEST_SECRET" not in result.stdout
    work = "\n/sandbox\n" if config.isolation == "bwrap" else "mathteams-sandbox-"
    assert "site-packages" not in result.stdout and work in result.stdout
    code = (
        "import os\nopen_fds = []\nfor fd in range(64):\n    try:\n        os.fstat(fd)\n"
        "        open_fds.append(fd)\n    except OSError:\n        continue\nprint(open_fds)"
    )
    # stdin (/dev/null), stdout and stderr pipes, and the sandbox's status pipe; nothing else
    fds = ast.literal_eval(run(code, config).stdout)
    assert fds[:3] == [0, 1, 2] and len(fds) == 4


def test_extra_read_paths_are_readable_and_importable(config):
    # readable by the sandbox's uid (65534 when the caller is root), as extra paths must be
    with tempfile.TemporaryDirectory() as folder:
        library = Path(folder) / "library"
        library.mkdir()
        (library / "helper.py").write_text("ANSWER = 42\n")
        for path in (Path(folder), library):
            path.chmod(0o755)
        (library / "helper.py").chmod(0o644)
        code = "import helper\nprint(helper.ANSWER)"
        assert run(code, config, extra_read_paths=(str(library),)).answer() == "42"
        assert "ModuleNotFoundError" in run(code, config).stderr


@contextlib.contextmanager
def stray_process(token: bytes):
    """A process outside any sandbox run's group that carries the run token `token`."""
    env = {**os.environ, TOKEN_VAR: token.decode()}
    stray = subprocess.Popen(["sleep", "30"], env=env, start_new_session=True)
    try:
        yield stray
    finally:
        if stray.poll() is None:
            stray.kill()
            stray.wait()


def test_escaped_processes_are_swept():
    from envs.sandbox.cleanup import sweep

    token = b"0123456789abcdef"
    with stray_process(token) as stray:
        assert sweep(token) == 1
        assert stray.wait(timeout=5) == -signal.SIGKILL


def test_sweep_finds_a_process_caught_inside_exec(monkeypatch):
    """Popen returns once exec has closed its error pipe, which the kernel does before it
    lays out the new environment: for a moment /proc/<pid>/environ reads empty (seen on a
    loaded CI machine). The scan must read such a process again, not pass it over."""
    import builtins

    from envs.sandbox import cleanup

    token = b"fedcba9876543210"
    with stray_process(token) as stray:
        environ_path = f"/proc/{stray.pid}/environ"
        empty_reads = []

        def open_mid_exec(path, *args, **kwargs):
            if path == environ_path and len(empty_reads) < 3:
                empty_reads.append(path)
                return io.BytesIO(b"")
            return builtins.open(path, *args, **kwargs)

        monkeypatch.setattr(cleanup, "open", open_mid_exec, raising=False)
        assert cleanup.sweep(token) == 1
        assert len(empty_reads) == 3
        assert stray.wait(timeout=5) == -signal.SIGKILL


def test_run_many_runs_in_parallel_within_max_workers(config):
    code = "import time\nstart = time.time()\ntime.sleep(0.4)\nprint(start, time.time(), {i})"
    codes = [code.format(i=i) for i in range(8)]
    results = run_many(codes, config, max_workers=4)
    assert [int(r.stdout.split()[2]) for r in results] == list(range(8))  # order kept
    spans = [tuple(map(float, r.stdout.split()[:2])) for r in results]
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    alive = peak = 0
    for _, step in events:
        alive += step
        peak = max(peak, alive)
    assert 2 <= peak <= 4  # ran concurrently, never more than max_workers at once
    with Executor(config, max_workers=2) as executor:
        futures = [executor.submit("print(sum(range(10)))") for _ in range(3)]
        assert [f.result().answer() for f in futures] == ["45"] * 3


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"timeout_s": 0}, "timeout_s"),
        ({"timeout_s": "5"}, "timeout_s"),
        ({"cpu_s": 0}, "cpu_s"),
        ({"memory_mb": 8}, "memory_mb"),
        ({"max_output_bytes": -1}, "max_output_bytes"),
        ({"extra_read_paths": "relative/dir"}, "extra_read_paths"),
        ({"user": "nobody"}, "user"),
        ({"network_namespace": "yes"}, "network_namespace"),
        ({"isolation": "bwrap", "network_namespace": False}, "contradicts isolation"),
        ({"isolation": "docker"}, "isolation"),
        ({"isolation": "hook", "audit_hook": False}, "unconfined"),
        ({"audit_hook": 1}, "audit_hook"),
        ({"max_disk_bytes": 0}, "max_disk_bytes"),
    ],
)
def test_bad_config_raises_value_error(changes, message):
    with pytest.raises(ValueError, match=message):
        SandboxConfig(**changes)


def test_hook_mode_is_opt_in_and_warns(monkeypatch):
    monkeypatch.delenv("MATHTEAMS_SANDBOX_ISOLATION", raising=False)
    assert SandboxConfig().isolation == "bwrap"
    with pytest.warns(UserWarning, match="not a security boundary"):
        SandboxConfig(isolation="hook")


def test_bad_arguments_raise_type_errors():
    with pytest.raises(TypeError, match="code must be a str"):
        run_code(b"print(1)")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_workers"):
        Executor(max_workers=0)
    assert sys.executable == SandboxConfig().python


def _interpreter_for_nobody() -> str | None:
    """A Python >= 3.11 that uid 65534 can run (the test's own may sit under a private home)."""
    if os.geteuid() != 0:
        return None
    for python in (sys.executable, "/usr/bin/python3"):
        try:
            probe = subprocess.run(
                [python, "-S", "-P", "-c", "pass"], user=65534, capture_output=True, check=False
            )
        except OSError:  # missing, or a directory on its path that uid 65534 cannot enter
            continue
        if probe.returncode == 0:
            return python
    return None


NOBODY_PYTHON = _interpreter_for_nobody()


@pytest.mark.skipif(NOBODY_PYTHON is None, reason="needs root and a Python uid 65534 can run")
@pytest.mark.parametrize(
    "network_namespace", [None, False], ids=["netns-then-setuid", "popen-user"]
)
def test_unprivileged_user_gets_os_level_limits(tmp_path, network_namespace):
    root = tmp_path / "shared"
    root.mkdir()
    tmp_path.chmod(0o755)
    root.chmod(0o755)  # uid 65534 must reach its temp dir
    config = SandboxConfig(
        **FAST,
        isolation="hook",
        tmp_root=str(root),
        python=NOBODY_PYTHON,
        user=65534,
        network_namespace=network_namespace,
    )
    code = (
        "import os, threading\nprint(os.getuid(), os.getgid(), os.getgroups())\n"
        "open('mine.txt', 'w').write('ok')\n"
        "threading.Thread(target=print).start()"
    )
    result = run_code(code, config)
    assert result.stdout.startswith("65534 65534 []"), result.stderr
    assert "can't start new thread" in result.stderr  # RLIMIT_NPROC holds for a non-root uid
    assert list(root.iterdir()) == []
    assert own_sandbox_pids() == []


@pytest.mark.skipif(NOBODY_PYTHON is None, reason="needs root and a Python uid 65534 can run")
def test_bwrap_can_run_as_an_unprivileged_host_user():
    skip_unless_bwrap_runs()
    # the program sleeps 1 s so the host can look at it: a loaded machine needs more than 2 s
    fast = {**FAST, "timeout_s": 15.0}
    config = SandboxConfig(**fast, isolation="bwrap", python=NOBODY_PYTHON, user=65534)
    with Executor(config, max_workers=1) as executor:
        future = executor.submit("import os, time\nprint(os.getuid())\ntime.sleep(1)")
        seen: dict[int, str] = {}
        while not future.done():  # look at the running sandbox from the host
            for pid in own_sandbox_pids():
                with contextlib.suppress(OSError):
                    status = Path(f"/proc/{pid}/status").read_text()
                    seen[pid] = next(x for x in status.splitlines() if x.startswith("Uid:"))
            time.sleep(0.05)
        result = future.result()
    assert result.ok and result.stdout == "65534\n", result.stderr
    assert seen and all(uids.split()[1:] == ["65534"] * 4 for uids in seen.values()), seen
