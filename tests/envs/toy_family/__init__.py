"""A toy task family, declared in one folder (`tests/envs/test_task_family.py` registers it in
one line): its generator and scorer, prompts, run defaults, scripted turns and probe."""

from __future__ import annotations

from envs.tasks.family import EmbeddedPart, FamilyProbe, Levels, TaskFamily
from tests.envs.toy_family.generate import LastDigitVerifier, generate_problem


def rows(problem, rng, reflection, ensemble, debate, *fractions):
    """The scripted turns: the solver states the right digit, the critic accepts it."""
    reflection.reset(options={"problem": problem})
    solved = f"\\boxed{{{problem['answer']}}}"
    turns = [(reflection.observe("solver_0"), solved, "solver")]
    reflection.step(solved)
    turns.append((reflection.observe("critic_0"), "Verdict: correct", "critic"))
    return turns


def probe_run(policy, env, args):
    """One line: the share of the policy's first answers that are right."""
    from envs.tasks import make_task

    problems = list(make_task("toy", split="validation", size=args.problems).source)
    observations = []
    for problem in problems:
        env.reset(options={"problem": problem})
        observations.append(env.observe("solver_0"))
    answers = policy.act(observations)
    pairs = zip(answers, problems, strict=True)
    right = sum(env.verifier.verify(a, p["answer"]).score for a, p in pairs)
    yield f"toy solver right {right / len(problems):.2f}"


FAMILY = TaskFamily(
    "toy",
    generate_problem,
    Levels((1, 2, 3), default=(1, 2)),
    verifier="toy_last_digit",
    verifiers={"toy_last_digit": LastDigitVerifier},
    answer_format="end with the digit in \\boxed{}.",
    instructions={"solver": "Add the digits; {answer_format}"},
    run_defaults={"math/reflection-v0": {"audit": "", "max_completion_length": 8}},
    embedded=EmbeddedPart(rows=rows, fields={"toy_drill_rows": 0}, model="model-toy"),
    probe=FamilyProbe(
        "how a model adds digits",
        "The toy probe.",
        lambda parser: parser.add_argument("--problems", type=int, default=4),
        probe_run,
    ),
)
