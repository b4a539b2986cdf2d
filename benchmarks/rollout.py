"""``bench.py rollout``: generated tokens per second of the batched rollout engine against the
naive loop of the original scripts (one generate call per agent per problem)."""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from benchmarks.common import add_json_argument, cuda_sync, peak_rss, qwen_05b

NAME = "rollout"


def add_parser(subparsers: Any) -> None:
    """Register the ``rollout`` command."""
    parser = subparsers.add_parser(
        "rollout",
        help="batched rollout engine vs the naive loop (one generate per agent per problem)",
        description=(
            "Plays the same problems with the same model and token budget three times: through "
            "the rollout engine with continuous batching (its default: a copy's next turn joins "
            "the running batch as soon as its reply ends), through the engine in lockstep (every "
            "live copy's turn in one generate call, which runs to its longest reply), and "
            "through the naive loop of the original scripts (one generate call per agent per "
            "problem). Reports generated tokens per second of each, their ratios to the naive "
            "loop, and each engine mode's padding: the share of decode seats that produced no "
            "token and of prompt cells that were padding."
        ),
    )
    parser.add_argument("--env", default="math/reflection-v0")
    parser.add_argument("--problems", type=int, default=32, help="problems (= env copies)")
    parser.add_argument(
        "--no-naive", action="store_true", help="skip the naive loop (slow at many problems)"
    )
    parser.add_argument(
        "--slow-step-s",
        type=float,
        default=0.0,
        help="make every --slow-every-th problem's env steps take this many seconds more (a "
        "stand-in for a verifier running to its deadline on hostile text; a sleep, which "
        "releases the GIL as waiting on the verifier's helper process does) and compare the "
        "continuous engine stepping copies in threads (its default) with stepping them inline; "
        "no naive loop",
    )
    parser.add_argument("--slow-every", type=int, default=16)
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="alternating repeats, each running every loop (the engine modes, the naive loop) "
        "back to back; tokens/s are the median run's, the ratio the median of each repeat's",
    )
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
    """Generated tokens per second: the engine (continuous, lockstep) vs the naive loop."""
    policy = _bench_policy(args)
    source, env_kwargs = _env_source(args)
    engines = _engines(args, source, policy, env_kwargs)
    problems = engines["continuous"].problem_ids(args.problems)
    figures: dict[str, Any] = {
        "env": args.env,
        "problems": args.problems,
        "device": args.device,
        "model": "qwen2.5-0.5b-config (random)" if args.qwen else (args.model or "embedded"),
        "params": sum(p.numel() for p in policy.model.parameters()),
    }
    naive = not args.no_naive and not args.slow_step_s

    def batched(engine: Any) -> int:
        episodes = engine.run(problems)
        return sum(len(t.completion_ids) for e in episodes for t in e.turns)

    loops: dict[str, Callable[[], int]] = {
        mode: (lambda engine=engine: batched(engine)) for mode, engine in engines.items()
    }
    if naive:
        loops["naive"] = lambda: _naive(args.env, env_kwargs, policy, problems)
    for engine in engines.values():
        engine.run(problems[:2])  # warm-up
    runs, peaks = _repeat_loops(loops, args.repeats)
    for name, timed_runs in runs.items():
        figures[name] = _median_run(timed_runs, peaks[name])
        if name in engines:
            figures[name]["batching"] = _padding(engines[name].last_batching)
    if naive:
        _add_ratios(figures, engines)
    _print_figures(args, figures)
    return figures


