"""Drawing a :class:`~perfmagic.scaling.scalability.ScalabilityResult`: text, figure and folded HTML sections.

Reads the result's points and fits only; imports no analysis module. matplotlib is imported inside
:func:`figure_png` only.
"""

from __future__ import annotations

import math
from typing import Any

from .bundle import table_html
from .figures import new_figure, png_bytes
from .findings import short_num as _vnum
from .text import WIDTH, wrap

#: the alt text of the figure in the HTML bundle (render/bundle.py)
FIGURE_ALT = "throughput against load, with the fitted scaling laws"

MAX_ROWS = 16   # more points than this: the table goes to the HTML details only
_NAMES = {"sigma": ("σ", "contention"), "kappa": ("κ", "coherency"), "gamma": ("γ", "X(1), one unit of load"),
          "S": ("S", "serial fraction"), "peak": ("N*", "peak load"), "peak_throughput": ("X(N*)", "peak throughput")}
_TITLES = {"usl": "USL", "amdahl": "Amdahl", "gustafson": "Gustafson (weak scaling)"}


def _num(x: float | None) -> str:
    if x is None or x != x:
        return "—"
    if math.isinf(x):
        return "∞"
    return f"{x:.4g}" if abs(x) >= 1e-3 or x == 0 else f"{x:.3e}"


def _wrap(first: str, line: str) -> list[str]:
    return wrap(line, first, width=WIDTH, break_long_words=True)


def _fits(r: Any) -> list[tuple[str, Any]]:
    return [(k, f) for k, f in (("usl", r.usl), ("amdahl", r.amdahl), ("gustafson", r.gustafson)) if f is not None]


def _param_rows(f: Any) -> list[tuple[str, str, str, str, str]]:
    """(symbol, meaning, value, ± std. error, interval) for every parameter, then N* and X(N*) for the USL."""
    rows = []
    vals = dict(f.params)
    if f.model == "usl":
        vals["peak"], vals["peak_throughput"] = f.peak_n, f.peak_throughput
    for k, v in vals.items():
        sym, what = _NAMES[k]
        se = f.stderr.get(k)
        lo_hi = f.intervals.get(k)
        rows.append((sym, what, _num(v) if v is not None else "none (κ = 0)",
                     f"± {_num(se)}" if se is not None and se == se else "",
                     f"{_num(lo_hi[0])} – {_num(lo_hi[1])}" if lo_hi else ""))
    return rows


def _ci(f: Any, key: str, lvl: str) -> str:
    if key not in f.intervals:
        return ""
    lo, hi = f.intervals[key]
    return f" ({lvl} {_vnum(lo)} – {_vnum(hi)})"


def verdict(r: Any) -> str:
    """One line: the model that fits best (AICc) and what it says, with its interval; "cannot tell" where
    the interval leaves the answer open; why no model was fitted."""
    k = len(r.distinct_loads)
    if k < r.min_loads:
        s = "s" if k != 1 else ""
        return (f"scalability: {k} distinct load{s} — no model fitted: a curve with 2–3 parameters through {k} "
                f"load{s} says nothing; measure at ≥ {r.min_loads} loads (≥ {r.min_loads_usl} for the USL)")
    lvl = f"{r.level:.0%} CI"
    f = r.chosen
    if f is None:
        return "scalability: no model fits these points reliably — cannot tell (see why below)"
    if r.weak:
        s = f.params["S"]
        return (f"weak scaling: Gustafson serial fraction S = {_vnum(s)}{_ci(f, 'S', lvl)}; "
                f"{r.load_name} ×{max(r.load) / min(r.load):.3g} gave throughput "
                f"×{f.predict(max(r.load)) / f.predict(min(r.load)):.3g}")
    if r.model == "usl":
        return _usl_verdict(r, f, lvl)
    return _amdahl_verdict(r, f, lvl)


