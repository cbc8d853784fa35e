"""Fitting the measured points: the prediction at the full size, and the checks that it can be trusted.

* :func:`analyse_scaling` (sizes measured): a cost model chosen by AICc (:mod:`.costmodel`) on the sizes
  nearest the full one, an interval, and the checks at the top of the curve — does the model follow
  the largest sizes, did the time jump just before them, is the local slope still rising — and the
  same for the peak memory; the machine's own speed while measuring (:func:`speed_factors`).
* :func:`analyse_iteration` (blocks of units timed): the total as ``cold extra + units × mean``, an
  interval on the mean, a trend in the unit time, and memory that grows from unit to unit.

Both are public so that saved points can be re-analysed; neither runs any code. What they notice (the
warnings, the notes, why a fit is unreliable) is returned as :class:`~perfmagic.findings.Finding` s: a kind
and its numbers, worded by :mod:`perfmagic.render.findings_estimate`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..core import stats as _stats
from ..core.env import cache_sizes
from ..core.memory import FreshTouch
from ..findings import Finding
from .costmodel import local_slopes, select
from .noise import (LOAD_WARN, NOISE_FLOOR, PACE_SPAN, Z90, MachineSpeed, cores, load_finding, load_widening,
                    machine_speed, oversubscribed, phases, pooled_pace, run_noise, settled_power, slope_range,
                    speed_sides, top_trend, widen, widen_sides)
from .result import MEM_FLOOR, EstimateResult, Point, suggest_sizes

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
NOISY_RUNS = 0.25  # measured run-to-run variation beyond which an unreliable fit says so as its reason
FRESH_WARN_BYTES = 256 * 2**20  # a full run mapping this much more than any size measured, on a VM whose host
# takes freed memory back, gets the fresh-memory warning (docs/methodology.md, "Cost models and estimates")
PACE_MAX_RATIO = 1000  # a fit is answered from a pace (noisy_pace) at most this far beyond the largest size
PACE_MIN_SHARE = 0.05  # ... from the runs lasting at least this share of the longest
FRACTIONAL_GROWTH = 0.15  # a model growing faster than n^1.15: superlinear (_contended_floor)
NOISE_REFUSALS = ("estimate.noisy", "estimate.growth-changed", "estimate.top-disagree")  # what noise refuses
TOP_DISAGREE = 0.15  # the two largest sizes off the fit by more than this (and 2.5× the noise), same side: unreliable


def noise_pairs(points: Sequence[Point]) -> list[tuple[int, float, float]]:
    """``(n, a, b)``: the pairs of runs of one size that the run-to-run variation is read from: each spaced
    repeat against the median of its size's first timings, and the first two consecutive runs of sizes
    that last at least a tenth of the largest, by the faster of the two (a burst of a few ms, a preemption,
    that doubles a 10 ms run is noise of that run, not of a run of seconds)."""
    longest = max((p.time for p in points), default=0.0)
    spaced = [(p.n, _stats.median(list(p.times)), t) for p in points for t in p.later if p.times]
    # (a size qualifies by the faster of its two runs: a stall of hundreds of ms in one run of a 0.5 ms
    # size (a file truncated while the last run's pages were written back) must not make it a long size)
    # (a size slower than one at least twice its size is still warming up, not noisy: torch's first SGD steps,
    # 143 then 80 ms for one step, where 128 steps took 106 ms)
    adjacent = [(p.n, p.times[0], p.times[1]) for p in points
                if len(p.times) >= 2 and min(p.times[:2]) >= max(1e-3, 0.1 * longest)
                and not any(q.n >= 2 * p.n and q.time < min(p.times[:2]) for q in points)]
    return spaced + adjacent


def measured_noise(points: Sequence[Point]) -> float:
    """The run-to-run variation (relative sd, log scale) the points show (:func:`noise_pairs`), at least
    ``noise.NOISE_FLOOR``."""
    return run_noise([(a, b) for _, a, b in noise_pairs(points)])


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


def _speed_check(pts: Sequence[Point], var: str, device: str,
                 correct_speed: bool) -> tuple[tuple[float, ...], Finding | None, Finding | None]:
    """``(factors, note, warning)`` of the machine's own speed while measuring: the factors that correct
    the times (only with ``correct_speed``) and the note that says so, or the warning of a speed change
    beyond ``SPEED_WARN`` left in the times."""
    factors = speed_factors(pts, device)
    if not factors:
        return (), None, None
    typ = _stats.median([p.ref_s for p in pts if p.guarded])
    rel = [(p.ref_s / typ - 1, p.n) for p in pts if p.guarded]
    lo, hi = min(rel), max(rel)
    where = dict(var=var, hi_x=hi[0], hi_n=hi[1], lo_x=lo[0], lo_n=lo[1])
    if correct_speed:
        return factors, Finding.of("estimate.speed-corrected", **where), None
    if max(abs(x) for x, _ in rel) > SPEED_WARN:
        return (), None, Finding.of("estimate.speed-changed", **where)
    return (), None, None


def _flat(pts: Sequence[Point], var: str) -> Finding | None:
    """The time does not change with the size: the middle half of the times within 25% (one run slowed by a
    neighbour does not hide it), and the lower third of the sizes as fast as the upper third, within 5% of
    a slope; and the two largest sizes not both 25% above the middle (a 100 ms overhead plus 1 ns per unit
    reads flat up to 10^7 units, then took 150 and 200 ms at 5·10^7 and 10^8: it grows, at the top)."""
    all_t = [p.time for p in pts]
    mid = sorted(all_t)[len(all_t) // 4: len(all_t) - len(all_t) // 4] or all_t
    third = max(1, len(pts) // 3)
    rises = len(pts) >= 4 and min(pts[-1].time, pts[-2].time) > 1.25 * _stats.median(all_t)
    if len(pts) >= 3 and pts[-1].n >= 16 * pts[0].n and max(mid) < 1.25 * min(mid) and not rises:
        lo_t, hi_t = _stats.median(all_t[:third]), _stats.median(all_t[-third:])
        lo_n, hi_n = _stats.median([p.n for p in pts[:third]]), _stats.median([p.n for p in pts[-third:]])
        if lo_t > 0 and hi_n > lo_n and abs(math.log(hi_t / lo_t) / math.log(hi_n / lo_n)) < 0.05:
            return Finding.of("estimate.flat", var=var, t_min=min(all_t), t_max=max(all_t), n_lo=pts[0].n,
                              n_hi=pts[-1].n)
    return None


def _time_interval(ns: Sequence[float], ts: Sequence[float], N: int, sigma: float,
                   var: str, cpu: float = 1.0, speed: MachineSpeed | None = None,
                   measured_ref: float | None = None) -> tuple[Any, float, float, float, Finding | None]:
    """``(selection, predicted, low, high, note)``: the cost model chosen on the sizes used, its interval
    widened by the top sizes' own trend, the run-to-run variation and the full run's drift (the machine's
    speed states, :func:`.noise.speed_sides`); the note says where the prediction is a cache change's
    continuation (or the high end reaches a thread pool's)."""
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
    # the full run lasts longer than any run measured, at whatever speed the machine runs then: the speeds
    # its drift guard read (two states: anywhere between them); only the CPU part of the time (``cpu``, the
    # share of the wall time the process spent on a CPU) follows the machine's speed: a sleep or a wait for
    # I/O does not
    span = max(math.log10(max(pred, 1e-12) / max(ts[-1], 1e-12)), 0.0) if pred > 0 else 0.0
    down, up = speed_sides(speed, measured_ref, cpu, span)
    sigma_full = math.hypot(sigma, max(down, up) / Z90)
    lo, hi = widen(pred, lo, hi, sigma)
    lo, hi = widen_sides(pred, lo, hi, down, up)
    # (that continuation carries the full run's own variation too: it is a forecast of its own)
    note = None
    if settle is not None and settle[2] < settle[1] and 0 < settle[0] < pred:
        # the prediction is that continuation; the interval still reaches the fit across the change (its high
        # end is the fit's). A numpy add over pre-touched arrays whose top (3 … 12 M elements) grew as n^1.2
        # ran its 100 M in 0.33-0.52× the fit's prediction, 8 of 8 trials (benchmarks/bench_estimate.py,
        # 2026-11-27); a merge sort whose top grew as n^1.2 ran at 1.2-1.5× the continuation, inside the interval
        fit_s, pred = pred, settle[0]
        lo = min(lo, pred * math.exp(-math.hypot(Z90 * sigma, down)))
        note = Finding.of("estimate.settled", var=var, power=settle[1], whole=settle[2], low_s=settle[0],
                          fit_s=fit_s)
    elif settle is not None and settle[2] > settle[1] and settle[0] * math.exp(Z90 * sigma_full) > hi:
        hi = settle[0] * math.exp(Z90 * sigma_full)  # growing slower than the size: the high end reaches n^1
        note = Finding.of("estimate.settled-up", var=var, power=settle[1], high_s=settle[0])
    return sel, pred, lo, hi, note


def _growth_off(ns: Sequence[float], ts: Sequence[float], best: Any) -> tuple[float, float, int] | None:
    """Does the model follow the top of the curve? ``(points' slope, model's slope, smallest top size)``
    where it does not. A jump below the top (the garbage collector starting full collections, data leaving
    a cache) can make the fit across all sizes steeper or flatter than the sizes nearest the full one: the
    extrapolation then follows the jump, not the trend."""
    off = top_slopes(ns, ts, best)
    if off is not None and abs(off[0] - off[1]) <= TOP_SLOPE_MISMATCH:
        off = None
    # ... and at the last step: a jump inside the top sizes (×10, then ×2 for 2× the size) averages to the
    # model's slope over them, but the step past the jump grows far more slowly than the model
    steps = local_slopes(ns[-3:], ts[-3:])
    if off is None and len(steps) == 2:
        said_last = local_slopes(ns[-2:], [float(best.predict(x)) for x in ns[-2:]])
        if said_last and said_last[0] - steps[1] > LAST_STEP_MISMATCH and steps[0] > said_last[0]:
            off = (steps[1], said_last[0], int(ns[-2]))
    return off


def _slope_rising(pts: Sequence[Point], best: Any, sigma: float = 0.0) -> Finding | None:
    """The local slope still rising at the largest size, beyond the model's own slope over the same sizes.

    Like for like: the points' slope between the third-largest and the largest size against the model's
    between the same two sizes (both of the whole time). The model's exponent would not do: it names the
    form's asymptote, which is not its slope there (an n·ln n fit grows as n^1.09 at 2^16; a two-term fit
    a + b·n + c·n² as anything from n^1 to n^2). A planted n·ln n with one run 12% low at the third-largest
    size read 1.01 → 1.18 and was warned about against the exponent 1.00, though the model's slope there
    was 1.09 and its prediction 3% low.

    And beyond the noise: a slope between two sizes whose runs vary by ``sigma`` (relative sd) reads within
    about √2·σ / ln(their ratio) of the truth, so the last slope must pass the model's by more than Z90 of
    that too. A planted n² (close pairs, ±22% run to run, sizes up to 5,775) read 2.10 against the model's
    2.00 and was told to take its prediction as a lower bound."""
    if len(pts) < 5:
        return None
    ns = [pts[-5].n, pts[-3].n, pts[-1].n]
    slopes = local_slopes(ns, [pts[-5].time, pts[-3].time, pts[-1].time])
    said = local_slopes(ns[1:], [float(best.predict(x)) for x in ns[1:]]) or [best.exponent()]
    beyond = max(0.1, Z90 * math.sqrt(2) * sigma / math.log(ns[2] / ns[1]))
    if len(slopes) == 2 and slopes[1] - slopes[0] > 0.15 and slopes[1] > said[0] + beyond:
        return Finding.of("estimate.slope-rising", prev=slopes[0], last=slopes[1], model_k=said[0])
    return None


def _trust(pts: Sequence[Point], raw_pts: Sequence[Point], use: Sequence[Point], sel: Any, sigma: float, N: int,
           var: str, reliable: bool) -> tuple[bool, Finding | None, list[Finding]]:
    """``(reliable, why not, warnings)``: the checks of the prediction at the top of the curve (noisy runs,
    too far to extrapolate, a change of growth, the two largest sizes off the model, a rising slope)."""
    ns, ts = [float(p.n) for p in use], [p.time for p in use]
    top = pts[-1].n
    warnings: list[Finding] = []
    why = None
    if sigma > NOISY_RUNS and not reliable:
        # the evidence shown is the pair of runs of one size that differ most (the spread quoted is a
        # robust sd over all the pairs: the example shows that such differences were measured)
        pairs = noise_pairs(raw_pts)
        rep = max(pairs, key=lambda x: abs(math.log(x[2] / x[1])) if x[1] > 0 and x[2] > 0 else 0.0, default=None)
        why = Finding.of("estimate.noisy", sigma=sigma, ratio=N / top, rep_n=rep[0] if rep is not None else None,
                         rep_first=rep[1] if rep is not None else None, rep_second=rep[2] if rep is not None else None,
                         pairs=len(pairs), **suggest_sizes(ns, ts, N, var))
    if N / top > 1e4:
        reliable = False
        warnings.append(Finding.of("estimate.too-far", ratio=N / top))
    off = _growth_off(ns, ts, sel.best)
    if off is not None:
        reliable = False
        got, said, lo_n = off
        jump = _largest_jump(pts, max(got, said) + 1.0)
        why = Finding.of("estimate.growth-changed", count=sum(1 for p in use if p.n >= lo_n), lo_n=lo_n, top=top,
                         got=got, said=said, jump_from=jump[0] if jump else None, jump_to=jump[1] if jump else None,
                         jump=jump[2] if jump else None, **suggest_sizes(ns, ts, N, var))
    else:
        disagree = _top_disagreement(ns, ts, sel.best, sigma)
        if disagree is not None:
            reliable = False
            why = Finding.of("estimate.top-disagree", model=sel.best.describe(), e0=disagree[0], e1=disagree[1],
                             sigma=sigma, **suggest_sizes(ns, ts, N, var))
    rising = _slope_rising(pts, sel.best, sigma)
    if rising is not None:
        warnings.append(rising)
    return reliable, why, warnings


def noisy_pace(pts: Sequence[Point], N: int, overhead: float, sigma: float, var: str, cpu: float = 1.0,
               short: float | None = None, speed: MachineSpeed | None = None,
               measured_ref: float | None = None, refused: bool = False,
               steps: bool = False) -> tuple[float, float, float, Finding] | None:
    """``(predicted, low, high, note)`` from the pooled pace of the largest sizes' runs, for a fit refused
    where the runs are noisy (runs of one size, or the paces of the largest sizes' runs, differ by more than
    ``NOISY_RUNS``: the noise bent the curve, or widened it past use), or for any fit where the sizes span
    too little to tell a curve that far (``short``: their span, when the full size lies further beyond the
    largest than the span squared: 1, 2 and 4 steps of 200 ms, a "quadratic" fit said 44 min for 2000 steps
    where they took 7 min); None where neither holds, or the runs do not show a cost linear in the size
    (:func:`.noise.pooled_pace`).

    Beside a busy neighbour, two torch threads ran SGD steps at 0.6 to 5.4 ms a step in runs of a third of
    a second, while the full runs of 4,500 steps (7-10 s) took 1.5 to 2.2 ms a step: a run many times
    longer averages the scheduler's episodes out. So the full run is predicted at the runs' pooled pace,
    its variation is one run's (``spread``) scaled by the square root of the runs' length over its own,
    with the machine's speed (:func:`.noise.speed_sides`) and ``NOISE_FLOOR`` beside it; and the high end
    reaches the slowest pace of the largest size (the steady share a long run gets once the credit of its
    pauses is spent: the longest runs are the slowest there).

    ``refused``: the fit was refused (its interval too wide, or its checks failed). Its runs need not be noisy
    overall for the pace to answer then: where the runs of one size differ in pace at least as much as the
    pace moves with the size (:meth:`.noise.Pace.states`), the curve was bent by the machine changing pace.
    SGD steps of ~40 ms (2000 of them asked for) ran at 39-42 ms each over 1-8 steps and then at 57-58 ms from
    the third run of 8 steps on: a fit through that said 4 min (1.4 min - 21 min) and was refused; the pace
    said 97 s (90 s - 2.1 min), and 40 steps timed right after took 120 s / 2000 steps."""
    top = pts[-1].n
    longest = max((max((*p.times, *p.later), default=0.0) for p in pts), default=0.0)
    runs = [(float(p.n), t) for p in pts if p.n * PACE_SPAN >= top for t in (*p.times, *p.later) if t >= PACE_MIN_SHARE * longest]
    # the overhead: none (a loop of steps), or where the pace is linear only without it, the fit's constant,
    # at most half the cheapest run of any size (every run pays it: a noisy fit's 237 ms constant beside a
    # 237 ms run of 2 steps of 200 ms had left that run a pace of 5 ms)
    cheapest = min((t for p in pts for t in (*p.times, *p.later)), default=0.0)
    a, pace = 0.0, None
    for a in dict.fromkeys((0.0, min(max(overhead, 0.0), 0.5 * cheapest))):
        pace = pooled_pace(runs, a)
        if pace is not None:
            break
    if pace is None:
        return None
    quiet = short is None and max(sigma, pace.spread) <= NOISY_RUNS  # neither noisy runs nor too short a span
    states = quiet and refused and pace.states()
    if quiet and not states and not steps:  # the fit stands
        return None
    pred = a + pace.pooled * N
    span = max(math.log10(pred / max(longest, 1e-12)), 0.0)
    down, up = speed_sides(speed, measured_ref, cpu, span)
    own = math.sqrt(pace.spread ** 2 * min(pace.duration / pred, 1.0) + NOISE_FLOOR ** 2)
    lo, hi = widen_sides(pred, pred * math.exp(-Z90 * own), pred * math.exp(Z90 * own), down, up)
    hi = max(hi, (a + pace.last * N) * math.exp(math.hypot(up, Z90 * NOISE_FLOOR)))
    full = math.hypot(own, max(down, up) / Z90)
    return pred, lo, hi, Finding.of("estimate.pace", var=var, sigma=sigma, short=short, ratio=N / top,
                                    runs=pace.runs, lo_n=pace.lo_n,
                                    hi_n=pace.hi_n, lowest=pace.lowest, highest=pace.highest, pooled=pace.pooled,
                                    duration=pace.duration, full_s=pred, full_sd=full,
                                    states=(pace.within, pace.within_n, pace.trend()) if states else None,
                                    steps=steps and quiet and not states)


def _contended_floor(use: Sequence[Point], sel: Any, N: int, sigma: float, others: float | None,
                     pts: Sequence[Point], threads: int | None) -> tuple[float, Finding] | None:
    """``(low end, note)``: where this process and others need more cores than there are
    (:func:`.noise.oversubscribed`) and the model grows faster than the size, the largest size continued as n.
    Sharing cores, a process that pauses between runs gets more than its share in a short run and less in a
    long one, so its runs grow faster than its cost: beside a busy process, two torch threads ran 40 ms steps
    at 40-56 ms in short runs and slower in long ones, and a fit through them printed 245 h (92-721 h) as
    reliable for 2000 steps that took 112 s."""
    top = use[-1]
    # the growth the model extrapolates with from the largest size to the full one (its exponent names the
    # asymptote: a + b·n + c·n² whose n² is a sliver at N grows about as n there)
    if not oversubscribed(others, pts, threads) or not sel.best.growth_between(top.n, N) > 1 + FRACTIONAL_GROWTH:
        return None
    a = min(max(float(sel.best.a), 0.0), 0.5 * top.time)
    floor = (a + (top.time - a) * N / top.n) * math.exp(-Z90 * max(sigma, NOISE_FLOOR))
    return floor, Finding.of("estimate.contended", model=sel.best.describe(), others=others or 0.0,
                             threads=threads or 1, low_s=floor)


def loop_of_steps(code: str, var: str) -> bool:
    """Whether the cell is one loop ``for _ in range(var):`` (``range(var)`` alone) whose body reads neither
    ``var`` nor the loop variable: n runs of the same step, whose cost is n × a step's as long as the steps
    do not change as they go. The runs' pace then answers where the fit is refused (:func:`_paced`), and
    :func:`.noise.pooled_pace` still refuses a pace that grows with the size (a body whose work grows with
    state it keeps, a list it sorts after each append)."""
    import ast

    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False
    body = [st for st in tree.body if not isinstance(st, ast.Pass)]
    if len(body) != 1 or not isinstance(body[0], ast.For) or body[0].orelse:
        return False
    loop = body[0]
    it = loop.iter
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
            and len(it.args) == 1 and not it.keywords and isinstance(it.args[0], ast.Name) and it.args[0].id == var):
        return False
    names = {t.id for t in ast.walk(loop.target) if isinstance(t, ast.Name)} | {var}
    return not any(isinstance(x, ast.Name) and x.id in names for st in loop.body for x in ast.walk(st))


