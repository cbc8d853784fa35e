"""``roofline()``: where a piece of code sits under the device's measured roofs, and what to try next.

The method (METHOD.md §1):

1. **Work** of one call: FLOPs and bytes counted from the torch ops the code runs
   (:func:`perfmagic._counting.count`: FlopCounterMode + perfmagic's formulas; bytes = algorithmic
   traffic, a lower bound on DRAM traffic), or the numbers given (``flops=``/``bytes=``, which win).
2. **Time** of one call: :func:`perfmagic._engine.bench` (cold call apart, warmup, device sync, median).
3. **Roofs**: :func:`perfmagic._ceilings.ceilings` of the device the code ran on (measured, cached).
4. **Verdict**: intensity ``I = FLOPs / bytes``; achieved FLOP/s and bytes/s; ridge ``= peak / BW``;
   attainable ``= min(peak, I × BW)``; **memory-bound** when ``I < ridge``, else compute-bound; the
   fraction of the attainable roof reached (memory-bound: achieved bytes/s ÷ BW, which equals achieved
   FLOP/s ÷ (I × BW)); advice in the order that matters for that bound.
5. **Doubts**: apparent bandwidth above the DRAM roof (working set in cache), FLOPs undercounted
   (compute ops FlopCounterMode counts as zero and perfmagic has no formula for), a loaded machine
   (during calibration or timing), roofs measured for another device.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from .ceilings import Ceilings, normalize_dtype
from ..errors import BadOptionError, BenchInterrupted, PerfmagicError
from ..result import Displayed
from ..render.units import fmt_bytes, fmt_rate, fmt_time

CACHE_BW_TOLERANCE = 1.05
LOW_FRACTION = 0.3


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
    figure_alt: ClassVar[str] = "roofline chart"

    code: str
    flops: float
    bytes: float
    flops_source: str  # "counted" | "given"
    bytes_source: str
    dtype: str
    bench: Any  # BenchResult
    ceilings: Ceilings
    counts: Any = None  # Counts | None
    label: str | None = None
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

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
    def attainable_flops_per_s(self) -> float:
        return min(self.peak_flops_per_s, self.intensity * self.bandwidth_Bps)

    @property
    def fraction_of_roof(self) -> float:
        """Achieved ÷ attainable (memory-bound: bytes/s ÷ BW; compute-bound: FLOP/s ÷ peak)."""
        if self.bound == "memory":
            return self.bytes_per_s / self.bandwidth_Bps
        return self.flops_per_s / self.peak_flops_per_s

    @property
    def advice(self) -> tuple[str, ...]:
        return tuple(_advice(self))

    # ---- serialisation ----------------------------------------------------------------------------
    def metrics(self) -> dict[str, Any]:
        """Flat scalars for a ledger row."""
        return {
            "median_s": self.time_s, "flops": self.flops, "bytes": self.bytes, "intensity": self.intensity,
            "flops_per_s": self.flops_per_s, "bytes_per_s": self.bytes_per_s, "ridge": self.ridge,
            "peak_flops_per_s": self.peak_flops_per_s, "bandwidth_Bps": self.bandwidth_Bps,
            "attainable_flops_per_s": self.attainable_flops_per_s, "fraction_of_roof": self.fraction_of_roof,
            "bound": self.bound, "dtype": self.dtype, "flops_source": self.flops_source,
            "bytes_source": self.bytes_source, "ceilings_fingerprint": self.ceilings.fingerprint,
            "ceilings_measured_utc": self.ceilings.measured_utc,
        }

    def samples(self) -> dict[str, Any]:
        """The timing's raw samples (what the ledger keeps for a roofline run)."""
        return self.bench.samples()

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "code": self.code, "device": self.device, "metrics": self.metrics(),
                "advice": list(self.advice), "warnings": list(self.warnings), "notes": list(self.notes),
                "ops": dict(self.counts.ops) if self.counts is not None else None,
                "ceilings": self.ceilings.to_dict(), "bench": self.bench.to_dict()}

    # ---- text ------------------------------------------------------------------------------------
    def verdict(self) -> str:
        roof = (f"{fmt_rate(self.bytes_per_s, 'B')} = {self.fraction_of_roof:.0%} of the "
                f"{fmt_rate(self.bandwidth_Bps, 'B')} bandwidth roof" if self.bound == "memory" else
                f"{fmt_rate(self.flops_per_s, 'FLOP')} = {self.fraction_of_roof:.0%} of the "
                f"{fmt_rate(self.peak_flops_per_s, 'FLOP')} {self.dtype} roof")
        return (f"{self.bound}-bound: {self.intensity:.3g} FLOP/B vs ridge {self.ridge:.3g} FLOP/B ({self.dtype}, "
                f"{self.device}) — {roof}")

    def text(self) -> str:
        first = self.verdict() + (f"   [label {self.label}]" if self.label else "")
        lines = first.split(" — ", 1) if len(first) > 100 else [first]
        if len(lines) == 2:  # the bound, then the fraction of the roof under it
            lines[1] = "  " + lines[1]
        lines.append(f"  work per call: {self.flops:.4g} FLOP ({self.flops_source}), {fmt_bytes(self.bytes)} "
                     f"({self.bytes_source}{', algorithmic traffic' if self.bytes_source == 'counted' else ''}) · "
                     f"time {fmt_time(self.time_s)} median")
        lines.append(f"  achieved {fmt_rate(self.flops_per_s, 'FLOP')} · {fmt_rate(self.bytes_per_s, 'B')}; "
                     f"attainable {fmt_rate(self.attainable_flops_per_s, 'FLOP')} at this intensity")
        lines.append("  next, in order:")
        lines += [_wrap(a, f"    {i}. ", "       ") for i, a in enumerate(self.advice, 1)]
        c = self.ceilings
        mark = (f"; LOADED: others kept {c.others_cores:.1f} cores busy" if c.loaded else "") + (
            f"; unreliable: {', '.join(c.unreliable)}" if c.unreliable else "")
        lines.append(f"  roofs: {c.device} measured {c.measured_utc} ({c.source}, fingerprint {c.fingerprint}{mark})")
        lines += [_wrap(n, "  note: ", "        ") for n in self.notes]
        lines += [_wrap(w, "  ! ", "    ") for w in self.warnings]
        # every line within 100 columns: a long one continues under its own indent + 2
        physical = [p for ln in lines for p in ln.split("\n")]  # wrapped items are already several lines
        return "\n".join(ln if len(ln) <= 100 else _wrap(ln.lstrip(), " " * (len(ln) - len(ln.lstrip())),
                                                          " " * (len(ln) - len(ln.lstrip()) + 2))
                         for ln in physical)

    def headline(self) -> str:
        return self.verdict()

    def html_sections(self) -> list[tuple[str, str]]:
        """Folded detail: the ops counted, the roofs it was judged against and how they were measured,
        the timing."""
        from ..render.roofline import html_sections

        return html_sections(self)

    def __str__(self) -> str:
        return self.text()

    # ---- figure -----------------------------------------------------------------------------------
    def point(self) -> dict[str, Any]:
        return {"label": self.label or "this run", "intensity": self.intensity, "flops_per_s": self.flops_per_s}

    def figure_png(self, history: Iterable[Any] = ()) -> bytes:
        """Log-log roofline PNG: one compute roof per measured dtype, the bandwidth roof, ridge points
        marked; ``history`` points (RooflineResults, ledger metric dicts with ``intensity`` and
        ``flops_per_s`` and optional ``label``, or ``(label, intensity, flops_per_s)`` tuples) labelled,
        this result highlighted."""
        from ..render.roofline import figure_png

        return figure_png(self, history)


