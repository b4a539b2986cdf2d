"""OpenEnv's wire protocol over the env server's sessions, for a server that serves one env.

A stock OpenEnv client (``openenv-core``'s ``GenericEnvClient``, or any ``EnvClient``) plays a
server started with one env (``python scripts/serve_envs.py --env math/solve-v0``), with no
project code on its side. OpenEnv's protocol has one observation, one reward and one ``done``
per step; a PettingZoo env has one of each per agent, and an AEC env one acting agent per step.
The mapping:

| OpenEnv | here |
|---|---|
| action (a step's ``data``, or ``/step``'s ``"action"``) | AEC: ``{"text": str, "agent": str?}``, the acting agent's reply (``agent``, if given, must be whose turn it is: 409 otherwise); Parallel: ``{"actions": {agent: str}}``. An OpenEnv ``metadata`` field is accepted and ignored. |
| ``observation`` | ``agent`` (the agent to act next; null once the episode is over, and for Parallel envs), ``observation`` (that agent's observation, a dict of text fields; null with it), and every field of the session's state (`envs.serving.server`'s docstring), whose ``rewards`` are those of this step for every agent |
| ``reward`` | AEC: the reward this step gave the agent that acted (a critic scored when the refiner acts is in ``observation.rewards``); Parallel, and after a reset: null |
| ``done`` | the episode is over: no agent is left to act |
| state (``{"type": "state"}``, ``GET /state``) | the session's state: ``episode_id``, ``step_count`` and the rest |

PettingZoo's dead steps (``step(None)`` for an agent already terminated or truncated) are taken
by the server after each step, so the agent named in an observation always acts with text and
``done`` comes with the step that ended the episode; they do not count in ``step_count``.

WebSocket ``/ws``: a connection whose first message is ``reset``, ``step`` or ``state`` (not
``create`` or ``attach``) opens a session of the served env with the operator's kwargs and speaks
OpenEnv from then on: ``{"type": "observation", "data": {"observation", "reward", "done"}}`` for
a reset or a step, ``{"type": "state", "data": <the state>}``, errors as ``{"type": "error",
"data": {"message", "code", ...}}``; the session closes with the connection (or ``close``). On a
server serving several envs such a connection gets the ``NO_SESSION`` error: send ``create``.

HTTP, stateless as in OpenEnv (each request makes a fresh env and closes it): ``POST /reset``
``{"seed"?, "options"?, "episode_id"?}`` and ``POST /step`` ``{"action": {...}, "seed"?,
"timeout_s"?, "request_id"?}`` (a fresh env reset with ``seed``, then the action;
``timeout_s`` and ``request_id`` are accepted and ignored: envs bound their own work) answer
``{"observation", "reward", "done"}``; ``GET /state`` the state of a fresh env; ``GET
/metadata`` the env's name and description; ``GET /schema`` JSON schemas of the action,
observation and state. On a server serving several envs they answer 409 ``ONE_ENV_ONLY``.
"""

import functools
import importlib
from collections.abc import Callable, Mapping
from typing import Any

from envs.registry import spec
from envs.serving.sessions import ApiError, Session, SessionStore, validate

__all__ = [
    "OPENING_KINDS",
    "action_model",
    "add_routes",
    "open_session",
    "parse_action",
    "play",
    "reset",
    "result",
    "the_env",
]

OPENING_KINDS = ("reset", "step", "state")  # the first messages that make a connection OpenEnv's


@functools.cache
def action_model() -> Any:
    """The pydantic model of an OpenEnv action here (strict: unknown fields are refused)."""
    from pydantic import BaseModel, ConfigDict, Field

    class OpenEnvAction(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)
        text: str | None = None
        agent: str | None = None
        actions: dict[str, str] | None = None
        metadata: dict[str, Any] = Field(default_factory=dict)

    return OpenEnvAction


def _request_models() -> dict[str, Any]:
    from pydantic import BaseModel, ConfigDict, Field

    action_cls = action_model()

    class OpenEnvStepRequest(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)
        action: action_cls  # type: ignore[valid-type]
        seed: int | None = None
        timeout_s: float | None = Field(default=None, gt=0)
        request_id: str | None = Field(default=None, max_length=255)

    class OpenEnvResetRequest(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)
        seed: int | None = None
        options: dict[str, Any] | None = None
        episode_id: str | None = Field(default=None, max_length=255)

    return {"step": OpenEnvStepRequest, "reset": OpenEnvResetRequest}


def the_env(store: SessionStore) -> str:
    """The one env `store` serves; ApiError 409 when it serves several."""
    served = store.served()
    if len(served) != 1:
        raise ApiError(
            409,
            "env_id",
            "ONE_ENV_ONLY",
            f"OpenEnv's protocol needs a server serving one env (serve_envs.py --env ENV_ID); "
            f"this one serves {len(served)}: use /sessions, or a WebSocket opened with create",
        )
    return served[0]


async def open_session(store: SessionStore, owner: str) -> Session:
    """A session of the one served env with the operator's kwargs (an OpenEnv connection's)."""
    return await store.create(the_env(store), {}, owner=owner)


