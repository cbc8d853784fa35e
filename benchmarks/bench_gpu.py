"""GPU timing: perfmagic (`perfmagic.bench()` and `%%gpubench`) vs `triton.testing.do_bench`,
`do_bench_cudagraph` and `torch.utils.benchmark`, on a CUDA device; the clocks behind the differences;
perfmagic's GPU roofs against the best of those tools.

Workloads:

* ``launch``      — ``x.add_(1)`` on a 1024-element fp32 CUDA tensor: one tiny kernel, launch-bound
* ``bf16_mm``     — ``a @ b``, bf16 4096×4096 @ 4096×4096 (2·4096³ FLOP per call)
* ``bf16_mm_big`` — the same at 8192 (where perfmagic read 11–13% faster than the anchors on 2026-11-23)
* ``copy``        — ``dst.copy_(src)``, 1 GiB fp32: bandwidth-bound (GB/s = 2 × bytes / central value)

Tools, each giving one central value per answer:

* ``perfmagic.bench(stmt, globals=ns)`` with defaults (CUDA events, chosen automatically) — ``.median``;
  its samples run back to back (``CudaSync.pace = "sustained"``: the next block is launched before the
  last is awaited)
* the same with ``CudaSync.pace = "isolated"``: the host waits for each block before it launches the
  next, so the device idles for the host's gap (perfmagic's default before 2026-11-26)
* ``%%gpubench -q -o --no-plot`` through an IPython ``InteractiveShell`` — ``.median``
* ``triton.testing.do_bench(fn, return_mode="median")`` and ``do_bench_cudagraph`` (where triton imports)
* ``torch.utils.benchmark.Timer(...).blocked_autorange()`` and ``.adaptive_autorange()`` — ``.median``

Every round runs each tool once in a rotated order (interleaved, same process); the device is
synchronized after every answer. While they run, a separate process reads the SM clock, the power draw
and the clock event reasons through NVML every 2 ms, so each answer carries the clock it ran at.

A probe times each kernel apart from every tool in three regimes: back to back (an event between
consecutive launches), isolated (host sync before each call) and with a 2 ms host gap before each call.

Roofs: ``perfmagic.roofs.ceilings.measure("cuda:0")`` (fp32, tf32, fp16, bf16 matmul; HBM copy) against
the best of do_bench_cudagraph / do_bench / adaptive_autorange on the same operation and size.

Without a CUDA device the script prints ``no CUDA device: GPU benchmark skipped``, leaves its docs
section as it was (figures measured on a GPU are not replaced by a CPU machine's `make bench`) and exits 0.

    .venv/bin/python benchmarks/bench_gpu.py            # 7 rounds
    .venv/bin/python benchmarks/bench_gpu.py --quick    # smoke test: 2 rounds of tiny settings
    .venv/bin/python benchmarks/bench_gpu.py --cpu-dry-run --quick   # exercise the script on the CPU (tiny sizes, no docs)
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

SKIP_MSG = "no CUDA device: GPU benchmark skipped"
PM_BENCH = "perfmagic.bench()"
PM_ISOLATED = "perfmagic.bench() isolated"
PM_MAGIC = "%%gpubench"
TRITON = "triton do_bench"
TRITON_GRAPH = "triton do_bench_cudagraph"
BLOCKED = "torch blocked_autorange"
ADAPTIVE = "torch adaptive_autorange"
PERFMAGIC_TOOLS = (PM_BENCH, PM_ISOLATED, PM_MAGIC)
GRAPH = "CUDA graph replay"
COPY_KERNEL = "copy as a kernel"
ROOF_DTYPES = ("float32", "tf32", "float16", "bfloat16")
CAPPED_BITS = 0x4 | 0x8 | 0x20 | 0x40 | 0x80  # sw power cap, hw slowdown, sw/hw thermal, power brake

# the NVML reader: its own process, so its polling never takes the timed process's GIL
SAMPLER = r"""
import sys, time
import pynvml
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(int(sys.argv[2]))
q = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
with open(sys.argv[1], "w", buffering=1) as f:
    while True:
        t = time.time()
        try:
            sm, p, r = pynvml.nvmlDeviceGetClockInfo(h, 1), pynvml.nvmlDeviceGetPowerUsage(h), q(h)
        except pynvml.NVMLError:
            time.sleep(0.002)
            continue
        f.write(f"{t:.4f} {sm} {p} {int(r)}\n")
        time.sleep(0.002)
