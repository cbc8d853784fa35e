"""The sentences of the estimate's and the rank sweep's :class:`~perfmagic.findings.Finding` kinds
(``estimate.*``: :mod:`perfmagic.estimation`; ``ranks.*``: :mod:`perfmagic.ranks`).

:data:`WORDS` maps each kind to the function that words it; :mod:`perfmagic.render.findings` reads it
into its table, so ``str(finding)`` gives these sentences. Imports no analysis module.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from .text import clip
from .units import fmt_bytes, fmt_time

# ---- the estimate's fit (estimation/fit.py) ------------------------------------------------------------


def _suggest(f: Any) -> str:
    """'measure up to n=… (≈ x s) to tell': four times the largest size, timed by the top points' slope."""
    return (f"measure up to {f['var']}={f['suggest_n']:,.0f} (≈ {fmt_time(f['suggest_s'])}) to tell, e.g. with a "
            "longer --budget")


def _how(x: float) -> str:
    return f"{x * 100:.0f}% slower" if x >= 0 else f"{-x * 100:.0f}% faster"


def _where(f: Any) -> str:
    """Where the machine ran slower or faster than its typical speed while measuring."""
    var = f["var"]
    where = f"{_how(f['hi_x'])} at {var}={f['hi_n']:,}"
    if f["lo_n"] != f["hi_n"]:
        where += f" and {_how(f['lo_x'])} at {var}={f['lo_n']:,}"
    return where


def _noisy(f: Any) -> str:
    var = f["var"]
    seen = ""
    if f.get("rep_first") is not None:  # the pair of runs of one size that differ most
        k = f.get("pairs")
        seen = (f" (1 sd over {k} pairs of runs; the widest: {var}={f['rep_n']:,} took "
                f"{fmt_time(f['rep_first'])}, then {fmt_time(f['rep_second'])})" if k else
                f" ({var}={f['rep_n']:,} took {fmt_time(f['rep_first'])}, then {fmt_time(f['rep_second'])})")
    elif f.get("rep_n") is not None:  # as stored by an older perfmagic
        seen = (f" ({var}={f['rep_n']:,}: {', '.join(fmt_time(t) for t in f['rep_times'])}, later "
                f"{fmt_time(f['rep_later'])})")
    return (f"runs of the same size differ by ±{f['sigma']:.0%} here{seen}, too much to extrapolate "
            f"{f['ratio']:,.0f}× in size; {_suggest(f)}")


def _pace_why(f: Any) -> str:
    """Why a pace answers instead of a curve (``estimate.pace``), up to the runs it pooled."""
    if f.get("states") is not None:
        within, n, trend = f["states"]
        return (f"the fit was refused; runs of {f['var']}={n:,} differ in pace by {math.exp(within):.2f}×, at least "
                f"as much as the pace moves with the size ({math.exp(trend):.2f}× over {f['var']}={f['lo_n']:,} – "
                f"{f['hi_n']:,}): the machine changed pace while measuring, which bends a curve but not a pace")
    if f.get("steps"):
        return (f"the fit was refused, and the cell runs one step {f['var']} times (a loop whose body reads neither "
                f"{f['var']} nor its counter): its cost is {f['var']} × a step's, so the pace of the runs answers")
    if f.get("short") is not None:
        why = f"the sizes measured span {f['short']:,.0f}× and the full one lies {f['ratio']:,.0f}× beyond them"
    else:
        why = f"runs of the same size differ by ±{f['sigma']:.0%} here"
    return why + ", too much for a curve, but not for a pace"


def _growth_changed(f: Any) -> str:
    var = f["var"]
    why = (f"the cost changed its growth: the {f['count']} largest sizes ({f['lo_n']:,} … {f['top']:,}) grow as "
           f"{var}^{f['got']:.2f}, but the model fitted across all sizes says {var}^{f['said']:.2f}")
    if f.get("jump_from") is not None:
        n0, n1 = f["jump_from"], f["jump_to"]
        why += (f"; the time jumped {f['jump']:.1f}× between {var}={n0:,} and {n1:,} ({n1 / n0:.1f}× the size): a "
                "garbage collector, cache or memory regime change")
    return why + f". Measure further past the change: {_suggest(f)}"


