"""A :class:`~perfmagic.profile.lineprof.LineProfResult` drawn: the verdict, the text tables, the
HTML tables shaded by each line's share of its function's time, and a bar chart of the hottest lines.

Reads the result's attributes and imports no analysis module; matplotlib is imported inside
:func:`figure_png` (object API on an Agg canvas: no pyplot, no global state).
"""

from __future__ import annotations

import html as _html
from typing import Any

from ..result import Result
from .figures import new_figure, png_bytes
from .units import clip as _clip
from .units import fmt_time

#: the alt text of the figure in the HTML bundle (render/bundle.py)
FIGURE_ALT = "time of the hottest lines"

HOT_COLOR = (255, 99, 71)  # background of hot lines in HTML, its alpha proportional to the line's share


def verdict(r: Any) -> str:
    """The first line: the hottest line, its share of its function's time, its hits."""
    tag = {"ok": "", "error": "  [STOPPED BY AN EXCEPTION]", "interrupted": "  [INTERRUPTED]"}[r.status]
    hot = r.hot_lines(1)
    if not hot:
        names = ", ".join(f.name for f in r.functions)
        return f"lineprof: {names} {'was' if len(r.functions) == 1 else 'were'} never called by the cell{tag}"
    h = hot[0]
    return (f"lineprof: hottest line {h.label} in {h.function}(): {h.share:.0%} of its {fmt_time(_total(r, h.function))} "
            f"— `{_clip(h.text, 60)}` ({h.hits:,} hits){tag}")


def _total(r: Any, name: str) -> float:
    return next((f.total_s for f in r.functions if f.name == name), 0.0)


headline = verdict


def text(r: Result) -> str:
    """The hottest line, the hottest lines by share of their function's time, each function's table."""
    lines = [verdict(r)]
    hot = r.hot_lines()
    if len(hot) > 1:
        lines.append("  hottest lines (share of their function's time):")
        for h in hot:
            lines.append(f"    {h.share:>6.1%}  {fmt_time(h.time_s):>10}  {h.label:<18} {h.function}(): {_clip(h.text, 50)}")
    hot_set = {(h.function, h.label) for h in hot}
    for f in r.functions:
        last = f.first_lineno + len(f.source) - 1
        lines.append("")
        lines.append(f"{f.name}() — {f.where}, lines {f.first_lineno}–{last} — {fmt_time(f.total_s)}"
                     + ("" if f.called else " (never called)"))
        lines.append(f"  {'Line':>5} {'Hits':>10} {'Time':>10} {'Per hit':>10} {'% Time':>7}   Line contents")
        timed = {ln.lineno: ln for ln in f.lines}
        for i, src in enumerate(f.source):
            no = f.first_lineno + i
            ln = timed.get(no)
            mark = ">" if (f.name, f.label(no)) in hot_set else " "
            if ln is not None and ln.hits:
                lines.append(f"{mark} {no:>5} {ln.hits:>10,} {fmt_time(ln.time_s, 3):>10} "
                             f"{fmt_time(ln.time_s / ln.hits, 3):>10} {f.share(ln):>7.1%}   {src.rstrip()}")
            else:
                lines.append(f"{mark} {no:>5} {'':>10} {'':>10} {'':>10} {'':>7}   {src.rstrip()}")
    if r.error:
        lines.append(f"  stopped by {r.error}; the profile covers the run up to there")
    lines += [f"  note: {n}" for n in r.notes]
    return "\n".join(lines)


def html(r: Any) -> str:
    """The verdict and the line tables (see :func:`tables_html`), with the notes under them."""
    parts = [f"<div class='perfmagic-lineprof' style='font-size:12px'><div><b>{_html.escape(verdict(r))}</b></div>",
             *_tables(r)]
    notes = [f"stopped by {r.error}; the profile covers the run up to there"] if r.error else []
    parts += [f"<div style='color:#555'>{_html.escape(str(n))}</div>" for n in notes + list(r.notes)]
    parts.append("</div>")
    return "".join(parts)


def tables_html(r: Any) -> str:
    """Tables with each line's background proportional to its share of the function's time."""
    return "<div class='perfmagic-lineprof' style='font-size:12px'>" + "".join(_tables(r)) + "</div>"


def _tables(r: Any) -> list[str]:
    cr, cg, cb = HOT_COLOR
    parts = []
    for f in r.functions:
        last = f.first_lineno + len(f.source) - 1
        parts.append(f"<div style='margin-top:6px'><b>{_html.escape(f.name)}()</b> — {_html.escape(f.where)}, "
                     f"lines {f.first_lineno}–{last} — {fmt_time(f.total_s)}"
                     f"{'' if f.called else ' (never called)'}</div>")
        parts.append("<table style='font-size:12px;border-collapse:collapse'><tr><th>Line</th><th>Hits</th>"
                     "<th>Time</th><th>Per hit</th><th>% Time</th><th style='text-align:left'>Line contents</th></tr>")
        timed = {ln.lineno: ln for ln in f.lines}
        for i, src in enumerate(f.source):
            no = f.first_lineno + i
            ln = timed.get(no)
            code = f"<td style='text-align:left'><pre style='margin:0'>{_html.escape(src.rstrip())}</pre></td>"
            if ln is not None and ln.hits:
                s = f.share(ln)
                parts.append(f"<tr style='background:rgba({cr},{cg},{cb},{s:.3f})'><td>{no}</td><td>{ln.hits:,}</td>"
                             f"<td>{fmt_time(ln.time_s, 3)}</td><td>{fmt_time(ln.time_s / ln.hits, 3)}</td>"
                             f"<td>{s:.1%}</td>{code}</tr>")
            else:
                parts.append(f"<tr><td>{no}</td><td></td><td></td><td></td><td></td>{code}</tr>")
        parts.append("</table>")
    return parts


def figure_png(r: Any) -> bytes | None:
    """A bar chart of the hottest lines' time (None when no line ran; ImportError without matplotlib)."""
    hot = r.hot_lines(max(r.top, 8))
    if not hot:
        return None
    fig = new_figure(7.5, 0.4 + 0.28 * len(hot))
    ax = fig.subplots()
    ax.barh(range(len(hot)), [h.time_s for h in hot][::-1], color="tab:red")
    ax.set_yticks(range(len(hot)), [_clip(f"{h.label}  {h.text}", 48) for h in hot][::-1], fontsize=7)
    ax.set_xlabel("time [s] (inclusive)", fontsize=7)
    ax.tick_params(labelsize=7)
    return png_bytes(fig)


def html_sections(r: Any) -> list[tuple[str, str]]:
    """``[(title, html)]``: the shaded line tables, folded under the text report."""
    return [("Line tables, shaded by each line's share of its function's time", tables_html(r))] if r.functions else []
