"""The package's import structure: imports run one way, no circles, no private names across modules.

Every ``import`` in ``nhfast/`` is read with :mod:`ast` (function-level imports included: a
lazy import upward is still an upward import). Each module belongs to a layer; a module may
import its own layer or lower ones only.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import nhfast

PACKAGE = Path(nhfast.__file__).resolve().parent

#: Layers from the bottom up: (rank, module-name prefixes). The longest matching prefix wins.
LAYERS: list[tuple[int, tuple[str, ...]]] = [
    # the compiled core imports nothing of nhfast; _abi reads the kernel ABI from its header
    (0, ("nhfast.errors", "nhfast._validate", "nhfast._cache", "nhfast._version", "nhfast._core")),
    (0, ("nhfast._records", "nhfast._progress", "nhfast._background", "nhfast._memory")),
    (0, ("nhfast._keys",)),
    (1, ("nhfast._abi", "nhfast._jit")),
    (2, ("nhfast.codegen",)),
    (3, ("nhfast._kernels",)),
    (4, ("nhfast.vectorfield", "nhfast.structured_field")),
    # the geometry describes systems and their vector fields; it integrates nothing
    (5, ("nhfast.symbolic",)),
    (6, ("nhfast.integrate", "nhfast.distributed", "nhfast.events", "nhfast._fastpath")),
    (6, ("nhfast._call", "nhfast._result")),
    (7, ("nhfast.hamiltonised",)),
    (8, ("nhfast.systems",)),
    (9, ("nhfast.analysis",)),
    (10, ("nhfast.experiments",)),
    (11, ("nhfast.cli", "nhfast.__main__")),
]
#: The package's own ``__init__`` re-exports the public API of the layers below it.
TOP = 12


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def layer(name: str) -> int:
    if name == "nhfast":
        return TOP
    best, rank = "", None
    for r, prefixes in LAYERS:
        for p in prefixes:
            if (name == p or name.startswith(p + ".")) and len(p) > len(best):
                best, rank = p, r
    if rank is None:
        raise AssertionError(f"module {name} has no layer: add it to LAYERS in {__file__}")
    return rank


def resolve(module: str, node: ast.ImportFrom) -> list[tuple[str, list[str]]]:
    """(absolute module, names taken from it) for a ``from X import a, b`` statement.

    ``from nhfast import _jit`` reaches the module ``nhfast._jit``, not a name of ``nhfast``.
    """
    if node.level:
        base = module.split(".")
        pkg = base if Path(PACKAGE.parent, *base, "__init__.py").exists() else base[:-1]
        pkg = pkg[: len(pkg) - node.level + 1]
        target = ".".join([*pkg, node.module] if node.module else pkg)
    else:
        target = node.module or ""
    out: list[tuple[str, list[str]]] = []
    names = []
    for alias in node.names:
        parts = f"{target}.{alias.name}".split(".")
        if (
            Path(PACKAGE.parent, *parts).with_suffix(".py").exists()
            or Path(PACKAGE.parent, *parts, "__init__.py").exists()
            or ".".join(parts) == "nhfast._core"
        ):
            out.append((".".join(parts), []))
        else:
            names.append(alias.name)
    if names:
        out.append((target, names))
    return out


def imports() -> dict[str, list[tuple[str, int, list[str]]]]:
    """module -> [(imported module, line, names imported)] for imports inside nhfast."""
    graph: dict[str, list[tuple[str, int, list[str]]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        mod = module_name(path)
        edges = graph.setdefault(mod, [])
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "nhfast":
                        edges.append((alias.name, node.lineno, []))
            elif isinstance(node, ast.ImportFrom):
                for target, names in resolve(mod, node):
                    if target.split(".")[0] == "nhfast":
                        edges.append((target, node.lineno, names))
    return graph


GRAPH = imports()


def test_every_module_has_a_layer() -> None:
    for mod in GRAPH:
        layer(mod)


def test_imports_run_one_way() -> None:
    """No module imports a higher layer, not even inside a function."""
    upward = []
    for mod, edges in GRAPH.items():
        for target, line, _ in edges:
            if target == "nhfast" and mod != "nhfast":
                upward.append(f"{mod}:{line} imports the package root")
            elif layer(target) > layer(mod):
                upward.append(
                    f"{mod}:{line} (layer {layer(mod)}) imports {target} ({layer(target)})"
                )
    assert not upward, "upward imports:\n" + "\n".join(upward)


def test_no_import_circles() -> None:
    """No circle between modules (the package root, which re-exports, is left out)."""
    nodes = {m: {t for t, _, _ in e if t in GRAPH and t != m} for m, e in GRAPH.items()}
    # a module imports its parent packages' __init__ implicitly: those are not edges of ours
    state: dict[str, int] = {}
    circles: list[list[str]] = []

    def visit(m: str, stack: list[str]) -> None:
        state[m] = 1
        for t in sorted(nodes[m]):
            if t == "nhfast" or m.startswith(t + "."):
                continue
            if state.get(t) == 1:
                circles.append([*stack[stack.index(t) :], t])
            elif t not in state:
                visit(t, [*stack, t])
        state[m] = 2

    for m in sorted(nodes):
        if m not in state:
            visit(m, [m])
    assert not circles, "import circles:\n" + "\n".join(" -> ".join(c) for c in circles)


def test_no_private_names_across_modules() -> None:
    """``from a import _name`` only inside one package's own private module tree."""
    crossing = []
    for mod, edges in GRAPH.items():
        for target, line, names in edges:
            for name in names:
                if name.startswith("_") and not name.startswith("__"):
                    crossing.append(f"{mod}:{line} imports {name} from {target}")
    assert not crossing, "private names used across modules:\n" + "\n".join(crossing)


