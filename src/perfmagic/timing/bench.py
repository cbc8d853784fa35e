"""The measurement engine: ``bench()`` times code the way a careful performance engineer would.

The algorithm, in order (every step is visible in the result):

1. **Compile once**, outside any timed region (:mod:`perfmagic._compile`); a ``SyntaxError`` points at
   the user's line. Setup code runs once, in a copy of the given namespace.
2. **Cold call.** The first call is timed on its own (including a device synchronize) and reported as
   ``cold_s``: lazy initialisation, JIT, autotuning and cold caches all land here, not in the samples.
3. **Sync choice.** With ``sync="auto"`` the backend is chosen from what the cold call touched
   (:func:`perfmagic.core.sync.detect`, :mod:`perfmagic.core.devicework`): CUDA events when the cold
   call's own work ran on CUDA (its torch ops' tensors, its CUDA allocations, a CUDA tensor returned, or
   CUDA initialised by the call); a CUDA context that earlier cells initialised is no reason.
4. **Timer overhead.** Empty blocks (``run(0)`` + sync) are timed; their median is the overhead.
5. **Warmup**, adaptive: blocks are run and re-sized until the median per-call time of the last three
   blocks is within 5% of the three before (at least 5 calls — 2 for calls over 50 ms — and 2% of the
   budget, at most 2 s), or until 30% of the budget is spent (then a warning says the timings were still drifting).
   ``warmup=N`` runs N calls.
6. **Block calibration.** Calls per block ``n`` are chosen so a block lasts at least
   ``max(100 × overhead, 200 µs)``: the timer's own cost stays under 1% of a sample.
7. **Sampling** until the distribution-free 95% CI of the median is within ``precision`` (±1% by
   default) with at least ``min_samples`` samples spanning at least ``MIN_SPAN_S`` (50 ms; 250 ms of
   device time on a GPU, whose power cap moves the clock over ~0.1 s; at most 30% of the budget) of
   sampled time — a precise interval over 2 ms of samples cannot see the machine's slower states — or
   the budget is spent. Where NVML says the device's clock is held down when the interval is first met,
   the span is ``CAPPED_MIN_SPAN_S`` (0.75 s, at most 75% of the budget; note ``bench.clock-held``). With the default budget an answer is also due after ``ANSWER_S`` (0.1 s, the
   drift guard and the tail after the samples included): from then on an interval within ±2.5%
   (``ANSWER_PRECISION``) stops the run (stop reason ``"time"``), so a call of a millisecond or less costs
   about 0.1 s, as ``%timeit``'s first loops do; ``budget=`` (``-b``) buys the stricter target. On CUDA the samples run back to back (``CudaSync.pace = "sustained"``: the
   next block is launched before the last is awaited), as a training loop's kernels do. A budget the user gives is a
   hard limit; the default (1 s) may stretch, up to 10 s, only until ``min_samples`` are in.
   The GC is disabled during timed blocks unless ``gc=True`` (as ``timeit`` does). On the host, the
   speed gate (:class:`perfmagic.core.reference.SpeedGate`) sets aside samples taken in the machine's
   slow state, where that state is the exception, and waits for the usual speed (at most 25% of the budget).
8. **Memory**, in one extra untimed call (:mod:`perfmagic._memory`).
9. **Environment and doubts**: the environment is captured (:mod:`perfmagic._env`), the CPU load of
   other processes during the run (and, apart, during the cold call) is measured, a fixed reference
   workload times the machine's own speed before and after the run (:mod:`perfmagic.core.reference`),
   and one-line warnings are attached, each only where its cause was measured: the cold call's cause
   only when no other process took its CPU (:func:`cold_call_warning`), the machine's slow state only
   where the samples show it (:func:`speed_state_warning`).

Ctrl-C at any point after the cold call raises :class:`~perfmagic._errors.BenchInterrupted` carrying
the partial result (status ``"interrupted"``). Exceptions from the user's code propagate unchanged.
"""

from __future__ import annotations

import gc as _gc
import math
import sys
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any

from ..core import stats as _stats
from ..errors import BadOptionError, BenchInterrupted
from ..findings import Finding
from .results import BenchResult
from ..core.subject import DRIFT_TOL, Subject, cuda_present
from ..core.sync import SYNC_CHOICES

