"""Where did the change go: A's and B's stacks sampled while they run interleaved, and the difference in
time attributed per function, with an interval from the pairs (``%perf compare --where``, issue 33).

**Sampling.** :func:`perfmagic.timing.pair.bench_pair` takes a ``watch``, a :class:`PairSampler`: before
each timed block it says which pair and which side runs (:meth:`PairSampler.begin`), after it the
block's time (:meth:`PairSampler.end`). A thread (``%%flame``'s in-process sampler, paced:
:class:`perfmagic.profile.flame.PacedSampler`) reads the measuring thread's Python stack ``rate`` times a
second and files each sample under the block that ran, weighted by the time it stands for (one interval;
more for a sample held up while the code kept the GIL in a C call, whose frame, the caller, spent that
wait). Both sides are sampled by the same thread, in the same mode (wall clock), in the same pairs: a
differential profile cannot mix a CPU-time baseline with a wall-time change.

**Attribution.** A sample is filed under its innermost frame of the user's code; the frames of a library
below it (numpy, torch, the standard library) are folded into it and named with it (``prep · numpy``), so
"the numpy call in ``prep`` got dearer" reads as one row, and a function redefined between A and B is one
row. A side's self time of a function is its share of that side's sample time over all pairs, times the
side's median time per call (a ratio estimator: a 3 ms block holds about 3 samples, too few for a share
of its own; the median is the verdict's). Δ is B's minus A's; its interval resamples the pairs (the pair is the unit that cancels the
machine's drift, and resampling pairs carries the run-to-run and the sampling noise together). The
self times of a side add up to its median time per call, so the Δs add up to the measured B − A.

**Naming.** A function is *named* (the change went there) only when its 99% interval excludes 0 and |Δ|
is at least :data:`FLOOR` of A's time per call. Torch code on the CPU has a second instrument: the ops
profiled after the pairs (:mod:`.where_ops`) are filed under the function that called them, and a function
is also named when the change in its ops is named under the ops' rule (:attr:`FunctionDelta.by_ops`). A
1000 Hz sampler gives a 1 s comparison about 300 samples a side, too few to tell a 25 µs softmax in a
400 µs step from 0 (sd of head's Δ over ten trials 8 µs, its interval ±20 µs); the profiled op's change
is read from every call. With twenty functions in an A/A comparison, 95%
intervals would name one about every other time; 99% and the floor keep untouched functions named in
under 5% of comparisons (``benchmarks/bench_where.py`` measures it).

Imports numpy only when attributing; no IPython, no matplotlib (:mod:`perfmagic.render.where` draws).
"""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, ClassVar

from ..core.cells import CELL_FUNCTION
from ..findings import Finding
from ..result import Displayed
from .flame import PacedSampler
from .flameresult import _INPUT_NAME, Frame
from .rule import CONFIDENCE, FLOOR, RESAMPLES
from .rows import _PERFMAGIC_DIR, CELL, HARNESS, library_of, redefined
from .samplers import frame_stack

DEFAULT_RATE = 1000.0     # samples a second: ≥ 20 in a pair of 10 ms blocks
MIN_PAIRS = 5             # fewer pairs with samples of both sides: no attribution ("cannot tell")
# samples of each side that --where asks the pairs to go on for (within the budget) when the verdict is
# clear sooner: a ±0.5 ms move in a 3 ms step is told from 0 at 99% with about this many
WHERE_MIN_SAMPLES = 300
# a change not told from 0: the chance the hint's larger sample would tell a change of its size from 0
TELL_POWER = 0.9
TELL_MAX = 25.0  # more times the samples than this: sampling cannot tell it at any sensible budget

Key = tuple[str, str, str]  # (function, file, library folded into it, or "")

_CELLS_FILE = os.path.join(_PERFMAGIC_DIR, "core", "cells.py")


