"""Scaling models on (workers N, time T(N)) data: speedup, efficiency, Karp–Flatt, Amdahl, USL, Gustafson.

Pure functions, no numpy/scipy: the fits are bounded nonlinear least squares in *speedup space*, found by
a grid (plus, when the baseline is N = 1, the exact linearised solution) and refined with a projected
Levenberg–Marquardt. Standard errors come from the Jacobian's covariance ``s²(JᵀWJ)⁻¹`` with
``s² = RSS / (n − 1 − p)`` (the baseline point's residual is zero by construction, so it carries no
degree of freedom). Model choice is by AICc = n·ln(RSS/n) + 2p + 2p(p+1)/(n−p−1).

Models (``N0`` = the smallest measured worker count, the baseline; speedups are ``T(N0)/T(N)``):

* Amdahl:  ψ(N) = 1 / (S + (1−S)/N),                  S ∈ [0, 1] (serial fraction); ceiling 1/S.
* USL:     C(N) = N / (1 + σ(N−1) + κN(N−1)),          σ, κ ≥ 0; peak at N* = √((1−σ)/κ) when κ > 0.
  With κ = 0 the USL *is* Amdahl (σ = S), so on Amdahl data both fit alike and AICc prefers Amdahl.
* Gustafson (weak scaling): scaled speedup N − S(N−1).

When N0 > 1 both models are used relative to N0: ψ_rel(N) = m(N) / m(N0).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = ["Fit", "speedup", "efficiency", "karp_flatt", "amdahl_model", "usl_model", "fit_amdahl", "fit_usl",
           "fit_gustafson", "gustafson", "usl_peak", "aicc", "choose_model", "MIN_POINTS_FOR_CHOICE"]

MIN_POINTS_FOR_CHOICE = 6
AICC_MARGIN = 2.0   # ΔAICc > 2: substantial support for the extra parameter
PEAK_RANGE = 2.0    # a USL peak beyond 2× the largest N measured is an extrapolation, not a finding
_SIGMA_MAX = 1.0
_KAPPA_MAX = 1.0


def speedup(t1: float, tn: float) -> float:
    """Speedup of time ``tn`` over the baseline time ``t1``."""
    return t1 / tn if tn > 0 else math.nan


def efficiency(psi: float, n: float, base_n: float = 1) -> float:
    """Parallel efficiency: speedup per worker added relative to the baseline (1.0 = ideal)."""
    return psi * base_n / n


def karp_flatt(psi: float, n: float, base_n: float = 1) -> float:
    """Experimentally determined serial fraction e = (1/ψ − 1/N) / (1 − 1/N), for N > base_n.

    With a baseline ``base_n`` > 1 the ratio r = base_n/N replaces 1/N (the baseline run is "one unit").
    """
    r = base_n / n
    if r >= 1 or not psi > 0:
        return math.nan
    return (1.0 / psi - r) / (1.0 - r)


def gustafson(s: float, n: float) -> float:
    """Gustafson's scaled speedup for weak scaling: N − S(N−1)."""
    return n - s * (n - 1)


def amdahl_model(n: float, s: float) -> float:
    return 1.0 / (s + (1.0 - s) / n)


def usl_model(n: float, sigma: float, kappa: float) -> float:
    return n / (1.0 + sigma * (n - 1) + kappa * n * (n - 1))


def usl_peak(sigma: float, kappa: float) -> float | None:
    """N* = √((1−σ)/κ) when κ > 0 (and σ < 1), else None (no peak: monotone)."""
    if kappa is None or not kappa > 0 or sigma >= 1:
        return None
    return math.sqrt((1.0 - sigma) / kappa)


def aicc(rss: float, n: int, p: int) -> float:
    """Small-sample AIC of a least-squares fit with ``p`` parameters on ``n`` points (inf when n ≤ p+1)."""
    if n <= p + 1:
        return math.inf
    return n * math.log(rss / n) + 2 * p + 2 * p * (p + 1) / (n - p - 1)


