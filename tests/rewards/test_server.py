"""The reward server (`rewards.serving.server`) and its client (`rewards.remote.RemoteVerifier`).

Servers run on loopback: uvicorn on a thread of the test process (`BackgroundServer`), and once
as the one-command script in a subprocess.
"""

from __future__ import annotations

import asyncio
import copy
import json
import pickle
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

import envs
from rewards import (
    RemoteVerifier,
    RewardServerError,
    Verdict,
    as_reward_func,
    build_verifiers,
    get_verifier,
)
from rewards.serving.http import BackgroundServer
from rewards.serving.server import ServerConfig, create_app
from tests.rewards.helpers import generated_gsm8k

REPO = Path(__file__).resolve().parents[2]


class SlowVerifier:
    """Sleeps before answering (a verifier stuck on one batch)."""

    name = "slow"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def verify(self, response: str, reference: str) -> Verdict:
        time.sleep(self.seconds)
        return Verdict(1.0, response, "slow but sure")


class BrokenVerifier:
    """A verifier with a bug: raises something other than ValueError."""

    name = "broken"

    def verify(self, response: str, reference: str) -> Verdict:
        raise KeyError("internal table missing")


class FailFirst:
    """ASGI wrapper: the first `count` requests to /verify get `status`; records arrival times."""

    def __init__(self, app, count: int, status: int = 503, retry_after: str | None = None):
        self.app, self.count, self.status, self.retry_after = app, count, status, retry_after
        self.arrivals: list[float] = []

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"] == "/verify":
            self.arrivals.append(time.monotonic())
            if len(self.arrivals) <= self.count:
                headers = [(b"content-type", b"application/json")]
                if self.retry_after is not None:
                    headers.append((b"retry-after", self.retry_after.encode()))
                body = json.dumps({"error": "injected failure"}).encode()
                await send(
                    {"type": "http.response.start", "status": self.status, "headers": headers}
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


class Hang:
    """ASGI wrapper: /verify never answers within the test (sleeps, then passes on)."""

    def __init__(self, app, seconds: float) -> None:
        self.app, self.seconds = app, seconds

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"] == "/verify":
            await asyncio.sleep(self.seconds)
        await self.app(scope, receive, send)


def _verifiers() -> dict:
    served = build_verifiers(["math", "gsm8k"])
    served.update({"slow": SlowVerifier(1.0), "broken": BrokenVerifier()})
    return served


@pytest.fixture(scope="module")
def server():
    config = ServerConfig(max_batch=64, max_text_chars=5000, max_body_bytes=200_000)
    config = ServerConfig(**{**config.__dict__, "request_timeout_s": 0.3})
    with BackgroundServer(create_app(_verifiers(), config)) as running:
        yield running


def _post(server, payload, **kwargs) -> httpx.Response:
    return httpx.post(server.url + "/verify", timeout=10, **kwargs, json=payload)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ------------------------------------------------------------------------ the server


def test_health_and_verifiers(server) -> None:
    health = httpx.get(server.url + "/health", timeout=5).json()
    assert health["status"] == "ok"
    assert health["verifiers"] == ["broken", "gsm8k", "math", "slow"]
    listing = httpx.get(server.url + "/verifiers", timeout=5).json()
    math = next(v for v in listing["verifiers"] if v["name"] == "math")
    assert math["class"] == "rewards.verifiers.MathVerifier" and not math["batched"]
    assert listing["limits"]["max_batch"] == 64


@pytest.mark.parametrize("name", ["math", "gsm8k"])
def test_batch_matches_the_local_verifier(server, name) -> None:
    rows = generated_gsm8k(40, seed=3)
    responses = [r["answer"] for r in rows]
    references = [r["answer"].rsplit("####", 1)[1].strip() for r in rows]
    references[::3] = [str(int(ref.replace(",", "")) + 1) for ref in references[::3]]
    responses += [
        "the answer is \\boxed{\\frac{1}{2}}",
        "\\boxed{x^2 + 2x + 1}",
        "",
        "\x00\ud800 \\boxed{3}",
        "I think 3 or 4",
    ]
    references += ["0.5", "(x+1)^2" if name == "math" else "1", "1", "3", "3"]
    local = get_verifier(name)
    expected = [local.verify(r, ref) for r, ref in zip(responses, references, strict=True)]
    remote = RemoteVerifier(server.url, verifier=name, batch_size=16)
    assert remote.verify_batch(responses, references) == expected
    assert remote.verify(responses[0], references[0]) == expected[0]
    assert {v.score for v in expected} == {0.0, 1.0}


@pytest.mark.parametrize(
    ("payload", "status", "words"),
    [
        (
            {"verifier": "math", "items": [{"respons": "1", "reference": "1"}]},
            422,
            "items.0.response",
        ),
        (
            {"verifier": "math", "items": [{"response": 1, "reference": "1"}]},
            422,
            "items.0.response",
        ),
        ({"items": []}, 422, "verifier: Field required"),
        ({"verifier": "math", "items": "x"}, 422, "items"),
        ({"verifier": "maths", "items": []}, 404, "served: ['broken', 'gsm8k', 'math'"),
        (
            {"verifier": "math", "items": [{"response": "1", "reference": "1"}] * 65},
            413,
            "max_batch=64",
        ),
        (
            {"verifier": "math", "items": [{"response": "1", "reference": "1" * 5001}]},
            413,
            "items.0.reference: 5001 characters",
        ),
        ({"verifier": "math", "items": [{"response": "1", "reference": " "}]}, 422, "reference"),
    ],
)
def test_malformed_requests_get_clear_4xx(server, payload, status, words) -> None:
    answer = _post(server, payload)
    assert answer.status_code == status, answer.text
    assert words in answer.json()["error"]


def test_invalid_json_and_any_content_type(server) -> None:
    answer = httpx.post(server.url + "/verify", content=b"{bad", timeout=5)
    assert answer.status_code == 422 and "body is not JSON" in answer.json()["error"]
    body = json.dumps({"verifier": "gsm8k", "items": [{"response": "#### 2", "reference": "2"}]})
    plain = httpx.post(
        server.url + "/verify", content=body, headers={"content-type": "text/plain"}, timeout=5
    )
    assert plain.status_code == 200 and plain.json()["verdicts"][0]["score"] == 1.0


def test_oversized_body_is_413_declared_or_streamed(server) -> None:
    items = [{"response": "x" * 4000, "reference": "1"}] * 60  # 240 kB > max_body_bytes
    answer = _post(server, {"verifier": "math", "items": items})
    assert answer.status_code == 413 and "max_body_bytes=200000" in answer.json()["error"]

    def chunks():
        for _ in range(30):
            yield b" " * 10_000  # no content-length: counted while it streams in

    streamed = httpx.post(server.url + "/verify", content=chunks(), timeout=5)
    assert streamed.status_code == 413


def test_server_time_bound_is_504(server) -> None:
    started = time.monotonic()
    answer = _post(server, {"verifier": "slow", "items": [{"response": "1", "reference": "1"}]})
    assert answer.status_code == 504 and "request_timeout_s=0.3" in answer.json()["error"]
    assert time.monotonic() - started < 0.9


def test_a_broken_verifier_is_500_and_the_client_says_why(server) -> None:
    answer = _post(server, {"verifier": "broken", "items": [{"response": "1", "reference": "1"}]})
    assert answer.status_code == 500 and "KeyError" in answer.json()["error"]
    remote = RemoteVerifier(server.url, verifier="broken", retries=1, backoff_s=0.01)
    with pytest.raises(RewardServerError, match=r"failed 2 attempts.*KeyError"):
        remote.verify("1", "1")


def test_overload_is_429() -> None:
    config = ServerConfig(workers=1, max_pending=1, request_timeout_s=5)
    app = create_app({"slow": SlowVerifier(0.5)}, config)
    with BackgroundServer(app) as running, ThreadPoolExecutor(2) as pool:
        item = {"verifier": "slow", "items": [{"response": "1", "reference": "1"}]}
        first = pool.submit(_post, running, item)
        time.sleep(0.2)
        second = _post(running, item)
        assert first.result().status_code == 200
    assert second.status_code == 429 and second.headers["retry-after"] == "1"


# ------------------------------------------------------------------------ the client


def test_client_rejections_are_not_retried(server) -> None:
    remote = RemoteVerifier(server.url, verifier="maths", retries=5, backoff_s=1.0)
    started = time.monotonic()
    with pytest.raises(RewardServerError, match=r"HTTP 404.*not served") as info:
        remote.verify("1", "1")
    assert time.monotonic() - started < 1.0
    assert info.value.status == 404 and info.value.url == server.url
    # A rejected request is a bad input, like a bad reference given to a local verifier.
    assert isinstance(info.value, ValueError)
    with pytest.raises(ValueError, match="HTTP 413"):
        RemoteVerifier(server.url, verifier="math", retries=0).verify("1", "1" * 200_001)


def test_client_local_checks_match_local_verifiers(server) -> None:
    remote = RemoteVerifier(server.url, verifier="math")
    assert remote.verify(None, "1") == get_verifier("math").verify(None, "1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="reference 0"):
        remote.verify("1", "")
    with pytest.raises(ValueError, match="1 responses but 2 references"):
        remote.verify_batch(["1"], ["1", "2"])
    huge = "x" * 300_000 + " so \\boxed{7}"  # over the server's limit: clipped, tail kept
    assert RemoteVerifier(server.url, "math", max_response_chars=4000).verify(huge, "7").score == 1


@pytest.mark.parametrize(("status", "retry_after"), [(503, None), (429, "0.2"), (502, None)])
def test_client_retries_through_failures_with_backoff(status, retry_after) -> None:
    flaky = FailFirst(create_app(build_verifiers(["gsm8k"])), 3, status, retry_after)
    with BackgroundServer(flaky) as running:
        remote = RemoteVerifier(running.url, "gsm8k", retries=3, backoff_s=0.05)
        assert remote.verify("#### 5", "5").score == 1.0
    assert len(flaky.arrivals) == 4
    gaps = [b - a for a, b in zip(flaky.arrivals, flaky.arrivals[1:], strict=False)]
    for attempt, gap in enumerate(gaps):
        floor = 0.05 * 2**attempt / 2  # equal jitter: at least half the exponential delay
        assert gap >= max(floor, 0.2 if retry_after else 0), gaps
    if not retry_after:
        assert gaps[2] > gaps[0], gaps


def test_client_gives_up_after_the_retries() -> None:
    flaky = FailFirst(create_app(build_verifiers(["gsm8k"])), 100)
    with BackgroundServer(flaky) as running:
        remote = RemoteVerifier(running.url, "gsm8k", retries=2, backoff_s=0.01)
        with pytest.raises(RewardServerError, match=r"failed 3 attempts.*HTTP 503: injected"):
            remote.verify("#### 5", "5")
    assert len(flaky.arrivals) == 3


def test_server_gone_raises_within_bounded_time() -> None:
    url = f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    remote = RemoteVerifier(url, "math", timeout_s=1.0, retries=2, backoff_s=0.05)
    started = time.monotonic()
    with pytest.raises(RewardServerError) as info:
        remote.verify("\\boxed{1}", "1")
    assert time.monotonic() - started < 3.0
    message = str(info.value)
    assert url in message and "ConnectError" in message and "3 attempts" in message


def test_hanging_server_hits_the_client_timeout() -> None:
    with BackgroundServer(Hang(create_app(build_verifiers(["math"])), 5.0)) as running:
        remote = RemoteVerifier(running.url, "math", timeout_s=0.3, retries=1, backoff_s=0.05)
        started = time.monotonic()
        with pytest.raises(RewardServerError, match=r"timed out after 0.3 s"):
            remote.verify("\\boxed{1}", "1")
        assert time.monotonic() - started < 2.0


def test_client_is_thread_safe(server) -> None:
    remote = RemoteVerifier(server.url, "gsm8k")
    jobs = [(f"#### {i}", str(i if i % 2 else i + 1)) for i in range(64)]
    with ThreadPoolExecutor(8) as pool:
        scores = list(pool.map(lambda job: remote.verify(*job).score, jobs))
    assert scores == [float(i % 2) for i in range(64)]


def test_client_pickles_and_copies(server) -> None:
    remote = RemoteVerifier(server.url, "gsm8k", retries=1)
    for clone in (pickle.loads(pickle.dumps(remote)), copy.deepcopy(remote)):
        assert clone.retries == 1 and clone.verify("#### 2", "2").score == 1.0


# ------------------------------------------------------------------------ naming and wiring


def test_remote_names_in_the_registry(server) -> None:
    named = get_verifier(f"remote:{server.url}/gsm8k?timeout_s=5&retries=1")
    assert isinstance(named, RemoteVerifier)
    assert (named.url, named.verifier, named.timeout_s, named.retries) == (
        server.url,
        "gsm8k",
        5.0,
        1,
    )
    keyword = get_verifier("remote", url=server.url, verifier="math")
    assert keyword.verify("\\boxed{2}", "2").score == 1.0
    with pytest.raises(ValueError, match="remote:http://HOST:PORT/NAME"):
        get_verifier("remote:127.0.0.1:8000")
    with pytest.raises(ValueError, match="unknown option 'tries'"):
        get_verifier(f"remote:{server.url}/math?tries=2")


def test_trl_reward_function_through_the_server(server) -> None:
    remote = as_reward_func(f"remote:{server.url}/math")
    local = as_reward_func("math")
    assert remote.__name__ == "math_reward"
    completions = ["\\boxed{18}", [{"role": "assistant", "content": "\\boxed{7}"}], "x", 3]
    answers = ["18", "18", None, "3"]
    assert remote(completions, answer=answers) == local(completions, answer=answers)
    assert remote(completions, answer=answers) == [1.0, 0.0, None, 0.0]


def test_env_scores_through_the_server(server) -> None:
    env = envs.make("math/solve-v0", verifier=f"remote:{server.url}/math")
    assert isinstance(env.unwrapped.verifier, RemoteVerifier)
    env.reset(seed=0)
    problem = env.unwrapped.problem
    env.step(f"The answer is \\boxed{{{problem['answer']}}}.")
    assert env.rewards["solver_0"] == 1.0 and env.infos["solver_0"]["correct"] is True
    clone = copy.deepcopy(env)  # envs deep-copy and pickle with their verifier
    clone.reset(seed=1)
    clone.step("\\boxed{-12345}")
    assert clone.rewards["solver_0"] == 0.0


def test_env_with_a_dead_server_raises_not_a_default_reward() -> None:
    env = envs.make(
        "math/solve-v0", verifier=f"remote:http://127.0.0.1:{_free_port()}/math?retries=0"
    )
    env.reset(seed=0)
    with pytest.raises(RewardServerError):
        env.step("\\boxed{1}")


def test_serve_script_one_command() -> None:
    """The script's smoke test (its one command run in the default run, see test_scripts.py):
    the server starts, serves, and stops on SIGTERM."""
    port = _free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "scripts/serve_rewards.py",
            "--verifier",
            "math",
            "--verifier",
            "numbers=gsm8k",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                served = httpx.get(url + "/health", timeout=1).json()["verifiers"]
                break
            except httpx.TransportError:
                assert process.poll() is None, process.communicate()[0]
                assert time.monotonic() < deadline, "server did not start in 30 s"
                time.sleep(0.2)
        assert served == ["math", "numbers"]
        assert RemoteVerifier(url, "numbers").verify("#### 1,000", "1000").score == 1.0
    finally:
        process.terminate()
        output = process.communicate(timeout=10)[0]
    assert f"remote:{url}/numbers" in output


def test_serve_script_help_and_errors(run_script) -> None:
    shown = run_script("serve_rewards.py", "--help")
    assert shown.returncode == 0 and "--verifier-kwargs" in shown.stdout
    bad = run_script("serve_rewards.py", "--verifier", "maths")
    assert bad.returncode == 2 and "Did you mean 'math'" in bad.stderr
    orphan = run_script("serve_rewards.py", "--verifier-kwargs", "{}")
    assert orphan.returncode == 2 and "must follow the --verifier" in orphan.stderr


def test_server_threads_leave_with_it() -> None:
    before = threading.active_count()
    with BackgroundServer(create_app(build_verifiers(["exact"]))) as running:
        assert RemoteVerifier(running.url, "exact").verify("\\boxed{a}", "a").score == 1.0
    time.sleep(0.2)
    assert threading.active_count() <= before + 1  # the shared client pool may keep one