class PairSampler(PacedSampler):
    """The in-process sampler of the measuring thread, its samples filed under the block that ran.

    ``begin(pair, side)`` / ``end(block_s, calls)`` are called by the pair loop around each timed block
    (side 0 is A, 1 is B); samples taken outside a block (the loop's own bookkeeping) are dropped.
    ``min_samples``: the pair loop does not stop on a clear verdict before each side has this many
    samples (:meth:`enough`; the budget still ends it). ``ops``: after the timed pairs, the pair loop runs
    a few untimed ones under ``torch.profiler`` and leaves each op's change in ``self.ops``
    (:func:`.where_ops.profile_ops`)."""

    # random steps (±50%): on a fixed 1 ms grid the samples' phase in a block of A and in one of B (blocks
    # of other lengths) stayed alike for a whole comparison; resampling the pairs did not see that, and an
    # untouched function was named in 7 of 80 (torch loop → bmm; sd of its Δ over trials 31 µs, its 99%
    # interval ±53 µs) where an A/A named 3 of 120 (bench by hand, 2026-11-27)
    jitter = 0.5

    def __init__(self, thread_id: int | None = None, rate: float = DEFAULT_RATE, min_samples: int = 0,
                 ops: bool = False) -> None:
        super().__init__(threading.get_ident() if thread_id is None else thread_id, rate)
        self.min_samples = int(min_samples)
        self.ops_wanted = bool(ops)  # torch code: the pair loop profiles each op after the timed pairs
        self.ops: Any = None         # ... and leaves the :class:`.where_ops.OpsResult` here
        self.counts = [0, 0]
        self.tag: tuple[int, int, float] | None = None
        self._prev: Any = None  # the block of the sample before
        self.tagged: list[tuple[int, int, tuple[Frame, ...], float]] = []
        self.per_call: dict[tuple[int, int], float] = {}
        self.sampled_s = 0.0

    def begin(self, pair: int, side: int) -> None:
        self.tag = (pair, side, time.perf_counter())

    def end(self, block_s: float, calls: int = 1) -> None:
        """The block just timed took ``block_s`` for ``calls`` calls."""
        tag, self.tag = self.tag, None
        if tag is not None:
            self.per_call[(tag[0], tag[1])] = block_s / max(calls, 1)
            self.sampled_s += block_s

    def _take(self, last: float) -> float:
        """One sample (the paced loop is :class:`~perfmagic.profile.flame.PacedSampler`'s), filed under the
        block that ran when it was read and after; returns its time."""
        tag = self.tag
        f = sys._current_frames().get(self.tid)
        now = time.perf_counter()
        if tag is not None and self.tag is tag:  # the same block when read and after
            self.tagged.append((tag[0], tag[1], frame_stack(f), self._weight(now, last, tag, self._prev)))
            self.counts[tag[1]] += 1
        self._prev = tag
        return now

    def enough(self) -> bool:
        """Whether each side has ``min_samples`` samples (the pair loop may stop on a clear verdict)."""
        return min(self.counts) >= self.min_samples

    def _weight(self, now: float, last: float, tag: tuple[int, int, float], prev: Any) -> float:
        """The time a sample stands for: since the sample before in the same block (a late sample, held
        up while the code kept the GIL in a C call, stands for the whole wait, which its frame, the
        caller, spent); a block's first sample stands for one interval (clipping it to the block's start
        would give the block's first function less than its share), or, when the block began longer ago
        than 1.5 intervals (a start held up by the GIL), for the time since the block began."""
        if prev is tag:
            return now - last
        since = now - tag[2]
        return since if since > 1.5 * self.interval else self.interval


# ---- folding a stack to its row ----------------------------------------------------------------------

def cut(stack: tuple[Frame, ...]) -> tuple[Frame, ...] | None:
    """The frames of the measured code, its outermost first: from the compiled cell's frame (``<cell>``),
    or below the loop that calls a callable; None for a sample in the measuring loop itself."""
    for i, fr in enumerate(stack):
        if fr[0] == CELL:
            return ((CELL, CELL, 0),) + tuple(stack[i + 1:])
    for i in range(len(stack) - 1, -1, -1):
        if stack[i][1] == _CELLS_FILE:
            return tuple(stack[i + 1:]) or None
    return None


