"""The ``mathteams`` command: every job of the project behind one entry point, as ``trl`` has.

    mathteams train reflection                      # python scripts/train_reflection.py
    mathteams train debate grpo --max_steps 10      # python scripts/train_debate.py grpo ...
    mathteams evaluate --env_id math/debate-v0      # python scripts/evaluate.py ...
    mathteams serve envs --port 8001                # python scripts/serve_envs.py ...
    mathteams bench verifiers                       # python scripts/bench.py verifiers
    mathteams COMMAND --help                        # the command's own flags

Each command's code lives in the package (`COMMANDS` names the function) and the script under
``scripts/`` calls the same function, so the two take the same flags and do the same thing. A
command's module is imported only when the command runs: ``mathteams --help`` imports no torch,
and ``mathteams play`` and ``mathteams serve`` run on the base install (plus ``[server]``).
"""

from __future__ import annotations

import difflib
import importlib
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

PROG = "mathteams"

# `mathteams train ENV`: the env scripts' short names (scripts/train_<ENV>.py) -> env id.
TRAIN_ENVS = {
    name: f"math/{name}-v0" for name in ("reflection", "debate", "tool", "solve", "ensemble")
}

# Where `train` and `evaluate` go: ``train_command(env_id, argv)`` runs an env's training with its
# run defaults (`envs.EnvSpec.run_task`, `run_options`); ``evaluate_cli.main(argv)`` is
# scripts/evaluate.py's main.
TRAIN = "trainers.run.cli:train_command"
EVALUATE = "trainers.run.evaluate_cli:main"


@dataclass(frozen=True)
class Command:
    """One command of `COMMANDS`. ``target`` is called with the arguments after the command's
    words: a ``module:function`` (imported when the command runs) or the name of a function of
    this module (`train`, `evaluate`). A group (``serve``, ``probe``) has ``choices`` instead,
    picked by its second word. ``script``: the file under ``scripts/`` that runs the same code."""

    summary: str  # its one line in `mathteams --help`
    target: str = ""
    script: str = ""
    args: str = ""  # the positional arguments after the command's words, for usage lines
    choices: dict[str, Command] = field(default_factory=dict)


COMMANDS: dict[str, Command] = {
    "train": Command(
        "train an env's agents, evaluated before and after",
        "train",
        "train_<ENV>.py",
        "ENV [ALGO]",
    ),
    "evaluate": Command(
        "evaluate a team on an env x task against the same model alone", "evaluate", "evaluate.py"
    ),
    "serve": Command(
        "serve the envs (HTTP, WebSocket) or the verifiers (HTTP)",
        choices={
            "envs": Command(
                "serve registered envs over HTTP and WebSocket",
                "envs.serving.cli:main",
                "serve_envs.py",
            ),
            "rewards": Command(
                "serve verifiers over HTTP", "rewards.serving.cli:main", "serve_rewards.py"
            ),
        },
    ),
    "bench": Command(
        "benchmarks: verifiers, parity, envs, rollout, train, step, robustness, sandbox, serve, soak",
        "benchmarks.cli:main",
        "bench.py",
        "KIND",
    ),
    "soak": Command(
        "soak the env and reward servers under load and faults (bench soak)",
        "benchmarks.soak:main",
        "soak.py",
    ),
    "build-embedded": Command(
        "rebuild (or --check) the embedded default model from its recipe",
        "trainers.embedded.cli:main",
        "build_embedded.py",
    ),
    "train-verifier": Command(
        "train a learned verifier; compare it with the rule verifier",
        "trainers.verifier.cli:main",
        "train_verifier.py",
    ),
    "fuzz": Command(
        "fuzz every env and verifier with adversarial text (needs mathteams[fuzz])",
        "envs.testing.fuzz_cli:main",
        "fuzz.py",
    ),
    "play": Command(
        "play one episode with scripted agents, no model (base install)",
        "envs.testing.play:main",
        "play.py",
    ),
    "probe": Command(
        "how well a model's critic checks; where its numbers go wrong",
        choices={
            "critic": Command(
                "how well a model's reach critic checks, per level",
                "trainers.embedded.probe_critic:main",
                "probe_critic.py",
            ),
            "embedded": Command(
                "where the embedded solver, critic and refiner go wrong, per number",
                "trainers.embedded.probe_embedded:main",
                "probe_embedded.py",
            ),
            "coloring": Command(
                "how a model's coloring solver and critic play, and whether its lookup is learnt",
                "trainers.embedded.probe_coloring:main",
                "probe_coloring.py",
            ),
        },
    ),
}


class UsageError(Exception):
    """A command line `main` refuses: the message goes to stderr, with exit status 2."""


def head(name: str, command: Command) -> str:
    """A command's name and positional arguments (a group's choices as ``a|b``)."""
    args = "|".join(command.choices) if command.choices else command.args
    return f"{name} {args}".strip()


def listing(commands: dict[str, Command], scripts: bool = False) -> str:
    """One line per command: its name and positional arguments, then its summary (and with
    `scripts`, its script)."""
    width = max(len(head(name, c)) for name, c in commands.items()) + 2
    return "\n".join(
        f"  {head(name, c):<{width}}{c.summary}" + (f" (scripts/{c.script})" if scripts else "")
        for name, c in commands.items()
    )


def help_text() -> str:
    """What ``mathteams --help`` prints."""
    return f"""usage: {PROG} [--help | --version] COMMAND [ARGS ...]

Multi-agent math-reasoning environments, verifiers and trainers: one command per job.

commands:
{listing(COMMANDS)}

`{PROG} COMMAND --help` gives a command's own flags. Each command runs the code of a script,
with the same flags: `{PROG} train reflection` is python scripts/train_reflection.py,
`{PROG} serve envs` is python scripts/serve_envs.py, and so on."""


