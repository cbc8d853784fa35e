"""Environment capture: what machine and software a measurement ran on, and the doubts they raise.

:func:`capture` returns a JSON-serialisable dict stored with every result (CPU model, caches, cores,
the container's limits, free memory, versions, thread pools, the GPU through NVML), :func:`fingerprint`
hashes its stable part so results from different machines or software stacks are not compared by
accident, and :func:`doubt_warnings` turns a run's environment and the load measured during it into
one-line warnings. The load itself (how many cores *other* processes kept busy:
:class:`~perfmagic.core.load.LoadProbe`, the usable cores) is :mod:`perfmagic.core.load`; the thread
pools' oversubscription and limits are :mod:`perfmagic.core.threads`.

Importing this module is cheap: heavy or optional packages (psutil, threadpoolctl, pynvml) are
imported inside functions, and torch/numpy/jax/cupy are never imported at all -- they are only
inspected when the user's code already imported them (``sys.modules``); otherwise their versions
come from package metadata. Every probe degrades to ``None`` instead of raising.
"""

from __future__ import annotations

import functools
import gc
import os
import platform
import re
import sys
from typing import Any

from ..findings import Finding
from .load import usable_cores
from .threads import oversubscription

DEFAULT_LLC_BYTES = 32 * 1024 * 1024
_VERSION_DISTS = {  # reported name -> distribution names to try, first found wins
    "ipython": ("ipython",), "numpy": ("numpy",), "torch": ("torch",), "jax": ("jax",),
    "cupy": ("cupy", "cupy-cuda12x", "cupy-cuda11x", "cupy-cuda13x"), "perfmagic": ("perfmagic",),
}
# NVML clock event ("throttle") reason bits, nvml.h nvmlClocksEventReason*.
_THROTTLE_BITS = (
    (0x1, "gpu_idle"), (0x2, "applications_clocks"), (0x4, "sw_power_cap"), (0x8, "hw_slowdown"),
    (0x10, "sync_boost"), (0x20, "sw_thermal"), (0x40, "hw_thermal"), (0x80, "hw_power_brake"),
    (0x100, "display_clocks"),
)
_BENIGN_REASONS = frozenset({"gpu_idle", "applications_clocks", "sync_boost", "none"})


def _safe(fn: Any, *args: Any) -> Any:
    """``fn(*args)``, or None if it raises anything (one failing probe must not lose the rest)."""
    try:
        return fn(*args)
    except Exception:
        return None


