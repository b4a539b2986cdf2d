"""The rollout engine: many environment copies, every turn batched across them.

`num_envs` copies play at once; a copy whose episode ends starts the next queued problem, so the
batch stays full until the queue runs dry. Two ways to batch the turns:

- Continuous (`trainers.rollout.continuous`; the default when every role is played by policies
  that decode stepwise, `agents.base.StepwisePolicy` (HF policies do), of one model that
  `agents.batching.supports_model` accepts): the copies' prompts go to a `ContinuousBatcher`,
  which decodes token by token and admits and releases rows at any step. A reply that ends steps
  its copy at once, and the copy's next turn joins the running batch: no copy waits for another's
  longer reply, and no seat computes for a row that has finished.
- Lockstep (any other role map, or ``continuous=False``): at each step the engine collects the
  prompt of every live copy (AEC envs: the agent whose turn it is; Parallel envs: every live
  agent) and hands them to the role map in one call, which runs one `generate` per underlying
  model and so runs to its longest reply.

Either way each reply steps its copy and is recorded as a `Turn` (`trainers.rollout.records`)
with its exact prompt and completion token ids and log-probabilities, so trainers never
re-tokenize. `last_batching` holds the last run's counts: forwards, decode seats and the tokens
generated in them, prompt tokens and padded prompt cells (`scripts/bench.py rollout`).

Before the copies are stepped, each env class's optional pre-step hook runs once on the steps
about to be taken (`trainers.rollout.copies.prepare_steps`): math/tool-v0 runs the programs of
its executors' replies in parallel across the copies there. The engine knows no env by name.

The env protocol, typed in `envs.core` and checked when the engine makes its first env. Any
PettingZoo env that meets it can be rolled out, from a registered id (made with `envs.make`) or
from a factory (a callable returning a fresh env):
- `envs.core.TeamEnv` (every env): ``possible_agents``, ``agents``, ``reset(seed=, options=)``
  and ``step``; AEC (`pettingzoo.AECEnv`, wrapped or not) or Parallel (`pettingzoo.ParallelEnv`,
  told apart by ``env.unwrapped``). AEC envs are `envs.core.AECTeamEnv`s: ``agent_selection``,
  ``terminations``, ``truncations``, ``observe(agent)``, ``step(text)``, and ``rewards`` and
  ``infos`` on the raw env after each step. Parallel: ``reset(seed=, options=) ->
  (observations, infos)``, ``step(actions) -> (observations, rewards, terminations,
  truncations, infos)``.
- Observations are dicts of text (what a `Policy` reads: ``prompt``, ``instruction``, ...); a
  plain string is not one. Actions are the policies' reply strings.
- ``reset`` gets ``options={"problem_id": id}`` with the ids passed to `run`; an env may ignore
  it. `problem_ids` needs a ``task`` attribute with a ``source`` (the project's envs have one).
- Infos: ``round`` (an int) is read when present, to number a turn's round (else 0 for AEC, the
  step count for Parallel); every info is recorded on its turn as it is.
- Optional, `envs.core.TaskTeamEnv`'s members (the project's envs have them all): ``task``,
  ``answer_roles`` (the roles that state answers, `envs.roles`; default: the built-in envs'),
  ``turn_results`` (the trainer's record of every step's rewards and full infos, read instead of
  what agents are shown) and ``immediate_rewards`` (True allows branched rollouts); and
  `envs.core.PreparesSteps` on the raw env's class: ``prepare_steps(steps)`` is called once per
  class each turn with the ``(env, action)`` pairs about to be stepped, before any is; it may do
  work best done in a batch (math/tool-v0 runs their programs at once) but must not change what
  the steps do.

Rewards: after every env step, each agent's reward from that step is added to that agent's latest
turn (its own action's reward, or a shared team reward at the end). A reward reaching an agent
before its first turn waits for that turn. The engine reads each step's rewards and the acting
agents' full infos from the env's trainer record (`TaskEnvMixin.turn_results`), not from what the
env shows the agents (which withholds every grade while an agent has a turn to come); an env
without that record (one a user wrote) is read through its rewards and infos as shown.

Branched rollouts (``run(..., branch=True)``, `trainers.rollout.branched`): instead of
``group_size`` independent episodes per problem, every turn is sampled ``group_size`` times from
one shared history, the trunk. At each turn the engine forks the trunk into ``group_size`` env
copies (each reset with the problem's seed and replayed through the trunk's actions), samples one
reply in each, pays each reply what its own step pays its agent, and extends the trunk with one
of the replies, drawn at random among those whose copy goes on. So the k-th turns of a group's
episodes are replies to the same history, and a group's baseline (GRPO's mean over the group)
compares replies, not the histories the earlier turns happened to produce. It costs the same
number of generations as independent episodes. Only envs whose every reward is paid on the step
it is for can branch (``immediate_rewards``).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pettingzoo import ParallelEnv

import envs as envs_pkg
from agents.base import Generation, Policy, StepwisePolicy
from agents.roles import RoleMap
from envs.core import TeamEnv, missing_members
from envs.roles import answer_roles, role_of
from trainers.rollout.branched import BranchedRollout, Tree
from trainers.rollout.continuous import ContinuousRollout, stream_runner
from trainers.rollout.copies import EnvCopy, Owner, Request, env_name, prepare_steps
from trainers.rollout.records import Episode, Turn

__all__ = ["RolloutEngine", "prepare_steps"]

logger = logging.getLogger(__name__)

Job = tuple[int, tuple[int, int, str]]  # (episode index, (group, sample, problem id))


class RolloutEngine:
    """Runs episodes of one env with a role map, batching turns across env copies.

    Any env that follows the protocol of the module docstring can be rolled out.

    Args:
        env_id (`str | Callable[[], env]`): a registered env id, e.g. ``"math/reflection-v0"``,
            or a factory returning a fresh env each call (bind its arguments in the factory).
        policies (`RoleMap | Mapping[str, Policy] | Policy`): who plays which agent; one policy
            plays every agent.
        env_kwargs (`Mapping`): passed to `envs.make` (task, data_path, rounds, ...) with an id.
        num_envs (`int`, 64): env copies run at once; a copy whose episode ends starts the
            next problem.
        progress (`bool`, False): show a tqdm bar over finished episodes.
        continuous (`bool | None`, None): decode token by token with continuous batching
            (`agents.batching`): a copy's next turn starts as soon as its reply ends, instead of
            every turn waiting for the slowest reply of one `generate` call. None: when every
            role is played by stepwise policies (`agents.base.StepwisePolicy`: HF policies) of one
            model that `supports_model` accepts (else one batched `generate` call per turn);
            True: required (ValueError otherwise); False: never.
        step_workers (`int`, 4): continuous mode: threads that step the copies (run their
            verifiers) while the batch decodes on, so a slow verification holds up its own copy
            only; 0 steps them inline, between decode steps. Each env copy is stepped by one
            thread at a time; copies share only what their env shares between instances.

    Raises:
        TypeError: `env_id` is neither a str nor a callable.
        ValueError: `env_kwargs` given with a factory, or `num_envs` < 1.
    """

    def __init__(
        self,
        env_id: str | Callable[[], TeamEnv],
        policies: RoleMap | Mapping[str, Policy] | Policy,
        env_kwargs: Mapping[str, Any] | None = None,
        num_envs: int = 64,
        progress: bool = False,
        continuous: bool | None = None,
        step_workers: int = 4,
    ) -> None:
        if not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive int, got {num_envs!r}")
        if not isinstance(step_workers, int) or step_workers < 0:
            raise ValueError(f"step_workers must be an int >= 0, got {step_workers!r}")
        self._factory: Callable[[], TeamEnv] | None = None
        if not isinstance(env_id, str):
            if not callable(env_id):
                raise TypeError(
                    f"env_id must be a registered env id or a callable returning an env, got "
                    f"{type(env_id).__name__}"
                )
            if env_kwargs:
                raise ValueError(
                    "env_kwargs go with a registered env id; bind a factory's arguments in the "
                    "factory itself (e.g. functools.partial)"
                )
            self._factory = env_id
        if isinstance(policies, RoleMap):
            self.policies = policies
        elif isinstance(policies, Mapping):
            self.policies = RoleMap(policies)
        else:
            self.policies = RoleMap.shared(policies)
        self.env_kwargs = dict(env_kwargs or {})
        self.env_id = env_id if isinstance(env_id, str) else ""
        self.num_envs, self.progress = num_envs, progress
        self.continuous, self.step_workers = continuous, step_workers
        # the last run's batching counts: prompt tokens and padded prompt cells of its prefills,
        # decode slots (a row's seat for one token) and tokens generated in them
        self.last_batching: dict[str, int] = {}
        self._envs: list[TeamEnv] = []
        probe = self._make_env()
        self.env_id = self.env_id or env_name(probe)  # a factory's env: its name
        self.parallel = isinstance(probe.unwrapped, ParallelEnv)
        self.task = getattr(probe.unwrapped, "task", None)  # None: an env without a task
        self.answer_roles = answer_roles(probe)  # recorded on every episode
        self._envs.append(probe)

    def _make_env(self) -> TeamEnv:
        if self._factory is not None:
            env = self._factory()
        else:
            env = envs_pkg.make(self.env_id, **self.env_kwargs)
        if not self._envs:  # the first one: does the env meet the protocol the engine plays?
            raw = getattr(env, "unwrapped", env)  # `agents` may first be set by reset
            missing = [m for m in missing_members(raw, TeamEnv) if m != "agents"]
            if missing:
                raise TypeError(
                    f"{env_name(env)} is not a team env the engine can play: it lacks "
                    f"{', '.join(missing)} (envs.core.TeamEnv; see trainers.rollout.engine)"
                )
        return env

    def problem_ids(self, count: int, offset: int = 0) -> list[str]:
        """Ids of `count` problems of the env's task, from index `offset` of its source."""
        if self.task is None:
            raise ValueError(
                f"{self.env_id} has no `task` attribute to list problems from; pass run() the "
                "problem ids its reset(options={'problem_id': ...}) accepts"
            )
        source = self.task.source
        if offset + count > len(source):
            raise ValueError(
                f"asked for problems {offset}..{offset + count - 1} but the task has {len(source)}"
            )
        return [source[i]["id"] for i in range(offset, offset + count)]

    def run(
        self,
        problem_ids: Sequence[str],
        group_size: int = 1,
        seed: int = 0,
        callback: Callable[[Episode], None] | None = None,
        branch: bool = False,
    ) -> list[Episode]:
        """Play `group_size` episodes of every problem; returns them grouped, in input order.

        Args:
            problem_ids: problems to play (ids of the env's task).
            group_size: samples per problem (G of GRPO); they form one `group`.
            seed: base seed of the env resets (episode i resets with seed + i).
            callback: called with each finished episode.
            branch: sample every turn `group_size` times from one shared history (module
                docstring); the env must pay every reward on the step it is for.
        """
        if group_size < 1:
            raise ValueError(f"group_size must be >= 1, got {group_size}")
        if branch:
            return self._run_branched(problem_ids, group_size, seed, callback)
        jobs = [(g, s, pid) for g, pid in enumerate(problem_ids) for s in range(group_size)]
        bar = None
        if self.progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(jobs), desc=f"rollout {self.env_id}", unit="ep")
        episodes: list[Episode] = []

        def done(env_copy: EnvCopy) -> None:
            episodes.append(env_copy.episode)
            if callback is not None:
                callback(env_copy.episode)
            if bar is not None:
                bar.update(1)

        queue = deque(enumerate(jobs))
        self.last_batching = {}
        runner = self._stream_runner()
        if runner is not None:
            self._run_continuous(runner, queue, seed, done)
        else:
            self._run_lockstep(queue, seed, done)
        if bar is not None:
            bar.close()
        episodes.sort(key=lambda e: (e.group, e.sample))
        return episodes

    def _stream_runner(self) -> StepwisePolicy | None:
        """The policy whose model plays every role, when the run can be continuously batched
        (`continuous`, class docstring; `trainers.rollout.continuous.stream_runner`); else None."""
        return stream_runner(self.policies, self.continuous)

    def _start(self, slot: int, job: Job, seed: int) -> EnvCopy:
        """The env of `slot` reset for job ``(index, (group, sample, problem id))``."""
        index, (group, sample, pid) = job
        while len(self._envs) <= slot:
            self._envs.append(self._make_env())
        env = self._envs[slot]
        first = env.reset(seed=seed + index, options={"problem_id": pid})
        episode = Episode(self.env_id, pid, group, sample, answer_roles=self.answer_roles)
        env_copy = EnvCopy(env, episode, parallel=self.parallel, slot=slot, job=index)
        if self.parallel:
            env_copy.observations = first[0]
        return env_copy

    def _next_turn(
        self,
        env_copy: EnvCopy,
        queue: deque[Job],
        seed: int,
        done: Callable[[EnvCopy], None],
    ) -> tuple[EnvCopy, list[Request]] | None:
        """The acting agents of `env_copy`; when its episode is over, it is handed to `done` and
        its env starts the next queued job (None when the queue is empty)."""
        while True:
            agents = env_copy.acting_agents()
            if agents:
                return env_copy, agents
            done(env_copy)
            if not queue:
                return None
            env_copy = self._start(env_copy.slot, queue.popleft(), seed)

    def _run_lockstep(
        self,
        queue: deque[Job],
        seed: int,
        done: Callable[[EnvCopy], None],
    ) -> None:
        """Turn by turn: every live copy's turn in one `RoleMap.generate` call; a copy whose
        episode ends starts the next queued job, whose first turn joins the next call."""
        live = [
            self._start(k, queue.popleft(), seed) for k in range(min(self.num_envs, len(queue)))
        ]
        while live:
            requests: list[Request] = []
            owners: list[Owner] = []
            still = []
            for env_copy in live:
                turn = self._next_turn(env_copy, queue, seed, done)
                if turn is None:
                    continue
                env_copy, agents = turn
                still.append(env_copy)
                for agent, obs in agents:
                    requests.append((agent, obs))
                    owners.append((env_copy, agent))
            live = still
            if not requests:
                break
            generations = self.policies.generate(requests, [role_of(a) for a, _ in requests])
            self._count_call(generations)
            self._apply(owners, requests, generations)

    def _count_call(self, generations: Sequence[Generation]) -> None:
        """Adds one batched call's padding to `last_batching` (rows of a call run to its longest
        reply, prompts are padded to its longest; max_batch_size chunks are counted as one)."""
        rows = [g for g in generations if g.prompt_ids]
        if not rows:
            return
        stats = self.last_batching
        stats["calls"] = stats.get("calls", 0) + 1
        stats["prefill_tokens"] = stats.get("prefill_tokens", 0) + sum(
            len(g.prompt_ids) for g in rows
        )
        width = max(len(g.prompt_ids) for g in rows)
        stats["prefill_padded"] = stats.get("prefill_padded", 0) + width * len(rows)
        steps = max(len(g.completion_ids) for g in rows)
        stats["decode_slots"] = stats.get("decode_slots", 0) + steps * len(rows)
        stats["forwards"] = stats.get("forwards", 0) + steps
        stats["generated"] = stats.get("generated", 0) + sum(len(g.completion_ids) for g in rows)

    def _run_continuous(
        self,
        runner: StepwisePolicy,
        queue: deque[Job],
        seed: int,
        done: Callable[[EnvCopy], None],
    ) -> None:
        """Token by token (`trainers.rollout.continuous`): a reply that ends steps its copy at
        once, and the copy's next turn (or, its episode over, the next job's first turn) joins
        the running batch without waiting for the other copies' replies; with `step_workers`,
        copies are stepped (their verifiers run) in worker threads while the batch decodes on."""
        rollout = ContinuousRollout(
            runner,
            self.policies,
            lambda env_copy: self._next_turn(env_copy, queue, seed, done),
            self._apply,
            self.step_workers,
        )
        count = min(self.num_envs, len(queue))
        self.last_batching = rollout.run(
            [self._start(k, queue.popleft(), seed) for k in range(count)]
        )

    def _run_branched(
        self,
        problem_ids: Sequence[str],
        group_size: int,
        seed: int,
        callback: Callable[[Episode], None] | None,
    ) -> list[Episode]:
        raw = self._envs[0].unwrapped
        if not getattr(raw, "immediate_rewards", False):
            raise ValueError(
                f"{self.env_id} with {self.env_kwargs} does not pay every reward on the step it is "
                "for (its `immediate_rewards` is not True: e.g. a team reward at the end), so a "
                "branched rollout cannot pay each reply; use branch=False"
            )
        branches = BranchedRollout(self.env_id, self.parallel, self.policies, self._apply)
        per_wave = max(1, self.num_envs // group_size)
        episodes: list[Episode] = []
        for start in range(0, len(problem_ids), per_wave):
            trees = [
                Tree(pid, group, seed + group, group_size, self.env_id, self.answer_roles)
                for group, pid in enumerate(problem_ids[start : start + per_wave], start)
            ]
            while len(self._envs) < len(trees) * group_size:
                self._envs.append(self._make_env())
            branches.grow(trees, self._envs, group_size)
            for tree in trees:
                for episode in tree.episodes:
                    episodes.append(episode)
                    if callback is not None:
                        callback(episode)
        return episodes

    def _apply(
        self,
        owners: list[Owner],
        requests: list[Request],
        generations: list[Generation],
    ) -> None:
        by_copy: dict[int, list[tuple[str, dict[str, str], Generation]]] = {}
        copies: dict[int, EnvCopy] = {}
        for (env_copy, agent), (_, obs), gen in zip(owners, requests, generations, strict=True):
            by_copy.setdefault(id(env_copy), []).append((agent, obs, gen))
            copies[id(env_copy)] = env_copy
        # work the coming steps need, done in one batch (math/tool-v0: their programs)
        prepare_steps(
            (env_copy.env, g.text) for (env_copy, _), g in zip(owners, generations, strict=True)
        )
        for key, rows in by_copy.items():
            env_copy = copies[key]
            if env_copy.parallel:
                self._step_parallel(env_copy, rows)
            else:
                ((agent, obs, gen),) = rows
                self._step_aec(env_copy, agent, obs, gen)

    def _new_turn(
        self,
        env_copy: EnvCopy,
        agent: str,
        obs: dict[str, str],
        gen: Generation,
        info: dict[str, Any],
        round_index: int,
    ) -> Turn:
        turn = Turn(
            agent=agent,
            observation=dict(obs),
            text=gen.text,
            prompt_ids=list(gen.prompt_ids),
            completion_ids=list(gen.completion_ids),
            logprobs=list(gen.logprobs),
            reward=env_copy.pending.pop(agent, 0.0),
            info=dict(info),
            index=len(env_copy.episode.turns),
            round=round_index,
            finish_reason=gen.finish_reason,
        )
        env_copy.episode.turns.append(turn)
        return turn

    def _step_aec(
        self, env_copy: EnvCopy, agent: str, obs: dict[str, str], gen: Generation
    ) -> None:
        env = env_copy.env
        raw = env.unwrapped
        env.step(gen.text)
        rewards, infos = _graded(raw, raw.rewards, raw.infos)
        info = infos.get(agent, {})
        self._new_turn(env_copy, agent, obs, gen, info, int(info.get("round", 0)))
        env_copy.credit(rewards)

    def _step_parallel(
        self, env_copy: EnvCopy, rows: list[tuple[str, dict[str, str], Generation]]
    ) -> None:
        env = env_copy.env
        step_index = env_copy.steps
        env_copy.observations, rewards, _, _, infos = env.step({a: gen.text for a, _, gen in rows})
        env_copy.steps += 1
        rewards, infos = _graded(env.unwrapped, rewards, infos)
        for agent, obs, gen in rows:
            info = infos.get(agent, {})
            self._new_turn(env_copy, agent, obs, gen, info, int(info.get("round", step_index)))
        env_copy.credit(rewards)


def _graded(
    raw: Any, shown_rewards: Mapping[str, float], shown_infos: Mapping[str, Any]
) -> tuple[Mapping[str, float], Mapping[str, Any]]:
    """The rewards and acting agents' infos of the step just taken, as the env graded them: its
    trainer record (`turn_results`), else (an env without one) what it showed."""
    results = getattr(raw, "turn_results", None)
    if not results:
        return shown_rewards, shown_infos
    latest = results[-1]
    return latest["rewards"], latest["infos"]
