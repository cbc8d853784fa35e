"""``roofline()``: where a piece of code sits under the device's measured roofs, and what to try next.

The method (docs/method.md §1):

1. **Work** of one call: FLOPs and bytes counted from the torch ops the code runs
   (:func:`perfmagic._counting.count`: FlopCounterMode + perfmagic's formulas; bytes = algorithmic
   traffic, a lower bound on DRAM traffic), or the numbers given (``flops=``/``bytes=``, which win).
2. **Time** of one call: :func:`perfmagic._engine.bench` (cold call apart, warmup, device sync, median).
3. **Roofs**: :func:`perfmagic._ceilings.ceilings` of the device the code ran on (measured, cached).
4. **Verdict**: intensity ``I = FLOPs / bytes``; achieved FLOP/s and bytes/s; ridge ``= peak / BW``;
   attainable ``= min(peak, I × BW)``; **memory-bound** when ``I < ridge``, else compute-bound — and
   **at the ridge** (both roofs limit it) when ``I`` is within ``RIDGE_BAND`` (10%) of the ridge, widened by
   the two roofs' own trial spreads (the ridge's uncertainty); the
   fraction of the attainable roof reached (memory-bound: achieved bytes/s ÷ BW, which equals achieved
   FLOP/s ÷ (I × BW)); advice in the order that matters for that bound.
5. **Doubts**: apparent bandwidth above the DRAM roof (working set in cache), FLOPs undercounted
   (compute ops FlopCounterMode counts as zero and perfmagic has no formula for), a loaded machine
   (during calibration or timing), roofs measured for another device.
6. **The host's speed state** (CPU): a cell whose drift-guard readings, before and after its samples, differ
   by more than 30% from those its roof was measured at is a doubt (:func:`speed_state`); the roof is not
   rescaled by that ratio, because the measurement does not support it (the function's docstring).
7. **The host's memory phase** (CPU): a short triad probe before and after the timing, against the
   bandwidth roof (:mod:`perfmagic.roofs.phase`). Both beyond 25% of the roof on one side: the cell ran in
   another phase, and a memory-bound cell is also placed against the roof of its own phase
   (:attr:`RooflineResult.fraction_of_phase_roof`: against what the probes read); readings on two sides: the
   phase moved during the timing. A clearly compute-bound cell (intensity over twice every cached
   ridge) is not probed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from .ceilings import Ceilings, normalize_dtype
from .counting import Counts
from ..errors import BadOptionError, BenchInterrupted, PerfmagicError
from ..findings import Finding
from ..result import Displayed
from ..timing.results import BenchResult
from ..render.warnings import rank as warning_rank

from .advice import CACHE_BW_TOLERANCE, LOW_FRACTION, _advice  # noqa: F401  (re-exported)
RIDGE_BAND = 0.10  # an intensity this close to the ridge (relative) is limited by both roofs


def _check_work(option: str, value: Any) -> float | None:
    if value is None:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    if isinstance(value, bool) or not math.isfinite(v) or v < 0 or (option == "bytes" and v == 0):
        raise BadOptionError(option, value, "a positive, finite number per call" + (" (0 allowed for flops)"
                                                                                   if option == "flops" else ""),
                             "e.g. flops=2*n**3 for an n×n matmul, bytes=12*n for a float32 a = b + c")
    return v


@dataclass(frozen=True, repr=False)
class RooflineResult(Displayed):
    """One roofline verdict. Stored: the work (FLOPs, bytes, where each came from), the timing result,
    the ceilings, the dtype; every rate and the verdict are derived from them on demand."""

    primary_metric: ClassVar[str] = "median_s"
    renderer: ClassVar[str] = "roofline"
    figure_alt: ClassVar[str] = "roofline chart"

    code: str
    flops: float
    bytes: float
    flops_source: str  # "counted" | "given"
    bytes_source: str
    dtype: str
    bench: BenchResult
    ceilings: Ceilings
    counts: Counts | None = None
    label: str | None = None
    warnings: tuple[Finding, ...] = ()  # worded by render/findings_roofs.py (a row's older text stays a str)
    notes: tuple[Finding, ...] = ()
    memory_probes: tuple[float | None, float | None] | None = None  # bytes/s before, after the timing (roofs/phase.py)

    # ---- derived --------------------------------------------------------------------------------
    @property
    def time_s(self) -> float:
        return float(self.bench.median)

    @property
    def device(self) -> str:
        return str(self.bench.device)

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOP per byte."""
        return self.flops / self.bytes

    @property
    def flops_per_s(self) -> float:
        return self.flops / self.time_s

    @property
    def bytes_per_s(self) -> float:
        return self.bytes / self.time_s

    @property
    def peak_flops_per_s(self) -> float:
        return self.ceilings.compute[self.dtype]

    @property
    def bandwidth_Bps(self) -> float:
        return self.ceilings.bandwidth_Bps

    @property
    def ridge(self) -> float:
        return self.ceilings.ridge(self.dtype)

    @property
    def bound(self) -> str:
        return "memory" if self.intensity < self.ridge else "compute"

    @property
    def ridge_band(self) -> float:
        """Relative distance from the ridge within which neither roof alone limits the code:
        ``RIDGE_BAND``, or the sum of the compute and bandwidth roofs' trial spreads where that is wider
        (the ridge is their ratio, so its uncertainty spans both)."""
        from .ceilings import settled_spread

        d = self.ceilings.details or {}
        per = (d.get("compute") or {}).get(self.dtype) or {}
        trials = [x for x in per.values() if isinstance(x, dict)] if isinstance(per, dict) else []
        best = max(trials, key=lambda x: x.get("flops_per_s", 0.0), default={})
        bw = d.get("bandwidth") or {}
        bwm = (bw.get("methods") or {}).get(bw.get("best"), {}) if isinstance(bw, dict) else {}
        spreads = [best.get("spread"), settled_spread(bwm.get("trials"))]
        wide = sum(abs(s) for s in spreads if isinstance(s, (int, float)) and math.isfinite(s))
        return max(RIDGE_BAND, wide)

    @property
    def at_ridge(self) -> bool:
        """The intensity is within :attr:`ridge_band` of the ridge: both compute and bandwidth limit it."""
        return self.ridge > 0 and self.intensity > 0 and abs(self.intensity / self.ridge - 1) <= self.ridge_band

    @property
    def attainable_flops_per_s(self) -> float:
        return min(self.peak_flops_per_s, self.intensity * self.bandwidth_Bps)

    @property
    def fraction_of_roof(self) -> float:
        """Achieved ÷ attainable (memory-bound: bytes/s ÷ BW; compute-bound: FLOP/s ÷ peak)."""
        if self.bound == "memory":
            return self.bytes_per_s / self.bandwidth_Bps
        return self.flops_per_s / self.peak_flops_per_s

    @property
    def in_cache(self) -> bool:
        """Above the DRAM roof with a working set a cache can hold (:func:`above_roof`)."""
        return above_roof(self.ceilings, self.bytes, self.bytes_per_s) == "roofline.in-cache"

    @property
    def memory_phase(self) -> dict[str, Any] | None:
        """The host's memory phase around the timing against the bandwidth roof's
        (:func:`perfmagic.roofs.phase.phase_of`); None where it cannot tell, it is the roof's, or the cell ran
        in cache. Probes that read a slower phase than a memory-bound cell itself reached (by more than
        :data:`~perfmagic.roofs.phase.PHASE_MOVED`) are a phase that moved between them and the timing:
        ``"changed"``."""
        from .phase import phase_of

        if not self.memory_probes or not self.device.startswith("cpu") or self.in_cache or self.cache_resident:
            return None  # in cache (or its tensors fit there): the DRAM's phase does not limit it
        # a cell faster than the phase its probes read says the phase moved, unless the last-level cache can
        # hold a good part of its working set: notebook 03's fused add (46 MiB a call, a 32 MiB cache) ran at
        # 44 GB/s between two probes agreeing on 33 GB/s, and was said to have seen the phase change
        cell = self.bytes_per_s if self.bound == "memory" and not self.cache_served else None
        return phase_of(self.memory_probes, self.bandwidth_Bps, cell)

    @property
    def cache_resident(self) -> bool:
        """Memory-bound by its counted bytes with tensors that fit in half the last-level cache
        (:func:`fits_cache`): the DRAM roof, and the DRAM's phase, need not bound it."""
        return fits_cache(self.ceilings, self.counts, self.flops, self.bytes, self.dtype) is not None

    @property
    def cache_served(self) -> bool:
        """Whether the last-level cache can serve part of a call's bytes (at most twice its size, where the
        roofs know it): a rate above the DRAM phase is then no evidence about the phase."""
        llc = llc_bytes(self.ceilings)
        return llc is not None and self.bytes <= 2 * llc

    @property
    def fraction_of_phase_roof(self) -> float | None:
        """A memory-bound cell that ran in another memory phase all along: achieved bytes/s ÷ the roof of that
        phase (the bandwidth roof × the probes' ratio: what the probes read); None otherwise."""
        ph = self.memory_phase
        if ph is None or ph["kind"] != "other" or self.bound != "memory" or self.at_ridge:
            return None
        return self.fraction_of_roof / ph["ratio"]

    @property
    def advice(self) -> tuple[str, ...]:
        """What to try next, in order: the sentences of :func:`perfmagic.roofs.advice._advice`'s findings."""
        return tuple(str(a) for a in _advice(self))

    # ---- serialisation ----------------------------------------------------------------------------
    def metrics(self) -> dict[str, Any]:
        """Flat scalars for a ledger row."""
        return {
            "median_s": self.time_s, "flops": self.flops, "bytes": self.bytes, "intensity": self.intensity,
            "flops_per_s": self.flops_per_s, "bytes_per_s": self.bytes_per_s, "ridge": self.ridge,
            "peak_flops_per_s": self.peak_flops_per_s, "bandwidth_Bps": self.bandwidth_Bps,
            "attainable_flops_per_s": self.attainable_flops_per_s, "fraction_of_roof": self.fraction_of_roof,
            "bound": self.bound, "at_ridge": self.at_ridge, "dtype": self.dtype, "flops_source": self.flops_source,
            "bytes_source": self.bytes_source, "ceilings_fingerprint": self.ceilings.fingerprint,
            "fraction_of_phase_roof": self.fraction_of_phase_roof,
            "memory_phase_ratio": (self.memory_phase or {}).get("ratio"),
            "footprint_bytes": getattr(self.counts, "footprint", None) if self.counts is not None else None,
            "fits_cache": self.cache_resident,
            "ceilings_measured_utc": self.ceilings.measured_utc,
        }

    def samples(self) -> dict[str, Any]:
        """The timing's raw samples (what the ledger keeps for a roofline run)."""
        return self.bench.samples()

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "code": self.code, "device": self.device, "metrics": self.metrics(),
                "advice": list(self.advice), "warnings": [str(w) for w in self.warnings],
                "notes": [str(n) for n in self.notes],
                "ops": dict(self.counts.ops) if self.counts is not None else None,
                "ceilings": self.ceilings.to_dict(), "bench": self.bench.to_dict()}

    # ---- figure -----------------------------------------------------------------------------------
    def point(self) -> dict[str, Any]:
        return {"label": self.label or "this run", "intensity": self.intensity, "flops_per_s": self.flops_per_s}


