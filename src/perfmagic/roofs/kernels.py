"""The calibration kernels behind :func:`perfmagic.roofs.ceilings.measure`: matmul sweeps for the
compute roofs and streaming kernels for the bandwidth roof, on the CPU (torch, numpy) and on CUDA
devices (cuBLAS through torch, timed with CUDA events). See :mod:`perfmagic.roofs.ceilings` for the
method; each function returns its best rate and the details kept in :attr:`Ceilings.details`.

torch and numpy are imported inside functions only.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from typing import Any

from ..core.reference import reference_time
from ..findings import Finding
from .widekernels import cpu_flags, mismatch, probe  # noqa: F401  (cpu_flags: re-exported)

MEMORY_CAP_BYTES = 1.5 * 1024 ** 3   # all bandwidth arrays together (CPU)
LLC_FACTOR = 8                       # wanted: each array >= LLC_FACTOR × LLC
CPU_MATMUL_SIZES = (256, 512, 1024, 1536, 2048)
GPU_MATMUL_SIZES = (1024, 2048, 4096, 8192)
BYTES_PER_ELT = {"torch_copy": 2, "numpy_copy": 2, "torch_triad": 3, "torch_add": 3, "numpy_triad": 5,
                 "cuda_copy": 2, "cuda_add": 3}
COUNTING = "stream"  # how the bandwidth kernels count bytes: STREAM's convention, worded by render/findings_roofs.py

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

    def step(self, message: Any) -> None:
        """One step done; ``message`` (a :class:`~perfmagic.findings.Finding` or short text) is shown as text."""
        self.done += 1
        if self.progress is not None:
            self.progress(min(1.0, self.done / self.steps), str(message))


TRIAL_AGREE = 0.05     # two trials agree when within 5% of each other
TRIAL_MIN_S = 0.1      # a trial is at least this long (and at least TRIAL_MIN_CALLS calls)
TRIAL_MIN_CALLS = 2
MAX_TRIALS = 8         # per candidate, before giving up on agreement
MIN_TRIALS = 3         # per candidate while time remains (two at least, always)
NEAR_BEST = 0.85       # the second-best sweep size is confirmed too when within 15% of the best


def trial(fn: Callable[[], Any], timer: Callable[[Callable[[], Any]], float], min_s: float = TRIAL_MIN_S,
          min_calls: int = TRIAL_MIN_CALLS, max_calls: int = 60) -> tuple[float, int]:
    """One trial: calls of ``fn`` until it has lasted ``min_s`` and made ``min_calls`` calls; returns
    ``(fastest call time, calls)``. A trial is never a single short call."""
    times: list[float] = []
    t_end = time.perf_counter() + min_s
    while len(times) < min_calls or (time.perf_counter() < t_end and len(times) < max_calls):
        times.append(timer(fn))
    good = [t for t in times if t > 0]
    return (min(good) if good else float("inf")), len(times)


def agreeing_pair(rates: list[float], tol: float = TRIAL_AGREE) -> tuple[float, float, bool]:
    """``(higher, lower, agreed)``: the highest two neighbouring trial rates within ``tol`` of each
    other (a lone lucky trial above them is passed over), else the two highest with ``agreed`` False.
    Fewer than two trials: ``(0.0, 0.0, False)``."""
    if len(rates) < 2:
        return 0.0, 0.0, False
    top = sorted(rates, reverse=True)
    for hi, lo in zip(top, top[1:]):
        if lo >= (1.0 - tol) * hi:
            return hi, lo, True
    return top[0], top[1], False


def settled(rates: list[float], tol: float = TRIAL_AGREE) -> tuple[float, bool]:
    """``(value, agreed)`` of a list of trial rates: the value is the lower of the highest two trials
    that agree within ``tol`` (:func:`agreeing_pair`): a rate reached in two separate trials, never
    one lucky trial; when no two agree, the second-highest, with ``agreed`` False. Fewer than two
    trials: ``(0.0, False)``."""
    _, lo, agreed = agreeing_pair(rates, tol)
    return lo, agreed


TrialFn = Callable[[Callable[[], Any], float], tuple[float, int]]


def confirm(cands: dict[Any, tuple[Callable[[], Any], float]], timer: Callable[[Callable[[], Any]], float],
            deadline: float, min_s: float = TRIAL_MIN_S, max_trials: int = MAX_TRIALS,
            min_trials: int = MIN_TRIALS, trial_fn: TrialFn | None = None) -> dict[Any, list[float]]:
    """Interleaved trials (A B A B ...) of each candidate ``key -> (fn, work per call)`` until every
    candidate has ``min_trials`` trials and the best candidate has two agreeing trials (:func:`settled`).
    Past ``deadline`` (perf_counter) two trials each are enough; disagreeing trials go on for a grace
    of half the time given (five times ``min_s`` at least), then it stops; at most ``max_trials`` rounds. Returns ``key -> [work / fastest call time per trial]`` (work per second).
    ``trial_fn(fn, min_s) -> (time per call, calls)`` replaces :func:`trial` (a GPU's sustained trial)."""
    trials: dict[Any, list[float]] = {k: [] for k in cands}
    start = time.perf_counter()
    # past the deadline, trials that still disagree get a grace (half the time given, 5 trials' worth at least)
    # before the roof is given up as unreliable: a stall under load should not decide the roof
    grace = deadline + max(5 * min_s, 0.5 * (deadline - start))
    for _ in range(max_trials):
        for k, (fn, work) in cands.items():
            t, _calls = trial_fn(fn, min_s) if trial_fn is not None else trial(fn, timer, min_s)
            trials[k].append(work / t if t > 0 else 0.0)
        now = time.perf_counter()
        need = 2 if now > deadline else min_trials
        if any(len(v) < need for v in trials.values()):
            continue
        best = max(trials, key=lambda k: settled(trials[k])[0])
        if settled(trials[best])[1] or now > grace:
            break
    return trials


def _sweep(run_one: Callable[[int], Callable[[], Any]], sizes: Iterable[int], deadline: float,
           timer: Callable[[Callable[[], Any]], float], reps: int = 2, min_s: float = TRIAL_MIN_S,
           trial_fn: TrialFn | None = None) -> dict[str, Any]:
    """The matmul rate over ``sizes`` (a short look: one warm call and ``reps`` timed calls each; the
    sweep stops when the next size would pass ``deadline``), then repeated trials at the best size
    (and the second best when it is within 15%) until two trials agree (:func:`confirm`).
    Returns ``{"flops_per_s", "size", "sweep": [[n, rate], ...], "trials": {n: [...]}, "agreed",
    "spread"}``; ``flops_per_s`` is the second-highest trial of the best confirmed size."""
    table: list[list[float]] = []
    last_t, last_n = None, None
    sizes = list(sizes)
    # the sweep gets at most ~40% of the time; the trials that confirm the best size the rest
    sweep_deadline = time.perf_counter() + 0.4 * max(0.0, deadline - time.perf_counter())
    for n in sizes:
        if last_t is not None and last_n and table:
            predicted = last_t * (n / last_n) ** 3 * (reps + 1)
            if time.perf_counter() + predicted > sweep_deadline:
                break
        fn = run_one(n)
        t_warm = timer(fn)  # warm call (allocation, packing, thread pool wake-up)
        t = min([timer(fn) for _ in range(reps)] or [t_warm])
        last_t, last_n = t, n
        table.append([n, 2.0 * n ** 3 / t if t > 0 else 0.0])
    ranked = sorted(table, key=lambda x: -x[1])
    picks = [int(ranked[0][0])] + [int(n) for n, r in ranked[1:2] if r >= NEAR_BEST * ranked[0][1]]
    cands = {n: (run_one(n), 2.0 * n ** 3) for n in picks}
    for fn, _ in cands.values():
        timer(fn)  # warm again: the sweep moved on to other sizes
    trials = confirm(cands, timer, deadline, min_s=min_s, trial_fn=trial_fn)
    best_n = max(trials, key=lambda n: settled(trials[n])[0])
    value, agreed = settled(trials[best_n])
    hi, lo, _ = agreeing_pair(trials[best_n])
    return {"flops_per_s": value, "size": best_n, "sweep": table, "trials": {str(n): v for n, v in trials.items()},
            "agreed": agreed, "spread": (1.0 - lo / hi) if hi > 0 else None}


def _wall(fn: Callable[[], Any]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


# the CPU flags that give a dtype native matrix arithmetic (x86 and Arm names)
NATIVE_FLAGS = {"bfloat16": ("avx512_bf16", "amx_bf16", "bf16", "sve_bf16"),
                "float16": ("avx512_fp16", "amx_fp16", "fphp", "asimdhp")}


def emulated_dtype(d: str, flags: set[str] | None = None) -> Finding | None:
    """Why dtype ``d`` is emulated on this CPU (no native units: the flags lack every one of
    :data:`NATIVE_FLAGS`), or None (native, or the flags cannot be read)."""
    if d not in NATIVE_FLAGS:
        return None
    flags = cpu_flags() if flags is None else flags
    if not flags:
        return None
    if any(f in flags for f in NATIVE_FLAGS[d]):
        return None
    return Finding.of("roofs.emulated", flags=tuple(NATIVE_FLAGS[d][:2]), dtype=d)


def _cpu_compute(dtypes: tuple[str, ...], clock: _Clock, share_s: float, trial_s: float = TRIAL_MIN_S
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
    # numpy's OpenBLAS on a CPU it does not know runs narrow kernels: measure its wide ones in a child
    wide = mismatch() if any(d in ("float32", "float64") for d in dtypes) else None
    wide_dtypes = tuple(d for d in dtypes if d in ("float32", "float64")) if wide else ()
    per = share_s / max(1, len(methods) + len(wide_dtypes))
    g = torch.Generator().manual_seed(0)
    for d, lib in methods:
        deadline = time.perf_counter() + per
        sizes = CPU_MATMUL_SIZES
        if lib == "torch":
            tdt = getattr(torch, d)
            try:  # does it run at all? (its speed only chooses the sizes: a slow dtype is never dropped)
                a = torch.randn(128, 128, generator=g).to(tdt)
                _wall(lambda: a @ a)
                t128 = min(_wall(lambda: a @ a) for _ in range(3))
            except Exception as exc:
                unsupported[d] = f"torch.matmul raised {type(exc).__name__}"
                clock.step(Finding.of("roofs.step-unsupported", dtype=d, lib="torch"))
                continue
            # keep one call under ~0.3 s (an emulated dtype runs 10-100x slower)
            sizes = tuple(n for n in CPU_MATMUL_SIZES if t128 * (n / 128) ** 3 < 0.3) or (128,)

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

        # the machine's speed just before and after (the drift guard's fixed workload): a roof measured while
        # the host ran in a slow state is marked by measure() instead of passing for the machine's roof
        ref0 = reference_time(0.003)
        res = _sweep(make, sizes, deadline, _wall, min_s=trial_s)
        res["reference_s"] = [ref0, reference_time(0.003)]
        if res["flops_per_s"] > 0:
            details.setdefault(d, {})[f"{lib}_matmul"] = res
            compute[d] = max(compute.get(d, 0.0), res["flops_per_s"])
        clock.step(Finding.of("roofs.step-matmul", dtype=d, lib=lib, rate=res["flops_per_s"]))
    if wide:
        got = probe(wide["coretype"], wide_dtypes, per * len(wide_dtypes), trial_s=trial_s)
        wide = dict(wide, child_architecture=got.get("architecture"), error=got.get("error"),
                    in_process={d: {k.split("_")[0]: v["flops_per_s"] for k, v in details.get(d, {}).items()}
                                for d in wide_dtypes}, wide={})
        for d, res in (got.get("results") or {}).items():
            if res.get("flops_per_s", 0) > 0:
                details.setdefault(d, {})["numpy_matmul_wide"] = dict(res, coretype=wide["coretype"])
                wide["wide"][d] = res["flops_per_s"]
                compute[d] = max(compute.get(d, 0.0), res["flops_per_s"])
        clock.step(Finding.of("roofs.step-wide", coretype=wide["coretype"], error=wide["error"],
                              rates=tuple(wide["wide"].items())))
        details["_blas"] = wide
    return compute, details, unsupported


def _cpu_bandwidth(clock: _Clock, budget_s: float, share: float = 0.3, min_trials: int = MIN_TRIALS,
                   min_s: float = 0.25) -> tuple[float, dict[str, Any]]:
    import numpy as np
    import torch

    from ..core.env import cache_sizes

    llc = int(cache_sizes()["llc_bytes"])
    per_array = wanted = min(LLC_FACTOR * llc, MEMORY_CAP_BYTES / 3)
    from ..core.container import available_memory

    avail, bound = available_memory()  # a pod's limit, where it is tighter than the host's free RAM
    if avail is not None:
        per_array = min(per_array, avail / 8)  # three arrays and headroom: at most 3/8 of what is left
    n = max(1 << 20, int(per_array // 4))
    sized = None
    if per_array < wanted:
        sized = Finding.of("roofs.sized-by-memory", bound=bound, avail=avail, array=n * 4, wanted=wanted,
                           in_cache=3 * n * 4 < 4 * llc)
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
    for fn in kernels.values():
        fn()  # warm: thread pools, page tables
    remaining = max(0.3, min(budget_s - clock.spent(), share * budget_s))
    # interleaved trials (a burst of noise cannot hit every method), until the best method's two best
    # trials agree
    trials = confirm({k: (fn, BYTES_PER_ELT[k] * elt * n) for k, fn in kernels.items()}, _wall,
                     time.perf_counter() + remaining, min_s=min_s, min_trials=min_trials)
    methods: dict[str, Any] = {}
    for name, rates in trials.items():
        value, agreed = settled(rates)
        methods[name] = {"bytes_per_s": value, "bytes_per_element": BYTES_PER_ELT[name] * elt,
                         "passes": 2 if name == "numpy_triad" else 1, "reps": len(rates), "trials": rates,
                         "agreed": agreed}
        clock.step(Finding.of("roofs.step-bandwidth", method=name, rate=value))
    best_name = max(methods, key=lambda k: methods[k]["bytes_per_s"])
    del x, y, z, xn, yn, zn
    return methods[best_name]["bytes_per_s"], {
        "methods": methods, "best": best_name, "agreed": methods[best_name]["agreed"], "array_bytes": n * elt,
        "arrays": 3, "llc_bytes": llc, "working_set_over_cache": 3 * n * elt / llc, "counting": COUNTING,
        "dtype": "float32", "sized_by_memory": sized}


PHASES_AGREE = 0.10  # the two bandwidth phases of a CPU calibration are pooled when this close


def combine_bandwidth(a: dict[str, Any], b: dict[str, Any]) -> tuple[float, dict[str, Any], Finding | None]:
    """The bandwidth roof from two phases of trials (before and after the compute sweep). Phases within
    :data:`PHASES_AGREE`: every kernel's trials pooled. Otherwise the machine went through a slow phase
    that the load probe cannot see (on a shared VM host memory bandwidth halved for tens of seconds with
    no process to show for it): the higher phase is kept, with a note. Returns ``(roof, details, note)``."""
    def best(d: dict[str, Any]) -> float:
        return max((m["bytes_per_s"] for m in d["methods"].values()), default=0.0)

    va, vb = best(a), best(b)
    note = None
    if min(va, vb) >= (1.0 - PHASES_AGREE) * max(va, vb):
        methods = {}
        for name, m in a["methods"].items():
            rates = list(m["trials"]) + list(b["methods"].get(name, {}).get("trials", []))
            value, agreed = settled(rates)
            methods[name] = {**m, "bytes_per_s": value, "reps": len(rates), "trials": rates, "agreed": agreed}
        base = a
    else:
        base = a if va >= vb else b
        methods = dict(base["methods"])
        note = Finding.of("roofs.phases-moved", first=va, second=vb)
    best_name = max(methods, key=lambda k: methods[k]["bytes_per_s"])
    out = {**base, "methods": methods, "best": best_name, "agreed": methods[best_name]["agreed"],
           "phases": [va, vb]}
    return methods[best_name]["bytes_per_s"], out, note


# ---- GPU (real, exercised only where a CUDA device exists) ------------------------------------------
def _cuda_timer(dev: str) -> Callable[[Callable[[], Any]], float]:
    """One call between two CUDA events: the sweep's quick look at each size (the roof itself comes from
    :func:`_cuda_sustained`)."""
    import torch

    def timer(fn: Callable[[], Any]) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3

    return timer


SUSTAINED_S = 0.3  # a GPU roof trial: calls back to back for this long ...
SUSTAINED_KEEP = 0.5  # ... of which the last half is kept (the clock has settled under its power cap by then)
SUSTAINED_MAX_CALLS = 4000


def _cuda_sustained(dev: str) -> TrialFn:
    """A GPU roof trial: ``fn`` called back to back for ``min_s`` (``SUSTAINED_S`` at least) with a CUDA
    event after every call and no host wait between them, as a training loop runs its kernels; the trial's
    time is the median call of its last half. Returns ``(seconds per call, calls)``.

    Why not the fastest single call: on an H200 held at its 700 W limit (2026-11-28, benchmarks/bench_gpu.py)
    the fastest call of a trial caught a peak of the capped clock (bf16 1.060 of the best anchor), and bursts
    of 50 ms ran uncapped at 1980 MHz (fp16 1.126, bf16 1.091: 180 µs a 4096³ bf16 product, against 205 µs
    sustained). The cap settles within about 0.1 s of back-to-back work."""
    import torch

    one = _cuda_timer(dev)

    def run(fn: Callable[[], Any], min_s: float) -> tuple[float, int]:
        t1 = max(one(fn), 1e-7)
        n = int(min(SUSTAINED_MAX_CALLS, max(2 * TRIAL_MIN_CALLS, math.ceil(max(min_s, SUSTAINED_S) / t1))))
        events = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
        events[0].record()
        for e in events[1:]:
            fn()
            e.record()
        events[-1].synchronize()
        calls = [a.elapsed_time(b) / 1e3 for a, b in zip(events, events[1:])]
        kept = sorted(calls[int(len(calls) * (1 - SUSTAINED_KEEP)):])
        return kept[len(kept) // 2], n

    return run


def _gpu_compute(dev: str, dtypes: tuple[str, ...], clock: _Clock, share_s: float
                 ) -> tuple[dict[str, float], dict[str, Any], dict[str, str]]:
    import torch

    idx = int(dev.split(":")[1])
    torch.cuda.set_device(idx)
    cap = torch.cuda.get_device_capability(idx)
    timer, sustained = _cuda_timer(dev), _cuda_sustained(dev)
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
                    unsupported[d] = Finding.of("roofs.no-fp8", capability=tuple(cap))
                    clock.step(Finding.of("roofs.step-unsupported", dtype=d))
                    continue

                def make(n: int) -> Callable[[], Any]:
                    a = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn)
                    b = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn).t().contiguous().t()
                    one = torch.ones((), device=dev)
                    return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            else:
                if d in ("bfloat16",) and not torch.cuda.is_bf16_supported():
                    unsupported[d] = Finding.of("roofs.no-bf16")
                    clock.step(Finding.of("roofs.step-unsupported", dtype=d))
                    continue
                tdt = torch.float32 if d in ("float32", "tf32") else getattr(torch, d)

                def make(n: int, tdt: Any = tdt) -> Callable[[], Any]:
                    a = torch.randn(n, n, device=dev, dtype=tdt)
                    b = torch.randn(n, n, device=dev, dtype=tdt)
                    out = torch.empty(n, n, device=dev, dtype=tdt)
                    return lambda: torch.matmul(a, b, out=out)
            torch.backends.cuda.matmul.allow_tf32 = d == "tf32"
            try:
                res = _sweep(make, GPU_MATMUL_SIZES, deadline, timer, reps=3, min_s=SUSTAINED_S, trial_fn=sustained)
            except Exception as exc:  # e.g. a kernel this device lacks
                unsupported[d] = Finding.of("roofs.matmul-raised", error=type(exc).__name__, message=str(exc)[:200])
                clock.step(f"{d}: failed")
                continue
            if res["flops_per_s"] > 0:
                compute[d] = res["flops_per_s"]
                details[d] = {"cublas_matmul": res}
            clock.step(Finding.of("roofs.step-gpu-matmul", dtype=d, rate=res["flops_per_s"]))
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
    for fn in kernels.values():
        fn()
    torch.cuda.synchronize(idx)
    trials = confirm({k: (fn, BYTES_PER_ELT[k] * 4 * n) for k, fn in kernels.items()}, timer,
                     time.perf_counter() + max(1.0, min(budget_s - clock.spent(), 0.3 * budget_s)),
                     min_s=SUSTAINED_S, trial_fn=_cuda_sustained(dev))
    methods: dict[str, Any] = {}
    for name, rates in trials.items():
        value, agreed = settled(rates)
        methods[name] = {"bytes_per_s": value, "bytes_per_element": BYTES_PER_ELT[name] * 4, "passes": 1,
                         "reps": len(rates), "trials": rates, "agreed": agreed}
        clock.step(Finding.of("roofs.step-bandwidth", method=name, rate=value))
    best_name = max(methods, key=lambda k: methods[k]["bytes_per_s"])
    best = methods[best_name]["bytes_per_s"]
    del x, y, z
    torch.cuda.empty_cache()
    return best, {"methods": methods, "best": best_name, "agreed": methods[best_name]["agreed"],
                  "array_bytes": n * 4, "arrays": 3, "l2_bytes": l2,
                  "working_set_over_cache": 3 * n * 4 / l2, "counting": COUNTING, "dtype": "float32"}
