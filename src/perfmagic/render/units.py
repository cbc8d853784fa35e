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


_DURATION = None
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0,
          "h": 3600.0}


def parse_duration(text: str) -> float:
    """``'1.5'``, ``'250ns'``, ``'3us'``/``'3µs'``, ``'500ms'``, ``'2s'``, ``'10m'``, ``'1h'`` -> seconds.
    Raises ValueError for anything else (no unit: seconds)."""
    import re

    global _DURATION
    if _DURATION is None:
        _DURATION = re.compile(r"([-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?)\s*(ns|us|µs|μs|ms|sec|min|s|m|h)?")
    m = _DURATION.fullmatch(text.strip().lower())
    if m is None:
        raise ValueError(f"not a duration: {text!r}; e.g. 250ns, 3us, 500ms, 2s, 10m, 1h")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def clip(text: str, n: int) -> str:
    """``text`` cut to ``n`` characters, the cut marked with "…"."""
    return text if len(text) <= n else text[: n - 1] + "…"
