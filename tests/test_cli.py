"""The ``mathteams`` command (`mathteams.cli`): its help, its dispatch to each command's module
(whose ``main`` the command's script calls), its lazy imports, the modules it reaches in the import
graph, and its errors."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from mathteams import cli
from tests.utils import REPO

# Commands run in a fresh interpreter, then whether torch, transformers or TRL got imported.
LIGHT = [
    ["--help"],
    ["train", "--help"],
    ["serve", "--help"],
    ["serve", "envs", "--help"],
    ["serve", "rewards", "--help"],
    ["bench", "--help"],
    ["bench", "verifiers", "--help"],
    ["fuzz", "--help"],
    ["play", "--seed", "2"],
]
HEAVY = ("torch", "transformers", "trl")
LIGHT_RUN = f"""
import contextlib, io, json, sys
from mathteams.cli import main
report = []
for argv in {LIGHT!r}:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = exit_.code
    loaded = [name for name in {HEAVY!r} if name in sys.modules]
    report.append([argv, code, loaded, out.getvalue()])
print(json.dumps(report))
"""


def leaves() -> dict[str, cli.Command]:
    """Every command that runs something, by its words (``serve envs``)."""
    found = {}
    for name, command in cli.COMMANDS.items():
        for member, leaf in command.choices.items() or [("", command)]:
            found[f"{name} {member}".strip()] = leaf
    return found


def run_main(capsys, *argv: str) -> tuple[object, str, str]:
    """`cli.main(argv)` in this process: (exit status or SystemExit code, stdout, stderr)."""
    try:
        code = cli.main(list(argv))
    except SystemExit as exit_:
        code = exit_.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_help_and_light_commands_import_no_torch():
    """``mathteams --help`` lists every command, one line each; it, the groups' help, the
    commands' own --help of the torch-free ones and a scripted episode import no torch."""
    result = subprocess.run(
        [sys.executable, "-c", LIGHT_RUN],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    for argv, code, loaded, _ in report:
        assert code == 0, argv
        assert loaded == [], f"mathteams {' '.join(argv)} imported {loaded}"
    top = report[0][3]
    assert top.startswith("usage: mathteams")
    lines = [line for line in top.splitlines() if line.startswith("  ")]
    assert [line.split()[0] for line in lines] == list(cli.COMMANDS)
    assert "serve envs|rewards" in top and "train ENV [ALGO]" in top
    outputs = {" ".join(argv): out for argv, _, _, out in report}
    assert "usage: mathteams serve envs [-h]" in outputs["serve envs --help"]
    assert "usage: mathteams bench verifiers [-h]" in outputs["bench verifiers --help"]
    assert "return per agent:" in outputs["play --seed 2"]
    assert "reflection, debate, tool, solve, ensemble" in outputs["train --help"]


def test_bench_summary_names_every_benchmark():
    from benchmarks.cli import COMMANDS as BENCHMARKS

    assert cli.COMMANDS["bench"].summary == f"benchmarks: {', '.join(BENCHMARKS)}"


# The modules `mathteams.cli` imports (each in a function, when its command runs): every command's
# module, and `envs` (`train` checks an env id against the registry).
REACHED = {
    "trainers.run.cli",
    "trainers.run.evaluate_cli",
    "envs.serving.cli",
    "rewards.serving.cli",
    "benchmarks.cli",
    "benchmarks.soak",
    "trainers.embedded.cli",
    "trainers.verifier.cli",
    "envs.testing.fuzz_cli",
    "envs.testing.play",
    "trainers.embedded.probe_critic",
    "trainers.embedded.probe_embedded",
    "trainers.embedded.probe_family",
    "agents.models",
}


def test_every_command_runs_its_scripts_code():
    """Each command's module exposes ``make_parser`` and ``main``, the function its script calls
    (the script a thin caller, with no sys.path change); every script is some command's, or a
    train/evaluate/corpus script. `train` runs ``train_command(env_id, argv)`` of its module, whose
    ``make_parser(algo, env_id)`` depends on the env and the algorithm."""
    named, reached = set(), set()
    for words, command in leaves().items():
        named.add(command.script)
        module = command.module()
        reached.add(module.__name__)
        assert callable(module.make_parser), words
        if command.run is not None:  # train: ENV first, then the module's train_command
            assert words == "train" and callable(module.train_command)
            continue
        assert callable(module.main), words
        source = (REPO / "scripts" / command.script).read_text(encoding="utf-8")
        imports = {
            (node.module, alias.name)
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.ImportFrom)
            for alias in node.names
        }
        assert (module.__name__, "main") in imports, (
            f"scripts/{command.script} does not call {words}"
        )
        assert "sys.path" not in source, command.script
    assert reached == REACHED
    scripts = {p.name for p in (REPO / "scripts").glob("*.py")}
    others = {p for p in scripts if p.startswith("train_") and p != "train_verifier.py"}
    assert scripts - named - others == {"robustness.py"}  # writes a test file: no command


def test_the_clis_reach_is_in_the_import_graph():
    """The modules the CLI reaches are imports grimp (and `lint-imports`) sees, not names resolved
    at run time: `mathteams.cli` imports each command's module, and no other module of the
    project but `envs`."""
    grimp = pytest.importorskip("grimp")
    packages = ("mathteams", "benchmarks", "trainers", "agents", "envs", "rewards")
    graph = grimp.build_graph(*packages, cache_dir=None)
    assert graph.find_modules_directly_imported_by("mathteams.cli") == REACHED | {"envs"}
    assert graph.find_modules_directly_imported_by("mathteams.__main__") == {"mathteams.cli"}