def _usl_verdict(r: Any, f: Any, lvl: str) -> str:
    top = max(r.load)
    pk, xpk = f.peak_n, f.peak_throughput
    lo, hi = f.intervals.get("peak", (math.nan, math.nan))
    where = f"N* ≈ {_vnum(pk)}{_ci(f, 'peak', lvl)} at X ≈ {_vnum(xpk)}"
    if math.isinf(hi):
        return (f"USL fits best (AICc), but whether throughput peaks cannot be told: {lvl} of N* is "
                f"{_vnum(lo)} – ∞ (some resamples show no peak); estimate N* ≈ {_vnum(pk)}")
    if pk > r.peak_range * top:
        return (f"USL fits best (AICc): throughput would peak at {where}, far beyond the largest "
                f"{r.load_name} measured ({_vnum(top)}): an extrapolation")
    if pk > top:
        return (f"USL fits best (AICc): throughput would peak at {where}, past the largest {r.load_name} "
                f"measured ({_vnum(top)}): a forecast, measure there to confirm")
    return f"USL fits best (AICc): throughput peaks at {where}; beyond it more {r.load_name} lowers it"


def _amdahl_verdict(r: Any, f: Any, lvl: str) -> str:
    top = max(r.load)
    s = f.params["S"]
    head = f"Amdahl fits best (AICc): serial fraction S = {_vnum(s)}{_ci(f, 'S', lvl)}"
    if s <= 0:
        head = "Amdahl fits best (AICc): no serial fraction detected, throughput grows in proportion to load"
    tail = f"; no peak within the {r.load_name} measured (≤ {_vnum(top)})"
    u = r.usl
    if u is not None and "peak" in u.intervals:
        lo, hi = u.intervals["peak"]
        tail += (f"; beyond, cannot be told (USL's N* {lvl} {_vnum(lo)} – {_vnum(hi)})" if math.isinf(hi) or
                 hi > top else f"; the USL's N* {lvl} {_vnum(lo)} – {_vnum(hi)} disagrees: see the fits below")
    else:
        tail += "; beyond, cannot be told" + (" (no USL fitted)" if u is None else "")
    return head + tail


def headline(r: Any) -> str:
    return verdict(r)


def text(r: Any) -> str:
    """The verdict, the points (up to 16), each fit's parameters with standard errors and intervals, the model
    choice with the AICc of both, then notes; every line after the verdict fits in 100 columns."""
    verdict = r.verdict()
    lines = _wrap("", verdict) if len(verdict) > WIDTH else [verdict]
    n = len(r.load)
    fits = _fits(r)
    if n <= MAX_ROWS:
        head = f"  {r.load_name[:12]:>12}  {r.throughput_name[:20]:>20}"
        head += "".join(f"  {_TITLES[k].split()[0] + ' fit':>12}" for k, _ in fits)
        lines.append(head)
        for x, y in sorted(zip(r.load, r.throughput)):
            lines.append(f"  {x:>12.4g}  {y:>20.5g}" + "".join(f"  {f.predict(x):>12.5g}" for _, f in fits))
    else:
        lines.append(f"  {n} points, {r.load_name} {min(r.load):.3g} – {max(r.load):.3g}, "
                     f"{r.throughput_name} {min(r.throughput):.4g} – {max(r.throughput):.4g} (table in the details)")
    why = dict(r.unreliable)
    lvl = f"{r.level:.0%} interval" if r.boot else ""
    for key, f in fits:
        r2 = r.r2(f)
        tag = f"  {_TITLES[key]}: R² {r2:.3f}, AICc {f.aicc:.4g}" if r2 is not None else f"  {_TITLES[key]}:"
        lines.append(tag + (" — unreliable, not a finding" if key in why else ""))
        if key in why:
            lines += _wrap("      ", f"why: {why[key]}")
        for sym, what, v, se, ci in _param_rows(f):
            lines.append(f"    {sym:<6} {what:<22} {v:>12}  {se:<13} {(lvl + ' ' + ci) if ci else ''}".rstrip())
    if r.model in ("usl", "amdahl") and r.reliable("usl") and r.reliable("amdahl"):
        lines.append(f"  model choice (AICc, lower is better by > 2): {r.model} "
                     f"(Amdahl {r.amdahl.aicc:.4g}, USL {r.usl.aicc:.4g})")
    if fits:
        how = (f"wild bootstrap, {r.boot} resamples, seed {r.seed}" if r.boot else "no bootstrap (boot=0)")
        lines += _wrap("  method: ", f"least squares on {r.throughput_name}, X(1) = γ free; ± standard error from "
                       f"the Jacobian (every point's noise); intervals: {how}")
    for note in r.notes:
        lines += _wrap("  note: ", str(note))
    return "\n".join(lines)


