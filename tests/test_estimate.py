"""perfmagic.estimate against planted workloads whose full run is measured too (a few seconds each)."""

from __future__ import annotations

import itertools
import math
import random
import re
import time
from dataclasses import replace
from typing import Any

import pytest

from perfmagic import estimate
from perfmagic.estimation.costmodel import ModelFit, invert, local_slopes, select
from perfmagic.errors import BadOptionError, BenchInterrupted
from perfmagic.estimation.estimate import Actual, Point, analyse_scaling, gate

from .conftest import spin_loop


def _actual_again(r, ns, code, var="n"):
    """The full run once more (the ground truth must not hinge on one noisy run)."""
    from perfmagic.estimation.runner import _Runner

    runner = _Runner(code, var, ns, "cpu", "<again>")
    return runner.once(int(r.full), memory=True, clean=True)


def _time_ok(r, ns, code, tol=0.15, interval_ok=False):
    """Whether the prediction is within ``tol`` of the actual full run (median of three if one run is off)."""
    if r.actual is None or r.actual.status != "ok" or not r.reliable:
        return False, f"no usable full run or prediction\n{r.text()}"
    err, actual = r.time_error(), r.actual.seconds
    if abs(err) > tol:  # one noisy full run on a shared machine: take the median of three
        runs = [r.actual.seconds] + [_actual_again(r, ns, code)[0] for _ in range(2)]
        actual = sorted(runs)[1]
        err = actual / r.predicted_s - 1
    if abs(err) > tol and interval_ok and r.low_s and r.high_s:
        # the caller's workload changes regime between the sizes measured and the full run (see the
        # test): what the estimate promises there is its interval, which must cover the run and stay
        # narrow enough to plan with (high/low <= 3), so it cannot pass by being vague
        inside = r.low_s <= actual <= r.high_s and r.high_s / r.low_s <= 3.0
        return inside, (f"point error {err:+.1%}: the actual {actual:.3f}s must lie in the interval "
                        f"{r.low_s:.3f}-{r.high_s:.3f}s (at most 3x wide)\n{r.text()}")
    if abs(err) > tol and (r.others_cores or 0.0) >= LOADED_CORES:
        # beside a busy process the small sizes and the full run meet different contention (a 2M-element
        # sort leaves the shared L3 the neighbour also uses): the point cannot be held to ±tol, and the
        # estimate says so. What it promises then is its interval, and that it names the load.
        named = "other processes" in r.text()
        inside = r.low_s is not None and r.high_s is not None and r.low_s <= actual <= r.high_s
        return named and inside, (f"loaded ({r.others_cores:.2f} cores): actual {actual:.3f}s must lie in the "
                                  f"interval and the load be named\n{r.text()}")
    return abs(err) <= tol, f"predicted {r.predicted_s:.3f}s vs actual: error {err:+.1%}\n{r.text()}"


LOADED_CORES = 0.5   # other processes' cores while measuring above which a run counts as loaded


def _predict_and_check(code, ns, N, tol=0.15, attempts=2, interval_ok=False, **kw):
    """Estimate, run, compare; on a miss, more attempts (a loaded 2-core machine can spoil one).

    When no attempt gives a usable prediction because the estimator measured runs of one size differing
    too much or the machine's own speed changing (its drift guard), and a fixed loop timed here apart from perfmagic swings as much (this VM has two speed
    states, ~1.7x apart, invisible to /proc/stat), the machine cannot show the planted truth: skipped with
    that reading. A refusal the machine does not explain fails."""
    msgs, refused = [], []
    for _ in range(attempts):
        r = estimate(code, n=N, globals=ns, **{"budget": 1.5, "max_fraction": 0.3, **kw}, run=True, force=True)
        ok, msg = _time_ok(r, ns, code, tol, interval_ok)
        if ok:
            return r
        msgs.append(msg)
        text = " ".join(x.strip() for x in r.text().splitlines())
        refused.append((not r.reliable and "differ by" in text) or "machine's own speed changed" in text)
    if all(refused):
        swing = _machine_swing()
        if swing >= 1.25:
            pytest.skip(f"this machine's speed swung {swing:.2f}x (a fixed loop, timed apart from perfmagic) "
                        "and every estimate refused with that variation measured: the prediction cannot be "
                        "checked here")
    raise AssertionError("\n\n".join(msgs))


def _machine_swing(reps: int = 30) -> float:
    """max / min of a fixed ~5 ms pure-Python loop timed ``reps`` times, 20 ms apart."""
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        spin_loop(100_000)
        ts.append(time.perf_counter() - t)
        time.sleep(0.02)
    return max(ts) / min(ts)


# ---- the cost models on planted curves ----------------------------------------------------------

@pytest.mark.parametrize("name, f, expect", [
    ("linear", lambda n: 1e-3 + 2e-8 * n, ("linear", "n^k", "n log n", "n^k log n")),
    ("nlogn", lambda n: 1e-3 + 2e-8 * n * math.log(n), ("n log n", "n^k", "n^k log n")),
    ("quadratic", lambda n: 5e-3 + 1e-11 * n * n, ("quadratic", "n^k", "n^k log n")),
])
def test_model_selection_recovers_planted_curves(name, f, expect) -> None:
    # 1% noise (a median of runs): at 2-3% a short range cannot tell n from n log n, and the
    # prediction honestly averages the two (see test_ambiguous_forms_share_the_prediction)
    rng = random.Random(3)
    ns = [2**i for i in range(11, 19)]
    ys = [f(n) * (1 + rng.gauss(0, 0.01)) for n in ns]
    sel = select(ns, ys, 2**20)
    assert sel.best.name in expect, sel.best
    assert abs(sel.predicted / f(2**20) - 1) < 0.15
    assert sel.low <= sel.predicted <= sel.high


def test_ambiguous_forms_share_the_prediction() -> None:
    rng = random.Random(3)
    f = lambda n: 1e-3 + 2e-8 * n  # noqa: E731
    ns = [2**i for i in range(11, 18)]
    sel = select(ns, [f(n) * (1 + rng.gauss(0, 0.02)) for n in ns], 2**20)
    lin = next(x for x in sel.fits if x.name == "linear")
    nlogn = next(x for x in sel.fits if x.name == "n log n")
    lo, hi = sorted([float(lin.predict(2**20)), float(nlogn.predict(2**20))])
    assert lo * 0.97 <= sel.predicted <= hi * 1.03  # between the two readings, not either one alone
    assert sel.high >= hi * 0.97 and sel.low <= lo * 1.03


def test_two_term_polynomial_overhead() -> None:
    f = lambda n: 0.05 + 1e-7 * n + 3e-8 * n * n  # noqa: E731  (an outer loop's cost plus the inner n²)
    ns = [2**i for i in range(4, 13)]
    sel = select(ns, [f(n) for n in ns], 20000)
    assert sel.best.name == "n + n²" and sel.predicted == pytest.approx(f(20000), rel=0.01)


def test_overhead_regime_does_not_fool_the_fit() -> None:
    # a naive power law through the overhead regime under-predicts n² badly; a + b·n^k must not
    ns = [2**i for i in range(6, 16)]
    ys = [2e-3 + 1e-11 * n * n for n in ns]
    sel = select(ns, ys, 2**18)
    assert abs(sel.predicted / (2e-3 + 1e-11 * 2**36) - 1) < 0.05
    assert sel.best.exponent() == pytest.approx(2, abs=0.1)


def test_slope_at_is_the_growth_a_fit_extrapolates_with_there() -> None:
    # the fit of a fresh-clone CI run on a 3 ms + n² spin: a + b·n² + c·n³ whose cubic share at n=3000 is 10%
    fit = ModelFit("n² + n³", a=3.11e-3, b=1.1226e-7, k=None, rss=1e-6, aicc=-46.6, n_points=5, c=4.2e-12)
    share = 4.2e-12 * 3000**3 / (1.1226e-7 * 3000**2 + 4.2e-12 * 3000**3)
    assert fit.exponent() == 3.0 and fit.slope_at(3000) == pytest.approx(2 + share, abs=0.01)
    assert fit.slope_at(1e9) == pytest.approx(3, abs=0.01)  # the asymptote, far out
    assert ModelFit("quadratic", 1.0, 1e-6, None, 0, 0, 5).slope_at(100) == pytest.approx(2, abs=1e-3)
    nlogn = ModelFit("n log n", 0.0, 1e-6, None, 0, 0, 5)
    assert nlogn.slope_at(1000) == pytest.approx(1 + 1 / math.log(1000), abs=1e-3)
    assert ModelFit("constant", 1.0, 0.0, None, 0, 0, 5).slope_at(100) == 0.0


def test_a_loop_of_steps_is_told_from_its_source() -> None:
    from perfmagic.estimation.fit import loop_of_steps

    assert loop_of_steps("for _ in range(n):\n    opt.zero_grad()\n    step()", "n")
    assert loop_of_steps("for i in range(n):\n    step()\n", "n")  # the counter unread
    assert loop_of_steps("for _ in range(steps):\n    step()", "steps")
    for other in ("for i in range(n):\n    step(i)", "for _ in range(n):\n    step(n)", "for _ in range(2 * n):\n    f()",
                  "for _ in range(0, n):\n    f()", "for _ in range(n):\n    f()\nprint(1)", "train(n)",
                  "for _ in range(n):\n    f()\nelse:\n    g()", "for _ in range(m):\n    f()", "for _ in range(n:"):
        assert not loop_of_steps(other, "n"), other


def test_a_refused_fit_of_a_loop_of_steps_is_answered_by_the_pace_of_its_runs() -> None:
    """The runs of a fresh-clone bench trial (issue 29's 2000 steps of ~40 ms): 1-16 steps at 34-46 ms a step,
    the machine slower while the largest ran (a repeat of 8 steps 353 ms against 279 and 308). The fit through
    them bent (n·ln n) and was refused (55 s – 20 min). The cell is a loop of steps whose body reads neither n
    nor its counter, so its cost is n × a step's: the pace answers, 82 s (58 – 130 s), and 2000 × the steps'
    own 34-46 ms is inside. The same runs of a cell that is not such a loop stay refused."""
    pts = [Point(1, (0.034, 0.036)), Point(2, (0.067, 0.073)), Point(4, (0.142, 0.137)),
           Point(8, (0.279, 0.308), later=(0.353,)), Point(16, (0.699, 0.736))]
    r = analyse_scaling(pts, N=2000, code="for _ in range(n):\n    train_step()")
    assert r.reliable and r.low_s <= 2000 * 0.034 and 2000 * 0.046 <= r.high_s <= 2000 * 0.08, r.text()
    assert r.predicted_s == pytest.approx(2000 * 0.0411, rel=0.02)
    text = " ".join(r.text().split())
    assert "the cell runs one step n times (a loop whose body reads neither n nor its counter): its cost is n × " \
        "a step's, so the pace of the runs answers" in text, text
    other = analyse_scaling(pts, N=2000, code="train(n)")
    assert not other.reliable and other.high_s / other.low_s > 10
    # a loop of steps whose fit is not refused keeps its fit
    steady = [Point(n, (0.04 * n, 0.04 * n)) for n in (1, 2, 4, 8, 16)]
    kept = analyse_scaling(steady, N=2000, code="for _ in range(n):\n    train_step()")
    assert kept.reliable and not any(getattr(x, "kind", "") == "estimate.pace" for x in kept.notes)


def test_a_rising_slope_is_judged_against_the_models_own_slope_over_the_same_sizes() -> None:
    """A planted n·ln n: one run 12% low at the
    third-largest size reads as a local slope rising 1.01 → 1.18, which is the model's own slope there
    (1.09) within 0.1, so nothing is said, and the prediction is 3% low (against the form's exponent, 1.00, it was warned about: "take the
    prediction as a lower bound"). A largest size 30% above the curve rises beyond it and is still said."""
    sizes = [2**k for k in range(10, 18)]

    def pts(times: list[float]) -> list[Point]:
        return [Point(n, (t, t)) for n, t in zip(sizes, times)]

    exact = [2e-8 * n * math.log(n) for n in sizes]
    dip = exact[:-3] + [exact[-3] * 0.88] + exact[-2:]
    r = analyse_scaling(pts(dip), N=2**22)
    assert r.time_fit.best.name == "n log n" and r.time_fit.best.exponent() == 1.0
    assert not any(w.kind == "estimate.slope-rising" for w in r.warnings), r.text()
    assert r.predicted_s == pytest.approx(2e-8 * 2**22 * math.log(2**22), rel=0.05)  # (the low run: -3%)
    jump = exact[:-1] + [exact[-1] * 1.3]
    warned = [w for w in analyse_scaling(pts(jump), N=2**22).warnings if w.kind == "estimate.slope-rising"]
    assert warned and warned[0]["model_k"] == pytest.approx(1.09, abs=0.03)
    assert "the model's over the same sizes 1.09" in str(warned[0])


