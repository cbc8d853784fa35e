"""Drawing a scaling sweep: the text table, the speedup figure and the folded HTML sections.

Reads an :class:`~perfmagic.scaling.result.AmdahlResult` (points, derived speedups, fits, advice);
imports no analysis module. matplotlib is imported inside :func:`figure_png` only.
"""

from __future__ import annotations

import math
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
                     f"(Amdahl {_aicc(r.amdahl_fit)}, USL {_aicc(r.usl_fit)}; lower is better)")
    lines += warning_lines(r.warnings)  # named before the notes: the two that matter most; the rest folded
    for n in r.notes:
        lines += _wrap("  note: ", str(n))
    return "\n".join(lines)


def _aicc(fit: Any) -> str:
    """A fit's AICc, or why it has none (``n/a: 4 counts for 3 parameters``; it was printed as ``inf``)."""
    if math.isinf(fit.aicc):
        return f"n/a: {fit.n} counts for {len(fit.params)} parameters"
    return f"{fit.aicc:.1f}"


def _pm(x: float, se: float | None, digits: int = 3) -> str:
    """A fitted parameter with its standard error: ``0.12 ± 0.01`` (the value alone when there is none)."""
    if se is None or se != se:
        return f"{x:.{digits}g}"
    return f"{x:.{digits}g} ± {se:.2g}"


_MODEL_NAMES = {"amdahl": "Amdahl", "usl": "USL", "gustafson": "Gustafson"}


def advice(r: Any) -> list[str]:
    """What the sweep advises, one item a line: workers worth having, each reliable fit read out, a baseline
    the fit does not pass through, and why a fit is not a finding."""
    out: list[str] = []
    rec = r.recommended_workers
    if rec is not None and not r.flat and len(r.ns) >= 2:
        out.append(f"worth it up to {rec} workers (measured: beyond that efficiency < 50% or the speedup "
                   "stops rising)")
    if not r.weak:
        out += _strong_fits(r)
    g = r.reliable("gustafson")
    if g is not None:
        n, s = max(r.ns), g.params["S"]
        out.append(f"Gustafson (weak scaling): serial fraction S = {_pm(s, g.stderr['S'])}; "
                   f"scaled speedup at N = {n}: {n - s * (n - 1):.3g}×")
    f = r.reliable(r.best_model) if r.best_model else None
    gamma = f.params.get("gamma") if f is not None else None
    if gamma is not None and r.base_n == 1 and abs(gamma - 1) > 0.1:
        out.append(f"the fit puts N = 1 at {gamma:.2f}× the measured baseline speed: that point ran "
                   f"{'slow' if gamma > 1 else 'fast'} (noise, warm-up, load); the curve is not pinned to it, and "
                   "the speedups above are relative to the measured point")
    for model, why in r.unreliable:
        out.append(f"{_MODEL_NAMES[model]}: fit unreliable, not a finding: {why}")
    return out


def _strong_fits(r: Any) -> list[str]:
    """The Amdahl and USL fits of a strong-scaling sweep, read out."""
    out: list[str] = []
    a = r.reliable("amdahl")
    if a is not None:
        s = a.params["S"]
        if s > 0:
            out.append(f"Amdahl: serial fraction S = {_pm(s, a.stderr['S'])} -> at most {1 / s:.3g}× on any "
                       f"number of workers; efficiency falls below 50% beyond N ≈ {1 + 1 / s:.3g}. Shrink the "
                       "serial part before adding workers")
        else:
            out.append("Amdahl: no serial fraction detected (S ≈ 0): scaling is ideal over the range measured")
    u = r.reliable("usl")
    if u is not None:
        sg, kp = u.params["sigma"], u.params["kappa"]
        line = f"USL: contention σ = {_pm(sg, u.stderr['sigma'])}, coherency κ = {_pm(kp, u.stderr['kappa'], 3)}"
        pk = u.peak_n
        if pk is not None and r.best_model == "usl":
            line += f"; throughput peaks at N* ≈ {pk:.3g} workers and falls beyond (retrograde)"
        elif pk is not None and math.isinf(u.aicc):  # too few counts to weigh it, which is no evidence against it
            line += (f"; its peak N* ≈ {pk:.3g} cannot be weighed against Amdahl: {len(r.good)} worker counts "
                     f"are too few for its AICc (at least {len(u.params) + 2})")
        elif pk is not None:
            line += f"; its peak N* ≈ {pk:.3g} is not supported over Amdahl (AICc)"
        out.append(line)
    return out


