"""Timing quality: perfmagic vs `%timeit` and `torch.utils.benchmark` on three CPU workloads.

Question: when the same code is measured again and again, how much does each tool's answer move
(spread over rounds), and how long does one answer take (wall time per answer)?

Workloads (sizes chosen on the 2-core reference VM; the measured times are in the table):

* ``py_call``  — ``f()`` where ``f`` is ``sum(range(125))``: a ~1 µs Python call
* ``np_sort``  — ``np.sort(a)`` on 130 000 float64: a ~1 ms numpy op
* ``torch_mm`` — ``x @ y``, fp32 1700×1700 matmul: ~30 ms on this CPU

Tools, each giving one "central value" per answer:

* ``%timeit -o -q`` through an IPython ``InteractiveShell`` — ``TimeitResult.average`` (``.best`` is
  shown too, from the same runs)
* ``torch.utils.benchmark.Timer(...).blocked_autorange()`` — ``Measurement.median``
* ``torch.utils.benchmark.Timer(...).adaptive_autorange()`` — ``Measurement.median``
* ``perfmagic.bench(stmt, globals=ns)`` with defaults — ``BenchResult.median``
* ``%%gpubench -q -o --no-plot`` through the same shell — ``BenchResult.median``

torch uses ``len(os.sched_getaffinity(0))`` threads for every tool. For every workload there are
``--rounds`` rounds; in each round every tool runs once, in an order rotated by one every round
(interleaved, same process), so drift of the machine hits every tool equally. One untimed warm-up
pass of every tool runs first (imports, first compilations).

    .venv/bin/python benchmarks/bench_timing_quality.py           # 7 rounds
    .venv/bin/python benchmarks/bench_timing_quality.py --quick   # 3 rounds (smoke test)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

PY_N = 125          # sum(range(PY_N)) ~ 1 µs
NP_N = 130_000      # np.sort of NP_N float64 ~ 1 ms
MM_N = 1700         # fp32 MM_N^3 matmul ~ 30 ms on 2 cores

WORKLOADS = [
    ("py_call", f"~1 µs Python call: `f()`, f = `sum(range({PY_N}))`", "f()"),
    ("np_sort", f"~1 ms numpy: `np.sort(a)`, a = {NP_N:,} float64", "np.sort(a)"),
    ("torch_mm", f"~30 ms torch: `x @ y`, fp32 {MM_N}×{MM_N}", "x @ y"),
]

PM_BENCH = "perfmagic.bench()"
PM_MAGIC = "%%gpubench"
TIMEIT = "%timeit"
TIMEIT_BEST = "%timeit .best"
BLOCKED = "torch blocked_autorange"
ADAPTIVE = "torch adaptive_autorange"
TOOLS = [TIMEIT, BLOCKED, ADAPTIVE, PM_BENCH, PM_MAGIC]
CORR = " ÷ drift guard"  # suffix of the informational drift-corrected perfmagic rows
PERFMAGIC_TOOLS = (PM_BENCH, PM_MAGIC)
CENTRAL = {TIMEIT: "TimeitResult.average", TIMEIT_BEST: "TimeitResult.best (same runs as %timeit)",
           BLOCKED: "Measurement.median", ADAPTIVE: "Measurement.median",
           PM_BENCH: "BenchResult.median", PM_MAGIC: "BenchResult.median"}


def make_namespace() -> dict[str, Any]:
    import numpy as np
    import torch

    exec(f"def f():\n    return sum(range({PY_N}))\n", ns := {"np": np, "torch": torch})
    rng = np.random.default_rng(0)
    ns["a"] = rng.random(NP_N)
    g = torch.Generator().manual_seed(0)
    ns["x"] = torch.randn(MM_N, MM_N, generator=g)
    ns["y"] = torch.randn(MM_N, MM_N, generator=g)
    return ns


def _timeit(ip: Any, stmt: str) -> Any:
    # %timeit merges the *caller's* locals into the user namespace: keep this frame's locals
    # (ip, stmt) free of workload names.
    return ip.run_line_magic("timeit", "-o -q " + stmt)


def make_tools(ip: Any, ns: dict[str, Any]) -> dict[str, Callable[[str], dict[str, Any]]]:
    import torch
    import torch.utils.benchmark as tb

    import perfmagic

    threads = torch.get_num_threads()

    def t_timeit(stmt: str) -> dict[str, Any]:
        r = _timeit(ip, stmt)
        return {"central_s": r.average, "best_s": r.best, "loops": r.loops, "repeat": r.repeat,
                "all_runs_s": list(r.all_runs)}

    def t_blocked(stmt: str) -> dict[str, Any]:
        m = tb.Timer(stmt, globals=ns, num_threads=threads).blocked_autorange()
        return {"central_s": m.median, "mean_s": m.mean, "number_per_run": m.number_per_run,
                "n_times": len(m.times), "times_s": list(m.times)}

    def t_adaptive(stmt: str) -> dict[str, Any]:
        m = tb.Timer(stmt, globals=ns, num_threads=threads).adaptive_autorange()
        return {"central_s": m.median, "mean_s": m.mean, "number_per_run": m.number_per_run,
                "n_times": len(m.times), "times_s": list(m.times)}

    def pm_info(r: Any) -> dict[str, Any]:
        lo, hi = r.ci
        return {"central_s": r.median, "ci_s": [lo, hi], "min_s": r.min, "n_samples": r.n_samples,
                "number": r.number, "stop_reason": r.stop_reason, "tool_wall_s": r.wall_s, "cold_s": r.cold_s,
                "warmup_calls": r.policy.get("warmup_calls"), "warnings": list(r.warnings),
                "notes": list(r.notes), "reference_s": r.env.get("reference_s")}

    def t_bench(stmt: str) -> dict[str, Any]:
        return pm_info(perfmagic.bench(stmt, globals=ns))

    def t_magic(stmt: str) -> dict[str, Any]:
        r = ip.run_cell_magic("gpubench", "-q -o --no-plot", stmt)
        if r is None:
            raise RuntimeError("%%gpubench -q -o returned None")
        return pm_info(r)

    return {TIMEIT: t_timeit, BLOCKED: t_blocked, ADAPTIVE: t_adaptive, PM_BENCH: t_bench, PM_MAGIC: t_magic}


def timed(fn: Callable[[str], dict[str, Any]], stmt: str) -> dict[str, Any]:
    meter = C.LoadMeter().start()
    t0 = time.perf_counter()
    out = fn(stmt)
    out["wall_s"] = time.perf_counter() - t0
    out.update(meter.stop())
    return out


def wait_quiet(max_wait: float, threshold: float = 0.3) -> float:
    """Wait (up to ``max_wait`` s) until other processes use less than ``threshold`` cores; returns the load seen."""
    end = time.perf_counter() + max_wait
    while True:
        m = C.LoadMeter().start()
        time.sleep(0.5)
        load = m.stop()["others_cores"]
        if load < threshold or time.perf_counter() >= end:
            return load
        time.sleep(1.5)


def summarize(rounds: list[dict[str, dict[str, Any]]], tool: str) -> dict[str, float]:
    if tool == TIMEIT_BEST:
        xs = [r[TIMEIT]["best_s"] for r in rounds]
        walls = [r[TIMEIT]["wall_s"] for r in rounds]
    elif tool.endswith(CORR):
        # perfmagic's drift guard: each answer rescaled by (median reference time / this run's reference
        # time), i.e. expressed at the machine's typical speed during this benchmark
        pm = tool[: -len(CORR)]
        refs = [r[pm]["reference_s"] for r in rounds]
        if any(not ref for ref in refs):
            nan = float("nan")
            return {"central_s": nan, "spread_pct": nan, "cv_pct": nan, "wall_s": nan, "min_s": nan, "max_s": nan,
                    "others_median": nan, "others_max": nan}
        mref = statistics.median(refs)
        xs = [r[pm]["central_s"] * mref / ref for r, ref in zip(rounds, refs)]
        walls = [r[pm]["wall_s"] for r in rounds]
    else:
        xs = [r[tool]["central_s"] for r in rounds]
        walls = [r[tool]["wall_s"] for r in rounds]
    key = TIMEIT if tool == TIMEIT_BEST else (tool[: -len(CORR)] if tool.endswith(CORR) else tool)
    others = [r[key]["others_cores"] for r in rounds]
    return {"central_s": statistics.median(xs), "spread_pct": C.spread_pct(xs), "cv_pct": C.cv_pct(xs),
            "wall_s": statistics.median(walls), "min_s": min(xs), "max_s": max(xs),
            "others_median": statistics.median(others), "others_max": max(others)}


def verdicts(name: str, summ: dict[str, dict[str, float]]) -> list[str]:
    others = [t for t in (TIMEIT, BLOCKED, ADAPTIVE)]
    best_spread = min(others, key=lambda t: summ[t]["spread_pct"])
    best_cv = min(others, key=lambda t: summ[t]["cv_pct"])
    fastest = min(others, key=lambda t: summ[t]["wall_s"])
    out = []
    for pm in PERFMAGIC_TOOLS:
        s = summ[pm]
        sp_ok = s["spread_pct"] <= summ[best_spread]["spread_pct"]
        cv_ok = s["cv_pct"] <= summ[best_cv]["cv_pct"]
        wall_ok = s["wall_s"] <= summ[fastest]["wall_s"]
        out.append(
            f"- **{name}, `{pm}`**: smallest spread? **{'yes' if sp_ok else 'no'}** "
            f"({s['spread_pct']:.1f}% vs best other {summ[best_spread]['spread_pct']:.1f}% from `{best_spread}`; "
            f"CV {s['cv_pct']:.2f}% vs best other {summ[best_cv]['cv_pct']:.2f}% from `{best_cv}`"
            f"{'' if cv_ok == sp_ok else ', i.e. by CV: ' + ('yes' if cv_ok else 'no')}). "
            f"Wall time per answer <= fastest other? **{'yes' if wall_ok else 'no'}** "
            f"({s['wall_s']:.2f} s vs {summ[fastest]['wall_s']:.2f} s for `{fastest}`, "
            f"{s['wall_s'] / summ[fastest]['wall_s']:.1f}×).")
    b = summ[TIMEIT_BEST]
    if b["spread_pct"] < min(summ[pm]["spread_pct"] for pm in PERFMAGIC_TOOLS):
        out.append(f"- {name}: note `%timeit`'s `.best` (a minimum, not a central value) moved less "
                   f"({b['spread_pct']:.1f}%) than either perfmagic median.")
    corr = {pm: summ[pm + CORR]["spread_pct"] for pm in PERFMAGIC_TOOLS}
    out.append(f"- {name}: rescaled by perfmagic's drift-guard reference time (informational rows), the perfmagic "
               f"spreads become {corr[PM_BENCH]:.1f}% (`{PM_BENCH}`) and {corr[PM_MAGIC]:.1f}% (`{PM_MAGIC}`), vs "
               f"{summ[PM_BENCH]['spread_pct']:.1f}% and {summ[PM_MAGIC]['spread_pct']:.1f}% raw.")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="3 rounds instead of 7 (smoke test)")
    ap.add_argument("--rounds", type=int, default=None, help="rounds per workload (default 7, --quick 3; >= 2)")
    ap.add_argument("--wait-quiet", type=float, default=0.0, metavar="S",
                    help="before each round wait up to S seconds until other processes use < 0.3 cores (default 0: no wait)")
    ap.add_argument("--no-docs", action="store_true", help="print only; do not write docs/benchmarks.md")
    ap.add_argument("--json", default=str(C.RESULTS / "timing_quality.json"), help="where to write per-round data")
    args = ap.parse_args()
    n_rounds = args.rounds or (3 if args.quick else 7)
    if n_rounds < 2:
        ap.error("--rounds must be at least 2 (spread needs several answers)")

    import torch

    cores = C.usable_cores()
    torch.set_num_threads(cores)

    tmp = tempfile.TemporaryDirectory(prefix="perfmagic-tq-")
    os.environ["PERFMAGIC_LEDGER_DIR"] = str(Path(tmp.name) / "ledger")
    os.environ["IPYTHONDIR"] = str(Path(tmp.name) / "ipython")
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    cfg = Config()
    cfg.HistoryAccessor.enabled = False  # no history database (it would outlive the temporary folder)
    ip = InteractiveShell.instance(config=cfg)
    ip.run_line_magic("load_ext", "perfmagic")
    ns = make_namespace()
    ip.user_ns.update(ns)
    tools = make_tools(ip, ns)
    head = C.header("Timing quality (CPU)")  # date, machine and code state at the start of the run
    t_start = time.perf_counter()
    load_start = C.loadavg()
    run_meter = C.LoadMeter().start()

    print(f"torch threads: {torch.get_num_threads()} (usable cores {cores}); rounds per workload: {n_rounds}", flush=True)
    print("warm-up: every tool once on torch_mm (untimed)", flush=True)
    for t in TOOLS:
        tools[t](WORKLOADS[-1][2])

    data: dict[str, Any] = {"header": head, "command": C.command(),
                            "torch_threads": torch.get_num_threads(), "rounds": n_rounds,
                            "central_value": CENTRAL, "workloads": {}}
    summaries: dict[str, dict[str, dict[str, float]]] = {}
    for name, desc, stmt in WORKLOADS:
        rounds: list[dict[str, Any]] = []
        for r in range(n_rounds):
            k = r % len(TOOLS)
            order = TOOLS[k:] + TOOLS[:k]
            res: dict[str, Any] = {"order": order}
            if args.wait_quiet > 0:
                res["load_before_round"] = wait_quiet(args.wait_quiet)
            for t in order:
                res[t] = timed(tools[t], stmt)
            rounds.append(res)
            print(f"{name} round {r + 1}/{n_rounds}: " + ", ".join(
                f"{t} {C.fmt_time(res[t]['central_s'])} ({res[t]['wall_s']:.2f} s)" for t in order), flush=True)
        summ = {t: summarize(rounds, t) for t in TOOLS + [TIMEIT_BEST] + [pm + CORR for pm in PERFMAGIC_TOOLS]}
        summaries[name] = summ
        data["workloads"][name] = {"description": desc, "stmt": stmt, "rounds": rounds, "summary": summ}

    total = time.perf_counter() - t_start
    run_load = run_meter.stop()
    data["total_wall_s"] = total
    data["others_cores_whole_run"] = run_load["others_cores"]
    data["loadavg"] = {"start": load_start, "end": C.loadavg()}
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1, default=str), encoding="utf-8")

    rows = []
    lines: list[str] = []
    for name, desc, stmt in WORKLOADS:
        summ = summaries[name]
        ref = summ[PM_BENCH]["central_s"]
        for t in TOOLS[:1] + [TIMEIT_BEST] + TOOLS[1:] + [pm + CORR for pm in PERFMAGIC_TOOLS]:
            s = summ[t]
            info = t == TIMEIT_BEST or t.endswith(CORR)
            wall = f"{s['wall_s']:.2f}" if not info else f"({s['wall_s']:.2f}, same runs)"
            tool = f"**`{t}`**" if t in PERFMAGIC_TOOLS else (f"_`{t}`_" if info else f"`{t}`")
            load = f"{s['others_median']:.2f} / {s['others_max']:.2f}" if not info else ""
            rows.append([f"`{name}`", tool, C.fmt_time(s["central_s"]), f"{s['central_s'] / ref:.3f}",
                         f"{s['spread_pct']:.1f}", f"{s['cv_pct']:.2f}", wall, load])
        lines += verdicts(name, summ)
    table = C.md_table(["workload", "tool", "central value (median over rounds)", "÷ perfmagic.bench()",
                        "spread max−min %", "CV %", "wall s per answer", "others' CPU, cores (median / max)"], rows)

    pm_notes = []
    for name, _, _ in WORKLOADS:
        for pm in PERFMAGIC_TOOLS:
            rs = data["workloads"][name]["rounds"]
            stops = sorted({r[pm]["stop_reason"] for r in rs})
            ns_ = [r[pm]["n_samples"] for r in rs]
            nb = [r[pm]["number"] for r in rs]
            warns = sorted({re.sub(r"\d+(\.\d+)?", "N", w.split(":")[0].split(" (")[0])
                            for r in rs for w in r[pm]["warnings"]})
            pm_notes.append(f"- `{name}` `{pm}`: stopped by {', '.join(stops)}; {min(ns_)}–{max(ns_)} samples of "
                            f"{min(nb)}–{max(nb)} calls each"
                            + (f"; warnings seen: {'; '.join(warns)}" if warns else "; no warnings"))

    wl = "\n".join(f"- `{n}`: {d}" for n, d, _ in WORKLOADS)
    body = (head + "\n"
            f"Workloads:\n\n{wl}\n\n"
            f"torch threads = {torch.get_num_threads()} for every tool. {n_rounds} rounds per workload; in each round "
            "every tool gives one answer, in an order rotated every round (same process, after one untimed warm-up "
            "pass). *Central value*: `%timeit -o -q` → `.average` (`.best` shown on its own row, from the same runs); "
            "`torch.utils.benchmark.Timer(..., num_threads=...)` → `.median` of `blocked_autorange()` / "
            "`adaptive_autorange()`; `perfmagic.bench(stmt, globals=ns)` and `%%gpubench -q -o --no-plot` (defaults: "
            "~1 s budget, ±1% CI target) → `.median`. *Spread* = (max − min) / median of the central values over "
            "the rounds; *CV* = sample standard deviation / mean of them. *Wall s per answer* = median over rounds of "
            "`time.perf_counter()` around the call (for perfmagic this includes its memory measurement, "
            "environment capture and drift-guard reference workload). Rows in _italics_ are informational and take "
            "no part in the verdicts: `%timeit .best` is the minimum of `%timeit`'s own runs; `… ÷ drift guard` "
            "rescales each perfmagic answer by the median of its `env[\"reference_s\"]` (a fixed pure-Python "
            "workload timed beside every run) over this run's reference time: the correction for machine drift that "
            "the drift guard (`perfmagic/core/reference.py`) is designed for. Per-round data: "
            f"`benchmarks/results/timing_quality.json`. Total run time {total:.0f} s. *Others' CPU*: cores kept busy "
            "by other processes during each answer (`/proc/stat` busy time minus this process's), median / max over "
            f"the rounds; over the whole run other processes used {run_load['others_cores']:.2f} cores on average "
            f"(load average {load_start} at the start, {data['loadavg']['end']} at the end)"
            + (f"; each round waited up to {args.wait_quiet:g} s for other processes to go below 0.3 cores"
               if args.wait_quiet > 0 else "") + ".\n\n"
            + table + "\nVerdicts (perfmagic compared with the best of `%timeit` average, `blocked_autorange`, "
            "`adaptive_autorange`):\n\n" + "\n".join(lines) + "\n\nperfmagic runs:\n\n" + "\n".join(pm_notes) + "\n")
    print()
    print(body)
    print(f"per-round data written to {out}")
    if not args.no_docs:
        print(f"written to {C.replace_section('timing_quality', body)}")
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
