"""Drawing a rank sweep: the text table, the step-time/speedup figure and the folded HTML sections.

Reads a :class:`~perfmagic.ranks.result.RanksResult`; imports no analysis module. matplotlib is
imported inside :func:`figure_png` only.
"""

from __future__ import annotations

from typing import Any

from .bundle import table_html
from .figures import new_figure, png_bytes
from .text import WIDTH, fmt_bytes, fmt_time, wrap
from .warnings import warning_lines

#: the alt text of the figure in the HTML bundle (render/bundle.py)
FIGURE_ALT = "step time and speedup per world size"


def _wrap(first: str, line: str) -> list[str]:
    return wrap(line, first, width=WIDTH, break_long_words=True)


def _bw(x: float | None) -> str:
    return "—" if x is None else fmt_bytes(x) + "/s"


def _ranks_words(line: str) -> str:
    """The thread sweep's words for the rank sweep's points."""
    line = line.replace("worker counts", "world sizes").replace("workers", "ranks")
    return line.replace("up to 1 ranks", "up to 1 rank").replace("e.g. ranks=", "e.g. --ranks ")


def all_warnings(r: Any) -> list[str]:
    """Every `!` item of a rank sweep: world sizes left out of the fit, the sweep's warnings, then the
    fit's (in the ranks' words; the thread-count advice is said once, in the ranks' own words)."""
    out = [f"{w}* ranks not fitted: they {why}" for w, why in r.excluded] + [str(w) for w in r.warnings]
    sc = r.scaling
    for w in (str(x) for x in (sc.warnings if sc is not None else ())):
        if "exceed the" in w:  # said once, in the ranks' own words
            continue
        if w.startswith("other processes kept") and not r.needs_cores and sc.others_cores is not None:
            w = (f"other processes kept {sc.others_cores:.1f} of {r.cores} cores busy during the sweep; the "
                 "ranks kept under 0.4 cores busy (their steps wait), so the load did not hold them back")
        out.append(_ranks_words(w))
    return out


def text(r: Any) -> str:
    """The verdict, one row per world size, the fit's advice, warnings and notes (≤ 100 columns)."""
    lines = _wrap("", r.verdict())
    lines.append(f"  {'ranks':>5}  {'step':>9}  {'95% CI':>21}  {'speedup':>7}  {'effic.':>6}  {'comm':>5}  "
                 f"{'straggler':>14}  {'busbw (% roof)':>16}")
    sp, ef = dict(zip(r.worlds, r.speedups)), dict(zip(r.worlds, r.efficiencies))
    ex = dict(r.excluded)
    for p in r.points:
        if not p.ok:
            lines += _wrap(f"  {p.world:>5}  failed: ", p.error or "not measured")
            continue
        lo, hi = p.ci
        cs = "—" if p.comm_share is None or p.world == 1 else f"{p.comm_share:.0%}"
        sr = p.straggler_ratio
        st = "—" if sr is None else (f"{sr:.2f}× rank {p.straggler}" if p.straggler is not None else f"{sr:.2f}× none")
        if p.world in ex and sr is not None:  # a rank the OS descheduled says nothing about the code
            st = f"{sr:.2f}× (*)"
        bw = "—" if p.world == 1 or p.busbw is None else _bw(p.busbw)
        if p.busbw is not None and p.link_roof:
            bw += f" {p.busbw / p.link_roof:.0%}"
        mark = "*" if p.world in ex else " "
        lines.append(f"  {p.world:>4}{mark}  {fmt_time(p.median):>9}  {fmt_time(lo) + ' – ' + fmt_time(hi):>21}  "
                     f"{sp[p.world]:>6.2f}×  {ef[p.world]:>6.0%}  {cs:>5}  {st:>14}  {bw:>16}")
    sc = r.scaling
    if sc is not None:
        for a in sc.advice():
            lines += _wrap("  ", _ranks_words(a))
    roofs = [(p.world, p.link_roof) for p in r.good if p.link_roof]
    if roofs:
        lines += _wrap("  ", "link roof (all-reduce sweep, busbw = bytes/t × 2(n−1)/n): "
                       + ", ".join(f"{w} ranks {_bw(x)}" for w, x in roofs))
    lines += warning_lines(all_warnings(r))  # the two that matter most; the rest folded
    if sc is not None:
        for n in sc.notes:
            n = _ranks_words(str(n))
            if r.excluded and " world sizes: a model with" in n:  # the user did ask for more world sizes
                k = len(sc.good)
                n = (f"{k} world sizes fit on this machine's {r.cores} cores: a model fitted to {k} points says "
                     f"nothing, so none is fitted; on a machine with ≥ {max(w for w, _ in r.excluded)} cores "
                     "the same sweep is fitted")
            lines += _wrap("  note: ", n)
    for n in r.notes:
        lines += _wrap("  note: ", str(n))
    lines += wrap(f"{r.backend}, {r.start_method}; threads per rank: "
                  + ", ".join(f"{p.world}→{p.threads}" for p in r.points)
                  + f"; the sweep took {r.wall_s:.1f} s ("
                  + ", ".join(f"{p.world}: {p.wall_s:.1f} s" for p in r.points) + ")", "  ", "    ")
    return "\n".join(lines)


