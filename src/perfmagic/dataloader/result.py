"""What a dataloader check found: the raw per-step samples and everything derived from them.

:class:`DataLoaderResult` keeps the samples (wait and compute per step, the loader alone, the step
alone, GPU spans, the sweep's :class:`SweepPoint` s) and the load of other processes during each pass;
every statistic, the verdict and the audit (:func:`perfmagic.dataloader.audit.audit`, reconciled with
the sweep) are derived on demand, and so is what may be compared with what (:meth:`DataLoaderResult.load_gap`,
:attr:`DataLoaderResult.compute_disagreement`). Text, figure and HTML sections are
drawn by :mod:`perfmagic.render.dataloader`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from ..core import stats as _stats
from ..findings import Finding as Note
from ..result import Displayed
from .audit import INPUT_BOUND, LOADED, SLOWED, Finding, jsonable, audit, load_gap, reconcile
from .probe import _fraction, _mean

PLATEAU = 0.90             # a sweep setting within 10% of the best throughput is on the plateau
DISAGREE = 1.5             # compute alone vs the loop's compute: further apart than this either way is named
PAUSE_SHARE = 0.5          # the step after a pause made up this share of that gap (or more): the pause explains it
DEFAULT_STEPS = 20


def pause_gap(config: Any) -> float:
    """How much slower than back to back the loop's compute must run for the step to be timed after pauses:
    :data:`DISAGREE` without workers; with workers :data:`~.audit.SLOWED`, where a slowed step would otherwise be
    blamed on them (the paused calls run with the workers stopped, so they tell the pause from the workers:
    notebook 10's idle workers, 0.10 cores, were blamed for a step 1.81× slower in the loop)."""
    return SLOWED if dict(config).get("num_workers") else DISAGREE


@dataclass(frozen=True)
class SweepPoint:
    """The loop measured at one rebuilt-loader setting."""

    setting: tuple[tuple[str, Any], ...]
    wait_s: tuple[float, ...] = ()
    compute_s: tuple[float, ...] = ()
    first_batch_s: float | None = None
    batch_size: int | None = None
    error: str | None = None
    workers_cores: float | None = None        # cores its workers used over the measured steps
    others_cores: float | None = None         # cores other processes kept busy meanwhile

    @property
    def loaded(self) -> bool:
        return self.others_cores is not None and self.others_cores > LOADED

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.setting)

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.wait_s)

    @property
    def step_s(self) -> float:
        return _mean([w + c for w, c in zip(self.wait_s, self.compute_s)])

    @property
    def data_wait_fraction(self) -> float:
        return _fraction(self.wait_s, self.compute_s)

    @property
    def throughput(self) -> float:
        """Samples per second through the loop (batches per second when the batch size is unknown)."""
        s = self.step_s
        return (self.batch_size or 1) / s if s > 0 else math.nan