"""


class Clocks:
    """SM clock, power and clock event reasons over time windows, from the sampler process's log."""

    def __init__(self, path: Path, enabled: bool) -> None:
        self.path, self.proc = path, None
        if enabled:
            try:
                import importlib.util

                if importlib.util.find_spec("pynvml") is None:
                    raise ImportError("pynvml (package nvidia-ml-py) is not installed")
                self.proc = subprocess.Popen([sys.executable, "-c", SAMPLER, str(path), "0"])
                time.sleep(0.5)
            except Exception as exc:
                print(f"NVML sampler not started ({type(exc).__name__}: {exc}); clock columns left empty")
        self._rows: list[tuple[float, float, float, int]] | None = None

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=5)

    def rows(self) -> list[tuple[float, float, float, int]]:
        if self._rows is None:
            out = []
            if self.path.exists():
                for ln in self.path.read_text().splitlines():
                    p = ln.split()
                    if len(p) == 4:
                        out.append((float(p[0]), float(p[1]), float(p[2]) / 1e3, int(p[3])))
            self._rows = out
        return self._rows

    def window(self, t0: float, t1: float) -> dict[str, Any]:
        xs = [r for r in self.rows() if t0 <= r[0] <= t1]
        if not xs:
            return {"sm_mhz": None, "power_w": None, "capped_pct": None, "n": 0}
        return {"sm_mhz": statistics.mean(r[1] for r in xs), "sm_mhz_min": min(r[1] for r in xs),
                "power_w": statistics.mean(r[2] for r in xs),
                "capped_pct": 100.0 * sum(1 for r in xs if r[3] & CAPPED_BITS) / len(xs), "n": len(xs)}


def gpu_description() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    i = torch.cuda.current_device()
    p = torch.cuda.get_device_properties(i)
    return (f"GPU {torch.cuda.get_device_name(i)} (sm_{p.major}{p.minor}, {p.total_memory / 2**30:.0f} GiB, "
            f"{torch.cuda.device_count()} visible), CUDA {torch.version.cuda}")


def skip(args: argparse.Namespace, why: str) -> int:
    """No CUDA here: say so, and leave the GPU section of docs/benchmarks.md as it is (a CPU machine's
    `make bench` must not replace figures measured on a GPU)."""
    print(SKIP_MSG + (f" ({why})" if why else "") + "; docs/benchmarks.md's GPU section is left as it was")
    return 0


def fmt(x: Any, spec: str = ".0f") -> str:
    return "—" if x is None else format(x, spec)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    C.add_args(ap, "2 rounds, every tool with tiny settings; without CUDA, the --cpu-dry-run at tiny sizes (smoke "
               "test; never written to the docs)")
    ap.add_argument("--rounds", type=int, default=None, help="rounds per workload (default 7, --quick 2; >= 2)")
    ap.add_argument("--mm-n", type=int, default=4096, help="matmul size n (n×n @ n×n, bf16); default 4096")
    ap.add_argument("--big-n", type=int, default=8192, help="the larger matmul's n; 0 leaves it out; default 8192")
    ap.add_argument("--small-n", type=int, default=1024, help="elements of the launch-bound tensor; default 1024")
    ap.add_argument("--copy-mib", type=int, default=1024, help="MiB of the copied fp32 tensor; default 1024")
    ap.add_argument("--no-roofs", action="store_true", help="leave out the roofs against the anchors")
    ap.add_argument("--json", default=str(C.RESULTS / "gpu.json"), help="where to write per-round data")
    ap.add_argument("--cpu-dry-run", action="store_true",
                    help="run the whole pipeline on the CPU with tiny sizes to test the script (implies --no-docs)")
    args = ap.parse_args()
    args.n_rounds = args.rounds or (2 if args.quick else 7)
    if args.n_rounds < 2:
        ap.error("--rounds must be at least 2 (spread needs several answers)")
    return args


