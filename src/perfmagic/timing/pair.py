"""Same-process A/B: measure two pieces of code interleaved (A B, B A, A B, …) and compare them.

Runs taken minutes apart mix the change with the machine's drift. Here both sides are timed in one
process, block after block; which side goes first in a pair is a coin flip (seeded). That cancels a
systematic first-or-second effect, as the A B B A order does, without a fixed period: under load the
scheduler's time slices can fall on the same slots of a repeating pattern (a re-measured pair beside
1.5 busy cores once came out 2.5× "faster" for a B 20% slower, with A in the pattern's outer slots). Pair *i* is (A's block *i*, B's block *i*), measured back to back, so a slow
second of the machine slows both members of the pair and cancels in their ratio. The comparison is
the paired one of :mod:`perfmagic._compare` (bootstrap over blocks of per-pair log ratios).

Algorithm: setup and compile both; cold call of each; timer overhead of each; warmup alternating
blocks until both are stable (the same rules as :func:`perfmagic.bench`); then pairs until the
distribution-free CI of the median log ratio is within ``precision`` (with at least ``min_samples``
pairs), or its 99% CI is decisive against ``min_effect`` (wholly beyond or wholly within the bar, after
at least 30 pairs: the stricter level pays for looking repeatedly), or the budget is spent. The
default budget is sized to the calls: 2 s, or enough for ``AUTO_PAIRS`` pairs after the first pair
shows how long one takes (at most ``AUTO_MAX_S``); a budget that is given is kept. When the budget ends
an undecided comparison, :meth:`PairResult.advice` says how long a decision would take.
Blocks last at least 1 ms, so one scheduler hiccup does not split a pair.
"""

from __future__ import annotations

import gc as _gc
import math
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ..core import stats as _stats
from ..core.subject import Subject
from ..errors import BadOptionError, BenchInterrupted
from ..findings import Finding
from ..result import Displayed
from .bench import WARMUP_MAX_FRACTION, WARMUP_MIN_CALLS, _environment, _with_doubts, prepare, warmup_min_s
from .results import BenchResult

DEFAULT_PAIR_BUDGET = 2.0
AUTO_PAIRS = 12  # a default budget stretches to give at least this many pairs ...
AUTO_MAX_S = 25.0  # ... up to this long (a 0.5 s training step: 12 pairs of 1 s; a noisy 0.2 s step: ~50)
SIZE_AT = 6  # after this many pairs, the budget also grows to the pairs their spread says a decision needs
DECISIVE_MIN = 30  # the earliest early stop on a clear verdict (looks at every 5th pair after it) ...
DECISIVE_MIN_SLOW = 10  # ... for pairs of at least SLOW_PAIR_S: few, slow looks (a training step)
SLOW_PAIR_S = 0.05
PAIR_MIN_BLOCK_S = 1e-3  # longer blocks than a single run: a pair must not be split by one scheduler hiccup
DECISIVE_CONFIDENCE = 0.99  # early stop on a clear verdict, at a stricter level for the repeated looks


@dataclass(frozen=True, repr=False)
class PairResult(Displayed):
    """Both sides of an interleaved A/B measurement and their paired comparison."""

    primary_metric: ClassVar[str] = "ratio"
    renderer: ClassVar[str] = "pair"

    a: BenchResult
    b: BenchResult
    comparison: Any  # perfmagic._compare.Comparison; None when interrupted before 3 pairs

    def advice(self) -> str | None:
        """When the budget ended the pairs before a verdict: about how long a decision at the bar would
        take, or why none will come (the numbers: :func:`budget_needed`; the words: :mod:`perfmagic.render.pair`)."""
        from ..render.pair import advice

        return advice(budget_needed(self))

    def metrics(self) -> dict[str, Any]:
        c = self.comparison
        out: dict[str, Any] = {"a_median_s": self.a.median, "b_median_s": self.b.median, "pairs": self.a.n_samples}
        if c is not None:
            out.update(ratio=c.ratio, ci_low=c.ci_low, ci_high=c.ci_high, verdict=c.verdict)
        return out

    def samples(self) -> dict[str, list[Any]]:
        return {"a_per_call_s": list(self.a.times), "b_per_call_s": list(self.b.times)}

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a.to_dict(), "b": self.b.to_dict(),
                "comparison": self.comparison.to_dict() if self.comparison is not None else None}


