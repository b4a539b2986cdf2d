"""Registered envs served over HTTP and WebSocket, and the PettingZoo client that plays them.

- `envs.serving.server`: the FastAPI env server (``python scripts/serve_envs.py``); many
  sessions at once, and a stock OpenEnv client plays a server that serves one env.
- `envs.serving.sessions`: the session store both transports drive.
- `envs.serving.limits`: what a server serves and its limits (`EnvServerConfig`), and the check
  of a client's kwargs against them.
- `envs.serving.bodies`: the request bodies both transports read, and `ApiError`, every refusal.
- `envs.serving.openenv`: OpenEnv's own routes and WebSocket messages over the same store.
- `envs.serving.client`: `remote` (``remote(url, env_id, **kwargs)``), a `RemoteAECEnv` or
  `RemoteParallelEnv` whose every call goes to the server.
- `envs.serving.connections`: the client's connection to the server, over HTTP or WebSocket, and
  the errors it raises.
- `envs.serving.protocol`: the wire format they share (`jsonable`, space descriptions).

``import envs`` does not import this package: `envs.remote` and the other client names are
loaded on first use. The HTTP pieces shared with the reward server come from
`rewards.serving.http`.
"""

from __future__ import annotations

from envs.serving.client import (
    EnvRequestError,
    EnvServerError,
    RemoteAECEnv,
    RemoteParallelEnv,
    remote,
)

__all__ = ["EnvRequestError", "EnvServerError", "RemoteAECEnv", "RemoteParallelEnv", "remote"]
