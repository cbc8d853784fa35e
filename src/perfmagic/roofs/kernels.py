"""The calibration kernels behind :func:`perfmagic.roofs.ceilings.measure`: matmul sweeps for the
compute roofs and streaming kernels for the bandwidth roof, on the CPU (torch, numpy) and on CUDA
devices (cuBLAS through torch, timed with CUDA events). See :mod:`perfmagic.roofs.ceilings` for the
method; each function returns its best rate and the details kept in :attr:`Ceilings.details`.

torch and numpy are imported inside functions only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

MEMORY_CAP_BYTES = 1.5 * 1024 ** 3   # all bandwidth arrays together (CPU)
LLC_FACTOR = 8                       # wanted: each array >= LLC_FACTOR × LLC
CPU_MATMUL_SIZES = (256, 512, 1024, 1536, 2048)
GPU_MATMUL_SIZES = (1024, 2048, 4096, 8192)
BYTES_PER_ELT = {"torch_copy": 2, "numpy_copy": 2, "torch_triad": 3, "torch_add": 3, "numpy_triad": 5,
                 "cuda_copy": 2, "cuda_add": 3}
COUNTING = ("algorithmic bytes (STREAM convention): each array read once and written once per pass; "
            "write-allocate (read-for-ownership) traffic not counted; copy = 2 B/elt·size, fused add/triad "
            "= 3, numpy triad = 5 (two passes)")

ProgressFn = Callable[[float, str], Any]


class _Clock:
    """Budget bookkeeping and progress reports for one calibration."""

    def __init__(self, budget_s: float, progress: ProgressFn | None, steps: int) -> None:
        self.t0 = time.perf_counter()
        self.budget = budget_s
        self.progress = progress
        self.steps = max(1, steps)
        self.done = 0

    def spent(self) -> float:
        return time.perf_counter() - self.t0

    def step(self, message: str) -> None:
        self.done += 1
        if self.progress is not None:
            self.progress(min(1.0, self.done / self.steps), message)


def _sweep(run_one: Callable[[int], Callable[[], Any]], sizes: Iterable[int], deadline: float,
           timer: Callable[[Callable[[], Any]], float], reps: int = 3) -> tuple[float, int, list[list[float]]]:
    """Best ``2n³/t`` over ``sizes``; stops when the next size would pass ``deadline`` (perf_counter).
    Returns ``(best FLOP/s, its size, [[n, best rate at n], ...])``."""
    best, best_n, table = 0.0, 0, []
    last_t, last_n = None, None
    for n in sizes:
        if last_t is not None and last_n:
            predicted = last_t * (n / last_n) ** 3 * (reps + 1)
            if time.perf_counter() + predicted > deadline:
                break
        fn = run_one(n)
        t_warm = timer(fn)  # warm call (allocation, packing, thread pool wake-up)
        rate_n = 0.0
        for _ in range(reps):
            t = timer(fn)
            last_t, last_n = t, n
            rate_n = max(rate_n, 2.0 * n ** 3 / t if t > 0 else 0.0)
            if time.perf_counter() > deadline:
                break
        if last_t is None:
            last_t, last_n = t_warm, n
        table.append([n, rate_n])
        if rate_n > best:
            best, best_n = rate_n, n
        if time.perf_counter() > deadline:
            break
    if best_n:  # spend what is left on more trials at the best size: a max over more trials resists slow phases
        fn = run_one(best_n)
        per_call = 2.0 * best_n ** 3 / best
        while time.perf_counter() + 1.5 * per_call < deadline:
            t = timer(fn)
            if t > 0:
                best = max(best, 2.0 * best_n ** 3 / t)
    return best, best_n, table


def _wall(fn: Callable[[], Any]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _cpu_compute(dtypes: tuple[str, ...], clock: _Clock, share_s: float
                 ) -> tuple[dict[str, float], dict[str, Any], dict[str, str]]:
    import numpy as np
    import torch

    compute: dict[str, float] = {}
    details: dict[str, Any] = {}
    unsupported: dict[str, str] = {}
    methods: list[tuple[str, str]] = []
    for d in dtypes:
        methods.append((d, "torch"))
        if d in ("float32", "float64"):
            methods.append((d, "numpy"))
    per = share_s / max(1, len(methods))
    g = torch.Generator().manual_seed(0)
    for d, lib in methods:
        deadline = time.perf_counter() + per
        if lib == "torch":
            tdt = getattr(torch, d)
            try:  # does it run at all, and not absurdly slowly (no native kernel)?
                a = torch.randn(128, 128, generator=g).to(tdt)
                t = _wall(lambda: a @ a)
                t = _wall(lambda: a @ a)
            except Exception as exc:
                unsupported[d] = f"torch.matmul raised {type(exc).__name__}"
                clock.step(f"{d} torch matmul: unsupported")
                continue
            if t > 0.05:
                unsupported[d] = f"torch {d} matmul runs at {2 * 128 ** 3 / t / 1e9:.2g} GFLOP/s (no fast kernel)"
                clock.step(f"{d} torch matmul: too slow")
                continue

            def make(n: int, tdt: Any = tdt) -> Callable[[], Any]:
                x = torch.randn(n, n, generator=g).to(tdt)
                y = torch.randn(n, n, generator=g).to(tdt)
                out = torch.empty(n, n, dtype=tdt)
                return lambda: torch.matmul(x, y, out=out)
        else:
            ndt = getattr(np, d)
            rng = np.random.default_rng(0)

            def make(n: int, ndt: Any = ndt) -> Callable[[], Any]:
                x = rng.standard_normal((n, n)).astype(ndt)
                y = rng.standard_normal((n, n)).astype(ndt)
                out = np.empty((n, n), dtype=ndt)
                return lambda: np.matmul(x, y, out=out)

        best, n, table = _sweep(make, CPU_MATMUL_SIZES, deadline, _wall)
        if best > 0:
            details.setdefault(d, {})[f"{lib}_matmul"] = {"flops_per_s": best, "size": n, "sweep": table}
            compute[d] = max(compute.get(d, 0.0), best)
        clock.step(f"{d} {lib} matmul: {best / 1e9:.4g} GFLOP/s")
    return compute, details, unsupported


def _cpu_bandwidth(clock: _Clock, budget_s: float) -> tuple[float, dict[str, Any]]:
    import numpy as np
    import torch

    from ..core.env import cache_sizes

    llc = int(cache_sizes()["llc_bytes"])
    per_array = min(LLC_FACTOR * llc, MEMORY_CAP_BYTES / 3)
    try:
        import psutil

        per_array = min(per_array, psutil.virtual_memory().available / 8)
    except Exception:
        pass
    n = max(1 << 20, int(per_array // 4))
    x = torch.empty(n, dtype=torch.float32).fill_(1.0)  # fill_: first touch, pages faulted in now
    y = torch.empty(n, dtype=torch.float32).fill_(2.0)
    z = torch.empty(n, dtype=torch.float32).fill_(0.0)
    xn, yn, zn = x.numpy(), y.numpy(), z.numpy()  # views: no extra memory
    s = 3.0
    kernels: dict[str, Callable[[], Any]] = {
        "torch_add": lambda: torch.add(x, y, out=z),
        "torch_copy": lambda: z.copy_(x),
        "torch_triad": lambda: torch.add(x, y, alpha=s, out=z),
        "numpy_copy": lambda: np.copyto(zn, xn),
        "numpy_triad": lambda: (np.multiply(yn, s, out=zn), np.add(zn, xn, out=zn)),
    }
    elt = 4
    remaining = max(0.5, min(budget_s - clock.spent(), 0.3 * budget_s))
    per = remaining / len(kernels)
    methods: dict[str, Any] = {}
    best = 0.0
    for trial in range(2):  # two interleaved rounds: a burst of noise cannot hit every method
        for name, fn in kernels.items():
            deadline = time.perf_counter() + per / 2
            rate = methods.get(name, {}).get("bytes_per_s", 0.0)
            fn()
            reps = 0
            while reps < 2 or (time.perf_counter() < deadline and reps < 30):
                t = _wall(fn)
                reps += 1
                if t > 0:
                    rate = max(rate, BYTES_PER_ELT[name] * elt * n / t)
            methods[name] = {"bytes_per_s": rate, "bytes_per_element": BYTES_PER_ELT[name] * elt,
                             "passes": 2 if name == "numpy_triad" else 1,
                             "reps": reps + methods.get(name, {}).get("reps", 0)}
            best = max(best, rate)
            if trial == 1:
                clock.step(f"{name}: {rate / 1e9:.4g} GB/s")
    del x, y, z, xn, yn, zn
    return best, {"methods": methods, "array_bytes": n * elt, "arrays": 3, "llc_bytes": llc,
                  "working_set_over_cache": 3 * n * elt / llc, "counting": COUNTING, "dtype": "float32"}


# ---- GPU (real, exercised only where a CUDA device exists) ------------------------------------------
def _cuda_timer(dev: str) -> Callable[[Callable[[], Any]], float]:
    import torch

    def timer(fn: Callable[[], Any]) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3

    return timer


def _gpu_compute(dev: str, dtypes: tuple[str, ...], clock: _Clock, share_s: float
                 ) -> tuple[dict[str, float], dict[str, Any], dict[str, str]]:
    import torch

    idx = int(dev.split(":")[1])
    torch.cuda.set_device(idx)
    cap = torch.cuda.get_device_capability(idx)
    timer = _cuda_timer(dev)
    compute: dict[str, float] = {}
    details: dict[str, Any] = {}
    unsupported: dict[str, str] = {}
    per = share_s / max(1, len(dtypes))
    tf32_before = torch.backends.cuda.matmul.allow_tf32
    try:
        for d in dtypes:
            deadline = time.perf_counter() + per
            if d == "fp8_e4m3":
                if not (hasattr(torch, "float8_e4m3fn") and hasattr(torch, "_scaled_mm")) or cap < (8, 9):
                    unsupported[d] = f"needs torch.float8_e4m3fn, torch._scaled_mm and capability >= 8.9 (have {cap})"
                    clock.step(f"{d}: unsupported")
                    continue

                def make(n: int) -> Callable[[], Any]:
                    a = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn)
                    b = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn).t().contiguous().t()
                    one = torch.ones((), device=dev)
                    return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            else:
                if d in ("bfloat16",) and not torch.cuda.is_bf16_supported():
                    unsupported[d] = "torch.cuda.is_bf16_supported() is False"
                    clock.step(f"{d}: unsupported")
                    continue
                tdt = torch.float32 if d in ("float32", "tf32") else getattr(torch, d)

                def make(n: int, tdt: Any = tdt) -> Callable[[], Any]:
                    a = torch.randn(n, n, device=dev, dtype=tdt)
                    b = torch.randn(n, n, device=dev, dtype=tdt)
                    out = torch.empty(n, n, device=dev, dtype=tdt)
                    return lambda: torch.matmul(a, b, out=out)
            torch.backends.cuda.matmul.allow_tf32 = d == "tf32"
            try:
                best, n, table = _sweep(make, GPU_MATMUL_SIZES, deadline, timer, reps=5)
            except Exception as exc:  # e.g. a kernel this device lacks
                unsupported[d] = f"matmul raised {type(exc).__name__}: {exc}"[:200]
                clock.step(f"{d}: failed")
                continue
            if best > 0:
                compute[d] = best
                details[d] = {"cublas_matmul": {"flops_per_s": best, "size": n, "sweep": table}}
            clock.step(f"{d} cuBLAS matmul: {best / 1e12:.4g} TFLOP/s")
            torch.cuda.empty_cache()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32_before
    return compute, details, unsupported


def _gpu_bandwidth(dev: str, clock: _Clock, budget_s: float) -> tuple[float, dict[str, Any]]:
    import torch

    idx = int(dev.split(":")[1])
    props = torch.cuda.get_device_properties(idx)
    l2 = int(getattr(props, "L2_cache_size", 0) or 50 * 1024 ** 2)
    free, _ = torch.cuda.mem_get_info(idx)
    per_array = int(min(max(LLC_FACTOR * l2, 256 * 1024 ** 2), 1024 ** 3, free / 8))
    n = per_array // 4
    x = torch.ones(n, device=dev)
    y = torch.ones(n, device=dev)
    z = torch.empty(n, device=dev)
    timer = _cuda_timer(dev)
    kernels = {"cuda_copy": lambda: z.copy_(x), "cuda_add": lambda: torch.add(x, y, out=z)}
    methods: dict[str, Any] = {}
    best = 0.0
    for name, fn in kernels.items():
        fn()
        torch.cuda.synchronize(idx)
        rate = max(BYTES_PER_ELT[name] * 4 * n / t for t in (timer(fn) for _ in range(20)) if t > 0)
        methods[name] = {"bytes_per_s": rate, "bytes_per_element": BYTES_PER_ELT[name] * 4, "passes": 1}
        best = max(best, rate)
        clock.step(f"{name}: {rate / 1e9:.4g} GB/s")
    del x, y, z
    torch.cuda.empty_cache()
    return best, {"methods": methods, "array_bytes": n * 4, "arrays": 3, "l2_bytes": l2,
                  "working_set_over_cache": 3 * n * 4 / l2, "counting": COUNTING, "dtype": "float32"}
