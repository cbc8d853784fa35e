"""The sentences of the timing and storage :class:`~perfmagic.findings.Finding` kinds.

:mod:`perfmagic.render.findings` merges :data:`WORDS` into its table, so ``str(finding)`` of any of these
kinds is its sentence. Each kind is ``"area.what"``: ``bench.*`` (a ``%%gpubench`` run's notes and
warnings), ``pair.*`` (an interleaved A/B), ``compare.*`` (how a verdict's interval was computed),
``history.*`` and ``flow.*`` (a comparison of two runs and its notices), ``rerun.*`` and ``snapshot.*``
(why a run cannot be re-measured), ``basis.*`` (work per call), ``noise.*`` (between-run noise) and
``ledger.*`` (the ledger's notices); the profilers' notes are in :mod:`perfmagic.render.findings_profile`.
The printed text is the one these engines wrote before the words moved here. Imports no analysis module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .text import fmt_bytes, fmt_time, times

# ---- a %%gpubench run (timing/bench.py) ---------------------------------------------------------------

_WORK = "lazy init, JIT, autotuning or cold caches"
_UNKNOWN = "cause unknown (their load, or one-time setup)"


def _cold_call(f: Any) -> str:
    """The first call's line (timing/bench.py cold_call_warning names the case from the load probe)."""
    head = f"the first call took {times(f['ratio'])} a warm call ({fmt_time(f['cold_s'])})"
    tail = "; it is reported apart, not in the samples"
    case = f["case"]
    if case == "quiet":
        body = f" with no other load ({f['others']:.2f} cores): {_WORK}"
    elif case == "loaded":
        body = f" while other processes used {f['others']:.1f} cores: {_UNKNOWN}"
    elif case == "never-preempted":
        body = f", never preempted by other processes: {_WORK}"
    elif case == "little-off":
        body = f", off the CPU for only {fmt_time(f['off_s'])} of it: {_WORK}"
    elif case == "preempted":
        body = f" while other processes took its CPU {f['preempted']}× ({fmt_time(f['off_s'])} off the CPU): {_UNKNOWN}"
    else:
        body = "; other processes' load during it was not measured, so its cause is unknown"
    return head + body + tail


def _slow_state(f: Any) -> str:
    where = {"last": f"during the last {f['slow_n']} of {f['n']} samples ({f['ratio']:.2f}× the others)",
             "first": f"during the first {f['slow_n']} of {f['n']} samples ({f['ratio']:.2f}× the others)",
             "run": f"during this run (its median {f['ratio']:.2f}× this code's earlier run in this session)"}[f["where"]]
    oc = f.get("others")
    others = (f"not because of other processes ({oc:.2f} cores)" if oc is not None
              else "other processes' load was not measured")
    return (f"this machine ran in its slow state {where}: a fixed reference loop took {fmt_time(f['slow_ref_s'])} "
            f"vs {fmt_time(f['best_ref_s'])} at its fastest, {others}. An interleaved A/B (%perf compare, --vs) "
            "cancels it; this single number does not")


def _speed_gate(f: Any) -> str:
    """``bench.speed-gate``: the samples the gate set aside and the time it waited (core/reference.py SpeedGate)."""
    ref = (f" (a fixed reference loop took {fmt_time(f['slow_ref_s'])} vs {fmt_time(f['best_ref_s'])} at its fastest)"
           if f.get("slow_ref_s") and f.get("best_ref_s") else "")
    n = f["n"]
    aside = f"{n} sample{'s' if n != 1 else ''} set aside" if n else "no sample set aside"
    head = (f"this machine ran in its slow state during part of this run{ref}: {aside}, "
            f"{fmt_time(f['waited_s'])} spent waiting for its usual speed ({f['waits']}×)")
    if f.get("gave_up") and f.get("kept_answer"):
        return head + (f"; it stayed slow past the {fmt_time(f['cap_s'])} this run may wait, so the run stopped "
                       "there: the answer is the samples kept from the usual state")
    if f.get("gave_up"):
        return head + (f"; it stayed slow past the {fmt_time(f['cap_s'])} this run may wait, with too few samples "
                       "from the usual state: the answer is the slow state's")
    if f.get("kept_slow"):  # samples after its last check, kept: the slow-state warning names them
        where = {"last": "the last", "first": "the first"}.get(f.get("kept_where"), "")
        said = (f"{where} {f['kept_slow']} samples kept still ran slow" if where
                else "the samples kept ran slow as a whole")
        return head + f"; {said} (see the slow-state warning)"
    return head + "; every sample kept ran in the usual state"


