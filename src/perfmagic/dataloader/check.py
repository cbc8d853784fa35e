"""Is the training loop waiting for data? Steady-state data wait, loader and compute alone, audit, sweep.

``dataloader_check(loader, step_fn)`` runs the loop ``for batch in loader: step_fn(batch)`` and times,
for every step, the time **blocked in ``next()``** (waiting for the batch) and the **compute** (the
step, followed by ``torch.cuda.synchronize()`` when the step uses CUDA, so GPU work is counted where it
happens). The method, in order:

1. **Start-up.** ``iter(loader)`` plus the first batch is timed on its own (*first-batch latency*: the
   workers' start-up). Then ``warmup`` batches are run and not counted: at least ``num_workers ×
   prefetch_factor`` (the batches the workers had prefetched while the first step ran, which would make
   the wait look too small) plus 2; 2 for a loader without workers.
2. **Steady state.** ``steps`` steps; the data-wait fraction is Σ wait / Σ (wait + compute). Above 0.3
   the loop is *input-bound* (docs/method.md §8).
3. **Loader alone.** A fresh pass over the loader without compute, after the same warm-up: the loader's
   own batches per second. For a non-persistent DataLoader the first-batch latency of this second pass is
   the *re-spawn cost per epoch*.
4. **Compute alone.** The step on one cached batch (the last one fetched: same shapes, same device),
   one warm call then up to 20 timed calls, after the workers have stopped: the step time with
   infinitely fast data. The step in the loop ≥ 1.25× slower than alone means the workers took cores
   from it (workers + torch's intra-op threads > usable cores): the audit then says so, never ✓.
5. **Audit** (DataLoader only): num_workers vs usable cores, pin_memory and non_blocking copies,
   persistent_workers, prefetch_factor, batch size, collate cost (timed on ``batch_size`` items of a
   map-style dataset), each with its expected effect computed from the numbers above.
6. **Sweep** (optional): ``sweep={"num_workers": [0, 1, 2, 4]}`` rebuilds the DataLoader with the same
   dataset and arguments at each setting (the product, for several keys) and measures the loop there.
7. **Load on every pass.** Other processes' cores (``core/env.LoadProbe``; the workers' own CPU taken
   out) are measured over the steady state of the loop, the loader alone, compute alone and every sweep
   point. A loaded pass (> ``audit.LOADED`` cores) is flagged where its numbers are shown, and a
   comparison between a loaded pass and a quiet one (compute alone vs the loop, the loader vs compute
   alone, sweep points, a prediction vs the sweep) says it cannot tell instead of concluding. Compute
   alone more than 1.5× from the loop's own compute (either way, not explained by the workers) is named
   as an inconsistency and not used.
8. **One story.** The audit's predicted effects are set against the sweep of the same check
   (:func:`~perfmagic.dataloader.audit.reconcile`): a prediction the sweep measured otherwise is replaced
   by the measurement and what explains it.
9. **GPU** (when the step initialised CUDA): per step a CUDA event pair around the step gives the time
   the GPU stream spent on it; the GPU idle share is 1 − Σ GPU span / Σ step. The host→device copy of
   one batch is timed, and whether it can overlap compute is read from the batch (pinned?) and the
   step's source (``non_blocking=True``?) — an inference, not a trace.

Every iterator created is shut down at the end (``_shutdown_workers()``): also when the step raises
(the exception propagates unchanged) and on Ctrl-C (:class:`~perfmagic.errors.BenchInterrupted` with
the partial result). A persistent-workers loader gets its iterator dropped, so its next epoch starts
fresh workers. A loader shorter than warm-up + steps is measured on what there is, and the result says so.
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import BadOptionError, BenchInterrupted, PerfmagicError
from .audit import (INPUT_BOUND, Finding, _config, _is_dataloader, _Proxy, _rebuild, check_picklable, parse_sweep,
                    usable_cores)
from ..core.env import LoadProbe
from .probe import (COPY, NON_BLOCKING, USES_CUDA, SteadyLoad, _collate_cost, _h2d, _Iters, _Loop, _split,
                    _step_source, _tensors, _watched)
from .result import DEFAULT_STEPS, DataLoaderResult, SweepPoint

COMPUTE_ALONE_MAX = 20


def _short(v: Any) -> str:
    r = repr(v)
    return f"{r[:57]}... ({type(v).__name__})" if len(r) > 60 else f"{r} ({type(v).__name__})"


# ---- the public function -----------------------------------------------------------------------

def dataloader_check(loader: Any, step_fn: Callable[[Any], Any], *, steps: int = DEFAULT_STEPS,
                     warmup: int | None = None, sweep: Mapping[str, Sequence[Any]] | None = None,
                     sweep_steps: int | None = None, loader_alone: bool = True, compute_alone: bool = True,
                     step_source: str | None = None, name: str = "the loader",
                     progress: Callable[[float, str], None] | None = None) -> DataLoaderResult:
    """Measure the loop ``for batch in loader: step_fn(batch)`` (see the module docstring for the method).

    ``loader``: any iterable of batches; a ``torch.utils.data.DataLoader`` gets the audit and the sweep.
    ``steps``: steady-state steps measured after the warm-up (default ``num_workers × prefetch_factor + 2``).
    ``sweep``: ``{"num_workers": [0, 1, 2, 4], ...}`` — rebuild and measure the loop at each setting
    (``sweep_steps`` steps each, default ``min(steps, 10)``). ``step_source``: the step's source, to see
    whether its copies are ``non_blocking`` (read with ``inspect`` when not given).
    """
    t_start = time.perf_counter()
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise BadOptionError("steps", steps, "an integer >= 1", "e.g. steps=20")
    if warmup is not None and (not isinstance(warmup, int) or warmup < 0):
        raise BadOptionError("warmup", warmup, "an integer >= 0 (or None for the default)")
    if isinstance(loader, (str, bytes)) or not (hasattr(loader, "__iter__") or hasattr(loader, "__getitem__")):
        raise BadOptionError(name if name != "the loader" else "loader", _short(loader), "an iterable of batches (a "
                             "torch.utils.data.DataLoader, a list, a generator)",
                             "pass the loader itself: a DataLoader or any iterable of batches")
    if not callable(step_fn):
        raise BadOptionError("step_fn", type(step_fn).__name__, "a callable step_fn(batch)")
    is_dl = _is_dataloader(loader)
    settings = parse_sweep(sweep) if sweep else []
    if settings and not is_dl:
        raise BadOptionError("--sweep", type(loader).__name__, "a torch.utils.data.DataLoader (the sweep rebuilds "
                             "it with other arguments)", "build the loader with DataLoader(...) to sweep it")
    cfg = _config(loader) if is_dl else ()
    workers = dict(cfg).get("num_workers", 0) or 0
    pf = dict(cfg).get("prefetch_factor") or 2
    if warmup is None:
        warmup = workers * pf + 2 if workers else 2
    notes: list[str] = []
    if is_dl:
        check_picklable(loader, name)
        if settings:
            for s in settings:
                if s.get("num_workers", workers):
                    where = ", ".join(f"{k}={v}" for k, v in s.items())
                    check_picklable(_Proxy(loader, s), f"{name} in the sweep ({where})")
    try:
        n_len: int | None = len(loader)
    except Exception:
        n_len = None
    torch_mod = sys.modules.get("torch")
    torch_threads = None
    if torch_mod is not None:
        try:
            torch_threads = int(torch_mod.get_num_threads())
        except Exception:  # a torch stub without the thread API
            torch_threads = None
    iters = _Iters()
    main, alone = _Loop(), _Loop()
    co: list[float] = []
    points: list[SweepPoint] = []
    extras: dict[str, Any] = {}
    status, w_main = "ok", warmup
    one_pass = hasattr(loader, "__next__")  # a generator / iterator: iter() returns itself
    total_phases = 3 + len(settings)

    def tell(phase: int, msg: str) -> Callable[[int], None] | None:
        """A per-step progress callback, throttled to 4 updates a second: a progress bar redrawn every step
        would give the workers extra time between steps (outside both timed windows) and hide the wait."""
        if progress is None:
            return None
        last = [0.0]

        def update(i: int) -> None:
            now = time.perf_counter()
            if now - last[0] >= 0.25:
                last[0] = now
                progress((phase + min(i / max(1, warmup + steps), 0.99)) / total_phases, msg)
        return update

    # the load (other processes' cores) of every pass, each over its own measured steps
    steady, alone_load, co_probe = SteadyLoad(), SteadyLoad(), LoadProbe()
    try:
        try:
            steady = _watched(loader, step_fn, warmup, steps, iters, main, tell(0, "loop"))
        finally:
            if not (is_dl and dict(cfg).get("persistent_workers")):
                iters.close()
        if not main.wait:
            raise PerfmagicError(f"{name} yielded no batch: nothing to measure (is it empty, or already consumed?)")
        if loader_alone:
            if one_pass:
                notes.append(f"{name} is a one-pass iterator: 'loader alone' timed on the batches after the loop")
            if not (one_pass and main.exhausted):
                alone_load = _watched(loader, None, 0 if one_pass else warmup, steps, iters, alone,
                                      tell(1, "loader alone"))
            iters.close()
        if compute_alone:
            if progress is not None:
                progress(2 / total_phases, "compute alone")
            iters.close()  # persistent workers left by the loop (no loader-alone pass) stop before it
            cached = main.last
            step_fn(cached)  # warm call, untimed
            torch = sys.modules.get("torch")
            co_probe.start()  # the workers are stopped: any busy core besides this process is another's
            for i in range(max(3, min(steps, COMPUTE_ALONE_MAX))):
                a = time.perf_counter()
                step_fn(cached)
                if main.cuda:
                    torch.cuda.synchronize()
                co.append(time.perf_counter() - a)
            co_probe.stop()
        if is_dl:
            extras["item_s"], extras["collate_s"] = _collate_cost(loader)
        if main.cuda:
            extras["h2d_s"], extras["batch_pinned"] = _h2d(main.last)
        n_sweep = sweep_steps or min(steps, 10)
        for j, s in enumerate(settings):
            label = ", ".join(f"{k}={v}" for k, v in s.items())
            if progress is not None:
                progress((3 + j) / total_phases, label)
            lp = _Loop(cuda=main.cuda)
            sw = (s.get("num_workers", workers) or 0)
            spf = s.get("prefetch_factor", pf) or 2
            sw_warm = sw * spf + 2 if sw else 2
            err = None
            bs = None
            pl = SteadyLoad()
            try:
                with warnings.catch_warnings():  # torch's "more workers than cores": the audit says it
                    warnings.filterwarnings("ignore", message=".*worker processes in total", category=UserWarning)
                    dl = _rebuild(loader, s)
                    bs = dl.batch_size
                    pl = _watched(dl, step_fn, sw_warm, n_sweep, iters, lp, events=False)
            except KeyboardInterrupt:
                raise
            except Exception as exc:
                err = f"{type(exc).__name__}: {exc}"
            finally:
                iters.close()
            k, _ = _split(len(lp.wait), sw_warm, n_sweep, label)
            points.append(SweepPoint(tuple(s.items()), tuple(lp.wait[k:]), tuple(lp.comp[k:]), lp.first_batch_s,
                                     bs, err, workers_cores=pl.workers_cores, others_cores=pl.others_cores))
        if progress is not None:
            progress(1.0, "done")
    except KeyboardInterrupt:
        status = "interrupted"
    finally:
        iters.close()
    if len(main.wait) < warmup + 2 and status == "interrupted":
        w_main = len(main.wait) // 2
        notes.append(f"interrupted during the warm-up: the last {len(main.wait) - w_main} steps are shown")
    else:
        w_main, note = _split(len(main.wait), warmup, steps, name)
        if note and status == "ok":
            notes.append(note)
    w_alone = 0
    if alone.wait:
        w_alone, _ = _split(len(alone.wait), 0 if one_pass else warmup, steps, "the loader-alone pass")
    src = _step_source(step_fn, step_source) if main.cuda else None
    if main.cuda and src is not None and not USES_CUDA.search(src) \
            and not any(t.device.type == "cuda" for t in _tensors(main.last)):
        main.cuda = False  # CUDA was initialised by earlier code, but this step runs on the CPU
        notes.append("CUDA is initialised in this process but the step does not seem to use it: "
                     "no GPU analysis (the steps were still synchronized)")
    nb = None
    if src is not None and COPY.search(src):
        nb = bool(NON_BLOCKING.search(src))
    gpu = tuple(main.gpu[w_main:]) if main.cuda else ()
    if any(g != g for g in gpu):  # CUDA came up within the measured steps: no event pair for every step
        gpu = ()
    result = DataLoaderResult(
        wait_s=tuple(main.wait[w_main:]), compute_s=tuple(main.comp[w_main:]),
        warmup_wait_s=tuple(main.wait[:w_main]), warmup_compute_s=tuple(main.comp[:w_main]),
        first_batch_s=main.first_batch_s, loader_s=tuple(alone.wait[w_alone:]),
        loader_first_batch_s=alone.first_batch_s, compute_only_s=tuple(co), gpu_busy_s=gpu,
        h2d_s=extras.get("h2d_s"), batch_pinned=extras.get("batch_pinned"), copies_non_blocking=nb,
        item_s=extras.get("item_s", ()), collate_s=extras.get("collate_s"), sweep=tuple(points), config=cfg,
        is_dataloader=is_dl, cuda=main.cuda, cores=usable_cores(), torch_threads=torch_threads,
        workers_cores=steady.workers_cores, others_cores=steady.others_cores, warmup=w_main,
        loader_others_cores=alone_load.others_cores, compute_only_others_cores=co_probe.others_cores,
        steps_requested=steps,
        loader_len=n_len, status=status, notes=tuple(notes), wall_s=time.perf_counter() - t_start)
    if status == "interrupted":
        raise BenchInterrupted(result if result.n_steps else None)
    return result


__all__ = ["dataloader_check", "DataLoaderResult", "SweepPoint", "Finding", "INPUT_BOUND", "usable_cores",
           "check_picklable", "parse_sweep"]
