from __future__ import annotations

import json
import re

import pytest

import envs
from envs.errors import DataLoadError, DuplicateTaskError, UnknownTaskError
from envs.tasks.arithmetic import ArithmeticSource, generate_problem
from tests.utils import SHARED_DATA, write_jsonl


def _evaluate(expression: str) -> int:
    # Expressions are built from integers and + - * / with exact division only.
    assert re.fullmatch(r"[\d\s()+\-*/]+", expression)
    return int(eval(expression.replace("/", "//")))


@pytest.mark.parametrize("difficulty", [1, 2, 3, 4, 5])
def test_arithmetic_answers_match_their_expression(difficulty):
    for problem in ArithmeticSource(size=200, difficulty=difficulty):
        assert int(problem["answer"]) == _evaluate(problem["metadata"]["expression"])
        assert int(problem["answer"]) >= 0
        assert problem["metadata"]["expression"].count("(") == difficulty - 1


def test_arithmetic_is_seeded_and_splits_are_disjoint():
    a, b = ArithmeticSource(50, 2, "train", 0), ArithmeticSource(50, 2, "train", 0)
    assert list(a) == list(b)
    assert not envs.overlap(
        ArithmeticSource(300, [1, 2], "test", 0), ArithmeticSource(3000, [1, 2])
    )
    assert [p["question"] for p in ArithmeticSource(50, 2, "train", 1)] != [
        p["question"] for p in a
    ]


def test_arithmetic_problem_ids_round_trip():
    source = ArithmeticSource(20, [1, 3])
    for problem in source:
        assert source.get(problem["id"]) == problem
    with pytest.raises(KeyError, match="not a problem id of this arithmetic source"):
        source.get("gsm8k/3")
    assert generate_problem(3, difficulty=2) == generate_problem(3, difficulty=2)


@pytest.mark.parametrize("bad", [0, 6, "2", [], [1, 9]])
def test_arithmetic_rejects_bad_difficulty(bad):
    with pytest.raises(ValueError, match="difficulty"):
        ArithmeticSource(10, bad)


def test_task_registry():
    assert {"arithmetic", "gsm8k", "math", "anli"} <= set(envs.list_tasks())
    with pytest.raises(UnknownTaskError, match="Did you mean 'gsm8k'"):
        envs.make_task("gsm8")
    with pytest.raises(DuplicateTaskError):
        envs.register_task("arithmetic", lambda **kw: None)


def test_register_and_use_a_custom_task():
    problems = [envs.make_problem(f"cap/{i}", f"Capital number {i}?", str(i)) for i in range(3)]
    envs.register_task(
        "capitals", lambda **kw: envs.Task("capitals", envs.ListSource(problems)), override=True
    )
    env = envs.make("math/solve-v0", task="capitals")
    env.reset(options={"problem_id": "cap/2"})
    assert "Capital number 2?" in env.observe("solver_0")["prompt"]
    env.step("\\boxed{2}")
    assert env.rewards["solver_0"] == 1.0


def test_gsm8k_from_local_file(gsm8k_file):
    task = envs.make_task("gsm8k", data_path=str(gsm8k_file))
    assert len(task.source) == 12
    last = task.source[11]
    assert last["answer"] == "2125" and "#### 2,125" in last["metadata"]["solution"]
    assert task.verifier.verify(last["metadata"]["solution"], last["answer"]).score == 1.0


def test_missing_file_names_it_and_the_fix(tmp_path):
    with pytest.raises(DataLoadError, match=r"nope\.jsonl.*does not exist.*data_path"):
        envs.make_task("gsm8k", data_path=str(tmp_path / "nope.jsonl"))


def test_bad_json_line_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"question": "q", "answer": "#### 1"}) + "\n{oops\n")
    with pytest.raises(DataLoadError, match=r"bad\.jsonl:2 is not valid JSON"):
        envs.make_task("gsm8k", data_path=str(path))


def test_missing_field_names_file_line_and_field(tmp_path):
    path = write_jsonl(
        tmp_path / "f.jsonl", [{"question": "q", "answer": "#### 1"}, {"question": "q"}]
    )
    with pytest.raises(DataLoadError, match=r"f\.jsonl:2 has no field 'answer'"):
        envs.make_task("gsm8k", data_path=str(path))


def test_gsm8k_answer_without_final_marker(tmp_path):
    path = write_jsonl(tmp_path / "g.jsonl", [{"question": "q", "answer": "42"}])
    with pytest.raises(DataLoadError, match=r"g\.jsonl:1.*####"):
        envs.make_task("gsm8k", data_path=str(path))


def test_hub_failure_is_reported_with_the_fix(monkeypatch):
    datasets = pytest.importorskip("datasets")

    def offline(*args, **kwargs):
        raise ConnectionError("no route to host")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(DataLoadError, match=r"openai/gsm8k.*ConnectionError.*data_path"):
        envs.make_task("gsm8k", split="test")


def test_math_answer_comes_from_last_boxed(tmp_path):
    rows = [
        {
            "problem": "Simplify 2/4.",
            "solution": "We get \\boxed{\\frac{2}{4}} = \\boxed{\\frac{1}{2}}.",
        },
        {"problem": "x?", "solution": "so x = 3", "answer": "3"},
    ]
    task = envs.make_task("math", data_path=str(write_jsonl(tmp_path / "m.jsonl", rows)))
    assert task.source[0]["answer"] == "\\frac{1}{2}" and task.source[1]["answer"] == "3"
    bad = write_jsonl(tmp_path / "m2.jsonl", [{"problem": "p", "solution": "no box"}])
    with pytest.raises(DataLoadError, match=r"m2\.jsonl:1.*boxed"):
        envs.make_task("math", data_path=str(bad))


def test_anli_labels(tmp_path):
    rows = [
        {"uid": "u1", "context": "A cat sat.", "hypothesis": "An animal sat.", "label": "e"},
        {"uid": "u2", "premise": "P", "hypothesis": "H", "label": 2},
    ]
    task = envs.make_task("anli", data_path=str(write_jsonl(tmp_path / "a.jsonl", rows)))
    assert [p["answer"] for p in task.source] == ["entailment", "contradiction"]
    assert task.verifier.name == "label"
    bad = write_jsonl(tmp_path / "a2.jsonl", [{"context": "P", "hypothesis": "H", "label": "x"}])
    with pytest.raises(DataLoadError, match="label"):
        envs.make_task("anli", data_path=str(bad))


@pytest.mark.skipif(
    not (SHARED_DATA / "gsm8k").is_dir(),
    reason="../shared/data (real GSM8K/ANLI files) is only present on project machines",
)
def test_shared_real_files_load():
    gsm8k = envs.make_task("gsm8k", data_path=str(SHARED_DATA / "gsm8k" / "test.jsonl"))
    assert len(gsm8k.source) == 1319
    anli = envs.make_task("anli", data_path=str(SHARED_DATA / "anli" / "R1_dev.jsonl"))
    assert len(anli.source) == 1000
    assert {p["answer"] for p in anli.source} == {"entailment", "neutral", "contradiction"}