DEFAULT_BUDGET = 1.0
MIN_SPAN_S = 0.05   # a precision stop needs this much sampled time (at most 30% of the budget)
# ...and this much device time on a GPU: a power-capped H100 moves its SM clock over ~0.1 s, so answers
# that stopped after 50 ms of samples differed by 7-19% from round to round (bench_gpu, 2026-11-26)
DEVICE_MIN_SPAN_S = 0.25
# ...and this much where the device's clock is held down (NVML: power cap, thermal, hardware slowdown) when the
# interval is met: under its 700 W cap an H200's bf16 matmuls moved 1.3-3.2% from one 0.3 s answer to the next,
# against 0.7-1.0% for adaptive_autorange's ~1 s answers (bench_gpu, 2026-11-28)
CAPPED_MIN_SPAN_S = 0.75
CAPPED_MAX_SHARE = 0.75  # ...at most this share of the budget
REFERENCE_S = 0.004  # the drift guard's reference workload, timed before and after the samples
MAX_SOFT_BUDGET = 10.0
# the speed gate only where its wait can pay: with b=0.1 s (a 25 ms wait) it left np.sort 1 sample of its 9,
# and b=0.3 s ended as slow as without it (bench_timing_quality, 64bfe86)
GATE_MIN_BUDGET_S = 0.5
ANSWER_S = 0.1  # the default budget: an answer is due after this much time (before-phase and tail included) ...
ANSWER_PRECISION = 0.025  # ... where its interval is within this by then (a budget given is a hard limit instead)
_TAIL_S = [0.02]  # what the environment capture after the samples cost last time in this process
WARMUP_MIN_CALLS = 5
WARMUP_MIN_CALLS_SLOW = 2  # calls slower than SLOW_CALL_S: their one-time costs already hit the cold call
SLOW_CALL_S = 0.05
WARMUP_MIN_FRACTION = 0.02
WARMUP_MIN_S = 2.0  # ...of the budget, but never more than this: a huge budget must not hold warmup for hours
WARMUP_MAX_FRACTION = 0.30
MAX_BUDGET_S = 24 * 3600.0  # a longer measuring budget is a typo (1e30), not a plan
DEVICE_CHOICES = ", ".join(("auto", "cpu", "cuda", "cuda:N", "mps"))


def check_budget(budget: Any, expected: str | None = None, example: str = "budget=0.5", per: str = "") -> None:
    """Refuse a measuring budget that is not a number of seconds in (0, 24 h] (``expected``: what the
    error says a budget is, by default a positive number of seconds, at most 24 h; ``per``: what those
    seconds are for, said in that default: ``per="worker count"``)."""
    if budget is None:
        return
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not budget > 0 or math.isinf(budget):
        raise BadOptionError("budget", budget,
                             expected or f"a positive number of seconds{f' per {per}' if per else ''}, at most 24 h",
                             f"e.g. {example} (or --budget 2s)")
    if budget > MAX_BUDGET_S:
        raise BadOptionError("budget", budget, f"at most {MAX_BUDGET_S:.0f} s (24 h) of measuring",
                             f"e.g. {example}; a measurement stops at its precision target long before that")


def warmup_min_s(budget_s: float) -> float:
    """The least warmup time: 2% of the budget, at most ``WARMUP_MIN_S``."""
    return min(WARMUP_MIN_FRACTION * budget_s, WARMUP_MIN_S)


def _check_options(budget: float | None, precision: float, confidence: float, warmup: Any,
                   min_samples: int, max_samples: int) -> None:
    check_budget(budget)
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


def prepare(budget: float | None, precision: float, confidence: float, warmup: Any, min_samples: int,
            max_samples: int, sync: str, device: str, default_budget: float) -> tuple[str, list[Any], bool, float, str]:
    """Validate the options shared by every driver: ``(device, notes, budget_is_hard, budget_s, started_utc)``."""
    _check_options(budget, precision, confidence, warmup, min_samples, max_samples)
    if sync not in SYNC_CHOICES:
        raise BadOptionError("sync", sync, "one of " + ", ".join(SYNC_CHOICES))
    dev, notes = device_and_notes(device)
    hard = budget is not None
    started_utc = datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
    return dev, notes, hard, (float(budget) if hard else default_budget), started_utc


