"""Solver -> critic -> refiner reflection, an AEC environment.

| Id                | ``math/reflection-v0``                                        |
|-------------------|---------------------------------------------------------------|
| Agents            | ``solver_0``, ``critic_0``, ``refiner_0``                     |
| Turn order        | solver, then (critic, refiner) for ``rounds`` rounds          |
| Observation       | Dict of text: role, instruction, question, transcript, prompt |
| Action            | any string (clipped to ``max_action_chars``)                  |
| Reward            | per role (below), or a shared team reward at the end          |

The state the acting agent sees is the problem, the latest answer and the latest feedback (the
full transcript is in the ``transcript`` field too). The solver answers once. The critic reviews
the latest answer and ends with ``Verdict: correct`` or ``Verdict: incorrect``. The refiner
revises the latest answer using the critic's feedback. The episode terminates after the last
refiner turn, or, with ``stop_on_accept``, as soon as the critic accepts.

Rewards (``team_reward=False``): the solver gets the verifier's score of its answer; the critic
gets 1 when its verdict matches the truth of the answer it reviewed, else 0 (no verdict: 0); the
refiner gets the score of its revision. With ``critic_reward="outcome"`` the critic is paid instead
by the score of the revision its feedback led to (given when the refiner answers; with
``stop_on_accept``, an accepting critic gets the accepted answer's score): a verdict-only reward
can be gamed by a critic sharing weights with the solver (on a weak team, "incorrect" is usually
right, and a recomputation corrupted on purpose produces it), while the outcome pays only feedback
that ends in a right answer. ``critic_reward="balanced"`` pays the verdict like "verdict" and
marks the critic's info ``balance_reviews``: the GRPO trainer then weights each verdict reward by
the rarity of its class (answer under review right or wrong) among the reviews of its rollout
batch (`trainers.algorithms.rows.review_class_weights`), so that each class carries half the
batch's weight and "incorrect" every time earns no more than "correct" every time. (Measured
with the refiner re-solving, it did not stop the critic's drift in training: balanced accuracy
0.711 -> 0.626, as without it; docs/results.md, "Credit and protocol options, chosen on
validation".) With ``critic_reward="counterfactual"`` a review is paid its verdict
(as "verdict") plus ``counterfactual_weight`` times what it changed in the team's outcome against
keeping the answer it reviewed: the revision's score minus the reviewed answer's score, paid when
the refiner answers. A verdict that led to a fix earns 2, one that kept a right answer right 1, a
right "incorrect" that the refiner could not act on 1, a wrong "incorrect" the refiner ignored 0,
and one that led to a break -1 (weight 1): the critic shares the cost of what its review caused.
With ``team_reward=True`` every agent gets the score of the final answer when the episode ends
and 0 before.

``revision_reward="improvement"`` pays the refiner its revision's score plus ``improvement_bonus``
times the change against the answer it revised (`envs.core.revision_reward`; SCoRe's shaped
second attempt): a fix earns 2, a kept right answer 1, a kept wrong one 0, a break -1 (bonus 1).
Paid its score alone, a refiner that breaks a right answer loses no more than one that fails to
fix a wrong one, and a batch of mostly right answers teaches it little about keeping them.

``refiner_mode="resolve"`` changes what a refiner sees after a rejection: the problem alone, as
the solver sees it (its instruction and prompt), so it solves afresh instead of applying the
critic's check (after an acceptance, or a review with no verdict, it sees the usual prompt and
keeps the answer). The critic then gates a resample: a right answer it wrongly rejects is lost
only when the fresh solution is wrong, where a refiner that applies a wrong check loses it
whenever the check is wrong. (Measured on GRPO-trained teams, on validation: the refiner that
applies the check broke 60% of right answers under review, the one that re-solves 7%;
docs/results.md, "Credit and protocol options, chosen on validation".)

Named faults (`envs.tasks.faults`; a task family declaring them, `envs.tasks.family`, such as
graph colouring): the critic ends ``BAD u v. Verdict: incorrect``, naming a clashing edge, or
``OK. Verdict: correct``, and sees the colouring before the edges. ``fault_bonus`` is added to its pay when it rejects a wrong answer and names a real
fault (``fault_rule`` "any" of its faults, or the "first" in listed order; info ``named_fault``
and ``fault_real``). ``feedback`` shapes what the refiner sees: the review as written ("full"),
its verdict alone, the verdict and the first named fault ("fault"), or every one ("faults").
``refiner_mode="patch"`` lays the refiner's boxed pieces (``\\boxed{2 C}``) over the latest
answer, and a reply with none keeps it. ``oracle_critic=True`` puts the verifier's review (the
verdict and every fault) in place of whatever the critic agent wrote: the ceiling of a review.

``audit`` names roles whose turns must also get their arithmetic right: a turn of an audited role
that states an equation that does not hold (``23 - 21 = 0``; `rewards.arithmetic`) earns 0,
whatever its answer or verdict: its own step's reward, the outcome a critic is paid later (a counterfactual
critic keeps only the negative part: a break its review caused still costs), and, with
``team_reward``, the agent's share of the final reward. Paid by the verdict alone, a critic
sharing weights with a solver that is mostly right learns to write "= 0: it checks" under any
subtraction; the audit pays only checks that are worked right (an earlier build: `git show
93f0224:docs/results.md`, "The arithmetic audit").

Infos: ``problem_id``, ``turn`` (0-based index of the agent turn), ``round``, ``role``,
``extracted``, ``correct``, ``score``, ``reason``, ``parse_error``, ``action_clipped``,
the refiner's ``improvement`` (its score minus the revised answer's),
``false_equations`` (how many stated equations do not hold, audited or not) and, on a turn the
audit zeroed, ``audit_failed``; the critic's
also ``verdict`` and ``reviewed_correct``; at the end every agent's ``final_correct`` and
``final_answer``.

No peeking (`envs.core.TaskEnvMixin`): each turn is graded when it is taken (the rewards above),
but an agent is shown nothing of it while it has a turn to come. Its rewards are withheld and
paid, summed, on the step after which it acts no more (the solver's after its one turn, the
critic's after its last review, the refiner's at the end; each agent's final ``last()`` holds
its return), and its info gains ``correct``, ``score`` and the critic's ``reviewed_correct``
only then; the verifier's ``reason`` (it may name the reference) is in no public info. So in the
README's loop the round-2 refiner's ``last()`` is 0 and an info without grades, whether its
round-1 revision was right or not. The trainer reads every step's rewards and full infos from
``env.unwrapped.turn_results``, or makes the env with ``per_step_rewards=True``.

Arguments:
    task (`str | Task`, "arithmetic"), data_path, split, verifier, task_kwargs: the task.
    rounds (`int`, 2): critic/refiner rounds K; at most 1 + 2K agent turns.
    stop_on_accept (`bool`, False): end the episode when the critic says correct.
    team_reward (`bool`, False): one shared reward for the final answer instead of per role.
    critic_reward (`str`, "verdict"): "verdict" (the verdict matches the truth), "balanced" (the
        same, class-balanced by the trainer), "outcome" (the score of the revision that follows
        the critic's feedback) or "counterfactual" (the verdict plus what the revision changed).
    counterfactual_weight (`float`, 1.0): weight of the change in a counterfactual critic's pay.
    revision_reward (`str`, "score"): the refiner's pay: "score" or "improvement" (above).
    improvement_bonus (`float`, 1.0): weight of the change in an "improvement" refiner's pay.
    audit (`Sequence[str]`, ()): roles ("solver", "critic", "refiner") whose turns earn 0 when
        they state a false equation.
    max_action_chars (`int`, 8192), max_obs_chars (`int`, 32768): text bounds.
    render_mode (`str | None`): "ansi" makes `render()` return the transcript.
    refiner_mode (`str`, "revise"): "revise" (the refiner sees the answer and the critic's
        feedback), "resolve" (after a rejection it solves the problem afresh; above) or
        "patch" (its boxed pieces are laid over the latest answer: a task with named faults).
    feedback (`str`, "full"), fault_bonus (`float`, 0.0), fault_rule (`str`, "any"),
        oracle_critic (`bool`, False): on a task with named faults (`envs.tasks.faults`): what the
        refiner sees of a review, the critic's pay for naming a real fault, which named fault
        counts, and the verifier playing the critic (below).
    per_step_rewards (`bool`, False): pay each reward on the step it is for and show full infos
        at once (the trainer's view; never a policy's input).
    options (`ReflectionOptions | None`): all of the above as one object (`envs.options`);
        task_options (`TaskOptions | None`): the task arguments and text bounds as one object;
        keyword arguments override either's fields.

Version history:
    v0: initial release.
    v0 (no peeking): grades withheld from an agent while it has a turn to come,
        rewards paid when it acts no more, ``reason`` only in ``turn_results``;
        ``per_step_rewards=True`` restores the old per-step rewards and infos.
    v0 (held-out splits): the ``arithmetic`` and ``unknown`` tasks keep their problem format
        and levels; a problem's split is now a hash of its text (no text in two splits) and
        its id reads ``<task>/<split>/d<level>/s<seed>/<k>``, problem k of its level and split.
    v0 (credit options): ``revision_reward``, ``improvement_bonus``,
        ``critic_reward="counterfactual"``, ``counterfactual_weight`` and ``refiner_mode``; the
        defaults pay and play as before.
    v0 (named faults): ``feedback``, ``fault_bonus``, ``fault_rule``, ``oracle_critic`` and
        ``refiner_mode="patch"``, read on a task with named faults (`envs.tasks.faults`); a task's
        ``review_first`` shows the critic the answer before the problem. The defaults play as
        before on every other task.
"""