def short_span(sizes: Sequence[float], N: float) -> float | None:
    """The span of ``sizes`` (ascending: largest / smallest) where the full size lies further beyond the largest
    than that span squared: too little to tell a curve (of the time, or of the peak) that far. None otherwise."""
    span = sizes[-1] / sizes[0] if sizes and sizes[0] > 0 else math.inf
    return span if N / sizes[-1] > span ** 2 else None


def _paced(pts: Sequence[Point], ns: Sequence[float], N: int, sel: Any, sigma: float, var: str, cpu: float,
           reliable: bool, why: Finding | None, machine: tuple[MachineSpeed | None, float | None] = (None, None),
           steps: bool = False) -> tuple[float, float, float, Finding] | None:
    """:func:`noisy_pace` where it applies: a fit refused (or too wide) for noise, sizes that span too little
    for the distance to the full size (:func:`short_span`), or a refused fit of a cell that is a loop of
    ``var`` steps (``steps``, :func:`loop_of_steps`); at most ``PACE_MAX_RATIO`` beyond the largest, and
    within ``UNRELIABLE_SPREAD``."""
    if N > PACE_MAX_RATIO * pts[-1].n:
        return None
    short = short_span(ns, N)  # the sizes fitted
    loop = steps and not reliable
    if short is None and not loop and (reliable or (why is not None and why.kind not in NOISE_REFUSALS)):
        return None
    paced = noisy_pace(pts, N, float(sel.best.a), sigma, var, cpu, short, *machine, refused=not reliable,
                       steps=loop)
    return paced if paced is not None and paced[2] / paced[1] <= UNRELIABLE_SPREAD else None


