"""Fitting the measured points: the prediction at the full size, and the checks that it can be trusted.

* :func:`analyse_scaling` (sizes measured): a cost model chosen by AICc (:mod:`.costmodel`) on the sizes
  nearest the full one, an interval, and the checks at the top of the curve — does the model follow
  the largest sizes, did the time jump just before them, is the local slope still rising — and the
  same for the peak memory; the machine's own speed while measuring (:func:`speed_factors`).
* :func:`analyse_iteration` (blocks of units timed): the total as ``cold extra + units × mean``, an
  interval on the mean, a trend in the unit time, and memory that grows from unit to unit.

Both are public so that saved points can be re-analysed; neither runs any code.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..core import stats as _stats
from ..render.units import fmt_bytes, fmt_time
from .costmodel import local_slopes, select
from .noise import LOAD_WARN, NOISE_FLOOR, Z90, load_text, load_widening, phases, run_noise, settled_power, slope_range, top_trend, widen
from .result import MEM_FLOOR, EstimateResult, Point

DEFAULT_BUDGET_S = 3.0  # the measuring budget (``budget=``, ``-b``)
DEFAULT_MAX_FRACTION = 0.10
FIT_SPAN = 2.0 ** 6  # the model is fitted on sizes within this factor of the largest (when >= 5 such points)
UNRELIABLE_SPREAD = 10.0  # interval high/low beyond this: the fit cannot be trusted
PLAUSIBLE_MAX_S = 1e8  # ~3 years
SPEED_TOLERANCE = 0.05    # machine speed within ±5% of typical at every point: no correction
SPEED_WARN = 0.15  # without the correction, a speed change beyond ±15% while measuring is a warning
TOP_SPAN = 3.0   # the top of the curve: the largest sizes, at least 3 of them, spanning at least this factor
TOP_SLOPE_MISMATCH = 0.5  # the model's slope there differs from the points' by more: a regime change
LAST_STEP_MISMATCH = 1.0  # the model's slope over the last step exceeds the points' by more, just past a jump
DRIFT_PER_DECADE = 0.10  # relative sd added per tenfold of the full run's length over the largest run measured
NOISY_RUNS = 0.25  # measured run-to-run variation beyond which an unreliable fit says so as its reason
TOP_DISAGREE = 0.15  # the two largest sizes off the fit by more than this (and 2.5× the noise), same side: unreliable


def measured_noise(points: Sequence[Point]) -> float:
    """The run-to-run variation (relative sd, log scale) the points show: spaced repeats against their
    first timing, and consecutive runs of one size, at least ``noise.NOISE_FLOOR``."""
    # runs as long as a tenth of the largest: a burst of a few ms (a preemption) that doubles a 10 ms run
    # is noise of that run, not of a run of seconds
    longest = max((p.time for p in points), default=0.0)
    spaced = [(_stats.median(list(p.times)), t) for p in points for t in p.later if p.times]
    adjacent = [(p.times[0], p.times[1]) for p in points
                if len(p.times) >= 2 and p.time >= max(1e-3, 0.1 * longest)]
    return run_noise(spaced + adjacent)


def _suggest(ns: Sequence[float], ts: Sequence[float], N: float, var: str) -> str:
    """'measure up to n=… (≈ x s) to tell': four times the largest size, timed by the top points' slope."""
    top, t = ns[-1], ts[-1]
    n2 = min(float(N), top * 4)
    k = 1.0
    if len(ns) >= 2 and ts[-2] > 0 and ns[-1] > ns[-2]:
        k = max(1.0, math.log(t / ts[-2]) / math.log(ns[-1] / ns[-2]))
    return f"measure up to {var}={n2:,.0f} (≈ {fmt_time(t * (n2 / top) ** k)}) to tell, e.g. with a longer --budget"


