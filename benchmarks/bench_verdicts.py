"""Verdicts of the default ``%perf compare`` flow on planted changes, beside 0, 1 and 2 busy neighbours.

A *trial* is what a notebook user does, in one IPython shell (``start_ipython()`` + ``%load_ext
perfmagic``) whose working directory is one temporary folder for the whole run, so the SQLite ledger
accumulates across trials like a notebook's (and with it the A/A evidence that historical verdicts are
calibrated with):

1. ``%%gpubench -l LABEL -q --baseline`` on cell A (default budget), the run marked as the baseline;
2. the planted change, if any (a cell that mutates data in place or redefines a function);
3. ``%%gpubench -l LABEL -q`` on cell B;
4. ``rc = %perf compare -o -q``: the default verdict. perfmagic re-measures A and B interleaved in this
   process when both can still run here (``kind`` "interleaved"), else compares the recorded samples
   (``kind`` "historical") and prints why; that reason is kept.

Steps 1–4 run inside ``busy_neighbours(n)`` (n spinning processes; n = 0 starts none and only measures
the load). Every label is unique to its trial. Each iteration runs every (case, load) once, in an order
shuffled per iteration (seeded), so drift spreads evenly over cases and loads.

The two *original* runs A and B of every trial are also judged offline by historical judges (no
measuring): **old** — the behaviour before the between-run calibration: ``ratio_ci`` of the per-call
samples, the interval widened linearly to ``lo/(1+f), hi*(1+f)`` with ``f = 0.03``, or ``0.03 + |drift|``
when the drift guard's reference ratio ``|ref_B/ref_A − 1|`` exceeds 3%, then ``decide`` at 10%;
**new** — ``perfmagic.timing.history.compare(A, B, ledger=...)`` (between-run noise from this ledger's
A/A evidence); **guard** — *new* plus the drift guard's reference ratio ``log(1+|drift|)`` in
quadrature (to decide whether the drift guard earns a place in verdicts); and three other sizes of
the between-run noise from the same evidence: **q95** (interpolated 95% quantile), **mad**
(3.7 × the median |log ratio|, 2.5 σ of a normal) and **fixed3** (a fixed 3%), all in quadrature.

Planted truths: A/A cases (identical code) are "no real change", A/B cases are "slower". The effect
actually planted is measured apart from perfmagic at every load, at the start and at the end: single
calls of A and B interleaved ABBA (GC off) for ``--calibrate`` seconds, median of per-pair ratios b/a
with its distribution-free 95% CI.

Columns: *right & decisive* = the true verdict ("slower" for A/B, "no real change" for A/A);
*confidently wrong* = the wrong direction, "no real change" to a planted change, or "faster"/"slower"
on identical code; *inconclusive* = the rest. Rates are k/n with Wilson 95% intervals. *re-measured* =
share of default verdicts from the interleaved re-measurement; *s/judgement* = median wall time of the
``%perf compare`` call; *B/A* = median of the default flow's ratios; *others' CPU* = median cores kept
busy by other processes during the trial (``Neighbours.others_cores``); *oversub. named* = trials where
"oversubscri…" appears in the comparison's text or in run A's or B's warnings. Also reported: why the
default flow fell back to the recorded samples; the A/A evidence each re-measurement added to the ledger
(re-measured A against the original A); the between-run noise the *new* judge admitted; the median
wall time of a whole trial per case (to size a run).

    .venv/bin/python benchmarks/bench_verdicts.py                       # 20 pairs per case and load
    .venv/bin/python benchmarks/bench_verdicts.py --quick               # smoke test: every case once, tiny inputs and budgets
    .venv/bin/python benchmarks/bench_verdicts.py --report-only benchmarks/results/verdicts.json
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402
from bench_ab import effect, interleaved, q, rate, wilson, write_json  # noqa: E402

NP_N, NP_BIG = 150_000, 175_000      # np.sort ~0.6 ms; B/A ~1.18 on the reference VM
MM_N, MM_BIG = 1000, 1044            # fp32 matmul ~11 ms on 2 threads; B/A ~1.19
LIST_N = 250_000                     # sum(L) of small ints ~1 ms; the change appends a fifth
F_N = 100_000                        # f() = sum(range(F_N)) ~1 ms; redefined to 1.2 * F_N
DOT_N = 4_000_000                    # float(np.dot(arr, arr)), BLAS with its default threads
if C.QUICK:  # a smoke run: every case on inputs ~100x smaller (~10 µs calls), so tiny budgets still give samples
    NP_N, NP_BIG, MM_N, MM_BIG, LIST_N, F_N, DOT_N = 1_500, 1_750, 48, 50, 2_500, 1_000, 40_000
SLEEP_A, SLEEP_B = ("0.0005", "0.0006") if C.QUICK else ("0.005", "0.006")
TARGET_WRONG, TARGET_RIGHT = 0.01, {0: 0.90, 1: 0.75}
TARGET_WALL_S, FAST_CALL_S = 2.0, 0.020
F_SRC = "def f():\n    return sum(range({n}))\n"

INIT = f"""\
import time
import numpy as np
import torch
_rng = np.random.default_rng(0)
a, a_big = _rng.random({NP_N}), _rng.random({NP_BIG})
arr = _rng.random({DOT_N})
_g = torch.Generator().manual_seed(0)
x, y = torch.randn({MM_N}, {MM_N}, generator=_g), torch.randn({MM_N}, {MM_N}, generator=_g)
xb, yb = torch.randn({MM_BIG}, {MM_BIG}, generator=_g), torch.randn({MM_BIG}, {MM_BIG}, generator=_g)
"""


def _case(name: str, slug: str, a: str, b: str | None = None, *, setup: str | None = None,
          change: str | None = None, cal: tuple[str, str] | None = None) -> dict[str, Any]:
    ab = b is not None and b != a or change is not None
    return {"name": name, "slug": slug, "a": a, "b": b or a, "setup": setup, "change": change,
            "truth": "slower" if ab else "no real change", "cal": cal or ((a, b or a) if ab else None)}


CASES: list[dict[str, Any]] = [
    _case("sleep A/A", "sleep-aa", f"time.sleep({SLEEP_A})"),
    _case("sleep A/B", "sleep-ab", f"time.sleep({SLEEP_A})", f"time.sleep({SLEEP_B})"),
    _case("numpy A/A", "numpy-aa", "np.sort(a)"),
    _case("numpy A/B", "numpy-ab", "np.sort(a)", "np.sort(a_big)"),
    _case("torch A/A", "torch-aa", "x @ y"),
    _case("torch A/B", "torch-ab", "x @ y", "xb @ yb"),
    _case("in-place change", "inplace", "sum(L)", setup=f"L = list(range(200)) * {LIST_N // 200}",
          change="L.extend(L[:len(L) // 5])", cal=("sum(L_a)", "sum(L_b)")),
    _case("redefined function", "redef", "f()", setup=F_SRC.format(n=F_N),
          change=F_SRC.format(n=int(1.2 * F_N)), cal=("f_old()", "f_new()")),
    _case("oversubscription A/A", "oversub-aa", "float(np.dot(arr, arr))"),
]
BY_SLUG = {c["slug"]: c for c in CASES}
QUICK_FLAGS = ""  # --quick: " -b 0.05", a tiny budget for every %%gpubench and %perf compare
FALLBACK = "perfmagic: historical comparison (recorded samples) because "


# ---------------------------------------------------------------------------------------------
# one trial
# ---------------------------------------------------------------------------------------------
def cell(ip: Any, src: str) -> None:
    res = ip.run_cell(src, store_history=False, silent=True)
    if not res.success:
        raise RuntimeError(f"cell failed: {src!r}: {res.error_in_exec or res.error_before_exec!r}")


JUDGES = ("old", "new", "guard", "q95", "mad", "fixed3")


def score(verdict: str | None, truth: str) -> str:
    if verdict == truth:
        return "right"
    return "inconclusive" if verdict in ("inconclusive", None) else "wrong"


def judged(rc: Any, truth: str) -> dict[str, Any]:
    c = rc.comparison
    return {"verdict": c.verdict, "score": score(c.verdict, truth), "ratio": c.ratio, "ci": [c.ci_low, c.ci_high],
            "between_run": getattr(c, "between_run", None), "notes": list(rc.notes)}


def old_historical(ra: dict[str, Any], rb: dict[str, Any], truth: str) -> dict[str, Any]:
    """The historical verdict before the between-run calibration (3% floor + linear drift widening)."""
    from perfmagic.timing.compare import decide, ratio_ci
    from perfmagic.timing.history import per_call

    ref_a, ref_b = (ra.get("env") or {}).get("reference_s"), (rb.get("env") or {}).get("reference_s")
    drift = ref_b / ref_a - 1 if ref_a and ref_b else 0.0
    floor = 0.03 + abs(drift) if abs(drift) > 0.03 else 0.03
    r, lo, hi = ratio_ci(per_call(ra), per_call(rb))
    lo, hi = lo / (1 + floor), hi * (1 + floor)
    verdict, _ = decide(r, lo, hi, 0.10)
    return {"verdict": verdict, "score": score(verdict, truth), "ratio": r, "ci": [lo, hi], "floor": floor,
            "drift": drift}


def run_info(r: Any) -> dict[str, Any]:
    return {"id": r.run_id, "median_s": r.median, "n_samples": r.n_samples, "stop_reason": r.stop_reason,
            "reference_s": r.env.get("reference_s"), "warnings": list(r.warnings)}


def trial(ip: Any, case: dict[str, Any], load: int, label: str) -> dict[str, Any]:
    from perfmagic.core.neighbours import busy_neighbours
    from perfmagic.storage.session import current_ledger
    from perfmagic.timing.history import compare, per_call

    if case["setup"]:
        cell(ip, case["setup"])
    said, shown = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(shown), busy_neighbours(load) as nb:
        ra = ip.run_cell_magic("gpubench", f"-l {label} -q -o --baseline{QUICK_FLAGS}", case["a"])
        if case["change"]:
            cell(ip, case["change"])
        rb = ip.run_cell_magic("gpubench", f"-l {label} -q -o{QUICK_FLAGS}", case["b"])
        if ra is None or rb is None:
            raise RuntimeError(f"%%gpubench returned nothing: {shown.getvalue()[-500:]}")
        with contextlib.redirect_stdout(said):
            t1 = time.perf_counter()
            rc = ip.run_line_magic("perf", f"compare -o -q{QUICK_FLAGS}")
            wall = time.perf_counter() - t1
    trial_s = time.perf_counter() - t0
    out = said.getvalue()
    reason = next((ln[len(FALLBACK):] for ln in out.splitlines() if ln.startswith(FALLBACK)), None)
    texts = [rc.text(), *ra.warnings, *rb.warnings]
    rec: dict[str, Any] = {
        "case": case["slug"], "load": load, "label": label, "truth": case["truth"], "others_cores": nb.others_cores,
        "trial_s": trial_s, "a": run_info(ra), "b": run_info(rb),
        "oversub_named": any("oversubscri" in t.lower() for t in texts),
        "default": {**judged(rc, case["truth"]), "kind": rc.kind, "method": rc.comparison.method, "wall_s": wall,
                    "fallback": reason, "said": out.strip(),
                    "evidence_n": getattr(getattr(rc, "between_run", None), "n", None)}}
    if rc.kind == "interleaved":  # the re-measured A and B: rerun/original of A is the A/A evidence it adds
        rec["default"]["rerun_median_s"] = [statistics.median(per_call(rc.a)), statistics.median(per_call(rc.b))]
    # the original recorded runs, judged offline by the historical judges
    led = current_ledger(ip.user_ns)
    row_a, row_b = led.get(ra.run_id), led.get(rb.run_id)
    rec["old"] = old_historical(row_a, row_b, case["truth"])
    rec["new"] = judged(compare(row_a, row_b, ledger=led), case["truth"])
    # the drift guard on top: its reference-workload ratio added in quadrature to the same noise
    ref_a, ref_b = (row_a.get("env") or {}).get("reference_s"), (row_b.get("env") or {}).get("reference_s")
    q_new = rec["new"]["between_run"] or 0.0
    drift = ref_b / ref_a - 1 if ref_a and ref_b else 0.0
    q_guard = math.expm1(math.hypot(math.log1p(q_new), math.log1p(abs(drift))))
    rec["guard"] = judged(compare(row_a, row_b, ledger=led, between_run=q_guard), case["truth"])
    # other ways to size the between-run noise from the same evidence, to choose the estimator
    from perfmagic.timing.betweenrun import FLOOR, PRIOR, evidence

    ds = sorted(evidence(led.rows(notebook=None), row_b.get("env")))
    rec["evidence"] = ds
    for name, q in estimators(ds, FLOOR, PRIOR).items():
        rec[name] = judged(compare(row_a, row_b, ledger=led, between_run=q), case["truth"])
    return rec


def estimators(ds: list[float], floor: float, prior: float) -> dict[str, float]:
    """Alternative between-run noises from the sorted A/A evidence ``ds`` (|log ratio| draws)."""
    n = len(ds)
    out = {"fixed3": 0.03}
    if n >= 5:
        pos = 0.95 * (n - 1)  # interpolated 95% quantile
        lo = int(pos)
        q95 = ds[lo] + (ds[min(lo + 1, n - 1)] - ds[lo]) * (pos - lo)
        out["q95"] = max(floor, math.expm1(q95))
        out["mad"] = max(floor, math.expm1(3.7 * ds[(n - 1) // 2]))  # 2.5 sigma for a normal
    else:
        out["q95"] = out["mad"] = max(prior, math.expm1(ds[-1]) if ds else 0.0)
    return out


# ---------------------------------------------------------------------------------------------
# the planted effect, measured apart from perfmagic
# ---------------------------------------------------------------------------------------------
def calibrate(ns: dict[str, Any], cases: list[dict[str, Any]], loads: list[int], seconds: float,
              when: str) -> dict[str, Any]:
    from perfmagic.core.neighbours import busy_neighbours

    cal = {k: v for k, v in ns.items() if not k.startswith("__")}
    la = list(range(200)) * (LIST_N // 200)  # small ints: the cost does not depend on where the heap put them
    lb = la.copy()
    lb.extend(lb[:len(lb) // 5])
    cal["L_a"], cal["L_b"] = la, lb
    for name, n in (("f_old", F_N), ("f_new", int(1.2 * F_N))):
        exec(F_SRC.format(n=n), cal)
        cal[name] = cal.pop("f")
    out: dict[str, Any] = {}
    for c in cases:
        if c["cal"] is None:
            continue
        for load in loads:
            with busy_neighbours(load) as nb:
                e = effect(*interleaved(cal, c["cal"][0], c["cal"][1], seconds))
            e["others_cores"] = nb.others_cores
            out[f"{c['slug']}@{load}"] = e
            print(f"  {when}: {c['name']} at {load} neighbour(s): true B/A {e['ratio']:.3f} "
                  f"({e['ci'][0]:.3f}–{e['ci'][1]:.3f}), A {C.fmt_time(e['a_median_s'])}", flush=True)
    return out


# ---------------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------------
def counts(rs: list[dict[str, Any]], judge: str) -> tuple[int, int, int, int]:
    xs = [r[judge]["score"] for r in rs if r.get(judge)]
    return len(xs), xs.count("right"), xs.count("wrong"), xs.count("inconclusive")


def short(k: int, n: int) -> str:
    if not n:
        return "n/a"
    lo, hi = wilson(k, n)
    return f"{k}/{n} ({lo:.0%}–{hi:.0%})"


def med(xs: list[float], fmt: str = "{:.2f}") -> str:
    xs = [x for x in xs if x is not None and x == x]
    return fmt.format(statistics.median(xs)) if xs else "n/a"


def default_row(name: str, load: Any, rs: list[dict[str, Any]]) -> list[Any]:
    n, k_r, k_w, k_i = counts(rs, "default")
    inter = sum(r["default"]["kind"] == "interleaved" for r in rs)
    return [name, load, n, rate(k_r, n), rate(k_w, n), k_i, f"{inter}/{n}",
            f"{sum(r['oversub_named'] for r in rs)}/{n}", med([r["default"]["wall_s"] for r in rs]),
            med([r["default"]["ratio"] for r in rs], "{:.3f}"), med([r["others_cores"] for r in rs])]


def report(data: dict[str, Any]) -> str:
    ok = [r for r in data["pairs"] if "error" not in r]
    errors = [r for r in data["pairs"] if "error" in r]
    loads: list[int] = data["loads"]
    cases = [BY_SLUG[s] for s in data["cases"]]
    sel = lambda s, ld: [r for r in ok if r["case"] == s and r["load"] == ld]  # noqa: E731
    lines = [data["header"]]
    lines.append(
        f"Planted A/A and A/B cases through the default user flow — `%%gpubench --baseline` A, the change, "
        f"`%%gpubench` B, `%perf compare` (defaults everywhere) — in one IPython shell and one ledger, beside "
        f"{', '.join(map(str, loads))} busy neighbour processes; {data['iterations_done']} pairs per case and "
        f"load, (case, load) order shuffled per iteration (seed {data['seed']}), torch threads "
        f"{data['torch_threads']}. Method and column meanings: the docstring of `benchmarks/bench_verdicts.py`. "
        f"Total run time {data.get('total_wall_s', float('nan')) / 60:.1f} min.\n")

    crow = []
    for c in cases:
        if c["cal"] is None:
            continue
        cells = []
        for ld in loads:
            s, e = data["calibration"]["start"].get(f"{c['slug']}@{ld}"), data["calibration"].get("end", {}).get(
                f"{c['slug']}@{ld}")
            f = lambda x: f"{x['ratio']:.3f} ({x['ci'][0]:.3f}–{x['ci'][1]:.3f})" if x else "n/a"  # noqa: E731
            cells.append(f"{f(s)} → {f(e)}")
        a_med = data["calibration"]["start"].get(f"{c['slug']}@0", {}).get("a_median_s", math.nan)
        chg = f"`{' '.join(ln.strip() for ln in c['change'].splitlines())}`" if c["change"] else f"`{c['b']}`"
        crow.append([c["name"], f"`{c['a']}` ({C.fmt_time(a_med)})", chg, *cells])
    lines.append(f"**Planted effects** (true B/A, start → end of the run; ABBA single calls for "
                 f"{data['calibrate_s']:g} s, median of per-pair ratios, 95% CI). A/A cases are 1 by construction.\n")
    lines.append(C.md_table(["case", "A (median call)", "B / change", *[f"{ld} neighbour(s)" for ld in loads]], crow))

    hdr = ["case", "neighbours", "trials", "right & decisive", "confidently wrong", "inconcl.", "re-measured",
           "oversub. named", "s/judgement", "B/A", "others' CPU"]
    lines.append("**Default flow** (`%perf compare -o -q` after the two runs):\n")
    lines.append(C.md_table(hdr, [default_row(c["name"], ld, sel(c["slug"], ld)) for c in cases for ld in loads]))

    lines.append("**All cases pooled, against the targets** (confidently wrong ≤ 1% at every load; right & "
                 "decisive ≥ 90% at 0 neighbours and ≥ 75% at 1; ≤ 2 s per judgement for calls ≤ 20 ms):\n")
    prow, verdicts = [], []
    for ld in loads:
        rs = [r for r in ok if r["load"] == ld]
        n, k_r, k_w, _ = counts(rs, "default")
        prow.append(default_row("**all**", ld, rs))
        if not n:
            continue
        fast = [r["default"]["wall_s"] for r in rs if r["a"]["median_s"] <= FAST_CALL_S]
        ok_w = "met" if k_w / n <= TARGET_WRONG else "**MISSED**"
        msg = f"- {ld} neighbour(s): confidently wrong {k_w / n:.1%} (≤ {TARGET_WRONG:.0%}: {ok_w})"
        if ld in TARGET_RIGHT:
            ok_r = "met" if k_r / n >= TARGET_RIGHT[ld] else "**MISSED**"
            msg += f"; right & decisive {k_r / n:.1%} (≥ {TARGET_RIGHT[ld]:.0%}: {ok_r})"
        else:
            msg += f"; right & decisive {k_r / n:.1%} (no target)"
        if fast:
            p95 = q(fast, 0.95)
            msg += (f"; s/judgement for calls ≤ 20 ms ({len(fast)} trials): median {statistics.median(fast):.2f} "
                    f"({'met' if statistics.median(fast) <= TARGET_WALL_S else '**MISSED**'}), p95 {p95:.2f} "
                    f"({'met' if p95 <= TARGET_WALL_S else '**MISSED**'}), max {max(fast):.2f}")
        verdicts.append(msg + ".")
    lines.append(C.md_table(hdr, prow))
    lines.append("\n".join(verdicts) + "\n")

    reasons: dict[str, int] = {}
    for r in ok:
        if r["default"]["fallback"]:
            key = f"{BY_SLUG[r['case']]['name']}: " + re.sub(r"#\d+", "#N", r["default"]["fallback"])
            reasons[key] = reasons.get(key, 0) + 1
    if reasons:
        lines.append("Why the default flow fell back to the recorded samples (trials):\n\n"
                     + "\n".join(f"- {v}× {k}" for k, v in sorted(reasons.items(), key=lambda kv: -kv[1])) + "\n")

    ev = []
    for c in cases:
        ds = [abs(r["default"]["rerun_median_s"][0] / r["a"]["median_s"] - 1) for r in ok
              if r["case"] == c["slug"] and r["default"].get("rerun_median_s")]
        if ds:
            ev.append(f"{c['name']} {statistics.median(ds):.1%} / {max(ds):.1%}")
    if ev:
        lines.append("A/A evidence the re-measurements added to the ledger (|median of re-measured A / median of "
                     "A − 1|, median / max over trials): " + "; ".join(ev) + ".\n")

    jrow = []
    for c in [*cases, None]:
        for ld in loads:
            rs = [r for r in ok if r["load"] == ld and (c is None or r["case"] == c["slug"])]
            row: list[Any] = [c["name"] if c else "**all**", ld]
            for j in JUDGES:
                n, k_r, k_w, _ = counts(rs, j)
                row += [short(k_r, n), short(k_w, n)]
            row.append(med([r["new"]["between_run"] for r in rs], "±{:.0%}"))
            jrow.append(row)
    lines.append("**Historical judges on the same original runs A and B** (offline, nothing re-measured): old = "
                 "3% floor + linear drift widening; new = `history.compare` (between-run noise from the ledger's "
                 "A/A evidence); guard = new plus the drift guard's reference ratio in quadrature; other sizes of the between-run noise from the "
                 "same evidence: q95 = interpolated 95% quantile, mad = 3.7 × median |log ratio|, fixed3 = a fixed "
                 "3% (all in quadrature, ≥ 2%, the 20% prior below 5 pairs). right = right & decisive, wrong = "
                 "confidently wrong (Wilson 95%).\n")
    lines.append(C.md_table(["case", "neighbours"] + [f"{j} {w}" for j in JUDGES for w in ("right", "wrong")]
                            + ["new: between-run noise (median)"], jrow))

    sizing = [f"{c['name']} {med([r['trial_s'] for r in ok if r['case'] == c['slug']], '{:.1f}')} s"
              for c in cases]
    lines.append("Median wall time of a whole trial (neighbours started, A, change, B, `%perf compare`): "
                 + "; ".join(sizing) + ".\n")
    if errors:
        lines.append(f"{len(errors)} trial(s) failed and are left out: "
                     + "; ".join(f"{r['case']}@{r['load']}: {r['error'][:120]}" for r in errors[:5]) + "\n")
    return "\n".join(lines)


SECTION_ROW = ("the default `%perf compare` flow on planted A/A and A/B changes at 0, 1 and 2 busy neighbours: "
               "false and missed verdicts, historical vs re-measured")


def write_docs(body: str, args: argparse.Namespace) -> None:
    C.publish("verdicts", body, args, row=SECTION_ROW)


# ---------------------------------------------------------------------------------------------
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=None, help="trials per case and load (default 20, --quick 1)")
    C.add_args(ap, "every case once at 0 neighbours, inputs ~100x smaller, budgets 0.05 s, calibration 0.05 s; "
               "a failing trial stops the run (smoke test; never written to the docs)")
    ap.add_argument("--loads", default=None, help="busy neighbour counts, comma-separated (default 0,1,2; --quick 0)")
    ap.add_argument("--cases", default=",".join(BY_SLUG), help=f"comma-separated, of: {', '.join(BY_SLUG)}")
    ap.add_argument("--calibrate", type=float, default=None, metavar="S",
                    help="seconds of ABBA single calls per A/B case and load (default 4, --quick 0.05)")
    ap.add_argument("--seed", type=int, default=2026, help="seed of the per-iteration order")
    ap.add_argument("--json", default=str(C.RESULTS / "verdicts.json"), help="where to write per-trial data")
    ap.add_argument("--report-only", metavar="JSON", help="re-render the section from a saved JSON; measure nothing")
    args = ap.parse_args()

    if args.report_only:
        data = json.loads(Path(args.report_only).read_text(encoding="utf-8"))
        write_docs(report(data), args)
        return 0

    loads = [int(x) for x in (args.loads or ("0" if args.quick else "0,1,2")).split(",") if x.strip()]
    unknown = [s for s in args.cases.split(",") if s.strip() and s.strip() not in BY_SLUG]
    if unknown or any(ld < 0 for ld in loads):
        ap.error(f"unknown case(s) {unknown}; cases: {', '.join(BY_SLUG)}; loads must be >= 0")
    cases = [BY_SLUG[s.strip()] for s in args.cases.split(",") if s.strip()]
    n_pairs = args.pairs or (1 if args.quick else 20)
    cal_s = args.calibrate if args.calibrate is not None else (0.05 if args.quick else 4.0)

    import torch

    import perfmagic
    from IPython.testing.globalipapp import start_ipython

    torch.set_num_threads(1 if args.quick else C.usable_cores())  # smoke: one thread, no spin-waits on a loaded machine
    os.environ.pop("PERFMAGIC_LEDGER_DIR", None)  # the ledger lives in the working directory, as a user's
    head = C.header("Verdicts: the default `%perf compare` flow on planted A/A and A/B changes (CPU)")
    out = Path(args.json).resolve()
    tmp = tempfile.TemporaryDirectory(prefix="perfmagic-verdicts-")
    os.chdir(tmp.name)
    t_start = time.perf_counter()
    ip = start_ipython()
    ip.run_line_magic("load_ext", "perfmagic")
    cell(ip, INIT)
    print(f"ledger folder {tmp.name}; calibrating the planted effects ({cal_s:g} s each)", flush=True)
    data: dict[str, Any] = {
        "header": head, "command": C.command(), "quick": bool(args.quick), "seed": args.seed, "loads": loads,
        "cases": [c["slug"] for c in cases], "case_defs": cases, "torch_threads": torch.get_num_threads(),
        "calibrate_s": cal_s, "pairs_requested": n_pairs, "iterations_done": 0, "loadavg_start": C.loadavg(),
        "calibration": {"start": calibrate(ip.user_ns, cases, loads, cal_s, "start")}, "pairs": []}
    for c in cases:  # warm-up: imports, first calls; perfmagic.bench records nothing in the ledger
        if c["setup"]:
            cell(ip, c["setup"])
        perfmagic.bench(c["a"], globals=ip.user_ns, budget=0.02 if args.quick else 0.3)
    tasks = [(c, ld) for c in cases for ld in loads]
    if args.quick:  # every case once at the first load (0 unless --loads), the other loads with the last case
        global QUICK_FLAGS
        QUICK_FLAGS = " -b 0.05"
        tasks = [(c, ld) for c, ld in tasks if ld == loads[0]] + [(cases[-1], ld) for ld in loads[1:]]
    t_loop = time.perf_counter()
    for i in range(n_pairs):
        order = tasks[:]
        random.Random(args.seed * 1000 + i).shuffle(order)
        for c, ld in order:
            label = f"{c['slug']}-{ld}-{i}"
            try:
                rec = trial(ip, c, ld, label)
            except Exception as exc:  # noqa: BLE001 - one failed trial is reported, the run goes on
                if args.quick:  # a smoke run fails on the first error, with it
                    raise RuntimeError(f"--quick: trial {label} failed") from exc
                rec = {"case": c["slug"], "load": ld, "label": label, "error": f"{type(exc).__name__}: {exc}"}
            rec["iteration"] = i
            data["pairs"].append(rec)
        data["iterations_done"] = i + 1
        write_json(out, data)
        el = time.perf_counter() - t_loop
        it = [r for r in data["pairs"] if r["iteration"] == i]
        print(f"iteration {i + 1}/{n_pairs} ({el / 60:.1f} min, ETA {el / (i + 1) * (n_pairs - i - 1) / 60:.1f} "
              "min): " + "; ".join(f"{r['label']} " + (f"ERROR {r['error'][:80]}" if "error" in r else
                                   f"{r['default']['verdict']} {r['default']['kind'][:5]} {r['trial_s']:.1f}s")
                                   for r in it), flush=True)
    data["calibration"]["end"] = calibrate(ip.user_ns, cases, loads, cal_s, "end")
    data["total_wall_s"] = time.perf_counter() - t_start
    data["loadavg_end"] = C.loadavg()
    write_json(out, data)
    print(f"per-trial data written to {out}; total run time {data['total_wall_s'] / 60:.1f} min")
    write_docs(report(data), args)
    os.chdir(C.ROOT)
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
