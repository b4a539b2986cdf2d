"""Serve verifiers over HTTP: the reward server (`rewards.serving.server`).

    python scripts/serve_rewards.py --verifier math --host 127.0.0.1 --port 8000
    python scripts/serve_rewards.py --verifier math --verifier gsm8k --verifier exact
    python scripts/serve_rewards.py --verifier trainers.verifier.model:LearnedVerifier \\
        --verifier-kwargs '{"path": "outputs/verifier/model"}'

`--verifier` takes a registry name, an import path ``pkg.module:Class`` (served under the built
verifier's ``name``) or ``ALIAS=SPEC``, and repeats; `--verifier-kwargs` (JSON) applies to the
`--verifier` before it. Clients: ``rewards.RemoteVerifier(URL, verifier=NAME)``, or
``--verifier remote:http://HOST:PORT/NAME`` in any training script.
"""

from __future__ import annotations

import argparse

from rewards import build_verifiers
from rewards.serving.http import add_served_items
from rewards.serving.server import ServerConfig, serve


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_served_items(
        parser,
        "verifier",
        "verifiers",
        "SPEC",
        "verifier to serve: a name (math), pkg.module:Class, or ALIAS=SPEC (repeatable)",
        'options of the --verifier before it, e.g. \'{"path": "model_dir"}\'',
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    defaults = ServerConfig()
    parser.add_argument("--max-batch", type=int, default=defaults.max_batch)
    parser.add_argument("--max-text-chars", type=int, default=defaults.max_text_chars)
    parser.add_argument("--max-body-bytes", type=int, default=defaults.max_body_bytes)
    parser.add_argument("--request-timeout-s", type=float, default=defaults.request_timeout_s)
    parser.add_argument("--workers", type=int, default=defaults.workers, help="batch threads")
    parser.add_argument("--max-pending", type=int, default=defaults.max_pending)
    parser.add_argument(
        "--batch-workers",
        type=int,
        default=None,
        help="processes for one slow rule-verifier batch (default: every CPU; 1: serial)",
    )
    parser.add_argument("--log-level", default="info")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = make_parser()
    args = parser.parse_args(argv)
    specs = [(spec, options) for spec, options in (args.verifiers or [["math", {}]])]
    try:
        config = ServerConfig(
            max_batch=args.max_batch,
            max_text_chars=args.max_text_chars,
            max_body_bytes=args.max_body_bytes,
            request_timeout_s=args.request_timeout_s,
            workers=args.workers,
            max_pending=args.max_pending,
            batch_workers=args.batch_workers,
        )
        verifiers = build_verifiers(specs)
    except (ValueError, TypeError) as exc:
        parser.error(str(exc))
    url = f"http://{args.host}:{args.port}"
    for name in verifiers:
        print(f"serving {name!r}: --verifier remote:{url}/{name}", flush=True)
    serve(verifiers, args.host, args.port, config, args.log_level)


if __name__ == "__main__":
    main()