def _load(f: Any) -> str:
    threads = f.get("threads")
    mine = f" beside this process's {threads} busy threads" if threads and threads > 1 else ""
    return (f"other processes kept {f['others']:.1f} of this machine's {f['cores']} usable cores busy while "
            f"measuring{mine}: the times include their interference, and the full run will go at whatever pace "
            "they leave it; the interval's low end allows for them going away")


def _cache(f: Any) -> str:
    """', the page cache of the files it writes included' where that is a quarter or more of the memory."""
    cache, total = f.get("cache") or 0.0, f.get("peak") or (f.get("seen", 0.0) + f.get("more", 0.0))
    return (f" ({fmt_bytes(cache)} of it the page cache of the files it writes)"
            if total and cache >= 0.25 * total else "")


def _small_pages(f: Any) -> str:
    """'; of the X in 4 KiB pages, Y come warm from ...' where a quarter or more of the memory is in 4 KiB pages."""
    small, pool, total = f.get("small") or 0.0, f.get("pool") or 0.0, f.get("peak") or 0.0
    if not total or small < 0.25 * total:
        return ""
    return (f"; of the {fmt_bytes(small)} in 4 KiB pages, {fmt_bytes(min(small, pool))} come warm from free blocks "
            "too small for the host to take back (the kernel hands those out first)")


def _cold_cost(f: Any) -> str:
    """What the cold part costs the full run, now and later; where nothing of it is cold (4 KiB pages from
    the unreported free blocks), it says so instead of pricing 0 B at 0 ns."""
    if f.get("add_hi", 0.0) < COLD_SAYS_NOTHING:
        return "; none of it is cold, now or later: no first-touch cost is added"
    now = (f"; started now, the full run pays about {fmt_time(f['add'])} for {fmt_bytes(f['cold_now'])} of it "
           "(in the prediction)" if f.get("cold_now") else "; none of it is cold now (nothing added to the "
           "prediction)")
    return (now + "; started once the host has taken back what is free now (seconds), up to "
            f"{fmt_time(f['add_hi'])} (the interval's high end). Reusing arrays (out=, in-place operations) "
            "avoids it")


COLD_SAYS_NOTHING = 5e-4  # seconds: a first-touch cost below this is printed as none


def _container(f: Any) -> str:
    where = f.get("where")
    return f" ({where})" if where and where.startswith("memory the container") else ""