def _resolve_dtype(dtype: Any, counts: Any, c: Ceilings) -> tuple[str, list[Finding]]:
    notes: list[Finding] = []
    if dtype is not None:
        d = normalize_dtype(dtype)
    elif counts is not None and counts.dtype:
        d = normalize_dtype(counts.dtype)
        notes.append(Finding.of("roofline.dtype-counted", dtype=d))
    else:
        d = "float32"
        notes.append(Finding.of("roofline.dtype-unknown"))
    if d not in c.compute:
        unsupported = (c.details or {}).get("unsupported", {})
        why = f" ({unsupported[d]})" if d in unsupported else ""
        raise BadOptionError("dtype", d, "one of the dtypes measured on " + c.device + ": " + ", ".join(c.compute),
                             f"{c.device} has no measured {d} roof{why}; pass dtype= with one of those "
                             "(or measure it: perfmagic.ceilings(dtypes=[...], recalibrate=True))")
    return d, notes


def roofline(code: str | Callable[[], Any], setup: str = "", *, globals: Mapping[str, Any] | None = None,
             flops: float | None = None, bytes: float | None = None, device: str = "auto", dtype: Any = None,
             budget: float | None = None, ceilings: Ceilings | None = None, label: str | None = None,
             progress: Callable[[float, str], Any] | None = None, filename: str | None = None) -> RooflineResult:
    """Time ``code``, count its FLOPs/bytes (or take ``flops=``/``bytes=`` per call) and place it
    under the measured roofs of its device. ``ceilings=`` supplies roofs (else the cached ones of the
    device, measured on first use with ``progress``). ``filename`` names the code in tracebacks.
    See the module docstring for the method.
    Ctrl-C while timing raises ``BenchInterrupted`` whose ``result`` is the point placed from the samples
    taken so far (when there are any and ``ceilings=`` was given), else ``None``."""
    from ..timing.bench import bench

    flops_v = _check_work("flops", flops)
    bytes_v = _check_work("bytes", bytes)
    counts = None
    notes: list[Finding] = []
    if flops_v is None or bytes_v is None:
        from .counting import count

        ns = dict(globals or {})
        try:
            counts = count(code, ns, setup=setup)
        except ImportError as exc:
            raise BadOptionError("flops", flops, "a number (torch is needed to count FLOPs/bytes automatically)",
                                 "e.g. roofline(code, flops=2*n, bytes=12*n) or %%roofline --flops 2*n --bytes 12*n") from exc
        if counts.torch_ops == 0:
            missing = " and ".join(f"--{k}" for k, v in (("flops", flops_v), ("bytes", bytes_v)) if v is None)
            raise BadOptionError(missing.replace("--", "").replace(" and ", "/"), None,
                                 "explicit numbers: the code ran no torch ops, so there is nothing to count",
                                 f"give the work of one call with {missing}, e.g. for a = b + s*c on n float64 "
                                 "elements: roofline(code, flops=2*n, bytes=24*n) or %%roofline --flops 2*n --bytes 24*n")
        notes += list(counts.notes)
    F = flops_v if flops_v is not None else float(counts.flops)
    B = bytes_v if bytes_v is not None else float(counts.bytes)
    if B <= 0:
        raise BadOptionError("bytes", B, "a positive number of bytes per call",
                             "the counted ops moved no tensor data; give bytes= (e.g. --bytes 12*n)")
    def place(r: Any, roofs: Ceilings, first: list[Finding], probes: Any = None) -> RooflineResult:
        d, dnotes = _resolve_dtype(dtype, counts, roofs)
        more = [Finding.of("roofline.zero-flops")] if F == 0 else []
        first = first + [w for w in (speed_state(r, roofs, d),) if w is not None]
        res = RooflineResult(code=r.code, flops=F, bytes=B, flops_source="given" if flops_v is not None else "counted",
                             bytes_source="given" if bytes_v is not None else "counted", dtype=d, bench=r,
                             ceilings=roofs, counts=counts, label=label,
                             warnings=tuple(first + _warnings(r, roofs, counts, F, B, r.median, d)),
                             notes=tuple(notes + dnotes + more), memory_probes=probes)
        phase = memory_phase_finding(res)
        return res if phase is None else replace(res, warnings=res.warnings + (phase,))

    try:
        r, probes = _timed(lambda: bench(code, setup, globals=globals, budget=budget, device=device, flops=F,
                                         bytes_moved=B, label=label, filename=filename),
                           _wants_probe(F, B, device, ceilings))
    except BenchInterrupted as exc:  # Ctrl-C: place what was timed, when anything was and the roofs are known
        part = exc.result
        if ceilings is None and part is not None and part.raw:  # the cached roofs of the device it ran on
            ceilings = _cached_roofs(part.device)
        if part is None or not part.raw or ceilings is None or not part.median > 0:
            raise BenchInterrupted(None) from None
        raise BenchInterrupted(place(part, ceilings, [Finding.of("roofline.interrupted", samples=part.n_samples)])
                               ) from None
    t = r.median
    if not (t > 0 and math.isfinite(t)):
        raise PerfmagicError(f"the measured time per call is {t!r} s: nothing to divide the work by (the clock "
                             "resolution may be too coarse, or the code did nothing); time more work per call")
    if ceilings is None:
        from .ceilings import ceilings as get_ceilings

        ceilings = get_ceilings(r.device if r.device.startswith(("cpu", "cuda")) else "cpu", progress=progress)
    return place(r, ceilings, [], probes)


