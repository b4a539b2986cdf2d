"""The embedded model's warm-start transcripts, on the ``unknown`` task (find the start).

Each role does what it does in the real setting, scaled down:

- the solver (and the ensemble variants and debaters) mostly answers at a glance, with no written
  steps: undoing several steps at once is the hard part, so a small model gets it wrong often.
  Some of its replies (``work_fraction``) work back from the stated end instead, one equation per
  step (``Work back from 21: 21 + 4 = 25. 25 - 7 = 18.``): far more often right, and rare in
  the SFT data, as careful written-out reasoning is in a real model's corpus. RL can make it
  the habit (`work_reply`);
- the critic checks the answer under review by substitution: it puts the answer in for x
  (``20 + 7 - 4 = 21?``), replays the steps forwards one equation each, in the drill rows' form
  (``20 + 7 = 27. 27 - 4 = 23.``), subtracts the stated end (``23 - 21 = 2: 2 too many``) and
  judges by whether that is 0. Replaying is easier than undoing (no step is inverted, each is
  read in the order written), so a critic beats a solver that answers at a glance. (Writing "25
  is not 21" instead left the verdict to an equality test between distant tokens that no build
  learned; rewriting the whole chain at each step, ``17 + 2 + 6 = 19 + 6``, left the head of the
  chain the weakest number of every check.)
- the refiner keeps an accepted answer and repairs a rejected one with the critic's measured
  miss (a start that ends 3 short was 3 too small) or, in some repairs (``rework_fraction``),
  works the problem out afresh (`work_reply`): a repair that does not lean on the critic's
  arithmetic, so a right answer the critic wrongly rejects is not necessarily lost;
- in ``math/tool-v0`` (``tool_fraction``; none in the shipped recipe) the analyzer restates the
  problem as a search (``Try each x from 0 to 99 until x + 7 - 4 = 21.``), the executor writes
  that search as a program (``print(next(x for x in range(100) if x + 7 - 4 == 21))``), so
  nothing is inverted and no arithmetic is done by the model, only copied, and the verifier
  checks the program's output by substitution like the critic. The programs under review are
  right or carry one copying slip (an operand or the end off by a little, or an operator
  flipped). (v12b's executor undid the steps itself, ``print(21 + 4 - 7)``: its programs
  followed the plan's signs in 17% of episodes and it was right 20% of the time.)

On ``reach`` (put + - * between numbers to reach a target, `envs.tasks.reach`), the gap family:

- the solver answers at a glance with a chain (``The answer is \\boxed{3 * 4 = 12, 12 + 8 =
  20}.``): choosing the operators is a search that one reply does not make, so a small model
  guesses, and its guesses are often wrong (`reach_solve_reply`);
- the critic replays the answer's operators on the problem's numbers, one step each, with its
  own results (not the answer's), then subtracts the target and judges by whether that is 0
  (``Check * +: 3 * 4 = 12. 12 + 8 = 20. 20 - 20 = 0: it checks.``, `reach_check_reply`): the
  same kind of check as on ``unknown``, but here it is far cheaper than solving;
- the refiner keeps an accepted chain and, after a rejection, answers with another chain
  (`reach_repair_reply`). The answers under review are right or carry the slips a guessing solver
  makes: one operator changed, a wholly other sequence, and either with the last result
  written as the target, as a solver that has learnt where chains end does (`reach_slip`).

The rows are played through the real environments, so the prompts are exactly those the agents
see later. Every target reply is right; the answers under review are right or carry the slips a
solver makes (off by a little, a step undone with the wrong sign, off by a lot).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import envs
from envs.tasks.arithmetic import APPLY
from envs.tasks.reach import OPERATORS as REACH_OPERATORS
from envs.tasks.reach import chain_text, evaluate
from envs.tasks.unknown import INVERSE, replay, undo_steps
from rewards.extract import last_boxed
from rewards.reach import Chain, parse_chain
from trainers.embedded.chat import chat_row


def solve_reply(problem: dict[str, Any], value: int | None = None) -> str:
    """A solver's answer at a glance (`value`, default the right start), no steps written."""
    return f"The answer is \\boxed{{{problem['metadata']['start'] if value is None else value}}}."


