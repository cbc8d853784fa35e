"""The code a profiler runs, and where code comes from: statement by statement, labelled ``In [n]``.

Shared by ``%%memory`` (:mod:`perfmagic.profile.memory`) and ``%%lineprof``
(:mod:`perfmagic.profile.lineprof`):

* **where code comes from** — :func:`code_kind` tells a notebook cell, a file of the user's, a
  library and perfmagic's/IPython's own code apart; :func:`source_label` names a line ``In [3] line 5``
  (a cell, through IPython's cell-filename map) or ``pkg/mod.py:12`` (a file).
* **the cell, statement by statement** — :func:`compile_statements` compiles one code object per
  top-level statement (as IPython does, line numbers kept), so a profiler can read its probes
  between statements (:func:`run_statements` calls ``mark(i)`` before statement i).
"""

from __future__ import annotations

import ast
import functools
import linecache
import os
import re
import sys
import sysconfig
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..core.cells import compile_module, location
from ..errors import BadOptionError

# ---- where code comes from ---------------------------------------------------------------------

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the perfmagic package
_INTERNAL = tuple(os.sep + p + os.sep for p in ("IPython", "ipykernel", "traitlets", "zmq", "tornado",
                                                "jupyter_client", "comm", "debugpy", "line_profiler")) + (
    os.sep + "threading.py", os.sep + "tracemalloc.py")
_LIB_DIRS = tuple({os.path.abspath(p) + os.sep for k, p in sysconfig.get_paths().items()
                   if k in ("stdlib", "platstdlib", "purelib", "platlib") and p})
_INPUT_RE = re.compile(r"^<ipython-input-(\d+)-")
_KERNEL_CELL_RE = re.compile(r"[/\\]ipykernel_\d+[/\\]")  # ipykernel's cell files: /tmp/ipykernel_PID/HASH.py


def shell_filename_map() -> Mapping[str, int]:
    """IPython's cell-filename -> execution count map, if IPython is running (never imports it)."""
    ipy = sys.modules.get("IPython")
    shell = ipy.get_ipython() if ipy is not None and hasattr(ipy, "get_ipython") else None
    return getattr(getattr(shell, "compile", None), "_filename_map", None) or {}


def cell_number(filename: str, filename_map: Mapping[str, int] | None) -> int | None:
    if filename_map and filename in filename_map:
        return int(filename_map[filename])
    m = _INPUT_RE.match(filename)
    return int(m.group(1)) if m else None


def is_cell(filename: str, filename_map: Mapping[str, int] | None) -> bool:
    return (cell_number(filename, filename_map) is not None or filename.startswith("<perfmagic")
            or _KERNEL_CELL_RE.search(filename) is not None)


def code_kind(filename: str, filename_map: Mapping[str, int] | None = None) -> str:
    """``"cell"`` | ``"user"`` (a file of the user's) | ``"library"`` | ``"internal"`` (perfmagic, IPython)."""
    if is_cell(filename, filename_map):
        return "cell"
    if filename.startswith(_PKG_DIR) or any(p in filename for p in _INTERNAL) or filename.startswith("<frozen"):
        return "internal"
    if filename.startswith(_LIB_DIRS) or "site-packages" in filename or "dist-packages" in filename:
        return "library"
    return "user"


def source_label(filename: str, lineno: int | None = None, filename_map: Mapping[str, int] | None = None) -> str:
    """``In [3] line 5`` for a notebook cell, ``pkg/mod.py:12`` for a file (shortened)."""
    n = cell_number(filename, filename_map)
    if n is not None:
        where = f"In [{n}]"
    elif filename.startswith("<"):
        where = filename
    else:
        try:
            rel = os.path.relpath(filename)
        except ValueError:
            rel = filename
        where = rel if not rel.startswith("..") else os.path.join(*filename.split(os.sep)[-2:])
    return location(where, lineno)


def source_line(filename: str, lineno: int) -> str:
    return linecache.getline(filename, lineno).strip()


# ---- the cell, statement by statement ------------------------------------------------------------

@dataclass(frozen=True)
class Statement:
    """One top-level statement of the cell (or the one call of a function), run by ``run()``."""

    filename: str
    lineno: int
    text: str
    run: Callable[[], Any]


def _exec(code: Any, ns: dict[str, Any]) -> None:
    __tracebackhide__ = True
    exec(code, ns)


def compile_statements(source: str, ns: dict[str, Any], filename: str) -> list[Statement]:
    """Compile ``source`` into one code object per top-level statement, line numbers kept.

    A ``SyntaxError`` is the user's and propagates; top-level ``await`` (valid in IPython, not here)
    raises :class:`~perfmagic.errors.PerfmagicError` with the way out.
    """
    __tracebackhide__ = True
    compile_module(source, filename)  # the user's SyntaxError, or top-level await refused, before any run
    tree = compile(source, filename, "exec", ast.PyCF_ONLY_AST)  # not ast.parse: no stdlib frame in tracebacks
    lines = source.splitlines()
    out = []
    for node in tree.body:
        code = compile(ast.Module(body=[node], type_ignores=[]), filename, "exec")
        text = lines[node.lineno - 1].strip() if node.lineno - 1 < len(lines) else ""
        out.append(Statement(filename, node.lineno, text, functools.partial(_exec, code, ns)))
    return out


def callable_statements(fn: Callable[[], Any]) -> list[Statement]:
    if not callable(fn):
        raise BadOptionError("fn_or_code", fn, "a string of code or a zero-argument callable")
    code = getattr(fn, "__code__", None)
    name = getattr(fn, "__qualname__", None) or repr(fn)
    return [Statement(code.co_filename if code else "<callable>", code.co_firstlineno if code else 0,
                      f"{name}()", fn)]


def prepare(fn_or_code: str | Callable[[], Any], globals: dict[str, Any] | None,
            filename: str | None, default_name: str) -> list[Statement]:
    __tracebackhide__ = True
    if isinstance(fn_or_code, str):
        ns = globals if globals is not None else {"__name__": "__main__"}
        return compile_statements(fn_or_code, ns, filename or default_name)
    return callable_statements(fn_or_code)


def run_statements(stmts: list[Statement], mark: Callable[[int | None], None]) -> BaseException | None:
    """Run the statements in order, calling ``mark(i)`` before statement i and ``mark(None)`` at the end.

    Returns the exception the code raised (KeyboardInterrupt included), or None.
    """
    __tracebackhide__ = True
    try:
        for i, st in enumerate(stmts):
            mark(i)
            st.run()
    except BaseException as exc:  # the user's own exception, re-raised by the caller after reporting
        return exc
    finally:
        mark(None)
    return None

