"""Estimate a full run's time and peak memory before committing to it (``%%estimate``).

Two forms:

* **per-iteration** (``total=``): the code is one unit of work (a step, a slice). A few warmed-up
  units are timed within a short budget; the full job is ``cold extra + total × mean unit time``, with
  an interval on the mean, the spread of the units and the units per second. RSS after each unit
  tells whether memory grows from unit to unit (a leak, a growing list), which then scales with the
  total.
* **scaling** (``n=``): the code uses a size variable. It is run at doubling sizes, as large as the
  measuring budget allows and never more than ``max_fraction`` of the (running) estimate of the full
  run; each run's wall time (synchronized on a GPU) and peak memory (RSS high-water mark above the
  level before the run; ``max_memory_allocated`` on CUDA; traced Python allocations for the cheap
  sizes) are kept. :mod:`._costmodel` picks a cost model by AICc and predicts size ``n`` with an
  interval; a local-slope check warns when the slope is still rising at the largest size measured.

Then **the gate**: the prediction against a time budget and the memory available now, a *will fit /
will not fit / borderline* verdict and the largest size that fits; ``run=True`` runs the full job
when it fits and keeps predicted vs actual, so the estimates can be checked.

Before each run of the scaling form the allocator gives freed memory back to the system
(``malloc_trim``) and the high-water mark is reset, so each run's peak is its own and each run starts
in the state a fresh full run would.
"""

from __future__ import annotations

import gc
import math
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..core import stats as _stats
from .costmodel import Selection, invert, local_slopes, select
from ..timing.bench import MAX_BUDGET_S
from ..errors import BadOptionError, BenchInterrupted, PerfmagicError
from ..render.units import fmt_bytes, fmt_time
from ..core.reference import reference_time

DEFAULT_MEASURE_S = 3.0
DEFAULT_MAX_FRACTION = 0.10
GROWTH = 2.0
FIT_SPAN = 2.0 ** 6  # the model is fitted on sizes within this factor of the largest (when >= 5 such points)
MEM_FLOOR = 2**20  # RSS increments below 1 MiB are allocator noise: relative errors are taken against this
MIN_MEASURE_S = 0.3  # the fraction cap never stops the measuring before this much time
MEM_HEADROOM = 0.9  # a run "fits" in memory when its peak stays under 90% of what is available
UNRELIABLE_SPREAD = 10.0  # interval high/low beyond this: the fit cannot be trusted
PLAUSIBLE_MAX_S = 1e8  # ~3 years
SPEED_GUARD_MIN_S = 0.02  # points expected to take at least this long are timed beside the reference workload
SPEED_TOLERANCE = 0.05    # machine speed within ±5% of typical at every point: no correction
SPEED_WARN = 0.15  # without the correction, a speed change beyond ±15% while measuring is a warning
TOP_SPAN = 3.0   # the top of the curve: the largest sizes, at least 3 of them, spanning at least this factor
TOP_SLOPE_MISMATCH = 0.5  # the model's slope there differs from the points' by more: a regime change
LAST_STEP_MISMATCH = 1.0  # the model's slope over the last step exceeds the points' by more, just past a jump


# ---- memory helpers ---------------------------------------------------------------------------

def available_memory(device: str) -> tuple[int | None, str]:
    """Bytes available now for a new allocation: free GPU memory on CUDA, available RAM otherwise."""
    if device.startswith("cuda"):
        torch = sys.modules.get("torch")
        if torch is not None:
            try:
                free, _total = torch.cuda.mem_get_info(torch.device(device))
                return int(free), "free GPU memory"
            except Exception:
                pass
    try:
        import psutil

        return int(psutil.virtual_memory().available), "available RAM"
    except Exception:  # pragma: no cover
        return None, "available RAM"


def _pct(x: float) -> str:
    return "< 0.1%" if x < 0.001 else f"{x:.1%}"


# ---- results ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Point:
    """Every run at one size (scaling) or every timed block of units (per-iteration, ``n`` = units per block)."""

    n: int
    times: tuple[float, ...]
    rss_peaks: tuple[int, ...] = ()
    traced_peak: int | None = None
    cuda_peak: int | None = None
    rss_after: tuple[int, ...] = ()
    ref_s: float | None = None      # the drift guard's reference workload timed around this point
    cpu_share: float | None = None  # this process's CPU time / wall time over the point's runs

    @property
    def time(self) -> float:
        return _stats.median(list(self.times))

    @property
    def guarded(self) -> bool:
        """Timed between two runs of the drift guard, with its CPU share known."""
        return bool(self.ref_s) and self.cpu_share is not None

    def memory(self) -> int | None:
        if self.cuda_peak is not None:
            return self.cuda_peak
        vals = [v for v in (int(_stats.median(list(self.rss_peaks))) if self.rss_peaks else None, self.traced_peak)
                if v is not None]
        return max(vals) if vals else None


