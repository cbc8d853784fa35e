"""The sentences of core's :class:`~perfmagic.findings.Finding` kinds (``core.*``): the doubts every
result's ``!`` lines carry (thread oversubscription, others' load, GPU clocks: :mod:`perfmagic.core.env`,
:mod:`perfmagic.core.threads`), the measured subject's notes (:mod:`perfmagic.core.subject`), and the reasons
core gives as text: which device a cell's work ran on (:mod:`perfmagic.core.devicework`), why a sync backend
was chosen (:mod:`perfmagic.core.sync`) and what bounds the memory available (:mod:`perfmagic.core.container`).

:mod:`perfmagic.render.findings_roofs` merges :data:`WORDS` into the table of
:mod:`perfmagic.render.findings`. The text is the one core wrote before the words moved here (the warning
ranking of :mod:`perfmagic.render.warnings` reads it). Imports no analysis module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .text import fmt_bytes


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


_PENDING = "it left kernels running on the CUDA stream"
_NOT_USED = " (CUDA is initialised in this process, but this cell did not use it)"
_RETURNED = {"jax": "a JAX array", "cupy": "a CuPy array", "cuda": "a CUDA tensor", "mps": "an MPS tensor"}


def _on_cuda(f: Any) -> str:
    """The evidence that a cell's work ran on CUDA (``DeviceUse.why``), in the order it is read."""
    seen = []
    if f.get("ops") is not None:
        seen.append(f"its torch ops used CUDA tensors (cuda:{f['ops']})")
    if f.get("returns"):
        seen.append("it returns a CUDA tensor")
    if f.get("initialised"):
        seen.append("it initialised CUDA")
    if f.get("allocations"):
        seen.append(f"it made {f['allocations']} CUDA allocation(s)")
    if f.get("pending"):
        seen.append(_PENDING)
    return ("the cell's work ran on CUDA: " + "; ".join(seen)
            + ("; it also ran torch ops on the CPU" if f.get("cpu_ops") else ""))


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
    "core.kernels-pending": lambda f: _PENDING,
    "core.on-cuda": _on_cuda,
    "core.cpu-ops-only": lambda f: ("its torch ops ran on CPU tensors only"
                                    + (_NOT_USED if f.get("cuda_initialised") else "")),
    "core.no-cuda-work": lambda f: "no CUDA work seen in this cell" + _NOT_USED,
    "core.returns-array": lambda f: f"the cell returns {_RETURNED[f['array']]}",
    "core.timed-on-cpu": lambda f: f"timed on the CPU: {f['why']}",
    "core.container-memory": lambda f: (f"memory the container allows (limit {fmt_bytes(f['limit'])}, "
                                        f"{fmt_bytes(f['used'])} used)"),
    "memory.cuda-no-stacks": lambda f: ("the CUDA allocator history kept no Python stack for the blocks alive at "
                                        "the peak (this torch build): CUDA allocation sites are not attributed"),
}

__all__ = ["WORDS"]
