"""The roofline drawn and said: the log-log chart (roofs, ridge points, earlier points, this one), the
folded HTML sections of a :class:`~perfmagic.roofs.roofline.RooflineResult` and of
:class:`~perfmagic.roofs.ceilings.Ceilings`, and the roofline's text (its verdict and advice in order).

Reads the results' attributes only; imports no analysis module (earlier points are recognised by
shape: an object with ``point()``, a mapping with ``intensity``/``flops_per_s``, or a tuple).
matplotlib is imported inside :func:`roofline_png` only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from ..result import Result
from .bundle import table_html
from .figures import new_figure, png_bytes
from .text import WIDTH, fit, fmt_bytes, fmt_rate, fmt_time, pct, wrap
from .warnings import warning_lines


def as_point(h: Any, i: int) -> dict[str, Any]:
    """One earlier point for the chart: a RooflineResult (anything with ``point()`` and ``label``), a
    ledger row or metrics dict with ``intensity`` and ``flops_per_s`` (and optional ``label``), or a
    ``(label, intensity, flops_per_s)`` tuple; unlabelled points are named ``#i``."""
    if callable(getattr(h, "point", None)):
        return {**h.point(), "label": getattr(h, "label", None) or f"#{i}"}
    if isinstance(h, Mapping):
        m = h.get("metrics", h)
        return {"label": str(h.get("label") or m.get("label") or f"#{i}"), "intensity": float(m["intensity"]),
                "flops_per_s": float(m["flops_per_s"])}
    label, x, y = h
    return {"label": str(label), "intensity": float(x), "flops_per_s": float(y)}


def figure_png(r: Any, history: Iterable[Any] = ()) -> bytes:
    """The chart of a roofline result: its roofs, ``history`` points labelled, this point highlighted."""
    return roofline_png(r.ceilings, [as_point(h, i) for i, h in enumerate(history, 1)], r.point(),
                        highlight_dtype=r.dtype)


def ceilings_png(c: Any, history: Iterable[Any] = ()) -> bytes:
    """The roofs alone (one per dtype, ridge points marked), with optional earlier points."""
    return roofline_png(c, [as_point(h, i) for i, h in enumerate(history, 1)], None)


def roofline_png(c: Any, history: list[dict[str, Any]], latest: dict[str, Any] | None,
                 highlight_dtype: str | None = None) -> bytes:
    """Draw the roofline chart (matplotlib object API on an Agg canvas) and return PNG bytes."""

    pts = [p for p in history + ([latest] if latest else []) if p["intensity"] > 0 and p["flops_per_s"] > 0]
    ridges = [c.compute[d] / c.bandwidth_Bps for d in c.compute]
    xs = [p["intensity"] for p in pts] + ridges
    x_lo = 10 ** math.floor(math.log10(min(xs) / 4))
    x_hi = 10 ** math.ceil(math.log10(max(xs) * 4))
    fig = new_figure(6.5, 4.0)
    ax = fig.subplots()
    bw = c.bandwidth_Bps
    n = 64
    grid = [x_lo * (x_hi / x_lo) ** (i / (n - 1)) for i in range(n)]
    colors = ["tab:blue", "tab:green", "tab:purple", "tab:brown", "tab:olive", "tab:cyan"]
    for k, (d, peak) in enumerate(sorted(c.compute.items(), key=lambda kv: -kv[1])):
        col = colors[k % len(colors)]
        lw = 2.2 if d == highlight_dtype else 1.2
        ax.plot(grid, [min(peak, x * bw) for x in grid], color=col, lw=lw, label=f"{d} {peak / 1e9:.4g} GFLOP/s")
        r = peak / bw
        ax.plot([r], [peak], "o", color=col, ms=5)
        ax.annotate(f"ridge {r:.3g}", (r, peak), textcoords="offset points", xytext=(4, -11 - 9 * k), fontsize=7, color=col)
    ax.plot(grid, [x * bw for x in grid], color="0.5", lw=0.8, ls=":",
            label=f"bandwidth {bw / 1e9:.4g} GB/s")
    for p in history:
        if p["intensity"] > 0 and p["flops_per_s"] > 0:
            ax.plot([p["intensity"]], [p["flops_per_s"]], "o", color="0.45", ms=5)
            ax.annotate(p["label"], (p["intensity"], p["flops_per_s"]), textcoords="offset points", xytext=(4, 3),
                        fontsize=7, color="0.35")
    if latest and latest["intensity"] > 0 and latest["flops_per_s"] > 0:
        ax.plot([latest["intensity"]], [latest["flops_per_s"]], "*", color="tab:red", ms=14, mec="k", mew=0.6,
                label=latest["label"], zorder=5)
        ax.annotate(latest["label"], (latest["intensity"], latest["flops_per_s"]), textcoords="offset points",
                    xytext=(6, 4), fontsize=8, color="tab:red", weight="bold")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ys = [p["flops_per_s"] for p in pts] + [min(c.compute.values()) / 1e3 if not pts else min(p["flops_per_s"] for p in pts)]
    ax.set_ylim(min(ys + [x_lo * bw]) / 2, max(c.compute.values()) * 2)
    ax.set_xlabel("arithmetic intensity [FLOP/byte]")
    ax.set_ylabel("FLOP/s")
    ax.set_title(f"roofline · {c.device} · measured {c.measured_utc[:10]}", fontsize=9, loc="left")
    ax.grid(True, which="both", lw=0.3, alpha=0.5)
    ax.legend(fontsize=7, loc="lower right", frameon=False)
    ax.tick_params(labelsize=7)
    return png_bytes(fig)