@dataclass(frozen=True)
class Actual:
    """What the full run did (``run=True``): its time, its peak, and how far it got."""

    seconds: float
    peak_bytes: int | None
    completed: float | None  # fraction of the job done (1.0 when it finished; None when unknown)
    status: str  # "ok" | "interrupted" | "failed"
    error: str | None = None
    # the exception the job raised (status "failed"), kept so a caller can re-raise the user's own error
    exception: BaseException | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class EstimateResult:
    mode: str  # "scaling" | "iteration"
    var: str | None
    full: float  # the full size n, or the total number of units
    code: str
    device: str
    points: tuple[Point, ...]
    warmup: tuple[float, ...]
    failures: tuple[tuple[int, str], ...]
    spent_s: float
    measure_budget_s: float
    max_fraction: float
    predicted_s: float | None
    low_s: float | None
    high_s: float | None
    peak_bytes: float | None
    peak_low: float | None
    peak_high: float | None
    reliable: bool
    time_fit: Selection | None = None
    mem_fit: Selection | None = None
    fit_sizes: tuple[int, ...] = ()
    cold_s: float | None = None
    mem_growth_per_unit: float | None = None
    memory_source: str = "rss"
    budget_s: float | None = None
    available_bytes: int | None = None
    available_kind: str = "available RAM"
    verdict: str = "no budget given"
    verdict_reasons: tuple[str, ...] = ()
    largest_fit: float | None = None
    largest_fit_time: float | None = None
    largest_fit_memory: float | None = None
    warnings: tuple[str, ...] = ()
    status: str = "ok"
    measured_full: bool = False
    actual: Actual | None = None
    notes: tuple[str, ...] = field(default=())
    speed_factors: tuple[float, ...] = ()  # per point, where the times were corrected for the machine's speed
    unreliable_why: str = ""  # why the prediction is not printed, where it is not the width of the interval

    # ---- derived --------------------------------------------------------------------------
    @property
    def unit(self) -> str:
        return "units" if self.mode == "iteration" else (self.var or "n")

    @property
    def unit_times(self) -> list[float]:
        """Per-unit times of the per-iteration form (each block's time divided by its units)."""
        return [t / p.n for p in self.points for t in p.times]

    @property
    def measured_fraction(self) -> float | None:
        """Measuring cost as a fraction of the predicted full run (None where no prediction is trusted)."""
        if not self.predicted_s or not self.reliable:
            return None
        return self.spent_s / self.predicted_s

    @property
    def largest_measured(self) -> int | None:
        return max((p.n for p in self.points), default=None) if self.mode == "scaling" else None

    def time_error(self) -> float | None:
        """(actual − predicted) / predicted, when the full run finished (or, interrupted, was extrapolated)."""
        a = self.actual
        if a is None or not self.predicted_s:
            return None
        if a.status == "ok":
            return a.seconds / self.predicted_s - 1
        if a.completed:  # per-iteration: the units done tell the pace
            return (a.seconds / a.completed) / self.predicted_s - 1
        return None

    def memory_error(self) -> float | None:
        a = self.actual
        if a is None or a.status != "ok" or a.peak_bytes is None or not self.peak_bytes:
            return None
        if max(a.peak_bytes, self.peak_bytes) < MEM_FLOOR:
            return None  # both below the allocator's noise: nothing to compare
        return a.peak_bytes / self.peak_bytes - 1

    def with_actual(self, actual: Actual) -> EstimateResult:
        return replace(self, actual=actual)

    # ---- text ---------------------------------------------------------------------------------
    def _full_text(self) -> str:
        return f"{self.var}={self.full:,.0f}" if self.mode == "scaling" else f"{self.full:,.0f} units"

    def headline(self) -> str:
        what = f"estimate for {self._full_text()}: "
        if self.predicted_s is None:
            return what + "no estimate (" + (self.verdict_reasons[0] if self.verdict_reasons else "nothing measured") + ")"
        if not self.reliable and self.unreliable_why:
            return what + f"no estimate: {self.unreliable_why}"
        if not self.reliable:
            return (what + f"the fit is unreliable (it puts the full run anywhere from {fmt_time(self.low_s)} to "
                    f"{fmt_time(self.high_s)}); measure larger sizes, e.g. a longer measuring budget")
        t = f"{fmt_time(self.predicted_s, 3)} (90% interval {fmt_time(self.low_s, 3)} – {fmt_time(self.high_s, 3)})"
        if self.measured_full:
            t = f"{fmt_time(self.predicted_s, 3)} (measured at the full size)"
        mem = ""
        if self.peak_bytes is not None and self.peak_bytes < MEM_FLOOR:
            mem = ", peak memory < 1 MiB"
        elif self.peak_bytes is not None:
            mem = f", peak memory +{fmt_bytes(self.peak_bytes)}"
            if self.peak_low is not None and self.peak_high is not None and self.peak_high > self.peak_low * 1.02:
                mem += f" ({fmt_bytes(self.peak_low)} – {fmt_bytes(self.peak_high)})"
        gate = ""
        if self.verdict != "no budget given":
            gate = f"  → {self.verdict.upper()}"
        return what + t + mem + gate

    def text(self, run_id: Any = None) -> str:
        L = [self.headline()]
        if self.status != "ok":
            L.append("  (interrupted: the points measured before Ctrl-C are fitted)")
        if self.mode == "iteration" and self.points:
            ut = self.unit_times
            mean = sum(ut) / len(ut)
            q = sorted(ut)
            p10, p90 = q[int(0.1 * (len(q) - 1))], q[int(0.9 * (len(q) - 1))]
            units = sum(p.n * len(p.times) for p in self.points)
            L.append(f"  per unit: {fmt_time(mean)} mean (median {fmt_time(_stats.median(ut))}, p10–p90 "
                     f"{fmt_time(p10)} – {fmt_time(p90)}), {1 / mean:,.4g} units/s"
                     + (f"; cold first unit {fmt_time(self.cold_s)}" if self.cold_s is not None else ""))
            L.append(f"  measured {units} units in {fmt_time(self.spent_s, 3)} after {len(self.warmup)} warm-up "
                     f"unit{'s' if len(self.warmup) != 1 else ''}"
                     + (f" ({_pct(self.measured_fraction)} of the full job)" if self.measured_fraction else ""))
            if self.peak_bytes is not None:
                g = self.mem_growth_per_unit
                grow = (f"memory grows {fmt_bytes(g)} per unit (→ +{fmt_bytes(g * self.full)} over the job)"
                        if g else "no growth across units")
                L.append(f"  peak memory per unit +{fmt_bytes(self.points[0].memory() or 0)}; {grow}")
        elif self.points:
            tf = self.time_fit
            if tf is not None:
                other = f"; plausible too: {', '.join(tf.plausible)}" if tf.plausible else ""
                lo, hi = min(self.fit_sizes), max(self.fit_sizes)
                L.append(f"  time model: {tf.best.describe()} (AICc{other}), a = {fmt_time(tf.best.a)}; fitted on "
                         f"{len(self.fit_sizes)} sizes {lo:,} … {hi:,} ({hi / self.full:.1%} of {self.var})")
            if self.mem_fit is not None:
                mf = self.mem_fit
                L.append(f"  memory model: {mf.best.describe()} ({self.memory_source}), a = {fmt_bytes(mf.best.a)}")
            big = max(self.points, key=lambda p: p.n)
            frac = f" ({_pct(self.measured_fraction)} of the predicted full run)" if self.measured_fraction else ""
            if self.measured_full:
                frac = " (the full run was cheap enough to measure rather than predict)"
            L.append(f"  measured {len(self.points)} sizes in {fmt_time(self.spent_s, 3)}{frac}; the largest, "
                     f"{big.n:,}, took {fmt_time(big.time, 3)}")
        if self.budget_s is not None or self.available_bytes is not None:
            lim = []
            if self.budget_s is not None:
                lim.append(f"budget {fmt_time(self.budget_s, 3)}")
            if self.available_bytes is not None:
                lim.append(f"{self.available_kind} {fmt_bytes(self.available_bytes)}")
            L.append(f"  gate: {self.verdict} ({', '.join(lim)})" + (": " + "; ".join(self.verdict_reasons)
                                                                     if self.verdict_reasons else ""))
            if self.largest_fit is not None:
                why = []
                if self.largest_fit_time is not None:
                    why.append(f"time {self.largest_fit_time:,.0f}")
                if self.largest_fit_memory is not None:
                    why.append(f"memory {self.largest_fit_memory:,.0f}")
                what = "the most units that fit" if self.mode == "iteration" else f"largest {self.var} that fits"
                L.append(f"  {what}: {self.largest_fit:,.0f}"
                         + (f" (by {', by '.join(why)})" if len(why) > 1 else ""))
        for n, err in self.failures:
            L.append(f"  ! failed at {self.var}={n:,}: {err}")
        L += [f"  ! {w}" for w in self.warnings]
        L += [f"  note: {x}" for x in self.notes]
        a = self.actual
        if a is not None:
            if a.status == "ok":
                e = self.time_error()
                me = self.memory_error()
                L.append(f"  actual full run: {fmt_time(a.seconds, 3)}" + (f" ({e:+.1%} vs predicted)" if e is not None else "")
                         + (f", peak +{fmt_bytes(a.peak_bytes)}" if a.peak_bytes is not None else "")
                         + (f" ({me:+.1%})" if me is not None else ""))
            elif a.status == "interrupted":
                got = f", {a.completed:.1%} done" if a.completed else ""
                e = self.time_error()
                L.append(f"  full run interrupted after {fmt_time(a.seconds, 3)}{got}"
                         + (f"; its pace is {e:+.1%} vs predicted" if e is not None else
                            (f"; already {a.seconds / self.predicted_s:.0%} of the prediction" if self.predicted_s else "")))
            else:
                L.append(f"  full run failed after {fmt_time(a.seconds, 3)}: {a.error}")
        if run_id is not None:
            L.append(f"  run #{run_id}")
        return "\n".join(L)

    def __str__(self) -> str:
        return self.text()

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.text())

    # ---- ledger ---------------------------------------------------------------------------
    def metrics(self) -> dict[str, Any]:
        m: dict[str, Any] = {
            "mode": self.mode, "full": float(self.full), "predicted_s": self.predicted_s, "low_s": self.low_s,
            "high_s": self.high_s, "predicted_peak_bytes": self.peak_bytes, "peak_low_bytes": self.peak_low,
            "peak_high_bytes": self.peak_high, "reliable": self.reliable, "verdict": self.verdict,
            "budget_s": self.budget_s, "available_bytes": self.available_bytes, "largest_fit": self.largest_fit,
            "spent_s": self.spent_s, "measured_fraction": self.measured_fraction, "n_points": len(self.points),
        }
        if self.time_fit is not None:
            b = self.time_fit.best
            m.update(model=b.describe(), exponent=b.exponent(), overhead_s=b.a)
        if self.mode == "iteration" and self.points:
            ut = self.unit_times
            m.update(unit_mean_s=sum(ut) / len(ut), unit_median_s=_stats.median(ut), units_per_s=len(ut) / sum(ut))
        a = self.actual
        if a is not None:
            m.update(actual_s=a.seconds, actual_peak_bytes=a.peak_bytes, actual_completed=a.completed,
                     actual_status=a.status, time_error=self.time_error(), memory_error=self.memory_error())
        return m

    def samples_dict(self) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {"warmup_s": list(self.warmup)}
        if self.mode == "iteration":
            out["unit_s"] = self.unit_times
            out["rss_after_bytes"] = [float(x) for p in self.points for x in p.rss_after]
        else:
            out["size"] = [float(p.n) for p in self.points]
            out["time_s"] = [p.time for p in self.points]
            out["all_times_s"] = [t for p in self.points for t in p.times]
            out["runs_per_size"] = [float(len(p.times)) for p in self.points]
            out["memory_bytes"] = [float(p.memory() or 0) for p in self.points]
        return out

    # ---- figure ---------------------------------------------------------------------------
    def figure_png(self) -> bytes | None:
        if not self.points:
            return None
        import io

        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        fig = Figure(figsize=(8.4, 3.4), dpi=100, layout="constrained")
        FigureCanvasAgg(fig)
        if self.mode == "iteration":
            self._figure_iteration(fig)
        else:
            self._figure_scaling(fig)
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        return buf.getvalue()

    def _figure_scaling(self, fig: Any) -> None:
        import numpy as np

        ax, mx = fig.subplots(1, 2)
        ns = np.array([p.n for p in self.points], float)
        f = np.array(self.speed_factors if len(self.speed_factors) == len(self.points) else [1.0] * len(self.points))
        ts = np.array([p.time for p in self.points]) * f
        lo_t = np.array([min(p.times) for p in self.points]) * f
        hi_t = np.array([max(p.times) for p in self.points]) * f
        what = "measured (min–max)" + (", speed-corrected" if self.speed_factors else "")
        ax.errorbar(ns, ts, yerr=[ts - lo_t, hi_t - ts], fmt="o", ms=4, color="tab:blue", label=what)
        N, top = float(self.full), float(ns.max())
        if self.time_fit is not None:
            xs = np.geomspace(ns.min(), max(N, top), 200)
            ax.plot(xs, self.time_fit.best.predict(xs), color="tab:orange", lw=1.5, label=self.time_fit.best.describe())
            if self.low_s and self.high_s and N > top:
                xb = np.geomspace(top, N, 60)
                frac = np.log(xb / top) / math.log(N / top)
                mid = self.time_fit.best.predict(xb)
                ax.fill_between(xb, mid * (self.low_s / self.predicted_s) ** frac, mid * (self.high_s / self.predicted_s) ** frac,
                                color="tab:orange", alpha=0.2, label="90% interval")
            if self.predicted_s:
                ax.plot([N], [self.predicted_s], "*", ms=12, color="tab:red" if not self.reliable else "tab:orange")
        if self.budget_s is not None:
            ax.axhline(self.budget_s, color="tab:red", ls="--", lw=1, label=f"budget {fmt_time(self.budget_s, 3)}")
        if self.actual is not None and self.actual.status == "ok":
            ax.plot([N], [self.actual.seconds], "D", color="black", ms=6, label="actual")
        ax.axvline(N, color="0.5", ls=":", lw=1)
        for n, _ in self.failures:
            ax.axvline(n, color="tab:red", ls=":", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"size {self.var}")
        ax.set_ylabel("time of one run [s]")
        ax.set_title("time" + (" (interrupted)" if self.status != "ok" else ""), fontsize=9, loc="left")
        ax.legend(fontsize=7, frameon=False, loc="upper left")
        mem = [(p.n, p.memory()) for p in self.points if p.memory() is not None]
        if mem:
            mn = np.array([x for x, _ in mem], float)
            mv = np.array([max(v, 1) for _, v in mem], float) / 2**20
            mx.plot(mn, mv, "o", ms=4, color="tab:green", label=f"measured ({self.memory_source})")
            if self.mem_fit is not None:
                xs = np.geomspace(mn.min(), max(N, top), 200)
                mx.plot(xs, np.maximum(self.mem_fit.best.predict(xs), 1) / 2**20, color="tab:olive", lw=1.5,
                        label=self.mem_fit.best.describe())
            if self.peak_bytes:
                mx.plot([N], [self.peak_bytes / 2**20], "*", ms=12, color="tab:olive")
            if self.available_bytes:
                mx.axhline(self.available_bytes / 2**20, color="tab:red", ls="--", lw=1, label=self.available_kind)
            if self.actual is not None and self.actual.peak_bytes is not None and self.actual.status == "ok":
                mx.plot([N], [max(self.actual.peak_bytes, 1) / 2**20], "D", color="black", ms=6, label="actual")
            mx.axvline(N, color="0.5", ls=":", lw=1)
            mx.set_xscale("log")
            mx.set_yscale("log")
            mx.set_xlabel(f"size {self.var}")
            mx.set_ylabel("peak memory [MiB]")
            mx.legend(fontsize=7, frameon=False, loc="upper left")
        mx.set_title("peak memory", fontsize=9, loc="left")
        for a in (ax, mx):
            a.tick_params(labelsize=7)

    def _figure_iteration(self, fig: Any) -> None:
        ax, cx = fig.subplots(1, 2)
        ut = self.unit_times
        ax.plot(range(1, len(self.warmup) + 1), self.warmup, "o", ms=3, color="0.6", label="warm-up")
        ax.plot(range(len(self.warmup) + 1, len(self.warmup) + len(ut) + 1), ut, "o", ms=3, color="tab:blue",
                label="measured")
        ax.set_xlabel("unit (block)")
        ax.set_ylabel("time per unit [s]")
        ax.set_ylim(bottom=0)
        ax.set_title("per-unit time", fontsize=9, loc="left")
        ax.legend(fontsize=7, frameon=False)
        T = float(self.full)
        if self.predicted_s:
            xs = [0.0, T]
            cx.plot(xs, [0.0, self.predicted_s], color="tab:orange", lw=1.5, label="predicted")
            if self.low_s and self.high_s:
                cx.fill_between(xs, [0.0, self.low_s], [0.0, self.high_s], color="tab:orange", alpha=0.2,
                                label="90% interval")
        if self.budget_s is not None:
            cx.axhline(self.budget_s, color="tab:red", ls="--", lw=1, label=f"budget {fmt_time(self.budget_s, 3)}")
        a = self.actual
        if a is not None and a.completed:
            cx.plot([T * a.completed], [a.seconds], "D", color="black", ms=6, label="actual")
        cx.set_xlabel("units done")
        cx.set_ylabel("elapsed [s]")
        cx.set_title("the full job", fontsize=9, loc="left")
        cx.legend(fontsize=7, frameon=False, loc="upper left")
        for x in (ax, cx):
            x.tick_params(labelsize=7)


