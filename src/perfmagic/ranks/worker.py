"""What runs inside each rank of a :func:`perfmagic.ranks.sweep.amdahl_ranks` sweep.

One process per rank, started by ``torch.multiprocessing.start_processes``; in each:

1. **Process group.** Rendezvous through a ``FileStore`` in the sweep's temporary folder (a TCPStore's
   server would listen on every interface); gloo and NCCL bound to loopback (``GLOO_SOCKET_IFNAME`` /
   ``NCCL_SOCKET_IFNAME`` = ``lo`` unless set); ``MASTER_ADDR=127.0.0.1``, ``RANK``/``WORLD_SIZE``/
   ``LOCAL_RANK`` set; ``torch.set_num_threads(threads)`` (the parent gives 1 when forked, ``max(1, cores // world)`` when spawned);
   for NCCL ``torch.cuda.set_device(local_rank)``; then ``init_process_group``.
2. **The user's names.** The namespace given (the notebook's, inherited by fork; its picklable part under
   spawn) plus ``rank``, ``world_size``, ``local_rank`` and ``device``; the setup source runs in it once,
   then the cell is compiled once (:func:`perfmagic.core.cells.compile_cell`, the user's line numbers kept).
3. **Lockstep timing.** Every rank must run the same number of steps (a collective inside the step
   waits for all), so the plan is agreed, not adaptive per rank: a cold step, warmup steps (5; 2 when the
   cold step took over 50 ms), then the sample count that fits the budget at the slowest rank's warm
   step time (an all-reduce MAX), within [min_samples, max_samples]. Each sample: ``dist.barrier()``,
   device sync, clock, the step, device sync, clock. A rank's sample is the time *it* took from the
   common start; the job's step is the slowest rank's.
4. **Where the time went.** A few more steps under ``torch.profiler`` (CPU activity; each step inside
   ``record_function("perfmagic::step")``): the union of the intervals of the backend's collective
   events (``gloo:*``/``nccl:*``) inside each step is that step's time in collectives (waits for the
   other ranks included); step minus that is the rank's *busy* time, whose slowest/median is the
   straggler ratio. All-reduce events give the bytes reduced per step (elements × dtype size).
5. **Link roof.** For world ≥ 2, a short all-reduce sweep (4 KiB up to 16 MiB, or until one call
   takes 0.1 s): bus bandwidth as nccl-tests define it, ``busbw = bytes / t × 2(n−1)/n``; the best
   is the roof the step's own all-reduce bandwidth is held against.
6. **Gather.** ``gather_object`` to rank 0, which writes one JSON file for the parent; then
   ``destroy_process_group`` (also after an exception: the exception propagates, torch writes its
   traceback for the parent).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

WARMUP_STEPS = 5
WARMUP_STEPS_SLOW = 2
SLOW_STEP_S = 0.05
PROFILED_STEPS = 5
SETTLE_S = 0.005  # after the profiled steps, before the profiler stops: collectives' events closed (_profile_steps)
LINK_SIZES = tuple(2 ** k for k in range(12, 25, 2))  # bytes: 4 KiB ... 16 MiB
LINK_REPS = 5
LINK_MAX_CALL_S = 0.1
_DTYPE_BYTES = {"float": 4, "float32": 4, "double": 8, "float64": 8, "c10::Half": 2, "half": 2,
                "c10::BFloat16": 2, "bfloat16": 2, "long int": 8, "int": 4, "signed char": 1,
                "unsigned char": 1, "bool": 1}


@dataclass
class RankSpec:
    """What one world size's ranks need (picklable under spawn except ``namespace``'s unpicklable values,
    which the parent has already dropped or refused)."""

    world: int
    backend: str
    port: int
    code: Any                      # cell source (str) or a callable taking no arguments
    setup: str
    namespace: dict[str, Any]
    threads: int
    budget_s: float
    out_path: str
    min_samples: int = 10
    max_samples: int = 200
    filename: str = "<perfmagic-ranks>"
    link: bool = True
    init_timeout_s: float = 60.0
    env: dict[str, str] = field(default_factory=dict)


# gloo's and NCCL's sockets bind to the interface these name: the loopback one, so no rank listens on
# an interface other machines can reach
LOOPBACK_ENV = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")


def _sync(device: Any) -> None:
    import torch

    if device is not None and getattr(device, "type", "cpu") == "cuda":
        torch.cuda.synchronize(device)


def _agree_max(value: float, device: Any) -> float:
    import torch
    import torch.distributed as dist

    t = torch.tensor([float(value)], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def _union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, -math.inf
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def _on_device(e: Any) -> bool:
    """A profiler event on the device timeline (a CUDA kernel), not a host call."""
    return str(getattr(e, "device_type", "")).upper().endswith("CUDA")


def _is_comm(name: str, backend: str) -> bool:
    return name.startswith(("gloo:", "nccl:", "ucc:", "mpi:")) or (name.startswith("record_param_comms")
                                                                    and backend == "nccl")


@contextmanager
def quiet_stderr() -> Iterator[None]:
    """File descriptor 2 to /dev/null for the block: torch.profiler (kineto) writes ``USDT: ... profiler_start``
    and ``profiler_stop`` lines there at each start and stop, which a notebook shows in the cell."""
    import sys

    try:
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - a closed or replaced stream: nothing to flush
        pass
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def _profile_steps(step: Any, n: int, device: Any, backend: str) -> dict[str, Any]:
    """n steps under torch.profiler: per step its duration, time in collectives, busy time, bytes reduced."""
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, record_function

    # NCCL collectives return to the host once enqueued; the wait for peers happens in the kernel on the
    # device, so on GPUs the collectives' time is read from the CUDA timeline (their NCCL kernels)
    on_gpu = backend == "nccl" and str(getattr(device, "type", device) or "").startswith("cuda")
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    prof = profile(activities=acts, record_shapes=True)
    with quiet_stderr():
        prof.start()
    try:
        for _ in range(n):
            dist.barrier()
            _sync(device)
            with record_function("perfmagic::step"):
                step()
                _sync(device)
        # gloo runs a collective on its own worker thread, which closes the collective's profiler event just
        # after it has released the waiting step: stopped at once, the profiler could miss the last step's
        # all-reduce (0 bytes in one step of one rank, 2 runs on a 16-core machine with 12 test processes)
        dist.barrier()
        time.sleep(SETTLE_S)
    finally:
        with quiet_stderr():
            prof.stop()
    events = list(prof.events())
    steps = sorted((e.time_range.start, e.time_range.end) for e in events if e.name == "perfmagic::step")
    # every collective that starts inside a step counts, the step's own barriers too; perfmagic's barrier
    # before each step starts before the step's interval and is not counted
    comm = [e for e in events if _is_comm(e.name, backend) and not _on_device(e)]
    timed = [e for e in events if _on_device(e) and e.name.lower().startswith("nccl")] if on_gpu else comm
    out: dict[str, list[float]] = {"step_s": [], "comm_s": [], "busy_s": [], "allreduce_bytes": [],
                                   "allreduce_s": []}
    for a, b in steps:
        inside = [e for e in comm if a <= e.time_range.start < b]
        kern = [e for e in timed if a <= e.time_range.start < b] if on_gpu else inside
        spans = [(e.time_range.start, min(e.time_range.end, b)) for e in kern]
        c = _union(spans) / 1e6
        d = (b - a) / 1e6
        red = [e for e in inside if "all_reduce" in e.name or "allreduce" in e.name]
        nbytes = 0.0
        for e in red:
            shapes = e.input_shapes or []
            dts = getattr(e, "input_dtypes", None) or []
            for i, s in enumerate(shapes):
                if s:
                    size = _DTYPE_BYTES.get(str(dts[i]) if i < len(dts) else "float", 4)
                    nbytes += math.prod(s) * size
        out["step_s"].append(d)
        out["comm_s"].append(min(c, d))
        out["busy_s"].append(max(d - c, 0.0))
        out["allreduce_bytes"].append(nbytes)
        red_t = [e for e in kern if "allreduce" in e.name.lower().replace("_", "")] if on_gpu else red
        out["allreduce_s"].append(_union([(e.time_range.start, min(e.time_range.end, b)) for e in red_t]) / 1e6)
    return out


def _link_sweep(world: int, device: Any) -> list[tuple[int, float]]:
    """(bytes, busbw B/s) for all-reduces of growing float32 tensors; stops when a call passes 0.1 s."""
    import torch
    import torch.distributed as dist

    out: list[tuple[int, float]] = []
    for nbytes in LINK_SIZES:
        t = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
        dist.all_reduce(t)
        times = []
        for _ in range(LINK_REPS):
            dist.barrier()
            _sync(device)
            t0 = time.perf_counter()
            dist.all_reduce(t)
            _sync(device)
            times.append(time.perf_counter() - t0)
        slow = _agree_max(sorted(times)[len(times) // 2], device)
        out.append((nbytes, nbytes / slow * 2 * (world - 1) / world))
        if slow > LINK_MAX_CALL_S:
            break
    return out


def lockstep(step: Any, device: Any, backend: str, world: int, budget_s: float, min_samples: int = 10,
             max_samples: int = 200, *, link: bool = True) -> tuple[dict[str, Any], list[tuple[int, float]]]:
    """This rank's measurement of ``step`` (steps 3–5 of the module docstring), every rank in lockstep.

    Returns ``(mine, link)``: this rank's samples, cold step, busy cores and profiled steps; and the
    all-reduce sweep (empty for one rank or ``link=False``)."""
    import torch.distributed as dist

    cpu0 = time.process_time()
    ph: dict[str, float] = {}
    tp = time.perf_counter()
    dist.barrier()
    _sync(device)
    t0 = time.perf_counter()
    step()
    _sync(device)
    cold = time.perf_counter() - t0
    for _ in range(WARMUP_STEPS_SLOW if _agree_max(cold, device) > SLOW_STEP_S else WARMUP_STEPS):
        step()
    _sync(device)
    def timed_step() -> float:  # every rank starts together; the device finished before and after
        dist.barrier()
        _sync(device)
        t0 = time.perf_counter()
        step()
        _sync(device)
        return time.perf_counter() - t0

    warm = [timed_step() for _ in range(2)]
    per_step = _agree_max(max(min(warm), 1e-6), device)
    ph["warmup_s"], tp = time.perf_counter() - tp, time.perf_counter()
    n = int(min(max_samples, max(min_samples, budget_s // per_step)))
    times: list[float] = []
    cpu1, w1 = time.process_time(), time.perf_counter()
    for _ in range(n):
        times.append(timed_step())
    busy_cores = (time.process_time() - cpu1) / max(time.perf_counter() - w1, 1e-9)
    ph["samples_s"], tp = time.perf_counter() - tp, time.perf_counter()
    prof: dict[str, Any] = {}
    prof_error = None
    try:
        prof = _profile_steps(step, min(PROFILED_STEPS, n), device, backend)
    except Exception as exc:  # noqa: BLE001 - profiling is extra evidence; the timing stands without it
        prof_error = f"{type(exc).__name__}: {exc}"
    ph["profile_s"], tp = time.perf_counter() - tp, time.perf_counter()
    sweep: list[tuple[int, float]] = _link_sweep(world, device) if link and world >= 2 else []
    ph["link_s"] = time.perf_counter() - tp
    mine = {"times": times, "cold_s": cold, "busy_cores": busy_cores, "profile": prof,
            "profile_error": prof_error, "cpu_measure_s": time.process_time() - cpu0, "phases": ph}
    return mine, sweep


def rank_main(rank: int, spec: RankSpec) -> None:
    """The entry point of one rank (``torch.multiprocessing`` passes the rank first)."""
    import datetime

    os.environ.update(spec.env)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(spec.port), RANK=str(rank),
                      WORLD_SIZE=str(spec.world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(spec.world))
    for var in LOOPBACK_ENV:  # the ranks talk over loopback only (unless the user named an interface)
        os.environ.setdefault(var, "lo")
    t_start = time.perf_counter()
    import torch
    import torch.distributed as dist

    torch.set_num_threads(spec.threads)
    device = None
    if spec.backend == "nccl":
        torch.cuda.set_device(rank % torch.cuda.device_count())
        device = torch.device("cuda", rank % torch.cuda.device_count())
    t_init = time.perf_counter()
    # the rendezvous is a file beside the result, not a TCPStore: its server listens on every interface
    store = dist.FileStore(spec.out_path + ".store", spec.world)
    dist.init_process_group(spec.backend, store=store, rank=rank, world_size=spec.world,
                            timeout=datetime.timedelta(seconds=spec.init_timeout_s))
    before = {"import_s": t_init - t_start, "init_s": time.perf_counter() - t_init}
    try:
        _measure(rank, spec, device, t_start, before)
    finally:
        dist.destroy_process_group()


def _measure(rank: int, spec: RankSpec, device: Any, t_start: float, phases: dict[str, float]) -> None:
    import torch.distributed as dist

    from ..core.cells import compile_cell

    ns = dict(spec.namespace)
    ns.update(rank=rank, world_size=spec.world, local_rank=rank,
              device=str(device) if device is not None else "cpu")
    ns.setdefault("__name__", "__perfmagic__")
    t_setup = time.perf_counter()
    if spec.setup:
        from ..core.cells import register_source

        register_source(spec.setup, f"{spec.filename} (setup)")  # its lines show in a traceback
        exec(compile(spec.setup, f"{spec.filename} (setup)", "exec"), ns)  # noqa: S102 - the user's setup
    setup_s = time.perf_counter() - t_setup
    if callable(spec.code):
        fn = spec.code

        def step() -> None:
            fn()
    else:
        run = compile_cell(spec.code, ns, spec.filename).run

        def step() -> None:
            run(1)
    mine, link = lockstep(step, device, spec.backend, spec.world, spec.budget_s, spec.min_samples,
                          spec.max_samples, link=spec.link)
    mine.update(rank=rank, pid=os.getpid(), threads=spec.threads, cpu_s=time.process_time(),
                wall_s=time.perf_counter() - t_start)
    mine["phases"].update(phases, setup_s=setup_s)
    gathered: list[Any] | None = [None] * spec.world if rank == 0 else None
    dist.gather_object(mine, gathered, dst=0)
    if rank == 0:
        tmp = spec.out_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"ranks": gathered, "link": link}, f)
        os.replace(tmp, spec.out_path)


__all__ = ["RankSpec", "rank_main", "lockstep", "LINK_SIZES"]
