"""The words of ``%perf next`` (:mod:`perfmagic.advisor`): each reading of the evidence, each proposal,
its basis, its low end and the command that tests it, written from a kind and its numbers.

The advisor's readers (``advisor/evidence.py``) and its method (``advisor/next.py``) decide what to say,
as a kind (``"flame.spread"``) and the numbers that fill it; :func:`say` writes the sentence. The proposal's
words are kept as text on the result, because the ledger's record of predictions stores the words that were
proposed (a later check compares them). Imports no analysis module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .text import fmt_time, gain, pct


def x(v: float | None) -> str:
    """A gain factor: ``1.8×``, ``12×``; ``∞`` for no bound."""
    return gain(v)


def _p(f: float) -> str:
    return pct(f, 0)


def _subject(v: dict[str, Any]) -> str:
    return f"-l {v['label']} " if v.get("label") else ""


NO_GAIN_PROMISED = "nothing guarantees a gain: only a change that removes its time pays"


def _more_samples(v: dict[str, Any]) -> str:
    s, how = _subject(v), v["how"]
    if how == "longer":
        return f"%%flame {s}on a longer run of the code (the code repeated in the cell)"
    if how == "rate":
        return f"%%flame {s}--rate {v['rate']} (≥ {v['need']} samples in its {v['wall']:.2g} s)"
    if how == "repeat":
        return f"%%flame {s}on the code repeated {v['reps']} times in the cell (≥ {v['need']} samples)"
    return f"%%flame {s}on a longer run of the code (≥ {v['need']} samples)"


def _flame_scope(v: dict[str, Any]) -> str:
    if not v.get("within"):
        return ""
    return f" within `{v['within']}`, which '{v['label']}' calls ({_p(v['within_share'])} of the profile)"


def _counted(v: dict[str, Any]) -> str:
    return f"flame #{v['id']}, {v['n']} samples, {_p(v['lo'])}–{_p(v['hi'])} at 95%"


def _roof_basis(v: dict[str, Any]) -> str:
    mem = v["memory"]
    return (f"{'memory' if mem else 'compute'}-bound at {_p(v['frac'])} of the {v['roof']} roof (roofline "
            f"#{v['id']}): only " + ("less data movement" if mem else "less work or lower precision")
            + f" can help; at most {x(1 / v['frac'])} " + ("at this traffic" if mem else "at this precision and work")
            + ", if the roof is right")


def _roof_above(v: dict[str, Any]) -> str:
    return (f"roofline #{v['id']}: at {_p(v['frac'])} of the {v['roof']} roof, above it: "
            + ("the data stays in cache, so the DRAM roof does not bound it" if v["memory"] else
               "the roof is too low (measured under load?): %roofline --calibrate") + "; no bound from it")


def _dataloader_low(v: dict[str, Any]) -> str:
    """Why the low end of a DataLoader change is 1.0×: workers need free cores, unless the check's own sweep
    found its best count beyond the cores (the loading waits: the cores were not the limit there); then what
    the check did not measure (the workers' start-up in the job, the work around the loop)."""
    best, cores = v.get("best"), v.get("cores")
    if best and cores and best > cores:
        return (f"nothing guarantees a gain in the job: the sweep's best, {best} workers on {cores} usable cores, "
                "shows loading that waits rather than computes, but it measured the loop alone, not the workers' "
                "start-up and the work around it")
    return "nothing guarantees a gain: workers need free cores" + (f" ({cores} here, shared with the step)"
                                                                    if cores else "")


_EVIDENCE: dict[str, Callable[[dict[str, Any]], str]] = {
    # %%dataloader_check
    "dataloader.no-share": lambda v: f"dataloader_check #{v['id']}: no data-wait share recorded; nothing to go on",
    "dataloader.not-input-bound": lambda v: (f"not input-bound: {_p(v['w'])} of each step waits for data "
                                             f"(dataloader_check #{v['id']}): the loader is not the lever"),
    "dataloader.use-workers": lambda v: ("load batches in DataLoader workers (num_workers > 0, "
                                         "persistent_workers=True)" if not v.get("best") else
                                         f"load batches in DataLoader workers (num_workers={v['best']}, the "
                                         "sweep's best)"),
    "dataloader.faster-pipeline": lambda v: ("a faster input pipeline: more workers, cheaper transforms, or caching "
                                             "the decoded data"),
    "dataloader.basis": lambda v: (f"input-bound, {_p(v['w'])} wait (dataloader_check #{v['id']}): at most "
                                   f"{x(v['high'])} with infinitely fast data"),
    "dataloader.low": _dataloader_low,
    "dataloader.test": lambda v: (("" if v.get("best") else f"%%dataloader_check {v['loader']} --sweep "
                                   "num_workers=0,2,4, then ") + f"%%gpubench {_subject(v)}--vs baseline with the "
                                  "new loader"),
    "dataloader.cap": lambda v: f"while {_p(v['w'])} of each step waits for data, a faster step gains at most {x(v['cap'])}",
    # %%flame
    "flame.more-samples": _more_samples,
    "flame.nothing": lambda v: f"flame #{v['id']}: no function sampled (the cell waited, or ran too briefly)",
    "flame.longer": lambda v: f"%%flame {_subject(v)}on a longer run of the code (or --idle when it waits)",
    "flame.spread": lambda v: (f"no hot function: the top one, `{v['fn']}`, has {_p(v['f'])} of the self "
                               f"time{_flame_scope(v)} (flame #{v['id']}); the time is spread"),
    "flame.unsure": lambda v: (f"cannot tell yet: `{v['fn']}` has {_p(v['f'])} of {v['n']} samples{_flame_scope(v)} "
                               f"(flame #{v['id']}), {_p(v['lo'])}–{_p(v['hi'])} at 95%: it may hold less than the "
                               f"{v['need'] * 100:.1f}% that a {_p(v['min_effect'])} gain needs"),
    "flame.own-basis": lambda v: (f"{_p(v['f'])} of self time in `{v['fn']}`{_flame_scope(v)} ({_counted(v)}): at "
                                  f"most {x(v['high'])} if it cost nothing"),
    "flame.own-action": lambda v: (f"rewrite `{v['fn']}`: a better algorithm or data structure, or vectorize its "
                                   "Python loop (NumPy/torch ops)"),
    "flame.own-test": lambda v: f"%%gpubench {_subject(v)}--vs baseline with `{v['fn']}` changed",
    "flame.library-basis": lambda v: (f"{_p(v['f'])} of self time in `{v['fn']}`, a library function ({v['where']})"
                                      f"{_flame_scope(v)} ({_counted(v)}), spent for the code that calls it: fewer, "
                                      "larger calls cut it and the work around it, so the profile sets no upper "
                                      "bound"),
    "flame.library-action": lambda v: (f"call `{v['fn']}` less often: vectorize the code that calls it (fewer, "
                                       "larger operations)"),
    "flame.library-test": lambda v: f"%%gpubench {_subject(v)}--vs baseline with its callers vectorized",
    "flame.low": lambda v: NO_GAIN_PROMISED,
    # %%roofline
    "roofline.nothing": lambda v: f"roofline #{v['id']}: no fraction of the roof recorded",
    "roofline.above": _roof_above,
    "roofline.fits-cache": lambda v: (f"not the bandwidth roof: roofline #{v['id']} counted the call memory-bound, but "
                                      "its tensors fit in the last-level cache, so the DRAM roof need not bound it "
                                      "(profile it with %%flame: per-op overheads may set the pace)"),
    "roofline.basis": _roof_basis,
    "roofline.not-threads": lambda v: f"not threads: the {v['roof']} roof was measured with every core (roofline #{v['id']})",
    "roofline.memory-action": lambda v: ("move less data: fuse passes, drop temporaries, a smaller storage dtype "
                                         "(not more threads)"),
    "roofline.test": lambda v: f"%%roofline {_subject(v)}on the changed code, then %%gpubench {_subject(v)}--vs baseline",
    "roofline.memory-low": lambda v: ("nothing guarantees a gain; less traffic per result raises the attainable "
                                      "rate, so no upper bound holds for it"),
    "roofline.compute-action": lambda v: f"less work or a lower precision than {v['dtype']} (not more threads)",
    "roofline.compute-low": lambda v: ("nothing guarantees a gain; lower precision raises the roof, so no upper "
                                       "bound holds for it"),
    "roofline.far": lambda v: (f"only {_p(v['frac'])} of the {v['roof']} roof (roofline #{v['id']}): overheads, not "
                               "the hardware, set the pace (Python loops, small tensors, many tiny calls)"),
    "roofline.headroom": lambda v: (f"{_p(v['frac'])} of the {v['roof']} roof (roofline #{v['id']}): up to "
                                    f"{x(1 / v['frac'])} of headroom"),
    # %%amdahl
    "amdahl.nothing": lambda v: f"amdahl #{v['id']}: no serial fraction fitted ({v['n_points']} worker counts)",
    "amdahl.serial": lambda v: (f"not more workers: serial fraction {v['s']:.2f} (amdahl #{v['id']}): at most "
                                f"{x(v['ceiling'])} on any number of workers ({x(v['at_n'])} at {v['nmax']} already)"),
    "amdahl.serial-basis": lambda v: (f"serial fraction {v['s']:.2f} (amdahl #{v['id']}): at most {x(v['ceiling'])} "
                                      f"on any number of workers; removing the serial part at {v['nmax']} workers: at "
                                      f"most {x(v['shrink'])}"),
    "amdahl.serial-action": lambda v: "not more workers: shrink the serial part (profile it with %%flame)",
    "amdahl.serial-test": lambda v: f"%%flame on the serial part, then %%gpubench {_subject(v)}--vs baseline",
    "amdahl.more-basis": lambda v: (f"serial fraction {v['s']:.2f} (amdahl #{v['id']}): {v['rec']} workers give at "
                                    f"most {x(v['gain'])} over {v['nmax']}"),
    "amdahl.ceiling": lambda v: (f"serial fraction {v['s']:.2f} (amdahl #{v['id']}): at most {x(v['ceiling'])} on "
                                 "any number of workers"),
}


def _fast_enough(v: dict[str, Any]) -> str:
    return f"run #{v['run']} ({v['label']}): its whole 95% interval is within the target"


_METHOD: dict[str, Callable[[dict[str, Any]], str]] = {
    "next.empty": lambda v: "measure first: time the code (nothing is in the ledger yet)",
    "next.time-for-target": lambda v: "measure first: time the code to compare with the target",
    "next.fast-enough": lambda v: "already fast enough: stop",
    "next.fast-enough-basis": _fast_enough,
    "next.maybe-fast-enough": lambda v: ("cannot tell if it is fast enough: the median meets the target, its "
                                         "interval does not"),
    "next.maybe-fast-enough-basis": lambda v: f"run #{v['run']}: the 95% interval reaches past the target",
    "next.longer-run": lambda v: f"%%gpubench -l {v['label']} -b 10 (a longer run narrows the interval)",
    "next.target-not-met": lambda v: (f"target {fmt_time(v['target'])} not met: {x(v['to_go'])} to go "
                                      f"(run #{v['run']})"),
    "next.spent": lambda v: (f"{v['magic']} #{v['id']} was used by a checked prediction: it describes the code "
                             "before that change"),
    "next.outdated": lambda v: (f"{v['magic']} #{v['id']} predates the change kept in run #{v['kept']} "
                                f"('{v['label']}'): it describes the code before it"),
    "next.no-loader": lambda v: (f"dataloader_check #{v['id']} measured a loop over a DataLoader; '{v['label']}' "
                                 f"(run #{v['run']}) names none, so its data wait does not bound it"),
    "next.no-evidence": lambda v: f"no evidence about '{v['label']}' yet: profile it first with {v['command']}",
    "next.capped": lambda v: f"{v['basis']}; capped at {x(v['cap'])} while input-bound",
    "next.below-bar": lambda v: (f"{v['level']}: {v['action']} cannot clear the {_p(v['min_effect'])} bar (at most "
                                 f"{x(v['high'])})"),
    "next.measure": lambda v: "measure first: " + v["command"],
    "next.profile": lambda v: (f"profile first: {v['command']} (where the time goes)"
                               + ("; for a training loop, %%dataloader_check LOADER too" if v.get("loader") else "")),
    "next.time-first": lambda v: "measure first: time the code, so a change can be judged",
    "next.loader-sweep": lambda v: "%%dataloader_check LOADER --sweep num_workers=0,2,4",
    "next.stop": lambda v: "stop: nothing measured points to a gain above the bar",
    "next.stop-basis": lambda v: f"every bound from the evidence is below {x(v['bar'])}",
    "next.not-recorded": lambda v: ("not recorded as a prediction: " + (str(v["error"]) if v.get("error") is not None else
                                    "no timed run of this code to compare a change with")),
}

def names_list(names: set[str], k: int = 3) -> str:
    """```f`, `g`, `h` and 2 more``: the first ``k`` names, sorted."""
    got = sorted(names)
    more = f" and {len(got) - k} more" if len(got) > k else ""
    return ", ".join(f"`{n}`" for n in got[:k]) + more


_SCOPE: dict[str, Callable[[dict[str, Any]], str]] = {
    "scope.unrelated": lambda v: "its code names nothing that ties it to this code",
    "scope.calls": lambda v: f"'{v['label']}' calls what it ran ({names_list(v['names'])})",
    "scope.ran": lambda v: f"it ran {names_list(v['names'])}, which '{v['label']}' does not call",
    "scope.read": lambda v: f"it read {names_list(v['names'])}, which '{v['label']}' does not read",
}

_WORDS = {**_EVIDENCE, **_METHOD, **_SCOPE}


def say(kind: str, **values: Any) -> str:
    """The sentence of one reading, proposal or step of the method, from its kind and numbers."""
    return _WORDS[kind](values)


def _finding_words(kind: str) -> Callable[[Any], str]:
    return lambda f: _WORDS[kind](dict(f.values))


#: the sentences of the advisor's findings as data (``Finding.of("advisor." + kind, ...)``, kept so in a
#: :class:`~perfmagic.advisor.result.NextStep` and in the ledger): :mod:`.findings` words them from here
WORDS: dict[str, Callable[[Any], str]] = {"advisor." + k: _finding_words(k) for k in _WORDS}


__all__ = ["NO_GAIN_PROMISED", "WORDS", "names_list", "say", "x"]
