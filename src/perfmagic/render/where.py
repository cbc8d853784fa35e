"""Where a change went (:class:`perfmagic.profile.where.WhereResult`): the sentence, the table of functions
by Δ with their intervals, and a differential icicle (width: the mean of A's and B's time, colour: Δ).

Every sentence about the attribution is written here; the numbers come from the result.
"""

from __future__ import annotations

import html as _html
from typing import Any

from .text import MINUS, clip, fit, fmt_time, pct, plural, wrap

TOP = 10


def signed_time(seconds: float) -> str:
    """``+1.02 ms``, ``−510 µs``."""
    return ("+" if seconds >= 0 else MINUS) + fmt_time(abs(seconds), 3)


def _interval(lo: float, hi: float) -> str:
    return f"{signed_time(lo)} … {signed_time(hi)}"


def _level(r: Any) -> str:
    return f"{r.confidence:.0%}"


def _name(row: Any) -> str:
    return row.name + (f" · {row.library}" if row.library else "")


def headline(r: Any) -> str:
    if r.refused is not None:
        return f"Where the change went: cannot tell, because {r.refused}"
    lo, hi = r.total_interval
    named = r.named()
    head = (f"Where the change went: B {MINUS} A = {signed_time(r.total_delta_s)} per call ({_level(r)} interval "
            f"{_interval(lo, hi)})")
    if not named:
        return head + f"; no function's change can be told from 0 over {plural(r.n_pairs, 'pair')}"
    parts = [f"{_name(x)} (by its torch ops: {signed_time(x.ops.delta_s)} per profiled call)" if x.by_ops else
             f"{_name(x)} {signed_time(x.delta_s)}" + (f" ({pct(x.share, 0)} of it)" if x.share and x.share > 0 else "")
             for x in named[:3]]
    more = f" and {len(named) - 3} more" if len(named) > 3 else ""
    return head + "; it went to " + ", ".join(parts) + more


def _table_lines(r: Any, top: int) -> list[str]:
    rows = r.rows()
    shown = [x for x in rows if x.named] + [x for x in rows if not x.named][: max(top - len(r.named()), 0)]
    head = f"    {'function':<26} {'where':<10} {'A self':>8} {'B self':>8} {'Δ':>9}  {_level(r) + ' interval':<21} share"
    out = [head]
    for x in shown[:max(top, len(r.named()))]:
        share = pct(x.share, 0) if x.share is not None and abs(x.share) < 10 else "—"
        sign = MINUS if x.share is not None and x.share <= -0.005 else ""
        out.append(f"  {'*' if x.named else ' '} {clip(_name(x), 26):<26} {clip(x.where, 10):<10} "
                   f"{fmt_time(x.a_s, 3):>8} {fmt_time(x.b_s, 3):>8} {signed_time(x.delta_s):>9}  "
                   f"{_interval(x.low_s, x.high_s):<21} {sign}{share}")
        if x.ops is not None and x.ops.named:
            out.append(f"  {'*' if x.by_ops else ' '} {'  its torch ops (profiled)':<37} {fmt_time(x.ops.a_s, 3):>8} "
                       f"{fmt_time(x.ops.b_s, 3):>8} {signed_time(x.ops.delta_s):>9}  {_interval(x.ops.low_s, x.ops.high_s)}")
    if len(rows) > len(shown):
        out.append(f"    … {plural(len(rows) - len(shown), 'more function')}, none named (the HTML lists them all)")
    return out


def text(r: Any, *, top: int = TOP) -> str:
    """The headline, how it was sampled, the table (named functions marked ``*``), and the rule; then the
    torch ops, where the code ran any."""
    lines = wrap(headline(r), rest="  ")
    lines.append(fit(f"  {plural(r.n_pairs, 'pair')} with samples of both sides (of {r.pairs_measured} measured), "
                     f"{r.n_samples:,} samples at {r.rate_hz:.0f} Hz: A and B sampled alike, wall clock, in-process"))
    if r.refused is None:
        lines += _table_lines(r, top)
        lines += wrap(f"* named: its {_level(r)} interval (a bootstrap over the pairs) excludes 0 and |Δ| ≥ "
                      f"{pct(r.floor, 0)} of A's time per call ({fmt_time(r.floor * r.a_total_s, 2)}); a function's "
                      "self time includes the libraries it calls, named after it (· numpy). Named rows come "
                      "first, by the end of their interval nearer 0." + (
                          " Torch code: a function is also named when the change in the torch ops it called, "
                          "profiled after the pairs, is named under the ops' rule (its line below it)."
                          if r.ops is not None and r.ops.funcs else ""), first="  ", rest="  ")
        lines += wrap(untold_line(r), first="  ", rest="  ") if r.untold() else []
    if r.ops is not None:
        lines += ops_lines(r.ops, top)
    return "\n".join(lines)


