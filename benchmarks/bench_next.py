"""``%perf next`` on planted bottlenecks, beside 0 and 1 busy neighbours: is the proposal the right
level of the method, and does the gain a planted fix then achieves fall inside the proposed range?

Each trial runs in a real IPython shell with perfmagic loaded and a fresh ledger: the baseline
(``%%gpubench --baseline``), the evidence magic, ``%perf next`` (its proposal and range are recorded as a
prediction), the planted fix timed with ``%%gpubench --vs baseline``, and ``perfmagic.next_step()``
again, which checks the prediction (measured gain = A/B medians of the same-process pair, with its
95% interval).

Planted truths:

* *loader*: a Dataset sleeping ``d`` per item (2 or 4 ms, batches of 4), a 3 ms spinning step; the
  evidence is ``%%dataloader_check``; right level: I/O. Fixes: loading twice as cheap, or 2 persistent
  workers.
* *hot*: ``parse(K)`` (a pure-Python loop, 65-80% of the time) + ``rest``; evidence ``%%flame --rate
  500``; right level: algorithm (that function). Fix: ``parse`` vectorized with NumPy.
* *serial*: ``work(n)``: a serial sleep + a parallel part split over ``n`` threads, S = 0.3 or 0.5;
  evidence ``%%amdahl N=1,2,4``; right level: concurrency, "not more workers". Fix: the serial part
  halved, at 4 workers.

Columns: *right level* = proposals at the planted level; *within range* = the measured gain's 95%
interval reaches the proposed range (the record's "k of n within range"); *confidently wrong* = that
interval lies wholly outside it; *point outside* = the median ratio alone outside (noise may do that
near an end); *high / measured* = how loose the upper bound was (median, max).

    .venv/bin/python benchmarks/bench_next.py                  # 5 rounds per load (~5 min on 2 cores)
    .venv/bin/python benchmarks/bench_next.py --quick          # smoke test: one variant per scenario, tiny budgets
    .venv/bin/python benchmarks/bench_next.py --report-only    # re-render the table from the JSON
"""

from __future__ import annotations

import argparse
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

LOADS = (0, 1)
JSON = C.RESULTS / "next.json"
TARGETS = {"right level": "100%", "confidently wrong": "0", "within range": "≥ 95%"}

LOADER = """
import time
import torch
from torch.utils.data import DataLoader

class Slow(torch.utils.data.Dataset):
    def __init__(self, delay): self.delay = delay
    def __len__(self): return 16
    def __getitem__(self, i):
        time.sleep(self.delay)
        return torch.zeros(4)

def step(batch):
    t = time.perf_counter()
    while time.perf_counter() - t < 0.003:
        pass

loader = DataLoader(Slow({d}), batch_size=4)
fixed = {fix}
"""
LOADER_FIX = {"half-cost loading": "DataLoader(Slow({d} / 2), batch_size=4)",
              "2 workers": "DataLoader(Slow({d}), batch_size=4, num_workers=2, persistent_workers=True)"}

HOT = """
import numpy as np

def parse(k):
    s = 0
    for i in range(k):
        s += i * i
    return s

def parse_np(k):
    a = np.arange(k, dtype=np.int64)
    return int((a * a).sum())

def rest(k):
    s = 0
    for i in range(k):
        s += i
    return s

K = 60_000
R = {r}
"""

SERIAL = """
import time
from concurrent.futures import ThreadPoolExecutor

pool = ThreadPoolExecutor(4)

def work(n, serial={s}, parallel={p}):
    time.sleep(serial)
    list(pool.map(time.sleep, [parallel / n] * n))
"""


# --quick (a smoke run): every magic with a tiny budget / loop count
GB = "-b 0.05" if C.QUICK else "-b 1"
AMDAHL_B = "0.2" if C.QUICK else "2"
FLAME_N = 4 if C.QUICK else 40


