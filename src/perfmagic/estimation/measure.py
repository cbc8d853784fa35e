"""Measuring: the sizes run (scaling form) and the blocks of units timed (per-iteration form).

* :func:`_scaling`: the code runs at growing sizes — doubling, faster while the time is still flat
  (a per-run overhead), smaller steps at the top where a doubling no longer fits — within the
  measuring budget and at most ``max_fraction`` of the (running) guess of the full run; cheap sizes
  are repeated for a median and traced once for Python allocations; points that take a while are
  timed between two runs of a fixed reference workload (the drift guard). Then :func:`.fit.analyse_scaling`.
* :func:`_iteration`: a cold unit, warm-up until two units agree within 10%, then blocks of units
  (at least 0.2 ms each) with the RSS after each, until the budget, the fraction cap or a ±1%
  interval on the mean. Then :func:`.fit.analyse_iteration`.

Ctrl-C stops the measuring; the points done are fitted and the result says ``status="interrupted"``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..core import stats as _stats
from ..core.load import LoadProbe
from ..core import memory as _core_memory
from ..core.memory import FreshTouch
from ..core.reference import recent_readings, reference_time
from ..errors import BenchInterrupted
from ..findings import Finding
from ..render.units import fmt_time
from .costmodel import local_slopes
from .fit import _stats_sd, analyse_iteration, analyse_scaling
from .noise import phases
from .result import EstimateResult, Point, measured_memory
from .runner import _Runner

GROWTH = 2.0
MIN_BUDGET_S = 0.3  # the fraction cap never stops the measuring before this much time
SPEED_GUARD_MIN_S = 0.02  # points expected to take at least this long are timed beside the reference workload
REPEAT_ALLOWANCE = 1.6  # spaced repeats may take the measuring to this multiple of the fraction cap (within the budget)
UNCERTAIN_HIGH = 1.3  # an interval reaching this far above the prediction keeps the measuring going at larger sizes
UNCERTAIN_FRACTION = 0.35  # ... up to this fraction of the predicted full run (within the budget)
PHASE_CONFIRM = 10  # units timed after a step in pace before the measuring may stop
MEASURE_MEMORY_SHARE = 0.5  # no size is measured whose peak memory would pass this share of the memory available
FAST_GROWTH_SHARE = 0.03  # the fast growth of the overhead regime (×4, ×8) only while it keeps a run within this share
# of the budget
NOISE_PAIRS = 3  # pairs of runs of one size the run-to-run variation is read from, where the budget allows


def _others(probe: LoadProbe) -> tuple[float | None, int | None]:
    """Cores kept busy by other processes since the probe started, and this process's busy threads
    meanwhile (a copy is stopped: the probe keeps running)."""
    import copy

    p = copy.copy(probe)
    try:
        return p.stop(), p.active_threads
    except Exception:  # pragma: no cover - /proc unreadable
        return None, None


def _after_sweep(points: list[Point], N: int, budget_s: float, cap: float, elapsed: Any, measure_at: Any,
                 runner: _Runner, memory: bool, progress: Any, var: str, analyse: Any, short_ok: bool = True) -> None:
    """Larger sizes while the prediction is uncertain, then spaced repeats of the largest sizes.

    1. While the interval reaches more than ``UNCERTAIN_HIGH`` × the prediction or the model does not follow
       the largest sizes, a larger size is measured (:func:`_grow`).
    2. The second-largest size, then the largest, are timed once more (never right after their first
       run): each re-time against the first timing is one draw of this machine's run-to-run variation,
       drift included, which the interval then carries (:mod:`.noise`). They may take the measuring to
       ``REPEAT_ALLOWANCE`` × what it had spent (or × the fraction cap), within the budget.
    3. Where the repeats showed the prediction unreliable (runs of one size differ too much to extrapolate
       that far, the growth changed at the top, or an interval too wide to use), 1 and 2 once more within the
       budget: the refusal's own advice is to measure larger sizes, and often they fit (a file-writing job
       refused at 1 of its 3 s; a numpy chain beside a busy neighbour refused as "anywhere from 1.2 s to
       5.1 s; measure up to n=24,215,552 (≈ 183 ms)" after 0.87 s of its 3 s).
    """
    for again in (False, True):
        top = len(points)
        if _grow(points, N, budget_s, elapsed, measure_at, runner, progress, var, analyse, short_ok):
            return
        if again and len(points) == top:
            return  # no larger size fitted: the refusal stands
        allow = min(budget_s, max(REPEAT_ALLOWANCE * cap, REPEAT_ALLOWANCE * elapsed(), MIN_BUDGET_S))
        for i in [i for i in (len(points) - 2, len(points) - 1) if i >= 0]:
            if elapsed() + 1.2 * points[i].time <= (budget_s if again else allow):
                _retime(points, i, runner, progress, elapsed, budget_s, var)
        _more_pairs(points, budget_s, elapsed, runner, progress, var, analyse)
        r = analyse(points)
        if r.reliable or r.predicted_s is None:
            return


def _sweep_further(failures: list[tuple[int, str]], points: list[Point], N: int, budget_s: float, cap: float,
                   elapsed: Any, measure_at: Any, runner: _Runner, *rest: Any, short_ok: bool = True) -> None:
    """:func:`_after_sweep`, where a size that raises (a larger one, or a repeat) is a failure at that size, as
    in the sweep, and not the estimate's own exception."""
    try:
        _after_sweep(points, N, budget_s, cap, elapsed, measure_at, runner, *rest, short_ok=short_ok)
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        failures.append((int(runner.last_n or points[-1].n), f"{type(exc).__name__}: {exc}"))


