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
  private parameter) marks that method with ``@compat.hook``, so its name is declared and checked;
- and every trl / transformers class a class of the packages subclasses is declared in
  `trainers.compat.BASES` (found at run time among the modules' classes, and in the source, where
  a ``class`` statement, nested ones too, names a base imported from trl or transformers), and
  every declared one is subclassed.
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
PROJECT = ("agents", "envs", "rewards", "trainers", "benchmarks", "scripts", "tests")
STDLIB_PUBLIC = {"_exit": "os._exit (posix._exit in the sandbox child): documented stdlib API"}
ATTRIBUTE_FUNCTIONS = ("getattr", "hasattr", "setattr", "delattr")
UPSTREAM_SUBMODULES = ("trl.", "transformers.")
UPSTREAM = ("trl", "transformers")
PACKAGES = ("agents", "envs", "rewards", "trainers", "benchmarks")


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
    """Every class defined in the packages' modules (not the sandbox bootstrap), plus the
    trainer classes the role mixins compose at run time."""
    from trl import GRPOTrainer

    from trainers.algorithms.grpo import MultiAgentGRPOTrainer
    from trainers.algorithms.ppo import MultiAgentPPOTrainer
    from trainers.roles.adapters import with_role_adapters
    from trainers.roles.models import with_role_models

    classes = []
    for package in PACKAGES:
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


# ---------------------------------------------------------------- subclassed upstream classes
def _class_name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def upstream_bases(classes: Iterable[type], is_project: Callable[[type], bool]) -> dict[str, set]:
    """``"module:Class"`` of each trl / transformers class among the direct bases of `classes`,
    with the classes that name it."""
    found: dict[str, set] = {}
    for cls in classes:
        for base in cls.__bases__:
            if not is_project(base) and base.__module__.split(".")[0] in UPSTREAM:
                found.setdefault(_class_name(base), set()).add(
                    f"{cls.__module__}.{cls.__qualname__}"
                )
    return found


def _dotted(node: ast.expr) -> str | None:
    """``a.b.C`` for a name or attribute chain, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


def _upstream_object(dotted: str) -> object:
    """What ``module.path.Name`` names: the longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            found = getattr(found, attr)
        return found
    raise ImportError(dotted)


def source_bases(files: Mapping[str, str]) -> dict[str, set]:
    """`upstream_bases` read from the source: each ``class`` statement (nested ones too) with a
    base imported from trl or transformers, resolved to the class it names."""
    found: dict[str, set] = {}
    for path, source in files.items():
        tree = ast.parse(source, filename=path)
        imported: dict[str, str] = {}  # local name -> the upstream path it stands for
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module.split(".")[0] in UPSTREAM:
                    for alias in node.names:
                        imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] in UPSTREAM:
                        head = alias.name.split(".")[0]
                        imported[alias.asname or head] = alias.name if alias.asname else head
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            for base in node.bases:
                head, _, rest = (_dotted(base) or "").partition(".")
                if head in imported:
                    target = _upstream_object(imported[head] + (f".{rest}" if rest else ""))
                    if isinstance(target, type):
                        found.setdefault(_class_name(target), set()).add(f"{path}:{node.name}")
    return found


def test_subclassed_upstream_classes_are_declared():
    from trainers import compat

    found = upstream_bases(project_classes(), _project)
    packages = {p: s for p, s in project_files().items() if p.split("/")[0] in PACKAGES}
    for name, users in source_bases(packages).items():
        found.setdefault(name, set()).update(users)
    undeclared = {name: sorted(users) for name, users in found.items() if name not in compat.BASES}
    assert not undeclared, (
        "these classes subclass a trl / transformers class trainers.compat.BASES does not "
        f"declare (add a Base there, with the methods they override): {undeclared}"
    )
    unused = sorted(set(compat.BASES) - set(found))
    assert not unused, f"trainers.compat.BASES declares classes nothing subclasses: {unused}"


def test_base_check_catches_an_undeclared_base():
    from transformers import DynamicCache, LogitsProcessor

    from trainers import compat

    class Declared(LogitsProcessor):
        pass

    class Undeclared(DynamicCache):
        pass

    def local(cls: type) -> bool:
        return cls.__module__ == __name__

    found = upstream_bases([Declared, Undeclared], local)
    assert set(found) - set(compat.BASES) == {"transformers.cache_utils:DynamicCache"}
    source = textwrap.dedent("""
        import transformers as tf
        from transformers import DynamicCache as Grown

        class Processor(tf.LogitsProcessor):
            pass

        def build():
            class Inner(Grown):
                pass
        """)
    assert source_bases({"agents/x.py": source}) == {
        "transformers.generation.logits_process:LogitsProcessor": {"agents/x.py:Processor"},
        "transformers.cache_utils:DynamicCache": {"agents/x.py:Inner"},
    }


def test_compat_checks_each_declared_base():
    from trainers import compat

    compat.check_base(compat.BASES["transformers.cache_utils:DynamicLayer"])
    gone = compat.Base("transformers.cache_utils:NoSuchLayer", "transformers")
    with pytest.raises(AttributeError, match=r"NoSuchLayer .* does not exist"):
        compat.check_base(gone)
    renamed = compat.Base("transformers.cache_utils:DynamicLayer", "transformers", ("no_such",))
    with pytest.raises(AttributeError, match=r"DynamicLayer\.no_such .* does not exist"):
        compat.check_base(renamed)


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
