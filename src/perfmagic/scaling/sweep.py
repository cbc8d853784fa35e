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
:class:`~perfmagic._errors.BenchInterrupted` carrying the partial :class:`AmdahlResult`.
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
from dataclasses import dataclass
from typing import Any

from . import models as _scaling
from ..core import stats as _stats
from ..errors import BadOptionError, BenchInterrupted
from ..render.units import fmt_time
from ..timing.results import BenchResult

MODES = ("variable", "threads")
DEFAULT_BUDGET_PER_POINT = 1.0
FLAT_RATIO = 1.10          # max/min time below this (and overlapping CIs, or below FLAT_RATIO_SURE) -> flat
FLAT_RATIO_SURE = 1.05
GIL_SPEEDUP = 1.15
GIL_SPEEDUP_ONE_CORE = 1.5  # below this, and never more than ~1 core busy, threads are still serialized
LOAD_WARN_CORES = 0.5
KF_RISE_NOTE = "the serial fraction grows with N: overhead or oversubscription, not serial code"
GIL_NOTE = ("threads serialize on the GIL: Python-bound work gets no speedup from threads "
            "(at most {x:.2f}× at N ≥ 2 while the process kept only about one core busy); use processes "
            "(ProcessPoolExecutor, multiprocessing) or code that releases the GIL (NumPy, torch, native code)")
_THREADY = re.compile(r"Thread|threading|concurrent\.futures|\.map\(|submit\(")


@dataclass(frozen=True)
class ScalingPoint:
    """One worker count: its per-round BenchResults (raw samples kept), or the error it raised."""

    n: int
    results: tuple[BenchResult, ...] = ()
    error: str | None = None
    own_cores: float | None = None     # CPU cores this process used while timing (process_time / wall)
    others_cores: float | None = None  # cores other processes kept busy meanwhile

    @property
    def times(self) -> tuple[float, ...]:
        return tuple(t for r in self.results for t in r.times)

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.times)

    @property
    def median(self) -> float:
        return _stats.median(self.times) if self.times else math.nan

    @property
    def ci(self) -> tuple[float, float]:
        if not self.times:
            return (math.nan, math.nan)
        lo, hi, _ = _stats.median_ci(self.times)
        return lo, hi


