"""A device's measured roofs (:class:`~perfmagic.roofs.ceilings.Ceilings`) in words: each dtype's compute
roof and ridge, the bandwidth roof, how far each roof's trials agree, and whether the machine was loaded;
the chart and folded details are :mod:`perfmagic.render.roofline`'s."""

from __future__ import annotations

from typing import Any

from ..result import Result
from .roofline import ceilings_png, ceilings_sections as html_sections  # noqa: F401
from .text import pct, wrap


def figure_png(r: Result, history: Any = ()) -> bytes:
    """The roofs alone (one per dtype, ridge points marked), with optional earlier points."""
    return ceilings_png(r, history)


def _trust(c: Any, roof: str, spread: Any) -> str:
    if roof in c.unreliable:
        return "UNRELIABLE: trials disagree"
    if isinstance(spread, (int, float)):
        return f"2 trials within {pct(max(spread, 0.0), 0)}"
    return ""


def text(r: Result) -> str:
    """Where and when the roofs were measured, one line per dtype and one for the bandwidth, warnings."""
    c: Any = r
    lines = [f"ceilings of {c.device} ({c.measured_utc}, fingerprint {c.fingerprint}, "
             f"{c.source}; calibration {c.calibration_s:.1f} s)"]
    if c.loaded:
        lines.append(f"  LOADED: others kept {c.others_cores:.1f} cores busy while measuring; these roofs may be "
                     "too low")
        lines.append("  held for this kernel, not cached; re-measured on the next use when the machine is quiet")
    for d, v in c.compute.items():
        per = (c.details.get("compute") or {}).get(d, {})
        best = max(per.values(), key=lambda x: x.get("flops_per_s", 0.0), default={})
        how = f"n={best['size']}" if best.get("size") else ""
        trust = _trust(c, d, best.get("spread"))
        emu = " EMULATED (no native units)" if d in c.emulated else ""
        lines.append(f"  {d:9s} {v / 1e9:9.4g} GFLOP/s  ridge {c.ridge(d):7.3g} FLOP/B  "
                     + "; ".join(x for x in (how, trust) if x) + emu)
        if best.get("coretype"):  # numpy's wide kernels, measured in a child (roofs/widekernels)
            here = max((x.get("flops_per_s", 0.0) for x in per.values() if not x.get("coretype")), default=0.0)
            lines.append(f"{'':12s}numpy with OPENBLAS_CORETYPE={best['coretype']} in a child process; in this "
                         f"process {here / 1e9:.4g} GFLOP/s")
    bw = c.details.get("bandwidth") or {}
    trust = _trust(c, "bandwidth", c.bandwidth_spread())
    lines.append(f"  bandwidth {c.bandwidth_Bps / 1e9:9.4g} GB/s   "
                 + "; ".join(x for x in (bw.get("best") or "", trust) if x))
    lines += ["\n".join(wrap(str(w), "  ! ", "    ")) for w in c.warnings]
    return "\n".join(lines)
