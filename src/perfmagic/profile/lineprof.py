"""Line-by-line time of chosen functions over one run of a cell (line_profiler, imported lazily).

``perfmagic.lineprof(code_or_fn, funcs=[f, obj.method])`` registers each function with a fresh
``line_profiler.LineProfiler``, enables it only around the run, and keeps per line the hits and the
time (inclusive of what the line calls). Functions defined in notebook cells are found through
``linecache`` (IPython keeps every cell's source there) and named ``In [n]`` through IPython's
cell-filename map, so the table shows the cell's own lines.

What can be profiled: Python functions, bound/unbound methods, static/class methods, properties
(their getter/setter), ``functools.partial`` objects and ``functools.wraps`` decorators (the
innermost wrapped function), and classes (every function defined in the class body). Built-ins and
C functions have no Python lines: :class:`~perfmagic.errors.BadOptionError` names them.

Nothing is left behind: the profiler is disabled in ``finally`` (line_profiler restores the trace
function or ``sys.monitoring`` tool that was there before), and the code objects line_profiler swaps
into the functions are swapped back. Timings are inclusive per line, as line_profiler's; a function
that calls another profiled one counts that time in both, so function totals are not added up
across functions. Only the calling thread is traced.
"""

from __future__ import annotations

import functools
import inspect
import linecache
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from ..errors import BadOptionError, BenchInterrupted, PerfmagicError
from ..findings import Finding
from ..result import Displayed
from .cellcode import prepare, run_statements, shell_filename_map, source_label
from ..render.units import clip as _clip


@dataclass(frozen=True)
class LineTiming:
    lineno: int
    hits: int
    time_s: float


@dataclass(frozen=True)
class FunctionProfile:
    """One function: its timed lines and its source (from linecache), as line_profiler saw them."""

    name: str
    filename: str
    where: str                       # "In [3]" / "pkg/mod.py"
    first_lineno: int
    source: tuple[str, ...]          # the function's source lines, from first_lineno on
    lines: tuple[LineTiming, ...]

    @property
    def total_s(self) -> float:
        return sum(ln.time_s for ln in self.lines)

    @property
    def called(self) -> bool:
        return any(ln.hits for ln in self.lines)

    def share(self, ln: LineTiming) -> float:
        t = self.total_s
        return ln.time_s / t if t > 0 else 0.0

    def line_text(self, lineno: int) -> str:
        i = lineno - self.first_lineno
        return self.source[i].rstrip("\n") if 0 <= i < len(self.source) else ""

    def label(self, lineno: int) -> str:
        from ..core.cells import location

        return location(self.where, lineno)


@dataclass(frozen=True)
class HotLine:
    function: str
    label: str
    text: str
    time_s: float
    hits: int
    share: float   # of its function's time


@dataclass(frozen=True, repr=False)
class LineProfResult(Displayed):
    """Per-line timings of the profiled functions over one run; raw line timings are kept.

    Text, HTML and the figure are drawn by :mod:`perfmagic.render.lineprof`; the methods here delegate.
    """

    primary_metric: ClassVar[str] = "total_s"
    renderer: ClassVar[str] = "lineprof"

    functions: tuple[FunctionProfile, ...]
    wall_s: float
    code: str = ""
    top: int = 5
    status: str = "ok"  # ok | error | interrupted
    error: str | None = None
    notes: tuple[Finding, ...] = ()  # worded by render/ (an older row's text stays a str)

    @property
    def total_s(self) -> float:
        """Time inside the profiled functions: the largest function total (totals nest, see module doc)."""
        return max((f.total_s for f in self.functions), default=0.0)

    def hot_lines(self, n: int | None = None) -> list[HotLine]:
        out = [HotLine(f.name, f.label(ln.lineno), f.line_text(ln.lineno).strip(), ln.time_s, ln.hits, f.share(ln))
               for f in self.functions for ln in f.lines if ln.hits]
        out.sort(key=lambda h: -h.time_s)
        return out[: n if n is not None else self.top]

    # ---- text, HTML, figure: perfmagic.render.lineprof ------------------------------------------
    def html(self) -> str:
        """Tables with each line's background proportional to its share of the function's time."""
        from ..render.lineprof import html

        return html(self)

    # ---- data ---------------------------------------------------------------------------------
    def metrics(self) -> dict[str, float | int | str | None]:
        hot = self.hot_lines(1)
        h = hot[0] if hot else None
        return {"total_s": self.total_s, "wall_s": self.wall_s,
                "hot_line": f"{h.label} {h.function}(): {_clip(h.text, 60)}" if h else None,
                "hot_fraction": h.share if h else None, "hot_time_s": h.time_s if h else None,
                "n_functions": len(self.functions)}

    def samples(self) -> dict[str, list[float]]:
        d: dict[str, list[float]] = {}
        for i, f in enumerate(self.functions):
            key = f"{i}:{f.name}"
            d[f"{key}:lineno"] = [float(ln.lineno) for ln in f.lines]
            d[f"{key}:hits"] = [float(ln.hits) for ln in f.lines]
            d[f"{key}:time_s"] = [ln.time_s for ln in f.lines]
        return d

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["metrics"] = self.metrics()
        d["notes"] = [str(n) for n in self.notes]  # as text (asdict made each finding a dict)
        return d


