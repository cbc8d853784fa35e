"""How good are %%estimate's predictions? Predicted vs actual full runs of 10–60 s, and what measuring cost.

    .venv/bin/python benchmarks/bench_estimate.py [--quick] [--no-docs] [--only NAME]

For each workload the full size is calibrated so that the full run takes about 15 s here, then
``perfmagic.estimate(code, n=FULL, run=True)`` runs with its defaults (measuring budget 3 s, at most
10% of the predicted full run) and runs the full job. Reported per workload: the predicted and actual
time and peak memory, their errors, the measuring cost as a fraction of the full run, and, on the *same
measured points*, the predictions of a naive power law fitted on all points in log-log space and of
big_O's class pick (``big_o.infer_big_o_class``; it fits classes, not overheads). The per-iteration
form is checked the same way on a planted step.

Before each workload the script touches up to 12 GiB once (see ``prefault``): this VM backs guest
memory lazily, and a full run's first touch of several GB would otherwise be charged a hypervisor cost
(~3 s per GB here) that the small measured runs never see and that a machine with its RAM present
does not have.

Targets (issue 6): median |time error| ≤ 10%, median |memory error| ≤ 15%, measuring ≤ 10% of the full
run.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402


def count_loop(k: int) -> int:
    x = 0
    for _ in range(k):
        x += 1
    return x


def pairs(k: int) -> int:
    s = 0
    for i in range(k):
        for j in range(k):
            s += 1
    return s


def setup_ns():
    import numpy as np
    import torch

    torch.set_num_threads(C.usable_cores())
    rng = np.random.default_rng(0)
    return {"np": np, "torch": torch, "rng": rng, "count_loop": count_loop, "pairs": pairs, "time": time}


# name -> (code, exponent used to calibrate the full size, starting size, what it is)
WORKLOADS = {
    "python loop": ("count_loop(n)", 1.0, 1_000_000, "pure-Python loop, linear"),
    "dict build": ("d = {i: i for i in range(n)}\ndel d", 1.0, 1_000_000, "dict comprehension: linear time, stepwise memory (resizes)"),
    "numpy sort": ("x = rng.random(n)\nx.sort()\ndel x", 1.05, 2_000_000, "random floats generated and sorted: n log n, linear memory"),
    "python n² + overhead": ("time.sleep(0.05)\npairs(n)", 2.0, 1000, "nested pure-Python loops plus a 50 ms constant"),
    "torch matmul n³": ("a = torch.randn(n, n)\nb = a @ a\ndel a, b", 3.0, 500, "dense matmul: n³ time, n² memory"),
    "list of lists": ("rows = [[i] * 8 for i in range(n)]\ndel rows", 1.0, 200_000, "many small Python objects: linear"),
}


def prefault(gib: float) -> float:
    """Touch ``gib`` GiB once so the VM has backed it: this machine's hypervisor maps guest memory lazily
    (a first touch of 4.8 GB took 14.9 s here, the next 1.0 s), which would charge the full run, and not
    the small measured runs, for a cost that a machine with its RAM present does not have."""
    import numpy as np

    t = time.perf_counter()
    a = np.ones(int(gib * 2**30 / 8))
    del a
    return time.perf_counter() - t


def calibrate(code: str, ns: dict, k: float, n0: int, target: float) -> int:
    from perfmagic.estimation.runner import _Runner

    r = _Runner(code, "n", ns, "cpu", "<calibrate>")
    n = n0
    while True:
        t = r.once(n, memory=False, clean=True)[0]
        if t > 0.5 or n > 10**10:
            break
        n *= 4
    return int(n * (target / t) ** (1 / k))


def naive_loglog(ns: list[float], ts: list[float], N: float) -> float:
    lx = [math.log(x) for x in ns]
    ly = [math.log(y) for y in ts]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    b = sum((x - mx) * (y - my) for x, y in zip(lx, ly)) / sum((x - mx) ** 2 for x in lx)
    return math.exp(my + b * (math.log(N) - mx))


def big_o_pick(ns: list[float], ts: list[float], N: float) -> tuple[str, float | None]:
    try:
        import big_o
        import numpy as np
    except ImportError:
        return "not installed", None
    try:
        best, _ = big_o.infer_big_o_class(np.asarray(ns, float), np.asarray(ts, float))
        return type(best).__name__, float(best.compute(np.asarray([N], float))[0])
    except Exception as exc:  # big_O fails on some point sets (rank-deficient fits)
        return f"fails ({type(exc).__name__})", None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="full runs of ~3 s instead of ~15 s (smoke test)")
    ap.add_argument("--no-docs", action="store_true")
    ap.add_argument("--only", help="run one workload")
    args = ap.parse_args()
    from perfmagic import estimate

    target = 3.0 if args.quick else 15.0
    ns = setup_ns()
    rows, terr, merr, frac = [], [], [], []
    t_all = time.perf_counter()
    for name, (code, k, n0, what) in WORKLOADS.items():
        if args.only and args.only != name:
            continue
        N = calibrate(code, ns, k, n0, target)
        import psutil

        pf = prefault(min(12.0, 0.6 * psutil.virtual_memory().available / 2**30))
        print(f"{name}: prefault {pf:.1f} s", file=sys.stderr, flush=True)
        r = estimate(code, n=N, globals=ns, run=True, force=True)
        a = r.actual
        pts = [(p.n, p.time) for p in r.points]
        print(f"  points (n, s): {[(x, round(y, 4)) for x, y in pts]}; fit sizes {r.fit_sizes}; "
              f"spent {r.spent_s:.2f} s; warnings {list(r.warnings)}", file=sys.stderr, flush=True)
        nx, tx = [float(x) for x, _ in pts], [y for _, y in pts]
        naive = naive_loglog(nx, tx, N)
        # the same points with the drift guard's speed correction (off by default): would it earn its place?
        from perfmagic.estimation.fit import analyse_scaling

        corr = analyse_scaling(r.points, N=N, correct_speed=True)
        unc = (f"{corr.predicted_s / a.seconds - 1:+.1%}" + ("" if corr.reliable else " (unreliable)")
               if a and a.status == "ok" and corr.predicted_s else "—")
        if corr.speed_factors:
            unc += f" (±{max(abs(1 / f - 1) for f in corr.speed_factors):.0%})"

        bo_name, bo = big_o_pick(nx, tx, N)
        # errors as (predicted − actual) / actual: + is an over-prediction
        te = r.predicted_s / a.seconds - 1 if a and a.status == "ok" and r.predicted_s else None
        me = (r.peak_bytes / a.peak_bytes - 1 if a and a.peak_bytes and r.peak_bytes and
              max(a.peak_bytes, r.peak_bytes) >= 2**20 else None)
        f = r.spent_s / a.seconds if a and a.seconds else None
        if te is not None:
            terr.append(abs(te) if r.reliable else float("inf"))
        if me is not None:
            merr.append(abs(me))
        if f is not None:
            frac.append(f)
        model = r.time_fit.best.describe() if r.time_fit else "—"
        row = (f"| {name} | {N:,} | {model} | {C.fmt_time(r.predicted_s) if r.reliable else 'unreliable'} | "
               f"{C.fmt_time(a.seconds)} | {te:+.1%} | "
               f"{(r.peak_bytes or 0) / 2**20:,.0f} | {(a.peak_bytes or 0) / 2**20:,.0f} | "
               f"{me:+.1%} | " if me is not None else
               f"| {name} | {N:,} | {model} | {C.fmt_time(r.predicted_s) if r.reliable else 'unreliable'} | "
               f"{C.fmt_time(a.seconds)} | {te:+.1%} | — | — | — | ")
        row += (f"{f:.1%} | {unc} | {naive / a.seconds - 1:+.1%} | {bo_name} {bo / a.seconds - 1:+.1%} |" if bo else
                f"{f:.1%} | {unc} | {naive / a.seconds - 1:+.1%} | {bo_name} |")
        rows.append(row)
        print(row, flush=True)
    # the per-iteration form: a planted step of 10 ms (sleep) plus a little compute
    step = "time.sleep(0.01)\ncount_loop(2000)"
    total = int(target / 0.0102)
    r = estimate(step, total=total, globals=ns, run=True, force=True)
    a = r.actual
    te = r.predicted_s / a.seconds - 1
    f = r.spent_s / a.seconds
    terr.append(abs(te))
    frac.append(f)
    row = (f"| per-iteration step (10 ms sleep + loop) | {total:,} units | mean × units | {C.fmt_time(r.predicted_s)} | "
           f"{C.fmt_time(a.seconds)} | {te:+.1%} | — | — | — | {f:.1%} | — | — | — |")
    rows.append(row)
    print(row)
    wall = time.perf_counter() - t_all
    med_t = statistics.median(terr) if terr else float("nan")
    med_m = statistics.median(merr) if merr else float("nan")
    med_f = statistics.median(frac) if frac else float("nan")
    lines = [C.header("Estimates (%%estimate): predicted vs actual"), "",
             f"Full runs calibrated to about {target:.0f} s each; `estimate()` with its defaults (budget ≤ 3 s of measuring and ≤ 10% "
             "of the predicted full run), then the full run. *naive log-log* and *big_O* are fitted on the same "
             "measured points as perfmagic. *with speed correction* is perfmagic's fit of the same points with the drift "
             "guard's speed correction switched on (`analyse_scaling(..., correct_speed=True)`, off by default; *(±x%)* is the "
             "largest correction it made). Memory is the RSS high-water mark above the level before the run. Errors are "
             "(predicted − actual) / actual: + is an over-prediction. An *unreliable* estimate prints no number and counts "
             "as a miss (its error is that of the number it declined to print).", "",
             "| workload | full size | perfmagic model | predicted | actual | time error | predicted peak MiB | "
             "actual peak MiB | memory error | measuring / full run | perfmagic with speed correction | "
             "naive log-log error | big_O pick, error |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|", *rows, "",
             f"**Median |time error| {med_t:.1%}** (target ≤ 10%), **median |memory error| {med_m:.1%}** (target ≤ 15%), "
             f"**median measuring cost {med_f:.1%} of the full run** (target ≤ 10%); whole benchmark {wall:.0f} s."]
    body = "\n".join(lines)
    print(body)
    if not args.no_docs and not args.quick and not args.only:
        C.add_section_row("bench_estimate.py", "| estimates | `benchmarks/bench_estimate.py` | predicted vs actual "
                          "time and peak memory of 10–60 s runs, measuring cost, vs a naive log-log fit and big_O |")
        print(f"written to {C.replace_section('estimate', body)}")


if __name__ == "__main__":
    main()