# ---- running the code ---------------------------------------------------------------------------

class _Runner:
    """Runs the code once at a size (or once as a unit), timing it and measuring its peak memory."""

    def __init__(self, fn_or_code: Any, var: str | None, namespace: Mapping[str, Any] | None, device: str,
                 filename: str) -> None:
        from ..core.cells import compile_cell

        self.var = var
        self.device = device
        self.sync: Any = None
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
            name, _why = detect(value, self.device)
            self.sync = make(name, self.device if self.device.startswith("cuda") else "cuda") if name != "none" else Sync()
        self.sync.after(value)
        self.sync.finish()

    def once(self, n: int | None, *, memory: bool = True, trace: bool = False, clean: bool = True,
             ) -> tuple[float, int | None, int | None, int | None]:
        """One run: (seconds, RSS peak increase, traced peak, CUDA peak); the cell's exceptions propagate."""
        from ..core.memory import _reset_hwm, _status_kib, current_rss, malloc_trim

        if clean:  # freed heap back to the system: this run's RSS peak is its own (~1 ms; gc.collect is not
            malloc_trim()  # worth its tens of ms on a big heap: reference counting has freed the last run)
        torch = sys.modules.get("torch") if self.device.startswith("cuda") else None
        cuda_base = None
        if memory and torch is not None:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            cuda_base = int(torch.cuda.memory_allocated())
        rss0 = current_rss() if memory else None
        hwm = memory and _reset_hwm() and rss0 is not None
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
            t0 = time.perf_counter()
            value = self.call(n)
            self._sync_after(value)
            dt = time.perf_counter() - t0
            traced = max(tm.get_traced_memory()[1] - traced0, 0) if tm is not None else None
        finally:
            if tm is not None and started:
                tm.stop()
        rss_peak = None
        if hwm:
            rss_peak = max((_status_kib("VmHWM") or 0) - rss0, 0)
        cuda_peak = None
        if cuda_base is not None:
            cuda_peak = max(int(torch.cuda.max_memory_allocated()) - cuda_base, 0)
        return dt, rss_peak, traced, cuda_peak


