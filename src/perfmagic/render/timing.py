"""Timing results drawn: the samples figure, the folded details, the A/B figure, a label's history.

Takes results and ledger rows as plain objects and imports no analysis module; matplotlib is
imported inside the functions that draw (object API on an Agg canvas: no pyplot, no global state).
"""

from __future__ import annotations

from typing import Any

from .bundle import table_html
from .figures import new_figure, png_bytes
from .units import fmt_time

_TIME_SCALES = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))


def time_unit(x: float) -> tuple[str, float]:
    """The unit (s, ms, µs, ns) that shows ``x`` seconds best, and its scale."""
    for unit, scale in _TIME_SCALES:
        if x >= scale:
            return unit, scale
    return "ns", 1e-9


def bench_figure_png(r: Any) -> bytes | None:
    """A 2-panel PNG: per-call time of every block (warmup grey, samples blue) and a histogram."""
    if not r.raw:
        return None

    unit, scale = time_unit(r.median)
    warm = [d / k / scale for k, d in r.warmup]
    meas = [t / scale for t in r.times]
    fig = new_figure(7.5, 2.3)
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
    return png_bytes(fig)


def _plain(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def bench_sections(r: Any) -> list[tuple[str, str]]:
    """Folded details of a timing result: every sample, the policy that ran, the environment."""
    out = []
    if r.raw:
        rows = [(i, fmt_time(t), r.number) for i, t in enumerate(r.times)]
        out.append((f"Samples ({len(rows)}: time per call, calls per block)",
                    table_html(rows, ("#", "time per call", "calls per block"), scroll=True)))
    if r.policy:
        out.append(("Measuring policy", table_html([(k, _plain(v)) for k, v in r.policy.items()], ("setting", "value"))))
    flat = {k: v for k, v in (r.env or {}).items() if not isinstance(v, (dict, list))}
    if flat:
        out.append(("Environment", table_html([(k, _plain(v)) for k, v in flat.items()], ("field", "value"),
                                              scroll=True)))
    return out


def _when_short(created: str | None) -> str:
    from datetime import datetime

    if not created:
        return ""
    try:
        return datetime.fromisoformat(created.replace("Z", "+00:00")).astimezone().strftime("%m-%d %H:%M")
    except ValueError:
        return created


def history_png(rows: list[dict[str, Any]], label: str, baseline_id: int | None) -> bytes:
    """Runs of one label over time: median with its CI as error bars, the baseline marked."""

    rows = sorted(rows, key=lambda r: r["id"])
    meds = [(r.get("metrics") or {}).get("median_s") for r in rows]
    unit, scale = time_unit(max(m for m in meds if m) if any(meds) else 1.0)
    fig = new_figure(7.5, 2.6)
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
    ax.set_xticks(xs, [f"#{r['id']}\n{_when_short(r.get('created_utc'))[6:]}" for r in rows], fontsize=7)
    ax.set_ylabel(f"median time per call [{unit}]")
    ax.set_title(f"history of '{label}' (error bars: 95% CI of the median; band: ±10% of the baseline)",
                 fontsize=9, loc="left")
    ax.tick_params(labelsize=7)
    ax.set_ylim(bottom=0)
    return png_bytes(fig)


def pair_figure_png(pr: Any) -> bytes | None:
    """An interleaved A/B pair: both sides' per-call times in measuring order, and the paired ratios."""
    a, b = list(pr.a.times), list(pr.b.times)
    n = min(len(a), len(b))
    if n == 0:
        return None

    unit, scale = time_unit(max(pr.a.median, pr.b.median))
    fig = new_figure(7.5, 2.3)
    ax, rx = fig.subplots(1, 2, gridspec_kw={"width_ratios": [2.2, 1]})
    ax.plot(range(n), [t / scale for t in a[:n]], ".", color="0.45", ms=3, label=f"A {pr.a.label or ''}".strip())
    ax.plot(range(n), [t / scale for t in b[:n]], ".", color="tab:blue", ms=3, label=f"B {pr.b.label or ''}".strip())
    ax.set_xlabel("pair (in order)")
    ax.set_ylabel(f"time per call [{unit}]")
    ax.set_ylim(bottom=0)
    ax.legend(loc="lower right", fontsize=7, frameon=False, ncol=2)
    ax.set_title("A and B interleaved in one process", fontsize=9, loc="left")
    ratios = [y / x for x, y in zip(a[:n], b[:n]) if x > 0]
    rx.hist(ratios, bins=min(40, max(5, len(ratios) // 3)), color="tab:blue", alpha=0.8)
    rx.axvline(1.0, color="0.3", lw=0.8, ls=":")
    rx.set_xlabel("B/A per pair")
    rx.set_yticks([])
    rx.set_title("paired ratios", fontsize=9, loc="left")
    for x in (ax, rx):
        x.tick_params(labelsize=7)
    return png_bytes(fig)