def _memory_fit(pts: Sequence[Point], N: int, var: str) -> tuple[Any, Finding | None]:
    """``(selection or None, warning)``: the peak memory's model, checked at the top of the curve."""
    top = pts[-1].n
    mem_pts = [(float(p.n), float(p.memory())) for p in pts if p.memory() is not None]
    above = [(x, v) for x, v in mem_pts if v >= 2 * MEM_FLOOR]  # below a few MiB, RSS is allocator noise
    if len(above) >= 3:
        mem_pts = above
    else:
        mem_pts = [(x, v) for x, v in mem_pts if x * FIT_SPAN >= top] or mem_pts
    if len(mem_pts) < 3:
        return None, None
    mem_sel = select([x for x, _ in mem_pts], [max(v, 0.0) for _, v in mem_pts], float(N), floor=MEM_FLOOR,
                     forms=("constant", "linear", "quadratic"))  # memory: no n log n in practice
    span = short_span([p.n for p in pts], N)  # the sizes measured (the time's rule, _paced)
    (x0, v0), (x1, v1) = mem_pts[0], mem_pts[-1]
    proportional = v0 > 0 and v1 / v0 >= 0.8 * x1 / x0  # grew in proportion to the size (an array per element)
    if span is not None and mem_sel.best.name != "constant" and not proportional:
        # sizes spanning 4× cannot tell a peak that grows from allocator noise 500× beyond them: a loop of
        # 1, 2 and 4 training steps (RSS 3, 6 and 6 MiB: its first run read low) was put at 3.8 GiB for 2000
        return None, Finding.of("estimate.memory-short", var=var, span=span, ratio=N / top)
    # the same check at the top of the curve: RSS under-reads small runs (the heap reuses pages it
    # already has), so the peak per element grows towards its true value and a quadratic can fit
    # what is linear; of the forms, the best one that follows the largest sizes is kept
    xs, vs = [x for x, _ in mem_pts], [max(v, 0.0) for _, v in mem_pts]

    def follows(f: Any) -> bool:  # the same slope at the top, and no steeper growth beyond it than there
        c = top_slopes(xs, vs, f)
        return c is not None and abs(c[0] - c[1]) <= TOP_SLOPE_MISMATCH and f.exponent() <= c[0] + TOP_SLOPE_MISMATCH
    mcheck = top_slopes(xs, vs, mem_sel.best)
    if mcheck is None:
        return mem_sel, None
    if follows(mem_sel.best):
        # a form the top rules out must not pull the prediction (the forms' average): a constant peak kept
        # within 4 AICc units of a linear one over four sizes whose peaks grew 9× halved a 2.6 GiB full run
        keep = tuple(f.name for f in mem_sel.fits if follows(f))
        if len(keep) < len(mem_sel.fits):
            mem_sel = select(xs, vs, float(N), floor=MEM_FLOOR, forms=keep)
        return mem_sel, None
    follow = [f for f in sorted(mem_sel.fits, key=lambda f: f.aicc) if follows(f)]
    if not follow:
        return None, Finding.of("estimate.memory-no-model", var=var, power=mcheck[0])
    # fitted on the top sizes alone: the ones below read low
    first = mem_sel.best.describe()
    tx = [(x, v) for x, v in zip(xs, vs) if x >= mcheck[2]]
    mem_sel = select([x for x, _ in tx], [v for _, v in tx], float(N), floor=MEM_FLOOR, forms=(follow[0].name,))
    if span is not None and mem_sel.best.name != "constant" and not proportional:
        # the same rule for the refit: steps whose RSS read 4, 7.5, 10 and 8 MiB at 1-4 of them (the top
        # 'growing' as n^0.56) were refitted as linear and put at 3.4 GiB for 2000 steps
        return None, Finding.of("estimate.memory-short", var=var, span=span, ratio=N / top)
    return mem_sel, Finding.of("estimate.memory-refit", var=var, power=mcheck[0], first=first,
                               chosen=mem_sel.best.describe())