def fold(stack: tuple[Frame, ...] | None) -> tuple[Key, tuple[str, ...]]:
    """A sample's row (its innermost user frame, with the library it was in below it) and its folded path
    (user frames by name, a run of library frames as one ``[library]`` node) for the flame graph."""
    if not stack:
        return (HARNESS, "", ""), (HARNESS,)
    path: list[str] = []
    user: Frame | None = None
    lib_below = ""
    nested = CELL_FUNCTION + ".<locals>."
    for name, file, _line in stack:
        if name.startswith(nested):  # a generator expression of the cell: <cell>.<genexpr>
            name = CELL + "." + name[len(nested):]
        lib = library_of(file) if name != CELL else ""
        if lib:
            if not lib_below:
                lib_below = lib
                path.append(f"[{lib}]")
        else:
            user, lib_below = (name, file, _line), ""
            path.append(name)
    if user is None:  # a callable from a library measured directly
        first = stack[0]
        return (first[0], first[1], library_of(first[1])), tuple(path)
    return (user[0], CELL if user[0] == CELL else user[1], lib_below), tuple(path)


# ---- the result --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FunctionDelta:
    """One row of the attribution: a function (with the library folded into it) and its change."""

    name: str
    where: str
    library: str
    a_s: float          # A's self time per call (mean over pairs)
    b_s: float
    delta_s: float      # b_s - a_s
    low_s: float        # the CONFIDENCE interval of delta_s (bootstrap over pairs)
    high_s: float
    share: float | None  # delta_s / the total Δ (None when the total is 0)
    named: bool          # interval excludes 0 and |Δ| ≥ FLOOR of A's time; or its ops' change is named
    ops: Any = None      # torch code on the CPU: the change in the ops it called (a where_ops.OpDelta), or None

    @property
    def by_ops(self) -> bool:
        """Named by its ops' change (profiled), where its sampled interval alone does not exclude 0."""
        return self.ops is not None and self.ops.named and not (self.low_s > 0 or self.high_s < 0)

    @property
    def sure_s(self) -> float:
        """The least |Δ| the evidence that names it allows (the end of its interval nearer 0: of the samples',
        of its ops', whichever is more); 0 when not named. Named rows are ranked by it: a change whose
        interval only just leaves 0 does not head the table above one that is sure."""
        ends = [(self.low_s, self.high_s)] if self.named else []
        if self.ops is not None and self.ops.named:
            ends.append((self.ops.low_s, self.ops.high_s))
        return max((min(abs(lo), abs(hi)) for lo, hi in ends if lo > 0 or hi < 0), default=0.0)

    @property
    def evidence_s(self) -> float:
        """The Δ that names it: its ops' where they name it and the samples do not, else the sampled Δ."""
        return self.ops.delta_s if self.by_ops else self.delta_s


