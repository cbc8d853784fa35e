"""The measurement engine: ``bench()`` times code the way a careful performance engineer would.

The algorithm, in order (every step is visible in the result):

1. **Compile once**, outside any timed region (:mod:`perfmagic._compile`); a ``SyntaxError`` points at
   the user's line. Setup code runs once, in a copy of the given namespace.
2. **Cold call.** The first call is timed on its own (including a device synchronize) and reported as
   ``cold_s``: lazy initialisation, JIT, autotuning and cold caches all land here, not in the samples.
3. **Sync choice.** With ``sync="auto"`` the backend is chosen from what the cold call touched
   (:func:`perfmagic._sync.detect`): a CUDA tensor or an initialised CUDA context -> CUDA events.
4. **Timer overhead.** Empty blocks (``run(0)`` + sync) are timed; their median is the overhead.
5. **Warmup**, adaptive: blocks are run and re-sized until the median per-call time of the last three
   blocks is within 5% of the three before (at least 5 calls and 5% of the budget), or until 30% of
   the budget is spent (then a warning says the timings were still drifting). ``warmup=N`` runs N calls.
6. **Block calibration.** Calls per block ``n`` are chosen so a block lasts at least
   ``max(100 × overhead, 200 µs)``: the timer's own cost stays under 1% of a sample.
7. **Sampling** until the distribution-free 95% CI of the median is within ``precision`` (±1% by
   default) with at least ``min_samples`` samples, or the budget is spent. A budget the user gives is a
   hard limit; the default (1 s) may stretch to 10 s only to reach ``min_samples`` for slow code.
   The GC is disabled during timed blocks unless ``gc=True`` (as ``timeit`` does).
8. **Memory**, in one extra untimed call (:mod:`perfmagic._memory`).
9. **Environment and doubts**: the environment is captured (:mod:`perfmagic._env`), the CPU load of
   other processes during the run is measured, and one-line warnings are attached.

Ctrl-C at any point after the cold call raises :class:`~perfmagic._errors.BenchInterrupted` carrying
the partial result (status ``"interrupted"``). Exceptions from the user's code propagate unchanged.
"""

from __future__ import annotations

import gc as _gc
import math
import os
import sys
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any

from . import _stats
from ._compile import CompiledCell, compile_callable, compile_cell
from ._errors import BadOptionError, BenchInterrupted, SetupError
from ._format import fmt_time
from ._results import BenchResult
from ._sync import SYNC_CHOICES, Sync, detect, make

DEFAULT_BUDGET = 1.0
MAX_SOFT_BUDGET = 10.0
MIN_BLOCK_S = 2e-4
DRIFT_TOL = 0.05
WARMUP_MIN_CALLS = 5
WARMUP_MIN_FRACTION = 0.05
WARMUP_MAX_FRACTION = 0.30
DEVICE_CHOICES = "auto, cpu, cuda, cuda:N, mps"


def _check_options(budget: float | None, precision: float, confidence: float, warmup: Any,
                   min_samples: int, max_samples: int) -> None:
    if budget is not None and (not isinstance(budget, (int, float)) or not budget > 0 or math.isinf(budget)):
        raise BadOptionError("budget", budget, "a positive, finite number of seconds", "e.g. budget=0.5 (or --budget 2s)")
    if not 0 < precision < 1:
        raise BadOptionError("precision", precision, "a fraction between 0 and 1", "e.g. precision=0.01 for ±1%")
    if not 0.5 <= confidence < 1:
        raise BadOptionError("confidence", confidence, "a probability in [0.5, 1)", "e.g. 0.95")
    if warmup != "auto" and (not isinstance(warmup, int) or isinstance(warmup, bool) or warmup < 0):
        raise BadOptionError("warmup", warmup, "'auto' or a number of calls >= 0", "e.g. warmup=10")
    if not isinstance(min_samples, int) or min_samples < 1:
        raise BadOptionError("min_samples", min_samples, "an integer >= 1")
    if not isinstance(max_samples, int) or max_samples < min_samples:
        raise BadOptionError("max_samples", max_samples, f"an integer >= min_samples ({min_samples})")


