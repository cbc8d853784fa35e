"""Turning a cell's source into a callable that runs it ``n`` times, compiled once.

The source is parsed and compiled as a module first, so a ``SyntaxError`` points at the user's own
line (and IPython shows it as such). The statements are then wrapped, by AST, into::

    def __perfmagic_cell__(__pm_n):
        __pm_v = None
        for __pm_i in __pm_repeat(None, __pm_n):
            <the cell's statements>
            __pm_v = <the cell's last expression, if it ends with one>
        return __pm_v

keeping the original line numbers, so the loop costs one iteration step per call (as ``%timeit``'s
template does) and a traceback from inside the cell points at the cell's line. Names the cell
assigns are local to that function, exactly as in ``%%timeit``; names it reads come from the
namespace given (the user's, plus the setup's). A cell that cannot live inside a function
(``from m import *``) falls back to ``exec`` per call, which is slower and says so.
"""

from __future__ import annotations

import ast
import itertools
import linecache
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_FUNC = "__perfmagic_cell__"
#: the compiled cell's function, whose frame reads ``<cell>``; code nested in it (a generator expression)
#: keeps this name in its qualified name (``__perfmagic_cell__.<locals>.<genexpr>``)
CELL_FUNCTION = _FUNC


@dataclass(frozen=True)
class CompiledCell:
    source: str
    filename: str
    run: Callable[[int], Any]
    mode: str  # "function" | "exec" | "callable"


def register_source(source: str, filename: str) -> None:
    """Make tracebacks able to show the source lines of ``filename``.

    A name already known keeps its source (IPython registered the cell under it), except perfmagic's own
    default names (``<perfmagic-…>``), which every call without a filename reuses for new code.
    """
    if filename not in linecache.cache or filename.startswith("<perfmagic"):
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)


def location(place: str, line: int | None = None) -> str:
    """The one way perfmagic names a line of code: ``In [3] line 5`` in a notebook cell (or a
    ``<...>`` source, or a flame graph's ``cell``), ``pkg/mod.py:12`` in a file; ``place`` alone
    without a line."""
    if not line:
        return place
    return f"{place} line {line}" if place.startswith(("In [", "<", "cell")) else f"{place}:{line}"


def compile_module(source: str, filename: str) -> Any:
    """Compile a cell's statements to run as they are in a namespace (``exec``: the profilers, the
    DataLoader check's step), its source registered for tracebacks.

    A ``SyntaxError`` is the user's and propagates (its file is ``filename``). Top-level ``await``,
    valid in IPython but not in code a magic runs synchronously inside the kernel's event loop,
    raises :class:`~perfmagic.errors.PerfmagicError` with the way out.
    """
    __tracebackhide__ = True
    register_source(source, filename)
    try:
        return compile(source, filename, "exec", dont_inherit=True)
    except SyntaxError:
        try:
            code = compile(source, filename, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
        except SyntaxError:
            code = None
        if code is not None and code.co_flags & 0x80:  # CO_COROUTINE: top-level await / async for / async with
            from ..errors import PerfmagicError

            raise PerfmagicError(
                "the cell uses top-level 'await', which a magic cannot run: the cell would have to run on the "
                "kernel's event loop. Measure the synchronous work it does (e.g. the function the coroutine "
                "calls), or from a script: perfmagic.flame(lambda: asyncio.run(main()))") from None
        raise  # the user's own SyntaxError


def compile_cell(source: str, namespace: dict[str, Any], filename: str = "<perfmagic-cell>") -> CompiledCell:
    """Compile ``source`` once into a ``run(n)`` callable whose globals are ``namespace``."""
    register_source(source, filename)
    tree = ast.parse(source, filename, "exec")
    compile(tree, filename, "exec")  # validates against module rules (return/await/yield outside...)
    body = list(tree.body)
    if not body:
        body = [ast.Pass()]
    if isinstance(body[-1], ast.Expr):
        last = body.pop()
        assign = ast.Assign(targets=[ast.Name("__pm_v", ast.Store())], value=last.value)
        ast.copy_location(assign, last)
        body.append(assign)
    loop = ast.For(
        target=ast.Name("__pm_i", ast.Store()),
        iter=ast.Call(ast.Name("__pm_repeat", ast.Load()),
                      [ast.Constant(None), ast.Name("__pm_n", ast.Load())], []),
        body=body, orelse=[],
    )
    func = ast.FunctionDef(
        name=_FUNC,
        args=ast.arguments(posonlyargs=[], args=[ast.arg("__pm_n")], kwonlyargs=[], kw_defaults=[],
                           defaults=[], vararg=None, kwarg=None),
        body=[ast.Assign(targets=[ast.Name("__pm_v", ast.Store())], value=ast.Constant(None)), loop,
              ast.Return(ast.Name("__pm_v", ast.Load()))],
        decorator_list=[], returns=None,
    )
    if sys.version_info >= (3, 12):
        func.type_params = []
    wrapper = ast.Module(body=[func], type_ignores=[])
    # line numbers of the scaffolding: the first line of the cell
    for node in (func, loop, func.body[0], func.body[2], loop.iter, loop.target, func.args):
        node.lineno = node.end_lineno = 1  # type: ignore[attr-defined]
        node.col_offset = node.end_col_offset = 0  # type: ignore[attr-defined]
    ast.fix_missing_locations(wrapper)
    namespace.setdefault("__pm_repeat", itertools.repeat)
    try:
        code = compile(wrapper, filename, "exec")
    except SyntaxError:
        module_code = compile(source, filename, "exec")

        def run_exec(n: int) -> Any:
            for _ in itertools.repeat(None, n):
                exec(module_code, namespace)
            return None

        return CompiledCell(source, filename, run_exec, "exec")
    exec(code, namespace)
    fn = namespace.pop(_FUNC)
    # tracebacks read "in <cell>" rather than the scaffolding's name
    renamed = {"co_name": "<cell>"}
    if sys.version_info >= (3, 11):
        renamed["co_qualname"] = "<cell>"
    fn.__code__ = fn.__code__.replace(**renamed)
    return CompiledCell(source, filename, fn, "function")


def compile_callable(fn: Callable[[], Any]) -> CompiledCell:
    """Wrap a zero-argument callable in the same ``run(n)`` protocol."""
    if not callable(fn):
        raise TypeError(f"expected code (str) or a zero-argument callable, got {type(fn).__name__}")

    def run(n: int, _fn: Callable[[], Any] = fn, _rep: Any = itertools.repeat) -> Any:
        v = None
        for _ in _rep(None, n):
            v = _fn()
        return v

    name = getattr(fn, "__qualname__", repr(fn))
    return CompiledCell(f"{name}()", "<callable>", run, "callable")
