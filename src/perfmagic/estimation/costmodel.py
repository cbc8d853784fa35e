"""Cost models ``cost(n)`` fitted to measured points, chosen by an information criterion.

The forms are the ones algorithms actually have, each with a constant term ``a >= 0`` for the
per-call overhead that dominates small sizes (fitting a pure power law through that regime is what
makes naive extrapolations under-predict by a factor):

=============  ====================  ==========
name           cost(n)               parameters
=============  ====================  ==========
constant       a                     1
linear         a + b·n               2
n log n        a + b·n·ln n          2
quadratic      a + b·n²              2
cubic          a + b·n³              2
n + n²         a + b·n + c·n²        3
n + n log n    a + b·n + c·n·ln n    3
n² + n³        a + b·n² + c·n³       3
n^k            a + b·n^k  (k free)   3
n^k log n      a + b·n^k·ln n        3
=============  ====================  ==========

Fits minimise squared *relative* residuals (timings are noisy in proportion to their size), with
``a, b >= 0``; ``k`` is searched on a grid, the rest is a closed-form weighted least squares. The
model with the lowest AICc (small-sample AIC on the relative residuals) is reported (a two-term form
must gain TWO_TERM_EVIDENCE units over every one-term form to compete, a free exponent
FREE_K_EVIDENCE units over every fixed-exponent form); the prediction
averages the forms' predictions with their Akaike weights (so two forms that fit equally well share
the extrapolation), and the others within
AICc units (4) are kept as plausible and widen the prediction interval. The interval itself is a
residual bootstrap of the chosen form. numpy is imported when a fit runs, never at import time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

PLAUSIBLE = 4.0  # AICc units: forms this close to the best widen the interval
TWO_TERM_EVIDENCE = 6.0  # AICc units a two-term form must gain over every one-term form to be considered
FREE_K_EVIDENCE = 2.0  # AICc units a free-exponent form must gain over every fixed-exponent form
NOISE_AICC = 0.5  # a fit's residuals count as no smaller than this × the runs' measured noise (:func:`_noise_floored`)
FREE_K = ("n^k", "n^k log n")
K_GRID = (0.1, 4.0, 0.01)  # k from, to, step for the free-exponent forms

FORMS: dict[str, int] = {  # name -> parameter count (its formula: perfmagic.render.estimate.FORMULAS)
    "constant": 1,
    "linear": 2,
    "n log n": 2,
    "quadratic": 2,
    "cubic": 2,
    "n + n²": 3,
    "n + n log n": 3,
    "n² + n³": 3,
    "n^k": 3,
    "n^k log n": 3,
}
# two-term forms: (first basis, second basis); the overhead a is always there
TWO_TERM = {"n + n²": ("linear", "quadratic"), "n + n log n": ("linear", "n log n"), "n² + n³": ("quadratic", "cubic")}


def _g(name: str, n: Any, k: float | None = None) -> Any:
    import numpy as np

    n = np.asarray(n, dtype=float)
    ln = np.log(np.maximum(n, 1.0))
    if name == "constant":
        return np.zeros_like(n)
    if name == "linear":
        return n
    if name == "n log n":
        return n * ln
    if name == "quadratic":
        return n * n
    if name == "cubic":
        return n * n * n
    if name == "n^k":
        return n ** k
    if name == "n^k log n":
        return n ** k * ln
    raise ValueError(name)


@dataclass(frozen=True)
class ModelFit:
    name: str
    a: float
    b: float
    k: float | None  # the exponent of the free forms (None for fixed forms)
    rss: float  # sum of squared relative residuals
    aicc: float
    n_points: int
    c: float = 0.0  # the second coefficient of the two-term forms

    @property
    def params(self) -> int:
        return FORMS[self.name]

    @property
    def formula(self) -> str:
        """The form's formula with its parameters named (``a + b·n·ln n``), written by render/estimate.py."""
        from ..render.estimate import FORMULAS

        return FORMULAS[self.name]

    def predict(self, n: Any) -> Any:
        if self.name in TWO_TERM:
            g, h = TWO_TERM[self.name]
            return self.a + self.b * _g(g, n) + self.c * _g(h, n)
        return self.a + self.b * _g(self.name, n, self.k)

    def exponent(self) -> float:
        """The growth exponent the form implies at large n (log factors count as 1 + a little)."""
        if self.name in TWO_TERM:
            g, h = TWO_TERM[self.name]
            return {"linear": 1.0, "n log n": 1.0, "quadratic": 2.0, "cubic": 3.0}[h if self.c > 0 else g]
        return {"constant": 0.0, "linear": 1.0, "n log n": 1.0, "quadratic": 2.0, "cubic": 3.0}.get(
            self.name, self.k if self.k is not None else float("nan"))

    def slope_at(self, n: float) -> float:
        """The log-log slope of the growing part (cost - a) at ``n``: the growth the fit extrapolates with there.

        For a one-term form it is the form's exponent (plus 1/ln n for a log factor); for a two-term form it
        lies between its terms' exponents, by their shares at n (``n² + n³`` with a cubic share of 10% at n
        grows as n^2.1 there, where ``exponent()`` names the form's asymptote, 3)."""
        return self.growth_between(n, n * 1.001, default=0.0)

    def growth_between(self, n0: float, n1: float, default: float | None = None) -> float:
        """The average log-log slope of the growing part (cost - a) from ``n0`` to ``n1``: the growth the fit
        extrapolates with over that span. ``default`` (the form's exponent if None) where it cannot be read:
        no growth, or ``n1`` ≤ ``n0``."""
        g0, g1 = float(self.predict(n0)) - self.a, float(self.predict(n1)) - self.a
        if not (g0 > 0 and g1 > 0 and n1 > n0):
            return self.exponent() if default is None else default
        return math.log(g1 / g0) / math.log(n1 / n0)

    def describe(self) -> str:
        """The fitted form as a formula (``a + b·n^1.52``), written by render/estimate.py."""
        from ..render.estimate import formula

        return formula(self.name, self.k, self.b, self.c)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "a": self.a, "b": self.b, "c": self.c, "k": self.k, "rss": self.rss, "aicc": self.aicc}