def cache_bytes(p: Point) -> int:
    """The pages the kernel handed out during a run of ``p`` beyond the process's own fresh pages: mostly
    the page cache of the files it wrote, which stays allocated after the run (0 where not counted)."""
    return max((p.alloc_bytes or 0) - (p.huge_bytes or 0) - (p.small_bytes or 0), 0)


def fresh_bytes(p: Point) -> int:
    """The fresh memory a run of ``p`` had handed out: all pages counted, or its own where that is more."""
    return max(p.alloc_bytes or 0, (p.huge_bytes or 0) + (p.small_bytes or 0))


def footprint(p: Point) -> int:
    """The memory a run of ``p`` held at once: its RSS peak and the page cache it filled."""
    return (max(p.rss_peaks) if p.rss_peaks else 0) + cache_bytes(p)


def _cache_at(pts: Sequence[Point], N: int) -> float:
    """The page cache the full run fills, at the growth of the two largest sizes' (0 below a MiB)."""
    top = [p for p in pts if p.alloc_bytes is not None]
    if not top or cache_bytes(top[-1]) < 2**20:
        return 0.0
    p0, p1 = top[-2:] if len(top) >= 2 else (top[-1], top[-1])
    c0, c1 = cache_bytes(p0), cache_bytes(p1)
    k = 1.0
    if p1.n > p0.n and c0 > 0:
        k = min(max(math.log(c1 / c0) / math.log(p1.n / p0.n), 0.0), 2.0)
    return c1 * (N / p1.n) ** k