@pytest.mark.parametrize("words", [["serve", "envs"], ["bench"], ["soak"], ["fuzz"], ["play"]])
def test_a_commands_help_is_its_modules_parser(capsys, words):
    """``mathteams WORDS --help`` prints the help of the module's ``make_parser()``, named
    ``mathteams WORDS``."""
    code, out, _ = run_main(capsys, *words, "--help")
    assert code == 0
    command = cli.COMMANDS[words[0]]
    command = command.choices[words[1]] if command.choices else command
    with cli.program_name(words):
        assert out == command.module().make_parser().format_help()


def test_a_missing_command_module_is_a_clear_exit(monkeypatch):
    """A command whose module (or a module of the project it imports) is absent exits with one
    line; a missing third-party dependency raises, for the command's module explains it."""

    def absent():
        import envs.testing.nowhere as module  # absent

        return module

    def dependency():
        raise ModuleNotFoundError("No module named 'hypothesis'", name="hypothesis")

    for loader in (absent, dependency):
        monkeypatch.setitem(cli.COMMANDS, "play", cli.Command("play", loader, "play.py"))
        if loader is absent:
            with pytest.raises(
                SystemExit, match=r"^mathteams play: envs\.testing\.nowhere is missing"
            ):
                cli.main(["play"])
        else:
            with pytest.raises(ModuleNotFoundError, match="hypothesis"):
                cli.main(["play"])


def test_train_reaches_the_envs_training_parser(capsys):
    code, out, _ = run_main(capsys, "train", "reflection", "grpo", "--help")
    assert code == 0
    assert "usage: mathteams train reflection [ALGORITHM]" in out
    assert "--num_generations" in out and "--rounds" in out


def test_train_passes_the_env_id_and_the_rest(monkeypatch):
    """ENV's short name or a full env id becomes the env id; the algorithm and flags follow
    untouched, under the program name ``mathteams train ENV``."""
    import trainers.run.cli as run_cli

    calls = []

    def spy(env_id, argv):
        calls.append((env_id, argv, sys.argv[0]))
        return {"metrics": 1}

    monkeypatch.setattr(run_cli, "train_command", spy)
    argv0 = sys.argv[0]
    assert cli.main(["train", "reflection", "grpo", "--max_steps", "1"]) == 0
    assert cli.main(["train", "math/debate-v0", "--max_steps", "2"]) == 0
    assert calls == [
        ("math/reflection-v0", ["grpo", "--max_steps", "1"], "mathteams train reflection"),
        ("math/debate-v0", ["--max_steps", "2"], "mathteams train debate"),
    ]
    assert sys.argv[0] == argv0  # restored


def test_evaluate_reaches_the_evaluation_parser(capsys):
    code, out, _ = run_main(capsys, "evaluate", "--help")
    assert code == 0
    assert out.startswith("usage: mathteams evaluate [-h]") and "--num_problems" in out


def test_a_commands_exit_status_is_its_own(capsys, monkeypatch):
    """An int a command's function returns is the exit status; anything else is 0."""
    code, out, _ = run_main(capsys, "play", "--seed", "2")
    assert code == 0 and "return per agent:" in out
    from benchmarks import cli as bench

    monkeypatch.setattr(bench, "main", lambda argv: 3)
    assert cli.main(["bench", "verifiers"]) == 3
    monkeypatch.setattr(bench, "main", lambda argv: True)
    assert cli.main(["bench", "verifiers"]) == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["trian"], "mathteams: unknown command 'trian' (did you mean 'train'?); choose from"),
        (["serve", "env"], "mathteams serve: unknown command 'env' (did you mean 'envs'?)"),
        (
            ["probe", "x"],
            "mathteams probe: unknown command 'x'; choose from critic, embedded, coloring",
        ),
        (["train", "nowhere"], "mathteams train: unknown env 'nowhere'; ENV is one of reflection"),
        ([], "mathteams: a command is required"),
        (["serve"], "mathteams serve: a command is required"),
        (["train"], "mathteams train: ENV is required"),
    ],
)
def test_an_unknown_or_missing_command_is_a_clear_error(capsys, argv, message):
    code, out, err = run_main(capsys, *argv)
    assert code == 2 and out == ""
    assert message in err
    if argv == ["trian"]:
        assert ", ".join(cli.COMMANDS) in err and err.count("\n") == 1  # one line


def test_the_command_is_declared_and_installed():
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["scripts"] == {"mathteams": "mathteams.cli:main"}
    command = Path(sys.executable).parent / "mathteams"
    if not command.is_file():
        pytest.skip(f"{command} is not installed (pip install -e . installs it)")
    result = subprocess.run(
        [str(command), "--help"], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0 and result.stdout.startswith("usage: mathteams")


def test_python_m_mathteams_is_the_command():
    """``python -m mathteams`` runs `mathteams.cli.main`, its exit status the command's."""
    for argv, status in ((["serve", "--help"], 0), (["trian"], 2)):
        result = subprocess.run(
            [sys.executable, "-m", "mathteams", *argv],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert result.returncode == status, result.stderr
    assert "did you mean 'train'?" in result.stderr
