"""Regression guards (``%perf guard``) on planted changes, beside 0 and 1 busy neighbours: does a guard
pass while the accepted change is in place, fail when it is reverted, and how long does it take?

Planted truth: ``slow_fn(K)`` is a pure-Python loop of K iterations calibrated to a call size (about
30 µs and 1 ms); the accepted change ``fast_fn(K)`` runs the same loop over K/g iterations, g = 5,
1.5, 1.25 and 1.15 (all clear the 10% bar, 1.15 only just: an accepted change); *reverted*, ``fast_fn``
is the K-iteration loop again (a new function object with the old body, as a user's undo makes it).

A *check* is what a generated guard runs: :func:`perfmagic.guard.check_pair` (A = ``slow_fn(K)``, B =
``fast_fn(K)`` interleaved in one process, 2 s budget, one retry with twice the budget when the interval
straddles the bar), in this process, on functions built from source. Each iteration runs every
(size, gain, state) once per load, in an order shuffled per iteration (seeded), inside
``busy_neighbours(n)``.

*End to end*: per load and state, a guard file written by :func:`perfmagic.write_guard` from a ledger
holding an interleaved accepted pair (gain 5, ~1 ms calls; a package on disk), run with ``python -m
pytest FILE`` in a fresh process: its wall time and exit status (0 kept, 1 reverted).

*Partial*: the 5× change regressed to a gain of 1.05 (inside the 10% band: the accepted gain lost).

Columns: *kept change → passes*; *kept change → "LOST"* = a confidently wrong guard; *reverted /
partial → fails* (a guard that passes here misses a regression); *cannot tell* = the guard's interval
stayed on the bar after the retry, or two verdicts under load disagreed (fails the guard and says why,
claims no loss). Rates are k/n with Wilson 95% intervals; *s/check* = median and max wall time of one
check.

    .venv/bin/python benchmarks/bench_guard.py                  # 16 iterations (~3 min on 2 cores)
    .venv/bin/python benchmarks/bench_guard.py --quick          # smoke test: every size and state once, tiny budgets
    .venv/bin/python benchmarks/bench_guard.py --report-only    # re-render the table from the JSON
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

SIZES = {"30us": 30e-6, "1ms": 1e-3}
GAINS = (5.0, 1.5, 1.25, 1.15)
STATES = ("kept", "reverted")
PARTIAL = 1.05  # a 5× change regressed to this gain: inside the 10% band, so the guard must fail
LOADS = (0, 1)
JSON = C.RESULTS / "guard.json"
CHECK_BUDGET = 0.05 if C.QUICK else 2.0  # s per check_pair (--quick, a smoke run: tiny)
TARGETS = {"wrong \"LOST\"": "0", "reverted or partial passing": "0", "cannot tell": "≤ 5%",
           "s/check": "median ≤ 2 s", "end to end": "≤ 5 s (\"a few seconds\")"}

LOOP = """\
def {name}(k):
    s = 0
    for i in range(k):
        s += i
    return s