# ---- which functions ----------------------------------------------------------------------------

def resolve(obj: Any, name: str | None = None) -> list[types.FunctionType]:
    """The Python functions behind ``obj`` (see module docstring); BadOptionError if there are none."""
    name = name or getattr(obj, "__qualname__", None) or repr(obj)
    seen = 0
    while seen < 20:  # unwrap layers: bound method, static/classmethod, partial, property, functools.wraps
        seen += 1
        if isinstance(obj, types.MethodType):
            obj = obj.__func__
        elif isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
        elif isinstance(obj, (functools.partial, functools.partialmethod)):
            obj = obj.func
        elif isinstance(obj, types.FunctionType) and hasattr(obj, "__wrapped__") and callable(obj.__wrapped__):
            obj = obj.__wrapped__
        else:
            break
    if isinstance(obj, types.FunctionType):
        return [obj]
    if isinstance(obj, (property, functools.cached_property)):
        fs = [f for f in (getattr(obj, "fget", None), getattr(obj, "fset", None), getattr(obj, "fdel", None),
                          getattr(obj, "func", None)) if f is not None]
        return [g for f in fs for g in resolve(f, name)]
    if isinstance(obj, type):
        out: list[types.FunctionType] = []
        for attr in vars(obj).values():
            if isinstance(attr, (types.FunctionType, staticmethod, classmethod, property)):
                try:
                    out += resolve(attr, name)
                except BadOptionError:
                    pass
        if out:
            return out
        raise BadOptionError("-f", name, "a Python function, method or class",
                             f"class {name} defines no Python functions of its own; name a method, e.g. {name}.method")
    kind = type(obj).__name__
    if isinstance(obj, (types.BuiltinFunctionType, types.BuiltinMethodType, types.MethodWrapperType,
                        types.WrapperDescriptorType, types.MethodDescriptorType)) or kind in ("ufunc", "cython_function_or_method"):
        raise BadOptionError("-f", name, "a Python function, method or class",
                             f"{name} is a built-in / C function ({kind}): it has no Python lines to time; "
                             "profile the Python function that calls it instead")
    if isinstance(obj, types.ModuleType):
        raise BadOptionError("-f", name, "a Python function, method or class",
                             f"{name} is a module; name its functions, e.g. -f {name}.func")
    if callable(obj):
        raise BadOptionError("-f", name, "a Python function, method or class",
                             f"{name} is a {kind} instance, not a function; name one of its methods, "
                             f"e.g. -f {name}.forward or -f {name}.__call__")
    raise BadOptionError("-f", name, "a Python function, method or class",
                         f"{name} is a {kind} instance, not callable; give a function, method or class")


def _profile(fn: types.FunctionType, stats_key: tuple[str, int, str], timings: list[tuple[int, int, int]],
             unit: float, fmap: Mapping[str, int] | None) -> FunctionProfile:
    filename, first, _ = stats_key
    try:
        src, start = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        src, start = [], first
    if not src:
        lines = linecache.getlines(filename)
        last = max([first] + [ln for ln, _, _ in timings])
        src, start = lines[first - 1: last], first
    start = start or 1
    return FunctionProfile(
        name=fn.__qualname__, filename=filename, where=source_label(filename, None, fmap), first_lineno=start,
        source=tuple(src), lines=tuple(LineTiming(ln, int(h), t * unit) for ln, h, t in sorted(timings)))


