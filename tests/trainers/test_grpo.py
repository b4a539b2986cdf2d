from __future__ import annotations

import statistics

import pytest
import torch
from trl import GRPOTrainer

import envs
from tests.trainers.helpers import grpo_config, ppo_config, shaped
from trainers.algorithms.grpo import build_grpo_trainer, load_environment
from trainers.algorithms.rows import (
    mask_uniform_groups,
    parse_slot_prompt,
    review_class_weights,
    rows_from_episodes,
    slot_dataset,
    slot_prompt,
    turn_reward,
    turn_slots,
)
from trainers.rollout.records import Episode, Turn

PAD, EOS = 0, 1


def turn(agent, index, reward, rnd=0, correct=None, tokens=(5, 6), prompt=(7, 8, 9)):
    return Turn(
        agent=agent,
        observation={"prompt": "p"},
        text="t",
        prompt_ids=list(prompt),
        completion_ids=list(tokens),
        logprobs=[-0.5] * len(tokens),
        reward=reward,
        info={"correct": correct},
        index=index,
        round=rnd,
    )


def episodes_for(problem_id, rewards_per_sample, group=0):
    """Reflection-like episodes (solver, critic, refiner); a shorter reward list ends early."""
    agents = ["solver_0", "critic_0", "refiner_0"]
    out = []
    for sample, rewards in enumerate(rewards_per_sample):
        turns = [
            turn(agent, i, r, correct=bool(r), tokens=range(10 + i, 12 + i + sample))
            for i, (agent, r) in enumerate(zip(agents, rewards, strict=False))
        ]
        out.append(Episode("math/reflection-v0", problem_id, group, sample, turns))
    return out


def test_slot_prompts_round_trip():
    assert parse_slot_prompt(slot_prompt("arithmetic/train/d1/s0/#3", 12)) == (
        "arithmetic/train/d1/s0/#3",
        12,
    )
    with pytest.raises(ValueError, match="slot_dataset"):
        parse_slot_prompt("What is 2 + 3?")
    data = slot_dataset(["a", "b"], 3)
    assert data["prompt"] == ["a#0", "a#1", "a#2", "b#0", "b#1", "b#2"]
    assert data["slot"] == [0, 1, 2, 0, 1, 2]


def test_turn_slots_count_every_turn_an_episode_can_record():
    assert turn_slots(envs.make("math/reflection-v0", rounds=2)) == 5
    assert turn_slots(envs.make("math/debate-v0", num_agents=3, rounds=2)) == 6
    assert turn_slots(envs.make("math/solve-v0")) == 1


def test_rows_map_turn_slots_with_masks_weights_and_padding():
    group = episodes_for("p", [[1.0, 0.0, 1.0], [0.0, 1.0]])  # sample 1 ended after the critic
    group[0].turns[1].completion_ids = []  # a scripted critic turn: nothing to train
    prompts = [slot_prompt("p", s) for s in range(3) for _ in range(2)]
    rows = rows_from_episodes(
        prompts,
        {"p": group},
        2,
        {"critic": 2.0, "refiner_0": 0.5},
        pad_token_id=PAD,
        eos_token_id=EOS,
    )
    assert len(rows["prompt_ids"]) == 6
    assert rows["agent"] == ["solver_0", "solver_0", "critic_0", "critic_0", "refiner_0", None]
    assert rows["turn_reward"] == [1.0, 0.0, None, 2.0, 0.5, None]
    assert rows["turn_raw_reward"] == [1.0, 0.0, None, 1.0, 1.0, None]
    assert rows["completion_ids"][0] == [10, 11] and rows["completion_ids"][1] == [10, 11, 12]
    assert rows["prompt_ids"][0] == [7, 8, 9] and rows["logprobs"][1] == [-0.5] * 3
    assert rows["env_mask"] == [[1, 1], [1, 1, 1], [0], [1, 1, 1], [1, 1], [0]]
    for i in (2, 5):  # padding rows: one pad prompt token, one eos, no loss, no reward
        assert rows["prompt_ids"][i] == [PAD] and rows["completion_ids"][i] == [EOS]
    assert rows["correct"] == [True, False, None, True, True, None]


