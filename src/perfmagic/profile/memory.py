"""Memory over one run of a cell: an RSS timeline, per-statement peaks, allocation sites, CUDA memory.

``perfmagic.memory(code_or_fn)`` runs the code once (in the namespace given, so assignments persist as
in a normal cell) and records, all at once:

* **RSS timeline** — a daemon thread samples the resident set every ``interval`` (default 10 ms) from
  ``/proc/self/statm`` (one ``pread``, a few µs; psutil elsewhere). A sample is also taken in the
  main thread at the start and the end, so even a cell shorter than one interval has two points.
* **True peaks** — sampling misses anything shorter than the interval, so the kernel's high-water
  mark ``VmHWM`` is reset (``/proc/self/clear_refs``, see :mod:`perfmagic._memory`) before every
  top-level statement of the cell and read after it; with ``tracemalloc`` its peak is reset and read
  the same way. The cell is compiled statement by statement (as IPython does), so each peak is tied
  to the cell line that caused it, e.g. ``len(bytearray(200 * 2**20))`` shows a 200 MiB peak on its
  line although RSS is back to its level a millisecond later.
* **Allocation sites** — ``tracemalloc`` keeps ``NFRAME`` frames per allocation; at the end each block still allocated is
  charged to its innermost frame in user code (a notebook cell or a file outside the standard
  library and site-packages), falling back to the innermost library frame. perfmagic's and
  IPython's own allocations are dropped. If the user had started tracemalloc, it is left running
  and a snapshot taken at the start is subtracted.

  tracemalloc costs every Python allocation a traceback capture and a hash-table update: a pure-Python
  loop whose arithmetic allocates ints runs 20-200x slower under it (see docs/benchmarks.md). So it
  runs only when asked: ``trace="on"`` traces from the first line (every site, the traced peak per
  statement); ``trace="auto"`` starts it once the sampler sees RSS grow ``AUTO_TRACE_BYTES`` above the
  start (earlier blocks are not attributed).
* **Where RSS grew** (the default, ``trace="sample"``) — at each sample the background thread also
  reads where the main thread is (``sys._current_frames``: the innermost frame in user code, as for
  tracemalloc's sites) and the growth of RSS since the previous sample is charged to that line. It
  costs a few µs per sample, not per allocation, so the cell runs at full speed; the price is
  resolution: a line is seen only if it runs when a sample is taken, so growth is attributed to the
  lines that were running, in proportion to time. ``trace="off"`` skips this too.
* **CUDA** (``device="cuda"`` or ``"auto"`` when torch has CUDA) — allocated/reserved bytes in the
  same sampler, the peak from ``reset_peak_memory_stats``/``max_memory_allocated`` per statement,
  and, where torch has it, the caching allocator's history to name the sites live at the peak.

Everything started is stopped in ``finally``: the sampler thread is joined, tracemalloc stopped if
started here, allocator history turned off if turned on here, also after an exception or Ctrl-C.
A cell that raises still yields the profile up to the error (:func:`run_memory` returns both); the
public :func:`memory` then re-raises the user's exception unchanged, and Ctrl-C becomes
:class:`~perfmagic._errors.BenchInterrupted` carrying the partial result.
"""

from __future__ import annotations

import ast
import functools
import io
import linecache
import os
import re
import sys
import sysconfig
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ..core.cells import register_source
from ..errors import BadOptionError, BenchInterrupted, PerfmagicError
from ..render.units import fmt_bytes, fmt_time
from ..core.memory import _reset_hwm, malloc_trim

