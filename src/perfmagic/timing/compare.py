"""Compare two timing runs, A (before, the baseline) and B (after), and give an honest verdict.

The quantity is the **time ratio of medians** ``r = median(B) / median(A)`` of per-call times
(``r < 1``: B is faster). Its confidence interval comes from a **moving-block bootstrap**, because
consecutive timing samples are autocorrelated (a noisy second slows several samples in a row) and an
i.i.d. bootstrap would then claim more precision than the run holds:

* **Unpaired** (two separate runs, any sample counts): each side is resampled independently. A
  resample is built from ``ceil(n / L)`` blocks of ``L`` consecutive samples at uniformly chosen
  starts, cut to ``n``; ``L = max(1, round(n ** (1/3)))`` unless given. Blocks wrap around the end
  of the series (the *circular* moving-block bootstrap of Politis & Romano), so the first and last
  samples are drawn as often as the others. The statistic is
  ``log median(B*) - log median(A*)``; the percentile interval is taken on this log scale and
  exponentiated.
* **Paired** (A and B interleaved in one process, pair *i* timed back to back): the per-pair log
  ratios ``d_i = log(b_i / a_i)`` are resampled in moving blocks; the point estimate is
  ``exp(median(d))``. A slow stretch of the machine hits both members of a pair and cancels in
  ``d_i``, so the interval is narrower than the unpaired one whenever the machine drifts.

**Grouping, for speed.** A bootstrap of the median of ``n`` raw samples costs a sort of ``n`` values
per resample, too slow in pure Python for thousands of samples. So each side (or the series of
pair log ratios) is first reduced to at most ``MAX_GROUPS`` = 200 units: with ``g = ceil(n / 200)``,
consecutive samples are split into ``ceil(n / g)`` groups of ``g`` (sizes differ by at most one) and
each group is replaced by its median; the block bootstrap then runs on the group medians, with the
block length computed from the number of groups. With ``n <= 200`` nothing is grouped (``g = 1``).
The point estimate is always the median of the *raw* samples; the bootstrap distribution of the
grouped statistic is re-centred on it (shifted by ``full estimate - grouped estimate``, a few
hundredths of a percent on timing data), so the reported ratio always lies inside its interval. The
median of group medians is a slightly less efficient estimator than the median (at most about 25%
wider intervals for ``g = 10``), so grouping errs on the side of a wider, more honest interval.

The interval describes the *within-run* noise only. Runs taken minutes apart also differ by machine
drift that no within-run sample sees; :func:`widen` combines the within-run interval with a between-run
noise ``q`` (the half-width, at the same confidence, of the ratio of two runs of identical code) *on the
log scale, in quadrature*: each half-width ``w`` of ``log(ratio)`` becomes ``sqrt(w**2 + log(1+q)**2)``.
Two independent errors add that way; adding them linearly (the earlier floor plus drift) padded the
interval, and on the ratio scale could even send it below zero.

**Verdicts** (:func:`judge`: a category; the words are :mod:`perfmagic.render.comparison`'s) use a symmetric bar on the log scale, ``min_effect = m``: *faster* when
the whole interval lies below ``1/(1+m)``, *slower* when it lies above ``1+m``, *no real change* when
it lies inside ``[1/(1+m), 1+m]``, *inconclusive* otherwise. Percentages follow the same symmetric
convention: "faster by x%" means ``A/B = 1 + x``, "slower by x%" means ``B/A = 1 + x``; a signed change
is ``-x%`` for faster and ``+x%`` for slower.

Only the standard library is used (``random``, ``math``); results are deterministic for a seed.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..core import stats as _stats
from ..findings import Finding

__all__ = ["MAX_GROUPS", "VERDICTS", "ratio_ci", "widen", "judge", "decide", "Comparison", "compare_samples"]

#: at most this many units (group medians) enter the bootstrap per side; see the module docstring
MAX_GROUPS = 200

MIN_SAMPLES = 3

VERDICTS = ("faster", "slower", "no real change", "inconclusive")


# ---- validation -------------------------------------------------------------------------------

def _check_times(xs: Sequence[float], side: str) -> list[float]:
    vals = [float(x) for x in xs]
    if len(vals) < MIN_SAMPLES:
        raise ValueError(f"too few samples on side {side}: {len(vals)} (need at least {MIN_SAMPLES} "
                         f"timing samples per side to compare)")
    for i, x in enumerate(vals):
        if not math.isfinite(x):
            raise ValueError(f"non-finite time on side {side} at index {i}: {x!r}")
        if x <= 0.0:
            raise ValueError(f"non-positive time on side {side} at index {i}: {x!r} "
                             f"(times must be > 0 seconds)")
    return vals


def _check_confidence(confidence: float) -> None:
    if not (0.0 < confidence < 1.0):
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence!r}")


def _check_min_effect(min_effect: float) -> None:
    if not (isinstance(min_effect, (int, float)) and 0.0 < min_effect < 1.0):
        raise ValueError(f"min_effect must be strictly between 0 and 1 (a fraction such as 0.10 for "
                         f"10%), got {min_effect!r}")


# ---- the bootstrap ------------------------------------------------------------------------------

def _mid(sorted_xs: list[float]) -> float:
    """The median of an already sorted list (mean of the two middle values for even length)."""
    n = len(sorted_xs)
    h = n // 2
    return sorted_xs[h] if n % 2 else 0.5 * (sorted_xs[h - 1] + sorted_xs[h])


def _group_medians(xs: Sequence[float], max_groups: int = MAX_GROUPS) -> tuple[list[float], int]:
    """Medians of consecutive groups of ``g = ceil(n / max_groups)`` samples, and ``g``.

    The ``ceil(n / g)`` groups have sizes that differ by at most one. With ``n <= max_groups`` the
    samples are returned unchanged (``g = 1``).
    """
    n = len(xs)
    g = max(1, -(-n // max_groups))
    if g == 1:
        return list(xs), 1
    k = -(-n // g)
    bounds = [round(i * n / k) for i in range(k + 1)]
    return [_mid(sorted(xs[bounds[i]:bounds[i + 1]])) for i in range(k)], g


def _default_block(n: int) -> int:
    return max(1, round(n ** (1.0 / 3.0)))


def _block_boot_medians(units: Sequence[float], block: int, n_boot: int, rng: random.Random) -> list[float]:
    """Medians of ``n_boot`` moving-block bootstrap resamples of ``units`` (blocks of ``block``).

    Circular variant: a block may start at any of the ``n`` positions and wraps past the end, so
    every unit is drawn equally often (plain moving blocks under-sample both ends of the run, which
    made intervals too narrow for small samples: 91% instead of 93-95% coverage at n = 30).
    """
    units = list(units)
    n = len(units)
    L = max(1, min(block, n))
    ext = units + units[:L - 1]
    n_blocks = -(-n // L)
    rnd = rng.random
    out = []
    for _ in range(n_boot):
        res: list[float] = []
        for _ in range(n_blocks):
            s = int(rnd() * n)
            res += ext[s:s + L]
        del res[n:]
        res.sort()
        out.append(_mid(res))
    return out


def _prepare(logs: list[float], block: int | None) -> tuple[list[float], int, int]:
    """Group the log-times (or log-ratios) and choose the block length: ``(units, g, L)``."""
    units, g = _group_medians(logs)
    L = block if block is not None else _default_block(len(units))
    return units, g, max(1, min(L, len(units)))


def _interval(boot: list[float], centre_grouped: float, centre_full: float,
              confidence: float) -> tuple[float, float]:
    """Percentile interval of a bootstrap distribution on the log scale, re-centred on the full
    estimate, returned on the ratio scale."""
    alpha = 1.0 - confidence
    s = sorted(boot)
    shift = centre_full - centre_grouped
    lo = _stats.quantile(s, alpha / 2.0) + shift
    hi = _stats.quantile(s, 1.0 - alpha / 2.0) + shift
    # the percentile interval of a discrete bootstrap can, in degenerate cases, miss the estimate
    lo, hi = min(lo, centre_full), max(hi, centre_full)
    return math.exp(lo), math.exp(hi)


def _ratio_ci(a: Sequence[float], b: Sequence[float], *, confidence: float, n_boot: int, seed: int,
              paired: bool, block: int | None) -> tuple[float, float, float, Finding]:
    """:func:`ratio_ci` plus the method actually used (a ``compare.method`` finding)."""
    _check_confidence(confidence)
    if not isinstance(n_boot, int) or n_boot < 10:
        raise ValueError(f"n_boot must be an integer >= 10, got {n_boot!r}")
    if block is not None and (not isinstance(block, int) or block < 1):
        raise ValueError(f"block must be a positive integer (or None for n ** (1/3)), got {block!r}")
    av = _check_times(a, "A")
    bv = _check_times(b, "B")
    rng = random.Random(seed)
    if paired:
        if len(av) != len(bv):
            raise ValueError(f"paired comparison needs equal sample counts (one A and one B per pair), "
                             f"got {len(av)} A and {len(bv)} B samples")
        d = [math.log(y) - math.log(x) for x, y in zip(av, bv)]
        full = _stats.median(d)
        units, g, L = _prepare(d, block)
        boot = _block_boot_medians(units, L, n_boot, rng)
        lo, hi = _interval(boot, _mid(sorted(units)), full, confidence)
        method = Finding.of("compare.method", paired=True, n_boot=n_boot, blocks=(L,), groups=(g,),
                            units=(len(units),))
        return math.exp(full), lo, hi, method

    la = [math.log(x) for x in av]
    lb = [math.log(y) for y in bv]
    full = math.log(_stats.median(bv)) - math.log(_stats.median(av))
    ua, ga, La = _prepare(la, block)
    ub, gb, Lb = _prepare(lb, block)
    boot_a = _block_boot_medians(ua, La, n_boot, rng)
    boot_b = _block_boot_medians(ub, Lb, n_boot, rng)
    boot = [y - x for x, y in zip(boot_a, boot_b)]
    centre = _mid(sorted(ub)) - _mid(sorted(ua))
    lo, hi = _interval(boot, centre, full, confidence)
    method = Finding.of("compare.method", paired=False, n_boot=n_boot, blocks=(La, Lb), groups=(ga, gb),
                        units=(len(ua), len(ub)))
    return math.exp(full), lo, hi, method


def ratio_ci(a: Sequence[float], b: Sequence[float], *, confidence: float = 0.95, n_boot: int = 2000,
             seed: int = 0, paired: bool = False, block: int | None = None) -> tuple[float, float, float]:
    """The time ratio ``median(b) / median(a)`` of per-call times and its CI: ``(ratio, lo, hi)``.

    Method (see the module docstring for details): a (circular) moving-block bootstrap, block length
    ``max(1, round(n ** (1/3)))`` of the units bootstrapped (or ``block``), each side resampled
    independently, percentile interval of the log ratio of medians, exponentiated. Samples beyond
    200 per side are first reduced to at most 200 medians of consecutive groups; the interval is
    re-centred on the full-sample estimate. With ``paired=True`` the per-pair log ratios
    ``log(b_i / a_i)`` are block-bootstrapped instead and the estimate is ``exp(median(log(b/a)))``.

    Deterministic for a given ``seed``. Raises ``ValueError`` for fewer than 3 samples on a side,
    non-positive or non-finite times, and paired samples of unequal length.
    """
    r, lo, hi, _ = _ratio_ci(a, b, confidence=confidence, n_boot=n_boot, seed=seed, paired=paired,
                             block=block)
    return r, lo, hi


def widen(ratio: float, lo: float, hi: float, noise: float) -> tuple[float, float]:
    """Combine a within-run ratio interval ``[lo, hi]`` around ``ratio`` with a between-run noise.

    ``noise`` (e.g. 0.08 for ±8%) is how far the ratio of two runs of *identical* code strays at the
    interval's confidence, between runs taken at different times on this machine. On the log scale
    each half-width ``w`` becomes ``sqrt(w**2 + log(1 + noise)**2)`` (independent errors in
    quadrature), so the interval stays positive and is never wider than both errors added.
    """
    if not (math.isfinite(noise) and noise >= 0.0):
        raise ValueError(f"between-run noise must be a finite fraction >= 0 (e.g. 0.08 for ±8%), got {noise!r}")
    if not (0.0 < lo <= ratio <= hi):
        raise ValueError(f"ratio interval must satisfy 0 < lo <= ratio <= hi, got ({lo!r}, {ratio!r}, {hi!r})")
    q = math.log1p(noise)
    w_lo, w_hi = math.log(ratio / lo), math.log(hi / ratio)
    return ratio * math.exp(-math.hypot(w_lo, q)), ratio * math.exp(math.hypot(w_hi, q))


# ---- the verdict --------------------------------------------------------------------------------

VERDICTS = ("faster", "slower", "no real change", "inconclusive")


def judge(lo: float, hi: float, min_effect: float = 0.10) -> str:
    """The verdict category of a time ratio ``B/A`` whose CI is ``[lo, hi]`` (one of :data:`VERDICTS`).

    With ``m = min_effect`` (a fraction strictly between 0 and 1) the bar is symmetric on the log
    scale: ``"faster"`` if ``hi < 1/(1+m)``, ``"slower"`` if ``lo > 1+m``, ``"no real change"`` if
    ``1/(1+m) <= lo`` and ``hi <= 1+m``, else ``"inconclusive"``. The words are written by
    :func:`perfmagic.render.comparison.verdict_sentence`.
    """
    _check_min_effect(min_effect)
    for name, v in (("lo", lo), ("hi", hi)):
        if not (math.isfinite(v) and v > 0.0):
            raise ValueError(f"{name} must be a finite positive time ratio, got {v!r}")
    if lo > hi:
        raise ValueError(f"ratio interval must satisfy lo <= hi, got ({lo!r}, {hi!r})")
    down, up = 1.0 / (1.0 + min_effect), 1.0 + min_effect
    if hi < down:
        return "faster"
    if lo > up:
        return "slower"
    if down <= lo and hi <= up:
        return "no real change"
    return "inconclusive"


def decide(ratio: float, lo: float, hi: float, min_effect: float = 0.10, *,
           confidence: float = 0.95, undecided: str = "measure longer") -> tuple[str, str]:
    """The verdict on a time ratio ``r = B/A`` with CI ``[lo, hi]``: ``(verdict, sentence)``.

    The verdict is :func:`judge`'s; the sentence is
    :func:`perfmagic.render.comparison.verdict_sentence`'s. "Faster by x%" means ``A/B = 1+x``; "slower
    by x%" means ``B/A = 1+x``. ``confidence`` only labels the interval in the sentence; ``undecided``
    is what an inconclusive sentence advises.
    """
    from ..render.comparison import verdict_sentence

    _check_min_effect(min_effect)
    _check_confidence(confidence)
    if not (math.isfinite(ratio) and ratio > 0.0):
        raise ValueError(f"ratio must be a finite positive time ratio, got {ratio!r}")
    verdict = judge(lo, hi, min_effect)
    return verdict, verdict_sentence(verdict, ratio, lo, hi, min_effect, confidence=confidence, undecided=undecided)


def span(lo: float, hi: float) -> str:
    """:func:`perfmagic.render.text.span` (an interval of time ratios in one unit), under its older name."""
    from ..render.text import span as words

    return words(lo, hi)


# ---- the whole comparison ---------------------------------------------------------------------

@dataclass(frozen=True)
class Comparison:
    """B against A: the time ratio ``B/A`` of medians, its CI, and the verdict at ``min_effect``.

    ``between_run`` > 0 means the within-run interval was combined by :func:`widen` with that
    between-run noise (a historical comparison); ``method`` says how the interval was computed.
    ``why`` is what made a verdict inconclusive beyond its interval: ``"oversubscribed"`` (the thread
    pools waited for cores), ``"refused"`` (``refusal``: the runs cannot be compared per call); ``per``
    names the unit of work the ratio is per (``"per item"``). ``sentence`` is the verdict in words,
    written by :func:`perfmagic.render.comparison.verdict_sentence`.
    """

    ratio: float
    ci_low: float
    ci_high: float
    confidence: float
    min_effect: float
    verdict: str
    method: Finding  # how the interval was computed (compare.method: render/findings_timing.py words it)
    n_a: int
    n_b: int
    between_run: float = 0.0
    why: str = ""
    refusal: Any = ""  # why neither per call nor per unit compares them (a basis.* finding)
    per: str = ""

    @property
    def sentence(self) -> str:
        from ..render.comparison import comparison_sentence

        return comparison_sentence(self)

    @property
    def accept(self) -> bool:
        """True only when B is faster by more than ``min_effect`` with the whole interval."""
        return self.verdict == "faster"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["method"], d["refusal"] = str(self.method), str(self.refusal)
        d["sentence"] = self.sentence
        d["accept"] = self.accept
        return d

    def __str__(self) -> str:
        return self.sentence


def _times_of(x: Any) -> Sequence[float]:
    """Per-call times: a sequence as given, or a :class:`BenchResult`'s ``.times``."""
    t = getattr(x, "times", None)
    return t if t is not None else x