def _throttled(f: Any) -> str:
    n, q = f["threads"], f.get("quota")
    quota = f" ({q:g} CPUs)" if q else ""
    return (f"the container's CPU quota{quota} paused this process for {f['cores']:.2f} cores' worth of time during "
            f"the measurement (throttled): the times include those pauses; {n} thread(s) run unthrottled "
            f"(torch.set_num_threads({n}), threadpoolctl.threadpool_limits({n}))")


_BENCH: dict[str, Callable[[Any], str]] = {
    "bench.no-cuda": lambda f: "no CUDA device on this machine: timed on the CPU",
    "bench.warmup-drift": lambda f: (f"timings were still drifting at the end of warmup ({f['drift']:.0%} between "
                                     "the last blocks); raise --warmup or --budget"),
    "bench.throttled": _throttled,
    "bench.few-samples": lambda f: (f"only {f['n']} samples fit in the budget (wanted {f['wanted']}); use --budget "
                                    "to measure longer"),
    "bench.precision": lambda f: (f"precision target ±{f['target']:.1%} not reached (±{f['reached']:.2%}) within "
                                  "the budget; use --budget to measure longer"),
    "bench.spread": lambda f: (f"spread is high: the IQR is {f['iqr']:.0%} of the median — the machine or the code "
                               "is noisy"),
    "bench.cold-call": _cold_call,
    "bench.short-sample": lambda f: (f"a sample ({fmt_time(f['block_s'])}) is so short that the timer's own cost "
                                     f"({fmt_time(f['timer_s'])}) is {f['timer_s'] / f['block_s']:.0%} of it"),
    "bench.slow-state": _slow_state,
    "bench.speed-gate": _speed_gate,
    "bench.clock-held": lambda f: (f"the GPU's clock was held down ({', '.join(f['reasons'])}) when the interval was "
                                   f"met: sampled for {fmt_time(f['sampled_s'])} instead of stopping early, since a "
                                   "held clock moves over tenths of a second and a short answer reads whichever "
                                   "state it fell in"),
    "bench.old-row": lambda f: ("rebuilt from a ledger row written before perfmagic stored its device, policy, "
                                "warnings and notes: those are not shown"),
}

# ---- how a comparison's interval was computed (timing/compare.py _ratio_ci, compare_samples) -------------


def _method(f: Any) -> str:
    """``compare.method``: the bootstrap actually run; ``between_run`` and ``per`` add what widened it and
    the unit it divides by (timing/history.py)."""
    if f.get("paired"):
        g = f["groups"][0]
        grouped = f", medians of {g} consecutive pairs → {f['units'][0]} groups" if g > 1 else ""
        out = (f"paired (interleaved A/B): block bootstrap of the median per-pair log ratio "
               f"log(b/a), {f['n_boot']} resamples, block {f['blocks'][0]}{grouped}; percentile interval")
    else:
        (la, lb), (ga, gb), (ua, ub) = f["blocks"], f["groups"], f["units"]
        blocks = f"block {la}" if la == lb else f"blocks {la} (A) / {lb} (B)"
        if ga > 1 and (ga, ua) == (gb, ub):
            grouped = f", each side as {ua} medians of {ga} consecutive samples"
        else:
            grouped = "".join(f", {side} as {u} medians of {g} consecutive samples"
                              for side, u, g in (("A", ua, ga), ("B", ub, gb)) if g > 1)
        out = (f"block bootstrap of the ratio of medians, {f['n_boot']} resamples, {blocks}{grouped}; "
               "percentile interval on log ratio")
    if f.get("between_run"):
        out += f"; combined in quadrature (log scale) with a between-run noise of ±{f['between_run']:.1%}"
    if f.get("per"):
        out += f"; on time {f['per']} (A {f['a']}, B {f['b']} {f['unit']} per call)"
    return out


# ---- work per call (timing/basis.py) and between-run noise (timing/betweenrun.py) -----------------------

