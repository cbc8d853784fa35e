"""The instrumented loop: ``for batch in loader: step(batch)`` with every step's wait and compute timed.

:func:`_run` times, per step, the time **blocked in ``next()``** and the **compute** (the step, then
``torch.cuda.synchronize()`` once the step uses CUDA, with a CUDA event pair around it for the GPU's
own span). Samples go into a :class:`_Loop` filled in place, so Ctrl-C keeps what was measured;
:class:`_Iters` keeps every iterator created so that their workers are always shut down.
Also here: the side measurements of one batch (collate cost, host→device copy) and the reading of the
step's source (does it copy to the GPU, with ``non_blocking=True``?).
"""

from __future__ import annotations

import inspect
import math
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core import stats as _stats
from ..core.load import processes_cpu_s
from ..findings import Finding as Note

COPY = re.compile(r"\.(?:to|cuda)\s*\(")
NON_BLOCKING = re.compile(r"non_blocking\s*=\s*True")
USES_CUDA = re.compile(r"cuda|device|\.to\s*\(")


class _Iters:
    """Every iterator created; ``close()`` shuts their workers down (idempotent)."""

    def __init__(self) -> None:
        self.items: list[tuple[Any, Any]] = []

    def new(self, loader: Any) -> Any:
        it = iter(loader)
        self.items.append((loader, it))
        return it

    def close(self) -> None:
        for loader, it in self.items:
            fn = getattr(it, "_shutdown_workers", None)
            if fn is not None:
                try:
                    fn()
                except Exception:  # pragma: no cover - a half-started iterator
                    pass
            if getattr(loader, "_iterator", None) is it:  # persistent workers: next epoch starts afresh
                loader._iterator = None
        self.items.clear()


def worker_pids(it: Any) -> list[int]:
    """The process ids of a DataLoader iterator's workers (none for other iterables)."""
    return [p.pid for p in getattr(it, "_workers", None) or () if getattr(p, "pid", None)]


def _tick_resolution(workers: int, wall: float) -> float:
    """Cores that clock-tick rounding alone can add to an "others" reading over ``wall`` seconds: one tick
    for each CPU summed in /proc/stat's "cpu" line and for each worker's /proc/PID/stat."""
    import os

    try:
        tick = 1.0 / os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not Linux
        tick = 0.01
    return ((os.cpu_count() or 1) + workers) * tick / wall if wall > 0 else float("inf")


class SteadyLoad:
    """Cores used during the steady state of the loop: by the DataLoader's worker processes, by this
    process and by other processes (the machine's busy time minus both): started after the warm-up."""

    def __init__(self) -> None:
        self.workers_cores: float | None = None
        self.own_cores: float | None = None
        self.others_cores: float | None = None
        self.resolution: float | None = None   # cores within which a reading is tick rounding (see stop)
        self._probe: Any = None
        self._kids0: float | None = None
        self._pids: list[int] = []
        self._t0 = 0.0

    def start(self, pids: Sequence[int] = ()) -> None:
        from ..core.load import LoadProbe

        self._pids = list(pids)
        self._kids0, self._t0 = processes_cpu_s(self._pids) if self._pids else None, time.perf_counter()
        self._probe = LoadProbe().start()

    def stop(self) -> None:
        if self._probe is None:
            return
        others = self._probe.stop()  # children count as others there
        kids1, wall = processes_cpu_s(self._pids) if self._pids else None, time.perf_counter() - self._t0
        self.own_cores = self._probe.own_cores
        if self._kids0 is not None and kids1 is not None and wall > 0:
            self.workers_cores = max(0.0, kids1 - self._kids0) / wall
        if not self._pids:
            self.workers_cores = 0.0  # no worker processes: the loading runs in this process
        if others is not None:
            # /proc/stat and each worker's /proc/PID/stat count whole clock ticks: over a short pass (a
            # 6-step sweep point of ~60 ms) one tick per core and per worker is worth up to 0.7 cores.
            # Only what exceeds that resolution is read as other processes' load (a quiet CI run read
            # 0.4 "others" during num_workers=2 and refused the sweep's best for it)
            self.resolution = _tick_resolution(len(self._pids), wall)
            self.others_cores = max(0.0, others - (self.workers_cores or 0.0) - self.resolution)
        self._probe = None


@dataclass
class _Loop:
    """The samples of one pass, filled in place so that Ctrl-C keeps what was measured."""

    wait: list[float] = field(default_factory=list)
    comp: list[float] = field(default_factory=list)
    gpu: list[float] = field(default_factory=list)
    first_batch_s: float | None = None
    exhausted: bool = False
    last: Any = None
    cuda: bool = False


