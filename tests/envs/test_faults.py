"""Named faults (`envs.tasks.faults`) in math/reflection-v0 on ``coloring``: the critic names a
clashing edge, the refiner patches, the verifier plays the critic, the feedback forms."""

from __future__ import annotations

import pytest

import envs
from envs.tasks.coloring import ColoringFaults
from envs.tasks.coloring.verifier import read_reference
from envs.tasks.faults import feedback_text, oracle_review


def _problem(level: int = 2) -> dict:
    return envs.make_task("coloring", split="validation", size=4, difficulty=level).source[0]


def _colours(problem: dict) -> list[str]:
    return problem["metadata"]["solution"].split()[1::2]


def _spell(colours: list[str]) -> str:
    return "\\boxed{" + " ".join(f"{v} {c}" for v, c in enumerate(colours)) + "}"


def _slip(problem: dict) -> tuple[list[str], int, str]:
    """The solution with one free vertex recoloured (it clashes: the colouring is unique),
    the vertex and its right colour."""
    colours = _colours(problem)
    fixed = {v for v, _ in problem["metadata"]["fixed"]}
    vertex = next(v for v in range(len(colours)) if v not in fixed)
    right = colours[vertex]
    colours[vertex] = next(c for c in "ABC" if c != right)
    return colours, vertex, right


def _episode(problem: dict, **options) -> envs.ReflectionEnv:
    env = envs.make("math/reflection-v0", task="coloring", per_step_rewards=True, **options)
    env.reset(options={"problem": problem})
    return env.unwrapped


def test_faults_are_the_clashing_edges_in_listed_order() -> None:
    problem = _problem()
    model = ColoringFaults()
    assert model.faults(_spell(_colours(problem)), problem["answer"]) == []
    wrong, vertex, _ = _slip(problem)
    faults = model.faults("I think " + _spell(wrong), problem["answer"])
    instance = read_reference(problem["answer"])
    expected = [f"{u} {v}" for u, v in instance.edges if wrong[u] == wrong[v]]
    assert faults == expected and faults
    assert all(str(vertex) in fault.split() for fault in faults)
    assert model.faults("no colouring here", problem["answer"]) == []


def test_named_faults_read_bad_lines_canonically_and_bounded() -> None:
    model = ColoringFaults()
    assert model.named("BAD 5 2, BAD 1 3. Verdict: incorrect") == ["2 5", "1 3"]
    assert model.named("OK. Verdict: correct") == []
    assert model.named(None) == []  # type: ignore[arg-type]
    assert model.named("BAD 1 2 " * 10_000) == ["1 2"]
    assert model.named("BAD 99999 1") == []  # a vertex past four digits is not read


def test_patch_lays_pieces_over_the_latest_colouring() -> None:
    problem = _problem()
    wrong, vertex, right = _slip(problem)
    model = ColoringFaults()
    patched = model.patch(_spell(wrong), f"Fix: \\boxed{{{vertex} {right}}}", problem["answer"])
    assert patched == _spell(_colours(problem))
    assert model.patch(_spell(wrong), "Keep.", problem["answer"]) is None
    assert model.patch(_spell(wrong), "\\boxed{hello}", problem["answer"]) is None
    # over an answer with no colouring the patch is all there is (incomplete, so it scores 0)
    assert model.patch("nothing", f"\\boxed{{{vertex} {right}}}", problem["answer"]) == (
        f"\\boxed{{{vertex} {right}}}"
    )


def test_feedback_forms() -> None:
    model = ColoringFaults()
    review = "Looking... BAD 1 2, BAD 3 4. Verdict: incorrect"
    named = model.named(review)
    assert feedback_text("full", False, review, named, model) == review
    assert feedback_text("verdict", False, review, named, model) == "Verdict: incorrect"
    assert feedback_text("fault", False, review, named, model) == "BAD 1 2. Verdict: incorrect"
    assert feedback_text("faults", False, review, named, model) == (
        "BAD 1 2, BAD 3 4. Verdict: incorrect"
    )
    assert feedback_text("fault", True, "OK. Verdict: correct", [], model) == "Verdict: correct"
    assert feedback_text("fault", None, "no verdict", [], model) == "no verdict"
    assert feedback_text("verdict", False, review, named, None) == review  # no fault model
    assert oracle_review(["1 2"], False, model) == "BAD 1 2. Verdict: incorrect"
    assert oracle_review([], True, model) == "OK. Verdict: correct"


