"""A timing result (:class:`~perfmagic.timing.results.BenchResult`) in words: the median and its interval,
the cold call, memory, throughput, where it ran and why it stopped; the figure and folded details are
:mod:`perfmagic.render.timing`'s."""

from __future__ import annotations

import math
import statistics
from typing import Any

from ..result import Result
from .text import fmt_bytes, fmt_rate, fmt_time, pct, times
from .timing import bench_figure_png as figure_png, bench_sections as html_sections  # noqa: F401
from .warnings import warning_lines

#: the alt text of the figure in the HTML bundle (render/bundle.py)
FIGURE_ALT = "timeline and histogram of the samples"

_WORK_UNITS = {"items": "items", "flops": "FLOP", "bytes": "B"}


def headline(r: Result) -> str:
    """The median with its interval and the sample count, or why there are no timed samples."""
    b: Any = r
    if not b.raw:
        if b.warmup:
            calls = sum(k for k, _ in b.warmup)
            per = statistics.median([d / k for k, d in b.warmup])
            return (f"no timed samples: stopped during warmup after {calls} calls "
                    f"(warmup median {fmt_time(per)} per call, not a warmed-up measurement)")
        return f"no samples measured (cold call {fmt_time(b.cold_s)})"
    lo, hi = b.ci
    cov, want = b.ci_coverage, b.policy.get("confidence", 0.95)
    ci_name = f"{pct(want, 0)} CI" if cov >= want else f"{pct(cov, 0)} CI, too few samples for {pct(want, 0)}"
    return (f"{fmt_time(b.median)} median  ({ci_name} {fmt_time(lo)} – {fmt_time(hi)}, "
            f"±{pct(b.rel_ci, 1)})  {b.n_samples} samples × {b.number} call{'s' if b.number != 1 else ''}")


def text(r: Result, *, run_id: Any = None) -> str:
    """The report; ``run_id`` (default: the result's own ``run_id``) is named in the first line."""
    b: Any = r
    run_id = b.run_id if run_id is None else run_id
    tags = []
    if b.label:
        tags.append(f"label {b.label}")
    if run_id is not None:
        tags.append(f"run #{run_id}")
    if b.status != "ok":
        tags.append(b.status.upper())
    lines = [headline(b) + ("   [" + ", ".join(tags) + "]" if tags else "")]
    detail = [f"IQR {fmt_time(b.iqr)}", f"min {fmt_time(b.min)}"]
    if b.cold_s is not None:
        ratio = b.cold_s / b.median if b.raw and b.median > 0 else math.nan
        factor = "" if ratio != ratio else f" ({ratio:.1f}× warm)" if ratio < 100 else f" ({times(ratio)} warm)"
        detail.append(f"cold call {fmt_time(b.cold_s)}{factor}")
    lines.append("  " + " · ".join(detail))
    mem = b.memory
    if mem is not None:
        parts = [f"+{fmt_bytes(mem.traced_peak_bytes)} traced Python"]
        label = "RSS peak" if mem.rss_method == "vmhwm" else "RSS after"
        parts.append(f"+{fmt_bytes(mem.rss_peak_increase_bytes)} {label}")
        if mem.cuda_peak_bytes is not None:
            parts.insert(0, f"+{fmt_bytes(mem.cuda_peak_bytes)} CUDA max_memory_allocated")
        lines.append("  peak memory: " + ", ".join(parts))
    if b.throughput:
        lines.append("  throughput: " + " · ".join(fmt_rate(v, _WORK_UNITS.get(k, k)) for k, v in b.throughput.items()))
    lines.append(f"  device {b.device} (sync: {b.sync}) · {fmt_time(b.wall_s, 3)} spent · stopped: {_stopped(b)}")
    lines += [f"  note: {n}" for n in b.notes]
    lines += warning_lines(b.warnings)  # the two that matter most; the rest folded
    return "\n".join(lines)


def _stopped(b: Any) -> str:
    """Why the sampling stopped; the default budget's early answer says what a budget would buy."""
    if b.stop_reason != "time":
        return str(b.stop_reason)
    p = b.policy or {}
    return (f"time (the default answer: ±{b.rel_ci:.1%} after {p.get('answer_s', 0.1):g} s; -b 1 aims for "
            f"±{p.get('precision', 0.01):.0%})")


def interleaved_note(run_id: Any) -> str:
    """The ledger note of side A of ``%%gpubench --vs N``: run #N measured again, interleaved with B (the
    run recorded next)."""
    return f"re-measured from run #{run_id}, interleaved with the next run"
