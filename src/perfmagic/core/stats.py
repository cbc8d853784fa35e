"""Order statistics used by every perfmagic result.

Timing samples are skewed (a floor plus a long tail from interrupts, other processes and frequency
changes), so perfmagic summarises them by the **median** and gives its **distribution-free confidence
interval** from order statistics: the number of samples below the true median is Binomial(n, 1/2), so
the interval ``[x_(k), x_(n-k+1)]`` covers the median with probability ``1 - 2·P(B ≤ k-1)``. No normality
is assumed. The interval is computed from the raw samples every time; it is never stored.

Caveat, written where it applies: consecutive timing samples are mildly autocorrelated (a noisy second
hits several samples), so the interval describes *this run*; drift between runs is a separate question,
which the comparison tools answer.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

__all__ = ["median", "quantile", "iqr", "median_ci", "rel_halfwidth", "sign_count_needed"]


def quantile(xs: Sequence[float], q: float) -> float:
    """The q-quantile with linear interpolation between order statistics (numpy's default)."""
    if not xs:
        raise ValueError("quantile of no samples")
    s = sorted(xs)
    pos = (len(s) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def median(xs: Sequence[float]) -> float:
    return quantile(xs, 0.5)


def iqr(xs: Sequence[float]) -> float:
    return quantile(xs, 0.75) - quantile(xs, 0.25)


def _binom_cdf_half(k: int, n: int) -> float:
    """P(B <= k) for B ~ Binomial(n, 1/2)."""
    if k < 0:
        return 0.0
    if n > 300:  # normal approximation with continuity correction; exact sums get slow
        z = (k + 0.5 - n / 2) / (math.sqrt(n) / 2)
        return 0.5 * math.erfc(-z / math.sqrt(2))
    return sum(math.comb(n, i) for i in range(0, k + 1)) / 2.0**n


def median_ci(xs: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """Distribution-free CI of the median: ``(low, high, achieved_coverage)``.

    Chooses the narrowest symmetric pair of order statistics whose coverage is at least
    ``confidence``. With too few samples for that (n < 6 at 95%), returns ``(min, max)`` and the
    coverage actually achieved, so callers can say the interval is weak.
    """
    n = len(xs)
    if n == 0:
        raise ValueError("median_ci of no samples")
    s = sorted(xs)
    j, coverage = _ci_index(n, float(confidence))
    return s[j], s[n - 1 - j], coverage


def sign_count_needed(n: int, confidence: float = 0.95) -> int:
    """How many of n values must lie on one side of 0 for :func:`median_ci`'s interval to exclude 0."""
    return n - _ci_index(n, float(confidence))[0]


@functools.lru_cache(maxsize=4096)
def _ci_index(n: int, confidence: float) -> tuple[int, float]:
    """The 0-based index j of the interval's lower bound for n samples, and its coverage: the bounds
    depend on n and the confidence alone, so a sampling loop that checks its precision every few
    samples computes each once (the binomial sums cost ~0.2 ms at n = 300)."""
    # coverage of [x_j, x_(n-1-j)] is 1 - 2 P(B <= j)
    j = 0
    while j + 1 <= (n - 1) // 2 and 1.0 - 2.0 * _binom_cdf_half(j + 1, n) >= confidence:
        j += 1
    return j, 1.0 - 2.0 * _binom_cdf_half(j, n)


def rel_halfwidth(xs: Sequence[float], confidence: float = 0.95) -> float:
    """Half the CI width relative to the median: the 'precision' the engine stops on."""
    lo, hi, _ = median_ci(xs, confidence)
    m = median(xs)
    if m <= 0:
        return math.inf
    return (hi - lo) / 2.0 / m
