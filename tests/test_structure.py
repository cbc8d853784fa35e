"""The module structure a reader relies on, checked on the source with ``ast`` (nothing is imported).

These replace the old 500-line cap on modules, which only moved code behind private imports. Three rules:

**No import circles.** The graph has one node per module of ``src/perfmagic`` (a package is its
``__init__``) and one edge per import of another perfmagic module, wherever the import is, except under
``if TYPE_CHECKING:`` (an annotation is no dependency). Imports inside functions count: a lazy import
keeps ``%load_ext`` cheap and a heavy module unloaded, and that is fine in one direction, but two
modules that import each other, however late, are one concept cut in two or a helper in the wrong
place (the issue's ``cpu_flags``, ``per_call``, ``_run_id``, roofs cache and ``Ledger.to_frame``
circles were all lazy ones). Edges are drawn the way Python runs them: ``from pkg import name`` goes to
``pkg.name`` when that is a module, else to ``pkg``; importing ``a.b.c`` also runs ``a`` and ``a.b``
first, so those packages get an edge too. No edge goes to the importer's own ancestor packages: they
are loaded before its first line runs, so reading a name from one's own package (``from .. import
__version__``) adds no dependency that could be removed. A circle is a strongly connected set of two or more
modules; each is reported with one cycle through it, every step with its file and line.

**No private names across packages.** A package here is a top-level subpackage of perfmagic
(``timing``, ``render``, ``storage``, ``magics``, ...); ``perfmagic/__init__.py``, ``result.py`` and
``errors.py`` form the root package. A name is private when it starts with ``_`` and is not a dunder; a
module is private when a part of its path below its package does (``magics/_args.py``). Within one
package anything may be imported (``magics/_bench.py`` uses ``magics/_args.py``). From another package,
importing a private name, importing from a private module, or reading ``module._name`` of a module
imported from there is a violation, wherever the import is (inside functions too). The fix is to give the
helper a public name where it belongs, or to move a shared helper to ``core/``.

**No function over 80 lines.** Every ``def`` (methods and nested functions too) is measured from its
``def`` line to its last line, not counting its docstring (the method written out for a reader is wanted,
not a cost) and not its decorators. A nested function counts in its parent's length and is also checked
on its own.

``test_the_checker_catches_what_it_should`` plants one violation of each kind in synthetic source, so the
checks cannot pass by checking nothing.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from collections.abc import Mapping
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "perfmagic"
ROOT = "perfmagic"
MAX_FUNCTION_LINES = 80

# Import edges (importer, imported) allowed to close a circle. Empty since issue 31 fixed the last six (the
# ledger's pandas views and run records, the flame and comparison renderers, the record codec's result
# classes): keep it so. A circle is reported when it survives without these edges; an entry whose import
# is gone fails the test, so the list cannot go stale.
ALLOWED_EDGES: dict[tuple[str, str], str] = {}
# Private imports across packages still allowed, as (importing module, "module:name"), with the reason.
ALLOWED_PRIVATE: set[tuple[str, str]] = set()
# Functions over the limit still allowed, as (module, qualified name): those not split yet (issue 31).
# Empty is the goal; an entry that is no longer over the limit fails the test.
ALLOWED_LONG: dict[tuple[str, str], str] = {
}


@dataclass(frozen=True)
class Module:
    name: str  # dotted: perfmagic.timing.bench
    path: str  # for messages: timing/bench.py
    source: str
    is_package: bool


def _modules_from_disk() -> dict[str, Module]:
    out = {}
    for p in sorted(SRC.rglob("*.py")):
        rel = p.relative_to(SRC)
        parts = [ROOT, *rel.with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        name = ".".join(parts)
        out[name] = Module(name, str(rel), p.read_text(), is_package)
    return out


# ---- walking the imports ----------------------------------------------------------------------------


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, *, typing_only_too: bool) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of a module, in functions too; those under ``if TYPE_CHECKING:`` only
    with ``typing_only_too``."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append(child)
            elif not typing_only_too and isinstance(child, ast.If) and _is_type_checking(child.test):
                for sub in child.orelse:
                    visit(ast.Module(body=[sub], type_ignores=[]))
            else:
                visit(child)

    visit(tree)
    return found


def _base(mod: Module, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` reads from."""
    if node.level == 0:
        return node.module or ""
    parts = mod.name.split(".")
    if not mod.is_package:
        parts = parts[:-1]
    if node.level > 1:
        parts = parts[: len(parts) - (node.level - 1)]
    return ".".join([*parts, node.module] if node.module else parts)


