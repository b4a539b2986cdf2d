"""The ``mathteams`` command: every job of the project behind one entry point, as ``trl`` has.

    mathteams train reflection                      # python scripts/train_reflection.py
    mathteams train debate grpo --max_steps 10      # python scripts/train_debate.py grpo ...
    mathteams evaluate --env_id math/debate-v0      # python scripts/evaluate.py ...
    mathteams serve envs --port 8001                # python scripts/serve_envs.py ...
    mathteams bench verifiers                       # python scripts/bench.py verifiers
    mathteams COMMAND --help                        # the command's own flags

Each command's code lives in a module of the packages that exposes ``make_parser()`` (its
argparse parser) and ``main(argv)``, as TRL's scripts do; the script under ``scripts/`` calls the
same ``main``, so the two take the same flags and do the same thing. `COMMANDS` reaches each
module through a function of this module that imports it (`Command.module`): a function-level
import, so the import graph (grimp, ``lint-imports``) shows every module the CLI reaches, yet a
command's module is imported only when the command runs: ``mathteams --help`` imports no torch,
and ``mathteams play`` and ``mathteams serve`` run on the base install (plus ``[server]``). Each
task family with a probe (`envs.tasks.family`) is a ``probe`` command of its own.
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import envs

PROG = "mathteams"

# The project's packages: a command whose module (or a module of these it imports) is absent is
# missing from this install; a missing third-party module is the command's own error to explain.
PACKAGES = ("mathteams", "benchmarks", "trainers", "agents", "envs", "rewards")

# `mathteams train ENV`: the env scripts' short names (scripts/train_<ENV>.py) -> env id.
TRAIN_ENVS = {
    name: f"math/{name}-v0" for name in ("reflection", "debate", "tool", "solve", "ensemble")
}


# Each command's module, imported when the command runs. Every one exposes ``make_parser()`` and
# ``main(argv)``, but for `train`'s `trainers.run.cli`: its parser depends on the env and the
# algorithm (``make_parser(algo, env_id)``), and ``train_command(env_id, argv)`` runs it, after
# `train` here has turned ENV into an env id.
def _train() -> ModuleType:
    import trainers.run.cli as module

    return module


def _evaluate() -> ModuleType:
    import trainers.run.evaluate_cli as module

    return module


def _serve_envs() -> ModuleType:
    import envs.serving.cli as module

    return module


def _serve_rewards() -> ModuleType:
    import rewards.serving.cli as module

    return module


def _bench() -> ModuleType:
    import benchmarks.cli as module

    return module


def _soak() -> ModuleType:
    import benchmarks.soak as module

    return module


def _build_embedded() -> ModuleType:
    import trainers.embedded.cli as module

    return module


def _train_verifier() -> ModuleType:
    import trainers.verifier.cli as module

    return module


def _fuzz() -> ModuleType:
    import envs.testing.fuzz_cli as module

    return module


def _play() -> ModuleType:
    import envs.testing.play as module

    return module


def _models() -> ModuleType:
    import agents.models as module

    return module


def _probe_critic() -> ModuleType:
    import trainers.embedded.probe_critic as module

    return module


def _probe_embedded() -> ModuleType:
    import trainers.embedded.probe_embedded as module

    return module


def _probe_family() -> ModuleType:
    import trainers.embedded.probe_family as module

    return module


@dataclass(frozen=True)
class Command:
    """One command of `COMMANDS`. ``module`` imports and returns the command's module, whose
    ``main`` is called with the arguments after the command's words, under the program name
    ``mathteams WORDS``; ``run``, when set, is called with them instead (`train`, which names the
    program itself). A group (``serve``, ``probe``) has ``choices`` instead, picked by its second
    word. ``script``: the file under ``scripts/`` that runs the same code."""

    summary: str  # its one line in `mathteams --help`
    module: Callable[[], ModuleType] | None = None
    script: str = ""
    args: str = ""  # the positional arguments after the command's words, for usage lines
    choices: dict[str, Command] = field(default_factory=dict)
    run: Callable[[list[str]], Any] | None = None
    first: tuple[str, ...] = ()  # arguments put before the command line's (a family's name)


COMMANDS: dict[str, Command] = {
    "train": Command(
        "train an env's agents, evaluated before and after",
        _train,
        "train_<ENV>.py",
        "ENV [ALGO]",
        run=lambda argv: train(argv),  # below
    ),
    "evaluate": Command(
        "evaluate a team on an env x task against the same model alone", _evaluate, "evaluate.py"
    ),
    "serve": Command(
        "serve the envs (HTTP, WebSocket) or the verifiers (HTTP)",
        choices={
            "envs": Command(
                "serve registered envs over HTTP and WebSocket", _serve_envs, "serve_envs.py"
            ),
            "rewards": Command("serve verifiers over HTTP", _serve_rewards, "serve_rewards.py"),
        },
    ),
    "bench": Command(
        "benchmarks: verifiers, parity, envs, rollout, train, step, robustness, sandbox, serve, soak",
        _bench,
        "bench.py",
        "KIND",
    ),
    "soak": Command(
        "soak the env and reward servers under load and faults (bench soak)", _soak, "soak.py"
    ),
    "build-embedded": Command(
        "rebuild (or --check) the embedded default model from its recipe",
        _build_embedded,
        "build_embedded.py",
    ),
    "models": Command(
        "fetch a pretrained model by name (models get smollm2-135m-instruct), or list them",
        _models,
        "models.py",
        "get|list",
    ),
    "train-verifier": Command(
        "train a learned verifier; compare it with the rule verifier",
        _train_verifier,
        "train_verifier.py",
    ),
    "fuzz": Command(
        "fuzz every env and verifier with adversarial text (needs mathteams[fuzz])",
        _fuzz,
        "fuzz.py",
    ),
    "play": Command(
        "play one episode with scripted agents, no model (base install)", _play, "play.py"
    ),
    "probe": Command(
        "how well a model's critic checks; where its numbers go wrong",
        choices={
            "critic": Command(
                "how well a model's reach critic checks, per level",
                _probe_critic,
                "probe_critic.py",
            ),
            "embedded": Command(
                "where the embedded solver, critic and refiner go wrong, per number",
                _probe_embedded,
                "probe_embedded.py",
            ),
            **{  # each task family's probe (`envs.tasks.family.FamilyProbe`)
                family.name: Command(
                    family.probe.summary,
                    _probe_family,
                    f"probe_{family.name}.py",
                    first=(family.name,),
                )
                for family in envs.families()
                if family.probe is not None
            },
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


def load(words: Sequence[str], command: Command) -> ModuleType:
    """The module of the command that `words` name, imported now. Exits with a message when the
    install lacks it (or a module of the project's packages it imports); a missing third-party
    dependency raises, for the module says what to install when it imports one lazily."""
    assert command.module is not None, words
    try:
        return command.module()
    except ModuleNotFoundError as err:
        if (err.name or "").split(".")[0] not in PACKAGES:
            raise
        where = " ".join([PROG, *words])
        raise SystemExit(f"{where}: {err.name} is missing from this install") from err


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
    """``mathteams train ENV [ALGO] [flags]``: ``train_command(env_id, argv)`` of
    `trainers.run.cli` with ENV's env id, which runs an env's training with its run defaults
    (`envs.EnvSpec.run_task`, `run_options`), as scripts/train_<ENV>.py does."""
    if not argv:
        raise UsageError(f"{train_help()}\n\n{PROG} train: ENV is required")
    if argv[0] in ("-h", "--help"):
        print(train_help())
        return 0
    env, rest = argv[0], argv[1:]
    env_id = TRAIN_ENVS.get(env, env)
    if env_id not in TRAIN_ENVS.values() and env_id not in envs.list_envs():
        raise UsageError(
            f"{PROG} train: unknown env {env!r}; ENV is one of {', '.join(TRAIN_ENVS)} or a "
            f"registered env id ({', '.join(envs.list_envs())})"
        )
    module = load(["train"], COMMANDS["train"])
    # argparse names a program by sys.argv[0]'s basename: a built-in env by its short name
    short = {env_id: name for name, env_id in TRAIN_ENVS.items()}.get(env_id, env)
    with program_name(["train", short]):
        return module.train_command(env_id, rest)


def unknown(word: str, choices: Sequence[str], where: str) -> UsageError:
    """The error for an unknown command `word` of `where` (``mathteams``, ``mathteams serve``)."""
    close = difflib.get_close_matches(word, choices, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return UsageError(
        f"{where}: unknown command {word!r}{hint}; choose from {', '.join(choices)} "
        f"(`{where} --help` says what each does)"
    )


def dispatch(argv: list[str]) -> Any:
    """Run the command `argv` names; what its ``main`` returns."""
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
    if command.run is not None:  # train: it names the program itself
        return command.run(rest)
    module = load(words, command)
    with program_name(words):
        return module.main([*command.first, *rest])


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