def figure_png(r: Any) -> bytes | None:
    """Left: per-rank median step (dots) and the job's step (bar) per world size. Right: speedup vs ideal."""
    g = r.good
    if not g:
        return None
    fig = new_figure(8.0, 3.2)
    ax = fig.add_subplot(1, 2, 1)
    for k, p in enumerate(g):
        ax.bar(k, p.median * 1e3, color="0.85", width=0.6, label="step (slowest rank)" if k == 0 else None)
        if p.comm_share and p.world > 1:
            ax.bar(k, p.median * 1e3 * p.comm_share, color="tab:orange", alpha=0.6, width=0.6,
                   label="in collectives" if k == 1 or len(g) == 1 else None)
        for rs in p.ranks:
            ax.plot(k, rs.median * 1e3, "o", color="tab:red" if rs.rank == p.straggler else "tab:blue", ms=4)
    ax.set_xticks(range(len(g)), [str(p.world) for p in g])
    ax.set_xlabel("ranks")
    ax.set_ylabel("step (ms); dots: each rank's median")
    ax.legend(fontsize=7, frameon=False, loc="upper right")
    ax2 = fig.add_subplot(1, 2, 2)
    ws = [p.world for p in g]
    ax2.plot(ws, [w / ws[0] for w in ws], "--", color="0.6", lw=1, label="ideal")
    ax2.plot(ws, r.speedups, "o-", color="tab:blue", label="measured")
    sc = r.scaling
    a = sc.reliable("amdahl") if sc is not None and not r.weak else None
    if a is not None:
        xs = [ws[0] + (ws[-1] - ws[0]) * i / 100 for i in range(101)]
        ax2.plot(xs, [a.predict(x) for x in xs], color="tab:orange", lw=1, label=f"Amdahl S={a.params['S']:.3f}")
    for w, _ in r.excluded:
        if w in ws:
            ax2.plot([w], [r.speedups[ws.index(w)]], "x", color="tab:red", ms=9, label=f"{w}: oversubscribed")
    ax2.set_xlabel("ranks")
    ax2.set_ylabel("scaled speedup" if r.weak else "speedup")
    ax2.legend(fontsize=7, frameon=False, loc="upper left")
    fig.suptitle(f"ranks ({r.backend})" + (" (interrupted)" if r.status != "ok" else ""), fontsize=9, x=0.02,
                 ha="left")
    return png_bytes(fig)


def html_sections(r: Any) -> list[tuple[str, str]]:
    """Every rank of every world size; the link sweep; the fit; the failing ranks' tracebacks."""
    rows = []
    for p in r.points:
        for s in p.ranks:
            rows.append((p.world, s.rank, fmt_time(s.median), len(s.times), fmt_time(s.cold_s or 0.0),
                         fmt_time(s.busy) if s.busy is not None else "",
                         f"{s.comm_share:.0%}" if s.comm_share is not None else "",
                         _bw(s.busbw(p.world)) if p.world > 1 else "", s.threads,
                         f"{s.busy_cores:.2f}" if s.busy_cores is not None else ""))
    out = [("Ranks", table_html(rows, ("world", "rank", "median step", "samples", "cold step", "busy (no comm)",
                                       "comm share", "all-reduce busbw", "threads", "busy cores"), scroll=True))]
    link = [(p.world, fmt_bytes(b), _bw(bw)) for p in r.points for b, bw in p.link]
    if link:
        out.append(("All-reduce link sweep (busbw = bytes/t × 2(n−1)/n)",
                    table_html(link, ("world", "message", "bus bandwidth"))))
    pts = [(p.world, p.error or "ok", f"{p.others_cores:.2f}" if p.others_cores is not None else "",
            f"{p.wall_s:.2f} s") for p in r.points]
    out.append(("World sizes", table_html(pts, ("world", "status", "others' cores", "cost"))))
    sc = r.scaling
    if sc is not None:
        fits = []
        for name, f in (("Amdahl", sc.amdahl_fit), ("USL", sc.usl_fit), ("Gustafson", sc.gustafson_fit)):
            if f is not None:
                fits += [(name, k, f"{v:.4g}", f"{f.stderr.get(k, float('nan')):.2g}") for k, v in f.params.items()]
        if fits:
            out.append(("Fits", table_html(fits, ("model", "parameter", "value", "std. error"))))
    for p in r.points:
        if p.traceback:
            import html

            out.append((f"Traceback ({p.world} ranks)", f"<pre>{html.escape(p.traceback)}</pre>"))
    return out


