"""The single-agent envs as TRL environments (`envs.trl_env`): rewards, tools on hostile input,
the dataset helper, and a stock `GRPOTrainer(environment_factory=...)` on a tiny local model
whose chat template (TRL's shipped Qwen2.5 one) renders tool calls."""

from __future__ import annotations

import inspect

import pytest

import envs
from envs.trl_env import (
    CodeEnvironment,
    SolveEnvironment,
    ToolEnvironment,
    as_response,
    trl_environment,
)

FAST_SANDBOX = {"timeout_s": 1.0, "cpu_s": 1}  # hostile programs end sooner than tool-v0's 5 s


@pytest.fixture(scope="module")
def solve():
    dataset, factory = trl_environment("math/solve-v0", train_problems=3)
    return dataset, factory


@pytest.fixture(scope="module")
def tool():
    dataset, factory = trl_environment("math/tool-v0", train_problems=3, sandbox=FAST_SANDBOX)
    return dataset, factory


@pytest.fixture(scope="module")
def code():
    dataset, factory = trl_environment("math/code-v0", train_problems=3, sandbox=FAST_SANDBOX)
    return dataset, factory


def run(env, program):
    """Run `program` with the env's program tool (tool-v0's run_python, code-v0's run_program)."""
    return (env.run_program if isinstance(env, CodeEnvironment) else env.run_python)(program)


def started(pair, row=0):
    dataset, factory = pair
    env = factory()
    env.reset(**dataset[row])
    return env, env.env.problem["answer"]


# ------------------------------------------------------------------ the TRL contract's shape
@pytest.mark.parametrize(
    ("cls", "tools"),
    [
        (SolveEnvironment, {"submit_answer"}),
        (ToolEnvironment, {"run_python", "submit_answer"}),
        (CodeEnvironment, {"run_program"}),
    ],
)
def test_public_methods_are_the_tools_plus_reset_and_get_reward(cls, tools):
    """TRL makes every public function of the class a tool (but reset and get_reward)."""
    public = {n for n, _ in inspect.getmembers(cls, inspect.isfunction) if not n.startswith("_")}
    assert public == tools | {"reset", "get_reward"}
    for name in tools:
        params = inspect.signature(getattr(cls, name)).parameters
        assert all(p.annotation == "str" for n, p in params.items() if n != "self"), name
        assert "Args:" in getattr(cls, name).__doc__ and "Returns:" in getattr(cls, name).__doc__


# ------------------------------------------------------------------ rewards
@pytest.mark.parametrize("pair", ["solve", "tool"])
def test_reward_of_a_right_a_wrong_and_no_answer(pair, request):
    pair = request.getfixturevalue(pair)
    env, reference = started(pair)
    assert env.get_reward() == 0.0  # nothing submitted yet
    assert env.submit_answer(reference) == "Answer recorded."
    assert env.get_reward() == 1.0 and env.info["correct"] is True
    # a second submission is refused and changes nothing
    assert env.submit_answer("12345").startswith("error:")
    assert env.get_reward() == 1.0 and env.answer == reference
    env.reset(**pair[0][1])  # a new episode starts from 0
    assert env.get_reward() == 0.0 and env.answer is None
    env.submit_answer(f"{reference}1")
    assert env.get_reward() == 0.0 and env.info["correct"] is False
    env.reset(**pair[0][2])
    assert env.get_reward() == 0.0  # the episode ended with no answer


def test_solve_reward_is_solve_v0s_reward_of_the_boxed_answer(solve):
    """The verdict solve-v0 itself gives, for answers right, wrong, boxed and odd."""
    for answer in ["7", " 7 ", "\\boxed{7}", "7.0", "x", "", "\\boxed{", "7}" * 50]:
        env, _ = started(solve)
        env.submit_answer(answer)
        plain = envs.make("math/solve-v0")
        plain.reset(options={"problem_id": solve[0][0]["problem_id"]})
        plain.step(as_response(answer))
        assert env.get_reward() == plain.rewards["solver_0"], answer


