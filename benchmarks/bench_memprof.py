"""Overhead of ``%%memory`` and ``%%lineprof`` on the cell's run time, and the sampler's first-sample delay.

    .venv/bin/python benchmarks/bench_memprof.py [--quick] [--no-docs]

Workloads (each about 0.2 s plain):

* **CPU-bound** — a pure-Python arithmetic loop (no allocation to speak of);
* **allocation-heavy** — building a list of small tuples and dicts, then dropping it;
* **large buffers** — NumPy-free: a few ``bytearray`` buffers of 20 MiB written and freed.

Each is run plainly (the same per-statement compiled code, ``exec``-ed with no probe), under
``perfmagic.memory`` in its default mode (``trace="sample"``: the RSS sampler also notes the line
running at each sample; no tracemalloc), with ``trace="auto"`` (tracemalloc once RSS has grown
16 MiB), with ``trace="on"`` (``--trace on``: tracemalloc from the first line; at most 3 rounds, it is
slow), with ``trace="off"`` (``--no-trace``: RSS sampler + per-statement VmHWM only), and, for
information, under ``perfmagic.lineprof`` on the workload's function. For the default mode the
table also gives the share of the sampled RSS growth that was charged to a line inside the
workload's function (where all of it happens). Modes are interleaved round by round and the median of the rounds is reported; the
overhead is on the cell's own run time (``MemoryResult.wall_s``; the plain run starts, as ``%%memory``
does, from a heap whose freed memory was handed back with ``malloc_trim``), and the total time of the call
(start/stop, snapshot and site grouping included) is shown beside it. The first-sample delay is the
time from the cell's start to the sampler thread's first sample (interval 10 ms): the thread needs
the GIL, so a CPU-bound cell delays it by up to the interpreter's switch interval (5 ms).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

SETUP = '''
def cpu(n):
    s = 0
    for i in range(n):
        s += i * i % 7
    return s

def alloc(n):
    out = []
    for i in range(n):
        out.append((i, {"k": i}))
    return len(out)

def buffers(k):
    t = 0
    for _ in range(k):
        b = bytearray(20 * 2**20)
        b[::4096] = b"x" * len(b[::4096])
        t += len(b)
    return t
'''


def calibrate(ns: dict, name: str, target: float, n: int = 1000) -> int:
    while True:
        ns[name](n)  # warm (first-touch page faults, caches)
        t = time.perf_counter()
        ns[name](n)
        dt = time.perf_counter() - t
        if dt > 0.05:
            return max(1, int(n * target / dt))
        n *= 4


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    C.add_args(ap, "1 round per workload, cells of ~10 ms (smoke test; never written to the docs)")
    args = ap.parse_args()
    import perfmagic.profile.lineprof as LP
    import perfmagic.profile.memory as MP
    from perfmagic.core.memory import malloc_trim

    rounds = 1 if args.quick else 5
    target = 0.01 if args.quick else 0.2  # --trace on costs ~200x on the pure-Python loop: keep quick cells tiny
    ns: dict = {"__name__": "bench"}
    exec(compile(SETUP, "<bench-setup>", "exec"), ns)
    import linecache

    linecache.cache["<bench-setup>"] = (len(SETUP), None, SETUP.splitlines(True), "<bench-setup>")
    sizes = {"cpu": calibrate(ns, "cpu", target), "alloc": calibrate(ns, "alloc", target),
             "buffers": calibrate(ns, "buffers", target, n=2)}
    load = C.LoadMeter().start()
    rows = []
    first_samples: dict[str, list[float]] = {}
    for wl, label in (("cpu", "CPU-bound (pure Python loop)"), ("alloc", "allocation-heavy (tuples + dicts)"),
                      ("buffers", "large buffers (20 MiB bytearrays)")):
        code = f"r = {wl}({sizes[wl]})\n"
        res: dict[str, list[float]] = {"plain": [], "memory": [], "memory_total": [], "auto": [], "trace_on": [],
                                       "no_trace": [], "lineprof": [], "in_fn": []}
        modes: list[str] = []
        ns[wl](sizes[wl])  # warm
        for _ in range(rounds):
            stmts = MP.compile_statements(code, ns, "<bench-cell>")
            malloc_trim()  # the heap as %%memory leaves it before a cell: freed memory handed back
            t = time.perf_counter()
            for st in stmts:
                st.run()
            res["plain"].append(time.perf_counter() - t)
            t = time.perf_counter()
            r = MP.memory(code, globals=ns, filename="<bench-cell>")
            res["memory_total"].append(time.perf_counter() - t)
            res["memory"].append(r.wall_s)
            grown = r.growth_sites
            if r.sampled_growth_bytes >= 2**20:
                res["in_fn"].append(sum(g.size_bytes for g in grown if g.label.endswith(f"in {wl}()"))
                                    / r.sampled_growth_bytes)
            ra = MP.memory(code, globals=ns, filename="<bench-cell>", trace="auto")
            res["auto"].append(ra.wall_s)
            modes.append(ra.tracing)
            if len(res["trace_on"]) < 3:
                res["trace_on"].append(MP.memory(code, globals=ns, filename="<bench-cell>", trace="on").wall_s)
            first_samples.setdefault(wl, []).append(r.first_sample_s if r.first_sample_s is not None else float("nan"))
            res["no_trace"].append(MP.memory(code, globals=ns, filename="<bench-cell>", trace=False).wall_s)
            malloc_trim()  # same starting heap as the others
            lr = LP.lineprof(code, [ns[wl]], globals=ns, filename="<bench-cell>")
            res["lineprof"].append(lr.wall_s)
        med = {k: statistics.median(v) if v else float("nan") for k, v in res.items()}
        med["mode"] = max(set(modes), key=modes.count)  # type: ignore[assignment]
        rows.append((label, med))
        print(f"{label}: " + ", ".join(f"{k} {v if isinstance(v, str) else C.fmt_time(v)}" for k, v in med.items()),
              flush=True)
    # the sleeping cell: the GIL is free, so the first sample comes on time
    for _ in range(rounds):
        r = MP.memory("import time\ntime.sleep(0.05)\n", globals=ns)
        first_samples.setdefault("sleep", []).append(r.first_sample_s if r.first_sample_s is not None else float("nan"))
    # the planted short-lived peak
    r = MP.memory("n = len(bytearray(200 * 2**20))\n", globals=ns, trace="on")
    planted = (f"planted 200 MiB freed within its line: sampled max +{r.sampled_peak_bytes / 2**20:.0f} MiB, "
               f"VmHWM +{(r.hwm_peak_bytes or 0) / 2**20:.0f} MiB, tracemalloc +{(r.traced_peak_bytes or 0) / 2**20:.0f} MiB "
               f"({len(r.t_s)} samples at 10 ms)")
    others = load.stop()

    def pct(a: float, b: float) -> str:
        return f"{(a / b - 1) * 100:+.1f}%"

    lines = [C.header("Memory and line profiling overhead (%%memory, %%lineprof)"), "",
             f"Median of {rounds} interleaved rounds (`--trace on`: up to 3); each workload ≈ {target} s plain. "
             "Default `%%memory` (`--trace sample`) = RSS sampler (10 ms) that also notes the line running at each "
             "sample, + per-statement VmHWM, no tracemalloc; *growth in fn* = share of the sampled RSS growth charged "
             "to a line inside the workload's function (— when RSS grew less than 1 MiB). `--trace auto` = "
             "tracemalloc (8 frames) once RSS has grown 16 MiB (*auto* column: whether it started); `--trace on` = "
             "tracemalloc from the first line; `--no-trace` = sampler + VmHWM only, no line located. Overhead is on "
             "the cell's run time; \"total\" adds start/stop and building the result. *plain* runs the same "
             "statements with no probe, from a heap trimmed as `%%memory` trims it (`malloc_trim`: freed memory "
             "handed back, so both sides pay the page faults of fresh memory). Target: `%%memory` adds at most 10%.", "",
             "| workload | plain | %%memory (cell) | overhead | growth in fn | total | --trace auto | overhead | auto | "
             "--trace on | overhead | --no-trace | overhead | %%lineprof | overhead |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for label, m in rows:
        share = "—" if m["in_fn"] != m["in_fn"] else f"{100 * m['in_fn']:.0f}%"
        lines.append(f"| {label} | {C.fmt_time(m['plain'])} | {C.fmt_time(m['memory'])} | {pct(m['memory'], m['plain'])} | "
                     f"{share} | {C.fmt_time(m['memory_total'])} | {C.fmt_time(m['auto'])} | {pct(m['auto'], m['plain'])} | "
                     f"{m['mode']} | {C.fmt_time(m['trace_on'])} | "
                     f"{pct(m['trace_on'], m['plain'])} | {C.fmt_time(m['no_trace'])} | {pct(m['no_trace'], m['plain'])} | "
                     f"{C.fmt_time(m['lineprof'])} | {pct(m['lineprof'], m['plain'])} |")
    fs = {k: statistics.median([x for x in v if x == x]) if any(x == x for x in v) else float("nan")
          for k, v in first_samples.items()}
    lines += ["", "Time from the cell's start to the sampler thread's first sample (interval 10 ms; median): "
              + ", ".join(f"{k} cell {C.fmt_time(v)}" for k, v in fs.items()) + ".", "",
              f"- {planted}.",
              f"- other processes kept {others['others_cores']:.2f} cores busy on average during this run "
              f"(load average {C.loadavg()}): the machine was shared, so compare rows of this run only."]
    def met(key: str, i: int) -> str:
        return "met" if rows[i][1][key] / rows[i][1]["plain"] - 1 <= 0.10 else "not met"

    lines.append(f"- ≤ 10% target, default mode: CPU-bound **{met('memory', 0)}**, allocation-heavy "
                 f"**{met('memory', 1)}**, large buffers **{met('memory', 2)}**; `--no-trace`: "
                 f"**{met('no_trace', 0)} / {met('no_trace', 1)} / {met('no_trace', 2)}**; `--trace auto`: "
                 f"**{met('auto', 0)} / {met('auto', 1)} / {met('auto', 2)}**. tracemalloc costs every Python "
                 "allocation a traceback capture, so it runs only when asked (`--trace on`, or `auto` once memory "
                 "grows); the default names the growing lines from the sampler instead, at the sampler's cost.")
    body = "\n".join(lines)
    C.publish("memprof", body, args, row="overhead of `%%memory` (default sampled sites, --trace auto/on, --no-trace) "
              "and `%%lineprof` on CPU-bound, allocation-heavy and large-buffer cells; time to the first RSS sample")


if __name__ == "__main__":
    main()
