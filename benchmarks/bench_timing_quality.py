"""Timing quality: perfmagic vs `%timeit` and `torch.utils.benchmark` on three CPU workloads, as a Pareto front.

Question: when the same code is measured again and again, how much does each tool's answer move
(spread over rounds), and how long does one answer take (wall time per answer)? Every tool at every
setting is one point (wall s per answer, spread); perfmagic's points should not be dominated by
(slower *and* noisier than) any other tool's point.

Workloads (sizes chosen on the 2-core reference VM; the measured times are in the tables):

* ``py_call``  — ``f()`` where ``f`` is ``sum(range(125))``: a ~1 µs Python call
* ``np_sort``  — ``np.sort(a)`` on 130 000 float64: a ~1 ms numpy op
* ``torch_mm`` — ``x @ y``, fp32 384×384 matmul: ~1–2 ms on 2 cores

Tools, each giving one "central value" per answer (B runs over ``--budgets``, default 0.1, 0.3, 1, 3 s):

* ``%timeit -o -q`` through an IPython ``InteractiveShell`` — ``TimeitResult.average`` (``.best`` is
  shown too, from the same runs); and ``%timeit -r 7 -n N`` with N sized from a calibration so that
  the 7 repeats take about B (anchor sweep)
* ``torch.utils.benchmark.Timer(...).blocked_autorange()`` (default ``min_run_time=0.2``, and
  ``min_run_time=B``: torch's own knob) and ``.adaptive_autorange()`` — ``Measurement.median``
* ``perfmagic.bench(stmt, globals=ns)`` with defaults and with ``budget=B`` — ``BenchResult.median``
* ``%%gpubench -q -o --no-plot`` (and ``-b B``) through the same shell — ``BenchResult.median``

torch uses ``len(os.sched_getaffinity(0))`` threads for every tool. For every workload there are
``--rounds`` rounds; in each round every tool runs once, in an order rotated every round by
len(tools)/rounds places (interleaved, same process), so drift of the machine hits every tool alike.
One untimed warm-up pass of the default tools runs first (imports, first compilations).

    .venv/bin/python benchmarks/bench_timing_quality.py           # 10 rounds (~8–12 min on 2 cores)
    .venv/bin/python benchmarks/bench_timing_quality.py --quick   # smoke test: 2 rounds of tiny settings, seconds
    .venv/bin/python benchmarks/bench_timing_quality.py --from-json benchmarks/results/timing_quality.json  # re-render only
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
import timeit as _timeit_mod
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

PY_N = 125          # sum(range(PY_N)) ~ 1 µs
NP_N = 130_000      # np.sort of NP_N float64 ~ 1 ms
MM_N = 384          # fp32 MM_N^3 matmul ~ 1-2 ms on 2 cores (the size the issue measured)

WORKLOADS = [
    ("py_call", f"~1 µs Python call: `f()`, f = `sum(range({PY_N}))`", "f()"),
    ("np_sort", f"~1 ms numpy: `np.sort(a)`, a = {NP_N:,} float64", "np.sort(a)"),
    ("torch_mm", f"~1–2 ms torch (CPU-dependent): `x @ y`, fp32 {MM_N}×{MM_N}", "x @ y"),
]
TITLE = "Timing quality (CPU)"
SMOKE_BUDGET = 0.02  # --quick: every budget, and the "default" tools' settings, tiny (a smoke run)

PM_BENCH = "perfmagic.bench()"
PM_MAGIC = "%%gpubench"
TIMEIT = "%timeit"
TIMEIT_BEST = "%timeit .best"
BLOCKED = "torch blocked_autorange"
ADAPTIVE = "torch adaptive_autorange"
DEFAULT_TOOLS = [TIMEIT, BLOCKED, ADAPTIVE, PM_BENCH, PM_MAGIC]


def pm_b(b: float) -> str:
    return f"{PM_BENCH} b={b:g} s"


def magic_b(b: float) -> str:
    return f"{PM_MAGIC} -b {b:g}"


def timeit_b(b: float) -> str:
    return f"{TIMEIT} -r 7 -n ≈{b:g} s"


def blocked_b(b: float) -> str:
    return f"{BLOCKED}({b:g} s)"


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


def _timeit(ip: Any, args: str) -> Any:
    # %timeit merges the *caller's* locals into the user namespace: keep this frame's locals
    # (ip, args) free of workload names.
    return ip.run_line_magic("timeit", args)


def make_tools(ip: Any, ns: dict[str, Any], budgets: list[float], sweep_anchors: bool,
               pm_precision: float | None, timeit_n: dict[str, dict[float, int]], smoke: bool = False
               ) -> tuple[dict[str, Callable[[str], dict[str, Any]]], set[str]]:
    """All tools by name, and the set of perfmagic tool names (``smoke``: the "default" tools run with
    tiny settings, so that a --quick run only exercises the code)."""
    import torch
    import torch.utils.benchmark as tb

    import perfmagic

    threads = torch.get_num_threads()

    def ti(extra: str = "", n_for: float | None = None) -> Callable[[str], dict[str, Any]]:
        def run(stmt: str) -> dict[str, Any]:
            opts = extra if n_for is None else f"-r 7 -n {timeit_n[stmt][n_for]}"
            r = _timeit(ip, f"-o -q {opts} {stmt}")
            return {"central_s": r.average, "best_s": r.best, "loops": r.loops, "repeat": r.repeat,
                    "all_runs_s": list(r.all_runs)}
        return run

    def tm(kind: str, **kw: Any) -> Callable[[str], dict[str, Any]]:
        def run(stmt: str) -> dict[str, Any]:
            m = getattr(tb.Timer(stmt, globals=ns, num_threads=threads), kind)(**kw)
            return {"central_s": m.median, "mean_s": m.mean, "number_per_run": m.number_per_run,
                    "n_times": len(m.times), "times_s": list(m.times)}
        return run

    def pm_info(r: Any) -> dict[str, Any]:
        lo, hi = r.ci
        return {"central_s": r.median, "ci_s": [lo, hi], "min_s": r.min, "n_samples": r.n_samples,
                "number": r.number, "stop_reason": r.stop_reason, "tool_wall_s": r.wall_s, "cold_s": r.cold_s,
                "warmup_calls": r.policy.get("warmup_calls"), "budget_s": r.policy.get("budget_s"),
                "warnings": list(r.warnings), "notes": list(r.notes), "reference_s": r.env.get("reference_s"),
                "samples_s": [x / r.number for x in r.raw]}

    def pb(budget: float | None) -> Callable[[str], dict[str, Any]]:
        kw = {} if budget is None else {"budget": budget, **({"precision": pm_precision} if pm_precision else {})}
        return lambda stmt: pm_info(perfmagic.bench(stmt, globals=ns, **kw))

    def pg(budget: float | None) -> Callable[[str], dict[str, Any]]:
        line = "-q -o --no-plot" + ("" if budget is None else f" -b {budget:g}"
                                   + (f" -p {pm_precision:g}" if pm_precision else ""))

        def run(stmt: str) -> dict[str, Any]:
            r = ip.run_cell_magic("gpubench", line, stmt)
            if r is None:
                raise RuntimeError(f"%%gpubench {line} returned None")
            return pm_info(r)
        return run

    if smoke:
        tools = {TIMEIT: ti("-n 1 -r 2"), BLOCKED: tm("blocked_autorange", min_run_time=0.005),
                 ADAPTIVE: tm("adaptive_autorange", max_run_time=0.02), PM_BENCH: pb(SMOKE_BUDGET),
                 PM_MAGIC: pg(SMOKE_BUDGET)}
    else:
        tools = {TIMEIT: ti(), BLOCKED: tm("blocked_autorange"), ADAPTIVE: tm("adaptive_autorange"),
                 PM_BENCH: pb(None), PM_MAGIC: pg(None)}
    pm = {PM_BENCH, PM_MAGIC}
    for b in budgets:
        if sweep_anchors:
            tools[timeit_b(b)] = ti(n_for=b)
            tools[blocked_b(b)] = tm("blocked_autorange", min_run_time=b)
        tools[pm_b(b)] = pb(b)
        tools[magic_b(b)] = pg(b)
        pm |= {pm_b(b), magic_b(b)}
    return tools, pm


def timed(fn: Callable[[str], dict[str, Any]], stmt: str, t0_run: float) -> dict[str, Any]:
    meter = C.LoadMeter().start()
    t0 = time.perf_counter()
    out = fn(stmt)
    out["wall_s"] = time.perf_counter() - t0
    out["t_s"] = t0 - t0_run  # start, seconds since the start of the run
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


def summarize(rounds: list[dict[str, Any]], tool: str) -> dict[str, float]:
    key = TIMEIT if tool == TIMEIT_BEST else tool
    xs = [r[key]["best_s" if tool == TIMEIT_BEST else "central_s"] for r in rounds]
    walls = [r[key]["wall_s"] for r in rounds]
    others = [r[key]["others_cores"] for r in rounds]
    return {"central_s": statistics.median(xs), "spread_pct": C.spread_pct(xs), "cv_pct": C.cv_pct(xs),
            "wall_s": statistics.median(walls), "min_s": min(xs), "max_s": max(xs),
            "others_median": statistics.median(others), "others_max": max(others)}


def dominators(summ: dict[str, dict[str, float]], tool: str, among: list[str]) -> list[str]:
    """Tools of ``among`` with both a lower wall time per answer and a lower spread than ``tool`` (lowest spread first)."""
    s = summ[tool]
    out = [u for u in among if u != tool and summ[u]["wall_s"] < s["wall_s"] and summ[u]["spread_pct"] < s["spread_pct"]]
    return sorted(out, key=lambda u: summ[u]["spread_pct"])


def episode(rounds: list[dict[str, Any]], tool: str, pm_refs: list[float], anchors: list[str]) -> dict[str, Any]:
    """The round whose answer sits farthest from the tool's median, and what else happened then.

    Neighbours are the nearest anchors run before and after it in that round (perfmagic's own other
    points are skipped: an effect of perfmagic's code would hit them too).
    """
    med = {t: statistics.median(r[t]["central_s"] for r in rounds) for t in rounds[0]["order"]}
    xs = [r[tool]["central_s"] for r in rounds]
    dev = [x / med[tool] - 1 for x in xs]
    i = max(range(len(xs)), key=lambda k: abs(dev[k]))
    rd = rounds[i]
    order = rd["order"]
    j = order.index(tool)
    before = [u for u in order[:j] if u in anchors][-1:]
    after = [u for u in order[j + 1:] if u in anchors][:1]
    nbs = before + after
    nb_dev = {u: rd[u]["central_s"] / med[u] - 1 for u in nbs}
    round_dev = statistics.median(rd[u]["central_s"] / med[u] - 1 for u in order)
    a = rd[tool]
    ref_dev = a["reference_s"] / statistics.median(pm_refs) - 1 if a.get("reference_s") and pm_refs else None
    rest = xs[:i] + xs[i + 1:]
    d = dev[i]
    same = [v for v in nb_dev.values() if v * d > 0 and abs(v) >= 0.5 * abs(d)]
    if abs(d) < 0.02:
        kind = "no episode (scatter under 2%)"
    elif d > 0 and a["others_cores"] >= 0.25:
        kind = "other processes busy"  # measured on /proc/stat during this very answer
    elif same:
        kind = "machine episode"   # the anchors run just before/after it were off the same way
    elif round_dev * d > 0 and abs(round_dev) >= 0.5 * abs(d):
        kind = "slow round"
    elif ref_dev is not None and ref_dev * d > 0 and abs(ref_dev) >= 0.5 * abs(d):
        kind = "machine episode (drift guard)"
    else:
        kind = "this answer alone"
    return {"round": i + 1, "dev_pct": 100 * d, "kind": kind, "neighbours_dev_pct": {u: 100 * v for u, v in nb_dev.items()},
            "round_median_dev_pct": 100 * round_dev, "reference_dev_pct": None if ref_dev is None else 100 * ref_dev,
            "stop_reason": a.get("stop_reason"), "n_samples": a.get("n_samples"), "number": a.get("number"),
            "warnings": a.get("warnings", []), "others_cores": a["others_cores"], "steal_cores": a.get("steal_cores", 0.0),
            "wall_s": a["wall_s"], "spread_without_pct": C.spread_pct(rest)}


def _short_warn(w: str) -> str:
    return re.sub(r"\d+(\.\d+)?", "N", w.split(":")[0].split(" (")[0])


def episode_text(e: dict[str, Any]) -> str:
    nb = ", ".join(f"`{u}` {v:+.0f}%" for u, v in e["neighbours_dev_pct"].items())
    ref = "" if e["reference_dev_pct"] is None else f", drift-guard reference {e['reference_dev_pct']:+.0f}%"
    own = ""
    if e["stop_reason"] is not None:
        n = e["n_samples"]
        own = (f"; that run stopped by {e['stop_reason']} after {n} sample{'s' * (n != 1)} of {e['number']} call"
               f"{'s' * (e['number'] != 1)}"
               + (f", warnings: {'; '.join(sorted({_short_warn(w) for w in e['warnings']}))}" if e["warnings"] else ""))
    busy = f"; other processes used {e['others_cores']:.2f} cores during it" if e["others_cores"] >= 0.1 else ""
    busy += f"; steal {e['steal_cores']:.2f} cores" if e["steal_cores"] >= 0.05 else ""
    return (f"round {e['round']} is {e['dev_pct']:+.0f}% from its median — **{e['kind']}** (nearest anchors in that round: "
            f"{nb}; median of all tools in that round {e['round_median_dev_pct']:+.0f}%{ref}){own}{busy}; "
            f"without that round its spread is {e['spread_without_pct']:.1f}%")


def verdicts(name: str, summ: dict[str, dict[str, float]], rounds: list[dict[str, Any]],
             anchors: list[str], pm_tools: list[str]) -> tuple[list[str], dict[str, Any]]:
    out: list[str] = []
    info: dict[str, Any] = {}
    dominated = {pm: dominators(summ, pm, anchors) for pm in pm_tools}
    bad = [pm for pm in pm_tools if dominated[pm]]
    front = sorted((a for a in anchors if not dominators(summ, a, anchors)), key=lambda a: summ[a]["wall_s"])
    fr = ", ".join(f"`{a}` ({summ[a]['wall_s']:.2f} s, {summ[a]['spread_pct']:.1f}%)" for a in front)
    out.append(f"- **{name}: every perfmagic point on or below the anchors' front? {'yes' if not bad else 'no'}** "
               f"({len(pm_tools) - len(bad)} of {len(pm_tools)} not dominated by an anchor; anchors' front: {fr}).")
    pm_refs = [r[t]["reference_s"] for r in rounds for t in pm_tools if r[t].get("reference_s")]
    eps = {pm: episode(rounds, pm, pm_refs, anchors) for pm in pm_tools}
    info.update({pm: {"dominated_by": dominated[pm], "episode": eps[pm]} for pm in pm_tools})
    for pm in bad:
        a, e = dominated[pm][0], eps[pm]
        s = summ[pm]
        w, sp = s["wall_s"], e["spread_without_pct"]
        loo = ("still dominated then" if any(summ[u]["wall_s"] < w and summ[u]["spread_pct"] < sp for u in anchors)
               else "on or below the front then")
        out.append(f"  - `{pm}` ({s['wall_s']:.2f} s, {s['spread_pct']:.1f}%) is dominated by `{a}` "
                   f"({summ[a]['wall_s']:.2f} s, {summ[a]['spread_pct']:.1f}%)"
                   + (f" and {len(dominated[pm]) - 1} more" if len(dominated[pm]) > 1 else "")
                   + f"; {episode_text(e)} ({loo}).")
    if bad:
        kinds = statistics.multimode(eps[pm]["kind"] for pm in bad)
        tally = ", ".join(f"{k} ×{sum(eps[pm]['kind'] == k for pm in bad)}" for k in sorted({eps[pm]["kind"] for pm in bad}))
        out.append(f"  - {name}: the dominated perfmagic points' spread is set by: {tally} (most often: {' / '.join(kinds)}).")
    return out, info


def measure(args: argparse.Namespace, n_rounds: int, budgets: list[float]) -> dict[str, Any]:
    """Run every tool on every workload, in rotated rounds; returns the per-round data."""
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
    head = C.header(TITLE + (f", beside {args.neighbours} busy neighbour process(es)" if getattr(args, "neighbours", 0) else ""))  # date, machine, code state
    t_start = time.perf_counter()
    load_start = C.loadavg()
    run_meter = C.LoadMeter().start()

    # calibration for the sized %timeit: calls per loop so that 7 loops take about B
    per_call = {}
    for _, _, stmt in WORKLOADS:
        if args.quick:
            t0 = time.perf_counter()
            _timeit_mod.Timer(stmt, globals=ns).timeit(100)
            n, t = 100, time.perf_counter() - t0
        else:
            # one untimed call first: autorange's first try is one call, and a cold first matmul (torch's
            # lazy start-up) over 0.3 s had sized every %timeit -n to 1 (the 2d7aea5 run's torch_mm rows)
            _timeit_mod.Timer(stmt, globals=ns).timeit(1)
            n, t = _timeit_mod.Timer(stmt, globals=ns).autorange()
        per_call[stmt] = t / n
    timeit_n = {stmt: {b: max(1, round(b / 7 / pc)) for b in budgets} for stmt, pc in per_call.items()}
    tools, pm_set = make_tools(ip, ns, budgets, not args.no_anchor_sweep, args.pm_precision, timeit_n,
                               smoke=args.quick)
    names = list(tools)
    anchors = [t for t in names if t not in pm_set]
    pm_tools = [t for t in names if t in pm_set]

    print(f"torch threads: {torch.get_num_threads()} (usable cores {cores}); rounds per workload: {n_rounds}; "
          f"{len(names)} tools; budgets {budgets}", flush=True)
    print("warm-up: every default tool once on torch_mm (untimed)", flush=True)
    for t in DEFAULT_TOOLS:
        tools[t](WORKLOADS[-1][2])

    data: dict[str, Any] = {"header": head, "command": C.command(), "torch_threads": torch.get_num_threads(),
                            "rounds": n_rounds, "budgets_s": budgets, "pm_precision": args.pm_precision,
                            "tools": names, "anchors": anchors, "perfmagic_tools": pm_tools, "workloads": {}}
    for name, desc, stmt in WORKLOADS:
        rounds: list[dict[str, Any]] = []
        for r in range(n_rounds):
            k = (r * len(names)) // n_rounds
            order = names[k:] + names[:k]
            res: dict[str, Any] = {"order": order}
            if args.wait_quiet > 0:
                res["load_before_round"] = wait_quiet(args.wait_quiet)
            for t in order:
                res[t] = timed(tools[t], stmt, t_start)
            rounds.append(res)
            print(f"{name} round {r + 1}/{n_rounds} ({time.perf_counter() - t_start:.0f} s): " + ", ".join(
                f"{t} {C.fmt_time(res[t]['central_s'])} ({res[t]['wall_s']:.2f} s)" for t in order), flush=True)
        summ = {t: summarize(rounds, t) for t in names + [TIMEIT_BEST]}
        data["workloads"][name] = {"description": desc, "stmt": stmt, "per_call_calibration_s": per_call[stmt],
                                   "timeit_n": {f"{b:g}": n for b, n in timeit_n[stmt].items()},
                                   "rounds": rounds, "summary": summ}

    total = time.perf_counter() - t_start
    run_load = run_meter.stop()
    data["total_wall_s"] = total
    data["others_cores_whole_run"] = run_load["others_cores"]
    data["loadavg"] = {"start": load_start, "end": C.loadavg()}

    data["wait_quiet_s"] = args.wait_quiet
    data["anchor_sweep"] = not args.no_anchor_sweep
    tmp.cleanup()
    return data


def render(data: dict[str, Any], out: Path) -> str:
    """The docs section (and each workload's Pareto analysis, added to ``data``)."""
    names = data.get("tools") or data["anchors"] + data["perfmagic_tools"]
    anchors, pm_tools = data["anchors"], data["perfmagic_tools"]
    pm_set = set(pm_tools)
    budgets, n_rounds, sweep = data["budgets_s"], data["rounds"], data.get("anchor_sweep", True)
    summaries = {w: W["summary"] for w, W in data["workloads"].items()}
    headers = ["tool", "wall s per answer (median)", "spread max−min %", "CV %", "central value (median)",
               "÷ perfmagic.bench()", "dominated by", "others' CPU, cores (median / max)"]
    parts: list[str] = []
    lines: list[str] = []
    for name, desc, stmt in WORKLOADS:
        summ = summaries[name]
        ref = summ[PM_BENCH]["central_s"]
        rows = []
        for t in sorted(names, key=lambda u: summ[u]["wall_s"]) + [TIMEIT_BEST]:
            s = summ[t]
            info = t == TIMEIT_BEST
            dom = [] if info else dominators(summ, t, names)
            tool = f"**`{t}`**" if t in pm_set else (f"_`{t}`_" if info else f"`{t}`")
            rows.append([tool, f"({s['wall_s']:.2f}, same runs)" if info else f"{s['wall_s']:.2f}",
                         f"{s['spread_pct']:.1f}", f"{s['cv_pct']:.2f}", C.fmt_time(s["central_s"]),
                         f"{s['central_s'] / ref:.3f}",
                         "" if info else (f"`{dom[0]}`" + (f" +{len(dom) - 1}" if len(dom) > 1 else "") if dom else "—"),
                         "" if info else f"{s['others_median']:.2f} / {s['others_max']:.2f}"])
        ns_ = ", ".join(f"{b} s → `-n {n}`" for b, n in data["workloads"][name]["timeit_n"].items())
        parts.append(f"### `{name}`: {desc}\n\n" + C.md_table(headers, rows)
                     + ("" if not sweep else f"\nSized `%timeit -r 7 -n N`: {ns_}.\n"))
        v, info = verdicts(name, summ, data["workloads"][name]["rounds"], anchors, pm_tools)
        data["workloads"][name]["pareto"] = info
        lines += v

    pm_notes = []
    for name, _, _ in WORKLOADS:
        rs = data["workloads"][name]["rounds"]
        for pm in pm_tools:
            stops = sorted({r[pm]["stop_reason"] for r in rs})
            n_s = [r[pm]["n_samples"] for r in rs]
            warns = sorted({_short_warn(w) for r in rs for w in r[pm]["warnings"]})
            own = statistics.median(r[pm]["tool_wall_s"] for r in rs)
            samp = statistics.median(sum(r[pm]["samples_s"]) * r[pm]["number"] for r in rs)
            pm_notes.append(f"- `{name}` `{pm}`: stopped by {', '.join(stops)}; {min(n_s)}–{max(n_s)} samples; "
                            f"{own:.3f} s by its own clock (`wall_s`), {samp * 1e3:.1f} ms of it sampling (medians)"
                            + (f"; warnings: {'; '.join(warns)}" if warns else ""))
    bl = ", ".join(f"{b:g}" for b in budgets)
    body = (data["header"] + "\n"
            f"{len(names)} tools per workload, as points (wall s per answer, spread): the anchors `%timeit`, "
            f"`blocked_autorange()` and `adaptive_autorange()` at their defaults"
            + ("" if not sweep else ", plus `%timeit -r 7 -n N` with N sized (from a `timeit` calibration) "
               "so that the 7 loops take about B, and `blocked_autorange(min_run_time=B)`")
            + "; perfmagic's `perfmagic.bench(stmt, globals=ns)` and `%%gpubench -q -o --no-plot` at their defaults "
            "(~1 s soft budget, ±1% CI target) and with a budget B (`budget=B` / `-b B`, a hard limit"
            + (f", precision {data['pm_precision']:g}" if data["pm_precision"] else ", precision target ±1% as by default")
            + f"), B = {bl} s. torch threads = {data['torch_threads']} for every tool. {n_rounds} rounds per "
            "workload; in each round every tool gives one answer, in an order rotated every round (same process, "
            "after one untimed warm-up pass). *Central value*: `%timeit` → `.average` (`.best` of the default "
            "`%timeit` on its own row, from the same runs, informational); torch → `Measurement.median`; perfmagic → "
            "`BenchResult.median`. *Spread* = (max − min) / median of the central values over the rounds; *CV* = sample "
            "standard deviation / mean of them. *Wall s per answer* = median over rounds of `time.perf_counter()` "
            "around the call (for perfmagic this includes its memory measurement, environment capture and drift-guard "
            "reference workload). *Dominated by*: the tool with the lowest spread among those with both a lower wall "
            "time and a lower spread (+k: more such tools); — = on the front. *Others' CPU*: cores kept busy by other "
            f"processes during each answer, median / max over the rounds; over the whole run {data['others_cores_whole_run']:.2f} "
            f"cores on average (load average {data['loadavg']['start']} at the start, {data['loadavg']['end']} at the end)"
            + (f"; each round waited up to {data['wait_quiet_s']:g} s for other processes to go below 0.3 cores"
               if data.get("wait_quiet_s") else "")
            + f". Per-round data (stop reasons, samples, warnings, drift-guard reference times, start times): "
            f"`{out.relative_to(C.ROOT) if out.is_relative_to(C.ROOT) else out}`. Total run time {data['total_wall_s']:.0f} s.\n\n"
            + "\n".join(parts)
            + "\nVerdicts (a perfmagic point is on or below the anchors' front when no anchor has both a lower wall "
            "time and a lower spread; for a dominated point, the round farthest from its median and what moved with it: "
            "*other processes busy* — they used ≥ 0.25 cores during that slow answer; *machine episode* — the nearest "
            "anchors run before and after it in that round moved the same way (by at least half as much); *slow round* — "
            "the median of all tools in that round did; *machine episode (drift guard)* — only perfmagic's own reference "
            "workload did; *this answer alone* — none of these; *no episode* — it is within 2%):\n\n" + "\n".join(lines)
            + "\n\nperfmagic runs:\n\n" + "\n".join(pm_notes) + "\n")
    return body


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    C.add_args(ap, "2 rounds (spread needs 2), budget 0.02, every tool with tiny settings, the py_call workload "
               "only; with --neighbours, the neighbour starts and stops once, for 0.3 s (smoke test; never written to the docs)")
    ap.add_argument("--rounds", type=int, default=None, help="rounds per workload (default 10, --quick 2; >= 2)")
    ap.add_argument("--budgets", default=None, help="perfmagic budgets in s, comma-separated (default 0.1,0.3,1,3)")
    ap.add_argument("--no-anchor-sweep", action="store_true",
                    help="anchors only at their defaults (no sized %%timeit, no blocked_autorange(min_run_time=B))")
    ap.add_argument("--pm-precision", type=float, default=None,
                    help="precision for the budgeted perfmagic tools (default: perfmagic's own, 0.01)")
    ap.add_argument("--wait-quiet", type=float, default=0.0, metavar="S",
                    help="before each round wait up to S seconds until other processes use < 0.3 cores (default 0: no wait)")
    ap.add_argument("--neighbours", type=int, default=0, metavar="N",
                    help="run beside N busy processes started and stopped by this script (default 0: quiet); "
                         "the tables go to their own section (timing_quality_busy) and JSON file")
    ap.add_argument("--json", default=str(C.RESULTS / "timing_quality.json"), help="where to write per-round data")
    ap.add_argument("--from-json", metavar="PATH", help="measure nothing: render the tables again from a saved --json file")
    args = ap.parse_args()
    n_rounds = args.rounds or (2 if args.quick else 10)  # issue 28: at least 10 interleaved rounds
    global WORKLOADS
    if args.quick:  # every tool and path on one workload: the anchors' defaults alone take ~10 s per answer
        WORKLOADS = [w for w in WORKLOADS if w[0] == "py_call"]
    if n_rounds < 2:
        ap.error("--rounds must be at least 2 (spread needs several answers)")
    budgets = [float(b) for b in (args.budgets or (f"{SMOKE_BUDGET:g}" if args.quick else "0.1,0.3,1,3")).split(",") if b.strip()]

    section = "timing_quality_busy" if args.neighbours else "timing_quality"
    out = Path(args.json)
    if args.neighbours and args.json == str(C.RESULTS / "timing_quality.json"):
        out = C.RESULTS / "timing_quality_busy.json"
    if args.from_json:
        data = json.loads(Path(args.from_json).read_text(encoding="utf-8"))
        out = Path(args.from_json)
        section = "timing_quality_busy" if data.get("neighbours") else "timing_quality"
    elif args.neighbours:
        from perfmagic.core.neighbours import busy_neighbours

        if args.quick:  # smoke: the neighbour starts and stops once, briefly; the rounds run beside nothing
            with busy_neighbours(args.neighbours) as nb:
                time.sleep(0.3)
            data = measure(args, n_rounds, budgets)
        else:
            with busy_neighbours(args.neighbours) as nb:
                data = measure(args, n_rounds, budgets)
        data["neighbours"] = args.neighbours
        data["neighbour_cores"] = nb.neighbour_cores
    else:
        data = measure(args, n_rounds, budgets)
    body = render(data, out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1, default=str), encoding="utf-8")
    print(f"per-round data written to {out}")
    row = ("spread of the answer over repeated measurements and the time spent per answer, vs `%timeit` and "
           "`torch.utils.benchmark` (CPU)" + (", beside busy neighbour processes" if section != "timing_quality" else ""))
    C.publish(section, body, args, row=row,
              script="benchmarks/bench_timing_quality.py" + (" --neighbours 1" if section != "timing_quality" else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