# ---- folded sections ------------------------------------------------------------------------------

def html_sections(r: Any) -> list[tuple[str, str]]:
    """The ops counted (heaviest first), the roofs it was judged against, and the timing."""
    out: list[tuple[str, str]] = []
    if r.counts is not None and r.counts.ops:
        rows = sorted(r.counts.ops.items(), key=lambda kv: -(kv[1].get("flops", 0) or 0))
        out.append((f"Ops counted ({len(rows)})", table_html(
            [(k, v.get("calls"), f"{v.get('flops', 0) or 0:.4g}", fmt_bytes(v.get("bytes", 0) or 0)) for k, v in rows],
            ("op", "calls", "FLOPs", "bytes"), scroll=True)))
    out.append((f"Roofs ({r.ceilings.device}, {r.ceilings.source})", _pre(r.ceilings.text())))
    out += [(f"Roofs: {t}", body) for t, body in ceilings_sections(r.ceilings)]
    if callable(getattr(r.bench, "text", None)):
        out.append(("Timing", _pre(r.bench.text())))
    return out


def ceilings_sections(c: Any) -> list[tuple[str, str]]:
    """How each roof was measured: the matmul sweep per dtype and method, the bandwidth kernels."""
    out: list[tuple[str, str]] = []
    rows = []
    for d, methods in (c.details.get("compute") or {}).items():
        for m, x in methods.items():
            for size, rate in x.get("sweep") or [[x.get("size"), x.get("flops_per_s")]]:
                rows.append((d, m, size, fmt_rate(rate, "FLOP") if rate else "", "best" if size == x.get("size") else ""))
    if rows:
        out.append(("compute sweep", table_html(rows, ("dtype", "method", "n", "rate", ""), scroll=True)))
    trials = []
    for d, methods in (c.details.get("compute") or {}).items():
        for m, x in methods.items():
            for size, rates in (x.get("trials") or {}).items():
                trials.append((d, m, size, ", ".join(fmt_rate(v, "FLOP") for v in rates),
                               "kept" if str(size) == str(x.get("size")) else "",
                               ("agree" if x.get("agreed") else "DISAGREE") if str(size) == str(x.get("size")) else ""))
    if trials:  # only calibrations that kept their trials (cache version 2)
        out.append(("compute trials", table_html(trials, ("dtype", "method", "n", "trials (fastest call each)", "",
                                                          "two best"), scroll=True)
                    + "<p style='font-size:12px'>the roof is the second-highest trial of the kept size: a rate "
                      "reached in two separate trials</p>"))
    bw = (c.details.get("bandwidth") or {})
    if bw.get("methods"):
        out.append(("bandwidth kernels", table_html(
            [(m, fmt_rate(x["bytes_per_s"], "B"), x.get("bytes_per_element"), x.get("passes"), x.get("reps", ""),
              ", ".join(fmt_rate(v, "B") for v in x.get("trials") or []))
             for m, x in bw["methods"].items()], ("method", "rate", "bytes/elt", "passes", "trials", "trial rates"))
            + (f"<p style='font-size:12px'>{_esc(_counting(bw['counting']))}</p>" if bw.get("counting") else "")))
    unsupported = c.details.get("unsupported") or {}
    if unsupported:
        out.append(("dtypes not measured", table_html([(d, str(w)) for d, w in unsupported.items()], ("dtype", "why"))))
    emulated = c.details.get("emulated") or {}
    if emulated:
        out.append(("dtypes emulated", table_html([(d, str(w)) for d, w in emulated.items()], ("dtype", "why"))))
    return out


