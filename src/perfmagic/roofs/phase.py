"""The host's memory phase: which bandwidth a cell ran at, against the phase its bandwidth roof was measured in.

On a shared VM host the memory bandwidth a process gets moves between phases that no process here shows:
on the 2-core test VM a STREAM triad on 256 MiB arrays reads about 35 GB/s for seconds to minutes, then
about 56–62 GB/s (2026-11-28, ``bench_roofline``), with no change in this machine's load. A bandwidth roof
measured in one phase and a cell timed in the other would place the cell at 60% or 170% of "its" roof.

:func:`memory_probe` is a short reading of the phase: the fastest of a few copies between two arrays larger
than the last-level cache (~50 ms, allocation and first touch included). The calibration reads it right
after each of its two bandwidth phases (``details["bandwidth"]["probes"]``, and ``probe_Bps`` for the phase
whose roof was kept); :func:`~perfmagic.roofs.roofline.roofline` reads it before and after a CPU cell's
timing. :func:`phase_of` compares them: both readings around the cell beyond :data:`PHASE_MOVED` of the
roof's, on the same side and agreeing with each other, say the cell ran in another phase, and the cell is
also placed against the roof of its own phase (the roof × the probes' ratio); readings on two sides say
the phase changed during the timing.
"""

from __future__ import annotations

import math
import time
from typing import Any

PHASE_MOVED = 0.25  # a probe this much above or below the roof's reads another memory phase
PROBES_AGREE = 0.20  # the two probes around a cell read one phase when within this of each other
PROBE_MIN_S = 0.02  # the copies of one probe last at least this long (and PROBE_MIN_CALLS copies)
PROBE_MIN_CALLS = 5
PROBE_ARRAY_MIN = 64 << 20  # bytes per array: at least this, and twice the last-level cache
PROBE_ARRAY_MAX = 256 << 20


def probe_array_bytes() -> int | None:
    """Bytes per probe array: twice the last-level cache, at least 64 MiB, at most 256 MiB and an eighth of
    the memory a new allocation can have now (a pod's limit included); None where that leaves under 16 MiB."""
    from ..core.container import available_memory
    from ..core.env import cache_sizes

    size = min(max(2 * int(cache_sizes()["llc_bytes"] or 0), PROBE_ARRAY_MIN), PROBE_ARRAY_MAX)
    avail, _bound = available_memory()
    if avail is not None:
        size = min(size, avail // 8)
    return int(size) if size >= (16 << 20) else None


def memory_probe(array_bytes: int | None = None) -> float | None:
    """Bytes/s of the fastest copy between two fresh float32 arrays of ``array_bytes`` each (default
    :func:`probe_array_bytes`), counted as STREAM counts a copy (read + write); None where the memory for
    it is not there or torch and numpy are both missing. The arrays are freed when it returns."""
    size = array_bytes if array_bytes is not None else probe_array_bytes()
    if not size:
        return None
    n = int(size) // 4
    try:
        import torch

        src, dst = torch.ones(n, dtype=torch.float32), torch.empty(n, dtype=torch.float32)

        def copy() -> None:
            dst.copy_(src)
    except ImportError:
        try:
            import numpy as np
        except ImportError:
            return None
        src, dst = np.ones(n, dtype=np.float32), np.empty(n, dtype=np.float32)

        def copy() -> None:
            np.copyto(dst, src)
    copy()  # first touch of the destination: its page faults are not a copy's time
    best, calls, end = math.inf, 0, time.perf_counter() + PROBE_MIN_S
    while calls < PROBE_MIN_CALLS or time.perf_counter() < end:
        t0 = time.perf_counter()
        copy()
        best = min(best, time.perf_counter() - t0)
        calls += 1
    return 8.0 * n / best if best > 0 else None


def probes_of(details: dict[str, Any] | None) -> tuple[float | None, list[float]]:
    """``(probe of the roof's phase, every probe of the calibration)`` from a ceilings' bandwidth details
    (``(None, [])`` for roofs calibrated before the probe existed)."""
    bw = (details or {}).get("bandwidth") or {}
    at = bw.get("probe_Bps") if isinstance(bw, dict) else None
    every = [float(p) for p in (bw.get("probes") or []) if isinstance(p, (int, float)) and p > 0] if isinstance(
        bw, dict) else []
    return (float(at) if isinstance(at, (int, float)) and at > 0 else None), every


def phase_of(around: tuple[float | None, float | None], roof_probe: float | None) -> dict[str, Any] | None:
    """The memory phase a cell ran in against its roof's: ``None`` where it cannot tell (a probe missing)
    or both readings are within :data:`PHASE_MOVED` of the roof's; else ``{"kind": "other" | "changed",
    "ratio": geometric mean of the two probes ÷ the roof's, "before", "after" (each ÷ the roof's)}``.
    ``"other"``: both beyond it on one side and within :data:`PROBES_AGREE` of each other (the cell ran in
    another phase all along); ``"changed"``: any other reading beyond it (the phase moved during the timing)."""
    a, b = around
    if not (roof_probe and a and b and roof_probe > 0 and a > 0 and b > 0):
        return None
    qa, qb = a / roof_probe, b / roof_probe
    away = [abs(math.log(q)) > math.log(1.0 + PHASE_MOVED) for q in (qa, qb)]
    if not any(away):
        return None
    one_side = (qa > 1) == (qb > 1)
    agree = min(a, b) >= (1.0 - PROBES_AGREE) * max(a, b)
    kind = "other" if all(away) and one_side and agree else "changed"
    return {"kind": kind, "ratio": math.sqrt(qa * qb), "before": qa, "after": qb}