from __future__ import annotations

from typing import Any

from pettingzoo import AECEnv
from pettingzoo.utils import wrappers

from envs.core import from_options, render_transcript, revision_reward
from envs.options import (  # noqa: F401 - the choices, re-exported where they were
    CRITIC_REWARDS,
    REFINER_MODES,
    ReflectionOptions,
)
from envs.roles import role_of
from envs.scheduled import (  # noqa: F401 - re-exported: their home was here
    VERDICT_RE,
    ScheduledTeamEnv,
    parse_verdict,
)
from envs.tasks import prompts
from envs.tasks.faults import feedback_text, oracle_review
from rewards.arithmetic import false_equations

ROLES = ReflectionOptions.ROLES  # solver, critic, refiner
# The one agent of each role, named by the options (``solver_0``, ``critic_0``, ``refiner_0``).
SOLVER, CRITIC, REFINER = (ReflectionOptions.agent(role) for role in ROLES)


class ReflectionEnv(ScheduledTeamEnv):
    """See the module docstring. The schedule, reset, the end of each step and the team reward
    are `ScheduledTeamEnv`'s; the options are `ReflectionOptions` (`envs.options`)."""

    metadata = {"name": "math/reflection-v0", "render_modes": ["ansi"], "is_parallelizable": False}
    options_class = ReflectionOptions
    options: ReflectionOptions
    answer_roles = ReflectionOptions.ANSWER_ROLES  # the roles that state answers (envs.roles)
    critic_reward = from_options("critic_reward")
    audit = from_options("audit")
    revision_reward = from_options("revision_reward")
    improvement_bonus = from_options("improvement_bonus")
    counterfactual_weight = from_options("counterfactual_weight")
    refiner_mode = from_options("refiner_mode")
    feedback_form = from_options("feedback")
    fault_bonus = from_options("fault_bonus")
    fault_rule = from_options("fault_rule")
    oracle_critic = from_options("oracle_critic")

    @property
    def immediate_rewards(self) -> bool:  # type: ignore[override]
        """Each turn paid on its own step: not with a team reward, nor with a critic paid (in part)
        by the revision that follows it (the options' facts state it)."""
        return self.options.facts().immediate_rewards

    def _reset_state(self) -> None:
        self.answer: str | None = None  # latest solver/refiner answer

    def observe(self, agent: str) -> dict[str, str]:
        question = self.problem["question"]
        fresh = self.refiner_mode == "resolve" and self.verdict is False
        asks = prompts.ASKS[self.options.prompt_style]
        answer_format = self.played.answer_format
        solve = asks.solve.replace("{answer_format}", answer_format)
        if agent == SOLVER or self.answer is None:
            prompt = prompts.solve_prompt(question, solve)
        elif agent == REFINER and fresh:  # solve afresh, as the solver does
            instruction = self._instructions[SOLVER]
            prompt = prompts.solve_prompt(question, solve)
            return self._obs("refiner", instruction, prompt, render_transcript(self.turns))
        elif agent == CRITIC:
            prompt = prompts.critic_prompt(
                question, self.answer, self.played.review_first, asks.review
            )
        else:
            patching = self.refiner_mode == "patch" and self.played.faults is not None
            ask = prompts.PATCH_ASK if patching else asks.revise
            ask = ask.replace("{answer_format}", answer_format)
            prompt = prompts.refiner_prompt(question, self.answer, self.feedback or "(none)", ask)
        return self._obs(
            role_of(agent), self._instructions[agent], prompt, render_transcript(self.turns)
        )

    # ------------------------------------------------------------------ roles
    def _take_turn(
        self, agent: str, text: str, clipped: bool, extra: dict[str, Any], done: bool
    ) -> tuple[str, bool]:
        role = extra["role"]
        extra["false_equations"] = len(false_equations(text))
        if agent == CRITIC:
            if self.oracle_critic:
                text = self._oracle_review()
                extra["false_equations"] = 0
            done = self._review(agent, text, clipped, extra, done)
        else:
            self._answer(agent, text, clipped, extra)
        if role in self.audit and extra["false_equations"] > 0:  # a break still costs
            self.rewards[agent] = min(self.rewards[agent], 0.0)
            self._graded[agent]["audit_failed"] = True
            self.failed_audit.add(agent)
        return text, done

    def _review(
        self, agent: str, text: str, clipped: bool, extra: dict[str, Any], done: bool
    ) -> bool:
        """Grade and pay a critic's turn; returns whether the episode ends with it."""
        if self.critic_reward == "balanced":
            extra["balance_reviews"] = True
        verdict, hit = self._grade_review(agent, text, clipped, extra)
        bonus = self._grade_faults(agent, text, verdict)
        done = done or self._accepts(verdict)
        if self.critic_reward in ("verdict", "balanced", "counterfactual"):
            self.rewards[agent] = float(hit) + bonus
        elif done:  # no revision follows: the outcome is the answer the critic let stand
            self.rewards[agent] = self.answer_verdict.score + bonus
        return done

    def _grade_faults(self, agent: str, text: str, verdict: bool | None) -> float:
        """On a task with named faults (`envs.tasks.faults`): record the faults the review names
        (``named_fault``, the first; ``fault_real``, whether the one `fault_rule` reads is a
        fault of the answer), shape the refiner's feedback (``feedback``), and return the
        review's fault bonus."""
        model = self.played.faults
        if model is None:
            return 0.0
        named = model.named(text)
        self.feedback = feedback_text(self.feedback_form, verdict, text, named, model)
        info = self._graded[agent]
        info["named_fault"] = named[0] if named else None
        if verdict is not False or self.answer is None or self.answer_verdict.correct:
            return 0.0  # the bonus is for naming what is wrong in a wrong answer it rejects
        actual = model.faults(self.answer, self.problem["answer"])
        if self.fault_rule == "first":
            real = bool(named) and bool(actual) and named[0] == actual[0]
        else:
            real = bool(named) and named[0] in actual
        info["fault_real"] = real
        return self.fault_bonus if real else 0.0

    def _oracle_review(self) -> str:
        """The verifier's review of the latest answer: its verdict and every fault."""
        model = self.played.faults
        latest = self.answer_verdict
        correct = latest is not None and latest.correct
        faults = (
            []
            if model is None or self.answer is None
            else model.faults(self.answer, self.problem["answer"])
        )
        return oracle_review(faults, correct, model)

    def _answer(self, agent: str, text: str, clipped: bool, extra: dict[str, Any]) -> None:
        """Grade and pay a solver's or refiner's answer (and an outcome critic's share of it)."""
        model = self.played.faults
        if agent == REFINER and self.refiner_mode == "patch" and model is not None:
            patched = model.patch(self.answer or "", text, self.problem["answer"])
            text = (self.answer or "") if patched is None else patched  # no patch: keep it
        verdict_obj = self._score(text)
        before = self.answer_verdict.score if self.answer_verdict is not None else None
        if before is not None:
            extra["improvement"] = verdict_obj.score - before
        self.answer, self.answer_verdict = text, verdict_obj
        self._graded[agent] = self._answer_info(self.turn, verdict_obj, clipped, **extra)
        self.rewards[agent] = revision_reward(
            verdict_obj.score, before, self.revision_reward, self.improvement_bonus
        )
        if agent == REFINER and self.critic_reward in ("outcome", "counterfactual"):
            # Not for feedback whose own check failed the audit (the latest critic info);
            # a counterfactual critic still bears a break it caused.
            paid = not self._graded[CRITIC].get("audit_failed")
            if self.critic_reward == "outcome":
                self.rewards[CRITIC] = verdict_obj.score if paid else 0.0
            else:
                change = self.counterfactual_weight * (verdict_obj.score - before)
                self.rewards[CRITIC] = change if paid else min(change, 0.0)


def env(wrapped: bool = True, **kwargs: Any) -> AECEnv:
    """Make a `ReflectionEnv`, order-enforced unless `wrapped=False`."""
    raw = ReflectionEnv(**kwargs)
    return wrappers.OrderEnforcingWrapper(raw) if wrapped else raw
