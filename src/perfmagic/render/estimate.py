"""Estimates drawn: the headline, the text report, the figure and the folded HTML sections.

Takes an :class:`~perfmagic.estimation.result.EstimateResult` as a plain object (reads its attributes)
and imports no analysis module; matplotlib is imported inside the functions that draw (object API on
an Agg canvas: no pyplot, no global state).
"""

from __future__ import annotations

import html
import math
from typing import Any

from ..result import Result
from .bundle import table_html
from .figures import new_figure, png_bytes
from .text import pct
from .units import fmt_bytes, fmt_time
from .warnings import warning_lines


FIGURE_ALT = "measured points, fitted model and the prediction at full size"

# the cost models' formulas (estimation/costmodel.py FORMS names them); a two-term form with one term
# fitted to zero reads as the other one
FORMULAS: dict[str, str] = {
    "constant": "a",
    "linear": "a + b·n",
    "n log n": "a + b·n·ln n",
    "quadratic": "a + b·n²",
    "cubic": "a + b·n³",
    "n + n²": "a + b·n + c·n²",
    "n + n log n": "a + b·n + c·n·ln n",
    "n² + n³": "a + b·n² + c·n³",
    "n^k": "a + b·n^k",
    "n^k log n": "a + b·n^k·ln n",
}
_TWO_TERM = {"n + n²": ("linear", "quadratic"), "n + n log n": ("linear", "n log n"),
             "n² + n³": ("quadratic", "cubic")}


def formula(name: str, k: float | None = None, b: float = 1.0, c: float = 1.0) -> str:
    """A fitted cost model as its formula: the free exponent filled in (``a + b·n^1.52``)."""
    if name in _TWO_TERM and (b == 0 or c == 0):
        g, h = _TWO_TERM[name]
        return FORMULAS[h if c > 0 else g]
    if name in ("n^k", "n^k log n") and k is not None:
        return FORMULAS[name].replace("n^k", f"n^{k:.2f}")
    return FORMULAS[name]


def all_warnings(r: Any) -> list[str]:
    """Every `!` item of an estimate: the sizes that failed, then its warnings."""
    return [f"failed at {r.var}={n:,}: {err}" for n, err in r.failures] + [str(w) for w in r.warnings]


def _pct(x: float) -> str:
    return "< 0.1%" if x < 0.001 else pct(x, 1)


def _full_text(r: Any) -> str:
    return f"{r.var}={r.full:,.0f}" if r.mode == "scaling" else f"{r.full:,.0f} units"


def headline(r: Any) -> str:
    what = f"estimate for {_full_text(r)}: "
    # no time to print, but the gate may still rule the run out (the memory the sizes measured used)
    out = "  → WILL NOT FIT" if r.verdict == "will not fit" else ""
    refused = r.refused
    if getattr(refused, "kind", None) == "estimate.failed":  # the code raised below the full size
        return what + f"no estimate: {refused}" + out
    floor = next((x for x in r.verdict_reasons if getattr(x, "kind", None) == "estimate.gate-memory-floor"), None)
    if floor is not None and refused is not None:  # no time, but the memory measured rules the run out: first
        return what + f"will not fit: {floor}; no time estimate: {refused}" + out
    if r.predicted_s is None:
        return what + "no estimate (" + (str(r.verdict_reasons[0]) if r.verdict_reasons else "nothing measured") + ")" + out
    if not r.reliable and r.unreliable_why:
        return what + f"no estimate: {r.unreliable_why}" + out
    if not r.reliable:
        return what + str(r.refused) + out
    t = f"{fmt_time(r.predicted_s, 3)} (90% interval {fmt_time(r.low_s, 3)} – {fmt_time(r.high_s, 3)})"
    if r.measured_full:
        t = (f"{fmt_time(r.predicted_s, 3)} (measured at the full size; another run: {fmt_time(r.low_s, 3)} – "
             f"{fmt_time(r.high_s, 3)}, 90%)")
    mem = ""
    if r.peak_bytes is not None and r.peak_bytes < r.mem_floor:
        mem = ", peak memory < 1 MiB"
    elif r.peak_bytes is not None:
        mem = f", peak memory +{fmt_bytes(r.peak_bytes)}"
        if r.peak_low is not None and r.peak_high is not None and r.peak_high > r.peak_low * 1.02:
            mem += f" ({fmt_bytes(r.peak_low)} – {fmt_bytes(r.peak_high)})"
    gate = ""
    if r.verdict != "no limit given":
        gate = f"  → {r.verdict.upper()}"
    return what + t + mem + gate