def _grow(points: list[Point], N: int, budget_s: float, elapsed: Any, measure_at: Any, runner: _Runner,
          progress: Any, var: str, analyse: Any, short_ok: bool = True) -> bool:
    """Step 1 of :func:`_after_sweep`: larger sizes (×2, ×1.41 or ×1.19 of the largest: the largest that the
    model's high end says fits) while the prediction is uncertain, up to ``UNCERTAIN_FRACTION`` of the
    predicted full run and within the budget (an uncertain prediction is worth more measuring than a sure
    one). First, where ``short_ok`` (no ``sizes`` given), a full run short against the budget is measured
    itself (:func:`_short_full`). True where nothing more is to be measured (no prediction, or the full size
    measured)."""
    for _ in range(6):
        if len(points) < 3:
            break
        r = analyse(points)
        if r.predicted_s is None or r.measured_full:
            return True
        if short_ok and _short_full(r, points, N, budget_s, elapsed(), runner):  # cheaper measured than predicted
            points.append(measure_at(N, r.high_s))
            if progress is not None:
                progress(min(elapsed() / budget_s, 1.0), str(Finding.of("estimate.progress", var=var, n=N,
                                                                         t=points[-1].time)))
            return True
        # the high side (the low side also carries the allowance for other processes' load, which more
        # sizes would not narrow)
        wide = not r.reliable or not r.high_s or r.high_s / r.predicted_s > UNCERTAIN_HIGH
        if not wide:
            break
        # an unreliable prediction says nothing of the full run's length: the budget alone limits the measuring
        room = (budget_s if not r.reliable else min(budget_s, max(UNCERTAIN_FRACTION * r.predicted_s, MIN_BUDGET_S))
                ) - elapsed()
        top = points[-1]
        tf = r.time_fit
        step = None
        for g in (2.0, 1.41, 1.19):
            s = int(min(N, round(top.n * g)))
            if s <= top.n:
                continue
            if s > N / 1.5:
                s = N
            quad = top.time * (s / top.n) ** 2.0
            guess = quad
            if tf is not None:  # the model's high end at that size (at least linear growth from the top), at
                # most quadratic growth from the top: an unreliable model's high end (a flat fit 10⁴ wide)
                # would otherwise rule out the very sizes that could make it reliable
                guess = min(max(float(tf.best.predict(s)) * (r.high_s / r.predicted_s), top.time * s / top.n), quad)
            if 1.3 * guess <= room:
                step = (s, guess)
                break
        if step is None or _memory_stop(points, step[0], runner.device) is not None:
            break
        points.append(measure_at(step[0], step[1]))
        if progress is not None:
            progress(min(elapsed() / budget_s, 1.0), str(Finding.of("estimate.progress", var=var, n=step[0],
                                                                     t=points[-1].time)))
        if step[0] >= N:
            return True
    return False