def _wrap(text: str, first: str, rest: str, width: int = 100) -> str:
    import textwrap

    return textwrap.fill(text, width=width, initial_indent=first, subsequent_indent=rest,
                         break_long_words=False, break_on_hyphens=False)


def _kinds(counts: Any) -> dict[str, float]:
    """FLOPs per kind of op the code ran: conv, attention, matmul, other (from the counted aten ops)."""
    out: dict[str, float] = {}
    for name, v in ((counts.ops if counts is not None else None) or {}).items():
        n = name.lower()
        kind = ("conv" if "conv" in n else "attention" if "attention" in n else
                "matmul" if any(k in n for k in ("mm", "matmul", "linear", "einsum", "baddbmm")) else "other")
        out[kind] = out.get(kind, 0.0) + float(v.get("flops", 0) or 0)
    return out


def _main_kind(r: RooflineResult) -> str:
    kinds = {k: v for k, v in _kinds(r.counts).items() if v > 0}
    return max(kinds, key=kinds.__getitem__) if kinds else "unknown"


def _faster(r: RooflineResult) -> list[str]:
    """Measured dtypes at least 1.2× faster than the code's, leaving out emulated and unreliable roofs."""
    c = r.ceilings
    skip = set(c.emulated) | set(c.unreliable)
    return sorted((d for d, v in c.compute.items() if d != r.dtype and d not in skip and v > 1.2 * r.peak_flops_per_s),
                  key=lambda d: -c.compute[d])