def _noise_floored(f: ModelFit, noise: float) -> float:
    """``f``'s AICc computed from residuals no smaller than the points' measured run-to-run noise
    (``NOISE_AICC`` × ``noise``, relative sd): a form cannot gain evidence by fitting a trend smaller than
    the noise of the runs it is read from. Sizes are measured in increasing order, so a machine that
    drifts 1-2% while they run reads as a trend in the size: a pure-Python loop (27 ns a unit, flat within
    2%) was fitted n^1.02 over the largest sizes, and 64× further on predicted +17%."""
    if noise <= 0 or NOISE_AICC <= 0 or not math.isfinite(f.aicc):
        return f.aicc
    return _aicc(max(f.rss, f.n_points * (NOISE_AICC * noise) ** 2), f.n_points, f.params)


def _aicc(rss: float, m: int, p: int) -> float:
    """AICc; with too few points for the correction (m <= p + 1), AIC plus a flat 2-unit penalty per parameter."""
    rss = max(rss, 1e-12 * m)
    if m - p - 1 <= 0:
        return m * math.log(rss / m) + 4 * p
    return m * math.log(rss / m) + 2 * p + 2 * p * (p + 1) / (m - p - 1)


def _fit_linear(g: Any, y: Any, w: Any) -> tuple[Any, Any, Any]:
    """Weighted LS of ``y ≈ a + b·g`` with a, b >= 0; g may be (K, m) for K candidate exponents.

    Returns (a, b, rss) arrays of shape (K,).
    """
    import numpy as np

    g = np.atleast_2d(g)
    sw, swg, swy = w.sum(), (w * g).sum(1), (w * y).sum()
    swgg, swgy = (w * g * g).sum(1), (w * g * y).sum(1)
    det = sw * swgg - swg * swg
    with np.errstate(divide="ignore", invalid="ignore"):
        b = np.where(det > 0, (sw * swgy - swg * swy) / det, 0.0)
        a = np.where(det > 0, (swy - b * swg) / sw, swy / sw)
        # a < 0: refit through the origin; b < 0: the constant model
        b0 = np.where(swgg > 0, swgy / swgg, 0.0)
    neg_a = a < 0
    a = np.where(neg_a, 0.0, a)
    b = np.where(neg_a, b0, b)
    neg_b = b < 0
    b = np.where(neg_b, 0.0, b)
    a = np.where(neg_b, swy / sw, a)
    resid = (y[None, :] - a[:, None] - b[:, None] * g) * np.sqrt(w)[None, :]
    return a, b, (resid * resid).sum(1)


def _nnls_small(X: Any, y: Any, w: Any) -> tuple[Any, float]:
    """Weighted least squares with every coefficient >= 0, by trying each support (X has 3 columns at most)."""
    import numpy as np

    sw = np.sqrt(w)
    scale = np.maximum(np.abs(X).max(axis=0), 1e-300)
    Xw = X / scale * sw[:, None]
    yw = y * sw
    p = X.shape[1]
    best: tuple[float, Any] | None = None
    for mask in range(1, 2**p):
        cols = [j for j in range(p) if mask >> j & 1]
        c, *_ = np.linalg.lstsq(Xw[:, cols], yw, rcond=None)
        if (c < 0).any():
            continue
        full = np.zeros(p)
        full[cols] = c
        r = float(((yw - Xw @ full) ** 2).sum())
        if best is None or r < best[0]:
            best = (r, full)
    if best is None:  # pragma: no cover - the constant alone is always feasible for positive y
        return np.zeros(p), float((yw ** 2).sum())
    return best[1] / scale, best[0]


