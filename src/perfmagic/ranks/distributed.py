"""Rank-aware timing inside a job launched elsewhere (``torchrun``, a cluster scheduler).

``perfmagic.distributed_bench(step, setup=..., globals=...)`` called by every rank of a torch.distributed
job measures the step the way :func:`perfmagic.amdahl_ranks` does inside its own ranks
(:func:`perfmagic.ranks.worker.lockstep`: a barrier before every sample, the same sample count on
every rank, a profiled few steps for the time in collectives, an all-reduce link sweep), gathers every
rank's samples, and rank 0 writes **one ledger row per job** (magic ``"distributed"``): ``world_size``,
the job's step (slowest rank) ``median_s``, ``rank<i>_median_s`` per rank, the straggler ratio, the
comm share, the all-reduce bus bandwidth and the link roof; the raw per-rank samples go in the row's
samples. Read it back with ``perfmagic.ledger("distributed")`` (``$PERFMAGIC_LEDGER_DIR`` or the
``ledger=`` folder) and fit ``world_size`` against ``median_s`` with a scalability fit.

It is a wrapper, not a change to ``perfmagic.bench``: ``bench()`` adapts its sample count to each
process's own noise, and in a job whose step holds a collective, ranks that take different numbers of
samples deadlock. A lockstep plan must be agreed between the ranks, which only a distributed-aware
function can do.

The process group: used as it is when initialised; otherwise, when ``RANK``/``WORLD_SIZE`` are set (as
``torchrun`` sets them), initialised from the environment (NCCL with CUDA, else gloo) and destroyed at
exit; with neither, the call is a one-rank job (world size 1) and still records its row.
"""

from __future__ import annotations

import atexit
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import BadOptionError
from ..findings import Finding

MAGIC = "distributed"


def _gpus_per_rank(torch: Any) -> tuple[bool, str]:
    """Whether every local rank of this job has a GPU of its own, and the count behind the answer."""
    try:
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        gpus = 0
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")) or 1)
    local_rank = int(os.environ.get("LOCAL_RANK", "0") or 0)
    ok = gpus >= local_world and local_rank < gpus
    return ok, str(Finding.of("ranks.gpus", gpus=gpus, local=local_world))


_BACKEND_NOTE: list[Finding] = []  # why the default backend is what it is (read into the result's notes)


def _group(backend: str | None) -> tuple[Any, bool]:
    """(torch.distributed, whether this call initialised the group)."""
    import torch
    import torch.distributed as dist

    if not dist.is_available():
        raise BadOptionError("torch.distributed", "unavailable", "a torch build with distributed support")
    if dist.is_initialized():
        return dist, False
    store = None
    if "WORLD_SIZE" not in os.environ or "RANK" not in os.environ:  # one process, no launcher: a group of one
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1")
        import tempfile

        from .sweep import free_port
        from .worker import LOOPBACK_ENV

        os.environ["MASTER_PORT"] = str(free_port())
        for var in LOOPBACK_ENV:
            os.environ.setdefault(var, "lo")
        # a file rendezvous: a TCPStore's server would listen on every interface
        fd, path = tempfile.mkstemp(prefix="perfmagic-group-", suffix=".store")
        os.close(fd)
        os.unlink(path)
        store = dist.FileStore(path, 1)
    each, counted = _gpus_per_rank(torch)
    _BACKEND_NOTE.clear()
    if backend is None:
        backend = "nccl" if each and dist.is_nccl_available() else "gloo"
        if backend == "gloo" and torch.cuda.is_available():
            _BACKEND_NOTE.append(Finding.of("ranks.gloo-not-nccl", counted=counted))
    if backend == "nccl" and not each:
        raise BadOptionError("backend", backend, f"gloo here (NCCL needs one GPU per local rank; {counted})",
                             "use backend='gloo', or start at most as many ranks per machine as it has GPUs "
                             "(torchrun --nproc-per-node)")
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    if store is not None:
        dist.init_process_group(backend, store=store, rank=0, world_size=1)
    else:  # a launcher (torchrun) set the rendezvous up: its way
        dist.init_process_group(backend)
    atexit.register(_leave_group, dist)
    return dist, True


def _leave_group(dist: Any) -> None:
    """At exit, the group perfmagic started: every rank leaves together (a barrier, 10 s at most), then the
    group is destroyed. A rank that destroyed it while another still talked to it aborted the other in
    gloo's teardown ("terminate called without an active exception", a fresh-clone CI run)."""
    if not dist.is_initialized():
        return
    try:
        if dist.get_backend() == "gloo":
            from datetime import timedelta

            dist.monitored_barrier(timeout=timedelta(seconds=10))
        else:
            dist.barrier()
    except Exception:  # noqa: BLE001 - a peer already gone: leave anyway
        pass
    dist.destroy_process_group()