def trials() -> list[dict[str, Any]]:
    out = []
    for d in (0.002, 0.004):
        for fix in LOADER_FIX:
            out.append({"scenario": "loader", "variant": f"{d * 1e3:g} ms/item, {fix}", "level": "I/O",
                        "setup": LOADER.format(d=d, fix=LOADER_FIX[fix].format(d=d)),
                        "base": "for b in loader: step(b)", "fixed": "for b in fixed: step(b)",
                        "evidence": "%%dataloader_check loader --steps 3 --no-plot\nstep(batch)"})
    for r, share in (("K // 2", "~80%"), ("K", "~65%")):
        out.append({"scenario": "hot", "variant": f"parse {share}", "level": "algorithm",
                    "setup": HOT.format(r=r), "base": "parse(K); rest(R)", "fixed": "parse_np(K); rest(R)",
                    "evidence": f"%%flame --rate 500 --no-plot\nfor _ in range({FLAME_N}): parse(K); rest(R)"})
    for s in (0.3, 0.5):
        total = 0.016
        out.append({"scenario": "serial", "variant": f"S = {s}", "level": "concurrency",
                    "setup": SERIAL.format(s=total * s, p=total * (1 - s)), "base": "work(4)",
                    "fixed": f"work(4, serial={total * s / 2})",
                    "evidence": f"%%amdahl N=1,2,4 -b {AMDAHL_B} --no-plot\nwork(N)"})
    return out


def cell(ip: Any, src: str) -> bool:
    """Run a cell; whether it succeeded (--quick, a smoke run: a failed cell stops the run with its error)."""
    res = ip.run_cell(src)
    if not res.success and C.QUICK:
        raise RuntimeError(f"--quick: cell failed: {src.splitlines()[0]!r}") from (
            res.error_in_exec or res.error_before_exec)
    return bool(res.success)


def one(trial: dict[str, Any]) -> dict[str, Any]:
    from IPython.core.displaypub import CapturingDisplayPublisher
    from IPython.core.interactiveshell import InteractiveShell

    import perfmagic
    from perfmagic.storage import session

    with tempfile.TemporaryDirectory() as d:
        os.environ["PERFMAGIC_LEDGER_DIR"] = d
        session.forget_ledgers()
        ip = InteractiveShell.instance()
        ip.display_pub = CapturingDisplayPublisher()
        ip.run_line_magic("load_ext", "perfmagic")
        t0 = time.perf_counter()
        try:
            ok = cell(ip, trial["setup"])
            ok &= cell(ip, f"%%gpubench -l subject {GB} --no-memory --no-plot --baseline\n" + trial["base"])
            ok &= cell(ip, trial["evidence"])
            led = session.current_ledger(ip.user_ns)
            r = perfmagic.next_step(led, namespace=ip.user_ns)
            ok &= cell(ip, f"%%gpubench -l subject {GB} --no-memory --no-plot --vs baseline\n" + trial["fixed"])
            r2 = perfmagic.next_step(led, namespace=ip.user_ns, record=False)
            pc = next((p for p in r2.record if p.id == r.prediction_id), None)
            res = {"ok": bool(ok), "kind": r.kind, "level": r.level, "action": r.action, "low": r.low,
                   "high": r.high, "basis": r.basis, "measured": None if pc is None else pc.measured,
                   "within": None if pc is None else pc.within}
            if pc is not None and pc.run_a is not None:
                from perfmagic.timing.history import compare

                c = compare(led.get(pc.run_a), led.get(pc.run_b), ledger=led).comparison
                res["measured_lo"], res["measured_hi"] = 1 / c.ci_high, 1 / c.ci_low
        finally:
            ip.run_line_magic("unload_ext", "perfmagic")
            ip.run_cell("%reset -f")
            session.forget_ledgers()
        res["wall_s"] = time.perf_counter() - t0
    return res


def run(rounds: int, loads: tuple[int, ...], quick: bool = False) -> dict[str, Any]:
    from perfmagic.core.neighbours import busy_neighbours

    rng = random.Random(20261124)
    rows: list[dict[str, Any]] = []
    todo = trials()
    if quick:  # one variant of each scenario
        todo = list({t["scenario"]: t for t in todo}.values())
    for it in range(rounds):
        for load in rng.sample(loads, len(loads)):
            order = rng.sample(todo, len(todo))
            with busy_neighbours(load) as nb:
                got = [{"scenario": t["scenario"], "variant": t["variant"], "want": t["level"], "load": load,
                        "round": it, **one(t)} for t in order]
            for g in got:
                g["others_cores"] = nb.others_cores
                print(f"round {it + 1} load {load} {g['scenario']} ({g['variant']}): {g['kind']} {g['level']} "
                      f"range {g['low']}–{g['high']} measured {g['measured']} within {g['within']} "
                      f"[{g['wall_s']:.1f} s]", flush=True)
            rows += got
    return {"date": C.today(), "commit": C.git_state(), "machine": C.machine(), "command": C.command(),
            "trials": rows}


