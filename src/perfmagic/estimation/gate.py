"""The gate: the prediction against the time the full run may take and the memory available now.

:func:`gate` gives a *will fit / will not fit / borderline* verdict with its reasons, and the largest
size (or number of units) that fits, by inverting the time model at the limit and the memory model
at 90% of the memory available.
"""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from typing import Any

from ..findings import Finding
from .costmodel import invert
from .result import EstimateResult, measured_memory

MEM_HEADROOM = 0.9  # a run "fits" in memory when its peak stays under 90% of what is available


def available_memory(device: str) -> tuple[int | None, str]:
    """Bytes available now for a new allocation: free GPU memory on CUDA, else available RAM, or what the
    container's memory limit still allows where that is less (a pod on a bigger host)."""
    if device.startswith("cuda"):
        torch = sys.modules.get("torch")
        if torch is not None:
            try:
                free, _total = torch.cuda.mem_get_info(torch.device(device))
                return int(free), "free GPU memory"
            except Exception:
                pass
    from ..core.container import available_memory as host_or_pod

    return host_or_pod()



def memory_floor(r: EstimateResult) -> tuple[float, tuple[int, int], tuple[int, int]] | None:
    """``(bytes, (n0, peak0), (n1, peak1))``: the full run's peak memory as the two largest sizes' growth
    says, where it grew at least in proportion to the size between them (within 20%) and by more than
    allocator noise: that rate continued to the full size, a floor on what the full run needs (memory that
    grows in proportion to the size rarely stops growing). None where the points do not show it (the
    scaling form only)."""
    if r.mode != "scaling":
        return None
    pts = measured_memory(r.points)
    if len(pts) < 2:
        return None
    (n0, m0), (n1, m1) = pts[-2], pts[-1]
    if not (n1 > n0 and m1 > m0 and m1 / m0 >= 0.8 * n1 / n0) or r.full <= n1:
        return None
    return m1 * r.full / n1, (n0, m0), (n1, m1)


def _largest_fit(r: EstimateResult, limit: float | None, available: int | None
                 ) -> tuple[float | None, float | None, float | None]:
    """``(largest, by time, by memory)``: the largest size (number of units) that fits the limit and the
    memory available, by inverting the time model at the limit and the memory model at 90% of it."""
    largest = lt = lm = None
    if r.mode == "iteration":
        ut = r.unit_times or ([r.cold_s] if r.cold_s else [])
        if limit is not None and ut:
            lt = max(math.floor((limit - max((r.cold_s or 0) - sum(ut) / len(ut), 0)) / (sum(ut) / len(ut))), 0)
        if r.mem_growth_per_unit and available is not None and r.points:
            unit_peak = float(r.points[0].memory() or 0)
            lm = max(math.floor((MEM_HEADROOM * available - unit_peak) / r.mem_growth_per_unit), 0)
    else:
        hi_n = max(float(r.full) * 1e3, 1.0)
        if limit is not None and r.time_fit is not None:
            lt = invert(r.time_fit.best, limit, 1.0, hi_n)
            lt = 0.0 if lt is None else lt
        if available is not None and r.mem_fit is not None and r.mem_fit.best.b > 0:
            lm = invert(r.mem_fit.best, MEM_HEADROOM * available, 1.0, hi_n)
            lm = 0.0 if lm is None else lm
        if r.failures:  # it ran at the sizes measured below the failure; between them and the failure, unknown
            ok = float(r.ran_below_failure or 0)
            lm = min(lm, ok) if lm is not None else ok
    cands = [x for x in (lt, lm) if x is not None]
    if cands:
        largest = float(min(cands))
    return largest, lt, lm


