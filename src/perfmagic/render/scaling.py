"""Drawing a scaling sweep: the text table, the speedup figure and the folded HTML sections.

Reads an :class:`~perfmagic.scaling.result.AmdahlResult` (points, derived speedups, fits, advice);
imports no analysis module. matplotlib is imported inside :func:`figure_png` only.
"""

from __future__ import annotations

from typing import Any

from .bundle import table_html
from .figures import new_figure, png_bytes
from .text import WIDTH, fmt_time, wrap
from .warnings import warning_lines


def _wrap(first: str, line: str) -> list[str]:
    """One note or advice item as lines of at most WIDTH columns, continuation lines indented."""
    return wrap(line, first, width=WIDTH, break_long_words=True)


def text(r: Any) -> str:
    """The verdict, one row per worker count, the advice, the model choice, notes and warnings; every line
    after the verdict fits in 100 columns (long items wrap, indented)."""
    verdict = r.verdict()
    lines = _wrap("", verdict) if len(verdict) > WIDTH else [verdict]
    b = r.base_n
    sp, ef, kf = r.speedups, r.efficiencies, r.karp_flatt
    lines.append(f"  {'N':>4}  {'median':>10}  {'95% CI':>23}  {'speedup':>8}  {'effic.':>7}  {'Karp–Flatt':>10}")
    k = 0
    for p in r.points:
        if p.ok:
            lo, hi = p.ci
            e = kf[k]
            kfs = "—" if (p.n == b or e != e) else f"{e:.3f}"
            lines.append(f"  {p.n:>4}  {fmt_time(p.median):>10}  {fmt_time(lo) + ' – ' + fmt_time(hi):>23}  "
                         f"{sp[k]:>7.2f}×  {ef[k]:>7.0%}  {kfs:>10}")
            k += 1
        else:
            lines.append(f"  {p.n:>4}  failed: {p.error or 'not measured'}")
    if b is not None and b != 1:
        lines.append(f"  note: no N = 1 measured: speedups are relative to N = {b}, not to a serial run")
    for a in r.advice():
        lines += _wrap("  ", a)
    if r.best_model and not r.weak and r.reliable("amdahl") and r.reliable("usl"):
        lines.append(f"  model choice (AICc): {r.best_model} "
                     f"(Amdahl {r.amdahl_fit.aicc:.1f}, USL {r.usl_fit.aicc:.1f}; lower is better)")
    lines += warning_lines(r.warnings)  # named before the notes: the two that matter most; the rest folded
    for n in r.notes:
        lines += _wrap("  note: ", n)
    return "\n".join(lines)


def figure_png(r: Any) -> bytes | None:
    """Measured speedup (CI error bars), the ideal line, both fitted curves, the USL peak marked."""
    if len(r.good) < 2:
        return None

    ns, sp, ci, b = r.ns, r.speedups, r.speedup_ci, r.base_n or 1
    fig = new_figure(6.0, 3.6)
    ax = fig.add_subplot(1, 1, 1)
    top_n = max(ns)
    pk = r.peak_n
    if pk is not None and r.best_model == "usl" and pk < 4 * top_n:
        top_n = max(top_n, pk * 1.2)
    xs = [b + (top_n - b) * i / 200 for i in range(201)]
    ax.plot(xs, [x / b for x in xs], "--", color="0.6", lw=1, label="ideal")
    gf, af, uf = r.reliable("gustafson"), r.reliable("amdahl"), r.reliable("usl")  # unreliable fits: not drawn
    if r.weak and gf:
        ax.plot(xs, [gf.predict(x) for x in xs], color="tab:green", lw=1.5, label=f"Gustafson S={gf.params['S']:.3f}")
    if af and not r.weak:
        ax.plot(xs, [af.predict(x) for x in xs], color="tab:orange",
                lw=2 if r.best_model == "amdahl" else 1, label=f"Amdahl S={af.params['S']:.3f}")
    if uf and not r.weak:
        u = uf
        ax.plot(xs, [u.predict(x) for x in xs], color="tab:purple", lw=2 if r.best_model == "usl" else 1,
                label=f"USL σ={u.params['sigma']:.3f} κ={u.params['kappa']:.2g}")
        if pk is not None and xs[0] <= pk <= xs[-1]:
            ax.axvline(pk, color="tab:purple", ls=":", lw=1)
            ax.plot([pk], [u.predict(pk)], "v", color="tab:purple", ms=8, label=f"USL peak N*≈{pk:.3g}")
    lo = [max(s - c[0], 0.0) for s, c in zip(sp, ci)]
    hi = [max(c[1] - s, 0.0) for s, c in zip(sp, ci)]
    ax.errorbar(ns, sp, yerr=[lo, hi], fmt="o", color="tab:blue", capsize=3, label="measured (95% CI)")
    ax.set_xlabel("workers N" if r.mode == "variable" else "threads N")
    ax.set_ylabel("scaled speedup" if r.weak else (f"speedup vs N={b}" if b != 1 else "speedup"))
    ax.set_xlim(0, top_n * 1.05)
    ax.set_ylim(0, max(max(c[1] for c in ci), max(sp)) * 1.15)
    ax.legend(fontsize=7, frameon=False, loc="upper left")
    ax.set_title("scaling" + (" (interrupted)" if r.status != "ok" else ""), fontsize=9, loc="left")
    return png_bytes(fig)


def html_sections(r: Any) -> list[tuple[str, str]]:
    """Every point with its per-round medians (and errors), then the fitted parameters."""
    rows = []
    for p in r.points:
        rounds = ", ".join(fmt_time(b.median) for b in p.results)
        cores = f"{p.own_cores:.2f}" if p.own_cores is not None else ""
        others = f"{p.others_cores:.2f}" if p.others_cores is not None else ""
        ev = p.threads
        held = f"{ev.held_share:.0%}" if ev is not None and ev.held_share is not None else ""
        py = str(ev.working) if ev is not None else ""
        rows.append((p.n, fmt_time(p.median) if p.ok else "", rounds, len(p.times), cores, others, py, held,
                     p.error or ""))
    out = [(f"Points ({len(r.points)} worker counts, {r.rounds} rounds)",
            table_html(rows, ("N", "median", "median per round", "samples", "busy cores", "others' cores",
                              "Python threads working", "GIL held at sampler wake-ups", "error"), scroll=True))]
    fits = []
    why = dict(r.unreliable)
    for key, name, f in (("amdahl", "Amdahl", r.amdahl_fit), ("usl", "USL", r.usl_fit),
                         ("gustafson", "Gustafson", r.gustafson_fit)):
        if f is not None:
            mark = f" (unreliable: {why[key]})" if key in why else ""
            fits += [(name + mark, k, f"{v:.4g}", f"{f.stderr.get(k, float('nan')):.2g}") for k, v in f.params.items()]
            fits.append((name + mark, "AICc", f"{f.aicc:.4g}", ""))
    if fits:
        out.append(("Fits", table_html(fits, ("model", "parameter", "value", "std. error"))))
    return out


__all__ = ["figure_png", "html_sections", "text"]