def resolve_device(device: str) -> tuple[str, list[str]]:
    """Map ``auto``/``cuda``/... to a concrete device; a missing CUDA falls back to CPU with a note."""
    notes: list[str] = []
    d = (device or "auto").lower()
    if d not in ("auto", "cpu", "mps") and not (d == "cuda" or (d.startswith("cuda:") and d[5:].isdigit())):
        raise BadOptionError("device", device, "one of " + DEVICE_CHOICES)
    if d.startswith("cuda"):
        try:
            import torch
        except ImportError:
            notes.append("no CUDA here (torch is not installed): timing on the CPU")
            return "cpu", notes
        if not torch.cuda.is_available():
            notes.append("no CUDA device here (torch.cuda.is_available() is False): timing on the CPU")
            return "cpu", notes
        idx = int(d[5:]) if ":" in d else torch.cuda.current_device()
        if idx >= torch.cuda.device_count():
            raise BadOptionError("device", device, f"cuda:0 … cuda:{torch.cuda.device_count() - 1}")
        return f"cuda:{idx}", notes
    if d == "auto":
        if not _cuda_present():
            notes.append("no CUDA device on this machine: timed on the CPU")
        return "cpu", notes  # switched to CUDA after the cold call if the cell uses it
    return d, notes


def _cuda_present() -> bool:
    """Whether a CUDA device exists, without importing torch when the user has not."""
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            return bool(torch.cuda.is_available())
        except Exception:
            return False
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/proc/driver/nvidia/version")