def gate(r: EstimateResult, limit: float | None, available: int | None = ...) -> EstimateResult:  # type: ignore[assignment]
    """Compare the prediction with the time the full run may take (``limit``, seconds; None: no limit)
    and the memory available now (``available`` bytes; by default what :func:`available_memory` reads)."""
    if available is ...:
        available, kind = available_memory(r.device)
    else:
        kind = r.available_kind
    reasons: list[Finding | str] = []
    # too uncertain to print, but an interval all the same: when even its low end is over the limit,
    # the run will not fit whatever the truth inside it
    why = r.unreliable_why
    wide_only = r.predicted_s is not None and (not why or getattr(why, "kind", None) == "estimate.noisy"
                                               or str(why).startswith("runs of the same"))  # (an older row's text)
    over_anyway = (not r.reliable and wide_only and limit is not None and r.low_s is not None and r.low_s > limit
                   and r.mode == "scaling")
    floor = memory_floor(r)
    if (r.predicted_s is None or not r.reliable) and floor is not None and available is not None \
            and floor[0] > available:
        # no time to print, but the memory the sizes measured already used rules the full run out
        need, (n0, m0), (n1, m1) = floor
        if r.predicted_s is None:  # why there is no number stays first
            reasons += list(r.verdict_reasons[:1])
        reasons.append(Finding.of("estimate.gate-memory-floor", var=r.var, need=need, n0=n0, m0=m0, n1=n1, m1=m1,
                                  full=r.full, available=available, where=kind))
        return replace(r, limit_s=limit, available_bytes=available, available_kind=kind, verdict="will not fit",
                       verdict_reasons=tuple(reasons), warnings=_without_first_touch(r.warnings))
    if r.predicted_s is None or (not r.reliable and not over_anyway):
        verdict = "unknown"
        reasons.append("no reliable prediction" if r.predicted_s is not None else
                       (r.verdict_reasons[0] if r.verdict_reasons else "no prediction"))
        return replace(r, limit_s=limit, available_bytes=available, available_kind=kind, verdict=verdict,
                       verdict_reasons=tuple(reasons))
    sure_no = maybe = False
    if limit is not None:
        if r.low_s is not None and r.low_s > limit:
            sure_no = True
            reasons.append(Finding.of("estimate.gate-time-over", low_s=r.low_s))
        elif r.high_s is not None and r.high_s > limit:
            maybe = True
            reasons.append(Finding.of("estimate.gate-time-maybe", high_s=r.high_s))
    if available is not None and r.peak_bytes is not None:
        cap = MEM_HEADROOM * available
        if (r.peak_low or r.peak_bytes) > available:
            sure_no = True
            reasons.append(Finding.of("estimate.gate-memory-over", need=r.peak_low or r.peak_bytes, available=available,
                                      where=kind))
        elif (r.peak_high or r.peak_bytes) > cap:
            maybe = True
            reasons.append(Finding.of("estimate.gate-memory-maybe", high=r.peak_high or r.peak_bytes,
                                      available=available, where=kind))
    if r.failures:
        sure_no = True
        n_f, err = r.failures[0]
        reasons.append(Finding.of("estimate.gate-failed", var=r.var, n=n_f, error=err))
    if limit is None and not reasons:
        verdict = "fits in memory" if available is not None and r.peak_bytes is not None else "no limit given"
    else:
        verdict = "will not fit" if sure_no else ("borderline" if maybe else "will fit")
    largest, lt, lm = _largest_fit(r, limit, available)
    no_room = any(getattr(x, "kind", None) == "estimate.gate-memory-over" for x in reasons)
    return replace(r, limit_s=limit, available_bytes=available, available_kind=kind, verdict=verdict,
                   verdict_reasons=tuple(reasons), largest_fit=largest, largest_fit_time=lt, largest_fit_memory=lm,
                   warnings=_without_first_touch(r.warnings) if no_room else r.warnings)


FIRST_TOUCH = ("estimate.fresh-memory", "estimate.cold-memory")


def _without_first_touch(warnings: tuple[Any, ...]) -> tuple[Any, ...]:
    """The warnings less those on what first touching the full run's fresh memory costs, where the gate
    found more memory needed than there is: the cost of paging in memory the machine does not have is no
    claim the output can back (notebook 05 warned that a job needing 931 GiB, with 22 GiB available, would
    pay 35.7 min for its page faults "in the prediction", under "no time estimate")."""
    return tuple(w for w in warnings if getattr(w, "kind", None) not in FIRST_TOUCH)



__all__ = ["MEM_HEADROOM", "available_memory", "gate", "memory_floor"]