def figure_png(r: Any) -> bytes | None:
    """The points, each reliable fit's curve, and the USL peak with its interval shaded."""
    if not r.load:
        return None
    fig = new_figure(6.0, 3.6)
    ax = fig.add_subplot(1, 1, 1)
    top = max(r.load)
    u = r.reliable("usl")
    pk = u.peak_n if u is not None and r.model == "usl" else None
    if pk is not None and pk < 3 * top:
        top = max(top, pk * 1.2)
    lo = min(min(r.load), 1.0) * 0.5
    xs = [lo + (top * 1.05 - lo) * i / 300 for i in range(301)]
    colours = {"usl": "tab:purple", "amdahl": "tab:orange", "gustafson": "tab:green"}
    for key, f in _fits(r):
        if r.reliable(key) is None:
            continue
        ax.plot(xs, [f.predict(x) for x in xs], color=colours[key], lw=2 if key == r.model else 1,
                label=_TITLES[key].split()[0] + (" (chosen)" if key == r.model else ""))
    if pk is not None and u is not None:
        a, b = u.intervals.get("peak", (pk, pk))
        if math.isfinite(b):
            ax.axvspan(a, b, color="tab:purple", alpha=0.12, lw=0, label=f"N* {r.level:.0%} interval")
        ax.axvline(pk, color="tab:purple", ls=":", lw=1)
    ax.plot(r.load, r.throughput, "o", color="tab:blue", ms=4 if len(r.load) > 40 else 6, label="data")
    ax.set_xlabel(r.load_name)
    ax.set_ylabel(r.throughput_name)
    ax.set_xlim(0, top * 1.05)
    ax.set_ylim(0, max(r.throughput) * 1.2)
    ax.legend(fontsize=7, frameon=False, loc="lower right")
    ax.set_title("scalability: " + (r.model or "no model"), fontsize=9, loc="left")
    return png_bytes(fig)


def html_sections(r: Any) -> list[tuple[str, str]]:
    """The points (with each fit's prediction), then every parameter with its error and interval."""
    fits = _fits(r)
    rows = [(f"{x:.6g}", f"{y:.6g}", *[f"{f.predict(x):.6g}" for _, f in fits])
            for x, y in sorted(zip(r.load, r.throughput))]
    out = [(f"Data ({len(r.load)} points, from {r.source})",
            table_html(rows, (r.load_name, r.throughput_name, *[_TITLES[k] + " fit" for k, _ in fits]),
                       scroll=True))]
    prows = []
    why = dict(r.unreliable)
    for key, f in fits:
        name = _TITLES[key] + (f" (unreliable: {why[key]})" if key in why else "")
        prows += [(name, f"{sym} {what}", v, se, ci) for sym, what, v, se, ci in _param_rows(f)]
        prows.append((name, "AICc / RSS", f"{f.aicc:.4g}", f"{f.rss:.4g}", ""))
    if prows:
        out.append(("Fits", table_html(prows, ("model", "parameter", "value", "std. error",
                                                f"{r.level:.0%} interval (bootstrap)"))))
    return out


__all__ = ["FIGURE_ALT", "figure_png", "headline", "html_sections", "text", "verdict"]