def group_help(name: str, command: Command) -> str:
    """What ``mathteams serve --help`` (a group's help) prints."""
    first = next(iter(command.choices))
    return f"""usage: {PROG} {name} {{{",".join(command.choices)}}} [flags]

{command.summary[0].upper()}{command.summary[1:]}.

commands:
{listing(command.choices, scripts=True)}

`{PROG} {name} {first} --help` lists that command's flags."""


def train_help() -> str:
    """What ``mathteams train --help`` prints."""
    return f"""usage: {PROG} train ENV [ALGO] [flags]

Train the agents of one env: evaluate on held-out problems, train, evaluate again, and write the
model, metrics.json and curves.png to --output_dir; the same as
python scripts/train_<ENV>.py [ALGO] [flags].

  ENV   {", ".join(TRAIN_ENVS)} (math/<ENV>-v0), or a registered env id
  ALGO  grpo (the default) or ppo; also sft and dpo for an env with reviews (reflection, tool)

`{PROG} train ENV [ALGO] --help` lists every field (the env's and the algorithm config's);
--config FILE.yaml sets fields from a file, and flags override it."""


def resolve(target: str) -> Callable[..., Any] | None:
    """The function a target names (``module:function``, imported now, or a function of this
    module); None when its module or the function is absent (a module that fails to import for
    another reason, a missing dependency, raises)."""
    module_name, sep, name = target.rpartition(":")
    if not sep:
        return globals()[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name == module_name or module_name.startswith(f"{err.name}."):
            return None
        raise
    return getattr(module, name, None)


@contextmanager
def program_name(words: Sequence[str]) -> Iterator[None]:
    """``sys.argv`` as a command sees it: ``sys.argv[0]`` is ``mathteams WORDS`` while it runs,
    so argparse names it so in usage lines and errors (``usage: mathteams serve envs [-h] ...``),
    as it names a script by its file; restored after."""
    saved = list(sys.argv)
    sys.argv[:1] = [" ".join([PROG, *words])]
    try:
        yield
    finally:
        sys.argv[:] = saved


def train(argv: list[str]) -> Any:
    """``mathteams train ENV [ALGO] [flags]``: `TRAIN` with ENV's env id."""
    if not argv:
        raise UsageError(f"{train_help()}\n\n{PROG} train: ENV is required")
    if argv[0] in ("-h", "--help"):
        print(train_help())
        return 0
    env, rest = argv[0], argv[1:]
    env_id = TRAIN_ENVS.get(env, env)
    if env_id not in TRAIN_ENVS.values():
        import envs

        if env_id not in envs.list_envs():
            raise UsageError(
                f"{PROG} train: unknown env {env!r}; ENV is one of {', '.join(TRAIN_ENVS)} or a "
                f"registered env id ({', '.join(envs.list_envs())})"
            )
    command = resolve(TRAIN)
    if command is None:
        raise SystemExit(f"{PROG} train: {TRAIN} is missing from this install")
    # argparse names a program by sys.argv[0]'s basename: a built-in env by its short name
    short = {env_id: name for name, env_id in TRAIN_ENVS.items()}.get(env_id, env)
    with program_name(["train", short]):
        return command(env_id, rest)


def evaluate(argv: list[str]) -> Any:
    """``mathteams evaluate [flags]``: `EVALUATE`."""
    command = resolve(EVALUATE)
    if command is None:
        raise SystemExit(f"{PROG} evaluate: {EVALUATE} is missing from this install")
    with program_name(["evaluate"]):
        return command(argv)


def unknown(word: str, choices: Sequence[str], where: str) -> UsageError:
    """The error for an unknown command `word` of `where` (``mathteams``, ``mathteams serve``)."""
    close = difflib.get_close_matches(word, choices, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return UsageError(
        f"{where}: unknown command {word!r}{hint}; choose from {', '.join(choices)} "
        f"(`{where} --help` says what each does)"
    )


def dispatch(argv: list[str]) -> Any:
    """Run the command `argv` names; what its function returns."""
    if not argv:
        raise UsageError(f"{help_text()}\n\n{PROG}: a command is required")
    if argv[0] in ("-h", "--help"):
        print(help_text())
        return 0
    if argv[0] == "--version":
        from importlib.metadata import PackageNotFoundError, version

        try:
            print(f"{PROG} {version(PROG)}")
        except PackageNotFoundError:
            print(f"{PROG}: not installed (pip install -e . from the repository)")
        return 0
    name, rest = argv[0], argv[1:]
    command = COMMANDS.get(name)
    if command is None:
        raise unknown(name, list(COMMANDS), PROG)
    words = [name]
    if command.choices:
        if not rest:
            raise UsageError(f"{group_help(name, command)}\n\n{PROG} {name}: a command is required")
        if rest[0] in ("-h", "--help"):
            print(group_help(name, command))
            return 0
        if rest[0] not in command.choices:
            raise unknown(rest[0], list(command.choices), f"{PROG} {name}")
        command, words, rest = command.choices[rest[0]], [name, rest[0]], rest[1:]
    function = resolve(command.target)
    if function is None:
        raise SystemExit(f"{' '.join([PROG, *words])}: {command.target} is missing")
    if ":" not in command.target:  # train, evaluate: they name the program themselves
        return function(rest)
    with program_name(words):
        return function(rest)


def main(argv: Sequence[str] | None = None) -> int:
    """The ``mathteams`` entry point: the exit status (a command's own when it returns an int)."""
    try:
        result = dispatch(list(sys.argv[1:] if argv is None else argv))
    except UsageError as err:
        print(err, file=sys.stderr)
        return 2
    return result if isinstance(result, int) and not isinstance(result, bool) else 0


if __name__ == "__main__":
    sys.exit(main())