def untold_line(r: Any) -> str:
    """Why the largest unnamed move is not named, and the budget that would tell a move of its size."""
    row, factor = r.untold()
    head = (f"{_name(row)} {signed_time(row.delta_s)} ({_interval(row.low_s, row.high_s)}) is the largest move "
            f"not told from 0: cannot tell, because {plural(r.n_samples, 'sample')} at {r.rate_hz:.0f} Hz are "
            "too few for a move this size")
    if factor > r.tell_max:
        return head + f"; it would take about {factor:.0f}× the samples, too many to sample for"
    need = r.tell_budget_s(factor)
    return (head + f"; about {factor:.1f}× the samples would tell a move of {signed_time(row.delta_s)} from 0 "
            f"{pct(r.tell_power, 0)} of the time (these pairs ran {fmt_time(r.sampled_s, 2)}: "
            f"%perf compare --where -b {need})")


def _clock(o: Any) -> str:
    return "the kernels' own time on the GPU (CUDA timeline)" if o.clock == "cuda" else "self CPU time"


def ops_headline(o: Any) -> str:
    """The ops' sentence: the total Δ over the ops and the ops it went to."""
    if o.refused is not None:
        return f"Torch ops: cannot tell, because {o.refused}"
    lo, hi = o.total_interval
    head = (f"Torch ops ({_clock(o)}, torch.profiler on {plural(o.n_pairs, 'untimed pair')} after the timed ones): "
            f"B {MINUS} A = {signed_time(o.total_delta_s)} per call ({o.confidence:.0%} interval {_interval(lo, hi)})")
    named = o.named()
    if not named:
        return head + "; no op's change can be told from 0"
    return head + "; it went to " + ", ".join(f"{x.name} {signed_time(x.delta_s)}" for x in named[:3]) + (
        f" and {len(named) - 3} more" if len(named) > 3 else "")


def ops_lines(o: Any, top: int = TOP) -> list[str]:
    """The ops' sentence and table (named ops marked ``*``) and the rule."""
    lines = wrap(ops_headline(o), first="", rest="  ")
    if o.refused is not None:
        return lines
    rows = o.rows()
    shown = [x for x in rows if x.named] + [x for x in rows if not x.named][: max(top - len(o.named()), 0)]
    lines.append(f"    {'op':<37} {'A self':>8} {'B self':>8} {'Δ':>9}  {f'{o.confidence:.0%} interval':<21} share")
    for x in shown[:max(top, len(o.named()))]:
        share = pct(x.share, 0) if x.share is not None and abs(x.share) < 10 else "—"
        lines.append(f"  {'*' if x.named else ' '} {clip(x.name, 37):<37} {fmt_time(x.a_s, 3):>8} {fmt_time(x.b_s, 3):>8} "
                     f"{signed_time(x.delta_s):>9}  {_interval(x.low_s, x.high_s):<21} {share}")
    if len(rows) > len(shown):
        lines.append(f"    … {plural(len(rows) - len(shown), 'more op')}, none named (the HTML lists them all)")
    lines += wrap(f"* named: as for the functions, over the profiled pairs (|Δ| ≥ {pct(o.floor, 0)} of A's op time, "
                  f"{fmt_time(o.floor * o.a_total_s, 2)}); the profiler's own cost is in these times, not in the "
                  "verdict's.", first="  ", rest="  ")
    if getattr(o, "no_stacks", False):
        lines += wrap(NO_STACKS, first="  ", rest="  ")
    return lines


NO_STACKS = ("this torch's profiler recorded no Python frames (with_stack): the ops are not filed under the "
             "functions that called them, and the functions above are named by their samples alone")


def html_sections(r: Any) -> list[tuple[str, str]]:
    """``[(title, html)]``: every function with its Δ and interval."""
    from .bundle import table_html

    rows = r.rows()
    out = []
    if rows:
        cols = ("", "function", "where", "A self", "B self", "Δ", f"{_level(r)} interval", "share")
        with_ops = any(x.ops is not None for x in rows)
        if with_ops:
            cols += ("its torch ops: Δ (profiled)", "interval", "ops named")
        body = [("*" if x.named else "", _name(x), x.where, fmt_time(x.a_s, 3), fmt_time(x.b_s, 3),
                 signed_time(x.delta_s), _interval(x.low_s, x.high_s),
                 pct(x.share, 0) if x.share is not None else "—")
                + (((signed_time(x.ops.delta_s), _interval(x.ops.low_s, x.ops.high_s), "*" if x.ops.named else "")
                    if x.ops is not None else ("—", "", "")) if with_ops else ()) for x in rows]
        out.append((f"All {len(rows)} functions by Δ", table_html(body, cols, scroll=True)))
    ops = r.ops.rows() if r.ops is not None else []
    if ops:
        body = [("*" if x.named else "", x.name, fmt_time(x.a_s, 3), fmt_time(x.b_s, 3), signed_time(x.delta_s),
                 _interval(x.low_s, x.high_s), pct(x.share, 0) if x.share is not None else "—") for x in ops]
        out.append((f"All {len(ops)} torch ops by Δ ({_clock(r.ops)})",
                    table_html(body, ("", "op", "A self", "B self", "Δ", f"{r.ops.confidence:.0%} interval", "share"),
                               scroll=True)))
    return out