def test_a_rising_slope_within_the_runs_own_noise_is_not_said() -> None:
    """Planted n²: the largest size 25% above the curve (and the third-largest 5% below) reads as a slope
    rising beyond the model's. With runs that repeat exactly, that is said; with the two runs of every size
    ±15% apart, a slope between two sizes is that uncertain, and nothing is said (a close-pairs n² at ±22% run
    to run was told to take its prediction as a lower bound)."""
    sizes = [2**k for k in range(7, 14)]
    ts = [1e-8 * n * n for n in sizes]
    ts[-1] *= 1.25
    ts[-3] *= 0.95

    def rising(spread: float) -> list[Any]:
        pts = [Point(n, (t * (1 - spread), t * (1 + spread))) for n, t in zip(sizes, ts)]
        r = analyse_scaling(pts, N=40_000)
        assert r.time_fit.best.name == "quadratic"
        return [w for w in r.warnings if w.kind == "estimate.slope-rising"]

    assert rising(0.0)
    assert not rising(0.15)


def test_the_contended_floor_reads_the_growth_a_fit_extrapolates_with_not_its_asymptote(monkeypatch: Any) -> None:
    """Beside a busy process on 2 cores, the low end reaches the largest size continued as n only where the
    model grows faster than the size up to the full one: a + b·n + c·n² whose n² is a sliver there grows
    about as n (its exponent, 2, names the asymptote), a cubic does not."""
    from perfmagic.estimation import fit, noise

    monkeypatch.setattr(noise, "cores", lambda: 2)
    pts = [Point(n, (1e-3 * n,) * 2, cpu_share=2.0) for n in (1, 2, 4, 8, 16, 24)]

    class Sel:
        def __init__(self, best: ModelFit) -> None:
            self.best = best

    sliver = ModelFit("n + n²", a=0.0, b=1e-3, k=None, rss=0, aicc=0, n_points=6, c=1e-10)
    assert sliver.exponent() == 2.0
    assert fit._contended_floor(pts, Sel(sliver), 2000, 0.05, 1.0, pts, 2) is None
    cubic = ModelFit("cubic", a=0.0, b=1e-6, k=None, rss=0, aicc=0, n_points=6)
    assert fit._contended_floor(pts, Sel(cubic), 2000, 0.05, 1.0, pts, 2) is not None


def test_local_slopes_and_invert() -> None:
    assert local_slopes([1, 2, 4], [1, 4, 16]) == pytest.approx([2, 2])
    sel = select([10, 20, 40, 80, 160], [1e-2 * x for x in (10, 20, 40, 80, 160)], 1000)
    n = invert(sel.best, 5.0, 1, 1e6)
    assert n == pytest.approx(500, rel=0.02)
    assert invert(sel.best, 1e-9, 1, 1e6) is None


# ---- planted workloads, predicted vs actual --------------------------------------------------------

def count_loop(k: int) -> int:
    """A constant cost per iteration (spin_loop's sum outgrows one-digit ints at large k and slows down)."""
    x = 0
    for _ in range(k):
        x += 1
    return x


NS = {"spin": count_loop, "time": time}


# This machine's CPU speed swings by a third within seconds (a shared host; the same spin loop takes
# 12 ms in one second and 20 ms in the next), and an estimate and its full run fall in different
# seconds. So the model and the extrapolation are checked tightly on planted costs made of sleep,
# which no CPU phase changes, and loosely (30%, three attempts) on CPU-bound loops; the accuracy of
# CPU-bound estimates on a quiet machine is measured in benchmarks/bench_estimate.py.

def test_linear_planted_sleep() -> None:
    # 0.1 µs per unit: 1.5 s at the full size, with sleep's own ~0.1 ms overhead as the constant
    r = _predict_and_check("time.sleep(n * 1e-7)", NS, 15_000_000, tol=0.15)
    assert r.time_fit is not None and 0.85 <= r.time_fit.best.slope_at(15_000_000) <= 1.2, r.text()
    assert r.largest_measured < 15_000_000


def test_quadratic_with_constant_overhead_planted_sleep() -> None:
    # 3 ms + 1.5 s·(n/3000)²: the small sizes sit in the overhead regime, the trap of a fit on 1-10%
    # subsets that the issue names (a power law fitted there under-predicted an n² workload by 80%)
    r = _predict_and_check("time.sleep(0.003 + 1.5 * (n / 3000) ** 2)", NS, 3000, tol=0.15)
    assert 1.7 <= r.time_fit.best.slope_at(3000) <= 2.3, r.text()


def test_linear_workload(spin_200us) -> None:
    # spin_200us iterations take ~200 µs: a full run of ~1.5 s
    N = int(spin_200us * 7500)
    r = _predict_and_check("spin(n)", NS, N, tol=0.3, attempts=3)
    # n^0.85·ln n grows about as n over the measured range: the bound is loose for a CPU-bound loop (the growth
    # at the full size, as for the quadratic below: a two-term form's asymptote may be a term that hardly counts)
    assert r.time_fit is not None and 0.8 <= r.time_fit.best.slope_at(N) <= 1.2, r.text()
    assert r.largest_measured < N


def test_n_log_n_workload() -> None:
    rng = random.Random(1)
    data = [rng.random() for _ in range(2_000_000)]
    ns = {"data": data}
    # the sizes measured (<= 245,760 floats, a few MB) fit the last-level cache; the full 2M-element sort
    # (~64 MB of float objects) does not, a regime change the cost model cannot see from below: fresh-clone
    # runs on this VM put the full run 32-48% above the point, inside the printed interval every time. The
    # point's accuracy is bench_estimate.py's target (issue 29); here the interval must cover, at most 3x wide
    # (a 1 s budget: at 1.5 s a fast machine's interval for this ~0.5 s job can end under a third of the budget,
    # and the full size is then measured rather than predicted: there would be no fit to check)
    r = _predict_and_check("sorted(data[:n])", ns, len(data), tol=0.3, attempts=3, interval_ok=True, budget=1.0)
    assert not r.measured_full and r.time_fit is not None, r.text()
    assert r.time_fit.best.slope_at(len(data)) >= 0.9, r.text()


def test_quadratic_with_constant_overhead(spin_200us) -> None:
    # time ≈ 3 ms + c·n²; at the full size the quadratic part is ~1.5 s
    k = spin_200us * 7500 / 3000**2
    ns = {**NS, "k": k}
    r = _predict_and_check("time.sleep(0.003)\nspin(int(k * n * n))", ns, 3000, tol=0.3, attempts=3)
    # the growth the fit extrapolates with at the full size: a fresh-clone run picked a + b·n² + c·n³ whose
    # cubic share at n=3000 was 10% (slope 2.1 there, asymptote 3) and predicted the full run within 3.5%
    assert 1.7 <= r.time_fit.best.slope_at(3000) <= 2.3, r.text()


def test_memory_growing_workload() -> None:
    # 8 bytes per element: 400 MB at the full size, peak predicted within 20%
    N = 50_000_000
    code = "x = [0] * n\ndel x"
    r = estimate(code, n=N, globals={}, budget=1.5, max_fraction=0.3, run=True, force=True)
    assert r.peak_bytes is not None and r.actual.peak_bytes is not None, r.text()
    assert abs(r.memory_error()) <= 0.20, r.text()
    assert r.actual.peak_bytes > 300e6


def test_per_iteration_against_a_planted_total() -> None:
    r = estimate("time.sleep(0.005)", total=300, globals=NS, budget=0.5, run=True)
    assert r.mode == "iteration"
    assert r.predicted_s == pytest.approx(300 * 0.005, rel=0.15)  # planted: 1.5 s (sleep overshoots a little)
    assert abs(r.time_error()) <= 0.15, r.text()
    mean = sum(r.unit_times) / len(r.unit_times)
    assert r.metrics()["units_per_s"] == pytest.approx(1 / mean, rel=0.05)


def test_per_iteration_memory_growth() -> None:
    acc: list = []
    r = estimate("acc.append(bytearray(200_000))", total=1000, globals={"acc": acc}, budget=0.5)
    assert r.mem_growth_per_unit == pytest.approx(200_000, rel=0.25), r.text()
    assert r.peak_bytes == pytest.approx(200_000 * 1000, rel=0.3)
    acc.clear()


# ---- the gate -------------------------------------------------------------------------------------

def test_gate_will_not_fit_and_largest_size(spin_200us) -> None:
    N = int(spin_200us * 50_000)  # ~10 s: never run here
    for _ in range(5):  # beside busy processes the runs can differ too much to print a number: try again
        r = estimate("spin(n)", n=N, globals=NS, budget=0.8, limit=1.0, run=True)
        if r.verdict != "unknown":
            break
        # too uncertain is said, with its reason (the measured spread, the two largest sizes off the fit;
        # fc30: +24% and +16%), never a wrong verdict
        assert "no estimate: " in r.text() or "unreliable" in r.text(), r.text()
    assert r.verdict == "will not fit", r.text()
    assert r.actual is None and "not started" in r.text()
    # the largest size that fits 1 s is about a tenth of N
    assert 0.025 * N <= r.largest_fit <= 0.4 * N  # planted: about a tenth (wide: a loaded machine shifts it)
    r2 = gate(r, limit=1e6)
    # an unreliable prediction whose low end alone passes 1 s still "will not fit"; with a huge limit it
    # can only say "unknown", never "will fit" (a loaded machine widens the interval that far)
    assert r2.verdict == ("will fit" if r.reliable else "unknown"), r.text()
    r3 = gate(r, limit=1e6, available=1000)  # 1000 bytes free: memory says no... unless it needs none
    # ...and then the time decides: a reliable prediction gives a verdict, an unreliable one "unknown"
    # (a fresh-clone run whose VM swung speed got the fit's interval 1.25 s - 22.6 s: unreliable)
    allowed = ("will fit", "will not fit", "borderline") if r.reliable else ("will not fit", "unknown")
    assert r3.verdict in allowed, r.text()


def test_memory_gate_uses_available_memory() -> None:
    pts = [Point(n, (1e-3 * n / 1000,), (8 * n,)) for n in (10**5, 2 * 10**5, 4 * 10**5, 8 * 10**5, 16 * 10**5)]
    r = analyse_scaling(pts, N=10**9)
    r = gate(r, limit=None, available=10**9)  # 8 GB needed, 1 GB free
    assert r.verdict == "will not fit" and "memory" in r.verdict_reasons[0]
    assert r.largest_fit == pytest.approx(0.9e9 / 8, rel=0.1)


def test_the_gate_names_the_limit() -> None:
    pts = [Point(n, (1e-3 * n / 1000,), (8 * n,)) for n in (10**5, 2 * 10**5, 4 * 10**5, 8 * 10**5, 16 * 10**5)]
    r = gate(analyse_scaling(pts, N=10**7), limit=600, available=10**12)
    assert r.limit_s == 600 and r.metrics()["limit_s"] == 600 and "budget_s" not in r.metrics()
    assert r.verdict == "will fit" and "gate: will fit (limit 10 min," in r.text(), r.text()
    none = gate(analyse_scaling(pts, N=10**7), limit=None, available=None)
    assert none.verdict == "no limit given" and "→" not in none.headline()


