"""Running the user's code: one run at a size (timed, synchronized, its peak memory), and the full job.

:class:`_Runner` compiles the cell once (or wraps a callable) and runs it at a size: before the run
the allocator gives freed memory back to the system (``malloc_trim``) and the RSS high-water mark is
reset, so each run's peak is its own and each run starts in the state a fresh full run would.
:func:`run_full` runs the full job when the gate allows it, with the prediction as its ETA, and keeps
what it actually took.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from ..errors import BadOptionError
from ..findings import Finding
from ..render.units import fmt_time
from .result import Actual, EstimateResult


class _Runner:
    """Runs the code once at a size (or once as a unit), timing it and measuring its peak memory."""

    def __init__(self, fn_or_code: Any, var: str | None, namespace: Mapping[str, Any] | None, device: str,
                 filename: str) -> None:
        from ..core.cells import compile_cell

        self.var = var
        self.device = device  # "cpu" until the first call shows CUDA work (see core.devicework)
        self.device_why = ""
        self.use: Any = None
        self.sync: Any = None
        # the fresh memory the last run (with memory) had handed out, bytes: (huge pages, 4 KiB pages of its
        # own, all pages the kernel handed out meanwhile, the page cache too); None where not counted
        self.last_fresh: tuple[int | None, int | None, int | None] = (None, None, None)
        self.last_n: int | None = None  # the size of the run started last (once)
        if isinstance(fn_or_code, str):
            self.ns: dict[str, Any] = dict(namespace) if namespace is not None else {"__name__": "__perfmagic__"}
            cell = compile_cell(fn_or_code, self.ns, filename)
            run = cell.run

            def call(n: int | None) -> Any:
                if var is not None:
                    self.ns[var] = n
                return run(1)
        elif callable(fn_or_code):
            fn = fn_or_code

            def call(n: int | None) -> Any:
                return fn(n) if var is not None else fn()
        else:
            raise BadOptionError("fn_or_code", fn_or_code, "code (a string) or a callable")
        self.call = call

    def _sync_after(self, value: Any) -> None:
        from ..core.sync import Sync, detect, make

        if self.sync is None:
            name, why = detect(value, self.device, self.use)
            if name == "cuda" and not self.device.startswith("cuda"):
                self.device = self.use.device if self.use is not None else "cuda"
                self.device_why = why
            self.sync = make(name, self.device if self.device.startswith("cuda") else "cuda") if name != "none" else Sync()
            self.device = str(getattr(self.sync, "device", self.device))
        self.sync.after(value)
        self.sync.finish()

    def once(self, n: int | None, *, memory: bool = True, trace: bool = False, clean: bool = True,
             ) -> tuple[float, int | None, int | None, int | None]:
        """One run: (seconds, RSS peak increase, traced peak, CUDA peak); the cell's exceptions propagate
        (``last_n``: the size of the run started last, which the caller names when it raised)."""
        self.last_n = n
        from ..core.memory import reset_hwm, status_kib, current_rss, malloc_trim

        if clean:  # freed heap back to the system: this run's RSS peak is its own (~1 ms; gc.collect is not
            malloc_trim()  # worth its tens of ms on a big heap: reference counting has freed the last run)
        from ..core.devicework import run_watched
        from ..core.sync import cuda_in_use

        first = self.sync is None and not self.device.startswith("cuda")  # the device is read from this call
        torch = sys.modules.get("torch") if self.device.startswith("cuda") or first and cuda_in_use() else None
        # (never initialise CUDA here: only read its counters where the process already has)
        cuda_base = None
        if memory and torch is not None:
            try:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                cuda_base = int(torch.cuda.memory_allocated())
            except Exception:
                if self.device.startswith("cuda"):
                    raise
                torch = None  # the device is not known yet, and its counters cannot be read: host only
        from ..core.memory import PageCounters

        rss0 = current_rss() if memory else None
        hwm = memory and reset_hwm() and rss0 is not None
        pages0 = PageCounters.read() if memory else None
        tm = None
        if trace:
            import tracemalloc

            tm = tracemalloc
            started = not tm.is_tracing()
            if started:
                tm.start()
            tm.reset_peak()
            traced0 = tm.get_traced_memory()[0]
        try:
            if first:
                value, self.use, t0 = run_watched(lambda: self.call(n), time.perf_counter)
            else:
                t0 = time.perf_counter()
                value = self.call(n)
            self._sync_after(value)
            dt = time.perf_counter() - t0
            traced = max(tm.get_traced_memory()[1] - traced0, 0) if tm is not None else None
        finally:
            if tm is not None and started:
                tm.stop()
        self.last_fresh = PageCounters.read().fresh_since(pages0) if pages0 is not None else (None, None, None)
        rss_peak = None
        if hwm:
            rss_peak = max((status_kib("VmHWM") or 0) - rss0, 0)
        cuda_peak = None
        if first and memory and self.device.startswith("cuda") and cuda_base is None:
            torch = sys.modules.get("torch")  # the call itself initialised CUDA: its peak is all of it
            cuda_base = 0
        if cuda_base is not None and self.device.startswith("cuda"):
            cuda_peak = max(int(torch.cuda.max_memory_allocated()) - cuda_base, 0)
        return dt, rss_peak, traced, cuda_peak



def run_full(r: EstimateResult, runner: _Runner, *, force: bool = False,
             progress: Callable[[float, str], None] | None = None) -> EstimateResult:
    """Run the full job (when the gate allows it) and attach what it actually took."""
    if r.verdict in ("will not fit", "unknown") and not force:
        return replace(r, notes=r.notes + (Finding.of("estimate.not-started", verdict=r.verdict),))
    pred = r.predicted_s or 0.0
    t0 = time.perf_counter()
    stop = threading.Event()

    def ticker() -> None:  # the ETA is the prediction: show elapsed against it
        while not stop.wait(0.25):
            el = time.perf_counter() - t0
            if progress is not None and pred:
                progress(min(el / pred, 0.999), f"{fmt_time(el, 3)} of ~{fmt_time(pred, 3)}")

    if r.mode == "scaling":
        th = threading.Thread(target=ticker, name="perfmagic-estimate-eta", daemon=True)
        th.start()
        try:
            try:
                dt, rss, _traced, cuda = runner.once(int(r.full), memory=True, clean=True)
            except KeyboardInterrupt:
                return r.with_actual(Actual(time.perf_counter() - t0, None, None, "interrupted"))
            except Exception as exc:
                return r.with_actual(Actual(time.perf_counter() - t0, None, None, "failed",
                                            f"{type(exc).__name__}: {exc}", exc))
        finally:
            stop.set()
            th.join()
        if progress is not None:
            progress(1.0, f"done in {fmt_time(dt, 3)}")
        return r.with_actual(Actual(dt, cuda if cuda is not None else rss, 1.0, "ok"))
    # per-iteration: run every unit; progress by units, ETA from the prediction for the units left
    from ..core.memory import reset_hwm, status_kib, current_rss, malloc_trim

    T = int(r.full)
    malloc_trim()  # as the measuring did: the job's own growth must show in RSS
    rss0 = current_rss()
    hw = reset_hwm() and rss0 is not None
    done = 0
    last = 0.0
    v = None
    per = (pred / T) if T else 0.0
    try:
        for done in range(1, T + 1):
            v = runner.call(None)
            now = time.perf_counter()
            if progress is not None and now - last > 0.1:
                last = now
                progress(done / T, f"{done:,}/{T:,}, ETA {fmt_time(per * (T - done), 3)}")
        runner._sync_after(v)
    except KeyboardInterrupt:
        el = time.perf_counter() - t0
        return r.with_actual(Actual(el, None, (done - 1) / T if T else None, "interrupted"))
    except Exception as exc:
        el = time.perf_counter() - t0
        return r.with_actual(Actual(el, None, (done - 1) / T if T else None, "failed", f"{type(exc).__name__}: {exc}",
                                    exc))
    el = time.perf_counter() - t0
    peak = max((status_kib("VmHWM") or 0) - rss0, 0) if hw else None
    if progress is not None:
        progress(1.0, f"done in {fmt_time(el, 3)}")
    return r.with_actual(Actual(el, peak, 1.0, "ok"))



__all__ = ["run_full"]
