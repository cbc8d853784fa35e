"""The host's memory phase: which bandwidth a cell ran at, against the bandwidth roof it is placed under.

On a shared VM host the memory bandwidth a process gets moves between phases that no process here shows:
on the 2-core test VM a STREAM triad reads about 33–36 GB/s most of the time and 50–58 GB/s in episodes of
one to tens of seconds, every array of the process at once, fresh or old (four sets interleaved over
240 s, 2026-11-28). A roof measured in a fast episode and a cell timed in the slow phase would place the cell
at 60% of "its" roof; the other way round, above it.

:func:`memory_probe` is a short reading of the phase: the fastest of a few fused triads (the roof's own
kernel, counted as the roof counts it) over three arrays twice the last-level cache (~0.1 s, allocation and
first touch included); in the 240 s above it read what the long-lived arrays read in the same moment.
:func:`~perfmagic.roofs.roofline.roofline` reads it before and after a CPU cell's timing. :func:`phase_of`
compares the two readings with the bandwidth roof: both beyond :data:`PHASE_MOVED` of it, on one side and
agreeing with each other, say the cell ran in another phase all along, and the cell is also placed against
the roof of its own phase (what the probes read); readings on two sides say the phase changed during the
timing.
"""

from __future__ import annotations

import math
from typing import Any

PHASE_MOVED = 0.25  # a probe this much above or below the roof reads another memory phase
PHASE_MAX = 3.0  # a probe this many times above or below the roof is not a phase: the roof is of another machine state
PROBES_AGREE = 0.20  # the two probes around a cell read one phase when within this of each other
PROBE_MIN_S = 0.02  # the triads of one probe last at least this long (and PROBE_MIN_CALLS triads)
PROBE_MIN_CALLS = 5
PROBE_ARRAY_MIN = 64 << 20  # bytes per array: at least this, and twice the last-level cache
PROBE_ARRAY_MAX = 128 << 20


def probe_array_bytes() -> int | None:
    """Bytes per probe array: twice the last-level cache, at least 64 MiB, at most 128 MiB and a twelfth of
    the memory a new allocation can have now (three arrays: a quarter of it; a pod's limit included); None
    where that leaves under 16 MiB."""
    from ..core.container import available_memory
    from ..core.env import cache_sizes

    size = min(max(2 * int(cache_sizes()["llc_bytes"] or 0), PROBE_ARRAY_MIN), PROBE_ARRAY_MAX)
    avail, _bound = available_memory()
    if avail is not None:
        size = min(size, avail // 12)
    return int(size) if size >= (16 << 20) else None


def memory_probe(array_bytes: int | None = None) -> float | None:
    """Bytes/s of the fastest fused triad ``z = x + 3 y`` over three fresh float32 arrays of ``array_bytes``
    each (default :func:`probe_array_bytes`), counted as the bandwidth roof counts it (12 B per element: two
    reads, one write); None where the memory for it is not there or torch and numpy are both missing. The
    arrays are freed when it returns."""
    size = array_bytes if array_bytes is not None else probe_array_bytes()
    if not size:
        return None
    n = int(size) // 4
    try:
        import torch

        x, y, z = torch.ones(n, dtype=torch.float32), torch.ones(n, dtype=torch.float32), torch.empty(n, dtype=torch.float32)

        def triad() -> None:
            torch.add(x, y, alpha=3.0, out=z)
    except ImportError:
        try:
            import numpy as np
        except ImportError:
            return None
        x, y, z = np.ones(n, dtype=np.float32), np.ones(n, dtype=np.float32), np.empty(n, dtype=np.float32)

        def triad() -> None:
            np.add(x, y, out=z)
    from .kernels import _wall, trial

    triad()  # first touch of the output: its page faults are not a triad's time
    best, _calls = trial(triad, _wall, min_s=PROBE_MIN_S, min_calls=PROBE_MIN_CALLS)  # the calibration's trial
    return 12.0 * n / best if 0 < best < math.inf else None


def phase_of(around: tuple[float | None, float | None], roof_Bps: float | None,
             cell_Bps: float | None = None) -> dict[str, Any] | None:
    """The memory phase a cell ran in against its bandwidth roof: ``None`` where it cannot tell (a probe
    missing, or a reading :data:`PHASE_MAX` times away from the roof: no phase of the host moves that far, the
    roof and the probe are of different machines or settings) or both readings are within :data:`PHASE_MOVED`
    of the roof; else ``{"kind": "other" | "changed",
    "ratio": geometric mean of the two probes ÷ the roof, "before", "after" (each ÷ the roof)}``.
    ``"other"``: both beyond it on one side and within :data:`PROBES_AGREE` of each other (the cell ran in
    another phase all along); ``"changed"``: any other reading beyond it (the phase moved during the timing),
    or ``cell_Bps`` (a memory-bound cell's own rate) more than :data:`PHASE_MOVED` above the phase its probes
    read (it moved between them and the timing)."""
    a, b = around
    if not (roof_Bps and a and b and roof_Bps > 0 and a > 0 and b > 0):
        return None
    qa, qb = a / roof_Bps, b / roof_Bps
    if max(qa, qb, 1 / qa, 1 / qb) > PHASE_MAX:
        return None
    away = [abs(math.log(q)) > math.log(1.0 + PHASE_MOVED) for q in (qa, qb)]
    if not any(away):
        return None
    one_side = (qa > 1) == (qb > 1)
    agree = min(a, b) >= (1.0 - PROBES_AGREE) * max(a, b)
    ratio = math.sqrt(qa * qb)
    faster_cell = cell_Bps is not None and cell_Bps > (1.0 + PHASE_MOVED) * roof_Bps * ratio
    kind = "other" if all(away) and one_side and agree and not faster_cell else "changed"
    return {"kind": kind, "ratio": ratio, "before": qa, "after": qb}