@dataclass(frozen=True, repr=False)
class WhereResult(Displayed):
    """Where a change went, from the samples of both sides filed per pair.

    Raw data: ``keys`` (function, file, library); for every pair with samples of both sides, the sample
    time each key got on side A (``a[i][k]``) and on side B (``b[i][k]``), and the block's time per call
    (``a_call_s[i]``, ``b_call_s[i]``); the folded flame paths with their mean per-call times. A side's
    self time of a function is its share of that side's samples over all pairs times the side's median
    time per call (a ratio estimator: a block of 3 ms holds only ~3 samples, too few for a share of its
    own; the median, so a side's self times add up to the median the verdict shows); its interval
    resamples the pairs. Everything shown is derived from these."""

    renderer: ClassVar[str] = "where"
    primary_metric: ClassVar[str] = "total_delta_s"
    tell_power: ClassVar[float] = TELL_POWER  # :meth:`untold`'s chance, and its largest factor worth a budget
    tell_max: ClassVar[float] = TELL_MAX

    labels: tuple[str, str]
    keys: tuple[Key, ...]
    a: tuple[tuple[float, ...], ...]
    b: tuple[tuple[float, ...], ...]
    a_call_s: tuple[float, ...] = ()
    b_call_s: tuple[float, ...] = ()
    paths: tuple[tuple[str, ...], ...] = ()
    path_a_s: tuple[float, ...] = ()
    path_b_s: tuple[float, ...] = ()
    rate_hz: float = DEFAULT_RATE
    n_samples: int = 0
    pairs_measured: int = 0
    sampled_s: float = 0.0      # seconds of the blocks the sampler saw (its cost is paid in these)
    confidence: float = CONFIDENCE
    floor: float = FLOOR
    seed: int = 0
    file_labels: tuple[tuple[str, str], ...] = ()
    refused: Finding | None = None
    runs: tuple[int | None, int | None] = (None, None)  # the ledger ids of A and B, when they were runs
    shown: bool = False  # asked for (--where): shown whatever the verdict; else only beside a change
    ops: Any = None  # torch code: each op's change (:class:`.where_ops.OpsResult`), else None

    def __post_init__(self) -> None:  # read back from the ledger, the ops are a plain dict: rebuilt
        if isinstance(self.ops, dict):
            from ..record import decode
            from .where_ops import OpsResult

            object.__setattr__(self, "ops", decode(OpsResult, self.ops))

    @property
    def n_pairs(self) -> int:
        return len(self.a)

    @property
    def ok(self) -> bool:
        return self.refused is None and bool(self.a)

    def _estimates(self) -> Any:
        """Memoised on the instance: (A self s, B self s, Δ, Δ low, Δ high, total Δ, total low, total high)."""
        cached = self.__dict__.get("_cache")
        if cached is not None:
            return cached
        import numpy as np

        wa, wb = np.asarray(self.a, dtype=float), np.asarray(self.b, dtype=float)
        ta, tb = np.asarray(self.a_call_s, dtype=float), np.asarray(self.b_call_s, dtype=float)
        p = len(wa)

        def median(t: Any, m: Any) -> Any:  # the median of t under each row of pair counts m
            order = np.argsort(t)
            idx = np.argmax(np.cumsum(m[:, order], axis=1) >= p / 2, axis=1)
            return t[order][idx]

        def self_times(m: Any) -> tuple[Any, Any]:  # m: counts of the pairs (rows of resamples, or one row)
            sa = median(ta, m)[:, None] * (m @ wa) / (m @ wa.sum(axis=1))[:, None]
            sb = median(tb, m)[:, None] * (m @ wb) / (m @ wb.sum(axis=1))[:, None]
            return sa, sb

        sa, sb = self_times(np.ones((1, p)))
        rng = np.random.default_rng(self.seed)
        ba, bb = self_times(rng.multinomial(p, np.full(p, 1.0 / p), size=RESAMPLES).astype(float))
        d = bb - ba
        q = ((1 - self.confidence) / 2 * 100, (1 + self.confidence) / 2 * 100)
        lo, hi = np.percentile(d, q, axis=0)
        tlo, thi = np.percentile(d.sum(axis=1), q)
        out = (sa[0], sb[0], (sb - sa)[0], lo, hi, float((sb - sa).sum()), float(tlo), float(thi))
        object.__setattr__(self, "_cache", out)
        return out

    @property
    def total_delta_s(self) -> float | None:
        return self._estimates()[5] if self.ok else None

    @property
    def total_interval(self) -> tuple[float, float] | None:
        return (self._estimates()[6], self._estimates()[7]) if self.ok else None

    @property
    def a_total_s(self) -> float:
        """A's median time per call over the pairs attributed (its self times add up to it)."""
        return float(statistics.median(self.a_call_s)) if self.a_call_s else 0.0

    @property
    def b_total_s(self) -> float:
        return float(statistics.median(self.b_call_s)) if self.b_call_s else 0.0

    def location(self, key: Key) -> str:
        name, file, _lib = key
        if file in ("", CELL) or file.startswith("<perfmagic"):  # the measured cell's code (A's or B's)
            return "the cell" if name.startswith(CELL) or file else ""
        lab = dict(self.file_labels).get(file)
        if lab is None:
            m = _INPUT_NAME.match(file)
            lab = f"In [{m.group(1)}]" if m else os.path.basename(file)
        return lab

    def rows(self) -> list[FunctionDelta]:
        """Every function: the named ones first, by the change their evidence is sure of
        (:attr:`FunctionDelta.sure_s`), then the others by |Δ|."""
        if not self.ok:
            return []
        sa, sb, d, lo, hi, tot, _tlo, _thi = self._estimates()
        floor = self.floor * self.a_total_s
        out = []
        ops = self.ops if self.ops is not None and self.ops.ok and self.ops.funcs else None
        for k, key in enumerate(self.keys):
            dk, lk, hk = float(d[k]), float(lo[k]), float(hi[k])
            od = ops.function(key) if ops is not None else None
            out.append(FunctionDelta(name=key[0], where=self.location(key), library=key[2], a_s=float(sa[k]),
                                     b_s=float(sb[k]), delta_s=dk, low_s=lk, high_s=hk,
                                     share=dk / tot if tot else None,
                                     named=((lk > 0 or hk < 0) and abs(dk) >= floor) or bool(od and od.named),
                                     ops=od))
        out.sort(key=lambda r: (not r.named, -r.sure_s, -abs(r.evidence_s)))
        return out

    def named(self) -> list[FunctionDelta]:
        return [r for r in self.rows() if r.named]

    def untold(self) -> tuple[FunctionDelta, float] | None:
        """Where the named functions explain less than half of the total Δ: the largest row not named
        whose Δ has the total's sign and is above the floor, and how many times this result's samples
        would tell a change of its size from 0 with :data:`TELL_POWER` chance (the interval narrows as
        one over the root of the samples: factor = (half-width × (z_conf + z_power) / z_conf / |Δ|)²).
        None where the named functions explain it, or nothing unnamed is large enough."""
        tot = self.total_delta_s
        if not tot:
            return None
        rows = self.rows()
        if sum(r.evidence_s for r in rows if r.named) / tot >= 0.5:
            return None
        floor = self.floor * self.a_total_s
        cands = [r for r in rows if not r.named and r.delta_s * tot > 0 and abs(r.delta_s) >= floor]
        if not cands:
            return None
        row = max(cands, key=lambda r: abs(r.delta_s))
        from statistics import NormalDist

        z_conf = NormalDist().inv_cdf((1 + self.confidence) / 2)
        z_pow = NormalDist().inv_cdf(TELL_POWER)
        half = (row.high_s - row.low_s) / 2
        return row, (half * (z_conf + z_pow) / z_conf / abs(row.delta_s)) ** 2

    def tell_budget_s(self, factor: float) -> int:
        """The ``-b`` (whole seconds) that samples ``factor`` times these pairs' time, with a fifth more for
        the loop's own time between the blocks."""
        import math

        return max(1, math.ceil(factor * max(self.sampled_s, 1e-3) * 1.2))

    def share_in(self, names: set[str] | list[str] | tuple[str, ...]) -> float | None:
        """The share of the total Δ that went to these functions (by name; ``%perf next``'s check)."""
        tot = self.total_delta_s
        if not tot:
            return None
        return sum(r.delta_s for r in self.rows() if r.name in set(names)) / tot

    def metrics(self) -> dict[str, Any]:
        iv = self.total_interval
        ops = self.ops.named() if self.ops is not None else []
        return {"total_delta_s": self.total_delta_s, "total_low_s": iv[0] if iv else None,
                "total_high_s": iv[1] if iv else None, "pairs": self.n_pairs, "samples": self.n_samples,
                "named": [r.name for r in self.named()], "ops_named": [r.name for r in ops]}

    def samples(self) -> dict[str, Any]:
        out = {"keys": [list(k) for k in self.keys], "a": [list(x) for x in self.a], "b": [list(x) for x in self.b],
               "a_call_s": list(self.a_call_s), "b_call_s": list(self.b_call_s)}
        if self.ops is not None:
            out["ops"] = {"clock": self.ops.clock, "ops": list(self.ops.ops), "a": [list(x) for x in self.ops.a],
                          "b": [list(x) for x in self.ops.b], "funcs": [list(f) for f in self.ops.funcs],
                          "fa": [list(x) for x in self.ops.fa], "fb": [list(x) for x in self.ops.fb],
                          "no_stacks": self.ops.no_stacks}
        return out

    def to_dict(self) -> dict[str, Any]:
        return {**self.metrics(), "rows": [{**r.__dict__, "ops": r.ops.__dict__ if r.ops else None}
                                           for r in self.rows()],
                "ops": self.ops.to_dict() if self.ops is not None else None}


