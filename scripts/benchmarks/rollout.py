"""``bench.py rollout``: generated tokens per second of the batched rollout engine against the
naive loop of the original scripts (one generate call per agent per problem)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from benchmarks.common import add_json_argument, qwen_05b

NAME = "rollout"


def add_parser(subparsers: Any) -> None:
    """Register the ``rollout`` command."""
    parser = subparsers.add_parser(
        "rollout",
        help="batched rollout engine vs the naive loop (one generate per agent per problem)",
        description=(
            "Plays the same problems with the same model and token budget twice: through the "
            "rollout engine (every live copy's turn batched into one generate call) and through "
            "the naive loop of the original scripts (one generate call per agent per problem). "
            "Reports generated tokens per second of each and their ratio."
        ),
    )
    parser.add_argument("--env", default="math/reflection-v0")
    parser.add_argument("--problems", type=int, default=32, help="problems (= env copies)")
    parser.add_argument("--rounds", type=int, default=1, help="reflection/debate rounds")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--model", default=None, help="model folder; default: the embedded model")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument(
        "--qwen-0.5b",
        dest="qwen",
        action="store_true",
        help="random-weight model of Qwen2.5-0.5B's configuration instead",
    )
    add_json_argument(parser)
    parser.set_defaults(func=run)


def _bench_policy(args: argparse.Namespace) -> Any:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agents import GenerationArguments, HFPolicy
    from trainers.embedded import resolve_model

    gen = GenerationArguments(max_new_tokens=args.max_new_tokens, do_sample=True, seed=0)
    path = resolve_model(args.model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    if args.qwen:
        dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
        model = qwen_05b(tokenizer, dtype)
    else:
        model = AutoModelForCausalLM.from_pretrained(path)
    tokenizer.padding_side = "left"
    return HFPolicy(model.to(args.device), tokenizer, gen)


def _naive(env_id: str, env_kwargs: dict[str, Any], policy: Any, problem_ids: list[str]) -> int:
    """The original scripts' loop: problem by problem, agent by agent, one generate each."""
    from pettingzoo import ParallelEnv

    import envs

    tokens = 0
    env = envs.make(env_id, **env_kwargs)
    for pid in problem_ids:
        if isinstance(env.unwrapped, ParallelEnv):
            obs, _ = env.reset(options={"problem_id": pid})
            while env.agents:
                actions = {}
                for agent in env.agents:
                    (gen,) = policy.generate([obs[agent]])
                    tokens += gen.num_tokens
                    actions[agent] = gen.text
                obs, *_ = env.step(actions)
            continue
        env.reset(options={"problem_id": pid})
        for agent in env.agent_iter():
            _, _, terminated, truncated, _ = env.last()
            if terminated or truncated:
                env.step(None)
                continue
            (gen,) = policy.generate([env.observe(agent)])
            tokens += gen.num_tokens
            env.step(gen.text)
    return tokens


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Generated tokens per second: rollout engine vs naive loop."""
    import torch

    from trainers.rollout.engine import RolloutEngine

    policy = _bench_policy(args)
    env_kwargs: dict[str, Any] = {"rounds": args.rounds} if "solve" not in args.env else {}
    if "ensemble" in args.env:
        env_kwargs = {}
    engine = RolloutEngine(args.env, policy, env_kwargs, num_envs=args.problems)
    problems = engine.problem_ids(args.problems)
    engine.run(problems[:2])  # warm-up

    def timed(fn: Callable[[], int]) -> tuple[int, float]:
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        tokens = fn()
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        return tokens, time.perf_counter() - start

    def batched() -> int:
        episodes = engine.run(problems)
        return sum(len(t.completion_ids) for e in episodes for t in e.turns)

    b_tokens, b_s = timed(batched)
    n_tokens, n_s = timed(lambda: _naive(args.env, env_kwargs, policy, problems))
    figures = {
        "env": args.env,
        "problems": args.problems,
        "device": args.device,
        "model": "qwen2.5-0.5b-config (random)" if args.qwen else "embedded",
        "params": sum(p.numel() for p in policy.model.parameters()),
        "batched": {"tokens": b_tokens, "seconds": b_s, "tokens_per_s": b_tokens / b_s},
        "naive": {"tokens": n_tokens, "seconds": n_s, "tokens_per_s": n_tokens / n_s},
    }
    figures["ratio"] = figures["batched"]["tokens_per_s"] / figures["naive"]["tokens_per_s"]
    print(
        f"{args.env} x {args.problems} problems on {args.device}, model {figures['model']} "
        f"({figures['params'] / 1e6:.1f}M params)"
    )
    for name in ("batched", "naive"):
        row = figures[name]
        print(
            f"{name:8} {row['tokens']:7d} tokens in {row['seconds']:7.2f} s = "
            f"{row['tokens_per_s']:9.1f} tokens/s"
        )
    print(f"ratio (batched / naive tokens per second): {figures['ratio']:.1f}x")
    return figures