_NOISE: dict[str, Callable[[Any], str]] = {
    "noise.prior": lambda f: (f"assumed ±{f['q']:.0%}: no A/A re-measurements on this machine yet (the reference "
                              "VM's between-run noise; each %perf compare that re-measures adds one)"),
    "noise.few": lambda f: (f"±{f['q']:.0%}: only {f['n']} A/A re-measurement(s) on this machine (largest "
                            f"±{f['largest']:.1%}), so at least the reference VM's ±{f['prior']:.0%}"),
    "noise.floor": lambda f: (f"±{f['floor']:.0%}, the least admitted ({_seen(f)} is ±{f['q']:.1%})"),
    "noise.seen": lambda f: f"±{f['q']:.1%}: {_seen(f)}",
    "noise.given": lambda f: f"±{f['q']:.1%}, as given",
}


def _seen(f: Any) -> str:
    which = "largest" if f["level"] is None else f"{f['level']:.0%} quantile"
    return f"the {which} of {f['n']} A/A re-measurements on this machine (median ±{f['median']:.1%})"


_BASIS: dict[str, Callable[[Any], str]] = {
    "basis.units-differ": lambda f: (f"A declares its work in {f['ua']} ({f['oa']}) and B in {f['ub']} ({f['ob']}), "
                                     "so neither time per call nor time per unit compares them; declare the same "
                                     f"unit on both, e.g. {f['oa']} on B too"),
    "basis.one-side": lambda f: (f"{f['side']} declares {f['amount']} {f['unit']} per call ({f['option']}) and "
                                 f"{f['other']} declares none, so its time per call and time per {f['word']} cannot "
                                 f"be told apart; give {f['other']} {f['option']} too (or drop it from {f['side']})"),
}

# ---- a comparison of two runs (timing/history.py compare) and its flow (timing/flow.py) ----------------

_HISTORY: dict[str, Callable[[Any], str]] = {
    "history.interleaved": lambda f: "same-process A/B: both sides were measured interleaved, so machine drift cancels",
    "history.historical": lambda f: (
        f"historical comparison ({'runs %.1f min apart' % f['apart'] if f.get('apart') is not None else 'runs taken at different times'}): "
        f"between-run noise {f['noise']}; combined with the within-run interval. A same-process A/B cancels it: "
        "%perf compare re-measures A and B when A can still run here, or run the B cell with "
        f"%%gpubench --vs {f['a'] if f.get('a') is not None else 'RUN'}"),
    "history.cannot-tell": lambda f: (f"cannot tell, because runs of identical code on this machine differ by up to "
                                      f"±{f['q']:.0%} and measuring longer does not shrink that: re-measure A and B "
                                      "together"),
    "history.thread-limit": lambda f: (f"measured with BLAS/OpenMP and torch limited to {f['n']} thread(s), because "
                                       "the thread pools were oversubscribed at their full size: the verdict holds "
                                       f"for {f['n']} thread(s); measure again without the neighbour for the "
                                       "full-size answer"),
}


def _quoted(names: Any) -> str:
    return ", ".join(f"`{n}`" for n in names)


_FLOW: dict[str, Callable[[Any], str]] = {
    "flow.not-gpubench": lambda f: "only %%gpubench runs can be re-measured",
    "flow.options-differ": lambda f: (f"A and B were measured with different options ({', '.join(f['options'])}); "
                                      "an interleaved re-measurement runs both sides one way"),
    "flow.other-kernel": lambda f: (f"{f['side']} #{f['id']} was measured in another kernel (or before this one "
                                    "recorded it), so the functions it called are not held here"),
    "flow.side-moved": lambda f: f"{f['side']} #{f['id']}: {f['why']}",
    "flow.forced": lambda f: (f"perfmagic: re-measuring anyway, without restoring {_quoted(f['names'])}: "
                              + "; ".join(f"`{k}` {v}" for k, v in f["reasons"])),
    "flow.snapshot": lambda f: (f"perfmagic: the state the runs change ({_quoted(f['names'])}) is kept in a "
                                f"{fmt_bytes(f['nbytes'])} snapshot and restored after the re-measurement"),
    "flow.historical": lambda f: ("perfmagic: historical comparison (recorded samples) because A and B cannot be "
                                  "re-measured here: " + "; ".join(map(str, f["why"]))),
    "flow.historical-snapshot": lambda f: f"perfmagic: historical comparison (recorded samples), because it {f['why']}",
    "flow.values-matter": lambda f: f"values may matter: {f['why']}",
    "flow.row-note": lambda f: f"re-measured from run #{f['id']} by %perf compare",
    "flow.remeasured": lambda f: (f"perfmagic: re-measured A #{f['a']} and B #{f['b']} interleaved in this process "
                                  f"({f['pairs']} pairs; A with the functions it called when it ran) as runs "
                                  + " and ".join(f"#{x}" for x in f["ids"])),
    "flow.advice": lambda f: f"perfmagic: {f['advice']} (%perf compare -b)",
    "flow.thread-limit": lambda f: (f"perfmagic: {f['over']}; measuring A and B again with BLAS/OpenMP and torch "
                                    f"limited to {f['limit']} thread(s)"),
}

