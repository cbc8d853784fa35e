"""Run-to-run variation, measured by the estimator itself, and what it does to an interval.

A fit's residuals say how well a curve follows *these* points; they do not say how far one more run
(the full one, seconds or minutes later) lands from the curve. On a shared 2-core machine the same
code drifts by 10–30% between seconds, and an interval built from fit residuals alone (±2–3%)
missed the actual run 8 times in 9 (docs/benchmarks.md). So the estimator measures that variation:

* **spaced repeats** (scaling form): after the sweep, the largest sizes are timed again, never right
  after their first run. The log ratio of each re-time to its first timing is one draw of the
  run-to-run variation *including* the drift between the two moments (:func:`run_noise`).
* **the spread of units and of phases** (per-iteration form): the units are cut into consecutive
  segments; how much the segments' paces differ is the variation a job of many such segments sees,
  and a step between segments is a slow (or fast) phase (:func:`phases`).

:func:`widen` adds that variation to a fit's interval in log space (in quadrature with the fit's own
half-widths). ``NOISE_FLOOR`` is the variation assumed where fewer repeats exist to tell: 4% (the
quietest runs of this machine repeat within 2–4%).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..core.reference import SLOW
from ..findings import Finding

Z90 = 1.645  # two-sided 90%
NOISE_FLOOR = 0.04  # relative sd of one run assumed at least (log scale)
LOAD_WARN = 0.3  # cores kept busy by other processes while measuring: above this, named first
MAX_BLOCKS = 80  # blocks beyond this are merged (consecutive ones) before looking for a step


def run_noise(pairs: Sequence[tuple[float, float]]) -> float:
    """Relative sd of one run (log scale) from (first, later) timings of the same size, at least NOISE_FLOOR.

    A robust spread of the log ratios (see below), not divided by √2: the full run is one run at another
    moment, compared with a curve made of runs at other moments, and the phases of this machine
    last seconds (consecutive runs share them), so the ratio of two spaced runs is the variation a
    prediction meets, not twice it.
    """
    rs = sorted(abs(math.log(b / a)) for a, b in pairs if a > 0 and b > 0)
    if not rs:
        return NOISE_FLOOR
    # from 3 pairs on, the median absolute log ratio × 1.48 (the sd of a normal variation): one run hit by
    # a preemption does not set it; with fewer, the mean × 1.25. The floor keeps lucky pairs from
    # narrowing the interval
    if len(rs) >= 3:
        k = len(rs)
        med = rs[k // 2] if k % 2 else (rs[k // 2 - 1] + rs[k // 2]) / 2
        return max(1.48 * med, NOISE_FLOOR)
    return max(1.25 * sum(rs) / len(rs), NOISE_FLOOR)


def widen(pred: float, lo: float, hi: float, sigma: float, z: float = Z90) -> tuple[float, float]:
    """The interval (lo, hi) around ``pred`` widened by a run-to-run variation ``sigma`` (relative sd).

    Each side's log half-width is combined in quadrature with ``z·sigma``: the fit's uncertainty and
    the full run's own variation are independent.
    """
    return widen_sides(pred, lo, hi, z * sigma, z * sigma)


DRIFT_PRIOR_PER_DECADE = 0.10  # relative sd per tenfold of the full run's length over the largest run measured,
# used only where the machine's speed could not be read (fewer than STATE_MIN_READINGS drift-guard readings):
# the drift measured on the 2-core VM this was built on (benchmarks/bench_estimate.py, before the readings)
STATE_MIN_READINGS = 4  # drift-guard readings needed to say what speeds the machine runs at
STATE_MIN_SHARE = 0.10  # ... and two states are the machine's own when this share of readings (and 2) are slow


@dataclass(frozen=True)
class MachineSpeed:
    """The machine's speed as its drift guard read it (seconds per call of the fixed workload): the fast
    state's median, the slow state's (None: one state seen), how many readings, the slow share, and the
    spread of the fast readings (relative sd, log scale)."""

    fast_s: float
    slow_s: float | None
    readings: int
    slow_share: float
    spread: float


def machine_speed(readings: Sequence[float]) -> MachineSpeed | None:
    """What speeds the machine runs at, from drift-guard readings (this process's recent ones, or the points'):
    None below ``STATE_MIN_READINGS``. A reading more than ``SLOW`` (the drift guard's own rule) above the fastest is the slow state;
    two states are reported where at least 2 readings and ``STATE_MIN_SHARE`` of them are slow (one slow
    reading is a preemption). The 2-core VM switches each vCPU between ~15.5 and ~25 µs per call every
    50-300 ms, and some minutes are mostly slow: a run of seconds measured in one state can run in the other."""
    xs = sorted(r for r in readings if r and r > 0 and math.isfinite(r))
    if len(xs) < STATE_MIN_READINGS:
        return None
    cut = xs[0] * (1 + SLOW)
    fast = [x for x in xs if x <= cut]
    slow = [x for x in xs if x > cut]
    two = len(slow) >= 2 and len(slow) >= STATE_MIN_SHARE * len(xs)
    logs = [math.log(x) for x in fast]
    m = sum(logs) / len(logs)
    spread = math.sqrt(sum((x - m) ** 2 for x in logs) / max(len(logs) - 1, 1))
    return MachineSpeed(_median(fast), _median(slow) if two else None, len(xs), len(slow) / len(xs), spread)


def speed_sides(speed: MachineSpeed | None, measured_ref: float | None, cpu: float, span: float
                ) -> tuple[float, float]:
    """``(down, up)``: the log half-widths (90%) the machine's own speed adds to a full run lasting ``span``
    decades longer than the runs measured, whose CPU share is ``cpu``. Two states seen: from the state the
    runs measured read (``measured_ref``, their drift-guard reading) down to all fast and up to all slow, a
    long run can land anywhere between. One state: its readings' spread. Too few readings: the prior,
    ``DRIFT_PRIOR_PER_DECADE`` per decade."""
    c = min(max(cpu, 0.0), 1.0)
    if span <= 0 or c <= 0:
        return 0.0, 0.0
    if speed is None:
        d = Z90 * DRIFT_PRIOR_PER_DECADE * c * span
        return d, d
    if speed.slow_s is None:
        d = Z90 * speed.spread * c * min(span, 1.0)
        return d, d
    ref = min(max(measured_ref or speed.fast_s, speed.fast_s), speed.slow_s)
    return -math.log(1 + c * (speed.fast_s / ref - 1)), math.log(1 + c * (speed.slow_s / ref - 1))


def widen_sides(pred: float, lo: float, hi: float, down: float, up: float) -> tuple[float, float]:
    """:func:`widen` with log half-widths of its own on each side (``down``, ``up``), in quadrature."""
    if not (pred > 0 and lo > 0 and hi > 0):
        return lo, hi
    dl = math.log(pred / min(lo, pred))
    dh = math.log(max(hi, pred) / pred)
    return pred * math.exp(-math.hypot(dl, down)), pred * math.exp(math.hypot(dh, up))


@dataclass(frozen=True)
class Phases:
    """The units cut into consecutive segments: their paces, and a step between two phases if there is one."""

    paces: tuple[float, ...]  # mean seconds per unit of each segment, in time order
    sizes: tuple[int, ...]  # units per segment
    spread: float  # relative sd of the segment paces (log scale)
    change_at: int | None = None  # the first unit of the later phase (1-based), when the pace stepped
    before: float | None = None  # mean seconds per unit before the step
    after: float | None = None  # ... and after it
    after_units: int = 0  # units timed after the step
    within: float = 0.0  # with a step: the larger spread of the segment paces on either side of it


def phases(units: Sequence[tuple[int, float]], segments: int = 5, min_step: float = 0.25) -> Phases:
    """Segment paces and the strongest step in pace, from ``(units, seconds)`` blocks in time order.

    A step is reported where splitting the blocks in two (each side at least 3 blocks) gives means
    that differ by more than ``min_step`` (relative) and by more than 4 standard errors of the
    blocks around their own side's mean: a slow phase of the job or the machine, not the spread of
    units.
    """
    units = [(n, t) for n, t in units if n > 0]
    if len(units) > MAX_BLOCKS:  # consecutive blocks merged: the scan below is quadratic
        k = math.ceil(len(units) / MAX_BLOCKS)
        units = [(sum(n for n, _ in units[i:i + k]), sum(t for _, t in units[i:i + k])) for i in range(0, len(units), k)]
    per = [t / n for n, t in units]
    m = len(per)
    if m == 0:
        return Phases((), (), 0.0)
    k = max(1, min(segments, m // 3 or 1))
    bounds = [round(i * m / k) for i in range(k + 1)]
    paces, sizes = [], []
    for a, b in zip(bounds, bounds[1:]):
        if b > a:
            u = sum(n for n, _ in units[a:b])
            paces.append(sum(t for _, t in units[a:b]) / u)
            sizes.append(u)
    logs = [math.log(p) for p in paces if p > 0]
    spread = 0.0
    if len(logs) >= 2:
        mu = sum(logs) / len(logs)
        spread = math.sqrt(sum((x - mu) ** 2 for x in logs) / (len(logs) - 1))
    best = None
    if m >= 6:
        for cut in range(3, m - 2):
            left, right = per[:cut], per[cut:]
            ml, mr = sum(left) / len(left), sum(right) / len(right)
            ss = sum((x - ml) ** 2 for x in left) + sum((x - mr) ** 2 for x in right)
            sd = math.sqrt(ss / max(m - 2, 1))
            se = sd * math.sqrt(1 / len(left) + 1 / len(right))
            step = abs(mr / ml - 1) if ml > 0 else 0.0
            score = abs(mr - ml) / se if se > 0 else (math.inf if mr != ml else 0.0)
            if step > min_step and score > 4 and (best is None or score > best[0]):
                best = (score, cut, ml, mr)
    if best is None:
        return Phases(tuple(paces), tuple(sizes), spread)
    _, cut, ml, mr = best
    first_unit = sum(n for n, _ in units[:cut]) + 1
    within = max(phases(units[:cut], 3, math.inf).spread, phases(units[cut:], 3, math.inf).spread)
    return Phases(tuple(paces), tuple(sizes), spread, first_unit, ml, mr, sum(n for n, _ in units[cut:]), within)


PACE_SPAN = 8.0  # the runs pooled for a pace: sizes within this factor of the largest
PACE_MIN_RUNS = 5  # ... at least this many runs of at least two sizes, spanning PACE_MIN_SIZES
PACE_MIN_SIZES = 3.0
PACE_SLOPE_MAX = 0.6  # a pace that grows (or falls) faster than n^0.6 with the size is not a linear cost (noise: a
# linear job's pace beside a busy neighbour showed slopes up to 0.52 over 4× in size; a quadratic's is 1)


@dataclass(frozen=True)
class Pace:
    """The seconds per unit of size of the runs of the largest sizes, pooled (:func:`pooled_pace`)."""

    pooled: float  # all the runs' time above the overhead over all their units
    spread: float  # relative sd of one run's pace (log scale)
    slope: float  # how the pace grows with the size: the median log-log slope over pairs of runs (Theil-Sen)
    runs: int
    lo_n: int  # the sizes pooled
    hi_n: int
    lowest: float  # the fastest and slowest paces of those runs
    highest: float
    last: float  # the slowest pace at the largest size
    duration: float  # the median time of those runs
    within: float = 0.0  # the widest range of one size's own paces (log of slowest / fastest), 0 below 2 runs
    within_n: int = 0  # ... that size

    def trend(self) -> float:
        """How far the pace moves with the size over the sizes pooled (log scale, the Theil-Sen slope)."""
        return abs(self.slope) * math.log(self.hi_n / self.lo_n) if self.lo_n > 0 else 0.0

    def states(self) -> bool:
        """Whether the runs of one size differ in pace at least as much as the pace moves with the size:
        then what bent a curve through them is the machine changing pace (a speed state lasting seconds),
        not a cost growing faster than the size."""
        return self.within > 0 and self.trend() <= self.within


def pooled_pace(runs: Sequence[tuple[float, float]], overhead: float = 0.0) -> Pace | None:
    """The pace of ``(size, seconds)`` runs: their time above ``overhead`` over all their units. None with
    fewer than ``PACE_MIN_RUNS`` runs, sizes spanning less than ``PACE_MIN_SIZES``, or a pace that grows with
    the size (``PACE_SLOPE_MAX``: the cost is not linear in the size, and a pace says nothing of it)."""
    rs = [(n, t - overhead) for n, t in runs if n > 0 and t - overhead > 0]
    if len(rs) < PACE_MIN_RUNS or max(n for n, _ in rs) < PACE_MIN_SIZES * min(n for n, _ in rs):
        return None
    slopes = [math.log((t2 / n2) / (t1 / n1)) / math.log(n2 / n1)
              for i, (n1, t1) in enumerate(rs) for n2, t2 in rs[i + 1:] if n2 != n1]
    slope = _median(slopes)
    if abs(slope) > PACE_SLOPE_MAX:
        return None
    logs = [math.log(t / n) for n, t in rs]
    mu = sum(logs) / len(logs)
    top = max(n for n, _ in rs)
    by: dict[float, list[float]] = {}
    for n, t in rs:
        by.setdefault(n, []).append(t / n)
    within, within_n = max(((math.log(max(v) / min(v)), n) for n, v in by.items() if len(v) >= 2), default=(0.0, 0))
    return Pace(pooled=sum(t for _, t in rs) / sum(n for n, _ in rs),
                spread=math.sqrt(sum((x - mu) ** 2 for x in logs) / (len(logs) - 1)), slope=slope, runs=len(rs),
                lo_n=int(min(n for n, _ in rs)), hi_n=int(top), lowest=math.exp(min(logs)), highest=math.exp(max(logs)),
                last=max(t / n for n, t in rs if n == top), duration=_median([t for _, t in rs]), within=within,
                within_n=int(within_n))


def _median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    k = len(s)
    return s[k // 2] if k % 2 else (s[k // 2 - 1] + s[k // 2]) / 2


def cores() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def load_finding(others: float, threads: int | None = None) -> Finding:
    """The warning of other processes' load while measuring (a :class:`~perfmagic.findings.Finding`: the cores
    they kept busy, this machine's usable cores, this process's busy threads)."""
    return Finding.of("estimate.load", others=others, cores=cores(), threads=threads)


def load_widening(pred: float, lo: float, hi: float, others: float | None, points: Sequence[Any],
                   threads: int | None = None) -> tuple[float, float]:
    """Under load by others, the low end reaches the pace without them: where this process's cores and
    theirs add up to more than the machine has, the CPU part of the time shrinks by the share they took
    (at most half); where they fit beside each other, by 5% (caches, memory bandwidth, turbo)."""
    if others is None or others <= LOAD_WARN or not pred > 0:
        return lo, hi
    n_cores = cores()
    shares = [max(p.cpu_share or 0.0, 0.0) for p in points if p.cpu_share is not None]
    own = _median(shares) if shares else 1.0
    # what this process would use alone: its busy threads (a BLAS or torch pool squeezed onto the free
    # cores shows fewer cores of CPU time than it has threads)
    demand = max(own, float(threads or 1), 1.0) + others
    gain = min(own, 1.0) * min(max(0.05, 1 - n_cores / demand), 0.5)
    return min(lo, pred * (1 - gain)), hi


def oversubscribed(others: float | None, points: Sequence[Any], threads: int | None = None) -> bool:
    """Whether other processes' load and this process's busy threads (at least its CPU share) need more
    cores than the machine has, with the others above ``LOAD_WARN``: then the scheduler shares cores, and a
    process that pauses between runs gets more than its share in a short run than in a long one."""
    if others is None or others <= LOAD_WARN:
        return False
    shares = [max(p.cpu_share or 0.0, 0.0) for p in points if p.cpu_share is not None]
    own = max(_median(shares) if shares else 1.0, float(threads or 1), 1.0)
    return own + others > cores() + 0.25


def _top_slope(ns: Sequence[float], ts: Sequence[float], a: float, span: float = 3.0
               ) -> tuple[float, float, float] | None:
    """``(slope, largest size, its cost above a)``: the least-squares log-log slope of the cost above the
    overhead ``a`` over the top sizes (at least 3, spanning ``span``); None while still in the overhead regime."""
    k = 3
    while k <= len(ns) and ns[-1] / ns[-k] < span:
        k += 1
    if k > len(ns):
        return None
    xs, ys = ns[-k:], [t - a for t in ts[-k:]]
    if any(y <= 0.2 * t for y, t in zip(ys, ts[-k:])):
        return None  # still in the overhead regime
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / k, sum(ly) / k
    slope = sum((x - mx) * (y - my) for x, y in zip(lx, ly)) / sum((x - mx) ** 2 for x in lx)
    return slope, xs[-1], ys[-1]


def top_trend(ns: Sequence[float], ts: Sequence[float], a: float, N: float, span: float = 3.0) -> float | None:
    """The full run as the top sizes' own trend says: the cost above the overhead ``a`` at the largest size,
    continued at its least-squares log-log slope over the top sizes (at least 3, spanning ``span``)."""
    got = _top_slope(ns, ts, a, span)
    if got is None:
        return None
    slope, x, y = got
    return a + y * (N / x) ** min(max(slope, 0.5), 4.0)


FRACTIONAL = 0.15   # a top slope this far above a whole power (1 or 2) is a regime change in progress
NLOGN_FROM = 1000.0  # settled_power measures a top above n^1 from n log n's local slope at sizes from this on
SUBLINEAR = (0.5, 0.95)  # a top slope in this range: an overhead or a thread pool still engaging (settled_power)


def settled_power(ns: Sequence[float], ts: Sequence[float], a: float, N: float, span: float = 3.0
                  ) -> tuple[float, float, int] | None:
    """``(full run, top slope, whole power)`` when the top sizes grow at a power between two whole ones
    (above n^1: more than ``FRACTIONAL`` above n log n's own local slope at the largest size n, 1 + 1/ln n, n
    taken as at least ``NLOGN_FROM``, and below n^1.85; above n^2: n^2.15 … n^2.85): the largest size
    continued at the whole power below. Such powers are rarely a law of the code and usually a change in
    progress (data leaving a cache: a numpy add over 0.2 → 12 M elements grows as n^1.3–1.6, then as n^1.0
    from ~12 M on, on this VM's 32 MiB L3), after which the cost grows at the power below again; a fit
    across the change continues the change instead. A top growing slower than the size (``SUBLINEAR``:
    n^0.5 … n^0.95, the cost above the fitted overhead) is the same in the other direction, an overhead or a
    thread pool still engaging, after which a cost per element grows as n^1: that continuation comes back
    with the whole power 1 (above the slope: the caller reaches it with the high end). A torch chain on
    two threads grew as n^0.89 over 35 k … 2.3 M elements, and its full run, 64× larger, took 1.7× what the
    fit's n^0.81·ln n said. None otherwise."""
    got = _top_slope(ns, ts, a, span)
    if got is None:
        return None
    slope, x, y = got
    if SUBLINEAR[0] <= slope < SUBLINEAR[1] and N > x:
        return a + y * (N / x), slope, 1  # growing slower than the size: the whole power above (see below)
    whole = math.floor(slope)
    # above n^1, the form below is n log n, whose own local slope at the top is 1 + 1/ln(x) (1.08 at 250 k):
    # ``sorted(data[:n])`` of Python floats, whose cost per n·ln n rose 12% per doubling from 100 k to 1.6 M
    # (cache and TLB misses that keep growing with the data), grew as n^1.16-1.24 at its top sizes and was
    # settled at n^1 in 10 of 16 trials of benchmarks/bench_estimate.py (median error -26%); measured from
    # n log n's slope, 2 of 16 (median -7%), and the numpy add leaving the cache (n^1.29-1.43) 14 of 16 as before
    # (at most 1 + 1/ln 1000: below a thousand units, a loop of 40 ms steps whose first run was preempted grew
    # as n^1.33 over 4-16 steps, and n log n's slope there, 1.36, would have let its fit say 2.6× the truth)
    base = whole + (1 / math.log(max(x, NLOGN_FROM)) if whole == 1 else 0.0)
    if whole < 1 or whole > 2 or not (FRACTIONAL < slope - base and slope - whole < 1 - FRACTIONAL) or N <= x:
        return None
    return a + y * (N / x) ** whole, slope, whole


def slope_range(ns: Sequence[float], ts: Sequence[float], a: float, N: float) -> tuple[float | None, float | None]:
    """The largest size continued at the shallowest and at the steepest local slope seen over the fitted
    sizes (the cost above the overhead ``a``, least squares over 3 consecutive sizes at a time): a curve
    still bending at the top (data leaving a cache, 1.0 → 1.4 within 16× the size) may go on at either.
    Dropping the extreme windows (one noisy point ends two of them) left 4 of 4 memory-bound estimates
    outside their interval in benchmarks/bench_estimate.py; kept, a noisy point widens the interval."""
    if len(ns) < 4:
        return None, None
    clean = [(x, t - a) for x, t in zip(ns, ts) if t - a > 0.2 * t]
    slopes = []
    for i in range(len(clean) - 2):
        w = clean[i:i + 3]
        lx, ly = [math.log(x) for x, _ in w], [math.log(y) for _, y in w]
        mx, my = sum(lx) / 3, sum(ly) / 3
        den = sum((x - mx) ** 2 for x in lx)
        if den > 0:
            slopes.append(sum((x - mx) * (y - my) for x, y in zip(lx, ly)) / den)
    if len(slopes) < 2:
        return None, None
    slopes.sort()
    top, cost = clean[-1]
    lo_k, hi_k = min(max(slopes[0], 0.5), 4.0), min(max(slopes[-1], 0.5), 4.0)
    return a + cost * (N / top) ** lo_k, a + cost * (N / top) ** hi_k


__all__ = ["LOAD_WARN", "NOISE_FLOOR", "PACE_SPAN", "Pace", "Phases", "Z90", "cores", "load_finding", "load_widening",
           "oversubscribed", "phases", "pooled_pace", "run_noise", "settled_power", "slope_range", "top_trend", "widen"]
