"""`%load_ext` time: perfmagic vs line_profiler, pyinstrument, memory_profiler and memray.

Each measurement is a fresh process (``subprocess.run([sys.executable, "-c", CODE])``) that creates
``InteractiveShell.instance()`` and then times only ``ip.run_line_magic("load_ext", NAME)`` with
``time.perf_counter``. Extensions are interleaved round-robin (the order rotates every round), so
drift of the machine hits all of them equally. One untimed warm-up process per extension runs first
(it fills the OS file cache and writes IPython's profile folder), and is not counted.

Issue target: perfmagic median <= 25 ms, and loading it imports none of torch, matplotlib, pandas,
ipywidgets.

    .venv/bin/python benchmarks/bench_load_ext.py            # 11 rounds
    .venv/bin/python benchmarks/bench_load_ext.py --quick    # smoke test: 1 round, no warm-up
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

EXTENSIONS = ["perfmagic", "line_profiler", "pyinstrument", "memory_profiler", "memray"]
HEAVY = ["torch", "matplotlib", "pandas", "ipywidgets"]
TARGET_MS = 25.0

CODE = r"""
import json, sys, time
from IPython.core.interactiveshell import InteractiveShell
ip = InteractiveShell.instance()
HEAVY = {heavy!r}
before = [m for m in HEAVY if m in sys.modules]
t0 = time.perf_counter()
ip.run_line_magic("load_ext", {name!r})
dt = time.perf_counter() - t0
after = [m for m in HEAVY if m in sys.modules]
loaded = {name!r} in ip.extension_manager.loaded
print("PERFMAGIC_BENCH " + json.dumps({{"ms": dt * 1e3, "before": before, "after": after, "loaded": loaded}}))
"""


def run_one(name: str, env: dict[str, str], cwd: str) -> dict:
    code = CODE.format(name=name, heavy=HEAVY)
    meter = C.LoadMeter().start()
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)
    for line in p.stdout.splitlines():
        if line.startswith("PERFMAGIC_BENCH "):
            d = json.loads(line.split(" ", 1)[1])
            d["rc"] = p.returncode
            d.update(meter.stop())
            if not d["loaded"]:
                d["error"] = (p.stderr.strip().splitlines() or ["extension not loaded"])[-1]
            return d
    err = (p.stderr.strip().splitlines() or [f"exit status {p.returncode}"])[-1]
    return {"rc": p.returncode, "error": err}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    C.add_args(ap, "1 round, no warm-up process (smoke test; never written to the docs)")
    ap.add_argument("--rounds", type=int, default=None, help="number of rounds (default 11, --quick 1)")
    args = ap.parse_args()
    rounds = args.rounds or (1 if args.quick else 11)

    installed = {n: importlib.util.find_spec(n) is not None for n in EXTENSIONS}
    todo = [n for n in EXTENSIONS if installed[n]]
    samples: dict[str, list[float]] = {n: [] for n in EXTENSIONS}
    others: dict[str, list[float]] = {n: [] for n in EXTENSIONS}
    head = C.header("`%load_ext` time")  # date, machine and code state at the start of the run
    load_start = C.loadavg()
    run_meter = C.LoadMeter().start()
    heavy_after: dict[str, set[str]] = {n: set() for n in EXTENSIONS}
    heavy_before: dict[str, set[str]] = {n: set() for n in EXTENSIONS}
    errors: dict[str, str] = {}

    with tempfile.TemporaryDirectory(prefix="perfmagic-loadext-") as tmp:
        env = dict(os.environ)
        env["IPYTHONDIR"] = str(Path(tmp) / "ipython")  # a clean IPython profile, not the user's
        env["PERFMAGIC_LEDGER_DIR"] = str(Path(tmp) / "ledger")
        env.pop("PYTHONSTARTUP", None)
        env.pop("MPLBACKEND", None)
        print(f"warm-up: one untimed process per extension ({', '.join(todo)})"
              + (" (--quick: skipped)" if args.quick else ""), flush=True)
        for n in [] if args.quick else todo:
            d = run_one(n, env, tmp)
            if "error" in d:
                errors[n] = d["error"]
        todo = [n for n in todo if n not in errors]
        for r in range(rounds):
            k = r % len(todo) if todo else 0
            order = todo[k:] + todo[:k]
            cells = []
            for n in order:
                d = run_one(n, env, tmp)
                if "error" in d:
                    errors[n] = d["error"]
                    continue
                samples[n].append(d["ms"])
                others[n].append(d["others_cores"])
                heavy_before[n].update(d["before"])
                heavy_after[n].update(d["after"])
                cells.append(f"{n} {d['ms']:.1f} ms")
            print(f"round {r + 1}/{rounds}: " + ", ".join(cells), flush=True)

    if args.quick and "perfmagic" in errors:  # a smoke run fails when perfmagic does not load
        raise SystemExit(f"--quick: %load_ext perfmagic failed: {errors['perfmagic']}")
    run_load = run_meter.stop()["others_cores"]
    rows = []
    for n in EXTENSIONS:
        xs = samples[n]
        if not installed[n]:
            rows.append([f"`{n}`", "not installed", "", "", "0", "", ""])
            continue
        if not xs:
            rows.append([f"`{n}`", f"failed: {errors.get(n, '?')}", "", "", "0", "", ""])
            continue
        after = sorted(heavy_after[n])
        heavy = ", ".join(after) or "none"
        if n == "perfmagic" and after:
            heavy = "**" + heavy + "**"
        if heavy_before[n]:
            heavy += f" (already before load_ext: {', '.join(sorted(heavy_before[n]))})"
        rows.append([f"`{n}`", f"{statistics.median(xs):.1f}", f"{min(xs):.1f}", f"{max(xs):.1f}", str(len(xs)), heavy,
                     f"{statistics.median(others[n]):.2f}"])
        if n in errors:
            rows[-1][0] += f" (some runs failed: {errors[n]})"
    table = C.md_table(["extension", "median ms", "min ms", "max ms", "processes",
                        "torch/matplotlib/pandas/ipywidgets in sys.modules after load_ext",
                        "others' CPU, cores (median)"], rows)

    pm = samples["perfmagic"]
    if pm:
        med = statistics.median(pm)
        after = sorted(heavy_after["perfmagic"])
        already = sorted(heavy_before["perfmagic"])
        verdict = (f"perfmagic median {med:.1f} ms: target <= {TARGET_MS:.0f} ms "
                   f"{'**met**' if med <= TARGET_MS else '**NOT met**'}; torch/matplotlib/pandas/ipywidgets in "
                   f"sys.modules after loading it: {', '.join(after) if after else 'none'}"
                   f"{' (**must be none**)' if after else ''}"
                   + (f" (already there before load_ext: {', '.join(already)})" if already else "") + ".")
    else:
        verdict = "perfmagic could not be measured: " + errors.get("perfmagic", "not installed") + "."

    body = (head + "\n"
            f"Each extension: {rounds} fresh processes, interleaved round-robin (order rotated every round), after "
            "one untimed warm-up process per extension. Each process creates `InteractiveShell.instance()` and times "
            "only `ip.run_line_magic(\"load_ext\", NAME)` with `time.perf_counter` (a clean temporary `IPYTHONDIR`). "
            "The last column lists which of torch, matplotlib, pandas, ipywidgets were in `sys.modules` right "
            "after `load_ext` in any of the processes (one already imported by creating the shell would be marked as such). *Others' CPU*: cores kept busy by "
            "processes other than this benchmark and its child while each child ran (`/proc/stat`), median over the "
            f"processes; over the whole run other processes used {run_load:.2f} cores on average (load average "
            f"{load_start} at the start, {C.loadavg()} at the end).\n\n"
            + table + "\n" + verdict + "\n")
    C.publish("load_ext", body, args, row="time of `%load_ext X` in a fresh IPython shell, perfmagic vs other "
              "profiling extensions; heavy modules imported by loading it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
