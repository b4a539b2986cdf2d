"""Play one episode of an environment with scripted agents and print the transcript and rewards.

    python scripts/play.py                                # math/reflection-v0 on arithmetic
    python scripts/play.py --env math/debate-v0 --seed 3
    python scripts/play.py --task gsm8k --data-path ../shared/data/gsm8k/test.jsonl

The scripted agents read the reference answer (they are a demo, not a policy): the solver makes
an off-by-one slip, the critic rejects a wrong answer and accepts a right one, the refiner fixes
the slip, so every reward path shows up. Needs only the base install (no torch).
"""

from __future__ import annotations

import argparse
import json
import re

from pettingzoo import ParallelEnv

import envs


def slip(answer: str) -> str:
    """The reference with its last number off by one (or a wrong word for labels)."""
    match = re.search(r"-?\d+(?!.*\d)", answer)
    if match is None:
        return "neutral" if answer != "neutral" else "entailment"
    return answer[: match.start()] + str(int(match.group()) + 1) + answer[match.end() :]


def scripted_reply(env, agent: str, round_index: int) -> str:
    """What the scripted agent says now (round_index: rounds this agent has already played)."""
    answer = env.unwrapped.problem["answer"]
    if agent.startswith(("critic", "verifier")):
        latest = env.unwrapped.answer_verdict
        if latest.correct:
            return "Each step checks out.\nVerdict: correct"
        return f"The final answer {latest.extracted} does not follow.\nVerdict: incorrect"
    if agent.startswith("analyzer"):
        return "Plan: read off the quantities, apply each change in order, print the result."
    if agent.startswith("executor"):  # a program, run in the sandbox; it slips in round 0
        value = slip(answer) if round_index == 0 else answer
        return f"```python\nprint({value!r})\n```"
    # The solver slips; so does every odd-numbered debater or variant in its first round.
    wrong = agent.startswith("solver") or (round_index == 0 and agent[-1] in "13579")
    if wrong:
        return f"Working it through step by step, I get \\boxed{{{slip(answer)}}}."
    return f"I recomputed each step carefully. The answer is \\boxed{{{answer}}}."


def play(env_id: str, seed: int, **kwargs) -> dict[str, float]:
    """Run one episode; print the transcript and each agent's return; return the returns."""
    env = envs.make(env_id, render_mode="ansi", **kwargs)
    returns: dict[str, float] = {}
    played: dict[str, int] = {}
    if isinstance(env.unwrapped, ParallelEnv):
        env.reset(seed=seed)
        while env.agents:
            actions = {a: scripted_reply(env, a, played.get(a, 0)) for a in env.agents}
            _, rewards, _, _, _ = env.step(actions)
            for agent, reward in rewards.items():
                returns[agent] = returns.get(agent, 0.0) + reward
                played[agent] = played.get(agent, 0) + 1
    else:
        env.reset(seed=seed)
        for agent in env.agent_iter():
            _, reward, terminated, truncated, _ = env.last()
            returns[agent] = returns.get(agent, 0.0) + reward
            if terminated or truncated:
                env.step(None)
                continue
            env.step(scripted_reply(env, agent, played.get(agent, 0)))
            played[agent] = played.get(agent, 0) + 1
    problem = env.unwrapped.problem
    print(f"== {env_id} | problem {problem['id']}\n{problem['question']}\n")
    print(env.render())
    print(f"\n== reference answer: {problem['answer']}")
    print("== return per agent:", json.dumps(returns))
    return returns


def make_parser() -> argparse.ArgumentParser:
    """The parser of ``scripts/play.py`` and ``mathteams play``."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--env", default="math/reflection-v0", choices=envs.list_envs())
    parser.add_argument("--task", default="arithmetic", choices=envs.list_tasks())
    parser.add_argument("--data-path", default=None, help="local JSONL file for gsm8k/math/anli")
    parser.add_argument("--seed", type=int, default=0)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = make_parser().parse_args(argv)
    play(args.env, args.seed, task=args.task, data_path=args.data_path)


if __name__ == "__main__":
    main()