def test_a_full_run_mapping_far_more_memory_on_a_reclaiming_host_is_warned_about(tmp_path: Any) -> None:
    from perfmagic.core.memory import host_reclaims_freed_memory

    # planted: 8 B per element, sizes up to 1.6 M (12.8 MB); the full run at 10^8 maps 800 MB
    pts = [Point(n, (1e-3 * n / 1000,), (8 * n,)) for n in (10**5, 2 * 10**5, 4 * 10**5, 8 * 10**5, 16 * 10**5)]
    warned = analyse_scaling(pts, N=10**8, host_reclaims=True)
    w = [x for x in warned.warnings if getattr(x, "kind", "") == "estimate.fresh-memory"]
    assert len(w) == 1 and w[0]["more"] == pytest.approx(8e8 - 12.8e6, rel=0.05), warned.warnings
    assert "take the prediction as a lower bound" in " ".join(warned.text().split())
    assert (warned.low_s, warned.high_s) == (analyse_scaling(pts, N=10**8).low_s, analyse_scaling(pts, N=10**8).high_s)
    # not on a host that keeps freed memory, nor for a full run within 256 MiB of the sizes measured
    assert not [x for x in analyse_scaling(pts, N=10**8).warnings if "fresh" in getattr(x, "kind", "")]
    assert not [x for x in analyse_scaling(pts, N=2 * 10**7, host_reclaims=True).warnings
                if "fresh" in getattr(x, "kind", "")]
    # the balloon's feature bits as Linux shows them: bit 5 is free page reporting
    for name, bits, want in (("on", "0110010100000000", True), ("off", "0110000100000000", False)):
        d = tmp_path / name / "virtio0"
        d.mkdir(parents=True)
        (d / "features").write_text(bits + "\n")
        assert host_reclaims_freed_memory(str(tmp_path / name)) is want
    assert host_reclaims_freed_memory(str(tmp_path / "absent")) is False


# ---- faults ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, needle", [
    ({}, "exactly one of"),
    ({"n": 10, "total": 5}, "exactly one of"),
    ({"n": 0}, ">= 1"),
    ({"total": float("nan")}, ">= 1"),
    ({"total": 0}, "whole number >= 1"),
    ({"total": 2.5}, "whole number of units"),
    ({"n": 1000.5}, "whole number of items"),
    ({"n": 100, "sizes": [10, 20, 400]}, "no larger than the full size"),
    ({"n": 100, "budget": -1}, "positive"),
    ({"n": 100, "limit": 0}, "positive"),
    ({"n": 100, "max_fraction": 2}, "fraction"),
    ({"n": 100, "var": "not a name"}, "identifier"),
])
def test_bad_input(kwargs, needle) -> None:
    with pytest.raises(BadOptionError, match=needle):
        estimate("n", **kwargs)


def test_flat_time_says_the_variable_is_unused() -> None:
    r = estimate("time.sleep(0.001)", n=10**9, globals=NS, budget=0.5)
    assert any("does the cell use n" in w for w in r.warnings), r.text()
    assert any("does not mention 'n'" in x for x in r.notes)


def test_another_run_of_a_measured_full_size_carries_two_runs_variation_and_the_speed_states() -> None:
    """The full size measured: another run differs by the difference of two runs (√2 × the repeats' run-to-run
    variation), and on a machine with two speed states (18 and 27 µs readings) it may run all slow."""
    from perfmagic.estimation.noise import Z90

    def pts(ref: float | None) -> list[Point]:
        return [Point(n, (1e-4 * n, 1e-4 * n * 1.06), cpu_share=1.0, ref_s=ref) for n in (64, 128, 256, 512, 1000)]
    one = analyse_scaling(pts(18e-6), N=1000, speed_readings=[18e-6 * (1 + 0.01 * (i % 3 - 1)) for i in range(12)])
    assert one.measured_full and one.predicted_s == pytest.approx(0.1030, rel=0.01), one.text()
    half = math.log(one.high_s / one.predicted_s)
    assert half >= 0.99 * Z90 * math.sqrt(2) * one.run_noise, (half, one.run_noise)  # not Z90 × the noise alone
    two = analyse_scaling(pts(18e-6), N=1000, speed_readings=[18e-6, 27e-6] * 6)
    assert two.measured_full and two.high_s >= 0.99 * two.predicted_s * 27 / 18, two.text()
    assert "runs at two speeds" in " ".join(two.text().split())


def test_a_time_that_rises_only_at_the_top_sizes_is_not_called_flat() -> None:
    # 100 ms of overhead + 1 ns per unit, the sizes a default estimate measured: flat to the eye up to 10^7
    # units, then 125, 150 and 200 ms at the top (it said "the time does not change with n (100.3 ms – 200.3 ms)")
    ns = [1525 * 2**i for i in range(16)] + [10**8]
    grows = analyse_scaling([Point(n, (0.1 + 1e-9 * n,) * 2) for n in ns], N=10**8)
    assert not any(getattr(w, "kind", "") == "estimate.flat" for w in grows.warnings), grows.text()
    # the same sizes with no growth at all: the warning stands
    flat = analyse_scaling([Point(n, (0.1,) * 2) for n in ns], N=10**8)
    assert any(getattr(w, "kind", "") == "estimate.flat" for w in flat.warnings), flat.text()


def test_failure_at_a_larger_size_is_reported_and_the_rest_fitted() -> None:
    code = "if n > 20000:\n    raise MemoryError('planted')\nspin(n)"
    r = estimate(code, n=10**6, globals=NS, budget=1.0)
    assert r.failures and r.failures[0][0] > 20000 and "planted" in r.failures[0][1]
    assert r.verdict == "will not fit" or r.verdict == "unknown"
    assert "failed at n=" in r.text()
    # it ran at the sizes measured below the failure, and nothing is claimed between them and it
    ran = max(p.n for p in r.points if p.n < r.failures[0][0])
    if r.largest_fit is not None:
        assert r.largest_fit <= ran <= 20000, r.text()
        assert f"largest n that ran (it failed at {r.failures[0][0]:,}" in r.text()


def test_failure_at_the_first_size_is_the_users_error() -> None:
    with pytest.raises(ZeroDivisionError):
        estimate("1/0", n=1000, globals={})


def test_unreliable_fit_prints_no_number() -> None:
    rng = random.Random(0)
    pts = [Point(n, (rng.uniform(1e-4, 1e-2),)) for n in (1, 2, 4, 8, 16, 32)]
    r = analyse_scaling(pts, N=10**12)
    assert not r.reliable
    assert "unreliable" in r.headline()
    assert gate(r, limit=60).verdict == "unknown"


def _jumped(n: int) -> float:
    """Linear, but 8× dearer per element from 50k on (the cyclic GC starting full collections)."""
    return 1e-7 * n if n < 50_000 else 8e-7 * n


def test_a_jump_below_the_top_sizes_gives_no_number() -> None:
    sizes = (3_000, 6_000, 12_000, 24_000, 48_000, 96_000, 192_000, 384_000)
    r = analyse_scaling([Point(n, (_jumped(n),)) for n in sizes], N=12_000_000)
    assert not r.reliable
    assert "no estimate: the cost changed its growth" in r.headline(), r.headline()
    assert "jumped 16.0× between n=48,000 and 96,000" in r.unreliable_why
    assert gate(r, limit=60).verdict == "unknown"
    # the same sizes without the jump: a plain linear prediction
    ok = analyse_scaling([Point(n, (1e-7 * n,)) for n in sizes], N=12_000_000)
    assert ok.reliable and not ok.unreliable_why and ok.predicted_s == pytest.approx(1.2, rel=0.05)


def test_a_jump_inside_the_top_sizes_gives_no_number() -> None:
    # measured on this VM (list of lists, 8 ints a row): the time grew 10× from 39k to 78k rows, then 1.75×
    # for 2× the rows; across the top three sizes the slope reads as n², the last step as n^0.8
    pts = [Point(n, (t,)) for n, t in ((2448, 0.0005), (4896, 0.0011), (9792, 0.0019), (19584, 0.0053),
                                       (39168, 0.0117), (78336, 0.1169), (156672, 0.2045))]
    r = analyse_scaling(pts, N=10_059_169)
    assert not r.reliable and "jumped 10.0× between n=39,168 and 78,336" in r.unreliable_why, r.text()


def test_overhead_regime_is_not_taken_for_a_jump() -> None:
    # n² behind 50 ms: the top sizes are still leaving the overhead regime, and the model says so too
    pts = [Point(n, (0.05 + 5e-8 * n * n,)) for n in (256, 512, 1024, 2048, 2896)]
    r = analyse_scaling(pts, N=17_000)
    assert r.reliable and not r.unreliable_why, r.text()
    assert r.predicted_s == pytest.approx(0.05 + 5e-8 * 17_000**2, rel=0.05)


def test_memory_read_low_at_small_sizes_is_not_extrapolated_as_quadratic() -> None:
    # RSS sees only part of a small run's heap (pages it already had): the peak per element rises towards
    # 160 bytes; the largest sizes grow about linearly and the prediction must follow them, not n²
    sizes = (6_000, 47_000, 94_000, 187_000, 375_000)
    per = {6_000: 15, 47_000: 80, 94_000: 120, 187_000: 145, 375_000: 160}
    pts = [Point(n, (1e-6 * n,), (per[n] * n,)) for n in sizes]
    r = analyse_scaling(pts, N=12_000_000)
    assert r.peak_bytes == pytest.approx(160 * 12_000_000, rel=0.25), r.text()
    assert r.mem_fit is not None and r.mem_fit.best.name == "linear"

def test_ctrl_c_while_measuring_fits_the_points_done() -> None:
    calls = {"k": 0}

    def work(n):
        calls["k"] += 1
        if calls["k"] == 14:
            raise KeyboardInterrupt
        spin_loop(n)

    with pytest.raises(BenchInterrupted) as ei:
        estimate(work, n=10**7, budget=2.0)
    r = ei.value.result
    assert r is not None and r.status == "interrupted" and len(r.points) >= 3
    assert r.predicted_s is not None
    assert "interrupted" in r.text()


def test_ctrl_c_during_the_full_run_records_how_far_it_got() -> None:
    state = {"units": 0, "running": False}

    def unit():
        state["units"] += 1
        time.sleep(0.002)
        if state["units"] == 150:
            raise KeyboardInterrupt

    r = estimate(unit, total=500, budget=0.2, run=True)
    a = r.actual
    assert a is not None and a.status == "interrupted"
    assert 0 < a.completed < 1
    assert r.time_error() is not None and abs(r.time_error()) < 0.5
    assert "interrupted" in r.text()


def test_result_keeps_raw_samples_and_metrics() -> None:
    r = estimate("spin(n)", n=200_000, globals=NS, budget=0.5)
    s = r.samples_dict()
    assert len(s["size"]) == len(r.points) and len(s["all_times_s"]) >= len(r.points)
    m = r.metrics()
    assert m["predicted_s"] == r.predicted_s and m["mode"] == "scaling"
    assert isinstance(r.figure_png(), bytes)
    r2 = r.with_actual(Actual(1.0, None, 1.0, "ok"))
    assert r2.metrics()["actual_s"] == 1.0 and r.actual is None


@pytest.mark.gpu
def test_cuda_scaling_uses_max_memory_allocated_and_predicts_the_full_run() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    ns = {"torch": torch, "x": torch.zeros(1, device="cuda")}  # CUDA in use, as after a notebook's setup cell
    code = "a = torch.ones(n, 1024, device='cuda')\nb = a * 2\nc = (b @ b.T).sum()\ndel a, b, c"
    r = estimate(code, n=8192, globals=ns, run=True, force=True, budget=3)
    assert r.device.startswith("cuda") and r.memory_source == "cuda"
    # a and b are n·1024 float32 each, b @ b.T is n² float32: the peak is at least n² + 2·n·1024 floats
    planted = 4 * (8192 * 8192 + 2 * 8192 * 1024)
    assert r.actual is not None and r.actual.peak_bytes is not None
    assert 0.9 * planted <= r.actual.peak_bytes <= 1.6 * planted, (r.actual.peak_bytes, planted)
    assert r.peak_bytes is not None and abs(r.peak_bytes / r.actual.peak_bytes - 1) <= 0.2
    assert r.predicted_s is not None and r.actual.seconds > 0


# ---- the size plan and the free exponent, on a virtual clock (no machine noise) ------------------

class _VirtualRunner:
    """Planted cost ``f(n)`` with 3% noise; each run advances a virtual clock instead of taking time."""

    device, device_why = "cpu", ""  # as a real runner reads from its first run's work

    def __init__(self, f, clock, seed=0):
        self.f, self.clock, self.rng = f, clock, random.Random(seed)

    def once(self, n, memory=True, trace=False, clean=True):
        t = max(self.f(n) * (1 + self.rng.gauss(0, 0.03)), 1e-7) * (3 if trace else 1)
        self.clock[0] += t + 2e-4
        return t, None, None, None


def _virtual_scaling(monkeypatch, f, N, seed=0):
    import types

    from perfmagic.estimation import measure as _measure

    clock = [0.0]
    monkeypatch.setattr(_measure, "time", types.SimpleNamespace(perf_counter=lambda: clock[0],
                                                                 process_time=lambda: clock[0]))
    monkeypatch.setattr(_measure, "reference_time", lambda duration: 20e-6)  # a machine of constant speed
    monkeypatch.setattr(_measure, "recent_readings", lambda: [])  # whose speed states are not known (the prior)
    monkeypatch.setattr(_measure, "_others", lambda probe: None)  # and no other process on it
    return _measure._scaling(_VirtualRunner(f, clock, seed), N, "n", "x", "cpu", 3.0, 0.10, None, False, None, [])