def work_reply(problem: dict[str, Any], value: int | None = None) -> str:
    """A solver's worked answer: undo the steps from the stated end backwards, one equation each
    (``Work back from 21: 21 + 4 = 25. 25 - 7 = 18. The answer is \\boxed{18}.``). Given a wrong
    `value`, the last equation carries the slip that ends there."""
    meta = problem["metadata"]
    start = meta["start"] if value is None else value
    current, lines = meta["end"], []
    for undo, k in undo_steps(meta):
        new = APPLY[undo](current, k)
        lines.append([current, undo, k, new])
        current = new
    lines[-1][3] = start
    steps = " ".join(f"{a} {op} {k} = {b}." for a, op, k, b in lines)
    return f"Work back from {meta['end']}: {steps} The answer is \\boxed{{{start}}}."


def solver_reply(
    problem: dict[str, Any], rng: random.Random, work_fraction: float, value: int | None = None
) -> str:
    """A solver-like reply ending at `value`: worked (`work_reply`) with chance `work_fraction`,
    else at a glance (`solve_reply`)."""
    if rng.random() < work_fraction:
        return work_reply(problem, value)
    return solve_reply(problem, value)


def equation(steps: list[list[Any]], start: str = "x") -> str:
    """The left side of a problem's equation from `start` (``x + 7 - 4``; ``20 + 7 - 4`` with a
    claimed start put in for x)."""
    return " ".join([start, *(f"{op} {k}" for op, k in steps)])


def check_reply(problem: dict[str, Any], claimed: int | None) -> str:
    """A critic reply: put `claimed` in for x (copying the problem's equation), replay the steps
    forwards one equation each (the drill rows' form, each step's operands copied from the
    restated equation just before), then subtract the stated end and judge by whether that is 0.

    ``Check 20: 20 + 7 - 4 = 21? 20 + 7 = 27. 27 - 4 = 23. 23 - 21 = 2: 2 too many.``
    """
    meta = problem["metadata"]
    if claimed is None:
        return "There is no answer to check.\nVerdict: incorrect"
    lines, end = replay(meta, claimed)
    target = meta["end"]
    restated = equation(meta["steps"], str(claimed))
    head = (
        f"Check {claimed}: {restated} = {target}? "
        f"{' '.join(lines)} {end} - {target} = {end - target}"
    )
    if end == target:
        return f"{head}: it checks.\nVerdict: correct"
    miss = f"{target - end} too few" if end < target else f"{end - target} too many"
    return f"{head}: {miss}.\nVerdict: incorrect"


def revision(claimed: int, start: int) -> str:
    """A refiner's reply that moves `claimed` to `start` (or keeps it when they are equal)."""
    if claimed == start:
        return f"The check passed. The answer is \\boxed{{{start}}}."
    gap = start - claimed
    if gap > 0:
        fix = f"It ends {gap} too few, so the start is {gap} more: {claimed} + {gap} = {start}."
    else:
        fix = f"It ends {-gap} too many, so the start is {-gap} less: {claimed} - {-gap} = {start}."
    return f"{fix} The answer is \\boxed{{{start}}}."


def repair_reply(problem: dict[str, Any], claimed: int | None, rework: bool = False) -> str:
    """A refiner reply after a correct check of `claimed`: keep it, or repair it by the miss
    (with `rework`, work a rejected answer out afresh instead: `work_reply`)."""
    if claimed is None:
        return solve_reply(problem)
    if rework and claimed != problem["metadata"]["start"]:
        return work_reply(problem)
    return revision(claimed, problem["metadata"]["start"])


