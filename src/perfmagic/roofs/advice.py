"""The roofline's advice: what to try next for code at a given place under the roofs, in the order that
matters for its bound (memory-bound: move less data first; compute-bound: faster arithmetic first; at
the ridge: both), each item with the number that motivates it. :func:`_advice` is what
:attr:`perfmagic.roofs.roofline.RooflineResult.advice` returns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .roofline import RooflineResult

CACHE_BW_TOLERANCE = 1.05  # apparent bandwidth above the roof by more than this: the data sat in cache
LOW_FRACTION = 0.3         # below this fraction of the attainable roof, the code is far from its roof


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
    if r.at_ridge:
        out += _ridge_advice(r)
    elif r.bound == "memory":
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


def _ridge_advice(r: RooflineResult) -> list[str]:
    """At the ridge one lever alone meets the other roof at once: say so, then the levers that move both."""
    side = "below" if r.intensity < r.ridge else "above"
    out = [f"at the ridge ({abs(r.intensity / r.ridge - 1):.1%} {side} it, within the ±{r.ridge_band:.0%} where "
           "neither roof alone decides): fewer bytes alone (fusion, reuse in cache) soon meets the compute roof, "
           "and faster arithmetic alone soon meets the bandwidth roof — expect little from either by itself"]
    p = _precision_advice(r)
    if p and not p.startswith("precision is not"):
        out.append(p + " — a smaller dtype also moves fewer bytes, so it lifts both roofs")
    b = _blas_advice(r)
    if b:
        out.append(b)
    out.append(_algorithm_advice(r) + "; fewer FLOPs and fewer bytes together move the point under both roofs")
    out.append("fuse elementwise chains into one pass (torch.compile, in-place/out= ops): each fused op saves a "
               "full read+write of the tensor — with fewer FLOPs, or the compute roof caps the gain")
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
