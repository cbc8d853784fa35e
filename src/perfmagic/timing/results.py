"""The result of a timing run: frozen data that keeps every raw sample.

Statistics (median, its confidence interval, IQR, throughput) are *derived* from the raw block
times each time they are asked for; nothing derived is stored beside the samples. ``to_dict()`` gives
the same fields to the ledger and to pandas. It follows the result protocol
(:mod:`perfmagic.result`); its figure and folded details are drawn by :mod:`perfmagic.render.timing`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..core import stats as _stats
from ..core.memory import MemoryReport
from ..render.units import fmt_bytes, fmt_rate, fmt_time
from ..render.warnings import warning_lines
from ..result import Displayed

_WORK_UNITS = {"items": "items", "flops": "FLOP", "bytes": "B"}


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
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label, "code": self.code, "setup": self.setup, "status": self.status,
            "device": self.device, "sync": self.sync, "stop_reason": self.stop_reason,
            "started_utc": self.started_utc, "metrics": self.metrics(), "samples": self.samples(),
            "policy": dict(self.policy), "env": dict(self.env),
            "memory": self.memory.to_dict() if self.memory else None, "work": dict(self.work),
            "warnings": list(self.warnings), "notes": list(self.notes),
        }

    # ---- text ----------------------------------------------------------------------------------
    def summary_line(self) -> str:
        if not self.raw:
            if self.warmup:
                calls = sum(k for k, _ in self.warmup)
                per = _stats.median([d / k for k, d in self.warmup])
                return (f"no timed samples: stopped during warmup after {calls} calls "
                        f"(warmup median {fmt_time(per)} per call, not a warmed-up measurement)")
            return f"no samples measured (cold call {fmt_time(self.cold_s)})"
        lo, hi = self.ci
        cov, want = self.ci_coverage, self.policy.get("confidence", 0.95)
        ci_name = f"{want:.0%} CI" if cov >= want else f"{cov:.0%} CI, too few samples for {want:.0%}"
        return (f"{fmt_time(self.median)} median  ({ci_name} {fmt_time(lo)} – {fmt_time(hi)}, "
                f"±{self.rel_ci:.1%})  {self.n_samples} samples × {self.number} call"
                f"{'s' if self.number != 1 else ''}")

    def headline(self) -> str:
        return self.summary_line()

    def text(self, run_id: Any = None) -> str:
        """The report; ``run_id`` (default: the result's own ``run_id``) is named in the first line."""
        head = self.summary_line()
        run_id = self.run_id if run_id is None else run_id
        tags = []
        if self.label:
            tags.append(f"label {self.label}")
        if run_id is not None:
            tags.append(f"run #{run_id}")
        if self.status != "ok":
            tags.append(self.status.upper())
        lines = [head + ("   [" + ", ".join(tags) + "]" if tags else "")]
        detail = [f"IQR {fmt_time(self.iqr)}", f"min {fmt_time(self.min)}"]
        if self.cold_s is not None:
            ratio = self.cold_s / self.median if self.raw and self.median > 0 else math.nan
            detail.append(f"cold call {fmt_time(self.cold_s)}" + (f" ({ratio:.1f}× warm)" if ratio == ratio else ""))
        lines.append("  " + " · ".join(detail))
        mem = self.memory
        if mem is not None:
            parts = [f"+{fmt_bytes(mem.traced_peak_bytes)} traced Python"]
            label = "RSS peak" if mem.rss_method == "vmhwm" else "RSS after"
            parts.append(f"+{fmt_bytes(mem.rss_peak_increase_bytes)} {label}")
            if mem.cuda_peak_bytes is not None:
                parts.insert(0, f"+{fmt_bytes(mem.cuda_peak_bytes)} CUDA max_memory_allocated")
            lines.append("  peak memory: " + ", ".join(parts))
        if self.throughput:
            lines.append("  throughput: " + " · ".join(fmt_rate(v, _WORK_UNITS.get(k, k))
                                                      for k, v in self.throughput.items()))
        lines.append(f"  device {self.device} (sync: {self.sync}) · {fmt_time(self.wall_s, 3)} spent · "
                     f"stopped: {self.stop_reason}")
        lines += [f"  note: {n}" for n in self.notes]
        lines += warning_lines(self.warnings)  # the two that matter most; the rest folded
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    figure_alt: ClassVar[str] = "timeline and histogram of the samples"

    def figure_png(self) -> bytes | None:
        from ..render.timing import bench_figure_png

        return bench_figure_png(self)

    def html_sections(self) -> list[tuple[str, str]]:
        from ..render.timing import bench_sections

        return bench_sections(self)