@dataclass(frozen=True)
class AmdahlResult:
    """A scaling sweep: points, derived speedup/efficiency/Karp–Flatt, both fits, the choice and advice."""

    points: tuple[ScalingPoint, ...]
    mode: str = "variable"
    var: str = "workers"
    weak: bool = False
    code: str = ""
    rounds: int = 0
    budget_per_point_s: float = DEFAULT_BUDGET_PER_POINT
    status: str = "ok"  # "ok" | "interrupted"
    amdahl_fit: _scaling.Fit | None = None
    usl_fit: _scaling.Fit | None = None
    gustafson_fit: _scaling.Fit | None = None
    best_model: str | None = None
    flat: bool = False
    gil: bool = False
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    wall_s: float = 0.0

    # ---- derived per point --------------------------------------------------------------------
    @property
    def good(self) -> tuple[ScalingPoint, ...]:
        return tuple(p for p in self.points if p.ok)

    @property
    def base_n(self) -> int | None:
        g = self.good
        return min(p.n for p in g) if g else None

    @property
    def ns(self) -> tuple[int, ...]:
        return tuple(p.n for p in self.good)

    @property
    def speedups(self) -> tuple[float, ...]:
        """T(base)/T(N) (strong scaling) or (N/base)·T(base)/T(N) (weak scaling: scaled speedup)."""
        g = self.good
        if not g:
            return ()
        t0 = g[0].median
        return tuple(_scaling.speedup(t0, p.median) * ((p.n / g[0].n) if self.weak else 1.0) for p in g)

    @property
    def speedup_ci(self) -> tuple[tuple[float, float], ...]:
        g = self.good
        if not g:
            return ()
        t0 = g[0].median
        k = [(p.n / g[0].n) if self.weak else 1.0 for p in g]
        return tuple((t0 / p.ci[1] * f, t0 / p.ci[0] * f) for p, f in zip(g, k))

    @property
    def efficiencies(self) -> tuple[float, ...]:
        b = self.base_n
        return tuple(_scaling.efficiency(s, n, b) for s, n in zip(self.speedups, self.ns))

    @property
    def karp_flatt(self) -> tuple[float, ...]:
        b = self.base_n
        return tuple(_scaling.karp_flatt(s, n, b) for s, n in zip(self.speedups, self.ns))

    @property
    def errors(self) -> dict[int, str]:
        return {p.n: p.error for p in self.points if p.error is not None}

    # ---- advice -------------------------------------------------------------------------------
    @property
    def recommended_workers(self) -> int | None:
        """The largest measured N before efficiency drops under 50% or the speedup stops rising."""
        ns, sp, ef = self.ns, self.speedups, self.efficiencies
        if not ns or self.flat or self.gil:
            return ns[0] if ns else None
        if self.weak:
            ok = [n for n, e in zip(ns, ef) if e >= 0.5]
            return max(ok) if ok else ns[0]
        best_n, best_s = ns[0], sp[0]
        for n, s, e in zip(ns[1:], sp[1:], ef[1:]):
            if e < 0.5 or s <= best_s * 1.02:
                break
            best_n, best_s = n, s
        return best_n

    @property
    def ceiling(self) -> float | None:
        return self.amdahl_fit.ceiling if self.amdahl_fit else None

    @property
    def peak_n(self) -> float | None:
        return self.usl_fit.peak_n if self.usl_fit else None

    @property
    def serial_fraction(self) -> float | None:
        f = self.gustafson_fit if self.weak else self.amdahl_fit
        return f.params["S"] if f else None

    def advice(self) -> list[str]:
        out: list[str] = []
        rec = self.recommended_workers
        if rec is not None and not self.flat and len(self.ns) >= 2:
            out.append(f"worth it up to {rec} workers (measured: beyond that efficiency < 50% or the speedup "
                       "stops rising)")
        a = self.amdahl_fit
        if a is not None and not self.weak:
            s = a.params["S"]
            if s > 0:
                half = 1 + 1 / s
                out.append(f"Amdahl: serial fraction S = {_pm(s, a.stderr['S'])} -> at most {1 / s:.3g}× on any "
                           f"number of workers; efficiency falls below 50% beyond N ≈ {half:.3g}. Shrink the serial "
                           "part before adding workers")
            else:
                out.append("Amdahl: no serial fraction detected (S ≈ 0): scaling is ideal over the range measured")
        u = self.usl_fit
        if u is not None and not self.weak:
            sg, kp = u.params["sigma"], u.params["kappa"]
            line = f"USL: contention σ = {_pm(sg, u.stderr['sigma'])}, coherency κ = {_pm(kp, u.stderr['kappa'], 3)}"
            pk = u.peak_n
            if pk is not None and self.best_model == "usl":
                line += f"; throughput peaks at N* ≈ {pk:.3g} workers and falls beyond (retrograde)"
            elif pk is not None:
                line += f"; its peak N* ≈ {pk:.3g} is not supported over Amdahl (AICc)"
            out.append(line)
        g = self.gustafson_fit
        if g is not None:
            out.append(f"Gustafson (weak scaling): serial fraction S = {_pm(g.params['S'], g.stderr['S'])}; "
                       f"scaled speedup at N = {max(self.ns)}: {_scaling.gustafson(g.params['S'], max(self.ns)):.3g}×")
        return out

    # ---- text -----------------------------------------------------------------------------------
    def verdict(self) -> str:
        g = self.good
        tag = "  [INTERRUPTED]" if self.status != "ok" else ""
        if len(g) < 2:
            return f"scaling: fewer than two worker counts measured successfully — nothing to fit{tag}"
        if self.gil:
            return f"no speedup from threads: the workers serialize on the GIL — use processes{tag}"
        if self.flat:
            lo, hi = min(p.median for p in g), max(p.median for p in g)
            return (f"the time does not change with {self.var if self.mode == 'variable' else 'threads'} "
                    f"({fmt_time(lo)} – {fmt_time(hi)}, within noise): the cell ignores the worker count or "
                    f"does not run in parallel; nothing to fit{tag}")
        ns, sp, ef = self.ns, self.speedups, self.efficiencies
        i = max(range(len(sp)), key=lambda j: sp[j])
        rel = "" if self.base_n == 1 else f" relative to N = {self.base_n}"
        kind = "scaled speedup" if self.weak else "speedup"
        head = f"best {kind} {sp[i]:.2f}×{rel} at N = {ns[i]} ({ef[i]:.0%} efficient)"
        if self.weak and self.gustafson_fit:
            return f"{head} · Gustafson S = {self.gustafson_fit.params['S']:.3f}{tag}"
        if self.best_model == "usl" and self.usl_fit and self.usl_fit.peak_n is not None:
            return f"{head} · USL fits best: peak at N* ≈ {self.usl_fit.peak_n:.3g}, slower beyond{tag}"
        if self.amdahl_fit:
            s = self.amdahl_fit.params["S"]
            ceil = f", ceiling {1 / s:.3g}×" if s > 0 else ", no ceiling in sight"
            return f"{head} · Amdahl S = {s:.3f}{ceil} · worth it up to {self.recommended_workers} workers{tag}"
        return head + tag

    def text(self) -> str:
        lines = [self.verdict()]
        b = self.base_n
        sp, ef, kf = self.speedups, self.efficiencies, self.karp_flatt
        lines.append(f"  {'N':>4}  {'median':>10}  {'95% CI':>23}  {'speedup':>8}  {'effic.':>7}  {'Karp–Flatt':>10}")
        k = 0
        for p in self.points:
            if p.ok:
                lo, hi = p.ci
                e = kf[k]
                kfs = "—" if (p.n == b or e != e) else f"{e:.3f}"
                lines.append(f"  {p.n:>4}  {fmt_time(p.median):>10}  {fmt_time(lo) + ' – ' + fmt_time(hi):>23}  "
                             f"{sp[k]:>7.2f}×  {ef[k]:>7.0%}  {kfs:>10}")
                k += 1
            else:
                lines.append(f"  {p.n:>4}  failed: {p.error or 'not measured'}")
        if b is not None and b != 1:
            lines.append(f"  note: no N = 1 measured: speedups are relative to N = {b}, not to a serial run")
        lines += [f"  {a}" for a in self.advice()]
        if self.best_model and not self.weak and self.amdahl_fit and self.usl_fit:
            lines.append(f"  model choice (AICc): {self.best_model} "
                         f"(Amdahl {self.amdahl_fit.aicc:.1f}, USL {self.usl_fit.aicc:.1f}; lower is better)")
        lines += [f"  note: {n}" for n in self.notes]
        lines += [f"  ! {w}" for w in self.warnings]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return f"<AmdahlResult {self.verdict()}>"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.text())

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        from ..render.display import text_figure_bundle

        return text_figure_bundle(self.text(), self.figure_png(), "measured speedup and fitted models")

    # ---- serialisation ------------------------------------------------------------------------
    def metrics(self) -> dict[str, float | int | str | None]:
        a, u = self.amdahl_fit, self.usl_fit
        s = self.serial_fraction
        f = self.gustafson_fit if self.weak else a
        return {
            "S": s, "S_stderr": f.stderr["S"] if f else None,
            "sigma": u.params["sigma"] if u else None, "kappa": u.params["kappa"] if u else None,
            "peak_n": self.peak_n, "ceiling": (1 / s if s else None) if not self.weak else None,
            "best_model": self.best_model, "recommended_workers": self.recommended_workers,
            "n_points": len(self.good), "max_speedup": max(self.speedups) if self.speedups else None,
            "base_n": self.base_n, "wall_s": self.wall_s,
        }

    def samples_dict(self) -> dict[str, Any]:
        return {"points": [{"n": p.n, "error": p.error, "rounds": [r.samples_dict() for r in p.results]}
                           for p in self.points]}

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "var": self.var, "weak": self.weak, "code": self.code, "status": self.status,
                "rounds": self.rounds, "budget_per_point_s": self.budget_per_point_s, "metrics": self.metrics(),
                "samples": self.samples_dict(), "warnings": list(self.warnings), "notes": list(self.notes)}

    # ---- figure -----------------------------------------------------------------------------
    def figure_png(self) -> bytes | None:
        """Measured speedup (CI error bars), the ideal line, both fitted curves, the USL peak marked."""
        if len(self.good) < 2:
            return None
        import io

        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        ns, sp, ci, b = self.ns, self.speedups, self.speedup_ci, self.base_n or 1
        fig = Figure(figsize=(6.0, 3.6), dpi=100, layout="constrained")
        FigureCanvasAgg(fig)
        ax = fig.add_subplot(1, 1, 1)
        top_n = max(ns)
        pk = self.peak_n
        if pk is not None and self.best_model == "usl" and pk < 4 * top_n:
            top_n = max(top_n, pk * 1.2)
        xs = [b + (top_n - b) * i / 200 for i in range(201)]
        ax.plot(xs, [x / b for x in xs], "--", color="0.6", lw=1, label="ideal")
        if self.weak and self.gustafson_fit:
            ax.plot(xs, [self.gustafson_fit.predict(x) for x in xs], color="tab:green", lw=1.5,
                    label=f"Gustafson S={self.gustafson_fit.params['S']:.3f}")
        if self.amdahl_fit and not self.weak:
            ax.plot(xs, [self.amdahl_fit.predict(x) for x in xs], color="tab:orange",
                    lw=2 if self.best_model == "amdahl" else 1, label=f"Amdahl S={self.amdahl_fit.params['S']:.3f}")
        if self.usl_fit and not self.weak:
            u = self.usl_fit
            ax.plot(xs, [u.predict(x) for x in xs], color="tab:purple", lw=2 if self.best_model == "usl" else 1,
                    label=f"USL σ={u.params['sigma']:.3f} κ={u.params['kappa']:.2g}")
            if pk is not None and xs[0] <= pk <= xs[-1]:
                ax.axvline(pk, color="tab:purple", ls=":", lw=1)
                ax.plot([pk], [u.predict(pk)], "v", color="tab:purple", ms=8, label=f"USL peak N*≈{pk:.3g}")
        lo = [max(s - c[0], 0.0) for s, c in zip(sp, ci)]
        hi = [max(c[1] - s, 0.0) for s, c in zip(sp, ci)]
        ax.errorbar(ns, sp, yerr=[lo, hi], fmt="o", color="tab:blue", capsize=3, label="measured (95% CI)")
        ax.set_xlabel("workers N" if self.mode == "variable" else "threads N")
        ax.set_ylabel("scaled speedup" if self.weak else (f"speedup vs N={b}" if b != 1 else "speedup"))
        ax.set_xlim(0, top_n * 1.05)
        ax.set_ylim(0, max(max(c[1] for c in ci), max(sp)) * 1.15)
        ax.legend(fontsize=7, frameon=False, loc="upper left")
        ax.set_title("scaling" + (" (interrupted)" if self.status != "ok" else ""), fontsize=9, loc="left")
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        return buf.getvalue()