def _top_disagreement(ns: Sequence[float], ts: Sequence[float], model: Any, sigma: float) -> tuple[float, float] | None:
    """The relative misfits of the two largest sizes when both lie on the same side of the model, beyond
    ``TOP_DISAGREE`` and 2.5× the measured noise (the fit follows the sizes below, not the top)."""
    if len(ns) < 4:
        return None
    e = [t / float(model.predict(n)) - 1 for n, t in zip(ns[-2:], ts[-2:]) if float(model.predict(n)) > 0]
    if len(e) < 2 or e[0] * e[1] <= 0:
        return None
    bar = max(TOP_DISAGREE, 2.5 * sigma)
    return (e[0], e[1]) if min(abs(e[0]), abs(e[1])) > bar else None


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
                    spent_s: float = 0.0, budget_s: float = DEFAULT_BUDGET_S,
                    max_fraction: float = DEFAULT_MAX_FRACTION, failures: Sequence[tuple[int, str]] = (),
                    notes: Sequence[str] = (), memory_source: str = "rss",
                    correct_speed: bool = False, others_cores: float | None = None,
                    load: tuple[float | None, int | None] | None = None) -> EstimateResult:
    """Fit the measured points and predict size ``N`` (public so that saved points can be re-analysed).

    ``correct_speed=True`` scales each time to the machine's typical speed while measuring (see
    :func:`speed_factors`) before the fit. It is off by default: on the VM this was built on, a 3 ms
    reference before and after a run tracked the speed during the run too loosely, and the corrected
    fits were no better than the raw ones (docs/benchmarks.md). Without it, a speed change beyond 15%
    is reported as a warning.

    The interval carries the run-to-run variation the points themselves show (:mod:`.noise`): the
    spaced repeats (``Point.later``) and consecutive runs of one size give its relative sd, the
    bootstrap draws the points' noise at least that large (so the extrapolation's leverage on a
    noisy top is in the interval), and the full run's own variation is added in quadrature.
    ``others_cores`` (cores kept busy by other processes while measuring) above ``LOAD_WARN`` is
    named first among the warnings, and the interval's low end then reaches the pace the code would
    have without them.
    """
    others_cores, threads = load if load is not None else (others_cores, None)
    pts = sorted(points, key=lambda p: p.n)
    warnings: list[str] = []
    base = dict(mode="scaling", var=var, full=float(N), code=code, device=device, points=tuple(pts), warmup=(),
                failures=tuple(failures), spent_s=spent_s, measure_budget_s=budget_s, max_fraction=max_fraction,
                notes=tuple(notes), memory_source=memory_source)
    if others_cores is not None and others_cores > LOAD_WARN:
        warnings.append(load_text(others_cores, threads))
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
    # flat: the middle half of the times within 25% (one run slowed by a neighbour does not hide it), and
    # the lower third of the sizes as fast as the upper third, within 5% of a slope
    mid = sorted(all_t)[len(all_t) // 4: len(all_t) - len(all_t) // 4] or all_t
    third = max(1, len(pts) // 3)
    if len(pts) >= 3 and pts[-1].n >= 16 * pts[0].n and max(mid) < 1.25 * min(mid):
        lo_t, hi_t = _stats.median(all_t[:third]), _stats.median(all_t[-third:])
        lo_n, hi_n = _stats.median([p.n for p in pts[:third]]), _stats.median([p.n for p in pts[-third:]])
        if lo_t > 0 and hi_n > lo_n and abs(math.log(hi_t / lo_t) / math.log(hi_n / lo_n)) < 0.05:
            warnings.append(f"the time does not change with {var} ({fmt_time(min(all_t))} – {fmt_time(max(all_t))} "
                            f"over sizes {pts[0].n:,} – {pts[-1].n:,}): does the cell use {var}?")
    if pts and pts[-1].n >= N:  # the full size itself was measured: another run lands within its variation
        p = raw_pts[-1]
        mem = p.memory()
        sigma = measured_noise(raw_pts)
        lo, hi = widen(p.time, min(p.times), max(p.times), sigma)
        return EstimateResult(predicted_s=p.time, low_s=lo, high_s=hi, peak_bytes=mem,
                              peak_low=mem, peak_high=mem, reliable=True, measured_full=True, run_noise=sigma,
                              others_cores=others_cores, fit_sizes=(p.n,), warnings=tuple(warnings),
                              **base)  # type: ignore[arg-type]
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
    sigma = measured_noise(raw_pts)
    sel = select(ns, ts, float(N), noise=sigma)
    pred, lo, hi = sel.predicted, sel.low, sel.high
    # the top sizes' own trend (the cost above the fitted overhead, continued at their local slope) is
    # a plausible extrapolation too: a fit across sizes that leave a cache bends more than its top does
    for local in (top_trend(ns, ts, sel.best.a, float(N), TOP_SPAN), *slope_range(ns, ts, sel.best.a, float(N))):
        if local is not None:
            lo, hi = min(lo, local), max(hi, local)
    # ... and a top growing at a power between whole ones is usually a change in progress (data leaving a
    # cache), after which the cost grows at the whole power below: the interval reaches that continuation
    settle = settled_power(ns, ts, sel.best.a, float(N), TOP_SPAN)
    # the full run lasts far longer than any run measured: this machine's speed over seconds varies
    # more than between two runs of tens of ms (calibrated on benchmarks/bench_estimate.py)
    span = max(math.log10(max(pred, 1e-12) / max(ts[-1], 1e-12)), 0.0) if pred > 0 else 0.0
    sigma_full = math.sqrt(sigma * sigma + (DRIFT_PER_DECADE * span) ** 2)
    lo, hi = widen(pred, lo, hi, sigma_full)
    # (that continuation carries the full run's own variation too: it is a forecast of its own)
    if settle is not None and settle[0] * math.exp(-Z90 * sigma_full) < lo:
        lo = settle[0] * math.exp(-Z90 * sigma_full)
        notes = (*notes, f"the largest sizes grow as {var}^{settle[1]:.2f}, between whole powers: usually a change in "
                         f"progress (data leaving a cache), after which the cost grows as {var}^{settle[2]} again; the "
                         f"interval's low end reaches that continuation ({fmt_time(settle[0])})")
        base["notes"] = tuple(notes)
    lo, hi = load_widening(pred, lo, hi, others_cores, raw_pts, threads)
    reliable = (all(math.isfinite(x) for x in (pred, lo, hi)) and pred > 0 and lo > 0
                and hi / lo <= UNRELIABLE_SPREAD and hi <= PLAUSIBLE_MAX_S)
    why = ""
    if sigma > NOISY_RUNS and not reliable:
        rep = max((p for p in raw_pts if p.later), key=lambda p: p.n, default=None)
        seen = (f" ({var}={rep.n:,}: {', '.join(fmt_time(t) for t in rep.times)}, later {fmt_time(rep.later[0])})"
                if rep is not None else "")
        why = (f"runs of the same size differ by ±{sigma:.0%} here{seen}, too much to extrapolate "
               f"{N / top:,.0f}× in size; {_suggest(ns, ts, N, var)}")
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
    if off is not None:
        reliable = False
        got, said, lo_n = off
        why = (f"the cost changed its growth: the {sum(1 for p in use if p.n >= lo_n)} largest sizes ({lo_n:,} … "
               f"{top:,}) grow as {var}^{got:.2f}, but the model fitted across all sizes says {var}^{said:.2f}")
        jump = _largest_jump(pts, max(got, said) + 1.0)
        if jump is not None:
            why += (f"; the time jumped {jump[2]:.1f}× between {var}={jump[0]:,} and {jump[1]:,} "
                    f"({jump[1] / jump[0]:.1f}× the size): a garbage collector, cache or memory regime change")
        why += f". Measure further past the change: {_suggest(ns, ts, N, var)}"
    if off is None:
        disagree = _top_disagreement(ns, ts, sel.best, sigma)
        if disagree is not None:
            reliable = False
            why = (f"the two largest sizes disagree with the {sel.best.describe()} fit by {disagree[0]:+.0%} and "
                   f"{disagree[1]:+.0%} (this machine's run-to-run variation, measured: ±{sigma:.0%}); "
                   f"{_suggest(ns, ts, N, var)}")
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
                          warnings=tuple(warnings), unreliable_why=why, run_noise=sigma, others_cores=others_cores,
                          **base)  # type: ignore[arg-type]


def _stats_sd(xs: Sequence[float]) -> float:
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / max(len(xs) - 1, 1))


