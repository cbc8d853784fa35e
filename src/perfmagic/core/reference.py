"""The machine's own speed, measured with a fixed tiny workload beside every run (the drift guard).

Runs compared minutes apart mix the code change with the machine's drift (frequency scaling, other
tenants, thermal state): on a shared 2-core machine the *same* code drifts 6–36% between invocations.
Every timing run therefore also times this fixed pure-Python workload for about 8 ms and stores the
median per call as ``env["reference_s"]``. When two runs are compared historically, the ratio of their
reference times says how much the machine itself changed speed; beyond the noise floor, the
comparison warns and says by how much.
"""

from __future__ import annotations

import time


_best_seen: list[float] = []  # the fastest reference time measured in this process


def _workload() -> int:
    acc = 0
    for i in range(400):
        acc += i * i & 0xFF
    return acc


def reference_time(duration: float = 0.008, calls_per_block: int = 20) -> float:
    """Median seconds per call of the fixed workload over about ``duration`` seconds."""
    clock = time.perf_counter
    samples: list[float] = []
    end = clock() + duration
    _workload()  # warm
    while clock() < end or len(samples) < 5:
        t0 = clock()
        for _ in range(calls_per_block):
            _workload()
        samples.append((clock() - t0) / calls_per_block)
    samples.sort()
    t = samples[len(samples) // 2]
    if not _best_seen or t < _best_seen[0]:
        _best_seen[:] = [t]
    return t


def slow_phase(t: float, threshold: float = 0.30) -> float | None:
    """How much slower than the best seen in this process the machine ran, if beyond ``threshold``.

    Shared machines have slow phases lasting seconds (a neighbour, a frequency drop) that a short
    measurement cannot average out; the result is then inflated, and this says by how much the
    machine itself was slower.
    """
    if not _best_seen or _best_seen[0] <= 0:
        return None
    excess = t / _best_seen[0] - 1
    return excess if excess > threshold else None
