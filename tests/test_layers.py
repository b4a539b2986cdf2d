"""The import direction of DESIGN.md: envs and rewards never pull in torch, transformers or trl;
agents never imports envs, trainers or rewards."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "trl", "peft", "accelerate")


@pytest.mark.parametrize("package", ["envs", "rewards"])
def test_light_packages_import_without_heavy_dependencies(package):
    code = (
        f"import sys, {package}, {package}.registry\n"
        f"import envs.checks, envs.reflection, envs.debate, envs.ensemble, envs.solve\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"{package} imported {result.stdout.strip()}"


FORBIDDEN = {
    "rewards": ("envs", "agents", "trainers", *HEAVY),
    "envs": ("agents", "trainers", *HEAVY),
    "agents": ("envs", "trainers", "rewards"),
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
    """pyproject's import-linter contracts (layers, light envs/rewards, no cycles in a package),
    checked the way `lint-imports` checks them."""
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