def test_code_reward_is_code_v0s_reward_of_the_program(code):
    """A program's reward is code-v0's own for the reply holding it; the first one counts."""
    programs = [
        "print(9 - 2)",
        "print(7",
        "print('\\\\boxed{7}')",
        "x = 4\nprint(x)",
        "```python\nprint(7)\n```",
    ]
    for program in programs:
        env, reference = started(code)
        assert reference == "7"
        assert run(env, program).startswith("exit status")
        plain = envs.make("math/code-v0", sandbox=FAST_SANDBOX)
        plain.reset(options={"problem_id": code[0][0]["problem_id"]})
        plain.step(program if "```" in program else f"```python\n{program}\n```")
        assert env.get_reward() == plain.rewards["executor_0"], program
    env, _ = started(code)
    assert env.get_reward() == 0.0  # no program
    run(env, "print(7)")
    assert run(env, "print(8)").startswith("error: a program was already run")
    assert env.get_reward() == 1.0 and env.answer == "print(7)"


def test_tool_reward_is_the_task_verifiers_score(tool):
    env, reference = started(tool)
    verifier = env.env.task.verifier
    for answer in [reference, f"\\boxed{{{reference}}}", f"-{reference}", "none"]:
        env.reset(**tool[0][0])
        env.submit_answer(answer)
        assert env.get_reward() == verifier.verify(as_response(answer), reference).score


@pytest.mark.parametrize("pair", ["solve", "tool"])
@pytest.mark.parametrize(
    "bad",
    [None, 7, 7.5, ["7"], {"answer": "7"}, True, "7" * 1_000_000, "\x00\ud800🙂", "}}}{{{"],
    ids=["none", "int", "float", "list", "dict", "bool", "huge", "odd-chars", "braces"],
)
def test_bad_answer_arguments_never_raise(pair, bad, request):
    env, _ = started(request.getfixturevalue(pair))
    assert env.submit_answer(bad) == "Answer recorded."
    assert 0.0 <= env.get_reward() <= 1.0


def test_an_int_answer_is_read_as_its_text(solve):
    env, reference = started(solve)
    env.submit_answer(int(reference))
    assert env.get_reward() == 1.0


def test_reset_takes_question_and_answer_columns_or_raises():
    env = SolveEnvironment()
    env.reset(question="What is 2 + 3?", answer="5", prompt=[], id="mine")
    assert env.env.problem["id"] == "mine"
    env.submit_answer("5")
    assert env.get_reward() == 1.0
    with pytest.raises(ValueError, match="problem_id"):
        env.reset(prompt=[{"role": "user", "content": "hi"}])


def test_tools_before_reset_refuse():
    env = ToolEnvironment(sandbox=FAST_SANDBOX)
    assert env.submit_answer("1").startswith("error:")
    assert env.run_python("print(1)").startswith("error:")
    assert env.get_reward() == 0.0
    assert CodeEnvironment().run_program("print(1)").startswith("error:")


# ------------------------------------------------------------------ the sandbox tool
def test_run_python_returns_the_output_of_tool_v0s_sandbox(tool):
    env, _ = started(tool)
    assert env.run_python("print(6 * 7)").endswith("stdout:\n42")
    assert env.run_python("```python\nprint(2 + 2)\n```").endswith("stdout:\n4")  # fenced
    default, _ = started(trl_environment("math/tool-v0", train_problems=1))
    from envs.program import DEFAULT_SANDBOX

    assert default.env.sandbox is DEFAULT_SANDBOX  # tool-v0's limits unless told otherwise