"""


def calibrate(seconds: float) -> int:
    ns: dict[str, Any] = {}
    exec(LOOP.format(name="f"), ns)
    k = 1000
    for _ in range(8):
        reps = max(1, int(0.05 / max(seconds, 1e-7)))
        t = time.perf_counter()
        for _ in range(reps):
            ns["f"](k)
        dt = (time.perf_counter() - t) / reps
        k = max(10, int(k * seconds / dt))
    return k


def functions(k: int, gain: float, state: str) -> tuple[dict[str, Any], str, str]:
    src = LOOP.format(name="slow_fn") + "\n" + LOOP.format(name="_loop")
    ns: dict[str, Any] = {}
    exec(src, ns)
    kb = {"kept": max(1, round(k / gain)), "reverted": k, "partial": max(1, round(k / PARTIAL))}[state]
    ns["fast_fn"] = ns.pop("_loop")  # a new function object with the loop's body
    return ns, f"slow_fn({k})", f"fast_fn({kb})"


def one_check(k: int, gain: float, state: str) -> dict[str, Any]:
    from perfmagic.guard import check_pair

    ns, a, b = functions(k, gain, state)
    t = time.perf_counter()
    v = check_pair(a, b, namespace=ns, labels=("slow", "fast"), budget=CHECK_BUDGET)
    return {"status": v.status, "ratio": v.value, "ci": list(v.ci), "attempts": v.attempts,
            "wall_s": time.perf_counter() - t}


def end_to_end(root: Path, k: int, state: str) -> dict[str, Any]:
    """A package on disk, an accepted pair in a ledger, write_guard, then ``python -m pytest``."""
    from perfmagic.guard import write_guard
    from perfmagic.storage.ledger import Ledger
    from perfmagic.timing.pair import bench_pair

    pkg = root / "gbpkg"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("")
    fast_body = LOOP.format(name="fast_fn")
    (pkg / "ops.py").write_text(LOOP.format(name="slow_fn") + "\n\n" + fast_body)
    sys.path.insert(0, str(root))
    for m in [m for m in sys.modules if m.startswith("gbpkg")]:
        del sys.modules[m]
    import gbpkg.ops as ops  # noqa: E402

    led = Ledger(directory=root / "ledger", notebook="bench_guard.ipynb")
    code_a, code_b = f"slow_fn({k})", f"fast_fn({max(1, k // 5)})"
    pr = bench_pair(code_a, code_b, globals={"slow_fn": ops.slow_fn, "fast_fn": ops.fast_fn},
                    labels=("loop", "change"), memory=False, **({"budget": 0.1} if C.QUICK else {}))
    ra = led.record(magic="gpubench", label="loop", code=f"%%gpubench -l loop\n{code_a}",
                    options={"setup": "", "interleaved": True, "remeasured_from": 0}, metrics=pr.a.metrics(),
                    samples=pr.a.samples(), env=pr.a.env, primary_metric="median_s")
    rb = led.record(magic="gpubench", label="change", code=f"%%gpubench -l change --vs 1\n{code_b}",
                    options={"setup": "", "interleaved": True, "interleaved_with": ra.id}, metrics=pr.b.metrics(),
                    samples=pr.b.samples(), env=pr.b.env, primary_metric="median_s")
    path = root / "test_guard_e2e.py"
    write_guard(rb.id, path, module="gbpkg.ops", ledger=led, force=True)
    sys.path.remove(str(root))
    if state == "reverted":
        (pkg / "ops.py").write_text(LOOP.format(name="slow_fn") + "\n\n" + LOOP.format(name="fast_fn").replace(
            "for i in range(k)", "for i in range(k * 5)"))  # fast_fn(k // 5) does the whole loop again
    env = {k2: v for k2, v in os.environ.items() if not k2.startswith("PYTEST_")}
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(path)], cwd=root,
                         capture_output=True, text=True, timeout=300, env=env)
    if C.QUICK and out.returncode not in (0, 1):  # pytest itself failed (collection, import): a smoke run stops
        raise RuntimeError(f"--quick: python -m pytest {path.name} exited {out.returncode}:\n{out.stdout[-2000:]}"
                           f"{out.stderr[-2000:]}")
    return {"rc": out.returncode, "wall_s": time.perf_counter() - t,
            "lost_text": "perfmagic guard: LOST" in out.stdout, "accepted_ratio": pr.comparison.ratio}


def run(iterations: int, e2e: int, quick: bool = False) -> dict[str, Any]:
    from perfmagic.core.neighbours import busy_neighbours

    ks = {name: calibrate(s) for name, s in SIZES.items()}
    print(f"calibrated loop counts: {ks}", flush=True)
    rng = random.Random(20261124)
    checks: list[dict[str, Any]] = []
    ends: list[dict[str, Any]] = []
    gains = GAINS[:1] if quick else GAINS  # --quick: every state and size, one gain, 0 neighbours only
    cells = [(s, g, st) for s in SIZES for g in gains for st in STATES] + [(s, 5.0, "partial") for s in SIZES]
    for it in range(iterations):
        for load in LOADS[:1] if quick else rng.sample(LOADS, len(LOADS)):
            order = rng.sample(cells, len(cells))
            with busy_neighbours(load) as nb:
                got = [{"size": s, "gain": g, "state": st, "load": load, "iteration": it,
                        **one_check(ks[s], g, st)} for s, g, st in order]
            for r in got:
                r["others_cores"] = nb.others_cores
            checks += got
            print(f"iteration {it + 1}/{iterations} load {load}: "
                  + ", ".join(f"{r['size']} g{r['gain']:g} {r['state']}: {r['status']}" for r in got), flush=True)
    for load in LOADS[:1] if quick else LOADS:
        for st in STATES:
            for _ in range(e2e):
                with tempfile.TemporaryDirectory() as d, busy_neighbours(load) as nb:
                    r = end_to_end(Path(d), ks["1ms"], st)
                ends.append({"load": load, "state": st, "others_cores": nb.others_cores, **r})
                print(f"end to end load {load} {st}: rc {r['rc']} in {r['wall_s']:.2f} s", flush=True)
    return {"date": C.today(), "commit": C.git_state(), "machine": C.machine(), "command": C.command(), "loop_counts": ks,
            "checks": checks, "end_to_end": ends}


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return math.nan, math.nan
    p, den = k / n, 1 + z * z / n
    c = (p + z * z / (2 * n)) / den
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, c - h), min(1.0, c + h)


def rate(k: int, n: int) -> str:
    lo, hi = wilson(k, n)
    return f"{k}/{n} ({lo:.0%}–{hi:.0%})" if n else "n/a"


def report(data: dict[str, Any]) -> str:
    rows = []
    for load in LOADS:
        for size in SIZES:
            cs = [c for c in data["checks"] if c["load"] == load and c["size"] == size]
            kept = [c for c in cs if c["state"] == "kept"]
            rev = [c for c in cs if c["state"] == "reverted"]
            walls = [c["wall_s"] for c in cs]
            others = [c["others_cores"] for c in cs if c.get("others_cores") is not None]
            by_gain = ", ".join(
                f"{g:g}×: {statistics.median(c['ratio'] for c in kept if c['gain'] == g):.3f}" for g in GAINS
                if any(c["gain"] == g for c in kept))
            part = [c for c in cs if c["state"] == "partial"]
            rows.append([load, size, rate(sum(c["status"] == "kept" for c in kept), len(kept)),
                         rate(sum(c["status"] == "lost" for c in kept), len(kept)),
                         rate(sum(c["status"] != "kept" for c in rev + part), len(rev + part)),
                         rate(sum(c["status"] == "cannot tell" for c in cs), len(cs)),
                         f"{statistics.median(walls):.2f} / {max(walls):.2f}" if walls else "n/a",
                         by_gain, f"{statistics.median(others):.2f}" if others else "n/a"])
    table = C.md_table(["busy neighbours", "call", "kept change → passes", "kept change → \"LOST\" (wrong)",
                        "reverted / partial → fails", "cannot tell (fails, says why)", "s/check (median / max)",
                        "B/A kept (median, per gain)", "others' CPU"], rows)
    e_rows = []
    for load in LOADS:
        for st in STATES:
            es = [e for e in data["end_to_end"] if e["load"] == load and e["state"] == st]
            if not es:
                continue
            want = 0 if st == "kept" else 1
            e_rows.append([load, st, f"{sum(e['rc'] == want for e in es)}/{len(es)}",
                           f"{statistics.median(e['wall_s'] for e in es):.2f} / {max(e['wall_s'] for e in es):.2f}",
                           f"{sum(e['lost_text'] for e in es)}/{len(es)}"])
    e_table = C.md_table(["busy neighbours", "module", "right exit status", "python -m pytest s (median / max)",
                          "\"LOST\" printed"], e_rows)
    targets = ", ".join(f"{k}: {v}" for k, v in TARGETS.items())
    return (f"## Regression guards: `%perf guard` files on planted changes (CPU)\n\n"
            f"- **date:** {data['date']}\n- **commit:** {data.get('commit') or 'not recorded'}\n"
            f"- **machine:** {data['machine']}\n- **command:** `{data['command']}`\n"
            f"- **targets:** {targets}\n- **loop counts:** {data['loop_counts']}\n\n"
            "Each check is the generated guard's `check_pair`: A = the loop, B = the accepted change "
            "(gain 5×, 1.5×, 1.25×, 1.15×), the change reverted (the loop again) or partial (5× regressed to "
            "1.05×), interleaved in one process, "
            "2 s budget (+ one retry at 4 s on the bar).\n\n" + table +
            "\nEnd to end: `write_guard` from a ledger pair (gain 5×, ~1 ms calls), then `python -m pytest FILE` "
            "in a fresh process (interpreter, pytest and perfmagic start-up included).\n\n" + e_table)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    C.add_args(ap, "every size and state once with the 5x gain at 0 neighbours, 0.05 s checks, 1 end-to-end run "
               "per state (smoke test; never written to the docs)")
    ap.add_argument("--iterations", type=int, default=16)
    ap.add_argument("--e2e", type=int, default=3, help="end-to-end runs per load and state")
    ap.add_argument("--report-only", action="store_true", help=f"re-render the table from {JSON}")
    args = ap.parse_args()
    if args.report_only:
        data = json.loads(JSON.read_text())
    else:
        data = run(1 if args.quick else args.iterations, 1 if args.quick else args.e2e, args.quick)
        if not args.quick:
            JSON.parent.mkdir(parents=True, exist_ok=True)
            JSON.write_text(json.dumps(data, indent=1))
    C.publish("guard", report(data), args, row="`%perf guard` files on planted changes, 0 and 1 busy neighbour: kept "
              "changes pass, reverted or partly regressed ones fail, cannot tell, seconds per check and per "
              "`python -m pytest`")


if __name__ == "__main__":
    main()
