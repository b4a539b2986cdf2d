"""The import direction of docs/architecture.md: the command (mathteams) on top, then benchmarks,
nothing below importing them; envs and rewards never pull in torch, transformers or trl; the
task layer (envs.tasks) imports no
env module, nor the sandbox (envs.sandbox) an env, task or verifier; agents never imports envs, trainers or rewards; inside trainers, the subpackages'
layers of pyproject's import-linter contracts (run on top, then algorithms / evaluation /
verifier, roles, rollout / embedded, compat), with episode records and verifier rows free of
torch."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "trl", "peft", "accelerate")


def heavy_imported(imports: str) -> str:
    """The heavy dependencies a fresh interpreter has loaded after `imports` (comma-separated)."""
    code = f"import sys\n{imports}\nprint(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


@pytest.mark.parametrize("package", ["envs", "rewards"])
def test_light_packages_import_without_heavy_dependencies(package):
    imports = (
        f"import {package}, {package}.registry\n"
        "import envs.checks, envs.reflection, envs.debate, envs.ensemble, envs.solve"
    )
    loaded = heavy_imported(imports)
    assert loaded == "", f"{package} imported {loaded}"


@pytest.mark.parametrize("module", ["trainers.rollout.records", "trainers.verifier.data"])
def test_records_and_verifier_rows_import_without_heavy_dependencies(module):
    """Saved episodes are read, and verifier rows cut from them, without torch or TRL."""
    loaded = heavy_imported(f"import {module}")
    assert loaded == "", f"{module} imported {loaded}"


FORBIDDEN = {
    "rewards": ("envs", "agents", "trainers", "benchmarks", "mathteams", *HEAVY),
    "envs": ("agents", "trainers", "benchmarks", "mathteams", *HEAVY),
    "agents": ("envs", "trainers", "benchmarks", "rewards", "mathteams"),
}


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_import_direction(package):
    offenders = []
    for path in (REPO / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            offenders += [
                f"{path.relative_to(REPO)}: {n}"
                for n in names
                if n.split(".")[0] in FORBIDDEN[package]
            ]
    assert not offenders, f"{package} must not import: {offenders}"


def test_import_contracts_hold():
    """pyproject's import-linter contracts (the packages' layers and trainers' subpackages',
    light envs/rewards and records, a task layer and a sandbox free of envs, no cycles in a
    package), checked as `lint-imports` does."""
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from importlinter.cli import lint_imports_command; lint_imports_command()",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


# ---------------------------------------------------------------- tests and scripts
TEST_INFRASTRUCTURE = ("test_*.py", "conftest.py")  # modules pytest collects or loads itself


def _imports(path: Path, root: Path) -> dict[str, set[str]]:
    """The modules `path` imports (relative imports resolved against its package), each with
    the names it may bring in as modules: ``from X import a`` gives ``{"X": {"X", "X.a"}}``."""
    package = path.relative_to(root).parent.parts
    imports: dict[str, set[str]] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                imports.setdefault(alias.name, set()).add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            parts = list(package[: len(package) - node.level + 1]) if node.level else []
            base = ".".join([*parts, *([node.module] if node.module else [])])
            names = imports.setdefault(base, set())
            names.update([base, *(f"{base}.{alias.name}" for alias in node.names)])
    return imports


def forbidden_imports(root: Path) -> list[str]:
    """Imports of a test module (``test_*.py``, ``conftest.py``) by any module under
    ``root/tests``, and imports of ``tests`` by ``root/scripts``: shared test code lives in
    helper modules (``tests/utils.py``, ``tests/<package>/helpers.py``) or fixtures, and
    scripts need nothing from the tests (the fuzz harness ships in the package:
    `envs.testing.fuzz`)."""
    offenders = []
    for path in sorted((root / "tests").rglob("*.py")):
        names = set().union(*_imports(path, root).values())
        for name in sorted(n for n in names if n.split(".")[0] == "tests"):
            target = root.joinpath(*name.split(".")).with_suffix(".py")
            infrastructure = any(target.match(pattern) for pattern in TEST_INFRASTRUCTURE)
            if infrastructure and target != path and target.is_file():
                offenders.append(f"{path.relative_to(root)} imports test module {name}")
    for path in sorted((root / "scripts").rglob("*.py")):
        offenders += [
            f"{path.relative_to(root)} imports {module}"
            for module in sorted(_imports(path, root))
            if module.split(".")[0] == "tests"
        ]
    return offenders


def test_no_test_module_imports_another_and_no_script_imports_tests():
    assert forbidden_imports(REPO) == []


def test_forbidden_imports_finds_each_kind(tmp_path):
    files = {
        "tests/__init__.py": "",
        "tests/conftest.py": "X = 1\n",
        "tests/utils.py": "Y = 2\n",
        "tests/a/__init__.py": "",
        "tests/a/helpers.py": "from tests.utils import Y\n",  # allowed: a helper module
        "tests/a/test_one.py": "from tests.a.helpers import Y\nfrom .test_two import f\n",
        "tests/a/test_two.py": "import tests.conftest\nfrom tests.a import test_one\n\ndef f(): ...\n",
        "tests/a/test_three.py": "from ..conftest import X\n",
        "scripts/run.py": "def main():\n    from tests.utils import Y\n",
        "scripts/fuzz.py": "from tests.fuzz import harness\n",
        "scripts/other.py": "from tests.fuzz.harness import run_target\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    assert forbidden_imports(tmp_path) == [
        "tests/a/test_one.py imports test module tests.a.test_two",
        "tests/a/test_three.py imports test module tests.conftest",
        "tests/a/test_two.py imports test module tests.a.test_one",
        "tests/a/test_two.py imports test module tests.conftest",
        "scripts/fuzz.py imports tests.fuzz",
        "scripts/other.py imports tests.fuzz.harness",
        "scripts/run.py imports tests.utils",
    ]


MAX_MODULE_LINES = 600
SOURCE_PACKAGES = ("mathteams", "envs", "agents", "rewards", "trainers", "benchmarks", "scripts")


def test_source_modules_stay_under_the_line_limit():
    """A module over 600 lines is two concerns: split it where they part (STYLE.md)."""
    long = {
        str(path.relative_to(REPO)): lines
        for package in SOURCE_PACKAGES
        for path in sorted((REPO / package).rglob("*.py"))
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split them): {long}"
