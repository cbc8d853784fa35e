"""A :class:`~perfmagic.profile.memresult.MemoryResult` drawn: the verdict, the text report, the
timeline figure and the HTML tables folded under the report.

Reads the result's attributes and imports no analysis module; matplotlib is imported inside
:func:`figure_png` (object API on an Agg canvas: no pyplot, no global state).
"""

from __future__ import annotations

import html
from typing import Any

from ..result import Result
from .bundle import table_html
from .figures import new_figure, png_bytes
from .units import clip as _clip
from .text import wrap
from .units import fmt_bytes, fmt_time

#: the alt text of the figure in the HTML bundle (render/bundle.py)
FIGURE_ALT = "memory over the cell's run, peak marked"


def verdict(r: Any) -> str:
    tag = {"ok": "", "error": "  [STOPPED BY AN EXCEPTION]", "interrupted": "  [INTERRUPTED]"}[r.status]
    peak = r.peak_bytes
    if peak is None:
        return f"memory: no measurement available on this platform{tag}"
    what = "CUDA peak" if r.device.startswith("cuda") and r.cuda_peak_bytes is not None else "peak"
    st = r.peak_statement
    where = f" at {st.label}" if st is not None and len(r.statements) > 1 else ""
    inc = r.increment_bytes
    return (f"memory: {what} +{fmt_bytes(peak)} above the start{where} · increment {_signed(inc)} · "
            f"{fmt_time(r.wall_s)}{tag}")


headline = verdict


def site_name(label: str, text: str, *, sampled: bool = False) -> str:
    """A site as the ``top_site`` metric names it: where, its line (clipped) and, for a site found by
    sampling RSS growth rather than tracemalloc, that it was."""
    return f"{label}: {_clip(text, 60)}" + (" (sampled growth)" if sampled else "")


def text(r: Result, *, top: int | None = None) -> str:
    """The verdict, the statements' peaks and the ``top`` allocation sites, notes and warnings."""
    lines = [verdict(r)]
    if r.missed_peak:
        lines.append(f"  ! short-lived peak: the RSS sampler (every {fmt_time(r.interval_s)}, "
                     f"{len(r.t_s)} samples) saw at most +{fmt_bytes(r.sampled_peak_bytes)}, but "
                     + " and ".join(f"{n} saw +{fmt_bytes(v)}" for n, v in
                                    (("the kernel's high-water mark (VmHWM)", r.hwm_peak_bytes),
                                     ("tracemalloc", r.traced_peak_bytes)) if v is not None)
                     + ": the peak lasted less than a sampling interval")
    if r.rss_bytes:
        true = (f"true peak {fmt_bytes(r.rss_start + r.hwm_peak_bytes)} (VmHWM)"
                if r.hwm_peak_bytes is not None and r.rss_start is not None else "no VmHWM here")
        lines.append(f"  RSS     start {fmt_bytes(r.rss_start)} · max sampled {fmt_bytes(max(r.rss_bytes))} · "
                     f"{true} · end {fmt_bytes(r.rss_end)}")
    if r.tracing == "sample":
        pass  # the growth sites below say how they were found
    elif r.tracing == "auto-idle":
        lines.append(f"  traced  tracemalloc not started: RSS never grew {fmt_bytes(r.auto_trace_bytes)} above the start "
                     "(--trace on traces from the first line, at a cost)")
    elif r.tracing != "off" and r.traced_peak_bytes is not None:
        how = {"on": "from the first line", "already running": "already running",
               "auto-started": f"from {fmt_time(r.trace_started_s)}, when RSS had grown "
                               f"{fmt_bytes(r.auto_trace_bytes)}: earlier blocks not attributed"}[r.tracing]
        lines.append(f"  traced  peak +{fmt_bytes(r.traced_peak_bytes)} · net {_signed(r.traced_net_bytes)} "
                     f"(tracemalloc {how}; {r.nframe} frames)")
    if r.device.startswith("cuda"):
        lines.append(f"  CUDA    peak allocated +{fmt_bytes(r.cuda_peak_bytes)} above {fmt_bytes(r.cuda_base_bytes)} · "
                     f"increment {_signed(r.cuda_increment_bytes)} · peak reserved "
                     f"{fmt_bytes(r.cuda_reserved_peak_bytes)} ({r.device})")
    if len(r.statements) > 1:
        lines.append("  per statement (peak above its own start):")
        for s in r.statements:
            parts = []
            if s.rss_peak_bytes is not None and r.hwm_method == "vmhwm":
                parts.append(f"RSS +{fmt_bytes(s.rss_peak_bytes):>10}")
            if s.traced_peak_bytes is not None:
                parts.append(f"traced +{fmt_bytes(s.traced_peak_bytes):>10}")
            if s.cuda_peak_bytes is not None:
                parts.append(f"CUDA +{fmt_bytes(s.cuda_peak_bytes):>10}")
            lines.append(f"    {s.label:<16} {'  '.join(parts)}  {fmt_time(s.end_s - s.start_s):>9}  {_clip(s.text, 50)}")
    n = top if top is not None else 10
    if r.sites:
        lines.append("  top allocation sites (still allocated at the end, tracemalloc):")
        for s in r.sites[:n]:
            lines.append(f"    {fmt_bytes(s.size_bytes):>10}  {s.count:>7} blocks  {s.label:<24} {_clip(s.text, 50)}")
    elif r.tracing not in ("off", "auto-idle", "sample"):
        lines.append("  allocation sites: nothing traced is still allocated by the cell's code")
    shown = r.main_growth_sites if r.tracing != "on" else ()
    if shown:
        total = r.sampled_growth_bytes
        nb = net_vs_gross(r, nbsp=True)  # a size is never split across two lines
        lines += ["  " + ln.replace("\xa0", " ") for ln in wrap(nb, "", "  ", 96, break_long_words=True)]
        lines.append(f"  where RSS grew (gross; every {fmt_time(r.interval_s)} the rise since the last sample is "
                     "charged to the line")
        lines.append("    running; --trace on names every allocation):")
        for s in shown[: min(n, 5)]:
            head = (f"    +{fmt_bytes(s.size_bytes):>9} {100 * s.size_bytes / total:3.0f}%  {s.count:>5} samples  "
                    f"{s.label:<24} ")
            lines.append(head + _clip(s.text, max(20, 100 - len(head))))
    elif r.tracing == "sample" and len(r.t_s) > 2:
        lines.append("  where RSS grew: no growth between samples in the cell's code (--trace on names "
                     "every allocation)")
    if r.cuda_sites:
        lines.append("  CUDA blocks live at the CUDA peak (allocator history):")
        for s in r.cuda_sites[:n]:
            lines.append(f"    {fmt_bytes(s.size_bytes):>10}  {s.count:>7} blocks  {s.label:<24} {_clip(s.text, 50)}")
    if r.error:
        lines.append(f"  stopped by {r.error}; the profile covers the run up to there")
    for n_ in r.notes:
        lines += wrap(str(n_), "  note: ", "    ")
    return "\n".join(lines)