SHORT_SHARE = 1 / 3  # a full run whose interval's high end is at most this share of the budget is measured ...
SHORT_SPAN = 64.0  # ... where the largest size measured is within this factor of the full one


def _short_full(r: EstimateResult, points: list[Point], N: int, budget_s: float, spent: float, runner: _Runner
                ) -> bool:
    """Whether to measure the full size itself rather than predict it: its interval's high end is at most
    :data:`SHORT_SHARE` of the budget, that run fits the budget left (×1.3), and its memory the machine.
    A prediction from 12% of the size cannot see a change of memory level beyond the sizes measured: the
    tour's ``sorted(data[:n])`` of 2M floats, predicted at 307 ms from sizes up to 245,760 (6 MiB of
    floats, inside the 32 MiB cache), ran 481 ms (+56%) once its 64 MiB left the cache; its measuring had
    already cost 406 ms. Measuring it costs less than that error, within the budget the user gave."""
    high = r.high_s
    if r.predicted_s is None or high is None or not r.reliable or high > SHORT_SHARE * budget_s:
        return False
    if points[-1].n * SHORT_SPAN < N:  # a high end extrapolated further bounds nothing: a file write whose
        return False  # sweep stopped at 128 of 292,298 units ran 1.9-2.2 s, twice a high end of at most 1 s
    return spent + 1.3 * high <= budget_s and _memory_stop(points, N, runner.device) is None


def _retime(points: list[Point], i: int, runner: _Runner, progress: Any, elapsed: Any, budget_s: float,
            var: str) -> None:
    """Point ``i`` timed once more, as a spaced repeat (``Point.later``)."""
    p = points[i]
    t, _r, _, _c = runner.once(p.n, memory=False, clean=p.time > 5e-4)
    points[i] = replace(p, later=p.later + (t,))
    if progress is not None:
        progress(min(elapsed() / budget_s, 1.0), str(Finding.of("estimate.progress", var=var, n=p.n, t=t,
                                                                 again=True)))


def _more_pairs(points: list[Point], budget_s: float, elapsed: Any, runner: _Runner, progress: Any, var: str,
                analyse: Any) -> None:
    """While the prediction is unreliable because runs of one size differed, and fewer than ``NOISE_PAIRS``
    pairs of runs say how much: more spaced repeats of the top sizes, within the budget. One pair is one
    draw of the variation (a lucky or an unlucky one); from three on, their median is robust to one
    preempted run. The largest size that fits the budget left is re-timed, the one re-timed least
    first, so that consecutive repeats are of different sizes (spaced, not back to back)."""
    for _ in range(2 * NOISE_PAIRS):
        r = analyse(points)
        why = r.unreliable_why
        if r.reliable or getattr(why, "kind", None) != "estimate.noisy" or why.get("pairs", 0) >= NOISE_PAIRS:
            return
        room = budget_s - elapsed()
        fits = [i for i in range(len(points)) if 1.2 * points[i].time <= room and points[i].time >= 1e-3]
        if not fits:
            return
        i = min(fits[-3:], key=lambda j: (len(points[j].later), -points[j].n))
        _retime(points, i, runner, progress, elapsed, budget_s, var)


FIRST_SHARE = 2**-16  # the first size measured: this share of the full one ...
FIRST_MAX = 2**14  # ... at most this many units: its memory is unknown until it has run, and a first size of
# 1.5e10 bytes (``bytearray(n)`` asked for n=10**15) took 39 s of page faults here and would have run a 2 GiB pod
# out of memory before the memory stop (which needs a size measured) could act


