"""The machine's own speed, measured with a fixed tiny workload beside every run (the drift guard).

Runs compared minutes apart mix the code change with the machine's drift (frequency scaling, other
tenants, thermal state): on a shared 2-core machine the *same* code drifts 6–36% between invocations.
Every timing run therefore also times this fixed pure-Python workload for about 8 ms and stores the
median per call as ``env["reference_s"]``. When two runs are compared historically, the ratio of their
reference times says how much the machine itself changed speed; beyond the noise floor, the
comparison warns and says by how much.

Some machines run at two speeds with nothing else running (a VM whose fixed loop takes 7 or 11.5 ms).
A slow reading is a *machine speed state*, not other processes' load, and it matters to one result only
when the result's own samples show it: :func:`speed_state` takes the readings before and after a run and
its samples, and says whether a contiguous stretch of samples at the slow end ran slower (within the run),
or the whole run ran slower than the same code did in this process while the machine was fast.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from . import stats as _stats


_best_seen: list[float] = []  # the fastest reference time measured in this process
_fast_runs: dict[str, float] = {}  # code key -> its fastest median measured while the machine was fast
SLOW = 0.30  # a reading this much above the fastest is the slow state


def _workload() -> int:
    acc = 0
    for i in range(400):
        acc += i * i & 0xFF
    return acc


def reference_time(duration: float = 0.008, calls_per_block: int = 20) -> float:
    """Median seconds per call of the fixed workload over about ``duration`` seconds."""
    clock = time.perf_counter
    samples: list[float] = []
    end = clock() + duration
    _workload()  # warm
    while clock() < end or len(samples) < 5:
        t0 = clock()
        for _ in range(calls_per_block):
            _workload()
        samples.append((clock() - t0) / calls_per_block)
    samples.sort()
    t = samples[len(samples) // 2]
    if not _best_seen or t < _best_seen[0]:
        _best_seen[:] = [t]
    return t


def best_seen() -> float | None:
    """The fastest reference time measured in this process, or None."""
    return _best_seen[0] if _best_seen else None


@dataclass(frozen=True)
class SpeedState:
    """A slow machine state that the run's own samples show. ``where``: "first" / "last" (a contiguous
    stretch of ``slow_n`` of ``n`` samples at that end ran ``ratio``× the rest) or "run" (the whole run's
    median was ``ratio``× this code's fastest run in this process while the machine was fast)."""

    slow_ref_s: float
    best_ref_s: float
    where: str
    ratio: float
    slow_n: int = 0
    n: int = 0


def speed_state(times: Sequence[float], before: float | None, after: float | None, best: float | None,
                earlier_fast_median: float | None = None) -> SpeedState | None:
    """The slow state, when a reference reading beside the run was slow (> ``SLOW`` above ``best``) *and*
    the samples show it; else None.

    Within the run (one reading slow, the other fast: the state changed during it): the change point at
    the slow reading's end (the split, ≥ 3 samples each side, leaving the least spread of log times within
    the parts), when that end's median is at least ``max(1.15, halfway to the reference's ratio)``× the
    rest's, with ≥ 75% of its samples above the rest's 90th percentile.
    Whole run (both readings slow, or no stretch): its median at least that much above
    ``earlier_fast_median`` (the same code measured in this process while the machine was fast).
    Either way the slowdown must not exceed 1.25× the reference's own: beyond that, something other
    than the machine (the data, the garbage collector) changed."""
    if not best or best <= 0 or not times:
        return None
    slow = [r for r in (before, after) if r and r / best - 1 > SLOW]
    if not slow:
        return None
    k = max(slow) / best
    need = max(1.15, 1 + 0.5 * (k - 1))
    most = 1.25 * k  # a slowdown well beyond the machine's own is something else (data, GC, the code)
    n = len(times)
    end = "last" if after in slow and before not in slow else "first" if before in slow and after not in slow else None
    found: SpeedState | None = None
    if end is not None and n >= 6 and min(times) > 0:
        logs = [math.log(t) for t in times]
        if end == "first":  # the slow end first: the same search on the reversed order
            logs = logs[::-1]
        s1, s2 = [0.0], [0.0]  # prefix sums: the spread of any head and tail in O(1), the search in O(n)
        for x in logs:
            s1.append(s1[-1] + x)
            s2.append(s2[-1] + x * x)

        def spread(i: int, j: int) -> float:  # sum of squared deviations of logs[i:j]
            a, b = s1[j] - s1[i], s2[j] - s2[i]
            return b - a * a / (j - i)

        # the change point: the split that leaves the least spread within the two parts (log times)
        m = min(range(3, n - 2), key=lambda j: spread(0, n - j) + spread(n - j, n))  # j samples at the slow end
        parts = (logs[n - m:], logs[:n - m])
        hot, rest = (sorted(math.exp(x) for x in p) for p in parts)
        ratio = _stats.median(hot) / _stats.median(rest)
        p90 = rest[int(0.9 * (len(rest) - 1))]
        if need <= ratio <= most and sum(t > p90 for t in hot) >= 0.75 * m:
            found = SpeedState(max(slow), best, end, ratio, m, n)
    if found is None and earlier_fast_median and earlier_fast_median > 0:
        ratio = _stats.median(list(times)) / earlier_fast_median
        if need <= ratio <= most:
            found = SpeedState(max(slow), best, "run", ratio, n, n)
    return found


def fast_median(key: str) -> float | None:
    """This code's fastest median measured in this process while the machine was in its fast state."""
    return _fast_runs.get(key)


def note_run(key: str, median: float, before: float | None, after: float | None) -> None:
    """Remember ``median`` for ``key`` when neither reading beside it was slow."""
    best = best_seen()
    if not best or not median or median != median:
        return
    if any(r and r / best - 1 > SLOW for r in (before, after)):
        return
    if key not in _fast_runs or median < _fast_runs[key]:
        _fast_runs[key] = median