def test_critic_sees_the_colouring_before_the_edges() -> None:
    problem = _problem()
    env = _episode(problem)
    env.step(_spell(_colours(problem)))
    prompt = env.observe("critic_0")["prompt"]
    assert prompt.index("\\boxed{0 A") < prompt.index("Edges:")
    # other tasks keep the problem first
    other = envs.make("math/reflection-v0", task="arithmetic").unwrapped
    other.reset(seed=0)
    other.step("\\boxed{1}")
    text = other.observe("critic_0")["prompt"]
    assert text.index("Problem:") < text.index("\\boxed{1}")


@pytest.mark.parametrize("rule", ["any", "first"])
def test_fault_bonus_pays_a_real_named_clash(rule: str) -> None:
    problem = _problem()
    wrong, _, _ = _slip(problem)
    faults = ColoringFaults().faults(_spell(wrong), problem["answer"])
    for named, paid in ((faults[0], 1.5), ("0 1" if "0 1" not in faults else "0 2", 1.0)):
        env = _episode(problem, fault_bonus=0.5, fault_rule=rule)
        env.step(_spell(wrong))
        env.step(f"BAD {named}. Verdict: incorrect")
        info = env.turn_results[-1]["infos"]["critic_0"]
        assert env.turn_results[-1]["rewards"]["critic_0"] == paid
        assert info["named_fault"] == named and info["fault_real"] is (paid > 1)
    # no bonus for accepting, or for rejecting a right answer
    env = _episode(problem, fault_bonus=0.5)
    env.step(_spell(_colours(problem)))
    env.step(f"BAD {faults[0]}. Verdict: incorrect")
    assert env.turn_results[-1]["rewards"]["critic_0"] == 0.0


def test_a_later_clash_is_real_for_any_not_first() -> None:
    problem = _problem(4)
    colours = _colours(problem)
    fixed = {v for v, _ in problem["metadata"]["fixed"]}
    model = ColoringFaults()
    for v in range(len(colours)):  # find a slip with two or more clashes
        if v in fixed:
            continue
        for c in "ABC":
            wrong = list(colours)
            wrong[v] = c
            faults = model.faults(_spell(wrong), problem["answer"])
            if len(faults) >= 2:
                break
        if len(faults) >= 2:
            break
    assert len(faults) >= 2
    for rule, real in (("any", True), ("first", False)):
        env = _episode(problem, fault_bonus=1.0, fault_rule=rule)
        env.step(_spell(wrong))
        env.step(f"BAD {faults[1]}. Verdict: incorrect")
        assert env.turn_results[-1]["infos"]["critic_0"]["fault_real"] is real


def test_patch_mode_refiner_fixes_by_a_patch_and_keeps_without_one() -> None:
    problem = _problem()
    wrong, vertex, right = _slip(problem)
    env = _episode(problem, refiner_mode="patch")
    env.step(_spell(wrong))
    env.step("BAD 1 2. Verdict: incorrect")
    assert env.observe("refiner_0")["prompt"].endswith("Write the patch: only what changes.")
    env.step(f"\\boxed{{{vertex} {right}}}")
    refiner = env.turn_results[-1]["infos"]["refiner_0"]
    assert refiner["correct"] and refiner["improvement"] == 1.0
    assert env.answer == _spell(_colours(problem))
    env.step("OK. Verdict: correct")
    env.step("Keep.")  # no patch: the colouring stands
    assert env.turn_results[-1]["infos"]["refiner_0"]["correct"]
    assert env.infos["solver_0"]["final_correct"]
    # the rewrite form scores the reply itself
    env = _episode(problem, refiner_mode="revise")
    env.step(_spell(wrong))
    env.step("BAD 1 2. Verdict: incorrect")
    env.step(f"\\boxed{{{vertex} {right}}}")
    assert not env.turn_results[-1]["infos"]["refiner_0"]["correct"]