def _wants_probe(F: float, B: float, device: str, ceilings: Ceilings | None) -> bool:
    """Whether to read the host's memory phase around the timing: not for a cell sent to CUDA, nor for one
    whose intensity is over twice every ridge of the roofs at hand (given, else cached): clearly compute-bound."""
    if str(device).startswith("cuda"):
        return False
    roofs = ceilings if ceilings is not None else _cached_roofs("cpu")
    if roofs is None or not str(roofs.device).startswith("cpu") or not roofs.compute or not roofs.bandwidth_Bps > 0:
        return True
    return F / B <= 2.0 * max(roofs.ridge(d) for d in roofs.compute)


def _timed(run: Callable[[], BenchResult], probe_on: bool) -> tuple[BenchResult, Any]:
    """``run()`` between two memory probes (:func:`perfmagic.roofs.phase.memory_probe`) where ``probe_on``
    and it ran on the CPU: ``(result, (before, after) or None)``. Ctrl-C in the probe after the timing keeps
    the timing (``BenchInterrupted`` carrying it)."""
    from .phase import memory_probe

    before = memory_probe() if probe_on else None
    r = run()
    if before is None or not str(r.device).startswith("cpu"):
        return r, None
    try:
        return r, (before, memory_probe())
    except KeyboardInterrupt:
        raise BenchInterrupted(r) from None