def test_a_step_whose_first_runs_were_preempted_is_not_leapt_over(monkeypatch) -> None:
    """40 ms steps whose two runs at n=1 were preempted (80 ms, as long as n=2): the time looks flat, an
    overhead regime the plan leaps out of ×8 (it went 1, 2, 16, 32 beside a busy process, and the fit was
    refused). A run that already takes a share of the budget is not an overhead: the sizes double."""
    calls = {"n1": 0}

    def step(n):
        if n == 1 and calls["n1"] < 2:
            calls["n1"] += 1
            return 0.08
        return 0.04 * n
    r = _virtual_scaling(monkeypatch, step, 2000)
    sizes = sorted(p.n for p in r.points)
    assert sizes[:4] == [1, 2, 4, 8], sizes
    assert r.reliable and abs(r.predicted_s / 80 - 1) < 0.15, r.text()


@pytest.mark.parametrize("name, f, N, form", [
    ("n² behind 50 ms", lambda n: 0.05 + 15 * (n / 20766) ** 2, 20766, "quadratic"),
    ("n³", lambda n: 2e-4 + 11.5 * (n / 19829) ** 3, 19829, "cubic"),
    ("linear", lambda n: 1e-5 + 15 * n / 441e6, 441_000_000, "linear"),
    ("n log n", lambda n: 1e-5 + 15 * n * math.log(n) / (125e6 * math.log(125e6)), 125_000_000, "n log n"),
])
def test_size_plan_on_planted_curves(monkeypatch, name, f, N, form) -> None:
    for seed in range(3):
        r = _virtual_scaling(monkeypatch, f, N, seed)
        assert r.reliable and abs(r.predicted_s / f(N) - 1) <= 0.10, (name, seed, r.text())
        assert r.time_fit.best.name == form, (name, seed, r.text())
        # the 10% cap, more where the prediction stayed uncertain (at most 35%) and the spaced repeats (×1.6)
        assert r.spent_s <= 0.35 * f(N) + 0.3, (name, seed, r.spent_s)


def test_a_step_smaller_than_doubling_fills_the_top(monkeypatch) -> None:
    # n² behind 50 ms, full runs of 20-40 s: the budget allows 1.2-1.41× but not 2× the last size, and
    # the plan must still take that point (two points past the overhead regime do not settle the form)
    steps = []
    for A in (20, 40):
        r = _virtual_scaling(monkeypatch, lambda n, A=A: 0.05 + A * (n / 20766) ** 2, 20766)
        ns = [p.n for p in r.points]
        steps.append(ns)
        assert abs(r.predicted_s / (0.05 + A) - 1) <= 0.05, r.text()
    assert any(1.1 < b / a < 1.5 for ns in steps for a, b in zip(ns, ns[1:])), steps


def test_free_exponent_must_earn_its_place() -> None:
    # n² behind a constant, 3% noise, 7 sizes, extrapolated 16×: over 200 noise draws a free exponent
    # allowed in on any AICc gain is picked 14 times and puts the 90th-percentile error at 17%; made
    # to earn FREE_K_EVIDENCE units it is picked 6 times and the 90th percentile is 10%
    errs, free = [], 0
    truth = 0.05 + 1e-7 * 2**28
    for seed in range(200):
        rng = random.Random(seed)
        ns = [2**i for i in range(4, 11)]
        sel = select(ns, [(0.05 + 1e-7 * n * n) * (1 + rng.gauss(0, 0.03)) for n in ns], 2**14, boot=0)
        free += sel.best.name in ("n^k", "n^k log n")
        errs.append(abs(sel.predicted / truth - 1))
    errs.sort()
    assert free <= 10 and errs[180] <= 0.12, (free, errs[180])
    # ... and a real non-integer exponent still wins
    rng = random.Random(5)
    ns = [2**i for i in range(8, 16)]
    ys = [(1e-4 + 1e-7 * n**1.5) * (1 + rng.gauss(0, 0.01)) for n in ns]
    sel = select(ns, ys, 2**18)
    assert sel.best.name in ("n^k", "n^k log n"), sel.best
    assert abs(sel.predicted / (1e-4 + 1e-7 * (2**18) ** 1.5) - 1) < 0.15


def _swung(cpu_share: float, swing: dict[int, float]) -> list[Point]:
    """n² behind 50 ms, measured while the machine's speed swung: every time and its reference scaled alike."""
    out = []
    for n in (256, 512, 1024, 2048, 2896):
        slow = swing.get(n, 1.0)
        out.append(Point(n, ((0.05 + 5e-8 * n * n) * slow,), ref_s=20e-6 * slow, cpu_share=cpu_share))
    return out


def test_speed_swings_are_reported_and_corrected_on_request() -> None:
    N, actual = 17_000, 0.05 + 5e-8 * 17_000**2
    swing = {1024: 1.45, 2048: 0.85}  # a slow phase, then a fast one: the curve reads as n^1.2 above the overhead
    # by default the times stay as measured, and the swing is a warning
    raw = analyse_scaling(_swung(1.0, swing), N=N)
    assert raw.speed_factors == ()
    assert abs(raw.predicted_s / actual - 1) > 0.15  # the planted swing really misleads an uncorrected fit
    assert any("speed changed while measuring" in w and "45% slower at n=1,024" in w for w in raw.warnings)
    fixed = analyse_scaling(_swung(1.0, swing), N=N, correct_speed=True)
    assert fixed.speed_factors and fixed.speed_factors[2] == pytest.approx(1 / 1.45, rel=0.01)
    assert abs(fixed.predicted_s / actual - 1) < 0.05, fixed.text()
    assert "corrected for the machine's own speed" in fixed.text() and "45% slower at n=1,024" in fixed.text()
    # a sleeping (not CPU-bound) cell does not slow down with the CPU: no correction, no warning
    sleeping = analyse_scaling(_swung(0.05, swing), N=N, correct_speed=True)
    assert sleeping.speed_factors == () and not any("speed changed" in w for w in sleeping.warnings)
    # swings within ±5%: the correction would only add the reference's own noise; no warning either
    small = analyse_scaling(_swung(1.0, {1024: 1.03}), N=N, correct_speed=True)
    assert small.speed_factors == ()
    assert not any("speed changed" in w for w in analyse_scaling(_swung(1.0, {1024: 1.10}), N=N).warnings)


def test_only_the_cpu_part_of_a_run_is_corrected() -> None:
    # a cell that is half waiting (sleep, I/O): only its CPU half slows down with the machine
    swing = {1024: 1.45, 2048: 0.85}
    half = analyse_scaling(_swung(0.5, swing), N=17_000, correct_speed=True)
    typ = sorted(20e-6 * swing.get(n, 1.0) for n in (256, 512, 1024, 2048, 2896))[2]
    assert half.speed_factors[2] == pytest.approx(1 + 0.5 * (typ / (20e-6 * 1.45) - 1))
    assert "45% slower at n=1,024 and 15% faster at n=2,048" in half.text()


# ---- intervals that mean what they say (issue 18) --------------------------------------------------

def _sort_points(later: dict[int, float]) -> list[Point]:
    """n log n points (no noise of their own), some sizes re-timed later at a planted factor."""
    return [Point(n, (2e-8 * n * math.log(n),), later=((2e-8 * n * math.log(n) * later[n]),) if n in later else ())
            for n in (2**14, 2**15, 2**16, 2**17, 2**18)]


def test_the_interval_carries_the_run_to_run_variation_measured() -> None:
    N = 2**21
    truth = 2e-8 * N * math.log(N)
    quiet = analyse_scaling(_sort_points({}), N=N)
    # no repeat that says otherwise: the floor (the quietest repeat of this machine), ±6.6% at 90%
    assert quiet.run_noise == pytest.approx(0.04)
    assert quiet.low_s <= truth / 1.06 and quiet.high_s >= truth * 1.06, quiet.text()
    # the two largest sizes re-timed later ran 25% slower and 20% faster: that variation is in the interval
    noisy = analyse_scaling(_sort_points({2**17: 1.25, 2**18: 0.8}), N=N)
    assert noisy.run_noise > 0.2, noisy.run_noise
    assert noisy.high_s / noisy.predicted_s >= math.exp(1.645 * noisy.run_noise) * 0.99, noisy.text()
    assert noisy.predicted_s / noisy.low_s >= math.exp(1.645 * noisy.run_noise) * 0.99
    assert noisy.reliable and "run-to-run variation ±" in noisy.text() and "re-timed later" in noisy.text()


def test_the_sizes_at_the_top_are_re_timed_later(monkeypatch) -> None:
    r = _virtual_scaling(monkeypatch, lambda n: 1e-5 + 15 * n * math.log(n) / (125e6 * math.log(125e6)), 125_000_000)
    re = [p for p in r.points if p.later]
    top2 = sorted(p.n for p in r.points)[-2:]
    assert re and {p.n for p in re} <= set(top2), [(p.n, p.later) for p in r.points]
    assert r.run_noise is not None and r.run_noise >= 0.04


def test_an_uncertain_prediction_keeps_measuring(monkeypatch) -> None:
    # a sort whose largest early size ran in a slow phase (2.5× its cost): the sweep's guess of the next
    # size is far too high and it stops early; the wide interval that follows must buy larger sizes
    f = lambda n: 1e-4 + 2e-8 * n * math.log(n)  # noqa: E731
    N = 20_000_000
    state = {"hit": False}

    def slowed(n):
        if not state["hit"] and n >= 150_000:
            state["hit"] = True
            return f(n) * 2.5
        return f(n)
    r = _virtual_scaling(monkeypatch, slowed, N)
    assert max(p.n for p in r.points) >= 1_000_000, [(p.n, p.times, p.later) for p in r.points]
    assert r.reliable and r.low_s <= f(N) <= r.high_s, r.text()


def test_an_interval_whose_refits_fall_below_zero_has_no_negative_low_end() -> None:
    """Refits of a noisy curve that cross zero at the full size (a memory-bound add printed 'anywhere from
    -1.776 ms to 4.06 s'): the low end is 0, never negative, and the refusal says 'below' the high end."""
    from perfmagic.estimation.costmodel import select

    ns = [1, 2, 4, 8, 16, 32]
    ys = [0.021692315372628612, 0.017744226028880948, 0.09532266333204209, 0.11328866380609506,
          0.1813792922850143, 0.26337814690189193]
    sel = select(ns, ys, 1000.0, noise=0.5)
    assert sel.low == 0.0 and sel.high > sel.predicted > 0
    r = analyse_scaling([Point(n, (y, y)) for n, y in zip(ns, ys)], N=1000)
    assert r.low_s is None or r.low_s >= 0
    from perfmagic.findings import Finding
    said = str(Finding.of("estimate.unreliable", low_s=0.0, high_s=4.06))
    assert "anywhere below 4.06 s" in said and "-" not in said, said


def test_top_sizes_off_the_model_print_unreliable_with_the_reason() -> None:
    # n log n below, but the two largest sizes 50% above it (data leaving a cache): no number, the reason,
    # and how far to measure to tell
    ns = [1000 * 2**i for i in range(9)]
    pts = [Point(n, ((1e-3 + 1e-7 * n * math.log(n)) * (1.5 if i >= 7 else 1.0),)) for i, n in enumerate(ns)]
    r = analyse_scaling(pts, N=8 * ns[-1])
    assert not r.reliable, r.text()
    h = r.headline()
    assert "no estimate" in h and ("the two largest sizes disagree" in h or "changed its growth" in h), h
    assert "measure up to n=" in h and "to tell" in h, h
    assert gate(r, limit=60).verdict == "unknown"


def test_load_by_others_is_named_first_and_the_low_end_allows_for_it(monkeypatch) -> None:
    import os

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)  # a 2-core machine
    pts = [replace(p, cpu_share=1.0) for p in _sort_points({})]
    quiet = analyse_scaling(pts, N=2**21, others_cores=0.0)
    beside = analyse_scaling(pts, N=2**21, others_cores=1.0)  # one busy neighbour: a core each
    crowded = analyse_scaling(pts, N=2**21, others_cores=1.5)  # more than the free core: time-sharing
    assert not any("other processes" in w for w in quiet.warnings)
    assert beside.warnings and str(beside.warnings[0]).startswith("other processes kept 1.0 of"), beside.warnings
    assert quiet.low_s * 0.9 < beside.low_s <= quiet.low_s
    # 1.5 others + 1 own on 2 cores: a fifth of the CPU time could go
    assert crowded.low_s == pytest.approx(0.8 * crowded.predicted_s) and crowded.high_s == pytest.approx(quiet.high_s)