def distributed_bench(
    code: str | Callable[[], Any],
    setup: str = "",
    *,
    globals: Mapping[str, Any] | None = None,
    budget: float | None = None,
    label: str | None = None,
    ledger: str | os.PathLike[str] | None = None,
    record: bool = True,
    backend: str | None = None,
    link: bool = True,
    weak: bool = False,
) -> Any:
    """Time ``code`` (source or a no-argument callable) on every rank of the job; rank 0 records one row.

    Every rank must call it (it holds collectives). Returns the :class:`RanksResult` of this one world size on
    every rank; ``result.run_id`` on rank 0 is the ledger row's id (None elsewhere or with ``record=False``).
    ``ledger``: the ledger folder (default ``$PERFMAGIC_LEDGER_DIR``, else the working directory's).
    """
    import dataclasses

    import torch

    from ..core.cells import compile_cell
    from ..core.load import usable_cores
    from ..timing.bench import check_budget
    from .result import RankPoint, RanksResult, RankStats
    from .worker import lockstep

    check_budget(budget, "a positive number of seconds", "budget=1.0")
    if not isinstance(code, str) and not callable(code):
        raise BadOptionError("code", code, "the step as source code or a callable with no arguments")
    dist, created = _group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    be = dist.get_backend()
    device = torch.device("cuda", torch.cuda.current_device()) if be == "nccl" else None
    ns: dict[str, Any] = dict(globals) if globals is not None else {"__name__": "__perfmagic__"}
    ns.update(rank=rank, world_size=world, local_rank=int(os.environ.get("LOCAL_RANK", rank)),
              device=str(device) if device is not None else "cpu")
    if setup:
        exec(compile(setup, "<perfmagic-setup>", "exec"), ns)  # noqa: S102 - the user's setup
    if callable(code):
        fn = code

        def step() -> None:
            fn()
    else:
        run = compile_cell(code, ns, "<perfmagic-distributed>").run

        def step() -> None:
            run(1)
    t0 = time.perf_counter()
    mine, sweep = lockstep(step, device, be, world, float(budget) if budget is not None else 1.0, link=link)
    mine.update(rank=rank, pid=os.getpid(), threads=torch.get_num_threads())
    everyone: list[Any] = [None] * world
    dist.all_gather_object(everyone, mine)
    point = RankPoint(world=world, ranks=tuple(RankStats.from_gathered(d) for d in everyone),
                      link=tuple((int(b), float(bw)) for b, bw in sweep), wall_s=time.perf_counter() - t0,
                      threads=torch.get_num_threads())
    src = code if isinstance(code, str) else getattr(code, "__qualname__", repr(code))
    result = RanksResult(points=(point,), backend=be, start_method="external", weak=weak, code=src, setup=setup,
                         budget_per_point_s=float(budget) if budget is not None else 1.0, cores=usable_cores(),
                         device="cuda" if device is not None else "cpu", wall_s=point.wall_s,
                         notes=(Finding.of("ranks.group", created=created, world=world),)
                         + (tuple(_BACKEND_NOTE) if created else ()))
    run_id = None
    if record and rank == 0:
        run_id = _record(result, point, label, ledger)
    return dataclasses.replace(result, run_id=run_id)


def job_metrics(point: Any) -> dict[str, Any]:
    """The ledger columns of one job: world size, the job's step and every rank's median, the evidence."""
    out: dict[str, Any] = {"world_size": point.world, "median_s": point.median, "ci_low_s": point.ci[0],
                           "ci_high_s": point.ci[1], "steps_per_s": 1.0 / point.median if point.median else None,
                           "straggler_ratio": point.straggler_ratio, "straggler_rank": point.straggler,
                           "comm_share": point.comm_share, "busbw": point.busbw, "link_roof": point.link_roof}
    for r in point.ranks:
        out[f"rank{r.rank}_median_s"] = r.median
    return out


def _record(result: Any, point: Any, label: str | None, ledger: Any) -> int | None:
    import sys

    from ..storage.ledger import Ledger

    led = Ledger(ledger) if ledger is not None else Ledger()
    ref = led.record(magic=MAGIC, label=label or result.code.strip().splitlines()[0][:40] if result.code.strip()
                     else label, code=result.code, options={"backend": result.backend, "setup": result.setup},
                     metrics=job_metrics(point), samples=result.samples(), env={}, primary_metric="median_s",
                     payload=result.record_payload(),  # perfmagic.run(N) rebuilds the RanksResult
                     session=str(Finding.of("ranks.session", pid=os.getpid())))
    if not ref.saved:
        print(f"perfmagic: {ref.error}", file=sys.stderr)
    return ref.id


__all__ = ["distributed_bench", "job_metrics", "MAGIC"]