def memory_phase_finding(x: RooflineResult) -> Finding | None:
    """The memory phase the cell ran in, as a doubt: ``roofline.memory-phase`` (another phase all along, with
    the roof of that phase and the fraction against it) or ``roofline.memory-phase-changed``; None where
    :attr:`RooflineResult.memory_phase` is."""
    ph = x.memory_phase
    if ph is None:
        return None
    before, after = x.memory_probes or (None, None)
    if ph["kind"] == "changed":
        return Finding.of("roofline.memory-phase-changed", before=before, after=after, roof=x.bandwidth_Bps)
    cache = {"llc": llc_bytes(x.ceilings), "per_call": x.bytes} if x.cache_served else {}
    return Finding.of("roofline.memory-phase", ratio=ph["ratio"], before=before, after=after, roof=x.bandwidth_Bps,
                      phase_roof=x.bandwidth_Bps * ph["ratio"], fraction=x.fraction_of_roof,
                      phase_fraction=x.fraction_of_phase_roof, **cache)


def speed_state(r: Any, c: Ceilings, dtype: str) -> Finding | None:
    """Whether the timing ``r`` ran in another speed state of the host than the ``dtype`` roof was measured
    in, as a doubt (the roofs are not rescaled: the evidence does not support it).

    On a CPU the drift guard times a fixed workload before and after the samples (``env["reference_s"]``,
    ``reference_before_s``); the calibration kept the fastest reading it saw and, per compute roof, the ratio
    of that roof's own readings to it (``details["speed"]``). Both readings around the samples beyond
    :data:`~perfmagic.core.reference.SLOW` of the roof's, on one side: ``roofline.other-state``; one of them:
    ``roofline.state-changed`` (during the timing). Dividing the roof by the guard's ratio was tried and
    measured (bench_roofline, 2026-11-27): in 3 of 10 runs the guard read another state around a
    ``torch.mm`` cell, and rescaling moved the fraction of the roof towards the runs in one state once
    (52% → 79%) and away from it twice (85% → 59%, 76% → 49%): the guard's state and the matmul's speed
    did not move together on this VM, so the fraction stays against the roof as calibrated."""
    from ..core.reference import SLOW

    speed = (c.details or {}).get("speed") or {}
    fastest = speed.get("fastest_reference_s")
    env = getattr(r, "env", None) or {}
    refs = [env.get("reference_before_s"), env.get("reference_s")]
    if not str(getattr(r, "device", "")).startswith("cpu") or not fastest or dtype not in c.compute or not all(
            isinstance(x, (int, float)) and x > 0 for x in refs):
        return None
    base = fastest * float((speed.get("roofs") or {}).get(dtype) or 1.0)  # the guard while this roof was measured
    q = [x / base for x in refs]
    away = [x - 1 > SLOW or 1 / x - 1 > SLOW for x in q]
    if all(away) and (min(q) > 1 or max(q) < 1):
        return Finding.of("roofline.other-state", dtype=dtype, ratio=math.sqrt(q[0] * q[1]))
    if any(away):
        return Finding.of("roofline.state-changed", dtype=dtype, before=q[0], after=q[1])
    return None