DEFAULT_INTERVAL_S = 0.01
NFRAME = 8           # frames tracemalloc keeps when perfmagic starts it (enough to reach the user's line)
AUTO_TRACE_BYTES = 16 * 2**20  # trace="auto": start tracemalloc once RSS has grown this much
TRACE_MODES = ("sample", "auto", "on", "off")
DEFAULT_TRACE = "sample"
_MAX_DEPTH = 64      # frames walked per sample to find the main thread's user line
DEVICES = ("auto", "cpu", "cuda")
GROWTH_MIN_BYTES = 256 * 2**10  # a sampled growth site below this (and below 1% of the growth) is not listed
MISSED_MIN_BYTES = 8 * 2**20   # a peak this much above the sampled maximum is reported as missed
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

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
    if lineno is None:
        return where
    return f"{where} line {lineno}" if (n is not None or where.startswith("<")) else f"{where}:{lineno}"


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
    raises :class:`PerfmagicError` with the way out.
    """
    __tracebackhide__ = True
    register_source(source, filename)
    tree = compile(source, filename, "exec", ast.PyCF_ONLY_AST)  # not ast.parse: no stdlib frame in tracebacks
    try:
        compile(tree, filename, "exec")
    except SyntaxError:
        try:
            code = compile(source, filename, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        except SyntaxError:
            code = None
        if code is not None and code.co_flags & 0x80:  # CO_COROUTINE: top-level await / async for / async with
            raise PerfmagicError(
                "the cell uses top-level 'await', which a profiler cannot run: the cell would have to run on "
                "the kernel's event loop. Profile the synchronous work it does (e.g. the function the coroutine "
                "calls), or run the coroutine in a plain cell without the magic") from None
        raise
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


# ---- reading memory ------------------------------------------------------------------------------

def _status() -> tuple[int | None, int | None]:
    """(VmRSS, VmHWM) in bytes from one read of /proc/self/status."""
    rss = hwm = None
    try:
        with open("/proc/self/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"VmHWM:"):
                    hwm = int(line.split()[1]) * 1024
                elif line.startswith(b"VmRSS:"):
                    rss = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    return rss, hwm


class _RSSReader:
    """RSS in bytes: ``pread`` of /proc/self/statm (cheap), else psutil, else None."""

    def __init__(self) -> None:
        self.fd: int | None = None
        self.proc: Any = None
        self.method = "unavailable"
        try:
            self.fd = os.open("/proc/self/statm", os.O_RDONLY)
            self.method = "statm"
        except OSError:
            try:
                import psutil

                self.proc = psutil.Process()
                self.method = "psutil"
            except Exception:
                pass

    def __call__(self) -> int | None:
        if self.fd is not None:
            return int(os.pread(self.fd, 128, 0).split()[1]) * _PAGE
        if self.proc is not None:
            return int(self.proc.memory_info().rss)
        return None

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


# ---- the result ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class StatementMemory:
    """One top-level statement: its time span and the peaks above its own starting level."""

    label: str
    text: str
    start_s: float
    end_s: float
    traced_peak_bytes: int | None   # tracemalloc peak above the statement's start
    traced_net_bytes: int | None
    rss_peak_bytes: int | None      # VmHWM after the statement minus RSS at its start
    cuda_peak_bytes: int | None = None
    offset_traced_bytes: int = 0    # traced level at the statement's start, above the cell's start
    offset_rss_bytes: int = 0
    offset_cuda_bytes: int = 0


@dataclass(frozen=True)
class AllocSite:
    label: str          # "In [3] line 5" / "pkg/mod.py:12"
    text: str           # the source line
    size_bytes: int
    count: int
    kind: str           # "cell" | "user" | "library"


@dataclass(frozen=True)
class MemoryResult:
    """Memory over one run. Raw samples are kept; every peak is derived from them or measured directly."""

    t_s: tuple[float, ...]
    rss_bytes: tuple[int, ...]
    cuda_allocated_bytes: tuple[int, ...] = ()
    cuda_reserved_bytes: tuple[int, ...] = ()
    statements: tuple[StatementMemory, ...] = ()
    sites: tuple[AllocSite, ...] = ()          # blocks still allocated at the end, by site
    where: tuple[int, ...] = ()                # per sample: index into where_sites of the line running, -1 none
    where_sites: tuple[tuple[str, str, str], ...] = ()  # (label, source line, kind) of the lines sampled
    cuda_sites: tuple[AllocSite, ...] = ()     # CUDA blocks live at the CUDA peak (allocator history)
    wall_s: float = 0.0
    interval_s: float = DEFAULT_INTERVAL_S
    first_sample_s: float | None = None        # cell start -> first sample of the background thread
    rss_method: str = "statm"                  # statm | psutil | unavailable
    hwm_method: str = "vmhwm"                  # vmhwm (true peak) | unavailable
    tracing: str = "on"                        # sample | on | auto-started | auto-idle | already running | off
    trace_started_s: float | None = None       # when tracemalloc began (trace="auto")
    nframe: int = 0
    traced_net_bytes: int | None = None
    traced_total_net_bytes: int | None = None  # everything traced, including untracked sites
    device: str = "cpu"
    cuda_base_bytes: int | None = None
    cuda_peak_abs_bytes: int | None = None     # max_memory_allocated over the run
    cuda_reserved_peak_bytes: int | None = None
    code: str = ""
    status: str = "ok"                         # ok | error | interrupted
    error: str | None = None
    notes: tuple[str, ...] = ()

    # ---- derived ----------------------------------------------------------------------------
    @property
    def rss_start(self) -> int | None:
        return self.rss_bytes[0] if self.rss_bytes else None

    @property
    def rss_end(self) -> int | None:
        return self.rss_bytes[-1] if self.rss_bytes else None

    @property
    def sampled_peak_bytes(self) -> int | None:
        """Highest sampled RSS above the start."""
        if not self.rss_bytes:
            return None
        return max(self.rss_bytes) - self.rss_bytes[0]

    @property
    def hwm_peak_bytes(self) -> int | None:
        """True RSS peak above the start: the kernel's high-water mark, statement by statement."""
        vals = [s.offset_rss_bytes + s.rss_peak_bytes for s in self.statements if s.rss_peak_bytes is not None]
        return max(vals) if vals and self.hwm_method == "vmhwm" else None

    @property
    def rss_peak_bytes(self) -> int | None:
        xs = [x for x in (self.hwm_peak_bytes, self.sampled_peak_bytes) if x is not None]
        return max(xs) if xs else None

    @property
    def traced_peak_bytes(self) -> int | None:
        vals = [s.offset_traced_bytes + s.traced_peak_bytes for s in self.statements if s.traced_peak_bytes is not None]
        return max(vals) if vals else None

    @property
    def cuda_peak_bytes(self) -> int | None:
        if self.cuda_peak_abs_bytes is None or self.cuda_base_bytes is None:
            return None
        return max(self.cuda_peak_abs_bytes - self.cuda_base_bytes, 0)

    @property
    def cuda_increment_bytes(self) -> int | None:
        if not self.cuda_allocated_bytes:
            return None
        return self.cuda_allocated_bytes[-1] - self.cuda_allocated_bytes[0]

    @property
    def host_peak_bytes(self) -> int | None:
        """The host peak above the start: the largest of the RSS peaks and tracemalloc's."""
        xs = [x for x in (self.rss_peak_bytes, self.traced_peak_bytes) if x is not None]
        return max(xs) if xs else None

    @property
    def peak_bytes(self) -> int | None:
        """The headline peak: CUDA's on a CUDA run, else the host's."""
        return self.cuda_peak_bytes if self.device.startswith("cuda") and self.cuda_peak_bytes is not None \
            else self.host_peak_bytes

    @property
    def increment_bytes(self) -> int | None:
        if self.device.startswith("cuda") and self.cuda_increment_bytes is not None:
            return self.cuda_increment_bytes
        if self.rss_start is None or self.rss_end is None:
            return None
        return self.rss_end - self.rss_start

    @property
    def missed_peak_bytes(self) -> int:
        """How far the true peak (VmHWM or traced) rose above the highest RSS sample."""
        sampled = self.sampled_peak_bytes or 0
        true = max(x for x in (self.hwm_peak_bytes, self.traced_peak_bytes, 0) if x is not None)
        return max(true - sampled, 0)

    @property
    def missed_peak(self) -> bool:
        sampled = self.sampled_peak_bytes or 0
        return self.missed_peak_bytes >= max(MISSED_MIN_BYTES, 0.1 * max(sampled, 0))

    @property
    def growth_sites(self) -> tuple[AllocSite, ...]:
        """Where RSS grew: each sample's growth over the previous one, charged to the line running at it.

        ``size_bytes`` is the growth summed over the samples charged to that line (drops are not
        subtracted: memory freed elsewhere must not hide a line that allocates), ``count`` the samples
        taken on it. A sample that found no line of user code (the cell was between statements, or it
        is the end sample) charges its growth to the statement that ran most of the interval: to the
        last line sampled in that statement if there is one, else to the statement's own line.
        """
        if not self.where or len(self.where) != len(self.rss_bytes):
            return ()
        spans = [(st.start_s, st.end_s) for st in self.statements]

        def statement_at(t0: float, t1: float) -> int | None:
            best, idx = 0.0, None
            for i, (a, b) in enumerate(spans):
                ov = min(b, t1) - max(a, t0)
                if ov > best:
                    best, idx = ov, i
            return idx

        def statement_of(t: float) -> int | None:
            return next((i for i, (a, b) in enumerate(spans) if a <= t <= b), None)

        grew: dict[Any, list[int]] = {}
        last: tuple[int, int | None] | None = None  # (site, statement) of the last located sample
        for k in range(1, len(self.rss_bytes)):
            w, d = self.where[k], max(self.rss_bytes[k] - self.rss_bytes[k - 1], 0)
            if w >= 0:
                last = (w, statement_of(self.t_s[k]))
                a = grew.setdefault(w, [0, 0])
                a[0] += d
                a[1] += 1
            elif d and self.tracing != "off":  # located nothing: charge the statement that ran meanwhile
                i = statement_at(self.t_s[k - 1], self.t_s[k])
                if i is None:
                    continue
                key: Any = last[0] if last is not None and last[1] == i else ("statement", i)
                grew.setdefault(key, [0, 0])[0] += d
        out = []
        for key, (size, n) in grew.items():
            if size <= 0:
                continue
            if isinstance(key, tuple):
                st = self.statements[key[1]]
                out.append(AllocSite(st.label, st.text, size, n, "cell"))
            else:
                out.append(AllocSite(*self.where_sites[key][:2], size, n, self.where_sites[key][2]))
        out.sort(key=lambda s: (-s.size_bytes, -s.count))
        return tuple(out)

    @property
    def main_growth_sites(self) -> tuple[AllocSite, ...]:
        """The growth sites worth listing: at least ``GROWTH_MIN_BYTES`` and 1% of all sampled growth."""
        floor = max(GROWTH_MIN_BYTES, 0.01 * self.sampled_growth_bytes)
        return tuple(s for s in self.growth_sites if s.size_bytes >= floor)

    @property
    def sampled_growth_bytes(self) -> int:
        """All growth between consecutive samples (the total the growth sites share)."""
        return sum(max(b - a, 0) for a, b in zip(self.rss_bytes, self.rss_bytes[1:]))

    @property
    def peak_statement(self) -> StatementMemory | None:
        def key(s: StatementMemory) -> float:
            if self.device.startswith("cuda") and s.cuda_peak_bytes is not None:
                return s.offset_cuda_bytes + s.cuda_peak_bytes
            return max(s.offset_rss_bytes + (s.rss_peak_bytes or 0), s.offset_traced_bytes + (s.traced_peak_bytes or 0))
        return max(self.statements, key=key) if self.statements else None

    # ---- text ---------------------------------------------------------------------------------
    def verdict(self) -> str:
        tag = {"ok": "", "error": "  [STOPPED BY AN EXCEPTION]", "interrupted": "  [INTERRUPTED]"}[self.status]
        peak = self.peak_bytes
        if peak is None:
            return f"memory: no measurement available on this platform{tag}"
        what = "CUDA peak" if self.device.startswith("cuda") and self.cuda_peak_bytes is not None else "peak"
        st = self.peak_statement
        where = f" at {st.label}" if st is not None and len(self.statements) > 1 else ""
        inc = self.increment_bytes
        return (f"memory: {what} +{fmt_bytes(peak)} above the start{where} · increment {_signed(inc)} · "
                f"{fmt_time(self.wall_s)}{tag}")

    def text(self, top: int | None = None) -> str:
        lines = [self.verdict()]
        if self.missed_peak:
            lines.append(f"  ! short-lived peak: the RSS sampler (every {fmt_time(self.interval_s)}, "
                         f"{len(self.t_s)} samples) saw at most +{fmt_bytes(self.sampled_peak_bytes)}, but "
                         + " and ".join(f"{n} saw +{fmt_bytes(v)}" for n, v in
                                        (("the kernel's high-water mark (VmHWM)", self.hwm_peak_bytes),
                                         ("tracemalloc", self.traced_peak_bytes)) if v is not None)
                         + ": the peak lasted less than a sampling interval")
        if self.rss_bytes:
            true = (f"true peak {fmt_bytes(self.rss_start + self.hwm_peak_bytes)} (VmHWM)"
                    if self.hwm_peak_bytes is not None and self.rss_start is not None else "no VmHWM here")
            lines.append(f"  RSS     start {fmt_bytes(self.rss_start)} · max sampled {fmt_bytes(max(self.rss_bytes))} · "
                         f"{true} · end {fmt_bytes(self.rss_end)}")
        if self.tracing == "sample":
            pass  # the growth sites below say how they were found
        elif self.tracing == "auto-idle":
            lines.append(f"  traced  tracemalloc not started: RSS never grew {fmt_bytes(AUTO_TRACE_BYTES)} above the start "
                         "(--trace on traces from the first line, at a cost)")
        elif self.tracing != "off" and self.traced_peak_bytes is not None:
            how = {"on": "from the first line", "already running": "already running",
                   "auto-started": f"from {fmt_time(self.trace_started_s)}, when RSS had grown "
                                   f"{fmt_bytes(AUTO_TRACE_BYTES)}: earlier blocks not attributed"}[self.tracing]
            lines.append(f"  traced  peak +{fmt_bytes(self.traced_peak_bytes)} · net {_signed(self.traced_net_bytes)} "
                         f"(tracemalloc {how}; {self.nframe} frames)")
        if self.device.startswith("cuda"):
            lines.append(f"  CUDA    peak allocated +{fmt_bytes(self.cuda_peak_bytes)} above {fmt_bytes(self.cuda_base_bytes)} · "
                         f"increment {_signed(self.cuda_increment_bytes)} · peak reserved "
                         f"{fmt_bytes(self.cuda_reserved_peak_bytes)} ({self.device})")
        if len(self.statements) > 1:
            lines.append("  per statement (peak above its own start):")
            for s in self.statements:
                parts = []
                if s.rss_peak_bytes is not None and self.hwm_method == "vmhwm":
                    parts.append(f"RSS +{fmt_bytes(s.rss_peak_bytes):>10}")
                if s.traced_peak_bytes is not None:
                    parts.append(f"traced +{fmt_bytes(s.traced_peak_bytes):>10}")
                if s.cuda_peak_bytes is not None:
                    parts.append(f"CUDA +{fmt_bytes(s.cuda_peak_bytes):>10}")
                lines.append(f"    {s.label:<16} {'  '.join(parts)}  {fmt_time(s.end_s - s.start_s):>9}  {_clip(s.text, 50)}")
        n = top if top is not None else 10
        if self.sites:
            lines.append("  top allocation sites (still allocated at the end, tracemalloc):")
            for s in self.sites[:n]:
                lines.append(f"    {fmt_bytes(s.size_bytes):>10}  {s.count:>7} blocks  {s.label:<24} {_clip(s.text, 50)}")
        elif self.tracing not in ("off", "auto-idle", "sample"):
            lines.append("  allocation sites: nothing traced is still allocated by the cell's code")
        shown = self.main_growth_sites if self.tracing != "on" else ()
        if shown:
            total = self.sampled_growth_bytes
            lines.append(f"  where RSS grew (sampled every {fmt_time(self.interval_s)}: the growth between two samples "
                         "is charged to the line running at the second; --trace on names every allocation):")
            for s in shown[: min(n, 5)]:
                lines.append(f"    +{fmt_bytes(s.size_bytes):>9} {100 * s.size_bytes / total:3.0f}%  {s.count:>5} samples  "
                             f"{s.label:<24} {_clip(s.text, 50)}")
        elif self.tracing == "sample" and len(self.t_s) > 2:
            lines.append("  where RSS grew: no growth between samples in the cell's code (--trace on names "
                         "every allocation)")
        if self.cuda_sites:
            lines.append("  CUDA blocks live at the CUDA peak (allocator history):")
            for s in self.cuda_sites[:n]:
                lines.append(f"    {fmt_bytes(s.size_bytes):>10}  {s.count:>7} blocks  {s.label:<24} {_clip(s.text, 50)}")
        if self.error:
            lines.append(f"  stopped by {self.error}; the profile covers the run up to there")
        lines += [f"  note: {n_}" for n_ in self.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        from ..render.display import text_figure_bundle

        return text_figure_bundle(self.text(), self.figure_png(), "memory timeline")

    # ---- data ---------------------------------------------------------------------------------
    def metrics(self) -> dict[str, float | int | str | None]:
        top = self.sites[0] if self.sites else None
        grown = self.main_growth_sites[0] if not top and self.main_growth_sites else None
        st = self.peak_statement
        return {
            "peak_bytes": self.peak_bytes, "increment_bytes": self.increment_bytes,
            "rss_peak_bytes": self.rss_peak_bytes, "rss_sampled_peak_bytes": self.sampled_peak_bytes,
            "rss_hwm_peak_bytes": self.hwm_peak_bytes, "traced_peak_bytes": self.traced_peak_bytes,
            "traced_net_bytes": self.traced_net_bytes, "missed_peak_bytes": self.missed_peak_bytes,
            "cuda_peak_bytes": self.cuda_peak_bytes, "cuda_increment_bytes": self.cuda_increment_bytes,
            "cuda_reserved_peak_bytes": self.cuda_reserved_peak_bytes,
            "top_site": f"{top.label}: {_clip(top.text, 60)}" if top else
                        f"{grown.label}: {_clip(grown.text, 60)} (sampled growth)" if grown else None,
            "top_site_bytes": top.size_bytes if top else grown.size_bytes if grown else None,
            "peak_at": st.label if st is not None else None,
            "wall_s": self.wall_s, "n_samples": len(self.t_s), "interval_s": self.interval_s,
            "first_sample_s": self.first_sample_s, "device": self.device, "tracing": self.tracing,
        }

    def samples_dict(self) -> dict[str, list[float]]:
        d: dict[str, list[float]] = {"t_s": list(self.t_s), "rss_bytes": [float(x) for x in self.rss_bytes]}
        if self.cuda_allocated_bytes:
            d["cuda_allocated_bytes"] = [float(x) for x in self.cuda_allocated_bytes]
            d["cuda_reserved_bytes"] = [float(x) for x in self.cuda_reserved_bytes]
        return d

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["metrics"] = self.metrics()
        return d

    # ---- figure -------------------------------------------------------------------------------
    def figure_png(self) -> bytes | None:
        """RSS (and CUDA) over time with the statements shaded and the peaks marked; top sites beside."""
        try:
            from matplotlib.backends.backend_agg import FigureCanvasAgg
            from matplotlib.figure import Figure
        except ImportError:
            return None
        if not self.t_s:
            return None
        mib = 2**20
        sites = list(self.cuda_sites if self.device.startswith("cuda") and self.cuda_sites else
                     self.sites or self.main_growth_sites)[:8]
        site_title = "where RSS grew (sampled)" if sites and not self.sites and not (
            self.device.startswith("cuda") and self.cuda_sites) else "top allocation sites"
        fig = Figure(figsize=(8.5, 2.8), dpi=100, layout="constrained")
        FigureCanvasAgg(fig)
        if sites:
            ax, bx = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.7, 1]})
        else:
            ax, bx = fig.subplots(), None
        ts = [t * 1e3 for t in self.t_s]
        ax.plot(ts, [r / mib for r in self.rss_bytes], ".-", color="tab:blue", ms=2, lw=1, label="RSS (sampled)")
        for i, s in enumerate(self.statements):
            if i % 2:
                ax.axvspan(s.start_s * 1e3, s.end_s * 1e3, color="0.92", lw=0)
        if self.hwm_peak_bytes is not None and self.rss_start is not None:
            y = (self.rss_start + self.hwm_peak_bytes) / mib
            st = self.peak_statement
            ax.axhline(y, color="tab:red", ls="--", lw=1, label=f"true peak (VmHWM) {fmt_bytes(self.rss_start + self.hwm_peak_bytes)}")
            if st is not None:
                ax.plot([(st.start_s + st.end_s) / 2 * 1e3], [y], "v", color="tab:red", ms=7)
        if self.traced_peak_bytes is not None and self.rss_start is not None and self.hwm_peak_bytes is None:
            ax.axhline((self.rss_start + self.traced_peak_bytes) / mib, color="tab:purple", ls=":", lw=1,
                       label="start + traced peak")
        if self.cuda_allocated_bytes:
            ax.plot(ts, [c / mib for c in self.cuda_allocated_bytes], "-", color="tab:green", lw=1, label="CUDA allocated")
            ax.plot(ts, [c / mib for c in self.cuda_reserved_bytes], "-", color="tab:olive", lw=0.8, label="CUDA reserved")
            if self.cuda_peak_abs_bytes is not None:
                ax.axhline(self.cuda_peak_abs_bytes / mib, color="tab:green", ls="--", lw=1, label="CUDA peak")
        ax.set_xlabel("time since cell start [ms]")
        ax.set_ylabel("MiB")
        ax.set_ylim(bottom=0)
        ax.legend(loc="lower right", fontsize=7, frameon=False)
        ax.set_title("memory over the cell's run (grey/white bands: statements)", fontsize=9, loc="left")
        ax.tick_params(labelsize=7)
        if bx is not None:
            names = [_clip(f"{s.label}  {s.text}", 36) for s in sites][::-1]
            bx.barh(range(len(sites)), [s.size_bytes / mib for s in sites][::-1], color="tab:orange")
            bx.set_yticks(range(len(sites)), names, fontsize=6)
            bx.set_xlabel("MiB", fontsize=7)
            bx.set_title(site_title, fontsize=9, loc="left")
            bx.tick_params(labelsize=7)
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        return buf.getvalue()

    # ---- HTML tables (widget tabs) ---------------------------------------------------------
    def sites_html(self) -> str:
        import html

        def table_rows(sites: tuple[AllocSite, ...], sign: str = "") -> str:
            return "".join(f"<tr><td>{sign}{fmt_bytes(s.size_bytes)}</td><td>{s.count}</td><td>{html.escape(s.label)}"
                           f"</td><td><code>{html.escape(s.text)}</code></td></tr>" for s in sites)

        rows = table_rows(self.sites + self.cuda_sites)
        grown = table_rows(self.main_growth_sites, "+")
        out = ""
        if rows or not grown:
            out += ("<table style='font-size:12px'><tr><th>size</th><th>blocks</th><th>where</th><th>line</th></tr>"
                    f"{rows}</table>")
        if grown:
            out += ("<div style='font-size:12px'>where RSS grew (sampled)</div><table style='font-size:12px'>"
                    f"<tr><th>growth</th><th>samples</th><th>where</th><th>line</th></tr>{grown}</table>")
        return out

    def statements_html(self) -> str:
        import html

        rows = "".join(f"<tr><td>{html.escape(s.label)}</td><td>{fmt_bytes(s.rss_peak_bytes)}</td>"
                       f"<td>{fmt_bytes(s.traced_peak_bytes)}</td><td>{fmt_bytes(s.cuda_peak_bytes)}</td>"
                       f"<td>{fmt_time(s.end_s - s.start_s)}</td><td><code>{html.escape(s.text)}</code></td></tr>"
                       for s in self.statements)
        return ("<table style='font-size:12px'><tr><th>statement</th><th>RSS peak</th><th>traced peak</th>"
                f"<th>CUDA peak</th><th>time</th><th>code</th></tr>{rows}</table>")