def _blocks(paces: list[float]) -> list[Point]:
    return [Point(1, (t,)) for t in paces]


def test_a_slow_phase_across_units_is_named_and_the_later_pace_assumed() -> None:
    from perfmagic.estimation.fit import analyse_iteration

    rng = random.Random(2)
    per = [0.012 * (1 + rng.gauss(0, 0.03)) for _ in range(40)] + [0.025 * (1 + rng.gauss(0, 0.03)) for _ in range(20)]
    r = analyse_iteration(_blocks(per), T=938)
    w = " ".join(map(str, r.warnings))  # Findings: str() of one is its sentence
    assert "units 1–40 took 11." in w and "units 41–60 24." in w and "slow phase" in w, r.warnings
    assert r.predicted_s == pytest.approx(938 * 0.025, rel=0.03)
    assert r.low_s <= 938 * sum(per) / len(per) * 1.01 and r.high_s >= 938 * 0.025 * 1.05, r.text()
    # a steady job: no phase, and the interval still carries at least the floor
    steady = analyse_iteration(_blocks([0.012 * (1 + rng.gauss(0, 0.03)) for _ in range(60)]), T=938)
    assert not steady.warnings and steady.run_noise >= 0.04
    assert steady.high_s / steady.predicted_s >= math.exp(1.645 * 0.04) * 0.99