def _fresh_memory(pts: Sequence[Point], peak: float | None, N: int, var: str) -> Finding | None:
    """The warning that the full run maps ``FRESH_WARN_BYTES`` or more beyond the largest footprint of the
    sizes measured (its RSS peak and the page cache it fills; the caller checks that the host takes freed
    memory back): that first touch is not in the points."""
    seen = max((footprint(p) for p in pts), default=0)
    cache = _cache_at(pts, N)
    full = (peak or 0.0) + cache
    if not full - seen >= FRESH_WARN_BYTES:
        return None
    return Finding.of("estimate.fresh-memory", more=float(full - seen), seen=float(seen), var=var, n=N,
                      cache=float(cache))


COLD_NOTE_SHARE = 0.01  # a first touch priced at most this share of the prediction is a note, not a warning
FRESH_SHARE = 0.25  # the largest size had the kernel hand out at least this share of its footprint per run


def fresh_every_run(pts: Sequence[Point]) -> bool:
    """Whether the largest size measured had the kernel hand out fresh pages for at least ``FRESH_SHARE`` of
    its footprint in a run (huge or 4 KiB pages of its own: NumPy arrays, torch CPU tensors of a few MiB
    and more; or the page cache of a file it wrote): the kind of memory whose first touch on a VM whose
    host takes freed memory back costs the host's page faults (:func:`cold_memory`)."""
    top = [p for p in pts if p.alloc_bytes is not None or p.huge_bytes is not None or p.small_bytes is not None]
    if not top:
        return False
    return fresh_bytes(top[-1]) >= FRESH_SHARE * footprint(top[-1]) > 0


def cold_able(p: Point, fresh: FreshTouch) -> float:
    """The fresh memory of a run of ``p`` that can have been cold: its huge pages, and its 4 KiB pages (its
    own and the page cache) beyond the free blocks the host never took back (``fresh.small_warm``); all of
    its fresh memory where the page sizes were not counted."""
    if p.huge_bytes is None or p.small_bytes is None:
        return float(fresh_bytes(p))
    return float(p.huge_bytes + fresh.small_cold(p.small_bytes + cache_bytes(p)))


def warm_runs(pts: Sequence[Point], fresh: FreshTouch) -> list[Point]:
    """Each size's runs with the part a first touch of cold memory explains taken out: a run is counted at
    most ``fresh bytes × (dearest cold − warm rate)`` above its size's fastest run. On a VM whose host takes
    freed memory back, the first run of a new size can find its memory cold (762 ms, then 119 ms for the
    same size); that is the memory's state, which :func:`cold_memory` adds for the full run, not the
    run-to-run variation of the code."""
    warm, cold = fresh.warm_ns, fresh.cold_ns
    excess = (max(cold) - warm) * 1e-9 if cold else 0.0
    out = []
    for p in pts:
        runs = list(p.times) + list(p.later)
        f = cold_able(p, fresh)
        if not runs or not f:
            out.append(p)
            continue
        fast = min(runs)
        out.append(replace(p, times=tuple(max(fast, t - f * excess) for t in p.times),
                           later=tuple(max(fast, t - f * excess) for t in p.later)))
    return out


def small_pages(pts: Sequence[Point], peak: float, cache: float) -> float:
    """The part of the full run's fresh memory ``peak`` in 4 KiB pages: the page cache ``cache`` of the files
    it writes, and of the rest the share the largest size counted took in 4 KiB pages (not in transparent
    huge pages); none of the rest where that was not counted."""
    top = [p for p in pts if p.huge_bytes is not None and p.small_bytes is not None and p.huge_bytes + p.small_bytes]
    own = max(peak - cache, 0.0)
    share = top[-1].small_bytes / (top[-1].huge_bytes + top[-1].small_bytes) if top else 0.0  # type: ignore
    return min(cache + own * share, peak)