def _signed(n: int | None) -> str:
    if n is None:
        return "—"
    return ("+" if n >= 0 else "-") + fmt_bytes(abs(n))


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


# ---- the recorder --------------------------------------------------------------------------------

class _Recorder:
    """Starts and stops every probe; ``mark(i)`` closes the previous statement and opens statement i."""

    def __init__(self, stmts: list[Statement], interval: float, trace: str, cuda: str | None,
                 filename_map: Mapping[str, int] | None) -> None:
        self.stmts, self.interval, self.trace, self.cuda = stmts, interval, trace, cuda
        self.fmap = filename_map
        self.reader = _RSSReader()
        self.t: list[float] = []
        self.rss: list[int] = []
        self.c_alloc: list[int] = []
        self.c_res: list[int] = []
        self.first_thread_sample: float | None = None
        self.done: list[StatementMemory] = []
        self.cur: int | None = None
        self.started_tm = False
        self.tracing = False          # tracemalloc active for this run
        self.trace_started: float | None = None
        self.before_snapshot: Any = None
        self.snapshot: Any = None
        self.history = False
        self.history_snapshot: Any = None
        self.notes: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.torch: Any = sys.modules.get("torch") if cuda else None
        self.t0 = time.perf_counter()
        self.hwm_ok, self.nframe, self.tm_base, self.cuda_base, self.tm_end = False, 0, None, None, None
        self.locate = trace != "off"      # the sampler notes the main thread's line at each sample
        self.main_ident = threading.get_ident()
        self.where: list[int] = []
        self.where_keys: dict[tuple[str, int], int] = {}
        self.kinds: dict[str, str] = {}
        self.where_kinds: list[tuple[str, str]] = []  # (kind, function name) per located line

    # -- sampling ------------------------------------------------------------------------------
    def _sample(self, locate: bool = False) -> None:
        t = time.perf_counter() - self.t0
        r = self.reader()
        w = self._where() if locate else -1
        if self.torch is not None:
            self.c_alloc.append(int(self.torch.cuda.memory_allocated(self.cuda)))
            self.c_res.append(int(self.torch.cuda.memory_reserved(self.cuda)))
        self.where.append(w)
        self.rss.append(r if r is not None else 0)
        self.t.append(t)

    def _loop(self) -> None:
        nxt = self.interval
        while not self._stop.wait(max(0.0, nxt - (time.perf_counter() - self.t0))):
            try:
                self._sample(self.locate)
            except Exception:  # a vanished /proc or device: stop sampling, keep what we have
                return
            if self.first_thread_sample is None:
                self.first_thread_sample = self.t[-1]
            if (self.trace == "auto" and not self.tracing and self.rss0 is not None
                    and self.rss[-1] - self.rss0 >= AUTO_TRACE_BYTES):
                self._start_tracing()
            nxt += self.interval
            now = time.perf_counter() - self.t0
            if nxt < now:  # starved of the GIL: do not burst to catch up
                nxt = now + self.interval

    def _where(self) -> int:
        """Index of the main thread's current line in user code (-1: in perfmagic, between statements)."""
        f = sys._current_frames().get(self.main_ident)
        lib = None
        depth = 0
        while f is not None and depth < _MAX_DEPTH:
            fn = f.f_code.co_filename
            kind = self.kinds.get(fn)
            if kind is None:
                kind = self.kinds[fn] = "perfmagic" if fn.startswith(_PKG_DIR) else code_kind(fn, self.fmap)
            if kind in ("cell", "user"):
                return self._key(fn, f.f_lineno, kind, f.f_code.co_name)
            if kind == "perfmagic":  # reached our own frames first: the cell is between statements
                break
            if lib is None:
                lib = (fn, f.f_lineno, f.f_code.co_name)
            f = f.f_back
            depth += 1
        return self._key(lib[0], lib[1], "library", lib[2]) if lib is not None and depth >= _MAX_DEPTH else -1

    def _key(self, fn: str, ln: int, kind: str, func: str) -> int:
        k = self.where_keys.get((fn, ln))
        if k is None:
            k = self.where_keys[(fn, ln)] = len(self.where_keys)
            self.where_kinds.append((kind, func))
        return k

    def _start_tracing(self) -> None:
        import tracemalloc

        if tracemalloc.is_tracing():  # the cell started it itself: not ours to manage
            return
        tracemalloc.start(NFRAME)
        self.started_tm, self.nframe, self.tm_base = True, NFRAME, 0
        self.trace_started = time.perf_counter() - self.t0
        self.tracing = True

    # -- statement marks -----------------------------------------------------------------------
    def _levels(self) -> tuple[int | None, int | None, int | None, int | None]:
        tm_cur = tm_peak = None
        if self.tracing:
            import tracemalloc

            tm_cur, tm_peak = tracemalloc.get_traced_memory()
        rss, hwm = _status() if self.hwm_ok else (self.reader(), None)
        return tm_cur, tm_peak, rss, hwm

    def mark(self, i: int | None) -> None:
        now = time.perf_counter() - self.t0
        tm_cur, tm_peak, rss, hwm = self._levels()
        cpk = None
        if self.torch is not None:
            self.torch.cuda.synchronize(self.cuda)
            cpk = int(self.torch.cuda.max_memory_allocated(self.cuda))
        if self.cur is not None:
            st = self.stmts[self.cur]
            if self.s_tm is None and tm_cur is not None:  # tracing began during this statement, at 0 bytes
                self.s_tm = 0
            self.done.append(StatementMemory(
                label=source_label(st.filename, st.lineno, self.fmap) if st.filename != "<callable>" else st.text,
                text=st.text, start_s=self.s_start, end_s=now,
                traced_peak_bytes=max(tm_peak - self.s_tm, 0) if tm_peak is not None and self.s_tm is not None else None,
                traced_net_bytes=tm_cur - self.s_tm if tm_cur is not None and self.s_tm is not None else None,
                rss_peak_bytes=max(hwm - self.s_rss, 0) if hwm is not None and self.s_rss is not None else None,
                cuda_peak_bytes=max(cpk - self.s_cuda, 0) if cpk is not None and self.s_cuda is not None else None,
                offset_traced_bytes=(self.s_tm - self.tm_base) if self.s_tm is not None and self.tm_base is not None else 0,
                offset_rss_bytes=(self.s_rss - self.rss0) if self.s_rss is not None and self.rss0 is not None else 0,
                offset_cuda_bytes=(self.s_cuda - self.cuda_base) if self.s_cuda is not None and self.cuda_base is not None else 0,
            ))
        self.cur = i
        if i is None:
            self.tm_end = tm_cur
            return
        if self.tracing:
            import tracemalloc

            tracemalloc.reset_peak()
        if self.hwm_ok:
            _reset_hwm()
            rss = _status()[0]
        if self.torch is not None:
            self.torch.cuda.reset_peak_memory_stats(self.cuda)
            self.s_cuda = int(self.torch.cuda.memory_allocated(self.cuda))
        else:
            self.s_cuda = None
        self.s_tm, self.s_rss, self.s_start = tm_cur, rss, time.perf_counter() - self.t0

    # -- start / stop --------------------------------------------------------------------------
    def start(self) -> None:
        self.hwm_ok = _reset_hwm() and _status()[1] is not None
        self.tm_base = self.cuda_base = None
        if self.trace != "off":
            import tracemalloc

            if tracemalloc.is_tracing():  # the user's session: trace along, subtract what was there
                self.nframe = tracemalloc.get_traceback_limit()
                self.before_snapshot = tracemalloc.take_snapshot()
                self.tracing = True
            elif self.trace == "on":
                tracemalloc.start(NFRAME)
                self.started_tm, self.nframe, self.tracing = True, NFRAME, True
            if self.tracing:
                tracemalloc.reset_peak()
                self.tm_base = tracemalloc.get_traced_memory()[0]
        if self.torch is not None:
            self.torch.cuda.synchronize(self.cuda)
            self.cuda_base = int(self.torch.cuda.memory_allocated(self.cuda))
            self.cuda_peak = self.cuda_base
            self._start_history()
        malloc_trim()  # heap freed by earlier cells back to the system: the cell's growth shows in RSS
        self.rss0 = self.reader() if self.reader.method != "unavailable" else None
        self.t0 = time.perf_counter()
        self._sample()
        self._thread = threading.Thread(target=self._loop, name="perfmagic-rss-sampler", daemon=True)
        self._thread.start()

    def _start_history(self) -> None:
        mem = getattr(self.torch.cuda, "memory", None)
        rec = getattr(mem, "_record_memory_history", None)
        if rec is None:
            self.notes.append("this torch has no allocator history: CUDA sites not attributed")
            return
        try:
            if mem._snapshot().get("device_traces", [[]])[0]:
                self.notes.append("CUDA allocator history was already being recorded; left as it was")
                return
            rec(enabled="all", context="alloc", stacks="python", max_entries=200_000)
            self.history = True
        except Exception as exc:
            self.notes.append(f"CUDA allocator history unavailable ({type(exc).__name__})")

    def stop(self) -> None:
        """Stop every probe this recorder started; safe to call once from ``finally``."""
        self.wall = time.perf_counter() - self.t0
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            self._sample()
        except Exception:
            pass
        self.reader.close()
        try:
            if self.tracing:
                import tracemalloc

                if tracemalloc.is_tracing():
                    self.snapshot = tracemalloc.take_snapshot()
        finally:
            if self.started_tm:
                import tracemalloc

                tracemalloc.stop()
            if self.history:
                try:
                    self.history_snapshot = self.torch.cuda.memory._snapshot()
                finally:
                    self.torch.cuda.memory._record_memory_history(enabled=None)
        if self.torch is not None:
            self.cuda_peak = max(self.cuda_base or 0, max((self.cuda_base or 0) + s.offset_cuda_bytes +
                                                          (s.cuda_peak_bytes or 0) for s in self.done) if self.done else 0)
            self.cuda_reserved_peak = int(self.torch.cuda.max_memory_reserved(self.cuda))


