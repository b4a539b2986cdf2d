"""The warm-up SFT before RL (`trainers.run.warmup`): when it runs by default, its demonstrations,
the folded logit scale, reuse on resume, and its share of the time budget."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from trainers.run import budget as time_budget
from trainers.run import warmup
from trainers.run.args import Job
from trainers.run.warmup import (
    AUTO_STEPS,
    default_steps,
    embedded_demonstrations,
    file_demonstrations,
    folded_scale,
    warm_start,
)

TOOL = "math/tool-v0"
REFLECTION = "math/reflection-v0"


class Config:  # the fields of an RL config the warm-up reads
    seed = 0
    use_cpu = True
    bf16 = False
    disable_tqdm = True
    world_size = 1


def test_it_runs_by_default_only_where_the_embedded_model_never_played_a_role(tiny_model, tmp_path):
    trained = set(
        json.loads((Path(tiny_model) / "recipe.json").read_text())["sft"]["rows_per_role"]
    )
    assert {"solver", "critic", "refiner"} <= trained and "executor" not in trained
    assert default_steps(Job.of(env_id=TOOL), tiny_model) == AUTO_STEPS
    assert default_steps(Job.of(env_id=REFLECTION), tiny_model) == 0
    assert default_steps(Job.of(env_id=TOOL, task="arithmetic"), tiny_model) == 0
    plain = tmp_path / "plain"  # any other model: no recipe.json
    shutil.copytree(tiny_model, plain)
    (plain / "recipe.json").unlink()
    assert default_steps(Job.of(env_id=TOOL), str(plain)) == 0


def test_embedded_demonstrations_are_the_envs_roles_on_training_problems_with_replay(
    tiny_model, monkeypatch
):
    import envs

    splits = []
    real = envs.make_task

    def make_task(name, **kwargs):
        splits.append(kwargs.get("split"))
        return real(name, **kwargs)

    monkeypatch.setattr(envs, "make_task", make_task)
    rows = embedded_demonstrations(Job.of(env_id=TOOL), tiny_model, 48, seed=3)
    assert splits and set(splits) == {"train"}  # never the held-out problems
    assert len(rows) == 48
    roles = [r["role"] for r in rows]
    own = sum(role in ("analyzer", "executor", "verifier") for role in roles)
    assert own == 32  # two thirds; the rest replays the recipe's other rows and drills
    assert {"analyzer", "executor", "verifier"} <= set(roles)
    assert set(roles) - {"analyzer", "executor", "verifier"}  # replay is there
    assert all(row["messages"][-1]["role"] == "assistant" for row in rows)
    programs = [r["messages"][-1]["content"] for r in rows if r["role"] == "executor"]
    assert programs and all("```python" in p for p in programs)


def test_embedded_demonstrations_are_refused_for_another_task(tiny_model):
    with pytest.raises(ValueError, match=r"--warmup_data PATH\.jsonl"):
        embedded_demonstrations(Job.of(env_id=TOOL, task="arithmetic"), tiny_model, 8, 0)


def test_file_demonstrations_read_chats_and_name_a_bad_line(tmp_path):
    good = {
        "messages": [{"role": "user", "content": "1+1?"}, {"role": "assistant", "content": "2"}]
    }
    path = tmp_path / "demos.jsonl"
    path.write_text(json.dumps(good) + "\n\n" + json.dumps(good) + "\n")
    assert [r["messages"] for r in file_demonstrations(str(path))] == [good["messages"]] * 2
    bad = {"messages": [{"role": "assistant", "content": "2"}, {"role": "user", "content": "?"}]}
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(ValueError, match=r"demos.jsonl:2: expected"):
        file_demonstrations(str(path))
    path.write_text("not json\n")
    with pytest.raises(ValueError, match=r"demos.jsonl:1"):
        file_demonstrations(str(path))
    with pytest.raises(ValueError, match="no such file"):
        file_demonstrations(str(tmp_path / "missing.jsonl"))


def test_warm_up_arguments_are_checked():
    with pytest.raises(ValueError, match="warmup_sft_steps"):
        Job.of(warmup_sft_steps=-1)
    with pytest.raises(ValueError, match="warmup_learning_rate"):
        Job.of(warmup_learning_rate=0)


def test_the_folded_scale_is_out_while_training_and_back_after(tiny_model, tmp_path, monkeypatch):
    import trl
    from transformers import AutoModelForCausalLM

    model = tmp_path / "calibrated"
    shutil.copytree(tiny_model, model)
    manifest = json.loads((model / "recipe.json").read_text())
    manifest["sft"]["calibration"] = {"logit_scale": 2.0, "sharpen": 1.5}
    (model / "recipe.json").write_text(json.dumps(manifest))
    assert folded_scale(model) == 3.0 and folded_scale(tiny_model) == 1.0
    start = AutoModelForCausalLM.from_pretrained(model).get_decoder().norm.weight.detach().clone()
    seen = []

    def train(self, *args, **kwargs):  # records the norm the SFT trains from; no step taken
        seen.append(self.model.get_decoder().norm.weight.detach().clone())

    monkeypatch.setattr(trl.SFTTrainer, "train", train)
    args = Job.of(env_id=TOOL)
    path, figures = warm_start(args, Config(), str(model), tmp_path / "warm", steps=2)
    assert torch.allclose(seen[0], start / 3.0)
    saved = AutoModelForCausalLM.from_pretrained(path).get_decoder().norm.weight
    assert torch.allclose(saved, start)
    assert figures["folded_scale"] == 3.0 and figures["rows"] == 32

    def refuse(self, *args, **kwargs):
        raise AssertionError("a finished warm-up is reused, not trained again")

    monkeypatch.setattr(trl.SFTTrainer, "train", refuse)
    again_path, again = warm_start(args, Config(), str(model), tmp_path / "warm", steps=2)
    assert again_path == path and again == {**json.loads(json.dumps(figures)), "reused": True}


def test_the_warm_up_spends_the_training_budget(monkeypatch):
    budget, _ = time_budget.callbacks(Job.of(max_train_minutes=15), spent_seconds=300)
    assert budget.seconds == pytest.approx(600)
    budget, _ = time_budget.callbacks(Job.of(max_train_minutes=2), spent_seconds=600)
    assert budget.seconds == pytest.approx(60 * time_budget.MIN_MINUTES)


def test_env_roles_in_turn_order():
    assert warmup.env_roles(TOOL) == ["analyzer", "executor", "verifier"]
    assert warmup.env_roles(REFLECTION) == ["solver", "critic", "refiner"]