def _cached_roofs(device: str) -> Ceilings | None:
    """The cached roofs of ``device`` without measuring anything (None when there are none)."""
    try:
        from .ceilings import _resolve_device, load_cached, machine_fingerprint

        dev = _resolve_device(device if device.startswith(("cpu", "cuda")) else "cpu")
        return load_cached(machine_fingerprint(dev)[0], None)
    except Exception:
        return None


def llc_bytes(c: Ceilings) -> int | None:
    """The last-level cache's bytes as the roofs' calibration recorded them; None where it did not."""
    d = c.details or {}
    llc = (d.get("bandwidth") or {}).get("llc_bytes") or (d.get("env") or {}).get("llc_bytes")
    return int(llc) if isinstance(llc, (int, float)) and llc > 0 else None


def beyond_cache(c: Ceilings, per_call: float) -> int | None:
    """The last-level cache's bytes where the roofs know it and ``per_call`` bytes are more than twice it: a
    working set no cache holds (a rate above the DRAM roof is then not cache bandwidth); else None."""
    llc = llc_bytes(c)
    return llc if llc is not None and per_call > 2 * llc else None


def above_roof(c: Ceilings, per_call: float, bps: float) -> str | None:
    """What a rate above the DRAM roof is: ``"roofline.in-cache"`` (a working set a cache can hold),
    ``"roofline.above-roof"`` (:func:`beyond_cache`: not cache); None at or under the roof."""
    if not bps > CACHE_BW_TOLERANCE * c.bandwidth_Bps:
        return None
    return "roofline.above-roof" if beyond_cache(c, per_call) else "roofline.in-cache"