def cold_memory(peak: float, fresh: FreshTouch, var: str, N: int, threads: float = 1.0, cache: float = 0.0,
                recent: float = 0.0, small: float = 0.0) -> tuple[float, float, float, Finding]:
    """The cost of the full run's fresh memory from the probe (:func:`perfmagic.core.memory.probe_fresh_memory`):
    ``(added to the prediction, to the low end, to the high end, the finding)`` in seconds.

    The measured sizes touched memory the host still backed (their cost is in the fit, at the warm rate);
    the full run's peak beyond what the probe touched is cold *now* (the guest hands out the memory the host
    still backs first, and the probe found where that ends), and all of it is cold for a run started after
    the host has taken back what is free now (seconds, with free page reporting). So: started now, +cold
    bytes × the mean cold rate (the low end: at the cheapest cold chunk's rate, less the part of ``recent``,
    the largest footprint a measured size just freed, beyond what the probe found warm: the guest may hand
    that out again while the host still backs it, as it did to a repeat of 417 MiB that ran warm, 120 ms
    against 756 ms, right after the probe had found only 96 MiB warm); started later, up to + the whole peak
    × the mean cold rate (the high end: over gigabytes the chunks' rates add up to their mean).
    (A low end with no cold memory at all covered one more benchmark trial in eight and made the median
    interval 1.5-2× wider: docs/methodology.md.) Rates are above the warm one, which the fit carries (the
    host's part per byte, measured in huge pages: it was the same for 4 KiB pages here). ``threads``: the
    CPU time over the wall time of the largest sizes (at least 1): code that touches its memory on several
    threads takes the faults in parallel (torch's two threads here paid about half the probe's rate).
    ``small``: the part of ``peak`` in 4 KiB pages (:func:`small_pages`). The kernel hands those out from its
    smallest free blocks first, and the host never took back the free blocks below the reporting order
    (``fresh.small_warm``, :func:`perfmagic.core.memory.unreported_free_bytes`): that much of them is warm,
    now and later; the probe, which walks huge pages, says nothing about them."""
    warm = fresh.warm_ns
    par = min(max(threads, 1.0), float(cores()))  # (no more faults at once than there are cores to take them)
    rates = sorted(max(x - warm, 0.0) / par for x in fresh.cold_ns)
    small = min(max(small, 0.0), peak)
    small_cold = fresh.small_cold(small)  # 4 KiB pages beyond the unreported blocks: split off reported ones
    pool = float(fresh.small_warm or 0) if small > 0 else 0.0  # (for the finding)
    huge = peak - small
    now = max(huge - fresh.touched_bytes, 0.0) + small_cold
    mean = sum(rates) / len(rates)  # over gigabytes, the chunks' rates add up: their mean is the rate
    maybe_warm = max(recent - fresh.warm_bytes, 0.0)
    add, add_lo = now * mean * 1e-9, max(now - maybe_warm, 0.0) * rates[0] * 1e-9
    add_hi = (huge + small_cold) * mean * 1e-9
    return add, add_lo, add_hi, Finding.of("estimate.cold-memory", peak=float(peak), warm_bytes=float(fresh.warm_bytes),
                                           cold_now=float(now), warm_ns=warm, cold_lo=min(fresh.cold_ns),
                                           cold_hi=max(fresh.cold_ns), add=add, add_hi=add_hi, var=var, n=N,
                                           threads=par, cache=float(cache), small=float(small), pool=pool)


def _time_prediction(pts: Sequence[Point], raw_pts: Sequence[Point], use: Sequence[Point], N: int, sigma: float,
                     var: str, cpu: float, others: float | None, threads: int | None,
                     machine: tuple[MachineSpeed | None, float | None] = (None, None), steps: bool = False
                     ) -> tuple[Any, float, float, float, bool, Finding | None, list[Finding], list[Finding]]:
    """``(selection, predicted, low, high, reliable, why not, warnings, notes)`` of the time: the fit on the
    sizes ``use`` with its interval (:func:`_time_interval`), widened for other processes' load
    (:func:`.noise.load_widening`, :func:`_contended_floor`) and checked (:func:`_trust`); or, where
    :func:`_paced` applies, the runs' pace instead, with its own note (the fit's interval notes then do not
    hold)."""
    ns = [float(p.n) for p in use]
    sel, pred, lo, hi, settled = _time_interval(ns, [p.time for p in use], N, sigma, var, cpu, *machine)
    notes = [settled] if settled is not None else []
    lo, hi = load_widening(pred, lo, hi, others, raw_pts, threads)
    contended = _contended_floor(use, sel, N, sigma, others, raw_pts, threads)
    if contended is not None and contended[0] < lo:
        lo = contended[0]
        notes.append(contended[1])
    reliable = (all(math.isfinite(x) for x in (pred, lo, hi)) and pred > 0 and lo > 0
                and hi / lo <= UNRELIABLE_SPREAD and hi <= PLAUSIBLE_MAX_S)
    reliable, why, checked = _trust(pts, raw_pts, use, sel, sigma, N, var, reliable)
    paced = _paced(raw_pts, ns, N, sel, sigma, var, cpu, reliable, why, machine, steps)
    if paced is not None:
        pred, lo, hi = paced[:3]
        lo, hi = load_widening(pred, lo, hi, others, raw_pts, threads)
        if paced[3].get("states") is not None:  # the slope that rose at the top is the pace change the note shows
            checked = [w for w in checked if w.kind != "estimate.slope-rising"]
        return sel, pred, lo, hi, True, None, checked, [paced[3]]
    return sel, pred, lo, hi, reliable, why, checked, notes


def _first_touch(pts: Sequence[Point], beyond: Finding, fresh: FreshTouch, pred: float, lo: float, hi: float,
                 var: str, N: int, cpu: float) -> tuple[float, float, float, Finding | None, Finding | None]:
    """``(prediction, low, high, warning, note)`` with the full run's cold memory (:func:`cold_memory`) added,
    from the fresh-memory finding ``beyond``; a first touch priced at most ``COLD_NOTE_SHARE`` of the
    prediction is the note instead of the warning."""
    full = beyond["seen"] + beyond["more"]
    add, add_lo, add_hi, found = cold_memory(full, fresh, var, N, cpu, beyond["cache"], beyond["seen"],
                                             small_pages(pts, full, beyond["cache"]))
    pred, lo, hi = pred + add, lo + add_lo, hi + add_hi
    if add_hi <= COLD_NOTE_SHARE * pred:  # the first touch costs next to nothing: a note, not a warning
        return pred, lo, hi, None, found
    return pred, lo, hi, found, None


