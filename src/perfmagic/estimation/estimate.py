"""Estimate a full run's time and peak memory before committing to it (``%%estimate``).

Two forms:

* **per-iteration** (``total=``): the code is one unit of work (a step, a slice). A few warmed-up
  units are timed within a short measuring budget (``budget=``, ``-b``); the full job is
  ``cold extra + total × mean unit time``, with an interval on the mean, the spread of the units and
  the units per second. RSS after each unit tells whether memory grows from unit to unit (a leak, a
  growing list), which then scales with the total.
* **scaling** (``n=``): the code uses a size variable. It is run at doubling sizes, as large as the
  measuring budget allows and never more than ``max_fraction`` of the (running) estimate of the full
  run; each run's wall time (synchronized on a GPU) and peak memory (RSS high-water mark above the
  level before the run; ``max_memory_allocated`` on CUDA; traced Python allocations for the cheap
  sizes) are kept. :mod:`.costmodel` picks a cost model by AICc and predicts size ``n`` with an
  interval; a local-slope check warns when the slope is still rising at the largest size measured.

Then **the gate**: the prediction against the time the full run may take (``limit=``, ``--limit``)
and the memory available now, a *will fit / will not fit / borderline* verdict and the largest size
that fits; ``run=True`` runs the full job when it fits and keeps predicted vs actual, so the
estimates can be checked.

Before each run of the scaling form the allocator gives freed memory back to the system
(``malloc_trim``) and the high-water mark is reset, so each run's peak is its own and each run starts
in the state a fresh full run would.

This module is the driver, :func:`estimate`; the steps live beside it: :mod:`.measure` (the sizes
and blocks run), :mod:`.runner` (one run, and the full run), :mod:`.fit` (the prediction and its
checks), :mod:`.costmodel` (the models), :mod:`.gate` (the verdict), :mod:`.result` (the result);
:mod:`perfmagic.render.estimate` draws it. The names are re-exported here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import BadOptionError, BenchInterrupted, PerfmagicError
from ..findings import Finding
from ..timing.bench import MAX_BUDGET_S
from .fit import DEFAULT_BUDGET_S, DEFAULT_MAX_FRACTION, analyse_iteration, analyse_scaling, speed_factors, top_slopes
from .gate import available_memory, gate
from .measure import _iteration, _scaling
from .result import Actual, EstimateResult, Point
from .runner import _Runner, run_full


def estimate(code: str | Callable[..., Any], n: float | None = None, *, total: float | None = None,
             var: str = "n", globals: Mapping[str, Any] | None = None, budget: float | None = None,
             max_fraction: float = DEFAULT_MAX_FRACTION, limit: float | None = None,
             sizes: Sequence[int] | None = None, memory: bool = True, device: str = "auto",
             run: bool = False, force: bool = False,
             progress: Callable[[float, str], None] | None = None,
             run_progress: Callable[[float, str], None] | None = None,
             filename: str = "<perfmagic-estimate>") -> EstimateResult:
    """Predict the time and peak memory of a full run from a few small ones.

    * ``estimate(code_or_fn, n=FULL)``: the code uses the variable ``var`` (``fn(n)`` for a callable);
      it is run at doubling sizes within ``budget`` seconds of measuring (default 3) and at most
      ``max_fraction`` of the predicted full run, a cost model is chosen by AICc and size ``FULL`` is
      predicted.
    * ``estimate(code_or_fn, total=UNITS)``: the code (``fn()``) is one unit of a job of ``UNITS`` units.

    ``limit`` (seconds the full run may take) and the memory available now make the gate
    (``result.verdict``); ``run=True`` then runs the full job when it does not clearly exceed them (``force=True``: in any case) and keeps
    the actual time and peak in ``result.actual``. ``progress(fraction, message)`` reports the measuring,
    ``run_progress(fraction, message)`` the full run (its ETA is the prediction).

    Ctrl-C while measuring raises :class:`BenchInterrupted` whose ``result`` fits the points done;
    Ctrl-C during the full run returns normally with ``result.actual.status == "interrupted"``; an
    exception of the full run returns with ``status == "failed"`` and the exception in
    ``result.actual.exception`` (the magic records the run as failed, then raises it).
    Exceptions of the code propagate when they happen at the first size; at a larger size they are
    reported in ``result.failures`` and the sizes below are fitted.
    """
    if (n is None) == (total is None):
        raise BadOptionError("n / total", None, "exactly one of n=FULL_SIZE (scaling) or total=UNITS (per-iteration)",
                             "e.g. estimate(code, n=1_000_000) or estimate(step, total=119*2000)")
    full = n if n is not None else total
    name = "n" if n is not None else "total"
    if not isinstance(full, (int, float)) or isinstance(full, bool) or not math.isfinite(full) or full < 1:
        raise BadOptionError(name, full, "a whole number >= 1", f"e.g. {name}=1_000_000")
    if full != int(full):
        raise BadOptionError(name, full, f"a whole number of {'units' if name == 'total' else 'items'}",
                             f"e.g. {name}={int(full):_} or {name}={int(full) + 1:_}")
    budget_s = DEFAULT_BUDGET_S if budget is None else float(budget)
    if not 0 < budget_s <= MAX_BUDGET_S:
        raise BadOptionError("budget", budget, "a positive number of seconds of measuring, at most 24 h",
                             "e.g. budget=3")
    if not 0 < max_fraction <= 1:
        raise BadOptionError("max_fraction", max_fraction, "a fraction in (0, 1]", "e.g. max_fraction=0.1")
    if limit is not None and not (limit > 0 and math.isfinite(limit)):
        raise BadOptionError("limit", limit, "a positive, finite number of seconds the full run may take",
                             "e.g. limit=600")
    if n is not None and not (isinstance(var, str) and var.isidentifier()):
        raise BadOptionError("var", var, "a Python identifier", "e.g. var='n'")
    from ..timing.bench import resolve_device

    dev, dev_notes = resolve_device(device)  # "auto": the CPU until the first run shows CUDA work
    notes = list(dev_notes)
    if n is not None:
        if sizes is not None:
            sizes = sorted({int(s) for s in sizes})
            if not sizes or sizes[0] < 1:
                raise BadOptionError("sizes", sizes, "sizes >= 1", "e.g. sizes=[1000, 2000, 4000]")
            if sizes[-1] > full:
                raise BadOptionError("sizes", sizes[-1], f"sizes no larger than the full size {full:,.0f}",
                                     "give the full size you mean to run, or smaller sizes to measure")
        runner = _Runner(code, var, globals, dev, filename)
        if isinstance(code, str):
            import ast

            names = {x.id for x in ast.walk(ast.parse(code)) if isinstance(x, ast.Name)}
            if var not in names:
                notes.append(Finding.of("estimate.no-mention", var=var))
        result = _scaling(runner, int(round(full)), var, code, dev, budget_s, max_fraction, sizes, memory,
                          progress, notes)
    else:
        runner = _Runner(code, None, globals, dev, filename)
        result = _iteration(runner, float(full), code, dev, budget_s, max_fraction, memory, progress, notes)
    result = gate(result, limit)
    if result.status != "ok":
        raise BenchInterrupted(result)
    if run:
        result = run_full(result, runner, force=force, progress=run_progress)
    return result



__all__ = ["estimate", "EstimateResult", "Point", "Actual", "analyse_scaling", "analyse_iteration", "gate",
           "run_full", "available_memory", "speed_factors", "top_slopes", "DEFAULT_BUDGET_S", "DEFAULT_MAX_FRACTION",
           "PerfmagicError"]