_FIT: dict[str, Callable[[Any], str]] = {
    "estimate.load": _load,
    "estimate.speed-corrected": lambda f: ("times corrected for the machine's own speed (the drift guard's fixed "
                                           f"workload, timed around each size): it ran {_where(f)} than its "
                                           "typical speed while measuring"),
    "estimate.speed-changed": lambda f: ("the machine's own speed changed while measuring (the drift guard's fixed "
                                         f"workload, timed around each size, ran {_where(f)} than typical): the "
                                         "times are as measured, so the prediction carries that noise; measure "
                                         "again to see how much it moves"),
    "estimate.speed-states": lambda f: (
        f"this machine runs at two speeds: its drift guard's fixed workload took {fmt_time(f['fast_s'])} or "
        f"{fmt_time(f['slow_s'])} per call ({f['share']:.0%} of its last {f['readings']} readings slow)"
        + (f"; the largest sizes ran beside {fmt_time(f['measured_s'])}" if f.get('measured_s') else "")
        + ": a longer run can go at either, so the interval reaches from all fast to all slow"),
    "estimate.flat": lambda f: (f"the time does not change with {f['var']} ({fmt_time(f['t_min'])} – "
                                f"{fmt_time(f['t_max'])} over sizes {f['n_lo']:,} – {f['n_hi']:,}): does the cell "
                                f"use {f['var']}?"),
    "estimate.few-sizes": lambda f: (f"only {f['k']} size{'s' if f['k'] != 1 else ''} measured; at least 3 are "
                                     "needed"),
    "estimate.pace": lambda f: (f"{_pace_why(f)}: the {f['runs']} runs of {f['var']}={f['lo_n']:,} – {f['hi_n']:,} took "
                                f"{fmt_time(f['lowest'])} – {fmt_time(f['highest'])} per unit of {f['var']}, "
                                f"{fmt_time(f['pooled'])} pooled; a run of {fmt_time(f['full_s'])} lasts "
                                f"{f['full_s'] / f['duration']:,.0f}× theirs and averages most of that out (±"
                                f"{f['full_sd']:.0%} left, 1 sd), and the high end reaches the slowest pace of the "
                                "largest size"),
    "estimate.contended": lambda f: (f"other processes kept {f['others']:.1f} cores busy beside this process's "
                                     f"{f['threads']} busy thread{'s' if f['threads'] != 1 else ''}, more than the "
                                     f"machine has: sharing cores, a long run gets less of them than a short one, "
                                     f"so runs can grow faster than the cost ({f['model']}); the interval's low end "
                                     f"reaches the largest size continued as n ({fmt_time(f['low_s'])})"),
    "estimate.settled-up": lambda f: (f"the largest sizes grow as {f['var']}^{f['power']:.2f}, slower than "
                                      f"{f['var']}: usually an overhead or a thread pool still engaging, after which "
                                      f"a cost per element grows as {f['var']} again; the interval's high end "
                                      f"reaches that continuation ({fmt_time(f['high_s'])})"),
    "estimate.settled": lambda f: (f"the largest sizes grow as {f['var']}^{f['power']:.2f}, between whole powers: "
                                   "usually a change in progress (data leaving a cache), after which the cost grows "
                                   f"as {f['var']}^{f['whole']} again; "
                                   + (f"the prediction is that continuation ("
                                      f"{fmt_time(f['low_s'])}), and the interval's high end reaches the fit across "
                                      f"the change ({fmt_time(f['fit_s'])})" if f.get('fit_s') else
                                      f"the interval's low end reaches that continuation ({fmt_time(f['low_s'])})")),
    "estimate.cache-trend": lambda f: (f"the full run's memory (+{fmt_bytes(f['peak'])}) passes the "
                                       f"{fmt_bytes(f['llc'])} last-level cache, which the largest size measured "
                                       f"(+{fmt_bytes(f['seen'])}) fitted in: the cost per unit keeps rising as data "
                                       "leaves the cache, so the prediction follows the top sizes' own trend ("
                                       f"{fmt_time(f['trend_s'])}"
                                       + (f", capped at the interval's high end: {fmt_time(f['pred_s'])}"
                                          if f['pred_s'] < f['trend_s'] else "")
                                       + f") rather than {f['model']} across all sizes ({fmt_time(f['fit_s'])})"),
    "estimate.noisy": _noisy,
    "estimate.too-far": lambda f: (f"the full size is {f['ratio']:,.0f}× the largest measured: no model can be "
                                   "trusted that far; give a longer measuring budget"),
    "estimate.growth-changed": _growth_changed,
    "estimate.top-disagree": lambda f: (f"the two largest sizes disagree with the {f['model']} fit by "
                                        f"{f['e0']:+.0%} and {f['e1']:+.0%} (this machine's run-to-run variation, "
                                        f"measured: ±{f['sigma']:.0%}); {_suggest(f)}"),
    "estimate.slope-rising": lambda f: (f"the local slope is still rising at the largest size ({f['prev']:.2f} → "
                                        f"{f['last']:.2f}; the model's over the same sizes {f['model_k']:.2f}): the "
                                        "cost may grow faster beyond the sizes measured, so take the prediction as a "
                                        "lower bound or measure larger sizes"),
    "estimate.fresh-memory": lambda f: (f"the full run maps about {fmt_bytes(f['more'])} more memory than any size "
                                        f"measured (at most {fmt_bytes(f['seen'])}){_cache(f)}, on a VM that gives "
                                        "freed memory "
                                        "back to its host (virtio-balloon free page reporting): touching that much "
                                        "fresh memory costs the host's page faults, which these sizes could not show, "
                                        "so take the prediction as a lower bound"),
    "estimate.cold-memory": lambda f: (f"the full run maps about {fmt_bytes(f['peak'])} of fresh memory{_cache(f)}, "
                                       "on a VM "
                                       "that gives freed memory back to its host: a first-touch probe found "
                                       f"{fmt_bytes(f['warm_bytes'])} still backed ({f['warm_ns']:.2f} ns/byte), then "
                                       f"memory at {f['cold_lo']:.2f}–{f['cold_hi']:.2f} ns/byte, the "
                                       "host's page faults"
                                       + (f" (taken on {f['threads']:.1f} threads at once, as the code's CPU time "
                                          "says)" if f.get("threads", 1.0) > 1.05 else "")
                                       + _small_pages(f) + _cold_cost(f)),
    "estimate.memory-refit": lambda f: (f"memory: the largest sizes grow as {f['var']}^{f['power']:.2f}, which the "
                                        f"best fit across all sizes ({f['first']}) does not follow: predicted with "
                                        f"{f['chosen']} fitted on those sizes"),
    "estimate.memory-short": lambda f: (f"memory: the sizes measured span {f['span']:,.0f}× and the full one lies "
                                        f"{f['ratio']:,.0f}× beyond them, too little to tell how the peak grows: no "
                                        "peak predicted"),
    "estimate.memory-no-model": lambda f: (f"memory: no model follows the largest sizes ({f['var']}^"
                                           f"{f['power']:.2f}): no peak predicted"),
    "estimate.phase": lambda f: (f"units 1–{f['change_at'] - 1} took {fmt_time(f['before'])} each, units "
                                 f"{f['change_at']}–{f['done']} {fmt_time(f['after'])}: a {f['pace']} phase (the "
                                 f"job, or the machine, changed pace at unit {f['change_at']} of those timed); the "
                                 "total assumes the later pace goes on, and the interval reaches the mean of all "
                                 f"units ({fmt_time(f['mean'])})"),
    "estimate.unit-trend": lambda f: (f"the time per unit grows as the job goes on ({fmt_time(f['first'])} → "
                                      f"{fmt_time(f['last'])} over {f['blocks']} blocks): the total assumes the "
                                      "mean; the real job may take longer"),
    "estimate.memory-growth": lambda f: (f"memory grows {fmt_bytes(f['growth'])} per unit (r={f['r']:.2f}): over "
                                         f"{f['units']:,.0f} units that is +{fmt_bytes(f['growth'] * f['units'])}"),
    "estimate.no-unit": lambda f: "no unit was measured",
    "estimate.unreliable": lambda f: ("the fit is unreliable: it puts the full run anywhere "
                                      + (f"from {fmt_time(f['low_s'])} to " if (f.get('low_s') or 0) > 0 else
                                         "below ") + fmt_time(f['high_s'])
                                      + (f"; {_suggest(f)}" if f.get("suggest_n") else "")),
}

