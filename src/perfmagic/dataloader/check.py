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
   Without workers, a loop's compute over 1.5× the step alone has the step timed again after pauses as
   long as the loop's wait (:func:`_paused`): a short step runs slower after a pause, and where that makes
   up half the gap or more the gap is explained, measured, and compute alone is used.
5. **Audit** (DataLoader only): num_workers vs usable cores, pin_memory and non_blocking copies,
   persistent_workers, prefetch_factor, batch size, collate cost (timed on ``batch_size`` items of a
   map-style dataset), each with its expected effect computed from the numbers above.
6. **Sweep** (optional): ``sweep={"num_workers": [0, 1, 2, 4]}`` rebuilds the DataLoader with the same
   dataset and arguments at each setting (the product, for several keys) and measures the loop there.
7. **Load on every pass.** Other processes' cores (``core/load.LoadProbe``; the workers' own CPU taken
   out) are measured over the steady state of the loop, the loader alone, compute alone and every sweep
   point. A loaded pass (> ``audit.LOADED`` cores) is flagged where its numbers are shown, and a
   comparison between a loaded pass and a quiet one (compute alone vs the loop, the loader vs compute
   alone, sweep points, a prediction vs the sweep) says it cannot tell instead of concluding; a sweep point
   loaded while the others were quiet is first measured once more, and the quieter pass kept. Compute
   alone more than 1.5× from the loop's own compute (either way, not explained by the workers or by the
   pause between steps) is named as an inconsistency and not used.
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
from dataclasses import dataclass, field
from typing import Any

from ..errors import BadOptionError, BenchInterrupted, PerfmagicError
from .audit import (INPUT_BOUND, Finding, _config, _is_dataloader, _Proxy, _rebuild, check_picklable, load_gap,
                    parse_sweep, usable_cores)
from ..core import stats as _stats
from ..core.load import LoadProbe
from .probe import (COPY, NON_BLOCKING, USES_CUDA, SteadyLoad, _collate_cost, _h2d, _Iters, _Loop, _split,
                    _step_source, _tensors, _watched)
from .probe import note as say_note
from .result import DEFAULT_STEPS, DataLoaderResult, SweepPoint, pause_gap

COMPUTE_ALONE_MAX = 20
PAUSED_CALLS = 5       # the step on the cached batch after a pause as long as the loop's wait: this many calls
PAUSE_MAX_S = 0.05     # ... each pause at most this long
PAUSE_MIN_S = 5e-4     # ... and only where the loop waited at least this long per step


def _short(v: Any) -> str:
    r = repr(v)
    return f"{r[:57]}... ({type(v).__name__})" if len(r) > 60 else f"{r} ({type(v).__name__})"


# ---- the public function -----------------------------------------------------------------------

def _check_options(loader: Any, step_fn: Any, steps: Any, warmup: Any, name: str) -> None:
    """:class:`BadOptionError` naming the first bad option of :func:`dataloader_check`, if any."""
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


def _sweep_settings(loader: Any, sweep: Mapping[str, Sequence[Any]] | None, is_dl: bool) -> list[dict[str, Any]]:
    """The sweep's settings (the product of its values); only a DataLoader can be swept."""
    settings = parse_sweep(sweep) if sweep else []
    if settings and not is_dl:
        raise BadOptionError("--sweep", type(loader).__name__, "a torch.utils.data.DataLoader (the sweep rebuilds "
                             "it with other arguments)", "build the loader with DataLoader(...) to sweep it")
    return settings


def _check_picklable_everywhere(loader: Any, settings: list[dict[str, Any]], workers: int, name: str) -> None:
    """The DataLoader, and each sweep setting that has workers, can be sent to worker processes."""
    check_picklable(loader, name)
    if settings:
        for s in settings:
            if s.get("num_workers", workers):
                where = ", ".join(f"{k}={v}" for k, v in s.items())
                check_picklable(_Proxy(loader, s), f"{name} in the sweep ({where})")


def _len_or_none(loader: Any) -> int | None:
    try:
        return len(loader)
    except Exception:
        return None


def _torch_threads() -> int | None:
    """torch's intra-op threads, when torch is already imported."""
    torch_mod = sys.modules.get("torch")
    if torch_mod is not None:
        try:
            return int(torch_mod.get_num_threads())
        except Exception:  # a torch stub without the thread API
            return None
    return None