def analyse_iteration(points: Sequence[Point], *, T: float, cold_s: float | None = None,
                      warmup: Sequence[float] = (), code: str = "", device: str = "cpu", spent_s: float = 0.0,
                      budget_s: float = DEFAULT_BUDGET_S, max_fraction: float = DEFAULT_MAX_FRACTION,
                      notes: Sequence[str] = (), others_cores: float | None = None,
                      load: tuple[float | None, int | None] | None = None) -> EstimateResult:
    """Predict a job of ``T`` units from timed blocks of units.

    The total is ``cold extra + T × pace``; the interval is the standard error of the mean pace widened
    by the spread of the paces of consecutive segments of units (:func:`.noise.phases`), at least
    ``noise.NOISE_FLOOR``: a long job meets the machine's and the job's phases, not the mean of a few
    seconds. A step in pace while measuring (a slow phase) is named, the later pace is assumed to go
    on, and the interval reaches back to the mean of all units.
    """
    others_cores, threads = load if load is not None else (others_cores, None)
    base = dict(mode="iteration", var=None, full=float(T), code=code, device=device, points=tuple(points),
                warmup=tuple(warmup), failures=(), spent_s=spent_s, measure_budget_s=budget_s,
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
    warnings: list[str] = []
    if others_cores is not None and others_cores > LOAD_WARN:
        warnings.append(load_text(others_cores, threads))
    # the pace of consecutive segments of units: their spread is the variation a long job meets (phases
    # of the machine or of the job), and a step between them is a slow (or fast) phase
    blocks = [(p.n, t) for p in points for t in p.times]
    ph = phases(blocks)
    sigma = max(NOISE_FLOOR, ph.spread)
    pace, lo_pace, hi_pace = mean, max(mean - half, 0.0), mean + half
    if ph.change_at is not None and ph.before and ph.after:
        # the job (or the machine) changed pace while measuring: the total assumes the later pace goes
        # on (what slowed it is still there), and the interval reaches back to the mean of all units
        pace = ph.after
        lo_pace, hi_pace = min(ph.after, mean), max(ph.after, mean)
        sigma = max(NOISE_FLOOR, ph.within)
        done = sum(p.n for p in points)
        kind = "slow" if ph.after > ph.before else "fast"
        warnings.append(f"units 1–{ph.change_at - 1} took {fmt_time(ph.before)} each, units {ph.change_at}–{done} "
                        f"{fmt_time(ph.after)}: a {kind} phase (the job, or the machine, changed pace at unit "
                        f"{ph.change_at} of those timed); the total assumes the later pace goes on, and the interval "
                        f"reaches the mean of all units ({fmt_time(mean)})")
    pred = extra + T * pace
    lo, hi = widen(pred, extra + T * lo_pace if lo_pace > 0 else pred, extra + T * hi_pace, sigma)
    lo, hi = load_widening(pred, lo, hi, others_cores, points, threads)
    if m >= 8 and ph.change_at is None:  # is the unit time trending (a growing cost per unit)?
        import numpy as np

        x = np.arange(m, dtype=float)
        slope, icpt = np.polyfit(x, np.asarray(per), 1)
        r = float(np.corrcoef(x, per)[0, 1]) if sd > 0 else 0.0
        if r > 0.7 and slope * m > 0.2 * mean:
            warnings.append(f"the time per unit grows as the job goes on ({fmt_time(per[0])} → {fmt_time(per[-1])} over "
                            f"{m} blocks): the total assumes the mean; the real job may take longer")
            hi = max(hi, extra + T * float(per[-1]) * math.exp(1.645 * sigma))
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
                          reliable=True, mem_growth_per_unit=growth, warnings=tuple(warnings), run_noise=sigma,
                          others_cores=others_cores, **base)  # type: ignore[arg-type]


__all__ = ["DEFAULT_BUDGET_S", "DEFAULT_MAX_FRACTION", "analyse_iteration", "analyse_scaling", "speed_factors",
           "top_slopes"]
