"""Serve registered envs over HTTP and WebSocket: the env server (`envs.serving.server`).

    python scripts/serve_envs.py --port 8001
    python scripts/serve_envs.py --port 8001 --max-sessions 256 --idle-timeout 300
    python scripts/serve_envs.py --env math/reflection-v0 --env math/debate-v0
    python scripts/serve_envs.py --env math/solve-v0 \\
        --env-kwargs '{"task": "gsm8k", "data_path": "../shared/data/gsm8k/test.jsonl"}'

Every registered env is served unless `--env` (repeatable) names some; `--env-kwargs` (JSON) sets
keyword arguments of the `--env` before it for every session, including those clients may not
set (`--blocked-kwargs`: file paths, the sandbox). Clients: ``envs.remote(URL, ENV_ID,
**kwargs)``, a PettingZoo env (``transport="ws"`` for the WebSocket); with one `--env`, also a
stock OpenEnv client (``GenericEnvClient(base_url=URL)``; the mapping is `envs.serving.openenv`).
"""

from __future__ import annotations

import argparse

from envs.serving.server import EnvServerConfig, serve
from rewards.serving.http import add_served_items


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_served_items(
        parser,
        "env",
        "envs",
        "ENV_ID",
        "env id to serve (repeatable; default: every registered env)",
        'keyword arguments of the --env before it, e.g. \'{"task": "unknown"}\'',
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    defaults = EnvServerConfig()
    parser.add_argument("--max-sessions", type=int, default=defaults.max_sessions)
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=defaults.idle_timeout_s,
        help="seconds without a request before a session is closed",
    )
    parser.add_argument(
        "--step-timeout",
        type=float,
        default=defaults.step_timeout_s,
        help="seconds a reset or step may take before it is answered 504 and its session closed",
    )
    parser.add_argument("--max-body-bytes", type=int, default=defaults.max_body_bytes)
    parser.add_argument("--workers", type=int, default=defaults.workers, help="env threads")
    parser.add_argument("--max-agents", type=int, default=defaults.max_agents)
    parser.add_argument(
        "--blocked-kwargs",
        nargs="*",
        default=list(defaults.blocked_kwargs),
        metavar="NAME",
        help="keyword arguments clients may not set (default: %(default)s)",
    )
    parser.add_argument("--log-level", default="info")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = make_parser()
    args = parser.parse_args(argv)
    entries = args.envs or []
    try:
        config = EnvServerConfig(
            envs=tuple(env_id for env_id, _ in entries) if entries else None,
            env_kwargs={env_id: kwargs for env_id, kwargs in entries if kwargs},
            max_sessions=args.max_sessions,
            idle_timeout_s=args.idle_timeout,
            step_timeout_s=args.step_timeout,
            max_body_bytes=args.max_body_bytes,
            workers=args.workers,
            max_agents=args.max_agents,
            blocked_kwargs=tuple(args.blocked_kwargs),
        )
    except (ValueError, TypeError) as exc:
        parser.error(str(exc))
    url = f"http://{args.host}:{args.port}"
    served = config.envs if config.envs is not None else "every registered env"
    print(f"serving {served} at {url} (client: envs.remote({url!r}, ENV_ID))", flush=True)
    serve(args.host, args.port, config, args.log_level)


if __name__ == "__main__":
    main()