@dataclass(frozen=True)
class _Plan:
    """What one check runs: the loop, its warm-up and steps, the loader's config, the passes asked for
    and the sweep's settings."""
    loader: Any
    step_fn: Callable[[Any], Any]
    name: str
    steps: int
    warmup: int
    is_dl: bool
    cfg: tuple[tuple[str, Any], ...]
    workers: int
    pf: int
    settings: list[dict[str, Any]]
    loader_alone: bool
    compute_alone: bool
    one_pass: bool  # a generator / iterator: iter() returns itself
    progress: Callable[[float, str], None] | None

    @property
    def total_phases(self) -> int:
        return 3 + len(self.settings)

    def tell(self, phase: int, msg: str) -> Callable[[int], None] | None:
        """A per-step progress callback, throttled to 4 updates a second: a progress bar redrawn every step
        would give the workers extra time between steps (outside both timed windows) and hide the wait."""
        progress = self.progress
        if progress is None:
            return None
        last = [0.0]
        n, total_phases = self.warmup + self.steps, self.total_phases

        def update(i: int) -> None:
            now = time.perf_counter()
            if now - last[0] >= 0.25:
                last[0] = now
                progress((phase + min(i / max(1, n), 0.99)) / total_phases, msg)
        return update


@dataclass
class _Passes:
    """What the passes measured so far, filled in place so that Ctrl-C keeps every pass measured before
    it; the load (other processes' cores) of every pass, each over its own measured steps."""
    iters: _Iters = field(default_factory=_Iters)
    main: _Loop = field(default_factory=_Loop)
    alone: _Loop = field(default_factory=_Loop)
    co: list[float] = field(default_factory=list)
    co_paused: list[float] = field(default_factory=list)
    pause_s: float | None = None  # the pause before each of co_paused
    points: list[SweepPoint] = field(default_factory=list)
    extras: dict[str, Any] = field(default_factory=dict)
    steady: SteadyLoad = field(default_factory=SteadyLoad)
    alone_load: SteadyLoad = field(default_factory=SteadyLoad)
    co_probe: LoadProbe = field(default_factory=LoadProbe)


def _loop_passes(plan: _Plan, got: _Passes, notes: list[Any]) -> None:
    """Steps 1-3: the loop (warm-up, then the steady state), then the loader alone; the workers stop after
    each pass (a persistent-workers loader keeps them from the loop to the loader-alone pass)."""
    try:
        got.steady = _watched(plan.loader, plan.step_fn, plan.warmup, plan.steps, got.iters, got.main,
                              plan.tell(0, "loop"))
    finally:
        if not (plan.is_dl and dict(plan.cfg).get("persistent_workers")):
            got.iters.close()
    if not got.main.wait:
        raise PerfmagicError(f"{plan.name} yielded no batch: nothing to measure (is it empty, or already consumed?)")
    if plan.loader_alone:
        if plan.one_pass:
            notes.append(say_note("one-pass", name=plan.name))
        if not (plan.one_pass and got.main.exhausted):
            got.alone_load = _watched(plan.loader, None, 0 if plan.one_pass else plan.warmup, plan.steps, got.iters,
                                      got.alone, plan.tell(1, "loader alone"))
        got.iters.close()


def _compute_alone(plan: _Plan, got: _Passes) -> None:
    """Step 4: the step on the last batch fetched, the workers stopped: one warm call, then up to
    :data:`COMPUTE_ALONE_MAX` timed calls (synchronized when the loop's steps used CUDA) into ``got.co``."""
    if plan.progress is not None:
        plan.progress(2 / plan.total_phases, "compute alone")
    got.iters.close()  # persistent workers left by the loop (no loader-alone pass) stop before it
    main, co_probe = got.main, got.co_probe
    plan.step_fn(main.last)  # warm call, untimed
    co_probe.start()  # the workers are stopped: any busy core besides this process is another's
    for _ in range(max(3, min(plan.steps, COMPUTE_ALONE_MAX))):
        got.co.append(_timed_step(plan, main))
    co_probe.stop()
    _paused(plan, got)


def _timed_step(plan: _Plan, main: _Loop) -> float:
    """One call of the step on the last batch fetched, synchronized when the loop's steps used CUDA."""
    a = time.perf_counter()
    plan.step_fn(main.last)
    if main.cuda:
        sys.modules["torch"].cuda.synchronize()
    return time.perf_counter() - a