@dataclass(frozen=True)
class Fit:
    """One fitted model: parameters, their standard errors, residual sum of squares, AIC(c), points."""

    model: str
    params: dict[str, float]
    stderr: dict[str, float]
    rss: float
    aic: float
    n: int
    aicc: float = math.inf
    base_n: float = 1
    notes: tuple[str, ...] = field(default=())

    def predict(self, n: float) -> float:
        """The fitted speedup at ``n`` workers, relative to the baseline ``base_n``."""
        return _relative(_MODELS[self.model], tuple(self.params.values()), self.base_n)(n)

    @property
    def peak_n(self) -> float | None:
        if self.model != "usl":
            return None
        return usl_peak(self.params["sigma"], self.params["kappa"])

    @property
    def ceiling(self) -> float | None:
        """Amdahl's limit 1/S (relative to N = 1); None when S = 0."""
        if self.model != "amdahl":
            return None
        s = self.params["S"]
        return 1.0 / s if s > 0 else None


_MODELS: dict[str, Callable[..., float]] = {"amdahl": amdahl_model, "usl": usl_model,
                                             "gustafson": lambda n, s: gustafson(s, n)}


def _relative(model: Callable[..., float], theta: Sequence[float], base_n: float) -> Callable[[float], float]:
    if base_n == 1:
        return lambda n: model(n, *theta)
    m0 = model(base_n, *theta)
    return lambda n: model(n, *theta) / m0


def _check(ns: Sequence[float], ys: Sequence[float], weights: Sequence[float] | None) -> tuple[list[float], list[float], list[float]]:
    ns, ys = [float(x) for x in ns], [float(y) for y in ys]
    if len(ns) != len(ys):
        raise ValueError(f"{len(ns)} worker counts but {len(ys)} speedups")
    if len(set(ns)) < 2:
        raise ValueError("a fit needs at least two distinct worker counts")
    if any(not (n >= 1) for n in ns) or any(not (y > 0 and math.isfinite(y)) for y in ys):
        raise ValueError("worker counts must be >= 1 and speedups positive and finite")
    w = [1.0] * len(ns) if weights is None else [float(x) for x in weights]
    if len(w) != len(ns) or any(not (x >= 0 and math.isfinite(x)) for x in w):
        raise ValueError("weights must be one finite, non-negative number per point")
    return ns, ys, w


def _rss(model: Callable[..., float], theta: Sequence[float], ns: list[float], ys: list[float], w: list[float],
         base_n: float) -> float:
    try:
        f = _relative(model, theta, base_n)
        return sum(wi * (f(n) - y) ** 2 for n, y, wi in zip(ns, ys, w))
    except (ZeroDivisionError, OverflowError):
        return math.inf


def _jacobian(model: Callable[..., float], theta: list[float], ns: list[float], base_n: float,
              bounds: list[tuple[float, float]]) -> list[list[float]]:
    """Central (one-sided at a bound) finite-difference Jacobian of the model, rows = points."""
    cols = []
    for j, (lo, hi) in enumerate(bounds):
        h = 1e-6 * max(1.0, abs(theta[j]))
        a, b = max(lo, theta[j] - h), min(hi, theta[j] + h)
        if b <= a:
            cols.append([0.0] * len(ns))
            continue
        ta, tb = list(theta), list(theta)
        ta[j], tb[j] = a, b
        fa, fb = _relative(model, ta, base_n), _relative(model, tb, base_n)
        cols.append([(fb(n) - fa(n)) / (b - a) for n in ns])
    return [[cols[j][i] for j in range(len(theta))] for i in range(len(ns))]


def _solve(a: list[list[float]], b: list[float]) -> list[float] | None:
    """Solve a small dense system (p ≤ 2 here) by Gaussian elimination; None if singular."""
    p = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(p):
        piv = max(range(c, p), key=lambda r: abs(m[r][c]))
        if abs(m[piv][c]) < 1e-300:
            return None
        m[c], m[piv] = m[piv], m[c]
        for r in range(p):
            if r != c:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return [m[i][p] / m[i][i] for i in range(p)]


def _inverse(a: list[list[float]]) -> list[list[float]] | None:
    p = len(a)
    cols = []
    for j in range(p):
        e = [1.0 if i == j else 0.0 for i in range(p)]
        x = _solve(a, e)
        if x is None:
            return None
        cols.append(x)
    return [[cols[j][i] for j in range(p)] for i in range(p)]