def first_size(N: int) -> int:
    """The first size the sweep measures for a full size ``N``: ``FIRST_SHARE`` of it, between 1 and ``FIRST_MAX``
    (up to N = 2^30 the share alone; beyond, the sweep's fast growth through cheap sizes climbs from there)."""
    return max(1, min(int(N * FIRST_SHARE), FIRST_MAX))


def _memory_stop(points: list[Point], s: int, device: str) -> Finding | None:
    """The note that stops the measuring before size ``s`` where its peak memory, at the growth the two
    largest sizes showed (at least in proportion to the size), would pass ``MEASURE_MEMORY_SHARE`` of the
    memory available now: the estimate must never be what runs the kernel out of memory (a 2 GiB pod)."""
    from .gate import available_memory

    mem = measured_memory(points)
    if not mem or s <= mem[-1][0]:
        return None
    n1, m1 = mem[-1]
    k = 1.0
    if len(mem) >= 2 and mem[-1][0] > mem[-2][0] and mem[-2][1] > 0:
        k = min(max(math.log(m1 / mem[-2][1]) / math.log(n1 / mem[-2][0]), 1.0), 3.0)
    need = m1 * (s / n1) ** k
    available, where = available_memory(device)
    if available is None or need <= MEASURE_MEMORY_SHARE * available:
        return None
    return Finding.of("estimate.memory-stop", n=s, need=need, available=available, where=where)


PROBE_TIME_S = 1.0  # the first-touch probe's limit (it stops earlier: after 4 cold chunks of 16 MiB)


def _cold_probe(r: EstimateResult, points: list[Point], left_s: float) -> FreshTouch | None:
    """The first-touch probe of fresh memory (:func:`perfmagic.core.memory.probe_fresh_memory`), where the
    estimate warns that the full run maps far more memory than any size measured, that memory is fresh in
    every run (:func:`.fit.fresh_every_run`) and the host takes freed memory back (the
    caller checks): it walks through the memory the host still backs (~0.1 ns/byte) to the first cold
    chunks, at most the full run's peak, half the memory available, and ``PROBE_TIME_S`` or the budget
    left. It runs after the sizes and before the repeats, so that the repeats are judged without the part
    of a run that cold memory explains (:func:`.fit.warm_runs`)."""
    from .fit import fresh_every_run
    from .gate import available_memory

    beyond = [w for w in r.warnings if getattr(w, "kind", None) == "estimate.fresh-memory"]
    if r.device.startswith("cuda") or not beyond or not fresh_every_run(points):
        return None
    need = float(beyond[0]["seen"] + beyond[0]["more"])  # the full run's memory: its own and the page cache
    available, _where = available_memory("cpu")
    if available and need - float(beyond[0]["cache"]) > available:  # more than there is, page cache aside (the
        return None  # kernel evicts that): the gate says it will not fit, and there is no first touch to price
    most = min(need, MEASURE_MEMORY_SHARE * available) if available else need
    return _core_memory.probe_fresh_memory(int(most), time_s=min(PROBE_TIME_S, max(left_s, 0.3)))


def _measured_on(runner: Any) -> list[Finding]:
    """The note of the device the work showed, where it was read from the work (``device_why``)."""
    why = runner.device_why
    return [Finding.of("estimate.measured-on", device=runner.device, why=why)] if why else []


def _source(fn_or_code: Any) -> str:
    if isinstance(fn_or_code, str):
        return fn_or_code
    return getattr(fn_or_code, "__qualname__", repr(fn_or_code))


