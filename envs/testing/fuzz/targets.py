"""The fuzz targets: one thing under test and one property each (`Target`), and the whole set
(`all_targets`): every env x task, every verifier (responses, bad references, from a thread),
``verify_batch``, the TRL reward adapter, the extraction functions and the inputs that were once
slow."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st
from pettingzoo import ParallelEnv

import envs
from envs.reflection import parse_verdict
from envs.testing.fuzz.generators import (
    KNOWN_SLOW,
    MATH_REFERENCES,
    NON_STRINGS,
    SYMBOLIC_CLASSES,
    TASKS,
    adversarial_text,
    references_for,
    register_odd_task,
    symbolic_answer,
    trl_completion,
)
from envs.testing.fuzz.properties import check_verdict, play_aec, play_parallel
from envs.testing.fuzz.timing import (
    CALL_BOUND_S,
    COLLECTOR,
    in_thread,
    size_allowance,
    symbolic_budget,
    timed,
    timed_out,
)
from envs.testing.fuzz.verifiers import build_verifier, helper_start_s, warm_up
from rewards import (
    as_reward_func,
    list_verifiers,
    verify_batch,
)
from rewards import extract as rx

REFERENCE_CHAR_LIMIT = {"similarity": 64}
"""Adversarial references are cut to this many characters for these verifiers. `similarity`
runs difflib's SequenceMatcher (autojunk off) over up to 2000 characters of each side; its time
grows superlinearly when both sides repeat a few characters: a 2000-character response against a
400-character reference "aaaa..." takes ~17 s, against "\\,"*1000 ~200 s (found by this fuzz;
natural references, such as GSM8K solutions, stay under 0.3 s)."""


@dataclass(frozen=True)
class Target:
    """One thing under test and its property.

    Args:
        name: the table row, e.g. ``verify[math]`` or ``env[math/debate-v0|arithmetic]``.
        check: ``check(data)`` draws inputs from a Hypothesis ``st.data()`` object and raises
            when the property fails.
        scale: this target's share of the example budget (slow targets use less).
    """

    name: str
    check: Callable[[Any], None]
    scale: float = 1.0


def verify_target(name: str, math_budget_s: float | None = None) -> Target:
    """``verify(adversarial response, valid reference)``: never raises, bounded, valid Verdict."""
    verifier = build_verifier(name, math_budget_s)
    target = f"verify[{name}]"
    budget = symbolic_budget(verifier)
    references = references_for(name)

    def check(data: Any) -> None:
        response = data.draw(adversarial_text(), label="response")
        reference = data.draw(st.sampled_from(references), label="reference")
        COLLECTOR.input(target)
        with timed(target, lambda: CALL_BOUND_S + budget, target, (response, reference)) as box:
            verdict = verifier.verify(response, reference)
            box["timed_out"] = timed_out(getattr(verdict, "reason", ""))
        check_verdict(verdict, target)

    return Target(target, check)


def reference_target(name: str, math_budget_s: float | None = None) -> Target:
    """An adversarial reference (and response): a `Verdict` or the documented ValueError.

    References are data, not model output, and are read whole: the bound adds
    `size_allowance` (linear in the reference's length) to that of `verify_target`.
    """
    verifier = build_verifier(name, math_budget_s)
    target = f"verify_bad_reference[{name}]"
    budget = symbolic_budget(verifier)

    limit = REFERENCE_CHAR_LIMIT.get(name)

    def check(data: Any) -> None:
        reference = data.draw(st.one_of(adversarial_text(), NON_STRINGS), label="reference")
        if limit is not None and isinstance(reference, str):
            reference = reference[-limit:]
        response = data.draw(adversarial_text(), label="response")
        COLLECTOR.input(target)
        bound = CALL_BOUND_S + budget + size_allowance(reference)
        with timed(target, lambda: bound, target, (response, reference)) as box:
            try:
                verdict = verifier.verify(response, reference)
            except ValueError as err:
                verdict = None
                assert str(err), "a ValueError must say what was wrong"
            box["timed_out"] = timed_out(getattr(verdict, "reason", ""))
        if verdict is not None:
            # Reasons quote the reference, so a reference with a lone surrogate gives one too.
            check_verdict(verdict, target, printable=False)

    return Target(target, check, scale=0.5)


def thread_target(name: str, math_budget_s: float | None = None) -> Target:
    """`verify_target` from a non-main thread, where math-verify's signal timeout cannot work.

    The bound adds two helper-process start-ups (a helper that misses its deadline is killed
    and the next call starts a fresh one) to the symbolic budget.
    """
    verifier = build_verifier(name, math_budget_s)
    target = f"verify_in_thread[{name}]"
    budget = symbolic_budget(verifier)
    references = references_for(name)

    def check(data: Any) -> None:
        start_s = helper_start_s() if budget else 0.0
        response = data.draw(adversarial_text(), label="response")
        reference = data.draw(st.sampled_from(references), label="reference")
        COLLECTOR.input(target)
        bound = CALL_BOUND_S + budget + 2 * start_s + 1.0
        with timed(target, lambda: bound, target, (response, reference)) as box:
            verdict = in_thread(
                verifier.verify, response, reference, wait=COLLECTOR.hang_after(2 * bound + 5)
            )
            box["timed_out"] = timed_out(getattr(verdict, "reason", ""))
        check_verdict(verdict, target)

    return Target(target, check, scale=0.5)


def batch_target(math_budget_s: float | None = None) -> Target:
    """``verify_batch`` (serial path) agrees with one-by-one ``verify`` on adversarial batches."""
    target = "verify_batch"
    verifiers = {name: build_verifier(name, math_budget_s) for name in list_verifiers()}

    def check(data: Any) -> None:
        name = data.draw(st.sampled_from(sorted(verifiers)), label="verifier")
        verifier = verifiers[name]
        responses = data.draw(st.lists(adversarial_text(), min_size=0, max_size=6), label="rs")
        references = [
            data.draw(st.sampled_from(references_for(name)), label="reference") for _ in responses
        ]
        COLLECTOR.input(target)
        bound = CALL_BOUND_S + len(responses) * (CALL_BOUND_S + symbolic_budget(verifier))
        with timed(target, lambda: bound, f"{target}[{name}]", responses) as box:
            verdicts = verify_batch(verifier, responses, references, num_workers=1)
            box["timed_out"] = any(timed_out(v.reason) for v in verdicts)
        assert len(verdicts) == len(responses)
        for verdict, response, reference in zip(verdicts, responses, references, strict=True):
            check_verdict(verdict, target)
            again = verifier.verify(response, reference)
            if not (timed_out(verdict.reason) or timed_out(again.reason)):
                assert again.score == verdict.score, (again, verdict)

    return Target(target, check, scale=0.5)


def reward_func_target(math_budget_s: float | None = None) -> Target:
    """The TRL adapter: one float in [0, 1] per row, None exactly where the reference is None."""
    target = "as_reward_func"
    funcs = {name: as_reward_func(build_verifier(name, math_budget_s)) for name in list_verifiers()}
    budgets = {name: symbolic_budget(build_verifier(name, math_budget_s)) for name in funcs}

    def check(data: Any) -> None:
        name = data.draw(st.sampled_from(sorted(funcs)), label="verifier")
        completions = data.draw(st.lists(trl_completion(), max_size=5), label="completions")
        answers = [
            data.draw(st.one_of(st.none(), st.sampled_from(references_for(name))), label="ref")
            for _ in completions
        ]
        COLLECTOR.input(target)
        bound = CALL_BOUND_S + len(completions) * (CALL_BOUND_S + budgets[name])
        with timed(target, lambda: bound, f"{target}[{name}]", completions):
            scores = funcs[name](completions, answer=answers, prompt=["p"] * len(completions))
        assert len(scores) == len(completions)
        for score, answer in zip(scores, answers, strict=True):
            if answer is None:
                assert score is None
            else:
                assert isinstance(score, float) and math.isfinite(score) and 0 <= score <= 1

    return Target(target, check)


def extract_target() -> Target:
    """``rewards.extract`` on adversarial text: no exception, bounded, printable results.

    ``analyze``/``extract_answer``/``sanitize`` read the last 4000 characters: `CALL_BOUND_S`
    whatever the size. ``find_boxed``, ``last_boxed``, ``has_closed_box``, ``prepare_reference``
    and ``canonical_answer`` read all of their text (references, extracted answers): they get
    `size_allowance` on top, i.e. they must stay linear.
    """
    target = "extract"
    whole = "extract (whole-text helpers)"
    warm_up()

    def check(data: Any) -> None:
        texts = data.draw(st.lists(adversarial_text(), min_size=1, max_size=4), label="texts")
        COLLECTOR.input(target)
        for text in texts:
            with timed(target, lambda: CALL_BOUND_S, target, text):  # reads the tail only
                answer = rx.extract_answer(text)
                found = rx.analyze(text)
                clean = rx.sanitize(text)
                answer_key = rx.canonical_answer(answer) if answer is not None else ""
            COLLECTOR.input(whole)
            with timed(whole, lambda t=text: CALL_BOUND_S + size_allowance(t), whole, text):
                boxes = rx.find_boxed(text)
                last = rx.last_boxed(text)
                closed = rx.has_closed_box(text)
                bare = rx.prepare_reference(text)
                key = rx.canonical_answer(text)
            assert answer == found.answer
            assert found.kind in rx.KINDS
            assert (answer is None) == (found.kind == "none")
            assert last == (boxes[-1] if boxes else None)
            assert isinstance(closed, bool) and (not closed or boxes)
            assert all(isinstance(m, str) and m for m in found.markers)
            clean.encode("utf-8")
            (answer or "").encode("utf-8")
            assert isinstance(bare, str) and isinstance(key, str) and isinstance(answer_key, str)
        with timed(target, lambda: CALL_BOUND_S * len(texts), "majority_vote", texts):
            answers = [rx.extract_answer(t) for t in texts]
            winner, votes = rx.majority_vote(answers)
        assert 0 <= votes <= len(texts)
        assert (winner is None) == (votes == 0)
        assert winner is None or winner in answers

    return Target(target, check, scale=1.0)


def env_target(env_id: str, task: str, scale: float = 1.0) -> Target:
    """Full episodes of `env_id` on `task` with adversarial actions from every agent."""
    register_odd_task()
    warm_up()
    target = f"env[{env_id}:{task}]"

    def check(data: Any) -> None:
        # Each turn's full grade (the verifier's reason times the step) as it is taken: the
        # trainer's view (`envs.core.TaskEnvMixin`); check_env checks what agents are shown.
        env = envs.make(env_id, task=task, per_step_rewards=True)
        raw = getattr(env, "unwrapped", env)
        seed = data.draw(st.integers(0, 2**31 - 1), label="seed")
        budget = symbolic_budget(raw.verifier) if hasattr(raw, "verifier") else 0.0
        # an env that runs the agents' programs (tool-v0, code-v0) may take a step as long as
        # its sandbox lets a program run: bounded by design, the sandbox kills it there
        program_s = float(getattr(getattr(raw, "sandbox", None), "timeout_s", 0.0) or 0.0)
        COLLECTOR.input(target)
        if isinstance(raw, ParallelEnv):
            play_parallel(env, raw, data, seed, target, budget, program_s)
        else:
            play_aec(env, raw, data, seed, target, budget, program_s)

    return Target(target, check, scale=scale)


KNOWN_SLOW_CALLS: dict[str, Callable[[str], Any]] = {
    "parse_verdict": parse_verdict,
    "extract_answer": rx.extract_answer,
    "canonical_answer": rx.canonical_answer,
    "find_boxed": rx.find_boxed,
    "prepare_reference": rx.prepare_reference,
}
"""The functions other than the verifiers that `known_slow_target` times on each input."""


def known_slow_target(math_budget_s: float | None = None) -> Target:
    """Each input of `KNOWN_SLOW` through every verifier (as a response) and every function of
    `KNOWN_SLOW_CALLS`, each call within the input's own bound (the verifier's symbolic budget
    added): the regressions the fuzz found stay fixed.

    Draws nothing, so Hypothesis runs it once whatever the example budget.
    """
    target = "known_slow"
    verifiers = {name: build_verifier(name, math_budget_s) for name in list_verifiers()}

    def check(data: Any) -> None:
        for key, (text, bound) in KNOWN_SLOW.items():
            COLLECTOR.input(target)
            for name, verifier in verifiers.items():
                reference = references_for(name)[0]  # "e", "18" or a reach chain
                limit = bound + symbolic_budget(verifier)
                with timed(target, lambda b=limit: b, f"{name}.verify on {key!r}", text) as box:
                    verdict = verifier.verify(text, reference)
                    box["timed_out"] = timed_out(verdict.reason)
                check_verdict(verdict, f"{name}.verify on {key!r}")
            for call, function in KNOWN_SLOW_CALLS.items():
                with timed(target, lambda b=bound: b, f"{call} on {key!r}", text):
                    function(text)

    return Target(target, check)


SYMBOLIC_WRAPPERS = (
    "\\boxed{%s}",
    "The answer is $%s$.",
    "<answer>%s</answer>",
    "So we get\n\\[ %s \\]\n#### %s",
)
"""How `symbolic_target` states its answers (``%s``: the answer)."""


def symbolic_target(kind: str, math_budget_s: float | None = None) -> Target:
    """Answers of one costly kind (`envs.testing.fuzz.generators.symbolic_answer`) through the
    `math` verifier against its references: a valid `Verdict` within `CALL_BOUND_S` plus the
    symbolic budget. The table's row ``symbolic[<kind>]`` gives the p50, p99 and max seconds per
    call of that kind (issue 52's benchmark: ``scripts/fuzz.py --only '^symbolic\\['``)."""
    verifier = build_verifier("math", math_budget_s)
    target = f"symbolic[{kind}]"
    budget = symbolic_budget(verifier)

    def check(data: Any) -> None:
        answer = data.draw(symbolic_answer(kind), label="answer")
        wrapper = data.draw(st.sampled_from(SYMBOLIC_WRAPPERS), label="wrapper")
        reference = data.draw(st.sampled_from(MATH_REFERENCES), label="reference")
        response = wrapper.replace("%s", answer)
        COLLECTOR.input(target)
        with timed(target, lambda: CALL_BOUND_S + budget, target, (answer, reference)) as box:
            verdict = verifier.verify(response, reference)
            box["timed_out"] = timed_out(verdict.reason)
        check_verdict(verdict, target)

    return Target(target, check)


# ---------------------------------------------------------------- the whole set

ENV_SCALE_VAR = "MATHTEAMS_FUZZ_ENV_SCALE"
"""``"math/tool-v0=0.2,math/debate-v0=0.5"``: an env's share of the example budget."""


def env_scales(spec: str | None = None) -> dict[str, float]:
    """Per-env example scales from ``spec`` or the `ENV_SCALE_VAR` environment variable.

    Raises:
        ValueError: an entry is not ``env_id=number`` with a number >= 0.
    """
    text = os.environ.get(ENV_SCALE_VAR, "") if spec is None else spec
    scales: dict[str, float] = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        env_id, sep, value = entry.partition("=")
        try:
            scale = float(value)
        except ValueError:
            scale = -1.0
        if not sep or not env_id.strip() or not scale >= 0:
            raise ValueError(
                f"{ENV_SCALE_VAR}: expected 'env_id=scale' entries (scale >= 0), got {entry!r}"
            )
        scales[env_id.strip()] = scale
    return scales


def all_targets(
    math_budget_s: float | None = None,
    env_scale: dict[str, float] | None = None,
    pattern: str | None = None,
) -> list[Target]:
    """Every target: each env x task, each verifier (responses, references, thread), the batch
    API, the TRL adapter, the extraction functions, the known slow inputs and the `math`
    verifier on each kind of costly answer (`symbolic_target`).

    Args:
        math_budget_s: see `build_verifier` (None: the verifiers' defaults).
        env_scale: per-env share of the example budget (default `env_scales()`).
        pattern: keep only targets whose name matches this regular expression.
    """
    scales = env_scales() if env_scale is None else env_scale
    regex = re.compile(pattern) if pattern else None
    factories: list[tuple[str, Callable[[], Target]]] = []
    for env_id in envs.list_envs():
        for task in TASKS:
            factories.append(
                (
                    f"env[{env_id}:{task}]",
                    lambda e=env_id, t=task: env_target(e, t, scales.get(e, 1.0)),
                )
            )
    for name in list_verifiers():
        factories += [
            (f"verify[{name}]", lambda n=name: verify_target(n, math_budget_s)),
            (f"verify_bad_reference[{name}]", lambda n=name: reference_target(n, math_budget_s)),
            (f"verify_in_thread[{name}]", lambda n=name: thread_target(n, math_budget_s)),
        ]
    factories += [
        ("verify_batch", lambda: batch_target(math_budget_s)),
        ("as_reward_func", lambda: reward_func_target(math_budget_s)),
        ("extract", extract_target),
        ("known_slow", lambda: known_slow_target(math_budget_s)),
    ]
    factories += [
        (f"symbolic[{kind}]", lambda k=kind: symbolic_target(k, math_budget_s))
        for kind in SYMBOLIC_CLASSES
    ]
    return [build() for name, build in factories if regex is None or regex.search(name)]
