"""The sentences of the roofline's :class:`~perfmagic.findings.Finding` kinds: its advice, notes and
warnings, and the calibration's (the roofs' warnings, why a roof is unreliable, emulated or not measured,
and its progress steps).

:mod:`perfmagic.render.findings` merges :data:`WORDS` into its table, so ``str(finding)`` of any of these
kinds is its sentence. Kinds: ``advice.*`` (what %%roofline says to try next, :mod:`perfmagic.roofs.advice`),
``roofline.*`` (a placed point's notes and warnings, :mod:`perfmagic.roofs.roofline`), ``roofs.*`` (the
calibration, :mod:`perfmagic.roofs.ceilings`, :mod:`perfmagic.roofs.kernels`,
:mod:`perfmagic.roofs.widekernels`) and ``counting.*`` (how FLOPs and bytes were counted,
:mod:`perfmagic.roofs.counting`). The printed text is the one these engines wrote before the words moved
here. Imports no analysis module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .text import fmt_bytes, fmt_rate

# ---- advice (roofs/advice.py): what to try next, in the order that matters for the bound --------------


def _gflops(rates: Any) -> str:
    return ", ".join(f"{d} {v / 1e9:.4g}" for d, v in rates)


def _lower_precision(f: Any) -> str:
    how = []
    if f.get("tf32"):
        how.append("TF32 for float32 matmuls (torch.backends.cuda.matmul.allow_tf32 = True)")
    if f.get("half"):
        how.append(f"torch.autocast('{'cuda' if f['gpu'] else 'cpu'}', dtype=torch.{f['half']})")
    if f.get("fp8"):
        how.append("fp8 (torch._scaled_mm / Transformer Engine) where accuracy allows")
    if f.get("f32"):
        how.append("float32 instead of float64 where accuracy allows")
    units = " on the tensor cores (dimensions multiples of 8)" if f.get("tensor_cores") else ""
    text = (f"lower precision{units}: this {'GPU' if f['gpu'] else 'CPU'} measured {_gflops(f['rates'])} GFLOP/s "
            f"vs {f['dtype']} {f['peak'] / 1e9:.4g} GFLOP/s — " + "; ".join(how or ["torch.autocast"]))
    return text + (" — a smaller dtype also moves fewer bytes, so it lifts both roofs" if f.get("ridge") else "")


def _not_the_lever(f: Any) -> str:
    emu = f.get("emulated") or ()
    return (f"precision is not the lever here: no measured dtype is faster than {f['dtype']} on this "
            f"{'GPU' if f['gpu'] else 'CPU'} ({_gflops(f['rates'])} GFLOP/s"
            + (f"; {', '.join(emu)} emulated, no native units" if emu else "") + ")")


def _unmeasured(f: Any) -> str:
    return ("the tensor-core roofs (tf32, bfloat16, float16) were not measured: "
            "perfmagic.ceilings('cuda', recalibrate=True) measures them before you choose a precision"
            + (" — a smaller dtype also moves fewer bytes, so it lifts both roofs" if f.get("ridge") else ""))


def _algorithm(f: Any) -> str:
    kind = f.get("ops")  # the kind of op with the most FLOPs
    if kind == "conv":
        text = ("fewer FLOPs per output: smaller or depthwise-separable kernels, fewer channels or a lower "
                "resolution; try channels_last (x.to(memory_format=torch.channels_last)) so the convolution "
                "library picks its fastest kernel")
    elif kind == "attention":
        text = ("fewer FLOPs: the sequence-length² term dominates — shorter or windowed sequences, KV caching when "
                "generating; torch.nn.functional.scaled_dot_product_attention rather than softmax(QKᵀ)V by hand"
                + (" (flash kernels on this GPU)" if f.get("gpu") else ""))
    elif kind == "matmul":
        text = ("fewer FLOPs: avoid recomputation, exploit structure (sparsity, low rank, a smaller hidden size); "
                "batch many small matmuls into one (torch.bmm)")
    else:
        text = "better algorithm: fewer FLOPs (avoid recomputation, exploit structure: sparsity, low rank, FFT)"
    return text + ("; fewer FLOPs and fewer bytes together move the point under both roofs" if f.get("ridge") else "")


def _blas(f: Any) -> str:
    why = f.get("why") or (_ROOFS["roofs.wide-fallback"](f) if f.get("arch") else "numpy runs narrow kernels here")
    libs = ", ".join(f"{lib} {v / 1e9:.4g}" for lib, v in f["here"])
    return (f"the {f['dtype']} roof ({f['wide'] / 1e9:.4g} GFLOP/s) is OpenBLAS's AVX-512 kernels, run in a child "
            f"process; {why}: here {libs} GFLOP/s. For numpy, set "
            f"OPENBLAS_CORETYPE={f['coretype']} in the kernel's environment before it starts "
            f"({f['ratio']:.1f}× in the calibration); torch's BLAS may have no wider path on this CPU")


_ADVICE: dict[str, Callable[[Any], str]] = {
    "advice.in-cache": lambda f: ("the data stays in cache, so the DRAM roof does not bound this run: measure with the "
                                  "real data size, or keep it cache-sized on purpose (blocking) — that is already the "
                                  "best remedy for bandwidth"),
    "advice.far-from-roof": lambda f: (f"only {f['fraction']:.0%} of the roof: the limit is not the hardware yet — "
                                       "overheads (Python loops, small tensors, many tiny kernels, allocation, "
                                       "threads) dominate; profile and batch before tuning for the roof"),
    "advice.less-data": lambda f: ("reduce data movement: avoid extra passes and temporaries, reuse data while it is "
                                   "in cache (blocking/tiling), drop unneeded copies (.contiguous(), .clone(), dtype "
                                   "round trips)"),
    "advice.fuse": lambda f: ("fuse elementwise chains into one pass (torch.compile, in-place/out= ops, a fused "
                              "kernel): each fused op saves a full read+write of the tensor"),
    "advice.layout": lambda f: "change the layout: contiguous, stride-1 access along the inner loop; batch small tensors",
    "advice.storage-precision": lambda f: (f"lower the storage precision ({f['dtype']} -> {'/'.join(f['smaller'])} "
                                           "where accuracy allows): fewer bytes per element moves the point right "
                                           "and up"),
    "advice.not-compute": lambda f: (f"compute is not the limit: {f['factor']:.3g}× more FLOPs per byte would reach "
                                     "the ridge; faster arithmetic will not help here"),
    "advice.lower-precision": _lower_precision,
    "advice.precision-unmeasured": _unmeasured,
    "advice.precision-not-the-lever": _not_the_lever,
    "advice.algorithm": _algorithm,
    "advice.at-ridge": lambda f: (f"at the ridge ({f['off']:.1%} {f['side']} it, within the ±{f['band']:.0%} where "
                                  "neither roof alone decides): fewer bytes alone (fusion, reuse in cache) soon meets "
                                  "the compute roof, and faster arithmetic alone soon meets the bandwidth roof — "
                                  "expect little from either by itself"),
    "advice.fuse-at-ridge": lambda f: ("fuse elementwise chains into one pass (torch.compile, in-place/out= ops): each "
                                       "fused op saves a full read+write of the tensor — with fewer FLOPs, or the "
                                       "compute roof caps the gain"),
    "advice.wide-blas": _blas,
}

# ---- a placed point (roofs/roofline.py): its notes and warnings ----------------------------------------

_ROOFLINE: dict[str, Callable[[Any], str]] = {
    "roofline.dtype-counted": lambda f: f"dtype {f['dtype']}: from the counted ops",
    "roofline.dtype-unknown": lambda f: ("dtype not known (no torch ops counted): the float32 roof is used; pass "
                                         "dtype= to choose"),
    "roofline.zero-flops": lambda f: ("zero FLOPs: the point cannot be drawn on the log-log chart; the verdict uses "
                                      "bandwidth only"),
    "roofline.interrupted": lambda f: (f"interrupted after {f['samples']} sample(s): the point comes from a partial "
                                       "timing"),
    "roofline.in-cache": lambda f: (f"apparent bandwidth {fmt_rate(f['bps'], 'B')} is above the DRAM roof "
                                    f"{fmt_rate(f['roof'], 'B')}: the working set (~{fmt_bytes(f['per_call'])} per "
                                    "call) stays in cache, so this is cache bandwidth; the verdict against the DRAM "
                                    "roof does not apply — use data larger than the last-level cache to judge DRAM"),
    "roofline.above-roof": lambda f: (
        f"apparent bandwidth {fmt_rate(f['bps'], 'B')} is above the DRAM roof {fmt_rate(f['roof'], 'B')} with "
        f"~{fmt_bytes(f['per_call'])} per call, more than twice the last-level cache ({fmt_bytes(f['llc'])}): not "
        "cache bandwidth — the host's memory ran faster during the timing than when the roof was measured, or the "
        "bytes are overcounted; recalibrate (perfmagic.ceilings(recalibrate=True)) and time the cell again"),
    "roofline.undercounted": lambda f: ("FLOPs undercounted: these ops compute but count zero FLOPs (no formula): "
                                        + ", ".join(f["ops"]) + "; give flops= for an exact count"),
    "roofline.loaded-roofs": lambda f: (f"the roofs were measured while other processes kept {f['others']:.1f} cores "
                                        "busy: they may be too low (so the fraction of the roof too high); they are "
                                        "re-measured on the next use when the machine is quiet, or now with "
                                        "perfmagic.ceilings(recalibrate=True)"),
    "roofline.unreliable-roof": lambda f: (f"the {f['roof']} roof is unreliable ({f['why']}): its fraction of the "
                                           "roof is approximate"),
    "roofline.emulated": lambda f: f"{f['dtype']} is {f['why']}: its roof is that of emulation, not of {f['dtype']} units",
    "roofline.other-device": lambda f: f"the code ran on {f['device']} but the roofs are of {f['roofs']}",
    "roofline.other-state": lambda f: (
        f"the drift guard's fixed workload took {f['ratio']:.2f}× as long around this cell as when its {f['dtype']} "
        "roof was measured: the host ran in another speed state, which may or may not have moved this cell (the two "
        "did not move together in bench_roofline); the fraction is of the roof as measured — time the cell again"),
    "roofline.state-changed": lambda f: (
        f"the host changed speed state during the timing (the drift guard read {f['before']:.2f}× then "
        f"{f['after']:.2f}× its reading when the {f['dtype']} roof was measured): time the cell again"),
    "roofline.memory-phase": lambda f: _memory_phase(f),
    "roofline.fits-cache": lambda f: (
        f"memory-bound against DRAM only: the call's tensors sit in {fmt_bytes(f['footprint'])} of storage in "
        f"all, which fits the {fmt_bytes(f['llc'])} last-level cache, so its {fmt_bytes(f['per_call'])} per call "
        "may come from the caches and the bandwidth roof need not bound it; per-op overheads may set the pace instead "
        "(%%flame shows where the time goes)"),
    "roofline.memory-phase-changed": lambda f: (
        f"the host's memory changed phase during the timing: a triad probe read {fmt_rate(f['before'], 'B')} before "
        f"and {fmt_rate(f['after'], 'B')} after it, against the {fmt_rate(f['roof'], 'B')} bandwidth roof; the point "
        "mixes both phases — time the cell again"),
    "roofline.tensors-elsewhere": lambda f: (f"the counted tensors live on {', '.join(f['devices'])}, the timing ran "
                                             f"on {f['device']}"),
}

def _memory_phase(f: Any) -> str:
    """A cell timed in another memory phase than its bandwidth roof was measured in (roofs/phase.py)."""
    slower = f["ratio"] < 1
    head = (f"the host's memory ran {'slower' if slower else 'faster'} around this cell than when the bandwidth "
            f"roof was measured: a triad probe read {fmt_rate(f['before'], 'B')} before and "
            f"{fmt_rate(f['after'], 'B')} after the timing, against the {fmt_rate(f['roof'], 'B')} roof "
            f"(×{f['ratio']:.2f}); ")
    if f.get("phase_fraction") is None:
        tail = (f"the bandwidth roof of this phase is about {fmt_rate(f['phase_roof'], 'B')} (this cell is not "
                "memory-bound: its fraction is of the compute roof)")
    else:
        tail = (f"against the roof of this phase (about {fmt_rate(f['phase_roof'], 'B')}) it reaches "
                f"{f['phase_fraction']:.0%}, against the roof as measured {f['fraction']:.0%}")
        if f["phase_fraction"] > 1 and f.get("llc"):
            tail += (f"; above the phase's roof because the {fmt_bytes(f['llc'])} last-level cache holds part of "
                     f"its {fmt_bytes(f['per_call'])} per call")
    fix = "" if slower else (" — the roof was measured in a slow phase: recalibrate "
                             "(perfmagic.ceilings(recalibrate=True))")
    return head + tail + fix


# ---- the calibration (roofs/ceilings.py, roofs/kernels.py, roofs/widekernels.py) ------------------------


def _g(x: float | None) -> str:
    return "?" if x is None else f"{x:.1f}"


def _disagree(f: Any) -> str:
    if f.get("low") is None:
        return "fewer than two trials"
    if f.get("roof") == "bandwidth":
        return (f"trials did not agree ({f['high'] / 1e9:.4g} vs {f['low'] / 1e9:.4g} GB/s, {f['method']}); the "
                "lower is kept")
    return (f"trials did not agree ({f['high'] / 1e9:.4g} vs {f['low'] / 1e9:.4g} GFLOP/s at n={f['size']}); the "
            "lower is kept")


def _against(f: Any) -> str:
    return (f"{f['now'] / 1e9:.4g} {f['unit']} is {f['now'] / f['was'] - 1:+.0%} from the quiet calibration of "
            f"{f['when']} ({f['was'] / 1e9:.4g} {f['unit']}) on this machine")


def _sized(f: Any) -> str:
    return (f"bandwidth arrays sized from the {f['bound']} ({fmt_bytes(f['avail'])}): 3 × {fmt_bytes(f['array'])} "
            f"instead of 3 × {fmt_bytes(f['wanted'])}"
            + (" — within the last-level cache's reach, so the roof may read high" if f.get("in_cache") else ""))


def _phases(f: Any) -> str:
    text = (f"bandwidth moved between the two phases of the calibration ({f['first'] / 1e9:.4g} then "
            f"{f['second'] / 1e9:.4g} GB/s); the higher, confirmed by its own trials, is kept")
    if f.get("busy") is None:  # the note as kept in the bandwidth details, before the load was known
        return text
    return text + (" (other processes were busy)" if f["busy"] else
                   ": no process here to show for it — a slow phase of the host (another tenant's memory traffic, "
                   "a clock cap)")


def _wide_step(f: Any) -> str:
    return (f"numpy matmul with OPENBLAS_CORETYPE={f['coretype']} (child process): "
            + (str(f["error"]) if f.get("error") else ", ".join(f"{d} {r / 1e9:.4g} GFLOP/s" for d, r in f["rates"])))


_ROOFS: dict[str, Callable[[Any], str]] = {
    "roofs.replaces-loaded": lambda f: (f"replaces the loaded calibration of {f['when']} (others kept "
                                        f"{f['others']:.1f} cores busy): {f['what']} {f['was'] / 1e9:.4g} -> "
                                        f"{f['now'] / 1e9:.4g} GFLOP/s, bandwidth {f['bw_was'] / 1e9:.4g} -> "
                                        f"{f['bw_now'] / 1e9:.4g} GB/s"),
    "roofs.lower-than-before": lambda f: (_against(f) + ": disturbed by what the load probe cannot see (other "
                                          "tenants' memory traffic, a clock cap); the cached roofs stay"),
    "roofs.higher-than-before": lambda f: f"{f['roof']}: {_against(f)}: that one was disturbed; this one replaces it",
    "roofs.unreliable": lambda f: f"{f['roof']} roof unreliable: {f['why']}",
    "roofs.speed-state": lambda f: (f"measured while the machine ran in a slow state: the drift guard's fixed "
                                    f"workload took {f['ratio']:.2f}× its fastest time in this calibration or "
                                    f"kernel ({f['ref'] * 1e3:.3g} ms against {f['fastest'] * 1e3:.3g} ms); not "
                                    "cached — recalibrate when the machine is fast again"),
    "roofs.trials-disagree": _disagree,
    "roofs.loaded": lambda f: (f"loaded: other processes kept {f['worst']:.1f} cores busy (before {_g(f['before'])}, "
                               f"during {_g(f['during'])}, after {_g(f['after'])}): a loaded machine can halve these "
                               "roofs"),
    "roofs.emulated-warning": lambda f: f"{f['dtype']}: {f['why']}; its roof is not a reason to use {f['dtype']} here",
    "roofs.emulated": lambda f: (f"emulated: this CPU has none of {'/'.join(f['flags'])} (/proc/cpuinfo), so "
                                 f"{f['dtype']} runs on float32 units"),
    "roofs.small-working-set": lambda f: (f"bandwidth working set is {f['ratio']:.1f}× the reported last-level cache "
                                          f"(wanted {f['wanted']}×, memory cap reached); on a VM the reported LLC is "
                                          "often the whole socket's, shared with other tenants"),
    "roofs.not-measured": lambda f: f"{f['dtype']}: not measured ({f['why']})",
    "roofs.sized-by-memory": _sized,
    "roofs.phases-moved": _phases,
    "roofs.no-fp8": lambda f: (f"needs torch.float8_e4m3fn, torch._scaled_mm and capability >= 8.9 (have "
                               f"{tuple(f['capability'])})"),
    "roofs.no-bf16": lambda f: "torch.cuda.is_bf16_supported() is False",
    "roofs.matmul-raised": lambda f: f"matmul raised {f['error']}: {f['message']}"[:200],
    "roofs.wide-fallback": lambda f: (f"numpy's OpenBLAS fell back to its '{f['arch']}' kernels (256-bit vectors): it "
                                      "does not know this CPU, whose flags have AVX-512"),
    "roofs.child-timeout": lambda f: f"the child process did not finish in {f['seconds']:.0f} s",
    "roofs.child-not-started": lambda f: f"could not start {f['python']}: {f['error']}",
    "roofs.child-sigill": lambda f: (f"this CPU lacks the instructions of OpenBLAS core type {f['coretype']!r}: the "
                                     "child process died of SIGILL (illegal instruction); its roof is not measured"),
    "roofs.child-failed": lambda f: f"child exited {f['code']}: {f['tail']}",
    "roofs.child-unreadable": lambda f: f"unreadable child output: {f['error']}",
    # progress steps of a calibration
    "roofs.step-unsupported": lambda f: (f"{f['dtype']} {f['lib']} matmul: unsupported" if f.get("lib")
                                         else f"{f['dtype']}: unsupported"),
    "roofs.step-matmul": lambda f: f"{f['dtype']} {f['lib']} matmul: {f['rate'] / 1e9:.4g} GFLOP/s",
    "roofs.step-wide": _wide_step,
    "roofs.step-bandwidth": lambda f: f"{f['method']}: {f['rate'] / 1e9:.4g} GB/s",
    "roofs.step-gpu-matmul": lambda f: f"{f['dtype']} cuBLAS matmul: {f['rate'] / 1e12:.4g} TFLOP/s",
}

# ---- how the work was counted (roofs/counting.py, roofs/kernels.py) --------------------------------------

BYTES_LABEL = ("algorithmic traffic: sum over aten ops of distinct input + output tensor bytes "
               "(a lower bound on DRAM traffic when the working set exceeds the cache)")
COUNTING = ("algorithmic bytes (STREAM convention): each array read once and written once per pass; "
            "write-allocate (read-for-ownership) traffic not counted; copy = 2 B/elt·size, fused add/triad "
            "= 3, numpy triad = 5 (two passes)")

_COUNTING: dict[str, Callable[[Any], str]] = {
    "counting.bytes": lambda f: f"bytes: {BYTES_LABEL}",
    "counting.flops": lambda f: "FLOPs: torch.utils.flop_counter.FlopCounterMode (multiply-add = 2 FLOPs)",
    "counting.formulas": lambda f: (f"+ {f['flops']:.4g} FLOPs from perfmagic formulas for ops FlopCounterMode counts "
                                    "as zero: " + ", ".join(f["ops"])),
    "counting.formula-failed": lambda f: f"formula failed for {f['op']}",
    "counting.stream": lambda f: COUNTING,
}

from .findings_core import WORDS as _CORE  # noqa: E402  (core's kinds: render/findings_core.py)

WORDS: dict[str, Callable[[Any], str]] = {**_ADVICE, **_ROOFLINE, **_ROOFS, **_COUNTING, **_CORE}

__all__ = ["BYTES_LABEL", "COUNTING", "WORDS"]
