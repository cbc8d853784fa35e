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
from ..findings import Finding
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
    warnings: tuple[Finding, ...] = ()  # worded by render/findings.py (str() of one is its sentence)
    notes: tuple[Finding, ...] = ()
    wall_s: float = 0.0
    others_cores: float | None = None   # cores other processes kept busy during the sweep (median)
    cores: int | None = None            # usable cores of this process
    # gil | load | native | one-thread | cannot-tell | flat | speedups-only | fit | fit-unreliable | none
    diagnosis: str | None = None
    unreliable: tuple[tuple[str, Finding], ...] = ()  # (model, why its fit is not a finding)

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

    @property
    def named_load(self) -> float | None:
        """Cores other processes kept busy, when enough of them to name first in the verdict (and the cell
        needs cores: :attr:`needs_cores`), else None."""
        o = self.others_cores
        return o if o is not None and o >= LOAD_NAME_CORES and self.needs_cores else None

    def advice(self) -> list[str]:
        """What the sweep advises, one item a line (worded by :func:`perfmagic.render.scaling.advice`)."""
        return self._render("advice")(self)

    def verdict(self) -> str:
        """One line: the best speedup, or why there is none (:func:`perfmagic.render.scaling.verdict`)."""
        return self._render("verdict")(self)

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
                "samples": self.samples(), "warnings": [str(w) for w in self.warnings], "notes": [str(n) for n in self.notes]}


__all__ = ["AmdahlResult", "ScalingPoint", "DEFAULT_BUDGET_PER_POINT", "LOAD_NAME_CORES"]
