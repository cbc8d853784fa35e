"""Scaling verdicts on planted workloads at 0 and 1 busy neighbours, and the fits' accuracy on planted sleeps.

    flock -x /tmp/perfmagic-bench.lock .venv/bin/python benchmarks/bench_amdahl.py            # full (~6 min)
    flock -x /tmp/perfmagic-bench.lock .venv/bin/python benchmarks/bench_amdahl.py --quick    # smoke test
    .venv/bin/python benchmarks/bench_amdahl.py --report-only        # re-render docs from the saved JSON
    PYTHONPATH=<old checkout>/src .venv/bin/python benchmarks/bench_amdahl.py --phase before  # the old code

**Verdicts.** Each workload is swept with ``perfmagic.amdahl`` (0.2 s per point, 2 interleaved rounds)
several times at each load (0 or 1 busy-loop neighbour process, ``busy_neighbours``), and the verdict
is classed:

* torch/NumPy cells, whose time is spent in calls that release the GIL — torch conv forward with
  ``mode="threads"`` (torch's intra-op threads 1, 2), a torch matmul and ``np.dot`` / ``np.sort`` split
  over a Python thread pool: saying "GIL" is **confidently wrong**.
* a pure-Python thread pool (a spin loop split over N threads): the GIL verdict is right; with a
  neighbour, "cannot tell, others kept N cores busy" is acceptable; explaining the missing speedup by
  native code, or reporting a real speedup, is **confidently wrong**.

``--phase before`` writes ``results/amdahl_before.json`` (run it with the old code on ``PYTHONPATH``);
the default phase writes ``results/amdahl.json``; the docs table shows both when both exist.

**Fits.** Planted sleep workloads: a serial ``time.sleep(S·T)`` plus a parallel part ``(1−S)·T`` split
over N threads that sleep, T = 40 ms, S ∈ {0.1, 0.3, 0.5}, and a retrograde one with an extra
``c·(N−1)`` serial cost (planted USL κ > 0), swept with budget 0.3 s per point and 2 rounds (quiet only).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

T = 0.04
POOL = ThreadPoolExecutor(16)
BUDGET, ROUNDS = (0.03, 1) if C.QUICK else (0.2, 2)  # --quick (a smoke run): one tiny round per point


# ---- planted workloads ----------------------------------------------------------------------------
def planted(s: float, c: float = 0.0):
    def cell(workers: int) -> None:
        time.sleep(s * T + c * (workers - 1))
        list(POOL.map(time.sleep, [(1 - s) * T / workers] * workers))
    return cell


def spin_loop(k: int) -> int:
    x = 0
    for i in range(k):
        x += i
    return x


def _calibrate(fn, arg0: int, target_s: float) -> int:
    k = arg0
    for _ in range(6):
        t = time.perf_counter()
        fn(k)
        dt = time.perf_counter() - t
        k = max(1, int(k * target_s / max(dt, 1e-6)))
    return k


def workloads() -> list[dict[str, Any]]:
    """(name, kind, code, globals, workers, mode) of every planted verdict workload; ~10 ms a call at N = 1."""
    import numpy as np
    import torch

    torch.manual_seed(0)
    conv = torch.nn.Conv2d(16, 32, 3)
    x = torch.randn(4, 16, 48, 48)
    a_t = torch.randn(160, 160)
    a = np.random.default_rng(0).random((200, 200))
    v = np.random.default_rng(1).random(400_000)

    def mm(k: int) -> None:
        for _ in range(k):
            a_t @ a_t

    def dot(k: int) -> None:
        for _ in range(k):
            a.dot(a)

    def srt(k: int) -> None:
        for _ in range(k):
            np.sort(v)

    with torch.no_grad():
        conv(x)
    k_mm, k_dot, k_srt = _calibrate(mm, 4, 0.01), _calibrate(dot, 4, 0.01), _calibrate(srt, 1, 0.01)
    k_spin = _calibrate(spin_loop, 20000, 0.01)
    pool_cell = "list(pool.map(f, [k // workers] * workers))"
    return [
        {"name": "torch conv forward, --threads", "kind": "native", "code": "with torch.no_grad():\n    conv(x)",
         "g": {"torch": torch, "conv": conv, "x": x}, "workers": [1, 2], "mode": "threads"},
        {"name": "torch matmul in a thread pool", "kind": "native", "code": pool_cell,
         "g": {"pool": POOL, "f": mm, "k": max(4, k_mm)}, "workers": [1, 2, 4], "mode": "variable"},
        {"name": "np.dot in a thread pool", "kind": "native", "code": pool_cell,
         "g": {"pool": POOL, "f": dot, "k": max(2, k_dot)}, "workers": [1, 2], "mode": "variable"},
        {"name": "np.sort in a thread pool", "kind": "native", "code": pool_cell,
         "g": {"pool": POOL, "f": srt, "k": max(4, k_srt)}, "workers": [1, 2, 4], "mode": "variable"},
        {"name": "pure-Python pool (1,2,4)", "kind": "python", "code": pool_cell,
         "g": {"pool": POOL, "f": spin_loop, "k": k_spin}, "workers": [1, 2, 4], "mode": "variable"},
        {"name": "pure-Python pool (1,2)", "kind": "python", "code": pool_cell,
         "g": {"pool": POOL, "f": spin_loop, "k": k_spin}, "workers": [1, 2], "mode": "variable"},
    ]


# ---- classing a verdict (works on the old and the new AmdahlResult) ---------------------------------
def outcome(r: Any) -> str:
    """gil | load | native | cannot-tell | flat | speedup | other, from the result (old code: its text)."""
    d = getattr(r, "diagnosis", None)
    if d is not None:
        return d
    v = r.verdict()
    if r.gil:
        return "gil"
    if "others kept" in v or "other processes" in v:
        return "load"
    if "cannot tell" in v:
        return "cannot-tell"
    if "does not change" in v:
        return "flat"
    if "speedup" in v:
        return "speedup"
    return "other"


def wrong(kind: str, out: str, r: Any) -> bool:
    """Confidently wrong: GIL for a torch/NumPy cell; for pure Python a native explanation or a real speedup."""
    if kind == "native":
        return out == "gil"
    if out == "native":
        return True
    if out in ("speedup", "fit", "speedups-only"):
        return max(r.speedups or (1.0,)) >= 1.3
    return False


def run_verdicts(loads: list[int], reps_native: int, reps_python: int, log,
                 others: dict[str, Any]) -> list[dict[str, Any]]:
    import perfmagic
    from perfmagic.core.neighbours import busy_neighbours

    wl = workloads()
    trials = []
    import subprocess

    for load in loads:
        try:  # who else ran (top's second sample: CPU now, not since the process started)
            top = subprocess.run(["top", "-b", "-c", "-w", "200", "-n", "2", "-d", "0.5", "-o", "%CPU"],
                                 capture_output=True, text=True, timeout=10).stdout.split("\ntop -")[-1]
            rows = [x.strip()[:200] for x in top.splitlines() if re.match(r"\s*\d+\s+\S+\s+-?\d+\s", x)][:3]
        except (OSError, subprocess.SubprocessError):
            rows = []
        others.setdefault("top", {})[str(load)] = rows
        log("before the block: " + " | ".join(rows))
        with busy_neighbours(load) as nb:
            for rep in range(max(reps_native, reps_python)):
                for w in wl:
                    reps = reps_native if w["kind"] == "native" else reps_python
                    if rep >= reps:
                        continue
                    t = time.perf_counter()
                    r = perfmagic.amdahl(w["code"], w["workers"], mode=w["mode"], globals=dict(w["g"]),
                                         budget=BUDGET, rounds=ROUNDS)
                    out = outcome(r)
                    trial = {"load": load, "workload": w["name"], "kind": w["kind"], "outcome": out,
                             "wrong": wrong(w["kind"], out, r), "verdict": r.verdict(),
                             "speedups": list(r.speedups), "own_cores": [p.own_cores for p in r.points],
                             "others_cores": getattr(r, "others_cores", None), "wall_s": time.perf_counter() - t}
                    trials.append(trial)
                    log(f"[load {load}] {w['name']}: {out}{'  WRONG' if trial['wrong'] else ''} | {r.verdict()[:110]}")
        others[str(load)] = nb.others_cores or 0.0
        log(f"load {load}: others kept {nb.others_cores or 0:.2f} cores busy over the block")
    return trials


def run_fits(log, quick: bool = False) -> list[dict[str, Any]]:
    """Planted serial fractions vs the fits (``quick``: S = 0.1 and the retrograde case, 1 round of 0.03 s)."""
    import perfmagic

    cases = [("S=0.1", 0.1, 0.0, [1, 2, 4, 8]), ("S=0.3", 0.3, 0.0, [1, 2, 4, 8]), ("S=0.5", 0.5, 0.0, [1, 2, 4, 8]),
             ("retrograde", 0.05, 0.05 * T, [1, 2, 3, 4, 6, 8])]
    rows = []
    for name, s, c, ns in (cases[::3] if quick else cases):
        t = time.perf_counter()
        r = perfmagic.amdahl(planted(s, c), ns, budget=0.03 if quick else 0.3, rounds=1 if quick else 2)
        m = r.metrics()
        rows.append({"name": name, "s": s, "c": c, "m": m, "sweep_s": time.perf_counter() - t})
        log(f"{name}: S {m['S']} (planted {s}), model {m['best_model']}")
    return rows


# ---- the docs table ---------------------------------------------------------------------------------
def _summary(trials: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, int]]:
    out: dict[tuple[str, int], dict[str, int]] = {}
    for t in trials:
        d = out.setdefault((t["workload"], t["load"]), {"n": 0, "wrong": 0})
        d["n"] += 1
        d["wrong"] += t["wrong"]
        d[t["outcome"]] = d.get(t["outcome"], 0) + 1
    return out


def _cell(d: dict[str, int] | None) -> str:
    if not d:
        return "—"
    parts = [f"{k} {v}" for k, v in sorted(d.items()) if k not in ("n", "wrong")]
    return f"{', '.join(parts)} (of {d['n']}; wrong {d['wrong']})"


def render(data: dict[str, Any]) -> str:
    after, before = data.get("after") or {}, data.get("before") or {}
    lines = [C.header("Scaling verdicts and fits (%%amdahl)"), ""]
    for phase, d in (("before", before), ("after", after)):
        if d:
            lines.append(f"- **{phase}:** {d['date']}, {d['git']}; other processes kept "
                         + ", ".join(f"{v:.2f} cores busy with {k} neighbour(s)" for k, v in d.get("others", {}).items()
                                     if k != "top") + f" (measured over each block); {len(d['trials'])} runs in "
                         f"{d['wall_s']:.0f} s" + (f"; measured by `{d['command']}`" if d.get("command") else ""))
    lines += ["",
              "Verdicts: `perfmagic.amdahl(cell, workers, budget=0.2, rounds=2)` on planted cells (~10 ms a call "
              "at N = 1), repeated at each load (0 or 1 busy-loop neighbour on this 2-core machine). Outcomes: "
              "`gil` (the GIL verdict), `load` (cannot tell: other processes' load caps the speedup), `native` "
              "(no speedup, not the GIL: time inside GIL-releasing calls), `cannot-tell`, `flat`, `speedup`/`fit`/"
              "`speedups-only` (a measured speedup reported). **Wrong** = GIL said for a torch/NumPy cell, or for the "
              "pure-Python pool a native explanation or a speedup ≥ 1.3×.", "",
              "| workload | load | before | after |", "|---|---|---|---|"]
    sb, sa = _summary(before.get("trials", [])), _summary(after.get("trials", []))
    keys = sorted(set(sb) | set(sa), key=lambda k: (k[1], list(dict.fromkeys(t["workload"] for t in
                  (after.get("trials") or before.get("trials")))).index(k[0]) if k[0] in
                  [t["workload"] for t in (after.get("trials") or before.get("trials"))] else 99))
    for k in keys:
        lines.append(f"| {k[0]} | {k[1]} | {_cell(sb.get(k))} | {_cell(sa.get(k))} |")

    def stats(d: dict[str, Any]) -> dict[str, Any]:
        tr = d.get("trials", [])
        res: dict[str, Any] = {"wrong": sum(t["wrong"] for t in tr), "n": len(tr)}
        for load in d.get("loads", []):
            nat = [t for t in tr if t["load"] == load and t["kind"] == "native"]
            py = [t for t in tr if t["load"] == load and t["kind"] == "python"]
            res[load] = {"nat_gil": sum(t["outcome"] == "gil" for t in nat), "nat_n": len(nat),
                         "py_gil": sum(t["outcome"] == "gil" for t in py), "py_n": len(py),
                         "py_load": sum(t["outcome"] == "load" for t in py),
                         "py_wrong": sum(t["wrong"] for t in py)}
        return res

    lines += ["", "Targets:", ""]
    for phase, d in (("before", before), ("after", after)):
        if not d:
            continue
        s = stats(d)
        for load in d["loads"]:
            x = s[load]
            target = ("target ≥ 95%" if load == 0 else "target: the GIL or 'cannot tell: load', never a wrong cause")
            lines.append(f"- {phase}, {load} neighbour(s): GIL said for torch/NumPy cells in {x['nat_gil']} of "
                         f"{x['nat_n']} runs (target 0); pure-Python pool: GIL verdict {x['py_gil']} of {x['py_n']}"
                         f" ({x['py_gil'] / max(1, x['py_n']):.0%}), 'cannot tell: load' {x['py_load']}, wrong "
                         f"{x['py_wrong']} ({target})")
        lines.append(f"- {phase}: confidently wrong {s['wrong']} of {s['n']} ({s['wrong'] / max(1, s['n']):.1%}; "
                     "target ≤ 1%)")
    examples = []
    for wl, load in (("torch conv forward, --threads", 1), ("torch conv forward, --threads", 0),
                     ("pure-Python pool (1,2,4)", 0), ("np.dot in a thread pool", 1)):
        for phase, d in (("before", before), ("after", after)):
            t = next((t for t in d.get("trials", []) if t["workload"] == wl and t["load"] == load), None)
            if t is not None:
                examples.append(f"- {wl}, {load} neighbour(s), {phase}: `{t['verdict']}`")
    if examples:
        lines += ["", "First verdict of each kind of run, before and after:", ""] + examples
    if after:
        lines += ["", "Reading the after column: beside one busy neighbour on 2 cores at most one core is free, so every "
                  "CPU-bound cell is 'cannot tell' by design (the load is named, the GIL is not blamed), except where "
                  "the process still used > 1.35 cores (a real speedup, reported with the load named first). "
                  "`fit-unreliable` on the quiet machine is np.sort/matmul at 1, 2, 4 threads on 2 cores: ~2.3× at "
                  "N = 2, flat at N = 4 (the cores ran out), which Amdahl misses by 16–17% RMS — shown as measured "
                  "speedups, not as a serial fraction. The GIL evidence (sampler waits) is per point in the HTML "
                  "output and in the ledger samples."]
    fits = (after or before).get("fits") or []
    if fits:
        lines += ["", "Fits on planted sleep workloads (quiet; T = 40 ms at N = 1, the parallel part sleeps in N "
                  "threads; budget 0.3 s per point, 2 rounds; retrograde: extra serial cost c·(N−1), c = 2 ms, "
                  "planted USL peak ≈ 4.4):", "",
                  "| workload | planted S | recovered S ± se | σ | κ | USL peak N* | model (AICc) | worth it up to | sweep wall s |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for f in fits:
            m = f["m"]

            def num(key: str, fmt: str) -> str:
                return format(m[key], fmt) if m.get(key) is not None else "—"
            lines.append(f"| {f['name']} | {f['s']} | {num('S', '.3f')} ± {num('S_stderr', '.3f')} | "
                         f"{num('sigma', '.3f')} | {num('kappa', '.4f')} | {num('peak_n', '.1f')} | "
                         f"{m.get('best_model') or '—'} | {m.get('recommended_workers')} | {f['sweep_s']:.2f} |")
        ok = all(f["m"].get("S") is not None and abs(f["m"]["S"] - f["s"]) <= 0.03 for f in fits if f["c"] == 0)
        lines.append("")
        lines.append(f"- serial fraction within ±0.03 of the planted one for S ∈ {{0.1, 0.3, 0.5}}: "
                     f"**{'met' if ok else 'not met'}**")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    C.add_args(ap, "1 run per workload at 0 neighbours, 2 fits, one round of 0.03 s per point (smoke test; never "
               "written to the docs)")
    ap.add_argument("--report-only", action="store_true", help="re-render the docs table from the saved JSON")
    ap.add_argument("--phase", choices=("before", "after"), default="after")
    ap.add_argument("--loads", default=None, help="busy neighbour counts (default 0,1; --quick 0)")
    args = ap.parse_args()
    paths = {"before": C.RESULTS / "amdahl_before.json", "after": C.RESULTS / "amdahl.json"}
    if not args.report_only:
        loads = [int(x) for x in (args.loads or ("0" if args.quick else "0,1")).split(",")]
        reps_native, reps_python = (1, 1) if args.quick else (5, 10)
        t0 = time.perf_counter()
        others: dict[str, Any] = {}
        trials = run_verdicts(loads, reps_native, reps_python, print, others)
        fits = run_fits(print, args.quick)
        import perfmagic

        data = {"date": C.today(), "git": C.git_state(), "command": C.command(), "loads": loads, "quick": args.quick,
                "perfmagic": str(Path(perfmagic.__file__).parent), "trials": trials, "fits": fits,
                "others": others, "wall_s": time.perf_counter() - t0}
        out = paths[args.phase]
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(data, indent=1, default=str), encoding="utf-8")
        print(f"{len(trials)} runs in {data['wall_s']:.0f} s; saved {out}")
    data = {ph: json.loads(p.read_text(encoding="utf-8")) for ph, p in paths.items() if p.exists()}
    C.publish("amdahl", render(data), args, row="GIL / load / native verdicts on planted torch, NumPy and pure-Python "
              "thread pools at 0 and 1 busy neighbours; planted serial fractions vs the fits",
              reason="--phase before: saved for the next 'after' run" if args.phase == "before" else None)


if __name__ == "__main__":
    main()