def _targets(mod: Module, node: ast.Import | ast.ImportFrom, known: set[str]) -> list[tuple[str, str | None]]:
    """(module, name read from it or None) for each thing an import statement loads."""
    if isinstance(node, ast.Import):
        return [(a.name, None) for a in node.names]
    base = _base(mod, node)
    out: list[tuple[str, str | None]] = []
    for a in node.names:
        sub = f"{base}.{a.name}"
        out.append((sub, None) if sub in known else (base, a.name))
    return out


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


# ---- rule 1: circles --------------------------------------------------------------------------------


def import_graph(mods: dict[str, Module]) -> dict[str, dict[str, int]]:
    """module -> {perfmagic module it imports: line of the first such import}."""
    known = set(mods)
    graph: dict[str, dict[str, int]] = {name: {} for name in mods}
    for mod in mods.values():
        own = set(_ancestors(mod.name))
        for node in _imports(ast.parse(mod.source), typing_only_too=False):
            for target, _ in _targets(mod, node, known):
                for t in [*_ancestors(target), target]:
                    if t in known and t != mod.name and t not in own:
                        graph[mod.name].setdefault(t, node.lineno)
    return graph


def _strongly_connected(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def connect(v: str) -> None:  # Tarjan; the graph is a few hundred modules, recursion is fine
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return out


def _one_cycle(graph: dict[str, dict[str, int]], comp: list[str]) -> list[str]:
    """A shortest cycle through the first module of a strongly connected set."""
    start, inside = comp[0], set(comp)
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v]):
            if w == start:
                return [*paths[v], start]
            if w in inside and w not in paths:
                paths[w] = [*paths[v], w]
                queue.append(w)
    return comp


def import_circles(mods: dict[str, Module], allowed: Mapping[tuple[str, str], str] = {}) -> list[str]:
    graph = import_graph(mods)
    for a, b in allowed:
        graph.get(a, {}).pop(b, None)
    problems = []
    for comp in _strongly_connected(graph):
        cycle = _one_cycle(graph, comp)
        steps = ", ".join(f"{mods[a].path}:{graph[a][b]} imports {b}" for a, b in zip(cycle, cycle[1:]))
        more = sorted(set(comp) - set(cycle))
        steps += f"; the same circle also takes in {', '.join(more)}" if more else ""
        problems.append(
            f"import circle {' -> '.join(cycle)} ({steps}). Fix: move the helper both sides need into the "
            "module it belongs to (the lower layer, or core/), so one side stops importing the other"
        )
    return problems


# ---- rule 2: private names across packages ----------------------------------------------------------


def _package(mod: Module) -> str:
    """The top-level subpackage a module belongs to; the root's own modules form the root package."""
    parts = mod.name.split(".")
    return parts[1] if len(parts) >= 3 or (len(parts) == 2 and mod.is_package) else ROOT


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _private_module(name: str) -> bool:
    return any(_private(p) for p in name.split(".")[2:])


def private_imports(mods: dict[str, Module]) -> list[str]:
    pkg = {name: _package(mod) for name, mod in mods.items()}
    known = set(mods)
    problems = []
    for mod in mods.values():
        tree = ast.parse(mod.source)
        aliases: dict[str, str] = {}  # local name -> perfmagic module from another package
        for node in _imports(tree, typing_only_too=True):
            for target, name in _targets(mod, node, known):
                if not target.startswith(ROOT) or target not in pkg or pkg[target] == pkg[mod.name]:
                    continue
                what = f"{target}:{name}" if name else target
                if (mod.name, what) in ALLOWED_PRIVATE:
                    continue
                if (name and _private(name)) or _private_module(target):
                    problems.append(
                        f"{mod.path}:{node.lineno} imports the private {what} of package {pkg[target]}. Fix: "
                        "give it a public name in the module it belongs to, or move the shared helper to core/"
                    )
            if isinstance(node, ast.ImportFrom):
                for a in node.names:
                    sub = f"{_base(mod, node)}.{a.name}"
                    if sub in pkg and pkg[sub] != pkg[mod.name]:
                        aliases[a.asname or a.name] = sub
            else:
                for a in node.names:
                    if a.asname and a.name in pkg and pkg[a.name] != pkg[mod.name]:
                        aliases[a.asname] = a.name
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and _private(node.attr)
                and (mod.name, f"{aliases[node.value.id]}:{node.attr}") not in ALLOWED_PRIVATE
            ):
                target = aliases[node.value.id]
                problems.append(
                    f"{mod.path}:{node.lineno} reads the private {target}.{node.attr} of package {pkg[target]}. "
                    "Fix: give it a public name in the module it belongs to, or move the shared helper to core/"
                )
    return problems


