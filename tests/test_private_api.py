"""Private upstream API (TRL, transformers, torch, PettingZoo, ...) is touched in one module only.

`trainers.compat` declares every private upstream name the project relies on and checks them
against the installed versions. Two checks keep it the only place:

- a static one: every project file is parsed, and a private name (one leading underscore) counts
  as upstream when `trainers.compat` declares it or when the project never defines it (so
  ``self._rng`` of the project's own classes is not flagged, ``trainer._step`` is). Outside
  `trainers.compat` such a name may not be read, written, passed to ``getattr``, imported, or
  overridden, except by a method marked ``@compat.hook`` (which may call ``super()`` of its own
  name), and nothing may import from a trl / transformers submodule that is not public API.
  Tests may use the names `trainers.compat` declares, and import the modules holding them (they
  exercise the hooks directly), and nothing else upstream and private;
- a runtime one: every project class that overrides an upstream private method (or one with a
  private parameter) marks that method with ``@compat.hook``, so its name is declared and checked.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import textwrap
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
COMPAT = "trainers/compat.py"
PROJECT = ("agents", "envs", "rewards", "trainers", "scripts", "tests")
STDLIB_PUBLIC = {"_exit": "os._exit (posix._exit in the sandbox child): documented stdlib API"}
ATTRIBUTE_FUNCTIONS = ("getattr", "hasattr", "setattr", "delattr")
UPSTREAM_SUBMODULES = ("trl.", "transformers.")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def declared() -> dict[str, str]:
    """Every upstream private name `trainers.compat` declares, with where it lives."""
    from trainers import compat

    tables = (compat.HOOKS, compat.ATTRIBUTES, compat.INTERNAL, compat.PETTINGZOO_HELPERS)
    names = {name: p.where for table in tables for name, p in table.items() if _private(name)}
    for hook in compat.HOOKS.values():
        names.update({param: f"{hook.where}({param})" for param in hook.params if _private(param)})
    return names


def declared_modules() -> set[str]:
    """The upstream modules holding what `trainers.compat` declares (tests may import them)."""
    from trainers import compat

    tables = (compat.HOOKS, compat.ATTRIBUTES, compat.INTERNAL)
    return {p.owner.partition(":")[0] for table in tables for p in table.values()}


def project_files() -> dict[str, str]:
    """Relative path -> source of every project Python file."""
    files = {}
    for top in PROJECT:
        for path in sorted((REPO / top).rglob("*.py")):
            if "__pycache__" not in path.parts:
                files[path.relative_to(REPO).as_posix()] = path.read_text(encoding="utf-8")
    return files


def defined_names(trees: Iterable[ast.AST]) -> set[str]:
    """Private names the project defines: functions, classes, assignments, imports, arguments."""
    names: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.alias):
                names.add(node.asname or node.name.split(".")[0])
            elif isinstance(node, ast.arg):
                names.add(node.arg)
    return {name for name in names if _private(name)}


def _is_hook(function: ast.AST) -> bool:
    decorators = getattr(function, "decorator_list", [])
    return any(
        (
            isinstance(d, ast.Attribute)
            and d.attr == "hook"
            and getattr(d.value, "id", "") == "compat"
        )
        or (isinstance(d, ast.Name) and d.id == "hook")
        for d in decorators
    )


def _is_super(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"
    )


class _Scan(ast.NodeVisitor):
    """Collects the private-upstream touches of one file (see the module docstring)."""

    def __init__(
        self, path: str, upstream: Callable[[str], bool], hooks: set[str], test: bool
    ) -> None:
        self.path, self.upstream, self.hooks, self.test = path, upstream, hooks, test
        self.functions: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
        self.found: list[str] = []

    def flag(self, node: ast.AST, what: str) -> None:
        self.found.append(f"{self.path}:{node.lineno}: {what}")

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        hook = _is_hook(node)
        if node.name in self.hooks and not hook and not self.test:
            self.flag(
                node, f"def {node.name} overrides a declared upstream hook: mark it @compat.hook"
            )
        arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
        for arg in arguments:
            if self.upstream(arg.arg) and not hook and not self.test:
                self.flag(arg, f"parameter {arg.arg} is upstream's private parameter")
        self.functions.append(node)
        self.generic_visit(node)
        self.functions.pop()

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self.visit_FunctionDef(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if self.upstream(node.attr) and not self._allowed(node):
            self.flag(node, f".{node.attr} is upstream's private API")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = getattr(node.func, "id", None)
        if name in ATTRIBUTE_FUNCTIONS and len(node.args) >= 2:
            key = getattr(node.args[1], "value", None)
            if isinstance(key, str) and self.upstream(key):
                self.flag(node, f'{name}(..., "{key}") is upstream\'s private API')
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level == 0:
            self._check_module(node, module)
            if module.split(".")[0] not in PROJECT:
                for alias in node.names:
                    if _private(alias.name):
                        self.flag(node, f"imports {module}.{alias.name}, upstream's private API")

    def _check_module(self, node: ast.AST, module: str) -> None:
        from trainers import compat

        if not module.startswith(UPSTREAM_SUBMODULES) or module.startswith(
            compat.PUBLIC_SUBMODULES
        ):
            return
        if self.test and module in declared_modules():
            return
        self.flag(node, f"imports from {module}, outside trl's / transformers' public API")

    def _allowed(self, node: ast.Attribute) -> bool:
        inner = self.functions[-1] if self.functions else None
        return (
            inner is not None
            and _is_super(node.value)
            and node.attr == inner.name
            and _is_hook(inner)
        )


def violations(files: Mapping[str, str]) -> list[str]:
    """``path:line: what`` for each private upstream touch outside `trainers.compat`."""
    from trainers import compat

    trees = {path: ast.parse(source, filename=path) for path, source in files.items()}
    names = declared()
    own = defined_names(tree for path, tree in trees.items() if path != COMPAT) - set(names)
    documented = set(compat.PETTINGZOO_HELPERS) | set(STDLIB_PUBLIC)
    found = []
    for path, tree in trees.items():
        if path == COMPAT:
            continue
        test = path.startswith("tests/")

        def upstream(name: str, test: bool = test) -> bool:
            if not _private(name) or name in documented:
                return False
            if test:  # a test may use what compat declares, nothing else upstream
                return name not in names and name not in own
            return name in names or name not in own

        scan = _Scan(path, upstream, set(compat.HOOKS), test)
        scan.visit(tree)
        found += scan.found
    return found


def test_no_private_upstream_touch_outside_compat():
    found = violations(project_files())
    assert not found, (
        "private upstream API used outside trainers/compat.py (route it through a compat "
        "accessor, or declare the hook there and mark the override @compat.hook):\n"
        + "\n".join(found)
    )


# Each case: a file's source, and the lines the scan must flag (the scan's own test).
CASES = {
    "declared attribute": ("""
        def f(trainer):
            return trainer._buffered_inputs
        """, [3]),
    "undefined private name": ("""
        def f(model):
            return model._hidden_cache
        """, [3]),
    "the project's own private name": ("""
        class A:
            def __init__(self):
                self._own = 1

            def get(self):
                return self._own
        """, []),
    "unmarked override and its super call": ("""
        class T:
            def _compute_loss(self, model, inputs):
                return super()._compute_loss(model, inputs)
        """, [3, 4]),
    "marked override": ("""
        from trainers import compat

        class T:
            @compat.hook
            def _compute_loss(self, model, inputs):
                return super()._compute_loss(model, inputs)
        """, []),
    "marked override calling another hook": ("""
        from trainers import compat

        class T:
            @compat.hook
            def _compute_loss(self, model, inputs):
                return super()._prepare_inputs(inputs)
        """, [7]),
    "getattr with a private name": ("""
        def f(m):
            return getattr(m, "_tied_weights_keys", None)
        """, [3]),
    "internal submodule import": ("""
        from trl.trainer.utils import split_tensor_dict
        """, [2]),
    "private name import": ("""
        from torch.nn.modules.module import _global_module_registration_hooks
        """, [2]),
    "public submodule import": ("""
        from trl.rewards import accuracy_reward
        """, []),
    "private parameter of an unmarked override": ("""
        class T:
            def save_model(self, output_dir=None, _internal_call=False):
                return None
        """, [3, 3]),  # an unmarked override of a declared hook, with its private parameter
    "documented stdlib and PettingZoo names": ("""
        import os

        class E:
            def step(self, action):
                self._was_dead_step(action)
                os._exit(0)
        """, []),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_scan_flags_private_upstream_touches(case):
    source, lines = CASES[case]
    found = violations({"trainers/example.py": textwrap.dedent(source)})
    assert [int(item.split(":")[1]) for item in found] == lines, found


def test_scan_ignores_compat_itself_and_lets_tests_use_declared_names():
    assert violations({COMPAT: "def f(t):\n    return t._buffered_inputs\n"}) == []
    assert violations({"tests/test_x.py": "def f(t):\n    return t._buffered_inputs\n"}) == []
    assert (
        violations({"tests/test_x.py": "from trl.trainer.utils import split_tensor_dict\n"}) == []
    )
    found = violations({"tests/test_x.py": "from trl.trainer.callbacks import X\n"})
    assert [f.split(": ", 1)[1] for f in found] == [
        "imports from trl.trainer.callbacks, outside trl's / transformers' public API"
    ]
    found = violations({"tests/test_x.py": "def f(t):\n    return t._undeclared_thing\n"})
    assert found == ["tests/test_x.py:2: ._undeclared_thing is upstream's private API"]


# ------------------------------------------------------------------------- runtime: overrides
def _project(cls: type) -> bool:
    return cls.__module__.split(".")[0] in PROJECT


def undeclared_overrides(classes: Iterable[type], is_project: Callable[[type], bool]) -> list[str]:
    """``Class.method`` for each project method overriding an upstream private method (or one
    with a private parameter) without ``@compat.hook`` and a matching declaration."""
    from trainers import compat

    found = []
    for cls in classes:
        upstream = [k for k in cls.__mro__ if not is_project(k) and k is not object]
        for own in (k for k in cls.__mro__ if is_project(k)):
            for name, value in vars(own).items():
                if not inspect.isfunction(value) or name.startswith("__"):
                    continue
                base = next((vars(k)[name] for k in upstream if name in vars(k)), None)
                if base is None or not callable(base):
                    continue
                private_params = [p for p in inspect.signature(base).parameters if _private(p)]
                if not (_private(name) or private_params):
                    continue
                if getattr(value, "compat_hook", None) is not compat.HOOKS.get(name):
                    found.append(f"{own.__module__}.{own.__qualname__}.{name}")
    return sorted(set(found))


def project_classes() -> list[type]:
    """Every class defined in trainers, agents and envs (not the sandbox bootstrap), plus the
    trainer classes the role mixins compose at run time."""
    from trl import GRPOTrainer

    from trainers.algorithms.grpo import MultiAgentGRPOTrainer
    from trainers.algorithms.ppo import MultiAgentPPOTrainer
    from trainers.roles.adapters import with_role_adapters
    from trainers.roles.models import with_role_models

    classes = []
    for package in ("trainers", "agents", "envs"):
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, f"{package}."):
            if info.name.startswith("envs.sandbox"):
                continue  # its child bootstrap runs when imported; it subclasses nothing upstream
            module = importlib.import_module(info.name)
            classes += [c for c in vars(module).values() if inspect.isclass(c) and _project(c)]
    for base in (GRPOTrainer, MultiAgentGRPOTrainer, MultiAgentPPOTrainer):
        classes += [with_role_adapters(base), with_role_models(base)]
    return classes


def test_upstream_overrides_are_declared_hooks():
    found = undeclared_overrides(project_classes(), _project)
    assert not found, (
        "these methods override upstream private API without @compat.hook (declare them in "
        f"trainers.compat.HOOKS and mark them): {found}"
    )


def test_override_check_catches_an_unmarked_override():
    from trl import GRPOTrainer

    from trainers import compat

    class Marked(GRPOTrainer):
        @compat.hook
        def _compute_loss(self, model, inputs):
            return super()._compute_loss(model, inputs)

    class Unmarked(GRPOTrainer):
        def _compute_loss(self, model, inputs):
            return super()._compute_loss(model, inputs)

        def save_model(self, output_dir=None, _internal_call=False):  # a private parameter
            return super().save_model(output_dir, _internal_call)

    def local(cls: type) -> bool:
        return cls.__module__ == __name__

    assert undeclared_overrides([Marked], local) == []
    prefix = f"{__name__}.{Unmarked.__qualname__}"
    assert undeclared_overrides([Unmarked], local) == [
        f"{prefix}._compute_loss",
        f"{prefix}.save_model",
    ]


# -------------------------------------------------------------------------------- the pins
def test_pyproject_pins_the_ranges_compat_checks_each_with_an_upper_bound():
    tomllib = pytest.importorskip("tomllib")
    from packaging.requirements import Requirement

    from trainers import compat

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    groups = {"dependencies": project["dependencies"], **project["optional-dependencies"]}
    pinned: dict[str, set[str]] = {}
    for group in ("dependencies", "data", "train"):
        for line in groups[group]:
            requirement = Requirement(line)
            if requirement.name not in compat.SUPPORTED:
                continue
            assert any(s.operator in ("<", "<=", "~=", "==") for s in requirement.specifier), (
                f"{group}: {line} has no upper bound; pin it to the tested range"
            )
            pinned.setdefault(requirement.name, set()).add(str(requirement.specifier))
    assert set(pinned) == set(compat.SUPPORTED), (
        f"not pinned: {set(compat.SUPPORTED) - set(pinned)}"
    )
    for dist, spec in compat.SUPPORTED.items():
        assert pinned.get(dist) == {str(Requirement(f"{dist}{spec}").specifier)}, (
            f"pyproject.toml pins {dist} {pinned.get(dist)}; trainers.compat.SUPPORTED says {spec}"
        )