def _precision_advice(r: RooflineResult) -> str | None:
    """One item about arithmetic precision that follows the device and the measured roofs (never an
    emulated dtype; never 'use X' beside 'nothing is faster')."""
    c, gpu = r.ceilings, r.ceilings.device.startswith("cuda")
    faster = _faster(r)
    rates = ", ".join(f"{d} {c.compute[d] / 1e9:.4g}" for d in faster)
    if faster:
        how = []
        if "tf32" in faster:
            how.append("TF32 for float32 matmuls (torch.backends.cuda.matmul.allow_tf32 = True)")
        half = [d for d in faster if d in ("bfloat16", "float16")]
        if half:
            how.append(f"torch.autocast('{'cuda' if gpu else 'cpu'}', dtype=torch.{half[0]})")
        if "fp8_e4m3" in faster:
            how.append("fp8 (torch._scaled_mm / Transformer Engine) where accuracy allows")
        if "float32" in faster and r.dtype == "float64":
            how.append("float32 instead of float64 where accuracy allows")
        units = " on the tensor cores (dimensions multiples of 8)" if gpu and (half or "tf32" in faster) else ""
        return (f"lower precision{units}: this {'GPU' if gpu else 'CPU'} measured {rates} GFLOP/s vs {r.dtype} "
                f"{r.peak_flops_per_s / 1e9:.4g} GFLOP/s — " + "; ".join(how or ["torch.autocast"]))
    others = [d for d in c.compute if d != r.dtype]
    if gpu and not any(d in c.compute for d in ("tf32", "bfloat16", "float16")):
        return ("the tensor-core roofs (tf32, bfloat16, float16) were not measured: "
                "perfmagic.ceilings('cuda', recalibrate=True) measures them before you choose a precision")
    if not others:
        return None
    emu = [d for d in others if d in c.emulated]
    return (f"precision is not the lever here: no measured dtype is faster than {r.dtype} on this "
            f"{'GPU' if gpu else 'CPU'} ({', '.join(f'{d} {c.compute[d] / 1e9:.4g}' for d in others)} GFLOP/s"
            + (f"; {', '.join(emu)} emulated, no native units" if emu else "") + ")")


def _algorithm_advice(r: RooflineResult) -> str:
    kind, gpu = _main_kind(r), r.ceilings.device.startswith("cuda")
    if kind == "conv":
        return ("fewer FLOPs per output: smaller or depthwise-separable kernels, fewer channels or a lower resolution; "
                "try channels_last (x.to(memory_format=torch.channels_last)) so the convolution library picks "
                "its fastest kernel")
    if kind == "attention":
        return ("fewer FLOPs: the sequence-length² term dominates — shorter or windowed sequences, KV caching when "
                "generating; torch.nn.functional.scaled_dot_product_attention rather than softmax(QKᵀ)V by hand"
                + (" (flash kernels on this GPU)" if gpu else ""))
    if kind == "matmul":
        return ("fewer FLOPs: avoid recomputation, exploit structure (sparsity, low rank, a smaller hidden size); "
                "batch many small matmuls into one (torch.bmm)")
    return "better algorithm: fewer FLOPs (avoid recomputation, exploit structure: sparsity, low rank, FFT)"