def text(r: Result, *, run_id: Any = None) -> str:
    L = [headline(r)]
    if r.status != "ok":
        L.append("  (interrupted: the points measured before Ctrl-C are fitted)")
    if r.mode == "iteration" and r.points:
        ut = r.unit_times
        mean = sum(ut) / len(ut)
        q = sorted(ut)
        p10, p90 = q[int(0.1 * (len(q) - 1))], q[int(0.9 * (len(q) - 1))]
        units = sum(p.n * len(p.times) for p in r.points)
        L.append(f"  per unit: {fmt_time(mean)} mean (median {fmt_time(r.unit_median_s)}, p10–p90 "
                 f"{fmt_time(p10)} – {fmt_time(p90)}), {1 / mean:,.4g} units/s"
                 + (f"; cold first unit {fmt_time(r.cold_s)}" if r.cold_s is not None else ""))
        L.append(f"  measured {units} units in {fmt_time(r.spent_s, 3)} after {len(r.warmup)} warm-up "
                 f"unit{'s' if len(r.warmup) != 1 else ''}"
                 + (f" ({_pct(r.measured_fraction)} of the full job)" if r.measured_fraction else ""))
        if r.peak_bytes is not None:
            g = r.mem_growth_per_unit
            grow = (f"memory grows {fmt_bytes(g)} per unit (→ +{fmt_bytes(g * r.full)} over the job)"
                    if g else "no growth across units")
            L.append(f"  peak memory per unit +{fmt_bytes(r.points[0].memory() or 0)}; {grow}")
    elif r.points:
        tf = r.time_fit
        if tf is not None:
            other = f"; plausible too: {', '.join(tf.plausible)}" if tf.plausible else ""
            lo, hi = min(r.fit_sizes), max(r.fit_sizes)
            L.append(f"  time model: {tf.best.describe()} (AICc{other}), a = {fmt_time(tf.best.a)}; fitted on "
                     f"{len(r.fit_sizes)} sizes {lo:,} … {hi:,} ({hi / r.full:.1%} of {r.var})")
        if r.mem_fit is not None:
            mf = r.mem_fit
            L.append(f"  memory model: {mf.best.describe()} ({r.memory_source}), a = {fmt_bytes(mf.best.a)}")
        L.append(_measured_line(r))
    if r.run_noise is not None and r.predicted_s is not None:
        L.append("  " + _noise_line(r))
    if r.limit_s is not None or r.available_bytes is not None:
        lim = []
        if r.limit_s is not None:
            lim.append(f"limit {fmt_time(r.limit_s, 3)}")
        if r.available_bytes is not None:
            lim.append(f"{r.available_kind} {fmt_bytes(r.available_bytes)}")
        L.append(f"  gate: {r.verdict} ({', '.join(lim)})"
                 + (": " + "; ".join(map(str, r.verdict_reasons)) if r.verdict_reasons else ""))
        if r.largest_fit is not None:
            why = []
            if r.largest_fit_time is not None:
                why.append(f"time {r.largest_fit_time:,.0f}")
            if r.largest_fit_memory is not None:
                why.append(f"memory {r.largest_fit_memory:,.0f}")
            what = "the most units that fit" if r.mode == "iteration" else f"largest {r.var} that fits"
            if r.failures and r.mode != "iteration":
                what = f"largest {r.var} that ran (it failed at {r.failures[0][0]:,}; sizes between were not tried)"
            L.append(f"  {what}: {r.largest_fit:,.0f}"
                     + (f" (by {', by '.join(why)})" if len(why) > 1 else ""))
    L += warning_lines(all_warnings(r))  # failures first, then the two that matter most; the rest folded
    L += [f"  note: {x}" for x in r.notes]
    a = r.actual
    if a is not None:
        if a.status == "ok":
            e = r.time_error()
            me = r.memory_error()
            L.append(f"  actual full run: {fmt_time(a.seconds, 3)}" + (f" ({e:+.1%} vs predicted)" if e is not None else "")
                     + (f", peak +{fmt_bytes(a.peak_bytes)}" if a.peak_bytes is not None else "")
                     + (f" ({me:+.1%})" if me is not None else ""))
        elif a.status == "interrupted":
            got = f", {a.completed:.1%} done" if a.completed else ""
            e = r.time_error()
            done = (f"; already {a.seconds / r.predicted_s:.0%} of the prediction"
                    if r.predicted_s and not r.refused else "")  # a refused estimate predicted nothing
            L.append(f"  full run interrupted after {fmt_time(a.seconds, 3)}{got}"
                     + (f"; its pace is {e:+.1%} vs predicted" if e is not None else done))
        else:
            L.append(f"  full run failed after {fmt_time(a.seconds, 3)}: {a.error}")
    if run_id is not None:
        L.append(f"  run #{run_id}")
    return "\n".join(L)


