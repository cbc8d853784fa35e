"""Drawing a dataloader check: the text report, the per-step figure and the folded HTML sections.

Reads a :class:`~perfmagic.dataloader.result.DataLoaderResult` (its samples, derived properties,
audit and the ``PLATEAU`` threshold); imports no analysis module. matplotlib is imported inside
:func:`figure_png` only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .bundle import table_html
from .dataloader_audit import MARKS, line, speed_change
from .figures import new_figure, png_bytes
from .text import fmt_time, plural, wrap


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else math.nan


def verdict(r: Any) -> str:
    """The headline: input- or compute-bound, with the mean wait, compute and step; [INTERRUPTED] if so."""
    tag = "  [INTERRUPTED]" if r.status != "ok" else ""
    if not r.n_steps:
        return f"dataloader check: no step measured{tag}"
    f, w, c, bar = r.data_wait_fraction, _mean(r.wait_s), _mean(r.compute_s), r.INPUT_BOUND
    nums = (f"wait {fmt_time(w)} + compute {fmt_time(c)} = step {fmt_time(w + c)} "
            f"(mean of {r.n_steps} steps after {r.warmup} warm-up)")
    if f > bar:
        return f"input-bound: {f:.0%} of each step waits for data — {nums}{tag}"
    return f"compute-bound: data wait is {f:.0%} of the step (≤ {bar:.0%}) — {nums}{tag}"


def text(r: Any) -> str:
    """The full report: verdict, start-up, loader and compute alone, headroom, GPU, audit, sweep, notes."""
    lines = [r.verdict()]
    c = r.cfg
    if r.first_batch_s is not None:
        start = f"  start-up: first batch after {fmt_time(r.first_batch_s)}"
        if c.get("num_workers"):
            start += f" (starting {plural(c['num_workers'], 'worker')})"
        lines.append(start + f"; {r.warmup} warm-up batches not counted")
    busy = r.loaded_phases()
    if busy:  # every pass is watched: a number taken beside a busy neighbour is flagged where it is shown
        said = ", ".join(f"{x:.1f} cores during {_PHASE.get(n, n)}" for n, x in busy)
        lines.append(f"  ! load: other processes used {said} ({r.cores} usable cores): the times of "
                     f"{'that pass include' if len(busy) == 1 else 'those passes include'} their competition "
                     "for the cores")
    bps, co = r.loader_batches_per_s, r.compute_only_step_s
    if bps is not None:
        bs = c.get("batch_size")
        lines.append(f"  loader alone: {bps:.4g} batches/s ({fmt_time(1 / bps)} per batch"
                     + (f", {bps * bs:.4g} samples/s)" if bs else ")"))
    if co is not None and r.n_steps:
        lines += _compute_alone(r, co)
    if bps is not None and co:
        pace = f"  headroom: loader {fmt_time(1 / bps)}/batch vs compute {fmt_time(co)}/step: "
        gap = r.load_gap("loader", "compute")
        if gap or r.compute_disagreement is not None:
            why = gap or "compute alone disagrees with the loop's compute (above)"
            lines.append(pace + f"cannot tell which sets the pace, because {why}")
        else:
            lim = "the loader" if 1 / bps > co else "the compute"
            lines.append(pace + f"{lim} sets the pace of an overlapped loop (≥ {fmt_time(max(1 / bps, co))} "
                         "per step)")
    if r.cuda:
        g = r.gpu_idle_fraction
        lines.append(f"  GPU: idle {g:.0%} of each step (CUDA events)" if g is not None else "  GPU: in use")
        if r.h2d_s is not None:
            ov = ("can overlap compute (pinned, non_blocking)" if r.batch_pinned and r.copies_non_blocking
                  else "cannot overlap compute (" + ", ".join(
                      x for x, bad in (("pageable memory", not r.batch_pinned),
                                       ("blocking copy", r.copies_non_blocking is False)) if bad) + ")"
                  if (not r.batch_pinned or r.copies_non_blocking is False) else "overlap unknown")
            lines.append(f"  host→device copy of one batch: {fmt_time(r.h2d_s)}; {ov}")
    fs = r.findings()
    if fs:
        lines.append("  configuration:")
        for f in fs:  # wrapped: text/plain stays within 100 columns
            lines += wrap(line(f), "    ", "      ", break_long_words=True)
    if r.sweep:
        lines += ["  sweep:"] + ["    " + ln for ln in sweep_table(r).splitlines()]
        b, p = r.best, r.plateau
        if b is not None and p is not None:
            unit = "samples/s" if b.batch_size else "batches/s"
            gap = r.load_gap(*(q.label for q in r.sweep if q.ok))
            if gap:  # a loaded setting set against a quiet one: no best named as a fact
                lines.append(f"    best: cannot tell, because {gap} (highest measured: {b.label}, "
                             f"{b.throughput:.4g} {unit})")
                b = p = None
        if b is not None and p is not None:
            msg = f"    best: {b.label} ({b.throughput:.4g} {unit})"
            if p is not b:
                msg += f"; plateau from {p.label} (within {1 - r.PLATEAU:.0%} of the best)"
            pw = dict(p.setting).get("num_workers")
            if pw is not None and pw == r.cores:
                msg += f" — at the core count ({r.cores} usable cores)"
            elif pw is not None and pw > r.cores:
                msg += (f" — beyond the {r.cores} usable cores: the loading waits (I/O) more than it "
                        "computes")
            lines.append(msg)
    lines += [f"  note: {n}" for n in r.notes]
    return "\n".join(lines[:1] + [_wrap(ln) for ln in lines[1:]])  # the verdict is the headline: one line


_PHASE = {"loop": "the loop", "loader": "the loader-alone pass", "compute": "compute alone"}


def _compute_alone(r: Any, co: float) -> list[str]:
    """Compute alone set against the loop: the gain from infinitely fast data, the step slowed by the
    workers, or why neither can be told (the passes ran under different loads, or they disagree)."""
    sp, gap, dis = r.step_s / co, r.load_gap("loop", "compute"), r.compute_disagreement
    head = f"  compute alone (cached batch): {fmt_time(co)} per step vs {fmt_time(r.step_s)} in the loop → "
    if r.pause_explains and not gap:
        paused, lc = _median(r.compute_paused_s), _median(r.compute_s)
        return [f"  compute alone (cached batch): {fmt_time(co)} per step back to back; {fmt_time(paused)} after "
                f"a {fmt_time(r.pause_s)} pause (the loop's wait for data), against {fmt_time(lc)} in the loop "
                "(medians): a short step runs slower after a pause (its caches and the CPU go cold while the "
                "loader works) → with infinitely fast data the steps run back to back and the loop would be "
                f"{speed_change(sp)}"]
    if gap or dis is not None:
        out = [head + "cannot tell the gain from infinitely fast data, because "
               + (gap or "the two disagree (below)")]
        if dis is not None:
            lc = _median(r.compute_s)
            said = (f"the step alone took {fmt_time(co)}, {dis:.2f}× its compute in the loop ({fmt_time(lc)}, "
                    "medians)" if dis > 1 else
                    f"the step's compute in the loop took {fmt_time(lc)}, {1 / dis:.2f}× its time alone "
                    f"({fmt_time(co)}, medians)")
            pair = [(n, r.phase_cores(n)) for n in ("loop", "compute")]
            why = ("other processes used " + " and ".join(f"{x:.1f} cores during {_PHASE[n]}" for n, x in pair)
                   if all(x is not None for _, x in pair) and max(x for _, x in pair) > r.LOADED
                   else "load does not explain it (both passes quiet)" + _pause_tried(r)
                        + ": check that every batch does the same work")
            out.append(f"  ! inconsistent: {said}; {why}"
                       + (". The audit uses the loop's own compute" if r.input_bound else ""))
        return out
    if r.step_slowed and not any(f.topic == "threads" and f.level == "warn" for f in r.findings()):
        # slowed, but the audit does not blame the workers (they hardly ran, others kept cores busy)
        return [f"  compute alone (cached batch, workers stopped): {fmt_time(co)} per step; in the loop "
                f"{fmt_time(r.step_s)}: the step ran {r.step_slowdown:.2f}× its time alone there (see threads "
                "below)"]
    if r.step_slowed:
        w = r.cfg.get("num_workers", 0)
        grew, wait = co * (r.step_slowdown - 1), sum(r.wait_s) / len(r.wait_s)  # (medians of compute, mean wait)
        said = ("mostly the step's own compute slowed by the workers (below), not waiting for data" if grew > wait
                else f"of which the step's own compute slowed by {fmt_time(grew)} with the workers (below) and "
                f"{fmt_time(max(wait, 0.0))} is the wait for data")
        return [f"  compute alone (cached batch, workers stopped): {fmt_time(co)} per step; in the loop "
                f"{fmt_time(r.step_s)}, {said}",
                f"  the step itself slowed {fmt_time(co)} → {fmt_time(co * r.step_slowdown)} (median, "
                f"{r.step_slowdown:.2f}×) while {plural(w, 'worker')} ran: they compete for the {r.cores} usable cores"]
    if sp >= 1.05:
        return [f"  compute alone (cached batch): {fmt_time(co)} per step → with infinitely fast data the loop "
                f"would be {speed_change(sp)}"]
    return [head + "no gain from infinitely fast data" + (f" (alone it ran {speed_change(sp)})"
                                                          if sp <= 1 / 1.05 else "")]


def _pause_tried(r: Any) -> str:
    """Where the step was also timed after pauses as long as the loop's wait and that did not reproduce the
    loop's compute: the measurement that rules the pause out."""
    share = r.pause_share
    if share is None or r.pause_s is None:
        return ""
    said = "nor does a pause between steps" if share < 0.15 else f"a pause between steps makes up {share:.0%} of it"
    return (f", {said} (after a {fmt_time(r.pause_s)} pause, as long as the loop's wait, the step took "
            f"{fmt_time(_median(r.compute_paused_s))})")


