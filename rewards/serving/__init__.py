"""Verifiers served over HTTP: the reward server and the HTTP pieces it shares with the env server.

- `rewards.serving.server`: the FastAPI reward server (``python scripts/serve_rewards.py``).
- `rewards.serving.http`: what the reward server and the env server (`envs.serving.server`)
  share: the body-size limit, ASCII JSON responses, error field names, the scripts' options and
  `BackgroundServer`.

The client, `rewards.remote.RemoteVerifier`, is a verifier like any other and sits beside them
in `rewards`: the registry builds it (``get_verifier("remote:http://HOST:PORT/NAME")``), and the
server needs the registry (through `rewards.batch`), so a client inside this package would make
`rewards.registry` and `rewards.serving` import each other.

Importing this package imports none of FastAPI, uvicorn or httpx; each module imports them where
it uses them.
"""