@pytest.mark.parametrize(
    ("program", "says"),
    [
        ("while True:\n    pass", "time limit"),
        ("print('x' * 10**7)", "output limit"),
        ("raise ValueError('boom')", "ValueError: boom"),
        ("import os\nos.system('ls')", "stopped by the sandbox"),
        ("def f(:", "SyntaxError"),
        ("a\x00b", "null bytes"),
    ],
    ids=["endless-loop", "output-flood", "exception", "escape", "syntax", "nul"],
)
@pytest.mark.parametrize("pair", ["tool", "code"])
def test_hostile_programs_come_back_as_output(pair, program, says, request):
    env, _ = started(request.getfixturevalue(pair))
    output = run(env, program)
    assert says in output
    assert len(output) <= env.env.options.max_output_chars


@pytest.mark.parametrize("pair", ["tool", "code"])
@pytest.mark.parametrize("bad", [None, 7, ["print(1)"], {"code": "print(1)"}])
def test_bad_code_arguments_are_refused(pair, bad, request):
    env, _ = started(request.getfixturevalue(pair))
    assert run(env, bad).startswith("error: code must be a string")
    assert env.answer is None and getattr(env, "runs", 0) == 0
    assert run(env, "#" * (env.env.max_action_chars + 1)).startswith("error: the program is")
    assert env.answer is None


def test_long_programs_and_too_many_runs_are_refused(tool):
    small = trl_environment("math/tool-v0", train_problems=1, max_runs=2)
    env, _ = started(small)
    assert [env.run_python("print(1)")[:13] for _ in range(2)] == ["exit status 0"] * 2
    assert "limit of 2 programs" in env.run_python("print(1)")
    env.reset(**small[0][0])  # a new episode gets its runs back
    assert env.run_python("print(1)").startswith("exit status 0")
    with pytest.raises(ValueError, match="max_runs"):
        ToolEnvironment(max_runs=0)


# ------------------------------------------------------------------ the dataset helper
def test_dataset_rows_pose_the_problem_and_hold_no_reference(solve, tool, code):
    for dataset, factory in (solve, tool, code):
        assert dataset.column_names == ["prompt", "problem_id"] and len(dataset) == 3
        env = factory()
        for row in dataset:
            system, user = row["prompt"]
            assert (system["role"], user["role"]) == ("system", "user")
            problem = env.env.task.source.get(row["problem_id"])
            assert problem["question"] in user["content"]
    for (dataset, _), tools in (
        (solve, ["submit_answer"]),
        (tool, ["run_python", "submit_answer"]),
    ):
        assert all(name in dataset[0]["prompt"][0]["content"] for name in tools)
    assert "run_program" in code[0][0]["prompt"][0]["content"]


def test_dataset_follows_the_tasks_split_and_train_problems():
    dataset, factory = trl_environment("math/solve-v0", train_problems=5)
    assert all("/train/" in pid for pid in dataset["problem_id"])  # procedural: train split
    held, _ = trl_environment("math/solve-v0", train_problems=5, split="validation")
    assert all("/validation/" in pid for pid in held["problem_id"])
    questions = [[row["prompt"][1]["content"] for row in d] for d in (held, dataset)]
    assert not envs.overlap(*questions)
    chosen = dataset["problem_id"][3:5]
    assert trl_environment("math/solve-v0", train_problems=chosen).dataset["problem_id"] == chosen
    assert factory().env.task is factory().env.task  # the factory's envs share one task
    with pytest.raises(ValueError, match="no training problems"):
        trl_environment("math/solve-v0", train_problems=0)


def test_multi_agent_envs_point_to_load_environment():
    with pytest.raises(ValueError, match="load_environment"):
        trl_environment("math/reflection-v0")
    with pytest.raises(envs.UnknownEnvError, match=r"(?i)did you mean"):
        trl_environment("math/solvee-v0")


# ------------------------------------------------------------------ a stock GRPOTrainer
def tool_calls(*calls):
    """An assistant message calling each ``(name, arguments)``."""
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"type": "function", "function": {"name": n, "arguments": a}} for n, a in calls
        ],
    }


def env_tools(factory):
    """An env's tools as TRL lists them: its public functions, by name (`inspect.getmembers`)."""
    env = factory()
    names = [n for n, _ in inspect.getmembers(type(env), inspect.isfunction)]
    return [getattr(env, n) for n in names if n not in ("reset", "get_reward") and n[0] != "_"]


