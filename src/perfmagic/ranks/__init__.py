"""The rank sweep: one training step measured in torch.distributed groups of several world sizes.

* :mod:`.sweep` — :func:`amdahl_ranks` (``%%amdahl --ranks``): a fresh process group per world size
  (torch.multiprocessing: fork on CPU, spawn for CUDA), teardown, the failing rank's traceback, Ctrl-C, and
  the Amdahl/USL fit over world sizes (:func:`perfmagic.scaling.sweep.analyse`);
* :mod:`.worker` — what runs inside each rank: the process group, lockstep samples after a barrier, the
  time in collectives (torch.profiler), the all-reduce link sweep, the gather to rank 0;
* :mod:`.distributed` — :func:`distributed_bench`: the same lockstep measurement inside a job launched
  elsewhere (``torchrun``), one ledger row per job from rank 0;
* :mod:`.result` — :class:`RankStats`, :class:`RankPoint`, :class:`RanksResult` (drawn by
  :mod:`perfmagic.render.ranks`).

The names are imported on first use, so that a rank (a spawned process importing :mod:`.worker`) and
``import perfmagic`` load nothing else; torch is imported only inside the functions that run.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RankFailed", "RankPoint", "RankStats", "RanksResult", "amdahl_ranks", "distributed_bench"]


def __getattr__(name: str) -> Any:
    if name in ("amdahl_ranks", "RankFailed"):
        from . import sweep as module
    elif name == "distributed_bench":
        from . import distributed as module
    elif name in ("RankPoint", "RanksResult", "RankStats"):
        from . import result as module
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(module, name)
