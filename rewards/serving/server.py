"""A reward server: any verifier, rule-based or learned, served over HTTP in batches.

One command starts it (``python scripts/serve_rewards.py --verifier math --port 8000``); in
Python, `create_app` builds the FastAPI app and `serve` runs it with uvicorn.

| route | what |
|---|---|
| ``POST /verify`` | ``{"verifier": NAME, "items": [{"response", "reference"}, ...]}`` -> ``{"verdicts": [{"score", "extracted", "reason"}, ...]}`` |
| ``GET /health`` | ``{"status": "ok", "verifiers": [...]}`` |
| ``GET /verifiers`` | the served verifiers and the server's limits |

A batch runs in one call: a verifier with its own ``verify_batch(responses, references)`` (a
learned verifier: one forward pass) gets the whole batch; any other goes through
`rewards.batch.verify_batch` (serial for fast batches, a process pool for slow ones).

Limits, each answered with a message naming the field: a malformed body gets 422, a body over
``max_body_bytes``, a batch over ``max_batch`` items or a text over ``max_text_chars`` characters
gets 413, an unknown verifier 404, a bad reference 422, more than ``max_pending`` batches in flight
429 (with ``Retry-After``), and a batch still running after ``request_timeout_s`` 504. A verifier
that raises anything else gives 500 with the error. `RemoteVerifier` retries 429 and 5xx.

FastAPI and uvicorn are imported inside the functions (``pip install -e ".[server]"``), so
``import rewards`` stays light. This module has no ``from __future__ import annotations``:
FastAPI reads the request models' annotations at run time.
"""

import asyncio
import contextlib
import functools
import json
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

from rewards.base import Verdict, Verifier
from rewards.batch import verify_batch
from rewards.serving.http import BodyLimit, field_name, json_response_class

__all__ = ["ServerConfig", "create_app", "serve"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerConfig:
    """Limits and workers of a reward server.

    Args:
        max_batch: items per request.
        max_text_chars: characters per response or reference.
        max_body_bytes: bytes per request body (checked while it streams in).
        request_timeout_s: seconds a batch may take, queueing included, before a 504.
        workers: threads running batches at once.
        max_pending: batches queued or running before new ones get 429.
        batch_workers: processes `rewards.batch.verify_batch` may use for one slow batch of a
            rule verifier (None: every CPU; 1: always serial).
    """

    max_batch: int = 1024
    max_text_chars: int = 100_000
    max_body_bytes: int = 64 * 1024 * 1024
    request_timeout_s: float = 60.0
    workers: int = 4
    max_pending: int = 64
    batch_workers: int | None = None

    def __post_init__(self) -> None:
        for key, value in asdict(self).items():
            if key == "batch_workers" and value is None:
                continue
            if not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"ServerConfig.{key} must be a positive number, got {value!r}")


def _run_batch(
    verifier: Verifier, responses: list[str], references: list[str], config: ServerConfig
) -> list[Verdict]:
    own = getattr(verifier, "verify_batch", None)
    if callable(own):
        verdicts = list(own(responses, references))
    else:
        verdicts = verify_batch(verifier, responses, references, num_workers=config.batch_workers)
    if len(verdicts) != len(responses) or not all(isinstance(v, Verdict) for v in verdicts):
        raise TypeError(
            f"verifier {verifier.name!r} returned {len(verdicts)} results for {len(responses)} "
            "items; expected one Verdict each"
        )
    return verdicts


