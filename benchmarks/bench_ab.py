"""One change at a time: does perfmagic say "faster"/"slower" only when something changed?

Three questions, on two CPU workloads (sizes chosen on the 2-core reference VM; the measured times
are in the tables):

* ``np_sort``  — ``np.sort(a)``, ``a`` = ``NP_N`` float64: a ~1 ms numpy op
* ``torch_mm`` — ``x @ y``, fp32 ``MM_N``×``MM_N``: a ~20 ms torch op (torch threads = usable cores)

1. **A/A.** Identical code on both sides, judged two ways: *historical* — two separate
   ``perfmagic.bench(stmt, globals=ns, budget=1.0)`` runs, one after the other, compared with
   ``perfmagic.compare(r1, r2)`` (``kind == "historical"``: the within-run interval combined with this
   machine's between-run noise, ``perfmagic.timing.betweenrun``) — and *same-process* — ``perfmagic.bench_pair(stmt, stmt, globals=ns,
   budget=2.0)``, verdict from its ``.comparison``. Any "faster"/"slower" verdict is false.
2. **A/B.** A planted slowdown of about ``PLANT`` (15%): B runs the same op on a larger input
   (``np.sort(a_big)`` / ``xb @ yb``). The size of B is tuned at the start so that B/A ≈ 1.15, and the
   effect actually planted is measured carefully at the start *and* at the end of the run: single calls
   of A and B interleaved ABBA for ``--calibrate`` seconds, median of the per-pair ratios b/a with its
   distribution-free 95% CI. Detection = verdict "slower".
3. **Other judges on the same historical runs.** The per-call samples ``r.times`` of the two runs of
   every historical pair are also judged by pyperf's significance test (``pyperf._utils.is_significant``,
   the two-sample t-test ``pyperf compare_to`` uses) and by a raw 10% threshold on the medians
   (|m2/m1 − 1| > 0.10 is a "change").

Every bench/bench_pair call uses perfmagic's defaults except ``budget``: 1.0 s per single run (two runs
per historical judgement) and 2.0 s per ``bench_pair`` (one per same-process judgement), i.e. about
2 s of measuring per judgement for both kinds. A budget that is given is a hard limit.

Each iteration runs the 8 tasks (2 workloads × {A/A, A/B} × {historical, same-process}) in an order
shuffled per iteration (seeded), so machine drift spreads evenly over workloads and kinds.

    .venv/bin/python benchmarks/bench_ab.py            # 40 pairs per workload and kind (~20 min)
    .venv/bin/python benchmarks/bench_ab.py --quick    # smoke test: 1 pair per task, tiny inputs and budgets
    .venv/bin/python benchmarks/bench_ab.py --report-only benchmarks/results/ab.json   # re-render
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

NP_N = 175_000      # np.sort of NP_N float64 ~ 1 ms on the reference VM
MM_N = 1450         # fp32 MM_N^3 matmul ~ 20 ms on 2 cores
PLANT = 0.15        # the planted slowdown B/A - 1
QUICK_NP_N, QUICK_MM_N = 5_000, 64  # --quick (a smoke run): tiny inputs (~50 µs calls), so tiny budgets give samples
HIST_BUDGET = 1.0   # seconds per perfmagic.bench() run (two runs per historical judgement)
PAIR_BUDGET = 2.0   # seconds per perfmagic.bench_pair() (one per same-process judgement)
FALSE_TARGET = 0.05
DETECT_TARGET = 0.90
THRESHOLD = 0.10

WORKLOADS: list[dict[str, Any]] = [
    {"name": "np_sort", "stmt_a": "np.sort(a)", "stmt_b": "np.sort(a_big)", "n": NP_N,
     "desc": f"~1 ms numpy: `np.sort(a)`, a = {NP_N:,} float64", "round": 500,
     "grid": [1.08 + 0.02 * i for i in range(8)]},
    {"name": "torch_mm", "stmt_a": "x @ y", "stmt_b": "xb @ yb", "n": MM_N,
     "desc": f"~20 ms torch: `x @ y`, fp32 {MM_N}×{MM_N}", "round": 8,
     "grid": [1.02 + 0.005 * i for i in range(10)]},
]
HIST, PAIR = "historical", "same-process"
KINDS = (HIST, PAIR)
VERDICTS = ("faster", "slower", "no real change", "inconclusive")


# ---------------------------------------------------------------------------------------------
# namespace and the planted effect
# ---------------------------------------------------------------------------------------------
def set_arrays(ns: dict[str, Any], name: str, n: int, n_big: int) -> None:
    import numpy as np
    import torch

    if name == "np_sort":
        rng = np.random.default_rng(0)
        ns["a"] = rng.random(n)
        ns["a_big"] = rng.random(n_big)
    else:
        g = torch.Generator().manual_seed(0)
        ns["x"], ns["y"] = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
        ns["xb"], ns["yb"] = torch.randn(n_big, n_big, generator=g), torch.randn(n_big, n_big, generator=g)


def interleaved(ns: dict[str, Any], stmt_a: str, stmt_b: str, seconds: float) -> tuple[list[float], list[float]]:
    """Single calls of A and B, ABBA order, for ``seconds``; GC off (as perfmagic times)."""
    fa = eval(compile("lambda: " + stmt_a, "<cal-a>", "eval"), ns)
    fb = eval(compile("lambda: " + stmt_b, "<cal-b>", "eval"), ns)
    clock = time.perf_counter
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    ta: list[float] = []
    tb: list[float] = []
    try:
        end = clock() + min(0.5, seconds / 4)
        while clock() < end:
            fa()
            fb()
        end = clock() + seconds
        i = 0
        while clock() < end or len(ta) < 20:
            order = ((fa, ta), (fb, tb)) if i % 2 == 0 else ((fb, tb), (fa, ta))
            for f, out in order:
                t0 = clock()
                f()
                out.append(clock() - t0)
            i += 1
    finally:
        if was:
            gc.enable()
    return ta, tb


def effect(ta: list[float], tb: list[float]) -> dict[str, Any]:
    """The planted effect: median of per-pair ratios b/a with its distribution-free 95% CI."""
    d = sorted(math.log(b / a) for a, b in zip(ta, tb))
    n = len(d)
    k = 1.96 * math.sqrt(n) / 2
    lo, hi = d[max(0, math.floor(n / 2 - k))], d[min(n - 1, math.ceil(n / 2 + k) - 1)]
    return {"pairs": n, "ratio": math.exp(statistics.median(d)), "ci": [math.exp(lo), math.exp(hi)],
            "ratio_of_medians": statistics.median(tb) / statistics.median(ta),
            "ratio_of_means": statistics.fmean(tb) / statistics.fmean(ta),
            "a_median_s": statistics.median(ta), "b_median_s": statistics.median(tb)}


def tune(ns: dict[str, Any], w: dict[str, Any], seconds: float) -> tuple[int, list[dict[str, Any]]]:
    """Choose B's size so that B/A ~ 1 + PLANT, from a grid of candidate sizes (``w["grid"]``, factors of n).

    Time is not a smooth function of size (matmul blocking, cache sizes, scheduler quantisation under
    load), so every candidate is measured: rounds of A and every candidate once each, in a shuffled order,
    for ``seconds``; the candidate whose median ratio (candidate / A of the same round) is nearest
    1 + PLANT on the log scale is chosen, and ``ns`` gets its arrays.
    """
    import numpy as np
    import torch

    n0, rnd = w["n"], w["round"]
    cands = sorted({round(n0 * f / rnd) * rnd for f in w["grid"]})
    set_arrays(ns, w["name"], n0, n0)
    fa = eval(compile("lambda: " + w["stmt_a"], "<tune-a>", "eval"), ns)
    fns: dict[Any, Any] = {"A": fa}
    for nb in cands:
        if w["name"] == "np_sort":
            arr = np.random.default_rng(nb).random(nb)
            fns[nb] = lambda arr=arr: np.sort(arr)
        else:
            g = torch.Generator().manual_seed(nb)
            p, qq = torch.randn(nb, nb, generator=g), torch.randn(nb, nb, generator=g)
            fns[nb] = lambda p=p, qq=qq: p @ qq
    clock = time.perf_counter
    rng = random.Random(0)
    keys = list(fns)
    ratios: dict[Any, list[float]] = {nb: [] for nb in cands}
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        for f in fns.values():
            f()
        end = clock() + seconds
        while clock() < end or len(ratios[cands[0]]) < 5:
            rng.shuffle(keys)
            t: dict[Any, float] = {}
            for k in keys:
                t0 = clock()
                fns[k]()
                t[k] = clock() - t0
            for nb in cands:
                ratios[nb].append(t[nb] / t["A"])
    finally:
        if was:
            gc.enable()
    hist = [{"n_big": nb, "ratio": statistics.median(ratios[nb]), "rounds": len(ratios[nb])} for nb in cands]
    best = min(hist, key=lambda h: abs(math.log(h["ratio"]) - math.log1p(PLANT)))["n_big"]
    del fns
    set_arrays(ns, w["name"], n0, best)
    return best, hist


# ---------------------------------------------------------------------------------------------
# one judgement of each kind
# ---------------------------------------------------------------------------------------------
def pyperf_significant(t1: list[float], t2: list[float]) -> dict[str, Any]:
    """pyperf's t-test as `pyperf compare_to` applies it (pyperf._compare.is_significant_benchs).

    ``pyperf._utils.tscore`` refuses samples of different lengths (ValueError); compare_to catches any
    exception and then calls the difference significant. Both are recorded: ``verbatim`` (that logic as
    is) and ``equal_n`` (the t-test on the first min(n1, n2) samples of each run, which is how pyperf's
    own fixed-size runs always reach it).
    """
    from pyperf._utils import is_significant

    try:
        verbatim, t_v = is_significant(t1, t2)
    except Exception:
        verbatim, t_v = True, None
    n = min(len(t1), len(t2))
    eq, t_e = is_significant(list(t1[:n]), list(t2[:n]))
    return {"verbatim": bool(verbatim), "verbatim_t": t_v, "equal_n": bool(eq), "equal_n_t": t_e, "n": n,
            "mean_ratio": statistics.fmean(t2[:n]) / statistics.fmean(t1[:n])}


def run_info(r: Any) -> dict[str, Any]:
    return {"median_s": r.median, "n_samples": r.n_samples, "number": r.number, "stop_reason": r.stop_reason,
            "wall_s": r.wall_s, "reference_s": r.env.get("reference_s"), "warnings": list(r.warnings)}


def judge_historical(ns: dict[str, Any], stmt1: str, stmt2: str) -> dict[str, Any]:
    import perfmagic
    from perfmagic.timing.compare import compare_samples

    meter = C.LoadMeter().start()
    t0 = time.perf_counter()
    r1 = perfmagic.bench(stmt1, globals=ns, budget=HIST_BUDGET)
    r2 = perfmagic.bench(stmt2, globals=ns, budget=HIST_BUDGET)
    t_cmp = time.perf_counter()
    rc = perfmagic.compare(r1, r2)
    wall = time.perf_counter() - t0
    cmp_s = time.perf_counter() - t_cmp
    load = meter.stop()
    c = rc.comparison
    t1, t2 = list(r1.times), list(r2.times)
    m1, m2 = statistics.median(t1), statistics.median(t2)
    raw = compare_samples(t1, t2, paired=False)  # informational: the same bootstrap without the between-run noise
    return {"verdict": c.verdict, "kind_reported": rc.kind, "ratio": c.ratio, "ci": [c.ci_low, c.ci_high],
            "between_run": c.between_run, "drift": rc.drift, "wall_s": wall, "compare_s": cmp_s, **load,
            "runs": [run_info(r1), run_info(r2)],
            "no_floor": {"verdict": raw.verdict, "ci": [raw.ci_low, raw.ci_high]},
            "pyperf": pyperf_significant(t1, t2),
            "threshold": {"median_ratio": m2 / m1},
            "t1_ns": [round(t * 1e9) for t in t1], "t2_ns": [round(t * 1e9) for t in t2]}


def judge_pair(ns: dict[str, Any], stmt_a: str, stmt_b: str) -> dict[str, Any]:
    import perfmagic

    meter = C.LoadMeter().start()
    t0 = time.perf_counter()
    pr = perfmagic.bench_pair(stmt_a, stmt_b, globals=ns, budget=PAIR_BUDGET)
    wall = time.perf_counter() - t0
    load = meter.stop()
    c = pr.comparison
    return {"verdict": c.verdict, "ratio": c.ratio, "ci": [c.ci_low, c.ci_high], "wall_s": wall, **load,
            "pairs": pr.a.n_samples, "number": [pr.a.number, pr.b.number], "stop_reason": pr.a.stop_reason,
            "medians_s": [pr.a.median, pr.b.median], "reference_s": pr.b.env.get("reference_s"),
            "warnings": sorted(set(pr.a.warnings + pr.b.warnings))}


# ---------------------------------------------------------------------------------------------
# summaries
# ---------------------------------------------------------------------------------------------
def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (math.nan, math.nan)
    p = k / n
    den = 1 + z * z / n
    c = (p + z * z / (2 * n)) / den
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, c - h), min(1.0, c + h)


def rate(k: int, n: int) -> str:
    lo, hi = wilson(k, n)
    return f"{k}/{n} = **{k / n:.1%}** ({lo:.0%}–{hi:.0%})" if n else "n/a"


def q(xs: list[float], p: float) -> float:
    s = sorted(xs)
    pos = (len(s) - 1) * p
    i = math.floor(pos)
    j = min(i + 1, len(s) - 1)
    return s[i] + (s[j] - s[i]) * (pos - i)


def select(recs: list[dict[str, Any]], w: str, test: str, kind: str) -> list[dict[str, Any]]:
    return [r for r in recs if r["workload"] == w and r["test"] == test and r["kind"] == kind]


def verdict_row(w: str, kind: str, rs: list[dict[str, Any]], test: str) -> list[Any]:
    counts = {v: sum(r["verdict"] == v for r in rs) for v in VERDICTS}
    n = len(rs)
    if test == "A/A":
        k = counts["faster"] + counts["slower"]
        key = rate(k, n)
    else:
        key = rate(counts["slower"], n)
    ratios = [r["ratio"] for r in rs]
    others = [r["others_cores"] for r in rs]
    return [f"`{w}`", kind, n, counts["faster"], counts["slower"], counts["no real change"], counts["inconclusive"],
            key, f"{statistics.median(r['wall_s'] for r in rs):.2f}",
            f"{statistics.median(ratios):.3f} [{q(ratios, 0.05):.3f}–{q(ratios, 0.95):.3f}]",
            f"{statistics.median(others):.2f} / {max(others):.2f}"]


def judges(rs: list[dict[str, Any]], test: str) -> dict[str, int]:
    """How many historical pairs each judge calls a change (A/A: either way; A/B: 'slower' only)."""
    if test == "A/A":
        return {"pm": sum(r["verdict"] in ("faster", "slower") for r in rs),
                "pm_raw": sum(r["no_floor"]["verdict"] in ("faster", "slower") for r in rs),
                "pyperf": sum(r["pyperf"]["equal_n"] for r in rs),
                "pyperf_verbatim": sum(r["pyperf"]["verbatim"] for r in rs),
                "thr": sum(abs(r["threshold"]["median_ratio"] - 1) > THRESHOLD for r in rs)}
    return {"pm": sum(r["verdict"] == "slower" for r in rs),
            "pm_raw": sum(r["no_floor"]["verdict"] == "slower" for r in rs),
            "pyperf": sum(r["pyperf"]["equal_n"] and r["pyperf"]["mean_ratio"] > 1 for r in rs),
            "pyperf_verbatim": sum(r["pyperf"]["verbatim"] and r["pyperf"]["mean_ratio"] > 1 for r in rs),
            "thr": sum(r["threshold"]["median_ratio"] - 1 > THRESHOLD for r in rs)}


JUDGES = [
    ("pm", "**perfmagic `compare(r1, r2)`** (historical: within-run interval widened by the between-run noise)", False),
    ("pyperf", "pyperf t-test (`is_significant`), first min(n1, n2) samples of each run", False),
    ("thr", "raw threshold: \\|m2/m1 − 1\\| > 10% on the medians", False),
    ("pm_raw", "_perfmagic bootstrap without the between-run noise (`compare_samples(t1, t2)`)_", True),
    ("pyperf_verbatim", "_pyperf `compare_to` logic verbatim (unequal counts → \"significant\")_", True),
]


def between(d: dict[str, Any]) -> float:
    """The between-run noise a historical judgement admitted (JSON of runs before it was called so: ``noise_floor``)."""
    v = d.get("between_run", d.get("noise_floor"))
    return float("nan") if v is None else v


def report(data: dict[str, Any]) -> str:
    recs = data["pairs"]
    cal = data["calibration"]
    names = [w["name"] for w in data["workloads"]]
    n_iter = data["iterations_done"]
    lines: list[str] = []
    hist_walls = [r["wall_s"] for r in recs if r["kind"] == HIST]
    lines.append(data["header"])
    wl = "\n".join(f"- `{w['name']}`: {w['desc']}; planted B: {w['b_desc']}" for w in data["workloads"])
    lines.append(
        f"Workloads:\n\n{wl}\n\n"
        f"torch threads = {data['torch_threads']}. Every call uses perfmagic's defaults except `budget`: "
        f"`perfmagic.bench(stmt, globals=ns, budget={HIST_BUDGET:g})` for each of the two runs of a *historical* "
        f"judgement, judged by `perfmagic.compare(r1, r2)` (kind `historical`: the within-run interval is combined "
        f"with the machine's between-run noise, ±{between(data):.0%} at the median over judgements); "
        f"`perfmagic.bench_pair(stmt_a, stmt_b, globals=ns, budget={PAIR_BUDGET:g})` for a *same-process* "
        f"judgement, verdict from `.comparison`. Defaults kept: `min_effect=0.10`, `precision=0.01`, "
        f"`confidence=0.95`, `memory=True`, warmup `auto`. A given budget is a hard limit. {n_iter} iterations; each "
        f"runs all 8 tasks (2 workloads × A/A, A/B × historical, same-process) in an order shuffled per iteration "
        f"(seed {data['seed']}). *Wall s per judgement*: `time.perf_counter()` around both runs and the "
        f"comparison (historical) or around `bench_pair` (same-process), median. *B/A* is the ratio the verdict "
        f"was based on (median and 5–95th percentile over pairs). *Others' CPU*: cores kept busy by other "
        f"processes during the judgement (`/proc/stat`), median / max; over the whole run "
        f"{data['others_cores_whole_run']:.2f} cores on average (load average {data['loadavg']['start']} at the "
        f"start, {data['loadavg']['end']} at the end). Rates are given with their Wilson 95% interval. Total run "
        f"time {data['total_wall_s'] / 60:.1f} min. Raw per-pair results, including every per-call sample of the "
        f"historical runs (ns): `benchmarks/results/ab.json`.\n")

    # part 1
    hdr = ["workload", "kind", "pairs", "faster", "slower", "no real change", "inconclusive"]
    tail = ["median wall s per judgement", "B/A median [5–95%]", "others' CPU (median / max)"]
    rows = [verdict_row(w, k, select(recs, w, "A/A", k), "A/A") for w in names for k in KINDS]
    lines.append("### 1. A/A: identical code on both sides\n")
    lines.append(C.md_table(hdr + ["false verdicts (faster + slower)"] + tail, rows))
    aa_verdicts = []
    for w in names:
        for k in KINDS:
            rs = select(recs, w, "A/A", k)
            f = sum(r["verdict"] in ("faster", "slower") for r in rs)
            ok = f / len(rs) <= FALSE_TARGET
            aa_verdicts.append(f"- A/A `{w}`, {k}: false verdicts {f}/{len(rs)} = {f / len(rs):.1%} — target "
                               f"≤ {FALSE_TARGET:.0%} **{'met' if ok else 'MISSED'}**.")
    lines.append("\n".join(aa_verdicts) + "\n")
    # what the verdicts look like: how often A/A gets a usable answer
    nrc = []
    for w in names:
        for k in KINDS:
            rs = select(recs, w, "A/A", k)
            c = sum(r["verdict"] == "no real change" for r in rs)
            nrc.append(f"`{w}` {k} {c}/{len(rs)}")
    lines.append("A/A pairs answered \"no real change\" (the useful answer; \"inconclusive\" is safe but says "
                 "\"measure longer\"): " + ", ".join(nrc) + ".\n")
    spread = []
    for w in names:
        rs = select(recs, w, "A/A", HIST)
        big3 = sum(abs(math.log(r["ratio"])) > math.log(1 + between(data)) for r in rs)
        big10 = sum(abs(math.log(r["ratio"])) > math.log(1 + THRESHOLD) for r in rs)
        spread.append(f"`{w}` beyond ±{between(data):.0%} in {big3}/{len(rs)} pairs and beyond ±10% in "
                      f"{big10}/{len(rs)}")
    lines.append("Between-run noise of identical code (historical A/A, ratio of the two runs' medians): "
                 + "; ".join(spread) + ".\n")

    # part 2
    lines.append("### 2. A/B: a planted ~15% slowdown\n")
    crow = []
    for w in data["workloads"]:
        c0, c1 = cal[w["name"]]["start"], cal[w["name"]].get("end")
        def fmt(c: dict[str, Any] | None) -> str:
            if not c:
                return "n/a"
            return (f"**{c['ratio']:.3f}** ({c['ci'][0]:.3f}–{c['ci'][1]:.3f}); medians "
                    f"{C.fmt_time(c['a_median_s'])} → {C.fmt_time(c['b_median_s'])}, {c['pairs']} pairs")
        crow.append([f"`{w['name']}`", f"`{w['stmt_a']}`", w["b_desc"], fmt(c0), fmt(c1)])
    lines.append(f"The planted effect, measured apart from perfmagic: single calls of A and B interleaved ABBA "
                 f"for {data['calibrate_s']:g} s (GC off), median of the per-pair ratios b/a and its "
                 f"distribution-free 95% CI; at the start (after B's size was chosen from a grid of "
                 "candidate sizes, each measured against A in shuffled rounds, as the one nearest +15%: "
                 + "; ".join(f"`{w}` " + ", ".join(f"{h['n_big']:,} → {h['ratio']:.3f}" for h in cal[w]['tuning'])
                             for w in names) + ") and again at the end of the run.\n")
    lines.append(C.md_table(["workload", "A", "B", "true B/A at the start", "true B/A at the end"], crow))
    rows = [verdict_row(w, k, select(recs, w, "A/B", k), "A/B") for w in names for k in KINDS]
    lines.append(C.md_table(hdr + ["detected (\"slower\")"] + tail, rows))
    ab_verdicts = []
    for w in names:
        rs = select(recs, w, "A/B", PAIR)
        d = sum(r["verdict"] == "slower" for r in rs)
        ab_verdicts.append(f"- A/B `{w}`, same-process: detected {d}/{len(rs)} = {d / len(rs):.1%} — target "
                           f"≥ {DETECT_TARGET:.0%} **{'met' if d / len(rs) >= DETECT_TARGET else 'MISSED'}**.")
        rs = select(recs, w, "A/B", HIST)
        d = sum(r["verdict"] == "slower" for r in rs)
        ab_verdicts.append(f"- A/B `{w}`, historical: detected {d}/{len(rs)} = {d / len(rs):.1%} (no target; "
                           f"reported).")
    wrong = [r for r in recs if r["test"] == "A/B" and r["verdict"] in ("faster", "no real change")]
    for r in wrong:
        what = "called the slower code **faster**" if r["verdict"] == "faster" else \
            "answered **no real change** to the planted slowdown"
        extra = ""
        if r["kind"] == HIST:
            m = [x["median_s"] for x in r["runs"]]
            extra = (f"; run medians {C.fmt_time(m[0])} (A) → {C.fmt_time(m[1])} (B), drift guard "
                     f"{r['drift']:+.1%} (between-run noise admitted ±{between(r):.1%})")
        ab_verdicts.append(f"- A/B `{r['workload']}`, {r['kind']}, iteration {r['iteration'] + 1}: {what} "
                           f"(B/A {r['ratio']:.3f}, CI {r['ci'][0]:.3f}–{r['ci'][1]:.3f}{extra}).")
    lines.append("\n".join(ab_verdicts) + "\n")

    # part 3
    lines.append("### 3. The same historical runs, other judges\n")
    lines.append("Each historical pair's two runs (`r1.times`, `r2.times`: perfmagic's per-call samples) judged by: "
                 "pyperf's significance test as `pyperf compare_to` uses it (`pyperf._utils.is_significant`: "
                 "Student's two-sample t-test on the means, 95%, no minimum effect unless `--min-speed` is given). "
                 "pyperf's `tscore` raises on samples of different lengths and `compare_to` "
                 "(`pyperf._compare.is_significant_benchs`) then *calls the difference significant*; perfmagic's "
                 "runs almost never have equal counts, so the main pyperf row applies the test to the first "
                 "min(n1, n2) samples of each run (pyperf's own runs always have equal counts), and the verbatim "
                 "logic is shown in italics. The raw threshold calls a change when the medians differ by more than "
                 "10%. A/B column: pairs called a change in the right direction (slower; for pyperf, significant "
                 f"and mean B > mean A). pyperf {data.get('pyperf_version', '?')}. Rows in italics are informational.\n")
    rows = []
    for w in names:
        aa, ab = select(recs, w, "A/A", HIST), select(recs, w, "A/B", HIST)
        ja, jb = judges(aa, "A/A"), judges(ab, "A/B")
        for key, label, _info in JUDGES:
            rows.append([f"`{w}`", label, rate(ja[key], len(aa)), rate(jb[key], len(ab))])
    lines.append(C.md_table(["workload", "judge", "A/A: false \"change\" calls", "A/B: planted slowdown detected"],
                            rows))
    p3 = []
    for w in names:
        aa = select(recs, w, "A/A", HIST)
        ja = judges(aa, "A/A")
        n = len(aa)
        uneq = sum(len(r["t1_ns"]) != len(r["t2_ns"]) for r in aa)
        verdict = lambda k: "within" if ja[k] / n <= FALSE_TARGET else "**above**"  # noqa: E731
        p3.append(f"- `{w}` A/A false-change rates against the {FALSE_TARGET:.0%} target: perfmagic {ja['pm'] / n:.1%} "
                  f"({verdict('pm')}), pyperf t-test {ja['pyperf'] / n:.1%} ({verdict('pyperf')}), 10% threshold "
                  f"{ja['thr'] / n:.1%} ({verdict('thr')}); pyperf `compare_to` verbatim {ja['pyperf_verbatim'] / n:.1%} "
                  f"({uneq}/{n} pairs had unequal sample counts).")
    lines.append("\n".join(p3) + "\n")

    # notes: how the runs ended
    notes = []
    for w in names:
        hs = [run for r in select(recs, w, "A/A", HIST) + select(recs, w, "A/B", HIST) for run in r["runs"]]
        stops = {s: sum(x["stop_reason"] == s for x in hs) for s in sorted({x["stop_reason"] for x in hs})}
        nsamp = [x["n_samples"] for x in hs]
        ps = select(recs, w, "A/A", PAIR) + select(recs, w, "A/B", PAIR)
        pstops = {s: sum(x["stop_reason"] == s for x in ps) for s in sorted({x["stop_reason"] for x in ps})}
        npairs = [x["pairs"] for x in ps]
        drifts = [abs(r["drift"]) for r in select(recs, w, "A/A", HIST) + select(recs, w, "A/B", HIST)
                  if r["drift"] is not None]
        notes.append(f"- `{w}`: single runs stopped by " + ", ".join(f"{k} {v}×" for k, v in stops.items())
                     + f", {min(nsamp)}–{max(nsamp)} samples (median {statistics.median(nsamp):g}); bench_pair stopped by "
                     + ", ".join(f"{k} {v}×" for k, v in pstops.items())
                     + f", {min(npairs)}–{max(npairs)} pairs (median {statistics.median(npairs):g}). Drift guard "
                     f"(informational, not used by the verdict): |reference B/A − 1| median "
                     f"{statistics.median(drifts) if drifts else float('nan'):.1%}, max "
                     f"{max(drifts) if drifts else float('nan'):.1%}.")
    import re

    tally: dict[str, int] = {}
    n_results = 0
    for r in recs:
        ws_sets = [run["warnings"] for run in r["runs"]] if r["kind"] == HIST else [r["warnings"]]
        for ws in ws_sets:
            n_results += 1
            for key in sorted({re.sub(r"\d+(\.\d+)?", "N", x.split(":")[0].split(" (")[0]) for x in ws}):
                tally[key] = tally.get(key, 0) + 1
    if tally:
        notes.append(f"- warnings attached to the {n_results} perfmagic results (historical: each run; same-process: "
                     "both sides together), how many results carried each: "
                     + "; ".join(f"\"{k}\" {v}" for k, v in sorted(tally.items(), key=lambda kv: -kv[1])))
    refs = sorted([run["reference_s"] for r in recs if r["kind"] == HIST for run in r["runs"] if run["reference_s"]]
                  + [r["reference_s"] for r in recs if r["kind"] == PAIR and r["reference_s"]])
    if refs:
        notes.append(f"- drift-guard reference time (`env[\"reference_s\"]`) over all {len(refs)} results: min "
                     f"{C.fmt_time(refs[0])}, quartiles {C.fmt_time(q(refs, 0.25))} / {C.fmt_time(q(refs, 0.5))} / "
                     f"{C.fmt_time(q(refs, 0.75))}, max {C.fmt_time(refs[-1])}.")
    lines.append("How the runs ended:\n\n" + "\n".join(notes) + "\n")
    lines.append(f"Median wall time per historical judgement over all pairs: {statistics.median(hist_walls):.2f} s "
                 f"(of which `compare()` {statistics.median(r['compare_s'] for r in recs if r['kind'] == HIST):.2f} s).\n")
    return "\n".join(lines)


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Indented header, then one line per pair (the per-call samples make the lines long)."""
    head = {k: v for k, v in data.items() if k != "pairs"}
    s = json.dumps(head, indent=1, default=str)
    body = ",\n".join("  " + json.dumps(p, separators=(",", ":"), default=str) for p in data["pairs"])
    s = s[:-2] + ',\n "pairs": [\n' + body + "\n ]\n}\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
    tmp.write_text(s, encoding="utf-8")
    os.replace(tmp, path)


