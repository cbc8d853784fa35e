"""Environment capture: what machine, software and load a measurement ran under.

:func:`capture` returns a JSON-serialisable dict stored with every result, :func:`fingerprint`
hashes its stable part so results from different machines or software stacks are not compared by
accident, :class:`LoadProbe` measures how many cores *other* processes kept busy during a
measurement (from ``/proc/stat``), and :func:`doubt_warnings` turns all that into one-line warnings.

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
import time
from collections.abc import Sequence
from typing import Any

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


def gpu_info(index: int = 0) -> dict[str, Any] | None:
    """Name, driver, clocks, temperature, power, utilisation and throttle reasons of CUDA device
    ``index`` via NVML (package nvidia-ml-py). None without pynvml, an NVIDIA driver, or the device.

    Clocks are in MHz, power in W. ``throttle_reasons`` decodes the current clock event reasons;
    ``throttled`` is True when any reason other than idle/application clocks/sync boost is active.
    """
    nv = _nvml()
    if nv is None:
        return None
    h = _safe(_nvml_handle, nv, index)
    if h is None:
        return None
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
    queries = ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")
    mask = next((m for m in (_safe(getattr(nv, q, None), h) for q in queries) if m is not None), None)
    reasons = _safe(lambda: [name for bit, name in _THROTTLE_BITS if int(mask) & bit]) if mask is not None else None
    info["throttle_reasons"] = (reasons or ["none"]) if reasons is not None else None
    info["throttled"] = None if reasons is None else any(r not in _BENIGN_REASONS for r in reasons)
    return info


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
        _, _, idx = device.partition(":")
        torch = sys.modules.get("torch")
        if not idx.isdigit() and torch is not None and _safe(lambda: torch.cuda.is_initialized()):
            idx = str(_safe(torch.cuda.current_device) or 0)
        gpu = gpu_info(int(idx) if idx.isdigit() else 0)
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


def _proc_stat_busy() -> float | None:
    """Seconds of non-idle CPU time on the CPUs this process may use, from ``/proc/stat``.

    busy = user+nice+system+irq+softirq+steal (total minus idle and iowait; guest time is already in
    user). Sums the per-CPU lines of the affinity set when it is a strict subset, else the aggregate line.
    """
    try:
        with open("/proc/stat") as f:
            lines = [ln.split() for ln in f if ln.startswith("cpu")]
        allowed = {f"cpu{c}" for c in os.sched_getaffinity(0)} if hasattr(os, "sched_getaffinity") else set()
        per_cpu = [ln for ln in lines if ln[0] in allowed]
        rows = per_cpu if per_cpu and len(per_cpu) < len(lines) - 1 else [ln for ln in lines if ln[0] == "cpu"]
        busy = sum(sum(int(x) for x in r[1:9]) - int(r[4]) - int(r[5]) for r in rows)
        return busy / os.sysconf("SC_CLK_TCK") if rows else None
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def processes_cpu_s(pids: Sequence[int]) -> float | None:
    """CPU seconds (user + system) used so far by the processes ``pids``, from ``/proc``; None outside
    Linux or when none can be read."""
    tck, total, seen = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100, 0.0, 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                f = fh.read().rsplit(")", 1)[1].split()
            total += (int(f[11]) + int(f[12])) / tck
            seen += 1
        except (OSError, IndexError, ValueError):
            continue
    return total if seen else None


def thread_cpu() -> dict[int, float] | None:
    """CPU seconds used so far by each thread of this process (``/proc/self/task/*/stat``), or None."""
    try:
        tck = os.sysconf("SC_CLK_TCK")
        out = {}
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except FileNotFoundError:  # the thread ended meanwhile
                continue
            out[int(tid)] = (int(fields[11]) + int(fields[12])) / tck  # utime, stime
        return out
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def _own_cpu() -> float:
    """CPU seconds of this process and of its children that ended and were waited for."""
    t = os.times()
    return time.process_time() + t.children_user + t.children_system


def _involuntary_switches() -> int | None:
    """Involuntary context switches of this process so far (the scheduler gave its CPU to another task)."""
    try:
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw)
    except (ImportError, OSError, AttributeError):  # pragma: no cover - not Unix
        return None


class LoadProbe:
    """CPU used by *other* processes during an interval: busy time from ``/proc/stat`` (in a container,
    the container's own CPU usage from its cgroup, so that other tenants of the host are not counted as
    this pod's neighbours; ``host_others_cores`` keeps the host-wide reading) minus this
    process's CPU time (``time.process_time``) and that of its children that ended and were waited for
    meanwhile (``os.times``: a probe run in a child process, as the ceilings' wide-kernel probe does, is
    this process's own work), divided by wall time. Resolution is one clock tick (usually 10 ms), so
    intervals under 20 ms give None. Children still running count as others (``%%amdahl`` subtracts its
    own; DataLoader workers are reported as such).
    ``active_threads``: this process's threads that each used at least 5% of a core (and a clock tick)
    meanwhile — a BLAS or torch pool at work shows as more than one, even when its threads mostly wait.
    ``preempted``: how often the scheduler took a CPU from this process's threads meanwhile (involuntary
    context switches, ``getrusage``): exact at any length, where ``others_cores`` needs 20 ms; None
    outside Unix.
    """

    def __init__(self) -> None:
        self._busy0: float | None = None
        self._cpu0 = self._wall0 = 0.0
        self.others_cores: float | None = None
        self.own_cores: float | None = None
        self.active_threads: int | None = None
        self.preempted: int | None = None
        self.wall_s: float | None = None
        self._threads0: dict[int, float] | None = None
        self._nivcsw0: int | None = None
        self._pod0: float | None = None
        self._thr0: float | None = None
        self.scope = "host"  # "container": others_cores counts this container's other processes only
        self.host_others_cores: float | None = None  # in a container: the whole host's others (other tenants)
        self.throttled_cores: float | None = None    # in a container: CPU its quota withheld, in cores

    def start(self) -> LoadProbe:
        """Take the starting readings; returns self."""
        from .container import cpu_usage_s, throttled_s

        self._threads0 = thread_cpu()
        self._nivcsw0 = _involuntary_switches()
        self._pod0 = cpu_usage_s()  # in a container: its own processes, not the host's other tenants
        self._thr0 = throttled_s() if self._pod0 is not None else None
        self._busy0, self._cpu0, self._wall0 = _proc_stat_busy(), _own_cpu(), time.perf_counter()
        return self

    def stop(self) -> float | None:
        """Average number of cores kept busy by other processes since start() (>= 0), or None."""
        wall, own = time.perf_counter() - self._wall0, _own_cpu() - self._cpu0
        busy1 = _proc_stat_busy()
        nivcsw = _involuntary_switches()
        self.preempted = nivcsw - self._nivcsw0 if nivcsw is not None and self._nivcsw0 is not None else None
        self.own_cores = own / wall if wall > 0 else None
        self.wall_s = wall
        t1 = thread_cpu()
        if t1 is not None and self._threads0 is not None and wall > 0:
            least = max(0.05 * wall, 1.0 / os.sysconf("SC_CLK_TCK"))
            self.active_threads = sum(1 for tid, c in t1.items() if c - self._threads0.get(tid, 0.0) >= least)
        if self._busy0 is None or busy1 is None or wall < 0.02:
            self.others_cores = None
        else:
            self.others_cores = max(0.0, (busy1 - self._busy0 - own) / wall)
        if self._pod0 is not None:
            from .container import cpu_usage_s, throttled_s

            pod1, thr1 = cpu_usage_s(), throttled_s()
            self.host_others_cores, self.scope = self.others_cores, "container"
            self.others_cores = (None if pod1 is None or wall < 0.02 else
                                 max(0.0, (pod1 - self._pod0 - own) / wall))
            if thr1 is not None and self._thr0 is not None and wall > 0:
                self.throttled_cores = max(0.0, (thr1 - self._thr0) / wall)
        return self.others_cores


def oversubscription(env: dict[str, Any], others_cores: float | None, own_cores: float | None,
                     usable_cores: int | None, active_threads: int | None = None) -> str | None:
    """The warning for thread oversubscription, or None.

    A cell whose BLAS/OpenMP (threadpoolctl) or torch intra-op pool runs more threads than the cores
    left free by other processes makes its threads wait for each other at every barrier: a 4 µs dot
    product can take milliseconds. Named when other processes kept at least half a core busy, the
    pool has at least 2 threads and more than the free cores, and the pool was really used: the cell
    ran on more than one core, or at least two of its threads each took CPU time (a fighting pool
    mostly waits: a 20,000-element ``np.dot`` beside two spinning neighbours used half a core and
    took 17 ms a call)."""
    if not usable_cores or others_cores is None or others_cores < 0.5:
        return None
    pools = [int(p.get("num_threads") or 0) for p in env.get("blas") or []]
    torch_threads = env.get("torch_threads") or 0
    threads = max(pools + [int(torch_threads)])
    free = max(usable_cores - others_cores, 1.0)
    used = (own_cores is not None and own_cores > 1.05) or (active_threads or 0) >= 2
    if threads < 2 or threads <= free + 0.25 or not used:
        return None
    n = max(1, int(free))
    what = ", ".join(x for x in (f"BLAS/OpenMP {max(pools)}" if pools and max(pools) else "",
                                 f"torch {torch_threads}" if torch_threads else "") if x)
    return (f"thread oversubscription: the cell's thread pools ({what} threads) exceed the ~{free:.1f} of "
            f"{usable_cores} cores other processes left free ({others_cores:.1f} busy): its threads wait for "
            f"each other. Fix: threadpoolctl.threadpool_limits({n}) / torch.set_num_threads({n}), or stop the "
            f"neighbour; judge a change with %%gpubench --vs under the same limits")


def env_oversubscription(env: dict[str, Any] | None) -> str | None:
    """:func:`oversubscription` from what a run recorded in its environment (its pools, the load of
    other processes, its own cores and the threads that took CPU)."""
    env = env or {}
    return oversubscription(env, env.get("others_cores"), env.get("own_cores"), env.get("usable_cores"),
                            env.get("active_threads"))


def free_cores(env: dict[str, Any] | None) -> int:
    """Whole cores other processes left free during a run (at least 1)."""
    env = env or {}
    usable, others = env.get("usable_cores") or os.cpu_count() or 1, env.get("others_cores") or 0.0
    return max(1, int(usable - others + 0.25))


class thread_limits:
    """Limit BLAS/OpenMP pools (threadpoolctl) and torch's intra-op pool to ``n`` threads for a block,
    and restore them after: the honest A/B while a neighbour holds cores."""

    def __init__(self, n: int) -> None:
        self.n = max(1, int(n))
        self._pools: Any = None
        self._torch: tuple[Any, int] | None = None

    def __enter__(self) -> "thread_limits":
        from threadpoolctl import threadpool_limits

        self._pools = threadpool_limits(limits=self.n)
        torch = sys.modules.get("torch")
        if torch is not None:
            self._torch = (torch, torch.get_num_threads())
            torch.set_num_threads(self.n)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._torch is not None:
            torch, old = self._torch
            torch.set_num_threads(old)
        if self._pools is not None:
            self._pools.restore_original_limits()


def doubt_warnings(env_before: dict[str, Any], env_after: dict[str, Any] | None,
                   others_cores: float | None, usable_cores: int | None,
                   own_cores: float | None = None, active_threads: int | None = None) -> list[str]:
    """Short, concrete warnings about conditions that make a measurement slow or noisy."""
    out: list[str] = []
    over = oversubscription(env_before, others_cores, own_cores, usable_cores, active_threads)
    if over:
        out.append(over)
    if others_cores is not None and others_cores > 0.25 and (not usable_cores or others_cores > 0.1 * usable_cores):
        from .container import cpu_usage_s

        of = f" of {usable_cores} usable cores" if usable_cores else " cores"
        who = "other processes in this container" if cpu_usage_s() is not None else "other processes"
        out.append(f"{who} used {others_cores:.1f}{of} during the measurement: results may be slow and noisy")
    gpus = [e.get("gpu") for e in (env_before, env_after) if e and e.get("gpu")]
    reasons = [r for g in gpus if g.get("throttled") for r in g.get("throttle_reasons") or []]
    reasons = [r for r in dict.fromkeys(reasons) if r not in _BENIGN_REASONS]
    if reasons:
        out.append(f"GPU clocks throttled (reasons: {', '.join(reasons)})")
    if gpus:
        g = gpus[-1]  # the latest reading: clocks right after the work ran
        cur, top = g.get("sm_clock_mhz"), g.get("sm_clock_max_mhz")
        if cur and top and cur < 0.9 * top and "gpu_idle" not in (g.get("throttle_reasons") or []):
            out.append(f"GPU SM clock at {cur} of {top} MHz")
    return out


def usable_cores() -> int:
    """The cores this process can keep busy: its CPU affinity (else the logical cores), capped by the
    container's CPU quota rounded down (a 1.5-CPU pod keeps one core busy unthrottled; at least 1)."""
    from .container import usable_cpus

    return max(1, int(usable_cpus() + 1e-9))
