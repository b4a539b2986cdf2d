"""The rollout engine's continuous batching of turns: a reply that ends steps its copy at once.

The engine (`trainers.rollout.engine`, whose module docstring says when it batches this way)
hands `ContinuousRollout` its first env copies; every acting agent's prompt becomes a row of one
`agents.batching.ContinuousBatcher`, which decodes token by token and admits and releases rows
at any step. A copy whose replies are all in is stepped (inline, or by worker threads while the
batch decodes on, so a slow verification holds up its own copy only), and its next turn (or,
its episode over, the next job's first turn) joins the running batch.

Which role maps can be batched so is asked of their policies, not of their classes
(`stream_runner`): every role's policy must offer stepwise decoding
(`agents.base.StepwisePolicy`), all with one `stepwise_key` (one model, tokenizer and decoding
settings), on a model `agents.batching.supports_model` accepts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from agents.base import Generation, StepwisePolicy, as_stepwise, stepwise_key
from agents.batching import ContinuousBatcher, supports_model
from agents.decoding import eval_mode
from agents.roles import RoleMap
from envs.roles import role_of
from trainers.rollout.copies import ApplyReplies, EnvCopy, Request

NextTurn = Callable[[EnvCopy], "tuple[EnvCopy, list[Request]] | None"]
"""The acting agents of a copy, or of the copy that took its env for the next job; None when
the queue has run dry (`RolloutEngine._next_turn`)."""


def stream_runner(policies: RoleMap, continuous: bool | None) -> StepwisePolicy | None:
    """The policy whose model plays every role, when the run can be continuously batched
    (`RolloutEngine`'s ``continuous``: None when it can, True required, False never); else None.

    Raises:
        ValueError: ``continuous=True`` and the role map cannot be batched so.
    """
    if continuous is False:
        return None
    members = [as_stepwise(p) for p in policies.values()]
    stepwise = [m for m in members if m is not None]
    shared = (
        bool(members)
        and len(stepwise) == len(members)
        and len({stepwise_key(m) for m in stepwise}) == 1
    )
    if shared and supports_model(stepwise[0].model):
        return stepwise[0]
    if continuous:
        raise ValueError(
            "continuous=True needs every role played by policies that decode stepwise "
            "(agents.base.StepwisePolicy, e.g. HF policies) of one model (one stepwise_key) whose "
            "attention layers are all full attention; use continuous=None to fall back to "
            "batched generate calls"
        )
    return None


class ContinuousRollout:
    """One run of continuously batched turns (module docstring).

    Args:
        runner (`StepwisePolicy`): the policy whose model decodes every row (`stream_runner`).
        policies (`RoleMap`): who plays which agent; each formats its own rows.
        next_turn (`NextTurn`): a copy's acting agents, or its env's next job's.
        apply (`ApplyReplies`): steps copies with their replies and records the turns.
        step_workers (`int`): threads stepping copies while the batch decodes on; 0 inline.
    """

    def __init__(
        self,
        runner: StepwisePolicy,
        policies: RoleMap,
        next_turn: NextTurn,
        apply: ApplyReplies,
        step_workers: int,
    ) -> None:
        self.runner, self.policies = runner, policies
        self.next_turn, self.apply, self.step_workers = next_turn, apply, step_workers
        self.batcher = ContinuousBatcher(runner)
        # per copy (by job): the agents whose replies are awaited, and the replies so far
        self.awaiting: dict[int, tuple[EnvCopy, list[Request]]] = {}
        self.replies: dict[int, dict[str, Generation]] = {}

    def run(self, copies: Iterable[EnvCopy]) -> dict[str, int]:
        """Plays `copies` and the jobs after them to the end; returns the batcher's counts.

        Each reply's row is keyed by its job, turn and agent, so it samples the same tokens
        whenever its copy comes back (inline or from a worker)."""
        self.submit(copies)
        workers = ThreadPoolExecutor(self.step_workers) if self.step_workers else None
        try:
            with eval_mode(self.runner.model):
                self._decode_and_step(workers)
        finally:
            if workers is not None:
                workers.shutdown(wait=True)
        return self.batcher.counts()

    def submit(self, copies: Iterable[EnvCopy]) -> None:
        """Queues the next turn of each copy (the copies whose episodes are over hand their env
        to the next job): one row per acting agent, encoded by that agent's policy."""
        by_member: dict[int, tuple[StepwisePolicy, list[tuple[tuple[int, int, str], Any]]]] = {}
        for env_copy in copies:
            turn = self.next_turn(env_copy)
            if turn is None:
                continue
            env_copy, agents = turn
            self.awaiting[env_copy.job] = (env_copy, agents)
            self.replies[env_copy.job] = {}
            for agent, obs in agents:
                member = as_stepwise(self.policies.policy_for(agent, role_of(agent)))
                assert member is not None  # stream_runner checked every policy
                rows = by_member.setdefault(id(member), (member, []))[1]
                rows.append(((env_copy.job, len(env_copy.episode.turns), agent), obs))
        for member, rows in by_member.values():
            encoded = member.encode([obs for _, obs in rows])
            for (key, _), ids in zip(rows, encoded, strict=True):
                self.batcher.submit(key, ids, member.adapter_name)

    def _decode_and_step(self, workers: ThreadPoolExecutor | None) -> None:
        """Steps the batcher until no row is left and no copy is being stepped; each copy whose
        replies are all in is stepped (inline, or by `workers`) and then submits its next turn."""
        batcher, awaiting, replies = self.batcher, self.awaiting, self.replies
        stepping: dict[Future[None], EnvCopy] = {}
        while batcher.busy or stepping:
            ready: list[int] = []
            if batcher.busy:
                finished = batcher.step()
            else:  # nothing to decode until a copy being stepped comes back
                wait(stepping, return_when=FIRST_COMPLETED)
                finished = []
            for (job, _, agent), generation in finished:
                replies[job][agent] = generation
                if len(replies[job]) == len(awaiting[job][1]):
                    ready.append(job)
            # each ready copy's step: its (copy, agent) owners, requests and replies
            steps = []
            for job in ready:
                env_copy, agents = awaiting.pop(job)
                got = replies.pop(job)
                owners = [(env_copy, agent) for agent, _ in agents]
                steps.append((env_copy, owners, agents, [got[agent] for agent, _ in agents]))
            if workers is None and steps:  # all at once: prepare_steps sees them together
                self.apply(
                    [owner for _, owners, _, _ in steps for owner in owners],
                    [request for _, _, requests, _ in steps for request in requests],
                    [generation for *_, generations in steps for generation in generations],
                )
                self.submit([env_copy for env_copy, *_ in steps])
            elif workers is not None:  # one task per copy: a slow one holds up no other
                for env_copy, owners, requests, generations in steps:
                    task = workers.submit(self.apply, owners, requests, generations)
                    stepping[task] = env_copy
            for future in [f for f in stepping if f.done()]:
                env_copy = stepping.pop(future)
                future.result()  # an env's exception is raised here
                self.submit([env_copy])
