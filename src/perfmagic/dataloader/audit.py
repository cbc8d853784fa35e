"""The DataLoader audit: its settings read and judged against the numbers measured, and the checks
made before anything runs (can the workers receive the dataset pickled? is the sweep valid?).

:func:`audit` turns a measured loop into :class:`Finding` s (num_workers vs usable cores, pin_memory
and non_blocking copies, persistent_workers, prefetch_factor, batch size, collate cost), each with
its expected effect. :func:`reconcile` sets those predictions against the sweep of the same check (one
story per output: a prediction the sweep measured otherwise gives way to the measurement), and
:func:`load_gap` says when two passes ran under different loads and cannot be compared.
:func:`parse_sweep` checks a ``sweep=`` mapping and expands it into settings;
:func:`_rebuild` builds the DataLoader of one setting over the same dataset and arguments.
"""

from __future__ import annotations

import inspect
import itertools
import math
import pickle
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any

from ..core import stats as _stats
from ..errors import BadOptionError, PerfmagicError
from ..render.dataloader import speed_change
from ..render.units import fmt_time
from .probe import _mean
from ..core.env import usable_cores

INPUT_BOUND = 0.3          # data-wait fraction above which the loop is input-bound
LOADED = 0.3               # other processes busier than this (cores) during the loop: the machine is not quiet
SLOWED = 1.25              # the step with workers running this much slower than alone: they compete for cores
SLOWED_MAYBE = 1.10        # oversubscribed, busy workers, the step this much slower (below SLOWED): no ✓
WORKERS_IDLE = 0.25        # workers using fewer cores than this mostly wait (I/O): they cannot take the step's
_CFG_KEYS = ("num_workers", "batch_size", "pin_memory", "persistent_workers", "prefetch_factor", "drop_last",
             "shuffle", "collate_fn", "multiprocessing_context")


@dataclass(frozen=True)
class Finding:
    """One audit finding: what was found (with the numbers) and the expected effect of the fix."""

    topic: str
    level: str  # "ok" | "info" | "warn"
    message: str
    effect: str = ""
    setting: tuple[tuple[str, Any], ...] = ()  # a predicted effect: the setting it is about ...
    predicted: float | None = None              # ... and the loop's speed there ÷ now (throughput ratio)

    def text(self) -> str:
        mark = {"warn": "!", "info": "·", "ok": "✓"}.get(self.level, "·")
        return f"{mark} {self.topic}: {self.message}" + (f" → {self.effect}" if self.effect else "")


def _per_batch_cost(r: Any) -> float | None:
    """Loader time per batch for one worker (workers × the pool's time per batch)."""
    bps = r.loader_batches_per_s
    return max(1, r.cfg.get("num_workers", 0) or 0) / bps if bps else None


