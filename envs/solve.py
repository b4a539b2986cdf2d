"""Single-agent solving: the baseline every multi-agent env is compared with.

| Id          | ``math/solve-v0`` (also ``gymnasium.make("math/solve-v0")``)  |
|-------------|---------------------------------------------------------------|
| Agents      | ``solver_0``                                                  |
| Turn order  | one turn                                                      |
| Observation | Dict of text: role, instruction, question, transcript, prompt |
| Action      | any string (clipped to ``max_action_chars``)                  |
| Reward      | the verifier's score of the answer                            |

`envs.make("math/solve-v0")` gives a PettingZoo AEC env with one agent, so rollout code treats
it like the multi-agent envs; `gymnasium.make("math/solve-v0")` (after ``import envs``) gives
`SolveGymEnv`, a `gymnasium.Env` with ``reset() -> (obs, info)`` and
``step(text) -> (obs, reward, terminated, truncated, info)``.

Infos: ``problem_id``, ``turn``, ``round``, ``role``, ``extracted``, ``correct``, ``score``,
``parse_error``, ``action_clipped``, ``final_correct``. The one turn ends the episode, so its
reward and grade are shown at once; the verifier's ``reason`` (it may name the reference) is kept
for the trainer in ``env.unwrapped.turn_results`` (or shown with ``per_step_rewards=True``).

Arguments:
    task, data_path, split, verifier, task_kwargs: the task (see `envs.tasks`).
    max_action_chars (`int`, 8192), max_obs_chars (`int`, 32768), render_mode (None | "ansi").
    per_step_rewards (`bool`, False): show full infos (the verifier's ``reason`` too).
    options (`SolveOptions | None`), task_options (`TaskOptions | None`): the arguments above as
        one object (`envs.options`); keyword arguments override its fields.

Version history:
    v0: initial release.
    v0 (no peeking): the verifier's ``reason`` left out of the info (``turn_results`` keep it;
        ``per_step_rewards=True`` shows it).
    v0 (held-out splits): the ``arithmetic`` and ``unknown`` tasks keep their problem format
        and levels; a problem's split is now a hash of its text (no text in two splits) and
        its id reads ``<task>/<split>/d<level>/s<seed>/<k>``, problem k of its level and split.
"""

from __future__ import annotations

from typing import Any

import gymnasium
from pettingzoo import AECEnv
from pettingzoo.utils import wrappers

from envs.core import TaskEnvMixin, TaskOptions, render_transcript
from envs.options import SolveOptions
from envs.tasks import prompts


class SolveEnv(TaskEnvMixin, AECEnv):
    """See the module docstring."""

    metadata = {"name": "math/solve-v0", "render_modes": ["ansi"], "is_parallelizable": True}
    options_class = SolveOptions
    answer_roles = ("solver",)  # envs.roles

    def __init__(
        self,
        *,
        options: SolveOptions | None = None,
        task_options: TaskOptions | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        self._setup_options(options, task_options, kwargs)
        self.possible_agents = ["solver_0"]
        self.max_turns = 1
        self._set_instructions(self.task)
        self.agents = []

    def _set_instructions(self, task: Any) -> None:
        self._instruction = task.instruction("solver")

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self._start_episode(seed, options)
        self.agents = ["solver_0"]
        self.rewards = {"solver_0": 0.0}
        self._cumulative_rewards = {"solver_0": 0.0}
        self.terminations = {"solver_0": False}
        self.truncations = {"solver_0": False}
        self.infos = {"solver_0": {**self._base_info(0), "role": "solver"}}
        self.turns = []
        self.agent_selection = "solver_0"

    def observe(self, agent: str) -> dict[str, str]:
        prompt = prompts.solve_prompt(self.problem["question"])
        return self._obs("solver", self._instruction, prompt, render_transcript(self.turns))

    def step(self, action: str | None) -> None:
        begun = self._begin_step(action)
        if begun is None:
            return
        agent, text, clipped = begun
        verdict = self._score(text)
        self.turns.append((agent, text))
        graded = self._answer_info(
            0, verdict, clipped, round=0, role="solver", final_correct=verdict.correct
        )
        self.terminations[agent] = True
        # One turn, the last: the grade is shown at once (less the verifier's reason).
        self.rewards, self.infos = self._show(
            [agent], {agent: verdict.score}, {agent: graded}, to_come=()
        )
        self._accumulate_rewards()


def env(wrapped: bool = True, **kwargs: Any) -> AECEnv:
    """Make a `SolveEnv`, order-enforced unless `wrapped=False`."""
    raw = SolveEnv(**kwargs)
    return wrappers.OrderEnforcingWrapper(raw) if wrapped else raw


class SolveGymEnv(gymnasium.Env):
    """`math/solve-v0` as a single-agent `gymnasium.Env` (one step per episode)."""

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, **kwargs: Any) -> None:
        self._env = SolveEnv(**kwargs)
        self.render_mode = self._env.render_mode
        self.observation_space = self._env.observation_space("solver_0")
        self.action_space = self._env.action_space("solver_0")

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._env.reset(seed=seed, options=options)
        return self._env.observe("solver_0"), dict(self._env.infos["solver_0"])

    def step(self, action: str):
        if not self._env.agents or self._env.terminations["solver_0"]:
            raise RuntimeError("the episode is over: call reset() before step()")
        self._env.step(action)
        info = dict(self._env.infos["solver_0"])
        return self._env.observe("solver_0"), self._env.rewards["solver_0"], True, False, info

    def render(self) -> str | None:
        return self._env.render()