def main() -> int:
    args = parse_args()
    n_rounds = args.n_rounds
    try:
        import torch
    except ImportError:
        return skip(args, "torch is not installed")
    if args.quick and not args.cpu_dry_run and not torch.cuda.is_available():
        print("no CUDA device: --quick runs the whole script on the CPU instead (--cpu-dry-run); "
              "docs/benchmarks.md's GPU section is left as it was", flush=True)
        args.cpu_dry_run = True
    if args.cpu_dry_run:
        args.no_docs = True
        if args.json == str(C.RESULTS / "gpu.json"):  # a dry run's figures are not the GPU's: kept apart
            args.json = str(Path(tempfile.gettempdir()) / "perfmagic-gpu-dry-run.json")
        args.mm_n = min(args.mm_n, 64 if args.quick else 256)
        args.big_n = min(args.big_n, 96 if args.quick else 384)
        args.copy_mib = min(args.copy_mib, 1 if args.quick else 8)
    elif args.quick:
        args.mm_n, args.big_n, args.copy_mib = min(args.mm_n, 1024), min(args.big_n, 2048), min(args.copy_mib, 64)

    if not args.cpu_dry_run and not torch.cuda.is_available():
        return skip(args, "")

    dev = "cpu" if args.cpu_dry_run else "cuda"
    on_gpu = dev == "cuda"

    def sync() -> None:
        if on_gpu:
            torch.cuda.synchronize()

    tmp = tempfile.TemporaryDirectory(prefix="perfmagic-gpu-")
    os.environ["PERFMAGIC_LEDGER_DIR"] = str(Path(tmp.name) / "ledger")
    os.environ["IPYTHONDIR"] = str(Path(tmp.name) / "ipython")
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    import perfmagic
    import torch.utils.benchmark as tb
    from perfmagic.core import sync as sync_mod

    cfg = Config()
    cfg.HistoryAccessor.enabled = False
    ip = InteractiveShell.instance(config=cfg)
    ip.run_line_magic("load_ext", "perfmagic")

    g = torch.Generator(device=dev).manual_seed(0)
    ns: dict[str, Any] = {"torch": torch}
    ns["x"] = torch.zeros(args.small_n, device=dev, dtype=torch.float32)
    workloads = [("launch", f"launch-bound: `x.add_(1)`, x = {args.small_n} fp32 elements on {dev}", "x.add_(1)",
                  None, None)]
    for key, n in (("", args.mm_n), ("_big", args.big_n)):
        if n:
            ns["a" + key] = torch.randn(n, n, device=dev, dtype=torch.bfloat16, generator=g)
            ns["b" + key] = torch.randn(n, n, device=dev, dtype=torch.bfloat16, generator=g)
            workloads.append((f"bf16_mm{key}", f"bf16 matmul `a{key} @ b{key}`, {n}×{n} @ {n}×{n} on {dev} "
                              f"(2·{n}³ FLOP)", f"a{key} @ b{key}", 2.0 * n ** 3, None))
    copy_n = (args.copy_mib * 2**20) // 4
    ns["src"] = torch.randn(copy_n, device=dev, dtype=torch.float32, generator=g)
    ns["dst"] = torch.empty(copy_n, device=dev, dtype=torch.float32)
    workloads.append(("copy", f"bandwidth-bound copy `dst.copy_(src)`, {args.copy_mib} MiB fp32 on {dev} (reads and "
                      f"writes {2 * args.copy_mib} MiB)", "dst.copy_(src)", None, 2.0 * copy_n * 4))
    sync()
    ip.user_ns.update(ns)

    threads = torch.get_num_threads()
    triton_bench: Callable[..., Any] | None = None
    triton_graph: Callable[..., Any] | None = None
    triton_note = ""
    if on_gpu:
        try:
            import triton
            from triton.testing import do_bench as triton_bench

            triton_graph = getattr(__import__("triton.testing", fromlist=["x"]), "do_bench_cudagraph", None)
            triton_note = f"triton {getattr(triton, '__version__', '?')}" + (
                "" if triton_graph is not None else " (no do_bench_cudagraph)")
        except Exception as exc:  # ImportError, or a broken triton install
            triton_note = f"triton not importable ({type(exc).__name__}: {exc}); its rows are left out"
    else:
        triton_note = "triton skipped in --cpu-dry-run"

    def as_fn(stmt: str, scope_ns: dict[str, Any] | None = None) -> Callable[[], Any]:
        code = compile(f"def _perfmagic_bench_fn():\n    return {stmt}\n", "<bench_gpu>", "exec")
        scope = dict(scope_ns if scope_ns is not None else ns)
        exec(code, scope)
        return scope["_perfmagic_bench_fn"]

    def pm_info(r: Any) -> dict[str, Any]:
        lo, hi = r.ci
        return {"central_s": r.median, "ci_s": [lo, hi], "min_s": r.min, "n_samples": r.n_samples,
                "number": r.number, "stop_reason": r.stop_reason, "sync": r.sync, "device": r.device,
                "tool_wall_s": r.wall_s, "cold_s": r.cold_s, "warnings": [str(w) for w in r.warnings],
                "notes": [str(n) for n in r.notes]}

    smoke = args.quick  # --quick: every tool with tiny settings, so the run only exercises the code

    def t_bench(stmt: str) -> dict[str, Any]:
        return pm_info(perfmagic.bench(stmt, globals=ns, **({"budget": 0.02} if smoke else {})))

    def t_isolated(stmt: str) -> dict[str, Any]:
        before = sync_mod.CudaSync.pace
        sync_mod.CudaSync.pace = "isolated"
        try:
            return t_bench(stmt)
        finally:
            sync_mod.CudaSync.pace = before

    def t_magic(stmt: str) -> dict[str, Any]:
        r = ip.run_cell_magic("gpubench", "-q -o --no-plot" + (" -b 0.02" if smoke else ""), stmt)
        if r is None:
            raise RuntimeError("%%gpubench -q -o returned None")
        return pm_info(r)

    def t_blocked(stmt: str) -> dict[str, Any]:
        m = tb.Timer(stmt, globals=ns, num_threads=threads).blocked_autorange(**({"min_run_time": 0.005} if smoke else {}))
        return {"central_s": m.median, "mean_s": m.mean, "number_per_run": m.number_per_run, "n_times": len(m.times)}

    def t_adaptive(stmt: str) -> dict[str, Any]:
        m = tb.Timer(stmt, globals=ns, num_threads=threads).adaptive_autorange(**({"max_run_time": 0.02} if smoke else {}))
        return {"central_s": m.median, "mean_s": m.mean, "number_per_run": m.number_per_run, "n_times": len(m.times)}

    def triton_ms(bench_fn: Callable[..., Any], fn: Callable[[], Any]) -> float:
        params = inspect.signature(bench_fn).parameters
        kw: dict[str, Any] = {"return_mode": "median"} if "return_mode" in params else {"quantiles": [0.5]}
        if smoke and "rep" in params:
            kw["rep"] = 5
        ms = bench_fn(fn, **kw)
        return float(ms[0] if isinstance(ms, (list, tuple)) else ms)

    def t_triton(stmt: str) -> dict[str, Any]:
        assert triton_bench is not None
        return {"central_s": triton_ms(triton_bench, as_fn(stmt)) * 1e-3}

    def t_triton_graph(stmt: str) -> dict[str, Any]:
        # the kernel replayed from a CUDA graph, back to back: no launch gaps, the device's own pace
        assert triton_graph is not None
        return {"central_s": triton_ms(triton_graph, as_fn(stmt)) * 1e-3}

    tools: dict[str, Callable[[str], dict[str, Any]]] = {PM_BENCH: t_bench, PM_MAGIC: t_magic}
    if on_gpu:
        tools[PM_ISOLATED] = t_isolated
    if triton_bench is not None:
        tools[TRITON] = t_triton
    if triton_graph is not None:
        tools[TRITON_GRAPH] = t_triton_graph
    tools[BLOCKED] = t_blocked
    tools[ADAPTIVE] = t_adaptive
    names = list(tools)
    others = [t for t in names if t not in PERFMAGIC_TOOLS]
    clocks = Clocks(Path(tmp.name) / "nvml.log", enabled=on_gpu)

    def timed(t: str, stmt: str) -> dict[str, Any]:
        sync()
        w0, t0 = time.time(), time.perf_counter()
        out = tools[t](stmt)
        sync()
        out["wall_s"] = time.perf_counter() - t0
        out["window"] = [w0, time.time()]
        return out

    gpu = gpu_description() if on_gpu else "CPU dry run (no GPU)"
    print(f"device: {gpu}; {triton_note}; rounds per workload: {n_rounds}", flush=True)
    print("warm-up: every tool once on every workload (untimed)", flush=True)
    for _, _, stmt, _, _ in workloads:
        for t in names:
            timed(t, stmt)

    head = C.header("GPU timing", gpu=gpu)  # date, machine and code state at the start of the run
    t_start = time.perf_counter()
    data: dict[str, Any] = {"header": head, "command": C.command(), "triton": triton_note, "rounds": n_rounds,
                            "workloads": {}, "probe": {}, "roofs": None}
    for name, desc, stmt, _, _ in workloads:
        data["probe"][name] = probe(as_fn(stmt), on_gpu, torch, smoke)
        # the probe ended on host gaps (a cooler device, higher clocks): back to back for 0.5 s first, so
        # that the first tool of round 1 does not run at clocks the others never see (2026-11-28 on an
        # H200: perfmagic, first in round 1, read bf16_mm 202.6 µs there and 206.5-209.7 µs after)
        steady(as_fn(stmt), 0.02 if smoke else 0.5, sync)
        rounds: list[dict[str, Any]] = []
        for r in range(n_rounds):
            k = r % len(names)
            order = names[k:] + names[:k]
            res: dict[str, Any] = {"order": order}
            for t in order:
                res[t] = timed(t, stmt)
            rounds.append(res)
            print(f"{name} round {r + 1}/{n_rounds}: " + ", ".join(
                f"{t} {C.fmt_time(res[t]['central_s'])} ({res[t]['wall_s']:.2f} s)" for t in order), flush=True)
        data["workloads"][name] = {"description": desc, "stmt": stmt, "rounds": rounds}
    if on_gpu:  # the same bytes moved by an elementwise kernel instead of torch's memcpy: does a graph's copy
        # (a memcpy node) run slower than the kernel that moves them? (do_bench_cudagraph on `copy`)
        data["probe"][COPY_KERNEL] = probe(as_fn("torch.mul(src, 1, out=dst)"), on_gpu, torch, smoke)
    data["roofs"] = None if (args.no_roofs or not on_gpu) else roofs_vs_anchors(
        torch, smoke, triton_bench, triton_graph, triton_ms, tb, clocks)
    clocks.stop()
    data["total_wall_s"] = time.perf_counter() - t_start
    body = report(data, workloads, names, others, clocks, on_gpu)
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1, default=str), encoding="utf-8")
    print(f"per-round data written to {out}")
    C.publish("gpu", body, args, row="the timing-quality comparison on a CUDA device, vs `triton.testing.do_bench`, "
              "`do_bench_cudagraph` and `torch.utils.benchmark`; the clocks behind it; the GPU roofs",
              reason="--cpu-dry-run: not a GPU's figures" if args.cpu_dry_run else None)
    tmp.cleanup()
    return 0


