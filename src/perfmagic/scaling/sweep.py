"""The scaling sweep: time a cell at several worker counts, fit Amdahl and the USL, say how many workers pay.

``amdahl(code_or_fn, [1, 2, 4, 8])`` runs the cell at each worker count through
:func:`perfmagic._engine.bench` (no memory pass, no environment capture, a small budget per point) in
*interleaved rounds*: round r visits every worker count, in an order rotated and reversed from round to
round, so slow drift of the machine (thermal, other processes) spreads over all points instead of biasing
the fit. A point's time is the median of the per-call times pooled over its rounds; its CI is the
distribution-free CI of that median. Speedups are relative to the smallest worker count (1 when given).

Modes: ``"variable"`` injects ``var=N`` into a copy of the namespace (code) or calls ``fn(N)``;
``"threads"`` sets torch's threads (only if torch is already imported) and the BLAS/OpenMP pools
(threadpoolctl) to N around each measurement, and restores them afterwards, also after an exception.

A failure at one worker count is recorded for that count and the others go on; when every count fails
the first exception propagates unchanged. Ctrl-C keeps the points measured, fits them and raises
:class:`~perfmagic.errors.BenchInterrupted` carrying the partial :class:`AmdahlResult`.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import numbers
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import models as _scaling
from ..core import stats as _stats
from ..errors import BadOptionError, BenchInterrupted
from ..findings import Finding
from ..render.units import fmt_time
from ..timing.results import BenchResult
from .gilprobe import ThreadEvidence, ThreadSampler
from .result import DEFAULT_BUDGET_PER_POINT, LOAD_NAME_CORES, AmdahlResult, ScalingPoint
from ..core.load import usable_cores

MODES = ("variable", "threads")
FLAT_RATIO = 1.10          # max/min time below this (and overlapping CIs, or below FLAT_RATIO_SURE) -> flat
FLAT_RATIO_SURE = 1.05
GIL_SPEEDUP = 1.15
GIL_SPEEDUP_ONE_CORE = 1.5  # below this, and never more than ~1 core busy, threads are still serialized
LOAD_WARN_CORES = 0.5
LOAD_CAP_FREE = 1.5         # fewer free cores than this: no parallel speedup is possible, whatever the code
MIN_COUNTS_TO_FIT = 3
_THREADY = re.compile("|".join(("Thread", "threading", r"concurrent\.futures", r"\.map\(", r"submit\(")))


# ---- the sweep ------------------------------------------------------------------------------------
def _check_workers(workers: Any) -> list[int]:
    fix = "e.g. workers=[1, 2, 4, 8]"
    if isinstance(workers, (str, bytes)) or not isinstance(workers, Sequence) and not hasattr(workers, "__iter__"):
        raise BadOptionError("workers", workers, "a list of worker counts (integers >= 1)", fix)
    ws = list(workers)
    for w in ws:
        if isinstance(w, bool) or not isinstance(w, numbers.Integral):
            raise BadOptionError("workers", workers, "integer worker counts (no fractions, no text)", fix)
        if w < 1:
            raise BadOptionError("workers", workers, "worker counts >= 1", fix)
    out = sorted({int(w) for w in ws})
    if len(out) < 2:
        raise BadOptionError("workers", workers, "at least two distinct worker counts", fix)
    return out


@contextlib.contextmanager
def thread_limits(n: int) -> Iterator[None]:
    """torch (if already imported) and BLAS/OpenMP pools limited to ``n`` threads; restored on exit."""
    torch = sys.modules.get("torch")
    old = torch.get_num_threads() if torch is not None else None
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency
        threadpool_limits = None
    with (threadpool_limits(limits=n) if threadpool_limits is not None else contextlib.nullcontext()):
        try:
            if torch is not None:
                torch.set_num_threads(n)
            yield
        finally:
            if torch is not None and old is not None:
                torch.set_num_threads(old)


def _source(fn_or_code: Any) -> str:
    if isinstance(fn_or_code, str):
        return fn_or_code
    try:
        return inspect.getsource(fn_or_code)
    except (OSError, TypeError):
        return getattr(fn_or_code, "__qualname__", repr(fn_or_code))


def _checked_options(code: Any, workers: Any, mode: str, var: str, rounds: Any,
                     budget: float | None) -> tuple[list[int], float]:
    """The worker counts and the budget per count, or :class:`BadOptionError` naming the bad option."""
    ns = _check_workers(workers)
    if mode not in MODES:
        raise BadOptionError("mode", mode, "one of " + ", ".join(MODES))
    if mode == "variable" and (not isinstance(var, str) or not var.isidentifier()):
        raise BadOptionError("var", var, "a Python identifier", "e.g. var='workers'")
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise BadOptionError("rounds", rounds, "an integer >= 1", "e.g. rounds=3")
    from ..timing.bench import check_budget

    check_budget(budget, per="worker count")
    if not isinstance(code, str) and not callable(code):
        raise BadOptionError("code", code, "code (a string) or a callable")
    return ns, float(budget) if budget is not None else DEFAULT_BUDGET_PER_POINT


def _others_cores(probe: Any, kids0: float | None, t_kids: float) -> float | None:
    """Other processes' busy cores over one point (the probe stopped), less this process's children
    (the cell's worker processes are not others)."""
    import time

    o = probe.stop()
    kids1 = _descendants_cpu()
    if o is not None and kids0 is not None and kids1 is not None:  # children are not others
        o = max(0.0, o - (kids1 - kids0) / max(time.perf_counter() - t_kids, 1e-9))
    return o


def _points(ns: list[int], results: dict[int, list[BenchResult]], errors: dict[int, str],
            own: dict[int, list[float]], others_at: dict[int, list[float]],
            evidence: dict[int, list[ThreadEvidence]]) -> tuple[ScalingPoint, ...]:
    """One point per worker count from its rounds: the results, the error, own and others' cores, the
    thread evidence merged."""
    return tuple(ScalingPoint(n, tuple(results[n]), errors.get(n),
                              _stats.median(own[n]) if own[n] else None,
                              _stats.median(others_at[n]) if others_at[n] else None,
                              ThreadEvidence.merge(evidence[n])) for n in ns)


@dataclass(frozen=True)
class _SweepSpec:
    """What every point of one sweep runs: the code, the worker counts, the mode and the budget of a round."""
    code: Any
    ns: list[int]
    mode: str
    var: str
    setup: str
    base_ns: dict[str, Any]
    per_round: float
    rounds: int
    filename: str | None
    progress: Callable[[float, str], None] | None

    def stmt_for(self, n: int) -> tuple[Any, dict[str, Any] | None]:
        """The statement and the namespace for ``n`` workers: ``var=N`` injected into a copy of the
        namespace (code), a call ``code(N)`` (a callable), or the code unchanged (threads mode)."""
        code, is_text = self.code, isinstance(self.code, str)
        if self.mode == "threads":
            return code, (self.base_ns if is_text else None)
        if is_text:
            return code, {**self.base_ns, self.var: n}
        return (lambda: code(n)), None

    def label(self, n: int) -> str:
        return f"{self.var}={n}" if self.mode == "variable" else f"threads={n}"


@dataclass
class _Gathered:
    """What the rounds measured so far, per worker count; filled in place, so Ctrl-C keeps every point."""
    results: dict[int, list[BenchResult]]
    own: dict[int, list[float]]
    others_at: dict[int, list[float]]
    evidence: dict[int, list[ThreadEvidence]]
    errors: dict[int, str] = field(default_factory=dict)
    others: list[float] = field(default_factory=list)
    first_exc: BaseException | None = None
    done: int = 0

    @classmethod
    def over(cls, ns: list[int]) -> _Gathered:
        return cls({n: [] for n in ns}, {n: [] for n in ns}, {n: [] for n in ns}, {n: [] for n in ns})

    def points(self, ns: list[int]) -> tuple[ScalingPoint, ...]:
        return _points(ns, self.results, self.errors, self.own, self.others_at, self.evidence)


def _round_order(ns: list[int], r: int) -> list[int]:
    """The worker counts in round ``r``: rotated by ``r`` and, every other round, reversed."""
    k = r % len(ns)
    order = ns[k:] + ns[:k]
    if r % 2:
        order = order[::-1]
    return order


def _rounds(spec: _SweepSpec, got: _Gathered) -> None:
    """Every round over the worker counts still working, each measurement into ``got``."""
    __tracebackhide__ = True
    for r in range(spec.rounds):
        for n in _round_order(spec.ns, r):
            if n in got.errors:
                continue
            _measure_at(spec, n, got)


def _measure_at(spec: _SweepSpec, n: int, got: _Gathered) -> None:
    """One round's measurement at ``n`` workers, with the load of other processes and the thread
    evidence around it, into ``got``. An exception of the code is recorded for ``n`` (the other counts go
    on); Ctrl-C keeps the partial measurement in ``got`` and propagates."""
    __tracebackhide__ = True
    import time

    from ..timing.bench import bench
    from ..core.load import LoadProbe

    stmt, g = spec.stmt_for(n)
    warm: Any = "auto"
    if got.results[n] and got.results[n][-1].raw and got.results[n][-1].median > 5e-3:
        warm = 1
    probe = LoadProbe().start()
    kids0, t_kids = _descendants_cpu(), time.perf_counter()
    sampler = ThreadSampler().start()
    try:
        with thread_limits(n) if spec.mode == "threads" else contextlib.nullcontext():
            res = bench(stmt, spec.setup, globals=g, budget=spec.per_round, memory=False, capture_env=False,
                        warmup=warm, label=spec.label(n), filename=spec.filename)
    except BenchInterrupted as exc:
        if exc.result is not None and exc.result.raw:
            got.results[n].append(exc.result)
        raise
    except Exception as exc:  # the user's code failed at this N: record it, keep the others
        got.errors[n] = f"{type(exc).__name__}: {exc}"
        if got.first_exc is None:
            got.first_exc = exc
        return
    finally:
        ev = sampler.stop()
        o = _others_cores(probe, kids0, t_kids)
        if o is not None:
            got.others.append(o)
            got.others_at[n].append(o)
    # the engine's own figure covers its measurement only: the full GC collection before
    # it (~0.3 s of one core on a big heap) would make sleeping threads look CPU-bound
    busy = res.env.get("own_cores", probe.own_cores)
    if busy is not None:
        got.own[n].append(busy)
    got.evidence[n].append(ev)
    got.results[n].append(res)
    got.done += 1
    if spec.progress is not None:
        spec.progress(got.done / (len(spec.ns) * spec.rounds), f"{spec.label(n)}: {fmt_time(res.median)}")


def amdahl(
    code: str | Callable[..., Any],
    workers: Sequence[int] = (1, 2, 4),
    *,
    mode: str = "variable",
    var: str = "workers",
    setup: str = "",
    globals: Mapping[str, Any] | None = None,
    budget: float | None = None,
    rounds: int = 3,
    weak: bool = False,
    progress: Callable[[float, str], None] | None = None,
    filename: str | None = None,
) -> AmdahlResult:
    """Time ``code`` at each worker count and fit the scaling laws (see the module docstring).
    ``filename`` names the code in tracebacks.

    ``budget`` is seconds per worker count (default 1 s), split over ``rounds`` interleaved rounds; the
    whole sweep takes about ``budget × len(workers)`` plus one cold call per point and round.
    ``weak=True``: the cell's work grows with N (weak scaling): scaled speedups and Gustafson's law.
    ``progress(fraction, message)`` is called after each measurement (fraction of the sweep done).
    """
    __tracebackhide__ = True
    import time

    ns, per_point = _checked_options(code, workers, mode, var, rounds, budget)
    base_ns = dict(globals) if globals is not None else {"__name__": "__perfmagic__"}
    spec = _SweepSpec(code, ns, mode, var, setup, base_ns, per_point / rounds, rounds, filename, progress)
    got = _Gathered.over(ns)
    interrupted = False
    t_start = time.perf_counter()
    try:
        _rounds(spec, got)
    except KeyboardInterrupt:
        interrupted = True
    points = got.points(ns)
    if not interrupted and got.first_exc is not None and not any(p.ok for p in points):
        raise got.first_exc
    result = analyse(points, mode=mode, var=var, weak=weak, code=_source(code), rounds=rounds,
                     budget_per_point_s=per_point, status="interrupted" if interrupted else "ok",
                     others_cores=_stats.median(got.others) if got.others else None,
                     wall_s=time.perf_counter() - t_start)
    if interrupted:
        raise BenchInterrupted(result if any(p.ok for p in points) else None)
    return result


def analyse(points: Sequence[ScalingPoint], *, mode: str = "variable", var: str = "workers", weak: bool = False,
            code: str = "", rounds: int = 0, budget_per_point_s: float = DEFAULT_BUDGET_PER_POINT,
            status: str = "ok", others_cores: float | None = None, wall_s: float = 0.0,
            cores: int | None = None) -> AmdahlResult:
    """Fit and diagnose measured points (also usable on points built by hand, e.g. from a ledger).

    The order of the diagnosis: other processes' load first (when it leaves fewer than 1.5 cores free, no
    speedup can be expected whatever the code: "cannot tell"); then, for threads that gave no speedup, the
    evidence of :mod:`perfmagic.scaling.gilprobe` (the GIL verdict needs two or more Python threads working,
    the GIL found held by them, and about one busy core); then the fits, only on 3 or more worker counts,
    and a fit whose parameters sit at a bound, whose AICc is infinite or that misses the points is marked
    unreliable instead of being reported as a finding. Notes and warnings are
    :class:`~perfmagic.findings.Finding` s, worded by :mod:`perfmagic.render.findings`."""
    points = tuple(sorted(points, key=lambda p: p.n))
    good = [p for p in points if p.ok]
    cores = usable_cores() if cores is None else cores
    load_caps, warnings = _sweep_warnings(points, good, others_cores, cores)
    base = AmdahlResult(points=points, mode=mode, var=var, weak=weak, code=code, rounds=rounds,
                        budget_per_point_s=budget_per_point_s, status=status, wall_s=wall_s,
                        others_cores=others_cores, cores=cores)
    if len(good) < 2:
        return _replace(base, warnings=tuple(warnings), diagnosis="none")
    s = _Shape.of(base, good, cores, load_caps)
    if s.superlinear:
        n_, s_ = max(s.superlinear, key=lambda x: x[1] * s.ns[0] / x[0])
        warnings.append(Finding.of("scaling.super-linear", n=n_, speedup=s_, ideal=n_ / s.ns[0]))
    thready = mode == "threads" or bool(_THREADY.search(code or ""))
    if not weak and ((thready and (s.no_speedup or s.load_bound)) or (s.load_explains and s.superlinear)):
        return _diagnose_threads(base, s, good, warnings, others_cores)
    if s.flat:
        return _replace(base, flat=True, diagnosis="flat", warnings=tuple(warnings))
    if len(good) < MIN_COUNTS_TO_FIT:
        eg = (f"{var}=1,2,4" if mode == "variable" else "--threads 1,2,4")
        return _replace(base, diagnosis="speedups-only", warnings=tuple(warnings),
                        notes=(Finding.of("scaling.few-counts", k=len(good), eg=eg),))
    return _fitted(base, warnings)


def _sweep_warnings(points: Sequence[ScalingPoint], good: list[ScalingPoint], others_cores: float | None,
                    cores: int) -> tuple[bool, list[Finding]]:
    """Whether others' load left too few cores for any speedup, and the warnings about the sweep itself:
    that load, failed points, worker counts beyond the usable cores (where the workers kept cores busy:
    a median of 0.4 cores or more at N ≥ 2, or not measured)."""
    warnings: list[Finding] = []
    load_named = others_cores is not None and others_cores >= LOAD_NAME_CORES
    load_caps = load_named and others_cores is not None and cores - others_cores < LOAD_CAP_FREE
    # workers that mostly wait (sleep, I/O, a lock held elsewhere) need no free core: a load cannot cap them
    busy_at_n = [p.own_cores for p in good if p.n >= 2 and p.own_cores is not None]
    waiting = bool(busy_at_n) and _stats.median(busy_at_n) < 0.4
    if load_named:
        warnings.append(Finding.of("scaling.load", others=others_cores, cores=cores, caps=load_caps,
                                   waiting_cores=_stats.median(busy_at_n) if waiting else None))
    warnings += [Finding.of("scaling.point-failed", n=p.n, error=p.error) for p in points if p.error is not None]
    # counts beyond the usable cores oversubscribe CPU-bound workers only: workers that mostly wait keep no
    # core busy (notebook 00's sleeping pool said "can only slow down" beside its own 3.13× at 8 on 2 cores)
    over = [p.n for p in points if p.n > cores]
    if over and not waiting:
        warnings.append(Finding.of("scaling.over-cores", over=over, cores=cores))
    return load_caps, warnings


@dataclass(frozen=True)
class _Shape:
    """What the measured points show before any fit: flat, capped at one core, explained by others' load."""

    ns: tuple[int, ...]
    flat: bool
    one_core: bool
    best_hi: float
    hi_own: tuple[float, ...]
    no_speedup: bool
    load_explains: bool
    load_bound: bool
    superlinear: tuple[tuple[int, float], ...]

    @staticmethod
    def of(base: AmdahlResult, good: list[ScalingPoint], cores: int, load_caps: bool) -> _Shape:
        ns, sp = base.ns, base.speedups
        meds = [p.median for p in good]
        cis = [p.ci for p in good]
        ratio = max(meds) / min(meds)
        overlap = max(c[0] for c in cis) <= min(c[1] for c in cis)
        flat = not base.weak and (ratio < FLAT_RATIO_SURE or (ratio < FLAT_RATIO and overlap))
        hi_own = tuple(p.own_cores for p in good if p.n >= 2 and p.own_cores is not None)
        one_core = bool(hi_own) and 0.6 <= _stats.median(hi_own) <= 1.35
        best_hi = max((s for n, s in zip(ns, sp) if n >= 2), default=math.inf)
        # with >= 2 cores free to use, threads that never get past one busy core are serialized even when the
        # speedup measured is a little above GIL_SPEEDUP (hand-off timing can shave a bit off the baseline)
        # and when the busy cores did not grow with N at all (from one busy core at N = 1), no speedup can come
        # from parallel work: a larger one measured is the machine changing speed between the points
        own1 = good[0].own_cores if good[0].n == 1 else None
        busy_flat = bool(hi_own) and own1 is not None and own1 >= 0.6 and max(hi_own) <= 1.2 * own1 + 0.1
        # (only for workers that keep a core busy: threads that wait overlap their waits without any core, and
        # a speedup below 1.5× from them is real: a planted S = 0.75 gives 1.14× and 1.22× at N = 2 and 4)
        capped = (one_core and max(hi_own) <= 1.35 and cores >= 2
                  and (best_hi < GIL_SPEEDUP_ONE_CORE or busy_flat))
        # beside a load that leaves at most one core free, a process that never used more than about one core
        # cannot show parallel speedup; whatever "speedup" was measured is the load moving between the points
        # (only for a process that needs cores: threads that sleep or wait on I/O are not held back by a load)
        load_explains = load_caps and bool(hi_own) and _stats.median(hi_own) >= 0.4
        # a speedup well beyond N/N₀ cannot come from the workers: the baseline ran slow (load, oversubscription)
        superlinear = tuple((n, s) for n, s in zip(ns[1:], sp[1:]) if not base.weak and s > 1.3 * n / ns[0])
        return _Shape(ns, flat, one_core, best_hi, hi_own, flat or best_hi <= GIL_SPEEDUP or capped, load_explains,
                      load_explains and max(hi_own) <= 1.35, superlinear)


def _diagnose_threads(base: AmdahlResult, s: _Shape, good: list[ScalingPoint], warnings: list[Finding],
                      others_cores: float | None) -> AmdahlResult:
    """Why threads gave no speedup: others' load, the GIL, one Python thread, native code, or cannot tell."""
    notes: list[Finding] = []
    ev = ThreadEvidence.merge(p.threads for p in good if p.n >= 2)
    if s.load_explains:
        diag = "load"
        if ev is not None and ev.gil_bound():
            notes.append(Finding.of("scaling.gil-too"))
    elif ev is not None and ev.gil_bound() and s.one_core:
        diag = "gil"
        notes.append(Finding.of("scaling.gil", best=s.best_hi))
        if s.best_hi >= GIL_SPEEDUP_ONE_CORE:
            warnings.append(Finding.of("scaling.speed-changed", best=s.best_hi))
    elif (ev is not None and ev.working <= 1 and base.mode == "threads" and ev.held_share is not None
          and ev.held_share >= 0.4 and s.one_core):
        diag = "one-thread"
    elif ev is not None and ev.gil_free():
        diag = "native"
        notes.append(Finding.of("scaling.native", threads=base.mode == "threads"))
    else:
        diag = "cannot-tell"
    notes.append(Finding.of("scaling.evidence", own_cores=_stats.median(s.hi_own) if s.hi_own else None,
                            others=others_cores, **(ev.evidence() if ev is not None else {})))
    return _replace(base, flat=s.flat, gil=diag == "gil", diagnosis=diag, warnings=tuple(warnings),
                    notes=tuple(notes))


def _fitted(base: AmdahlResult, warnings: list[Finding]) -> AmdahlResult:
    """Fit Gustafson (weak scaling) or Amdahl and the USL, mark the unreliable fits, choose a model."""
    ns, sp = base.ns, base.speedups
    b = ns[0]
    notes: list[Finding] = []
    fits: dict[str, Any] = {}
    unreliable: dict[str, Finding] = {}
    if base.weak:
        fg = _scaling.fit_gustafson(ns, sp, base_n=b)
        fits["gustafson_fit"] = fg
        if (why := _unreliable(fg, ns, sp)) is not None:
            unreliable["gustafson"] = why
        best = None if unreliable else "gustafson"
    else:
        fa = _scaling.fit_amdahl(ns, sp, base_n=b)
        fu = _scaling.fit_usl(ns, sp, base_n=b)
        fits.update(amdahl_fit=fa, usl_fit=fu)
        for f in (fa, fu):
            if (why := _unreliable(f, ns, sp)) is not None:
                unreliable[f.model] = why
        best, choice_notes = _scaling.choose_model(fa if "amdahl" not in unreliable else None,
                                                   fu if "usl" not in unreliable else None, max(ns))
        if not unreliable:
            notes += choice_notes
        kf = [e for n, e in zip(ns, base.karp_flatt) if n > b and e == e]
        kn = [n for n, e in zip(ns, base.karp_flatt) if n > b and e == e]
        if len(kf) >= 2 and kf[-1] > 0.05 and _rising(kn, kf):
            notes.append(Finding.of("scaling.kf-rise"))
    if any(s < 1 / 1.15 for n, s in zip(ns, sp) if n > b):
        notes.append(Finding.of("scaling.slower"))
    return _replace(base, best_model=best, warnings=tuple(warnings), notes=tuple(notes),
                    diagnosis="fit" if best is not None else "fit-unreliable",
                    unreliable=tuple(unreliable.items()), **fits)


def _unreliable(fit: _scaling.Fit, ns: Sequence[int], sp: Sequence[float]) -> Finding | None:
    """Why a fit must not be reported as a finding, or None: no degree of freedom left (the fitted speedup at
    N = 1, γ, counts as a parameter: the measured baseline is a noisy point like the others), a parameter at
    an upper bound (S = 1, σ = 1, κ = 1), at its lower bound 0 while the data lie beyond what the model can
    bend to (super-linear speedups), or predictions that miss the points by more than 15% (RMS, relative)."""
    if fit.dof <= 0:
        return Finding.of("fit.no-dof", n=fit.n, p=len(fit.params), sweep=True)
    for k, v in fit.params.items():
        if k in ("S", "sigma", "kappa") and v >= 0.999:
            return Finding.of("fit.at-bound", param=k, value=v)
    b = ns[0]
    superlinear = any(s > 1.05 * n / b for n, s in zip(ns, sp) if n > b)
    if superlinear and all(v <= 1e-9 for k, v in fit.params.items() if k in ("S", "sigma")):
        return Finding.of("fit.super-linear", what="S" if "S" in fit.params else "σ", sweep=True)
    rel = [(fit.predict(n) - s) / s for n, s in zip(ns, sp)]
    rms = math.sqrt(sum(r * r for r in rel) / len(rel))
    if rms > 0.15:
        return Finding.of("fit.misses", rms=rms)
    return None


def _descendants_cpu() -> float | None:
    """CPU seconds used so far by the live child processes of this process and theirs (``/proc``), or None.

    A cell that runs a process pool makes its children busy: without this they would count as "other
    processes' load" and the sweep would blame the load for the speedup the children bring. Planted
    noisy neighbours (:func:`perfmagic.core.neighbours.busy_neighbours`, known by their PIDs) stand
    for other users' work: they, and anything under them, stay "others"."""
    from ..core.load import processes_cpu_s
    from ..core.neighbours import planted_pids

    planted = planted_pids()
    try:
        todo, seen = [os.getpid()], set()
        while todo:
            pid = todo.pop()
            for tdir in os.listdir(f"/proc/{pid}/task"):
                try:
                    with open(f"/proc/{pid}/task/{tdir}/children") as f:
                        kids = [int(x) for x in f.read().split()]
                except OSError:
                    continue
                for k in kids:
                    if k in seen or k in planted:
                        continue
                    seen.add(k)
                    todo.append(k)
    except (OSError, ValueError, AttributeError):
        return None
    return processes_cpu_s(sorted(seen)) or 0.0


def _rising(ns: list[int], es: list[float]) -> bool:
    """Karp–Flatt rises: a least-squares slope whose rise over the range is clearly above noise."""
    mn, me = sum(ns) / len(ns), sum(es) / len(es)
    sxx = sum((n - mn) ** 2 for n in ns)
    if sxx <= 0:
        return False
    slope = sum((n - mn) * (e - me) for n, e in zip(ns, es)) / sxx
    rise = slope * (max(ns) - min(ns))
    ups = sum(1 for a, c in zip(es, es[1:]) if c > a)
    return rise > max(0.05, 0.5 * abs(_stats.median(es))) and ups >= (len(es) - 1) * 2 / 3


def _replace(r: AmdahlResult, **kw: Any) -> AmdahlResult:
    import dataclasses

    return dataclasses.replace(r, **kw)


__all__ = ["amdahl", "analyse", "AmdahlResult", "ScalingPoint", "thread_limits", "usable_cores", "MODES"]