@dataclass(frozen=True)
class BudgetNeed:
    """What a decision at the ``min_effect`` bar would take, after ``pairs`` pairs of ``pair_s`` seconds:
    ``kind`` is ``"on the bar"`` (no budget will settle it), ``"near the bar"`` (measure longer, about
    ``secs``) or ``"too few"`` (about ``pairs_needed`` pairs, ``secs`` seconds)."""

    kind: str
    ratio: float
    ci_low: float
    ci_high: float
    min_effect: float
    pairs: int
    pair_s: float
    pairs_needed: int = 0
    secs: int = 0


def budget_needed(pr: Any) -> BudgetNeed | None:
    """When the budget ended the pairs before a verdict: about how long a decision at the bar would take
    (the interval narrows as one over the square root of the pairs), or that none will come; None when
    the pairs gave a verdict or stopped for another reason."""
    c = pr.comparison
    if c is None or c.verdict != "inconclusive" or pr.a.stop_reason not in ("budget", "precision"):
        return None
    n = pr.a.n_samples
    pair_s = (sum(pr.a.raw) + sum(pr.b.raw)) / max(n, 1)
    band, r = math.log1p(c.min_effect), math.log(c.ratio)
    lo, hi = math.log(c.ci_low), math.log(c.ci_high)
    if r > band:  # the low end must clear the bar
        need = (r - lo) / (r - band)
    elif r < -band:  # the high end must clear it
        need = (hi - r) / (-band - r)
    else:  # both ends must come inside
        need = max((hi - r) / (band - r), (r - lo) / (r + band))
    near = min(abs(r - band), abs(r + band)) < 0.15 * band
    same = dict(ratio=c.ratio, ci_low=c.ci_low, ci_high=c.ci_high, min_effect=c.min_effect, pairs=n, pair_s=pair_s)
    # "no budget will settle it" only when the interval is already narrow around the bar; a wide one
    # (a few noisy pairs) may still settle on either side, and a longer run shows which
    if pr.a.stop_reason == "precision" or (near and hi - lo < 0.5 * band):
        return BudgetNeed("on the bar", **same)
    if near:
        return BudgetNeed("near the bar", **same, secs=max(1, math.ceil(4 * n * pair_s * 1.3)))
    pairs = max(math.ceil(1.2 * n * need ** 2), math.ceil(1.5 * n))  # the interval narrows as 1/sqrt(n)
    return BudgetNeed("too few", **same, pairs_needed=pairs, secs=max(1, math.ceil(pairs * pair_s * 1.3)))  # + warmup


def pairs_needed(logs: list[float], min_effect: float, confidence: float = 0.95) -> int:
    """About how many pairs put the interval of the median log ratio wholly on one side of the nearest
    edge of the ±``min_effect`` band, from the pairs so far: the median's standard error is about
    1.25 σ/√n (σ from the MAD); n = (z · 1.25 σ / distance)², at least ``len(logs)``, at most 10,000."""
    n = len(logs)
    if n < 3:
        return n
    med = _stats.median(logs)
    sigma = 1.4826 * _stats.median([abs(x - med) for x in logs])
    band = math.log1p(min_effect)
    dist = min(abs(med - band), abs(med + band))
    z = 1.96 if confidence <= 0.95 else 2.58
    if sigma <= 0:
        return n
    if dist <= 1e-9:
        return 10_000
    return int(min(10_000, max(n, math.ceil((z * 1.25 * sigma / dist) ** 2))))


def _decisive(logs: list[float], min_effect: float) -> bool:
    """True when the median log ratio's 99% CI lies wholly outside, or wholly inside, the ±min_effect band."""
    lo, hi, cov = _stats.median_ci(logs, DECISIVE_CONFIDENCE)
    if cov < DECISIVE_CONFIDENCE:
        return False
    band = math.log1p(min_effect)
    return lo > band or hi < -band or (-band < lo and hi < band)