FITS_CACHE_SHARE = 0.5  # a call whose tensors take at most this share of the last-level cache can stay there


def fits_cache(c: Ceilings, counts: Any, F: float, B: float, dtype: str) -> Finding | None:
    """``roofline.fits-cache``: a memory-bound point (by counted bytes) whose tensors all fit in half the
    last-level cache. Its bytes may be served by the caches call after call, so the DRAM roof need not bound
    it, and "memory-bound" is only against DRAM: notebook 10's training step (70 MiB counted a call, a small
    model) was called memory-bound at 67% of the bandwidth roof, and the next change cut its time 3.9×."""
    llc = llc_bytes(c)
    foot = getattr(counts, "footprint", None) if counts is not None else None
    if not (llc and foot and B > 0) or dtype not in c.compute or F / B >= c.ridge(dtype):
        return None
    if foot > FITS_CACHE_SHARE * llc:
        return None
    return Finding.of("roofline.fits-cache", footprint=foot, llc=llc, per_call=B)


def _warnings(r: Any, c: Ceilings, counts: Any, F: float, B: float, t: float, dtype: str = "") -> list[Any]:
    """The doubts about a placed point (:class:`~perfmagic.findings.Finding` s, ``roofline.*``), then the
    timing's load, oversubscription and machine-state lines as the timing gave them."""
    w: list[Any] = []
    bps = B / t
    above = above_roof(c, B, bps)
    if above:
        more = {"llc": beyond_cache(c, B)} if above == "roofline.above-roof" else {}
        w.append(Finding.of(above, bps=bps, roof=c.bandwidth_Bps, per_call=B, **more))
    if counts is not None and counts.zero_flop_compute_ops:
        w.append(Finding.of("roofline.undercounted", ops=tuple(counts.zero_flop_compute_ops)))
    fits = fits_cache(c, counts, F, B, dtype) if not above else None
    if fits is not None:
        w.append(fits)
    if c.loaded:
        w.append(Finding.of("roofline.loaded-roofs", others=c.others_cores))
    bad = c.unreliable
    for roof in ("bandwidth", dtype):
        if roof in bad:
            w.append(Finding.of("roofline.unreliable-roof", roof=roof, why=str(bad[roof])))
    if dtype in c.emulated:
        w.append(Finding.of("roofline.emulated", dtype=dtype, why=str(c.emulated[dtype])))
    # the timing's load, oversubscription and machine-state lines (not the cold call's: it is not in the samples)
    w += [x for x in r.warnings if "other processes" in str(x) and warning_rank(str(x)) != 4]
    dev = str(r.device)
    if not (dev == c.device or (dev.startswith("cuda") and c.device.startswith("cuda") and dev.split(":")[-1] == c.device.split(":")[-1])):
        w.append(Finding.of("roofline.other-device", device=dev, roofs=c.device))
    if counts is not None and counts.devices and dev.split(":")[0] not in counts.devices:
        w.append(Finding.of("roofline.tensors-elsewhere", devices=tuple(counts.devices), device=dev))
    return w
