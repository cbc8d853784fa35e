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
   the loop is *input-bound* (METHOD.md §8).
3. **Loader alone.** A fresh pass over the loader without compute, after the same warm-up: the loader's
   own batches per second. For a non-persistent DataLoader the first-batch latency of this second pass is
   the *re-spawn cost per epoch*.
4. **Compute alone.** The step on one cached batch (the last one fetched: same shapes, same device),
   one warm call then up to 20 timed calls: the step time with infinitely fast data.
5. **Audit** (DataLoader only): num_workers vs usable cores, pin_memory and non_blocking copies,
   persistent_workers, prefetch_factor, batch size, collate cost (timed on ``batch_size`` items of a
   map-style dataset), each with its expected effect computed from the numbers above.
6. **Sweep** (optional): ``sweep={"num_workers": [0, 1, 2, 4]}`` rebuilds the DataLoader with the same
   dataset and arguments at each setting (the product, for several keys) and measures the loop there.
7. **GPU** (when the step initialised CUDA): per step a CUDA event pair around the step gives the time
   the GPU stream spent on it; the GPU idle share is 1 − Σ GPU span / Σ step. The host→device copy of
   one batch is timed, and whether it can overlap compute is read from the batch (pinned?) and the
   step's source (``non_blocking=True``?) — an inference, not a trace.