# ---- rule 3: function length ------------------------------------------------------------------------


def function_lengths(source: str) -> list[tuple[str, int, int]]:
    """(qualified name, line of its def, lines without the docstring) of every function."""
    out = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = child.end_lineno - child.lineno + 1
                first = child.body[0]
                if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                    n -= first.end_lineno - first.lineno + 1
                out.append((prefix + child.name, child.lineno, n))
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return out


def long_functions(mods: dict[str, Module], allowed: Mapping[tuple[str, str], str] = {}) -> list[str]:
    problems = []
    for mod in mods.values():
        for name, line, n in function_lengths(mod.source):
            if n > MAX_FUNCTION_LINES and (mod.name, name) not in allowed:
                problems.append(
                    f"{mod.path}:{line} {name}() is {n} lines (docstring not counted; at most "
                    f"{MAX_FUNCTION_LINES}). Fix: split it into named steps (setup, validation, result building "
                    "apart from the loop it drives)"
                )
    return problems


# ---- the tests --------------------------------------------------------------------------------------


def test_no_import_circles() -> None:
    mods = _modules_from_disk()
    problems = import_circles(mods, ALLOWED_EDGES)
    assert not problems, "\n".join(problems)
    graph = import_graph(mods)
    gone = [edge for edge in ALLOWED_EDGES if edge[1] not in graph.get(edge[0], {})]
    assert not gone, f"allowed import edges that no longer occur, remove them from ALLOWED_EDGES: {gone}"


def test_no_private_names_across_packages() -> None:
    problems = private_imports(_modules_from_disk())
    assert not problems, "\n".join(problems)


def test_no_function_over_80_lines() -> None:
    mods = _modules_from_disk()
    problems = long_functions(mods, ALLOWED_LONG)
    assert not problems, "\n".join(problems)
    long = {(m.name, name) for m in mods.values() for name, _, n in function_lengths(m.source) if n > MAX_FUNCTION_LINES}
    assert set(ALLOWED_LONG) <= long, f"split already, remove from ALLOWED_LONG: {set(ALLOWED_LONG) - long}"


def _synthetic(files: dict[str, str]) -> dict[str, Module]:
    out = {}
    for path, source in files.items():
        parts = [ROOT, *Path(path).with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        out[name] = Module(name, path, source, is_package)
    return out


def test_the_checker_catches_what_it_should() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(80))
    mods = _synthetic(
        {
            "__init__.py": "",
            "a/__init__.py": "",
            "a/one.py": "from ..b.two import helper\nfrom ..b.two import _secret\n",
            "a/lazy.py": "def f():\n    from ..b import three\n    return three._hidden\n",
            "a/_inner.py": "X = 1\n",
            "a/uses_inner.py": "from ._inner import X\n",  # a private module within its own package: fine
            "b/__init__.py": "",
            "b/two.py": "from ..a import one\ndef helper():\n    '''Doc.\n\n    more.'''\n" + body + "\n",
            "b/three.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..a import one\n"
            "def short():\n    '''A long docstring\n" + "\n" * 90 + "'''\n    return 1\n",
            "b/fromany.py": "from ..a._inner import X\n",
            "c/__init__.py": "",
            "c/x.py": "from .y import Y\n",
            "c/y.py": "Y = 1\ndef f():\n    from .x import X\n",  # a lazy circle is still a circle
            "c/t.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .u import U\n",
            "c/u.py": "from .t import T\n",  # only an annotation goes back: no circle
        }
    )
    circles = import_circles(mods)
    assert len(circles) == 2, circles
    assert "perfmagic.a.one -> perfmagic.b.two -> perfmagic.a.one" in circles[0], circles
    assert "a/one.py:1 imports perfmagic.b.two" in circles[0]  # names the file and line
    assert "perfmagic.c.x -> perfmagic.c.y -> perfmagic.c.x" in circles[1] and "c/y.py:3" in circles[1], circles

    private = private_imports(mods)
    assert any("a/one.py:2" in p and "_secret" in p for p in private), private
    assert any("a/lazy.py:3" in p and "_hidden" in p for p in private), private  # module._name, in a function
    assert any("b/fromany.py:1" in p and "a._inner" in p for p in private), private  # a private module
    assert not any("uses_inner" in p for p in private), private
    assert len(private) == 3, private

    long = long_functions(mods)
    assert len(long) == 1 and "b/two.py:2 helper() is 81 lines" in long[0], long  # docstring not counted