def probe(fn: Callable[[], Any], on_gpu: bool, torch: Any, smoke: bool) -> dict[str, Any]:
    """The kernel's own time apart from every tool, in three regimes: back to back (an event between
    consecutive launches), isolated (a host sync before each call) and after a 2 ms host gap."""
    def sync() -> None:
        if on_gpu:
            torch.cuda.synchronize()

    def ev() -> Any:
        return torch.cuda.Event(enable_timing=True) if on_gpu else None

    for _ in range(3):
        fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(10):
        fn()
    sync()
    per = (time.perf_counter() - t0) / 10
    k = 10 if smoke else int(min(3000, max(30, 0.3 / max(per, 1e-7))))
    out: dict[str, Any] = {"calls": k}
    for regime, gap in (("back to back", None), ("isolated", 0.0), ("2 ms host gap", 0.002)):
        if smoke:
            gap = None if gap is None else min(gap, 1e-4)
        w0 = time.time()
        ts: list[float] = []
        if gap is None:
            if on_gpu:
                evs = [ev() for _ in range(k + 1)]
                evs[0].record()
                for i in range(k):
                    fn()
                    evs[i + 1].record()
                evs[-1].synchronize()
                ts = [evs[i].elapsed_time(evs[i + 1]) / 1e3 for i in range(k)]
            else:
                for _ in range(k):
                    s = time.perf_counter()
                    fn()
                    ts.append(time.perf_counter() - s)
        else:
            for _ in range(k):
                sync()
                if gap:
                    time.sleep(gap)
                if on_gpu:
                    s, e = ev(), ev()
                    s.record()
                    fn()
                    e.record()
                    e.synchronize()
                    ts.append(s.elapsed_time(e) / 1e3)
                else:
                    s0 = time.perf_counter()
                    fn()
                    ts.append(time.perf_counter() - s0)
        out[regime] = {"median_s": statistics.median(ts), "window": [w0, time.time()]}
    if on_gpu:  # what do_bench_cudagraph times: the calls captured once in a CUDA graph, replayed
        out[GRAPH] = graph_replay(fn, torch, min(k, 100))
    return out