Every iterator created is shut down at the end (``_shutdown_workers()``): also when the step raises
(the exception propagates unchanged) and on Ctrl-C (:class:`~perfmagic._errors.BenchInterrupted` with
the partial result). A persistent-workers loader gets its iterator dropped, so its next epoch starts
fresh workers. A loader shorter than warm-up + steps is measured on what there is, and the result says so.
"""

from __future__ import annotations

import inspect
import itertools
import math
import os
import pickle
import re
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core import stats as _stats
from ..errors import BadOptionError, BenchInterrupted, PerfmagicError
from ..render.units import fmt_time

INPUT_BOUND = 0.3          # data-wait fraction above which the loop is input-bound
PLATEAU = 0.90             # a sweep setting within 10% of the best throughput is on the plateau
COMPUTE_ALONE_MAX = 20
DEFAULT_STEPS = 20
_COPY = re.compile(r"\.(?:to|cuda)\s*\(")
_NB = re.compile(r"non_blocking\s*=\s*True")
_USES_CUDA = re.compile(r"cuda|device|\.to\s*\(")
_CFG_KEYS = ("num_workers", "batch_size", "pin_memory", "persistent_workers", "prefetch_factor", "drop_last",
             "shuffle", "collate_fn", "multiprocessing_context")


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class Finding:
    """One audit finding: what was found (with the numbers) and the expected effect of the fix."""

    topic: str
    level: str  # "ok" | "info" | "warn"
    message: str
    effect: str = ""

    def text(self) -> str:
        mark = {"warn": "!", "info": "·", "ok": "✓"}.get(self.level, "·")
        return f"{mark} {self.topic}: {self.message}" + (f" → {self.effect}" if self.effect else "")


@dataclass(frozen=True)
class SweepPoint:
    """The loop measured at one rebuilt-loader setting."""

    setting: tuple[tuple[str, Any], ...]
    wait_s: tuple[float, ...] = ()
    compute_s: tuple[float, ...] = ()
    first_batch_s: float | None = None
    batch_size: int | None = None
    error: str | None = None

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


@dataclass(frozen=True)
class DataLoaderResult:
    """Everything measured; every statistic is derived from the raw per-step samples kept here."""

    wait_s: tuple[float, ...]                 # steady-state steps: time blocked in next()
    compute_s: tuple[float, ...]              # steady-state steps: the step (synchronized)
    warmup_wait_s: tuple[float, ...] = ()
    warmup_compute_s: tuple[float, ...] = ()
    first_batch_s: float | None = None        # iter() + first batch: worker start-up
    loader_s: tuple[float, ...] = ()          # loader alone: per-batch fetch, steady state
    loader_first_batch_s: float | None = None  # second pass's start-up: re-spawn cost per epoch
    compute_only_s: tuple[float, ...] = ()    # the step on a cached batch
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
    warmup: int = 0
    steps_requested: int = DEFAULT_STEPS
    loader_len: int | None = None
    status: str = "ok"
    notes: tuple[str, ...] = ()
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
    def speedup_if_data_free(self) -> float | None:
        c = self.compute_only_step_s
        return self.step_s / c if c and self.n_steps else None

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

    def _per_batch_cost(self) -> float | None:
        """Loader time per batch for one worker (workers × the pool's time per batch)."""
        bps = self.loader_batches_per_s
        return max(1, self.cfg.get("num_workers", 0) or 0) / bps if bps else None

    # ---- audit ----------------------------------------------------------------------------------
    def findings(self) -> list[Finding]:
        if not self.is_dataloader or not self.n_steps:
            return []
        c, out = self.cfg, []
        w, cores, frac = c.get("num_workers", 0) or 0, self.cores, self.data_wait_fraction
        comp = self.compute_only_step_s or _mean(self.compute_s)
        wait, step = _mean(self.wait_s), self.step_s
        cost = self._per_batch_cost()
        need = math.ceil(cost / comp) if cost and comp > 0 else None
        if w == 0 and frac > INPUT_BOUND:
            eff = "workers load the next batches while the step runs"
            if cost and need:
                k = min(need, cores)
                est = max(comp, cost / k)
                eff = (f"{eff}: about {need} worker{'s' if need > 1 else ''} would hide the wait ({fmt_time(cost)} "
                       f"per batch ÷ {fmt_time(comp)} compute); with {k}: step ≈ {fmt_time(est)}, "
                       f"{step / est:.2g}× faster ({cores} usable cores)")
            out.append(Finding("num_workers", "warn", f"0: batches load in the main process, in series with the "
                               f"step ({fmt_time(wait)} of each {fmt_time(step)} step)", eff))
        elif w == 0:
            out.append(Finding("num_workers", "info", f"0: loading costs {fmt_time(wait)} per step ({frac:.0%})",
                               f"workers would save at most that ({fmt_time(wait)} per step)"))
        else:
            if w > cores:
                out.append(Finding("num_workers", "warn", f"{w} workers > {cores} usable cores",
                                   "CPU-bound loading gains nothing beyond the cores and contends with the main "
                                   "process; loading that waits on I/O can still gain (sweep to see)"))
            if frac > INPUT_BOUND and need:
                more = (f"; more than the {cores} usable cores: make each item cheaper (cache decoded data, "
                        "lighter transforms, augment on the GPU)" if need > cores else "")
                out.append(Finding("num_workers", "warn", f"{_n(w, 'worker')} deliver {1 / (cost / max(w, 1)):.3g} "
                                   f"batches/s, the step takes {1 / comp:.3g}/s",
                                   f"about {need} workers needed to keep up{more}"))
            elif w <= cores:
                out.append(Finding("num_workers", "ok", f"{_n(w, 'worker')} on {cores} usable cores keep up "
                                   f"(data wait {frac:.0%})"))
        pin, nb = bool(c.get("pin_memory")), self.copies_non_blocking
        h2d = f" (one batch's copy: {fmt_time(self.h2d_s)})" if self.h2d_s is not None else ""
        if self.cuda and not pin:
            out.append(Finding("pin_memory", "warn", f"False while the step uses CUDA: copies come from pageable "
                               f"memory and block{h2d}", "pin_memory=True with .to(device, non_blocking=True): "
                               "faster copies (typically 2–6×) that overlap compute"))
        elif self.cuda and nb is False:
            out.append(Finding("pin_memory", "warn", f"True, but the step's copies are not non_blocking=True{h2d}",
                               "non_blocking=True lets the copy of the batch overlap the previous compute"))
        elif self.cuda:
            out.append(Finding("pin_memory", "ok", f"True with non_blocking copies{h2d}" if nb
                               else f"True{h2d}"))
        elif pin:
            out.append(Finding("pin_memory", "info", "True but the step does not use CUDA",
                               "pin_memory=False saves the page-locked copy of every batch"))
        if w:
            r = self.respawn_s
            if r is not None:
                n = self.loader_len
                epoch = n * step if n else None
                share = f" ({r / (epoch + r):.1%} of an epoch of {n} batches)" if epoch else ""
                out.append(Finding("persistent_workers", "warn" if epoch is None or r > 0.02 * epoch else "info",
                                   f"False: the {_n(w, 'worker')} re-spawn every epoch, {fmt_time(r)} before its first "
                                   "batch", f"persistent_workers=True saves about {fmt_time(r)} per epoch{share}"))
            elif c.get("persistent_workers"):
                out.append(Finding("persistent_workers", "ok", "True: workers are kept between epochs"))
            pf = c.get("prefetch_factor") or 2
            waits = sorted(self.wait_s)
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
        if self.collate_s is not None and self.item_s:
            fetch = sum(self.item_s) + self.collate_s
            share = self.collate_s / fetch if fetch > 0 else 0.0
            msg = (f"{fmt_time(self.collate_s)} per batch, {share:.0%} of fetching it "
                   f"({len(self.item_s)} items × {fmt_time(_mean(self.item_s))})")
            if share > 0.2:
                out.append(Finding("collate_fn", "warn", msg, "a cheaper collate (pre-stacked arrays, a batched "
                                   f"__getitems__) saves up to {fmt_time(self.collate_s)} per batch per worker"))
            else:
                out.append(Finding("collate_fn", "ok", msg))
        return out

    # ---- text -----------------------------------------------------------------------------------
    def verdict(self) -> str:
        tag = "  [INTERRUPTED]" if self.status != "ok" else ""
        if not self.n_steps:
            return f"dataloader check: no step measured{tag}"
        f, w, c = self.data_wait_fraction, _mean(self.wait_s), _mean(self.compute_s)
        nums = (f"wait {fmt_time(w)} + compute {fmt_time(c)} = step {fmt_time(w + c)} "
                f"(mean of {self.n_steps} steps after {self.warmup} warm-up)")
        if f > INPUT_BOUND:
            return f"input-bound: {f:.0%} of each step waits for data — {nums}{tag}"
        return f"compute-bound: data wait is {f:.0%} of the step (≤ {INPUT_BOUND:.0%}) — {nums}{tag}"

    def text(self) -> str:
        lines = [self.verdict()]
        c = self.cfg
        if self.first_batch_s is not None:
            start = f"  start-up: first batch after {fmt_time(self.first_batch_s)}"
            if c.get("num_workers"):
                start += f" (starting {_n(c['num_workers'], 'worker')})"
            lines.append(start + f"; {self.warmup} warm-up batches not counted")
        bps, co = self.loader_batches_per_s, self.compute_only_step_s
        if bps is not None:
            bs = c.get("batch_size")
            lines.append(f"  loader alone: {bps:.4g} batches/s ({fmt_time(1 / bps)} per batch"
                         + (f", {bps * bs:.4g} samples/s)" if bs else ")"))
        if co is not None and self.n_steps:
            sp = self.step_s / co
            lines.append(f"  compute alone (cached batch): {fmt_time(co)} per step → with infinitely fast data the "
                         f"loop would be {sp:.2f}× faster")
        if bps is not None and co:
            lim = "the loader" if 1 / bps > co else "the compute"
            lines.append(f"  headroom: loader {fmt_time(1 / bps)}/batch vs compute {fmt_time(co)}/step: {lim} sets "
                         f"the pace of an overlapped loop (≥ {fmt_time(max(1 / bps, co))} per step)")
        if self.cuda:
            g = self.gpu_idle_fraction
            lines.append(f"  GPU: idle {g:.0%} of each step (CUDA events)" if g is not None else "  GPU: in use")
            if self.h2d_s is not None:
                ov = ("can overlap compute (pinned, non_blocking)" if self.batch_pinned and self.copies_non_blocking
                      else "cannot overlap compute (" + ", ".join(
                          x for x, bad in (("pageable memory", not self.batch_pinned),
                                           ("blocking copy", self.copies_non_blocking is False)) if bad) + ")"
                      if (not self.batch_pinned or self.copies_non_blocking is False) else "overlap unknown")
                lines.append(f"  host→device copy of one batch: {fmt_time(self.h2d_s)}; {ov}")
        fs = self.findings()
        if fs:
            lines.append("  configuration:")
            lines += [f"    {f.text()}" for f in fs]
        if self.sweep:
            lines += ["  sweep:"] + ["    " + ln for ln in self.sweep_table().splitlines()]
            b, p = self.best, self.plateau
            if b is not None and p is not None:
                unit = "samples/s" if b.batch_size else "batches/s"
                msg = f"    best: {b.label} ({b.throughput:.4g} {unit})"
                if p is not b:
                    msg += f"; plateau from {p.label} (within {1 - PLATEAU:.0%} of the best)"
                pw = dict(p.setting).get("num_workers")
                if pw is not None and pw == self.cores:
                    msg += f" — at the core count ({self.cores} usable cores)"
                elif pw is not None and pw > self.cores:
                    msg += (f" — beyond the {self.cores} usable cores: the loading waits (I/O) more than it "
                            "computes")
                lines.append(msg)
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def sweep_table(self) -> str:
        hdr = f"{'setting':<28} {'first batch':>11} {'step':>10} {'wait':>6} {'throughput':>12}"
        rows = [hdr]
        for p in self.sweep:
            if not p.ok:
                rows.append(f"{p.label:<28} failed: {p.error}")
                continue
            unit = "/s" if p.batch_size else " b/s"
            rows.append(f"{p.label:<28} {fmt_time(p.first_batch_s):>11} {fmt_time(p.step_s):>10} "
                        f"{p.data_wait_fraction:>6.0%} {p.throughput:>10.4g}{unit}")
        return "\n".join(rows)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return f"<DataLoaderResult {self.verdict()}>"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.text())

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        from ..render.display import text_figure_bundle

        return text_figure_bundle(self.text(), self.figure_png(), "data wait and compute per step")

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
            "speedup_if_data_free": self.speedup_if_data_free, "first_batch_s": self.first_batch_s,
            "respawn_s": self.respawn_s, "gpu_idle_fraction": self.gpu_idle_fraction, "h2d_s": self.h2d_s,
            "collate_s": self.collate_s, "steps_measured": n, "warmup_steps": self.warmup,
            "num_workers": c.get("num_workers"), "batch_size": c.get("batch_size"), "cores": self.cores,
            "best_setting": b.label if b else None,
            "best_num_workers": dict(b.setting).get("num_workers") if b else None,
            "best_throughput": b.throughput if b else None,
            "plateau_setting": p.label if p else None, "wall_s": self.wall_s,
        }

    def samples_dict(self) -> dict[str, Any]:
        return {"wait_s": list(self.wait_s), "compute_s": list(self.compute_s),
                "warmup_wait_s": list(self.warmup_wait_s), "warmup_compute_s": list(self.warmup_compute_s),
                "loader_s": list(self.loader_s), "compute_only_s": list(self.compute_only_s),
                "gpu_busy_s": list(self.gpu_busy_s), "item_s": list(self.item_s),
                "sweep": [{"setting": p.label, "wait_s": list(p.wait_s), "compute_s": list(p.compute_s),
                           "first_batch_s": p.first_batch_s, "error": p.error} for p in self.sweep]}

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "config": {k: _jsonable(v) for k, v in self.config},
                "metrics": self.metrics(), "samples": self.samples_dict(),
                "findings": [f.__dict__ for f in self.findings()], "notes": list(self.notes)}

    # ---- figure -----------------------------------------------------------------------------
    def figure_png(self) -> bytes | None:
        """Stacked bars per step (wait over compute; warm-up pale) and the sweep (or the headroom) chart."""
        if not self.n_steps:
            return None
        try:
            from matplotlib.backends.backend_agg import FigureCanvasAgg
            from matplotlib.figure import Figure
        except ImportError:
            return None
        import io

        fig = Figure(figsize=(8.0, 2.8), dpi=100, layout="constrained")
        FigureCanvasAgg(fig)
        ax, bx = fig.subplots(1, 2, gridspec_kw={"width_ratios": [2.2, 1]})
        ws = list(self.warmup_wait_s) + list(self.wait_s)
        cs = list(self.warmup_compute_s) + list(self.compute_s)
        scale, unit = (1e-3, "ms") if max(w + c for w, c in zip(ws, cs)) < 2 else (1.0, "s")
        nw = len(self.warmup_wait_s)
        xs = list(range(len(ws)))
        alpha = [0.35] * nw + [1.0] * self.n_steps
        cvals, wvals = [c / scale for c in cs], [w / scale for w in ws]
        blue = [(0.12, 0.47, 0.71, a) for a in alpha]
        red = [(0.84, 0.15, 0.16, a) for a in alpha]
        ax.bar(xs, cvals, color=blue, width=0.85)
        ax.bar(xs, wvals, bottom=cvals, color=red, width=0.85)
        from matplotlib.patches import Patch

        ax.legend(handles=[Patch(color=red[-1], label="waiting for data"), Patch(color=blue[-1], label="compute")],
                  loc="upper right", fontsize=7, frameon=False)
        top = max(cvals[nw:][i] + wvals[nw:][i] for i in range(self.n_steps)) * 1.6
        for i in xs[:nw]:  # a start-up bar far above the steady state is clipped and labelled
            if cvals[i] + wvals[i] > top:
                ax.text(i, top * 0.97, f"{(cvals[i] + wvals[i]):.3g}", ha="center", va="top", fontsize=6)
        ax.set_ylim(0, top if top > 0 else 1)
        if nw:
            ax.axvline(nw - 0.5, color="0.5", lw=0.8, ls="--")
        ax.set_xlabel(f"step ({nw} warm-up, pale)" if nw else "step")
        ax.set_ylabel(f"time [{unit}]")
        ax.set_title(self.verdict().split(" — ")[0], fontsize=9, loc="left")
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        good = [p for p in self.sweep if p.ok]
        if good:
            best = self.best
            ys = [p.throughput for p in good]
            bx.bar(range(len(good)), ys, color=["tab:green" if p is best else "tab:gray" for p in good])
            bx.set_xticks(range(len(good)), [", ".join(str(v) for _, v in p.setting) for p in good], fontsize=7)
            bx.set_xlabel(" × ".join(k for k, _ in good[0].setting), fontsize=8)
            bx.set_ylabel("samples/s" if good[0].batch_size else "batches/s", fontsize=8)
            bx.set_title("sweep (best in green)", fontsize=9, loc="left")
        else:
            names, vals = ["loop step"], [self.step_s / scale]
            if self.compute_only_step_s is not None:
                names.append("compute alone")
                vals.append(self.compute_only_step_s / scale)
            if self.loader_batches_per_s:
                names.append("loader alone")
                vals.append(1 / self.loader_batches_per_s / scale)
            bx.barh(range(len(vals)), vals, color=["tab:purple", "tab:blue", "tab:red"][: len(vals)])
            bx.set_yticks(range(len(vals)), names, fontsize=7)
            bx.set_xlabel(f"time per step / batch [{unit}]", fontsize=8)
            bx.set_title("headroom", fontsize=9, loc="left")
        for a in (ax, bx):
            a.tick_params(labelsize=7)
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        return buf.getvalue()