@dataclass(frozen=True, repr=False)
class DataLoaderResult(Displayed):
    """Everything measured; every statistic is derived from the raw per-step samples kept here."""

    primary_metric: ClassVar[str] = "data_wait_fraction"
    renderer: ClassVar[str] = "dataloader"
    figure_alt: ClassVar[str] = "per-step wait and compute, sweep"
    PLATEAU: ClassVar[float] = PLATEAU
    LOADED: ClassVar[float] = LOADED
    INPUT_BOUND: ClassVar[float] = INPUT_BOUND

    wait_s: tuple[float, ...]                 # steady-state steps: time blocked in next()
    compute_s: tuple[float, ...]              # steady-state steps: the step (synchronized)
    warmup_wait_s: tuple[float, ...] = ()
    warmup_compute_s: tuple[float, ...] = ()
    first_batch_s: float | None = None        # iter() + first batch: worker start-up
    loader_s: tuple[float, ...] = ()          # loader alone: per-batch fetch, steady state
    loader_first_batch_s: float | None = None  # second pass's start-up: re-spawn cost per epoch
    compute_only_s: tuple[float, ...] = ()    # the step on a cached batch
    compute_paused_s: tuple[float, ...] = ()  # ... each call after a pause as long as the loop's wait (pause_s)
    pause_s: float | None = None
    gpu_busy_s: tuple[float, ...] = ()        # CUDA event span of each measured step
    h2d_s: float | None = None                # host->device copy of one batch
    batch_pinned: bool | None = None
    copies_non_blocking: bool | None = None   # from the step's source; None: no copy seen / unknown
    item_s: tuple[float, ...] = ()            # dataset[i] for a batch's worth of items
    collate_s: float | None = None
    sweep: tuple[SweepPoint, ...] = ()
    config: tuple[tuple[str, Any], ...] = ()
    is_dataloader: bool = False
    cuda: bool = False
    cores: int = 1
    torch_threads: int | None = None          # torch.get_num_threads() in the main process (intra-op pool)
    workers_cores: float | None = None        # cores the worker processes used in the steady state (measured)
    others_cores: float | None = None         # cores other processes (not the workers) kept busy meanwhile
    loader_others_cores: float | None = None  # ... during the loader-alone pass
    compute_only_others_cores: float | None = None  # ... while the step ran alone
    warmup: int = 0
    steps_requested: int = DEFAULT_STEPS
    loader_len: int | None = None
    status: str = "ok"
    notes: tuple[Note, ...] = ()  # findings (kind dataloader.*), worded by render/; an older row's text stays a str
    wall_s: float = 0.0

    # ---- derived ------------------------------------------------------------------------------
    @property
    def cfg(self) -> dict[str, Any]:
        return dict(self.config)

    @property
    def n_steps(self) -> int:
        return len(self.wait_s)

    @property
    def data_wait_fraction(self) -> float:
        return _fraction(self.wait_s, self.compute_s)

    @property
    def input_bound(self) -> bool:
        return self.data_wait_fraction > INPUT_BOUND

    @property
    def step_s(self) -> float:
        return _mean([w + c for w, c in zip(self.wait_s, self.compute_s)])

    @property
    def loader_batches_per_s(self) -> float | None:
        t = sum(self.loader_s)
        return len(self.loader_s) / t if self.loader_s and t > 0 else None

    @property
    def compute_only_step_s(self) -> float | None:
        return _stats.median(self.compute_only_s) if self.compute_only_s else None

    @property
    def step_slowdown(self) -> float | None:
        """Median step in the loop ÷ median step alone (cached batch, after the workers stopped).

        Above :data:`SLOWED` with workers on, the workers took cores from the step (its intra-op threads):
        the loop's compute is not the step's own cost. None without workers or without the step alone."""
        w = self.cfg.get("num_workers", 0) or 0
        if not w or not self.compute_only_s or not self.compute_s:
            return None
        alone = _stats.median(self.compute_only_s)
        return _stats.median(self.compute_s) / alone if alone > 0 else None

    @property
    def step_slowdown_mean(self) -> float | None:
        """Mean step in the loop ÷ median step alone: what the slowdown costs the loop on average (busy
        workers slow only the steps they overlap, so the median can stay low while the mean grows)."""
        w = self.cfg.get("num_workers", 0) or 0
        if not w or not self.compute_only_s or not self.compute_s:
            return None
        alone = _stats.median(self.compute_only_s)
        return _mean(self.compute_s) / alone if alone > 0 else None

    @property
    def step_slowed(self) -> bool:
        """The step ran materially slower while the workers ran (≥ 1.25× and ≥ 1 ms)."""
        x = self.step_slowdown
        if x is None:
            return False
        alone = _stats.median(self.compute_only_s)
        return x >= SLOWED and (x - 1) * alone >= 1e-3

    @property
    def threads_wanted(self) -> int | None:
        """Workers + the main process's torch intra-op threads (1 without torch): the cores the loop asks for."""
        w = self.cfg.get("num_workers", 0) or 0
        return w + (self.torch_threads or 1) if self.is_dataloader else None

    @property
    def speedup_if_data_free(self) -> float | None:
        """The loop's step ÷ compute alone; None when compute alone cannot be set against the loop."""
        c = self.compute_only_step_s
        return self.step_s / c if c and self.n_steps and self.compute_alone_usable else None

    @property
    def gpu_idle_fraction(self) -> float | None:
        if not self.gpu_busy_s:
            return None
        tot = sum(w + c for w, c in zip(self.wait_s, self.compute_s))
        return max(0.0, 1 - sum(self.gpu_busy_s) / tot) if tot > 0 else None

    @property
    def respawn_s(self) -> float | None:
        c = self.cfg
        if c.get("num_workers", 0) and not c.get("persistent_workers"):
            return self.loader_first_batch_s
        return None

    @property
    def best(self) -> SweepPoint | None:
        good = [p for p in self.sweep if p.ok]
        return max(good, key=lambda p: p.throughput) if good else None

    @property
    def plateau(self) -> SweepPoint | None:
        """The first setting (in sweep order) within 10% of the best throughput."""
        b = self.best
        if b is None:
            return None
        return next(p for p in self.sweep if p.ok and p.throughput >= PLATEAU * b.throughput)

    # ---- load and consistency: what may be compared with what -----------------------------------
    def phase_cores(self, phase: str) -> float | None:
        """Other processes' cores during a pass: "loop", "loader", "compute" or a sweep setting's label."""
        fixed = {"loop": self.others_cores, "loader": self.loader_others_cores,
                 "compute": self.compute_only_others_cores}
        if phase in fixed:
            return fixed[phase]
        return next((p.others_cores for p in self.sweep if p.label == phase), None)

    def loaded_phases(self) -> list[tuple[str, float]]:
        """(pass, cores) for every pass during which other processes kept more than LOADED cores busy."""
        names = ["loop", "loader", "compute"] + [p.label for p in self.sweep if p.ok]
        return [(n, x) for n in names if (x := self.phase_cores(n)) is not None and x > LOADED]

    def load_gap(self, *phases: str) -> str | None:
        """Why these passes cannot be compared ("other processes used 1.0 cores during compute alone"):
        some were loaded and others measured quiet. None when they can (all quiet, all loaded, unknown)."""
        return load_gap([(p, self.phase_cores(p)) for p in phases])

    @property
    def compute_disagreement(self) -> float | None:
        """Compute alone ÷ the loop's median compute when they are more than :data:`DISAGREE` apart and
        nothing measured explains it (a step slowed by the workers is explained: the audit's threads
        finding says so); None otherwise."""
        co = self.compute_only_step_s
        if not co or not self.compute_s:
            return None
        x = co / _stats.median(self.compute_s)
        if 1 / DISAGREE <= x <= DISAGREE or (x < 1 and self.cfg.get("num_workers")) or self.pause_explains:
            return None
        return x

    @property
    def pause_explains(self) -> bool:
        """The loop's compute ran more than :data:`DISAGREE` × slower than the step back to back, and the step
        on the cached batch after a pause as long as the loop's wait for data (``compute_paused_s``) made up
        at least :data:`PAUSE_SHARE` of the gap: the gap is the pause between steps (caches and the CPU gone
        cold while the loader works), measured. With infinitely fast data the steps run back to back, so
        compute alone stands for that (:meth:`perfmagic.dataloader.check.dataloader_check`, step 4b). (A
        step of 3.8 ms back to back, 5.7 ms in the loop and 4.2 ms after the pause is not explained: the
        pause made up a fifth of the gap.)"""
        return (self.pause_share or 0.0) >= PAUSE_SHARE

    @property
    def pause_share(self) -> float | None:
        """The share of the gap between the loop's compute and the step back to back that the step after a
        pause made up (median paused − alone) ÷ (median loop − alone); None where the loop ran within
        :data:`DISAGREE` × of the step alone or no paused call was made."""
        co, paused = self.compute_only_step_s, self.compute_paused_s
        if not co or not paused or not self.compute_s:
            return None
        loop_c = _stats.median(self.compute_s)
        if not loop_c > pause_gap(self.config) * co:
            return None
        return (_stats.median(paused) - co) / (loop_c - co)

    @property
    def compute_alone_usable(self) -> bool:
        """Compute alone may be set against the loop: measured, consistent with it, not loaded differently."""
        return (self.compute_only_step_s is not None and self.compute_disagreement is None
                and self.load_gap("loop", "compute") is None)

    def findings(self) -> list[Finding]:
        """The configuration audit (:func:`perfmagic.dataloader.audit.audit`), reconciled with the sweep:
        a prediction the sweep measured otherwise is replaced by the measurement."""
        return reconcile(audit(self), self)

    # ---- text -----------------------------------------------------------------------------------
    def verdict(self) -> str:
        """Input- or compute-bound, with the mean wait, compute and step (:func:`perfmagic.render.dataloader.verdict`)."""
        from ..render.dataloader import verdict

        return verdict(self)

    def headline(self) -> str:
        return self.verdict()

    def sweep_table(self) -> str:
        from ..render.dataloader import sweep_table

        return sweep_table(self)

    # ---- serialisation ------------------------------------------------------------------------
    def metrics(self) -> dict[str, float | int | str | None]:
        c, b, p = self.cfg, self.best, self.plateau
        n = self.n_steps
        return {
            "data_wait_fraction": self.data_wait_fraction if n else None,
            "verdict": ("input-bound" if self.input_bound else "compute-bound") if n else None,
            "step_s": self.step_s if n else None, "wait_s": _mean(self.wait_s) if n else None,
            "compute_s": _mean(self.compute_s) if n else None,
            "loader_batches_per_s": self.loader_batches_per_s, "compute_only_step_s": self.compute_only_step_s,
            "compute_after_pause_s": _stats.median(self.compute_paused_s) if self.compute_paused_s else None,
            "pause_s": self.pause_s,
            "speedup_if_data_free": self.speedup_if_data_free, "first_batch_s": self.first_batch_s,
            "respawn_s": self.respawn_s, "gpu_idle_fraction": self.gpu_idle_fraction, "h2d_s": self.h2d_s,
            "collate_s": self.collate_s, "steps_measured": n, "warmup_steps": self.warmup,
            "num_workers": c.get("num_workers"), "batch_size": c.get("batch_size"), "cores": self.cores,
            "torch_threads": self.torch_threads, "step_slowdown_with_workers": self.step_slowdown,
            "workers_cores": self.workers_cores, "others_cores": self.others_cores,
            "loader_others_cores": self.loader_others_cores,
            "compute_only_others_cores": self.compute_only_others_cores,
            "step_slowed_by_workers": self.step_slowed if self.step_slowdown is not None else None,
            "best_setting": b.label if b else None,
            "best_num_workers": dict(b.setting).get("num_workers") if b else None,
            "best_throughput": b.throughput if b else None,
            "plateau_setting": p.label if p else None, "wall_s": self.wall_s,
        }

    def samples(self) -> dict[str, Any]:
        return {"wait_s": list(self.wait_s), "compute_s": list(self.compute_s),
                "warmup_wait_s": list(self.warmup_wait_s), "warmup_compute_s": list(self.warmup_compute_s),
                "loader_s": list(self.loader_s), "compute_only_s": list(self.compute_only_s),
                "compute_paused_s": list(self.compute_paused_s),
                "gpu_busy_s": list(self.gpu_busy_s), "item_s": list(self.item_s),
                "sweep": [{"setting": p.label, "wait_s": list(p.wait_s), "compute_s": list(p.compute_s),
                           "first_batch_s": p.first_batch_s, "error": p.error,
                           "workers_cores": p.workers_cores, "others_cores": p.others_cores}
                          for p in self.sweep]}

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "config": {k: jsonable(v) for k, v in self.config},
                "metrics": self.metrics(), "samples": self.samples(),
                "findings": [f.to_dict() for f in self.findings()], "notes": [str(n) for n in self.notes]}


__all__ = ["DataLoaderResult", "SweepPoint", "PLATEAU", "SLOWED", "DISAGREE", "DEFAULT_STEPS"]