def _cache_trend(use: Sequence[Point], sel: Any, pred: float, hi: float, peak: float | None, N: int, var: str,
                 fit_notes: Sequence[Any] = ()) -> tuple[float, Finding | None]:
    """``(prediction, note)``: where the full run's peak memory passes the last-level cache and the largest
    size measured fitted in it, and the top sizes' own trend (:func:`.noise.top_trend`) runs above the
    model's prediction, the prediction follows that trend (at most the interval's high end). Data leaving
    the cache makes the cost per unit keep rising past the sizes measured, which a model fitted across 64×
    of sizes averages away: ``sorted(data[:n])`` of 2M floats and a recursive merge sort of 0.9M were
    predicted 5% and 17% low (medians of 12 quiet trials each, benchmarks/bench_estimate.py's points
    re-analysed), their top trends +1% and -9%; no other workload of that benchmark crosses the cache so.
    Not where the prediction is already a cache change's continuation (``estimate.settled`` in ``fit_notes``)."""
    if sel is None or not pred or any(getattr(x, "kind", None) == "estimate.settled" for x in fit_notes):
        return pred, None
    top = top_trend([float(p.n) for p in use], [p.time for p in use], sel.best.a, float(N), TOP_SPAN)
    llc = float(cache_sizes()["llc_bytes"])
    seen = max(use[-1].rss_peaks) if use[-1].rss_peaks else None
    if top is None or top <= pred * 1.01 or peak is None or seen is None or not (seen < llc < peak):
        return pred, None
    new = min(top, hi)
    return new, Finding.of("estimate.cache-trend", var=var, peak=float(peak), seen=float(seen), llc=llc,
                           trend_s=top, fit_s=pred, pred_s=new, model=sel.best.describe())


def _machine(use: Sequence[Point], readings: Sequence[float] | None, others: float | None, device: str
             ) -> tuple[tuple[MachineSpeed | None, float | None], Finding | None]:
    """``((speed, measured reference), note)``: the speeds the machine runs at (:func:`.noise.machine_speed`, from
    ``readings``, else the points' own drift-guard readings) and the reading of the runs the fit leans on (the
    largest sizes' median); the note where two states were seen. None for the speed (the prior) on a GPU (the
    host's speed is not the device's), and beside other processes' load (their preemptions read as a slow
    state: :func:`.noise.load_widening` handles that load)."""
    refs = [p.ref_s for p in use if p.ref_s]
    measured = _stats.median(refs[-3:]) if refs else None
    if device.startswith("cuda") or (others is not None and others > LOAD_WARN):
        return (None, measured), None
    speed = machine_speed(list(readings) if readings is not None else refs)
    if speed is None or speed.slow_s is None:
        return (speed, measured), None
    return (speed, measured), Finding.of("estimate.speed-states", fast_s=speed.fast_s, slow_s=speed.slow_s,
                                         share=speed.slow_share, readings=speed.readings, measured_s=measured)