def net_vs_gross(r: Any, nbsp: bool = False) -> str:
    """One sentence reconciling the headline peak (net: the most held at once) with the sampled growth
    the "where RSS grew" lines share (gross: every rise between two samples, drops not subtracted):
    gross − freed = the end increment, exactly (both are sums over the same samples)."""
    def b(n: int) -> str:
        t = fmt_bytes(n)
        return t.replace(" ", "\xa0") if nbsp else t

    gross, freed = r.sampled_growth_bytes, r.sampled_freed_bytes
    end = gross - freed  # = last sample - first sample
    peak = r.peak_bytes
    head = f"peak +{b(peak)} above the start (net: the most held at once)" if peak is not None else \
        "no peak measured"
    if freed <= 0.02 * gross:
        return (f"net vs gross: {head}; RSS rose +{b(gross)} in total between samples (gross, shared by "
                "the lines below) and almost none of it was freed before the end")
    most = "most of it" if freed >= 0.5 * gross else "part of it"
    where = f"+{b(end)} above" if end >= 0 else f"{b(-end)} below"
    return (f"net vs gross: {head}; RSS rose +{b(gross)} in total between samples (gross, shared by the "
            f"lines below), {most} freed again: RSS ended {where} the start "
            f"(+{b(gross)} risen − {b(freed)} freed)")


