"""The result of a timing run: frozen data that keeps every raw sample.

Statistics (median, its confidence interval, IQR, throughput) are *derived* from the raw block
times each time they are asked for; nothing derived is stored beside the samples. ``to_dict()`` gives
the same fields to the ledger and to pandas. It follows the result protocol
(:mod:`perfmagic.result`); its text is written by :mod:`perfmagic.render.bench`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..core import stats as _stats
from ..core.memory import MemoryReport
from ..findings import Finding
from ..result import Displayed


@dataclass(frozen=True, repr=False)
class BenchResult(Displayed):
    """One measurement. Times are seconds; ``raw`` holds block durations of ``number`` calls each."""

    primary_metric: ClassVar[str] = "median_s"

    code: str
    raw: tuple[float, ...]
    number: int
    cold_s: float | None
    warmup: tuple[tuple[int, float], ...] = ()
    label: str | None = None
    setup: str = ""
    device: str = "cpu"
    sync: str = "none"
    timer_overhead_s: float = 0.0
    stop_reason: str = "precision"
    wall_s: float = 0.0
    status: str = "ok"  # "ok" | "interrupted"
    policy: dict[str, Any] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)
    memory: MemoryReport | None = None
    work: dict[str, float] = field(default_factory=dict)
    warnings: tuple[Finding, ...] = ()  # worded by render/findings_timing.py; an older row's text stays a str
    notes: tuple[Finding, ...] = ()
    started_utc: str = ""
    run_id: int | None = None

    # ---- derived statistics -------------------------------------------------------------
    @property
    def times(self) -> tuple[float, ...]:
        """Per-call times of the measured samples (block time / calls per block)."""
        return tuple(t / self.number for t in self.raw)

    @property
    def n_samples(self) -> int:
        return len(self.raw)

    @property
    def median(self) -> float:
        return _stats.median(self.times) if self.raw else math.nan

    @property
    def ci(self) -> tuple[float, float]:
        if not self.raw:
            return (math.nan, math.nan)
        lo, hi, _ = _stats.median_ci(self.times, self.policy.get("confidence", 0.95))
        return lo, hi

    @property
    def ci_coverage(self) -> float:
        if not self.raw:
            return 0.0
        return _stats.median_ci(self.times, self.policy.get("confidence", 0.95))[2]

    @property
    def rel_ci(self) -> float:
        """Half-width of the median's CI relative to the median."""
        return _stats.rel_halfwidth(self.times, self.policy.get("confidence", 0.95)) if self.raw else math.inf

    @property
    def iqr(self) -> float:
        return _stats.iqr(self.times) if self.raw else math.nan

    @property
    def min(self) -> float:
        return min(self.times) if self.raw else math.nan

    @property
    def mean(self) -> float:
        return sum(self.times) / len(self.raw) if self.raw else math.nan

    @property
    def throughput(self) -> dict[str, float]:
        """Work per second for each declared unit of work per call (items, flops, bytes)."""
        m = self.median
        if not self.work or not m or math.isnan(m):
            return {}
        return {k: v / m for k, v in self.work.items()}

    # ---- serialisation --------------------------------------------------------------------
    def metrics(self) -> dict[str, float | int | None]:
        """The flat scalar metrics recorded in the ledger (``median_s`` is the headline)."""
        lo, hi = self.ci
        out: dict[str, float | int | None] = {
            "median_s": self.median, "ci_low_s": lo, "ci_high_s": hi, "iqr_s": self.iqr,
            "min_s": self.min, "cold_s": self.cold_s, "n_samples": self.n_samples, "number": self.number,
            "wall_s": self.wall_s,
        }
        if self.memory is not None:
            out["traced_peak_bytes"] = self.memory.traced_peak_bytes
            out["rss_peak_increase_bytes"] = self.memory.rss_peak_increase_bytes
            if self.memory.cuda_peak_bytes is not None:
                out["cuda_peak_bytes"] = self.memory.cuda_peak_bytes
        for k, v in self.throughput.items():
            out[f"{k}_per_s"] = v
        return out

    def samples(self) -> dict[str, Any]:
        return {"raw": list(self.raw), "number": self.number, "warmup": [list(w) for w in self.warmup],
                "cold_s": self.cold_s, "timer_overhead_s": self.timer_overhead_s}

    # ---- the run record: rebuilt from the row's samples, options, metrics and env ---------------------
    def record_payload(self) -> dict[str, Any]:
        """Only what the ledger's columns do not hold, defaults left out (a few dozen bytes stored):
        device, sync, why it stopped, the policy, how memory was read, warnings and notes."""
        out: dict[str, Any] = {}
        for key, value, default in (("device", self.device, "cpu"), ("sync", self.sync, "none"),
                                    ("stop_reason", self.stop_reason, "precision")):
            if value != default:
                out[key] = value
        if self.policy:
            out["policy"] = dict(self.policy)
        if self.memory is not None:
            extra = {k: v for k, v in (("rss_method", self.memory.rss_method),
                                       ("cuda_reserved_bytes", self.memory.cuda_reserved_bytes))
                     if v is not None and (k, v) != ("rss_method", "vmhwm")}
            out["memory"] = extra
        for key in ("warnings", "notes"):
            if getattr(self, key):
                out[key] = [_stored(x) for x in getattr(self, key)]
        return out

    @classmethod
    def from_record(cls, rec: Any) -> BenchResult:
        """The result a ``%%gpubench`` row stored: its samples, options (setup, work), metrics (wall time,
        memory peaks) and env, with the small payload of :meth:`record_payload`. A row written before the
        payload was stored rebuilds with the measured numbers, and says which fields it lacks."""
        from ..errors import PerfmagicError

        s, m, o = rec.samples, rec.metrics or {}, rec.options or {}
        if not isinstance(s, dict) or "raw" not in s:
            raise PerfmagicError(f"run #{rec.id} ({rec.magic}) has no samples in the ledger: nothing to rebuild "
                                 "its timing from")
        p = rec.payload if isinstance(rec.payload, dict) else {}
        memory = None
        if "traced_peak_bytes" in m and ("memory" in p or rec.payload is None):
            mp = p.get("memory") or {}
            memory = MemoryReport(traced_peak_bytes=m.get("traced_peak_bytes"),
                                  rss_peak_increase_bytes=m.get("rss_peak_increase_bytes"),
                                  rss_method=mp.get("rss_method", "vmhwm"), cuda_peak_bytes=m.get("cuda_peak_bytes"),
                                  cuda_reserved_bytes=mp.get("cuda_reserved_bytes"))
        notes = tuple(_read(x) for x in p.get("notes") or ())
        if rec.payload is None:
            notes += (Finding.of("bench.old-row"),)
        work = o.get("work") if isinstance(o.get("work"), dict) else {}
        return cls(code=rec.code, raw=tuple(float(x) for x in s.get("raw") or ()), number=int(s.get("number") or 1),
                   cold_s=s.get("cold_s"), warmup=tuple((int(k), float(t)) for k, t in s.get("warmup") or ()),
                   label=rec.label, setup=str(o.get("setup") or ""),
                   device=p.get("device", "cpu" if rec.payload is not None else str(o.get("device") or "cpu")),
                   sync=p.get("sync", "none"), timer_overhead_s=float(s.get("timer_overhead_s") or 0.0),
                   stop_reason=p.get("stop_reason", "precision" if rec.payload is not None else "unknown"),
                   wall_s=float(m.get("wall_s") or 0.0), status=rec.status, policy=dict(p.get("policy") or {}),
                   env=dict(rec.env or {}), memory=memory, work={k: float(v) for k, v in work.items()},
                   warnings=tuple(_read(x) for x in p.get("warnings") or ()), notes=notes, started_utc=rec.created_utc or "",
                   run_id=rec.id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label, "code": self.code, "setup": self.setup, "status": self.status,
            "device": self.device, "sync": self.sync, "stop_reason": self.stop_reason,
            "started_utc": self.started_utc, "metrics": self.metrics(), "samples": self.samples(),
            "policy": dict(self.policy), "env": dict(self.env),
            "memory": self.memory.to_dict() if self.memory else None, "work": dict(self.work),
            "warnings": [str(w) for w in self.warnings], "notes": [str(n) for n in self.notes],
        }

    # ---- display: perfmagic.render.bench writes the text; perfmagic.render.timing draws ------------
    renderer: ClassVar[str] = "bench"

    def summary_line(self) -> str:
        """The median, its interval and the samples in one line (the headline without the label)."""
        from ..render.bench import headline

        return headline(self)


def _stored(item: Any) -> Any:
    """A note or warning as the payload keeps it: a finding as ``[kind, {values}]`` (floats to 6 significant
    digits, more than any sentence shows), text as it is."""
    if not isinstance(item, Finding):
        return str(item)
    return [item.kind, {k: float(f"{v:.6g}") if isinstance(v, float) else v for k, v in item.values}]


def _read(item: Any) -> Any:
    """What :func:`_stored` wrote, back: a finding, or the text an older row stored."""
    if isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) and isinstance(item[1], dict):
        return Finding(item[0], tuple(item[1].items()))
    return item
