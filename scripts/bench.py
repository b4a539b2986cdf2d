"""Benchmarks, one subcommand each: ``python scripts/bench.py <command> --help``.

Commands:
    rollout     generated tokens per second of the batched rollout engine vs the naive loop.
    train       one multi-agent GRPO step vs a plain TRL GRPO step, time per processed token.
    envs        agent turns per second of every env with scripted agents (overhead per turn).
    verifiers   verifications per second of the ``math`` verifier against plain math-verify
                (``verify(parse(ref), parse(response))``) on the same GSM8K-style inputs.
    robustness  false-positive and false-negative rates and time per call of every verifier
                (and plain math-verify and TRL's ``accuracy_reward``) on the committed corpus
                of correct answers in many notations and of attacks (``scripts/robustness.py``).
    sandbox     wall time per sandboxed run (``print(1)``), hook mode vs bubblewrap, and
                ``run_many`` throughput (runs per second) at a few worker counts.
    serve       the env server under load (``scripts/serve_envs.py``): steps per second of many
                concurrent sessions over HTTP and WebSocket, and the overhead per step against
                the same episodes in-process.

To add a command (``envs``, ``rollout``, ``train``), write ``add_<name>_parser(subparsers)``
that registers its flags and ``set_defaults(func=run_<name>)``, where ``run_<name>(args)``
returns a JSON-serialisable dict of figures, and append the adder to `COMMANDS`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a file: make the project packages importable
    sys.path.insert(0, str(REPO))

DEFAULT_GSM8K = REPO.parent / "shared" / "data" / "gsm8k" / "test.jsonl"


# ---------------------------------------------------------------- verifiers


def add_verifiers_parser(subparsers: Any) -> None:
    """Register the ``verifiers`` command."""
    parser = subparsers.add_parser(
        "verifiers",
        help="math verifier vs plain math-verify: verifications per second and verdict agreement",
        description=(
            "Times MathVerifier.verify and plain math-verify verify(parse(ref), parse(response)) "
            "on GSM8K reference solutions: each solution once with its own final answer and once "
            "with the final changed, so half the verdicts should be correct."
        ),
    )
    parser.add_argument(
        "--data-path",
        type=Path,
        default=DEFAULT_GSM8K if DEFAULT_GSM8K.exists() else None,
        help="GSM8K JSONL (question, answer ending in '#### N') or MATH JSONL (solution, answer: "
        "each solution against its answer and another problem's); default ../shared/data/gsm8k/"
        "test.jsonl when present, else generated GSM8K-style solutions",
    )
    parser.add_argument("--limit", type=int, default=None, help="use only the first N problems")
    parser.add_argument(
        "--generate",
        type=int,
        default=None,
        metavar="N",
        help="use N generated GSM8K-style solutions instead of a file (500 when no file is found)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed for changed finals and data")
    parser.add_argument("--repeat", type=int, default=3, help="timed passes; the best one counts")
    parser.add_argument("--show", type=int, default=10, help="differing verdicts to print")
    parser.add_argument("--json", type=Path, default=None, help="write the figures to this file")
    parser.set_defaults(func=run_verifiers)


def _generated_solutions(count: int, seed: int) -> list[dict[str, str]]:
    """GSM8K-style solutions: calculator annotations, dollars, thousands commas, '#### N'."""
    rng = random.Random(seed)
    rows = []
    for index in range(count):
        a, b, c = rng.randint(2, 60), rng.randint(2, 40), rng.randint(1, 900)
        product = a * b
        total = product * c if index % 7 == 0 else product + c
        op = "*" if index % 7 == 0 else "+"
        final = f"{total:,}" if index % 5 == 0 else str(total)
        answer = (
            f"Each box holds {a} * {b} = <<{a}*{b}={product}>>{product} items.\n"
            f"So the total is {product} {op} {c} = $<<{product}{op}{c}={total}>>{total:,}.\n"
            f"#### {final}"
        )
        rows.append({"question": f"generated problem {index}", "answer": answer})
    return rows


def _load_pairs(args: argparse.Namespace) -> tuple[list[tuple[str, str, bool]], str]:
    if args.data_path is not None and args.generate is None:
        lines = Path(args.data_path).read_text(encoding="utf-8").splitlines()
        rows = [json.loads(line) for line in lines if line.strip()]
        source = str(args.data_path) + (
            " (MATH solutions)" if rows and "solution" in rows[0] else ""
        )
    else:
        count = args.generate or 500
        rows = _generated_solutions(count, args.seed)
        source = f"generated ({count} GSM8K-style solutions)"
    rows = rows[: args.limit] if args.limit else rows
    if rows and "solution" in rows[0]:
        return _math_pairs(rows), source
    rng = random.Random(args.seed)
    pairs = []
    for row in rows:
        body, final = row["answer"].rsplit("####", 1)
        final = final.strip()
        wrong = int(final.replace(",", "")) + rng.choice([-3, -2, -1, 1, 2, 3, 10])
        pairs.append((row["answer"], final, True))
        pairs.append((f"{body}#### {wrong}", final, False))
    return pairs, source


def _math_pairs(rows: Sequence[dict[str, str]]) -> list[tuple[str, str, bool]]:
    """MATH rows (``solution``, ``answer``): each solution against its own answer, and against
    the next answer of another value (by `rewards.extract.canonical_answer`)."""
    from rewards.extract import canonical_answer

    pairs = []
    for index, row in enumerate(rows):
        pairs.append((row["solution"], row["answer"], True))
        key = canonical_answer(row["answer"])
        for step in range(1, len(rows)):
            other = rows[(index + step) % len(rows)]["answer"]
            if canonical_answer(other) != key:
                pairs.append((row["solution"], other, False))
                break
    return pairs


def _rate(
    fn: Callable[[str, str], bool],
    pairs: Sequence[tuple[str, str, bool]],
    repeat: int,
    before: Callable[[], None] = lambda: None,
) -> tuple[list[bool], float, float]:
    """Verdicts, verifications per second and seconds of the fastest of `repeat` passes;
    `before` runs ahead of each pass (it clears caches, so later passes are not flattered)."""
    best = float("inf")
    verdicts: list[bool] = []
    for _ in range(max(1, repeat)):
        before()
        started = time.perf_counter()
        verdicts = [fn(response, reference) for response, reference, _ in pairs]
        best = min(best, time.perf_counter() - started)
    return verdicts, len(pairs) / best, best


def _clear_caches() -> None:
    from rewards import numeric, verifiers

    numeric._parse.cache_clear()
    verifiers._reference_number.cache_clear()


def run_verifiers(args: argparse.Namespace) -> dict[str, Any]:
    """Time both verifiers on the same inputs and compare their verdicts."""
    import logging

    from math_verify import parse, verify

    from rewards import MathVerifier, extract_answer

    logging.getLogger("math_verify").setLevel(logging.ERROR)
    pairs, source = _load_pairs(args)
    ours = MathVerifier()

    def ours_fn(response: str, reference: str) -> bool:
        return ours.verify(response, reference).correct

    # MATH answers are LaTeX: math-verify finds them only inside math delimiters.
    wrap = "${}$" if source.endswith("(MATH solutions)") else "{}"

    def plain_fn(response: str, reference: str) -> bool:
        return bool(verify(parse(wrap.format(reference)), parse(response)))

    for fn in (ours_fn, plain_fn):  # warm up imports and caches outside the timing
        for response, reference, _ in pairs[:20]:
            fn(response, reference)
    our_verdicts, our_rate, our_s = _rate(ours_fn, pairs, args.repeat, _clear_caches)
    plain_verdicts, plain_rate, plain_s = _rate(plain_fn, pairs, args.repeat)
    differ = [
        i for i, (a, b) in enumerate(zip(our_verdicts, plain_verdicts, strict=True)) if a != b
    ]
    # Same comparison, but math-verify is handed our extracted answer: isolates the fast path's
    # number rules from the two extractors' differences.
    same_input = [
        bool(verify(parse(wrap.format(ref)), parse(extract_answer(resp) or "")))
        for resp, ref, _ in pairs
    ]
    differ_same_input = sum(a != b for a, b in zip(our_verdicts, same_input, strict=True))
    expected = [want for _, _, want in pairs]
    figures = {
        "source": source,
        "verifications": len(pairs),
        "repeat": args.repeat,
        "ours_per_s": round(our_rate, 1),
        "plain_math_verify_per_s": round(plain_rate, 1),
        "speedup": round(our_rate / plain_rate, 2),
        "ours_seconds": round(our_s, 3),
        "plain_seconds": round(plain_s, 3),
        "verdicts_differ": len(differ),
        "verdicts_differ_same_extracted_answer": differ_same_input,
        "ours_match_expected": sum(a == b for a, b in zip(our_verdicts, expected, strict=True)),
        "plain_match_expected": sum(a == b for a, b in zip(plain_verdicts, expected, strict=True)),
        "differing": [
            {
                "index": i,
                "reference": pairs[i][1],
                "expected": pairs[i][2],
                "ours": our_verdicts[i],
                "plain": plain_verdicts[i],
                "ours_extracted": extract_answer(pairs[i][0]),
                "plain_extracted": [str(x) for x in parse(pairs[i][0])],
            }
            for i in differ
        ],
    }
    print(f"inputs: {source}; {len(pairs)} verifications (half correct, half changed finals)")
    print(f"ours (math verifier):  {our_rate:10.1f} verifications/s ({our_s:.3f} s)")
    print(f"plain math-verify:     {plain_rate:10.1f} verifications/s ({plain_s:.3f} s)")
    print(f"speedup:               {figures['speedup']:10.2f}x")
    print(
        f"verdicts differ:       {len(differ)} (expected verdict: ours "
        f"{figures['ours_match_expected']}/{len(pairs)}, plain {figures['plain_match_expected']}"
        f"/{len(pairs)}); with math-verify given our extracted answer: {differ_same_input}"
    )
    for item in figures["differing"][: args.show]:
        print(
            f"  #{item['index']}: ref {item['reference']} expected {item['expected']} "
            f"ours {item['ours']} ({item['ours_extracted']!r}) "
            f"plain {item['plain']} ({item['plain_extracted']})"
        )
    return figures


# ---------------------------------------------------------------- robustness

ROBUSTNESS_VERIFIERS = (
    "math",
    "gsm8k",
    "label",
    "learned",
    "remote",
    "math_verify",
    "trl_accuracy_reward",
)


def add_robustness_parser(subparsers: Any) -> None:
    """Register the ``robustness`` command."""
    parser = subparsers.add_parser(
        "robustness",
        help="how often each verifier is fooled (false positives) or misses (false negatives)",
        description=(
            "Scores every verifier on the robustness corpus (tests/data/robustness.jsonl, "
            "written by scripts/robustness.py): correct answers in many notations and attacks "
            "(answer spraying, hedges, close numbers, unit and format tricks, LaTeX that breaks "
            "parsers, prompt injection, huge and deeply nested inputs). Baselines run in a "
            "child process with a hard deadline per call."
        ),
    )
    parser.add_argument(
        "--corpus", type=Path, default=None, help="a corpus file (default: robustness.CORPUS)"
    )
    parser.add_argument(
        "--verifiers",
        nargs="+",
        default=list(ROBUSTNESS_VERIFIERS),
        choices=ROBUSTNESS_VERIFIERS,
        help="which to score (default: all)",
    )
    parser.add_argument(
        "--learned",
        type=Path,
        default=None,
        metavar="DIR",
        help="a learned verifier's model folder (python scripts/train_verifier.py --scripted "
        "writes one to outputs/verifier/model); without it the learned row is not run",
    )
    parser.add_argument(
        "--deadline", type=float, default=60.0, help="seconds a baseline call may take"
    )
    parser.add_argument("--json", type=Path, default=None, help="write the figures to this file")
    parser.set_defaults(func=run_robustness)


def _robustness_call(name: str, args: argparse.Namespace, stack: Any) -> Any:
    """The scoring call for one verifier name (see scripts/robustness.py), or None."""
    import robustness

    from rewards import RemoteVerifier, get_verifier

    if name in robustness.BASELINES:
        baseline = robustness.IsolatedBaseline(name, args.deadline)
        stack.callback(baseline.close)
        return baseline
    if name == "learned":
        if args.learned is None:
            return None
        from trainers.verifier.model import LearnedVerifier

        return robustness.timed(LearnedVerifier(args.learned))
    if name == "remote":
        from rewards.serving.http import BackgroundServer
        from rewards.serving.server import create_app

        server = BackgroundServer(create_app({"math": get_verifier("math")})).start()
        stack.callback(server.stop)
        return robustness.timed(RemoteVerifier(server.url, verifier="math"))
    return robustness.timed(get_verifier(name))


def run_robustness(args: argparse.Namespace) -> dict[str, Any]:
    """Score each verifier on the corpus and print the table."""
    import contextlib
    import logging

    sys.path.insert(0, str(REPO / "scripts"))
    import robustness

    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    args.corpus = args.corpus or robustness.CORPUS
    items = robustness.load_corpus(args.corpus)
    results: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        for name in args.verifiers:
            call = _robustness_call(name, args, stack)
            if call is None:
                results[name] = {"skipped_reason": "no --learned DIR given"}
                continue
            results[name] = robustness.score_verifier(name, call, items)
            print(f"{name}: done", file=sys.stderr)
    print(f"corpus: {args.corpus} ({len(items)} items)")
    print(robustness.table(results))
    return {"corpus": str(args.corpus), "items": len(items), "verifiers": results}


# ---------------------------------------------------------------- envs


def add_envs_parser(subparsers: Any) -> None:
    """Register the ``envs`` command."""
    parser = subparsers.add_parser(
        "envs",
        help="environment steps per second with scripted agents; overhead per agent turn",
        description=(
            "Plays episodes of every registered env (or --env) with scripted agents whose replies "
            "look like model output (a few sentences of working and a boxed answer, right or "
            "wrong), and reports agent turns per second and microseconds per agent turn, "
            "verification included."
        ),
    )
    parser.add_argument("--env", action="append", default=None, help="env id (repeatable)")
    parser.add_argument("--episodes", type=int, default=300, help="episodes per env")
    parser.add_argument("--task", default="arithmetic", help="task name")
    parser.add_argument("--data-path", default=None, help="local JSONL for the task")
    parser.add_argument("--json", type=Path, default=None, help="write the figures to this file")
    parser.set_defaults(func=run_envs)


def _reply(problem: dict[str, Any], agent: str, turn: int) -> str:
    if agent.startswith("critic"):
        return "Step two adds instead of subtracting, so the total is off.\nVerdict: incorrect"
    answer = problem["answer"] if (turn + len(agent)) % 2 else problem["answer"] + "1"
    return (
        "First I write down what is known. Then I apply each change in order, one equation per "
        f"sentence, and check the result by working backwards. The final answer is \\boxed{{{answer}}}."
    )


def _play_env(env: Any, seed: int) -> int:
    """One episode with scripted replies; returns the number of agent turns played."""
    from pettingzoo import ParallelEnv

    turns = 0
    if isinstance(env.unwrapped, ParallelEnv):
        env.reset(seed=seed)
        problem = env.unwrapped.problem
        while env.agents:
            env.step({a: _reply(problem, a, turns) for a in env.agents})
            turns += len(env.possible_agents)
        return turns
    env.reset(seed=seed)
    problem = env.unwrapped.problem
    for agent in env.agent_iter():
        _, _, terminated, truncated, _ = env.last()
        if terminated or truncated:
            env.step(None)
            continue
        env.step(_reply(problem, agent, turns))
        turns += 1
    return turns


def run_envs(args: argparse.Namespace) -> dict[str, Any]:
    """Agent turns per second of each env with scripted agents."""
    import envs

    figures: dict[str, Any] = {"episodes": args.episodes, "task": args.task, "envs": {}}
    print(f"{'env':22} {'episodes':>8} {'turns':>7} {'turns/s':>10} {'us/turn':>9}")
    for env_id in args.env or envs.list_envs():
        env = envs.make(env_id, task=args.task, data_path=args.data_path)
        _play_env(env, seed=-1)  # warm-up: imports, caches
        start = time.perf_counter()
        turns = sum(_play_env(env, seed) for seed in range(args.episodes))
        elapsed = time.perf_counter() - start
        row = {
            "turns": turns,
            "seconds": elapsed,
            "turns_per_s": turns / elapsed,
            "us_per_turn": 1e6 * elapsed / turns,
        }
        figures["envs"][env_id] = row
        print(
            f"{env_id:22} {args.episodes:8d} {turns:7d} {row['turns_per_s']:10.0f} "
            f"{row['us_per_turn']:9.1f}"
        )
    worst = max(r["us_per_turn"] for r in figures["envs"].values())
    figures["worst_us_per_turn"] = worst
    print(f"worst overhead per agent turn: {worst:.1f} us (target < 1000 us)")
    return figures


# ---------------------------------------------------------------- rollout

# Qwen2.5-0.5B's architecture (config values, no download); vocab follows the local tokenizer.
QWEN25_05B = {
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "rope_theta": 1_000_000.0,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
    "max_position_embeddings": 32768,
}


def add_rollout_parser(subparsers: Any) -> None:
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
    parser.add_argument("--json", type=Path, default=None, help="write the figures to this file")
    parser.set_defaults(func=run_rollout)


def _qwen_05b(tokenizer: Any, dtype: Any = None) -> Any:
    """A model of Qwen2.5-0.5B's architecture (`QWEN25_05B`) with random weights (seed 0), sized
    to `tokenizer`'s vocabulary and using its special tokens; `dtype` default float32."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        **QWEN25_05B,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return AutoModelForCausalLM.from_config(config, dtype=dtype or torch.float32)


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
        model = _qwen_05b(tokenizer, dtype)
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