def _measured_line(r: Any) -> str:
    """``measured 13 sizes in 1.47 s (270% of the predicted full run: …); the largest, …, took …``."""
    big = max(r.points, key=lambda p: p.n)
    frac = f" ({_pct(r.measured_fraction)} of the predicted full run)" if r.measured_fraction else ""
    if r.measured_fraction and r.measured_fraction > 1:  # the measuring has a floor (MIN_BUDGET_S)
        frac = frac[:-1] + ": a job this short costs less to run than to estimate)"
    if r.measured_full:
        frac = " (the full run was cheap enough to measure rather than predict)"
    return (f"  measured {len(r.points)} size{'s' if len(r.points) != 1 else ''} in {fmt_time(r.spent_s, 3)}"
            f"{frac}; the largest, {big.n:,}, took {fmt_time(big.time, 3)}")


def _noise_line(r: Any) -> str:
    """What the interval carries besides the fit: the run-to-run variation the estimator measured."""
    if r.mode == "scaling" and r.measured_full:
        return f"run-to-run variation ±{r.run_noise:.0%} (1 sd, from repeated runs; in the interval for another run)"
    if r.mode == "scaling":
        rep = [p for p in r.points if p.later]
        where = (f"{len(rep)} size{'s' if len(rep) != 1 else ''} re-timed later ("
                 + ", ".join(f"{r.var}={p.n:,}: {', '.join(fmt_time(t) for t in p.times)} → later {fmt_time(p.later[0])}"
                             for p in rep) + ")") if rep else "no size re-timed (too costly)"
        return f"run-to-run variation ±{r.run_noise:.0%} (1 sd, in the interval): {where}"
    return (f"run-to-run variation ±{r.run_noise:.0%} (1 sd of the pace of consecutive stretches of units, "
            "in the interval)")


def figure_png(r: Any) -> bytes | None:
    if not r.points:
        return None
    fig = new_figure(8.4, 3.4)
    if r.mode == "iteration":
        _figure_iteration(r, fig)
    else:
        _figure_scaling(r, fig)
    return png_bytes(fig)