# ---- from the sampler to the result ------------------------------------------------------------------

def _filed(sampler: PairSampler) -> tuple[dict[tuple[int, int], dict[Key, float]],
                                          dict[tuple[int, int], dict[tuple[str, ...], float]]]:
    """The samples' weights by block and row, and by block and folded path."""
    blocks: dict[tuple[int, int], dict[Key, float]] = {}
    paths: dict[tuple[int, int], dict[tuple[str, ...], float]] = {}
    for pair, side, stack, w in sampler.tagged:
        if w <= 0:
            continue
        key, path = fold(cut(stack))
        blk = blocks.setdefault((pair, side), {})
        blk[key] = blk.get(key, 0.0) + w
        pth = paths.setdefault((pair, side), {})
        pth[path] = pth.get(path, 0.0) + w
    return blocks, paths


def _merge_redefined(blocks: dict[tuple[int, int], dict[Key, float]]) -> None:
    """A function redefined between A and B is one row: the change is in it (:func:`.rows.redefined`)."""
    rename = redefined({k for (_p, s), blk in blocks.items() if s == 0 for k in blk},
                       {k for (_p, s), blk in blocks.items() if s == 1 for k in blk})
    for (_p, s), blk in blocks.items():
        if s == 0:
            for old in rename.keys() & blk.keys():
                blk[rename[old]] = blk.pop(old)