def run_rollout(args: argparse.Namespace) -> dict[str, Any]:
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


# ---------------------------------------------------------------- train


def add_train_parser(subparsers: Any) -> None:
    """Register the ``train`` command."""
    parser = subparsers.add_parser(
        "train",
        help="one multi-agent GRPO step vs one plain TRL GRPO step (seconds per token)",
        description=(
            "Times optimizer steps of the multi-agent GRPO trainer (trainers/algorithms/grpo.py: "
            "rollout engine, env copies, one row per agent turn) and of a plain TRL GRPOTrainer on "
            "the same model, the same rows per step (the reflection env's turn slots x problems x "
            "G against as many single-turn prompts x G), the same token budget and sampling. "
            "Sampled lengths differ, so each step's time is divided by the tokens it processed "
            "(prompt + completion, TRL's num_tokens); the ratio is multi-agent / plain."
        ),
    )
    parser.add_argument("--model", default=None, help="model folder; default: the embedded model")
    parser.add_argument(
        "--env",
        default="math/reflection-v0",
        help="math/solve-v0 isolates the machinery's overhead (one turn, like plain TRL); "
        "multi-turn envs also pay for their turns being sequential",
    )
    parser.add_argument("--problems", type=int, default=4, help="problems per optimizer step")
    parser.add_argument("--generations", type=int, default=4, help="G samples per problem")
    parser.add_argument("--rounds", type=int, default=1, help="reflection rounds")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--steps", type=int, default=3, help="timed steps (after one warm-up)")
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="alternating multi-agent/plain runs; the ratio is the median of theirs",
    )
    parser.add_argument(
        "--no-length-grouping",
        action="store_true",
        help="multi-agent micro-batches as TRL splits them (shuffled, padded to the widest row)",
    )
    parser.add_argument(
        "--device",
        default="cpu",
        choices=["cpu", "cuda"],
        help="where both trainers run (cuda: use_cpu=False, bf16 mixed precision where the GPU "
        "supports it, peak GPU memory reported)",
    )
    parser.add_argument(
        "--qwen-0.5b",
        dest="qwen",
        action="store_true",
        help="random-weight model of Qwen2.5-0.5B's configuration (as rollout's), float32 "
        "weights saved to a temporary folder both trainers load, instead of --model",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the figures to this file")
    parser.set_defaults(func=run_train)


def _cuda_sync() -> None:
    """Wait for queued GPU work (timings on a GPU), when CUDA is in use; else nothing."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


@contextmanager
def _timed_generate() -> Iterator[list[float]]:
    """Times every `model.generate` call made inside the block (both trainers generate with it)."""
    from transformers import GenerationMixin

    original = GenerationMixin.generate
    seconds: list[float] = []

    def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        _cuda_sync()
        began = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            _cuda_sync()
            seconds.append(time.perf_counter() - began)

    GenerationMixin.generate = timed
    try:
        yield seconds
    finally:
        GenerationMixin.generate = original


def _timed_train(trainer: Any) -> dict[str, Any]:
    """Train, timing each optimizer step and the `generate` calls inside it; the first (warm-up)
    step is left out."""
    from transformers import TrainerCallback

    class Clock(TrainerCallback):
        def __init__(self) -> None:
            self.began = 0.0
            self.seconds: list[float] = []
            self.generating: list[float] = []
            self.generated_before = 0.0

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            _cuda_sync()
            self.began = time.perf_counter()
            self.generated_before = sum(generate_seconds)

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            _cuda_sync()
            self.seconds.append(time.perf_counter() - self.began)
            self.generating.append(sum(generate_seconds) - self.generated_before)

    clock = Clock()
    trainer.add_callback(clock)
    with _timed_generate() as generate_seconds:
        trainer.train()
    totals = [row["num_tokens"] for row in trainer.state.log_history if "num_tokens" in row]
    tokens = [b - a for a, b in zip([0.0, *totals[:-1]], totals, strict=True)]
    seconds, generating, tokens = clock.seconds[1:], clock.generating[1:], tokens[1:]
    timed = {"steps": len(seconds), "seconds": sum(seconds), "tokens": sum(tokens)}
    return _pooled([{**timed, "generate_seconds": sum(generating)}])


def _pooled(timed: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per-step and per-token figures of timed runs taken together."""
    steps = sum(t["steps"] for t in timed)
    seconds = sum(t["seconds"] for t in timed)
    generating = sum(t["generate_seconds"] for t in timed)
    tokens = sum(t["tokens"] for t in timed)
    return {
        "steps": steps,
        "seconds": seconds,
        "generate_seconds": generating,
        "tokens": tokens,
        "seconds_per_step": seconds / steps,
        "tokens_per_step": tokens / steps,
        "ms_per_1k_tokens": 1e6 * seconds / tokens,
        "generate_ms_per_1k_tokens": 1e6 * generating / tokens,
        "other_ms_per_1k_tokens": 1e6 * (seconds - generating) / tokens,
    }


def run_train(args: argparse.Namespace) -> dict[str, Any]:
    """Seconds per processed token: multi-agent GRPO step vs plain TRL GRPO step."""
    import gc
    import tempfile

    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    import envs
    from agents.prompts import build_messages
    from rewards import get_verifier
    from trainers.algorithms.grpo import build_grpo_trainer
    from trainers.algorithms.rows import turn_slots
    from trainers.embedded import resolve_model

    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise SystemExit("bench.py train --device cuda: torch sees no CUDA device")
    bf16 = cuda and torch.cuda.is_bf16_supported()
    model = resolve_model(args.model)
    get_verifier("math").verify("\\boxed{x + 1}", "2")  # one-time math-verify import, untimed
    env_id = args.env
    env_kwargs: dict[str, Any] = {"split": "train"}
    if env_id in ("math/reflection-v0", "math/debate-v0"):
        env_kwargs["rounds"] = args.rounds
    env = envs.make(env_id, **env_kwargs)
    slots = turn_slots(env)
    steps = args.steps + 1
    problems = args.problems * steps

    def config(out: str) -> GRPOConfig:
        return GRPOConfig(
            output_dir=out,
            use_cpu=not cuda,
            bf16=bf16,
            report_to=[],
            save_strategy="no",
            disable_tqdm=True,
            logging_steps=1,
            max_steps=steps,
            learning_rate=1e-5,
            num_generations=args.generations,
            per_device_train_batch_size=slots * args.generations,
            gradient_accumulation_steps=args.problems,
            max_completion_length=args.max_new_tokens,
            temperature=1.0,
            beta=0.0,
            seed=0,
        )

    figures: dict[str, Any] = {
        "model": "qwen2.5-0.5b-config (random)" if args.qwen else model,
        "env": env_id,
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "precision": "bf16 mixed (float32 weights)" if bf16 else "float32",
        "gradient_checkpointing": config("unused").gradient_checkpointing,
        "rows_per_step": slots * args.generations * args.problems,
        "max_new_tokens": args.max_new_tokens,
        "length_grouped": not args.no_length_grouping,
    }
    # The plain run answers as many single-turn prompts: first-turn prompts of more problems.
    source = env.unwrapped.task.source
    rows = []
    for index in range(problems * slots):
        first = env.reset(options={"problem_id": source[index % len(source)]["id"]})
        # AEC: the first acting agent's observation; Parallel: (observations, infos), the first's
        obs = env.observe(env.agent_selection) if first is None else next(iter(first[0].values()))
        rows.append(
            {"prompt": build_messages(obs), "reference": source[index % len(source)]["answer"]}
        )
    verifier = get_verifier("math")

    def correct(completions: list[Any], reference: list[str], **_: Any) -> list[float]:
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        return [verifier.verify(t, r).score for t, r in zip(texts, reference, strict=True)]

    def multi_trainer(out: str) -> Any:
        return build_grpo_trainer(
            model,
            env_id,
            env_kwargs,
            config(out),
            train_problems=problems,
            length_grouped=not args.no_length_grouping,
        )

    def plain_trainer(out: str) -> Any:
        plain_args = config(out)
        plain_args.shuffle_dataset = False
        return GRPOTrainer(
            model=model,
            reward_funcs=[correct],
            args=plain_args,
            train_dataset=Dataset.from_list(rows),
        )

    # Alternating repeats: this machine's speed drifts over minutes, so each ratio compares
    # runs made back to back, and the figure is their median.
    runs: dict[str, list[dict[str, Any]]] = {"multi_agent": [], "plain_trl": []}
    with tempfile.TemporaryDirectory() as tmp:
        if args.qwen:  # saved once: each trainer loads the same weights from a folder (float32)
            tokenizer = AutoTokenizer.from_pretrained(model)
            model = f"{tmp}/qwen-0.5b"
            _qwen_05b(tokenizer).save_pretrained(model)
            tokenizer.save_pretrained(model)
        for repeat in range(args.repeats):
            for name, make in (("multi_agent", multi_trainer), ("plain_trl", plain_trainer)):
                if cuda:  # the previous trainer's memory freed, the peak counted from here
                    gc.collect()
                    torch.cuda.empty_cache()
                    torch.cuda.reset_peak_memory_stats()
                trainer = make(f"{tmp}/{name}{repeat}")
                figures.setdefault("params", sum(p.numel() for p in trainer.model.parameters()))
                timed = _timed_train(trainer)
                if cuda:
                    timed["peak_gpu_gib"] = torch.cuda.max_memory_allocated() / 2**30
                runs[name].append(timed)
                del trainer
    ratios = [
        m["ms_per_1k_tokens"] / p["ms_per_1k_tokens"]
        for m, p in zip(runs["multi_agent"], runs["plain_trl"], strict=True)
    ]
    figures["ratios"] = ratios
    figures["ratio"] = statistics.median(ratios)
    print(
        f"{env_id}, {figures['rows_per_step']} rows per step, model {figures['model']} "
        f"({figures['params'] / 1e6:.1f}M params) on {figures['device']}, {figures['precision']}"
    )
    for name, timed in runs.items():
        row = figures[name] = _pooled(timed)
        peak = ""
        if cuda:
            row["peak_gpu_gib_per_run"] = [t["peak_gpu_gib"] for t in timed]
            row["peak_gpu_gib"] = max(row["peak_gpu_gib_per_run"])
            peak = f", peak GPU memory {row['peak_gpu_gib']:.2f} GiB"
        print(
            f"{name:12} {row['seconds_per_step']:7.2f} s/step {row['tokens_per_step']:9.0f} "
            f"tokens/step {row['ms_per_1k_tokens']:8.1f} ms per 1k tokens "
            f"(model.generate {row['generate_ms_per_1k_tokens']:.1f}, "
            f"the rest {row['other_ms_per_1k_tokens']:.1f}){peak}"
        )
    print(
        "ratio (multi-agent / plain TRL, time per token): "
        f"{figures['ratio']:.2f} (target <= 1.10; per repeat: "
        f"{', '.join(f'{r:.2f}' for r in ratios)})"
    )
    return figures


# ---------------------------------------------------------------- sandbox


def add_sandbox_parser(subparsers: Any) -> None:
    """Register the ``sandbox`` command."""
    parser = subparsers.add_parser(
        "sandbox",
        help="sandbox overhead per run (hook vs bwrap) and run_many throughput",
        description=(
            "Times run_code('print(1)') one after another in each isolation mode (the median "
            "is the per-run overhead: interpreter start-up, the bootstrap, and under bwrap the "
            "namespaces and mounts), then run_many over --programs short programs at each "
            "--workers count, in runs per second."
        ),
    )
    parser.add_argument("--runs", type=int, default=30, help="sequential runs per mode")
    parser.add_argument("--programs", type=int, default=64, help="programs per run_many batch")
    parser.add_argument(
        "--workers",
        type=int,
        action="append",
        default=None,
        help="run_many max_workers (repeatable; default 2 and 8)",
    )
    parser.add_argument(
        "--isolation",
        action="append",
        default=None,
        choices=["hook", "bwrap"],
        help="modes to time (repeatable; default both)",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the figures to this file")
    parser.set_defaults(func=run_sandbox)


def run_sandbox(args: argparse.Namespace) -> dict[str, Any]:
    """Per-run wall time and run_many throughput of each isolation mode."""
    import warnings

    from envs.sandbox import SandboxConfig, run_code, run_many

    figures: dict[str, Any] = {"runs": args.runs, "programs": args.programs, "modes": {}}
    for isolation in args.isolation or ["hook", "bwrap"]:
        with warnings.catch_warnings():  # hook mode's warning, once is enough
            warnings.simplefilter("ignore")
            config = SandboxConfig(isolation=isolation)
        run_code("print(1)", config)  # warm-up: caches, the interpreter probe
        times = []
        for _ in range(args.runs):
            began = time.perf_counter()
            result = run_code("print(1)", config)
            times.append(time.perf_counter() - began)
            if result.stdout != "1\n":
                raise RuntimeError(f"{isolation}: print(1) gave {result.observation()}")
        mode: dict[str, Any] = {
            "median_ms": 1000 * statistics.median(times),
            "p90_ms": 1000 * sorted(times)[int(0.9 * (len(times) - 1))],
            "run_many": {},
        }
        codes = [f"print(sum(range({n})))" for n in range(args.programs)]
        for workers in args.workers or [2, 8]:
            began = time.perf_counter()
            results = run_many(codes, config, max_workers=workers)
            elapsed = time.perf_counter() - began
            if not all(r.ok for r in results):
                raise RuntimeError(f"{isolation}: a run_many program failed")
            mode["run_many"][str(workers)] = {
                "seconds": elapsed,
                "runs_per_s": len(codes) / elapsed,
            }
        figures["modes"][isolation] = mode
        many = ", ".join(
            f"{w} workers {m['runs_per_s']:.1f} runs/s" for w, m in mode["run_many"].items()
        )
        print(
            f"{isolation:>5}: print(1) median {mode['median_ms']:.1f} ms "
            f"(p90 {mode['p90_ms']:.1f} ms); run_many x{args.programs}: {many}"
        )
    figures["cpu_count"] = os.cpu_count()
    return figures


# ---------------------------------------------------------------- serve


def add_serve_parser(subparsers: Any) -> None:
    """Register the ``serve`` command."""
    parser = subparsers.add_parser(
        "serve",
        help="env server under load: steps per second and overhead per step, HTTP and WebSocket",
        description=(
            "Starts the env server (scripts/serve_envs.py) in its own process, then plays "
            "--episodes episodes in each of --sessions concurrent sessions (one client thread "
            "each, scripted replies from agents.ScriptedPolicy), over each --transport. The same "
            "episodes (seeds and replies) are played in-process, one after another, as the "
            "baseline. Reports steps per second (all sessions together), the mean time a client "
            "waits per step, and the overhead per step against the in-process step; checks that "
            "served and in-process episodes earn the same rewards."
        ),
    )
    parser.add_argument("--env", default="math/reflection-v0", help="env id")
    parser.add_argument("--task", default="arithmetic", help="task name")
    parser.add_argument("--sessions", type=int, default=64, help="concurrent sessions")
    parser.add_argument("--episodes", type=int, default=8, help="episodes per session")
    parser.add_argument(
        "--transport",
        action="append",
        default=None,
        choices=["http", "ws"],
        help="transports to time (repeatable; default both)",
    )
    parser.add_argument("--workers", type=int, default=8, help="the server's env threads")
    parser.add_argument("--json", type=Path, default=None, help="write the figures to this file")
    parser.set_defaults(func=run_serve)


def _serve_reply(observation: Any) -> str:
    """A reply that looks like model output and depends only on the observation."""
    if observation.get("role") in ("critic", "verifier"):
        return "Step two adds instead of subtracting, so the total is off.\nVerdict: incorrect"
    guess = len(observation.get("question", "")) % 17 + len(observation.get("transcript", "")) % 3
    return (
        "First I write down what is known. Then I apply each change in order, one equation per "
        "sentence, and check the result by working backwards. "
        f"The final answer is \\boxed{{{guess}}}."
    )


def _serve_episode(env: Any, seed: int) -> tuple[int, float, float]:
    """One episode with scripted replies: (env calls, seconds inside env calls, reward sum)."""
    from pettingzoo import ParallelEnv

    from agents import ScriptedPolicy

    policy = ScriptedPolicy(_serve_reply)
    calls, waited, earned = 1, 0.0, 0.0
    began = time.perf_counter()
    if isinstance(env.unwrapped, ParallelEnv):
        observations, _ = env.reset(seed=seed)
        waited += time.perf_counter() - began
        while env.agents:
            agents = list(env.agents)
            replies = policy.act([observations[a] for a in agents])
            began = time.perf_counter()
            observations, rewards, _, _, _ = env.step(dict(zip(agents, replies, strict=True)))
            waited += time.perf_counter() - began
            calls += 1
            earned += sum(rewards.values())
        return calls, waited, earned
    env.reset(seed=seed)
    waited += time.perf_counter() - began
    for _agent in env.agent_iter():
        observation, reward, terminated, truncated, _ = env.last()
        earned += reward
        action = None if terminated or truncated else policy.act([observation])[0]
        began = time.perf_counter()
        env.step(action)
        waited += time.perf_counter() - began
        calls += 1
    return calls, waited, earned


def _cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) a process has used so far, from /proc (None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def _env_server(env_id: str, sessions: int, workers: int) -> Iterator[tuple[str, int]]:
    """scripts/serve_envs.py on a free loopback port, in its own process; yields its URL and
    process id."""
    import socket
    import subprocess

    import httpx

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [
        sys.executable,
        str(REPO / "scripts" / "serve_envs.py"),
        "--port",
        str(port),
        "--env",
        env_id,
        "--max-sessions",
        str(2 * sessions + 8),
        "--workers",
        str(workers),
        "--log-level",
        "warning",
    ]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"the env server exited: {server.stderr.read()[-2000:]}")
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass  # not listening yet
            if time.monotonic() > deadline:
                raise RuntimeError(f"the env server did not answer on {url} within 300 s")
            time.sleep(0.1)
        yield url, server.pid
    finally:
        server.terminate()
        server.wait(timeout=30)


def run_serve(args: argparse.Namespace) -> dict[str, Any]:
    """Steps per second and per-step overhead of served sessions against in-process envs."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import envs

    seeds = [[s * 1000 + e for e in range(args.episodes)] for s in range(args.sessions)]
    kwargs = {"task": args.task}
    figures: dict[str, Any] = {
        "env": args.env,
        "sessions": args.sessions,
        "episodes_per_session": args.episodes,
        "server_workers": args.workers,
        "cpu_count": os.cpu_count(),
        "load_average_before": list(os.getloadavg()),
    }
    local = envs.make(args.env, **kwargs)
    _serve_episode(local, -1)  # warm-up: imports, caches
    began, cpu = time.perf_counter(), time.process_time()
    played = [_serve_episode(local, seed) for row in seeds for seed in row]
    elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu
    steps, earned = sum(p[0] for p in played), sum(p[2] for p in played)
    base_us = 1e6 * elapsed / steps
    figures["in_process"] = {
        "steps": steps,
        "seconds": elapsed,
        "steps_per_s": steps / elapsed,
        "us_per_step": base_us,
        "cpu_us_per_step": 1e6 * cpu / steps,
    }
    print(f"{args.env}: {args.sessions} sessions x {args.episodes} episodes = {steps} env calls")
    print(
        f"{'mode':12} {'steps/s':>9} {'us/step':>9} {'wait us/step':>13} {'overhead us':>12} "
        f"{'CPU us/step: client + server':>29}"
    )
    print(
        f"{'in-process':12} {steps / elapsed:9.0f} {base_us:9.1f} {base_us:13.1f} {0:12.1f} "
        f"{1e6 * cpu / steps:29.1f}"
    )
    with _env_server(args.env, args.sessions, args.workers) as (url, pid):
        for transport in args.transport or ["http", "ws"]:
            remotes = [
                envs.remote(url, args.env, transport=transport, timeout_s=300, **kwargs)
                for _ in range(args.sessions)
            ]
            _serve_episode(remotes[0], -1)  # warm-up: the connection pool, the server's imports
            start = threading.Barrier(args.sessions + 1)

            def play(index: int, remotes: list[Any] = remotes, start: Any = start) -> list[Any]:
                start.wait()
                return [_serve_episode(remotes[index], seed) for seed in seeds[index]]

            with ThreadPoolExecutor(args.sessions) as pool:
                futures = [pool.submit(play, i) for i in range(args.sessions)]
                start.wait()
                began, cpu, server_cpu = time.perf_counter(), time.process_time(), _cpu_seconds(pid)
                results = [p for future in futures for p in future.result()]
                wall, cpu = time.perf_counter() - began, time.process_time() - cpu
                server_end = _cpu_seconds(pid)
            for env in remotes:
                env.close()
            served_steps = sum(r[0] for r in results)
            served_earned = sum(r[2] for r in results)
            if served_steps != steps or abs(served_earned - earned) > 1e-6:
                raise RuntimeError(
                    f"{transport}: served episodes differ from in-process ones ({served_steps} "
                    f"calls, rewards {served_earned} vs {steps} calls, rewards {earned})"
                )
            wait_us = 1e6 * sum(r[1] for r in results) / served_steps
            server_us = (
                None
                if server_cpu is None or server_end is None
                else 1e6 * (server_end - server_cpu) / served_steps
            )
            row = {
                "steps": served_steps,
                "seconds": wall,
                "steps_per_s": served_steps / wall,
                "us_per_step": 1e6 * wall / served_steps,
                "client_wait_us_per_step": wait_us,
                "overhead_us_per_step": 1e6 * wall / served_steps - base_us,
                "client_cpu_us_per_step": 1e6 * cpu / served_steps,
                "server_cpu_us_per_step": server_us,
            }
            figures[transport] = row
            shown = "?" if server_us is None else f"{server_us:.0f}"
            split = f"{row['client_cpu_us_per_step']:.0f} + {shown}"
            print(
                f"{transport:12} {row['steps_per_s']:9.0f} {row['us_per_step']:9.1f} "
                f"{wait_us:13.1f} {row['overhead_us_per_step']:12.1f} {split:>29}"
            )
    figures["load_average_after"] = list(os.getloadavg())
    print(
        "us/step: wall time per step over all sessions; wait: mean time one client waits for a "
        "step; overhead: us/step minus in-process us/step; CPU: processor time per step of the "
        "client process and of the server process (less sensitive to a shared machine)"
    )
    return figures


# ---------------------------------------------------------------- entry point

COMMANDS: list[Callable[[Any], None]] = [
    add_verifiers_parser,
    add_envs_parser,
    add_rollout_parser,
    add_train_parser,
    add_robustness_parser,
    add_sandbox_parser,
    add_serve_parser,
]


def make_parser() -> argparse.ArgumentParser:
    """The parser with one subcommand per entry of `COMMANDS`."""
    parser = argparse.ArgumentParser(
        prog="bench.py", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in COMMANDS:
        add(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one benchmark command; write its figures as JSON when ``--json`` is given."""
    args = make_parser().parse_args(argv)
    figures = args.func(args)
    path = getattr(args, "json", None)
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
