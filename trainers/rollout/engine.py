"""The rollout engine: many environment copies, every turn batched across them.

`num_envs` copies play at once; a copy whose episode ends starts the next queued problem, so the
batch stays full until the queue runs dry. Two ways to batch the turns:

- Continuous (the default when every role is played by HF policies of one model that
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
about to be taken (`prepare_steps`, below): math/tool-v0 runs the programs of its executors'
replies in parallel across the copies there. The engine knows no env by name.

The env protocol. Any PettingZoo env that follows it can be rolled out, from a registered id
(made with `envs.make`) or from a factory (a callable returning a fresh env):
- AEC (`pettingzoo.AECEnv`, wrapped or not) or Parallel (`pettingzoo.ParallelEnv`, told apart by
  ``env.unwrapped``). AEC: ``reset(seed=, options=)``, ``agents``, ``agent_selection``,
  ``terminations``, ``truncations``, ``observe(agent)``, ``step(text)``, and ``rewards`` and
  ``infos`` on the raw env after each step. Parallel: ``reset(seed=, options=) -> (observations,
  infos)``, ``agents``, ``step(actions) -> (observations, rewards, terminations, truncations,
  infos)``.
- Observations are dicts of text (what a `Policy` reads: ``prompt``, ``instruction``, ...); a
  plain string is not one. Actions are the policies' reply strings.
- ``reset`` gets ``options={"problem_id": id}`` with the ids passed to `run`; an env may ignore
  it. `problem_ids` needs a ``task`` attribute with a ``source`` (the project's envs have one).
- Infos: ``round`` (an int) is read when present, to number a turn's round (else 0 for AEC, the
  step count for Parallel); every info is recorded on its turn as it is.
- Optional: ``possible_agents`` (roles for per-role training), ``answer_roles`` (the roles that
  state answers, `envs.roles`; default: the built-in envs'), ``turn_results`` (the trainer's
  record of every step's rewards and full infos, read instead of what agents are shown),
  ``immediate_rewards`` (True allows branched rollouts), and ``prepare_steps`` on the raw env's
  class: ``prepare_steps(steps)`` is called once per class each turn with the ``(env, action)``
  pairs about to be stepped, before any is; it may do work best done in a batch (math/tool-v0
  runs their programs at once) but must not change what the steps do.

Rewards: after every env step, each agent's reward from that step is added to that agent's latest
turn (its own action's reward, or a shared team reward at the end). A reward reaching an agent
before its first turn waits for that turn. The engine reads each step's rewards and the acting
agents' full infos from the env's trainer record (`TaskEnvMixin.turn_results`), not from what the
env shows the agents (which withholds every grade while an agent has a turn to come); an env
without that record (one a user wrote) is read through its rewards and infos as shown.

Branched rollouts (``run(..., branch=True)``): instead of ``group_size`` independent episodes per
problem, every turn is sampled ``group_size`` times from one shared history, the trunk. At each
turn the engine forks the trunk into ``group_size`` env copies (each reset with the problem's seed
and replayed through the trunk's actions), samples one reply in each, pays each reply what its own
step pays its agent, and extends the trunk with one of the replies, drawn at random among those
whose copy goes on. So the k-th turns of a group's episodes are replies to the same history, and
a group's baseline (GRPO's mean over the group) compares replies, not the histories the earlier
turns happened to produce. It costs the same number of generations as independent episodes. Only
envs whose every reward is paid on the step it is for can branch (``immediate_rewards``).
"""

from __future__ import annotations

import logging
import random
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from pettingzoo import ParallelEnv

import envs as envs_pkg
from agents.base import Generation, Policy
from agents.batching import ContinuousBatcher, supports_model
from agents.decoding import eval_mode
from agents.hf import HFPolicy
from agents.roles import RoleMap, batch_key
from envs.roles import answer_roles, role_of
from trainers.rollout.records import Episode, Turn

logger = logging.getLogger(__name__)

Job = tuple[int, tuple[int, int, str]]  # (episode index, (group, sample, problem id))


@dataclass
class _EnvCopy:
    env: Any
    episode: Episode
    pending: dict[str, float] = field(default_factory=dict)  # rewards before an agent's 1st turn
    parallel: bool = False
    observations: dict[str, dict[str, str]] = field(default_factory=dict)  # Parallel envs only
    steps: int = 0  # Parallel env steps since reset: a round number when infos give none
    slot: int = 0  # which of the engine's envs this is
    job: int = 0  # which of the run's episodes this is

    def credit(self, rewards: Mapping[str, float]) -> None:
        latest = {t.agent: t for t in self.episode.turns}
        for agent, reward in rewards.items():
            if not reward:
                continue
            if agent in latest:
                latest[agent].reward += float(reward)
            else:
                self.pending[agent] = self.pending.get(agent, 0.0) + float(reward)


