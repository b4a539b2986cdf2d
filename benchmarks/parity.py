"""``bench.py parity``: the ``math`` verifier on math-verify's own regression tables.

math-verify's repository keeps its expected verdicts as ``pytest`` tables of
``(gold, pred, expected)`` cases that call one helper, ``compare_strings(gold, pred, ...)``
(``tests/test_all.py``, ``test_boxed.py``, ``test_numina_cases.py``, ``test_open_thoughts.py``).
This command runs those tables twice in a ``pytest`` subprocess: once as they are (plain
math-verify) and once with ``compare_strings`` pointed at ``MathVerifier(float_rounding=
precision)`` (this module is then the ``pytest`` plugin that swaps it). It reports how many cases
each gets right and, for every case ``math`` gets wrong, the case and ``math``'s verdict.

The tables are not shipped with the project; point ``--tests`` at a clone of
https://github.com/huggingface/Math-Verify (or its ``tests`` folder).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from benchmarks.common import REPO, add_json_argument

NAME = "parity"
TABLES = ("test_all.py", "test_boxed.py", "test_numina_cases.py", "test_open_thoughts.py")
"""math-verify's test files whose cases go through ``compare_strings``."""
SWAP_VAR = "MATHTEAMS_PARITY_SWAP"
"""Set in the ``pytest`` subprocess that runs the tables with the ``math`` verifier."""


def add_parser(subparsers: Any) -> None:
    """Register the ``parity`` command."""
    parser = subparsers.add_parser(
        NAME,
        help="math verifier vs plain math-verify on math-verify's own regression tables",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    parser.add_argument(
        "--tests",
        type=Path,
        required=True,
        help="a clone of math-verify's repository, or its tests folder",
    )
    parser.add_argument("--show", type=int, default=20, help="cases math gets wrong to print")
    add_json_argument(parser)
    parser.set_defaults(func=run)


def tables_root(path: Path) -> Path:
    """The folder that holds math-verify's ``tests`` package (its files import
    ``tests.test_all``), given the repository or its ``tests`` folder."""
    path = path.expanduser().resolve()
    for root in (path, path.parent):
        if (root / "tests" / "test_all.py").is_file():
            return root
    raise SystemExit(
        f"parity: no math-verify tests at {path}: expected a clone of "
        "https://github.com/huggingface/Math-Verify (with tests/test_all.py) or its tests folder"
    )


def _run_tables(root: Path, swap: bool) -> dict[str, str]:
    """Each case's node id -> "passed" or "failed", from one ``pytest`` run of the tables."""
    files = [f"tests/{name}" for name in TABLES if (root / "tests" / name).is_file()]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(REPO), env.get("PYTHONPATH", "")])
    env.pop(SWAP_VAR, None)
    if swap:
        env[SWAP_VAR] = "1"
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        command = [sys.executable, "-m", "pytest", "-q", "-p", __name__, "-p", "no:cacheprovider"]
        command += ["--junitxml", str(report), *files]
        # check=False: pytest exits 1 when a case fails, which is a figure here, not an error
        done = subprocess.run(
            command, check=False, cwd=root, env=env, capture_output=True, text=True
        )
        if not report.exists():
            raise RuntimeError(
                f"parity: pytest did not run the tables (exit {done.returncode}):\n"
                f"{done.stdout[-2000:]}{done.stderr[-2000:]}"
            )
        outcomes = {}
        for case in ET.parse(report).iter("testcase"):
            node = f"{case.get('classname')}::{case.get('name')}"
            failed = case.find("failure") is not None or case.find("error") is not None
            outcomes[node] = "failed" if failed else "passed"
    return outcomes


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the tables plain and with ``math``; print and return the counts and ``math``'s misses."""
    root = tables_root(args.tests)
    plain = _run_tables(root, swap=False)
    ours = _run_tables(root, swap=True)
    misses = sorted(node for node, outcome in ours.items() if outcome == "failed")
    figures = {
        "cases": len(ours),
        "plain_right": sum(outcome == "passed" for outcome in plain.values()),
        "math_right": len(ours) - len(misses),
        "math_misses": misses,
        "plain_misses": sorted(node for node, outcome in plain.items() if outcome == "failed"),
    }
    print(f"math-verify's regression tables at {root}: {figures['cases']} cases")
    print(f"  plain math-verify right: {figures['plain_right']}")
    print(f"  math verifier right:     {figures['math_right']}")
    for node in misses[: args.show]:
        print(f"  math wrong on {node}")
    return figures


# The pytest plugin side: loaded with ``-p benchmarks.parity`` in the subprocess.

_verifiers: dict[int, Any] = {}


def math_compare_strings(gold: str, pred: str, *_: Any, precision: int = 6, **__: Any) -> int:
    """math-verify's ``compare_strings`` answered by the ``math`` verifier (1 or 0). The
    extraction targets and ``strict`` have no counterpart; ``allow_set_relation_comp`` (off by
    default in math-verify) is not offered, so its ``True`` cases count as misses."""
    from rewards.verifiers import MathVerifier

    verifier = _verifiers.get(precision)
    if verifier is None:
        verifier = _verifiers[precision] = MathVerifier(float_rounding=precision)
    return int(verifier.verify(pred, gold).score == 1.0)


def pytest_collection_finish(session: Any) -> None:
    """Point every collected table's ``compare_strings`` at the ``math`` verifier."""
    if not os.environ.get(SWAP_VAR):
        return
    for item in session.items:
        module = getattr(item, "module", None)
        if module is not None and hasattr(module, "compare_strings"):
            module.compare_strings = math_compare_strings
