"""What a rank sweep measured: per world size, every rank's raw step times and where its time went.

:class:`RankStats` is one rank (raw samples kept, the profiled steps' collective and busy times);
:class:`RankPoint` one world size (its ranks, the all-reduce link sweep, the load around it, the error a
rank raised); :class:`RanksResult` the sweep, the scaling fit over the world sizes that may be fitted
(:func:`perfmagic.scaling.sweep.analyse`) and the verdict. Drawn by :mod:`perfmagic.render.ranks`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from ..core import stats as _stats
from ..findings import Finding
from ..result import Displayed
from ..scaling.result import AmdahlResult

STRAGGLER_NAME = 1.10   # slowest rank's busy time / the median rank's from here on: the slowest is named...
STRAGGLER_STEP = 0.05   # ...when the excess is at least this share of the job's step...
STRAGGLER_CONSISTENT = 0.8  # ...and that rank was the busiest in this share of the profiled steps
CONTENDED_CORES = 0.5   # ranks beyond the cores that kept this share of them busy: oversubscribed
LOAD_FREE_MIN = 1.5     # fewer cores than this left free by other processes: the speedups say nothing


@dataclass(frozen=True)
class RankStats:
    """One rank at one world size. ``times``: its step samples (s, from the common start after a barrier)."""

    rank: int
    times: tuple[float, ...]
    cold_s: float | None = None
    threads: int = 1
    busy_cores: float | None = None          # this rank's CPU / wall while sampling
    step_prof_s: tuple[float, ...] = ()      # profiled steps: duration
    comm_s: tuple[float, ...] = ()           # ...time with a collective in flight (waits included)
    busy_s: tuple[float, ...] = ()           # ...duration minus that
    allreduce_bytes: tuple[float, ...] = ()  # ...bytes all-reduced
    allreduce_s: tuple[float, ...] = ()      # ...time with an all-reduce in flight
    profile_error: str | None = None
    pid: int | None = None
    phases: tuple[tuple[str, float], ...] = ()  # where this rank's wall time went (import, init, setup, ...)

    @classmethod
    def from_gathered(cls, d: dict[str, Any]) -> RankStats:
        """From what :func:`perfmagic.ranks.worker.lockstep` measured (plus ``rank``, ``threads``)."""
        pr = d.get("profile") or {}
        return cls(rank=d["rank"], times=tuple(d["times"]), cold_s=d.get("cold_s"), threads=d.get("threads", 1),
                   busy_cores=d.get("busy_cores"), step_prof_s=tuple(pr.get("step_s", ())),
                   comm_s=tuple(pr.get("comm_s", ())), busy_s=tuple(pr.get("busy_s", ())),
                   allreduce_bytes=tuple(pr.get("allreduce_bytes", ())),
                   allreduce_s=tuple(pr.get("allreduce_s", ())), profile_error=d.get("profile_error"),
                   pid=d.get("pid"), phases=tuple((d.get("phases") or {}).items()))

    @property
    def median(self) -> float:
        return _stats.median(self.times) if self.times else math.nan

    @property
    def busy(self) -> float | None:
        return _stats.median(self.busy_s) if self.busy_s else None

    @property
    def comm_share(self) -> float | None:
        tot = sum(self.step_prof_s)
        return min(1.0, max(0.0, sum(self.comm_s) / tot)) if self.step_prof_s and tot > 0 else None

    def busbw(self, world: int) -> float | None:
        """The step's own all-reduce bus bandwidth (B/s, nccl-tests' definition), or None."""
        b, t = sum(self.allreduce_bytes), sum(self.allreduce_s)
        if world < 2 or b <= 0 or t <= 0:
            return None
        return b / t * 2 * (world - 1) / world


@dataclass(frozen=True)
class RankPoint:
    """One world size: its ranks, or the error that stopped it."""

    world: int
    ranks: tuple[RankStats, ...] = ()
    error: str | None = None          # one line
    traceback: str | None = None      # the failing rank's traceback, as it printed it
    link: tuple[tuple[int, float], ...] = ()   # (bytes, busbw B/s) of the all-reduce sweep
    others_cores: float | None = None
    wall_s: float = 0.0               # what this world size cost, start to teardown
    threads: int = 1

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.ranks) and all(r.times for r in self.ranks)

    @property
    def step_times(self) -> tuple[float, ...]:
        """The job's step per sample: the slowest rank's time."""
        if not self.ok:
            return ()
        return tuple(max(ts) for ts in zip(*(r.times for r in self.ranks)))

    @property
    def median(self) -> float:
        st = self.step_times
        return _stats.median(st) if st else math.nan

    @property
    def ci(self) -> tuple[float, float]:
        st = self.step_times
        if not st:
            return (math.nan, math.nan)
        lo, hi, _ = _stats.median_ci(st)
        return lo, hi

    @property
    def rank_medians(self) -> tuple[float, ...]:
        return tuple(r.median for r in self.ranks)

    def _per_rank_work(self) -> list[float]:
        busy = [r.busy for r in self.ranks]
        if all(b is not None for b in busy):
            return [float(b) for b in busy]  # type: ignore[arg-type]
        return list(self.rank_medians)

    @property
    def straggler_ratio(self) -> float | None:
        """Slowest rank's busy time (step minus collectives) / the median rank's; ≥ 1."""
        w = self._per_rank_work()
        if len(w) < 2:
            return None
        m = _stats.median(w)
        return max(w) / m if m > 0 else None

    @property
    def straggler(self) -> int | None:
        """The slowest rank, named only on evidence: ratio ≥ 1.10, an excess worth ≥ 5% of the job's step,
        and (when profiled) the busiest rank in ≥ 80% of the profiled steps. Otherwise None."""
        r = self.straggler_ratio
        if r is None or r < STRAGGLER_NAME:
            return None
        w = self._per_rank_work()
        i = max(range(len(w)), key=lambda j: w[j])
        if w[i] - _stats.median(w) < STRAGGLER_STEP * self.median:
            return None
        steps = list(zip(*(rs.busy_s for rs in self.ranks))) if all(rs.busy_s for rs in self.ranks) else []
        if steps:
            wins = sum(1 for st in steps if max(range(len(st)), key=lambda j: st[j]) == i)
            if wins < STRAGGLER_CONSISTENT * len(steps):
                return None
        return self.ranks[i].rank

    @property
    def comm_share(self) -> float | None:
        """The share of the step with a collective in flight, averaged over the ranks."""
        s = [r.comm_share for r in self.ranks if r.comm_share is not None]
        return sum(s) / len(s) if s else None

    @property
    def busbw(self) -> float | None:
        b = [x for r in self.ranks if (x := r.busbw(self.world)) is not None]
        return _stats.median(b) if b else None

    @property
    def link_roof(self) -> float | None:
        return max((bw for _, bw in self.link), default=None)

    @property
    def busy_cores(self) -> float | None:
        c = [r.busy_cores for r in self.ranks if r.busy_cores is not None]
        return sum(c) if c else None


@dataclass(frozen=True, repr=False)
class RanksResult(Displayed):
    """A rank sweep: per world size the ranks' samples, comm share, straggler, bandwidth; the fit; advice."""

    primary_metric: ClassVar[str] = "max_speedup"
    renderer: ClassVar[str] = "ranks"
    record_kind: ClassVar[str] = "ranks"  # recorded by %%amdahl --ranks beside the worker sweeps

    points: tuple[RankPoint, ...]
    backend: str = "gloo"
    start_method: str = "fork"
    weak: bool = False
    code: str = ""
    setup: str = ""
    budget_per_point_s: float = 1.0
    cores: int = 1
    device: str = "cpu"
    scaling: AmdahlResult | None = None   # the fit over the world sizes that may be fitted
    excluded: tuple[tuple[int, Finding], ...] = ()  # (world size, why it is not fitted); worded by render/
    status: str = "ok"
    warnings: tuple[Finding, ...] = ()  # str() of one is its sentence (an older row's text stays a str)
    notes: tuple[Finding, ...] = ()
    wall_s: float = 0.0
    run_id: int | None = None   # the ledger row distributed_bench wrote (rank 0)

    @property
    def good(self) -> tuple[RankPoint, ...]:
        return tuple(p for p in self.points if p.ok)

    @property
    def worlds(self) -> tuple[int, ...]:
        return tuple(p.world for p in self.good)

    @property
    def speedups(self) -> tuple[float, ...]:
        """T(base)/T(N) (strong) or (N/base)·T(base)/T(N) (weak: scaled speedup), base = smallest world."""
        g = self.good
        if not g:
            return ()
        t0, n0 = g[0].median, g[0].world
        return tuple(t0 / p.median * ((p.world / n0) if self.weak else 1.0) for p in g)

    @property
    def efficiencies(self) -> tuple[float, ...]:
        g = self.good
        if not g:
            return ()
        n0 = g[0].world
        return tuple(s / (p.world / n0) for s, p in zip(self.speedups, g))

    @property
    def oversubscribed(self) -> tuple[int, ...]:
        return tuple(p.world for p in self.points if p.world > self.cores)

    @property
    def errors(self) -> dict[int, str]:
        return {p.world: p.error for p in self.points if p.error is not None}

    @property
    def needs_cores(self) -> bool:
        """Ranks at some world size ≥ 2 kept 0.4 cores busy or more: other processes' load can slow them.
        Steps that sleep or wait do not compete for cores."""
        return any((p.busy_cores or 0.0) >= 0.4 for p in self.good if p.world > 1)

    def all_warnings(self) -> list[str]:
        """Every `!` item of the output (the text shows two, the HTML folds the rest)."""
        from ..render.ranks import all_warnings

        return all_warnings(self)

    @property
    def load_too_high(self) -> float | None:
        """Cores other processes kept busy when they left too few for the ranks to show any scaling (and the
        ranks need cores: :attr:`needs_cores`), else None."""
        sc = self.scaling
        oc = sc.others_cores if sc is not None else None
        if oc is not None and oc >= 0.3 and self.cores - oc < LOAD_FREE_MIN and len(self.good) > 1 \
                and self.needs_cores:
            return oc
        return None

    def verdict(self) -> str:
        """One line: the best speedup over world sizes, or why none can be told
        (:func:`perfmagic.render.ranks.verdict`)."""
        return self._render("verdict")(self)

    def metrics(self) -> dict[str, Any]:
        g = self.good
        sc = self.scaling
        out: dict[str, Any] = {
            "backend": self.backend, "worlds": ",".join(map(str, self.worlds)),
            "max_speedup": max(self.speedups) if self.speedups else None,
            "n_points": len(g), "wall_s": self.wall_s,
            "S": sc.serial_fraction if sc is not None else None,
            "sigma": sc.metrics().get("sigma") if sc is not None else None,
            "kappa": sc.metrics().get("kappa") if sc is not None else None,
            "peak_n": sc.peak_n if sc is not None else None,
            "diagnosis": sc.diagnosis if sc is not None else None,
        }
        for p, s, e in zip(g, self.speedups, self.efficiencies):
            k = f"w{p.world}"
            out.update({f"{k}_step_s": p.median, f"{k}_speedup": s, f"{k}_efficiency": e,
                        f"{k}_comm_share": p.comm_share, f"{k}_straggler_ratio": p.straggler_ratio,
                        f"{k}_busbw": p.busbw, f"{k}_link_roof": p.link_roof})
        return out

    def samples(self) -> dict[str, Any]:
        return {"points": [{"world": p.world, "error": p.error, "others_cores": p.others_cores,
                            "wall_s": p.wall_s, "link": [list(x) for x in p.link],
                            "ranks": [{"rank": r.rank, "times": list(r.times), "cold_s": r.cold_s,
                                       "busy_s": list(r.busy_s), "comm_s": list(r.comm_s),
                                       "step_prof_s": list(r.step_prof_s),
                                       "allreduce_bytes": list(r.allreduce_bytes),
                                       "allreduce_s": list(r.allreduce_s), "busy_cores": r.busy_cores}
                                      for r in p.ranks]} for p in self.points]}

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "start_method": self.start_method, "weak": self.weak, "code": self.code,
                "setup": self.setup, "status": self.status, "cores": self.cores, "device": self.device,
                "budget_per_point_s": self.budget_per_point_s, "excluded": [[w, str(why)] for w, why in self.excluded],
                "metrics": self.metrics(), "samples": self.samples(), "warnings": [str(w) for w in self.warnings],
                "notes": [str(n) for n in self.notes], "tracebacks": {p.world: p.traceback for p in self.points if p.traceback}}


__all__ = ["RankStats", "RankPoint", "RanksResult", "STRAGGLER_NAME", "CONTENDED_CORES"]
