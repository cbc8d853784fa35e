"""The gate: the prediction against the time the full run may take and the memory available now.

:func:`gate` gives a *will fit / will not fit / borderline* verdict with its reasons, and the largest
size (or number of units) that fits, by inverting the time model at the limit and the memory model
at 90% of the memory available.
"""

from __future__ import annotations

import math
import sys
from dataclasses import replace

from ..render.units import fmt_bytes, fmt_time
from .costmodel import invert
from .result import EstimateResult

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



def gate(r: EstimateResult, limit: float | None, available: int | None = ...) -> EstimateResult:  # type: ignore[assignment]
    """Compare the prediction with the time the full run may take (``limit``, seconds; None: no limit)
    and the memory available now (``available`` bytes; by default what :func:`available_memory` reads)."""
    if available is ...:
        available, kind = available_memory(r.device)
    else:
        kind = r.available_kind
    reasons: list[str] = []
    # too uncertain to print, but an interval all the same: when even its low end is over the limit,
    # the run will not fit whatever the truth inside it
    wide_only = r.predicted_s is not None and (not r.unreliable_why or r.unreliable_why.startswith("runs of the same"))
    over_anyway = (not r.reliable and wide_only and limit is not None and r.low_s is not None and r.low_s > limit
                   and r.mode == "scaling")
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
            reasons.append(f"time: even the low end {fmt_time(r.low_s, 3)} exceeds the limit")
        elif r.high_s is not None and r.high_s > limit:
            maybe = True
            reasons.append(f"time: the interval reaches {fmt_time(r.high_s, 3)}, over the limit")
    if available is not None and r.peak_bytes is not None:
        cap = MEM_HEADROOM * available
        if (r.peak_low or r.peak_bytes) > available:
            sure_no = True
            reasons.append(f"memory: +{fmt_bytes(r.peak_low or r.peak_bytes)} needed, {fmt_bytes(available)} available"
                           + (f" ({kind})" if kind and kind.startswith("memory the container") else ""))
        elif (r.peak_high or r.peak_bytes) > cap:
            maybe = True
            reasons.append(f"memory: up to +{fmt_bytes(r.peak_high or r.peak_bytes)}, over 90% of "
                           f"{fmt_bytes(available)} available"
                           + (f" ({kind})" if kind and kind.startswith("memory the container") else ""))
    if r.failures:
        sure_no = True
        n_f, err = r.failures[0]
        reasons.append(f"the code failed at {r.var}={n_f:,} ({err.split(':')[0]})")
    if limit is None and not reasons:
        verdict = "fits in memory" if available is not None and r.peak_bytes is not None else "no limit given"
    else:
        verdict = "will not fit" if sure_no else ("borderline" if maybe else "will fit")
    # the largest size (units) that fits
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
            ran = [p.n for p in r.points if p.n < r.failures[0][0]]
            ok = float(max(ran)) if ran else 0.0
            lm = min(lm, ok) if lm is not None else ok
    cands = [x for x in (lt, lm) if x is not None]
    if cands:
        largest = float(min(cands))
    return replace(r, limit_s=limit, available_bytes=available, available_kind=kind, verdict=verdict,
                   verdict_reasons=tuple(reasons), largest_fit=largest, largest_fit_time=lt, largest_fit_memory=lm)



__all__ = ["MEM_HEADROOM", "available_memory", "gate"]