def _median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return (s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2) if n else math.nan


def _wrap(ln: str, width: int = 100) -> str:
    """A line longer than ``width`` wrapped, its continuation indented two more spaces."""
    if len(ln) <= width:
        return ln
    ind = " " * (len(ln) - len(ln.lstrip(" ")) + 2)
    return "\n".join(wrap(ln, "", ind, width, break_long_words=True))

def sweep_table(r: Any) -> str:
    """One row per sweep setting: first batch, step, data wait, throughput."""
    hdr = f"{'setting':<28} {'first batch':>11} {'step':>10} {'wait':>6} {'throughput':>12}"
    rows = [hdr]
    for p in r.sweep:
        if not p.ok:
            rows.append(f"{p.label:<28} failed: {p.error}")
            continue
        unit = "/s" if p.batch_size else " b/s"
        rows.append(f"{p.label:<28} {fmt_time(p.first_batch_s):>11} {fmt_time(p.step_s):>10} "
                    f"{p.data_wait_fraction:>6.0%} {p.throughput:>10.4g}{unit}"
                    + (f"  (others: {p.others_cores:.1f} cores)" if p.loaded else ""))
    return "\n".join(rows)


def figure_png(r: Any) -> bytes | None:
    """Stacked bars per step (wait over compute; warm-up pale) and the sweep (or the headroom) chart."""
    if not r.n_steps:
        return None
    try:
        fig = new_figure(8.0, 2.8)
    except ImportError:
        return None
    ax, bx = fig.subplots(1, 2, gridspec_kw={"width_ratios": [2.2, 1]})
    ws = list(r.warmup_wait_s) + list(r.wait_s)
    cs = list(r.warmup_compute_s) + list(r.compute_s)
    scale, unit = (1e-3, "ms") if max(w + c for w, c in zip(ws, cs)) < 2 else (1.0, "s")
    nw = len(r.warmup_wait_s)
    xs = list(range(len(ws)))
    alpha = [0.35] * nw + [1.0] * r.n_steps
    cvals, wvals = [c / scale for c in cs], [w / scale for w in ws]
    blue = [(0.12, 0.47, 0.71, a) for a in alpha]
    red = [(0.84, 0.15, 0.16, a) for a in alpha]
    ax.bar(xs, cvals, color=blue, width=0.85)
    ax.bar(xs, wvals, bottom=cvals, color=red, width=0.85)
    from matplotlib.patches import Patch

    ax.legend(handles=[Patch(color=red[-1], label="waiting for data"), Patch(color=blue[-1], label="compute")],
              loc="upper right", fontsize=7, frameon=False)
    top = max(cvals[nw:][i] + wvals[nw:][i] for i in range(r.n_steps)) * 1.6
    for i in xs[:nw]:  # a start-up bar far above the steady state is clipped and labelled
        if cvals[i] + wvals[i] > top:
            ax.text(i, top * 0.97, f"{(cvals[i] + wvals[i]):.3g}", ha="center", va="top", fontsize=6)
    ax.set_ylim(0, top if top > 0 else 1)
    if nw:
        ax.axvline(nw - 0.5, color="0.5", lw=0.8, ls="--")
    ax.set_xlabel(f"step ({nw} warm-up, pale)" if nw else "step")
    ax.set_ylabel(f"time [{unit}]")
    ax.set_title(r.verdict().split(" — ")[0], fontsize=9, loc="left")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    good = [p for p in r.sweep if p.ok]
    if good:
        best = r.best
        ys = [p.throughput for p in good]
        bx.bar(range(len(good)), ys, color=["tab:green" if p is best else "tab:gray" for p in good])
        bx.set_xticks(range(len(good)), [", ".join(str(v) for _, v in p.setting) for p in good], fontsize=7)
        bx.set_xlabel(" × ".join(k for k, _ in good[0].setting), fontsize=8)
        bx.set_ylabel("samples/s" if good[0].batch_size else "batches/s", fontsize=8)
        bx.set_title("sweep (best in green)", fontsize=9, loc="left")
    else:
        names, vals = ["loop step"], [r.step_s / scale]
        if r.compute_only_step_s is not None:
            names.append("compute alone")
            vals.append(r.compute_only_step_s / scale)
        if r.loader_batches_per_s:
            names.append("loader alone")
            vals.append(1 / r.loader_batches_per_s / scale)
        bx.barh(range(len(vals)), vals, color=["tab:purple", "tab:blue", "tab:red"][: len(vals)])
        bx.set_yticks(range(len(vals)), names, fontsize=7)
        bx.set_xlabel(f"time per step / batch [{unit}]", fontsize=8)
        bx.set_title("headroom", fontsize=9, loc="left")
    for a in (ax, bx):
        a.tick_params(labelsize=7)
    return png_bytes(fig)


