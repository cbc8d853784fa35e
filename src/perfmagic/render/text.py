"""The wording every text report shares: 100-column wrapping, percentages, times, sizes, rates, ratios.

One place for each convention, so two reports never say the same number two ways:

=====================  ========================================================================
``wrap`` / ``fit``     lines of at most ``WIDTH`` (100) columns, continuations indented; words and
                       hyphenated names are never split
``pct``                a fraction as a percentage: ``0.052`` -> ``5.2%``, ``0.25`` -> ``25%``
                       (one decimal below 10%, none above), or with fixed decimals
``signed_change``      a time ratio B/A as a signed change: ``−20%`` faster (A/B − 1), ``+15%`` slower
``times``              a factor: ``2.4×``, ``128×``
``factor``             a time ratio as words: ``3.3× faster``, ``1.3× slower``, ``as fast``
``change_words``       a time ratio as the verdicts say it: ``faster by 16%``, ``8768× faster``
``span``               an interval of time ratios in one unit: ``−2.1%…+1.7%`` or ``3.3× faster…1.3× faster``
``fmt_time``           seconds with a unit: ``5.123 ms``, ``2.5 min``, ``1.2 h``
``fmt_bytes``          ``1.5 MiB``; ``fmt_rate``: ``230 GFLOP/s``; ``clip``: ``text cut…``
=====================  ========================================================================

Percent convention of the verdicts (:mod:`perfmagic.timing.compare`): "faster by x%" means ``A/B = 1 + x``,
"slower by x%" means ``B/A = 1 + x``; past 2× either way a factor reads better ("128× faster", not
"12700%"). Imports nothing heavy.
"""

from __future__ import annotations

import math

WIDTH = 100  # every text/plain line fits a terminal of this many columns
MINUS = "\u2212"


# ---- lines --------------------------------------------------------------------------------------

def wrap(text: str, first: str = "", rest: str | None = None, width: int = WIDTH, *,
         break_long_words: bool = False) -> list[str]:
    """``text`` as lines of at most ``width`` columns: the first starts with ``first``, the others with
    ``rest`` (default: as many spaces as ``first``, at least 4). Never empty: a blank text gives
    ``[first.rstrip()]``."""
    import textwrap

    rest = " " * max(len(first), 4) if rest is None else rest
    return textwrap.wrap(text, width, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False,
                         break_long_words=break_long_words) or [first.rstrip()]


def fill(text: str, first: str = "", rest: str | None = None, width: int = WIDTH) -> str:
    """:func:`wrap` joined into one string."""
    return "\n".join(wrap(text, first, rest, width))


def fit(line: str, width: int = WIDTH) -> str:
    """A line as it is when it fits, else wrapped under its own indent + 2 (lines of a report that were
    not wrapped as items)."""
    if len(line) <= width:
        return line
    indent = " " * (len(line) - len(line.lstrip(" ")))
    return fill(line.lstrip(" "), indent, indent + "  ", width)


def clip(text: str, n: int) -> str:
    """``text`` cut to ``n`` characters, the cut marked with "…"."""
    return text if len(text) <= n else text[: n - 1] + "…"


# ---- percentages and ratios ---------------------------------------------------------------------

def pct(x: float, decimals: int | None = None) -> str:
    """A fraction as an unsigned percentage: with ``decimals``, that many (``pct(0.25, 0)`` -> ``25%``);
    without, one decimal below 10% and none above (``5.2%``, ``25%``)."""
    v = abs(x) * 100.0
    if decimals is not None:
        return f"{v:.{decimals}f}%"
    return f"{v:.1f}%" if v < 9.95 else f"{v:.0f}%"


def times(f: float) -> str:
    """A factor: ``2.4×``, ``128×``, ``86,272×``, ``3.9 million×`` (a cold call of 200 ms beside a warm
    one of 52 ns read "3854668×")."""
    if f < 10:
        return f"{f:.2g}×"
    if f < 1e4:
        return f"{f:.0f}×"
    return f"{f:,.0f}×" if f < 1e6 else f"{f / 1e6:,.1f} million×"


def gain(v: float | None, unbounded: str = "∞") -> str:
    """A gain factor as the advice writes it: ``1.8×``, ``12×``; ``unbounded`` when there is no bound."""
    if v is None:
        return unbounded
    return f"{v:.1f}×" if v < 9.95 else f"{v:.0f}×"


def plural(k: int, word: str) -> str:
    """``1 worker``, ``3 workers``."""
    return f"{k} {word}" + ("" if k == 1 else "s")


def signed_change(r: float) -> str:
    """A time ratio as a signed change: ``−x%`` faster by x% (A/B − 1), ``+x%`` slower by x% (B/A − 1)."""
    if r < 1.0:
        return MINUS + pct(1.0 / r - 1.0)
    return "+" + pct(r - 1.0)


def factor(r: float) -> str:
    """A time ratio as a factor: ``3.3× faster``, ``1.3× slower``, ``as fast``."""
    if r < 1.0:
        return f"{times(1.0 / r)} faster"
    return f"{times(r)} slower" if r > 1.0 else "as fast"


def change_words(r: float) -> str:
    """A time ratio B/A as the verdicts say it: ``faster by 16%``, ``slower by 4.2%``, past 2× a factor
    (``8768× faster``), ``as fast``."""
    if r <= 0.5 or r >= 2.0:
        return factor(r)
    if r < 1.0:
        return f"faster by {pct(1.0 / r - 1.0)}"
    return f"slower by {pct(r - 1.0)}" if r > 1.0 else "as fast"


def span(lo: float, hi: float) -> str:
    """An interval of time ratios in one unit: signed percentages (``−2.1%…+1.7%``), or factors at both ends
    when either end is past 2× (``3.3× faster…1.3× faster``: "−132%" would read as more than all of the time)."""
    if lo <= 0.5 or hi >= 2.0:
        return f"{factor(lo)}…{factor(hi)}"
    return f"{signed_change(lo)}…{signed_change(hi)}"


# ---- units --------------------------------------------------------------------------------------

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
        if float(f"{s / scale:.{digits}g}") >= 1 or unit == "ns":  # 999.96 µs rounds to 1 ms, not 1e+03 µs
            return f"{seconds / scale:.{digits}g} {unit}"
    return f"{seconds:g} s"  # pragma: no cover


def fmt_bytes(n: float | None) -> str:
    """``1572864`` -> ``'1.5 MiB'``; ``None`` -> ``'—'``."""
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


__all__ = ["WIDTH", "wrap", "fill", "fit", "clip", "pct", "times", "gain", "plural", "signed_change", "factor", "change_words",
           "span", "fmt_time", "fmt_bytes", "fmt_rate", "parse_duration"]