def bench(
    stmt: str | Callable[[], Any],
    setup: str = "",
    *,
    globals: Mapping[str, Any] | None = None,
    label: str | None = None,
    budget: float | None = None,
    precision: float = 0.01,
    confidence: float = 0.95,
    warmup: int | str = "auto",
    min_samples: int = 10,
    max_samples: int = 1_000_000,
    device: str = "auto",
    sync: str = "auto",
    flush: bool = False,
    memory: bool = True,
    gc: bool = False,
    items: float | None = None,
    flops: float | None = None,
    bytes_moved: float | None = None,
    filename: str | None = None,
    clock: Callable[[], float] = time.perf_counter,
    capture_env: bool = True,
) -> BenchResult:
    """Time ``stmt`` (source code or a zero-argument callable) and return a :class:`BenchResult`.

    ``globals`` is the namespace the code reads (copied; the code's assignments do not leak back).
    ``items``/``flops``/``bytes_moved`` declare the work of *one call* and turn time into throughput.
    See the module docstring for the algorithm.
    """
    __tracebackhide__ = True
    _check_options(budget, precision, confidence, warmup, min_samples, max_samples)
    if sync not in SYNC_CHOICES:
        raise BadOptionError("sync", sync, "one of " + ", ".join(SYNC_CHOICES))
    dev, notes = resolve_device(device)
    hard = budget is not None
    soft_budget = float(budget) if hard else DEFAULT_BUDGET
    started_utc = datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
    t_start = clock()

    ns: dict[str, Any] = dict(globals) if globals is not None else {"__name__": "__perfmagic__"}
    if setup and setup.strip():
        try:
            exec(compile(setup, "<perfmagic-setup>", "exec"), ns)
        except SyntaxError as exc:
            raise SetupError(f"the setup code is not valid Python: {exc.msg} (line {exc.lineno}): {setup!r}") from exc
        except Exception as exc:
            raise SetupError(f"the setup code raised {type(exc).__name__}: {exc}") from exc
    if isinstance(stmt, str):
        cell: CompiledCell = compile_cell(stmt, ns, filename or "<perfmagic-cell>")
    else:
        cell = compile_callable(stmt)
    if cell.mode == "exec":
        notes.append("the cell cannot run inside a function (e.g. 'import *'): timed through exec, which adds ~1 µs per call")
    run = cell.run

    from ._env import LoadProbe

    probe = LoadProbe()
    probe.start()
    gc_was_enabled = _gc.isenabled()
    s: Sync = Sync() if sync in ("auto", "none") else make(sync, dev)
    flusher: Callable[[], None] | None = None
    warm: list[tuple[int, float]] = []
    raw: list[float] = []
    cold: float | None = None
    overhead = 0.0
    number = 1
    stop = "precision"
    warnings: list[str] = []

    def run_block(n: int) -> float:
        if flusher is not None:
            flusher()
        tok = s.before()
        t0 = clock()
        v = run(n)
        s.after(v)
        t1 = clock()
        d = s.elapsed(tok)
        return d if d is not None else t1 - t0

    def spent() -> float:
        return clock() - t_start

    interrupted = False
    try:
        if not gc:
            _gc.collect()
            _gc.disable()
        # 2. cold call (also decides the sync backend in auto mode)
        t0 = clock()
        value = run(1)
        if sync == "auto":
            name, why = detect(value, dev)
            if name != "none":
                s = make(name, dev if dev.startswith("cuda") else ("cuda" if name == "cuda" else dev))
                if name == "cuda" and not dev.startswith("cuda"):
                    dev = str(getattr(s, "device", "cuda"))
                notes.append(f"sync {name}: {why}")
        else:
            s.after(value)
        s.finish()
        cold = clock() - t0
        if flush:
            from ._flush import make_flusher

            flusher, nbytes = make_flusher(dev)
            notes.append(f"cache flushed before every sample ({nbytes / 2**20:.0f} MiB written, not timed)")
        # 4. timer overhead
        overhead = _stats.median([run_block(0) for _ in range(15)])
        target_block = max(100.0 * overhead, MIN_BLOCK_S)

        def calls_for(per_call: float, prev: int) -> int:
            if flusher is not None:
                return 1
            n = max(1, math.ceil(target_block / max(per_call, 1e-12)))
            return min(n, prev * 10) if prev else n

        # 5. warmup
        per_call = cold
        number = calls_for(per_call, 1)
        warm_calls = 0
        drifting = False
        wmax = WARMUP_MAX_FRACTION * soft_budget
        wmin = WARMUP_MIN_FRACTION * soft_budget
        warm_start = clock()
        while True:
            if warmup != "auto" and warm_calls >= int(warmup):
                break
            dt = run_block(number)
            warm.append((number, dt))
            warm_calls += number
            per_call = dt / number
            number = calls_for(per_call, number)
            if warmup != "auto":
                number = max(1, min(number, int(warmup) - warm_calls)) if warm_calls < int(warmup) else number
                continue
            wt = clock() - warm_start
            pcs = [d / k for k, d in warm]
            stable = len(pcs) >= 6 and abs(_stats.median(pcs[-3:]) - _stats.median(pcs[-6:-3])) <= DRIFT_TOL * _stats.median(pcs[-6:-3])
            if warm_calls >= WARMUP_MIN_CALLS and wt >= wmin and stable:
                break
            if wt >= wmax or spent() + per_call * number > soft_budget * 0.6:
                drifting = len(pcs) >= 6 and not stable
                break
        if warm and warmup != "auto":
            number = calls_for(warm[-1][1] / warm[-1][0], 0)
        if drifting:
            pcs = [d / k for k, d in warm]
            move = abs(_stats.median(pcs[-3:]) / _stats.median(pcs[-6:-3]) - 1)
            warnings.append(f"timings were still drifting at the end of warmup ({move:.0%} between the last blocks); "
                            "raise --warmup or --budget")
        # 7. sampling
        next_check = min_samples
        limit = soft_budget
        while True:
            raw.append(run_block(number))
            n = len(raw)
            if n >= next_check:
                next_check = max(n + 1, int(n * 1.1))
                pcs = [d / number for d in raw]
                lo, hi, cov = _stats.median_ci(pcs, confidence)
                if cov >= confidence and (hi - lo) / 2 <= precision * _stats.median(pcs):
                    stop = "precision"
                    break
            if n >= max_samples:
                stop = "max_samples"
                break
            est = _stats.median(raw[-5:])
            if spent() + est > limit:
                if not hard and n < min_samples and limit < MAX_SOFT_BUDGET:
                    limit = MAX_SOFT_BUDGET
                    continue
                stop = "budget"
                break
    except KeyboardInterrupt:
        interrupted = True
        stop = "interrupted"
    finally:
        if gc_was_enabled:
            _gc.enable()
        try:
            s.finish()
        except Exception:  # pragma: no cover - device error after an interrupt
            pass

    mem = None
    if memory and not interrupted and cold is not None:
        from ._memory import measure

        try:
            mem = measure(lambda: run(1), s.finish, dev)
        except KeyboardInterrupt:
            interrupted, stop = True, "interrupted"
    others = probe.stop()
    wall = clock() - t_start

    env: dict[str, Any] = {}
    if capture_env:
        from ._env import capture, doubt_warnings

        env = capture(dev)
        warnings += doubt_warnings(env, None, others, env.get("usable_cores"))
        env["others_cores"] = others
    work = {k: float(v) for k, v in (("items", items), ("flops", flops), ("bytes", bytes_moved)) if v is not None}
    policy = {
        "budget_s": soft_budget, "budget_hard": hard, "precision": precision, "confidence": confidence,
        "warmup": warmup, "warmup_calls": sum(k for k, _ in warm), "min_samples": min_samples,
        "gc": "enabled" if gc else "disabled while timing", "flush": bool(flush), "compile_mode": cell.mode,
        "target_block_s": max(100.0 * overhead, MIN_BLOCK_S), "python": sys.version.split()[0],
    }
    result = BenchResult(
        code=cell.source, raw=tuple(raw), number=number, cold_s=cold, warmup=tuple(warm), label=label,
        setup=setup or "", device=dev, sync=s.name, timer_overhead_s=overhead, stop_reason=stop,
        wall_s=wall, status="interrupted" if interrupted else "ok", policy=policy, env=env, memory=mem,
        work=work, notes=tuple(notes), started_utc=started_utc,
    )
    result = _with_doubts(result, warnings, min_samples, precision)
    if interrupted:
        raise BenchInterrupted(result if (raw or cold is not None) else None)
    return result


