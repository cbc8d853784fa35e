"""The sentence of every :class:`~perfmagic.findings.Finding` kind: the notes, warnings and reasons that the
engines return as data (a kind and its numbers), worded once, here.

:func:`words` turns a finding into its sentence (``str(finding)`` calls it); a note stored as text by an
older perfmagic is returned as it is. A kind with no sentence here is shown as its kind and values, so a
finding is never lost, only plainly worded. Imports no analysis module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# ---- fits of the scaling laws (scaling/sweep.py, scaling/scalability.py, scaling/models.py) ------------

_SYMBOL = {"S": "S", "sigma": "σ", "kappa": "κ"}


def short_num(x: float | None) -> str:
    """A fitted number in a sentence: 3 significant digits, whole above 1000, ``n/a`` and ``∞`` spelled."""
    if x is None or x != x:
        return "n/a"
    if x in (float("inf"), float("-inf")):
        return "∞"
    if 1e3 <= abs(x) < 1e7:
        return f"{x:.0f}"
    return f"{x:.3g}" if abs(x) >= 1e-3 or x == 0 else f"{x:.2e}"


def _no_dof(f: Any) -> str:
    tail = " (the speedup at N = 1 is fitted too); measure more worker counts" if f.get("sweep") else ""
    return f"{f['n']} points leave no degrees of freedom for its {f['p']} parameters{tail}"


def _superlinear_fit(f: Any) -> str:
    if f.get("sweep"):
        return (f"{f['what']} sits at its bound 0 because the speedups exceed the ideal (super-linear: caches, or "
                "a slow baseline), which no serial fraction explains")
    return ("it sits at σ = S = 0 because throughput per unit of load rises (super-linear), which no serial "
            "fraction explains")


_FITS: dict[str, Callable[[Any], str]] = {
    "fit.no-dof": _no_dof,
    "fit.at-bound": lambda f: (f"{_SYMBOL.get(f['param'], f['param'])} = {f['value']:.3g} sits at its bound: the "
                               "model cannot describe these points"),
    "fit.super-linear": _superlinear_fit,
    "fit.misses": lambda f: f"it misses the measured speedups by {f['rms']:.0%} (RMS): the model does not describe them",
    "fit.low-r2": lambda f: f"it explains only {max(f['r2'], 0):.0%} of the variation in throughput (R²)",
    "fit.not-identifiable": lambda f: "the parameters are not identifiable from these loads: no standard errors",
    "fit.no-stderr": lambda f: f"{f['n']} points leave no degrees of freedom for {f['p']} parameters: no standard errors",
    "model.few-points": lambda f: (f"only {f['n']} {f.get('unit', 'worker counts')}: the choice between Amdahl and "
                                   f"USL is weak (measure at least {f['need']})"),
    "model.by-aic": lambda f: "too few points for AICc: compared by AIC",
    "model.peak-far": lambda f: (f"USL fits a little better, but its peak N* ≈ {f['peak']:.3g} lies far beyond the "
                                 f"largest N measured ({f['max_n']:g}): over this range the models agree, so the "
                                 "simpler Amdahl is kept"),
    "scalability.no-usl": lambda f: (f"{f['k']} distinct loads: the USL (3 parameters) is not fitted; measure at "
                                     f"≥ {f['need']}"),
    "scalability.ceiling": lambda f: (f"Amdahl's ceiling X(1)/S ≈ {short_num(f['ceiling'])} holds only if no coherency cost "
                                      f"appears beyond the {f['load_name']} measured"),
}

# ---- a scaling sweep (scaling/sweep.py analyse) ----------------------------------------------------------

KF_RISE_NOTE = "the serial fraction grows with N: overhead or oversubscription, not serial code"


def _load(f: Any) -> str:
    if f.get("waiting_cores") is not None:
        why = (f"the workers mostly waited (this process kept {f['waiting_cores']:.2f} cores busy), so the load did "
               "not cap their speedup, but it adds noise")
    elif f.get("caps"):
        why = "at most one core was left free, so no parallel speedup could show, whatever the code"
    else:
        why = "the speedups at high N are pessimistic"
    return (f"other processes kept {f['others']:.1f} of {f['cores']} cores busy during the sweep: {why}; rerun on a "
            "quiet machine")


def thread_evidence(f: Any) -> str:
    """What the Python threads did (a sweep's gilprobe evidence) in one line."""
    parts = [f"{f['samples']} samples"]
    if f.get("held") is not None:
        parts.append(f"the GIL held by another thread at {f['held']:.0%} of the sampler's wake-ups "
                     f"(median wait {f.get('wait_ms') or 0.0:.2f} ms)")
    if f.get("native_site"):
        parts.append(f"the threads mostly on a native call in {f['native_site']}")
    return f"{f['working']} Python thread(s) worked; " + ", ".join(parts)


def _evidence(f: Any) -> str:
    own = f.get("own_cores")
    seen = (f"evidence at N ≥ 2: the process kept {own:.2f} cores busy" if own is not None
            else "evidence at N ≥ 2: busy cores not measured")
    seen += f"; {thread_evidence(f)}" if f.get("samples") is not None else "; no samples"
    if f.get("others") is not None:
        seen += f"; other processes kept {f['others']:.2f} cores busy"
    return seen


def _native(f: Any) -> str:
    why = ("more torch/BLAS threads did not help: the ops are too small to split, or the cell does not use those "
           "pools" if f.get("threads") else
           "the work inside those calls is serial (a lock, a single-threaded library) or too small to split")
    return f"the threads spent their time where the GIL is released (native kernels, I/O, waits): {why}"


_SWEEP: dict[str, Callable[[Any], str]] = {
    "scaling.load": _load,
    "scaling.point-failed": lambda f: f"N = {f['n']} failed ({f['error']}); the other worker counts are kept",
    "scaling.over-cores": lambda f: (f"worker counts {', '.join(map(str, f['over']))} exceed the {f['cores']} usable "
                                     "cores: CPU-bound workers beyond that oversubscribe and can only slow down"),
    "scaling.super-linear": lambda f: (f"the speedup at N = {f['n']} ({f['speedup']:.2f}×) is beyond the ideal "
                                       f"{f['ideal']:g}×: the baseline ran slow (other processes' load, thread "
                                       "oversubscription) or the data fit in cache only when split; rerun on a "
                                       "quiet machine before trusting it"),
    "scaling.gil-too": lambda f: ("the samples also show Python threads holding the GIL: on a quiet machine they "
                                  "would likely serialize on it too"),
    "scaling.gil": lambda f: ("threads serialize on the GIL: Python-bound work gets no speedup from threads "
                              f"(at most {f['best']:.2f}× at N ≥ 2 while the process kept only about one core busy); "
                              "use processes (ProcessPoolExecutor, multiprocessing) or code that releases the GIL "
                              "(NumPy, torch, native code)"),
    "scaling.speed-changed": lambda f: (f"the {f['best']:.2f}× measured at N ≥ 2 cannot come from the threads (the "
                                        "busy cores stayed at one): the machine changed speed between the points; "
                                        "rerun on a quiet machine for clean numbers"),
    "scaling.native": _native,
    "scaling.evidence": _evidence,
    "scaling.few-counts": lambda f: (f"{f['k']} worker counts: a model with 1–2 parameters fitted to {f['k']} points "
                                     f"says nothing, so none is fitted; measure at ≥ 3 counts, e.g. {f['eg']}"),
    "scaling.kf-rise": lambda f: KF_RISE_NOTE,
    "scaling.slower": lambda f: ("some worker counts are slower than the baseline: parallel overhead exceeds the "
                                 "work split"),
}

# ---- Little's law (scaling/littles.py workers_for) -------------------------------------------------------

_LITTLES: dict[str, Callable[[Any], str]] = {
    "littles.capped": lambda f: (f"the target needs {f['need']} CPU-bound workers but this machine has {f['free']:.1f} "
                                 f"of {f['usable']} cores free: capped at {f['cap']}; the reachable throughput is "
                                 f"about {f['reachable']:.4g} tasks/s — shrink the per-task latency (profile it) or "
                                 "add machines"),
    "littles.io-bound": lambda f: ("I/O-bound: workers wait rather than compute, so more than the free cores is "
                                   "fine; the limit is what they wait on (a pool of 5 connections caps any number of "
                                   "workers at 5 in flight)"),
}

_WORDS: dict[str, Callable[[Any], str]] = {**_FITS, **_SWEEP, **_LITTLES}

# ---- timing and storage kinds: written in render/findings_timing.py -------------------------------------
from .findings_timing import WORDS as _TIMING_WORDS  # noqa: E402

_WORDS.update(_TIMING_WORDS)

# ---- the profilers' kinds (flame.*, memory.*, lineprof.*): written in render/findings_profile.py ---------
from .findings_profile import WORDS as _PROFILE_WORDS  # noqa: E402

_WORDS.update(_PROFILE_WORDS)

# ---- estimate and rank-sweep kinds: written in render/findings_estimate.py -------------------------------
from .findings_estimate import WORDS as _ESTIMATE_WORDS  # noqa: E402

_WORDS.update(_ESTIMATE_WORDS)

# ---- roofline and calibration kinds, and core's: written in render/findings_roofs.py, findings_core.py ----
from .findings_roofs import WORDS as _ROOFS_WORDS  # noqa: E402

_WORDS.update(_ROOFS_WORDS)

# ---- the DataLoader check's notes (dataloader.*): written in render/dataloader_audit.py ------------------
from .dataloader_audit import WORDS as _DATALOADER_WORDS  # noqa: E402

_WORDS.update(_DATALOADER_WORDS)

# ---- what %perf next read in the evidence (advisor.*): written in render/advisor_words.py ----------------
from .advisor_words import WORDS as _ADVISOR_WORDS  # noqa: E402

_WORDS.update(_ADVISOR_WORDS)


def words(item: Any) -> str:
    """The sentence of a finding; text (a note of an older row) as it is."""
    if isinstance(item, str):
        return item
    say = _WORDS.get(getattr(item, "kind", ""))
    if say is None:
        vals = ", ".join(f"{k}={v}" for k, v in getattr(item, "values", ()))
        return f"{getattr(item, 'kind', item)}" + (f" ({vals})" if vals else "")
    return say(item)


__all__ = ["KF_RISE_NOTE", "short_num", "thread_evidence", "words"]