def _lm(model: Callable[..., float], theta: list[float], ns: list[float], ys: list[float], w: list[float],
        base_n: float, bounds: list[tuple[float, float]], iters: int = 200) -> tuple[list[float], float]:
    """Projected Levenberg–Marquardt: steps are clipped into the bounds and accepted only if RSS falls."""
    cur = _rss(model, theta, ns, ys, w, base_n)
    lam = 1e-3
    p = len(theta)
    for _ in range(iters):
        jac = _jacobian(model, theta, ns, base_n, bounds)
        f = _relative(model, theta, base_n)
        r = [y - f(n) for n, y in zip(ns, ys)]
        jtj = [[sum(w[i] * jac[i][a] * jac[i][b] for i in range(len(ns))) for b in range(p)] for a in range(p)]
        jtr = [sum(w[i] * jac[i][a] * r[i] for i in range(len(ns))) for a in range(p)]
        improved = False
        while lam < 1e12:
            a = [[jtj[i][j] + (lam * (jtj[i][i] + 1e-12) if i == j else 0.0) for j in range(p)] for i in range(p)]
            step = _solve(a, jtr)
            if step is None:
                lam *= 10
                continue
            trial = [min(hi, max(lo, t + s)) for t, s, (lo, hi) in zip(theta, step, bounds)]
            new = _rss(model, trial, ns, ys, w, base_n)
            if new < cur:
                done = cur - new <= 1e-15 * max(cur, 1e-300) or all(abs(x - y) <= 1e-13 * max(1.0, abs(x))
                                                                    for x, y in zip(trial, theta))
                theta, cur = trial, new
                lam = max(lam / 10, 1e-12)
                improved = True
                if done:
                    return theta, cur
                break
            lam *= 10
        if not improved or cur == 0.0:
            break
    return theta, cur


def _finish(name: str, keys: list[str], model: Callable[..., float], theta: list[float], rss: float,
            ns: list[float], ys: list[float], w: list[float], base_n: float,
            bounds: list[tuple[float, float]], notes: list[str]) -> Fit:
    n, p = len(ns), len(theta)
    dof = n - 1 - p
    stderr = {k: math.nan for k in keys}
    if dof > 0:
        jac = _jacobian(model, theta, ns, base_n, bounds)
        jtj = [[sum(w[i] * jac[i][a] * jac[i][b] for i in range(n)) for b in range(p)] for a in range(p)]
        inv = _inverse(jtj)
        if inv is not None:
            s2 = rss / dof
            stderr = {k: math.sqrt(max(inv[j][j] * s2, 0.0)) for j, k in enumerate(keys)}
    else:
        notes.append(f"{n} points leave no degrees of freedom for {p} parameter(s): no standard errors")
    scale = max(max(ys), 1.0) ** 2
    rss_f = max(rss, 1e-20 * scale * n)  # exact data: keep log(RSS) finite and comparable between models
    aic = n * math.log(rss_f / n) + 2 * p
    return Fit(name, dict(zip(keys, theta)), stderr, rss, aic, n, aicc(rss_f, n, p), base_n, tuple(notes))


def fit_amdahl(ns: Sequence[float], speedups: Sequence[float], weights: Sequence[float] | None = None, *,
               base_n: float | None = None) -> Fit:
    """Least-squares serial fraction S ∈ [0, 1] of Amdahl's law on measured speedups (relative to ``base_n``,
    default the smallest N)."""
    ns_, ys, w = _check(ns, speedups, weights)
    b = min(ns_) if base_n is None else float(base_n)
    starts = [i / 200 for i in range(201)]
    if b == 1:  # linearised: 1/ψ − 1/N = S(1 − 1/N)
        num = sum((1 / y - 1 / n) * (1 - 1 / n) for n, y in zip(ns_, ys))
        den = sum((1 - 1 / n) ** 2 for n in ns_)
        if den > 0:
            starts.append(min(1.0, max(0.0, num / den)))
    best = min(starts, key=lambda s: _rss(amdahl_model, [s], ns_, ys, w, b))
    theta, rss = _lm(amdahl_model, [best], ns_, ys, w, b, [(0.0, 1.0)])
    return _finish("amdahl", ["S"], amdahl_model, theta, rss, ns_, ys, w, b, [(0.0, 1.0)], [])