def fit_form(name: str, n: Sequence[float], y: Sequence[float], floor: float = 0.0) -> ModelFit:
    """Fit one form; residuals are relative to ``max(y, floor)``."""
    import numpy as np

    n_arr, y_arr = np.asarray(n, dtype=float), np.asarray(y, dtype=float)
    w = 1.0 / np.maximum(np.abs(y_arr), max(floor, 1e-300)) ** 2
    m, p = len(y_arr), FORMS[name]
    if name == "constant":
        a = float((w * y_arr).sum() / w.sum())
        rss = float((((y_arr - a) ** 2) * w).sum())
        return ModelFit(name, a, 0.0, None, rss, _aicc(rss, m, p), m)
    if name in TWO_TERM:
        g, h = TWO_TERM[name]
        X = np.stack([np.ones_like(n_arr), _g(g, n_arr), _g(h, n_arr)], axis=1)
        coef, rss = _nnls_small(X, y_arr, w)
        return ModelFit(name, float(coef[0]), float(coef[1]), None, rss, _aicc(rss, m, p), m, float(coef[2]))
    if name in ("n^k", "n^k log n"):
        lo, hi, step = K_GRID
        ks = np.arange(lo, hi + step / 2, step)
        # every exponent of the grid at once (one _g call per exponent made the fitting, not the measuring,
        # most of an estimate's time: 1.5 s of a 2.3 s estimate of a 0.5 s sort, the tour notebook's)
        g = n_arr[None, :] ** ks[:, None]
        if name == "n^k log n":
            g = g * np.log(np.maximum(n_arr, 1.0))[None, :]
        a, b, rss = _fit_linear(g, y_arr, w)
        i = int(np.argmin(rss))
        return ModelFit(name, float(a[i]), float(b[i]), float(ks[i]), float(rss[i]), _aicc(float(rss[i]), m, p), m)
    a, b, rss = _fit_linear(_g(name, n_arr), y_arr, w)
    return ModelFit(name, float(a[0]), float(b[0]), None, float(rss[0]), _aicc(float(rss[0]), m, p), m)


@dataclass(frozen=True)
class Selection:
    """Every form fitted, the chosen one, and the prediction at the target size with its interval."""

    fits: tuple[ModelFit, ...]
    best: ModelFit
    target: float
    predicted: float
    low: float
    high: float
    plausible: tuple[str, ...] = field(default=())  # other forms within PLAUSIBLE AICc units
    dropped: tuple[float, ...] = field(default=())  # sizes left out as outliers

    def to_dict(self) -> dict[str, Any]:
        return {"best": self.best.to_dict(), "predicted": self.predicted, "low": self.low, "high": self.high,
                "plausible": list(self.plausible), "fits": [f.to_dict() for f in self.fits]}