def resolve_device(device: str) -> tuple[str, list[str]]:
    """Map ``auto``/``cuda``/... to a concrete device; a missing CUDA falls back to CPU with a note (its
    sentence: results that keep notes as text call this one; :func:`device_and_notes` gives the findings)."""
    dev, notes = device_and_notes(device)
    return dev, [str(n) for n in notes]


def device_and_notes(device: str) -> tuple[str, list[Finding]]:
    """:func:`resolve_device` with its notes as findings (``bench.no-cuda``)."""
    notes: list[Finding] = []
    d = (device or "auto").lower()
    if d not in ("auto", "cpu", "mps") and not (d == "cuda" or (d.startswith("cuda:") and d[5:].isdigit())):
        raise BadOptionError("device", device, "one of " + DEVICE_CHOICES)
    if d.startswith("cuda"):
        try:
            import torch
        except ImportError:
            raise BadOptionError("device", device, "cpu or auto (torch is not installed here, so there is no CUDA)",
                                 "use -d auto (device='auto'): CUDA is used where the cell's work runs on it") from None
        if not torch.cuda.is_available():
            raise BadOptionError("device", device, "cpu or auto (no CUDA device here: torch.cuda.is_available() "
                                 "is False)", "use -d auto (device='auto'): the cell is timed on the device its "
                                 "work runs on") from None
        idx = int(d[5:]) if ":" in d else torch.cuda.current_device()
        if idx >= torch.cuda.device_count():
            n = torch.cuda.device_count()
            raise BadOptionError("device", device, f"cuda:0 … cuda:{n - 1} ({n} GPU(s) visible)",
                                 f"use -d cuda:0{' … cuda:%d' % (n - 1) if n > 1 else ''}, or check "
                                 "CUDA_VISIBLE_DEVICES")
        return f"cuda:{idx}", notes
    if d == "auto":
        if not cuda_present():
            notes.append(Finding.of("bench.no-cuda"))
        return "cpu", notes  # switched to CUDA after the cold call if the cell uses it
    return d, notes


