"""What a scaling sweep measured: :class:`ScalingPoint` s (raw per-round timings kept) and the
:class:`AmdahlResult` derived from them (speedup, efficiency, Karp–Flatt, the fits, the advice).

The sweep that makes them is :mod:`perfmagic.scaling.sweep`; text, figure and HTML sections are drawn
by :mod:`perfmagic.render.scaling`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from . import models as _scaling
from .gilprobe import ThreadEvidence
from ..core import stats as _stats
from ..render.units import fmt_time
from ..result import Displayed
from ..timing.results import BenchResult

DEFAULT_BUDGET_PER_POINT = 1.0
LOAD_NAME_CORES = 0.3   # other processes' load from here on is named, first, in the verdict


@dataclass(frozen=True)
class ScalingPoint:
    """One worker count: its per-round BenchResults (raw samples kept), or the error it raised."""

    n: int
    results: tuple[BenchResult, ...] = ()
    error: str | None = None
    own_cores: float | None = None     # CPU cores this process used while timing (process_time / wall)
    others_cores: float | None = None  # cores other processes kept busy meanwhile
    threads: ThreadEvidence | None = None  # what the Python threads did meanwhile (gilprobe), its rounds merged

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


@dataclass(frozen=True, repr=False)
class AmdahlResult(Displayed):
    """A scaling sweep: points, derived speedup/efficiency/Karp–Flatt, both fits, the choice and advice."""

    primary_metric: ClassVar[str] = "S"
    renderer: ClassVar[str] = "scaling"
    figure_alt: ClassVar[str] = "measured speedup and fitted models"

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
    others_cores: float | None = None   # cores other processes kept busy during the sweep (median)
    cores: int | None = None            # usable cores of this process
    # gil | load | native | one-thread | cannot-tell | flat | speedups-only | fit | fit-unreliable | none
    diagnosis: str | None = None
    unreliable: tuple[tuple[str, str], ...] = ()  # (model, why its fit is not a finding)

    DIAGNOSES: ClassVar[tuple[str, ...]] = ("gil", "load", "native", "one-thread", "cannot-tell", "flat",
                                            "speedups-only", "fit", "fit-unreliable", "none")

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

    @property
    def needs_cores(self) -> bool:
        """The cell kept at least 0.4 cores busy at N ≥ 2 (median): other processes' load can change its
        speedups. Cells that sleep or wait do not compete for cores; for them the load is only a warning."""
        own = [p.own_cores for p in self.good if p.n >= 2 and p.own_cores is not None]
        return bool(own) and _stats.median(own) >= 0.4

    # ---- advice -------------------------------------------------------------------------------
    @property
    def recommended_workers(self) -> int | None:
        """The largest measured N before efficiency drops under 50% or the speedup stops rising."""
        ns, sp, ef = self.ns, self.speedups, self.efficiencies
        if self.diagnosis in ("load", "cannot-tell"):
            return None
        if not ns or self.flat or self.gil or self.diagnosis in ("native", "one-thread"):
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

    def reliable(self, model: str) -> _scaling.Fit | None:
        """The fit of ``model`` ("amdahl", "usl", "gustafson") when it may be reported as a finding, else None."""
        f = {"amdahl": self.amdahl_fit, "usl": self.usl_fit, "gustafson": self.gustafson_fit}[model]
        return None if f is None or model in dict(self.unreliable) else f

    @property
    def ceiling(self) -> float | None:
        a = self.reliable("amdahl")
        return a.ceiling if a else None

    @property
    def peak_n(self) -> float | None:
        u = self.reliable("usl")
        return u.peak_n if u else None

    @property
    def serial_fraction(self) -> float | None:
        f = self.reliable("gustafson" if self.weak else "amdahl")
        return f.params["S"] if f else None

    def advice(self) -> list[str]:
        out: list[str] = []
        rec = self.recommended_workers
        if rec is not None and not self.flat and len(self.ns) >= 2:
            out.append(f"worth it up to {rec} workers (measured: beyond that efficiency < 50% or the speedup "
                       "stops rising)")
        a = self.reliable("amdahl")
        if a is not None and not self.weak:
            s = a.params["S"]
            if s > 0:
                half = 1 + 1 / s
                out.append(f"Amdahl: serial fraction S = {_pm(s, a.stderr['S'])} -> at most {1 / s:.3g}× on any "
                           f"number of workers; efficiency falls below 50% beyond N ≈ {half:.3g}. Shrink the serial "
                           "part before adding workers")
            else:
                out.append("Amdahl: no serial fraction detected (S ≈ 0): scaling is ideal over the range measured")
        u = self.reliable("usl")
        if u is not None and not self.weak:
            sg, kp = u.params["sigma"], u.params["kappa"]
            line = f"USL: contention σ = {_pm(sg, u.stderr['sigma'])}, coherency κ = {_pm(kp, u.stderr['kappa'], 3)}"
            pk = u.peak_n
            if pk is not None and self.best_model == "usl":
                line += f"; throughput peaks at N* ≈ {pk:.3g} workers and falls beyond (retrograde)"
            elif pk is not None:
                line += f"; its peak N* ≈ {pk:.3g} is not supported over Amdahl (AICc)"
            out.append(line)
        g = self.reliable("gustafson")
        if g is not None:
            out.append(f"Gustafson (weak scaling): serial fraction S = {_pm(g.params['S'], g.stderr['S'])}; "
                       f"scaled speedup at N = {max(self.ns)}: {_scaling.gustafson(g.params['S'], max(self.ns)):.3g}×")
        f = self.reliable(self.best_model) if self.best_model else None
        g = f.params.get("gamma") if f is not None else None
        if g is not None and self.base_n == 1 and abs(g - 1) > 0.1:
            out.append(f"the fit puts N = 1 at {g:.2f}× the measured baseline speed: that point ran "
                       f"{'slow' if g > 1 else 'fast'} (noise, warm-up, load); the curve is not pinned to it, and "
                       "the speedups above are relative to the measured point")
        for model, why in self.unreliable:
            name = {"amdahl": "Amdahl", "usl": "USL", "gustafson": "Gustafson"}[model]
            out.append(f"{name}: fit unreliable, not a finding: {why}")
        return out

    # ---- text -----------------------------------------------------------------------------------
    def verdict(self) -> str:
        g = self.good
        tag = "  [INTERRUPTED]" if self.status != "ok" else ""
        if len(g) < 2:
            return f"scaling: fewer than two worker counts measured successfully — nothing to fit{tag}"
        ns, sp, ef = self.ns, self.speedups, self.efficiencies
        i = max(range(len(sp)), key=lambda j: sp[j])
        what = self.var if self.mode == "variable" else "threads"
        d = self.diagnosis
        load = ""
        if self.others_cores is not None and self.others_cores >= LOAD_NAME_CORES and self.needs_cores:
            load = f"others kept {self.others_cores:.1f} of {self.cores or '?'} cores busy"
        if d == "load":
            return (f"cannot tell: {load}, at most one left free — the speedups measured (best {sp[i]:.2f}×) say "
                    f"nothing about the code; rerun on a quiet machine{tag}")
        pre = f"{load} · " if load else ""
        if self.gil:
            return f"{pre}no speedup from threads: the workers serialize on the GIL — use processes{tag}"
        if d == "native":
            return (f"{pre}no speedup from {what}, and not the GIL: it stayed free (native code, I/O or waits)"
                    f"{tag}")
        if d == "one-thread":
            return (f"{pre}no speedup from threads: the cell runs Python bytecode in one thread, which torch/BLAS "
                    f"threads cannot split{tag}")
        if d == "cannot-tell":
            return (f"{pre}no speedup from {what} (best {sp[i]:.2f}×); cannot tell why: no evidence that Python "
                    f"code held the GIL{tag}")
        if self.flat:
            lo, hi = min(p.median for p in g), max(p.median for p in g)
            return (f"{pre}the time does not change with {what} "
                    f"({fmt_time(lo)} – {fmt_time(hi)}, within noise): the cell ignores the worker count or "
                    f"does not run in parallel; nothing to fit{tag}")
        rel = "" if self.base_n == 1 else f" relative to N = {self.base_n}"
        kind = "scaled speedup" if self.weak else "speedup"
        head = f"{pre}best {kind} {sp[i]:.2f}×{rel} at N = {ns[i]} ({ef[i]:.0%} efficient)"
        if d == "speedups-only":
            return f"{head} · {len(g)} counts: no model fitted{tag}"
        if d == "fit-unreliable":
            return f"{head} · no model fits reliably (see below){tag}"
        gf = self.reliable("gustafson")
        if self.weak and gf:
            return f"{head} · Gustafson S = {gf.params['S']:.3f}{tag}"
        u = self.reliable("usl")
        if self.best_model == "usl" and u and u.peak_n is not None:
            return f"{head} · USL fits best: peak at N* ≈ {u.peak_n:.3g}, slower beyond{tag}"
        a = self.reliable("amdahl")
        if a:
            s = a.params["S"]
            ceil = f", ceiling {1 / s:.3g}×" if s > 0 else ", no ceiling in sight"
            return f"{head} · Amdahl S = {s:.3f}{ceil} · worth it up to {self.recommended_workers} workers{tag}"
        return head + tag

    def headline(self) -> str:
        return self.verdict()

    # ---- serialisation ------------------------------------------------------------------------
    def metrics(self) -> dict[str, float | int | str | None]:
        a, u = self.reliable("amdahl"), self.reliable("usl")
        s = self.serial_fraction
        f = self.reliable("gustafson") if self.weak else a
        return {
            "S": s, "S_stderr": f.stderr["S"] if f else None,
            "sigma": u.params["sigma"] if u else None, "kappa": u.params["kappa"] if u else None,
            "gamma": (f.params.get("gamma") if f else u.params.get("gamma") if u else None),
            "peak_n": self.peak_n, "ceiling": (1 / s if s else None) if not self.weak else None,
            "best_model": self.best_model, "recommended_workers": self.recommended_workers,
            "n_points": len(self.good), "max_speedup": max(self.speedups) if self.speedups else None,
            "base_n": self.base_n, "wall_s": self.wall_s, "diagnosis": self.diagnosis,
            "others_cores": self.others_cores,
        }

    def samples(self) -> dict[str, Any]:
        return {"points": [{"n": p.n, "error": p.error, "rounds": [r.samples() for r in p.results],
                            "own_cores": p.own_cores, "others_cores": p.others_cores,
                            "gil_waits_s": list(p.threads.gil_waits) if p.threads else None,
                            "working_threads": p.threads.working if p.threads else None}
                           for p in self.points]}

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "var": self.var, "weak": self.weak, "code": self.code, "status": self.status,
                "rounds": self.rounds, "budget_per_point_s": self.budget_per_point_s, "metrics": self.metrics(),
                "samples": self.samples(), "warnings": list(self.warnings), "notes": list(self.notes)}


def _pm(x: float, se: float | None, digits: int = 3) -> str:
    if se is None or se != se:
        return f"{x:.{digits}g}"
    return f"{x:.{digits}g} ± {se:.2g}"


__all__ = ["AmdahlResult", "ScalingPoint", "DEFAULT_BUDGET_PER_POINT", "LOAD_NAME_CORES"]
