"""The probes of ``%%memory``: the RSS reader, the sampler thread and the per-statement recorder.

:class:`_Recorder` starts every probe (the sampler thread, tracemalloc, VmHWM resets, CUDA peak
stats and allocator history), marks statement boundaries (``mark(i)``) and stops everything it
started in ``stop()``. What it records becomes a :class:`~perfmagic.profile.memresult.MemoryResult`
in :func:`perfmagic.profile.memory.run_memory`; the method is written out in that module's docstring.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

from ..core.memory import reset_hwm, malloc_trim
from ..findings import Finding
from .cellcode import _PKG_DIR, Statement, code_kind, source_label
from .memresult import AUTO_TRACE_BYTES, StatementMemory

NFRAME = 8           # frames tracemalloc keeps when perfmagic starts it (enough to reach the user's line)
_MAX_DEPTH = 64      # frames walked per sample to find the main thread's user line
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


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
        self.notes: list[Finding] = []
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
            reset_hwm()
            rss = _status()[0]
        if self.torch is not None:
            self.torch.cuda.reset_peak_memory_stats(self.cuda)
            self.s_cuda = int(self.torch.cuda.memory_allocated(self.cuda))
        else:
            self.s_cuda = None
        self.s_tm, self.s_rss, self.s_start = tm_cur, rss, time.perf_counter() - self.t0

    # -- start / stop --------------------------------------------------------------------------
    def start(self) -> None:
        self.hwm_ok = reset_hwm() and _status()[1] is not None
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
            self.notes.append(Finding.of("memory.no-history"))
            return
        try:
            if mem._snapshot().get("device_traces", [[]])[0]:
                self.notes.append(Finding.of("memory.history-running"))
                return
            rec(enabled="all", context="alloc", stacks="python", max_entries=200_000)
            self.history = True
        except Exception as exc:
            self.notes.append(Finding.of("memory.history-unavailable", error=type(exc).__name__))

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