def _pm(x: float, se: float | None, digits: int = 3) -> str:
    if se is None or se != se:
        return f"{x:.{digits}g}"
    return f"{x:.{digits}g} ± {se:.2g}"


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


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


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


def amdahl(
    fn_or_code: str | Callable[..., Any],
    workers: Sequence[int] = (1, 2, 4),
    *,
    mode: str = "variable",
    var: str = "workers",
    setup: str = "",
    globals: Mapping[str, Any] | None = None,
    budget: float | None = None,
    rounds: int = 3,
    weak: bool = False,
    progress: Callable[[int, str], None] | None = None,
    filename: str | None = None,
) -> AmdahlResult:
    """Time ``fn_or_code`` at each worker count and fit the scaling laws (see the module docstring).
    ``filename`` names the code in tracebacks.

    ``budget`` is seconds per worker count (default 1 s), split over ``rounds`` interleaved rounds; the
    whole sweep takes about ``budget × len(workers)`` plus one cold call per point and round.
    ``weak=True``: the cell's work grows with N (weak scaling): scaled speedups and Gustafson's law.
    ``progress(done, message)`` is called after each measurement.
    """
    __tracebackhide__ = True
    import time

    from ..timing.bench import bench
    from ..core.env import LoadProbe

    ns = _check_workers(workers)
    if mode not in MODES:
        raise BadOptionError("mode", mode, "one of " + ", ".join(MODES))
    if mode == "variable" and (not isinstance(var, str) or not var.isidentifier()):
        raise BadOptionError("var", var, "a Python identifier", "e.g. var='workers'")
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise BadOptionError("rounds", rounds, "an integer >= 1", "e.g. rounds=3")
    from ..timing.bench import check_budget

    check_budget(budget, "a positive number of seconds per worker count, at most 24 h")
    per_point = float(budget) if budget is not None else DEFAULT_BUDGET_PER_POINT
    per_round = per_point / rounds
    base_ns = dict(globals) if globals is not None else {"__name__": "__perfmagic__"}
    code = isinstance(fn_or_code, str)
    if not code and not callable(fn_or_code):
        raise BadOptionError("fn_or_code", fn_or_code, "code (a string) or a callable")

    def stmt_for(n: int) -> tuple[Any, dict[str, Any] | None]:
        if mode == "threads":
            return fn_or_code, (base_ns if code else None)
        if code:
            return fn_or_code, {**base_ns, var: n}
        return (lambda: fn_or_code(n)), None

    results: dict[int, list[BenchResult]] = {n: [] for n in ns}
    errors: dict[int, str] = {}
    first_exc: BaseException | None = None
    own: dict[int, list[float]] = {n: [] for n in ns}
    others: list[float] = []
    interrupted = False
    done = 0
    t_start = time.perf_counter()
    try:
        for r in range(rounds):
            k = r % len(ns)
            order = ns[k:] + ns[:k]
            if r % 2:
                order = order[::-1]
            for n in order:
                if n in errors:
                    continue
                stmt, g = stmt_for(n)
                warm: Any = "auto"
                if results[n] and results[n][-1].raw and results[n][-1].median > 5e-3:
                    warm = 1
                probe = LoadProbe().start()
                try:
                    ctx = thread_limits(n) if mode == "threads" else contextlib.nullcontext()
                    with ctx:
                        res = bench(stmt, setup, globals=g, budget=per_round, memory=False, capture_env=False,
                                    warmup=warm, label=f"{var}={n}" if mode == "variable" else f"threads={n}",
                                    filename=filename)
                except BenchInterrupted as exc:
                    if exc.result is not None and exc.result.raw:
                        results[n].append(exc.result)
                    raise
                except Exception as exc:  # the user's code failed at this N: record it, keep the others
                    errors[n] = f"{type(exc).__name__}: {exc}"
                    if first_exc is None:
                        first_exc = exc
                    continue
                finally:
                    o = probe.stop()
                    if o is not None:
                        others.append(o)
                # the engine's own figure covers its measurement only: the full GC collection before
                # it (~0.3 s of one core on a big heap) would make sleeping threads look CPU-bound
                busy = res.env.get("own_cores", probe.own_cores)
                if busy is not None:
                    own[n].append(busy)
                results[n].append(res)
                done += 1
                if progress is not None:
                    progress(done, f"{var if mode == 'variable' else 'threads'}={n}: {fmt_time(res.median)}")
    except KeyboardInterrupt:
        interrupted = True
    points = tuple(ScalingPoint(n, tuple(results[n]), errors.get(n),
                                _stats.median(own[n]) if own[n] else None) for n in ns)
    if not interrupted and first_exc is not None and not any(p.ok for p in points):
        raise first_exc
    result = analyse(points, mode=mode, var=var, weak=weak, code=_source(fn_or_code), rounds=rounds,
                     budget_per_point_s=per_point, status="interrupted" if interrupted else "ok",
                     others_cores=_stats.median(others) if others else None, wall_s=time.perf_counter() - t_start)
    if interrupted:
        raise BenchInterrupted(result if any(p.ok for p in points) else None)
    return result