def audit(r: Any) -> list[Finding]:
    """The DataLoader settings audit of a measured loop ``r`` (a DataLoaderResult): one Finding per
    setting, with the expected effect of the fix computed from the numbers measured."""
    if not r.is_dataloader or not r.n_steps:
        return []
    c, out = r.cfg, []
    w, cores, frac = c.get("num_workers", 0) or 0, r.cores, r.data_wait_fraction
    # compute alone when it may be set against the loop (consistent, not loaded differently); else the
    # loop's own compute, measured beside its wait
    comp = r.compute_only_step_s if r.compute_alone_usable else _mean(r.compute_s)
    wait, step = _mean(r.wait_s), r.step_s
    cost = _per_batch_cost(r)
    need = math.ceil(cost / comp) if cost and comp > 0 else None
    if w == 0 and frac > INPUT_BOUND:
        eff, at, pred = "workers load the next batches while the step runs", (), None
        if cost and need:
            k = min(need, cores)
            est = max(comp, cost / k)
            at, pred = (("num_workers", k),), step / est
            eff = (f"{eff}: about {need} worker{'s' if need > 1 else ''} would hide the wait ({fmt_time(cost)} "
                   f"per batch ÷ {fmt_time(comp)} compute); with {k}: step ≈ {fmt_time(est)}, "
                   f"{speed_change(step / est)} ({cores} usable cores)")
        out.append(Finding("num_workers", "warn", f"0: batches load in the main process, in series with the "
                           f"step ({fmt_time(wait)} of each {fmt_time(step)} step)", eff, at, pred))
    elif w == 0:
        out.append(Finding("num_workers", "info", f"0: loading costs {fmt_time(wait)} per step ({frac:.0%})",
                           f"workers would save at most that ({fmt_time(wait)} per step)"))
    else:
        slowed, x, xm, tt = r.step_slowed, r.step_slowdown, r.step_slowdown_mean, r.torch_threads
        wc, oc = r.workers_cores, r.others_cores
        loaded = oc is not None and oc > LOADED
        busy_workers = wc is None or wc >= WORKERS_IDLE   # unknown counts as busy: no ✓ on a guess
        threads = f"{_n(w, 'worker')} + {_n(tt, 'torch thread')}" if tt else _n(w, "worker")
        if wc is not None:
            threads += f" (the workers used {wc:.2f} cores)"
        others = f"; other processes kept {oc:.1f} cores busy meanwhile" if loaded else ""
        # the ✓ needs evidence that the workers do not take the step's cores: its time did not grow with
        # them, and either the machine was quiet or the workers barely used a core (they wait on I/O)
        unsure = False
        gap = r.load_gap("loop", "compute")
        if gap and x is not None:  # the step's time in the loop and alone were taken under different loads
            unsure = True
            out.append(Finding("threads", "info", f"cannot tell whether the workers slow the step: it ran "
                               f"{x:.2f}× its time alone during the loop, but {gap}",
                               "re-run on a quiet machine, or compare --sweep num_workers"))
        elif slowed and x is not None and (busy_workers or not loaded):
            alone = _stats.median(r.compute_only_s)
            t_fix = max(1, cores - w)
            w_fix = w if w + t_fix <= cores else max(1, cores - t_fix)
            fix = ([f"torch.set_num_threads({t_fix})"] if tt and tt > t_fix else []) + \
                  ([f"num_workers={w_fix}"] if w_fix < w else [])
            sweep = ",".join(str(k) for k in range(0, w + 1)) if w <= 4 else f"0,1,{cores},{w}"
            out.append(Finding("threads", "warn",
                               f"{threads} on {cores} usable cores: the step slowed {fmt_time(alone)} → "
                               f"{fmt_time(alone * x)} with workers ({x:.2f}× its time alone, medians){others}",
                               (" and ".join(fix) + f" ({w_fix + t_fix} threads on {cores} cores), or "
                                if fix else "") + f"compare --sweep num_workers={sweep}: the workers and the "
                               "step's threads compete for the same cores"))
        elif slowed and x is not None:  # loaded, and the workers hardly ran: the others slowed the step
            unsure = True
            out.append(Finding("threads", "info", f"the step ran {x:.2f}× its time alone during the loop, but "
                               f"the {_n(w, 'worker')} used only {wc:.2f} cores{others}",
                               "the other processes, not the workers, slowed it: re-run on a quiet machine"))
        elif loaded and busy_workers and x is not None:
            unsure = True
            out.append(Finding("threads", "info", f"cannot tell whether the workers slow the step: {threads} on "
                               f"{cores} usable cores{others}; the step ran {x:.2f}× its time alone with them",
                               "the others' load can hide the workers' effect (or make it): re-run on a quiet "
                               "machine, or compare --sweep num_workers"))
        elif tt and w + tt > cores and busy_workers and x is not None and max(x, xm or x) >= SLOWED_MAYBE:
            # below SLOWED, but the workers burn CPU on an oversubscribed machine and the step did grow (by
            # its median, or on average: busy workers slow only the steps they overlap; a fresh-clone run
            # saw ×1.08 by the median and ×1.31 on average): not enough to blame them, not enough for a ✓
            unsure = True
            avg = f", {xm:.2f}× on average" if xm is not None and abs(xm - x) >= 0.05 else ""
            out.append(Finding("threads", "info", f"cannot tell whether the workers slow the step: {threads} on "
                               f"{cores} usable cores (oversubscribed); the step ran {x:.2f}× its time alone "
                               f"with them (median{avg}; a slowdown counts from {SLOWED:.2f}×)",
                               f"compare --sweep num_workers, or torch.set_num_threads({max(1, cores - w)}) "
                               "and measure again"))
        elif tt and w + tt > cores:
            out.append(Finding("threads", "info", f"{threads} on {cores} usable cores (oversubscribed), but the "
                               f"step did not slow with workers (×{x:.2f})" if x is not None else
                               f"{threads} on {cores} usable cores (oversubscribed)",
                               "fine while the workers mostly wait (I/O); if loading gets CPU-heavy, "
                               f"torch.set_num_threads({max(1, cores - w)})"))
        if w > cores and wc is not None and wc >= 0.5:  # measured: the workers compute, beyond the cores
            out.append(Finding("num_workers", "warn", f"{w} workers > {cores} usable cores, and they used "
                               f"{wc:.2f} cores", "CPU-bound loading gains nothing beyond the cores and "
                               "contends with the main process (sweep to see)"))
        elif w > cores:  # their cost was not seen: no warning on a guess
            used = f"; the workers used {wc:.2f} cores: they mostly wait" if wc is not None else ""
            out.append(Finding("num_workers", "info", f"{w} workers > {cores} usable cores{used}",
                               "fine for loading that waits on I/O; CPU-bound loading gains nothing beyond the "
                               "cores (sweep to see)"))
        if frac > INPUT_BOUND and need:
            more = (f"; more than the {cores} usable cores: make each item cheaper (cache decoded data, "
                    "lighter transforms, augment on the GPU)" if need > cores else "")
            out.append(Finding("num_workers", "warn", f"{_n(w, 'worker')} deliver {1 / (cost / max(w, 1)):.3g} "
                               f"batches/s, the step takes {1 / comp:.3g}/s",
                               f"about {need} workers needed to keep up{more}",
                               (("num_workers", need),) if need <= cores else (), step / comp))
        elif w <= cores and not slowed and not unsure:
            out.append(Finding("num_workers", "ok", f"{_n(w, 'worker')} on {cores} usable cores keep up "
                               f"(data wait {frac:.0%})"))
        elif w <= cores and unsure:
            out.append(Finding("num_workers", "info", f"{_n(w, 'worker')} keep up with the step (data wait "
                               f"{frac:.0%}); whether they slow it cannot be told (see threads)"))
        elif w <= cores:
            out.append(Finding("num_workers", "warn", f"{_n(w, 'worker')} keep up with the step (data wait "
                               f"{frac:.0%}) only because they slowed it (see threads)",
                               "the loop's step time is not the step's own: fix the threads first"))
    pin, nb = bool(c.get("pin_memory")), r.copies_non_blocking
    h2d = f" (one batch's copy: {fmt_time(r.h2d_s)})" if r.h2d_s is not None else ""
    if r.cuda and not pin:
        out.append(Finding("pin_memory", "warn", f"False while the step uses CUDA: copies come from pageable "
                           f"memory and block{h2d}", "pin_memory=True with .to(device, non_blocking=True): "
                           "faster copies (typically 2–6×) that overlap compute"))
    elif r.cuda and nb is False:
        out.append(Finding("pin_memory", "warn", f"True, but the step's copies are not non_blocking=True{h2d}",
                           "non_blocking=True lets the copy of the batch overlap the previous compute"))
    elif r.cuda:
        out.append(Finding("pin_memory", "ok", f"True with non_blocking copies{h2d}" if nb
                           else f"True{h2d}"))
    elif pin:
        out.append(Finding("pin_memory", "info", "True but the step does not use CUDA",
                           "pin_memory=False saves the page-locked copy of every batch"))
    if w:
        rs = r.respawn_s
        if rs is not None:
            n = r.loader_len
            epoch = n * step if n else None
            share = f" ({rs / (epoch + rs):.1%} of an epoch of {n} batches)" if epoch else ""
            # a warning only where the cost is measured to matter (> 2% of an epoch of known length)
            out.append(Finding("persistent_workers", "warn" if epoch is not None and rs > 0.02 * epoch else "info",
                               f"False: the {_n(w, 'worker')} re-spawn every epoch, {fmt_time(rs)} before its first "
                               "batch", f"persistent_workers=True saves about {fmt_time(rs)} per epoch{share}"))
        elif c.get("persistent_workers"):
            out.append(Finding("persistent_workers", "ok", "True: workers are kept between epochs"))
        pf = c.get("prefetch_factor") or 2
        waits = sorted(r.wait_s)
        p90, med = _stats.quantile(waits, 0.9), _stats.median(waits)
        if frac > INPUT_BOUND:
            eff = ("a larger prefetch_factor does not raise throughput when the workers are slower than the step "
                   "on average; it only absorbs jitter")
        elif p90 > 3 * med + 1e-3:
            eff = (f"occasional stalls (p90 wait {fmt_time(p90)} vs median {fmt_time(med)}): a larger "
                   "prefetch_factor absorbs them")
        else:
            eff = "enough: the waits are short and even"
        out.append(Finding("prefetch_factor", "info", f"{pf}: up to {w * pf} batches in flight", eff))
    bs = c.get("batch_size")
    if bs:
        msg = f"{bs}: {bs / step:.4g} samples/s through the loop"
        eff = ""
        if comp < 1e-3:
            eff = (f"the step is short ({fmt_time(comp)}): per-batch overheads weigh; a larger batch amortizes "
                   "them (sweep batch_size)")
        out.append(Finding("batch_size", "info", msg, eff))
    if r.collate_s is not None and r.item_s:
        fetch = sum(r.item_s) + r.collate_s
        share = r.collate_s / fetch if fetch > 0 else 0.0
        msg = (f"{fmt_time(r.collate_s)} per batch, {share:.0%} of fetching it "
               f"({len(r.item_s)} items × {fmt_time(_mean(r.item_s))})")
        if share > 0.2:
            out.append(Finding("collate_fn", "warn", msg, "a cheaper collate (pre-stacked arrays, a batched "
                               f"__getitems__) saves up to {fmt_time(r.collate_s)} per batch per worker"))
        else:
            out.append(Finding("collate_fn", "ok", msg))
    return out