SECTION_ROW = ("false \"faster\"/\"slower\" verdicts on identical code and detection of a planted 15% slowdown, "
               "historical runs vs same-process A/B, vs pyperf's t-test and a 10% threshold")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=None, help="pairs per workload, test and kind (default 40)")
    C.add_args(ap, "1 pair per task on tiny inputs, budgets 0.05/0.1 s, a 0.05 s calibration, one torch thread "
               "(smoke test; never written to the docs)")
    ap.add_argument("--calibrate", type=float, default=None, metavar="S",
                    help="seconds of interleaved A/B single calls to measure the planted effect (default 15, --quick 0.05)")
    ap.add_argument("--seed", type=int, default=2026, help="seed of the per-iteration task order")
    ap.add_argument("--json", default=str(C.RESULTS / "ab.json"), help="where to write per-pair data")
    ap.add_argument("--report-only", metavar="JSON", help="re-render the section from a saved JSON; run nothing")
    args = ap.parse_args()

    if args.report_only:
        data = json.loads(Path(args.report_only).read_text(encoding="utf-8"))
        C.publish("ab", report(data), args, row=SECTION_ROW)
        return 0

    global HIST_BUDGET, PAIR_BUDGET
    if args.quick:  # every path, on tiny inputs: ~50 µs calls, so a tiny budget still gives samples
        HIST_BUDGET, PAIR_BUDGET = 0.05, 0.1
        for w, n in zip(WORKLOADS, (QUICK_NP_N, QUICK_MM_N)):
            w["n"] = n
            w["desc"] = (f"quick: `np.sort(a)`, a = {n:,} float64" if w["name"] == "np_sort"
                         else f"quick: `x @ y`, fp32 {n}×{n}")
    n_pairs = args.pairs or (1 if args.quick else 40)
    cal_s = args.calibrate if args.calibrate is not None else (0.05 if args.quick else 15.0)
    if n_pairs < 1:
        ap.error("--pairs must be >= 1")

    import pyperf
    import torch

    import perfmagic

    torch.set_num_threads(1 if args.quick else C.usable_cores())  # smoke: no spin-waits on a loaded machine
    tmp = tempfile.TemporaryDirectory(prefix="perfmagic-ab-")
    os.environ["PERFMAGIC_LEDGER_DIR"] = str(Path(tmp.name) / "ledger")
    import numpy as np

    head = C.header("One change at a time: A/A and A/B verdicts (CPU)")
    t_start = time.perf_counter()
    load_start = C.loadavg()
    run_meter = C.LoadMeter().start()
    out = Path(args.json)

    ns: dict[str, Any] = {"np": np, "torch": torch}
    workloads = []
    calibration: dict[str, Any] = {}
    for w in WORKLOADS:
        print(f"calibrating {w['name']}: tuning B's size for B/A ≈ {1 + PLANT:.2f}", flush=True)
        nb, hist = tune(ns, w, max(0.05 if args.quick else 3.0, cal_s / 2))
        print("  " + ", ".join(f"{h['n_big']:,}: {h['ratio']:.3f}" for h in hist) + f" ({hist[0]['rounds']} rounds)",
              flush=True)
        e = effect(*interleaved(ns, w["stmt_a"], w["stmt_b"], cal_s))
        print(f"  chosen n_big {nb:,}: true B/A {e['ratio']:.3f} (95% CI {e['ci'][0]:.3f}–{e['ci'][1]:.3f}), "
              f"A {C.fmt_time(e['a_median_s'])}, B {C.fmt_time(e['b_median_s'])}, {e['pairs']} pairs", flush=True)
        b_desc = (f"`np.sort(a_big)`, a_big = {nb:,} float64" if w["name"] == "np_sort"
                  else f"`xb @ yb`, fp32 {nb}×{nb}")
        workloads.append({k: v for k, v in w.items() if k != "grid"} | {"n_big": nb, "b_desc": b_desc})
        calibration[w["name"]] = {"tuning": hist, "start": e}

    print("warm-up: one untimed bench and bench_pair per workload", flush=True)
    for w in workloads:
        perfmagic.bench(w["stmt_a"], globals=ns, budget=0.02 if args.quick else 0.3)
        perfmagic.bench_pair(w["stmt_a"], w["stmt_b"], globals=ns, budget=0.05 if args.quick else 0.5)

    tasks = [(w["name"], test, kind) for w in workloads for test in ("A/A", "A/B") for kind in KINDS]
    by_name = {w["name"]: w for w in workloads}
    data: dict[str, Any] = {
        "header": head, "command": C.command(), "torch_threads": torch.get_num_threads(),
        "pyperf_version": pyperf.__version__, "seed": args.seed,
        "budgets": {"bench": HIST_BUDGET, "bench_pair": PAIR_BUDGET}, "calibrate_s": cal_s,
        "workloads": workloads, "calibration": calibration, "pairs_requested": n_pairs,
        "iterations_done": 0, "pairs": []}
    t_loop = time.perf_counter()
    for i in range(n_pairs):
        order = tasks[:]
        random.Random(args.seed * 1000 + i).shuffle(order)
        for name, test, kind in order:
            w = by_name[name]
            stmt_b = w["stmt_a"] if test == "A/A" else w["stmt_b"]
            rec = (judge_historical if kind == HIST else judge_pair)(ns, w["stmt_a"], stmt_b)
            rec.update({"iteration": i, "workload": name, "test": test, "kind": kind})
            data["pairs"].append(rec)
        data["iterations_done"] = i + 1
        write_json(out, data)
        el = time.perf_counter() - t_loop
        it = [r for r in data["pairs"] if r["iteration"] == i]
        print(f"iteration {i + 1}/{n_pairs} ({el / 60:.1f} min, ETA {el / (i + 1) * (n_pairs - i - 1) / 60:.1f} min): "
              + "; ".join(f"{r['workload']} {r['test']} {r['kind'][:4]} {r['verdict']} {r['ratio']:.3f}" for r in it),
              flush=True)

    for w in workloads:
        e = effect(*interleaved(ns, w["stmt_a"], w["stmt_b"], cal_s))
        calibration[w["name"]]["end"] = e
        print(f"end calibration {w['name']}: true B/A {e['ratio']:.3f} (95% CI {e['ci'][0]:.3f}–{e['ci'][1]:.3f})",
              flush=True)
    hist_between = [r["between_run"] for r in data["pairs"] if r["kind"] == HIST]
    data["between_run"] = statistics.median(hist_between) if hist_between else None
    data["total_wall_s"] = time.perf_counter() - t_start
    data["others_cores_whole_run"] = run_meter.stop()["others_cores"]
    data["loadavg"] = {"start": load_start, "end": C.loadavg()}
    write_json(out, data)

    print(f"per-pair data written to {out}")
    C.publish("ab", report(data), args, row=SECTION_ROW)
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