# ---- can a run be re-run as it was (timing/rerun.py, fingerprint.py, snapshot.py) ---------------------


def _changed(f: Any) -> str:
    """What moved between two signatures (timing/fingerprint.py _differs)."""
    what = f["what"]
    return {"kind": "it is another kind of object now", "contents": "its length or contents changed",
            "layers": "its layers changed: a submodule added, removed or replaced",
            "mode": "its training/eval mode changed", "count": "its parameter count changed"}.get(what) or {
        "fields": lambda: "its " + ", ".join(f["fields"]) + " changed",
        "type": lambda: f"its type changed ({f['old']} -> {f['new']})",
        "members": lambda: f"its {f['member']} changed (one added or removed)",
        "tensor": lambda: (f"the {f['fields']} of {f['member']} {f['name']}"
                           f"{' and %d more' % f['more'] if f['more'] else ''} changed"),
    }[what]()


_RERUN: dict[str, Callable[[Any], str]] = {
    "rerun.changed": _changed,
    "rerun.gone": lambda f: f"`{f['name']}` is gone from the notebook",
    "rerun.rebound": lambda f: f"`{f['name']}` now names another object than when the run was measured",
    "rerun.in-place": lambda f: f"`{f['name']}` was changed in place since ({f['how']})",
    "rerun.sparse": lambda f: (f"`{f['name']}` is a sparse tensor ({f['layout']}): its cost depends on its values "
                               f"(nnz, {f['nnz']} now), not only its shape"),
    "rerun.mask": lambda f: (f"`{f['name']}` is a bool {f['what']}: code indexing with it (x[mask], masked_select, "
                             "nonzero) does work that depends on its values"),
    "rerun.data-dependent": lambda f: (f"the code calls `{f['fn']}`: the work after it depends on the values of its "
                                       "input, which a fingerprint does not compare"),
    "rerun.unfingerprinted": lambda f: ("not fingerprinted, so a change to them since the run is not seen: "
                                        + ", ".join(f"`{n}` ({k})" for n, k in f["names"])),
    "snapshot.file": lambda f: f"({f['type']}) is an open file: a re-run moves its position or writes to it",
    "snapshot.iterator": lambda f: f"({f['type']}) is an iterator: a re-run advances it and it cannot be rewound",
    "snapshot.too-deep": lambda f: (f"({f['type']}) holds objects nested deeper than perfmagic follows "
                                    f"({f['levels']} levels), so a re-run's changes to them could not be undone"),
    "snapshot.opaque": lambda f: (f"({f['type']}) is an object perfmagic cannot snapshot (no state_dict, not a "
                                  "tensor, array or container), so a re-run's changes to it could not be undone"),
    "snapshot.refused": lambda f: ("cannot keep the notebook's state through a re-measurement: "
                                   + "; ".join(f"`{n}` {r}" for n, r in f["reasons"])
                                   + f"; re-run with `--rerun` to re-measure anyway ({'its' if f['n'] == 1 else 'their'} "
                                   "state will keep changing), or `--historical` to compare the recorded samples"),
}

# ---- an interleaved A/B (timing/pair.py) -----------------------------------------------------------------

_PAIR: dict[str, Callable[[Any], str]] = {
    "pair.sized": lambda f: (f"budget sized to the calls' noise: ~{f['need']} pairs of {f['pair_s'] * 1e3:.3g} ms "
                             f"needed for a decision at ±{f['min_effect']:.0%}: {f['total']:.3g} s"
                             + (f" (capped at {f['cap']:g} s; -b for more)" if f.get("capped") else "")),
    "pair.side": lambda f: "measured interleaved with the other side (A/B)",
}

WORDS: dict[str, Callable[[Any], str]] = {**_BENCH, "compare.method": _method, **_NOISE, **_BASIS, **_HISTORY,
                                          **_FLOW, **_RERUN, **_PAIR}

__all__ = ["WORDS"]