def _body(session: Session, action: Any) -> dict[str, Any]:
    """An OpenEnv action as the store's step body; ApiError 422 for the wrong kind."""
    if session.parallel:
        if action.actions is None or action.text is not None:
            raise ApiError(
                422, "action.actions", "VALIDATION_ERROR", "a Parallel env takes {'actions': {...}}"
            )
        return {"actions": action.actions}
    if action.actions is not None:
        raise ApiError(
            422, "action.text", "VALIDATION_ERROR", "an AEC env takes {'text': str, 'agent'?}"
        )
    return {"action": action.text, "agent": action.agent}


def _finish_dead(session: Session) -> None:
    """PettingZoo's dead steps: ``step(None)`` while the selected agent is already done."""
    raw = session.raw
    while raw.agents and (
        raw.terminations.get(raw.agent_selection) or raw.truncations.get(raw.agent_selection)
    ):
        session.env.step(None)


def result(state: Mapping[str, Any], reward: float | None, rewards: Any = None) -> dict[str, Any]:
    """A session state as OpenEnv's ``{"observation", "reward", "done"}`` (table above)."""
    agents = state["agents"]
    agent = state["agent_selection"] if agents and state["api"] == "aec" else None
    observation = {
        "agent": agent,
        "observation": state["observations"].get(agent) if agent is not None else None,
        **state,
    }
    if rewards is not None:
        observation["rewards"] = rewards
    return {"observation": observation, "reward": reward, "done": bool(state["done"])}


def _play(store: SessionStore, session: Session, body: dict[str, Any]) -> dict[str, Any]:
    """One OpenEnv step on a worker thread, the session's lock held (see `play`)."""
    actor = None if session.parallel else session.raw.agent_selection
    stepped = store.apply_step(session, body)
    rewards = stepped["rewards"]
    reward = None if actor is None else rewards.get(actor)
    if not session.parallel:
        _finish_dead(session)
    return result(store.snapshot(session), reward, rewards)


async def play(store: SessionStore, session: Session, action: Any) -> dict[str, Any]:
    """Step `session` with an OpenEnv action (an `action_model` instance); OpenEnv's result."""
    body = _body(session, action)
    return await store.locked(session, lambda s: _play(store, s, body))


async def reset(store: SessionStore, session: Session, parsed: Any) -> dict[str, Any]:
    """Reset `session`; OpenEnv's result (no reward yet)."""
    state = await store.reset(session, parsed.seed, parsed.options, parsed.episode_id)
    return result(state, None)


async def _one_shot(store: SessionStore, work: Callable[[Session], Any]) -> Any:
    """`work` on a fresh session of the served env, closed afterwards (OpenEnv's stateless HTTP)."""
    session = await open_session(store, owner="http")
    try:
        return await work(session)
    finally:
        async with session.lock:
            await store.close(session, "closed: a stateless OpenEnv request ended")


def _metadata(env_id: str) -> dict[str, Any]:
    module = importlib.import_module(spec(env_id).entry_point.partition(":")[0])
    lines = (module.__doc__ or env_id).strip().splitlines()
    return {
        "name": env_id,
        "description": lines[0] if lines else env_id,
        "readme_content": None,
        "version": None,
        "author": None,
        "documentation_url": None,
    }


def _schema() -> dict[str, Any]:
    observation = {
        "type": "object",
        "properties": {
            "agent": {"type": ["string", "null"], "description": "the agent to act next"},
            "observation": {
                "type": ["object", "null"],
                "description": "that agent's observation (text fields)",
            },
            "rewards": {"type": "object", "description": "this step's reward of every agent"},
        },
        "additionalProperties": True,
    }
    state = {
        "type": "object",
        "properties": {
            "episode_id": {"type": ["string", "null"]},
            "step_count": {"type": "integer", "minimum": 0},
        },
        "additionalProperties": True,
    }
    action = action_model().model_json_schema()
    return {"action": action, "observation": observation, "state": state}


def add_routes(app: Any, store: SessionStore, body: Callable[..., Any], respond: Any) -> None:
    """OpenEnv's root routes on `app`: ``/reset``, ``/step``, ``/state``, ``/metadata``,
    ``/schema``. `body(request, model)` reads a request body; `respond` is the response class."""
    from fastapi import Request

    models = _request_models()

    @app.post("/reset")
    async def openenv_reset(request: Request) -> Any:
        parsed = await body(request, models["reset"])
        return respond(await _one_shot(store, lambda s: reset(store, s, parsed)))

    @app.post("/step")
    async def openenv_step(request: Request) -> Any:
        parsed = await body(request, models["step"])

        async def work(session: Session) -> Any:
            await store.reset(session, parsed.seed, None, None)
            return await play(store, session, parsed.action)

        return respond(await _one_shot(store, work))

    @app.get("/state")
    async def openenv_state() -> Any:
        return respond(await _one_shot(store, store.state))

    @app.get("/metadata")
    async def openenv_metadata() -> Any:
        return respond(_metadata(the_env(store)))

    @app.get("/schema")
    async def openenv_schema() -> Any:
        return respond(_schema())


def parse_action(data: Any) -> Any:
    """A WebSocket step's ``data`` as an OpenEnv action; ApiError 422 naming the field."""
    return validate(data, action_model())