# ---- helpers ----------------------------------------------------------------------------------

def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else math.nan


def _fraction(wait: Sequence[float], comp: Sequence[float]) -> float:
    tot = sum(wait) + sum(comp)
    return sum(wait) / tot if tot > 0 else math.nan


def _n(k: int, word: str) -> str:
    return f"{k} {word}" + ("" if k == 1 else "s")


def _short(v: Any) -> str:
    r = repr(v)
    return f"{r[:57]}... ({type(v).__name__})" if len(r) > 60 else f"{r} ({type(v).__name__})"


def _jsonable(v: Any) -> Any:
    return v if v is None or isinstance(v, (bool, int, float, str)) else getattr(v, "__name__", repr(v))


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
            out.append((k, _jsonable(v)))
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


def _split(n: int, warmup: int, asked: int, name: str) -> tuple[int, str | None]:
    """How many of ``n`` recorded steps are warm-up, and a note when the loader was too short."""
    if n >= warmup + min(asked, 2):
        if n < warmup + asked:
            return warmup, (f"{name} has only {n} batches: {n - warmup} steps measured after {warmup} warm-up "
                            f"(asked {asked})")
        return warmup, None
    w = n // 2 if n >= 2 else 0
    return w, (f"{name} has only {n} batches, fewer than warm-up + 2 ({warmup} + 2): measured the last "
               f"{n - w} after skipping {w}; start-up effects may remain in the numbers")


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
                progress(phase + min(i / max(1, warmup + steps), 0.99), msg)
        return update

    try:
        try:
            _run(loader, step_fn, warmup + steps, iters, main, tell(0, "loop"))
        finally:
            if not (is_dl and dict(cfg).get("persistent_workers")):
                iters.close()
        if not main.wait:
            raise PerfmagicError(f"{name} yielded no batch: nothing to measure (is it empty, or already consumed?)")
        if loader_alone:
            if one_pass:
                notes.append(f"{name} is a one-pass iterator: 'loader alone' timed on the batches after the loop")
            if not (one_pass and main.exhausted):
                _run(loader, None, (0 if one_pass else warmup) + steps, iters, alone, tell(1, "loader alone"))
            iters.close()
        if compute_alone:
            if progress is not None:
                progress(2, "compute alone")
            cached = main.last
            step_fn(cached)  # warm call, untimed
            torch = sys.modules.get("torch")
            for i in range(max(3, min(steps, COMPUTE_ALONE_MAX))):
                a = time.perf_counter()
                step_fn(cached)
                if main.cuda:
                    torch.cuda.synchronize()
                co.append(time.perf_counter() - a)
        if is_dl:
            extras["item_s"], extras["collate_s"] = _collate_cost(loader)
        if main.cuda:
            extras["h2d_s"], extras["batch_pinned"] = _h2d(main.last)
        n_sweep = sweep_steps or min(steps, 10)
        for j, s in enumerate(settings):
            label = ", ".join(f"{k}={v}" for k, v in s.items())
            if progress is not None:
                progress(3 + j, label)
            lp = _Loop(cuda=main.cuda)
            sw = (s.get("num_workers", workers) or 0)
            spf = s.get("prefetch_factor", pf) or 2
            sw_warm = sw * spf + 2 if sw else 2
            err = None
            bs = None
            try:
                with warnings.catch_warnings():  # torch's "more workers than cores": the audit says it
                    warnings.filterwarnings("ignore", message=".*worker processes in total", category=UserWarning)
                    dl = _rebuild(loader, s)
                    bs = dl.batch_size
                    _run(dl, step_fn, sw_warm + n_sweep, iters, lp, events=False)
            except KeyboardInterrupt:
                raise
            except Exception as exc:
                err = f"{type(exc).__name__}: {exc}"
            finally:
                iters.close()
            k, _ = _split(len(lp.wait), sw_warm, n_sweep, label)
            points.append(SweepPoint(tuple(s.items()), tuple(lp.wait[k:]), tuple(lp.comp[k:]), lp.first_batch_s,
                                     bs, err))
        if progress is not None:
            progress(total_phases, "done")
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
    if main.cuda and src is not None and not _USES_CUDA.search(src) \
            and not any(t.device.type == "cuda" for t in _tensors(main.last)):
        main.cuda = False  # CUDA was initialised by earlier code, but this step runs on the CPU
        notes.append("CUDA is initialised in this process but the step does not seem to use it: "
                     "no GPU analysis (the steps were still synchronized)")
    nb = None
    if src is not None and _COPY.search(src):
        nb = bool(_NB.search(src))
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
        is_dataloader=is_dl, cuda=main.cuda, cores=usable_cores(), warmup=w_main, steps_requested=steps,
        loader_len=n_len, status=status, notes=tuple(notes), wall_s=time.perf_counter() - t_start)
    if status == "interrupted":
        raise BenchInterrupted(result if result.n_steps else None)
    return result


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


__all__ = ["dataloader_check", "DataLoaderResult", "SweepPoint", "Finding", "INPUT_BOUND", "usable_cores",
           "check_picklable", "parse_sweep"]