def bench_pair(
    code_a: str | Callable[[], Any],
    code_b: str | Callable[[], Any],
    setup_a: str = "",
    setup_b: str = "",
    *,
    globals: Mapping[str, Any] | None = None,
    globals_b: Mapping[str, Any] | None = None,
    labels: tuple[str | None, str | None] = ("A", "B"),
    budget: float | None = None,
    precision: float = 0.01,
    confidence: float = 0.95,
    min_effect: float = 0.10,
    min_samples: int = 10,
    max_samples: int = 1_000_000,
    device: str = "auto",
    sync: str = "auto",
    memory: bool = True,
    gc: bool = False,
    filenames: tuple[str, str] = ("<perfmagic-A>", "<perfmagic-B>"),
    clock: Callable[[], float] = time.perf_counter,
    capture_env: bool = True,
    watch: Any = None,
) -> PairResult:
    """Time A and B interleaved in this process and compare them (see the module docstring).

    ``globals`` is the namespace both read; ``globals_b``, when given, is B's (A keeps ``globals``):
    ``%perf compare`` re-runs A with the functions it called when it was measured. ``watch``: a sampler
    of the timed pairs (:class:`perfmagic.profile.where.PairSampler`), started after the warm-up, told
    which pair and side each timed block is, and stopped when the pairs end; a clear verdict ends the
    pairs only once it has the samples it asks for (``watch.enough()``)."""
    __tracebackhide__ = True
    dev, notes, hard, total, started = prepare(budget, precision, confidence, "auto", min_samples, max_samples,
                                               sync, device, DEFAULT_PAIR_BUDGET)
    sa = Subject(code_a, setup_a, globals, filenames[0], sync, dev, clock)
    sb = Subject(code_b, setup_b, globals if globals_b is None else globals_b, filenames[1], sync, dev, clock)
    both = (sa, sb)
    _before_pair(gc, both)
    t_start = clock()  # the setup code is the user's own: the budget covers the measurement from here
    gc_was = _gc.isenabled()
    stop, interrupted = "precision", False
    warnings: list[str] = []
    from ..core.load import LoadProbe

    probe = LoadProbe().start()
    logs: list[float] = []  # log(B/A) per pair
    cold_probes: list[Any] = []
    try:
        if not gc:
            _gc.disable()
        _cold_calls(both, cold_probes)
        _warm_up_pair(both, clock, total)
        coin = random.Random(20261123)  # seeded: the same order for the same run
        if watch is not None:
            watch.start()
        while True:
            _timed_pair(both if coin.random() < 0.5 else both[::-1], sa, len(logs), watch)
            logs.append(math.log((sb.raw[-1] / sb.number) / (sa.raw[-1] / sa.number)))
            n = len(logs)
            if (n == 1 or n == SIZE_AT) and not hard:
                total = _sized_budget(n, logs, sa, sb, total, clock, t_start, min_effect, notes)
            why = _settled(logs, sa, sb, confidence, precision, min_effect) if n >= min_samples and n % 5 == 0 else None
            if why and watch is not None and not watch.enough():  # --where: more samples first, in the budget
                why = None
            why = why or ("max_samples" if n >= max_samples else None) or (
                "budget" if clock() - t_start + sa.raw[-1] + sb.raw[-1] > total and n >= 3 else None)
            if why:
                stop = why
                break
        if _wants_ops(watch, logs, confidence):  # torch: each op's change, untimed
            watch.ops = _ops_after(sa, sb, dev, clock() - t_start, watch)
    except KeyboardInterrupt:
        interrupted, stop = True, "interrupted"
    finally:
        if watch is not None:
            watch.stop()
        if gc_was:
            _gc.enable()
        for s in both:
            s.finish()
    mems = _untimed_memory(both) if memory and not interrupted else [None, None]
    env = _pair_environment(sb, probe, warnings, capture_env)
    wall = clock() - t_start
    policy = dict(budget_s=total, budget_hard=hard, precision=precision, confidence=confidence, min_samples=min_samples)
    a, b = (_side_result(s, k, len(logs), env if capture_env else None, cold_probes, policy, gc, labels[k], stop,
                         wall, interrupted, mems[k], notes, started, warnings) for k, s in enumerate(both))
    return _judged(a, b, interrupted, budget, min_effect, confidence)


def _wants_ops(watch: Any, logs: list[float], confidence: float) -> bool:
    """Whether the pair loop profiles each torch op after the pairs: the sampler wants ops (torch code), and
    either ``--where`` was asked (``min_samples``) or the pairs show a change (the interval of the median log
    ratio B/A excludes 0). Where they show none, no verdict can be faster or slower and where it went is
    neither shown nor recorded, so the untimed op profile (~6 ms a call, 10-14% of an A/A comparison of
    torch code in bench_where) is skipped."""
    if watch is None or not getattr(watch, "ops_wanted", False):
        return False
    if getattr(watch, "min_samples", 0):
        return True
    lo, hi, _ = _stats.median_ci(logs, confidence)
    return not lo <= 0.0 <= hi