def fit_usl(ns: Sequence[float], speedups: Sequence[float], weights: Sequence[float] | None = None, *,
            base_n: float | None = None) -> Fit:
    """Least-squares σ, κ ≥ 0 of the Universal Scalability Law on measured speedups."""
    ns_, ys, w = _check(ns, speedups, weights)
    b = min(ns_) if base_n is None else float(base_n)
    bounds = [(0.0, _SIGMA_MAX), (0.0, _KAPPA_MAX)]
    sig_grid = [i / 50 for i in range(51)]
    kap_grid = [0.0] + [10 ** (-6 + i * 0.25) for i in range(25)]
    starts = [[s, k] for s in sig_grid for k in kap_grid]
    if b == 1:  # linearised: N/C − 1 = σ(N−1) + κN(N−1); non-negative LS over the 2 variables
        starts += _nnls2([n - 1 for n in ns_], [n * (n - 1) for n in ns_], [n / y - 1 for n, y in zip(ns_, ys)])
    starts = [[min(_SIGMA_MAX, s), min(_KAPPA_MAX, k)] for s, k in starts]
    ranked = sorted(starts, key=lambda t: _rss(usl_model, t, ns_, ys, w, b))[:3]
    fits = [_lm(usl_model, list(t), ns_, ys, w, b, bounds) for t in ranked]
    theta, rss = min(fits, key=lambda f: f[1])
    return _finish("usl", ["sigma", "kappa"], usl_model, theta, rss, ns_, ys, w, b, bounds, [])


def _nnls2(x1: list[float], x2: list[float], y: list[float]) -> list[list[float]]:
    """Candidate non-negative solutions of y ≈ a·x1 + b·x2 (full, a only, b only)."""
    s11, s22, s12 = sum(a * a for a in x1), sum(b * b for b in x2), sum(a * b for a, b in zip(x1, x2))
    s1y, s2y = sum(a * c for a, c in zip(x1, y)), sum(b * c for b, c in zip(x2, y))
    out = []
    det = s11 * s22 - s12 * s12
    if det > 1e-300:
        a, b = (s1y * s22 - s2y * s12) / det, (s2y * s11 - s1y * s12) / det
        if a >= 0 and b >= 0:
            out.append([a, b])
    if s11 > 0:
        out.append([max(0.0, s1y / s11), 0.0])
    if s22 > 0:
        out.append([0.0, max(0.0, s2y / s22)])
    return out


def fit_gustafson(ns: Sequence[float], scaled_speedups: Sequence[float], *, base_n: float | None = None) -> Fit:
    """Weak scaling: S of Gustafson's law N − S(N−1) (linear least squares, S clipped to [0, 1])."""
    ns_, ys, w = _check(ns, scaled_speedups, None)
    b = min(ns_) if base_n is None else float(base_n)
    model = _MODELS["gustafson"]
    best = min([i / 200 for i in range(201)], key=lambda s: _rss(model, [s], ns_, ys, w, b))
    theta, rss = _lm(model, [best], ns_, ys, w, b, [(0.0, 1.0)])
    return _finish("gustafson", ["S"], model, theta, rss, ns_, ys, w, b, [(0.0, 1.0)], [])


def choose_model(amdahl_fit: Fit | None, usl_fit: Fit | None, max_n: float | None = None) -> tuple[str | None, list[str]]:
    """``("amdahl" | "usl" | None, notes)``: USL only with κ > 0 (else it *is* Amdahl), an AICc lower by more
    than ``AICC_MARGIN`` (substantial support) and, given ``max_n``, a peak within ``PEAK_RANGE × max_n``."""
    notes: list[str] = []
    if amdahl_fit is None or usl_fit is None:
        return (amdahl_fit.model if amdahl_fit else usl_fit.model if usl_fit else None), notes
    n = amdahl_fit.n
    if n < MIN_POINTS_FOR_CHOICE:
        notes.append(f"only {n} worker counts: the choice between Amdahl and USL is weak "
                     f"(measure at least {MIN_POINTS_FOR_CHOICE})")
    a, u = amdahl_fit.aicc, usl_fit.aicc
    if math.isinf(u) and math.isinf(a):
        a, u = amdahl_fit.aic, usl_fit.aic
        notes.append("too few points for AICc: compared by AIC")
    if usl_fit.params["kappa"] > 0 and u < a - AICC_MARGIN:
        pk = usl_fit.peak_n
        if max_n is not None and pk is not None and pk > PEAK_RANGE * max_n:
            notes.append(f"USL fits a little better, but its peak N* ≈ {pk:.3g} lies far beyond the largest N "
                         f"measured ({max_n:g}): over this range the models agree, so the simpler Amdahl is kept")
            return "amdahl", notes
        return "usl", notes
    return "amdahl", notes