def analyse(points: Sequence[ScalingPoint], *, mode: str = "variable", var: str = "workers", weak: bool = False,
            code: str = "", rounds: int = 0, budget_per_point_s: float = DEFAULT_BUDGET_PER_POINT,
            status: str = "ok", others_cores: float | None = None, wall_s: float = 0.0,
            cores: int | None = None) -> AmdahlResult:
    """Fit and diagnose measured points (also usable on points built by hand, e.g. from a ledger)."""
    points = tuple(sorted(points, key=lambda p: p.n))
    warnings: list[str] = []
    notes: list[str] = []
    good = [p for p in points if p.ok]
    for p in points:
        if p.error is not None:
            warnings.append(f"N = {p.n} failed ({p.error}); the other worker counts are kept")
    cores = usable_cores() if cores is None else cores
    over = [p.n for p in points if p.n > cores]
    if over:
        warnings.append(f"worker counts {', '.join(map(str, over))} exceed the {cores} usable cores: CPU-bound "
                        "workers beyond that oversubscribe and can only slow down")
    if others_cores is not None and others_cores > LOAD_WARN_CORES:
        warnings.append(f"other processes kept {others_cores:.1f} cores busy during the sweep: the speedups at "
                        "high N are pessimistic; rerun on a quiet machine")
    base = AmdahlResult(points=points, mode=mode, var=var, weak=weak, code=code, rounds=rounds,
                        budget_per_point_s=budget_per_point_s, status=status, wall_s=wall_s)
    if len(good) < 2:
        return _replace(base, warnings=tuple(warnings), notes=tuple(notes))
    ns, sp = base.ns, base.speedups
    meds = [p.median for p in good]
    cis = [p.ci for p in good]
    ratio = max(meds) / min(meds)
    overlap = max(c[0] for c in cis) <= min(c[1] for c in cis)
    flat = not weak and (ratio < FLAT_RATIO_SURE or (ratio < FLAT_RATIO and overlap))
    # GIL: threads used, no speedup at N >= 2, and about one core busy (Python-bound, not waiting)
    thready = mode == "threads" or bool(_THREADY.search(code or ""))
    hi_own = [p.own_cores for p in good if p.n >= 2 and p.own_cores is not None]
    one_core = bool(hi_own) and 0.6 <= _stats.median(hi_own) <= 1.35
    best_hi = max((s for n, s in zip(ns, sp) if n >= 2), default=math.inf)
    # with >= 2 cores free to use, threads that never get past one busy core are serialized even when the
    # speedup measured is a little above GIL_SPEEDUP (hand-off timing can shave a bit off the baseline)
    # and when the busy cores did not grow with N at all (from one busy core at N = 1), no speedup can come
    # from parallel work: a larger one measured is the machine changing speed between the points
    own1 = good[0].own_cores if good[0].n == 1 else None
    busy_flat = bool(hi_own) and own1 is not None and own1 >= 0.6 and max(hi_own) <= 1.2 * own1 + 0.1
    capped = (bool(hi_own) and max(hi_own) <= 1.35 and cores >= 2
              and (best_hi < GIL_SPEEDUP_ONE_CORE or busy_flat))
    gil = not weak and thready and one_core and (best_hi <= GIL_SPEEDUP or capped)
    if gil:
        notes.append(GIL_NOTE.format(x=best_hi) + (" — or the cell does not use torch/BLAS threads at all"
                                                  if mode == "threads" else ""))
        if best_hi >= GIL_SPEEDUP_ONE_CORE:
            warnings.append(f"the {best_hi:.2f}× measured at N ≥ 2 cannot come from the threads (the busy cores "
                            "stayed at one): the machine changed speed between the points; rerun on a quiet "
                            "machine for clean numbers")
    if flat or gil:
        return _replace(base, flat=flat, gil=gil, warnings=tuple(warnings), notes=tuple(notes))
    b = ns[0]
    fits: dict[str, Any] = {}
    if weak:
        fits["gustafson_fit"] = _scaling.fit_gustafson(ns, sp, base_n=b)
        best = "gustafson"
    else:
        fa = _scaling.fit_amdahl(ns, sp, base_n=b)
        fu = _scaling.fit_usl(ns, sp, base_n=b)
        best, choice_notes = _scaling.choose_model(fa, fu, max(ns))
        notes += choice_notes
        fits.update(amdahl_fit=fa, usl_fit=fu)
        kf = [e for n, e in zip(ns, base.karp_flatt) if n > b and e == e]
        kn = [n for n, e in zip(ns, base.karp_flatt) if n > b and e == e]
        if len(kf) >= 2 and _rising(kn, kf):
            notes.append(KF_RISE_NOTE)
    if any(s < 1 / 1.15 for n, s in zip(ns, sp) if n > b):
        notes.append("some worker counts are slower than the baseline: parallel overhead exceeds the work split")
    return _replace(base, best_model=best, warnings=tuple(warnings), notes=tuple(notes), **fits)


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


__all__ = ["amdahl", "analyse", "AmdahlResult", "ScalingPoint", "thread_limits", "usable_cores", "MODES",
           "KF_RISE_NOTE", "GIL_NOTE"]