def _figure_scaling(r: Any, fig: Any) -> None:
    import numpy as np

    ax, mx = fig.subplots(1, 2)
    ns = np.array([p.n for p in r.points], float)
    f = np.array(r.speed_factors if len(r.speed_factors) == len(r.points) else [1.0] * len(r.points))
    ts = np.array([p.time for p in r.points]) * f
    lo_t = np.array([min(p.times + p.later) for p in r.points]) * f  # the re-times too: the median includes them
    hi_t = np.array([max(p.times + p.later) for p in r.points]) * f
    what = "measured (min–max)" + (", speed-corrected" if r.speed_factors else "")
    ax.errorbar(ns, ts, yerr=[ts - lo_t, hi_t - ts], fmt="o", ms=4, color="tab:blue", label=what)
    N, top = float(r.full), float(ns.max())
    if r.time_fit is not None:
        xs = np.geomspace(ns.min(), max(N, top), 200)
        ax.plot(xs, r.time_fit.best.predict(xs), color="tab:orange", lw=1.5, label=r.time_fit.best.describe())
        if (r.predicted_s and r.low_s and r.high_s and N > top
                and all(math.isfinite(v) and v > 0 for v in (r.low_s, r.high_s, r.predicted_s))):
            xb = np.geomspace(top, N, 60)  # the band widens from the largest size to the interval at N
            frac = np.log(xb / top) / math.log(N / top)
            mid = r.time_fit.best.predict(xb)
            ax.fill_between(xb, mid * (r.low_s / r.predicted_s) ** frac, mid * (r.high_s / r.predicted_s) ** frac,
                            color="tab:orange", alpha=0.2, label="90% interval")
        if r.predicted_s:
            ax.plot([N], [r.predicted_s], "*", ms=12, color="tab:red" if not r.reliable else "tab:orange")
    if r.limit_s is not None:
        ax.axhline(r.limit_s, color="tab:red", ls="--", lw=1, label=f"limit {fmt_time(r.limit_s, 3)}")
    if r.actual is not None and r.actual.status == "ok":
        ax.plot([N], [r.actual.seconds], "D", color="black", ms=6, label="actual")
    ax.axvline(N, color="0.5", ls=":", lw=1)
    for n, _ in r.failures:
        ax.axvline(n, color="tab:red", ls=":", lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"size {r.var}")
    ax.set_ylabel("time of one run [s]")
    ax.set_title("time" + (" (interrupted)" if r.status != "ok" else ""), fontsize=9, loc="left")
    ax.legend(fontsize=7, frameon=False, loc="upper left")
    mem = [(p.n, p.memory()) for p in r.points if p.memory() is not None]
    if mem:
        mn = np.array([x for x, _ in mem], float)
        mv = np.array([max(v, 1) for _, v in mem], float) / 2**20
        mx.plot(mn, mv, "o", ms=4, color="tab:green", label=f"measured ({r.memory_source})")
        if r.mem_fit is not None:
            xs = np.geomspace(mn.min(), max(N, top), 200)
            mx.plot(xs, np.maximum(r.mem_fit.best.predict(xs), 1) / 2**20, color="tab:olive", lw=1.5,
                    label=r.mem_fit.best.describe())
        if r.peak_bytes:
            mx.plot([N], [r.peak_bytes / 2**20], "*", ms=12, color="tab:olive")
        if r.available_bytes:
            mx.axhline(r.available_bytes / 2**20, color="tab:red", ls="--", lw=1, label=r.available_kind)
        if r.actual is not None and r.actual.peak_bytes is not None and r.actual.status == "ok":
            mx.plot([N], [max(r.actual.peak_bytes, 1) / 2**20], "D", color="black", ms=6, label="actual")
        mx.axvline(N, color="0.5", ls=":", lw=1)
        mx.set_xscale("log")
        mx.set_yscale("log")
        mx.set_xlabel(f"size {r.var}")
        mx.set_ylabel("peak memory [MiB]")
        mx.legend(fontsize=7, frameon=False, loc="upper left")
    mx.set_title("peak memory", fontsize=9, loc="left")
    for a in (ax, mx):
        a.tick_params(labelsize=7)