def tool_conversations(env_id):
    """The dataset, factory, tools and the conversations the tiny model learns for `env_id`:
    each problem answered 7 through the env's tools (right on problem 0, wrong on problem 1)."""
    dataset, factory = trl_environment(env_id, train_problems=2)
    tools = env_tools(factory)
    if env_id == "math/solve-v0":
        turns = [tool_calls(("submit_answer", {"answer": "7"}))]
    elif env_id == "math/code-v0":
        turns = [tool_calls(("run_program", {"code": "print(9 - 2)"}))]
    else:
        run = {"role": "tool", "name": "run_python", "content": "exit status 0\nstdout:\n7"}
        turns = [tool_calls(("run_python", {"code": "print(9 - 2)"})), run]
        turns.append(tool_calls(("submit_answer", {"answer": "7"})))
    return dataset, factory, tools, [row["prompt"] + turns for row in dataset]


@pytest.fixture(scope="module")
def tool_model(tmp_path_factory):
    """A tiny Qwen2 model, and a byte-level BPE tokenizer with TRL's shipped Qwen2.5 chat
    template (which renders tool calls, and `trl.chat_template_utils.add_response_schema`
    knows), taught to call the envs' tools: every rollout then runs the tool loop."""
    from pathlib import Path

    import torch
    import trl
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    templates = Path(trl.__file__).parent / "chat_templates"
    template = (templates / "qwen2_5.jinja").read_text()
    training = (templates / "qwen2_5_training.jinja").read_text()  # marks the assistant's tokens
    names = {"solve": "math/solve-v0", "tool": "math/tool-v0", "code": "math/code-v0"}
    data = {name: tool_conversations(env_id) for name, env_id in names.items()}
    plain = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE()))
    corpus = [
        plain.apply_chat_template(c, tools=tools, chat_template=template, tokenize=False)
        for _, _, tools, chats in data.values()
        for c in chats
    ]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(
        corpus,
        trainers.BpeTrainer(
            vocab_size=800,
            special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    tags = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
    bpe.add_tokens([AddedToken(t, special=False, normalized=False) for t in tags])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    tokenizer.chat_template = template
    rows = [
        tokenizer.apply_chat_template(
            c,
            tools=tools,
            chat_template=training,
            return_dict=True,
            return_assistant_tokens_mask=True,
        )
        for _, _, tools, chats in data.values()
        for c in chats
    ]
    width = max(len(r["input_ids"]) for r in rows)
    pad = [[0] * (width - len(r["input_ids"])) for r in rows]
    ids = torch.tensor([r["input_ids"] + p for r, p in zip(rows, pad, strict=True)])
    mask = torch.tensor([r["assistant_masks"] + p for r, p in zip(rows, pad, strict=True)])
    attention = torch.tensor(
        [[1] * len(r["input_ids"]) + p for r, p in zip(rows, pad, strict=True)]
    )
    labels = ids.masked_fill(mask == 0, -100)  # learn the assistant's turns only
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    model = Qwen2ForCausalLM(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(100):
        loss = model(input_ids=ids, attention_mask=attention, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    path = tmp_path_factory.mktemp("tool_model")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path), data


def tool_grpo_args(tmp_path, **kwargs):
    """The tiny trainers' GRPOConfig (`tests.trainers.helpers.grpo_config`) for the tool model:
    2 prompts x 2 generations a step, replies long enough for a tool call."""
    from tests.trainers.helpers import grpo_config

    base = {"per_device_train_batch_size": 4, "max_completion_length": 96, "learning_rate": 1e-3}
    return grpo_config(tmp_path, **{**base, **kwargs})


@pytest.mark.parametrize(
    ("name", "cls"),
    [("solve", SolveEnvironment), ("tool", ToolEnvironment), ("code", CodeEnvironment)],
)
def test_a_stock_grpo_trainer_trains_on_the_env_with_no_reward_funcs(
    tool_model, tmp_path, name, cls, report_time, monkeypatch
):
    """`GRPOTrainer(environment_factory=factory)`: the env's reward is the only one, logged under
    its class name, and the model's tool calls reach the env."""
    import time

    from transformers import PreTrainedTokenizerFast
    from trl import GRPOTrainer

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")  # environment_factory is experimental
    path, data = tool_model
    dataset, factory, _, _ = data[name]
    args = tool_grpo_args(tmp_path, max_steps=3)
    trainer = GRPOTrainer(
        model=path,
        args=args,
        train_dataset=dataset,
        processing_class=PreTrainedTokenizerFast.from_pretrained(path),  # not Qwen2's own class
        environment_factory=factory,
    )
    start = time.perf_counter()
    trainer.train()
    report_time(f"3 GRPO steps on {cls.__name__}", time.perf_counter() - start, 60.0)
    steps = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert len(steps) == 3
    key = f"rewards/{cls.__name__}/mean"
    assert all(key in entry for entry in steps)
    assert [k for k in steps[0] if k.startswith("rewards/") and k.endswith("/mean")] == [key]
    assert max(entry["tools/call_frequency"] for entry in steps) > 0
    assert max(entry[key] for entry in steps) > 0  # problem 0's answer, 7, is right


def test_several_envs_in_one_run_interleave_and_name_each_member():
    from envs.trl_env import trl_environments

    dataset, factories = trl_environments(
        {"solve": ("math/solve-v0", {}), "code": ("math/code-v0", {"task": "unknown"})},
        train_problems=2,
    )
    assert dataset["environment"] == ["solve", "code", "solve", "code"]
    assert dataset["problem_id"][1].startswith("unknown/")
    assert sorted(factories) == ["code", "solve"]
    solve, code = factories["solve"](), factories["code"]()
    assert type(solve).__name__ == "SolveEnvironment_solve" and isinstance(solve, SolveEnvironment)
    assert type(code).__name__ == "CodeEnvironment_code"
    code.reset(problem_id=dataset["problem_id"][1])
    with pytest.raises(ValueError, match="must be an identifier"):
        trl_environments({"a b": ("math/solve-v0", {})})
    with pytest.raises(ValueError, match="at least one member"):
        trl_environments({})


def test_a_mixed_task_poses_each_problem_with_its_members_instruction():
    dataset, factory = trl_environment("math/solve-v0", task="unknown+reach", train_problems=2)
    unknown, reach = (row["prompt"][0]["content"] for row in dataset)
    reach_format = envs.make_task("reach").answer_format
    assert reach_format in reach and reach_format not in unknown
    env = factory()
    env.reset(problem_id=dataset["problem_id"][1])
    assert type(env.env.verifier).__name__ == "ReachVerifier"


def test_a_stock_grpo_trainer_trains_on_several_envs_with_a_dict_factory(
    tool_model, tmp_path, monkeypatch
):
    """TRL's dict ``environment_factory``: each member's reward is logged on its own."""
    from transformers import PreTrainedTokenizerFast
    from trl import GRPOTrainer

    from envs.trl_env import trl_environments

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    path, _ = tool_model
    dataset, factories = trl_environments(
        {"solve": ("math/solve-v0", {}), "code": ("math/code-v0", {})}, train_problems=2
    )
    args = tool_grpo_args(tmp_path, max_steps=2, shuffle_dataset=False)  # a solve and a code row
    trainer = GRPOTrainer(
        model=path,
        args=args,
        train_dataset=dataset,
        processing_class=PreTrainedTokenizerFast.from_pretrained(path),
        environment_factory=factories,
    )
    trainer.train()
    steps = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert len(steps) == 2
    for name in ("SolveEnvironment_solve", "CodeEnvironment_code"):
        assert all(f"rewards/{name}/mean" in entry for entry in steps)