def test_balanced_reviews_weigh_each_class_of_reviewed_answer_equally():
    # Four samples: the critic reviews 3 wrong answers and 1 right one, saying "incorrect" each
    # time (right on the wrong ones, reward 1; wrong on the right one, reward 0).
    group = episodes_for("p", [[0.0, 1.0, 0.0], [0.0, 1.0, 0.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    for episode in group:
        episode.turns[1].info.update(
            balance_reviews=True, reviewed_correct=episode.turns[0].reward == 1.0
        )
    assert review_class_weights({"p": group}) == {True: 2.0, False: 4 / 6}
    prompts = [slot_prompt("p", 1)] * 4
    rows = rows_from_episodes(prompts, {"p": group}, 4, {"critic": 0.5})
    assert rows["turn_reward"] == pytest.approx([0.5 * 4 / 6] * 3 + [0.0])
    assert rows["turn_raw_reward"] == [1.0, 1.0, 1.0, 0.0]
    # "Incorrect" every time now earns what "correct" every time would: half the weight each.
    assert sum(rows["turn_reward"]) == pytest.approx(0.5 * 0.5 * 4)
    # Unmarked reviews (critic_reward "verdict") and one-class batches stay unweighted.
    for episode in group:
        episode.turns[1].info["reviewed_correct"] = False
    assert review_class_weights({"p": group}) == {}
    assert rows_from_episodes(prompts, {"p": group}, 4)["turn_reward"] == [1.0, 1.0, 1.0, 0.0]
    assert review_class_weights({"p": episodes_for("p", [[1.0, 0.0]])}) == {}


def test_rows_reject_mixed_turns_and_bad_groups():
    group = episodes_for("p", [[1.0, 0.0], [0.0, 1.0]])
    group[1].turns[1].agent = "refiner_0"
    prompts = [slot_prompt("p", 1)] * 2
    with pytest.raises(ValueError, match="different turns"):
        rows_from_episodes(prompts, {"p": group}, 2)
    with pytest.raises(ValueError, match="not one group"):
        rows_from_episodes([slot_prompt("p", 0), slot_prompt("p", 1)], {"p": group}, 2)
    with pytest.raises(ValueError, match="groups of 2"):
        rows_from_episodes([slot_prompt("p", 0)] * 3, {"p": group}, 2)


def test_turn_reward_logs_per_agent_metrics():
    logged = {}
    out = turn_reward(
        completions=["a", "b", "c"],
        turn_reward=[2.0, None, 0.0],
        turn_raw_reward=[1.0, None, 0.0],
        agent=["critic_0", None, "critic_0"],
        correct=[True, None, False],
        completion_ids=[[1, 2], [1], [1, 2, 3, 4]],
        log_metric=lambda name, value: logged.__setitem__(name, value),
    )
    assert out == [2.0, None, 0.0]
    assert logged == {
        "agents/critic_0/reward": 0.5,
        "agents/critic_0/accuracy": 0.5,
        "agents/critic_0/completion_length": 3.0,
    }


def test_turn_reward_logs_each_task_of_a_mixed_batch():
    """A mixed task's batch (envs.tasks.mixed): per task reward and accuracy over its trainable
    turns; a batch of one task logs none."""
    logged = {}
    kwargs = {
        "completions": ["a", "b", "c", "d"],
        "turn_reward": [1.0, None, 0.0, 1.0],
        "agent": ["solver_0", None, "solver_0", "solver_0"],
        "correct": [True, None, False, True],
        "completion_ids": [[1]] * 4,
        "log_metric": lambda name, value: logged.__setitem__(name, value),
    }
    ids = ["reach/train/d1/s0/0", "reach/train/d1/s0/0", "unknown/train/d2/s0/3", "reach/x"]
    turn_reward(**kwargs, problem_id=ids)
    assert logged["tasks/reach/reward"] == 1.0 and logged["tasks/unknown/accuracy"] == 0.0
    logged.clear()
    turn_reward(**kwargs, problem_id=["reach/a"] * 4)
    assert not any(name.startswith("tasks/") for name in logged)


def test_turn_reward_logs_a_reviewers_balanced_accuracy():
    """Three right answers accepted and one wrong one accepted: accuracy 0.75, but a critic that
    accepts everything is at chance, and its balanced accuracy says so (0.5)."""
    logged = {}
    turn_reward(
        completions=["a", "b", "c", "d", "e"],
        turn_reward=[1.0, 1.0, 1.0, 0.0, 1.0],
        agent=["critic_0"] * 4 + ["solver_0"],
        correct=[True, True, True, False, True],
        reviewed=[True, True, True, False, None],
        completion_ids=[[1]] * 5,
        log_metric=lambda name, value: logged.__setitem__(name, value),
    )
    assert logged["agents/critic_0/accuracy"] == 0.75
    assert logged["agents/critic_0/balanced_accuracy"] == 0.5
    assert "agents/solver_0/balanced_accuracy" not in logged


def test_review_balanced_accuracy_weighs_both_classes_alike():
    from trainers.algorithms.rows import review_balanced_accuracy

    # right answers: 1 of 1 judged right; wrong ones: 2 of 3
    rate = review_balanced_accuracy([True, False, False, False], [True, False, True, True])
    assert rate == pytest.approx((1.0 + 2 / 3) / 2)
    assert review_balanced_accuracy([True, True], [True, False]) == 0.5  # one class present
    assert review_balanced_accuracy([None, None], [True, False]) is None


def normalised(rewards):
    """GRPO's group advantage: (r - mean) / (sample std + 1e-4)."""
    mean, std = statistics.mean(rewards), statistics.stdev(rewards)
    return [(r - mean) / (std + 1e-4) for r in rewards]


def test_advantages_are_normalised_within_problem_role_and_round(tiny_model, tmp_path):
    """Hand-made episodes through TRL's own scoring: groups are (problem, agent, round) blocks."""
    episodes = {
        "p": episodes_for("p", [[1.0, 1.0, 0.0], [0.0, 1.0, 1.0], [1.0, 0.0]]),
        "q": episodes_for("q", [[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]),
    }
    prompts = [slot_prompt(pid, s) for pid in ("p", "q") for s in range(3) for _ in range(3)]

    def rollout(batch, trainer):
        assert batch == prompts
        return rows_from_episodes(batch, episodes, 3, pad_token_id=PAD, eos_token_id=EOS)

    trainer = GRPOTrainer(
        model=tiny_model,
        reward_funcs=[turn_reward],
        args=grpo_config(tmp_path, num_generations=3, per_device_train_batch_size=18),
        train_dataset=slot_dataset(["p", "q"], 3),
        rollout_func=rollout,
    )
    inputs = [{"prompt": p, "problem_id": p[0], "slot": int(p[-1])} for p in prompts]
    out = trainer._generate_and_score_completions(inputs)
    adv = out["advantages"].tolist()
    assert adv[0:3] == pytest.approx(normalised([1, 0, 1]), abs=1e-4)  # p, solver_0, round 0
    assert adv[3:6] == pytest.approx(normalised([1, 1, 0]), abs=1e-4)  # p, critic_0
    assert adv[6:9] == pytest.approx([*normalised([0, 1]), 0.0], abs=1e-4)  # padding: no baseline
    assert adv[9:12] == [0.0, 0.0, 0.0]  # q's solvers all wrong: no signal
    assert adv[12:15] == pytest.approx(normalised([0, 1, 0]), abs=1e-4)
    assert adv[15:18] == pytest.approx(normalised([1, 0, 0]), abs=1e-4)
    loss_mask = out["completion_mask"] * out["tool_mask"]  # what TRL's loss sums over
    assert loss_mask[8].sum() == 0 and loss_mask[0].sum() == 2 and loss_mask[1].sum() == 3
    assert out["completion_ids"].shape[0] == 18


def test_uniform_groups_leave_the_loss_and_the_rest_keep_their_tokens(tiny_model, tmp_path):
    """Groups of equal rewards (zero advantage) are masked out of TRL's token-normalised loss."""
    episodes = {"p": episodes_for("p", [[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0]])}
    prompts = [slot_prompt("p", s) for s in range(3) for _ in range(3)]
    rows = rows_from_episodes(prompts, episodes, 3, pad_token_id=PAD, eos_token_id=EOS)
    kept = [list(m) for m in rows["env_mask"]]
    # solver group: 1, 1, 1 (uniform); critic: 1, 0, 1; refiner: 0, 0, padding (uniform)
    assert mask_uniform_groups(rows, 3) == 5
    assert rows["env_mask"][0:3] == [[0] * len(m) for m in kept[0:3]]
    assert rows["env_mask"][3:6] == kept[3:6]
    assert rows["env_mask"][6:9] == [[0] * len(kept[6]), [0] * len(kept[7]), [0]]
    assert rows["turn_reward"][0:3] == [1.0, 1.0, 1.0]  # rewards untouched: metrics stay true

    def rollout(batch, trainer):
        out = rows_from_episodes(batch, episodes, 3, pad_token_id=PAD, eos_token_id=EOS)
        mask_uniform_groups(out, 3)
        return out

    trainer = GRPOTrainer(
        model=tiny_model,
        reward_funcs=[turn_reward],
        args=grpo_config(tmp_path, num_generations=3, per_device_train_batch_size=9),
        train_dataset=slot_dataset(["p"], 3),
        rollout_func=rollout,
    )
    inputs = [{"prompt": p, "problem_id": "p", "slot": int(p[-1])} for p in prompts]
    out = trainer._generate_and_score_completions(inputs)
    loss_mask = out["completion_mask"] * out["tool_mask"]
    assert loss_mask[0:3].sum() == 0 and loss_mask[6:9].sum() == 0
    assert [int(loss_mask[i].sum()) for i in range(3, 6)] == [sum(m) for m in kept[3:6]]


@pytest.mark.parametrize(
    ("option", "says"),
    [
        ({"mask_uniform_groups": True}, "train PPO without mask_uniform_groups"),
        ({"turn_credit": "return"}, "train PPO with turn_credit='reward'"),
    ],
)
def test_grpo_only_options_are_refused_by_ppo(tiny_model, tmp_path, option, says):
    from trainers.algorithms.ppo import build_ppo_trainer

    with pytest.raises(ValueError, match=says):
        build_ppo_trainer(
            tiny_model,
            "math/reflection-v0",
            {"rounds": 1},
            ppo_config(tmp_path),
            train_problems=2,
            **option,
        )


def test_training_updates_the_shared_model_and_logs_per_agent_metrics(tiny_model, tmp_path):
    args = grpo_config(tmp_path, max_steps=2)
    trainer = build_grpo_trainer(
        tiny_model,
        "math/reflection-v0",
        {"rounds": 1},
        args,
        role_weights={"critic": 0.5},
        train_problems=4,
        num_envs=8,
    )

    trainer.reward_funcs[0] = shaped
    before = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    trainer.train()
    after = dict(trainer.model.named_parameters())
    assert any(not torch.equal(before[k], after[k]) for k in before)
    logs = {k: v for entry in trainer.state.log_history for k, v in entry.items()}
    for agent in ("solver_0", "critic_0", "refiner_0"):
        for metric in ("reward", "accuracy", "completion_length"):
            assert f"agents/{agent}/{metric}" in logs
    assert trainer.rollout_func.calls == 2


def test_trainable_trains_only_the_matching_parameters(tiny_model, tmp_path):
    def build(trainable, **kwargs):
        return build_grpo_trainer(
            tiny_model,
            "math/reflection-v0",
            {"rounds": 1},
            grpo_config(tmp_path, max_steps=2, learning_rate=5e-2),
            train_problems=4,
            num_envs=8,
            trainable=trainable,
            **kwargs,
        )

    trainer = build("norm")

    trainer.reward_funcs[0] = shaped
    before = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    trainer.train()
    changed = {k for k, v in trainer.model.named_parameters() if not torch.equal(before[k], v)}
    assert changed and all("norm" in k for k in changed)
    assert any("layernorm" in k for k in changed)
    with pytest.raises(ValueError, match=r"matches no parameter; names look like \['model"):
        build("no_such_layer")
    with pytest.raises(ValueError, match="role adapters train the adapters"):
        build("norm", role_adapters=True)


def test_rollout_rows_are_token_exact_for_the_trainer(tiny_model, tmp_path):
    """The rollout's sampled logprobs equal TRL's recomputation on the rows it built."""
    trainer = build_grpo_trainer(
        tiny_model, "math/reflection-v0", {"rounds": 1}, grpo_config(tmp_path), train_problems=2
    )
    assert trainer.train_dataset["prompt"][:3] == [
        slot_prompt(trainer.train_dataset["problem_id"][0], s) for s in range(3)
    ]
    inputs = [dict(row) for row in trainer.train_dataset.select(range(3)) for _ in range(2)]
    out = trainer._generate_and_score_completions(inputs)
    ids = torch.cat([out["prompt_ids"], out["completion_ids"]], dim=1)
    attention = torch.cat([out["prompt_mask"], out["completion_mask"]], dim=1)
    logps, _, _ = trainer._get_per_token_logps_and_entropies(
        trainer.model, ids, attention, out["completion_ids"].size(1)
    )
    mask = (out["completion_mask"] * out["tool_mask"]).bool()
    assert len(set(out["prompt_mask"].sum(1).tolist())) > 1  # left padding is exercised
    assert torch.allclose(logps[mask], out["sampling_per_token_logps"][mask], atol=1e-4)


def _step_logs(trainer):
    return {row["step"]: row for row in trainer.state.log_history if "loss" in row}


def test_resume_from_a_checkpoint_continues_like_the_uninterrupted_run(tiny_model, tmp_path):
    """Checkpoint at step 1, resume to step 2: same problems, samples, rewards and loss."""
    played: list[list[str]] = []

    def build(out, max_steps, **kwargs):
        trainer = build_grpo_trainer(
            tiny_model,
            "math/reflection-v0",
            {"rounds": 1},
            grpo_config(tmp_path, output_dir=str(out), max_steps=max_steps, **kwargs),
            train_problems=4,
            num_envs=8,
        )
        rollout = trainer.rollout_func

        def recording(prompts, trainer):
            played.append(sorted(set(prompts)))
            return rollout(prompts, trainer)

        trainer.rollout_func = recording
        return trainer

    full = build(tmp_path / "full", 2, save_strategy="steps", save_steps=1, report_to="tensorboard")
    full.train()
    full_played, played[:] = list(played), []
    resumed = build(tmp_path / "resumed", 2)
    resumed.train(resume_from_checkpoint=str(tmp_path / "full" / "checkpoint-1"))
    assert played == full_played[1:]  # the data position is restored: step 2's problems only
    a, b = _step_logs(full)[2], _step_logs(resumed)[2]
    for key in ("loss", "reward", "completions/mean_length", "agents/solver_0/reward"):
        assert b[key] == pytest.approx(a[key], rel=1e-5, abs=1e-7), key
    final_full = dict(full.model.named_parameters())
    for name, param in resumed.model.named_parameters():
        assert torch.allclose(param, final_full[name], atol=1e-6), name
    # report_to: TRL's metrics and the per-agent ones reach TensorBoard.
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (run,) = {p.parent for p in (tmp_path / "full").rglob("events.out.tfevents.*")}
    tags = EventAccumulator(str(run)).Reload().Tags()["scalars"]
    assert {"train/agents/solver_0/accuracy", "train/agents/critic_0/reward", "train/loss"} <= set(
        tags
    )


@pytest.mark.parametrize(
    ("env_id", "env_kwargs"),
    [("math/reflection-v0", {"rounds": 1}), ("math/debate-v0", {"num_agents": 2, "rounds": 1})],
)
def test_load_environment_trains_with_a_stock_grpo_trainer(
    tiny_model, tmp_path, env_id, env_kwargs
):
    """`GRPOTrainer(model=..., args=..., **bundle)`: no project trainer class, every agent logs."""
    bundle = load_environment(env_id, train_problems=4, seed=3, num_envs=8, **env_kwargs)
    assert set(bundle) == {"train_dataset", "rollout_func", "reward_funcs"}
    assert bundle.config == {"shuffle_dataset": False}
    assert len(bundle["train_dataset"]) == 4 * bundle.slots
    args = grpo_config(
        tmp_path, max_steps=2, per_device_train_batch_size=bundle.batch_rows(2), **bundle.config
    )
    trainer = GRPOTrainer(model=tiny_model, args=args, **bundle)
    assert type(trainer) is GRPOTrainer
    trainer.reward_funcs[0] = shaped
    before = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    trainer.train()
    assert any(not torch.equal(before[k], v) for k, v in trainer.model.named_parameters())
    logs = {k: v for entry in trainer.state.log_history for k, v in entry.items()}
    for agent in bundle.env.possible_agents:
        assert f"agents/{agent}/reward" in logs
    # one generation batch is one problem's slots x G: one rollout per optimizer step
    assert bundle["rollout_func"].calls == 2


def test_load_environment_shuffles_problems_by_seed_and_names_bad_input():
    a = load_environment("math/reflection-v0", train_problems=20, seed=0, rounds=1)
    b = load_environment("math/reflection-v0", train_problems=20, seed=0, rounds=1)
    c = load_environment("math/reflection-v0", train_problems=20, seed=1, rounds=1)
    assert a.problems == b.problems and sorted(a.problems) == sorted(c.problems)
    assert a.problems != c.problems
    rows = a["train_dataset"]
    assert rows["prompt"][: a.slots] == [slot_prompt(a.problems[0], s) for s in range(a.slots)]
    with pytest.raises(ValueError, match="no training problems"):
        load_environment("math/reflection-v0", train_problems=[])
    with pytest.raises(KeyError, match="bundle"):
        a["model"]
    import trainers

    assert trainers.load_environment is load_environment


def test_branched_rollout_groups_replies_to_one_history(tiny_model, tmp_path):
    """With branch_turns, every G-row block of a generation batch is G replies to one prompt."""
    trainer = build_grpo_trainer(
        tiny_model,
        "math/reflection-v0",
        {"rounds": 1},
        grpo_config(tmp_path, max_steps=1),
        train_problems=2,
        branch_turns=True,
    )
    assert trainer.rollout_func.branch
    inputs = [dict(row) for row in trainer.train_dataset.select(range(3)) for _ in range(2)]
    out = trainer._generate_and_score_completions(inputs)
    prompts = out["prompt_ids"].tolist()
    assert all(prompts[k] == prompts[k + 1] for k in range(0, 6, 2))
    assert prompts[0] != prompts[2] != prompts[4]
    trainer.reward_funcs[0] = shaped
    trainer.train()
    assert trainer.state.global_step == 1


def test_branch_turns_needs_rewards_paid_on_their_own_step(tiny_model, tmp_path):
    with pytest.raises(ValueError, match="immediate_rewards"):
        load_environment(
            "math/reflection-v0", train_problems=2, branch_turns=True, team_reward=True
        )
    from trainers.algorithms.ppo import build_ppo_trainer

    with pytest.raises(ValueError, match="train PPO without branch_turns"):
        build_ppo_trainer(tiny_model, "math/reflection-v0", {"rounds": 1}, branch_turns=True)