@pytest.mark.parametrize(
    "package",
    [
        "nhfast",
        "nhfast.codegen",
        "nhfast.symbolic",
        "nhfast.symbolic.vakonomic",
        "nhfast.systems",
        "nhfast.analysis",
        "nhfast.experiments",
    ],
)
def test_public_packages_declare_all(package: str) -> None:
    import importlib

    mod = importlib.import_module(package)
    assert isinstance(getattr(mod, "__all__", None), list | tuple), f"{package} has no __all__"
    for name in mod.__all__:
        assert hasattr(mod, name), f"{package}.__all__ names {name}, which is not there"


def test_symbolic_layers_do_not_import_the_core() -> None:
    """The geometry and the code generators do not import the compiled core (the layer ranks
    above already keep them below the integrators)."""
    found = [
        f"{mod}:{line}"
        for mod, edges in GRAPH.items()
        if mod.startswith(("nhfast.symbolic", "nhfast.codegen"))
        for target, line, _ in edges
        if target == "nhfast._core"
    ]
    assert not found, "the compiled core imported by the symbolic layers:\n" + "\n".join(found)


BLOCK_CORE = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "nhfast._core":
            raise ImportError("nhfast._core blocked by the test")
sys.meta_path.insert(0, Block())
import nhfast, nhfast.codegen, nhfast.symbolic, nhfast.symbolic.vakonomic, nhfast.systems
import sympy as sp
from nhfast.codegen import KernelSet, generate_c
x = sp.Symbol("x")
assert "nh_rhs" in generate_c(KernelSet([x], [], None, {"rhs": [-x]}))
try:
    nhfast.integrate
except ImportError as exc:
    assert "compiled core" in str(exc), exc
else:
    raise AssertionError("nhfast.integrate without the core")
print("ok")
"""


def test_symbolic_layers_import_without_the_core() -> None:
    """``nhfast.symbolic``, ``nhfast.codegen`` and the catalogue import, and C is generated,
    with the compiled core blocked; the integration names then say what is missing."""
    out = subprocess.run(
        [sys.executable, "-c", BLOCK_CORE], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


#: The most names the ``__all__`` lists of the package may hold together (issue 31; issue 32
#: adds ``SystemSpec``, what ``nhfast run FILE.py:FACTORY`` takes).
PUBLIC_NAMES_MAX = 120


def _public_names() -> dict[str, object]:
    """Every name in an ``__all__`` of ``nhfast`` or one of its modules, with its object."""
    import importlib
    import pkgutil

    import nhfast

    names: dict[str, object] = {n: getattr(nhfast, n) for n in nhfast.__all__}
    for info in pkgutil.walk_packages(nhfast.__path__, "nhfast."):
        if info.name.endswith("__main__"):
            continue
        mod = importlib.import_module(info.name)
        for n in getattr(mod, "__all__", ()):
            names.setdefault(n, getattr(mod, n))
    return names


def test_public_surface_is_small() -> None:
    names = _public_names()
    assert len(names) <= PUBLIC_NAMES_MAX, (
        f"{len(names)} public names (at most {PUBLIC_NAMES_MAX}): {sorted(names)}"
    )


def test_public_callables_have_numpydoc_docstrings() -> None:
    """A summary line, and a ``Parameters`` (or, for classes, ``Attributes``) section when the
    callable takes arguments; exceptions and warnings need the summary only."""
    import inspect

    missing = []
    for name, obj in sorted(_public_names().items()):
        if not callable(obj):
            continue
        doc = inspect.getdoc(obj) or ""
        if not doc.strip():
            missing.append(f"{name}: no docstring")
            continue
        if inspect.isclass(obj) and issubclass(obj, BaseException):
            continue
        try:
            target = obj.__init__ if inspect.isclass(obj) else obj
            params = [p for p in inspect.signature(target).parameters if p not in ("self", "cls")]
        except (TypeError, ValueError):
            params = []
        sections = ("Parameters\n----------", "Attributes\n----------")
        if params and not any(s in doc for s in sections):
            missing.append(f"{name}: no Parameters section")
    assert not missing, "\n".join(missing)