def _counting(how: Any) -> str:
    """How the bandwidth kernels counted bytes: ``"stream"`` worded here; an older cache's text as it is."""
    from .findings_roofs import COUNTING

    return COUNTING if how == "stream" else str(how)


def _esc(s: str) -> str:
    import html

    return html.escape(str(s))


def _pre(text: str) -> str:
    return f"<pre style='margin:0;font-size:12px;white-space:pre-wrap'>{_esc(text)}</pre>"


__all__ = ["as_point", "ceilings_png", "ceilings_sections", "figure_png", "html_sections", "roofline_png"]


# ---- the text of a RooflineResult -----------------------------------------------------------------

def headline(r: Result) -> str:
    """The bound (memory, compute, or at the ridge), the intensity against the ridge, the roof reached."""
    x: Any = r
    if x.at_ridge:
        return (f"at the ridge: both compute and bandwidth limit it ({x.intensity:.3g} vs ridge "
                f"{x.ridge:.3g} FLOP/B, {x.intensity / x.ridge - 1:+.1%}; {x.dtype}, {x.device}) — "
                f"{fmt_rate(x.bytes_per_s, 'B')} = {pct(x.bytes_per_s / x.bandwidth_Bps, 0)} of the bandwidth "
                f"roof, {fmt_rate(x.flops_per_s, 'FLOP')} = {pct(x.flops_per_s / x.peak_flops_per_s, 0)} of "
                f"the {x.dtype} roof")
    roof = (f"{fmt_rate(x.bytes_per_s, 'B')} = {pct(x.fraction_of_roof, 0)} of the "
            f"{fmt_rate(x.bandwidth_Bps, 'B')} bandwidth roof" if x.bound == "memory" else
            f"{fmt_rate(x.flops_per_s, 'FLOP')} = {pct(x.fraction_of_roof, 0)} of the "
            f"{fmt_rate(x.peak_flops_per_s, 'FLOP')} {x.dtype} roof")
    return (f"{x.bound}-bound: {x.intensity:.3g} FLOP/B vs ridge {x.ridge:.3g} FLOP/B ({x.dtype}, "
            f"{x.device}) — {roof}")


def text(r: Result) -> str:
    """The verdict, the work and time per call, the rates, the advice in order, the roofs, notes and
    warnings; every line within 100 columns (a long one continues under its own indent + 2)."""
    x: Any = r
    first = headline(x) + (f"   [label {x.label}]" if x.label else "")
    lines = first.split(" — ", 1) if len(first) > WIDTH else [first]
    if len(lines) == 2:  # the bound, then the fraction of the roof under it
        lines[1] = "  " + lines[1]
    lines.append(f"  work per call: {x.flops:.4g} FLOP ({x.flops_source}), {fmt_bytes(x.bytes)} "
                 f"({x.bytes_source}{', algorithmic traffic' if x.bytes_source == 'counted' else ''}) · "
                 f"time {fmt_time(x.time_s)} median")
    lines.append(f"  achieved {fmt_rate(x.flops_per_s, 'FLOP')} · {fmt_rate(x.bytes_per_s, 'B')}; "
                 f"attainable {fmt_rate(x.attainable_flops_per_s, 'FLOP')} at this intensity")
    lines.append("  next, in order:")
    lines += ["\n".join(wrap(str(a), f"    {i}. ", "       ")) for i, a in enumerate(x.advice, 1)]
    c = x.ceilings
    mark = (f"; LOADED: others kept {c.others_cores:.1f} cores busy" if c.loaded else "") + (
        f"; unreliable: {', '.join(c.unreliable)}" if c.unreliable else "")
    lines.append(f"  roofs: {c.device} measured {c.measured_utc} ({c.source}, fingerprint {c.fingerprint}{mark})")
    lines += ["\n".join(wrap(str(n), "  note: ", "        ")) for n in x.notes]
    lines += warning_lines(x.warnings)  # the two that matter most; the rest folded
    physical = [p for ln in lines for p in ln.split("\n")]  # wrapped items are already several lines
    return "\n".join(fit(ln) for ln in physical)