def bench(
    code: str | Callable[[], Any],
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
    """Time ``code`` (source code or a zero-argument callable) and return a :class:`BenchResult`.

    ``globals`` is the namespace the code reads (copied; the code's assignments do not leak back).
    ``items``/``flops``/``bytes_moved`` declare the work of *one call* and turn time into throughput.
    See the module docstring for the algorithm.
    """
    __tracebackhide__ = True
    dev, notes, hard, soft_budget, started_utc = prepare(
        budget, precision, confidence, warmup, min_samples, max_samples, sync, device, DEFAULT_BUDGET)
    subj = Subject(code, setup, globals, filename or "<perfmagic-cell>", sync, dev, clock)
    ref_before = _before_timing(gc, capture_env)
    t_start = clock()  # the setup code is the user's own: the budget covers the measurement from here

    from ..core.load import LoadProbe

    probe = LoadProbe().start()
    gc_was_enabled = _gc.isenabled()
    stop = "precision"
    warnings: list[str] = []

    def spent() -> float:
        return clock() - t_start

    interrupted = False
    gate = None
    try:
        if not gc:
            _gc.disable()
        cold_probe = LoadProbe().start()  # was the cold call alone on its CPU? (says whether its cause is known)
        subj.cold_call(flush)
        cold_probe.stop()
        subj.measure_overhead()
        subj.number = subj.calls_for(subj.cold or 0.0, 1)
        _warm_up(subj, warmup, soft_budget, hard, clock, spent, warnings)
        gate = _speed_gate(subj, soft_budget, capture_env, min_samples)
        stop = _sample(subj, spent, soft_budget=soft_budget, hard=hard, precision=precision, confidence=confidence,
                       min_samples=min_samples, max_samples=max_samples, memory=memory, gate=gate)
    except KeyboardInterrupt:
        interrupted = True
        stop = "interrupted"
    finally:
        if gc_was_enabled:
            _gc.enable()
        subj.finish()

    mem, cut = _untimed_memory(subj) if memory and not interrupted and subj.cold is not None else (None, False)
    if cut:
        interrupted, stop = True, "interrupted"
    env = _run_environment(subj, probe, cold_probe, ref_before, warnings, capture_env, clock)
    _gate_record(gate, subj, env, notes)
    work = {k: float(v) for k, v in (("items", items), ("flops", flops), ("bytes", bytes_moved)) if v is not None}
    policy = _policy(subj, soft_budget, hard, precision, confidence, warmup, min_samples, gc, flush)
    result = BenchResult(
        code=subj.cell.source, raw=tuple(subj.raw), number=subj.number, cold_s=subj.cold, warmup=tuple(subj.warm),
        label=label, setup=subj.setup, device=subj.device, sync=subj.sync.name, timer_overhead_s=subj.overhead,
        stop_reason=stop, wall_s=clock() - t_start, status="interrupted" if interrupted else "ok", policy=policy,
        env=env, memory=mem, work=work, notes=tuple(notes + subj.notes), started_utc=started_utc,
    )
    result = _with_doubts(result, warnings, min_samples, precision)
    if interrupted:
        raise BenchInterrupted(result if (subj.raw or subj.cold is not None) else None)
    return result


def _before_timing(gc: bool, capture_env: bool) -> float | None:
    """What happens before the budget starts: the process primed, the heap collected when the
    collector will run during the samples, the drift guard's reading before (None without ``capture_env``)."""
    from ..core.env import prime

    prime()  # once per process: imports and version lookups are not the measurement's
    if gc:  # the collector will run during the samples: start them from a clean heap, not from a
        _gc.collect()  # collection that earlier cells' garbage makes due (with it disabled, no collection
        # can fall inside a sample, and a full one over torch's heap cost ~90 ms of every answer)
    from ..core.reference import reference_time

    return reference_time(REFERENCE_S) if capture_env else None  # the machine's speed state before


def _untimed_memory(subj: Subject) -> tuple[Any, bool]:
    """Peak memory of one untimed call after the samples, and whether Ctrl-C cut it."""
    from ..core.memory import measure

    try:
        return measure(lambda: subj.cell.run(1), subj.sync.finish, subj.device), False
    except KeyboardInterrupt:
        return None, True


def _warm_up(subj: Subject, warmup: int | str, soft_budget: float, hard: bool, clock: Callable[[], float],
             spent: Callable[[], float], warnings: list[str]) -> None:
    """Warmup: ``warmup`` calls, or (``"auto"``) blocks until the per-call time is stable, within a share
    of the budget; timings still drifting at its end are a warning."""
    warm_start = clock()
    if warmup != "auto":
        while subj.warm_calls < int(warmup):
            subj.warm_block(cap=int(warmup) - subj.warm_calls)
    else:
        wmax, wmin = WARMUP_MAX_FRACTION * soft_budget, warmup_min_s(soft_budget)
        while True:
            per_call = subj.warm_block()
            wt = clock() - warm_start
            min_calls = WARMUP_MIN_CALLS if per_call < SLOW_CALL_S else WARMUP_MIN_CALLS_SLOW
            if subj.warm_calls >= min_calls and wt >= wmin and subj.warm_stable():
                break
            over = wt >= wmax or spent() + per_call * subj.number > soft_budget * 0.6
            if over and (subj.warm_calls >= min_calls or hard):
                drift = subj.warm_drift()
                if drift is not None and drift > DRIFT_TOL:
                    warnings.append(Finding.of("bench.warmup-drift", drift=drift))
                break


def _speed_gate(subj: Subject, soft_budget: float, capture_env: bool, min_samples: int) -> Any:
    """The gate that keeps the machine's slow-state stretches out of the samples
    (:class:`perfmagic.core.reference.SpeedGate`): host-timed runs with the drift guard on only (a device's
    time does not follow the host's speed state), with a budget of ``GATE_MIN_BUDGET_S`` or more; it may wait
    ``GATE_SHARE`` of the budget, at most ``GATE_MAX_S``."""
    if not capture_env or subj.sync.device_timed or soft_budget < GATE_MIN_BUDGET_S:
        return None
    from ..core.reference import GATE_MAX_S, GATE_SHARE, SpeedGate

    return SpeedGate(subj.clock, min(GATE_SHARE * soft_budget, GATE_MAX_S), enough=min_samples)


def _gate_record(gate: Any, subj: Subject, env: dict[str, Any], notes: list[Any]) -> None:
    """What the speed gate did, into the result: ``env["speed_gate"]`` and its note (``bench.speed-gate``);
    on a device, the note that its held-down clock made the samples span longer (``bench.clock-held``).
    Where the budget ran out with every sample set aside, those samples are the answer (the slow-state
    warning then says what they are)."""
    if subj.held:  # the device's clock was held down: the samples spanned longer (_held_span)
        notes.append(Finding.of("bench.clock-held", reasons=tuple(subj.held["reasons"]), span_s=subj.held["span_s"],
                                sampled_s=sum(subj.raw)))
    if gate is None:
        return
    if not subj.raw and gate.set_aside:
        subj.raw[:], gate.set_aside = gate.set_aside, []
    g = gate.summary()
    if not g:
        return
    env["speed_gate"] = g
    if g["n_set_aside"] or g["waited_s"]:
        keys = ("waited_s", "waits", "gave_up", "kept_answer", "cap_s", "slow_ref_s", "best_ref_s")
        notes.append(Finding.of("bench.speed-gate", n=g["n_set_aside"], **{k: g[k] for k in keys}))


def _sample(subj: Subject, spent: Callable[[], float], *, soft_budget: float, hard: bool, precision: float,
            confidence: float, min_samples: int, max_samples: int, memory: bool, gate: Any = None) -> str:
    """The sampling loop and its stop rule (module docstring); returns why it stopped: ``"precision"``,
    ``"time"`` (the default budget's answer after ``ANSWER_S``), ``"max_samples"`` or ``"budget"``.
    ``gate``: a :class:`~perfmagic.core.reference.SpeedGate`, checked after each sample and before a stop."""
    next_check = min_samples
    limit = soft_budget
    min_span = min(DEVICE_MIN_SPAN_S if subj.sync.device_timed else MIN_SPAN_S, 0.3 * soft_budget)
    held_asked = not subj.sync.device_timed  # the device's clock is asked about once, when the interval is met
    while True:
        subj.sample()
        if gate is not None and gate.check(subj.raw) == "stop":  # it stayed slow: the fast samples are the answer
            return "budget" if hard else "time"
        n = len(subj.raw)
        if n >= next_check:
            next_check = max(n + 1, int(n * 1.1))
            pcs = subj.per_call()
            lo, hi, cov = _stats.median_ci(pcs, confidence)
            # a precise interval over a few milliseconds of samples says nothing about the machine
            # states that last longer: the samples must also span min_span of sampled time
            half = (hi - lo) / 2 / max(_stats.median(pcs), 1e-300)
            spanned = cov >= confidence and sum(subj.raw) >= min_span
            if spanned and not held_asked:  # (where the device's clock is held down, the span grows)
                held_asked = True
                min_span = _held_span(subj, min_span, soft_budget)
                spanned = sum(subj.raw) >= min_span
            if spanned:
                # the default budget: past ANSWER_S, an interval within ANSWER_PRECISION is the answer
                due = ("precision" if half <= precision else "time" if not hard and half <= ANSWER_PRECISION
                       and spent() + _TAIL_S[0] + REFERENCE_S >= ANSWER_S else None)
                gated = gate.check(subj.raw, final=True) if due and gate is not None else None
                if due and gated is None:
                    return due
                if gated == "stop":
                    return "budget" if hard else "time"
        if n >= max_samples:
            return "max_samples"
        recent = subj.raw[-5:] or gate.set_aside[-5:]  # (a gate may have set every sample aside)
        # a hard budget also covers what follows the samples: the untimed memory call and the
        # environment capture (their cost last time in this process), and a block that runs long
        nxt = max(recent) + _TAIL_S[0] + (recent[-1] / subj.number if memory else 0.0) if hard else _stats.median(recent)
        if spent() + nxt > limit:
            if not hard and n < min_samples and limit < MAX_SOFT_BUDGET:
                limit = MAX_SOFT_BUDGET  # stretch the default budget only until min_samples
                continue
            return "budget"
        if limit > soft_budget and n >= min_samples:
            return "budget"


def _held_span(subj: Subject, min_span: float, soft_budget: float) -> float:
    """The span a device-timed precision stop needs: ``min_span``, or ``CAPPED_MIN_SPAN_S`` (at most
    ``CAPPED_MAX_SHARE`` of the budget) where NVML says the device's clock is held down right now: a capped
    clock moves over tenths of a second to seconds, so a short answer reads whichever state it fell in. Kept
    in ``subj.held`` (the reasons and the span) for the result's note."""
    from ..core.env import cuda_index, gpu_clock_held

    dev = str(subj.device)
    reasons = gpu_clock_held(cuda_index(dev)) if dev.startswith("cuda") else None
    if not reasons:
        return min_span
    span = max(min_span, min(CAPPED_MIN_SPAN_S, CAPPED_MAX_SHARE * soft_budget))
    subj.held = {"reasons": reasons, "span_s": span}
    return span


def _run_environment(subj: Subject, probe: Any, cold_probe: Any, ref_before: float | None, warnings: list[str],
                     capture_env: bool, clock: Callable[[], float]) -> dict[str, Any]:
    """After the samples: the load probe stopped, the environment captured with the load, the drift
    guard and the cold call's load; the cost of this tail remembered for the next hard budget."""
    t_tail = clock()
    others = probe.stop()
    throttle = _throttle_warning(probe)
    if throttle:
        warnings.append(throttle)
    env = _environment(subj.device, others, warnings, probe.own_cores, probe.active_threads) if capture_env else {}
    if capture_env and probe.scope == "container":
        env.update(others_scope="container", host_others_cores=probe.host_others_cores,
                   throttled_cores=probe.throttled_cores)
    if probe.own_cores is not None:  # cores this process kept busy over the measurement (not the GC before it)
        env["own_cores"] = round(probe.own_cores, 4)
    if capture_env:
        from ..core.reference import best_seen

        env["reference_before_s"], env["reference_best_s"] = ref_before, best_seen()
        if subj.cold is not None:
            env.update(_cold_load(cold_probe))
    if capture_env:
        _TAIL_S[0] = min(0.25, max(0.7 * _TAIL_S[0], clock() - t_tail))  # a slowly forgetting maximum
    return env


def _policy(subj: Subject, soft_budget: float, hard: bool, precision: float, confidence: float,
            warmup: int | str, min_samples: int, gc: bool, flush: bool) -> dict[str, Any]:
    """How the run was measured, kept in the result."""
    return {
        "budget_s": soft_budget, "budget_hard": hard, "precision": precision, "confidence": confidence,
        **({} if hard else {"answer_s": ANSWER_S, "answer_precision": ANSWER_PRECISION}),
        "warmup": warmup, "warmup_calls": subj.warm_calls, "min_samples": min_samples,
        "gc": "enabled" if gc else "disabled while timing", "flush": bool(flush), "compile_mode": subj.cell.mode,
        "target_block_s": subj.target_block, "python": sys.version.split()[0],
    }


def _environment(device: str, others: float | None, warnings: list[str],
                 own_cores: float | None = None, active_threads: int | None = None) -> dict[str, Any]:
    """Capture the environment, add the load and drift-guard fields, append doubt warnings."""
    from ..core.env import capture, doubt_warnings
    from ..core.reference import reference_time

    env = capture(device)
    warnings += doubt_warnings(env, None, others, env.get("usable_cores"), own_cores, active_threads)
    env["others_cores"] = others
    env["active_threads"] = active_threads
    env["reference_s"] = reference_time(REFERENCE_S)  # the drift guard: the machine's speed after the samples
    return env  # a slow reading is named by _with_doubts only where the samples show it (speed_state_warning)


def _throttle_warning(probe: Any) -> Finding | None:
    """The container's CPU quota paused this process's threads during the run (cgroup ``cpu.stat``)."""
    t = probe.throttled_cores
    if t is None or t < 0.05:
        return None
    from ..core.container import limits

    q = limits().cpu_quota
    return Finding.of("bench.throttled", cores=t, quota=q or None, threads=max(1, int(q)) if q else 1)


def _cold_load(p: Any) -> dict[str, Any]:
    """What the load probe saw during the cold call: other processes' cores (None under 20 ms), how often
    the scheduler took this process's CPU, and the time it spent off the CPU."""
    off = max(0.0, p.wall_s * (1 - p.own_cores)) if p.wall_s is not None and p.own_cores is not None else None
    return {"cold_others_cores": None if p.others_cores is None else round(p.others_cores, 4),
            "cold_preempted": p.preempted, "cold_off_cpu_s": off}


def _with_doubts(r: BenchResult, warnings: list[str], min_samples: int, precision: float) -> BenchResult:
    """Attach the one-line warnings that make a result doubtful."""
    from dataclasses import replace

    w = list(warnings)
    if r.raw:
        med = r.median
        if r.n_samples < min_samples:
            w.append(Finding.of("bench.few-samples", n=r.n_samples, wanted=min_samples))
        if r.rel_ci > precision and r.stop_reason == "budget":
            w.append(Finding.of("bench.precision", target=precision, reached=r.rel_ci))
        if med > 0 and r.iqr / med > 0.10:
            w.append(Finding.of("bench.spread", iqr=r.iqr / med))
        cold = cold_call_warning(r)
        if cold:
            w.append(cold)
        block = med * r.number
        if r.timer_overhead_s > 0 and r.timer_overhead_s > 0.01 * block:
            w.append(Finding.of("bench.short-sample", block_s=block, timer_s=r.timer_overhead_s))
        if "reference_s" in r.env and not r.policy.get("interleaved"):  # an interleaved A/B cancels the state
            from ..core.reference import fast_median, note_run

            key = _code_key(r)
            speed = speed_state_warning(r, fast_median(key))
            if speed:
                w.append(speed)
                # the gate's note must not say every sample kept ran in the usual state: these did not
                notes = tuple(n.with_values(kept_slow=speed["slow_n"], kept_where=speed["where"])
                              if getattr(n, "kind", None) == "bench.speed-gate" else n for n in r.notes)
                r = replace(r, notes=notes)
            if r.status == "ok":
                note_run(key, med, r.env.get("reference_before_s"), r.env.get("reference_s"))
    return replace(r, warnings=tuple(w))


QUIET_CORES = 0.25  # other processes' cores below which a probe counts as quiet (as doubt_warnings does)


def _code_key(r: BenchResult) -> str:
    import hashlib

    return hashlib.sha256("\0".join((r.code, r.setup, r.device)).encode()).hexdigest()[:16]


def cold_call_warning(r: BenchResult) -> Finding | None:
    """The first call's line, when it took over 3× a warm call (and 1 ms more). Its cause (lazy init, JIT,
    autotuning, cold caches) is named only when the load probe around it was quiet: other processes under
    ``QUIET_CORES`` cores, or — a cold call under 20 ms, too short for that reading — the scheduler never
    took this process's CPU, or took it for under half the extra time. Otherwise the load is named and
    the cause left unknown."""
    med = r.median if r.raw else math.nan
    if r.cold_s is None or not med > 0 or not (r.cold_s > 3 * med and r.cold_s - med > 1e-3):
        return None
    oc, pre, off = (r.env.get(k) for k in ("cold_others_cores", "cold_preempted", "cold_off_cpu_s"))
    lost = off or 0.0
    if oc is not None:
        case = "quiet" if oc < QUIET_CORES else "loaded"
    elif pre is not None:
        case = ("never-preempted" if pre == 0 else "little-off" if lost < 0.5 * (r.cold_s - med) else "preempted")
    else:
        case = "unmeasured"
    return Finding.of("bench.cold-call", ratio=r.cold_s / med, cold_s=r.cold_s, case=case, others=oc,
                      preempted=pre, off_s=lost)


def speed_state_warning(r: BenchResult, earlier_fast_median: float | None = None) -> Finding | None:
    """The machine's slow speed state, named as such, when a fixed-reference reading beside the run was
    slow *and* the run's samples show it (:func:`perfmagic.core.reference.speed_state`), and other
    processes were quiet (under ``QUIET_CORES``; their load is its own warning). Says what still holds."""
    from ..core.reference import speed_state

    env = r.env
    before, after, best = env.get("reference_before_s"), env.get("reference_s"), env.get("reference_best_s")
    s = speed_state(r.times, before, after, best, earlier_fast_median)
    oc = env.get("others_cores")
    if s is None or (oc is not None and oc >= QUIET_CORES):
        return None
    return Finding.of("bench.slow-state", where=s.where, slow_n=s.slow_n, n=s.n, ratio=s.ratio, others=oc,
                      slow_ref_s=s.slow_ref_s, best_ref_s=s.best_ref_s)