@pytest.mark.parametrize(
    ("form", "shown"),
    [("verdict", "Verdict: incorrect"), ("fault", "BAD {0}. Verdict: incorrect"), ("faults", "")],
)
def test_oracle_critic_reviews_whatever_the_agent_writes(form: str, shown: str) -> None:
    problem = _problem(4)
    wrong, _, _ = _slip(problem)
    faults = ColoringFaults().faults(_spell(wrong), problem["answer"])
    env = _episode(problem, oracle_critic=True, feedback=form, refiner_mode="patch")
    env.step(_spell(wrong))
    env.step("OK. Verdict: correct")  # the agent's words are replaced
    critic = env.turn_results[-1]["infos"]["critic_0"]
    assert critic["verdict"] is False and critic["correct"]
    expected = (
        shown.format(faults[0])
        if shown
        else (", ".join(f"BAD {f}" for f in faults) + ". Verdict: incorrect")
    )
    assert env.feedback == expected
    assert env.turns[-1][1] == ", ".join(f"BAD {f}" for f in faults) + ". Verdict: incorrect"
    env.step("Keep.")
    env.step("anything")
    assert env.turn_results[-1]["infos"]["critic_0"]["verdict"] is False


def test_oracle_critic_accepts_a_right_answer_on_any_task() -> None:
    env = envs.make("math/reflection-v0", task="arithmetic", oracle_critic=True).unwrapped
    env.reset(seed=0)
    env.step(f"\\boxed{{{env.problem['answer']}}}")
    env.step("Verdict: incorrect")
    assert env.verdict is True


def test_options_refuse_unknown_forms() -> None:
    with pytest.raises(ValueError, match="feedback must be one of"):
        envs.make("math/reflection-v0", feedback="clash")
    with pytest.raises(ValueError, match="fault_rule must be one of"):
        envs.make("math/reflection-v0", fault_rule="last")
    with pytest.raises(TypeError, match="fault_bonus"):
        envs.make("math/reflection-v0", fault_bonus="big")
    with pytest.raises(TypeError, match="oracle_critic must be a bool"):
        envs.make("math/reflection-v0", oracle_critic="yes")


def test_min_conflicts_recolours_the_cheaper_end_never_a_given_one() -> None:
    from envs.tasks.coloring import min_conflicts

    # a path 0-1-2 plus 1-3: 1 and 2 clash (both B); 2's neighbours hold B only, 1's hold A, B, C
    edges = [(0, 1), (1, 2), (1, 3)]
    colours = {0: "A", 1: "B", 2: "B", 3: "C"}
    assert min_conflicts(edges, set(), colours, (1, 2)) == (2, "A")  # 1 to A or C clashes once
    assert min_conflicts(edges, {2}, colours, (1, 2)) == (1, "A")  # 2 is given: 1 moves
    assert min_conflicts(edges, {1, 2}, colours, (1, 2)) is None  # both given: no patch


def test_the_scripted_repair_patches_a_named_clash_and_keeps_otherwise() -> None:
    from envs.tasks.coloring import min_conflicts

    faults = ColoringFaults()
    for level in (1, 2, 3, 4):
        problem = _problem(level)
        colours, _, _ = _slip(problem)
        answer, reference = _spell(colours), problem["answer"]
        first = faults.faults(answer, reference)[0]
        reply = faults.repair(answer, first, reference)
        instance = read_reference(reference)
        given = {v for v, _ in instance.fixed}
        clash = tuple(int(w) for w in first.split())
        vertex, colour = min_conflicts(instance.edges, given, dict(enumerate(colours)), clash)
        assert reply == f"\\boxed{{{vertex} {colour}}}" and vertex not in given
        assert first not in faults.faults(faults.patch(answer, reply, reference), reference)
        right = _spell(_colours(problem))
        edge = " ".join(map(str, instance.edges[0]))
        for bad_answer, fault in ((right, edge), (answer, "0 99"), ("no box", first), (answer, "")):
            assert faults.repair(bad_answer, fault, reference) == "Keep."