def _paused(plan: _Plan, got: _Passes) -> None:
    """Step 4b, only where the loop's compute ran :func:`~.result.pause_gap` × slower than back to back (the
    workers are stopped by now): the step on the cached batch again, each call after a pause as long as the loop's
    median wait for data (at most :data:`PAUSE_MAX_S`). A short step runs slower after a pause than back to
    back (its caches and the CPU go cold while the loader works): a 150 µs SGD step of a small model ran
    1.1 ms after an 18 ms sleep, and 1.0 ms after 18 ms of a busy Python loop. Where the paused calls
    reproduce the loop's compute, the two passes agree and the gap has its cause measured
    (:attr:`.result.DataLoaderResult.pause_explains`)."""
    main, co = got.main, got.co
    steady = main.comp[plan.warmup:] or main.comp
    waits = main.wait[plan.warmup:] or main.wait
    if not co or not steady or not waits:
        return
    loop_c, alone, wait = _stats.median(steady), _stats.median(co), _stats.median(waits)
    if not (alone > 0 and loop_c > pause_gap(plan.cfg) * alone and wait >= PAUSE_MIN_S):
        return
    got.pause_s = min(wait, PAUSE_MAX_S)
    for _ in range(PAUSED_CALLS):
        time.sleep(got.pause_s)
        got.co_paused.append(_timed_step(plan, main))


def _sweep_passes(plan: _Plan, got: _Passes, sweep_steps: int | None, notes: list[Any]) -> None:
    """Step 6: the loop rebuilt at each setting of the sweep, one point each into ``got.points``."""
    n_sweep = sweep_steps or min(plan.steps, 10)
    for j, s in enumerate(plan.settings):
        label = ", ".join(f"{k}={v}" for k, v in s.items())
        if plan.progress is not None:
            plan.progress((3 + j) / plan.total_phases, label)
        got.points.append(_sweep_point(plan, got.iters, s, label, n_sweep, cuda=got.main.cuda))
    _remeasure_loaded(plan, got, n_sweep, notes)


def _remeasure_loaded(plan: _Plan, got: _Passes, n_sweep: int, notes: list[Any]) -> None:
    """A sweep point measured while other processes were busy, set against quiet ones, cannot be compared
    with them (``audit.load_gap``). Each such point is measured once more, after the others; the pass with
    the fewer others' cores is kept and the note says which. A point loaded both times stays loaded, and
    the comparisons that use it still say they cannot tell."""
    ok = [p for p in got.points if p.ok]
    if load_gap([(p.label, p.others_cores) for p in ok]) is None:
        return
    for j, p in enumerate(got.points):
        if not (p.ok and p.loaded):
            continue
        again = _sweep_point(plan, got.iters, dict(p.setting), p.label, n_sweep, cuda=got.main.cuda)
        kept = again if again.ok and (again.others_cores or 0.0) < (p.others_cores or 0.0) else p
        got.points[j] = kept
        notes.append(say_note("sweep-again", label=p.label, first=p.others_cores, second=again.others_cores,
                              kept="second" if kept is again else "first"))


def _sweep_point(plan: _Plan, iters: _Iters, s: dict[str, Any], label: str, n_sweep: int, *,
                 cuda: bool) -> SweepPoint:
    """The loop on the DataLoader rebuilt with setting ``s``: its own warm-up, then ``n_sweep`` steps. An
    error building or running it is kept in the point; Ctrl-C propagates (its workers stopped)."""
    lp = _Loop(cuda=cuda)
    sw = (s.get("num_workers", plan.workers) or 0)
    spf = s.get("prefetch_factor", plan.pf) or 2
    sw_warm = sw * spf + 2 if sw else 2
    err = None
    bs = None
    pl = SteadyLoad()
    try:
        with warnings.catch_warnings():  # torch's "more workers than cores": the audit says it
            warnings.filterwarnings("ignore", message=".*worker processes in total", category=UserWarning)
            dl = _rebuild(plan.loader, s)
            bs = dl.batch_size
            pl = _watched(dl, plan.step_fn, sw_warm, n_sweep, iters, lp, events=False)
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        err = f"{type(exc).__name__}: {exc}"
    finally:
        iters.close()
    k, _ = _split(len(lp.wait), sw_warm, n_sweep, label)
    return SweepPoint(tuple(s.items()), tuple(lp.wait[k:]), tuple(lp.comp[k:]), lp.first_batch_s,
                      bs, err, workers_cores=pl.workers_cores, others_cores=pl.others_cores)


def _warmup_shown(main: _Loop, warmup: int, steps: int, status: str, name: str, notes: list[Any]) -> int:
    """How many of the loop's first steps are warm-up (not counted); an interrupted warm-up shows its
    second half."""
    if len(main.wait) < warmup + 2 and status == "interrupted":
        w_main = len(main.wait) // 2
        notes.append(say_note("interrupted-warm-up", shown=len(main.wait) - w_main))
    else:
        w_main, note = _split(len(main.wait), warmup, steps, name)
        if note and status == "ok":
            notes.append(note)
    return w_main


