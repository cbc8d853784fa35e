"""Human-readable units for text output (shared by every result's text/plain)."""

from __future__ import annotations

import math


def fmt_time(seconds: float | None, digits: int = 4) -> str:
    """``0.0051234`` -> ``'5.123 ms'``; ``None`` -> ``'—'``."""
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "—"
    s = abs(seconds)
    if s >= 3600:  # long jobs (estimates) read in hours and minutes, not 1.23e+04 s
        return f"{seconds / 3600:.{min(digits, 3)}g} h"
    if s >= 100:
        return f"{seconds / 60:.{min(digits, 3)}g} min"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if s >= scale or unit == "ns":
            return f"{seconds / scale:.{digits}g} {unit}"
    return f"{seconds:g} s"  # pragma: no cover


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return "—"
    sign = "-" if n < 0 else ""
    x = float(abs(n))
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if x < 1024 or unit == "TiB":
            return f"{sign}{x:.0f} {unit}" if unit == "B" else f"{sign}{x:.1f} {unit}"
        x /= 1024
    return f"{n} B"  # pragma: no cover


def fmt_rate(per_s: float, unit: str) -> str:
    """``2.3e11, 'FLOP'`` -> ``'230 GFLOP/s'``."""
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(per_s) >= scale:
            return f"{per_s / scale:.4g} {prefix}{unit}/s"
    return f"{per_s:.4g} {unit}/s"


def parse_duration(text: str) -> float:
    """``'1.5'``, ``'500ms'``, ``'2s'``, ``'10m'``, ``'1h'`` -> seconds. Raises ValueError."""
    t = text.strip().lower()
    for suffix, scale in (("ms", 1e-3), ("us", 1e-6), ("µs", 1e-6), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if t.endswith(suffix):
            return float(t[: -len(suffix)]) * scale
    return float(t)


def clip(text: str, n: int) -> str:
    """``text`` cut to ``n`` characters, the cut marked with "…"."""
    return text if len(text) <= n else text[: n - 1] + "…"