def html_sections(r: Any) -> list[tuple[str, str]]:
    """The sweep table, the audit, every step's samples and the loader's settings, as folded sections."""
    out: list[tuple[str, str]] = []
    if r.sweep:
        rows = [(p.label, fmt_time(p.first_batch_s), fmt_time(p.step_s), f"{p.data_wait_fraction:.0%}",
                 f"{p.throughput:.4g}" + ("/s" if p.batch_size else " b/s"),
                 f"loaded: other processes used {p.others_cores:.1f} cores" if p.loaded else "") if p.ok
                else (p.label, "", "", "", "", p.error or "not measured") for p in r.sweep]
        out.append((f"Sweep ({len(r.sweep)} settings)",
                    table_html(rows, ("setting", "first batch", "step", "wait", "throughput", "error / load"))))
    fs = r.findings()
    if fs:
        out.append((f"Audit ({len(fs)} findings)", table_html(
            [(MARKS.get(f.level, "·"), f.topic, f.message, f.effect) for f in fs],
            ("", "setting", "found", "expected effect"))))
    if r.n_steps or r.warmup_wait_s:
        nw = len(r.warmup_wait_s)
        gpu = list(r.gpu_busy_s)
        rows = []
        for i, (w, c) in enumerate(zip(list(r.warmup_wait_s) + list(r.wait_s),
                                       list(r.warmup_compute_s) + list(r.compute_s))):
            g = gpu[i - nw] if i >= nw and i - nw < len(gpu) else None
            rows.append((i, "warm-up" if i < nw else "", fmt_time(w), fmt_time(c), fmt_time(w + c),
                         fmt_time(g) if g is not None else ""))
        out.append((f"Per-step samples ({nw} warm-up + {r.n_steps})",
                    table_html(rows, ("step", "", "wait", "compute", "step", "GPU busy"), scroll=True)))
    if r.config:
        out.append(("Loader settings", table_html([(k, v) for k, v in r.config])))
    return out


__all__ = ["verdict", "figure_png", "html_sections", "speed_change", "sweep_table", "text"]