# ---- one story per output: predictions set against the measurements of the same check -------------

_PHASES = {"loop": "the loop", "loader": "the loader-alone pass", "compute": "compute alone"}


def load_gap(phases: Sequence[tuple[str, float | None]]) -> str | None:
    """Why passes cannot be compared: some were loaded (other processes above :data:`LOADED` cores) and
    others measured quiet, or all loaded but unevenly (more than LOADED cores apart) -> "other processes
    used 1.0 cores during compute alone and 0.0 cores during the loop". None when they can be: all quiet,
    all evenly loaded (each number flagged), or a load not measured."""
    known = [(n, x) for n, x in phases if x is not None]
    busy = [(n, x) for n, x in known if x > LOADED]
    if not busy or (len(busy) == len(known) and max(x for _, x in busy) - min(x for _, x in busy) <= LOADED):
        return None
    said = [f"{x:.1f} cores during {_PHASES.get(n, n)}" for n, x in sorted(known, key=lambda nx: -nx[1])]
    return "other processes used " + ", ".join(said[:-1]) + " and " + said[-1]


def _swept(r: Any, workers: int | None = None) -> list[Any]:
    """The measured sweep points that differ from the loader's own settings in num_workers at most
    (and have ``workers`` of them, when given)."""
    own, w, out = r.cfg, r.cfg.get("num_workers", 0) or 0, []
    for p in r.sweep:
        s = dict(p.setting)
        pw = s.get("num_workers", w) or 0
        if p.ok and (workers is None or pw == workers) and \
                all(v == own.get(k) for k, v in s.items() if k != "num_workers"):
            out.append(p)
    return out