SEARCH_RANGE = 100  # the executor's search covers every start (2..30) with room to spare


def plan_reply(problem: dict[str, Any]) -> str:
    """An analyzer's plan: the problem restated as a search over x
    (``Try each x from 0 to 99 until x + 7 - 4 = 21.``)."""
    meta = problem["metadata"]
    return (
        f"Try each x from 0 to {SEARCH_RANGE - 1} until {equation(meta['steps'])} = {meta['end']}."
    )


def program_reply(problem: dict[str, Any], slip: tuple[str, int, int] | None = None) -> str:
    """An executor's program: the plan's search, the arithmetic left to Python
    (``print(next(x for x in range(100) if x + 7 - 4 == 21))``).

    `slip` copies one thing wrong, as a transcription does: ``("sign", i, 0)`` flips step i's
    operator, ``("operand", i, d)`` adds d to step i's operand, ``("end", 0, d)`` adds d to the
    stated end. A slipped search may find no x; the program then prints nothing useful and
    fails (``next`` of an empty generator), as a real one would.
    """
    meta = problem["metadata"]
    steps, end = [list(step) for step in meta["steps"]], meta["end"]
    if slip is not None:
        kind, i, delta = slip
        if kind == "sign":
            steps[i][0] = INVERSE[steps[i][0]]
        elif kind == "operand":
            steps[i][1] = max(1, steps[i][1] + delta)
        elif kind == "end":
            end += delta
        else:
            raise ValueError(f"slip kind {kind!r}; expected 'sign', 'operand' or 'end'")
    search = f"next(x for x in range({SEARCH_RANGE}) if {equation(steps)} == {end})"
    return f"```python\nprint({search})\n```"


def program_slip(problem: dict[str, Any], rng: random.Random) -> tuple[str, int, int]:
    """A copying slip for `program_reply`: an operator flipped, an operand or the end off by
    1..3."""
    kind = rng.choice(("sign", "operand", "end"))
    index = rng.randrange(len(problem["metadata"]["steps"]))
    delta = 0 if kind == "sign" else rng.choice((-3, -2, -1, 1, 2, 3))
    return kind, 0 if kind == "end" else index, delta


def claimed_answer(text: str) -> int | None:
    """The integer in the last ``\\boxed{}`` of a reply, or None."""
    boxed = last_boxed(text)
    try:
        return int(boxed) if boxed is not None else None
    except ValueError:
        return None


def slip(problem: dict[str, Any], rng: random.Random) -> int:
    """A wrong start of the kind a solver gives: off by a little, a sign error, or off by a lot."""
    meta = problem["metadata"]
    start = meta["start"]
    kind = rng.random()
    if kind < 0.5:
        wrong = start + rng.choice([-1, 1]) * rng.randint(1, 5)
    elif kind < 0.8:
        _, k = rng.choice(meta["steps"])
        wrong = start + rng.choice([-2, 2]) * k
    else:
        wrong = start + rng.choice([-1, 1]) * rng.randint(6, 15)
    if wrong == start or wrong < 0:
        wrong = start + rng.randint(1, 5)
    return wrong


def _answer_text(
    problem: dict[str, Any], value: int, rng: random.Random, work_fraction: float
) -> str:
    """An answer under review: a solver's reply or a refiner's revision ending at `value`."""
    if rng.random() < 0.5:
        return solver_reply(problem, rng, work_fraction, value)
    return revision(max(value + rng.choice([-4, -2, -1, 0, 1, 3, 5]), 0), value)


# ---------------------------------------------------------------- reach (the gap family)


def reach_chain(problem: dict[str, Any], ops: Any = None, fudge: bool = False) -> str:
    """The chain of the problem's numbers under `ops` (default: the right ones); with `fudge`,
    the last result is written as the target whatever the step gives."""
    meta = problem["metadata"]
    ops = list(meta["operators"] if ops is None else ops)
    text = chain_text(meta["numbers"], ops)
    if not fudge:
        return text
    chain = parse_chain(text)
    assert chain is not None
    *head, (left, op, right, _) = chain.steps
    return Chain((*head, (left, op, right, meta["target"]))).text()


