"""GPU timing: perfmagic (`perfmagic.bench()` and `%%gpubench`) vs `triton.testing.do_bench` and
`torch.utils.benchmark`, on a CUDA device.

Workloads:

* ``launch``    — ``x.add_(1)`` on a 1024-element fp32 CUDA tensor: one tiny kernel, launch-bound
* ``bf16_mm``   — ``a @ b``, bf16 8192×8192 × 8192×8192 (2·8192³ FLOP per call): compute-bound;
  achieved TFLOP/s = 2·n³ / central value
* ``copy``      — ``dst.copy_(src)``, 256 MiB fp32: bandwidth-bound (GB/s = 2 × bytes / central value)

Tools, each giving one central value per answer:

* ``perfmagic.bench(stmt, globals=ns)`` with defaults (CUDA events, chosen automatically) — ``.median``
* ``%%gpubench -q -o --no-plot`` through an IPython ``InteractiveShell`` — ``.median``
* ``triton.testing.do_bench(fn, return_mode="median")`` (if triton imports) — ms → s. Note: it clears
  the L2 cache before every call and times each call with its own pair of CUDA events.
* ``triton.testing.do_bench_cudagraph(fn)`` (where triton has it) — the calls captured in a CUDA graph
  and replayed back to back: the device's own pace, without launch gaps
* ``torch.utils.benchmark.Timer(...).blocked_autorange()`` and ``.adaptive_autorange()`` — ``.median``
  (its timer calls ``torch.cuda.synchronize()``)

Every round runs each tool once in a rotated order (interleaved, same process); the device is
synchronized after every answer. Without a CUDA device the script prints
``no CUDA device: GPU benchmark skipped``, leaves its docs section as it was (figures measured on a
GPU are not replaced by a CPU machine's `make bench`) and exits 0.

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
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

SKIP_MSG = "no CUDA device: GPU benchmark skipped"
PM_BENCH = "perfmagic.bench()"
PM_MAGIC = "%%gpubench"
TRITON = "triton do_bench"
TRITON_GRAPH = "triton do_bench_cudagraph"
BLOCKED = "torch blocked_autorange"
ADAPTIVE = "torch adaptive_autorange"
PERFMAGIC_TOOLS = (PM_BENCH, PM_MAGIC)


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    C.add_args(ap, "2 rounds, every tool with tiny settings; without CUDA, the --cpu-dry-run at tiny sizes (smoke "
               "test; never written to the docs)")
    ap.add_argument("--rounds", type=int, default=None, help="rounds per workload (default 7, --quick 2; >= 2)")
    ap.add_argument("--mm-n", type=int, default=8192, help="matmul size n (n×n @ n×n, bf16); default 8192")
    ap.add_argument("--small-n", type=int, default=1024, help="elements of the launch-bound tensor; default 1024")
    ap.add_argument("--copy-mib", type=int, default=256, help="MiB of the copied fp32 tensor; default 256")
    ap.add_argument("--json", default=str(C.RESULTS / "gpu.json"), help="where to write per-round data")
    ap.add_argument("--cpu-dry-run", action="store_true",
                    help="run the whole pipeline on the CPU with tiny sizes to test the script (implies --no-docs)")
    args = ap.parse_args()
    n_rounds = args.rounds or (2 if args.quick else 7)
    if n_rounds < 2:
        ap.error("--rounds must be at least 2 (spread needs several answers)")
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
        args.copy_mib = min(args.copy_mib, 1 if args.quick else 8)

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

    cfg = Config()
    cfg.HistoryAccessor.enabled = False
    ip = InteractiveShell.instance(config=cfg)
    ip.run_line_magic("load_ext", "perfmagic")

    n = args.mm_n
    g = torch.Generator(device=dev).manual_seed(0)
    ns: dict[str, Any] = {"torch": torch}
    ns["x"] = torch.zeros(args.small_n, device=dev, dtype=torch.float32)
    ns["a"] = torch.randn(n, n, device=dev, dtype=torch.bfloat16, generator=g)
    ns["b"] = torch.randn(n, n, device=dev, dtype=torch.bfloat16, generator=g)
    copy_n = (args.copy_mib * 2**20) // 4
    ns["src"] = torch.ones(copy_n, device=dev, dtype=torch.float32)
    ns["dst"] = torch.empty(copy_n, device=dev, dtype=torch.float32)
    sync()
    ip.user_ns.update(ns)
    flop = 2.0 * n ** 3
    workloads = [
        ("launch", f"launch-bound: `x.add_(1)`, x = {args.small_n} fp32 elements on {dev}", "x.add_(1)", None),
        ("bf16_mm", f"bf16 matmul `a @ b`, {n}×{n} @ {n}×{n} on {dev} (2·{n}³ FLOP)", "a @ b", flop),
        ("copy", f"bandwidth-bound copy `dst.copy_(src)`, {args.copy_mib} MiB fp32 on {dev} (reads and writes "
                 f"{2 * args.copy_mib} MiB)", "dst.copy_(src)", None),
    ]

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

    def as_fn(stmt: str) -> Callable[[], Any]:
        code = compile(f"def _perfmagic_bench_fn():\n    return {stmt}\n", "<bench_gpu>", "exec")
        scope = dict(ns)
        exec(code, scope)
        return scope["_perfmagic_bench_fn"]

    def pm_info(r: Any) -> dict[str, Any]:
        lo, hi = r.ci
        return {"central_s": r.median, "ci_s": [lo, hi], "min_s": r.min, "n_samples": r.n_samples,
                "number": r.number, "stop_reason": r.stop_reason, "sync": r.sync, "device": r.device,
                "tool_wall_s": r.wall_s, "cold_s": r.cold_s, "warnings": list(r.warnings), "notes": list(r.notes)}

    # --quick (a smoke run): every tool with tiny settings, so the run only exercises the code
    smoke = args.quick

    def t_bench(stmt: str) -> dict[str, Any]:
        return pm_info(perfmagic.bench(stmt, globals=ns, **({"budget": 0.02} if smoke else {})))

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

    def t_triton(stmt: str) -> dict[str, Any]:
        assert triton_bench is not None
        fn = as_fn(stmt)
        params = inspect.signature(triton_bench).parameters
        if "return_mode" in params:
            ms = triton_bench(fn, return_mode="median", **({"warmup": 1, "rep": 5} if smoke else {}))
        else:  # very old triton: quantiles only
            ms = triton_bench(fn, quantiles=[0.5])
        if isinstance(ms, (list, tuple)):
            ms = ms[0]
        return {"central_s": float(ms) * 1e-3}

    def t_triton_graph(stmt: str) -> dict[str, Any]:
        # the kernel replayed from a CUDA graph, back to back: no launch gaps, the device's own pace
        assert triton_graph is not None
        fn = as_fn(stmt)
        params = inspect.signature(triton_graph).parameters
        ms = triton_graph(fn, return_mode="median") if "return_mode" in params else triton_graph(fn)
        if isinstance(ms, (list, tuple)):
            ms = ms[0]
        return {"central_s": float(ms) * 1e-3}

    tools: dict[str, Callable[[str], dict[str, Any]]] = {PM_BENCH: t_bench, PM_MAGIC: t_magic}
    if triton_bench is not None:
        tools[TRITON] = t_triton
    if triton_graph is not None:
        tools[TRITON_GRAPH] = t_triton_graph
    tools[BLOCKED] = t_blocked
    tools[ADAPTIVE] = t_adaptive
    names = list(tools)
    others = [t for t in names if t not in PERFMAGIC_TOOLS]

    def timed(t: str, stmt: str) -> dict[str, Any]:
        sync()
        t0 = time.perf_counter()
        out = tools[t](stmt)
        sync()
        out["wall_s"] = time.perf_counter() - t0
        return out

    gpu = gpu_description() if on_gpu else "CPU dry run (no GPU)"
    print(f"device: {gpu}; {triton_note}; rounds per workload: {n_rounds}", flush=True)
    print("warm-up: every tool once on every workload (untimed)", flush=True)
    for _, _, stmt, _ in workloads:
        for t in names:
            timed(t, stmt)

    head = C.header("GPU timing", gpu=gpu)  # date, machine and code state at the start of the run
    t_start = time.perf_counter()
    data: dict[str, Any] = {"header": head, "command": C.command(),
                            "triton": triton_note, "rounds": n_rounds, "workloads": {}}
    rows, verdicts = [], []
    for name, desc, stmt, wl_flop in workloads:
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
        summ: dict[str, dict[str, float]] = {}
        for t in names:
            xs = [rr[t]["central_s"] for rr in rounds]
            summ[t] = {"central_s": statistics.median(xs), "spread_pct": C.spread_pct(xs), "cv_pct": C.cv_pct(xs),
                       "wall_s": statistics.median([rr[t]["wall_s"] for rr in rounds])}
            if wl_flop:
                summ[t]["tflops"] = wl_flop / summ[t]["central_s"] / 1e12
        data["workloads"][name] = {"description": desc, "stmt": stmt, "flop": wl_flop, "rounds": rounds,
                                   "summary": summ}
        ref = summ[PM_BENCH]["central_s"]
        for t in names:
            s = summ[t]
            tool = f"**`{t}`**" if t in PERFMAGIC_TOOLS else f"`{t}`"
            rows.append([f"`{name}`", tool, C.fmt_time(s["central_s"]), f"{s['central_s'] / ref:.3f}",
                         f"{s['spread_pct']:.1f}", f"{s['cv_pct']:.2f}", f"{s['wall_s']:.2f}",
                         f"{s['tflops']:.3g}" if wl_flop else "—"])
        if others:
            best = min(others, key=lambda t: summ[t]["spread_pct"])
            fastest = min(others, key=lambda t: summ[t]["wall_s"])
            for pm in PERFMAGIC_TOOLS:
                s = summ[pm]
                verdicts.append(
                    f"- **{name}, `{pm}`**: smallest spread? "
                    f"**{'yes' if s['spread_pct'] <= summ[best]['spread_pct'] else 'no'}** ({s['spread_pct']:.1f}% vs "
                    f"{summ[best]['spread_pct']:.1f}% from `{best}`). Wall time per answer <= fastest other? "
                    f"**{'yes' if s['wall_s'] <= summ[fastest]['wall_s'] else 'no'}** ({s['wall_s']:.2f} s vs "
                    f"{summ[fastest]['wall_s']:.2f} s for `{fastest}`).")
        syncs = sorted({rr[pm]["sync"] for rr in rounds for pm in PERFMAGIC_TOOLS})
        verdicts.append(f"- {name}: perfmagic synchronized with: {', '.join(syncs)}.")

    total = time.perf_counter() - t_start
    data["total_wall_s"] = total
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1, default=str), encoding="utf-8")

    table = C.md_table(["workload", "tool", "central value (median over rounds)", "÷ perfmagic.bench()",
                        "spread max−min %", "CV %", "wall s per answer", "TFLOP/s"], rows)
    wl = "\n".join(f"- `{nm}`: {d}" for nm, d, _, _ in workloads)
    body = (head + "\n"
            f"Workloads:\n\n{wl}\n\n"
            f"{triton_note}. {n_rounds} rounds per workload; each round every tool gives one answer, in an order "
            "rotated every round (same process, after one untimed warm-up pass; `torch.cuda.synchronize()` around "
            "every answer). Central values: perfmagic `.median` (defaults: ~1 s budget, ±1% CI target, CUDA-event "
            "sync chosen automatically); `triton.testing.do_bench(fn, return_mode=\"median\")` (clears the L2 "
            "cache before every call and times single calls, so on the launch-bound workload it measures a "
            "different thing than the block-timing tools); `torch.utils.benchmark` `.median`. Spread = "
            "(max − min) / median of the central values over the rounds; CV = stdev / mean; wall s per answer = "
            "median `time.perf_counter()` around the call. TFLOP/s = 2·n³ / central value. Per-round data: "
            f"`benchmarks/results/gpu.json`. Total run time {total:.0f} s.\n\n"
            + table + "\n" + "\n".join(verdicts) + "\n")
    print(f"per-round data written to {out}")
    C.publish("gpu", body, args, row="the timing-quality comparison on a CUDA device, vs `triton.testing.do_bench` "
              "and `torch.utils.benchmark`", reason="--cpu-dry-run: not a GPU's figures" if args.cpu_dry_run else None)
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