# ---- sites --------------------------------------------------------------------------------------

def _site_for(frames: list[tuple[str, int]], fmap: Mapping[str, int] | None) -> tuple[str, int, str] | None:
    """The frame to charge, innermost first: user code, else the innermost library frame.

    None (not charged) when perfmagic's or IPython's own code allocated it: an internal frame is met
    before any user frame.
    """
    lib = None
    for fn, ln in frames:
        kind = code_kind(fn, fmap)
        if kind in ("cell", "user"):
            return fn, ln, kind
        if kind == "internal":
            return None
        if lib is None:
            lib = (fn, ln, kind)
    return lib


def tracemalloc_sites(snapshot: Any, before: Any, fmap: Mapping[str, int] | None) -> tuple[list[AllocSite], int]:
    """Net allocations by site (see module docstring) and the net traced total they come from."""
    if before is not None:
        stats = [(s.traceback, s.size_diff, s.count_diff) for s in snapshot.compare_to(before, "traceback")]
    else:
        stats = [(s.traceback, s.size, s.count) for s in snapshot.statistics("traceback")]
    agg: dict[tuple[str, int], list[Any]] = {}
    total = 0
    for tb, size, count in stats:
        frames = [(f.filename, f.lineno) for f in reversed(list(tb))]  # innermost first
        site = _site_for(frames, fmap)
        if site is None:
            continue
        total += size
        a = agg.setdefault((site[0], site[1]), [0, 0, site[2]])
        a[0] += size
        a[1] += count
    out = [AllocSite(source_label(f, ln, fmap), source_line(f, ln), size, count, kind)
           for (f, ln), (size, count, kind) in agg.items() if size > 0]
    out.sort(key=lambda s: -s.size_bytes)
    return out, total


