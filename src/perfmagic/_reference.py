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
    return samples[len(samples) // 2]