def _text(value: Any) -> Any:
    """Decode bytes returned by older pynvml versions."""
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def _read(path: str) -> str | None:
    """Text of a small /proc or /sys file, or None when it is missing or unreadable."""
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _parse_size(text: str) -> int:
    """Parse a sysfs cache size such as ``"32K"``, ``"1024K"``, ``"32M"``, ``"2G"`` or ``"512"`` into bytes."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", text, re.IGNORECASE)
    if m is None:
        raise ValueError(f"unrecognised size: {text!r}")
    return int(m.group(1)) * 1024 ** " KMG".index(m.group(2).upper() or " ")


@functools.lru_cache(maxsize=None)
def cache_sizes() -> dict[str, Any]:
    """CPU cache sizes of cpu0 from ``/sys/devices/system/cpu/cpu0/cache/index*/{level,size,type}``.

    Instruction caches are ignored. ``llc_bytes`` is the size of the highest data/unified level (on
    VMs this is whatever the hypervisor reports). If nothing is readable, ``llc_bytes`` falls back
    to 32 MiB and ``llc_source`` is ``"default"`` instead of ``"sysfs"``. Cached per process.
    """
    root, levels = "/sys/devices/system/cpu/cpu0/cache", {}
    for entry in sorted(e for e in (_safe(os.listdir, root) or []) if e.startswith("index")):
        level, size, kind = (_read(f"{root}/{entry}/{k}") for k in ("level", "size", "type"))
        size_bytes = _safe(_parse_size, size or "")
        if (kind or "").strip().lower() != "instruction" and (level or "").strip().isdigit() and size_bytes:
            levels[int(level)] = max(levels.get(int(level), 0), size_bytes)
    llc = levels[max(levels)] if levels else None
    return {"l1d_bytes": levels.get(1), "l2_bytes": levels.get(2), "l3_bytes": levels.get(3),
            "llc_bytes": llc or DEFAULT_LLC_BYTES, "llc_source": "sysfs" if llc else "default"}


@functools.lru_cache(maxsize=None)
def _versions() -> dict[str, str | None]:
    """Package versions from ``importlib.metadata`` (no imports; cached: each lookup costs ms)."""
    from importlib import metadata

    out: dict[str, str | None] = {"python": platform.python_version()}
    for name, dists in _VERSION_DISTS.items():
        out[name] = next((v for v in (_safe(metadata.version, d) for d in dists) if v), None)
    return out


@functools.lru_cache(maxsize=None)
def _static() -> dict[str, Any]:
    """Facts that do not change within a process (platform() reads the interpreter binary: cache it)."""
    m = re.search(r"^model name\s*:\s*(.+)$", _read("/proc/cpuinfo") or "", re.MULTILINE)
    model = m.group(1).strip() if m else None
    return {"platform": _safe(platform.platform), "hostname": _safe(platform.node) or None,
            "cpu_model": model or _safe(platform.processor) or None}


@functools.lru_cache(maxsize=None)
def _nvml() -> Any:
    """The initialised pynvml module, or None (not installed, no driver). nvmlInit runs once per process."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception:
        return None


def _nvml_handle(nv: Any, index: int) -> Any:
    """NVML handle for CUDA device ``index``: via torch's UUID when CUDA is initialised, else through
    ``CUDA_VISIBLE_DEVICES`` (NVML ignores it and numbers GPUs in PCI order), else the index itself."""
    torch = sys.modules.get("torch")
    if torch is not None and _safe(lambda: torch.cuda.is_initialized()):
        uuid = str(_safe(lambda: torch.cuda.get_device_properties(index).uuid) or "")
        for cand in (uuid, "GPU-" + uuid) if uuid else ():
            handle = _safe(nv.nvmlDeviceGetHandleByUUID, cand.encode())
            if handle is not None:
                return handle
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if 0 <= index < len(visible):
        if visible[index].isdigit():
            return nv.nvmlDeviceGetHandleByIndex(int(visible[index]))
        return nv.nvmlDeviceGetHandleByUUID(visible[index].encode())
    return nv.nvmlDeviceGetHandleByIndex(index)


def cuda_index(device: str) -> int:
    """The CUDA device index ``device`` names (``"cuda:1"`` -> 1); a bare ``"cuda"`` is the current device
    where torch has initialised CUDA, else 0. Never initialises CUDA."""
    _, _, idx = str(device).partition(":")
    if idx.isdigit():
        return int(idx)
    torch = sys.modules.get("torch")
    if torch is not None and _safe(lambda: torch.cuda.is_initialized()):
        return int(_safe(torch.cuda.current_device) or 0)
    return 0


def _reasons(mask: int) -> list[str]:
    """The names of the NVML clock event reason bits set in ``mask``."""
    return [name for bit, name in _THROTTLE_BITS if int(mask) & bit]


def _reason_mask(nv: Any, h: Any) -> int | None:
    """The device's current clock event reason bits (the newer NVML name first, then the older one)."""
    queries = ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")
    return next((m for m in (_safe(getattr(nv, q, None), h) for q in queries) if m is not None), None)


def _nvml_device(index: int) -> tuple[Any, Any] | None:
    """``(pynvml, handle)`` for CUDA device ``index``, or None (no pynvml, no driver, no such device)."""
    nv = _nvml()
    h = _safe(_nvml_handle, nv, index) if nv is not None else None
    return (nv, h) if h is not None else None


