"""What an estimate found: the measured points, the prediction, the gate's verdict, the actual full run.

Frozen data that keeps every measured run; the text, the figure and the HTML sections are drawn by
:mod:`perfmagic.render.estimate` (the methods here delegate to it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from ..core import stats as _stats
from ..core.memory import FreshTouch
from ..findings import Finding
from ..result import Displayed
from .costmodel import Selection

MEM_FLOOR = 2**20  # RSS increments below 1 MiB are allocator noise: relative errors are taken against this


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
    later: tuple[float, ...] = ()  # re-timed after the sweep, spaced in time from ``times`` (run-to-run variation)
    huge_bytes: int | None = None  # fresh memory a run touched in transparent huge pages (the most of its runs)
    small_bytes: int | None = None  # ... and in 4 KiB pages
    alloc_bytes: int | None = None  # ... and all pages the kernel handed out meanwhile (its own, the page cache)

    @property
    def time(self) -> float:
        return _stats.median(list(self.times) + list(self.later))

    @property
    def guarded(self) -> bool:
        """Timed between two runs of the drift guard, with its CPU share known."""
        return bool(self.ref_s) and self.cpu_share is not None

    def memory(self) -> int | None:
        if self.cuda_peak is not None:
            return self.cuda_peak
        # the most any run of this size needed: a run that found the heap already grown by the run before it
        # reads low (a loop of training steps: 0, then 8 MiB; its median, 4 MiB, made a constant peak look
        # like one growing with the size, and a fit put 2000 steps at 3.3 GiB)
        vals = [v for v in (max(self.rss_peaks) if self.rss_peaks else None, self.traced_peak) if v is not None]
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

    def to_dict(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "peak_bytes": self.peak_bytes, "completed": self.completed,
                "status": self.status, "error": self.error}


def suggest_sizes(ns: Sequence[float], ts: Sequence[float], N: float, var: str) -> dict[str, Any]:
    """Where to measure to tell (a finding's 'measure up to n=… (≈ x s)'): four times the largest size,
    timed by the top points' slope."""
    top, t = ns[-1], ts[-1]
    n2 = min(float(N), top * 4)
    k = 1.0
    if len(ns) >= 2 and ts[-2] > 0 and ns[-1] > ns[-2]:
        k = max(1.0, math.log(t / ts[-2]) / math.log(ns[-1] / ns[-2]))
    return {"var": var, "suggest_n": n2, "suggest_s": t * (n2 / top) ** k}


def measured_memory(points: Any) -> list[tuple[int, int]]:
    """``(n, peak)`` of the points whose peak memory is above allocator noise (2 × ``MEM_FLOOR``), in order."""
    out = [(p.n, p.memory()) for p in points]
    return [(n, m) for n, m in out if m is not None and m >= 2 * MEM_FLOOR]


@dataclass(frozen=True, repr=False)
class EstimateResult(Displayed):
    """A prediction of the full run (``mode`` "scaling": size ``full`` of ``var``; "iteration": ``full`` units)."""

    primary_metric: ClassVar[str] = "predicted_s"
    renderer: ClassVar[str] = "estimate"
    mem_floor: ClassVar[int] = MEM_FLOOR  # peaks below this are allocator noise (read by the renderer)

    mode: str  # "scaling" | "iteration"
    var: str | None
    full: float  # the full size n, or the total number of units
    code: str
    device: str
    points: tuple[Point, ...]
    warmup: tuple[float, ...]
    failures: tuple[tuple[int, str], ...]
    spent_s: float
    measure_budget_s: float  # the measuring budget (``budget=``, ``-b``)
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
    limit_s: float | None = None  # the time the full run may take (``limit=``, ``--limit``)
    available_bytes: int | None = None
    available_kind: str = "available RAM"
    verdict: str = "no limit given"
    verdict_reasons: tuple[Finding, ...] = ()  # worded by render/ (str() of one is its sentence)
    largest_fit: float | None = None
    largest_fit_time: float | None = None
    largest_fit_memory: float | None = None
    warnings: tuple[Finding, ...] = ()
    status: str = "ok"
    measured_full: bool = False
    actual: Actual | None = None
    notes: tuple[Finding, ...] = field(default=())
    speed_factors: tuple[float, ...] = ()  # per point, where the times were corrected for the machine's speed
    unreliable_why: Finding | None = None  # why the prediction is not printed, where not the interval's width
    run_noise: float | None = None  # run-to-run variation measured while estimating (relative sd), in the interval
    others_cores: float | None = None  # cores kept busy by other processes while measuring
    fresh_touch: FreshTouch | None = None  # the first-touch probe of fresh memory, where the full run needed one

    # ---- derived --------------------------------------------------------------------------
    @property
    def figure_alt(self) -> str:
        from ..render.estimate import FIGURE_ALT

        return FIGURE_ALT

    @property
    def unit(self) -> str:
        return "units" if self.mode == "iteration" else (self.var or "n")

    @property
    def unit_times(self) -> list[float]:
        """Per-unit times of the per-iteration form (each block's time divided by its units)."""
        return [t / p.n for p in self.points for t in p.times]

    @property
    def unit_median_s(self) -> float | None:
        """The median per-unit time of the per-iteration form (None when no unit was timed)."""
        ut = self.unit_times
        return _stats.median(ut) if ut else None

    @property
    def measured_fraction(self) -> float | None:
        """Measuring cost as a fraction of the predicted full run (None where no prediction is trusted)."""
        if not self.predicted_s or not self.reliable or self.refused is not None:
            return None
        return self.spent_s / self.predicted_s

    @property
    def largest_measured(self) -> int | None:
        return max((p.n for p in self.points), default=None) if self.mode == "scaling" else None

    @property
    def ran_below_failure(self) -> int | None:
        """The largest size that ran below the first size that raised (None: nothing raised, or nothing ran)."""
        if not self.failures:
            return None
        return max((p.n for p in self.points if p.n < self.failures[0][0]), default=None)

    @property
    def refused(self) -> Finding | str | None:
        """Why no prediction is given (the headline says it; ``str()`` of it is the sentence), or None when
        one is."""
        if self.mode == "scaling" and self.failures and self.failures[0][0] <= self.full:
            # the code raised at a size up to the full one: a time for the full run would be a time for a run
            # that may raise too (a fit through the sizes that ran is still in ``time_fit`` for the figure)
            n_f, err = self.failures[0]
            return Finding.of("estimate.failed", var=self.var, n=n_f, error=err, ran=self.ran_below_failure,
                              full=float(self.full))
        if self.predicted_s is None:
            return self.verdict_reasons[0] if self.verdict_reasons else "nothing measured"
        if not self.reliable:
            if self.unreliable_why:
                return self.unreliable_why
            fitted = [p for p in self.points if p.n in set(self.fit_sizes)] or list(self.points)
            tell = (suggest_sizes([float(p.n) for p in fitted], [p.time for p in fitted], self.full, self.var)
                    if self.mode == "scaling" and fitted else {})
            return Finding.of("estimate.unreliable", low_s=self.low_s, high_s=self.high_s, **tell)
        return None

    def time_error(self) -> float | None:
        """(actual − predicted) / predicted, when the full run finished (or, interrupted, was extrapolated);
        None where the estimate refused to predict."""
        a = self.actual
        if a is None or not self.predicted_s or self.refused:
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

    # ---- the result protocol (text, figure, details: perfmagic.render.estimate) --------------
    def all_warnings(self) -> list[str]:
        """Every `!` item of the output: failed sizes, then the warnings (the text shows two)."""
        from ..render.estimate import all_warnings

        return all_warnings(self)

    def metrics(self) -> dict[str, Any]:
        refused = self.refused  # a refused estimate records no predicted time, and why
        shown = not refused or (self.predicted_s is not None and not self.unreliable_why  # the text's interval
                                and getattr(refused, "kind", None) != "estimate.failed")
        m: dict[str, Any] = {
            "mode": self.mode, "full": float(self.full), "predicted_s": None if refused else self.predicted_s,
            "low_s": self.low_s if shown else None, "high_s": self.high_s if shown else None,
            "refused": str(refused) if refused else None, "predicted_peak_bytes": self.peak_bytes, "peak_low_bytes": self.peak_low,
            "peak_high_bytes": self.peak_high, "reliable": self.reliable, "verdict": self.verdict,
            "limit_s": self.limit_s, "available_bytes": self.available_bytes, "largest_fit": self.largest_fit,
            "spent_s": self.spent_s, "measured_fraction": self.measured_fraction, "n_points": len(self.points),
            "run_noise": self.run_noise, "others_cores": self.others_cores,
        }
        if self.time_fit is not None:
            b = self.time_fit.best
            m.update(model=b.describe(), exponent=b.exponent(), exponent_at_full=b.slope_at(float(self.full)),
                     overhead_s=b.a)
        if self.mode == "iteration" and self.points:
            ut = self.unit_times
            m.update(unit_mean_s=sum(ut) / len(ut), unit_median_s=self.unit_median_s, units_per_s=len(ut) / sum(ut))
        a = self.actual
        if a is not None:
            m.update(actual_s=a.seconds, actual_peak_bytes=a.peak_bytes, actual_completed=a.completed,
                     actual_status=a.status, time_error=self.time_error(), memory_error=self.memory_error())
        return m

    def samples(self) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {"warmup_s": list(self.warmup)}
        if self.mode == "iteration":
            out["unit_s"] = self.unit_times
            out["rss_after_bytes"] = [float(x) for p in self.points for x in p.rss_after]
        else:
            out["size"] = [float(p.n) for p in self.points]
            out["time_s"] = [p.time for p in self.points]
            out["all_times_s"] = [t for p in self.points for t in p.times]
            out["later_times_s"] = [t for p in self.points for t in p.later]
            out["runs_per_size"] = [float(len(p.times)) for p in self.points]
            out["memory_bytes"] = [float(p.memory() or 0) for p in self.points]
        return out

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain JSON types: the points with all their runs, the fits, the gate, the actual run."""
        return {
            "mode": self.mode, "var": self.var, "full": float(self.full), "code": self.code, "device": self.device,
            "status": self.status, "points": [{"n": p.n, "times": list(p.times), "rss_peaks": list(p.rss_peaks),
                                               "traced_peak": p.traced_peak, "cuda_peak": p.cuda_peak,
                                               "rss_after": list(p.rss_after), "ref_s": p.ref_s,
                                               "cpu_share": p.cpu_share, "later": list(p.later),
                                               "huge_bytes": p.huge_bytes, "small_bytes": p.small_bytes,
                                               "alloc_bytes": p.alloc_bytes}
                                              for p in self.points],
            "warmup": list(self.warmup), "cold_s": self.cold_s, "failures": [list(f) for f in self.failures],
            "spent_s": self.spent_s, "measure_budget_s": self.measure_budget_s, "max_fraction": self.max_fraction,
            "time_fit": self.time_fit.to_dict() if self.time_fit is not None else None,
            "mem_fit": self.mem_fit.to_dict() if self.mem_fit is not None else None,
            "fit_sizes": list(self.fit_sizes), "memory_source": self.memory_source,
            "mem_growth_per_unit": self.mem_growth_per_unit, "speed_factors": list(self.speed_factors),
            "available_kind": self.available_kind, "verdict_reasons": [str(x) for x in self.verdict_reasons],
            "largest_fit_time": self.largest_fit_time, "largest_fit_memory": self.largest_fit_memory,
            "measured_full": self.measured_full, "warnings": [str(w) for w in self.warnings],
            "notes": [str(n) for n in self.notes], "unreliable_why": str(self.unreliable_why or ""), "run_noise": self.run_noise, "others_cores": self.others_cores,
            "metrics": self.metrics(), "samples": self.samples(),
            "actual": self.actual.to_dict() if self.actual is not None else None,
        }


__all__ = ["Actual", "EstimateResult", "MEM_FLOOR", "Point", "measured_memory"]
