"""The sentences of core's :class:`~perfmagic.findings.Finding` kinds (``core.*``): the doubts every
result's ``!`` lines carry (thread oversubscription, others' load, GPU clocks: :mod:`perfmagic.core.env`,
:mod:`perfmagic.core.threads`) and the measured subject's notes (:mod:`perfmagic.core.subject`).

:mod:`perfmagic.render.findings_roofs` merges :data:`WORDS` into the table of
:mod:`perfmagic.render.findings`. The text is the one core wrote before the words moved here (the warning
ranking of :mod:`perfmagic.render.warnings` reads it). Imports no analysis module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _oversubscription(f: Any) -> str:
    n = f["n"]
    return (f"thread oversubscription: the cell's thread pools ({f['what']} threads) exceed the ~{f['free']:.1f} of "
            f"{f['usable']} cores other processes left free ({f['others']:.1f} busy): its threads wait for "
            f"each other. Fix: threadpoolctl.threadpool_limits({n}) / torch.set_num_threads({n}), or stop the "
            f"neighbour; judge a change with %%gpubench --vs under the same limits")


def _others_load(f: Any) -> str:
    of = f" of {f['usable']} usable cores" if f.get("usable") else " cores"
    who = "other processes in this container" if f.get("container") else "other processes"
    return f"{who} used {f['others']:.1f}{of} during the measurement: results may be slow and noisy"


WORDS: dict[str, Callable[[Any], str]] = {
    "core.oversubscription": _oversubscription,
    "core.others-load": _others_load,
    "core.gpu-throttled": lambda f: f"GPU clocks throttled (reasons: {', '.join(f['reasons'])})",
    "core.sm-clock": lambda f: f"GPU SM clock at {f['mhz']} of {f['max_mhz']} MHz",
    "core.exec-mode": lambda f: ("the cell cannot run inside a function (e.g. 'import *'): timed through exec, which "
                                 "adds ~1 µs per call"),
    "core.mixed-cell": lambda f: ("a mixed cell: it ran torch ops on the CPU and on CUDA; the time is the wall time "
                                  "until the device finished, the memory the device's"),
    "core.flushed": lambda f: f"cache flushed before every sample ({f['mib']:.0f} MiB written, not timed)",
    "core.kernels-pending": lambda f: "it left kernels running on the CUDA stream",
    "memory.cuda-no-stacks": lambda f: ("the CUDA allocator history kept no Python stack for the blocks alive at "
                                        "the peak (this torch build): CUDA allocation sites are not attributed"),
}

__all__ = ["WORDS"]
