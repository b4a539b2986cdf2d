"""How both transports of the env server read a request, and `ApiError`, every refusal.

`ApiError` carries an HTTP status, the field at fault and a stable code; `envs.serving.server`
answers it over HTTP or WebSocket. `request_models`, `parse_json` and `validate` read request
bodies the same way for every transport (strict: unknown fields are refused, naming them).
"""

import json
from collections.abc import Mapping, Sequence
from typing import Any

from rewards.serving.http import field_name

__all__ = ["ApiError", "parse_json", "request_models", "validate", "validation_error"]


class ApiError(Exception):
    """A request the server refuses: an HTTP status, the field at fault and a message.

    Attributes:
        status: the HTTP status (WebSocket errors carry it too).
        field: the request field at fault (``env_id``, ``kwargs.rounds``, ``action``, ...).
        code: a stable machine-readable name (``UNKNOWN_ENV``, ``NOT_YOUR_TURN``, ...).
    """

    def __init__(
        self,
        status: int,
        field: str,
        code: str,
        message: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(f"{field}: {message}")
        self.status, self.field, self.code = status, field, code
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        return {"error": str(self), "field": self.field, "code": self.code}


def validation_error(errors: Sequence[Mapping[str, Any]]) -> ApiError:
    """A pydantic error list as one 422 naming the first field at fault."""
    problems = [f"{field_name(e.get('loc', ()))}: {e.get('msg', 'invalid')}" for e in errors]
    first = field_name(errors[0].get("loc", ())) if errors else "body"
    rest = "; ".join(problems[1:10])
    message = errors[0].get("msg", "invalid") if errors else "invalid"
    return ApiError(422, first, "VALIDATION_ERROR", message + (f" (also {rest})" if rest else ""))


def request_models() -> dict[str, Any]:
    from pydantic import BaseModel, ConfigDict, Field

    strict = ConfigDict(extra="forbid", strict=True)

    class CreateRequest(BaseModel):
        model_config = strict
        env_id: str
        kwargs: dict[str, Any] = Field(default_factory=dict)

    class AttachRequest(BaseModel):
        model_config = strict
        session_id: str

    class ResetRequest(BaseModel):
        model_config = strict
        seed: int | None = None
        options: dict[str, Any] | None = None
        episode_id: str | None = Field(default=None, max_length=255)

    class AECStepRequest(BaseModel):
        model_config = strict
        action: str | None
        agent: str | None = None

    class ParallelStepRequest(BaseModel):
        model_config = strict
        actions: dict[str, str]

    return {
        "create": CreateRequest,
        "attach": AttachRequest,
        "reset": ResetRequest,
        "aec_step": AECStepRequest,
        "parallel_step": ParallelStepRequest,
    }


def parse_json(text: str | bytes) -> Any:
    """JSON text as data (Python's parser: it reads the lone surrogate escapes of model output);
    ApiError 422 for anything else, absurd nesting included."""
    try:
        return json.loads(text) if text else {}
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise ApiError(422, "body", "INVALID_JSON", f"not JSON: {exc}") from exc


def validate(data: Any, model: Any) -> Any:
    """`data` validated by `model`; ApiError 422 naming the first field at fault otherwise."""
    from pydantic import ValidationError

    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc.errors(include_url=False, include_input=False)) from exc
