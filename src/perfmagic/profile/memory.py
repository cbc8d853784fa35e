"""Memory over one run of a cell: an RSS timeline, per-statement peaks, allocation sites, CUDA memory.

``perfmagic.memory(code_or_fn)`` runs the code once (in the namespace given, so assignments persist as
in a normal cell) and records, all at once:

* **RSS timeline** — a daemon thread samples the resident set every ``interval`` (default 10 ms) from
  ``/proc/self/statm`` (one ``pread``, a few µs; psutil elsewhere). A sample is also taken in the
  main thread at the start and the end, so even a cell shorter than one interval has two points.
* **True peaks** — sampling misses anything shorter than the interval, so the kernel's high-water
  mark ``VmHWM`` is reset (``/proc/self/clear_refs``, see :mod:`perfmagic.core.memory`) before every
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
:class:`~perfmagic.errors.BenchInterrupted` carrying the partial result.

Where each part lives (along the data flow): :mod:`~perfmagic.profile.cellcode` compiles the cell
statement by statement and names its lines, :mod:`~perfmagic.profile.memsampler` records (the
sampler thread and the per-statement probes), :mod:`~perfmagic.profile.memresult` holds what was
found (:class:`MemoryResult`, its sites), :mod:`perfmagic.render.memory` draws it; this module is
the driver: :func:`run_memory` and :func:`memory`.
"""

from __future__ import annotations

import re
import sys
from dataclasses import replace
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import BadOptionError, BenchInterrupted
from ..findings import Finding
from .cellcode import (compile_statements, prepare, run_statements, shell_filename_map, source_label,
                       source_line)
from .memresult import (AUTO_TRACE_BYTES, DEFAULT_INTERVAL_S, AllocSite, MemoryResult, StatementMemory,
                        cuda_history_sites, tracemalloc_sites)
from .memsampler import NFRAME, _Recorder

TRACE_MODES = ("sample", "auto", "on", "off")
DEFAULT_TRACE = "sample"
DEVICES = ("auto", "cpu", "cuda")


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
        # record CUDA alongside the host only where the process has initialised CUDA already (reading its
        # counters then initialises nothing); whether the cell used it is read from its work afterwards
        from ..core.sync import cuda_in_use

        return "cuda:%d" % torch.cuda.current_device() if has_cuda and cuda_in_use() else None
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
    from ..core.devicework import watch

    w = watch()
    try:
        rec.start()
        with w:
            exc = run_statements(stmts, rec.mark)
    finally:
        rec.stop()
    res = _build(rec, fn_or_code, exc, top, fmap)
    auto = not (isinstance(device, str) and device.lower().startswith("cuda"))
    if auto and res.device.startswith("cuda") and not w.use.cuda:
        # CUDA was initialised by earlier cells, not used by this one: a host measurement
        res = replace(res, device="cpu", cuda_allocated_bytes=(), cuda_reserved_bytes=(), cuda_sites=(),
                      cuda_peak_abs_bytes=None, cuda_reserved_peak_bytes=None, cuda_base_bytes=None,
                      notes=res.notes + (Finding.of("memory.host", why=w.use.why),))
    elif auto and not res.device.startswith("cuda") and w.use.cuda:
        res = replace(res, notes=res.notes + (Finding.of("memory.cuda-unrecorded", why=w.use.why),))
    return res, exc


def _build(rec: _Recorder, fn_or_code: Any, exc: BaseException | None, top: int,
           fmap: Mapping[str, int] | None) -> MemoryResult:
    notes: list[Finding] = list(rec.notes)
    sites: list[AllocSite] = []
    total = None
    if rec.snapshot is not None:
        sites, total = tracemalloc_sites(rec.snapshot, rec.before_snapshot, fmap)
    cuda_sites: list[AllocSite] = []
    if rec.history_snapshot is not None:
        try:
            idx = int(rec.cuda.split(":")[1]) if rec.cuda and ":" in rec.cuda else 0
            cuda_sites = cuda_history_sites(rec.history_snapshot, idx, fmap)
            if not cuda_sites and (rec.cuda_peak or 0) > 0:
                notes.append(Finding.of("memory.cuda-no-stacks"))
        except Exception as e:  # an unexpected snapshot layout must not lose the measurement
            notes.append(Finding.of("memory.history-unreadable", error=type(e).__name__))
    if rec.wall < rec.interval:
        notes.append(Finding.of("memory.short-run", wall_s=rec.wall, interval_s=rec.interval,
                                tracing=bool(rec.tracing)))
    if not rec.hwm_ok:
        notes.append(Finding.of("memory.no-hwm"))
    if rec.reader.method == "unavailable":
        notes.append(Finding.of("memory.no-rss"))
    if rec.started_tm:
        notes.append(Finding.of("memory.tracemalloc-cost"))
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


def memory(code: str | Callable[[], Any], *, globals: dict[str, Any] | None = None,
           filename: str | None = None, interval: float = DEFAULT_INTERVAL_S, top: int = 10,
           trace: bool | str = DEFAULT_TRACE, device: str = "auto",
           filename_map: Mapping[str, int] | None = None) -> MemoryResult:
    """Memory over one run of ``code`` (a string of code or a zero-argument callable).

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
        device: ``"auto"`` (CUDA when the cell's own work used it, read from its ops and allocations; never
            initialises CUDA), ``"cpu"``, ``"cuda"``, ``"cuda:N"``.
        filename_map: cell filename -> execution count, to name sites ``In [n]`` (IPython's by default).

    Returns a :class:`MemoryResult`. An exception raised by the code propagates unchanged after the
    probes are stopped; Ctrl-C raises :class:`BenchInterrupted` with the partial result.
    """
    __tracebackhide__ = True
    result, exc = run_memory(code, globals=globals, filename=filename, interval=interval, top=top,
                             trace=trace, device=device, filename_map=filename_map)
    if isinstance(exc, KeyboardInterrupt):
        raise BenchInterrupted(result) from exc
    if exc is not None:
        raise exc
    return result


__all__ = ["AUTO_TRACE_BYTES", "DEFAULT_INTERVAL_S", "DEFAULT_TRACE", "DEVICES", "NFRAME", "TRACE_MODES",
           "AllocSite", "MemoryResult", "StatementMemory", "compile_statements", "memory", "prepare", "run_memory",
           "run_statements", "shell_filename_map", "source_label"]