def select(n: Sequence[float], y: Sequence[float], target: float, *, floor: float = 0.0,
           forms: Sequence[str] | None = None, boot: int = 200, level: float = 0.90, seed: int = 0,
           robust: bool = True, noise: float = 0.0) -> Selection:
    """Fit every form that the number of points supports, pick by AICc, predict ``target`` with an interval.

    ``noise``: the points' run-to-run variation measured apart from the fit (relative sd); where the
    residuals are smaller than that (a few points that happened to line up), the bootstrap draws
    relative noise of that size instead, so the interval carries what the points' noise does to the
    extrapolation."""
    import numpy as np

    m = len(y)
    if m < 2:
        raise ValueError("need at least 2 points to fit a cost model")
    if robust and m >= 6:
        # one pass of outlier rejection: a run hit by a GC pass or a preemption must not bend the curve
        probe = min((fit_form(f, n, y, floor) for f in ("n^k", "n log n", "linear")), key=lambda f: f.aicc)
        rel = [abs(yy - float(probe.predict(nn))) / max(abs(yy), floor, 1e-300) for nn, yy in zip(n, y)]
        mad = sorted(rel)[len(rel) // 2]
        bad = [i for i, r in enumerate(rel) if r > max(5 * mad, 0.25)]
        if bad and m - len(bad) >= 5 and len(bad) <= max(1, m // 5):
            keep = [i for i in range(m) if i not in bad]
            sub = select([n[i] for i in keep], [y[i] for i in keep], target, floor=floor, forms=forms, boot=boot,
                         level=level, seed=seed, robust=False, noise=noise)
            return replace(sub, dropped=tuple(float(n[i]) for i in bad))
    names = [f for f in (forms or FORMS) if FORMS[f] + 2 <= m or (m < 4 and FORMS[f] <= 2)]
    fits = [fit_form(f, n, y, floor) for f in names]
    # the evidence for an extra parameter is read against the runs' measured noise (:func:`_noise_floored`)
    ev = {f.name: _noise_floored(f, noise) for f in fits}
    # a two-term form bends the extrapolation with a second power: it competes only where the points
    # demand it (at least TWO_TERM_EVIDENCE AICc units better than every one-term form)
    single = [f for f in fits if f.name not in TWO_TERM and math.isfinite(f.aicc)]
    if single:
        bar = min(ev[f.name] for f in single) - TWO_TERM_EVIDENCE
        fits = [f for f in fits if f.name not in TWO_TERM or ev[f.name] <= bar]
    # a free exponent fits the noise of two or three points past the overhead regime as readily as a
    # real trend (n² read as n^1.67 log n under-predicted a 10× extrapolation by 40%): it competes only
    # where it beats every fixed-exponent form by FREE_K_EVIDENCE AICc units
    fixed = [f for f in fits if f.name not in FREE_K and f.name not in TWO_TERM and f.name != "constant"
             and math.isfinite(f.aicc)]
    if fixed:
        bar = min(ev[f.name] for f in fixed) - FREE_K_EVIDENCE
        fits = [f for f in fits if f.name not in FREE_K or ev[f.name] <= bar]
    if all(not math.isfinite(f.aicc) for f in fits):  # too few points for AICc: least RSS among 1-2 params
        best = min(fits, key=lambda f: (f.rss * (1 + 0.1 * f.params)))
    else:
        best = min(fits, key=lambda f: f.aicc)
    plausible = tuple(f.name for f in fits if f is not best and math.isfinite(f.aicc) and f.aicc - best.aicc <= PLAUSIBLE)
    # the prediction averages the forms by their Akaike weights (in log space): when two forms fit the
    # points equally well (n vs n log n over a short range), neither gets to decide the extrapolation alone
    finite = [f for f in fits if math.isfinite(f.aicc) and float(f.predict(target)) > 0]
    if finite:
        wts = [math.exp(-(f.aicc - best.aicc) / 2) for f in finite]
        pred = math.exp(sum(w * math.log(float(f.predict(target))) for w, f in zip(wts, finite)) / sum(wts))
    else:
        pred = float(best.predict(target))
    # residual bootstrap of the chosen form (relative residuals, rescaled for leverage roughly by sqrt(m/(m-p)))
    y_arr, n_arr = np.asarray(y, float), np.asarray(n, float)
    fitted = np.asarray(best.predict(n_arr), float)
    scale_y = np.maximum(np.abs(y_arr), max(floor, 1e-300))
    rel = (y_arr - fitted) / scale_y
    infl = math.sqrt(m / max(m - best.params, 1))
    rng = np.random.default_rng(seed)
    preds = []
    parametric = noise > 0 and float(np.sqrt(np.mean(rel * rel))) * infl < noise
    for _ in range(boot if m >= 3 else 0):
        r = rng.normal(0.0, noise, size=m) if parametric else rng.choice(rel, size=m, replace=True) * infl
        yb = fitted + r * scale_y
        fb = fit_form(best.name, n_arr, yb, floor)
        preds.append(float(fb.predict(target)))
    if preds:
        q = (1 - level) / 2
        lo, hi = float(np.quantile(preds, q)), float(np.quantile(preds, 1 - q))
    else:
        lo = hi = pred
    for f in fits:
        if f.name in plausible:
            v = float(f.predict(target))
            lo, hi = min(lo, v), max(hi, v)
    # a time is not negative: refits through noisy points that fall below zero at the target say only that the
    # low end is unknown (a memory-bound add's interval printed 'anywhere from -1.776 ms to 4.06 s')
    lo, hi = max(min(lo, pred), 0.0), max(hi, pred)
    return Selection(tuple(fits), best, float(target), pred, lo, hi, plausible)


def local_slopes(n: Sequence[float], y: Sequence[float]) -> list[float]:
    """log-log slopes between consecutive points (the local exponent)."""
    out = []
    for i in range(1, len(n)):
        if n[i] > n[i - 1] > 0 and y[i] > 0 and y[i - 1] > 0:
            out.append(math.log(y[i] / y[i - 1]) / math.log(n[i] / n[i - 1]))
    return out


def invert(fit: ModelFit, limit: float, lo: float, hi: float) -> float | None:
    """The largest n in [lo, hi] with ``fit.predict(n) <= limit`` (the forms are non-decreasing), or None."""
    if float(fit.predict(lo)) > limit:
        return None
    if float(fit.predict(hi)) <= limit:
        return hi
    a, b = math.log(lo), math.log(hi)
    for _ in range(80):
        mid = (a + b) / 2
        if float(fit.predict(math.exp(mid))) <= limit:
            a = mid
        else:
            b = mid
    return math.exp(a)