def cuda_history_sites(snap: Any, device_index: int, fmap: Mapping[str, int] | None) -> list[AllocSite]:
    """Replay the allocator history to the moment of the highest live total; group live blocks by site."""
    traces = (snap.get("device_traces") or [[]])
    events = traces[device_index] if device_index < len(traces) else []
    live, total, best, best_i = {}, 0, -1, -1
    for i, e in enumerate(events):
        a = e.get("action")
        if a == "alloc":
            live[e["addr"]] = e["size"]
            total += e["size"]
            if total > best:
                best, best_i = total, i
        elif a in ("free_requested",) and e["addr"] in live:
            total -= live.pop(e["addr"])
    blocks: dict[int, Any] = {}
    for e in events[: best_i + 1]:
        if e.get("action") == "alloc":
            blocks[e["addr"]] = e
        elif e.get("action") == "free_requested":
            blocks.pop(e["addr"], None)
    agg: dict[tuple[str, int], list[Any]] = {}
    for e in blocks.values():
        frames = [(f.get("filename", "?"), int(f.get("line", 0))) for f in e.get("frames", [])]
        site = _site_for(frames, fmap) or ("<unknown>", 0, "library")
        a = agg.setdefault((site[0], site[1]), [0, 0, site[2]])
        a[0] += e["size"]
        a[1] += 1
    out = [AllocSite(source_label(f, ln, fmap), source_line(f, ln), s, c, k) for (f, ln), (s, c, k) in agg.items()]
    out.sort(key=lambda s: -s.size_bytes)
    return out