def _measure_point(runner: _Runner, s: int, expected: float, *, N: int, points: list[Point], budget_s: float,
                   budget_now: list[float], traced_spent: list[float], elapsed: Any, memory: bool) -> Point:
    """One size measured: one run, repeated for a median (3) or a mean (2) where cheap and not final,
    under the drift guard where it takes a while; Python allocations traced once where affordable.
    ``points``: the sizes measured so far; ``budget_now[0]``: the allowance as known now;
    ``traced_spent[0]``: the time spent tracing so far (updated)."""
    times, rss, traced = [], [], None
    # the drift guard around points that take a while: this machine's speed can swing by a third
    # within seconds, which bends the curve (see analyse_scaling); 3 ms of reference before and after
    guard = expected >= SPEED_GUARD_MIN_S and not runner.device.startswith("cuda")
    ref0 = reference_time(0.003) if guard else None
    cpu0, wall0 = time.process_time(), time.perf_counter()
    # malloc_trim before a run costs up to ~1 ms: worth it where the run is long enough to matter
    t, r, _, c = runner.once(s, memory=memory, clean=expected > 5e-4)
    fresh = [getattr(runner, "last_fresh", (None, None, None))]
    times.append(t)
    if r is not None:
        rss.append(r)
    # cheap sizes: repeat for a median, and trace Python allocations once
    # one run is the answer at the full size itself, and where the time is still in the overhead
    # regime (within 10% of the last size's) and not cheap: a repeat there adds nothing to the curve
    # and would spend the budget that the top sizes need
    flat = bool(points) and t >= 0.005 * budget_s and abs(t / points[-1].time - 1) < 0.10 \
        and s < 16 * points[-1].n
    final = s >= N or flat
    # a median of 3 where cheap, a mean of 2 where affordable: one GC pass must not make the point
    while not final and (len(times) < 3 and t < 0.005 * budget_s or len(times) < 2) and elapsed() + t < budget_now[0]:
        # every run starts as a full run would: with its memory given back (else a repeat reuses the
        # pages the last one faulted in, and is faster and lighter than the real thing)
        t2, r2, _, c2 = runner.once(s, memory=memory, clean=t > 5e-4)
        fresh.append(getattr(runner, "last_fresh", (None, None, None)))
        times.append(t2)
        if r2 is not None:
            rss.append(r2)
        c = max(c or 0, c2 or 0) if (c is not None or c2 is not None) else None
    wall = time.perf_counter() - wall0
    cpu_share = (time.process_time() - cpu0) / wall if wall > 0 else None
    ref = (ref0 + reference_time(0.003)) / 2 if ref0 is not None else None
    # tracing can slow allocation-heavy Python 30-fold: trace only while that stays within 5% of the budget
    if memory and not runner.device.startswith("cuda") and not final and traced_spent[0] + 30 * t < 0.05 * budget_s:
        tt, _, traced, _ = runner.once(s, memory=False, trace=True, clean=False)
        traced_spent[0] += tt
    huge, small, alloc = ([x for x in col if x is not None] for col in zip(*fresh))
    return Point(s, tuple(times), tuple(rss), traced, c, ref_s=ref, cpu_share=cpu_share,
                 huge_bytes=max(huge) if huge else None, small_bytes=max(small) if small else None,
                 alloc_bytes=min(alloc) if alloc else None)  # (alloc: machine-wide, the least is the run's)


def _next_size(points: list[Point], p: Point, s: int, N: int, budget_s: float, max_fraction: float,
               elapsed: Any) -> tuple[int | None, float, float]:
    """The next size to measure after ``p`` (at size ``s``), its guessed time, and the measuring allowance
    now (the fraction cap of the guessed full run); None for the size when not even a smaller step fits."""
    slopes = local_slopes([q.n for q in points], [q.time for q in points])
    # while the time is flat (a per-run overhead dominates) grow fast to get out of that regime
    growth = GROWTH if not slopes or slopes[-1] > 0.25 else (4.0 if slopes[-1] > 0.1 else 8.0)
    # ... but a run that already takes a share of the budget is no overhead to leap out of: beside a busy
    # process, 40 ms training steps whose first run was preempted read flat and leapt ×8 (sizes 1, 2, 16, 32;
    # 1, 2, 4, 8, 64), and the fit through those points was refused in 4 of 4 trials
    while growth > GROWTH and p.time * growth > FAST_GROWTH_SHARE * budget_s:
        growth /= 2
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
    cap = min(budget_s, max(max_fraction * full_guess, MIN_BUDGET_S))
    if max(slopes, default=0.0) < 0.5 or len(above) < 2:
        cap = budget_s  # still flat: the full run's cost is unknown, so the fraction cap cannot apply yet
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
            return None, t_next, cap
    return nxt, t_next, cap


