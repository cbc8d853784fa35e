"""Measured roofline ceilings: the best compute rate per dtype and the best memory bandwidth of a device.

The method (every figure and its method are kept in :attr:`Ceilings.details`):

* **Compute**, per dtype: the best matmul rate over a sweep of square sizes, ``2·n³`` FLOPs per
  ``n×n @ n×n``. CPU: ``torch.matmul`` for float32 / float64 / bfloat16 (bfloat16 only if it runs and
  is not absurdly slow) and ``numpy.matmul`` for float32 / float64. GPU: cuBLAS through torch for
  float32 (TF32 off), tf32 (``torch.backends.cuda.matmul.allow_tf32``), float16, bfloat16 and
  fp8_e4m3 (``torch._scaled_mm``, compute capability >= 8.9), timed with CUDA events.
  Each (method, size) runs a few reps after one warm call; the ceiling is the **maximum** rate over
  all reps, sizes and methods (a ceiling is what the machine *can* do, so max, not median).
* **Bandwidth**: the best of several streaming kernels over working sets far larger than the last-level
  cache (LLC size read from sysfs via :func:`perfmagic._env.cache_sizes`; the GPU's L2 from torch), each
  counted with the bytes it *moves by algorithm* (STREAM convention: every array read once and written
  once per pass; write-allocate traffic is not counted):

  ====================  =======================================  ===========
  method                operation                                bytes/elt
  ====================  =======================================  ===========
  torch_copy            ``dst.copy_(src)``                        2 (1 pass)
  numpy_copy            ``np.copyto(dst, src)``                   2 (1 pass)
  torch_triad           ``torch.add(b, c, alpha=s, out=a)``       3 (1 pass, fused)
  torch_add             ``torch.add(x, y, out=z)``                3 (1 pass, fused)
  numpy_triad           ``np.multiply(c, s, out=a); a += b``      5 (2 passes)
  ====================  =======================================  ===========

  The ceiling is the maximum over methods and trials.
* **Load**: other processes' CPU use (:class:`perfmagic._env.LoadProbe`) is read for a short idle
  window before and after, and over the whole calibration; a loaded machine can halve these numbers,
  so a warning says so and offers ``ceilings(recalibrate=True)``.
* **Cache**: one JSON file per machine fingerprint (:func:`perfmagic._env.fingerprint`) under
  ``$PERFMAGIC_CACHE_DIR`` or ``~/.cache/perfmagic/ceilings/``, written to a temporary file and moved
  into place with ``os.replace``: an interrupted calibration leaves no file, never half of one. A
  corrupt or unreadable file is ignored and re-measured.

torch and numpy are imported inside functions only.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..errors import BadOptionError, PerfmagicError

CACHE_VERSION = 1
CPU_DTYPES = ("float32", "float64", "bfloat16", "float16")
CPU_DEFAULT_DTYPES = ("float32", "float64", "bfloat16")
GPU_DTYPES = ("float32", "tf32", "float16", "bfloat16", "fp8_e4m3")
ALL_DTYPES = tuple(dict.fromkeys(CPU_DTYPES + GPU_DTYPES))
DTYPE_ALIASES = {"fp32": "float32", "float": "float32", "fp64": "float64", "double": "float64",
                 "bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp8": "fp8_e4m3",
                 "float8_e4m3fn": "fp8_e4m3"}
LOAD_WARN_CORES = 0.25
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


def normalize_dtype(name: Any) -> str:
    """``torch.bfloat16`` / ``'bf16'`` / ``'bfloat16'`` -> ``'bfloat16'`` (names as in :data:`ALL_DTYPES`)."""
    s = str(name).lower().replace("torch.", "").replace("numpy.", "")
    return DTYPE_ALIASES.get(s, s)


@dataclass(frozen=True)
class Ceilings:
    """The measured roofs of one device. Rates are per second: ``compute`` in FLOP/s per dtype name,
    ``bandwidth_Bps`` in bytes/s (algorithmic counting, see :data:`COUNTING`)."""

    device: str
    fingerprint: str
    measured_utc: str
    compute: dict[str, float]
    bandwidth_Bps: float
    details: dict[str, Any] = field(default_factory=dict)
    load_before: float | None = None
    load_after: float | None = None
    warnings: tuple[str, ...] = ()
    calibration_s: float = 0.0
    source: str = "measured"  # "measured" | "cache" | "given"

    def ridge(self, dtype: str = "float32") -> float:
        """Ridge point in FLOP/byte: ``compute[dtype] / bandwidth_Bps``."""
        d = normalize_dtype(dtype)
        if d not in self.compute:
            raise BadOptionError("dtype", dtype, "one of the measured dtypes: " + ", ".join(self.compute),
                                 f"this {self.device} ceiling has no {d} roof")
        return self.compute[d] / self.bandwidth_Bps

    @property
    def loaded(self) -> bool:
        return any(x is not None and x > LOAD_WARN_CORES for x in (self.load_before, self.load_after))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["warnings"] = list(self.warnings)
        d.pop("source")
        d["version"] = CACHE_VERSION
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any], source: str = "cache") -> Ceilings:
        if d.get("version") != CACHE_VERSION:
            raise ValueError(f"cache version {d.get('version')!r} != {CACHE_VERSION}")
        compute = {str(k): float(v) for k, v in d["compute"].items()}
        bw = float(d["bandwidth_Bps"])
        if not compute or not all(v > 0 and math.isfinite(v) for v in compute.values()) or not bw > 0:
            raise ValueError("non-positive ceiling in cache")
        return cls(device=str(d["device"]), fingerprint=str(d["fingerprint"]), measured_utc=str(d["measured_utc"]),
                   compute=compute, bandwidth_Bps=bw, details=dict(d.get("details") or {}),
                   load_before=d.get("load_before"), load_after=d.get("load_after"),
                   warnings=tuple(d.get("warnings") or ()), calibration_s=float(d.get("calibration_s") or 0.0),
                   source=source)

    def text(self) -> str:
        lines = [f"ceilings of {self.device} (fingerprint {self.fingerprint}, measured {self.measured_utc}, "
                 f"{self.source}; calibration {self.calibration_s:.1f} s)"]
        for d, v in self.compute.items():
            best = (self.details.get("compute") or {}).get(d, {})
            how = ", ".join(f"{m} {x['flops_per_s'] / 1e9:.4g} @ n={x['size']}" for m, x in best.items())
            lines.append(f"  {d:9s} {v / 1e9:10.4g} GFLOP/s   ridge {self.ridge(d):8.3g} FLOP/B   ({how})")
        bwd = (self.details.get("bandwidth") or {}).get("methods", {})
        how = ", ".join(f"{m} {x['bytes_per_s'] / 1e9:.4g}" for m, x in bwd.items())
        lines.append(f"  bandwidth {self.bandwidth_Bps / 1e9:10.4g} GB/s   ({how})")
        lines += [f"  ! {w}" for w in self.warnings]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.text())

    def figure_png(self, history: Iterable[Any] = ()) -> bytes:
        """The roofs alone (one per dtype, ridge points marked), with optional earlier points."""
        from .roofline import _as_point, roofline_png

        return roofline_png(self, [_as_point(h, i) for i, h in enumerate(history, 1)], None)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        from ..render.display import text_figure_bundle

        try:
            png: bytes | None = self.figure_png()
        except ImportError:
            png = None
        return text_figure_bundle(self.text(), png, "measured roofs")


# ---- cache ------------------------------------------------------------------------------------
def cache_dir(path: str | os.PathLike[str] | None = None) -> str:
    """The ceilings cache folder: ``path``, else ``$PERFMAGIC_CACHE_DIR``, else ``~/.cache/perfmagic/ceilings``."""
    if path is not None:
        return os.fspath(path)
    env = os.environ.get("PERFMAGIC_CACHE_DIR")
    return env if env else os.path.join(os.path.expanduser("~"), ".cache", "perfmagic", "ceilings")


def cache_path(fp: str, path: str | os.PathLike[str] | None = None) -> str:
    return os.path.join(cache_dir(path), f"ceilings-{fp}.json")


def load_cached(fp: str, path: str | os.PathLike[str] | None = None) -> Ceilings | None:
    """The cached ceilings for fingerprint ``fp``, or None (missing, unreadable, corrupt, other version)."""
    try:
        with open(cache_path(fp, path), encoding="utf-8") as f:
            return Ceilings.from_dict(json.load(f))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def save(c: Ceilings, path: str | os.PathLike[str] | None = None) -> str:
    """Write ``c`` atomically (temp file in the same folder + ``os.replace``); returns the file path."""
    folder = cache_dir(path)
    os.makedirs(folder, exist_ok=True)
    target = cache_path(c.fingerprint, path)
    fd, tmp = tempfile.mkstemp(prefix=".ceilings-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(c.to_dict(), f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return target


# ---- public entry -----------------------------------------------------------------------------
def _resolve_device(device: str) -> str:
    d = (device or "cpu").lower()
    if d == "auto":
        import torch

        return "cuda:0" if torch.cuda.is_available() else "cpu"
    if d == "cpu":
        return "cpu"
    if d == "cuda" or (d.startswith("cuda:") and d[5:].isdigit()):
        import torch

        if not torch.cuda.is_available():
            raise BadOptionError("device", device, "cpu (no CUDA device here)", "use ceilings('cpu')")
        idx = int(d[5:]) if ":" in d else torch.cuda.current_device()
        return f"cuda:{idx}"
    raise BadOptionError("device", device, "one of auto, cpu, cuda, cuda:N")


def _check_dtypes(dev: str, dtypes: Iterable[Any] | None) -> tuple[str, ...]:
    allowed = CPU_DTYPES if dev == "cpu" else GPU_DTYPES
    if dtypes is None:
        return CPU_DEFAULT_DTYPES if dev == "cpu" else GPU_DTYPES
    if isinstance(dtypes, str):
        dtypes = [dtypes]
    out = tuple(dict.fromkeys(normalize_dtype(d) for d in dtypes))
    for d in out:
        if d not in allowed:
            raise BadOptionError("dtypes", d, f"dtypes the {dev.split(':')[0]} ceilings measure: " + ", ".join(allowed))
    return out


def machine_fingerprint(dev: str) -> tuple[str, dict[str, Any]]:
    """``(fingerprint, env)`` of ``dev``. torch and numpy are imported first so the fingerprint (which
    includes torch's thread count and the loaded BLAS pools) is the same whoever calls first."""
    import numpy  # noqa: F401
    import torch  # noqa: F401

    from ..core.env import capture, fingerprint

    env = capture(dev)
    return fingerprint(env), env


def ceilings(device: str = "cpu", *, dtypes: Iterable[Any] | None = None, recalibrate: bool = False,
             cache_dir: str | os.PathLike[str] | None = None, progress: ProgressFn | None = None,
             budget_s: float = 15.0, save_cache: bool = True) -> Ceilings:
    """The measured ceilings of ``device`` ("cpu", "cuda", "cuda:N" or "auto"), from the cache when it
    holds every requested dtype for this machine fingerprint, else measured (and cached).

    ``progress(fraction, message)`` is called as the calibration goes; an exception it raises (or
    Ctrl-C) aborts the calibration and leaves the cache untouched. ``budget_s`` bounds the calibration
    (the sweep stops early at larger sizes when it runs out). See the module docstring for the method.
    """
    if not isinstance(budget_s, (int, float)) or not budget_s > 0 or math.isinf(budget_s):
        raise BadOptionError("budget_s", budget_s, "a positive, finite number of seconds", "e.g. budget_s=15")
    dev = _resolve_device(device)
    want = _check_dtypes(dev, dtypes)
    fp, env = machine_fingerprint(dev)
    if not recalibrate:
        cached = load_cached(fp, cache_dir)
        if cached is not None and all(d in cached.compute or d in cached.details.get("unsupported", {})
                                      for d in want):
            return cached
    c = measure(dev, dtypes=want, progress=progress, budget_s=float(budget_s), fp=fp, env=env)
    if save_cache:
        save(c, cache_dir)
    return c


# ---- measurement ---------------------------------------------------------------------------------
def _now_utc() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def _idle_load(seconds: float = 0.15) -> float | None:
    """Cores other processes keep busy while this one sleeps ``seconds``."""
    from ..core.env import LoadProbe

    p = LoadProbe().start()
    time.sleep(seconds)
    return p.stop()


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


def measure(dev: str, *, dtypes: Iterable[str] = CPU_DEFAULT_DTYPES, progress: ProgressFn | None = None,
            budget_s: float = 15.0, fp: str | None = None, env: dict[str, Any] | None = None) -> Ceilings:
    """Measure the ceilings of ``dev`` now (no cache). Roughly 60% of ``budget_s`` goes to compute,
    the rest to bandwidth."""
    from ..core.env import LoadProbe, fingerprint

    if fp is None or env is None:
        fp, env = machine_fingerprint(dev)
    dtypes = tuple(dtypes)
    load_before = _idle_load()
    probe = LoadProbe().start()
    steps = (sum(2 if d in ("float32", "float64") else 1 for d in dtypes) + 5) if dev == "cpu" else len(dtypes) + 2
    clock = _Clock(budget_s, progress, steps=steps)
    if progress is not None:
        progress(0.0, f"calibrating {dev} ceilings")
    if dev == "cpu":
        compute, cdetails, unsupported = _cpu_compute(dtypes, clock, 0.6 * budget_s)
        bw, bdetails = _cpu_bandwidth(clock, budget_s)
    else:
        compute, cdetails, unsupported = _gpu_compute(dev, dtypes, clock, 0.7 * budget_s)
        bw, bdetails = _gpu_bandwidth(dev, clock, budget_s)
    during = probe.stop()
    load_after = _idle_load()
    warnings: list[str] = []
    worst = max((x for x in (load_before, load_after, during) if x is not None), default=None)
    if worst is not None and worst > LOAD_WARN_CORES:
        warnings.append(f"other processes kept {worst:.1f} cores busy around the calibration (before "
                        f"{_f(load_before)}, during {_f(during)}, after {_f(load_after)}): a loaded machine can "
                        "halve these ceilings; re-measure on a quiet machine with ceilings(recalibrate=True)")
    if bdetails.get("working_set_over_cache", LLC_FACTOR) < LLC_FACTOR:
        warnings.append(f"bandwidth working set is {bdetails['working_set_over_cache']:.1f}× the reported "
                        f"last-level cache (wanted {LLC_FACTOR}×, memory cap reached); on a VM the reported LLC is "
                        "often the whole socket's, shared with other tenants")
    for d, why in unsupported.items():
        warnings.append(f"{d}: not measured ({why})")
    if progress is not None:
        progress(1.0, "done")
    details = {"compute": cdetails, "bandwidth": bdetails, "unsupported": unsupported, "load_during": during,
               "budget_s": budget_s, "env": {k: env.get(k) for k in ("cpu_model", "usable_cores", "torch_threads",
                                                                      "llc_bytes", "gpu", "versions")}}
    return Ceilings(device=dev, fingerprint=fp or fingerprint(env), measured_utc=_now_utc(), compute=compute,
                    bandwidth_Bps=bw, details=details, load_before=load_before, load_after=load_after,
                    warnings=tuple(warnings), calibration_s=clock.spent())


def _f(x: float | None) -> str:
    return "?" if x is None else f"{x:.1f}"


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
