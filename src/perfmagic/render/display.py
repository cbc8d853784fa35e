"""Rendering of results: text/plain always, a figure as PNG, and an ipywidgets view when live.

Measuring and rendering are separate: these functions only read a result. matplotlib and ipywidgets
are imported here, on first display, never at ``%load_ext``. The figure is drawn with the
object-oriented API on an Agg canvas (no pyplot, no global backend state).

The bundle a timing result displays is ``text/plain`` (terminals), ``text/html`` (the text *and* the
figure as an inline PNG: JupyterLab, nbconvert HTML, GitHub), ``image/png`` and, in a live kernel whose
front end can show widgets, ``application/vnd.jupyter.widget-view+json``. Front ends without the widget
manager fall back to the HTML. A widget view outlives its kernel only as "model not found", so
``notebooks/run.py`` drops dead views from executed notebooks; ``PERFMAGIC_WIDGETS=0`` turns widgets off.
"""

from __future__ import annotations

import base64
import html
import io
import math
import os
import sys
from typing import Any

from .units import fmt_bytes, fmt_time

_TIME_SCALES = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))


def _time_unit(x: float) -> tuple[str, float]:
    for unit, scale in _TIME_SCALES:
        if x >= scale:
            return unit, scale
    return "ns", 1e-9


def bench_figure_png(r: Any) -> bytes | None:
    """A 2-panel PNG: per-call time of every block (warmup grey, samples blue) and a histogram."""
    if not r.raw:
        return None
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    unit, scale = _time_unit(r.median)
    warm = [d / k / scale for k, d in r.warmup]
    meas = [t / scale for t in r.times]
    fig = Figure(figsize=(7.5, 2.3), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax, hx = fig.subplots(1, 2, gridspec_kw={"width_ratios": [2.2, 1]})
    ax.plot(range(len(warm)), warm, ".", color="0.6", ms=3, label=f"warmup ({len(warm)})")
    xs = range(len(warm), len(warm) + len(meas))
    ax.plot(xs, meas, ".", color="tab:blue", ms=3, label=f"samples ({len(meas)})")
    lo, hi = r.ci
    ax.axhspan(lo / scale, hi / scale, color="tab:orange", alpha=0.25, lw=0)
    ax.axhline(r.median / scale, color="tab:orange", lw=1, label=f"median {fmt_time(r.median)}")
    top = max(meas + warm[-len(warm) // 2:] if warm else meas)
    ax.set_ylim(0, top * 1.15 if top > 0 else 1)
    ax.set_xlabel("block (in order)")
    ax.set_ylabel(f"time per call [{unit}]")
    ax.legend(loc="lower right", fontsize=7, frameon=False, ncol=3)
    ax.set_title(r.label or "timeline", fontsize=9, loc="left")
    hx.hist(meas, bins=min(40, max(5, len(meas) // 3)), color="tab:blue", alpha=0.8)
    hx.axvline(r.median / scale, color="tab:orange", lw=1)
    hx.set_xlabel(f"time per call [{unit}]")
    hx.set_yticks([])
    hx.set_title("distribution", fontsize=9, loc="left")
    for a in (ax, hx):
        a.tick_params(labelsize=7)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def widgets_available(shell: Any) -> bool:
    """True in a live ipykernel (comms work) with ipywidgets installed, unless PERFMAGIC_WIDGETS=0."""
    if os.environ.get("PERFMAGIC_WIDGETS", "1") == "0":
        return False
    if shell is None or getattr(shell, "kernel", None) is None:
        return False
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


def _kv_table(d: dict[str, Any]) -> str:
    rows = "".join(f"<tr><th style='text-align:left;padding-right:1em'>{html.escape(str(k))}</th>"
                   f"<td style='text-align:left'>{html.escape(str(v))}</td></tr>" for k, v in d.items())
    return f"<table style='font-size:12px'>{rows}</table>"


def tabs_widget(text: str, tabs: list[tuple[str, str, Any]]) -> Any:
    """An ipywidgets view: the text summary above tabs of ``(title, "png" | "html", content)``."""
    import ipywidgets as w

    children = [w.Image(value=c, format="png") if kind == "png" else w.HTML(c) for _, kind, c in tabs]
    tab = w.Tab(children=children)
    for i, (title, _, _) in enumerate(tabs):
        tab.set_title(i, title)
    return w.VBox([w.HTML(f"<pre style='margin:0;font-size:12px'>{html.escape(text)}</pre>"), tab])


def widget_entry(view: Any) -> dict[str, Any]:
    return {"version_major": 2, "version_minor": 0, "model_id": view.model_id}


def attach_widget(bundle: dict[str, Any], make_view: Any) -> dict[str, Any]:
    """Add the ipywidgets view ``make_view()`` to a static bundle; a broken widget stack only adds a note."""
    try:
        bundle["application/vnd.jupyter.widget-view+json"] = widget_entry(make_view())
    except Exception as exc:  # a broken widget stack must not lose the result
        bundle["text/plain"] += f"\n  (widget unavailable: {type(exc).__name__}; static figure shown)"
    return bundle


def _bench_widget(r: Any, text: str, png: bytes | None) -> Any:
    times = "".join(f"<tr><td>{i}</td><td>{fmt_time(t)}</td></tr>" for i, t in enumerate(r.times))
    flat_env = {k: v for k, v in r.env.items() if not isinstance(v, (dict, list))}
    tabs: list[tuple[str, str, Any]] = [("Samples", "png", png)] if png is not None else []
    tabs += [("Raw samples", "html", f"<div style='max-height:220px;overflow:auto'><table style='font-size:12px'>"
                                     f"<tr><th>#</th><th>time per call</th></tr>{times}</table></div>"),
             ("Policy & environment", "html", _kv_table({**r.policy, **flat_env}))]
    return tabs_widget(text, tabs)


def text_figure_bundle(text: str, png: bytes | None, alt: str) -> dict[str, Any]:
    """``text/plain``, ``image/png`` and a ``text/html`` that carries the text *and* the figure.

    Front ends show one mimetype per output, and the summary must stay visible beside the figure
    (JupyterLab, nbconvert HTML, GitHub), so the HTML holds both; terminals get the text.
    """
    bundle: dict[str, Any] = {"text/plain": text}
    img = ""
    if png is not None:
        b64 = base64.b64encode(png).decode("ascii")
        bundle["image/png"] = b64
        img = f"<br><img src='data:image/png;base64,{b64}' alt='{html.escape(alt)}'>"
    bundle["text/html"] = (f"<div class='perfmagic-result'><pre style='margin:0;font-size:12px'>"
                           f"{html.escape(text)}</pre>{img}</div>")
    return bundle


def bench_bundle(r: Any, run_id: Any = None, *, widget: bool = False, plot: bool = True) -> dict[str, Any]:
    """The display bundle of a timing result (see module docstring)."""
    text = r.text(run_id if run_id is not None else getattr(r, "run_id", None))
    bundle: dict[str, Any] = {"text/plain": text}
    png = None
    if plot:
        try:
            png = bench_figure_png(r)
        except ImportError:
            text += "\n  (matplotlib is not installed: no figure)"
            bundle["text/plain"] = text
    bundle = text_figure_bundle(text, png, "timeline and histogram of the samples")
    if widget:
        attach_widget(bundle, lambda: _bench_widget(r, text, png))
    return bundle


def display_bundle(bundle: dict[str, Any]) -> None:
    from IPython.display import display

    display(bundle, raw=True)


def is_kernel() -> bool:
    ipy = sys.modules.get("IPython")
    shell = ipy.get_ipython() if ipy else None
    return getattr(shell, "kernel", None) is not None


# ---- the ledger table ---------------------------------------------------------------------------

def metric_text(row: dict[str, Any]) -> str:
    """The headline metric of a ledger row, e.g. ``5.07 ms ±0.2% (120×1)``."""
    m = row.get("metrics") or {}
    if row.get("magic") == "amdahl":
        parts = [f"S={m['S']:.3g}" if m.get("S") is not None else "no fit"]
        if m.get("max_speedup"):
            parts.append(f"best {m['max_speedup']:.2f}×")
        if m.get("recommended_workers"):
            parts.append(f"worth {m['recommended_workers']} workers")
        return ", ".join(parts)
    if row.get("magic") == "dataloader_check" and m.get("data_wait_fraction") is not None:
        txt = f"{m.get('verdict') or ''}: {m['data_wait_fraction']:.0%} of each step waits for data".lstrip(": ")
        if m.get("step_s") is not None:
            txt += f" (step {fmt_time(m['step_s'], 3)})"
        if m.get("best_setting"):
            txt += f"; best {m['best_setting']}"
        return txt
    if row.get("magic") == "estimate":
        if m.get("predicted_s") is None or not m.get("reliable", True):
            return "no reliable estimate"
        txt = f"predicts {fmt_time(m['predicted_s'], 3)}"
        if m.get("low_s") is not None and m.get("high_s") is not None:
            txt += f" [{fmt_time(m['low_s'], 3)} – {fmt_time(m['high_s'], 3)}]"
        if m.get("verdict") and m["verdict"] not in ("no budget given",):
            txt += f", {m['verdict']}"
        if m.get("actual_s") is not None:
            err = m.get("time_error")
            txt += f"; actual {fmt_time(m['actual_s'], 3)}" + (f" ({err:+.0%})" if err is not None else "")
        return txt
    if m.get("bound") and m.get("fraction_of_roof") is not None:  # a roofline run
        return f"{m['bound']}-bound, {m['fraction_of_roof']:.0%} of roof ({fmt_time(m.get('median_s'))})"
    key = row.get("primary_metric")
    v = m.get(key) if key else None
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "no samples" if m.get("n_samples") == 0 else "—"
    if key and key.endswith("_s"):
        txt = fmt_time(v)
        lo, hi = m.get("ci_low_s"), m.get("ci_high_s")
        if lo is not None and hi is not None and v:
            txt += f" ±{(hi - lo) / 2 / v:.1%}"
        if m.get("n_samples") is not None:
            txt += f" ({m['n_samples']}×{m.get('number', 1)})"
        return txt
    if key and key.endswith("_bytes") and isinstance(v, (int, float)):
        txt = f"peak +{fmt_bytes(v)}" if key == "peak_bytes" else fmt_bytes(v)
        if key == "peak_bytes" and isinstance(m.get("increment_bytes"), (int, float)):
            txt += f", increment {fmt_bytes(m['increment_bytes'])}"
        return txt
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _when(created: str | None) -> str:
    if not created:
        return ""
    from datetime import datetime

    try:
        dt = datetime.fromisoformat(created.replace("Z", "+00:00")).astimezone()
    except ValueError:
        return created
    return dt.strftime("%m-%d %H:%M:%S")


def _first_code_line(code: str | None) -> str:
    lines = [ln for ln in (code or "").splitlines() if ln.strip()]
    body = [ln for ln in lines if not ln.lstrip().startswith("%%")]
    s = (body[0] if body else (lines[0] if lines else "")).strip()
    return s if len(s) <= 40 else s[:39] + "…"


def ledger_bundle(rows: list[dict[str, Any]], *, total: int, where: str, notebook: str | None,
                  changes: dict[int, str] | None = None) -> dict[str, Any]:
    """text/plain and text/html for ``%perf``: one line per run, newest first."""
    title = (f"perfmagic ledger — {notebook or 'no notebook (working directory)'} — {where}\n"
             f"{total} run{'s' if total != 1 else ''}" + (f", newest {len(rows)} shown" if total > len(rows) else ""))
    changes = changes or {}
    cols = ("id", "when", "magic", "label", "status", "result", "vs baseline", "code")
    table = []
    for r in rows:
        rid = str(r.get("id")) + ("" if r.get("saved", True) else "*")
        table.append((rid, _when(r.get("created_utc")), r.get("magic") or "", (r.get("label") or "")[:30],
                      r.get("status") or "", metric_text(r), changes.get(r.get("id"), ""),
                      _first_code_line(r.get("code"))))
    widths = [max([len(c)] + [len(t[i]) for t in table]) for i, c in enumerate(cols)]
    fmt = "  ".join("{:<%d}" % w for w in widths)
    lines = [title, fmt.format(*cols)] + [fmt.format(*t) for t in table]
    if not rows:
        lines.append("(no runs yet: time something with %%gpubench)")
    if any(not r.get("saved", True) for r in rows):
        lines.append("* kept in memory only: the ledger file could not be written")
    head = "".join(f"<th style='text-align:left'>{c}</th>" for c in cols)
    def td(i: int, x: str) -> str:
        style = "text-align:left"
        if cols[i] == "vs baseline":
            for verdict, color in VERDICT_COLORS.items():
                if verdict in x:
                    style += f";color:{color};font-weight:bold"
        return f"<td style='{style}'>{html.escape(x)}</td>"

    body = "".join("<tr>" + "".join(td(i, x) for i, x in enumerate(t)) + "</tr>" for t in table)
    htm = (f"<div><div style='font-size:12px;color:#555'>{html.escape(title)}</div>"
           f"<table style='font-size:12px'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>")
    return {"text/plain": "\n".join(lines), "text/html": htm}


# ---- comparisons ----------------------------------------------------------------------------------

VERDICT_COLORS = {"faster": "#1a7f37", "slower": "#cf222e", "no real change": "#57606a", "inconclusive": "#9a6700"}


def comparison_bundle(rc: Any) -> dict[str, Any]:
    """text/plain and text/html of a :class:`perfmagic._history.RunComparison`."""
    head, numbers = rc.headline(), rc.numbers()
    color = VERDICT_COLORS.get(rc.comparison.verdict, "#000")
    notes = "".join(f"<div>{html.escape(n)}</div>" for n in rc.notes)
    htm = (f"<div class='perfmagic-compare' style='font-size:12px'>"
           f"<div style='font-weight:bold;color:{color}'>{html.escape(head)}</div>"
           f"<div>{html.escape(numbers)}</div>{notes}{rc.what.html()}</div>")
    return {"text/plain": rc.text(), "text/html": htm}


SPARK = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float]) -> str:
    vals = [v for v in values if v is not None and v == v]
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    if hi <= lo:
        return SPARK[3] * len(vals)
    return "".join(SPARK[min(7, int((v - lo) / (hi - lo) * 7.999))] for v in vals)


def history_png(rows: list[dict[str, Any]], label: str, baseline_id: int | None) -> bytes:
    """Runs of one label over time: median with its CI as error bars, the baseline marked."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows = sorted(rows, key=lambda r: r["id"])
    meds = [(r.get("metrics") or {}).get("median_s") for r in rows]
    unit, scale = _time_unit(max(m for m in meds if m) if any(meds) else 1.0)
    fig = Figure(figsize=(7.5, 2.6), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    xs = list(range(len(rows)))
    for x, r in zip(xs, rows):
        m = r.get("metrics") or {}
        med, lo, hi = m.get("median_s"), m.get("ci_low_s"), m.get("ci_high_s")
        if med is None:
            continue
        color = "tab:orange" if r["id"] == baseline_id else ("tab:red" if r.get("status") != "ok" else "tab:blue")
        err = [[(med - lo) / scale if lo is not None else 0], [(hi - med) / scale if hi is not None else 0]]
        ax.errorbar([x], [med / scale], yerr=err, fmt="o", color=color, ms=4, capsize=3)
    if baseline_id is not None:
        base = next((r for r in rows if r["id"] == baseline_id), None)
        if base and (base.get("metrics") or {}).get("median_s"):
            b = base["metrics"]["median_s"] / scale
            ax.axhline(b, color="tab:orange", lw=0.8, ls="--", label=f"baseline #{baseline_id}")
            ax.axhspan(b / 1.1, b * 1.1, color="tab:orange", alpha=0.08, lw=0)
            ax.legend(loc="best", fontsize=7, frameon=False)
    ax.set_xticks(xs, [f"#{r['id']}\n{_when(r.get('created_utc'))[6:11]}" for r in rows], fontsize=7)
    ax.set_ylabel(f"median time per call [{unit}]")
    ax.set_title(f"history of '{label}' (error bars: 95% CI of the median; band: ±10% of the baseline)",
                 fontsize=9, loc="left")
    ax.tick_params(labelsize=7)
    ax.set_ylim(bottom=0)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def roofline_widget(r: Any, text: str, png: bytes) -> Any:
    """The live view of a roofline result: chart, per-op counts, and the roofs it was judged against."""
    ops = ""
    if r.counts is not None:
        rows = sorted(r.counts.ops.items(), key=lambda kv: -(kv[1].get("flops", 0) or 0))
        ops = "".join(f"<tr><td>{html.escape(str(k))}</td><td>{v.get('calls')}</td><td>{v.get('flops', 0):.4g}</td>"
                      f"<td>{v.get('bytes', 0):.4g}</td></tr>" for k, v in rows)
    table = (f"<div style='max-height:240px;overflow:auto'><table style='font-size:12px'><tr><th>op</th><th>calls</th>"
             f"<th>FLOPs</th><th>bytes</th></tr>{ops}</table></div>" if ops else "<i>work given with --flops/--bytes</i>")
    roofs = f"<pre style='font-size:12px'>{html.escape(r.ceilings.text())}</pre>"
    return tabs_widget(text, [("Roofline", "png", png), ("Ops counted", "html", table), ("Roofs", "html", roofs)])


def scaling_widget(r: Any, text: str, png: bytes) -> Any:
    """The live view of a scaling sweep: the chart, and every point with its rounds."""
    rows = []
    for p in r.points:
        times = ", ".join(fmt_time(b.median) for b in p.results) if p.results else ""
        rows.append(f"<tr><td>{p.n}</td><td>{html.escape(times)}</td><td>{html.escape(p.error or '')}</td></tr>")
    table = ("<div style='max-height:240px;overflow:auto'><table style='font-size:12px'><tr><th>N</th>"
             f"<th>median per round</th><th>error</th></tr>{''.join(rows)}</table></div>")
    return tabs_widget(text, [("Speedup", "png", png), ("Points", "html", table)])