def _ops_after(sa: Subject, sb: Subject, dev: str, loop_s: float, watch: Any) -> Any:
    """After the timed pairs: a few untimed pairs of one call each under ``torch.profiler``
    (:func:`perfmagic.profile.where_ops.profile_ops`): the fewest that attribute within 0.5 s, more within a
    tenth of the pairs' time.
    The sampler's thread is stopped first: beside torch's 2-thread pool on 2 cores its 1000 Hz wake-ups
    may have made the spells of ~90x slower ops on one side seen in an A/A (fc33)."""
    from ..profile.where_ops import OPS_MIN_S, OPS_SHARE, profile_ops

    watch.stop()

    from ..profile.where_ops import mentions_torch

    if not any(mentions_torch(s.cell.source if s.cell.mode != "callable" else s.cell.run, s.ns) for s in (sa, sb)):
        return None  # neither side reaches a torch object: no op table (and no profiler start-up)

    def one(s: Subject) -> Callable[[], None]:
        def run() -> None:
            s.cell.run(1)
            s.sync.finish()
        return run
    return profile_ops(one(sa), one(sb), device=dev, max_s=max(OPS_MIN_S, OPS_SHARE * loop_s),
                       more_s=OPS_SHARE * loop_s)


def _timed_pair(order: tuple[Subject, Subject], sa: Subject, i: int, watch: Any) -> None:
    """One pair of timed blocks in the order given; with a ``watch``, each block is told to it as
    (pair ``i``, side: 0 for A, 1 for B) and its time."""
    for s in order:
        if watch is None:
            s.sample()
        else:
            watch.begin(i, 0 if s is sa else 1)
            watch.end(s.sample(), s.number)


def _judged(a: BenchResult, b: BenchResult, interrupted: bool, budget: float | None, min_effect: float,
            confidence: float) -> PairResult:
    """The two sides compared on their paired samples; fewer than 3 pairs is no comparison (the budget
    too short, or Ctrl-C: :class:`BenchInterrupted` with what was measured)."""
    from .compare import compare_samples

    if len(a.raw) < 3:
        if not interrupted:
            raise BadOptionError("budget", budget, "a budget long enough for at least 3 A/B pairs")
        raise BenchInterrupted(PairResult(a, b, None) if a.raw and b.raw else None)
    comp = compare_samples(a.times, b.times, paired=True, min_effect=min_effect, confidence=confidence)
    pr = PairResult(a, b, comp)
    if interrupted:
        raise BenchInterrupted(pr)
    return pr


def _before_pair(gc: bool, both: tuple[Subject, Subject]) -> None:
    """Before the budget starts: the process primed, the heap collected when the collector will be off,
    each side's shortest block set to the pair's."""
    from ..core.env import prime

    for s in both:
        s.min_block = PAIR_MIN_BLOCK_S

    prime()  # once per process: imports and version lookups are not the measurement's
    if not gc:  # a full collection of a big heap (torch loaded: ~0.3 s) is preparation, not measurement
        _gc.collect()


def _settled(logs: list[float], sa: Subject, sb: Subject, confidence: float, precision: float,
             min_effect: float) -> str | None:
    """Whether the pairs so far stop the run: ``"precision"`` (the ratio's interval is narrow enough),
    ``"verdict clear"`` (decisive against the bar), else None."""
    n = len(logs)
    lo, hi, cov = _stats.median_ci(logs, confidence)
    if cov >= confidence and (math.exp(hi) - math.exp(lo)) / 2 <= precision * math.exp(_stats.median(logs)):
        return "precision"
    slow = sa.raw[-1] + sb.raw[-1] >= SLOW_PAIR_S  # few looks at slow pairs: decide from 10
    if n >= (DECISIVE_MIN_SLOW if slow else DECISIVE_MIN) and _decisive(logs, min_effect):
        return "verdict clear"
    return None


def _untimed_memory(both: tuple[Subject, Subject]) -> list[Any]:
    """Peak memory of one untimed call of each side, after the samples."""
    from ..core.memory import measure

    return [measure(lambda s=s: s.cell.run(1), s.sync.finish, s.device) for s in both]