# ---- measuring, the gate and the full run (estimation/estimate.py, measure.py, gate.py, runner.py) -----------

_RUN: dict[str, Callable[[Any], str]] = {
    "estimate.no-mention": lambda f: f"the code does not mention {f['var']!r}: the size must reach it some other way",
    "estimate.measured-on": lambda f: f"measured on {f['device']}: {f['why']}",
    "estimate.progress": lambda f: (f"{f['var']}={f['n']:,}{' again' if f.get('again') else ''}: "
                                    f"{fmt_time(f['t'], 3)}{'' if f.get('again') else ' (uncertain)'}"),
    "estimate.gate-time-over": lambda f: f"time: even the low end {fmt_time(f['low_s'], 3)} exceeds the limit",
    "estimate.gate-time-maybe": lambda f: f"time: the interval reaches {fmt_time(f['high_s'], 3)}, over the limit",
    "estimate.gate-memory-over": lambda f: (f"memory: +{fmt_bytes(f['need'])} needed, {fmt_bytes(f['available'])} "
                                            f"available{_container(f)}"),
    "estimate.gate-memory-maybe": lambda f: (f"memory: up to +{fmt_bytes(f['high'])}, over 90% of "
                                             f"{fmt_bytes(f['available'])} available{_container(f)}"),
    "estimate.gate-memory-floor": lambda f: (
        f"memory: it grew in proportion to {f['var']} over the sizes measured (+{fmt_bytes(f['m0'])} at "
        f"{f['var']}={f['n0']:,}, +{fmt_bytes(f['m1'])} at {f['n1']:,}); at that rate {f['var']}={f['full']:,.0f} "
        f"needs at least +{fmt_bytes(f['need'])}, {fmt_bytes(f['available'])} available{_container(f)}"),
    "estimate.memory-stop": lambda f: (f"measuring stopped before {f.get('var', 'n')}={f['n']:,}: at the growth "
                                       f"measured it would need about +{fmt_bytes(f['need'])}, over half of the "
                                       f"{fmt_bytes(f['available'])} available{_container(f)}"),
    "estimate.failed": lambda f: (f"the code raised at {f['var']}={f['n']:,} ({clip((str(f['error']).strip().splitlines() or [''])[0], 80)})"
                                  + (f" after running at every size up to {f['ran']:,}" if f.get("ran") else "")
                                  + f": {f['var']}={f['full']:,.0f} may raise too, so no time is given for it; "
                                  f"fix the error, or ask for {f['var']} below {f['n']:,}"),
    "estimate.gate-failed": lambda f: f"the code failed at {f['var']}={f['n']:,} ({str(f['error']).split(':')[0]})",
    "estimate.not-started": lambda f: (f"the full run was not started: the gate says {f['verdict']!r} (force it "
                                       "with --force)"),
}

