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

:class:`SpeedGate` acts on it during the samples: where the slow state is this machine's exception (most
recent readings fast), a short probe every ``GATE_EVERY_S`` of sampling finds it, the samples since the last
fast probe are set aside, and sampling waits (at most a share of the budget) for the usual speed to return.
On the 2-core VM the slow state comes and goes in stretches of 50–300 ms (1.65× slower); a ~0.1 s answer
that fell wholly inside one read 64–69% slow (``bench_timing_quality``, 2026-11-27, 687b96b).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from . import stats as _stats


_best_seen: list[float] = []  # the fastest reference time measured in this process
_fast_runs: dict[str, float] = {}  # code key -> its fastest median measured while the machine was fast
SLOW = 0.30  # a reading this much above the fastest is the slow state
_recent: deque[float] = deque(maxlen=24)  # the latest readings and gate probes (seconds per call)
_readings: deque[tuple[float, float]] = deque(maxlen=64)  # (time.monotonic(), seconds per call) of every reading
READINGS_WINDOW_S = 600.0  # readings older than this say nothing of the machine's speed states now
_held_off = [False]  # a gate's wait ran out: gates stay inactive until a reading is fast again
GATE_EVERY_S = 0.012  # a gate probe after this much sampling (each costs ~0.3 ms: ~3% of the sampling)
GATE_SHARE, GATE_MAX_S = 0.25, 0.25  # the most a run waits for the fast state: this share of its budget, at most this
PENDING_SLOWER = 0.10  # samples since the last fast probe are set aside when this much slower than those kept
PENDING_QUANTILE = 0.95  # ... and slower than this quantile of the kept samples (their scatter is no slow state)
GATE_MIN_READINGS = 4  # the gate acts once this many readings say the fast state is the usual one


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
    _recent.append(t)
    _readings.append((time.monotonic(), t))
    if t / _best_seen[0] - 1 <= SLOW:
        _held_off[0] = False
    return t


def recent_readings(window_s: float = READINGS_WINDOW_S) -> list[float]:
    """The reference readings (seconds per call, oldest first) taken in this process in the last ``window_s``
    seconds, at most the latest 64; the gate's short probes are not among them. What the machine's speed
    states are now (:func:`perfmagic.estimation.noise.machine_speed`) is read from them."""
    now = time.monotonic()
    return [t for at, t in _readings if now - at <= window_s]


def probe(blocks: int = 3, calls: int = 4) -> float:
    """A short reading (~0.3 ms): the fastest per-call time of the fixed workload over ``blocks`` blocks of
    ``calls`` calls. On the 2-core VM it agreed with the 4 ms reading's fast/slow in 324 of 341 pairs
    (5 s, 2026-11-27); it never updates :func:`best_seen`."""
    clock = time.perf_counter
    best = math.inf
    for _ in range(blocks):
        t0 = clock()
        for _ in range(calls):
            _workload()
        best = min(best, (clock() - t0) / calls)
    return best


def fast_is_usual() -> bool:
    """Whether the fast state is this machine's usual one now: at least ``GATE_MIN_READINGS`` recent readings,
    half or more of them fast against the fastest seen now, and no gate's wait ran out since the last fast
    reading. Where the slow state is the rule, it is the machine's speed, not an episode."""
    best = best_seen()
    if not best or len(_recent) < GATE_MIN_READINGS or _held_off[0]:
        return False
    return sum(t / best - 1 <= SLOW for t in _recent) >= 0.5 * len(_recent)