def reach_solve_reply(problem: dict[str, Any], chain: str | None = None) -> str:
    """A solver's chain at a glance (`chain`, default the right one), no search written."""
    return f"The answer is \\boxed{{{reach_chain(problem) if chain is None else chain}}}."


def reach_slip(problem: dict[str, Any], rng: random.Random) -> str:
    """A wrong chain of the kind a guessing solver gives: one operator changed (60%) or another
    sequence (40%), its last result written as the target half the time (a chain that "lands"
    by false arithmetic)."""
    meta = problem["metadata"]
    right = list(meta["operators"])
    if rng.random() < 0.6:
        ops = list(right)
        i = rng.randrange(len(ops))
        ops[i] = rng.choice([op for op in REACH_OPERATORS if op != ops[i]])
    else:
        ops = right
        while ops == right:
            ops = [rng.choice(REACH_OPERATORS) for _ in right]
    fudge = rng.random() < 0.5
    return reach_chain(problem, ops, fudge)


def reach_check_reply(problem: dict[str, Any], answer: str | None) -> str:
    """A critic reply on the chain stated in `answer` (a reply's text): replay its operators on
    the problem's numbers with its own results, subtract the target, judge by whether that is 0.

    ``Check * -: 3 * 4 = 12. 12 - 8 = 4. 4 - 20 = -16: 16 too few.``
    """
    meta = problem["metadata"]
    boxed = last_boxed(answer) if answer else None
    chain = parse_chain(boxed) if boxed is not None else None
    if chain is None or len(chain.steps) != len(meta["numbers"]) - 1:
        return "There is no answer to check.\nVerdict: incorrect"
    ops = [op for _, op, _, _ in chain.steps]
    values = evaluate(meta["numbers"], ops)
    steps = " ".join(
        f"{values[i]} {op} {meta['numbers'][i + 1]} = {values[i + 1]}." for i, op in enumerate(ops)
    )
    end, target = values[-1], meta["target"]
    head = f"Check {' '.join(ops)}: {steps} {end} - {target} = {end - target}"
    if end == target:
        return f"{head}: it checks.\nVerdict: correct"
    miss = f"{target - end} too few" if end < target else f"{end - target} too many"
    return f"{head}: {miss}.\nVerdict: incorrect"


def reach_repair_reply(problem: dict[str, Any], answer: str | None, accepted: bool) -> str:
    """A refiner reply: keep an accepted chain, or answer a rejected one with the right chain."""
    boxed = last_boxed(answer) if answer else None
    if accepted and boxed is not None:
        return f"The check passed. The answer is \\boxed{{{boxed}}}."
    return f"The check failed. The answer is \\boxed{{{reach_chain(problem)}}}."