# ---- the public functions ------------------------------------------------------------------------

def _trace_mode(trace: Any) -> str:
    if trace is True or trace is False:
        return "on" if trace else "off"
    if isinstance(trace, str) and trace.lower() in TRACE_MODES:
        return trace.lower()
    raise BadOptionError("trace", trace, "sample, auto, on or off (or True/False)",
                         "sample (default) charges RSS growth to the line running at each sample, auto starts "
                         "tracemalloc once memory grows, on traces every allocation from the first line")


def _check(interval: float, top: int, device: str) -> str | None:
    if not isinstance(interval, (int, float)) or not interval > 0:
        raise BadOptionError("interval", interval, "a sampling interval in seconds > 0", "e.g. 0.01 (10 ms)")
    if interval < 1e-3:
        raise BadOptionError("interval", interval, "at least 1 ms", "sampling faster than 1 ms costs the cell "
                             "more than it tells; the true peak comes from VmHWM/tracemalloc anyway")
    if not isinstance(top, int) or top < 1:
        raise BadOptionError("top", top, "a positive number of allocation sites", "e.g. 10")
    dev = device.lower() if isinstance(device, str) else device
    if not isinstance(dev, str) or not (dev in DEVICES or re.fullmatch(r"cuda:\d+", dev)):
        raise BadOptionError("device", device, "one of auto, cpu, cuda, cuda:N")
    torch = sys.modules.get("torch")
    has_cuda = False
    if dev != "cpu":
        try:
            if torch is None and dev != "auto":
                import torch  # noqa: F811 - asked for CUDA explicitly: importing torch is expected
            has_cuda = bool(torch is not None and torch.cuda.is_available())
        except Exception:
            has_cuda = False
    if dev == "auto":
        return "cuda:%d" % torch.cuda.current_device() if has_cuda else None
    if dev.startswith("cuda"):
        if not has_cuda:
            raise BadOptionError("device", device, "a device that exists",
                                 "no CUDA device is available here (torch missing or built without CUDA); "
                                 "use --device cpu")
        return dev if ":" in dev else "cuda:%d" % torch.cuda.current_device()
    return None