def verdict(r: Any) -> str:
    """One line: the best speedup over the world sizes that may be fitted, its comm share, the fit or why
    beyond some size cannot be told, the worst straggler; "cannot tell" under others' load."""
    tag = "  [INTERRUPTED]" if r.status != "ok" else ""
    g = r.good
    if not g:
        return f"ranks ({r.backend}): no world size measured successfully{tag}"
    sp, ef = r.speedups, r.efficiencies
    ex = dict(r.excluded)
    kind = "scaled speedup" if r.weak else "speedup"
    fit_ok = [i for i, p in enumerate(g) if p.world not in ex]
    i = max(fit_ok or range(len(g)), key=lambda j: sp[j])
    sc = r.scaling
    oc = r.load_too_high
    if oc is not None:
        return (f"ranks ({r.backend}): cannot tell how the step scales — other processes kept {oc:.1f} of "
                f"{r.cores} cores busy, too few left for the ranks (best measured {max(sp):.2f}×); "
                f"rerun on a quiet machine{tag}")
    if len(g) == 1:
        return _one_world(r, g[0], tag)
    if i == 0 and len(fit_ok) > 1:  # nothing beat the smallest world size
        j = fit_ok[1]
        head = (f"ranks ({r.backend}): no {kind} from more ranks: {g[j].world} ranks ran {sp[j]:.2f}× "
                f"({ef[j]:.0%} efficient)")
        i = j
    else:
        head = f"ranks ({r.backend}): best {kind} {sp[i]:.2f}× at {g[i].world} ranks ({ef[i]:.0%} efficient)"
    cs = g[i].comm_share
    if cs is not None and g[i].world > 1:
        head += f", {cs:.0%} of its step in collectives"
    over = [w for w in ex]
    if over:
        head += (f" · cannot tell beyond {max((p.world for p in g if p.world not in ex), default=0)} ranks: "
                 f"{', '.join(map(str, over))} ranks {ex[over[0]]}")
    elif sc is not None and sc.reliable("usl") and sc.best_model == "usl" and sc.peak_n is not None:
        head += f" · USL peak N* ≈ {sc.peak_n:.3g} ranks"
    elif sc is not None and sc.reliable("amdahl") and not r.weak:
        s = sc.amdahl_fit.params["S"]  # type: ignore[union-attr]
        head += f" · Amdahl S = {s:.3f}" + (f", ceiling {1 / s:.3g}×" if s > 0 else "")
    strag = [(p.world, p.straggler, p.straggler_ratio) for p in g if p.straggler is not None
             and p.world not in ex]
    if strag:
        w, r, x = max(strag, key=lambda t: t[2] or 0)
        head += f" · straggler: rank {r} at {w} ranks ({x:.2f}× the median rank)"
    return head + tag



def _one_world(r: Any, p: Any, tag: str) -> str:
    """The verdict of a sweep with one world size: its step, comm share and straggler, no scaling."""
    out = f"ranks ({r.backend}): {p.world} rank(s), step {fmt_time(p.median)}"
    if p.comm_share is not None and p.world > 1:
        out += f", {p.comm_share:.0%} of it in collectives"
    if p.straggler is not None:
        out += f" · straggler: rank {p.straggler} ({p.straggler_ratio:.2f}× the median rank's busy time)"
    elif p.straggler_ratio is not None:
        out += f" · no straggler ({p.straggler_ratio:.2f}×)"
    return out + f" · one world size: no scaling to show{tag}"


def headline(r: Any) -> str:
    return verdict(r)


__all__ = ["FIGURE_ALT", "figure_png", "headline", "html_sections", "text", "verdict"]