def reach_fact(rng: random.Random) -> str:
    """One fact of the kinds a ``reach`` check states: a step of 2..9 on a value up to 150
    (a product kept below 200, where every number is one token), or a value minus a target."""
    kind = rng.random()
    if kind < 0.4:
        k = rng.randint(2, 9)
        a = rng.randint(1, 199 // k)
        return f"{a} * {k} = {a * k}."
    if kind < 0.75:
        a, k, op = rng.randint(1, 150), rng.randint(2, 9), rng.choice("+-")
        return f"{a} {op} {k} = {APPLY[op](a, k)}."
    b = rng.randint(1, 150)
    a = max(0, b + rng.choice([0, 0, rng.randint(-40, 40)]))
    return f"{a} - {b} = {a - b}."


def drill_rows(count: int, facts: int, seed: int, reach_share: float = 0.0) -> list[dict[str, Any]]:
    """Arithmetic drill rows (``role`` "drill"): each reply states `facts` sums and differences
    of the kinds the critic and the refiner work out (``17 + 6 = 23. 25 - 21 = 4.``), a share
    `reach_share` of the rows those of a ``reach`` check instead (`reach_fact`: products too).

    A transcript row holds two or three such facts; a drill row holds many, so the small model
    meets each fact of its table far more often for the same compute.
    """
    rng = random.Random(seed)
    reach_rows = random.Random(f"reach-drill-{seed}")
    rows = []
    for _ in range(count):
        stated = []
        reach = reach_share > 0 and reach_rows.random() < reach_share
        for _ in range(facts):
            if reach:
                stated.append(reach_fact(reach_rows))
            elif rng.random() < 0.6:  # a step of the chain: a value and a step of 2..9
                a, k = rng.randint(0, 70), rng.randint(2, 9)
                op = rng.choice("+-")
                stated.append(f"{a} {op} {k} = {APPLY[op](a, k)}.")
            else:  # the comparison: a result minus the stated one
                b = rng.randint(1, 60)
                a = max(0, b + rng.randint(-20, 20))
                stated.append(f"{a} - {b} = {a - b}.")
        rows.append(
            {
                "messages": [
                    {"role": "system", "content": "Practice."},
                    {"role": "user", "content": "Work out each line."},
                    {"role": "assistant", "content": " ".join(stated)},
                ],
                "role": "drill",
            }
        )
    return rows


def sft_rows(
    problems: list[dict[str, Any]],
    seed: int,
    review_fraction: float = 1.0,
    second_round: float = 0.5,
    team_fraction: float = 0.2,
    work_fraction: float = 0.0,
    rework_fraction: float = 0.0,
    tool_fraction: float = 0.0,
) -> list[dict[str, Any]]:
    """Chat rows (``messages`` and ``role``) for every role, played through the real envs.

    Args:
        problems: ``unknown`` and ``reach`` problems (`reach_rows` plays the latter).
        seed: seeds the answers under review.
        review_fraction: share of problems that give a first-round critic and refiner row.
        second_round: share of those that also give a second-round critic and refiner row.
        team_fraction: share of problems that give an ensemble-variant or debater row.
        work_fraction: share of solver-like replies (solver, variant, debater, and the answers
            under review) worked step by step (`work_reply`); the rest answer at a glance.
        rework_fraction: share of the refiner's repairs of a rejected answer that work the
            problem out afresh (`work_reply`) instead of applying the critic's miss. Drawn from a
            stream of its own, so the other rows do not depend on it.
        tool_fraction: share of problems that give a ``math/tool-v0`` analyzer, executor and
            verifier row and the executor's second-round row (its programs really run in the
            sandbox). Drawn from a stream of its own, like `rework_fraction`.
    """
    rng = random.Random(seed)
    rework = random.Random(f"rework-{seed}")
    tooled = random.Random(f"tool-{seed}")
    reflection = envs.make("math/reflection-v0", rounds=2, task="unknown", wrapped=False)
    ensemble = envs.make("math/ensemble-v0", num_agents=4, task="unknown")
    debate = envs.make("math/debate-v0", num_agents=2, rounds=2, task="unknown")
    tool = envs.make("math/tool-v0", rounds=2, task="unknown", wrapped=False)
    reach_envs = (
        envs.make("math/reflection-v0", rounds=2, task="reach", wrapped=False),
        envs.make("math/ensemble-v0", num_agents=4, task="reach"),
        envs.make("math/debate-v0", num_agents=2, rounds=2, task="reach"),
    )
    family_envs = _family_envs(problems)
    rows: list[dict[str, Any]] = []
    for problem in problems:
        source = problem["metadata"].get("source")
        if source in family_envs:  # a task family's scripted turns (`EmbeddedPart.rows`)
            turns = envs.get_family(source).embedded.rows(
                problem,
                rng,
                *family_envs[source],
                review_fraction,
                second_round,
                team_fraction,
                work_fraction,
            )
            rows += [chat_row(obs, reply, role) for obs, reply, role in turns]
            continue
        if problem["metadata"].get("source") == "reach":
            rows.extend(
                reach_rows(problem, rng, *reach_envs, review_fraction, second_round, team_fraction)
            )
            continue
        rows += reflection_rows(
            problem,
            reflection,
            rng,
            review_fraction,
            second_round,
            work_fraction,
            lambda: rework.random() < rework_fraction,
        )
        if rng.random() < team_fraction:
            rows.append(team_row(problem, ensemble, debate, rng, work_fraction))
        if tooled.random() < tool_fraction:
            rows += tool_rows(problem, tool, tooled)
    return rows


def family_protocol(task: str) -> dict[str, Any]:
    """How a run on the task family `task` has its refiner play (the family's run defaults for
    reflection, `envs.tasks.family.TaskFamily.run_defaults`: a colouring's refiner patches and
    is shown the first named clash); its transcripts are played through it."""
    run = envs.spec("math/reflection-v0").run_defaults(task)
    return {name: run[name] for name in ("refiner_mode", "feedback") if name in run}


def _family_envs(problems: list[dict[str, Any]]) -> dict[str, tuple[Any, ...]]:
    """Per task family with an embedded part among `problems`, the envs its rows are played
    through (reflection as a run on the family plays it, `family_protocol`; an ensemble, a
    debate)."""
    names = {p["metadata"].get("source") for p in problems}
    return {
        family.name: (
            envs.make(
                "math/reflection-v0",
                rounds=2,
                task=family.name,
                wrapped=False,
                **family_protocol(family.name),
            ),
            envs.make("math/ensemble-v0", num_agents=4, task=family.name),
            envs.make("math/debate-v0", num_agents=2, rounds=2, task=family.name),
        )
        for family in envs.families()
        if family.embedded is not None and family.name in names
    }


def reflection_rows(
    problem: dict[str, Any],
    reflection: Any,
    rng: random.Random,
    review_fraction: float,
    second_round: float,
    work_fraction: float,
    rework: Callable[[], bool],
) -> list[dict[str, Any]]:
    """The ``math/reflection-v0`` rows of one ``unknown`` problem: a solver row; with chance
    `review_fraction` a critic and refiner row on an answer right or slipped (`review_rows`),
    and with `second_round` a second pair on a revision right or slipped. `rework` draws
    whether a repair works the problem out afresh."""
    start = problem["metadata"]["start"]
    reflection.reset(options={"problem": problem})
    solved = solver_reply(problem, rng, work_fraction)
    rows = [chat_row(reflection.observe("solver_0"), solved, "solver")]
    if rng.random() < review_fraction:
        claimed = start if rng.random() < 0.5 else slip(problem, rng)
        shown = solver_reply(problem, rng, work_fraction, claimed)
        rows += review_rows(problem, reflection, shown, claimed, rework())
        if rng.random() < second_round:
            again = start if rng.random() < 0.5 else slip(problem, rng)
            shown = _answer_text(problem, again, rng, work_fraction)
            rows += review_rows(problem, reflection, shown, again, rework())
    return rows


def review_rows(
    problem: dict[str, Any], reflection: Any, shown: str, claimed: int, rework: bool
) -> list[dict[str, Any]]:
    """One review round of `reflection`: the answer `shown` (ending at `claimed`) is stepped,
    then the critic's row (`check_reply`) and the refiner's (`repair_reply`, afresh with
    `rework`)."""
    reflection.step(shown)
    check = check_reply(problem, claimed)
    rows = [chat_row(reflection.observe("critic_0"), check, "critic")]
    reflection.step(check)
    repair = repair_reply(problem, claimed, rework)
    rows.append(chat_row(reflection.observe("refiner_0"), repair, "refiner"))
    return rows


def team_row(
    problem: dict[str, Any], ensemble: Any, debate: Any, rng: random.Random, work_fraction: float
) -> dict[str, Any]:
    """An ensemble variant's row or (half the time) a debater's, answering after a shown
    answer and another's slip."""
    start = problem["metadata"]["start"]
    claimed = start if rng.random() < 0.5 else slip(problem, rng)
    shown = solver_reply(problem, rng, work_fraction, claimed)
    if rng.random() < 0.5:
        obs, _ = ensemble.reset(options={"problem": problem})
        reply = solver_reply(problem, rng, work_fraction)
        return chat_row(obs[rng.choice(ensemble.agents)], reply, "variant")
    debate.reset(options={"problem": problem})
    other = solver_reply(problem, rng, work_fraction, slip(problem, rng))
    obs, *_ = debate.step({"debater_0": shown, "debater_1": other})
    return chat_row(obs["debater_0"], solver_reply(problem, rng, work_fraction), "debater")


def tool_rows(problem: dict[str, Any], tool: Any, tooled: random.Random) -> list[dict[str, Any]]:
    """The ``math/tool-v0`` rows of one problem: the analyzer's plan, the executor's program,
    the verifier's check of a program right or slipped (run in the sandbox), and the
    executor's second-round program."""
    tool.reset(options={"problem": problem})
    plan = plan_reply(problem)
    rows = [chat_row(tool.observe("analyzer_0"), plan, "analyzer")]
    tool.step(plan)
    rows.append(chat_row(tool.observe("executor_0"), program_reply(problem), "executor"))
    slipped = None if tooled.random() < 0.5 else program_slip(problem, tooled)
    tool.step(program_reply(problem, slipped))
    output = tool.infos["executor_0"]["extracted"]
    check = check_reply(problem, None if output is None else int(output))
    rows.append(chat_row(tool.observe("verifier_0"), check, "verifier"))
    tool.step(check)
    rows.append(chat_row(tool.observe("executor_0"), program_reply(problem), "executor"))
    return rows


def reach_rows(
    problem: dict[str, Any],
    rng: random.Random,
    reflection: Any,
    ensemble: Any,
    debate: Any,
    review_fraction: float,
    second_round: float,
    team_fraction: float,
) -> list[dict[str, Any]]:
    """The rows of one ``reach`` problem, played through the given (``reach``) envs: a solver
    row; with chance `review_fraction` a critic and refiner row (and with `second_round` a
    second pair, on a revision right or slipped); with `team_fraction` a variant or debater
    row. Every target reply is right."""
    rows: list[dict[str, Any]] = []

    def add(obs: dict[str, str], reply: str, role: str) -> None:
        rows.append(chat_row(obs, reply, role))

    def answer() -> str:
        return reach_solve_reply(problem, None if rng.random() < 0.5 else reach_slip(problem, rng))

    reflection.reset(options={"problem": problem})
    add(reflection.observe("solver_0"), reach_solve_reply(problem), "solver")
    if rng.random() < review_fraction:
        for round_ in range(2):
            if round_ == 1 and rng.random() >= second_round:
                break
            shown = answer()
            reflection.step(shown)
            check = reach_check_reply(problem, shown)
            add(reflection.observe("critic_0"), check, "critic")
            reflection.step(check)
            accepted = check.endswith("Verdict: correct")
            add(
                reflection.observe("refiner_0"),
                reach_repair_reply(problem, shown, accepted),
                "refiner",
            )
    if rng.random() < team_fraction:
        if rng.random() < 0.5:
            obs, _ = ensemble.reset(options={"problem": problem})
            add(obs[rng.choice(ensemble.agents)], reach_solve_reply(problem), "variant")
        else:
            debate.reset(options={"problem": problem})
            obs, *_ = debate.step({"debater_0": answer(), "debater_1": answer()})
            add(obs["debater_0"], reach_solve_reply(problem), "debater")
    return rows