def _gpu_reading(main: _Loop, step_fn: Callable[[Any], Any], step_source: str | None, w_main: int,
                 notes: list[Any]) -> tuple[bool | None, tuple[float, ...]]:
    """(whether the step's copies are non_blocking, or None; the GPU busy time of each counted step). A
    step whose source and batch show no CUDA is taken off the GPU analysis (``main.cuda`` cleared)."""
    src = _step_source(step_fn, step_source) if main.cuda else None
    if main.cuda and src is not None and not USES_CUDA.search(src) \
            and not any(t.device.type == "cuda" for t in _tensors(main.last)):
        main.cuda = False  # CUDA was initialised by earlier code, but this step runs on the CPU
        notes.append(say_note("cuda-unused"))
    nb = None
    if src is not None and COPY.search(src):
        nb = bool(NON_BLOCKING.search(src))
    gpu = tuple(main.gpu[w_main:]) if main.cuda else ()
    if any(g != g for g in gpu):  # CUDA came up within the measured steps: no event pair for every step
        gpu = ()
    return nb, gpu


def _result(plan: _Plan, got: _Passes, *, status: str, notes: list[Any], step_source: str | None,
            n_len: int | None, torch_threads: int | None, t_start: float) -> DataLoaderResult:
    """The result of what the passes measured (the warm-up steps split off)."""
    main, alone, extras = got.main, got.alone, got.extras
    w_main = _warmup_shown(main, plan.warmup, plan.steps, status, plan.name, notes)
    w_alone = 0
    if alone.wait:
        w_alone, _ = _split(len(alone.wait), 0 if plan.one_pass else plan.warmup, plan.steps, "the loader-alone pass")
    nb, gpu = _gpu_reading(main, plan.step_fn, step_source, w_main, notes)
    return DataLoaderResult(
        wait_s=tuple(main.wait[w_main:]), compute_s=tuple(main.comp[w_main:]),
        warmup_wait_s=tuple(main.wait[:w_main]), warmup_compute_s=tuple(main.comp[:w_main]),
        first_batch_s=main.first_batch_s, loader_s=tuple(alone.wait[w_alone:]),
        loader_first_batch_s=alone.first_batch_s, compute_only_s=tuple(got.co), gpu_busy_s=gpu,
        compute_paused_s=tuple(got.co_paused), pause_s=got.pause_s,
        h2d_s=extras.get("h2d_s"), batch_pinned=extras.get("batch_pinned"), copies_non_blocking=nb,
        item_s=extras.get("item_s", ()), collate_s=extras.get("collate_s"), sweep=tuple(got.points),
        config=plan.cfg, is_dataloader=plan.is_dl, cuda=main.cuda, cores=usable_cores(),
        torch_threads=torch_threads, workers_cores=got.steady.workers_cores, others_cores=got.steady.others_cores,
        warmup=w_main, loader_others_cores=got.alone_load.others_cores,
        compute_only_others_cores=got.co_probe.others_cores, steps_requested=plan.steps,
        loader_len=n_len, status=status, notes=tuple(notes), wall_s=time.perf_counter() - t_start)


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
    _check_options(loader, step_fn, steps, warmup, name)
    is_dl = _is_dataloader(loader)
    settings = _sweep_settings(loader, sweep, is_dl)
    cfg = _config(loader) if is_dl else ()
    workers = dict(cfg).get("num_workers", 0) or 0
    pf = dict(cfg).get("prefetch_factor") or 2
    if warmup is None:
        warmup = workers * pf + 2 if workers else 2
    notes: list[Any] = []
    if is_dl:
        _check_picklable_everywhere(loader, settings, workers, name)
    n_len = _len_or_none(loader)
    torch_threads = _torch_threads()
    plan = _Plan(loader, step_fn, name, steps, warmup, is_dl, cfg, workers, pf, settings, loader_alone,
                 compute_alone, hasattr(loader, "__next__"), progress)
    got = _Passes()
    status = "ok"
    try:
        _loop_passes(plan, got, notes)
        if compute_alone:
            _compute_alone(plan, got)
        if is_dl:
            got.extras["item_s"], got.extras["collate_s"] = _collate_cost(loader)
        if got.main.cuda:
            got.extras["h2d_s"], got.extras["batch_pinned"] = _h2d(got.main.last)
        _sweep_passes(plan, got, sweep_steps, notes)
        if progress is not None:
            progress(1.0, "done")
    except KeyboardInterrupt:
        status = "interrupted"
    finally:
        got.iters.close()
    result = _result(plan, got, status=status, notes=notes, step_source=step_source, n_len=n_len,
                     torch_threads=torch_threads, t_start=t_start)
    if status == "interrupted":
        raise BenchInterrupted(result if result.n_steps else None)
    return result


__all__ = ["dataloader_check", "DataLoaderResult", "SweepPoint", "Finding", "INPUT_BOUND", "usable_cores",
           "check_picklable", "parse_sweep"]