def gpu_info(index: int = 0) -> dict[str, Any] | None:
    """Name, driver, clocks, temperature, power, utilisation and throttle reasons of CUDA device
    ``index`` via NVML (package nvidia-ml-py). None without pynvml, an NVIDIA driver, or the device.

    Clocks are in MHz, power in W. ``throttle_reasons`` decodes the current clock event reasons;
    ``throttled`` is True when any reason other than idle/application clocks/sync boost is active.
    """
    dev = _nvml_device(index)
    if dev is None:
        return None
    nv, h = dev
    cuda = _safe(nv.nvmlSystemGetCudaDriverVersion)
    power_mw = _safe(nv.nvmlDeviceGetPowerUsage, h)
    info: dict[str, Any] = {
        "name": _text(_safe(nv.nvmlDeviceGetName, h)),
        "driver": _text(_safe(nv.nvmlSystemGetDriverVersion)),
        "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}" if isinstance(cuda, int) else None,
        "memory_total_bytes": _safe(lambda: int(nv.nvmlDeviceGetMemoryInfo(h).total)),
        "sm_clock_mhz": _safe(nv.nvmlDeviceGetClockInfo, h, 1),  # NVML_CLOCK_SM
        "mem_clock_mhz": _safe(nv.nvmlDeviceGetClockInfo, h, 2),  # NVML_CLOCK_MEM
        "sm_clock_max_mhz": _safe(nv.nvmlDeviceGetMaxClockInfo, h, 1),
        "mem_clock_max_mhz": _safe(nv.nvmlDeviceGetMaxClockInfo, h, 2),
        "temperature_c": _safe(nv.nvmlDeviceGetTemperature, h, 0),  # NVML_TEMPERATURE_GPU
        "power_w": power_mw / 1000.0 if isinstance(power_mw, (int, float)) else None,
        "utilization_gpu_pct": _safe(lambda: int(nv.nvmlDeviceGetUtilizationRates(h).gpu)),
    }
    mask = _reason_mask(nv, h)
    reasons = _safe(_reasons, mask) if mask is not None else None
    info["throttle_reasons"] = (reasons or ["none"]) if reasons is not None else None
    info["throttled"] = None if reasons is None else any(r not in _BENIGN_REASONS for r in reasons)
    return info


def gpu_clock_held(index: int = 0) -> tuple[str, ...] | None:
    """The NVML clock event reasons that hold CUDA device ``index``'s clock down right now (power cap,
    thermal, hardware slowdown: not idle, application clocks or sync boost); ``()`` when none does, None
    when NVML cannot say. One NVML query (tens of µs): cheap enough to ask inside a measurement."""
    dev = _nvml_device(index)
    mask = _reason_mask(*dev) if dev is not None else None
    if mask is None:
        return None
    return tuple(r for r in _reasons(mask) if r not in _BENIGN_REASONS)


def _torch_facts() -> tuple[int | None, int | None, bool | None]:
    """(threads, interop threads, cuda available) from an already-imported torch, else Nones."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None, None, None
    return (_safe(lambda: int(torch.get_num_threads())), _safe(lambda: int(torch.get_num_interop_threads())),
            _safe(lambda: bool(torch.cuda.is_available())))


def _blas() -> list[dict[str, Any]] | None:
    """BLAS/OpenMP thread pools loaded in this process (threadpoolctl scans loaded shared libraries)."""
    try:
        from threadpoolctl import threadpool_info

        keys = ("user_api", "internal_api", "num_threads", "version")
        return [{k: p.get(k) for k in keys} for p in threadpool_info()]
    except Exception:
        return None


def prime() -> None:
    """Pay the once-per-process costs of :func:`capture` now (imports, package versions, static facts),
    so that a measurement's budget is not spent on them at its end."""
    _versions()
    _static()
    _safe(lambda: __import__("threadpoolctl"))
    _safe(lambda: __import__("psutil"))


def _container_fields() -> dict[str, Any]:
    from .container import env_fields

    return _safe(env_fields) or {"cpu_quota": None, "mem_limit_bytes": None}