def attribute(sampler: PairSampler, *, labels: tuple[str, str] = ("A", "B"), confidence: float = CONFIDENCE,
              floor: float = FLOOR, file_labels: dict[str, str] | None = None, seed: int = 0,
              runs: tuple[int | None, int | None] = (None, None), shown: bool = False) -> WhereResult:
    """The :class:`WhereResult` of a pair loop's samples (see the module docstring)."""
    blocks, paths = _filed(sampler)
    _merge_redefined(blocks)
    done = sorted({p for p, _s in sampler.per_call})
    both = [p for p in done if (p, 0) in blocks and (p, 1) in blocks]
    base = dict(labels=labels, rate_hz=1.0 / sampler.interval, n_samples=len(sampler.tagged),
                pairs_measured=len(done), confidence=confidence, floor=floor, seed=seed, sampled_s=sampler.sampled_s,
                file_labels=tuple(sorted((file_labels or {}).items())), runs=runs, shown=shown,
                ops=getattr(sampler, "ops", None))
    if len(both) < MIN_PAIRS:
        return WhereResult(keys=(), a=(), b=(), refused=Finding.of(
            "where.few-pairs", pairs=len(both), measured=len(done), need=MIN_PAIRS,
            rate=1.0 / sampler.interval), **base)
    keys = sorted({k for p in both for s in (0, 1) for k in blocks[(p, s)]})
    pkeys = sorted({q for p in both for s in (0, 1) for q in paths[(p, s)]})
    weights = {s: tuple(tuple(blocks[(p, s)].get(k, 0.0) for k in keys) for p in both) for s in (0, 1)}
    calls = {s: tuple(sampler.per_call[(p, s)] for p in both) for s in (0, 1)}
    flame = {}
    for s in (0, 1):  # each path's time per call: its share of the side's samples times the side's median
        tot = sum(sum(paths[(p, s)].values()) for p in both)
        med = statistics.median(calls[s])
        flame[s] = tuple(med * sum(paths[(p, s)].get(q, 0.0) for p in both) / tot for q in pkeys)
    return WhereResult(keys=tuple(keys), a=weights[0], b=weights[1], a_call_s=calls[0], b_call_s=calls[1],
                       paths=tuple(pkeys), path_a_s=flame[0], path_b_s=flame[1], **base)


__all__ = ["CONFIDENCE", "DEFAULT_RATE", "FLOOR", "TELL_MAX", "TELL_POWER", "WHERE_MIN_SAMPLES", "FunctionDelta", "PairSampler", "WhereResult", "attribute",
           "cut", "fold", "library_of"]