def figure_png(r: Any) -> bytes | None:
    """RSS (and CUDA) over time with the statements shaded and the peaks marked; top sites beside.

    None when nothing was sampled; ImportError without matplotlib."""
    if not r.t_s:
        return None
    mib = 2**20
    sites = list(r.cuda_sites if r.device.startswith("cuda") and r.cuda_sites else
                 r.sites or r.main_growth_sites)[:8]
    site_title = "where RSS grew (sampled)" if sites and not r.sites and not (
        r.device.startswith("cuda") and r.cuda_sites) else "top allocation sites"
    fig = new_figure(8.5, 2.8)
    if sites:
        ax, bx = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.7, 1]})
    else:
        ax, bx = fig.subplots(), None
    ts = [t * 1e3 for t in r.t_s]
    ax.plot(ts, [r / mib for r in r.rss_bytes], ".-", color="tab:blue", ms=2, lw=1, label="RSS (sampled)")
    for i, s in enumerate(r.statements):
        if i % 2:
            ax.axvspan(s.start_s * 1e3, s.end_s * 1e3, color="0.92", lw=0)
    if r.hwm_peak_bytes is not None and r.rss_start is not None:
        y = (r.rss_start + r.hwm_peak_bytes) / mib
        st = r.peak_statement
        ax.axhline(y, color="tab:red", ls="--", lw=1, label=f"true peak (VmHWM) {fmt_bytes(r.rss_start + r.hwm_peak_bytes)}")
        if st is not None:
            ax.plot([(st.start_s + st.end_s) / 2 * 1e3], [y], "v", color="tab:red", ms=7)
    if r.traced_peak_bytes is not None and r.rss_start is not None and r.hwm_peak_bytes is None:
        ax.axhline((r.rss_start + r.traced_peak_bytes) / mib, color="tab:purple", ls=":", lw=1,
                   label="start + traced peak")
    if r.cuda_allocated_bytes:
        ax.plot(ts, [c / mib for c in r.cuda_allocated_bytes], "-", color="tab:green", lw=1, label="CUDA allocated")
        ax.plot(ts, [c / mib for c in r.cuda_reserved_bytes], "-", color="tab:olive", lw=0.8, label="CUDA reserved")
        if r.cuda_peak_abs_bytes is not None:
            ax.axhline(r.cuda_peak_abs_bytes / mib, color="tab:green", ls="--", lw=1, label="CUDA peak")
    ax.set_xlabel("time since cell start [ms]")
    ax.set_ylabel("MiB")
    ax.set_ylim(bottom=0)
    ax.legend(loc="lower right", fontsize=7, frameon=False)
    ax.set_title("memory over the cell's run (grey/white bands: statements)", fontsize=9, loc="left")
    ax.tick_params(labelsize=7)
    if bx is not None:
        names = [_clip(f"{s.label}  {s.text}", 36) for s in sites][::-1]
        bx.barh(range(len(sites)), [s.size_bytes / mib for s in sites][::-1], color="tab:orange")
        bx.set_yticks(range(len(sites)), names, fontsize=6)
        bx.set_xlabel("MiB", fontsize=7)
        bx.set_title(site_title, fontsize=9, loc="left")
        bx.tick_params(labelsize=7)
    return png_bytes(fig)


# ---- HTML tables (folded under the report) -----------------------------------------------

def sites_html(r: Any) -> str:
    def table_rows(sites: tuple[Any, ...], sign: str = "") -> str:
        return "".join(f"<tr><td>{sign}{fmt_bytes(s.size_bytes)}</td><td>{s.count}</td><td>{html.escape(s.label)}"
                       f"</td><td><code>{html.escape(s.text)}</code></td></tr>" for s in sites)

    rows = table_rows(r.sites + r.cuda_sites)
    grown = table_rows(r.main_growth_sites, "+")
    out = ""
    if rows or not grown:
        out += ("<table style='font-size:12px'><tr><th>size</th><th>blocks</th><th>where</th><th>line</th></tr>"
                f"{rows}</table>")
    if grown:
        out += (f"<div style='font-size:12px'>{html.escape(net_vs_gross(r))}</div>"
                "<div style='font-size:12px'>where RSS grew (sampled; gross: rises between samples, drops not "
                "subtracted)</div><table style='font-size:12px'>"
                f"<tr><th>growth</th><th>samples</th><th>where</th><th>line</th></tr>{grown}</table>")
    return out


def statements_html(r: Any) -> str:
    rows = "".join(f"<tr><td>{html.escape(s.label)}</td><td>{fmt_bytes(s.rss_peak_bytes)}</td>"
                   f"<td>{fmt_bytes(s.traced_peak_bytes)}</td><td>{fmt_bytes(s.cuda_peak_bytes)}</td>"
                   f"<td>{fmt_time(s.end_s - s.start_s)}</td><td><code>{html.escape(s.text)}</code></td></tr>"
                   for s in r.statements)
    return ("<table style='font-size:12px'><tr><th>statement</th><th>RSS peak</th><th>traced peak</th>"
            f"<th>CUDA peak</th><th>time</th><th>code</th></tr>{rows}</table>")


def html_sections(r: Any) -> list[tuple[str, str]]:
    """``[(title, html)]``: allocation sites, the statements' peaks and every metric (folded in ``<details>``)."""
    out = []
    if r.sites or r.cuda_sites or r.main_growth_sites:
        out.append(("Allocation sites", sites_html(r)))
    if r.statements:
        out.append(("Statements", statements_html(r)))
    out.append(("Details", table_html([(k, v) for k, v in r.metrics().items() if v is not None])))
    return out


def _signed(n: int | None) -> str:
    if n is None:
        return "—"
    return ("+" if n >= 0 else "-") + fmt_bytes(abs(n))