def _run(loader: Any, step: Callable[[Any], Any] | None, total: int, iters: _Iters, loop: _Loop,
         progress: Callable[[int], None] | None = None, events: bool = True) -> _Loop:
    """``total`` iterations of next() (+ the step, synchronized); per-step samples into ``loop``."""
    clock = time.perf_counter
    t0 = clock()
    it = iters.new(loader)
    torch = sys.modules.get("torch")
    for i in range(total):
        a = clock()
        try:
            batch = next(it)
        except StopIteration:
            loop.exhausted = True
            break
        b = clock()
        if i == 0:
            loop.first_batch_s = b - t0
        loop.last = batch
        if step is None:
            loop.wait.append(b - a)
            if progress is not None:
                progress(i + 1)
            continue
        e0 = e1 = None
        if loop.cuda and events:
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
        step(batch)
        if loop.cuda:
            if e1 is not None:
                e1.record()
            torch.cuda.synchronize()
        elif _cuda_active():  # the step has just initialised CUDA: synchronize from now on
            loop.cuda = True
            torch = sys.modules["torch"]
            torch.cuda.synchronize()
        c = clock()
        loop.wait.append(b - a)
        loop.comp.append(c - b)
        loop.gpu.append(e0.elapsed_time(e1) / 1e3 if e0 is not None else math.nan)
        if progress is not None:
            progress(i + 1)
    return loop


def _watched(loader: Any, step: Callable[[Any], Any] | None, warm: int, n: int, iters: _Iters, loop: _Loop,
             told: Callable[[int], None] | None = None, events: bool = True) -> SteadyLoad:
    """:func:`_run` of ``warm + n`` steps with the load measured over the ``n`` steps after the warm-up
    (the workers' cores and other processes' cores): every pass of the check is watched, not just the
    first, so that a number taken beside a busy neighbour is flagged where it is shown."""
    load = SteadyLoad()

    def progress(i: int) -> None:
        if i == warm:  # the warm-up is done: the workers (if any) are running, their PIDs are known
            load.start(worker_pids(iters.items[-1][1]) if iters.items else ())
        if told is not None:
            told(i)

    if warm == 0:
        load.start()  # no warm-up: the workers are not started yet, their use is not measured
    _run(loader, step, warm + n, iters, loop, progress, events)
    load.stop()
    return load


def note(kind: str, **values: Any) -> Note:
    """A note of the check (a one-pass loader, a short one, an interrupted warm-up) as data: kind
    ``"dataloader.<kind>"`` and its numbers, kept so in the result's ``notes`` and in the ledger;
    :mod:`perfmagic.render.dataloader_audit` words it."""
    return Note.of(f"dataloader.{kind}", **values)


def _split(n: int, warmup: int, asked: int, name: str) -> tuple[int, Note | None]:
    """How many of ``n`` recorded steps are warm-up, and a note when the loader was too short."""
    if n >= warmup + min(asked, 2):
        if n < warmup + asked:
            return warmup, note("short", name=name, n=n, warmup=warmup, asked=asked)
        return warmup, None
    w = n // 2 if n >= 2 else 0
    return w, note("too-short", name=name, n=n, warmup=warmup, skipped=w)


def _step_source(step_fn: Callable[[Any], Any], source: str | None) -> str | None:
    if source is not None:
        return source
    try:
        return inspect.getsource(step_fn)
    except (OSError, TypeError):
        return None


def _collate_cost(loader: Any) -> tuple[tuple[float, ...], float | None]:
    """Fetch one batch's worth of items by hand (≤ 1 s) and time the collate function on them."""
    ds, bs, fn = loader.dataset, loader.batch_size, loader.collate_fn
    if not bs or fn is None or not hasattr(ds, "__getitem__") or not hasattr(ds, "__len__"):
        return (), None
    from torch.utils.data import IterableDataset

    if isinstance(ds, IterableDataset):
        return (), None
    items, times = [], []
    t_end = time.perf_counter() + 1.0
    for i in range(min(bs, len(ds))):
        a = time.perf_counter()
        items.append(ds[i])
        times.append(time.perf_counter() - a)
        if time.perf_counter() > t_end:
            break
    if not items:
        return (), None
    ct = []
    for _ in range(3):
        a = time.perf_counter()
        fn(items)
        ct.append(time.perf_counter() - a)
    scale = bs / len(items)  # fewer items fetched than a batch: scale the collate time up
    return tuple(times), _stats.median(ct) * scale


def _h2d(batch: Any) -> tuple[float | None, bool | None]:
    """The host→device copy of one batch (median of 3, synchronized) and whether it was pinned."""
    ts = [t for t in _tensors(batch) if t.device.type == "cpu"]
    if not ts:
        return None, None
    import torch

    pinned = all(t.is_pinned() for t in ts)
    out = []
    for _ in range(3):
        torch.cuda.synchronize()
        a = time.perf_counter()
        for t in ts:
            t.to("cuda", non_blocking=False)
        torch.cuda.synchronize()
        out.append(time.perf_counter() - a)
    return _stats.median(out), pinned


def _tensors(x: Any) -> Iterable[Any]:
    if hasattr(x, "is_pinned") and hasattr(x, "device"):
        yield x
    elif isinstance(x, Mapping):
        for v in x.values():
            yield from _tensors(v)
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _tensors(v)


def _cuda_active() -> bool:
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:  # is_initialized() first: it is a flag read, is_available() may query the driver
        return bool(torch.cuda.is_initialized() and torch.cuda.is_available())
    except Exception:
        return False


# ---- sample arithmetic ------------------------------------------------------------------------------

def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else math.nan


def _fraction(wait: Sequence[float], comp: Sequence[float]) -> float:
    tot = sum(wait) + sum(comp)
    return sum(wait) / tot if tot > 0 else math.nan
