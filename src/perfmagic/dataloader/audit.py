"""The DataLoader audit: its settings read and judged against the numbers measured, and the checks
made before anything runs (can the workers receive the dataset pickled? is the sweep valid?).

:func:`audit` turns a measured loop into :class:`Finding` s (num_workers vs usable cores, pin_memory
and non_blocking copies, persistent_workers, prefetch_factor, batch size, collate cost), each with
its expected effect, as data (a kind and its numbers: :mod:`perfmagic.render.dataloader_audit` writes the
words). :func:`reconcile` sets those predictions against the sweep of the same check (one
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
from .probe import _mean
from ..core.load import usable_cores

INPUT_BOUND = 0.3          # data-wait fraction above which the loop is input-bound
LOADED = 0.3               # other processes busier than this (cores) during the loop: the machine is not quiet
SLOWED = 1.25              # the step with workers running this much slower than alone: they compete for cores
SLOWED_MAYBE = 1.10        # oversubscribed, busy workers, the step this much slower (below SLOWED): no ✓
WORKERS_IDLE = 0.25        # workers using fewer cores than this mostly wait (I/O): they cannot take the step's
_CFG_KEYS = ("num_workers", "batch_size", "pin_memory", "persistent_workers", "prefetch_factor", "drop_last",
             "shuffle", "collate_fn", "multiprocessing_context")


@dataclass(frozen=True)
class Finding:
    """One audit finding as data: the setting it is about (``topic``), how much it matters (``level``), what
    was found (``kind``, e.g. ``"workers.too-few"``) with its numbers (``values``), the prediction it makes,
    and what the sweep of the same check measured of that prediction (``sweep``, set by :func:`reconcile`).
    :mod:`perfmagic.render.dataloader_audit` writes its words: :attr:`message` (what was found) and
    :attr:`effect` (the expected effect of the fix)."""

    topic: str
    level: str  # "ok" | "info" | "warn"
    kind: str
    values: tuple[tuple[str, Any], ...] = ()
    setting: tuple[tuple[str, Any], ...] = ()  # a predicted effect: the setting it is about ...
    predicted: float | None = None              # ... and the loop's speed there ÷ now (throughput ratio)
    sweep: tuple[tuple[str, Any], ...] = ()     # the sweep's measurement of the prediction (reconcile)

    @classmethod
    def of(cls, topic: str, level: str, kind: str, *, setting: tuple[tuple[str, Any], ...] = (),
           predicted: float | None = None, **values: Any) -> Finding:
        return cls(topic, level, kind, tuple(values.items()), setting, predicted)

    def get(self, name: str, default: Any = None) -> Any:
        return dict(self.values).get(name, default)

    def __getitem__(self, name: str) -> Any:
        return dict(self.values)[name]

    @property
    def message(self) -> str:
        """What was found, with the numbers."""
        from ..render.dataloader_audit import message

        return message(self)

    @property
    def effect(self) -> str:
        """The expected effect of the fix, and what the sweep measured of it."""
        from ..render.dataloader_audit import effect

        return effect(self)

    def text(self) -> str:
        from ..render.dataloader_audit import line

        return line(self)

    def to_dict(self) -> dict[str, Any]:
        """The finding as the ledger keeps it: its data, and its words as they were shown."""
        return {"topic": self.topic, "level": self.level, "kind": self.kind, "values": dict(self.values),
                "setting": [list(x) for x in self.setting], "predicted": self.predicted,
                "sweep": dict(self.sweep), "message": self.message, "effect": self.effect}


def _per_batch_cost(r: Any) -> float | None:
    """Loader time per batch for one worker (workers × the pool's time per batch)."""
    bps = r.loader_batches_per_s
    return max(1, r.cfg.get("num_workers", 0) or 0) / bps if bps else None


@dataclass(frozen=True)
class _Loop:
    """What every check of :func:`audit` reads of the measured loop."""

    w: int                  # num_workers
    cores: int
    frac: float             # data-wait fraction
    comp: float             # compute per step (alone when usable, else the loop's own)
    wait: float
    step: float
    cost: float | None      # loader time per batch for one worker
    need: int | None        # workers needed to keep up


def _loop(r: Any) -> _Loop:
    # compute alone when it may be set against the loop (consistent, not loaded differently); else the
    # loop's own compute, measured beside its wait
    comp = r.compute_only_step_s if r.compute_alone_usable else _mean(r.compute_s)
    cost = _per_batch_cost(r)
    need = math.ceil(cost / comp) if cost and comp > 0 else None
    return _Loop(r.cfg.get("num_workers", 0) or 0, r.cores, r.data_wait_fraction, comp, _mean(r.wait_s), r.step_s,
                 cost, need)


def _no_workers(r: Any, L: _Loop) -> Finding:
    """num_workers=0: loading in series with the step, and the workers that would hide it."""
    if L.frac <= INPUT_BOUND:
        return Finding.of("num_workers", "info", "workers.none", wait=L.wait, frac=L.frac)
    if not (L.cost and L.need):
        return Finding.of("num_workers", "warn", "workers.none-input-bound", wait=L.wait, step=L.step)
    k = min(L.need, L.cores)
    est = max(L.comp, L.cost / k)
    return Finding.of("num_workers", "warn", "workers.none-input-bound", setting=(("num_workers", k),),
                      predicted=L.step / est, wait=L.wait, step=L.step, need=L.need, cost=L.cost, comp=L.comp, k=k,
                      est=est, cores=L.cores)


def _threads(r: Any, L: _Loop) -> tuple[Finding | None, bool]:
    """Do the workers take the step's cores? A finding (or none), and whether that cannot be told."""
    w, cores = L.w, L.cores
    slowed, x, xm, tt = r.step_slowed, r.step_slowdown, r.step_slowdown_mean, r.torch_threads
    wc, oc = r.workers_cores, r.others_cores
    loaded = oc is not None and oc > LOADED
    busy_workers = wc is None or wc >= WORKERS_IDLE   # unknown counts as busy: no ✓ on a guess
    who = dict(w=w, tt=tt, wc=wc, oc=oc if loaded else None, cores=cores, x=x)
    # the ✓ needs evidence that the workers do not take the step's cores: its time did not grow with
    # them, and either the machine was quiet or the workers barely used a core (they wait on I/O)
    gap = r.load_gap("loop", "compute")
    if gap and x is not None:  # the step's time in the loop and alone were taken under different loads
        return Finding.of("threads", "info", "threads.loads-differ", gap=gap, **who), True
    if x is not None and r.pause_explains:  # measured: the step after a pause, with the workers stopped
        return Finding.of("threads", "info", "threads.pause-slowed",
                          paused=_stats.median(r.compute_paused_s), pause=r.pause_s,
                          alone=_stats.median(r.compute_only_s), **who), False
    if slowed and x is not None and wc is not None and wc < WORKERS_IDLE and not loaded:
        # the workers hardly ran and nothing else did: they did not take the step's cores (what did slow it,
        # a pause or something in the loop, was not reproduced: cannot tell)
        return Finding.of("threads", "info", "threads.idle-slowed", pause_share=r.pause_share, pause=r.pause_s,
                          **who), True
    if slowed and x is not None and (busy_workers or not loaded):
        t_fix = max(1, cores - w)
        w_fix = w if w + t_fix <= cores else max(1, cores - t_fix)
        sweep = ",".join(str(k) for k in range(0, w + 1)) if w <= 4 else f"0,1,{cores},{w}"
        return Finding.of("threads", "warn", "threads.slowed", alone=_stats.median(r.compute_only_s), t_fix=t_fix,
                          w_fix=w_fix, fix_threads=bool(tt and tt > t_fix), fix_workers=w_fix < w, sweep=sweep,
                          **who), False
    if slowed and x is not None:  # loaded, and the workers hardly ran: the others slowed the step
        return Finding.of("threads", "info", "threads.others-slowed", **who), True
    if loaded and busy_workers and x is not None:
        return Finding.of("threads", "info", "threads.loaded", **who), True
    if tt and w + tt > cores and busy_workers and x is not None and max(x, xm or x) >= SLOWED_MAYBE:
        # below SLOWED, but the workers burn CPU on an oversubscribed machine and the step did grow (by
        # its median, or on average: busy workers slow only the steps they overlap; a fresh-clone run
        # saw ×1.08 by the median and ×1.31 on average): not enough to blame them, not enough for a ✓
        return Finding.of("threads", "info", "threads.oversubscribed-grew", xm=xm, slowed_at=SLOWED,
                          t_fix=max(1, cores - w), **who), True
    if tt and w + tt > cores:
        return Finding.of("threads", "info", "threads.oversubscribed", t_fix=max(1, cores - w),
                          grew=x is not None and x >= SLOWED_MAYBE, **who), False
    return None, False


def _worker_count(r: Any, L: _Loop, unsure: bool) -> list[Finding]:
    """num_workers > 0: beyond the cores? enough to keep up, and only because they slowed the step?"""
    w, cores, wc, out = L.w, L.cores, r.workers_cores, []
    if w > cores and wc is not None and wc >= 0.5:  # measured: the workers compute, beyond the cores
        out.append(Finding.of("num_workers", "warn", "workers.beyond-cores-busy", w=w, cores=cores, wc=wc))
    elif w > cores:  # their cost was not seen: no warning on a guess
        out.append(Finding.of("num_workers", "info", "workers.beyond-cores", w=w, cores=cores, wc=wc))
    if L.frac > INPUT_BOUND and L.need:
        out.append(Finding.of("num_workers", "warn", "workers.too-few",
                              setting=(("num_workers", L.need),) if L.need <= cores else (),
                              predicted=L.step / L.comp, w=w, cost=L.cost, comp=L.comp, need=L.need, cores=cores,
                              wc=wc))
    elif L.frac > INPUT_BOUND:  # input-bound, the loader's own cost not measured: behind, by how much unknown
        out.append(Finding.of("num_workers", "warn", "workers.behind", w=w, frac=L.frac, wait=L.wait, step=L.step))
    elif w <= cores:
        blamed = r.step_slowed and not r.pause_explains  # (idle workers with the step slowed: unsure)
        kind = ("workers.keep-up-unsure" if unsure else "workers.keep-up-slowed" if blamed
                else "workers.keep-up")
        level = "info" if unsure else "warn" if blamed else "ok"
        out.append(Finding.of("num_workers", level, kind, w=w, cores=cores, frac=L.frac))
    return out


def _pin_memory(r: Any) -> Finding | None:
    """pin_memory and non_blocking copies, when the step uses CUDA (or pins for nothing)."""
    pin, nb, h2d = bool(r.cfg.get("pin_memory")), r.copies_non_blocking, r.h2d_s
    if r.cuda and not pin:
        return Finding.of("pin_memory", "warn", "pin.pageable", h2d=h2d)
    if r.cuda and nb is False:
        return Finding.of("pin_memory", "warn", "pin.blocking", h2d=h2d)
    if r.cuda:
        return Finding.of("pin_memory", "ok", "pin.ok", h2d=h2d, nb=bool(nb))
    if pin:
        return Finding.of("pin_memory", "info", "pin.no-cuda")
    return None


def _worker_settings(r: Any, L: _Loop) -> list[Finding]:
    """persistent_workers (the re-spawn cost per epoch) and prefetch_factor (stalls it could absorb)."""
    out, w = [], L.w
    rs = r.respawn_s
    if rs is not None:
        n = r.loader_len
        epoch = n * L.step if n else None
        # a warning only where the cost is measured to matter (> 2% of an epoch of known length)
        out.append(Finding.of("persistent_workers", "warn" if epoch is not None and rs > 0.02 * epoch else "info",
                              "persistent.respawn", w=w, respawn=rs, batches=n,
                              share=rs / (epoch + rs) if epoch else None))
    elif r.cfg.get("persistent_workers"):
        out.append(Finding.of("persistent_workers", "ok", "persistent.kept"))
    pf = r.cfg.get("prefetch_factor") or 2
    waits = sorted(r.wait_s)
    p90, med = _stats.quantile(waits, 0.9), _stats.median(waits)
    why = "input-bound" if L.frac > INPUT_BOUND else "stalls" if p90 > 3 * med + 1e-3 else "even"
    out.append(Finding.of("prefetch_factor", "info", "prefetch", pf=pf, w=w, why=why, p90=p90, median=med))
    return out


def _batch(r: Any, L: _Loop) -> list[Finding]:
    """batch_size (per-batch overheads of a short step) and the collate function's share of fetching."""
    out, bs = [], r.cfg.get("batch_size")
    if bs:
        out.append(Finding.of("batch_size", "info", "batch-size", bs=bs, rate=bs / L.step,
                              short_step=L.comp if L.comp < 1e-3 else None))
    if r.collate_s is not None and r.item_s:
        fetch = sum(r.item_s) + r.collate_s
        share = r.collate_s / fetch if fetch > 0 else 0.0
        out.append(Finding.of("collate_fn", "warn" if share > 0.2 else "ok", "collate", collate=r.collate_s,
                              share=share, items=len(r.item_s), item=_mean(r.item_s)))
    return out


def audit(r: Any) -> list[Finding]:
    """The DataLoader settings audit of a measured loop ``r`` (a DataLoaderResult): one Finding per
    setting, with the expected effect of the fix computed from the numbers measured."""
    if not r.is_dataloader or not r.n_steps:
        return []
    L = _loop(r)
    if L.w == 0:
        out = [_no_workers(r, L)]
    else:
        th, unsure = _threads(r, L)
        out = ([th] if th is not None else []) + _worker_count(r, L, unsure)
    pin = _pin_memory(r)
    out += ([pin] if pin is not None else []) + (_worker_settings(r, L) if L.w else []) + _batch(r, L)
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
    from ..render.dataloader_audit import loop_label

    bs = r.cfg.get("batch_size") or 1
    return SimpleNamespace(label=loop_label(w), setting=(("num_workers", w),),
                           compute_s=r.compute_s, step_s=r.step_s, data_wait_fraction=r.data_wait_fraction,
                           throughput=bs / r.step_s if r.step_s > 0 else math.nan,
                           others_cores=r.others_cores, workers_cores=r.workers_cores)


def _why(r: Any, base: Any, new: Any, k: int) -> tuple[tuple[str, Any], ...]:
    """What the sweep measured that explains a setting's speed (compute grown, data still waited for)."""
    cb, cn = _stats.median(base.compute_s), _stats.median(new.compute_s)
    if cb > 0 and cn / cb >= SLOWED:
        return (("why", "compute-grew"), ("before", cb), ("after", cn), ("k", k), ("tt", r.torch_threads),
                ("cores", r.cores))
    if new.data_wait_fraction > INPUT_BOUND:
        return ("why", "still-waits"), ("frac", new.data_wait_fraction), ("wc", new.workers_cores)
    return ("why", "step"), ("step", new.step_s), ("base_step", base.step_s)


def reconcile(findings: list[Finding], r: Any) -> list[Finding]:
    """Each prediction (a Finding's ``setting`` and ``predicted`` speed ratio) set against the sweep of the
    same check: where the sweep measured that setting (or, failing it, every other num_workers) and got
    less than half the predicted gain, the prediction is not printed and the finding states the
    measurement and what explains it; where it agrees, the measurement is added; where the two passes ran
    under different loads, it says it cannot tell."""
    if not r.sweep:
        return findings
    return [_reconciled(f, r) if f.setting and f.predicted is not None and dict(f.setting).keys() == {"num_workers"}
            else f for f in findings]


def _reconciled(f: Finding, r: Any) -> Finding:
    """One prediction set against the sweep (:func:`reconcile`)."""
    k, w = dict(f.setting)["num_workers"], r.cfg.get("num_workers", 0) or 0
    bases, news = _swept(r, w), _swept(r, k)
    cands = [p for p in _swept(r) if (dict(p.setting).get("num_workers", w) or 0) not in (0, w)]
    if not cands or not (bases or r.n_steps):
        return f
    base = bases[0] if bases else _the_loop(r, w)
    new = news[0] if news else None
    best = max(cands, key=lambda p: p.throughput)
    shown = [p for p in (new, best) if p is not None]
    shown = shown[:1] if len(shown) == 2 and shown[0] is shown[1] else shown
    if base.throughput != base.throughput or base.throughput <= 0:
        return f
    ms = [p.throughput / base.throughput for p in shown]
    said = (("shown", tuple((p.label, m) for p, m in zip(shown, ms))), ("base", base.label))
    gap = load_gap([(p.label, p.others_cores) for p in [base] + shown])
    if gap:
        return replace(f, sweep=(("outcome", "unclear"), *said, ("gap", gap)))
    if max(ms) >= 1 + 0.5 * (f.predicted - 1):  # some worker setting reached at least half the gain
        return replace(f, sweep=(("outcome", "agrees"), *said))
    # refuted: the measurement replaces the prediction
    p = shown[0]
    nw = dict(p.setting).get("num_workers", w) or 0
    return replace(f, level="info" if max(ms) < 1.05 else f.level, setting=(), predicted=None,
                   sweep=(("outcome", "refuted"), *said, ("none_near", new is None), ("best", max(ms)),
                          *_why(r, base, p, nw)))


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