# ---- the public functions -----------------------------------------------------------------------

def run_lineprof(fn_or_code: str | Callable[[], Any], funcs: Sequence[Any], *, globals: dict[str, Any] | None = None,
                 filename: str | None = None, top: int = 5, names: Sequence[str] | None = None,
                 filename_map: Mapping[str, int] | None = None) -> tuple[LineProfResult, BaseException | None]:
    """Profile one run; return the result and the exception the code raised (None if it completed)."""
    __tracebackhide__ = True
    if not isinstance(top, int) or top < 1:
        raise BadOptionError("top", top, "a positive number of hot lines", "e.g. 5")
    if not funcs:
        raise BadOptionError("funcs", funcs, "at least one function to profile", "e.g. funcs=[f]  (-f f in the magic)")
    names = list(names) if names is not None else [None] * len(funcs)
    targets: list[types.FunctionType] = []
    for obj, nm in zip(funcs, names):
        for f in resolve(obj, nm):
            if f not in targets:
                targets.append(f)
    fmap = filename_map if filename_map is not None else shell_filename_map()
    stmts = prepare(fn_or_code, globals, filename, "<perfmagic-lineprof>")
    try:
        from line_profiler import LineProfiler
    except ImportError:
        raise PerfmagicError("line profiling needs the line_profiler package: pip install line_profiler") from None

    codes = {f: f.__code__ for f in targets}
    prof = LineProfiler()
    import time

    try:
        for f in targets:
            prof.add_function(f)
        prof.enable_by_count()
        t0 = time.perf_counter()
        try:
            exc = run_statements(stmts, lambda i: None)
        finally:
            wall = time.perf_counter() - t0
            while prof.enable_count > 0:
                prof.disable_by_count()
    finally:
        for f, code in codes.items():  # line_profiler may have swapped in a padded copy of the code
            if f.__code__ is not code:
                f.__code__ = code
    stats = prof.get_stats()
    profiles = []
    for f, c in codes.items():  # line_profiler keys by qualified name (5.x) or by name (older)
        keys = [(c.co_filename, c.co_firstlineno, getattr(c, "co_qualname", c.co_name)),
                (c.co_filename, c.co_firstlineno, c.co_name)]
        timings: list[tuple[int, int, int]] = []
        for key in dict.fromkeys(keys):
            timings += stats.timings.get(key, [])
        profiles.append(_profile(f, keys[0], timings, stats.unit, fmap))
    status, err = "ok", None
    if isinstance(exc, KeyboardInterrupt):
        status, err = "interrupted", "KeyboardInterrupt"
    elif exc is not None:
        status, err = "error", f"{type(exc).__name__}: {exc}"
    notes: list[Finding] = []
    if any(not p.source for p in profiles):
        notes.append(Finding.of("lineprof.no-source"))
    code = fn_or_code if isinstance(fn_or_code, str) else getattr(fn_or_code, "__qualname__", repr(fn_or_code))
    return LineProfResult(tuple(profiles), wall, code, top, status, err, tuple(notes)), exc


def lineprof(code: str | Callable[[], Any], funcs: Sequence[Any], *, globals: dict[str, Any] | None = None,
             filename: str | None = None, top: int = 5,
             filename_map: Mapping[str, int] | None = None) -> LineProfResult:
    """Time every line of ``funcs`` while ``code`` runs once.

    Args:
        code: a string of code (run in ``globals``; assignments land there) or a zero-argument callable.
        funcs: functions, methods, properties, partials or classes to profile.
        top: how many hot lines the summary lists.
        filename_map: cell filename -> execution count, to name cells ``In [n]`` (IPython's by default).

    Returns a :class:`LineProfResult`. The code's own exception propagates unchanged once the
    profiler is off; Ctrl-C raises :class:`BenchInterrupted` with the partial result.
    """
    __tracebackhide__ = True
    result, exc = run_lineprof(code, funcs, globals=globals, filename=filename, top=top,
                               filename_map=filename_map)
    if isinstance(exc, KeyboardInterrupt):
        raise BenchInterrupted(result) from exc
    if exc is not None:
        raise exc
    return result