def _with_doubts(r: BenchResult, warnings: list[str], min_samples: int, precision: float) -> BenchResult:
    """Attach the one-line warnings that make a result doubtful."""
    from dataclasses import replace

    w = list(warnings)
    if r.raw:
        med = r.median
        if r.n_samples < min_samples:
            w.append(f"only {r.n_samples} samples fit in the budget (wanted {min_samples}); use --budget to measure longer")
        if r.rel_ci > precision and r.stop_reason == "budget":
            w.append(f"precision target ±{precision:.1%} not reached (±{r.rel_ci:.2%}) within the budget; "
                     "use --budget to measure longer")
        if med > 0 and r.iqr / med > 0.10:
            w.append(f"spread is high: the IQR is {r.iqr / med:.0%} of the median — the machine or the code is noisy")
        if r.cold_s is not None and med > 0 and r.cold_s > 3 * med and r.cold_s - med > 1e-3:
            w.append(f"the first call took {r.cold_s / med:.0f}× a warm call ({fmt_time(r.cold_s)}): lazy init, JIT, "
                     "autotuning or cold caches; it is reported apart, not in the samples")
        block = med * r.number
        if r.timer_overhead_s > 0 and r.timer_overhead_s > 0.01 * block:
            w.append(f"a sample ({fmt_time(block)}) is so short that the timer's own cost ({fmt_time(r.timer_overhead_s)}) "
                     f"is {r.timer_overhead_s / block:.0%} of it")
    return replace(r, warnings=tuple(w))