def _the_loop(r: Any, w: int) -> Any:
    """The check's own loop as a sweep point (the baseline when the sweep did not measure the loader's own
    setting)."""
    bs = r.cfg.get("batch_size") or 1
    return SimpleNamespace(label=f"num_workers={w} (the loop above)", setting=(("num_workers", w),),
                           compute_s=r.compute_s, step_s=r.step_s, data_wait_fraction=r.data_wait_fraction,
                           throughput=bs / r.step_s if r.step_s > 0 else math.nan,
                           others_cores=r.others_cores, workers_cores=r.workers_cores)


def _why(r: Any, base: Any, new: Any, k: int) -> str:
    """What the sweep measured that explains a setting's speed (compute grown, data still waited for)."""
    cb, cn = _stats.median(base.compute_s), _stats.median(new.compute_s)
    if cb > 0 and cn / cb >= SLOWED:
        who = f"the step's {_n(r.torch_threads, 'torch thread')}" if r.torch_threads else "the step"
        return (f"the step's compute grew {fmt_time(cb)} → {fmt_time(cn)} with {_n(k, 'worker')}: {who} and the "
                f"workers share {r.cores} cores")
    if new.data_wait_fraction > INPUT_BOUND:
        used = f" (its workers used {new.workers_cores:.2f} cores)" if new.workers_cores is not None else ""
        return f"the loop still waited for data {new.data_wait_fraction:.0%} of each step there{used}"
    return f"its step took {fmt_time(new.step_s)} vs {fmt_time(base.step_s)}"