@dataclass
class _Tree:
    """A branched rollout of one problem: the trunk's actions and the group's records."""

    problem_id: str
    group: int
    seed: int
    group_size: int
    env_id: str
    answer_roles: tuple[str, ...]
    actions: list[list[str]] = field(default_factory=list)  # the trunk's replies, turn by turn
    episodes: list[Episode] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.episodes = [
            Episode(
                self.env_id,
                self.problem_id,
                self.group,
                s,
                branched=True,
                answer_roles=self.answer_roles,
            )
            for s in range(self.group_size)
        ]


def prepare_steps(steps: Iterable[tuple[Any, str]]) -> None:
    """Call each env class's pre-step hook (``prepare_steps``, module docstring) once, with the
    `(env, action)` steps of its copies that are about to be taken; envs without one are skipped."""
    by_class: dict[type, list[tuple[Any, str]]] = {}
    for env, action in steps:
        cls = type(env.unwrapped)
        if callable(getattr(cls, "prepare_steps", None)):
            by_class.setdefault(cls, []).append((env, action))
    for cls, pairs in by_class.items():
        cls.prepare_steps(pairs)  # type: ignore[attr-defined]


def _env_name(env: Any) -> str:
    """A made env's name for its records: its ``metadata["name"]``, else its class name."""
    raw = env.unwrapped
    name = getattr(raw, "metadata", {}).get("name")
    return name if isinstance(name, str) and name else type(raw).__name__


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
            role is played by HF policies of one model that `supports_model` accepts (else one
            batched `generate` call per turn); True: required (ValueError otherwise); False:
            never.
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
        env_id: str | Callable[[], Any],
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
        self._factory: Callable[[], Any] | None = None
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
        self._envs: list[Any] = []
        probe = self._make_env()
        self.env_id = self.env_id or _env_name(probe)  # a factory's env: its name
        self.parallel = isinstance(probe.unwrapped, ParallelEnv)
        self.task = getattr(probe.unwrapped, "task", None)  # None: an env without a task
        self.answer_roles = answer_roles(probe)  # recorded on every episode
        self._envs.append(probe)

    def _make_env(self) -> Any:
        if self._factory is not None:
            return self._factory()
        return envs_pkg.make(self.env_id, **self.env_kwargs)

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

        def done(env_copy: _EnvCopy) -> None:
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

    def _stream_runner(self) -> HFPolicy | None:
        """The policy whose model plays every role, when the run can be continuously batched
        (`continuous`, class docstring); else None."""
        if self.continuous is False:
            return None
        policies = list(self.policies.values())
        shared = (
            bool(policies)
            and all(isinstance(p, HFPolicy) for p in policies)
            and len({batch_key(p) for p in policies}) == 1
        )
        runner = policies[0] if shared else None
        if isinstance(runner, HFPolicy) and supports_model(runner.model):
            return runner
        if self.continuous:
            raise ValueError(
                "continuous=True needs every role played by HF policies of one model (one "
                "RoleMap batch key) whose attention layers are all full attention; use "
                "continuous=None to fall back to batched generate calls"
            )
        return None

    def _start(self, slot: int, job: Job, seed: int) -> _EnvCopy:
        """The env of `slot` reset for job ``(index, (group, sample, problem id))``."""
        index, (group, sample, pid) = job
        while len(self._envs) <= slot:
            self._envs.append(self._make_env())
        env = self._envs[slot]
        first = env.reset(seed=seed + index, options={"problem_id": pid})
        episode = Episode(self.env_id, pid, group, sample, answer_roles=self.answer_roles)
        env_copy = _EnvCopy(env, episode, parallel=self.parallel, slot=slot, job=index)
        if self.parallel:
            env_copy.observations = first[0]
        return env_copy

    def _next_turn(
        self,
        env_copy: _EnvCopy,
        queue: deque[Job],
        seed: int,
        done: Callable[[_EnvCopy], None],
    ) -> tuple[_EnvCopy, list[tuple[str, dict[str, str]]]] | None:
        """The acting agents of `env_copy`; when its episode is over, it is handed to `done` and
        its env starts the next queued job (None when the queue is empty)."""
        while True:
            agents = self._acting_agents(env_copy)
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
        done: Callable[[_EnvCopy], None],
    ) -> None:
        """Turn by turn: every live copy's turn in one `RoleMap.generate` call; a copy whose
        episode ends starts the next queued job, whose first turn joins the next call."""
        live = [
            self._start(k, queue.popleft(), seed) for k in range(min(self.num_envs, len(queue)))
        ]
        while live:
            requests: list[tuple[str, dict[str, str]]] = []
            owners: list[tuple[_EnvCopy, str]] = []
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
        runner: HFPolicy,
        queue: deque[Job],
        seed: int,
        done: Callable[[_EnvCopy], None],
    ) -> None:
        """Token by token (`agents.batching.ContinuousBatcher`): a reply that ends steps its copy
        at once, and the copy's next turn (or, its episode over, the next job's first turn)
        joins the running batch without waiting for the other copies' replies.

        With `step_workers`, copies are stepped (their verifiers run) in worker threads while
        the batch decodes on; each reply's row is keyed by its job, turn and agent, so it samples
        the same tokens whenever its copy comes back."""
        batcher = ContinuousBatcher(runner)
        # per copy (by job): the agents whose replies are awaited, and the replies so far
        awaiting: dict[int, tuple[_EnvCopy, list[tuple[str, dict[str, str]]]]] = {}
        replies: dict[int, dict[str, Generation]] = {}

        def submit(copies: Iterable[_EnvCopy]) -> None:
            by_member: dict[int, tuple[HFPolicy, list[tuple[tuple[int, int, str], Any]]]] = {}
            for env_copy in copies:
                turn = self._next_turn(env_copy, queue, seed, done)
                if turn is None:
                    continue
                env_copy, agents = turn
                awaiting[env_copy.job] = (env_copy, agents)
                replies[env_copy.job] = {}
                for agent, obs in agents:
                    member = self.policies.policy_for(agent, role_of(agent))
                    assert isinstance(member, HFPolicy)  # _stream_runner checked every policy
                    rows = by_member.setdefault(id(member), (member, []))[1]
                    rows.append(((env_copy.job, len(env_copy.episode.turns), agent), obs))
            for member, rows in by_member.values():
                encoded = member.encode([obs for _, obs in rows])
                for (key, _), ids in zip(rows, encoded, strict=True):
                    batcher.submit(key, ids, member.adapter_name)

        count = min(self.num_envs, len(queue))
        submit([self._start(k, queue.popleft(), seed) for k in range(count)])
        workers = ThreadPoolExecutor(self.step_workers) if self.step_workers else None
        try:
            with eval_mode(runner.model):
                self._decode_and_step(batcher, awaiting, replies, submit, workers)
        finally:
            if workers is not None:
                workers.shutdown(wait=True)
        self.last_batching = batcher.counts()

    def _decode_and_step(
        self,
        batcher: ContinuousBatcher,
        awaiting: dict[int, tuple[_EnvCopy, list[tuple[str, dict[str, str]]]]],
        replies: dict[int, dict[str, Generation]],
        submit: Callable[[Iterable[_EnvCopy]], None],
        workers: ThreadPoolExecutor | None,
    ) -> None:
        """Steps the batcher until no row is left and no copy is being stepped; each copy whose
        replies are all in is stepped (inline, or by `workers`) and then submits its next turn."""
        stepping: dict[Future[None], _EnvCopy] = {}
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
                self._apply(
                    [owner for _, owners, _, _ in steps for owner in owners],
                    [request for _, _, requests, _ in steps for request in requests],
                    [generation for *_, generations in steps for generation in generations],
                )
                submit([env_copy for env_copy, *_ in steps])
            elif workers is not None:  # one task per copy: a slow one holds up no other
                for env_copy, owners, requests, generations in steps:
                    task = workers.submit(self._apply, owners, requests, generations)
                    stepping[task] = env_copy
            for future in [f for f in stepping if f.done()]:
                env_copy = stepping.pop(future)
                future.result()  # an env's exception is raised here
                submit([env_copy])

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
        per_wave = max(1, self.num_envs // group_size)
        episodes: list[Episode] = []
        for start in range(0, len(problem_ids), per_wave):
            trees = [
                _Tree(pid, group, seed + group, group_size, self.env_id, self.answer_roles)
                for group, pid in enumerate(problem_ids[start : start + per_wave], start)
            ]
            while len(self._envs) < len(trees) * group_size:
                self._envs.append(self._make_env())
            self._grow(trees, group_size)
            for tree in trees:
                for episode in tree.episodes:
                    episodes.append(episode)
                    if callback is not None:
                        callback(episode)
        return episodes

    def _grow(self, trees: list[_Tree], group_size: int) -> None:
        """Adds one level of replies to every live tree until all trunks have ended."""
        live = list(trees)
        level = 0
        while live:
            forks: list[tuple[_Tree, list[_EnvCopy]]] = []
            for k, tree in enumerate(live):
                envs = self._envs[k * group_size : (k + 1) * group_size]
                forks.append((tree, [self._fork(tree, env) for env in envs]))
            owners: list[tuple[_EnvCopy, str]] = []
            requests: list[tuple[str, dict[str, str]]] = []
            for tree, copies in forks:
                acting = [self._acting_agents(env_copy) for env_copy in copies]
                if any(a != acting[0] for a in acting[1:]):
                    raise RuntimeError(
                        f"{self.env_id} is not deterministic under replay: copies reset with the "
                        f"same seed and stepped with the same actions differ on problem "
                        f"{tree.problem_id!r} at turn {level}; use branch=False"
                    )
                for env_copy, agents in zip(copies, acting, strict=True):
                    for agent, obs in agents:
                        requests.append((agent, obs))
                        owners.append((env_copy, agent))
            generations = self.policies.generate(requests, [role_of(a) for a, _ in requests])
            self._apply(owners, requests, generations)
            still = []
            for tree, copies in forks:
                for episode, env_copy in zip(tree.episodes, copies, strict=True):
                    for turn in env_copy.episode.turns:  # numbered along the trunk's path
                        turn.index = len(episode.turns)
                        episode.turns.append(turn)
                going = [s for s, env_copy in enumerate(copies) if self._acting_agents(env_copy)]
                if going:
                    chosen = copies[tree.rng.choice(going)]
                    tree.actions.append([t.text for t in chosen.episode.turns])
                    still.append(tree)
            live = still
            level += 1

    def _fork(self, tree: _Tree, env: Any) -> _EnvCopy:
        """`env` reset to the tree's problem and replayed through its trunk; a fresh record."""
        first = env.reset(seed=tree.seed, options={"problem_id": tree.problem_id})
        env_copy = _EnvCopy(
            env, Episode(self.env_id, tree.problem_id, 0, 0), parallel=self.parallel
        )
        if self.parallel:
            env_copy.observations = first[0]
        for texts in tree.actions:  # one reply per acting agent, as the trunk took them
            agents = self._acting_agents(env_copy)  # (AEC: this also steps past finished agents)
            if self.parallel:
                actions = {agent: text for (agent, _), text in zip(agents, texts, strict=True)}
                env_copy.observations = env.step(actions)[0]
                env_copy.steps += 1
            else:
                (text,) = texts  # AEC: one agent acts per turn
                env.step(text)
        return env_copy

    def _acting_agents(self, env_copy: _EnvCopy) -> list[tuple[str, dict[str, str]]]:
        env = env_copy.env
        if env_copy.parallel:
            return [(a, env_copy.observations[a]) for a in env.agents]
        while env.agents:
            agent = env.agent_selection
            if env.terminations[agent] or env.truncations[agent]:
                env.step(None)
                continue
            return [(agent, env.observe(agent))]
        return []

    def _apply(
        self,
        owners: list[tuple[_EnvCopy, str]],
        requests: list[tuple[str, dict[str, str]]],
        generations: list[Generation],
    ) -> None:
        by_copy: dict[int, list[tuple[str, dict[str, str], Generation]]] = {}
        copies: dict[int, _EnvCopy] = {}
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
        env_copy: _EnvCopy,
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
        self, env_copy: _EnvCopy, agent: str, obs: dict[str, str], gen: Generation
    ) -> None:
        env = env_copy.env
        raw = env.unwrapped
        env.step(gen.text)
        rewards, infos = _graded(raw, raw.rewards, raw.infos)
        info = infos.get(agent, {})
        self._new_turn(env_copy, agent, obs, gen, info, int(info.get("round", 0)))
        env_copy.credit(rewards)

    def _step_parallel(
        self, env_copy: _EnvCopy, rows: list[tuple[str, dict[str, str], Generation]]
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