def analyse_scaling(points: Sequence[Point], *, N: int, var: str = "n", code: str = "", device: str = "cpu",
                    spent_s: float = 0.0, budget_s: float = DEFAULT_BUDGET_S,
                    max_fraction: float = DEFAULT_MAX_FRACTION, failures: Sequence[tuple[int, str]] = (),
                    notes: Sequence[Finding] = (), memory_source: str = "rss",
                    correct_speed: bool = False, others_cores: float | None = None,
                    load: tuple[float | None, int | None] | None = None,
                    host_reclaims: bool = False, fresh: FreshTouch | None = None,
                    speed_readings: Sequence[float] | None = None) -> EstimateResult:
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
    have without them. ``host_reclaims`` (a VM whose host takes freed memory back,
    :func:`perfmagic.core.memory.host_reclaims_freed_memory`): a full run predicted to map far more memory
    than any size measured is warned about (``estimate.fresh-memory``). Where that memory is fresh in
    every run (:func:`fresh_every_run`) and ``fresh`` (the first-touch probe) found cold memory, the runs are
    fitted without what cold memory explains (:func:`warm_runs`) and the full run's cold memory is in the
    prediction and the interval instead (:func:`cold_memory`, ``estimate.cold-memory``); whether the fit
    is reliable is judged before it is added. Notes, warnings and the reason of an unreliable fit are
    :class:`~perfmagic.findings.Finding` s (worded by :mod:`perfmagic.render.findings_estimate`).
    ``speed_readings``: the drift guard's recent readings in this process (the speeds the machine runs at,
    :func:`_machine`); without them, the points' own.
    """
    others_cores, threads = load if load is not None else (others_cores, None)
    pts = sorted(points, key=lambda p: p.n)
    warnings: list[Finding] = []
    base = dict(mode="scaling", var=var, full=float(N), code=code, device=device, points=tuple(pts), warmup=(),
                failures=tuple(failures), spent_s=spent_s, measure_budget_s=budget_s, max_fraction=max_fraction,
                notes=tuple(notes), memory_source=memory_source)
    if others_cores is not None and others_cores > LOAD_WARN:
        warnings.append(load_finding(others_cores, threads))
    factors, speed_note, speed_warning = _speed_check(pts, var, device, correct_speed)
    if speed_note is not None:
        base.update(speed_factors=factors, notes=(*base["notes"], speed_note))
    warnings += [w for w in (speed_warning,) if w is not None]
    reclaiming = host_reclaims and memory_source == "rss"  # host memory, on a VM whose host takes freed memory back
    cold = reclaiming and fresh is not None and bool(fresh.cold_ns) and fresh_every_run(pts)
    if cold:  # the first touch of cold memory is taken out of the runs, and added for the full run
        pts = warm_runs(pts, fresh)  # type: ignore[arg-type]
    raw_pts = pts
    pts = [replace(p, times=tuple(t * f for t in p.times)) for p, f in zip(pts, factors)] if factors else pts
    warnings += [w for w in (_flat(pts, var),) if w is not None]
    if pts and pts[-1].n >= N:  # the full size itself was measured: another run lands within its variation
        return _measured_full(raw_pts, speed_readings, others_cores, device, warnings, base)
    if len(pts) < 3:
        return EstimateResult(predicted_s=None, low_s=None, high_s=None, peak_bytes=None, peak_low=None,
                              peak_high=None, reliable=False,
                              verdict_reasons=(Finding.of("estimate.few-sizes", k=len(pts)),),
                              **base)  # type: ignore[arg-type]
    use = [p for p in pts if p.n * FIT_SPAN >= pts[-1].n]
    if len(use) < 5:
        use = pts[-max(5, len(use)):]
    ns = [float(p.n) for p in use]
    sigma = measured_noise(raw_pts)
    # the CPU share of the full run: the largest of the sizes fitted (a constant wait behind a growing CPU
    # cost weighs less at the full size than at the small sizes)
    shares = [p.cpu_share for p in use if p.cpu_share is not None]
    cpu = max(shares) if shares else 1.0
    machine, states = _machine(use, speed_readings, others_cores, device)
    sel, pred, lo, hi, reliable, why, checked, fit_notes = _time_prediction(pts, raw_pts, use, N, sigma, var, cpu,
                                                                             others_cores, threads, machine,
                                                                             loop_of_steps(code, var))
    if states is not None and pred and pred > use[-1].time and cpu > 0:  # the note where the states widened it
        fit_notes.append(states)
    base["notes"] = (*base["notes"], *fit_notes)
    mem_sel, mem_warning = _memory_fit(pts, N, var)
    peak, plo, phi = (mem_sel.predicted, mem_sel.low, mem_sel.high) if mem_sel is not None else (None, None, None)
    if reliable and device == "cpu":
        pred, trend = _cache_trend(use, sel, pred, hi, peak, N, var, fit_notes)
        base["notes"] = (*base["notes"], *([trend] if trend is not None else []))
    beyond = _fresh_memory(pts, peak, N, var) if reclaiming else None
    if beyond is not None and cold:
        pred, lo, hi, beyond, quiet = _first_touch(pts, beyond, fresh, pred, lo, hi, var, N, cpu)  # type: ignore
        base["notes"] = (*base["notes"], *([quiet] if quiet is not None else []))
    warnings += checked + [w for w in (mem_warning, beyond) if w is not None]
    return EstimateResult(predicted_s=pred, low_s=lo, high_s=hi, peak_bytes=peak, peak_low=plo, peak_high=phi,
                          reliable=reliable, time_fit=sel, mem_fit=mem_sel, fit_sizes=tuple(int(x) for x in ns),
                          warnings=tuple(warnings), unreliable_why=why, run_noise=sigma, others_cores=others_cores,
                          fresh_touch=fresh, **base)  # type: ignore[arg-type]


def _measured_full(raw_pts: Sequence[Point], readings: Sequence[float] | None, others: float | None, device: str,
                   warnings: list[Finding], base: dict[str, Any]) -> EstimateResult:
    """The full size itself was measured: another run differs from this one by the difference of two runs
    (√2 × the run-to-run variation the repeats show) and, on a machine with two speed states, may run in the
    other one (from all fast to all slow, for the CPU share of its time). With the variation alone, 2 of 6
    quiet sorts of 2 M floats measured at the full size fell outside (one full run at 514 ms, the next at
    456 ms: +13%, where the repeats read ±4%; benchmarks/bench_estimate.py with a variant, not kept, that
    measured every full run as short as the measuring, 2026-11-28)."""
    p = raw_pts[-1]
    mem = p.memory()
    sigma = measured_noise(raw_pts)
    lo, hi = widen(p.time, min(p.times), max(p.times), math.sqrt(2) * sigma)
    (speed, measured), states = _machine([p], readings, others, device)
    if speed is not None and speed.slow_s is not None:  # (speed_sides clamps the CPU share to [0, 1])
        cpu = p.cpu_share if p.cpu_share is not None else 1.0
        lo, hi = widen_sides(p.time, lo, hi, *speed_sides(speed, measured, cpu, 1.0))
    base = {**base, "notes": (*base["notes"], states) if states is not None else base["notes"]}
    return EstimateResult(predicted_s=p.time, low_s=lo, high_s=hi, peak_bytes=mem, peak_low=mem, peak_high=mem,
                          reliable=True, measured_full=True, run_noise=sigma, others_cores=others,
                          fit_sizes=(p.n,), warnings=tuple(warnings), **base)  # type: ignore[arg-type]


def _stats_sd(xs: Sequence[float]) -> float:
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / max(len(xs) - 1, 1))


def analyse_iteration(points: Sequence[Point], *, T: float, cold_s: float | None = None,
                      warmup: Sequence[float] = (), code: str = "", device: str = "cpu", spent_s: float = 0.0,
                      budget_s: float = DEFAULT_BUDGET_S, max_fraction: float = DEFAULT_MAX_FRACTION,
                      notes: Sequence[Finding] = (), others_cores: float | None = None,
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
                                  peak_high=None, reliable=False, verdict_reasons=(Finding.of("estimate.no-unit"),),
                                  **base)  # type: ignore[arg-type]
        per = [cold_s]
    m = len(per)
    mean = sum(per) / m
    sd = _stats_sd(per) if m > 1 else mean
    half = 1.645 * sd / math.sqrt(m)
    extra = max((cold_s or 0.0) - mean, 0.0)  # the job's own first unit is cold too
    warnings: list[Finding] = []
    if others_cores is not None and others_cores > LOAD_WARN:
        warnings.append(load_finding(others_cores, threads))
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
        warnings.append(Finding.of("estimate.phase", change_at=ph.change_at, done=done, before=ph.before,
                                   after=ph.after, pace="slow" if ph.after > ph.before else "fast", mean=mean))
    pred = extra + T * pace
    lo, hi = widen(pred, extra + T * lo_pace if lo_pace > 0 else pred, extra + T * hi_pace, sigma)
    lo, hi = load_widening(pred, lo, hi, others_cores, points, threads)
    if m >= 8 and ph.change_at is None:  # is the unit time trending (a growing cost per unit)?
        import numpy as np

        x = np.arange(m, dtype=float)
        slope, icpt = np.polyfit(x, np.asarray(per), 1)
        r = float(np.corrcoef(x, per)[0, 1]) if sd > 0 else 0.0
        if r > 0.7 and slope * m > 0.2 * mean:
            warnings.append(Finding.of("estimate.unit-trend", first=per[0], last=per[-1], blocks=m))
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
                warnings.append(Finding.of("estimate.memory-growth", growth=growth, r=rr, units=T))
    return EstimateResult(predicted_s=pred, low_s=lo, high_s=hi, peak_bytes=peak, peak_low=plo, peak_high=phi,
                          reliable=True, mem_growth_per_unit=growth, warnings=tuple(warnings), run_noise=sigma,
                          others_cores=others_cores, **base)  # type: ignore[arg-type]


__all__ = ["DEFAULT_BUDGET_S", "DEFAULT_MAX_FRACTION", "analyse_iteration", "analyse_scaling", "speed_factors",
           "top_slopes"]