def verdict(r: Any) -> str:
    """One line: the best speedup and the model that explains it, or why there is none (others' load, the
    GIL, native code, a flat time)."""
    g = r.good
    tag = "  [INTERRUPTED]" if r.status != "ok" else ""
    if len(g) < 2:
        return f"scaling: fewer than two worker counts measured successfully — nothing to fit{tag}"
    sp = r.speedups
    i = max(range(len(sp)), key=lambda j: sp[j])
    what = r.var if r.mode == "variable" else "threads"
    d = r.diagnosis
    load = "" if r.named_load is None else f"others kept {r.named_load:.1f} of {r.cores or '?'} cores busy"
    if d == "load":
        return (f"cannot tell: {load}, at most one left free — the speedups measured (best {sp[i]:.2f}×) say "
                f"nothing about the code; rerun on a quiet machine{tag}")
    pre = f"{load} · " if load else ""
    why = _no_speedup(r, what, sp[i])
    if why is not None:
        return f"{pre}{why}{tag}"
    rel = "" if r.base_n == 1 else f" relative to N = {r.base_n}"
    kind = "scaled speedup" if r.weak else "speedup"
    head = f"{pre}best {kind} {sp[i]:.2f}×{rel} at N = {r.ns[i]} ({r.efficiencies[i]:.0%} efficient)"
    return head + _model_part(r) + tag


def _no_speedup(r: Any, what: str, best: float) -> str | None:
    """Why the sweep shows no speedup (the GIL, native code, one thread, a flat time), or None."""
    d = r.diagnosis
    if r.gil:
        return "no speedup from threads: the workers serialize on the GIL — use processes"
    if d == "native":
        return f"no speedup from {what}, and not the GIL: it stayed free (native code, I/O or waits)"
    if d == "one-thread":
        return ("no speedup from threads: the cell runs Python bytecode in one thread, which torch/BLAS "
                "threads cannot split")
    if d == "cannot-tell":
        return f"no speedup from {what} (best {best:.2f}×); cannot tell why: no evidence that Python code held the GIL"
    if r.flat:
        lo, hi = min(p.median for p in r.good), max(p.median for p in r.good)
        return (f"the time does not change with {what} ({fmt_time(lo)} – {fmt_time(hi)}, within noise): the "
                "cell ignores the worker count or does not run in parallel; nothing to fit")
    return None


def _model_part(r: Any) -> str:
    """What the verdict adds after the best speedup: the model that fits, or why none is named."""
    if r.diagnosis == "speedups-only":
        return f" · {len(r.good)} counts: no model fitted"
    if r.diagnosis == "fit-unreliable":
        return " · no model fits reliably (see below)"
    gf = r.reliable("gustafson")
    if r.weak and gf:
        return f" · Gustafson S = {gf.params['S']:.3f}"
    u = r.reliable("usl")
    if r.best_model == "usl" and u and u.peak_n is not None:
        return f" · USL fits best: peak at N* ≈ {u.peak_n:.3g}, slower beyond"
    a = r.reliable("amdahl")
    if a:
        s = a.params["S"]
        ceil = f", ceiling {1 / s:.3g}×" if s > 0 else ", no ceiling in sight"
        return f" · Amdahl S = {s:.3f}{ceil} · worth it up to {r.recommended_workers} workers"
    return ""


def headline(r: Any) -> str:
    return verdict(r)


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


__all__ = ["advice", "figure_png", "headline", "html_sections", "text", "verdict"]
