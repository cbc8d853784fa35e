"""Measured roofline ceilings: the best compute rate per dtype and the best memory bandwidth of a device.

The method (every figure and its method are kept in :attr:`Ceilings.details`):

* **Compute**, per dtype: the best matmul rate over a sweep of square sizes, ``2·n³`` FLOPs per
  ``n×n @ n×n``. CPU: ``torch.matmul`` for float32 / float64 / bfloat16 (bfloat16 only if it runs and
  is not absurdly slow) and ``numpy.matmul`` for float32 / float64. GPU: cuBLAS through torch for
  float32 (TF32 off), tf32 (``torch.backends.cuda.matmul.allow_tf32``), float16, bfloat16 and
  fp8_e4m3 (``torch._scaled_mm``, compute capability >= 8.9), timed with CUDA events.
  A short sweep (one warm call and two timed calls per size) finds the best size; then **trials** at
  that size (and the second best when within 15%), interleaved, each at least 0.1 s and two calls, its
  rate from its fastest call, until the two best trials agree within 5%
  (:func:`perfmagic.roofs.kernels.confirm`). The roof is the **second-highest trial**: a rate reached
  in two separate trials, never one lucky call. When the trials did not agree before the time ran out
  the roof says so (``details["status"]``, a warning) instead of passing for a measured ceiling.
  The 128×128 probe of each torch dtype only picks the sizes (a slow dtype gets small ones): no dtype
  is dropped for being slow. bfloat16/float16 on a CPU whose ``/proc/cpuinfo`` flags lack native
  units (avx512_bf16/amx_bf16, avx512_fp16/amx_fp16) are measured and labelled **emulated**
  (``details["emulated"]``); roofline advice never suggests them.
* **Bandwidth**: the best of several streaming kernels over working sets far larger than the last-level
  cache (LLC size read from sysfs via :func:`perfmagic.core.env.cache_sizes`; the GPU's L2 from torch), each
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

  Interleaved trials of every kernel (each ≥ 0.05 s and two passes) until the best kernel's two best
  trials agree within 5%; the ceiling is that kernel's second-highest trial.
* **Load**: other processes' CPU use (:class:`perfmagic.core.load.LoadProbe`) is read for a short idle
  window before and after, and over the whole calibration. A calibration during which others kept more
  than :data:`LOADED_CORES` cores busy is **loaded**: it says so, is kept for this process only (never
  written to the cache as the machine's roofs), and the next ``ceilings()`` call re-measures when the
  machine is quiet again (a 0.15 s look at the load; still busy: the loaded roofs are reused, marked).
  A quiet calibration replaces it and is cached.
* **Cache**: one JSON file per machine fingerprint (:func:`perfmagic.core.env.fingerprint`) under
  ``$PERFMAGIC_CACHE_DIR`` or ``~/.cache/perfmagic/ceilings/``, written to a temporary file and moved
  into place with ``os.replace``: an interrupted calibration leaves no file, never half of one. A
  corrupt or unreadable file is ignored and re-measured.

The kernels (matmul sweeps, streaming kernels, CPU and GPU) are in :mod:`perfmagic.roofs.kernels`; the
chart and the HTML sections in :mod:`perfmagic.render.roofline`. torch and numpy are imported inside
functions only.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, ClassVar

from ..errors import BadOptionError
from ..findings import Finding
from ..result import Displayed
from . import cache as _cache
from .cache import cache_dir, cache_path  # noqa: F401 (re-exported)
from .kernels import (LLC_FACTOR, ProgressFn, _Clock, _cpu_bandwidth, _cpu_compute, _gpu_bandwidth, _gpu_compute,
                      combine_bandwidth, emulated_dtype)

CACHE_VERSION = 3  # 2: roofs confirmed by agreeing trials, loaded calibrations never cached; 3: wide-kernel probe
CPU_DTYPES = ("float32", "float64", "bfloat16", "float16")
CPU_DEFAULT_DTYPES = ("float32", "float64", "bfloat16")
GPU_DTYPES = ("float32", "tf32", "float16", "bfloat16", "fp8_e4m3")
ALL_DTYPES = tuple(dict.fromkeys(CPU_DTYPES + GPU_DTYPES))
DTYPE_ALIASES = {"fp32": "float32", "float": "float32", "fp64": "float64", "double": "float64",
                 "bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp8": "fp8_e4m3",
                 "float8_e4m3fn": "fp8_e4m3"}
LOADED_CORES = 0.3  # others' busy cores above which a calibration is "loaded"
LOAD_WARN_CORES = LOADED_CORES  # the old name


def normalize_dtype(name: Any) -> str:
    """``torch.bfloat16`` / ``'bf16'`` / ``'bfloat16'`` -> ``'bfloat16'`` (names as in :data:`ALL_DTYPES`)."""
    s = str(name).lower().replace("torch.", "").replace("numpy.", "")
    return DTYPE_ALIASES.get(s, s)


@dataclass(frozen=True, repr=False)
class Ceilings(Displayed):
    """The measured roofs of one device. Rates are per second: ``compute`` in FLOP/s per dtype name,
    ``bandwidth_Bps`` in bytes/s (algorithmic counting, see :data:`perfmagic.render.findings_roofs.COUNTING`)."""

    primary_metric: ClassVar[str] = "bandwidth_Bps"
    renderer: ClassVar[str] = "ceilings"
    figure_alt: ClassVar[str] = "measured roofs"

    device: str
    fingerprint: str
    measured_utc: str
    compute: dict[str, float]
    bandwidth_Bps: float
    details: dict[str, Any] = field(default_factory=dict)
    load_before: float | None = None
    load_after: float | None = None
    warnings: tuple[Finding, ...] = ()  # worded by render/findings_roofs.py (an older cache's text stays a str)
    calibration_s: float = 0.0
    source: str = "measured"  # "measured" | "cache" | "kernel" (a loaded calibration held in memory) | "given"

    def __post_init__(self) -> None:
        """Findings stored as data (the cache file, a ledger row) read back as findings."""
        object.__setattr__(self, "warnings", tuple(_read_findings(w) for w in self.warnings))
        object.__setattr__(self, "details", _read_findings(self.details))

    def ridge(self, dtype: str = "float32") -> float:
        """Ridge point in FLOP/byte: ``compute[dtype] / bandwidth_Bps``."""
        d = normalize_dtype(dtype)
        if d not in self.compute:
            raise BadOptionError("dtype", dtype, "one of the measured dtypes: " + ", ".join(self.compute),
                                 f"this {self.device} ceiling has no {d} roof")
        return self.compute[d] / self.bandwidth_Bps

    @property
    def others_cores(self) -> float | None:
        """The most cores other processes kept busy before, during or after the calibration."""
        xs = [x for x in (self.load_before, (self.details or {}).get("load_during"), self.load_after)
              if isinstance(x, (int, float))]
        return max(xs) if xs else None

    @property
    def loaded(self) -> bool:
        """Measured while other processes kept more than :data:`LOADED_CORES` cores busy."""
        x = self.others_cores
        return x is not None and x > LOADED_CORES

    @property
    def unreliable(self) -> dict[str, str]:
        """Roofs (a dtype or ``"bandwidth"``) whose trials did not agree -> why."""
        return {k: v for k, v in ((self.details or {}).get("status") or {}).items() if v and v != "ok"}

    @property
    def emulated(self) -> dict[str, str]:
        """Dtypes this CPU runs without native units -> why (never offered as 'lower precision')."""
        return dict((self.details or {}).get("emulated") or {})

    @property
    def blas(self) -> dict[str, Any] | None:
        """Where numpy's OpenBLAS ran narrow kernels on a wider CPU (:mod:`perfmagic.roofs.widekernels`):
        ``{"architecture", "coretype", "why", "wide": {dtype: FLOP/s in the child}, "in_process": {dtype:
        {lib: FLOP/s}}}``; None where it did not (or was not checked)."""
        return (self.details or {}).get("blas") or None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)  # findings as {"kind", "values"}: read back by __post_init__
        d["warnings"] = list(d["warnings"])
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

    def bandwidth_spread(self) -> float | None:
        """1 - lower / higher of the bandwidth roof's agreeing pair of trials (None with fewer than two)."""
        bw = self.details.get("bandwidth") or {}
        return settled_spread(((bw.get("methods") or {}).get(bw.get("best"), {})).get("trials"))

    def metrics(self) -> dict[str, Any]:
        """Flat: the bandwidth roof, each dtype's compute roof and ridge, where they came from."""
        out: dict[str, Any] = {"device": self.device, "bandwidth_Bps": self.bandwidth_Bps}
        for d, v in self.compute.items():
            out[f"peak_flops_per_s_{d}"] = v
            out[f"ridge_{d}"] = v / self.bandwidth_Bps
        out.update(fingerprint=self.fingerprint, measured_utc=self.measured_utc, source=self.source,
                   calibration_s=self.calibration_s)
        return out

    def samples(self) -> dict[str, list[Any]]:
        """The best rate at each matmul size, per ``dtype/method`` (a ceiling keeps maxima, not every rep)."""
        return {f"{d}/{m}": [rate for _, rate in x.get("sweep") or []]
                for d, methods in (self.details.get("compute") or {}).items() for m, x in methods.items()}