def _pair_environment(sb: Subject, probe: Any, warnings: list[str], capture_env: bool) -> dict[str, Any]:
    """The load probe stopped; the environment (``{}`` without ``capture_env``) with the load and own cores."""
    others = probe.stop()
    env = _environment(sb.device, others, warnings, probe.own_cores, probe.active_threads) if capture_env else {}
    if capture_env and probe.own_cores is not None:
        env["own_cores"] = round(probe.own_cores, 4)
    return env


def _cold_calls(both: tuple[Subject, Subject], cold_probes: list[Any]) -> None:
    """Each side's cold call (under its own load probe: its cause is named only when nothing else ran),
    timer overhead and calls per block; ``cold_probes`` gets each side's probe as it is taken."""
    from ..core.load import LoadProbe

    for s in both:
        cold_probe = LoadProbe()   # the first call's cause is named only when nothing else ran
        cold_probe.start()
        try:
            s.cold_call(False)
        finally:
            cold_probe.stop()
        cold_probes.append(cold_probe)
        s.measure_overhead()
        s.number = s.calls_for(s.cold or 0.0, 1)


def _warm_up_pair(both: tuple[Subject, Subject], clock: Callable[[], float], total: float) -> None:
    """Warm both sides in turn until each is stable, within a share of the budget."""
    w0 = clock()
    while True:
        for s in both:
            s.warm_block()
        wt = clock() - w0
        if (all(s.warm_calls >= WARMUP_MIN_CALLS and s.warm_stable() for s in both)
                and wt >= warmup_min_s(total)) or wt >= WARMUP_MAX_FRACTION * total:
            break


def _sized_budget(n: int, logs: list[float], sa: Subject, sb: Subject, total: float, clock: Callable[[], float],
                  t_start: float, min_effect: float, notes: list[str]) -> float:
    """A default budget sized after the first pair to the calls (enough pairs for a verdict) and after
    :data:`SIZE_AT` pairs to their noise (the pairs a decision at the bar needs); the second says so in
    ``notes``."""
    if n == 1:  # the budget sized to the calls: enough pairs for a verdict
        pair_s = sa.raw[-1] + sb.raw[-1]
        total = max(total, min(AUTO_MAX_S, clock() - t_start + AUTO_PAIRS * pair_s))
    if n == SIZE_AT:  # ... and to their noise: the pairs a decision at the bar needs
        pair_s = _stats.median([x + y for x, y in zip(sa.raw[-n:], sb.raw[-n:])])
        need = pairs_needed(logs, min_effect)
        want = clock() - t_start + max(0, need - n) * pair_s * 1.15
        if want > total:
            total = min(AUTO_MAX_S, want)
            notes.append(Finding.of("pair.sized", need=need, pair_s=pair_s, min_effect=min_effect, total=total,
                                    cap=AUTO_MAX_S, capped=want > AUTO_MAX_S))
    return total


def _side_result(s: Subject, k: int, pairs: int, env: dict[str, Any] | None, cold_probes: list[Any],
                 policy: dict[str, Any], gc: bool, label: str | None, stop: str, wall: float, interrupted: bool, mem: Any,
                 notes: list[str], started: str, warnings: list[str]) -> BenchResult:
    """One side of the pair as a :class:`BenchResult`: its first ``pairs`` samples, the shared
    environment (``None``: not captured) with its own cold call's load, the pair's policy (``policy``: what
    both sides share)."""
    from .bench import _cold_load

    side_env = dict(env or {})
    if env is not None and s.cold is not None and k < len(cold_probes):
        side_env.update(_cold_load(cold_probes[k]))
    p = policy
    policy = {"budget_s": p["budget_s"], "budget_hard": p["budget_hard"], "precision": p["precision"],
              "confidence": p["confidence"], "warmup": "auto", "warmup_calls": s.warm_calls,
              "min_samples": p["min_samples"], "gc": "enabled" if gc else "disabled while timing", "flush": False, "compile_mode": s.cell.mode,
              "target_block_s": s.target_block, "interleaved": True}
    r = BenchResult(code=s.cell.source, raw=tuple(s.raw[:pairs]), number=s.number, cold_s=s.cold,
                    warmup=tuple(s.warm), label=label, setup=s.setup, device=s.device, sync=s.sync.name,
                    timer_overhead_s=s.overhead, stop_reason=stop, wall_s=wall,
                    status="interrupted" if interrupted else "ok", policy=policy, env=side_env, memory=mem,
                    notes=tuple(notes + s.notes + [Finding.of("pair.side")]),
                    started_utc=started)
    return _with_doubts(r, warnings, policy["min_samples"], 1.0)
