"""The roofline's advice: what to try next for code at a given place under the roofs, in the order that
matters for its bound (memory-bound: move less data first; compute-bound: faster arithmetic first; at
the ridge: both), each item with the number that motivates it. :func:`_advice` is what
:attr:`perfmagic.roofs.roofline.RooflineResult.advice` returns, as
:class:`~perfmagic.findings.Finding` s (``advice.*``) worded by :mod:`perfmagic.render.findings_roofs`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..findings import Finding

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


def _precision_advice(r: RooflineResult, ridge: bool = False) -> Finding | None:
    """One item about arithmetic precision that follows the device and the measured roofs (never an
    emulated dtype; never 'use X' beside 'nothing is faster'). ``ridge``: at the ridge, where a smaller
    dtype lifts both roofs (and 'not the lever' is left out)."""
    c, gpu = r.ceilings, r.ceilings.device.startswith("cuda")
    faster = _faster(r)
    if faster:
        half = [d for d in faster if d in ("bfloat16", "float16")]
        return Finding.of("advice.lower-precision", gpu=gpu, dtype=r.dtype, peak=r.peak_flops_per_s,
                          rates=tuple((d, c.compute[d]) for d in faster), tf32="tf32" in faster,
                          half=half[0] if half else None, fp8="fp8_e4m3" in faster,
                          f32="float32" in faster and r.dtype == "float64",
                          tensor_cores=gpu and bool(half or "tf32" in faster), ridge=ridge)
    others = [d for d in c.compute if d != r.dtype]
    if gpu and not any(d in c.compute for d in ("tf32", "bfloat16", "float16")):
        return Finding.of("advice.precision-unmeasured", ridge=ridge)
    if not others or ridge:
        return None
    return Finding.of("advice.precision-not-the-lever", dtype=r.dtype, gpu=gpu,
                      rates=tuple((d, c.compute[d]) for d in others),
                      emulated=tuple(d for d in others if d in c.emulated))


def _algorithm_advice(r: RooflineResult, ridge: bool = False) -> Finding:
    return Finding.of("advice.algorithm", ops=_main_kind(r), gpu=r.ceilings.device.startswith("cuda"), ridge=ridge)


def _advice(r: RooflineResult) -> list[Finding]:
    out: list[Finding] = []
    frac = r.fraction_of_roof
    c = r.ceilings
    if r.in_cache:
        out.append(Finding.of("advice.in-cache"))
    if frac < LOW_FRACTION:
        out.append(Finding.of("advice.far-from-roof", fraction=frac))
    if r.at_ridge:
        out += _ridge_advice(r)
    elif r.bound == "memory":
        out += [Finding.of("advice.less-data"), Finding.of("advice.fuse"), Finding.of("advice.layout")]
        gpu = c.device.startswith("cuda")
        smaller = (["float32"] if r.dtype == "float64" else []) + [
            d for d in ("bfloat16", "float16") if d != r.dtype and r.dtype in ("float32", "float64", "tf32")
            and d not in c.emulated and (gpu or d in c.compute)]
        if smaller:
            out.append(Finding.of("advice.storage-precision", dtype=r.dtype, smaller=tuple(smaller)))
        if r.ridge > 0 and r.intensity > 0:
            out.append(Finding.of("advice.not-compute", factor=r.ridge / r.intensity))
    else:
        b = _blas_advice(r)
        if b:
            out.append(b)
        p = _precision_advice(r)
        if p:
            out.append(p)
        out.append(_algorithm_advice(r))
    return out


def _ridge_advice(r: RooflineResult) -> list[Finding]:
    """At the ridge one lever alone meets the other roof at once: say so, then the levers that move both."""
    out = [Finding.of("advice.at-ridge", off=abs(r.intensity / r.ridge - 1),
                      side="below" if r.intensity < r.ridge else "above", band=r.ridge_band)]
    p = _precision_advice(r, ridge=True)
    if p:
        out.append(p)
    b = _blas_advice(r)
    if b:
        out.append(b)
    out.append(_algorithm_advice(r, ridge=True))
    out.append(Finding.of("advice.fuse-at-ridge"))
    return out


def _blas_advice(r: RooflineResult) -> Finding | None:
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
    return Finding.of("advice.wide-blas", dtype=r.dtype, wide=wide, why=blas.get("why"), arch=blas.get("architecture"),
                      here=tuple(sorted(here.items())), coretype=blas.get("coretype"), ratio=wide / best_here)