def _env_source(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """The engines' env (its id, or with ``--slow-step-s`` a factory of slowed envs) and its
    kwargs."""
    env_kwargs: dict[str, Any] = {"rounds": args.rounds} if "solve" not in args.env else {}
    if "ensemble" in args.env:
        env_kwargs = {}
    if args.slow_step_s:
        return _slow_env_factory(args, env_kwargs), {}
    return args.env, env_kwargs


def _engines(
    args: argparse.Namespace, source: Any, policy: Any, env_kwargs: dict[str, Any]
) -> dict[str, Any]:
    """A rollout engine per mode: continuous, lockstep, and with ``--slow-step-s`` continuous
    stepping its copies inline (no threads)."""
    from trainers.rollout.engine import RolloutEngine

    modes = {"continuous": {}, "continuous-inline": {"step_workers": 0}, "lockstep": {}}
    if not args.slow_step_s:
        del modes["continuous-inline"]
    return {
        mode: RolloutEngine(
            source,
            policy,
            env_kwargs,
            num_envs=args.problems,
            continuous=mode != "lockstep",
            **extra,
        )
        for mode, extra in modes.items()
    }


def _timed(fn: Callable[[], int]) -> tuple[int, float]:
    """`fn`'s tokens and its seconds, the device synchronised on both ends."""
    cuda_sync()
    start = time.perf_counter()
    tokens = fn()
    cuda_sync()
    return tokens, time.perf_counter() - start


def _repeat_loops(
    loops: dict[str, Callable[[], int]], repeats: int
) -> tuple[dict[str, list[tuple[int, float]]], dict[str, int]]:
    """Each loop's (tokens, seconds) runs and its peak RSS over `repeats` alternating repeats."""
    # Alternating repeats: this machine's speed drifts over seconds, so each repeat runs every
    # loop back to back, and each ratio compares the runs of one repeat.
    runs: dict[str, list[tuple[int, float]]] = {name: [] for name in loops}
    peaks: dict[str, int] = dict.fromkeys(loops, 0)
    for _ in range(max(1, repeats)):
        for name, loop in loops.items():
            with peak_rss() as peak:
                runs[name].append(_timed(loop))
            peaks[name] = max(peaks[name], peak[0])
    return runs, peaks


def _median_run(timed_runs: list[tuple[int, float]], peak: int) -> dict[str, Any]:
    """A loop's figures: the run of median tokens per second, every run's rate, the peak RSS."""
    rates = [t / s for t, s in timed_runs]
    middle = sorted(range(len(rates)), key=rates.__getitem__)[len(rates) // 2]
    tokens, seconds = timed_runs[middle]  # the run of median tokens per second
    return {
        "tokens": tokens,
        "seconds": seconds,
        "tokens_per_s": tokens / seconds,
        "runs_tokens_per_s": rates,
        "peak_rss_gib": peak / 2**30,
    }


def _add_ratios(figures: dict[str, Any], engines: dict[str, Any]) -> None:
    """Each engine mode's speed-up on the naive loop, per repeat and their median; the
    continuous engine's as the headline ``ratio``."""
    naive_rates = figures["naive"]["runs_tokens_per_s"]
    for mode in engines:
        ratios = [
            m / n for m, n in zip(figures[mode]["runs_tokens_per_s"], naive_rates, strict=True)
        ]
        figures[mode]["ratios"] = ratios
        figures[mode]["ratio"] = statistics.median(ratios)
    figures["ratio"] = figures["continuous"]["ratio"]


def _print_figures(args: argparse.Namespace, figures: dict[str, Any]) -> None:
    """One line per loop: tokens, seconds and tokens/s, the ratio to the naive loop, the peak
    RSS and an engine's padding."""
    print(
        f"{args.env} x {args.problems} problems on {args.device}, model {figures['model']} "
        f"({figures['params'] / 1e6:.1f}M params)"
    )
    for name in ("continuous", "continuous-inline", "lockstep", "naive"):
        if name not in figures:
            continue
        row = figures[name]
        line = (
            f"{name:17} {row['tokens']:7d} tokens in {row['seconds']:7.2f} s = "
            f"{row['tokens_per_s']:9.1f} tokens/s"
        )
        if "ratio" in row:
            line += f"  {row['ratio']:5.1f}x naive (per repeat {_listed(row['ratios'])})"
        line += f"  | peak RSS {row['peak_rss_gib']:.2f} GiB"
        if "batching" in row:
            pad = row["batching"]
            line += (
                f"  | {pad['forwards']} forwards, decode seats idle {pad['decode_waste']:.0%}, "
                f"prompt padding {pad['prefill_waste']:.0%}"
            )
        print(line)


def _slow_env_factory(args: argparse.Namespace, env_kwargs: dict[str, Any]) -> Any:
    """A factory of `args.env` envs whose steps on every `--slow-every`-th problem sleep
    `--slow-step-s` seconds first."""
    from pettingzoo import ParallelEnv
    from pettingzoo.utils.wrappers import BaseParallelWrapper, BaseWrapper

    import envs

    probe = envs.make(args.env, **env_kwargs)
    slow = {probe.unwrapped.task.source[i]["id"] for i in range(0, args.problems, args.slow_every)}

    def pause(env: Any) -> None:
        if env.unwrapped.problem["id"] in slow:
            time.sleep(args.slow_step_s)

    class SlowAEC(BaseWrapper):
        def step(self, action: Any) -> None:
            if action is not None:
                pause(self)
            super().step(action)

    class SlowParallel(BaseParallelWrapper):
        def step(self, actions: Any) -> Any:
            pause(self)
            return super().step(actions)

    def make() -> Any:
        env = envs.make(args.env, **env_kwargs)
        return SlowParallel(env) if isinstance(env.unwrapped, ParallelEnv) else SlowAEC(env)

    return make


def _padding(counts: dict[str, int]) -> dict[str, Any]:
    """The engine's batching counts with the padding shares: decode seats that produced no token
    (a finished row waiting for its call's longest) and padded prompt cells."""
    slots, padded = counts.get("decode_slots", 0), counts.get("prefill_padded", 0)
    return {
        **counts,
        "decode_waste": 1 - counts.get("generated", 0) / slots if slots else 0.0,
        "prefill_waste": 1 - counts.get("prefill_tokens", 0) / padded if padded else 0.0,
    }


def _listed(values: list[float]) -> str:
    return ", ".join(f"{v:.1f}" for v in values)