# ---- the engine ---------------------------------------------------------------------------------

def estimate(fn_or_code: str | Callable[..., Any], n: float | None = None, *, total: float | None = None,
             var: str = "n", globals: Mapping[str, Any] | None = None, measure: float | None = None,
             max_fraction: float = DEFAULT_MAX_FRACTION, budget: float | None = None,
             sizes: Sequence[int] | None = None, memory: bool = True, device: str = "auto",
             run: bool = False, force: bool = False,
             progress: Callable[[float, str], None] | None = None,
             run_progress: Callable[[float, str], None] | None = None,
             filename: str = "<perfmagic-estimate>") -> EstimateResult:
    """Predict the time and peak memory of a full run from a few small ones.

    * ``estimate(code_or_fn, n=FULL)``: the code uses the variable ``var`` (``fn(n)`` for a callable);
      it is run at doubling sizes within ``measure`` seconds (default 3) and at most ``max_fraction``
      of the predicted full run, a cost model is chosen by AICc and size ``FULL`` is predicted.
    * ``estimate(code_or_fn, total=UNITS)``: the code (``fn()``) is one unit of a job of ``UNITS`` units.

    ``budget`` (seconds) and the memory available now make the gate (``result.verdict``); ``run=True``
    then runs the full job when it does not clearly exceed them (``force=True``: in any case) and keeps
    the actual time and peak in ``result.actual``. ``progress(fraction, message)`` reports the measuring,
    ``run_progress(fraction, message)`` the full run (its ETA is the prediction).

    Ctrl-C while measuring raises :class:`BenchInterrupted` whose ``result`` fits the points done;
    Ctrl-C during the full run returns normally with ``result.actual.status == "interrupted"``; an
    exception of the full run returns with ``status == "failed"`` and the exception in
    ``result.actual.exception`` (the magic records the run as failed, then raises it).
    Exceptions of the code propagate when they happen at the first size; at a larger size they are
    reported in ``result.failures`` and the sizes below are fitted.
    """
    if (n is None) == (total is None):
        raise BadOptionError("n / total", None, "exactly one of n=FULL_SIZE (scaling) or total=UNITS (per-iteration)",
                             "e.g. estimate(code, n=1_000_000) or estimate(step, total=119*2000)")
    full = n if n is not None else total
    name = "n" if n is not None else "total"
    if not isinstance(full, (int, float)) or isinstance(full, bool) or not math.isfinite(full) or full < 1:
        raise BadOptionError(name, full, "a number >= 1", f"e.g. {name}=1_000_000")
    measure_s = DEFAULT_MEASURE_S if measure is None else float(measure)
    if not 0 < measure_s <= MAX_BUDGET_S:
        raise BadOptionError("measure", measure, "a positive number of seconds, at most 24 h", "e.g. measure=3")
    if not 0 < max_fraction <= 1:
        raise BadOptionError("max_fraction", max_fraction, "a fraction in (0, 1]", "e.g. max_fraction=0.1")
    if budget is not None and not (budget > 0 and math.isfinite(budget)):
        raise BadOptionError("budget", budget, "a positive, finite number of seconds", "e.g. budget=600")
    if n is not None and not (isinstance(var, str) and var.isidentifier()):
        raise BadOptionError("var", var, "a Python identifier", "e.g. var='n'")
    from ..timing.bench import resolve_device

    dev, dev_notes = resolve_device(device)
    if dev == "cpu" and device == "auto":
        from ..core.sync import cuda_in_use

        if cuda_in_use():
            dev = "cuda"
    notes = list(dev_notes)
    if n is not None:
        if sizes is not None:
            sizes = sorted({int(s) for s in sizes})
            if not sizes or sizes[0] < 1:
                raise BadOptionError("sizes", sizes, "sizes >= 1", "e.g. sizes=[1000, 2000, 4000]")
            if sizes[-1] > full:
                raise BadOptionError("sizes", sizes[-1], f"sizes no larger than the full size {full:,.0f}",
                                     "give the full size you mean to run, or smaller sizes to measure")
        runner = _Runner(fn_or_code, var, globals, dev, filename)
        if isinstance(fn_or_code, str):
            import ast

            names = {x.id for x in ast.walk(ast.parse(fn_or_code)) if isinstance(x, ast.Name)}
            if var not in names:
                notes.append(f"the code does not mention {var!r}: the size must reach it some other way")
        result = _scaling(runner, int(round(full)), var, fn_or_code, dev, measure_s, max_fraction, sizes, memory,
                          progress, notes)
    else:
        runner = _Runner(fn_or_code, None, globals, dev, filename)
        result = _iteration(runner, float(full), fn_or_code, dev, measure_s, max_fraction, memory, progress, notes)
    result = gate(result, budget)
    if result.status != "ok":
        raise BenchInterrupted(result)
    if run:
        result = run_full(result, runner, force=force, progress=run_progress)
    return result


def _source(fn_or_code: Any) -> str:
    if isinstance(fn_or_code, str):
        return fn_or_code
    return getattr(fn_or_code, "__qualname__", repr(fn_or_code))