def run_memory(fn_or_code: str | Callable[[], Any], *, globals: dict[str, Any] | None = None,
               filename: str | None = None, interval: float = DEFAULT_INTERVAL_S, top: int = 10,
               trace: bool | str = DEFAULT_TRACE, device: str = "auto",
               filename_map: Mapping[str, int] | None = None) -> tuple[MemoryResult, BaseException | None]:
    """Profile one run; return the result and the exception the code raised (None if it completed).

    Bad options raise :class:`BadOptionError` and a syntax error raises ``SyntaxError`` before
    anything is started. See :func:`memory` for the arguments.
    """
    __tracebackhide__ = True
    cuda = _check(interval, top, device)
    trace = _trace_mode(trace)
    fmap = filename_map if filename_map is not None else shell_filename_map()
    stmts = prepare(fn_or_code, globals, filename, "<perfmagic-memory>")
    rec = _Recorder(stmts, float(interval), trace, cuda, fmap)
    exc: BaseException | None = None
    try:
        rec.start()
        exc = run_statements(stmts, rec.mark)
    finally:
        rec.stop()
    return _build(rec, fn_or_code, exc, top, fmap), exc


def _build(rec: _Recorder, fn_or_code: Any, exc: BaseException | None, top: int,
           fmap: Mapping[str, int] | None) -> MemoryResult:
    notes = list(rec.notes)
    sites: list[AllocSite] = []
    total = None
    if rec.snapshot is not None:
        sites, total = tracemalloc_sites(rec.snapshot, rec.before_snapshot, fmap)
    cuda_sites: list[AllocSite] = []
    if rec.history_snapshot is not None:
        try:
            idx = int(rec.cuda.split(":")[1]) if rec.cuda and ":" in rec.cuda else 0
            cuda_sites = cuda_history_sites(rec.history_snapshot, idx, fmap)
        except Exception as e:  # an unexpected snapshot layout must not lose the measurement
            notes.append(f"CUDA allocator history not readable ({type(e).__name__})")
    if rec.wall < rec.interval:
        notes.append(f"the cell ran for {fmt_time(rec.wall)}, less than one sampling interval "
                     f"({fmt_time(rec.interval)}): the timeline has only its start and end; the peaks come from "
                     + ("VmHWM and tracemalloc" if rec.tracing else "VmHWM"))
    if not rec.hwm_ok:
        notes.append("VmHWM cannot be reset here (/proc/self/clear_refs): RSS peaks are sampled only and can "
                     "miss short-lived ones")
    if rec.reader.method == "unavailable":
        notes.append("RSS is not readable here (no /proc, no psutil)")
    if rec.started_tm:
        notes.append("tracemalloc slows allocation-heavy Python code while it runs (the wall time above includes "
                     "it); --no-trace (trace='off') keeps the timeline and true peaks without it")
    status = "ok"
    err = None
    if isinstance(exc, KeyboardInterrupt):
        status, err = "interrupted", "KeyboardInterrupt"
    elif exc is not None:
        status, err = "error", f"{type(exc).__name__}: {exc}"
    where_sites = [("", "", "")] * len(rec.where_keys)
    for (f, ln), k in rec.where_keys.items():
        kind, func = rec.where_kinds[k]
        label = source_label(f, ln, fmap) + ("" if func == "<module>" else f" in {func}()")
        where_sites[k] = (label, source_line(f, ln), kind)
    tm_net = None
    if rec.tracing and rec.tm_base is not None and rec.tm_end is not None:
        tm_net = rec.tm_end - rec.tm_base
    return MemoryResult(
        t_s=tuple(rec.t), rss_bytes=tuple(rec.rss), cuda_allocated_bytes=tuple(rec.c_alloc),
        cuda_reserved_bytes=tuple(rec.c_res), statements=tuple(rec.done), sites=tuple(sites[: max(top, 1)]),
        cuda_sites=tuple(cuda_sites[: max(top, 1)]), where=tuple(rec.where), where_sites=tuple(where_sites),
        wall_s=rec.wall, interval_s=rec.interval,
        first_sample_s=rec.first_thread_sample, rss_method=rec.reader.method,
        hwm_method="vmhwm" if rec.hwm_ok else "unavailable",
        tracing=("off" if rec.trace == "off" else "already running" if rec.tracing and not rec.started_tm
                 else rec.trace if rec.trace in ("on", "sample") else "auto-started" if rec.started_tm
                 else "auto-idle"),
        trace_started_s=rec.trace_started,
        nframe=rec.nframe, traced_net_bytes=tm_net, traced_total_net_bytes=total,
        device=rec.cuda or "cpu", cuda_base_bytes=rec.cuda_base,
        cuda_peak_abs_bytes=getattr(rec, "cuda_peak", None) if rec.torch is not None else None,
        cuda_reserved_peak_bytes=getattr(rec, "cuda_reserved_peak", None) if rec.torch is not None else None,
        code=fn_or_code if isinstance(fn_or_code, str) else getattr(fn_or_code, "__qualname__", repr(fn_or_code)),
        status=status, error=err, notes=tuple(notes))