def _advice(r: RooflineResult) -> list[str]:
    out: list[str] = []
    frac = r.fraction_of_roof
    c = r.ceilings
    if r.bytes_per_s > CACHE_BW_TOLERANCE * r.bandwidth_Bps:
        out.append("the data stays in cache, so the DRAM roof does not bound this run: measure with the real data "
                   "size, or keep it cache-sized on purpose (blocking) — that is already the best remedy for bandwidth")
    if frac < LOW_FRACTION:
        out.append(f"only {frac:.0%} of the roof: the limit is not the hardware yet — overheads (Python loops, "
                   "small tensors, many tiny kernels, allocation, threads) dominate; profile and batch before tuning "
                   "for the roof")
    if r.bound == "memory":
        out += [
            "reduce data movement: avoid extra passes and temporaries, reuse data while it is in cache (blocking/tiling), "
            "drop unneeded copies (.contiguous(), .clone(), dtype round trips)",
            "fuse elementwise chains into one pass (torch.compile, in-place/out= ops, a fused kernel): each fused "
            "op saves a full read+write of the tensor",
            "change the layout: contiguous, stride-1 access along the inner loop; batch small tensors",
        ]
        gpu = c.device.startswith("cuda")
        smaller = (["float32"] if r.dtype == "float64" else []) + [
            d for d in ("bfloat16", "float16") if d != r.dtype and r.dtype in ("float32", "float64", "tf32")
            and d not in c.emulated and (gpu or d in c.compute)]
        if smaller:
            out.append(f"lower the storage precision ({r.dtype} -> {'/'.join(smaller)} where accuracy allows): fewer "
                       "bytes per element moves the point right and up")
        if r.ridge > 0 and r.intensity > 0:
            out.append(f"compute is not the limit: {r.ridge / r.intensity:.3g}× more FLOPs per byte would reach the ridge; "
                       "faster arithmetic will not help here")
    else:
        b = _blas_advice(r)
        if b:
            out.append(b)
        p = _precision_advice(r)
        if p:
            out.append(p)
        out.append(_algorithm_advice(r))
    return out


def _blas_advice(r: RooflineResult) -> str | None:
    """When this dtype's roof came from OpenBLAS's wide kernels in a child process (numpy's in this
    process fell back to narrow ones, :mod:`perfmagic.roofs.widekernels`) and this code is well below it."""
    blas = r.ceilings.blas or {}
    wide = (blas.get("wide") or {}).get(r.dtype)
    here = (blas.get("in_process") or {}).get(r.dtype) or {}
    best_here = max(here.values(), default=0.0)
    # a loaded calibration's in-process rates are not the libraries' (and a ratio past ~3 is not a vector
    # width: 512- vs 256-bit kernels differ by about 2×): then nothing is said
    if (not wide or best_here <= 0 or wide < 1.2 * best_here or wide > 3.0 * best_here or r.ceilings.loaded
            or r.fraction_of_roof > 0.75):
        return None
    libs = ", ".join(f"{lib} {v / 1e9:.4g}" for lib, v in sorted(here.items()))
    return (f"the {r.dtype} roof ({wide / 1e9:.4g} GFLOP/s) is OpenBLAS's AVX-512 kernels, run in a child "
            f"process; {blas.get('why', 'numpy runs narrow kernels here')}: here {libs} GFLOP/s. For numpy, set "
            f"OPENBLAS_CORETYPE={blas.get('coretype')} in the kernel's environment before it starts "
            f"({wide / best_here:.1f}× in the calibration); torch's BLAS may have no wider path on this CPU")