# ---- the rank sweep (ranks/sweep.py, ranks/distributed.py) ---------------------------------------------------

_RANKS: dict[str, Callable[[Any], str]] = {
    "ranks.gpus": lambda f: f"{f['gpus']} GPU(s) visible for {f['local']} rank(s) on this machine",
    "ranks.gloo-not-nccl": lambda f: f"gloo, not NCCL: NCCL needs one GPU per local rank ({f['counted']})",
    "ranks.group": lambda f: (f"process group {'initialised by perfmagic' if f['created'] else 'of the job'}; "
                              f"{f['world']} rank(s)"),
    "ranks.session": lambda f: f"torch.distributed job, pid {f['pid']} (rank 0)",
    "ranks.timed-out": lambda f: (f"timed out after {f['timeout']:.0f} s: a rank waits in a collective the others "
                                  "never reached, or the step is far slower than the budget; the ranks were killed"),
    "ranks.died": lambda f: f"rank {f['rank']} died ({f['error']}); nothing was gathered",
    "ranks.fork-threads": lambda f: ("each forked rank runs torch on 1 thread (torchrun's default, "
                                     "OMP_NUM_THREADS=1): OpenMP cannot start threads in a process forked after "
                                     "the kernel used them"),
    "ranks.oversubscribed": lambda f: (f"oversubscribe the {f['cores']} usable cores (they kept {f['busy']:.1f} "
                                       "busy): their time measures the sharing of cores, not the code"),
    "ranks.waits-fitted": lambda f: (f"{f['world']} ranks exceed the {f['cores']} usable cores but kept only "
                                     f"{f['busy']:.1f} busy (the step waits more than it computes): fitted"),
    "ranks.over-cores": lambda f: (f"{', '.join(map(str, f['over']))} ranks exceed the {f['cores']} usable cores "
                                   "of this machine: each rank got 1 torch thread and the ranks share cores"),
    "ranks.profiler-failed": lambda f: (f"{f['world']} ranks: the profiler failed on rank(s) {list(f['bad'])} "
                                        f"({f['error']}): no comm share; straggler from step medians"),
}

WORDS: dict[str, Callable[[Any], str]] = {**_FIT, **_RUN, **_RANKS}

__all__ = ["WORDS"]