class _Refused(Exception):  # noqa: N818 - a refusal the routes answer, not an error of theirs
    """A request the server answers with an error status and message (plus extra JSON fields)."""

    def __init__(
        self, status: int, message: str, headers: dict | None = None, **extra: Any
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.headers, self.extra = status, message, headers, extra


def _invalid(errors: Sequence[Any]) -> _Refused:
    """A 422 naming each invalid field (pydantic's errors, without the offending input)."""
    problems = [f"{field_name(e.get('loc', ()))}: {e.get('msg', 'invalid')}" for e in errors]
    # The offending input is left out: echoing a 60 MB body back helps nobody.
    detail = [{k: e[k] for k in ("type", "loc", "msg") if k in e} for e in errors]
    return _Refused(422, "invalid request: " + "; ".join(problems[:10]), detail=detail)


@functools.cache
def _request_models() -> tuple[Any, Any]:
    """The pydantic models of a ``/verify`` body: (its items' model, the request's)."""
    from pydantic import BaseModel, ConfigDict

    class Item(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)
        response: str
        reference: str

    class VerifyRequest(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)
        verifier: str
        items: list[Item]

    return Item, VerifyRequest


def _parse_request(body: bytes) -> Any:
    """The ``/verify`` request in `body`, or a 422 naming what is wrong.

    Parsed here rather than by FastAPI so that any content type carrying JSON is read and every
    error, invalid JSON included, comes back in the same shape. Python's json (not pydantic's
    parser) reads lone surrogate escapes, which model output may hold and clients send escaped.
    """
    from pydantic import ValidationError

    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise _Refused(422, f"invalid request: body is not JSON: {exc}") from None
    try:
        return _request_models()[1].model_validate(data)
    except ValidationError as exc:
        raise _invalid(exc.errors(include_url=False, include_input=False)) from None


def _check_size(request: Any, config: ServerConfig) -> None:
    """A 413 for a batch over ``max_batch`` items or a text over ``max_text_chars``."""
    if len(request.items) > config.max_batch:
        raise _Refused(
            413,
            f"items: batch of {len(request.items)} exceeds max_batch={config.max_batch}; split it",
        )
    for index, item in enumerate(request.items):
        for key in ("response", "reference"):
            size = len(getattr(item, key))
            if size > config.max_text_chars:
                raise _Refused(
                    413,
                    f"items.{index}.{key}: {size} characters exceed "
                    f"max_text_chars={config.max_text_chars}",
                )


class _Batches:
    """Runs batches on the server's worker threads: at most ``max_pending`` in flight (429
    beyond), each within ``request_timeout_s`` (504), a verifier's failure an error status."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.executor = ThreadPoolExecutor(
            max_workers=config.workers, thread_name_prefix="reward-batch"
        )
        self.pending = 0
        self.lock = threading.Lock()

    async def run(
        self, name: str, verifier: Verifier, responses: list[str], references: list[str]
    ) -> list[Verdict]:
        config = self.config
        with self.lock:
            if self.pending >= config.max_pending:
                raise _Refused(
                    429, f"{self.pending} batches in flight; try again", {"Retry-After": "1"}
                )
            self.pending += 1
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(
            self.executor, _run_batch, verifier, responses, references, config
        )
        try:
            return await asyncio.wait_for(future, timeout=config.request_timeout_s)
        except asyncio.TimeoutError:
            raise _Refused(
                504,
                f"verifier {name!r}: {len(responses)} items took longer than "
                f"request_timeout_s={config.request_timeout_s:g}",
            ) from None
        except ValueError as exc:  # the Verifier contract: a bad reference is a ValueError
            raise _Refused(422, f"verifier {name!r} rejected a reference: {exc}") from None
        except Exception as exc:  # any other failure of the verifier is the server's: a 500
            logger.exception("verifier %r failed on a batch", name)
            raise _Refused(500, f"verifier {name!r} failed: {type(exc).__name__}: {exc}") from None
        finally:
            with self.lock:
                self.pending -= 1


async def _verify(
    body: bytes, served: Mapping[str, Verifier], config: ServerConfig, batches: _Batches
) -> dict[str, Any]:
    """The answer of ``POST /verify`` to `body`: its batch's verdicts, or a `_Refused`."""
    request = _parse_request(body)
    verifier = served.get(request.verifier)
    if verifier is None:
        raise _Refused(
            404, f"verifier {request.verifier!r} is not served here; served: {sorted(served)}"
        )
    _check_size(request, config)
    responses = [item.response for item in request.items]
    references = [item.reference for item in request.items]
    clock = time.perf_counter()
    verdicts = await batches.run(request.verifier, verifier, responses, references)
    return {
        "verifier": request.verifier,
        "verdicts": [
            {"score": v.score, "extracted": v.extracted, "reason": v.reason} for v in verdicts
        ],
        "elapsed_s": time.perf_counter() - clock,
    }


def _add_info_routes(app: Any, served: Mapping[str, Verifier], config: ServerConfig) -> None:
    """``GET /health`` and ``GET /verifiers``."""
    started = time.time()

    @app.get("/health")
    async def health() -> Any:
        return {"status": "ok", "verifiers": sorted(served), "uptime_s": time.time() - started}

    @app.get("/verifiers")
    async def list_served() -> Any:
        entries = [
            {
                "name": key,
                "class": f"{type(v).__module__}.{type(v).__qualname__}",
                "batched": callable(getattr(v, "verify_batch", None)),
            }
            for key, v in sorted(served.items())
        ]
        return {"verifiers": entries, "limits": asdict(config)}


def create_app(verifiers: Mapping[str, Verifier], config: ServerConfig | None = None) -> Any:
    """The FastAPI app serving `verifiers` (see the module docstring for the routes).

    Args:
        verifiers: name -> verifier, e.g. from `rewards.build_verifiers`.
        config: limits and workers (defaults: `ServerConfig()`).

    Returns:
        An ASGI app (FastAPI wrapped in the body-size limit).
    """
    from fastapi import FastAPI, Request
    from fastapi.encoders import jsonable_encoder
    from fastapi.exceptions import RequestValidationError

    config = config or ServerConfig()
    served = dict(verifiers)
    for key, verifier in served.items():
        if not isinstance(verifier, Verifier):
            raise TypeError(f"served verifier {key!r} has no name and verify(): {verifier!r}")
    respond = json_response_class()
    batches = _Batches(config)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> Any:
        yield
        batches.executor.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(
        title="mathteams reward server", default_response_class=respond, lifespan=lifespan
    )
    app.state.verifiers, app.state.config = served, config

    def refusal(refused: _Refused) -> Any:
        body = {"error": refused.message, **refused.extra}
        return respond(body, status_code=refused.status, headers=refused.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> Any:
        return refusal(_invalid(jsonable_encoder(exc.errors(), custom_encoder={bytes: repr})))

    _add_info_routes(app, served, config)
    schema = {
        "requestBody": {
            "content": {"application/json": {"schema": _request_models()[1].model_json_schema()}},
            "required": True,
        }
    }

    @app.post("/verify", openapi_extra=schema)
    async def verify(raw: Request) -> Any:
        try:
            return await _verify(await raw.body(), served, config, batches)
        except _Refused as refused:
            return refusal(refused)

    return BodyLimit(app, config.max_body_bytes)


def serve(
    verifiers: Mapping[str, Verifier],
    host: str = "127.0.0.1",
    port: int = 8000,
    config: ServerConfig | None = None,
    log_level: str = "info",
) -> None:
    """Run the reward server with uvicorn until interrupted."""
    import uvicorn

    uvicorn.run(create_app(verifiers, config), host=host, port=port, log_level=log_level)