# ---- cache ------------------------------------------------------------------------------------
def _read_findings(x: Any) -> Any:
    """``x`` with every ``{"kind": ..., "values": [...]}`` in it (a finding stored as data) a
    :class:`~perfmagic.findings.Finding` again; everything else as it is."""
    if isinstance(x, dict):
        if set(x) == {"kind", "values"} and isinstance(x["kind"], str) and isinstance(x["values"], (list, tuple)):
            return Finding(x["kind"], tuple(tuple(kv) for kv in x["values"]))
        return {k: _read_findings(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_read_findings(v) for v in x]
    return x


def settled_spread(rates: Any) -> float | None:
    """1 - lower / higher of the agreeing pair of trial rates (None with fewer than two)."""
    if not rates or len(rates) < 2:
        return None
    from .kernels import agreeing_pair

    hi, lo, _ = agreeing_pair(list(rates))
    return 1.0 - lo / hi if hi > 0 else None


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


def load_cached(fp: str, path: str | os.PathLike[str] | None = None) -> Ceilings | None:
    """The cached ceilings for fingerprint ``fp``, or None (missing, unreadable, corrupt, other version)."""
    data = _cache.read(fp, path)
    try:
        return Ceilings.from_dict(data) if data is not None else None
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def save(c: Ceilings, path: str | os.PathLike[str] | None = None) -> str:
    """Write ``c`` to the cache atomically (:func:`perfmagic.roofs.cache.write`); returns the file path."""
    return _cache.write(c.fingerprint, c.to_dict(), path)


def ceilings(device: str = "cpu", *, dtypes: Iterable[Any] | None = None, recalibrate: bool = False,
             cache_dir: str | os.PathLike[str] | None = None, progress: ProgressFn | None = None,
             budget_s: float = 15.0, save_cache: bool = True) -> Ceilings:
    """The measured ceilings of ``device`` ("cpu", "cuda", "cuda:N" or "auto"), from the cache when it
    holds every requested dtype for this machine fingerprint, else measured (and cached when quiet).

    A calibration taken while other processes kept more than :data:`LOADED_CORES` cores busy is not
    cached: it is held for this process (``source="kernel"`` when reused) and re-measured by the next
    call that finds the machine quiet; a quiet calibration replaces it and is cached.

    ``progress(fraction, message)`` is called as the calibration goes; an exception it raises (or
    Ctrl-C) aborts the calibration and leaves the cache untouched. ``budget_s`` bounds the calibration
    (the sweep stops early at larger sizes when it runs out). See the module docstring for the method.
    """
    if not isinstance(budget_s, (int, float)) or not budget_s > 0 or math.isinf(budget_s):
        raise BadOptionError("budget_s", budget_s, "a positive, finite number of seconds", "e.g. budget_s=15")
    dev = _resolve_device(device)
    want = _check_dtypes(dev, dtypes)
    fp, env = machine_fingerprint(dev)
    key = (fp, os.path.abspath(globals()["cache_dir"](cache_dir)))
    held = _HELD.get(key)
    if held is not None and not _covers(held, want):
        held = None
    if not recalibrate:
        cached = load_cached(fp, cache_dir)
        if cached is not None and _covers(cached, want):
            return cached
        if held is not None and _still_slow(held):  # the host still in its slow state: the held roofs
            return replace(held, source="kernel")
        if held is not None and held.loaded:
            now = _idle_load()
            if now is None or now > LOADED_CORES:  # still busy: the held (loaded) roofs, not a re-measure per cell
                return replace(held, source="kernel")
    previous = load_cached(fp, cache_dir) if recalibrate else None
    c = measure(dev, dtypes=want, progress=progress, budget_s=float(budget_s), fp=fp, env=env)
    disturbed = False
    if previous is not None and not previous.loaded and not c.loaded:
        c, disturbed = _against(c, previous)
    if not save_cache or disturbed:
        return c
    # loaded, or a roof measured while the host ran in a slow state: not the machine's roofs, so not
    # cached; held for this process until the machine is quiet (fast) again
    if c.loaded or _slow_state(c):
        _HELD[key] = c
        return c
    _HELD.pop(key, None)
    if held is not None:  # say what the quiet calibration replaces
        was = held.compute.get("float32") or next(iter(held.compute.values()), 0.0)
        now_v = c.compute.get("float32") or next(iter(c.compute.values()), 0.0)
        c = replace(c, warnings=c.warnings + (Finding.of(
            "roofs.replaces-loaded", when=held.measured_utc, others=held.others_cores or 0.0,
            what="float32" if "float32" in c.compute else "compute", was=was, now=now_v,
            bw_was=held.bandwidth_Bps, bw_now=c.bandwidth_Bps),))
    save(c, cache_dir)
    return c


DISAGREE = 0.25  # a quiet recalibration this far below the cached quiet one is marked and not cached


def _against(c: Ceilings, prev: Ceilings) -> tuple[Ceilings, bool]:
    """``(c, lower)``: a quiet recalibration against the previous quiet one of this machine. A roof more
    than :data:`DISAGREE` **below** it is marked unreliable and ``lower`` is True: something the load
    probe cannot see disturbed it (other tenants' memory traffic on a VM host, a clock cap), so the
    cached roofs stay. A roof that far **above** it replaces it, with a note (nothing makes a machine
    faster than it can go; the earlier one was disturbed)."""
    status = dict((c.details or {}).get("status") or {})
    warns = list(c.warnings)
    lower = False
    pairs = [(d, c.compute[d], prev.compute[d], "GFLOP/s") for d in c.compute if d in prev.compute]
    pairs.append(("bandwidth", c.bandwidth_Bps, prev.bandwidth_Bps, "GB/s"))
    for roof, now, was, unit in pairs:
        if not (now > 0 and was > 0) or abs(now / was - 1) <= DISAGREE:
            continue
        what = {"roof": roof, "now": now, "was": was, "unit": unit, "when": prev.measured_utc}
        if now < was:
            lower = True
            status[roof] = Finding.of("roofs.lower-than-before", **what)
            warns.append(Finding.of("roofs.unreliable", roof=roof, why=status[roof]))
        else:
            warns.append(Finding.of("roofs.higher-than-before", **what))
    if warns == list(c.warnings):
        return c, False
    return replace(c, details={**c.details, "status": status}, warnings=tuple(warns)), lower


# loaded calibrations of this process, per (fingerprint, cache folder): never written to the cache
_HELD: dict[tuple[str, str], Ceilings] = {}


def _covers(c: Ceilings, want: Iterable[str]) -> bool:
    return all(d in c.compute or d in (c.details or {}).get("unsupported", {}) for d in want)


# ---- measurement ---------------------------------------------------------------------------------
def _now_utc() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def _idle_load(seconds: float = 0.15) -> float | None:
    """Cores other processes keep busy while this one sleeps ``seconds``."""
    from ..core.load import LoadProbe

    p = LoadProbe().start()
    time.sleep(seconds)
    return p.stop()


def _slow_state(c: Ceilings) -> bool:
    """Whether a roof of ``c`` was marked as measured in the host's slow state."""
    return any(getattr(v, "kind", None) == "roofs.speed-state" for v in c.unreliable.values())


def _still_slow(held: Ceilings) -> bool:
    """For held roofs marked as measured in a slow state: is the host still slow (the drift guard's fixed
    workload, 3 ms of it, over ``SLOW`` above the calibration's fastest reading)?"""
    from ..core.reference import SLOW, reference_time

    fastest = ((held.details or {}).get("speed") or {}).get("fastest_reference_s")
    if not _slow_state(held) or not fastest:
        return False
    return reference_time(0.003) / fastest - 1 > SLOW


def _speed_states(cdetails: dict[str, Any], status: dict[str, Any], warnings: list[Finding]) -> dict[str, Any]:
    """The machine's speed while each compute roof was measured: the drift guard's fixed workload, timed
    before and after each matmul method (``reference_s``), against the fastest reading of this calibration
    and of this process. A roof whose method read slow on both sides (over ``SLOW`` above the fastest: the
    host ran in a slow state throughout) is marked unreliable (``roofs.speed-state``) and not cached: on
    this project's VM a fixed loop runs at two speeds, ≈ 7 ms or ≈ 11.5 ms, with nothing else running."""
    from ..core.reference import SLOW, best_seen

    readings = [r for per in cdetails.values() if isinstance(per, dict) for m in per.values()
                if isinstance(m, dict) for r in (m.get("reference_s") or []) if r]
    fastest = min([*readings, *([best_seen()] if best_seen() else [])], default=None)
    out: dict[str, Any] = {"fastest_reference_s": fastest, "roofs": {}}
    if not fastest:
        return out
    for d, per in cdetails.items():
        if not isinstance(per, dict) or not per:
            continue
        best = max(per.values(), key=lambda x: x.get("flops_per_s", 0.0))
        refs = [r for r in (best.get("reference_s") or []) if r]
        if not refs:
            continue
        ratio = min(refs) / fastest
        out["roofs"][d] = ratio
        if ratio - 1 > SLOW and status.get(d) == "ok":
            status[d] = Finding.of("roofs.speed-state", roof=d, ratio=ratio, ref=min(refs), fastest=fastest)
            warnings.append(Finding.of("roofs.unreliable", roof=d, why=status[d]))
    return out


def measure(dev: str, *, dtypes: Iterable[str] = CPU_DEFAULT_DTYPES, progress: ProgressFn | None = None,
            budget_s: float = 15.0, fp: str | None = None, env: dict[str, Any] | None = None) -> Ceilings:
    """Measure the ceilings of ``dev`` now (no cache). Roughly 60% of ``budget_s`` goes to compute,
    the rest to bandwidth."""
    from ..core.load import LoadProbe
    from ..core.env import fingerprint

    if fp is None or env is None:
        fp, env = machine_fingerprint(dev)
    dtypes = tuple(dtypes)
    load_before = _idle_load()
    probe = LoadProbe().start()
    steps = (sum(2 if d in ("float32", "float64") else 1 for d in dtypes) + 10) if dev == "cpu" else len(dtypes) + 2
    clock = _Clock(budget_s, progress, steps=steps)
    if progress is not None:
        progress(0.0, f"calibrating {dev} ceilings")
    bw_note = None
    scale = min(1.0, budget_s / 15.0)  # trials shrink with a small budget (each is still >= 2 calls)
    if dev == "cpu":  # bandwidth before and after the compute sweep: a slow phase of the host shows as a move
        _, first = _cpu_bandwidth(clock, budget_s, share=0.15, min_trials=2, min_s=0.25 * scale)
        compute, cdetails, unsupported = _cpu_compute(dtypes, clock, 0.6 * budget_s, trial_s=0.1 * scale)
        blas = cdetails.pop("_blas", None)
        _, second = _cpu_bandwidth(clock, budget_s, share=0.15, min_trials=2, min_s=0.25 * scale)
        bw, bdetails, bw_note = combine_bandwidth(first, second)
    else:
        blas = None
        compute, cdetails, unsupported = _gpu_compute(dev, dtypes, clock, 0.7 * budget_s)
        bw, bdetails = _gpu_bandwidth(dev, clock, budget_s)
    during = probe.stop()
    load_after = _idle_load()
    warnings: list[Finding] = []
    worst = max((x for x in (load_before, load_after, during) if x is not None), default=None)
    if worst is not None and worst > LOADED_CORES:
        warnings.append(Finding.of("roofs.loaded", worst=worst, before=load_before, during=during, after=load_after))
    status: dict[str, Any] = {}
    for d, per in cdetails.items():
        best = max(per.values(), key=lambda x: x.get("flops_per_s", 0.0))
        top = sorted(best.get("trials", {}).get(str(best.get("size")), []), reverse=True)[:2]
        if best.get("agreed", True):
            status[d] = "ok"
        else:
            status[d] = Finding.of("roofs.trials-disagree", roof=d, high=top[0] if len(top) >= 2 else None,
                                   low=top[1] if len(top) >= 2 else None, size=best.get("size"))
            warnings.append(Finding.of("roofs.unreliable", roof=d, why=status[d]))
    speed = _speed_states(cdetails, status, warnings) if dev == "cpu" else None
    bbest = (bdetails.get("methods") or {}).get(bdetails.get("best"), {})
    if bdetails.get("agreed", True):
        status["bandwidth"] = "ok"
    else:
        top = sorted(bbest.get("trials") or [], reverse=True)
        status["bandwidth"] = Finding.of("roofs.trials-disagree", roof="bandwidth",
                                         high=top[0] if len(top) >= 2 else None,
                                         low=top[1] if len(top) >= 2 else None, method=bdetails.get("best"))
        warnings.append(Finding.of("roofs.unreliable", roof="bandwidth", why=status["bandwidth"]))
    emulated = {d: why for d in compute if dev == "cpu" and (why := emulated_dtype(d))}
    for d, why in emulated.items():
        warnings.append(Finding.of("roofs.emulated-warning", dtype=d, why=why))
    if bdetails.get("sized_by_memory"):
        warnings.append(bdetails["sized_by_memory"])
    elif bdetails.get("working_set_over_cache", LLC_FACTOR) < LLC_FACTOR:
        warnings.append(Finding.of("roofs.small-working-set", ratio=bdetails["working_set_over_cache"],
                                   wanted=LLC_FACTOR))
    for d, why in unsupported.items():
        warnings.append(Finding.of("roofs.not-measured", dtype=d, why=why))
    if bw_note:  # without load from other processes, a slow phase of the host (memory bandwidth of a
        # shared VM host halved for tens of seconds with no process to show for it here)
        warnings.append(bw_note.with_values(busy=worst is not None and worst > LOADED_CORES))
    if progress is not None:
        progress(1.0, "done")
    details = {"compute": cdetails, "bandwidth": bdetails, "unsupported": unsupported, "load_during": during,
               "status": status, "emulated": emulated, "blas": blas, "speed": speed,
               "budget_s": budget_s, "env": {k: env.get(k) for k in ("cpu_model", "usable_cores", "torch_threads",
                                                                      "llc_bytes", "gpu", "versions")}}
    return Ceilings(device=dev, fingerprint=fp or fingerprint(env), measured_utc=_now_utc(), compute=compute,
                    bandwidth_Bps=bw, details=details, load_before=load_before, load_after=load_after,
                    warnings=tuple(warnings), calibration_s=clock.spent())