def memory(fn_or_code: str | Callable[[], Any], *, globals: dict[str, Any] | None = None,
           filename: str | None = None, interval: float = DEFAULT_INTERVAL_S, top: int = 10,
           trace: bool | str = DEFAULT_TRACE, device: str = "auto",
           filename_map: Mapping[str, int] | None = None) -> MemoryResult:
    """Memory over one run of ``fn_or_code`` (a string of code or a zero-argument callable).

    Args:
        globals: the namespace code runs in (assignments land there); a fresh one by default.
        filename: the name the code is compiled under (shows in sites and tracebacks).
        interval: RSS sampling period in seconds (default 10 ms, at least 1 ms).
        top: how many allocation sites to keep.
        trace: ``"sample"`` (default: no tracemalloc; the sampler charges RSS growth to the line of
            user code running at each sample, a few µs per sample), ``"auto"`` (tracemalloc once RSS
            grows ``AUTO_TRACE_BYTES``), ``"on"``/True (tracemalloc from the first line: every site and
            the traced peak, 20-200x slower on allocation-heavy Python code), ``"off"``/False (RSS,
            VmHWM and CUDA only: no line is located).
        device: ``"auto"`` (CUDA when torch is imported and has it), ``"cpu"``, ``"cuda"``, ``"cuda:N"``.
        filename_map: cell filename -> execution count, to name sites ``In [n]`` (IPython's by default).

    Returns a :class:`MemoryResult`. An exception raised by the code propagates unchanged after the
    probes are stopped; Ctrl-C raises :class:`BenchInterrupted` with the partial result.
    """
    __tracebackhide__ = True
    result, exc = run_memory(fn_or_code, globals=globals, filename=filename, interval=interval, top=top,
                             trace=trace, device=device, filename_map=filename_map)
    if isinstance(exc, KeyboardInterrupt):
        raise BenchInterrupted(result) from exc
    if exc is not None:
        raise exc
    return result