def _resolve_dtype(dtype: Any, counts: Any, c: Ceilings) -> tuple[str, list[str]]:
    notes: list[str] = []
    if dtype is not None:
        d = normalize_dtype(dtype)
    elif counts is not None and counts.dtype:
        d = normalize_dtype(counts.dtype)
        notes.append(f"dtype {d}: from the counted ops")
    else:
        d = "float32"
        notes.append("dtype not known (no torch ops counted): the float32 roof is used; pass dtype= to choose")
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
    notes: list[str] = []
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
    def place(r: Any, roofs: Ceilings, first: list[str]) -> RooflineResult:
        d, dnotes = _resolve_dtype(dtype, counts, roofs)
        more = (["zero FLOPs: the point cannot be drawn on the log-log chart; the verdict uses bandwidth only"]
                if F == 0 else [])
        return RooflineResult(code=r.code, flops=F, bytes=B, flops_source="given" if flops_v is not None else "counted",
                              bytes_source="given" if bytes_v is not None else "counted", dtype=d, bench=r,
                              ceilings=roofs, counts=counts, label=label,
                              warnings=tuple(first + _warnings(r, roofs, counts, F, B, r.median, d)),
                              notes=tuple(notes + dnotes + more))

    try:
        r = bench(code, setup, globals=globals, budget=budget, device=device, flops=F, bytes_moved=B,
                  label=label, filename=filename)
    except BenchInterrupted as exc:  # Ctrl-C: place what was timed, when anything was and the roofs are known
        part = exc.result
        if part is None or not part.raw or ceilings is None or not part.median > 0:
            raise BenchInterrupted(None) from None
        raise BenchInterrupted(place(part, ceilings, [f"interrupted after {part.n_samples} sample(s): the point "
                                                      "comes from a partial timing"])) from None
    t = r.median
    if not (t > 0 and math.isfinite(t)):
        raise PerfmagicError(f"the measured time per call is {t!r} s: nothing to divide the work by (the clock "
                             "resolution may be too coarse, or the code did nothing); time more work per call")
    if ceilings is None:
        from .ceilings import ceilings as get_ceilings

        ceilings = get_ceilings(r.device if r.device.startswith(("cpu", "cuda")) else "cpu", progress=progress)
    return place(r, ceilings, [])


def _warnings(r: Any, c: Ceilings, counts: Any, F: float, B: float, t: float, dtype: str = "") -> list[str]:
    w: list[str] = []
    bps = B / t
    if bps > CACHE_BW_TOLERANCE * c.bandwidth_Bps:
        w.append(f"apparent bandwidth {fmt_rate(bps, 'B')} is above the DRAM roof {fmt_rate(c.bandwidth_Bps, 'B')}: the "
                 f"working set (~{fmt_bytes(B)} per call) stays in cache, so this is cache bandwidth; the verdict "
                 "against the DRAM roof does not apply — use data larger than the last-level cache to judge DRAM")
    if counts is not None and counts.zero_flop_compute_ops:
        w.append("FLOPs undercounted: these ops compute but count zero FLOPs (no formula): "
                 + ", ".join(counts.zero_flop_compute_ops) + "; give flops= for an exact count")
    if counts is not None and counts.formula_ops:
        pass  # stated in the notes
    if c.loaded:
        w.append(f"the roofs were measured while other processes kept {c.others_cores:.1f} cores busy: they may be "
                 "too low (so the fraction of the roof too high); they are re-measured on the next use when the "
                 "machine is quiet, or now with perfmagic.ceilings(recalibrate=True)")
    bad = c.unreliable
    for roof in ("bandwidth", dtype):
        if roof in bad:
            w.append(f"the {roof} roof is unreliable ({bad[roof]}): its fraction of the roof is approximate")
    if dtype in c.emulated:
        w.append(f"{dtype} is {c.emulated[dtype]}: its roof is that of emulation, not of {dtype} units")
    w += [x for x in r.warnings if "other processes" in x]
    dev = str(r.device)
    if not (dev == c.device or (dev.startswith("cuda") and c.device.startswith("cuda") and dev.split(":")[-1] == c.device.split(":")[-1])):
        w.append(f"the code ran on {dev} but the roofs are of {c.device}")
    if counts is not None and counts.devices and dev.split(":")[0] not in counts.devices:
        w.append(f"the counted tensors live on {', '.join(counts.devices)}, the timing ran on {dev}")
    return w