class SpeedGate:
    """Samples taken only in the machine's usual fast state (see the module docstring).

    :meth:`check` after each sample: every ``every_s`` a :func:`probe`; a fast one marks the samples so far
    as kept; a slow one (over ``SLOW`` above :func:`best_seen`) sets aside the samples since the last fast
    probe and probes until the fast state returns or ``cap_s`` of waiting is spent. A wait that runs out
    makes one state the answer, never a mix: the fast samples kept, where there are ``enough``, else the slow
    state as it runs. ``final=True`` (a stop is due) probes at once. ``probe``: the reading (planted in
    tests). Inactive (never probes) unless :func:`fast_is_usual` at its start."""

    def __init__(self, clock: Callable[[], float], cap_s: float, every_s: float = GATE_EVERY_S,
                 probe: Callable[[], float] | None = None, enough: int = 10) -> None:
        self.clock, self.cap_s, self.every_s, self.enough = clock, cap_s, every_s, enough
        self._probe = probe or globals()["probe"]  # (looked up now: a planted probe replaces the module's)
        self.best = best_seen()
        self.on = bool(self.best) and cap_s > 0 and fast_is_usual()
        self.kept = 0  # samples up to here were followed by a fast probe
        self.last = clock()
        self.set_aside: list[float] = []
        self.waited_s = 0.0
        self.waits = 0
        self.probes = 0
        self.gave_up = False
        self.kept_answer = False  # the wait ran out and the fast samples kept were the answer
        self.slow_ref_s: float | None = None

    def _fast(self, record: bool = False) -> bool:
        t = self._probe()
        self.probes += 1
        if record:
            _recent.append(t)
        fast = t / self.best - 1 <= SLOW if self.best else True
        if not fast:
            self.slow_ref_s = max(self.slow_ref_s or 0.0, t)
        return fast

    def check(self, raw: list[float], final: bool = False) -> str | None:
        """Probe when due. Returns ``"aside"`` when samples were set aside from ``raw`` (a stop is not due
        then), ``"stop"`` when the wait ran out and the ``enough`` fast samples left in ``raw`` are the
        answer, else None."""
        if not self.on or self.gave_up or (not final and self.clock() - self.last < self.every_s):
            return None
        if final and self.kept >= len(raw):
            return None
        fast = self._fast(record=True)
        if fast or not self._pending_slower(raw):
            self.kept, self.last = len(raw), self.clock()
            return None
        self.set_aside += raw[self.kept:]
        del raw[self.kept:]
        self.waits += 1
        t0 = self.clock()
        while not self._fast():
            if self.waited_s + (self.clock() - t0) >= self.cap_s:
                self.gave_up = True
                _held_off[0] = True  # it stayed slow that long: no gate acts until a reading is fast again
                break
        self.waited_s += self.clock() - t0
        self.last = self.clock()
        if self.gave_up:  # one state is the answer: the fast samples kept, or (too few) the slow state's
            if len(raw) >= self.enough:
                self.kept_answer = True
                return "stop"
            self.set_aside += raw  # ... the slow-state warning then judges the run
            raw.clear()
            self.kept = 0
        return "aside"

    def _pending_slower(self, raw: list[float]) -> bool:
        """Whether the samples since the last fast probe show the slow state: their median at least
        ``PENDING_SLOWER`` above the kept samples' median and above their ``PENDING_QUANTILE`` (True with no
        kept samples yet to compare with). Code the state does not slow (a device's, a sleep's) keeps its
        samples and does not wait, however scattered they are: the median of a dozen samples of a 0-2 ms
        sleep is 10% above the kept ones' median one time in three by chance, above their 95th percentile
        less than once in 10⁵ (a binomial bound; simulated: 2.5e-6). A slow state that slows the code
        (a CPU-bound call, 30-70% slower) puts nearly every pending sample above it."""
        if self.kept < 3:
            return True
        pending = raw[self.kept:]
        if not pending:
            return False
        kept = raw[:self.kept]
        bar = max((1 + PENDING_SLOWER) * _stats.quantile(kept, 0.5), _stats.quantile(kept, PENDING_QUANTILE))
        return _stats.median(pending) > bar

    def summary(self) -> dict[str, Any] | None:
        """What the gate did, for ``env["speed_gate"]`` (None when it never probed)."""
        if not self.on or not self.probes:
            return None
        return {"probes": self.probes, "waits": self.waits, "waited_s": round(self.waited_s, 6),
                "set_aside_s": [float(x) for x in self.set_aside[:1000]], "n_set_aside": len(self.set_aside),
                "gave_up": self.gave_up, "kept_answer": self.kept_answer, "cap_s": self.cap_s,
                "best_ref_s": self.best, "slow_ref_s": self.slow_ref_s}


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