def _figure_iteration(r: Any, fig: Any) -> None:
    ax, cx = fig.subplots(1, 2)
    ut = r.unit_times
    ax.plot(range(1, len(r.warmup) + 1), r.warmup, "o", ms=3, color="0.6", label="warm-up")
    ax.plot(range(len(r.warmup) + 1, len(r.warmup) + len(ut) + 1), ut, "o", ms=3, color="tab:blue",
            label="measured")
    ax.set_xlabel("unit (block)")
    ax.set_ylabel("time per unit [s]")
    ax.set_ylim(bottom=0)
    ax.set_title("per-unit time", fontsize=9, loc="left")
    ax.legend(fontsize=7, frameon=False)
    T = float(r.full)
    if r.predicted_s:
        xs = [0.0, T]
        cx.plot(xs, [0.0, r.predicted_s], color="tab:orange", lw=1.5, label="predicted")
        if r.low_s and r.high_s:
            cx.fill_between(xs, [0.0, r.low_s], [0.0, r.high_s], color="tab:orange", alpha=0.2,
                            label="90% interval")
    if r.limit_s is not None:
        cx.axhline(r.limit_s, color="tab:red", ls="--", lw=1, label=f"limit {fmt_time(r.limit_s, 3)}")
    a = r.actual
    if a is not None and a.completed:
        cx.plot([T * a.completed], [a.seconds], "D", color="black", ms=6, label="actual")
    cx.set_xlabel("units done")
    cx.set_ylabel("elapsed [s]")
    cx.set_title("the full job", fontsize=9, loc="left")
    cx.legend(fontsize=7, frameon=False, loc="upper left")
    for x in (ax, cx):
        x.tick_params(labelsize=7)


def html_sections(r: Any) -> list[tuple[str, str]]:
    """The measured points (every size with all its runs, or every block of units) and the models fitted."""
    out: list[tuple[str, str]] = []
    if r.mode == "scaling" and r.points:
        rows = [(f"{p.n:,}", fmt_time(p.time), len(p.times) + len(p.later), ", ".join(fmt_time(t) for t in p.times)
                 + ("; later " + ", ".join(fmt_time(t) for t in p.later) if p.later else ""),
                 fmt_bytes(p.memory()) if p.memory() is not None else "—",
                 fmt_bytes(p.traced_peak) if p.traced_peak is not None else "—") for p in r.points]
        out.append((f"Measured points ({len(r.points)} sizes)",
                    table_html(rows, (f"size {r.var}", "median time", "runs", "every run", "peak memory",
                                      "traced Python"), scroll=True)))
    elif r.points:
        rows = [(i, p.n, fmt_time(t / p.n), fmt_bytes(p.rss_peaks[0]) if p.rss_peaks else "—",
                 fmt_bytes(p.rss_after[0]) if p.rss_after else "—")
                for i, p in enumerate(r.points) for t in p.times]
        warm = ", ".join(fmt_time(t) for t in r.warmup)
        cold = f"cold first unit {fmt_time(r.cold_s)}" if r.cold_s is not None else ""
        note = "; ".join(x for x in (cold, f"warm-up {warm}" if warm else "") if x)
        out.append((f"Measured blocks ({len(r.points)})",
                    (f"<p style='font-size:12px;margin:2px 0'>{html.escape(note)}</p>" if note else "")
                    + table_html(rows, ("block", "units", "time per unit", "peak memory", "RSS after"), scroll=True)))
    if r.time_fit is not None:
        rows = [(f.describe(), f"{f.aicc:.1f}", fmt_time(float(f.predict(r.full))))
                for f in sorted(r.time_fit.fits, key=lambda f: f.aicc)]
        out.append(("Time models (by AICc)", table_html(rows, ("model", "AICc", f"predicts at {r.full:,.0f}"))))
    return out


__all__ = ["FIGURE_ALT", "FORMULAS", "figure_png", "formula", "headline", "html_sections", "text"]