def rate(k: int, n: int) -> str:
    return f"{k}/{n}" if n else "n/a"


def report(data: dict[str, Any]) -> str:
    rows = []
    loads = sorted({t["load"] for t in data["trials"]})
    for load in loads:
        for sc in ("loader", "hot", "serial"):
            ts = [t for t in data["trials"] if t["load"] == load and t["scenario"] == sc]
            if not ts:
                continue
            chk = [t for t in ts if t["within"] is not None]
            hi = lambda t: math.inf if t["high"] is None else t["high"]  # noqa: E731
            outside = [t for t in chk if not (t["low"] <= t["measured"] <= hi(t))]
            loose = [hi(t) / t["measured"] for t in chk if t["high"] is not None and t["measured"]]
            measured = sorted(t["measured"] for t in chk)
            others = [t["others_cores"] for t in ts if t.get("others_cores") is not None]
            rows.append([load, sc, rate(sum(t["level"] == t["want"] for t in ts), len(ts)),
                         rate(sum(bool(t["within"]) for t in chk), len(ts)),
                         rate(sum(t["within"] is False for t in chk), len(chk)), rate(len(outside), len(chk)),
                         f"{measured[0]:.2f}–{measured[-1]:.2f}×" if measured else "n/a",
                         f"{statistics.median(loose):.1f} / {max(loose):.1f}" if loose else "n/a",
                         f"{statistics.median(t['wall_s'] for t in ts):.1f}",
                         f"{statistics.median(others):.2f}" if others else "n/a"])
    table = C.md_table(["busy neighbours", "planted", "right level", "within range", "confidently wrong",
                        "point outside", "measured gains", "high / measured (median / max)", "s/trial",
                        "others' CPU"], rows)
    targets = ", ".join(f"{k}: {v}" for k, v in TARGETS.items())
    return (f"## `%perf next`: proposals and checked predictions on planted bottlenecks (CPU)\n\n"
            f"- **date:** {data['date']}\n- **commit:** {data.get('commit') or 'not recorded'}\n"
            f"- **machine:** {data['machine']}\n- **command:** `{data['command']}`\n"
            f"- **targets:** {targets}\n\n"
            "Per trial: baseline, the evidence magic (`%%dataloader_check`, `%%flame --rate 500`, `%%amdahl "
            "N=1,2,4`), `%perf next` (recorded as a prediction), the planted fix with `%%gpubench --vs "
            "baseline`, then the check. Loader: 2 or 4 ms/item sleeps + 3 ms step, fixed by half-cost "
            "loading or 2 workers; hot: a pure-Python `parse` at ~65% or ~80% of the time, vectorized; "
            "serial: S = 0.3 or 0.5 over 4 threads, serial part halved. *within range*: the measured gain's "
            "95% interval reaches the range; *confidently wrong*: it lies wholly outside.\n\n" + table)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    C.add_args(ap, "1 round at 0 neighbours, one variant per scenario, tiny budgets (smoke test; never written to "
               "the docs)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--report-only", action="store_true", help=f"re-render the table from {JSON}")
    args = ap.parse_args()
    if args.report_only:
        data = json.loads(JSON.read_text())
    else:
        data = run(1 if args.quick else args.rounds, (0,) if args.quick else LOADS, args.quick)
        if not args.quick:
            JSON.parent.mkdir(parents=True, exist_ok=True)
            JSON.write_text(json.dumps(data, indent=1))
    C.publish("next", report(data), args, row="`%perf next` on planted bottlenecks: the proposal's rank, its "
              "predicted gain checked against the measured one, 0 and 1 busy neighbour")


if __name__ == "__main__":
    main()