def _scaling(runner: _Runner, N: int, var: str, fn_or_code: Any, dev: str, measure_s: float, max_fraction: float,
             sizes: Sequence[int] | None, memory: bool, progress: Any, notes: list[str]) -> EstimateResult:
    t_start = time.perf_counter()
    points: list[Point] = []
    failures: list[tuple[int, str]] = []
    interrupted = False
    first_exc: BaseException | None = None
    trace_ok = memory and not dev.startswith("cuda")
    traced_spent = [0.0]
    budget_now = [measure_s]  # the measuring allowance as known now (the fraction cap lowers it)

    def elapsed() -> float:
        return time.perf_counter() - t_start

    def measure_at(s: int, expected: float) -> Point:
        times, rss, traced = [], [], None
        # the drift guard around points that take a while: this machine's speed can swing by a third
        # within seconds, which bends the curve (see analyse_scaling); 3 ms of reference before and after
        guard = expected >= SPEED_GUARD_MIN_S and not dev.startswith("cuda")
        ref0 = reference_time(0.003) if guard else None
        cpu0, wall0 = time.process_time(), time.perf_counter()
        # malloc_trim before a run costs up to ~1 ms: worth it where the run is long enough to matter
        t, r, _, c = runner.once(s, memory=memory, clean=expected > 5e-4)
        times.append(t)
        if r is not None:
            rss.append(r)
        # cheap sizes: repeat for a median, and trace Python allocations once
        # one run is the answer at the full size itself, and where the time is still in the overhead
        # regime (within 10% of the last size's) and not cheap: a repeat there adds nothing to the curve
        # and would spend the budget that the top sizes need
        flat = bool(points) and t >= 0.005 * measure_s and abs(t / points[-1].time - 1) < 0.10 \
            and s < 16 * points[-1].n
        final = s >= N or flat
        # a median of 3 where cheap, a mean of 2 where affordable: one GC pass must not make the point
        while not final and (len(times) < 3 and t < 0.005 * measure_s or len(times) < 2) and elapsed() + t < budget_now[0]:
            # every run starts as a full run would: with its memory given back (else a repeat reuses the
            # pages the last one faulted in, and is faster and lighter than the real thing)
            t2, r2, _, c2 = runner.once(s, memory=memory, clean=t > 5e-4)
            times.append(t2)
            if r2 is not None:
                rss.append(r2)
            c = max(c or 0, c2 or 0) if (c is not None or c2 is not None) else None
        wall = time.perf_counter() - wall0
        cpu_share = (time.process_time() - cpu0) / wall if wall > 0 else None
        ref = (ref0 + reference_time(0.003)) / 2 if ref0 is not None else None
        # tracing can slow allocation-heavy Python 30-fold: trace only while that stays within 5% of the budget
        if trace_ok and not final and traced_spent[0] + 30 * t < 0.05 * measure_s:
            tt, _, traced, _ = runner.once(s, memory=False, trace=True, clean=False)
            traced_spent[0] += tt
        return Point(s, tuple(times), tuple(rss), traced, c, ref_s=ref, cpu_share=cpu_share)

    plan = list(sizes) if sizes is not None else None
    s = plan[0] if plan else max(1, N // 2**16)
    retried = False
    est = 0.0
    try:
        while True:
            try:
                p = measure_at(s, est)
            except KeyboardInterrupt:
                raise
            except Exception as exc:
                if not points:
                    first_exc = exc
                    break
                failures.append((s, f"{type(exc).__name__}: {exc}"))
                break
            if not points and plan is None and p.time > measure_s / 3 and s > 1 and not retried:
                s, retried = max(1, s // 64), True  # the first size is already expensive: start lower
                est = p.time / 64
                continue
            points.append(p)
            if progress is not None:
                progress(min(elapsed() / measure_s, 1.0), f"{var}={s:,}: {fmt_time(p.time, 3)}")
            if plan is not None:
                if len(points) >= len(plan):
                    break
                s = plan[len(points)]
                est = p.time * s / p.n
                continue
            if s >= N:
                break
            slopes = local_slopes([q.n for q in points], [q.time for q in points])
            # while the time is flat (a per-run overhead dominates) grow fast to get out of that regime
            growth = GROWTH if not slopes or slopes[-1] > 0.25 else (4.0 if slopes[-1] > 0.1 else 8.0)
            nxt = int(min(N, max(s + 1, round(s * growth))))
            if nxt > N / 1.5:
                nxt = N  # close enough: measure the full size itself
            # guesses of the next run and of the full run, from the cost above the per-run overhead:
            # the raw slope is held down by the overhead, so a guess from it comes out far too low
            # (n² behind 50 ms reads as n^1.4) and with it the 10% cap and the largest size measured
            a0 = 0.98 * min(q.time for q in points)
            # the sizes at the top whose time is clearly (20%) above the overhead, none skipped between
            above: list[tuple[int, float]] = []
            for q in reversed(points):
                if q.time - a0 <= 0.2 * q.time:
                    break
                above.insert(0, (q.n, q.time - a0))
            if len(above) >= 2:  # the slope of the cost above the overhead
                base, ex = a0, math.log(above[-1][1] / above[-2][1]) / math.log(above[-1][0] / above[-2][0])
                ex = min(max(ex, 1.0), 3.5)
            elif above:  # only this size is clear of the overhead: the growth beyond it is unknown (guess n²)
                base, ex = a0, 2.0
            else:
                base, ex = 0.0, min(max(slopes[-1] if slopes else 1.0, 1.0), 3.5)

            def guess(m: float, base: float = base, ex: float = ex, t: float = p.time, s: int = s) -> float:
                return base + (t - base) * (m / s) ** ex
            t_next = guess(nxt)
            full_guess = guess(N)
            cap = min(measure_s, max(max_fraction * full_guess, MIN_MEASURE_S))
            if max(slopes, default=0.0) < 0.5 or len(above) < 2:
                cap = measure_s  # still flat: the full run's cost is unknown, so the fraction cap cannot apply yet
            budget_now[0] = cap
            if elapsed() + 1.3 * t_next > cap:  # 1.3: the guess of the next run's time is rough
                # the next doubling does not fit: a smaller step still adds a point where the curve is
                # most informative, at the top (two points past the overhead regime let a free
                # exponent fit their noise; a third settles the form)
                for g in (1.41, 1.19):
                    smaller = int(min(N, round(s * g)))
                    if smaller >= nxt or smaller <= s:
                        continue
                    t_small = guess(smaller)
                    if elapsed() + 1.3 * t_small <= 0.8 * cap:  # the cap is itself a guess: keep a margin
                        nxt, t_next = smaller, t_small
                        break
                else:
                    break
            s, est = nxt, t_next
    except KeyboardInterrupt:
        interrupted = True
    if first_exc is not None:
        raise first_exc
    spent = elapsed()
    res = analyse_scaling(points, N=N, var=var, code=_source(fn_or_code), device=dev, spent_s=spent,
                          measure_s=measure_s, max_fraction=max_fraction, failures=failures, notes=notes,
                          memory_source="cuda" if dev.startswith("cuda") else "rss")
    return replace(res, status="interrupted" if interrupted else "ok")


def speed_factors(points: Sequence[Point], device: str = "cpu") -> tuple[float, ...]:
    """Per point, the factor that brings its times to the machine's typical speed (1.0: no change).

    The typical speed is the median of the points' reference times (the drift guard's fixed workload,
    timed around each point). A point's factor is ``1 + share·(typical/ref − 1)``: only the CPU part of
    its time (``cpu_share``, at most 1) slows down with the machine, not a sleep or a wait. Points too
    short to carry a reference are left as they are.

    Empty (no correction) on CUDA, where fewer than two points carry a reference, where the work is
    mostly waiting (median CPU share under 0.3), and where every factor is within ``SPEED_TOLERANCE``
    of 1 (closer than that, the correction would add the reference's own noise).
    """
    if device.startswith("cuda"):
        return ()
    guarded = [p for p in points if p.guarded]
    if len(guarded) < 2:
        return ()

    def share(p: Point) -> float:
        return min(max(p.cpu_share or 0.0, 0.0), 1.0)
    if _stats.median([share(p) for p in guarded]) < 0.3:
        return ()
    typ = _stats.median([p.ref_s for p in guarded])
    out = tuple(1 + share(p) * (typ / p.ref_s - 1) if p.guarded else 1.0 for p in points)
    if all(abs(f - 1) <= SPEED_TOLERANCE for f in out):
        return ()
    return out


def top_slopes(ns: Sequence[float], ys: Sequence[float], model: Any) -> tuple[float, float, int] | None:
    """(slope of the points, slope of the model, smallest size) over the top of the curve, or None.

    The top is the largest sizes, at least 3 of them, spanning at least ``TOP_SPAN`` in size; the
    points' slope is a least-squares slope in log-log space (one noisy run moves it less than the
    slope between two points).
    """
    if len(ns) < 3 or any(v <= 0 for v in ys):
        return None
    k = 3
    while k <= len(ns) and ns[-1] / ns[-k] < TOP_SPAN:
        k += 1
    if k > len(ns):
        return None
    lx = [math.log(x) for x in ns[-k:]]
    ly = [math.log(y) for y in ys[-k:]]
    mx, my = sum(lx) / k, sum(ly) / k
    got = sum((x - mx) * (y - my) for x, y in zip(lx, ly)) / sum((x - mx) ** 2 for x in lx)
    lo, hi = float(model.predict(ns[-k])), float(model.predict(ns[-1]))
    if not (lo > 0 and hi > 0):
        return None
    said = math.log(hi / lo) / math.log(ns[-1] / ns[-k])
    return got, said, int(ns[-k])


def _largest_jump(pts: Sequence[Point], above: float) -> tuple[int, int, float] | None:
    """The step between consecutive sizes with the steepest local slope, when it is steeper than ``above``
    and than 2.5 (n0, n1, time ratio)."""
    best = None
    for p, q in zip(pts, pts[1:]):
        if p.time > 0 and q.n > p.n:
            excess = math.log(q.time / p.time) / math.log(q.n / p.n)
            if best is None or excess > best[0]:
                best = (excess, p.n, q.n, q.time / p.time)
    if best is None or best[0] < max(2.5, above):
        return None
    return best[1], best[2], best[3]


def analyse_scaling(points: Sequence[Point], *, N: int, var: str = "n", code: str = "", device: str = "cpu",
                    spent_s: float = 0.0, measure_s: float = DEFAULT_MEASURE_S,
                    max_fraction: float = DEFAULT_MAX_FRACTION, failures: Sequence[tuple[int, str]] = (),
                    notes: Sequence[str] = (), memory_source: str = "rss",
                    correct_speed: bool = False) -> EstimateResult:
    """Fit the measured points and predict size ``N`` (public so that saved points can be re-analysed).

    ``correct_speed=True`` scales each time to the machine's typical speed while measuring (see
    :func:`speed_factors`) before the fit. It is off by default: on the VM this was built on, a 3 ms
    reference before and after a run tracked the speed during the run too loosely, and the corrected
    fits were no better than the raw ones (docs/benchmarks.md). Without it, a speed change beyond 15%
    is reported as a warning.
    """
    pts = sorted(points, key=lambda p: p.n)
    warnings: list[str] = []
    base = dict(mode="scaling", var=var, full=float(N), code=code, device=device, points=tuple(pts), warmup=(),
                failures=tuple(failures), spent_s=spent_s, measure_budget_s=measure_s, max_fraction=max_fraction,
                notes=tuple(notes), memory_source=memory_source)
    factors = speed_factors(pts, device)
    if factors:
        typ = _stats.median([p.ref_s for p in pts if p.guarded])
        rel = [(p.ref_s / typ - 1, p.n) for p in pts if p.guarded]

        def how(x: float) -> str:
            return f"{x * 100:.0f}% slower" if x >= 0 else f"{-x * 100:.0f}% faster"
        lo, hi = min(rel), max(rel)
        where = f"{how(hi[0])} at {var}={hi[1]:,}" + (f" and {how(lo[0])} at {var}={lo[1]:,}" if lo[1] != hi[1] else "")
        if correct_speed:
            base["speed_factors"] = factors
            notes = (*notes, f"times corrected for the machine's own speed (the drift guard's fixed workload, timed "
                             f"around each size): it ran {where} than its typical speed while measuring")
            base["notes"] = tuple(notes)
        else:
            if max(abs(x) for x, _ in rel) > SPEED_WARN:
                warnings.append(f"the machine's own speed changed while measuring (the drift guard's fixed workload, "
                                f"timed around each size, ran {where} than typical): the times are as measured, "
                                "so the prediction carries that noise; measure again to see how much it moves")
            factors = ()
    raw_pts = pts
    pts = [replace(p, times=tuple(t * f for t in p.times)) for p, f in zip(pts, factors)] if factors else pts
    all_t = [p.time for p in pts]
    if len(pts) >= 3 and pts[-1].n >= 16 * pts[0].n and max(all_t) < 1.25 * min(all_t):
        c = local_slopes([float(p.n) for p in pts], all_t)
        if not c or abs(math.log(all_t[-1] / all_t[0]) / math.log(pts[-1].n / pts[0].n)) < 0.05:
            warnings.append(f"the time does not change with {var} ({fmt_time(min(all_t))} – {fmt_time(max(all_t))} "
                            f"over sizes {pts[0].n:,} – {pts[-1].n:,}): does the cell use {var}?")
    if pts and pts[-1].n >= N:  # the full size itself was measured
        p = raw_pts[-1]
        mem = p.memory()
        return EstimateResult(predicted_s=p.time, low_s=min(p.times), high_s=max(p.times), peak_bytes=mem,
                              peak_low=mem, peak_high=mem, reliable=True, measured_full=True,
                              fit_sizes=(p.n,), warnings=tuple(warnings), **base)  # type: ignore[arg-type]
    if len(pts) < 3:
        return EstimateResult(predicted_s=None, low_s=None, high_s=None, peak_bytes=None, peak_low=None,
                              peak_high=None, reliable=False,
                              verdict_reasons=(f"only {len(pts)} size{'s' if len(pts) != 1 else ''} measured; "
                                               "at least 3 are needed",), **base)  # type: ignore[arg-type]
    top = pts[-1].n
    use = [p for p in pts if p.n * FIT_SPAN >= top]
    if len(use) < 5:
        use = pts[-max(5, len(use)):]
    ns = [float(p.n) for p in use]
    ts = [p.time for p in use]
    sel = select(ns, ts, float(N))
    pred, lo, hi = sel.predicted, sel.low, sel.high
    reliable = (all(math.isfinite(x) for x in (pred, lo, hi)) and pred > 0 and lo > 0
                and hi / lo <= UNRELIABLE_SPREAD and hi <= PLAUSIBLE_MAX_S)
    if N / top > 1e4:
        reliable = False
        warnings.append(f"the full size is {N / top:,.0f}× the largest measured: no model can be trusted that far; "
                        "give a longer measuring budget")
    # does the model follow the top of the curve? A jump below it (the garbage collector starting full
    # collections, data leaving a cache) can make the fit across all sizes steeper or flatter than the
    # sizes nearest the full one: the extrapolation then follows the jump, not the trend
    off = top_slopes(ns, ts, sel.best)
    if off is not None and abs(off[0] - off[1]) <= TOP_SLOPE_MISMATCH:
        off = None
    # ... and at the last step: a jump inside the top sizes (×10, then ×2 for 2× the size) averages to the
    # model's slope over them, but the step past the jump grows far more slowly than the model
    steps = local_slopes(ns[-3:], ts[-3:])
    if off is None and len(steps) == 2:
        said_last = local_slopes(ns[-2:], [float(sel.best.predict(x)) for x in ns[-2:]])
        if said_last and said_last[0] - steps[1] > LAST_STEP_MISMATCH and steps[0] > said_last[0]:
            off = (steps[1], said_last[0], int(ns[-2]))
    why = ""
    if off is not None:
        reliable = False
        got, said, lo_n = off
        why = (f"the cost changed its growth: the {sum(1 for p in use if p.n >= lo_n)} largest sizes ({lo_n:,} … "
               f"{top:,}) grow as {var}^{got:.2f}, but the model fitted across all sizes says {var}^{said:.2f}")
        jump = _largest_jump(pts, max(got, said) + 1.0)
        if jump is not None:
            why += (f"; the time jumped {jump[2]:.1f}× between {var}={jump[0]:,} and {jump[1]:,} "
                    f"({jump[1] / jump[0]:.1f}× the size): a garbage collector, cache or memory regime change")
        why += ". Measure further past the change (a longer --measure, or --sizes above it)"
    # local slope still rising at the largest size?
    allns, allts = [p.n for p in pts], all_t
    if len(pts) >= 5:
        s_last = math.log(allts[-1] / allts[-3]) / math.log(allns[-1] / allns[-3]) if allts[-3] > 0 else None
        s_prev = math.log(allts[-3] / allts[-5]) / math.log(allns[-3] / allns[-5]) if allts[-5] > 0 else None
        if s_last is not None and s_prev is not None and s_last - s_prev > 0.15 and s_last > sel.best.exponent() + 0.1:
            warnings.append(f"the local slope is still rising at the largest size ({s_prev:.2f} → {s_last:.2f}, the "
                            f"model says {sel.best.exponent():.2f}): the cost may grow faster beyond the sizes "
                            "measured, so take the prediction as a lower bound or measure larger sizes")
    # memory
    mem_sel = None
    peak = plo = phi = None
    mem_pts = [(float(p.n), float(p.memory())) for p in pts if p.memory() is not None]
    above = [(x, v) for x, v in mem_pts if v >= 2 * MEM_FLOOR]  # below a few MiB, RSS is allocator noise
    if len(above) >= 3:
        mem_pts = above
    else:
        mem_pts = [(x, v) for x, v in mem_pts if x * FIT_SPAN >= top] or mem_pts
    if len(mem_pts) >= 3:
        mem_sel = select([x for x, _ in mem_pts], [max(v, 0.0) for _, v in mem_pts], float(N), floor=MEM_FLOOR,
                         forms=("constant", "linear", "quadratic"))  # memory: no n log n in practice
        # the same check at the top of the curve: RSS under-reads small runs (the heap reuses pages it
        # already has), so the peak per element grows towards its true value and a quadratic can fit
        # what is linear; of the forms, the best one that follows the largest sizes is kept
        xs, vs = [x for x, _ in mem_pts], [max(v, 0.0) for _, v in mem_pts]

        def follows(f: Any) -> bool:  # the same slope at the top, and no steeper growth beyond it than there
            c = top_slopes(xs, vs, f)
            return c is not None and abs(c[0] - c[1]) <= TOP_SLOPE_MISMATCH and f.exponent() <= c[0] + TOP_SLOPE_MISMATCH
        mcheck = top_slopes(xs, vs, mem_sel.best)
        if mcheck is not None and not follows(mem_sel.best):
            follow = [f for f in sorted(mem_sel.fits, key=lambda f: f.aicc) if follows(f)]
            if follow:  # fitted on the top sizes alone: the ones below read low
                first = mem_sel.best.describe()
                tx = [(x, v) for x, v in zip(xs, vs) if x >= mcheck[2]]
                mem_sel = select([x for x, _ in tx], [v for _, v in tx], float(N), floor=MEM_FLOOR,
                                 forms=(follow[0].name,))
                warnings.append(f"memory: the largest sizes grow as {var}^{mcheck[0]:.2f}, which the best fit across "
                                f"all sizes ({first}) does not follow: predicted with {mem_sel.best.describe()} "
                                "fitted on those sizes")
            else:
                mem_sel = None
                warnings.append(f"memory: no model follows the largest sizes ({var}^{mcheck[0]:.2f}): no peak predicted")
        if mem_sel is not None:
            peak, plo, phi = mem_sel.predicted, mem_sel.low, mem_sel.high
    return EstimateResult(predicted_s=pred, low_s=lo, high_s=hi, peak_bytes=peak, peak_low=plo, peak_high=phi,
                          reliable=reliable, time_fit=sel, mem_fit=mem_sel, fit_sizes=tuple(int(x) for x in ns),
                          warnings=tuple(warnings), unreliable_why=why, **base)  # type: ignore[arg-type]


def _iteration(runner: _Runner, T: float, fn_or_code: Any, dev: str, measure_s: float, max_fraction: float,
               memory: bool, progress: Any, notes: list[str]) -> EstimateResult:
    from ..core.memory import current_rss, malloc_trim

    if memory:  # pages an earlier cell freed and the heap kept would absorb the units' growth unseen
        malloc_trim()
    t_start = time.perf_counter()
    warm: list[float] = []
    blocks: list[tuple[int, float, int | None, int | None]] = []  # (units, seconds, rss peak, rss after)
    cold = None
    interrupted = False
    try:
        # cold unit, then warm-up until two consecutive units agree within 10% (at most 10 or 25% of the budget)
        t, _, _, _ = runner.once(None, memory=False, clean=False)
        cold = t
        while len(warm) < 10 and time.perf_counter() - t_start < 0.25 * measure_s:
            t, _, _, _ = runner.once(None, memory=False, clean=False)
            warm.append(t)
            if len(warm) >= 2 and abs(warm[-1] - warm[-2]) <= 0.1 * max(warm[-1], warm[-2]):
                break
        unit = _stats.median(warm) if warm else cold
        per_block = max(1, math.ceil(2e-4 / max(unit, 1e-9)))
        done_units = 1 + len(warm)
        while True:
            el = time.perf_counter() - t_start
            m = len(blocks)
            if m >= 5:
                per = [b[1] / b[0] for b in blocks]
                mean = sum(per) / m
                if el >= measure_s or el >= max_fraction * mean * T:
                    break
                if m >= 30:
                    sd = _stats_sd(per)
                    if 1.645 * sd / math.sqrt(m) <= 0.01 * mean:
                        break
            if done_units + per_block > T and m >= 1:
                break
            if memory:
                from ..core.memory import _reset_hwm, _status_kib

                r0 = current_rss()
                hw = _reset_hwm() and r0 is not None
                t0 = time.perf_counter()
                for _ in range(per_block):
                    v = runner.call(None)
                runner._sync_after(v)
                dt = time.perf_counter() - t0
                peak = max((_status_kib("VmHWM") or 0) - r0, 0) if hw else None
                blocks.append((per_block, dt, peak, current_rss()))
            else:
                t0 = time.perf_counter()
                for _ in range(per_block):
                    v = runner.call(None)
                runner._sync_after(v)
                blocks.append((per_block, time.perf_counter() - t0, None, None))
            done_units += per_block
            if progress is not None:
                progress(min((time.perf_counter() - t_start) / measure_s, 1.0), f"{len(blocks)} blocks")
    except KeyboardInterrupt:
        interrupted = True
    spent = time.perf_counter() - t_start
    if cold is None:
        raise BenchInterrupted(None)
    pts = tuple(Point(b[0], (b[1],), (b[2],) if b[2] is not None else (), None, None,
                      (b[3],) if b[3] is not None else ()) for b in blocks)
    res = analyse_iteration(pts, T=T, cold_s=cold, warmup=tuple(warm), code=_source(fn_or_code), device=dev,
                            spent_s=spent, measure_s=measure_s, max_fraction=max_fraction, notes=notes)
    return replace(res, status="interrupted" if interrupted else "ok")


def _stats_sd(xs: Sequence[float]) -> float:
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / max(len(xs) - 1, 1))


def analyse_iteration(points: Sequence[Point], *, T: float, cold_s: float | None = None,
                      warmup: Sequence[float] = (), code: str = "", device: str = "cpu", spent_s: float = 0.0,
                      measure_s: float = DEFAULT_MEASURE_S, max_fraction: float = DEFAULT_MAX_FRACTION,
                      notes: Sequence[str] = ()) -> EstimateResult:
    """Predict a job of ``T`` units from timed blocks of units."""
    base = dict(mode="iteration", var=None, full=float(T), code=code, device=device, points=tuple(points),
                warmup=tuple(warmup), failures=(), spent_s=spent_s, measure_budget_s=measure_s,
                max_fraction=max_fraction, notes=tuple(notes), cold_s=cold_s)
    per = [t / p.n for p in points for t in p.times]
    if not per:
        if cold_s is None:
            return EstimateResult(predicted_s=None, low_s=None, high_s=None, peak_bytes=None, peak_low=None,
                                  peak_high=None, reliable=False, verdict_reasons=("no unit was measured",),
                                  **base)  # type: ignore[arg-type]
        per = [cold_s]
    m = len(per)
    mean = sum(per) / m
    sd = _stats_sd(per) if m > 1 else mean
    half = 1.645 * sd / math.sqrt(m)
    extra = max((cold_s or 0.0) - mean, 0.0)  # the job's own first unit is cold too
    pred = extra + T * mean
    # a floor of 3% on the interval: the machine's own drift over a long job
    lo = extra + T * max(mean - half, 0.0)
    hi = extra + T * (mean + half)
    lo, hi = min(lo, pred * 0.97), max(hi, pred * 1.03)
    warnings: list[str] = []
    if m >= 8:  # is the unit time trending (a growing cost per unit)?
        import numpy as np

        x = np.arange(m, dtype=float)
        slope, icpt = np.polyfit(x, np.asarray(per), 1)
        r = float(np.corrcoef(x, per)[0, 1]) if sd > 0 else 0.0
        if r > 0.7 and slope * m > 0.2 * mean:
            warnings.append(f"the time per unit grows as the job goes on ({fmt_time(per[0])} → {fmt_time(per[-1])} over "
                            f"{m} blocks): the total assumes the mean; the real job may take longer")
    # memory: the peak of one unit, plus any steady growth from unit to unit
    peaks = [p.rss_peaks[0] for p in points if p.rss_peaks]
    after = [(i, p.rss_after[0]) for i, p in enumerate(points) if p.rss_after]
    peak = plo = phi = growth = None
    if peaks:
        unit_peak = float(_stats.median(peaks))
        peak = plo = phi = unit_peak
        if len(after) >= 5:
            import numpy as np

            units_done = np.cumsum([p.n for p in points])[[i for i, _ in after]].astype(float)
            rss = np.asarray([v for _, v in after], float)
            g, _ = np.polyfit(units_done, rss, 1)
            rr = float(np.corrcoef(units_done, rss)[0, 1]) if np.std(rss) > 0 else 0.0
            if g > 0 and rr > 0.9 and g * units_done[-1] > MEM_FLOOR:
                growth = float(g)
                peak = unit_peak + growth * T
                plo, phi = unit_peak + 0.8 * growth * T, unit_peak + 1.2 * growth * T
                warnings.append(f"memory grows {fmt_bytes(growth)} per unit (r={rr:.2f}): over {T:,.0f} units that "
                                f"is +{fmt_bytes(growth * T)}")
    return EstimateResult(predicted_s=pred, low_s=lo, high_s=hi, peak_bytes=peak, peak_low=plo, peak_high=phi,
                          reliable=True, mem_growth_per_unit=growth, warnings=tuple(warnings),
                          **base)  # type: ignore[arg-type]


# ---- the gate -----------------------------------------------------------------------------------

def gate(r: EstimateResult, budget: float | None, available: int | None = ...) -> EstimateResult:  # type: ignore[assignment]
    """Compare the prediction with a time budget and the memory available now."""
    if available is ...:
        available, kind = available_memory(r.device)
    else:
        kind = r.available_kind
    reasons: list[str] = []
    if r.predicted_s is None or not r.reliable:
        verdict = "unknown"
        reasons.append("no reliable prediction" if r.predicted_s is not None else
                       (r.verdict_reasons[0] if r.verdict_reasons else "no prediction"))
        return replace(r, budget_s=budget, available_bytes=available, available_kind=kind, verdict=verdict,
                       verdict_reasons=tuple(reasons))
    sure_no = maybe = False
    if budget is not None:
        if r.low_s is not None and r.low_s > budget:
            sure_no = True
            reasons.append(f"time: even the low end {fmt_time(r.low_s, 3)} exceeds the budget")
        elif r.high_s is not None and r.high_s > budget:
            maybe = True
            reasons.append(f"time: the interval reaches {fmt_time(r.high_s, 3)}, over the budget")
    if available is not None and r.peak_bytes is not None:
        cap = MEM_HEADROOM * available
        if (r.peak_low or r.peak_bytes) > available:
            sure_no = True
            reasons.append(f"memory: +{fmt_bytes(r.peak_low or r.peak_bytes)} needed, {fmt_bytes(available)} available")
        elif (r.peak_high or r.peak_bytes) > cap:
            maybe = True
            reasons.append(f"memory: up to +{fmt_bytes(r.peak_high or r.peak_bytes)}, over 90% of "
                           f"{fmt_bytes(available)} available")
    if r.failures:
        sure_no = True
        n_f, err = r.failures[0]
        reasons.append(f"the code failed at {r.var}={n_f:,} ({err.split(':')[0]})")
    if budget is None and not reasons:
        verdict = "fits in memory" if available is not None and r.peak_bytes is not None else "no budget given"
    else:
        verdict = "will not fit" if sure_no else ("borderline" if maybe else "will fit")
    # the largest size (units) that fits
    largest = lt = lm = None
    if r.mode == "iteration":
        ut = r.unit_times or ([r.cold_s] if r.cold_s else [])
        if budget is not None and ut:
            lt = max(math.floor((budget - max((r.cold_s or 0) - sum(ut) / len(ut), 0)) / (sum(ut) / len(ut))), 0)
        if r.mem_growth_per_unit and available is not None and r.points:
            unit_peak = float(r.points[0].memory() or 0)
            lm = max(math.floor((MEM_HEADROOM * available - unit_peak) / r.mem_growth_per_unit), 0)
    else:
        hi_n = max(float(r.full) * 1e3, 1.0)
        if budget is not None and r.time_fit is not None:
            lt = invert(r.time_fit.best, budget, 1.0, hi_n)
            lt = 0.0 if lt is None else lt
        if available is not None and r.mem_fit is not None and r.mem_fit.best.b > 0:
            lm = invert(r.mem_fit.best, MEM_HEADROOM * available, 1.0, hi_n)
            lm = 0.0 if lm is None else lm
        if r.failures:
            lm = min(lm, r.failures[0][0] - 1) if lm is not None else r.failures[0][0] - 1
    cands = [x for x in (lt, lm) if x is not None]
    if cands:
        largest = float(min(cands))
    return replace(r, budget_s=budget, available_bytes=available, available_kind=kind, verdict=verdict,
                   verdict_reasons=tuple(reasons), largest_fit=largest, largest_fit_time=lt, largest_fit_memory=lm)


# ---- the full run ---------------------------------------------------------------------------------

def run_full(r: EstimateResult, runner: _Runner, *, force: bool = False,
             progress: Callable[[float, str], None] | None = None) -> EstimateResult:
    """Run the full job (when the gate allows it) and attach what it actually took."""
    if r.verdict in ("will not fit", "unknown") and not force:
        return replace(r, notes=r.notes + (f"the full run was not started: the gate says {r.verdict!r} "
                                           "(force it with --force)",))
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
    from ..core.memory import _reset_hwm, _status_kib, current_rss, malloc_trim

    T = int(r.full)
    malloc_trim()  # as the measuring did: the job's own growth must show in RSS
    rss0 = current_rss()
    hw = _reset_hwm() and rss0 is not None
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
    peak = max((_status_kib("VmHWM") or 0) - rss0, 0) if hw else None
    if progress is not None:
        progress(1.0, f"done in {fmt_time(el, 3)}")
    return r.with_actual(Actual(el, peak, 1.0, "ok"))


__all__ = ["estimate", "EstimateResult", "Point", "Actual", "analyse_scaling", "analyse_iteration", "gate",
           "PerfmagicError"]