def compare_samples(a: Sequence[float], b: Sequence[float], *, min_effect: float = 0.10,
                    confidence: float = 0.95, paired: bool = False, between_run: float = 0.0,
                    n_boot: int = 2000, seed: int = 0) -> Comparison:
    """Compare per-call times ``b`` (after) with ``a`` (before): :func:`ratio_ci`, then
    :func:`widen` by the ``between_run`` noise when it is > 0, then :func:`decide` at ``min_effect``.

    ``a`` and ``b`` are sequences of per-call times in seconds (a :class:`BenchResult` is accepted
    too and contributes its ``.times``). Raises ``ValueError`` on bad input (see :func:`ratio_ci`
    and :func:`decide`).
    """
    _check_min_effect(min_effect)
    a, b = _times_of(a), _times_of(b)
    r, lo, hi, method = _ratio_ci(a, b, confidence=confidence, n_boot=n_boot, seed=seed, paired=paired,
                                  block=None)
    if between_run != 0.0:  # widen() rejects negative and non-finite values
        lo, hi = widen(r, lo, hi, between_run)
        method = method.with_values(between_run=between_run)
    _check_confidence(confidence)
    return Comparison(ratio=r, ci_low=lo, ci_high=hi, confidence=confidence, min_effect=min_effect,
                      verdict=judge(lo, hi, min_effect), method=method, n_a=len(a), n_b=len(b),
                      between_run=float(between_run))
