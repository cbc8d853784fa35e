"""Thread pools against the free cores: the oversubscription warning, and pools limited for a block.

A cell whose BLAS/OpenMP (threadpoolctl) or torch intra-op pool runs more threads than the cores other
processes left free makes its threads wait for each other: :func:`oversubscription` names it with its fix
(from live readings, or :func:`env_oversubscription` from what a run recorded), and :class:`thread_limits`
is the fix applied for a block (the honest A/B of :mod:`perfmagic.timing.flow`). threadpoolctl is
imported inside :class:`thread_limits`; torch only when the user's code already imported it.
"""

from __future__ import annotations

import sys
from typing import Any

from ..findings import Finding


def oversubscription(env: dict[str, Any], others_cores: float | None, own_cores: float | None,
                     usable_cores: int | None, active_threads: int | None = None) -> Finding | None:
    """The warning for thread oversubscription (a :class:`~perfmagic.findings.Finding`, worded by
    :mod:`perfmagic.render.findings_core`), or None.

    A cell whose BLAS/OpenMP (threadpoolctl) or torch intra-op pool runs more threads than the cores
    left free by other processes makes its threads wait for each other at every barrier: a 4 µs dot
    product can take milliseconds. Named when other processes kept at least half a core busy, the
    pool has at least 2 threads and more than the free cores, and the pool was really used: the cell
    ran on more than one core, or at least two of its threads each took CPU time (a fighting pool
    mostly waits: a 20,000-element ``np.dot`` beside two spinning neighbours used half a core and
    took 17 ms a call)."""
    if not usable_cores or others_cores is None or others_cores < 0.5:
        return None
    pools = [int(p.get("num_threads") or 0) for p in env.get("blas") or []]
    torch_threads = env.get("torch_threads") or 0
    threads = max(pools + [int(torch_threads)])
    free = max(usable_cores - others_cores, 1.0)
    used = (own_cores is not None and own_cores > 1.05) or (active_threads or 0) >= 2
    if threads < 2 or threads <= free + 0.25 or not used:
        return None
    n = max(1, int(free))
    what = ", ".join(x for x in (f"BLAS/OpenMP {max(pools)}" if pools and max(pools) else "",
                                 f"torch {torch_threads}" if torch_threads else "") if x)
    return Finding.of("core.oversubscription", what=what, free=free, usable=usable_cores, others=others_cores, n=n)


def env_oversubscription(env: dict[str, Any] | None) -> str | None:
    """:func:`oversubscription` from what a run recorded in its environment (its pools, the load of
    other processes, its own cores and the threads that took CPU), as its sentence."""
    env = env or {}
    found = oversubscription(env, env.get("others_cores"), env.get("own_cores"), env.get("usable_cores"),
                             env.get("active_threads"))
    return None if found is None else str(found)


class thread_limits:
    """Limit BLAS/OpenMP pools (threadpoolctl) and torch's intra-op pool to ``n`` threads for a block,
    and restore them after: the honest A/B while a neighbour holds cores."""

    def __init__(self, n: int) -> None:
        self.n = max(1, int(n))
        self._pools: Any = None
        self._torch: tuple[Any, int] | None = None

    def __enter__(self) -> "thread_limits":
        from threadpoolctl import threadpool_limits

        self._pools = threadpool_limits(limits=self.n)
        torch = sys.modules.get("torch")
        if torch is not None:
            self._torch = (torch, torch.get_num_threads())
            torch.set_num_threads(self.n)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._torch is not None:
            torch, old = self._torch
            torch.set_num_threads(old)
        if self._pools is not None:
            self._pools.restore_original_limits()


__all__ = ["env_oversubscription", "oversubscription", "thread_limits"]