def steady(fn: Callable[[], Any], seconds: float, sync: Callable[[], None]) -> None:
    """``fn`` back to back for about ``seconds`` (synchronized every 20 calls), then synchronized."""
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        for _ in range(20):
            fn()
        sync()


def graph_replay(fn: Callable[[], Any], torch: Any, m: int) -> dict[str, Any]:
    """``m`` calls of ``fn`` captured in one CUDA graph (on a side stream, as ``do_bench_cudagraph``
    captures), the graph replayed 5 times between CUDA events: the median per call."""
    w0 = time.time()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        fn()  # a warm call on the capture stream
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(m):
                fn()
        torch.cuda.synchronize()
        ts = []
        for _ in range(5):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            graph.replay()
            b.record()
            b.synchronize()
            ts.append(a.elapsed_time(b) / 1e3 / m)
    del graph
    return {"median_s": statistics.median(ts), "window": [w0, time.time()]}


def roofs_vs_anchors(torch: Any, smoke: bool, triton_bench: Any, triton_graph: Any,
                     triton_ms: Callable[..., float], tb: Any, clocks: Clocks) -> dict[str, Any]:
    """perfmagic's measured GPU roofs and the same operations timed by the anchors."""
    from perfmagic.roofs.ceilings import measure

    print("roofs: perfmagic.roofs.ceilings.measure('cuda:0') ...", flush=True)
    w0 = time.time()
    c = measure("cuda:0", dtypes=ROOF_DTYPES, budget_s=3.0 if smoke else 15.0)
    out: dict[str, Any] = {"perfmagic_window": [w0, time.time()], "calibration_s": c.calibration_s,
                           "rows": {}, "warnings": [str(w) for w in c.warnings]}

    def anchors(fn: Callable[[], Any], work: float) -> dict[str, Any]:
        res: dict[str, Any] = {}
        for name, get in ((TRITON_GRAPH, (lambda: triton_ms(triton_graph, fn) * 1e-3) if triton_graph else None),
                          (TRITON, (lambda: triton_ms(triton_bench, fn) * 1e-3) if triton_bench else None),
                          (ADAPTIVE, lambda: tb.Timer("fn()", globals={"fn": fn}).adaptive_autorange(
                              **({"max_run_time": 0.02} if smoke else {})).median)):
            if get is None:
                continue
            torch.cuda.synchronize()
            t = get()
            torch.cuda.synchronize()
            res[name] = work / t
        return res

    tf32_before = torch.backends.cuda.matmul.allow_tf32
    try:
        for d in ROOF_DTYPES:
            if d not in c.compute:
                out["rows"][d] = {"perfmagic": None, "why": str(c.details["unsupported"].get(d, "not measured"))}
                continue
            n = int(c.details["compute"][d]["cublas_matmul"]["size"])
            tdt = torch.float32 if d in ("float32", "tf32") else getattr(torch, d)
            a, b = torch.randn(n, n, device="cuda", dtype=tdt), torch.randn(n, n, device="cuda", dtype=tdt)
            o = torch.empty(n, n, device="cuda", dtype=tdt)
            torch.backends.cuda.matmul.allow_tf32 = d == "tf32"
            out["rows"][d] = {"size": n, "perfmagic": c.compute[d],
                              "anchors": anchors(lambda: torch.matmul(a, b, out=o), 2.0 * n ** 3)}
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32_before
    bw = c.details.get("bandwidth") or {}
    nbytes = int(bw.get("array_bytes") or 2**30)
    x = torch.randn(nbytes // 4, device="cuda")
    z = torch.empty_like(x)
    copy_rate = (bw.get("methods", {}).get("cuda_copy", {}) or {}).get("bytes_per_s")
    out["rows"]["copy"] = {"size": nbytes, "perfmagic": copy_rate, "perfmagic_best": c.bandwidth_Bps,
                           "anchors": anchors(lambda: z.copy_(x), 2.0 * nbytes)}
    torch.cuda.empty_cache()
    return out


def report(data: dict[str, Any], workloads: list[Any], names: list[str], others: list[str], clocks: Clocks,
           on_gpu: bool) -> str:
    """The docs section: the tools' table, the verdicts, the regimes, the roofs."""
    rows, verdicts = [], []
    for name, _, _, wl_flop, wl_bytes in workloads:
        rounds = data["workloads"][name]["rounds"]
        summ: dict[str, dict[str, Any]] = {}
        for t in names:
            xs = [rr[t]["central_s"] for rr in rounds]
            ws = [clocks.window(*rr[t]["window"]) for rr in rounds]
            mhz = [w["sm_mhz"] for w in ws if w["sm_mhz"] is not None]
            watts = [w["power_w"] for w in ws if w["power_w"] is not None]
            capped = [w["capped_pct"] for w in ws if w["capped_pct"] is not None]
            summ[t] = {"central_s": statistics.median(xs), "spread_pct": C.spread_pct(xs), "cv_pct": C.cv_pct(xs),
                       "wall_s": statistics.median([rr[t]["wall_s"] for rr in rounds]),
                       "sm_mhz": statistics.mean(mhz) if mhz else None,
                       "power_w": statistics.mean(watts) if watts else None,
                       "capped_pct": statistics.mean(capped) if capped else None}
        data["workloads"][name]["summary"] = summ
        ref = summ[PM_BENCH]["central_s"]
        for t in names:
            s = summ[t]
            rate = (f"{wl_flop / s['central_s'] / 1e12:.3g} TFLOP/s" if wl_flop else
                    f"{wl_bytes / s['central_s'] / 1e9:.4g} GB/s" if wl_bytes else "—")
            tool = f"**`{t}`**" if t in PERFMAGIC_TOOLS else f"`{t}`"
            rows.append([f"`{name}`", tool, C.fmt_time(s["central_s"]), f"{s['central_s'] / ref:.3f}",
                         f"{s['spread_pct']:.1f}", f"{s['cv_pct']:.2f}", f"{s['wall_s']:.2f}", rate,
                         fmt(s["sm_mhz"]), fmt(s["power_w"]), fmt(s["capped_pct"])])
        verdicts += workload_verdicts(name, summ, names, others)
        syncs = sorted({rr[pm]["sync"] for rr in rounds for pm in PERFMAGIC_TOOLS if pm in rr})
        verdicts.append(f"- {name}: perfmagic synchronized with: {', '.join(syncs)}.")
    table = C.md_table(["workload", "tool", "central value (median over rounds)", "÷ perfmagic.bench()",
                        "spread max−min %", "CV %", "wall s per answer", "rate", "SM MHz", "power W",
                        "clock-capped % of samples"], rows)
    wl = "\n".join(f"- `{nm}`: {d}" for nm, d, _, _, _ in workloads)
    probe_rows = []
    for name, p in data["probe"].items():
        for regime in ("back to back", "isolated", "2 ms host gap", GRAPH):
            if regime not in p:
                continue
            w = clocks.window(*p[regime]["window"])
            probe_rows.append([f"`{name}`", regime, str(p["calls"]), C.fmt_time(p[regime]["median_s"]),
                               f"{p[regime]['median_s'] / p['back to back']['median_s']:.3f}",
                               fmt(w["sm_mhz"]), fmt(w["power_w"]), fmt(w["capped_pct"])])
    probe_table = C.md_table(["workload", "regime", "calls", "median per call (CUDA events)", "÷ back to back",
                              "SM MHz", "power W", "clock-capped % of samples"], probe_rows)
    body = (data["header"] + "\n"
            f"Workloads:\n\n{wl}\n\n"
            f"{data['triton']}. {data['rounds']} rounds per workload; each round every tool gives one answer, in an "
            "order rotated every round (same process, after one untimed warm-up pass; `torch.cuda.synchronize()` "
            "around every answer). Central values: perfmagic `.median` (defaults: ~1 s budget, ±1% CI target, "
            "CUDA-event sync chosen automatically, samples back to back; *isolated*: each block awaited before the next "
            "is launched, the default before 2026-11-26); "
            "`triton.testing.do_bench(fn, return_mode=\"median\")` (clears the L2 cache before every call and times "
            "single calls); `do_bench_cudagraph` (calls replayed from a CUDA graph, back to back); "
            "`torch.utils.benchmark` `.median`. Spread = (max − min) / median of the central values over the "
            "rounds; CV = stdev / mean; wall s per answer = median `time.perf_counter()` around the call. SM MHz, "
            "power and *clock-capped* (share of NVML samples with a power-cap, thermal or hardware-slowdown clock "
            "event reason) are read every 2 ms by a separate process during each answer, mean over rounds. "
            f"Per-round data: `benchmarks/results/gpu.json`. Total run time {data['total_wall_s']:.0f} s.\n\n"
            + table + "\n" + "\n".join(verdicts) + "\n\n"
            "### The kernels' own time, by regime\n\n"
            "Each kernel timed apart from every tool with CUDA events: *back to back* (one event between "
            "consecutive launches, no host wait), *isolated* (a host sync before each call: the device idles for "
            "the host's gap), *2 ms host gap* (a 2 ms sleep before each call), *CUDA graph replay* (up to 100 "
            "calls captured in one graph on a side stream, as `do_bench_cudagraph` does, replayed 5 times). "
            f"`{COPY_KERNEL}`: the copy's bytes moved by an elementwise kernel, `torch.mul(src, 1, out=dst)`, "
            "instead of torch's device-to-device memcpy.\n\n" + probe_table + "\n")
    if data.get("roofs"):
        body += "\n" + roofs_section(data["roofs"])
    return body


def workload_verdicts(name: str, summ: dict[str, dict[str, Any]], names: list[str], others: list[str]) -> list[str]:
    out = []
    if not others:
        return out
    best = min(others, key=lambda t: summ[t]["spread_pct"])
    fastest = min(others, key=lambda t: summ[t]["wall_s"])
    for pm in (t for t in PERFMAGIC_TOOLS if t in names):
        s = summ[pm]
        line = (f"- **{name}, `{pm}`**: spread ≤ the best anchor's? "
                f"**{'yes' if s['spread_pct'] <= summ[best]['spread_pct'] else 'no'}** ({s['spread_pct']:.1f}% vs "
                f"{summ[best]['spread_pct']:.1f}% from `{best}`). Wall time per answer ≤ fastest other? "
                f"**{'yes' if s['wall_s'] <= summ[fastest]['wall_s'] else 'no'}** ({s['wall_s']:.2f} s vs "
                f"{summ[fastest]['wall_s']:.2f} s for `{fastest}`).")
        if TRITON_GRAPH in summ and summ[TRITON_GRAPH]["central_s"] >= 100e-6:
            ratio = s["central_s"] / summ[TRITON_GRAPH]["central_s"]
            line += (f" Median ÷ do_bench_cudagraph's: {ratio:.3f} (target within 3%: "
                     f"**{'met' if abs(ratio - 1) <= 0.03 else 'not met'}**).")
        out.append(line)
    return out


def roofs_section(r: dict[str, Any]) -> str:
    rows, lines = [], []
    for key, row in r["rows"].items():
        if row.get("perfmagic") is None:
            rows.append([key, "—", "—", "—", "—", "not measured: " + row.get("why", "")[:80]])
            continue
        anchors = row["anchors"]
        best = max(anchors, key=anchors.get) if anchors else None
        unit, scale = ("GB/s", 1e9) if key == "copy" else ("TFLOP/s", 1e12)
        ratio = row["perfmagic"] / anchors[best] if best else None
        ok = ratio is not None and 0.90 <= ratio <= 1.05
        size = f"{row['size'] / 2**20:.0f} MiB" if key == "copy" else f"{row['size']}³"
        rows.append([f"`{key}` matmul" if key != "copy" else "`copy` (HBM)", size,
                     f"{row['perfmagic'] / scale:.4g} {unit}",
                     ", ".join(f"`{k}` {v / scale:.4g}" for k, v in anchors.items()),
                     f"{ratio:.3f}" if ratio is not None else "—",
                     f"**{'met' if ok else 'not met'}**"])
    table = C.md_table(["roof", "size", "perfmagic", "anchors (same operation and size)", "÷ best anchor",
                        "target 0.90–1.05"], rows)
    return ("### GPU roofs against the anchors\n\n"
            f"`perfmagic.roofs.ceilings.measure('cuda:0', dtypes={ROOF_DTYPES})` took {r['calibration_s']:.1f} s; "
            "each roof is then timed by the anchors on the same operation (`torch.matmul(a, b, out=o)` at the size "
            "perfmagic chose; `z.copy_(x)` on perfmagic's array size, bytes read + written). Rates: FLOP/s = 2n³ / "
            "time; copy GB/s = 2 × bytes / time.\n\n" + table + "\n" + "\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