def _scaling(runner: _Runner, N: int, var: str, fn_or_code: Any, dev: str, budget_s: float, max_fraction: float,
             sizes: Sequence[int] | None, memory: bool, progress: Any, notes: list[Any]) -> EstimateResult:
    t_start = time.perf_counter()
    points: list[Point] = []
    failures: list[tuple[int, str]] = []
    interrupted = False
    first_exc: BaseException | None = None
    traced_spent = [0.0]
    budget_now = [budget_s]  # the measuring allowance as known now (the fraction cap lowers it)

    def elapsed() -> float:
        return time.perf_counter() - t_start

    def measure_at(s: int, expected: float) -> Point:
        return _measure_point(runner, s, expected, N=N, points=points, budget_s=budget_s, budget_now=budget_now,
                              traced_spent=traced_spent, elapsed=elapsed, memory=memory)

    probe = LoadProbe().start()
    host = memory and _core_memory.host_reclaims_freed_memory()
    fresh: FreshTouch | None = None  # the first-touch probe, where one ran

    def analyse(pts: list[Point]) -> EstimateResult:
        dev = runner.device  # the device the first run's work showed
        return analyse_scaling(pts, N=N, var=var, code=_source(fn_or_code), device=dev, spent_s=elapsed(),
                               budget_s=budget_s, max_fraction=max_fraction, failures=failures,
                               notes=notes + _measured_on(runner),
                               memory_source="cuda" if dev.startswith("cuda") else "rss", load=_others(probe),
                               host_reclaims=host, fresh=fresh, speed_readings=recent_readings())

    plan = list(sizes) if sizes is not None else None
    s = plan[0] if plan else first_size(N)
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
            if not points and plan is None and p.time > budget_s / 3 and s > 1 and not retried:
                s, retried = max(1, s // 64), True  # the first size is already expensive: start lower
                est = p.time / 64
                continue
            points.append(p)
            if progress is not None:
                progress(min(elapsed() / budget_s, 1.0), f"{var}={s:,}: {fmt_time(p.time, 3)}")
            if plan is not None:
                if len(points) >= len(plan):
                    break
                s = plan[len(points)]
                est = p.time * s / p.n
                continue
            if s >= N:
                break
            nxt, t_next, budget_now[0] = _next_size(points, p, s, N, budget_s, max_fraction, elapsed)
            if nxt is None:
                break
            stop = _memory_stop(points, nxt, runner.device) if memory else None
            if stop is not None:
                notes.append(stop)
                break
            s, est = nxt, t_next
        if host and points:  # before the repeats: they are then judged without the cold memory's part
            fresh = _cold_probe(analyse(points), points, budget_s - elapsed())
        if points and not failures and points[-1].n < N and first_exc is None and \
                not any(getattr(x, "kind", None) == "estimate.memory-stop" for x in notes):
            _sweep_further(failures, points, N, budget_s, budget_now[0], elapsed, measure_at, runner, memory,
                           progress, var, analyse, short_ok=sizes is None)  # (sizes given: predicted from them)
    except KeyboardInterrupt:
        interrupted = True
    if first_exc is not None:
        raise first_exc
    res = analyse(points)
    return replace(res, status="interrupted" if interrupted else "ok")



def _iteration(runner: _Runner, T: float, fn_or_code: Any, dev: str, budget_s: float, max_fraction: float,
               memory: bool, progress: Any, notes: list[Any]) -> EstimateResult:
    from ..core.memory import current_rss, malloc_trim

    if memory:  # pages an earlier cell freed and the heap kept would absorb the units' growth unseen
        malloc_trim()
    t_start = time.perf_counter()
    probe = LoadProbe().start()
    warm: list[float] = []
    blocks: list[tuple[int, float, int | None, int | None, float]] = []  # (units, s, rss peak, rss after, cpu s)
    cold = None
    interrupted = False
    try:
        # cold unit, then warm-up until two consecutive units agree within 10% (at most 10 or 25% of the budget)
        t, _, _, _ = runner.once(None, memory=False, clean=False)
        cold = t
        while len(warm) < 10 and time.perf_counter() - t_start < 0.25 * budget_s:
            t, _, _, _ = runner.once(None, memory=False, clean=False)
            warm.append(t)
            if len(warm) >= 2 and abs(warm[-1] - warm[-2]) <= 0.1 * max(warm[-1], warm[-2]):
                break
        unit = _stats.median(warm) if warm else cold
        per_block = max(1, math.ceil(2e-4 / max(unit, 1e-9)))
        done_units = 1 + len(warm)
        checked = 0.0
        while True:
            el = time.perf_counter() - t_start
            m = len(blocks)
            if m >= 5:
                per = [b[1] / b[0] for b in blocks]
                mean = sum(per) / m
                stop = el >= budget_s or el >= max_fraction * mean * T
                if not stop and m >= 30:
                    sd = _stats_sd(per)
                    stop = 1.645 * sd / math.sqrt(m) <= 0.01 * mean
                # a step in pace near the end of what was timed (a slow phase starting): keep measuring, within
                # the budget and the units of the job, until the new pace has PHASE_CONFIRM units of its own
                if stop and el < budget_s and el - checked > 0.02:
                    checked = el
                    ph = phases([(b[0], b[1]) for b in blocks])
                    if ph.change_at is not None and ph.after_units < PHASE_CONFIRM and done_units + per_block <= T:
                        stop = False
                if stop:
                    break
            if done_units + per_block > T and m >= 1:
                break
            if memory:
                from ..core.memory import reset_hwm, status_kib

                r0 = current_rss()
                hw = reset_hwm() and r0 is not None
                c0, t0 = time.process_time(), time.perf_counter()
                for _ in range(per_block):
                    v = runner.call(None)
                runner._sync_after(v)
                dt = time.perf_counter() - t0
                cpu = time.process_time() - c0
                peak = max((status_kib("VmHWM") or 0) - r0, 0) if hw else None
                blocks.append((per_block, dt, peak, current_rss(), cpu))
            else:
                c0, t0 = time.process_time(), time.perf_counter()
                for _ in range(per_block):
                    v = runner.call(None)
                runner._sync_after(v)
                dt = time.perf_counter() - t0
                blocks.append((per_block, dt, None, None, time.process_time() - c0))
            done_units += per_block
            if progress is not None:
                progress(min((time.perf_counter() - t_start) / budget_s, 1.0), f"{len(blocks)} blocks")
    except KeyboardInterrupt:
        interrupted = True
    spent = time.perf_counter() - t_start
    if cold is None:
        raise BenchInterrupted(None)
    res = _analysed_blocks(blocks, runner, T=T, cold=cold, warm=warm, fn_or_code=fn_or_code, spent=spent,
                           budget_s=budget_s, max_fraction=max_fraction, notes=notes, probe=probe)
    return replace(res, status="interrupted" if interrupted else "ok")


def _analysed_blocks(blocks: list[tuple[int, float, int | None, int | None, float]], runner: _Runner, *, T: float,
                     cold: float, warm: list[float], fn_or_code: Any, spent: float, budget_s: float,
                     max_fraction: float, notes: list[Any], probe: Any) -> EstimateResult:
    """The timed blocks of units as points, analysed (:func:`analyse_iteration`)."""
    pts = tuple(Point(b[0], (b[1],), (b[2],) if b[2] is not None else (), None, None,
                      (b[3],) if b[3] is not None else (), cpu_share=min(b[4] / b[1], 4.0) if b[1] > 0 else None)
                for b in blocks)
    dev = runner.device  # the device the first unit's work showed
    return analyse_iteration(pts, T=T, cold_s=cold, warmup=tuple(warm), code=_source(fn_or_code), device=dev,
                             spent_s=spent, budget_s=budget_s, max_fraction=max_fraction,
                             notes=notes + _measured_on(runner), load=_others(probe))



__all__: list[str] = []