def test_per_iteration_keeps_measuring_past_a_slow_phase_and_covers_the_job() -> None:
    STEP = 18
    # planted with sleep (a busy neighbour cannot move it): units 3 ms until unit 18, 6 ms after; the
    # measuring (10% of ~1 s) would stop near unit 25-30, a few units after the step, and keeps going to
    # confirm it. (With the step at unit 25, a VM whose 3 ms sleeps took 3.5 ms stopped at unit 25 exactly,
    # before the step: a phase that starts where the measuring ends is invisible to any estimator, fc39.)
    # The cell times its own sleeps: this VM's sleep overshoot drifts (a 6 ms sleep took 7.4 ms while
    # measuring and 6.5 ms during the full run, once), which no estimator can foresee. So the estimate is
    # held to what the measuring phase itself showed, and to the full run by as much as the sleeps agreed.
    import itertools

    from perfmagic.estimation.runner import _Runner, run_full

    took: list[tuple[int, float]] = []

    def unit_sleep(i: int) -> None:
        t = time.perf_counter()
        time.sleep(0.003 if i < STEP else 0.006)
        took.append((i, time.perf_counter() - t))

    code = "unit_sleep(next(unit))"
    ns = {"unit_sleep": unit_sleep, "unit": itertools.count()}
    r = estimate(code, total=300, globals=ns)
    measured = [d for i, d in took if i >= STEP]
    r = run_full(r, _Runner(code, None, ns, "cpu", "<run>"))
    ran = [d for i, d in took[len(took) - 300:]]
    assert any("slow phase" in w for w in r.warnings), r.text()
    assert sum(p.n for p in r.points) >= 20, r.text()
    assert len(measured) >= 3 and r.predicted_s is not None, r.text()
    # what the measuring showed: 300 units at the post-step pace it timed (the call around a unit adds
    # microseconds); the estimator must predict that, whatever the machine does next
    shown = 300 * sorted(measured)[len(measured) // 2]
    assert abs(r.predicted_s / shown - 1) <= 0.15, (shown, r.text())
    drift = abs(sum(ran) / len(ran) / (sum(measured) / len(measured)) - 1)
    if drift <= 0.05:       # the sleeps held still: the estimate must hold for the job itself
        assert r.low_s <= r.actual.seconds <= r.high_s, r.text()
        assert abs(r.time_error()) <= 0.15, r.text()
    else:                   # the sleeps themselves changed pace by more than 5% between measuring and running
        assert abs(r.time_error()) <= 0.15 + drift, (drift, r.text())


def test_re_timed_points_are_drawn_and_listed() -> None:
    # a re-time outside the first runs' range moves the median beyond them: the figure's error bars and
    # the folded table must take the later runs in too (a negative error bar raised in matplotlib)
    pts = [Point(n, (2e-8 * n * math.log(n),), later=(2e-8 * n * math.log(n) * 1.3,)) for n in (2**14, 2**15, 2**16, 2**17)]
    r = analyse_scaling(pts, N=2**20)
    assert r.figure_png()
    html = " ".join(body for _, body in r.html_sections())
    assert "later" in html


def _cache_exit(n: float) -> float:
    """A planted numpy-add-like cost: 0.13 ns/element in cache, rising to 0.40 ns/element in DRAM
    between ~1 M and ~12 M elements (a 32 MiB cache left), flat beyond; × 24 passes, + 0.3 ms."""
    import math as m

    x = min(max((m.log(n) - m.log(1e6)) / (m.log(12e6) - m.log(1e6)), 0.0), 1.0)
    per = 0.13e-9 + (0.40e-9 - 0.13e-9) * (3 * x * x - 2 * x ** 3)
    return 3e-4 + 24 * per * n


def test_a_top_still_leaving_a_cache_reaches_the_settled_power() -> None:
    from perfmagic.estimation.noise import settled_power

    sizes = [195_200 * 2 ** k for k in range(7)]                  # 0.2 M … 12.5 M: the top inside the change
    r = analyse_scaling([Point(n, (_cache_exit(n),)) for n in sizes], N=100_000_000)
    truth = _cache_exit(100_000_000)
    assert r.predicted_s is not None and r.low_s <= truth <= r.high_s, (truth, r.text())
    # the fit itself continues the change (1.5× and more): the prediction is the continuation at n^1, and the
    # high end still the fit's
    assert r.reliable and abs(r.predicted_s / truth - 1) < 0.1 and r.high_s > 1.5 * truth, r.text()
    assert any("between whole powers" in x and "n^1 again; the prediction is that continuation" in x
               and "high end reaches the fit across the change" in x for x in r.notes), r.notes
    # whole powers and n log n are left alone
    ns = [float(n) for n in sizes]
    assert settled_power(ns, [1e-8 * n for n in ns], 0.0, 1e8) is None
    assert settled_power(ns, [1e-9 * n * __import__("math").log(n) for n in ns], 0.0, 1e8) is None
    assert settled_power(ns, [1e-12 * n * n for n in ns], 0.0, 1e8) is None
    got = settled_power(ns, [_cache_exit(n) for n in ns], 3e-4, 1e8)
    assert got is not None and got[2] == 1 and 1.15 < got[1] < 1.85
    assert abs(got[0] - (3e-4 + (_cache_exit(ns[-1]) - 3e-4) * 1e8 / ns[-1])) < 1e-9


def _sort_of_objects(n: float) -> float:
    """A planted sort of Python objects: n·ln n whose cost per n·ln n keeps rising as the data outgrows the
    caches (by n^0.1: 12% per doubling at 250 k, as ``sorted(data[:n])`` of Python floats did on the 2-core VM
    at 100 k-1.6 M elements), + 50 µs."""
    import math as m

    return 5e-5 + 6e-9 * n * m.log(n) * (n / 1000) ** 0.1


def test_a_sort_whose_cost_per_item_keeps_rising_is_not_settled_at_n() -> None:
    from perfmagic.estimation.noise import settled_power

    sizes = [1920 * 2 ** k for k in range(8)]                       # 1.9 k … 246 k, as the benchmark measures
    ns = [float(n) for n in sizes]
    N = 2_000_000
    truth = _sort_of_objects(N)
    # the top grows as n^1.18, 0.1 above n log n's own local slope there (1 + 1/ln n = 1.08): not a change
    # in progress between whole powers, so no continuation at n^1 (which would say 30% less)
    assert settled_power(ns, [_sort_of_objects(n) for n in ns], 0.0, N) is None
    r = analyse_scaling([Point(n, (_sort_of_objects(n),)) for n in sizes], N=N)
    assert r.reliable and r.low_s <= truth <= r.high_s and abs(r.predicted_s / truth - 1) < 0.10, (truth, r.text())
    assert not any(getattr(x, "kind", "") == "estimate.settled" for x in r.notes), r.notes
    # the same top 0.2 steeper (n^1.38) is a change in progress again
    steeper = [_sort_of_objects(n) * (n / 1000) ** 0.2 for n in ns]
    got = settled_power(ns, steeper, 0.0, N)
    assert got is not None and got[2] == 1 and got[1] > 1.3


# ---- a refused estimate records no predicted time, and says why ---------------------------------------------
def test_a_refused_estimate_records_no_predicted_time_and_says_why() -> None:
    sizes = (3_000, 6_000, 12_000, 24_000, 48_000, 96_000, 192_000, 384_000)
    jumped = analyse_scaling([Point(n, (_jumped(n),)) for n in sizes], N=12_000_000)
    assert not jumped.reliable and jumped.predicted_s is not None  # the fit computed a number...
    m = jumped.metrics()
    assert m["predicted_s"] is None and m["low_s"] is None and m["high_s"] is None, m  # ...the ledger keeps none
    assert m["refused"] == str(jumped.unreliable_why) and "jumped 16.0×" in m["refused"]
    assert jumped.headline().startswith("estimate for n=12,000,000: no estimate: the cost changed its growth")
    # too wide to trust: no predicted time; the interval the text prints is kept, and the reason
    rng = random.Random(0)
    wide = analyse_scaling([Point(n, (rng.uniform(1e-4, 1e-2),)) for n in (1, 2, 4, 8, 16, 32)], N=10**12)
    mw = wide.metrics()
    assert not wide.reliable and mw["predicted_s"] is None and mw["refused"].startswith("the fit is unreliable")
    assert mw["low_s"] == wide.low_s and mw["high_s"] == wide.high_s and wide.low_s >= 0
    assert ("anywhere below" if wide.low_s == 0 else "anywhere from") in wide.headline(), wide.headline()
    # ... and where to measure to tell: four times the largest size, timed by the top points' slope
    assert "; measure up to n=128 (≈ " in mw["refused"] and "to tell, e.g. with a longer --budget" in wide.headline()
    assert wide.time_error() is None
    # nothing measured: the gate's reason
    # a trusted estimate keeps its number and refuses nothing
    ok = analyse_scaling([Point(n, (1e-7 * n,)) for n in sizes], N=12_000_000)
    mo = ok.metrics()
    assert mo["predicted_s"] == ok.predicted_s and mo["refused"] is None and mo["low_s"] == ok.low_s


def test_estimate_text_shows_two_warnings_and_folds_the_rest() -> None:
    from perfmagic.render.bundle import mimebundle

    sizes = (3_000, 6_000, 12_000, 24_000, 48_000, 96_000)
    r = replace(analyse_scaling([Point(n, (1e-7 * n,)) for n in sizes], N=12_000_000),
                failures=((192_000, "MemoryError: planted"),),
                warnings=("other processes kept 1.0 of 2 cores busy while measuring", "spread is high: planted",
                          "a planted note of little weight"))
    text = r.text()
    bangs = [ln for ln in text.splitlines() if ln.lstrip().startswith("! ")]
    assert len(bangs) == 2, text
    assert bangs[0].startswith("  ! failed at n=192,000: MemoryError") and "other processes kept" in bangs[1]
    fold = [ln for ln in text.splitlines() if ln.startswith("  (+2 more: ")]
    assert fold and len(fold[0]) <= 100 and "spread is high" in fold[0], text
    assert all(len(ln) <= 100 for ln in text.splitlines()[1:]), text
    page = mimebundle(r, plot=False)["text/html"]
    assert "<summary style='cursor:pointer'>2 more warnings</summary>" in page and "a planted note" in page
    quiet = replace(r, failures=(), warnings=("spread is high: planted",))
    assert "more: " not in quiet.text() and "more warning" not in mimebundle(quiet, plot=False)["text/html"]


def test_the_figure_draws_no_band_it_cannot_compute_and_warns_nothing() -> None:
    """A low end at or below zero (or not finite) drew a band with ``(low/predicted) ** frac`` and a
    ``RuntimeWarning: invalid value encountered in power`` reached the cell (issue 29)."""
    import warnings

    from perfmagic.render.estimate import figure_png

    sizes = (3_000, 6_000, 12_000, 24_000, 48_000, 96_000)
    r = analyse_scaling([Point(n, (1e-7 * n,)) for n in sizes], N=12_000_000)
    for low in (-1.0, 0.0, float("nan"), r.low_s):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            png = figure_png(replace(r, low_s=low))
        assert png is None or png.startswith(b"\x89PNG")


def test_a_noisy_refusal_shows_the_pair_of_runs_that_differ_most() -> None:
    """The refusal "runs of the same size differ by ±X%" quotes a robust sd over every pair of runs of one
    size; its example must be the pair that shows such a difference (a held-out trial quoted "±58%" beside
    a pair 2% apart: the re-time of the largest size, not the widest)."""
    sizes = [1000 * 2**k for k in range(8)]
    later = {sizes[-3]: 2.2, sizes[-2]: 1.6, sizes[-1]: 1.02}  # spaced re-times, × the first run's time
    pts = [Point(n, (n * 1e-6, n * 1e-6 * (1.3 if k % 2 else 0.8)),
                 later=(n * 1e-6 * later[n],) if n in later else ()) for k, n in enumerate(sizes)]
    r = analyse_scaling(pts, N=10**9)
    why = r.unreliable_why
    assert not r.reliable and why is not None and why.kind == "estimate.noisy", r.text()
    assert why["rep_n"] == sizes[-3], str(why)  # the ×2.2 re-time, not the largest size's ×1.02
    text = str(why)
    assert f"the widest: n={sizes[-3]:,} took" in text and "1 sd over" in text, text
    assert re.search(r"±\d+% here", text), text


def test_noisy_runs_get_more_pairs_within_the_budget() -> None:
    """A prediction refused because runs of one size differed gets spaced repeats of the top sizes until
    three pairs say how much (one pair is one draw), alternating sizes, never past the budget."""
    from perfmagic.estimation import measure
    from perfmagic.findings import Finding

    pts = [Point(n, (0.01 * n,)) for n in (1, 2, 4, 8)]
    clock = [0.0]
    timed: list[int] = []

    class Runner:
        def once(self, n, **kw):
            timed.append(n)
            clock[0] += 0.01 * n
            return 0.013 * n, None, None, None

    def analyse(points):
        pairs = sum(len(p.later) for p in points)
        why = Finding.of("estimate.noisy", sigma=0.4, pairs=pairs)
        return type("R", (), {"reliable": False, "unreliable_why": why})()

    measure._more_pairs(pts, 10.0, lambda: clock[0], Runner(), None, "n", analyse)
    assert len(timed) == measure.NOISE_PAIRS and timed[:2] == [8, 4]  # the largest first, then another size
    assert sum(len(p.later) for p in pts) == measure.NOISE_PAIRS
    # no room left in the budget: nothing is re-timed
    timed.clear()
    pts2 = [Point(n, (0.01 * n,)) for n in (1, 2, 4, 8)]
    measure._more_pairs(pts2, clock[0] + 0.05, lambda: clock[0], Runner(), None, "n", analyse)
    assert timed == [4]  # 1.2 × 40 ms fits the 50 ms left; after it, nothing does
    # a refusal for another reason (not noise) is left alone
    timed.clear()

    def analyse_jump(points):
        return type("R", (), {"reliable": False, "unreliable_why": Finding.of("estimate.growth-changed")})()
    measure._more_pairs([Point(n, (0.01 * n,)) for n in (1, 2, 4, 8)], 10.0, lambda: clock[0], Runner(), None,
                        "n", analyse_jump)
    assert timed == []


def test_a_size_beyond_memory_stops_the_measuring_and_the_gate_says_no(monkeypatch) -> None:
    """``n=`` far larger than memory allows: the measuring stops before a size that would take over half of
    the memory available (planted: 256 MiB), and the gate says *will not fit* from the memory the sizes
    measured used, even with no time to print."""
    np = pytest.importorskip("numpy")
    from perfmagic.estimation import gate as gate_mod

    avail = 256 * 2**20
    monkeypatch.setattr(gate_mod, "available_memory", lambda device: (avail, "available RAM"))
    r = estimate("a = np.ones(n)\na[::512] = 2.0", globals={"np": np}, n=10**11, budget=2.0)
    assert max(p.memory() or 0 for p in r.points) <= 0.5 * avail * 1.3, [p.memory() for p in r.points]
    assert any(getattr(x, "kind", "") == "estimate.memory-stop" for x in r.notes), [str(x) for x in r.notes]
    assert r.verdict == "will not fit", (r.verdict, [str(x) for x in r.verdict_reasons])
    # from the memory the sizes used where no time is printed (the extrapolation, 8,192×, refused as noisy
    # or as a change of growth), else from the predicted peak; a machine in a quiet state prints one
    kinds = {getattr(x, "kind", "") for x in r.verdict_reasons}
    if r.refused:
        assert "estimate.gate-memory-floor" in kinds and "needs at least" in r.text(), r.text()
    else:
        assert "estimate.gate-memory-over" in kinds, r.text()
    assert "WILL NOT FIT" in r.headline()


def test_a_sleep_bound_step_is_not_widened_by_the_machines_drift() -> None:
    """The drift of the machine's speed over a long run widens only the CPU part of the time: the same
    planted points (a 4 ms step, sizes 1 … 64, extrapolated ~30×) give a narrow interval when the process
    slept through them (CPU share 0.01) and one about 1.4× wider each way at 2 decades when it computed
    (CPU share 1). Planted points, not a live run: a loaded machine wakes a sleep late by varying amounts
    (fc31, fc32), which is run-to-run noise, not the drift this checks."""
    def pts(share: float) -> list[Point]:
        return [Point(n, (0.004 * n + 1e-4, 0.004 * n * 1.01 + 1e-4), cpu_share=share,
                      later=(0.004 * n * 0.995 + 1e-4,) if n >= 32 else ()) for n in (1, 2, 4, 8, 16, 32, 64)]
    asleep, busy = (analyse_scaling(pts(share), N=2000, var="n") for share in (0.01, 1.0))
    for r in (asleep, busy):
        assert r.reliable and abs(r.predicted_s / (0.004 * 2000) - 1) < 0.05, r.headline()
    assert asleep.high_s / asleep.low_s < 1.3, asleep.headline()
    assert busy.high_s / busy.low_s > 1.3 * asleep.high_s / asleep.low_s, (busy.headline(), asleep.headline())


def test_the_machines_speed_states_set_the_drift_of_a_long_run() -> None:
    """The drift of a long run is read from the drift guard's readings, not assumed: a 4 ms CPU step at sizes
    1 … 64, extrapolated ~30×. A machine whose readings agree within 1% gets a narrower interval than the
    prior (too few readings to tell); one whose readings show two speeds (18 and 27 µs per call) gets an
    interval from all fast to all slow, measured from the state the largest sizes ran in, with a note that
    shows the readings. One slow reading among many is a preemption, not a state; beside other processes'
    load the readings are theirs as much as the machine's, and the prior stands."""
    from perfmagic.estimation.noise import machine_speed

    def pts(ref: float | None) -> list[Point]:
        return [Point(n, (0.004 * n + 1e-4, 0.004 * n * 1.01 + 1e-4), cpu_share=1.0, ref_s=ref,
                      later=(0.004 * n * 0.995 + 1e-4,) if n >= 32 else ()) for n in (1, 2, 4, 8, 16, 32, 64)]
    fast, slow = 18e-6, 27e-6
    steady = [fast * (1 + 0.01 * (i % 3 - 1)) for i in range(12)]
    two = [fast, slow] * 6
    prior = analyse_scaling(pts(None), N=2000)  # no reading at all
    few = analyse_scaling(pts(None), N=2000, speed_readings=steady[:3])
    assert (few.low_s, few.high_s) == pytest.approx((prior.low_s, prior.high_s))
    calm = analyse_scaling(pts(fast), N=2000, speed_readings=steady)
    assert calm.reliable and calm.high_s / calm.low_s < 0.85 * prior.high_s / prior.low_s, (calm.headline(),
                                                                                          prior.headline())
    ran_fast = analyse_scaling(pts(fast), N=2000, speed_readings=two)
    assert ran_fast.high_s >= 0.99 * ran_fast.predicted_s * slow / fast, ran_fast.headline()
    assert ran_fast.low_s >= 0.85 * ran_fast.predicted_s, ran_fast.headline()
    text = " ".join(ran_fast.text().split())
    assert "runs at two speeds" in text and "18 µs or 27 µs per call (50% of its last 12 readings slow)" in text, text
    ran_slow = analyse_scaling(pts(slow), N=2000, speed_readings=two)
    assert ran_slow.low_s <= 1.01 * ran_slow.predicted_s * fast / slow, ran_slow.headline()
    assert ran_slow.high_s <= 1.2 * ran_slow.predicted_s, ran_slow.headline()
    # one slow reading among twelve: a preemption
    one = machine_speed(steady[:11] + [slow])
    assert one is not None and one.slow_s is None
    assert machine_speed(steady[:3]) is None
    # beside a busy process: the prior, whatever the readings say
    loaded = [analyse_scaling(pts(fast), N=2000, speed_readings=r, others_cores=1.0) for r in (two, None)]
    assert (loaded[0].low_s, loaded[0].high_s) == pytest.approx((loaded[1].low_s, loaded[1].high_s))
    assert "two speeds" not in loaded[0].text()


def test_a_stall_in_one_run_of_a_tiny_size_is_not_the_run_to_run_variation() -> None:
    """A 270 ms stall in one of the two runs of a 0.5 ms size (a file truncated while the last run's pages
    were written back) does not make that size a long one: the variation is read from the sizes whose
    both runs are long, which agree within 2%."""
    from perfmagic.estimation.fit import measured_noise, noise_pairs

    pts = [Point(2, (0.27, 0.0005)), *(Point(n, (0.001 * n, 0.00102 * n)) for n in (64, 128, 256))]
    assert [n for n, _, _ in noise_pairs(pts)] == [64, 128, 256]
    assert measured_noise(pts) < 0.05


@pytest.mark.parametrize("refusal", ["noisy", "too wide"])
def test_a_refusal_after_the_repeats_buys_the_larger_sizes_it_asks_for(refusal: str) -> None:
    # a file-writing job refused at 1 s of its 3 s budget ("runs of the same size differ by ±66% … measure
    # up to n=49,152 (≈ 380 ms)"): the measuring goes on at larger sizes while the budget allows. The same
    # for an interval too wide to use (no reason beyond its width): a numpy chain beside a busy neighbour was
    # refused as "anywhere from 1.2 s to 5.1 s; measure up to n=24,215,552 (≈ 183 ms)" after 0.87 s of its 3 s
    import types

    from perfmagic.estimation import measure as _measure
    from perfmagic.findings import Finding

    clock = [0.0]
    pts = [Point(n, (1e-5 * n,), ()) for n in (1000, 2000, 4000, 8000)]
    first_top = pts[-1].n

    def analyse(points):
        top = max(p.n for p in points)
        # planted: narrow until the repeats show the noise; then the sizes the refusal asks for settle it
        ok = top >= 4 * first_top or not any(p.later for p in points)
        why = None if ok or refusal == "too wide" else Finding.of(
            "estimate.noisy", sigma=0.6, ratio=50.0, rep_n=None, rep_first=None, rep_second=None, pairs=3, var="n",
            suggest_n=4 * top, suggest_s=4e-5 * top)
        return types.SimpleNamespace(predicted_s=2.0, measured_full=False, reliable=ok, high_s=2.2 if ok else 9.0,
                                     time_fit=None, unreliable_why=why)

    def measure_at(s, expected):
        clock[0] += 1e-5 * s
        return Point(s, (1e-5 * s,), ())

    class Runner:
        device = "cpu"

        def once(self, n, memory=True, trace=False, clean=True):
            clock[0] += 1e-5 * n
            return 1e-5 * n, None, None, None

    _measure._after_sweep(pts, 400_000, 3.0, 0.3, lambda: clock[0], measure_at, Runner(), False, None, "n", analyse)
    assert max(p.n for p in pts) >= 4 * first_top and clock[0] <= 3.0, [(p.n, p.later) for p in pts]
    assert any(p.later for p in pts if p.n > first_top)  # the new top sizes re-timed too
    # with no room left in the budget, nothing more is measured: the refusal stands
    pts2 = [Point(n, (1e-5 * n,), ()) for n in (1000, 2000, 4000, 8000)]
    clock[0] = 2.99
    _measure._after_sweep(pts2, 400_000, 3.0, 0.3, lambda: clock[0], measure_at, Runner(), False, None, "n", analyse)
    assert max(p.n for p in pts2) == first_top


def test_a_refused_estimate_still_says_will_not_fit_from_the_memory_measured() -> None:
    # planted: 8 B per element, runs of one size 2× apart (refused as noisy, 8,192× from the top)
    pts = [Point(n, (1e-9 * n, 1.1e-9 * n), (8 * n,), later=((3e-9 if i % 2 else 0.4e-9) * n,))
           for i, n in enumerate((1_525_878, 3_051_756, 6_103_512, 12_207_024))]
    r = gate(analyse_scaling(pts, N=10**11), limit=None, available=256 * 2**20)
    assert r.refused is not None and r.verdict == "will not fit", r.text()
    assert "estimate.gate-memory-floor" in {getattr(x, "kind", "") for x in r.verdict_reasons}
    assert "needs at least" in r.text() and "WILL NOT FIT" in r.headline()


def _bimodal(sizes: list[int], per: Any) -> list[Point]:
    """Planted runs whose pace flips between a fast and a slow episode (two torch threads beside a busy
    neighbour: 0.6 to 5 ms a step in runs of a third of a second): two runs per size, the second of the top
    three sizes re-timed later; ``per(n)`` is the mean seconds per unit at size n."""
    flips = itertools.cycle((0.5, 2.0, 1.6, 0.6, 0.7, 1.9, 0.55, 1.4))
    out = []
    for k, n in enumerate(sizes):
        a, b = next(flips), next(flips)
        later = (per(n) * n * next(flips),) if k >= len(sizes) - 3 else ()
        out.append(Point(n, (per(n) * n * a, per(n) * n * b), later=later))
    return out


def test_noisy_runs_of_a_linear_cost_are_answered_from_their_pooled_pace() -> None:
    """Runs that differ ±50-100% from one another bend any curve, but a linear cost's pace pooled over the
    largest sizes' runs predicts a run many times longer, which averages the episodes out: a number with
    its evidence, not a refusal (issue 29: SGD steps beside a busy neighbour were refused 4 times in 4)."""
    sizes = [1, 2, 4, 8, 16, 32, 64, 128, 256, 360]
    pts = _bimodal(sizes, lambda n: 1e-3)
    N = 4500
    r = analyse_scaling(pts, N=N)
    notes = [n for n in r.notes if getattr(n, "kind", "") == "estimate.pace"]
    assert r.reliable and r.unreliable_why is None and notes, r.text()
    pooled = notes[0]["pooled"]
    assert r.predicted_s == pytest.approx(pooled * N, rel=0.01)
    assert r.low_s < N * 1e-3 * 1.2 < r.high_s and r.high_s / r.low_s < 3.0, r.text()
    # the high end reaches the slowest pace of the largest size
    slowest = max(t / 360 for t in (*pts[-1].times, *pts[-1].later))
    assert r.high_s >= slowest * N
    text = " ".join(r.text().split())
    assert "too much for a curve, but not for a pace" in text and "pooled" in text, text


def test_a_noisy_cost_that_grows_faster_than_the_size_gets_no_pace() -> None:
    """The pace stands only for a cost linear in the size: a quadratic cost under the same noise (its pace
    grows as n^1) stays refused, as does a full size more than 1000× the largest measured."""
    sizes = [1, 2, 4, 8, 16, 32, 64, 128, 256, 360]
    quad = analyse_scaling(_bimodal(sizes, lambda n: 1e-5 * n), N=4500)
    assert not any(getattr(n, "kind", "") == "estimate.pace" for n in quad.notes), quad.text()
    far = analyse_scaling(_bimodal(sizes, lambda n: 1e-3), N=360 * 1500)
    assert not any(getattr(n, "kind", "") == "estimate.pace" for n in far.notes), far.text()
    assert not far.reliable


def _state_change(later: bool) -> list[Point]:
    """SGD steps of ~40 ms as measured for 2000 of them (benchmarks/bench_estimate.py's step job): 39-45 ms a
    step over 1-8 steps, then the machine slowed to 57-58 ms a step: in a re-timing of 8 steps (``later``) and
    in the run of 16."""
    ms = 1e-3
    return [Point(1, (41.1 * ms, 44.5 * ms)), Point(2, (2 * 39.8 * ms, 2 * 39.6 * ms)),
            Point(4, (4 * 42.0 * ms, 4 * 41.0 * ms)),
            Point(8, (8 * 40.2 * ms, 8 * 39.4 * ms), later=(8 * 57.7 * ms,) if later else ()),
            Point(16, (16 * 57.4 * ms,))]


def test_a_refused_fit_whose_runs_show_the_machine_changing_pace_is_answered_from_the_pace() -> None:
    """A speed state that starts at the top bends a curve through the sizes (n·ln n here, 73 s - 22 min for 2000
    steps, refused) although the cost is linear. Where runs of one size differ in pace at least as much as the pace
    moves with the size, that is the evidence: the pace answers, its high end at the slow state's pace, and
    the note says why. 40 steps timed right after this estimate took 120 s / 2000 steps (issue 29's target: the
    size form answers for a 2000-step job of 40 ms steps)."""
    r = analyse_scaling(_state_change(later=True), N=2000)
    notes = [n for n in r.notes if getattr(n, "kind", "") == "estimate.pace"]
    assert r.reliable and notes and notes[0]["states"] is not None, r.text()
    assert r.low_s <= 2000 * 0.040 and 2000 * 0.0577 <= r.high_s and r.high_s / r.low_s < 3.0, r.text()
    assert r.low_s <= 120.4 <= r.high_s
    text = " ".join(r.text().split())
    assert "runs of n=8 differ in pace by 1.46×" in text and "the machine changed pace while measuring" in text, text
    assert "local slope is still rising" not in text  # that rise is the pace change the note shows
    # the same sizes without the re-timing that caught the change within one size: no evidence that the
    # machine, not the cost, changed, and the refusal stands
    alone = analyse_scaling(_state_change(later=False), N=2000)
    assert not alone.reliable and not any(getattr(n, "kind", "") == "estimate.pace" for n in alone.notes), alone.text()


def test_sizes_that_span_too_little_for_the_distance_get_a_pace_not_a_curve() -> None:
    """Steps of 200 ms (a 40 ms training step beside a busy neighbour) fit 1, 2 and 4 of them in the 3 s budget:
    a quadratic through those put 2000 steps at 44 min, "reliable", where they took 7 min. Sizes spanning 4×
    cannot tell a curve 500× beyond them: the pace of the runs answers, and says why."""
    pts = [Point(1, (0.208, 0.253)), Point(2, (0.431, 0.436)), Point(4, (1.083,))]
    r = analyse_scaling(pts, N=2000)
    notes = [n for n in r.notes if getattr(n, "kind", "") == "estimate.pace"]
    assert r.reliable and notes and notes[0]["short"] == pytest.approx(4.0), r.text()
    truth = 2000 * 0.212  # 424.5 s measured as 2000 × the mean of 10 steps timed right after
    assert r.low_s <= truth <= r.high_s and r.high_s / r.low_s < 3.0, r.text()
    assert "the sizes measured span 4× and the full one lies 500× beyond them" in " ".join(r.text().split())
    # sizes spanning 64× for a full size 10× beyond: the fit stands
    wide = analyse_scaling([Point(n, (1e-6 * n * n,) * 2) for n in (100, 200, 400, 800, 1600, 3200, 6400)],
                           N=64_000)
    assert not any(getattr(n, "kind", "") == "estimate.pace" for n in wide.notes)
    assert wide.predicted_s == pytest.approx(1e-6 * 64_000 ** 2, rel=0.05)


def test_a_size_slower_than_twice_its_size_is_warming_up_not_noise() -> None:
    """torch's first SGD steps: one step took 143 then 80 ms, where 128 steps took 106 ms. That pair is the
    warm-up of the first calls, and must not set the run-to-run variation."""
    from perfmagic.estimation.fit import noise_pairs

    pts = [Point(1, (0.143, 0.080)), Point(2, (0.064, 0.0013)), Point(64, (0.064, 0.066)),
           Point(128, (0.106, 0.151)), Point(256, (0.255, 0.26))]
    ns = [n for n, _, _ in noise_pairs(pts)]
    assert 1 not in ns and 128 in ns and 256 in ns


def test_a_memory_form_the_top_rules_out_does_not_pull_the_peak() -> None:
    """Four sizes whose peaks grew 9× (a torch chain: ~18 B per element): a constant peak stayed within 4 AICc
    units of the linear one, and their average put a 2.6 GiB full run at 1.2 GiB. A form that does not follow
    the largest sizes is left out of the average."""
    sizes = (566_784, 1_133_568, 2_267_136, 4_534_272)
    peaks = (9_072_640, 23_420_928, 40_810_496, 81_625_088)
    pts = [Point(n, (1e-8 * n,), (m,)) for n, m in zip(sizes, peaks)]
    N = 145_132_130
    r = analyse_scaling(pts, N=N)
    assert r.peak_bytes == pytest.approx(18 * N, rel=0.1), r.text()
    assert "constant" not in [f.name for f in r.mem_fit.fits]


def test_a_cost_growing_slower_than_the_size_reaches_n_with_its_high_end() -> None:
    """A torch chain on two threads grew as n^0.89 over 35 k … 2.3 M elements (its pool still engaging); the
    fit's n^0.81·ln n put the 64× larger run at 1.0 s, the top continued as n at 1.76 s. The high end
    reaches that continuation, and says so."""
    ns = [35_424, 70_848, 141_696, 283_392, 566_784, 1_133_568, 2_267_136]
    ts = [0.00066, 0.00127, 0.00228, 0.00435, 0.00803, 0.01357, 0.02747]
    pts = [Point(n, (t, t)) for n, t in zip(ns, ts)]
    N = 145_132_130
    r = analyse_scaling(pts, N=N)
    linear = ts[-1] * N / ns[-1]
    assert r.high_s >= linear and r.predicted_s < linear, r.text()
    notes = [n for n in r.notes if getattr(n, "kind", "") == "estimate.settled-up"]
    assert notes and notes[0]["high_s"] == pytest.approx(linear, rel=0.02)
    assert "slower than n" in " ".join(r.text().split())
    # a cost that grows as the size gets no such note
    lin = analyse_scaling([Point(n, (1e-8 * n + 1e-5,) * 2) for n in ns], N=N)
    assert not any(getattr(n, "kind", "") == "estimate.settled-up" for n in lin.notes)


def test_a_peak_from_sizes_that_span_too_little_is_not_extrapolated() -> None:
    """A loop of 1, 2 and 4 training steps: a few MiB of RSS noise, fitted as linear and carried 500× to 2000
    steps, said 3.8 GiB. Sizes spanning 4× cannot tell a growing peak from noise that far: no peak, and a
    warning that says why; a constant peak stays, and so does a peak that grew in proportion to the size, or
    was measured over a wide span."""
    pts = [Point(1, (0.21,), (3 * 2**20,)), Point(2, (0.43,), (6 * 2**20,)), Point(4, (1.08,), (6.5 * 2**20,))]
    r = analyse_scaling(pts, N=2000)
    assert r.peak_bytes is None and r.mem_fit is None, r.text()
    text = " ".join(r.text().split())
    assert "memory: the sizes measured span 4× and the full one lies 500× beyond them" in text, text
    flat = analyse_scaling([replace(p, rss_peaks=(5 * 2**20,)) for p in pts], N=2000)
    assert flat.peak_bytes == pytest.approx(5 * 2**20, rel=0.05)
    wide = analyse_scaling([Point(n, (1e-6 * n,), (8 * n,)) for n in (10**5, 4 * 10**5, 16 * 10**5, 64 * 10**5)],
                           N=10**8)
    assert wide.peak_bytes == pytest.approx(8e8, rel=0.05)
    arrays = analyse_scaling([Point(n, (1e-6 * n,), (8 * n,)) for n in (10**6, 2 * 10**6, 4 * 10**6)], N=2 * 10**9)
    assert arrays.peak_bytes == pytest.approx(1.6e10, rel=0.05)


def test_a_peak_is_the_most_a_run_of_its_size_needed() -> None:
    """A loop of training steps beside a busy process: the first run found the heap already grown (0 MiB, then
    4.2 MiB), the others read 7-10 MiB. The median of the first size's runs (2.1 MiB) made a constant peak look
    like one growing in proportion to the size, and 2000 steps were put at gigabytes; the most a run needed
    keeps the peak constant."""
    MiB = 2**20
    pts = [Point(1, (0.18, 0.23), (0, int(4.2 * MiB))), Point(2, (0.48, 0.18), (int(7.2 * MiB), int(7.5 * MiB))),
           Point(3, (0.47,), (int(8.8 * MiB), int(10 * MiB))), Point(4, (0.91,), (int(8.3 * MiB),))]
    assert pts[0].memory() == int(4.2 * MiB)
    r = analyse_scaling(pts, N=2000)
    assert r.peak_bytes is None or r.peak_bytes < 20 * MiB, r.text()
    assert "GiB" not in r.text()


def test_runs_that_share_cores_with_others_reach_n_with_their_low_end(monkeypatch: Any) -> None:
    """Two busy threads beside a busy process on 2 cores: a short run gets more than its share, a long one
    less, so the runs grow faster than the cost (a fit of such runs printed 245 h, 'reliable', for 2000
    SGD steps that took 112 s). The low end reaches the largest size continued as n; without that load, or
    with one thread that fits beside the other process, it does not."""
    from perfmagic.estimation import noise

    monkeypatch.setattr(noise, "cores", lambda: 2)
    sizes = [1, 2, 4, 8, 16, 24]
    pts = [Point(n, (0.002 * n ** 3,) * 2, cpu_share=2.0) for n in sizes]  # it fits as a cubic
    N = 2000
    linear = 0.002 * 24 ** 3 * N / 24
    r = analyse_scaling(pts, N=N, load=(1.0, 2))
    notes = [n for n in r.notes if getattr(n, "kind", "") == "estimate.contended"]
    assert notes and (r.low_s is None or r.low_s <= linear), r.text()
    assert "sharing cores, a long run gets less of them than a short one" in " ".join(r.text().split())
    quiet = analyse_scaling(pts, N=N, load=(0.0, 2))
    assert not any(getattr(n, "kind", "") == "estimate.contended" for n in quiet.notes)
    assert quiet.low_s > linear
    one = analyse_scaling([replace(p, cpu_share=1.0) for p in pts], N=N, load=(0.9, 1))
    assert not any(getattr(n, "kind", "") == "estimate.contended" for n in one.notes)


def test_a_cell_that_raises_below_the_full_size_gets_no_time_and_one_line_saying_why() -> None:
    """Issue 29's bad input: a cell that raises at some sizes. The sizes that ran are fitted (the figure and the
    gate's largest size use them), but a time for the full size would be a time for a run that may raise too:
    the headline says where it raised, after what, and the fix; the ledger row stores no predicted time."""
    code = "if n > 5000:\n    raise ValueError('too big: %d' % n)\nspin(n)"
    r = estimate(code, n=2_000_000, globals=NS, budget=0.5)
    head = r.text().splitlines()[0]
    n_f = r.failures[0][0]
    ran = max(p.n for p in r.points if p.n < n_f)
    assert head.startswith(f"estimate for n=2,000,000: no estimate: the code raised at n={n_f:,} (ValueError: "
                           f"too big: {n_f}) after running at every size up to {ran:,}"), head
    assert f"fix the error, or ask for n below {n_f:,}" in head and head.endswith("→ WILL NOT FIT"), head
    assert "of the predicted full run" not in r.text() and r.measured_fraction is None
    m = r.metrics()
    assert m["predicted_s"] is None and m["low_s"] is None and "raised at" in m["refused"], m


def test_a_full_size_beyond_memory_starts_small_and_stops_before_the_memory_runs_out() -> None:
    """Issue 29's bad input: ``n=`` larger than memory allows. The first size was N / 65536: for n=10**15 bytes a
    first run of 15 GB (39 s of page faults here; a 2 GiB pod's kernel killed). Now at most FIRST_MAX units, the
    memory stop acts from the second size, and the gate says it will not fit, in seconds."""
    from perfmagic.estimation.measure import FIRST_MAX, first_size

    assert first_size(10**15) == FIRST_MAX and first_size(2**30) == 2**14 and first_size(1000) == 1
    assert first_size(10**9) == 10**9 // 2**16
    t0 = time.perf_counter()
    r = estimate("x = bytearray(n)\ndel x", n=10**15, globals={}, budget=1.0)
    assert time.perf_counter() - t0 < 30
    assert r.points[0].n == FIRST_MAX and r.verdict == "will not fit", r.text()
    assert max(p.memory() or 0 for p in r.points) < 0.6 * r.available_bytes, r.text()


def test_a_larger_size_that_raises_after_the_sweep_is_a_failure_not_the_estimates_exception(monkeypatch) -> None:
    """After the sweep, a refused prediction buys larger sizes (``_after_sweep``); one of those can raise. It was
    the estimate's own exception (the cell's ValueError out of ``estimate()``, seen once as a flaky failure of the
    raising-cell test above when the sweep had stopped below the size that raises); now it is a failure at that
    size, reported as one raised in the sweep."""
    from perfmagic.estimation import measure as _measure

    def grow_once(points, N, budget_s, cap, elapsed, measure_at, *rest, **kw):
        measure_at(points[-1].n * 2, points[-1].time * 2)  # what _grow does for a refused prediction
    monkeypatch.setattr(_measure, "_after_sweep", grow_once)
    code = "if n > 2000:\n    raise ValueError('too big: %d' % n)\nspin(n)"
    r = estimate(code, n=2_000_000, globals=NS, sizes=[250, 500, 1000, 2000])
    assert r.failures and r.failures[0][0] == 4000 and "ValueError: too big: 4000" in r.failures[0][1], r.text()
    assert r.text().splitlines()[0].startswith("estimate for n=2,000,000: no estimate: the code raised at n=4,000")


def test_a_measuring_longer_than_the_job_says_so() -> None:
    """The tour's sort of 2M floats (0.5 s) took 1.47 s to estimate, shown as "269.8% of the predicted full
    run" with nothing said; past 100% the line says the job costs less to run than to estimate."""
    pts = [Point(n, (1e-7 * n,), ()) for n in (1000, 2000, 4000, 8000, 16000, 32000)]
    long_ = analyse_scaling(pts, N=10**6, spent_s=0.2)  # predicted ~0.1 s
    assert long_.measured_fraction and long_.measured_fraction > 1
    assert ": a job this short costs less to run than to estimate)" in long_.text(), long_.text()
    short = analyse_scaling(pts, N=10**8, spent_s=0.2)  # predicted ~10 s
    assert "of the predicted full run)" in short.text() and "costs less to run" not in short.text()


def test_a_full_run_short_against_the_budget_is_measured_not_predicted() -> None:
    """Planted: 0.2 µs per unit up to a quarter of the size, 0.4 µs beyond it (a change of memory level the
    sweep cannot reach: the tour's sort of 2M floats ran 56% over its prediction once its data left the
    cache). The full run, 0.4 s, is under a third of the 3 s budget: it is measured, and the estimate is
    the run's own time. With a 0.5 s budget it is predicted from the sizes below the break, as before."""
    N = 1_000_000

    def job(n: int) -> None:
        time.sleep(n * (2e-7 if n < N // 4 else 4e-7))

    r = estimate(job, n=N, run=True, force=True)
    assert r.measured_full and r.points[-1].n == N, r.text()
    assert r.predicted_s == pytest.approx(0.4, rel=0.15) and r.low_s <= r.actual.seconds <= r.high_s, r.text()
    assert r.spent_s <= 3.0
    short = estimate(job, n=N, budget=0.5)
    assert not short.measured_full and max(p.n for p in short.points) < N // 4, short.text()
    assert short.predicted_s == pytest.approx(0.2, rel=0.25), short.text()
    given = estimate(job, n=N, sizes=[N // 64, N // 32, N // 16, N // 8])  # the user's sizes: predicted from them
    assert not given.measured_full and max(p.n for p in given.points) < N, given.text()


def _rising(n: float) -> float:
    """Planted: n·ln n at 20 ns, its cost per unit rising 8% per doubling from n=16,000 on (data leaving a
    cache: the rise starts near the top of the sizes measured and goes on past them)."""
    return 2e-8 * n * math.log(n) * 1.08 ** max(math.log2(n / 16000), 0.0)


def test_a_full_run_leaving_the_cache_follows_the_top_trend(monkeypatch: Any) -> None:
    """Planted: the sizes measured (1,000 … 64,000, 40 B per unit: at most 2.4 MiB) fit in a 32 MiB cache and the
    full run (1M units, 38 MiB) does not; the cost per unit rises 8% per doubling from 16,000 on. The model across all sizes
    (n log n, or n^k) averages that rise; the prediction follows the top sizes' trend instead, and a note says
    why. With the same times but memory that stays in the cache, the model's prediction stands."""
    from perfmagic.estimation import fit as fit_mod

    monkeypatch.setattr(fit_mod, "cache_sizes", lambda: {"llc_bytes": 32 * 2**20})
    N = 1_000_000
    sizes = [1000 * 2**k for k in range(7)]
    pts = [Point(n, (_rising(n), _rising(n) * 1.01), (40 * n, 40 * n)) for n in sizes]
    r = analyse_scaling(pts, N=N)
    kinds = [getattr(x, "kind", "") for x in r.notes]
    assert "estimate.cache-trend" in kinds, r.text()
    flat = analyse_scaling([replace(p, rss_peaks=(2**20, 2**20)) for p in pts], N=N)
    assert "estimate.cache-trend" not in [getattr(x, "kind", "") for x in flat.notes]
    truth = _rising(N)
    assert abs(r.predicted_s / truth - 1) < abs(flat.predicted_s / truth - 1), (r.predicted_s, flat.predicted_s, truth)
    assert r.predicted_s > flat.predicted_s and r.low_s <= r.predicted_s <= r.high_s
    assert "passes the 32.0 MiB last-level cache" in " ".join(r.text().split())


def test_a_short_full_run_is_not_trusted_from_sizes_far_below_it() -> None:
    """bench_estimate's file write: a sweep that stopped at 128 of 292,298 units had a high end under 1 s, and the
    full run it then measured took about 2 s. A high end extrapolated over more than 64× (or an unreliable one)
    is no bound: the full size is measured only from sizes within 64× of it."""
    import types

    from perfmagic.estimation import measure as _measure

    runner = types.SimpleNamespace(device="cpu")
    ok = types.SimpleNamespace(predicted_s=0.5, high_s=0.8, reliable=True)
    near = [Point(n, (1e-6 * n,), ()) for n in (4096, 8192, 16384)]
    far = [Point(n, (1e-6 * n,), ()) for n in (32, 64, 128)]
    assert _measure._short_full(ok, near, 292_298, 3.0, 0.5, runner)
    assert not _measure._short_full(ok, far, 292_298, 3.0, 0.5, runner)
    assert not _measure._short_full(types.SimpleNamespace(predicted_s=0.5, high_s=0.8, reliable=False), near,
                                    292_298, 3.0, 0.5, runner)
    assert not _measure._short_full(ok, near, 292_298, 3.0, 2.2, runner)  # 2.2 + 1.3 × 0.8 s > the 3 s budget


def test_a_trend_smaller_than_the_runs_noise_is_no_evidence_for_a_free_exponent() -> None:
    """A linear cost measured while the machine drifts 2% over the sizes (which run in increasing order):
    27 ns a unit, rising smoothly by 3%. Fitted alone, the trend reads as a law (here n + n log n; a
    pure-Python loop read n^1.02 so and was over-predicted +17% 64× further on, in a replay of
    benchmarks/bench_estimate.py); against runs that vary by 5% it is no evidence, and the form is n^1. A
    real n^1.3 is kept at 5% and at 20% noise."""
    ns = [41_952 * 2 ** i for i in range(7)]
    ts = [27e-9 * n * (1.0 + 0.005 * i) for i, n in enumerate(ns)]
    N = 64 * ns[-1]
    quiet = select(ns, ts, N, noise=0.0)  # read alone, the drift is a law: n + n log n, +6% at N
    noisy = select(ns, ts, N, noise=0.05)
    assert quiet.best.name != "linear" and quiet.predicted > 1.05 * 27e-9 * N, quiet.best
    assert noisy.best.name == "linear" and noisy.predicted < 1.02 * 27e-9 * N, noisy.best
    steep = [1e-9 * n ** 1.3 for n in ns]
    for noise in (0.05, 0.2):
        got = select(ns, steep, N, noise=noise).best
        assert got.name == "n^k" and got.k == pytest.approx(1.3), got