# ---- the differential icicle --------------------------------------------------------------------------

def _tree(r: Any) -> dict[tuple[str, ...], list[float]]:
    """Inclusive (A, B) time per call of every node of the folded paths."""
    nodes: dict[tuple[str, ...], list[float]] = {}
    for path, a, b in zip(r.paths, r.path_a_s, r.path_b_s):
        for d in range(1, len(path) + 1):
            ab = nodes.setdefault(path[:d], [0.0, 0.0])
            ab[0] += a
            ab[1] += b
    return nodes


def _colour(a: float, b: float) -> tuple[float, float, float]:
    """Red where B spends more, blue where it spends less, grey unchanged (saturating at ±50% of the node)."""
    m = max(a, b, 1e-30)
    t = max(-1.0, min(1.0, (b - a) / m / 0.5))
    if t >= 0:
        return (0.85, 0.85 - 0.55 * t, 0.85 - 0.65 * t)
    return (0.85 + 0.6 * t, 0.85 + 0.35 * t, 0.85)


def figure_png(r: Any) -> bytes | None:
    """A static differential icicle: each node's width is the mean of A's and B's time, its colour Δ."""
    if r.refused is not None or not r.paths:
        return None
    from .figures import new_figure, png_bytes

    nodes = _tree(r)
    total = sum(a + b for p, (a, b) in nodes.items() if len(p) == 1) / 2 or 1.0
    depth = max(len(p) for p in nodes)
    fig = new_figure(9.5, 0.5 + 0.32 * min(depth, 24))
    ax = fig.add_subplot(1, 1, 1)
    x0: dict[tuple[str, ...], float] = {(): 0.0}
    for path in sorted(nodes, key=lambda p: (len(p), p)):
        a, b = nodes[path]
        parent = path[:-1]
        left = x0.get(path, x0[parent])
        x0[parent] = left + (a + b) / 2 / total  # the next sibling starts after this one
        x0[path] = left
        w = (a + b) / 2 / total
        if len(path) > 24 or w <= 0:
            continue
        ax.barh(-len(path), w, left=left, height=0.92, color=_colour(a, b), edgecolor="white", linewidth=0.5)
        if w > 0.06:
            ax.text(left + 0.004, -len(path), clip(path[-1], max(int(w * 110), 4)), va="center", fontsize=7)
    ax.set_xlim(0, 1)
    ax.set_yticks([])
    ax.set_xlabel("share of the mean of A's and B's time per call (red: B spends more, blue: less)")
    ax.set_title(clip(headline(r), 110), fontsize=9, loc="left")
    return png_bytes(fig)


def differential_html(r: Any) -> str:
    """The same icicle as nested HTML blocks (inline styles, no script): hover shows A, B and Δ."""
    if r.refused is not None or not r.paths:
        return ""
    nodes = _tree(r)
    total = sum(a + b for p, (a, b) in nodes.items() if len(p) == 1) / 2 or 1.0

    def block(path: tuple[str, ...]) -> str:
        a, b = nodes[path]
        kids = sorted((p for p in nodes if len(p) == len(path) + 1 and p[:-1] == path), key=lambda p: p[-1])
        col = "rgb(%d,%d,%d)" % tuple(int(255 * c) for c in _colour(a, b))
        tip = _html.escape(f"{path[-1]}: A {fmt_time(a, 3)}, B {fmt_time(b, 3)}, Δ {signed_time(b - a)}")
        inner = "".join(block(k) for k in kids)
        return (f"<div title='{tip}' style='flex:{(a + b) / 2 / total:.6f} 1 0;min-width:0'>"
                f"<div style='background:{col};border:1px solid #fff;font:11px monospace;white-space:nowrap;"
                f"overflow:hidden;text-overflow:ellipsis;padding:1px 2px'>{_html.escape(path[-1])}</div>"
                f"<div style='display:flex'>{inner}</div></div>")

    roots = sorted((p for p in nodes if len(p) == 1), key=lambda p: p[0])
    return "<div style='display:flex;width:100%'>" + "".join(block(p) for p in roots) + "</div>"


def mimebundle(r: Any, *, text: str | None = None, plot: bool = True) -> dict[str, Any]:
    """``text/plain``, the icicle as PNG, and the HTML page: the text, the PNG, then folded: the icicle as
    HTML blocks (hover one for A, B and Δ) and every function's row."""
    from .bundle import bundle_of

    body = r.text() if text is None else text
    png = figure_png(r) if plot else None
    icicle = differential_html(r) if plot else ""
    sections = ([("Differential flame graph (hover a block: A, B, Δ)", icicle)] if icicle else []) + html_sections(r)
    return bundle_of(body, png, "differential flame graph (static)", sections)


__all__ = ["differential_html", "figure_png", "headline", "html_sections", "mimebundle", "signed_time", "text"]