def reconcile(findings: list[Finding], r: Any) -> list[Finding]:
    """Each prediction (a Finding's ``setting`` and ``predicted`` speed ratio) set against the sweep of the
    same check: where the sweep measured that setting (or, failing it, every other num_workers) and got
    less than half the predicted gain, the prediction is not printed and the finding states the
    measurement and what explains it; where it agrees, the measurement is added; where the two passes ran
    under different loads, it says it cannot tell."""
    if not r.sweep:
        return findings
    out = []
    for f in findings:
        if not f.setting or f.predicted is None or dict(f.setting).keys() != {"num_workers"}:
            out.append(f)
            continue
        k, w = dict(f.setting)["num_workers"], r.cfg.get("num_workers", 0) or 0
        bases, news = _swept(r, w), _swept(r, k)
        cands = [p for p in _swept(r) if (dict(p.setting).get("num_workers", w) or 0) not in (0, w)]
        if not cands or not (bases or r.n_steps):
            out.append(f)
            continue
        base = bases[0] if bases else _the_loop(r, w)
        new = news[0] if news else None
        best = max(cands, key=lambda p: p.throughput)
        shown = [p for p in (new, best) if p is not None]
        shown = shown[:1] if len(shown) == 2 and shown[0] is shown[1] else shown
        if base.throughput != base.throughput or base.throughput <= 0:
            out.append(f)
            continue
        ms = [p.throughput / base.throughput for p in shown]
        said = ("the sweep measured " + " and ".join(f"{p.label} at {m:.2f}×" for p, m in zip(shown, ms))
                + f" the throughput of {base.label}")
        gap = load_gap([(p.label, p.others_cores) for p in [base] + shown])
        if gap:
            out.append(replace(f, effect=f"{f.effect}; {said}, but cannot tell whether that bears it out, "
                               f"because {gap}"))
        elif max(ms) >= 1 + 0.5 * (f.predicted - 1):  # some worker setting reached at least half the gain
            out.append(replace(f, effect=f"{f.effect}; {said}"))
        else:  # refuted: the measurement replaces the prediction
            m = ms[0]
            verdict = "workers do not help here" if max(ms) < 1.05 else "workers gain far less than the wait suggests"
            if new is None:
                said = (f"no num_workers in the sweep came near that: the best, {best.label}, ran at {m:.2f}× the "
                        f"throughput of {base.label}")
            p = shown[0]
            nw = dict(p.setting).get("num_workers", w) or 0
            out.append(replace(f, level="info" if max(ms) < 1.05 else f.level, setting=(), predicted=None,
                               effect=f"{said}: {verdict}, because {_why(r, base, p, nw)}"))
    return out


def _n(k: int, word: str) -> str:
    return f"{k} {word}" + ("" if k == 1 else "s")


def jsonable(v: Any) -> Any:
    """A setting as JSON can keep it: scalars as they are, a class or function by its name, else its repr."""
    return v if v is None or isinstance(v, (bool, int, float, str)) else getattr(v, "__name__", repr(v))


# ---- the loader's settings, pickling ----------------------------------------------------------------

def _is_dataloader(loader: Any) -> bool:
    if "torch" not in sys.modules:
        return False
    from torch.utils.data import DataLoader

    return isinstance(loader, DataLoader)


def _config(loader: Any) -> tuple[tuple[str, Any], ...]:
    out = []
    for k in _CFG_KEYS:
        if k == "shuffle":
            s = getattr(loader, "sampler", None)
            out.append((k, type(s).__name__ == "RandomSampler") if s is not None else (k, None))
        elif hasattr(loader, k):
            v = getattr(loader, k)
            if k == "prefetch_factor" and v is None and getattr(loader, "num_workers", 0):
                v = 2
            out.append((k, jsonable(v)))
    return tuple(out)


def _start_method(loader: Any) -> str:
    ctx = getattr(loader, "multiprocessing_context", None)
    if ctx is not None:
        return ctx.get_start_method() if hasattr(ctx, "get_start_method") else str(ctx)
    import multiprocessing

    return multiprocessing.get_start_method(allow_none=True) or multiprocessing.get_context().get_start_method()


def check_picklable(loader: Any, what: str = "the DataLoader") -> None:
    """Workers started with spawn/forkserver receive the dataset pickled: fail early with a clear message."""
    if not getattr(loader, "num_workers", 0) or _start_method(loader) == "fork":
        return
    for name in ("dataset", "collate_fn", "worker_init_fn"):
        obj = getattr(loader, name, None)
        if obj is None:
            continue
        try:
            pickle.dumps(obj)
        except Exception as exc:
            raise PerfmagicError(
                f"{what}: its {name} ({type(obj).__name__}) cannot be pickled for the worker processes "
                f"(start method {_start_method(loader)!r}): {type(exc).__name__}: {exc}. Define it at module level "
                "in a .py file (not a lambda, a local class or an object holding a lock/open file), or use "
                "num_workers=0, or multiprocessing_context='fork' on Linux") from None