def capture(device: str = "cpu") -> dict[str, Any]:
    """Describe the environment of a measurement on ``device`` (e.g. ``"cpu"``, ``"cuda:1"``).

    Static facts (CPU model, platform, versions, caches) are cached per process; load, free memory,
    CPU frequency and GPU clocks are read fresh. Unknown values are None; nothing here raises.
    """
    device = str(device)  # also accepts a torch.device
    try:
        import psutil
    except Exception:
        psutil = None
    vm = _safe(psutil.virtual_memory) if psutil else None
    freq = _safe(psutil.cpu_freq) if psutil else None
    threads, interop, cuda_available = _torch_facts()
    gpu = None
    if device.startswith("cuda"):
        gpu = gpu_info(cuda_index(device))
    sched_getaffinity = getattr(os, "sched_getaffinity", None)
    return {
        "python": platform.python_version(), **_static(), "logical_cores": os.cpu_count(),
        "usable_cores": _safe(usable_cores) if sched_getaffinity else None, **_container_fields(),
        "loadavg_1m": _safe(lambda: float(os.getloadavg()[0])),
        "mem_available_bytes": int(vm.available) if vm else None, "mem_total_bytes": int(vm.total) if vm else None,
        "gc_enabled": gc.isenabled(), "torch_threads": threads, "torch_interop_threads": interop,
        "blas": _blas(), "versions": dict(_versions()), "device": device, "cuda_available": cuda_available,
        "gpu": gpu, "cpu_freq_mhz": float(freq.current) if freq else None, "llc_bytes": cache_sizes()["llc_bytes"],
    }


def fingerprint(env: dict[str, Any]) -> str:
    """12 hex chars of sha256 over what identifies machine and software: CPU model, core counts,
    device, GPU name and driver, versions, torch and BLAS thread counts. Volatile fields (load, free
    memory, clocks, temperature, hostname) are left out so the same setup always hashes the same."""
    import hashlib
    import json

    gpu = env.get("gpu") or {}
    key = {k: env.get(k) for k in ("cpu_model", "logical_cores", "usable_cores", "device", "versions", "torch_threads")}
    key["gpu"] = [gpu.get("name"), gpu.get("driver")]
    key["blas"] = sorted((str(p.get("internal_api")), p.get("num_threads")) for p in env.get("blas") or [])
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:12]


def doubt_warnings(env_before: dict[str, Any], env_after: dict[str, Any] | None,
                   others_cores: float | None, usable_cores: int | None,
                   own_cores: float | None = None, active_threads: int | None = None) -> list[Finding]:
    """Short, concrete warnings about conditions that make a measurement slow or noisy
    (:class:`~perfmagic.findings.Finding` s, worded by :mod:`perfmagic.render.findings_core`)."""
    out: list[Finding] = []
    over = oversubscription(env_before, others_cores, own_cores, usable_cores, active_threads)
    if over:
        out.append(over)
    if others_cores is not None and others_cores > 0.25 and (not usable_cores or others_cores > 0.1 * usable_cores):
        from .container import cpu_usage_s

        out.append(Finding.of("core.others-load", others=others_cores, usable=usable_cores,
                              container=cpu_usage_s() is not None))
    gpus = [e.get("gpu") for e in (env_before, env_after) if e and e.get("gpu")]
    reasons = [r for g in gpus if g.get("throttled") for r in g.get("throttle_reasons") or []]
    reasons = [r for r in dict.fromkeys(reasons) if r not in _BENIGN_REASONS]
    if reasons:
        out.append(Finding.of("core.gpu-throttled", reasons=tuple(reasons)))
    if gpus:
        g = gpus[-1]  # the latest reading: clocks right after the work ran
        cur, top = g.get("sm_clock_mhz"), g.get("sm_clock_max_mhz")
        if cur and top and cur < 0.9 * top and "gpu_idle" not in (g.get("throttle_reasons") or []):
            out.append(Finding.of("core.sm-clock", mhz=cur, max_mhz=top))
    return out