def _rebuild(loader: Any, setting: Mapping[str, Any]) -> Any:
    """A DataLoader over the same dataset with the same arguments, ``setting`` overriding."""
    from torch.utils.data import DataLoader, IterableDataset

    params = inspect.signature(DataLoader.__init__).parameters
    skip = {"self", "dataset", "batch_size", "shuffle", "sampler", "batch_sampler", "drop_last"}
    kw: dict[str, Any] = {k: getattr(loader, k) for k in params if k not in skip and hasattr(loader, k)}
    iterable = isinstance(loader.dataset, IterableDataset)
    if loader.batch_size is not None or "batch_size" in setting:
        kw.update(batch_size=loader.batch_size or 1, drop_last=loader.drop_last)
        if not iterable:
            kw["sampler"] = loader.sampler
    elif not iterable:
        kw.update(batch_size=None, sampler=loader.sampler)
        if loader.batch_sampler is not None:
            kw = {k: v for k, v in kw.items() if k not in ("sampler", "batch_size")}
            kw["batch_sampler"] = loader.batch_sampler
    if "shuffle" in setting and not iterable:
        kw.pop("sampler", None)
    kw.update(setting)
    if not kw.get("num_workers"):
        kw.update(prefetch_factor=None, persistent_workers=False, multiprocessing_context=None)
    return DataLoader(loader.dataset, **kw)


class _Proxy:
    """The loader's pickling-relevant attributes with a sweep setting applied (no DataLoader built)."""

    def __init__(self, loader: Any, setting: Mapping[str, Any]) -> None:
        self.dataset = loader.dataset
        self.collate_fn = setting.get("collate_fn", loader.collate_fn)
        self.worker_init_fn = setting.get("worker_init_fn", loader.worker_init_fn)
        self.num_workers = setting.get("num_workers", loader.num_workers)
        self.multiprocessing_context = setting.get("multiprocessing_context", loader.multiprocessing_context)
        if isinstance(self.multiprocessing_context, str):
            import multiprocessing

            self.multiprocessing_context = multiprocessing.get_context(self.multiprocessing_context)


# ---- the sweep ------------------------------------------------------------------------------------

# DataLoader arguments whose values perfmagic can check before building a loader: (kind, least value)
_SWEEP_INTS = {"num_workers": (0, False), "batch_size": (1, True), "prefetch_factor": (1, True)}  # (min, None ok)
_SWEEP_BOOLS = ("pin_memory", "persistent_workers", "drop_last", "shuffle", "in_order")


def _check_sweep_value(name: str, value: Any) -> None:
    """Refuse a sweep value the DataLoader would choke on (``num_workers=a``), naming what it takes."""
    if name in _SWEEP_INTS:
        least, none_ok = _SWEEP_INTS[name]
        if value is None and none_ok:
            return
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise BadOptionError(f"--sweep {name}", value, f"whole numbers >= {least}"
                                 + (" (or None)" if none_ok else ""), f"e.g. --sweep {name}={least},{least + 1},{least + 2}")
    elif name in _SWEEP_BOOLS and not isinstance(value, bool):
        raise BadOptionError(f"--sweep {name}", value, "True or False", f"e.g. --sweep {name}=False,True")
    elif name == "timeout" and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0):
        raise BadOptionError("--sweep timeout", value, "seconds >= 0", "e.g. --sweep timeout=0,10")


def parse_sweep(sweep: Mapping[str, Sequence[Any]] | None) -> list[dict[str, Any]]:
    if not sweep:
        return []
    from torch.utils.data import DataLoader

    valid = [k for k in inspect.signature(DataLoader.__init__).parameters if k not in ("self", "dataset")]
    for k, vs in sweep.items():
        if k not in valid:
            raise BadOptionError("--sweep", k, f"a DataLoader argument: one of {', '.join(valid)}",
                                 "e.g. --sweep num_workers=0,1,2,4")
        if not vs:
            raise BadOptionError("--sweep", f"{k}=", "at least one value", f"e.g. --sweep {k}=0,1,2,4")
        for v in vs:
            _check_sweep_value(k, v)
    keys = list(sweep)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(sweep[k] for k in keys))]


__all__ = ["Finding", "INPUT_BOUND", "LOADED", "audit", "check_picklable", "load_gap", "parse_sweep", "reconcile",
           "usable_cores"]
