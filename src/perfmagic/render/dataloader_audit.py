"""The words of the DataLoader audit (:class:`~perfmagic.dataloader.audit.Finding`): what each finding
found, with its numbers (:func:`message`), the expected effect of the fix (:func:`effect`), and what the
sweep of the same check measured of a prediction (set by ``reconcile``). The engine returns a kind and its
numbers; every sentence is written here. Imports no analysis module."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .text import fmt_time, plural

MARKS = {"warn": "!", "info": "·", "ok": "✓"}


def speed_change(ratio: float, tol: float = 0.05) -> str:
    """``old / new`` as words: "1.77× faster", "1.12× slower", or "no gain (within 5%)" — a ratio below
    1 is never printed as "faster"."""
    if not ratio or ratio != ratio or ratio <= 0:
        return "no measurable change"
    if ratio >= 1 + tol:
        return f"{ratio:.2f}× faster"
    if ratio <= 1 / (1 + tol):
        return f"{1 / ratio:.2f}× slower"
    return f"no gain (within {tol:.0%})"


def loop_label(w: int) -> str:
    """The check's own loop named as a sweep setting, where the sweep did not measure the loader's own."""
    return f"num_workers={w} (the loop above)"


def _threads(f: Any) -> str:
    """"2 workers + 2 torch threads (the workers used 1.20 cores)"."""
    w, tt, wc = f["w"], f.get("tt"), f.get("wc")
    out = f"{plural(w, 'worker')} + {plural(tt, 'torch thread')}" if tt else plural(w, "worker")
    return out + (f" (the workers used {wc:.2f} cores)" if wc is not None else "")


def _others(f: Any) -> str:
    oc = f.get("oc")
    return f"; other processes kept {oc:.1f} cores busy meanwhile" if oc is not None else ""


def _idle_pause(f: Any) -> str:
    """What the step timed after a pause (the workers stopped) made up of the loop's slowdown, if it was timed."""
    share = f.get("pause_share")
    if share is None or f.get("pause") is None:
        return ""
    return f"; a {fmt_time(f['pause'])} pause before it, with the workers stopped, made up {max(share, 0):.0%} of that"


def _h2d(f: Any) -> str:
    return f" (one batch's copy: {fmt_time(f['h2d'])})" if f.get("h2d") is not None else ""


def _oversubscribed(f: Any) -> str:
    x = f.get("x")
    said = f"{_threads(f)} on {f['cores']} usable cores (oversubscribed)"
    if x is None:
        return said
    if f.get("grew"):  # grown, but not by enough to count as slowed (1.25× and 1 ms)
        return said + f"; the step ran {x:.2f}× its time alone with them, too little to count as slowed"
    return said + f", but the step did not slow with workers (×{x:.2f})"


def _grew(f: Any) -> str:
    x, xm = f["x"], f.get("xm")
    avg = f", {xm:.2f}× on average" if xm is not None and abs(xm - x) >= 0.05 else ""
    return (f"cannot tell whether the workers slow the step: {_threads(f)} on {f['cores']} usable cores "
            f"(oversubscribed); the step ran {x:.2f}× its time alone with them (median{avg}; a slowdown counts "
            f"from {f['slowed_at']:.2f}×)")


def _respawn(f: Any) -> str:
    return (f"False: the {plural(f['w'], 'worker')} re-spawn every epoch, {fmt_time(f['respawn'])} before its first "
            "batch")


_MESSAGES: dict[str, Callable[[Any], str]] = {
    "workers.none-input-bound": lambda f: (f"0: batches load in the main process, in series with the step "
                                           f"({fmt_time(f['wait'])} of each {fmt_time(f['step'])} step)"),
    "workers.none": lambda f: f"0: loading costs {fmt_time(f['wait'])} per step ({f['frac']:.0%})",
    "threads.loads-differ": lambda f: (f"cannot tell whether the workers slow the step: it ran {f['x']:.2f}× its "
                                       f"time alone during the loop, but {f['gap']}"),
    "threads.slowed": lambda f: (f"{_threads(f)} on {f['cores']} usable cores: the step slowed "
                                 f"{fmt_time(f['alone'])} → {fmt_time(f['alone'] * f['x'])} with workers "
                                 f"({f['x']:.2f}× its time alone, medians){_others(f)}"),
    "threads.others-slowed": lambda f: (f"the step ran {f['x']:.2f}× its time alone during the loop, but the "
                                        f"{plural(f['w'], 'worker')} used only {f['wc']:.2f} cores{_others(f)}"),
    "threads.pause-slowed": lambda f: (f"{_threads(f)} on {f['cores']} usable cores: the step ran {f['x']:.2f}× its "
                                       f"time alone in the loop, and {fmt_time(f['paused'])} (against "
                                       f"{fmt_time(f['alone'])} back to back) after a {fmt_time(f['pause'])} pause "
                                       "with the workers stopped: the pause before each step slows it, not the "
                                       "workers"),
    "threads.idle-slowed": lambda f: (f"cannot tell what slows the step: it ran {f['x']:.2f}× its time alone in the "
                                      f"loop, but the {plural(f['w'], 'worker')} used only {f['wc']:.2f} cores on a "
                                      f"quiet machine, too little to take its cores{_idle_pause(f)}"),
    "threads.loaded": lambda f: (f"cannot tell whether the workers slow the step: {_threads(f)} on {f['cores']} "
                                 f"usable cores{_others(f)}; the step ran {f['x']:.2f}× its time alone with them"),
    "threads.oversubscribed-grew": _grew,
    "threads.oversubscribed": _oversubscribed,
    "workers.beyond-cores-busy": lambda f: (f"{f['w']} workers > {f['cores']} usable cores, and they used "
                                            f"{f['wc']:.2f} cores"),
    "workers.beyond-cores": lambda f: (f"{f['w']} workers > {f['cores']} usable cores"
                                       + (f"; the workers used {f['wc']:.2f} cores: they mostly wait"
                                          if f.get("wc") is not None else "")),
    "workers.too-few": lambda f: (f"{plural(f['w'], 'worker')} deliver {1 / (f['cost'] / max(f['w'], 1)):.3g} "
                                  f"batches/s, the step takes {1 / f['comp']:.3g}/s"),
    "workers.behind": lambda f: (f"{plural(f['w'], 'worker')} do not keep up: the loop waits {f['frac']:.0%} of "
                                 f"each step for data ({fmt_time(f['wait'])} of {fmt_time(f['step'])})"),
    "workers.keep-up": lambda f: (f"{plural(f['w'], 'worker')} on {f['cores']} usable cores keep up (data wait "
                                  f"{f['frac']:.0%})"),
    "workers.keep-up-unsure": lambda f: (f"{plural(f['w'], 'worker')} keep up with the step (data wait {f['frac']:.0%}); "
                                         "whether they slow it cannot be told (see threads)"),
    "workers.keep-up-slowed": lambda f: (f"{plural(f['w'], 'worker')} keep up with the step (data wait "
                                         f"{f['frac']:.0%}) only because they slowed it (see threads)"),
    "pin.pageable": lambda f: f"False while the step uses CUDA: copies come from pageable memory and block{_h2d(f)}",
    "pin.blocking": lambda f: f"True, but the step's copies are not non_blocking=True{_h2d(f)}",
    "pin.ok": lambda f: f"True with non_blocking copies{_h2d(f)}" if f.get("nb") else f"True{_h2d(f)}",
    "pin.no-cuda": lambda f: "True but the step does not use CUDA",
    "persistent.respawn": _respawn,
    "persistent.kept": lambda f: "True: workers are kept between epochs",
    "prefetch": lambda f: f"{f['pf']}: up to {f['w'] * f['pf']} batches in flight",
    "batch-size": lambda f: f"{f['bs']}: {f['rate']:.4g} samples/s through the loop",
    "collate": lambda f: (f"{fmt_time(f['collate'])} per batch, {f['share']:.0%} of fetching it "
                          f"({f['items']} items × {fmt_time(f['item'])})"),
}


def _hide_wait(f: Any) -> str:
    eff = "workers load the next batches while the step runs"
    need = f.get("need")
    if need is None:
        return eff
    # past the cores the division is no forecast: workers that load by computing share them (notebook 06 said
    # "about 101 workers would hide the wait" on 2 cores, from a 2 ms sleep per item)
    beyond = (f", more than the {f['cores']} usable cores: that pays only while loading waits (I/O) rather than "
              "computes, which only a sweep of num_workers shows" if need > f["cores"] else "")
    return (f"{eff}: about {need} worker{'s' if need > 1 else ''} would hide the wait ({fmt_time(f['cost'])} per "
            f"batch ÷ {fmt_time(f['comp'])} compute{beyond}); with {f['k']}: step ≈ {fmt_time(f['est'])}, "
            f"{speed_change(f['step'] / f['est'])} ({f['cores']} usable cores)")


def _fix_threads(f: Any) -> str:
    fix = ([f"torch.set_num_threads({f['t_fix']})"] if f["fix_threads"] else []) + \
          ([f"num_workers={f['w_fix']}"] if f["fix_workers"] else [])
    return ((" and ".join(fix) + f" ({f['w_fix'] + f['t_fix']} threads on {f['cores']} cores), or " if fix else "")
            + f"compare --sweep num_workers={f['sweep']}: the workers and the step's threads compete for the "
            "same cores")


def _too_few(f: Any) -> str:
    wc, w, cheaper = f.get("wc"), max(f["w"], 1), "cache decoded data, lighter transforms, augment on the GPU"
    if f["need"] <= f["cores"]:
        return f"about {f['need']} workers needed to keep up"
    if wc is not None and wc / w < WAITING_SHARE:  # measured: each worker mostly waits (I/O)
        return (f"about {f['need']} workers needed to keep up; the {plural(f['w'], 'worker')} used {wc:.2f} "
                "cores, so loading waits (I/O) more than it computes and workers beyond the "
                f"{f['cores']} usable cores can still add throughput (compare --sweep num_workers={f['w']},"
                f"{2 * f['w']},{4 * f['w']}), or make each item cheaper ({cheaper})")
    return (f"about {f['need']} workers needed to keep up; more than the {f['cores']} usable cores: make each item "
            f"cheaper ({cheaper})")


WAITING_SHARE = 0.5  # workers using less than this share of a core each mostly wait: more of them still help


def _prefetch(f: Any) -> str:
    if f["why"] == "input-bound":
        return ("a larger prefetch_factor does not raise throughput when the workers are slower than the step on "
                "average; it only absorbs jitter")
    if f["why"] == "stalls":
        return (f"occasional stalls (p90 wait {fmt_time(f['p90'])} vs median {fmt_time(f['median'])}): a larger "
                "prefetch_factor absorbs them")
    return "enough: the waits are short and even"


def _respawn_saves(f: Any) -> str:
    share = (f" ({f['share']:.1%} of an epoch of {f['batches']} batches)" if f.get("share") is not None else "")
    return f"persistent_workers=True saves about {fmt_time(f['respawn'])} per epoch{share}"


_EFFECTS: dict[str, Callable[[Any], str]] = {
    "workers.none-input-bound": _hide_wait,
    "workers.none": lambda f: f"workers would save at most that ({fmt_time(f['wait'])} per step)",
    "threads.loads-differ": lambda f: "re-run on a quiet machine, or compare --sweep num_workers",
    "threads.slowed": _fix_threads,
    "threads.others-slowed": lambda f: "the other processes, not the workers, slowed it: re-run on a quiet machine",
    "threads.pause-slowed": lambda f: ("with data always ready the steps run back to back, at their time alone; "
                                       "fewer workers would not speed the step"),
    "threads.idle-slowed": lambda f: ("fewer workers would not give the step its cores back; compare --sweep "
                                      "num_workers to see what they change"),
    "threads.loaded": lambda f: ("the others' load can hide the workers' effect (or make it): re-run on a quiet "
                                 "machine, or compare --sweep num_workers"),
    "threads.oversubscribed-grew": lambda f: (f"compare --sweep num_workers, or torch.set_num_threads({f['t_fix']}) "
                                              "and measure again"),
    "threads.oversubscribed": lambda f: ("fine while the workers mostly wait (I/O); if loading gets CPU-heavy, "
                                         f"torch.set_num_threads({f['t_fix']})"),
    "workers.beyond-cores-busy": lambda f: ("CPU-bound loading gains nothing beyond the cores and contends with the "
                                            "main process (sweep to see)"),
    "workers.beyond-cores": lambda f: ("fine for loading that waits on I/O; CPU-bound loading gains nothing beyond "
                                       "the cores (sweep to see)"),
    "workers.too-few": _too_few,
    "workers.keep-up-slowed": lambda f: "the loop's step time is not the step's own: fix the threads first",
    "workers.behind": lambda f: ("how many would keep up needs the loader's own rate, which this check did not "
                                 "measure (its loader-alone pass): run it with that pass, or compare --sweep "
                                 "num_workers"),
    "pin.pageable": lambda f: ("pin_memory=True with .to(device, non_blocking=True): faster copies (typically "
                               "2–6×) that overlap compute"),
    "pin.blocking": lambda f: "non_blocking=True lets the copy of the batch overlap the previous compute",
    "pin.no-cuda": lambda f: "pin_memory=False saves the page-locked copy of every batch",
    "persistent.respawn": _respawn_saves,
    "prefetch": _prefetch,
    "batch-size": lambda f: (f"the step is short ({fmt_time(f['short_step'])}): per-batch overheads weigh; a larger "
                             "batch amortizes them (sweep batch_size)" if f.get("short_step") is not None else ""),
    "collate": lambda f: ("a cheaper collate (pre-stacked arrays, a batched __getitems__) saves up to "
                          f"{fmt_time(f['collate'])} per batch per worker" if f["share"] > 0.2 else ""),
}


def message(f: Any) -> str:
    """What a finding found, with its numbers (a kind with no words here: the kind itself)."""
    say = _MESSAGES.get(f.kind)
    return say(f) if say is not None else str(f.kind)


def _why(s: dict[str, Any]) -> str:
    """What the sweep measured that explains a setting's speed."""
    if s["why"] == "compute-grew":
        who = f"the step's {plural(s['tt'], 'torch thread')}" if s.get("tt") else "the step"
        return (f"the step's compute grew {fmt_time(s['before'])} → {fmt_time(s['after'])} with "
                f"{plural(s['k'], 'worker')}: {who} and the workers share {s['cores']} cores")
    if s["why"] == "still-waits":
        used = f" (its workers used {s['wc']:.2f} cores)" if s.get("wc") is not None else ""
        return f"the loop still waited for data {s['frac']:.0%} of each step there{used}"
    return f"its step took {fmt_time(s['step'])} vs {fmt_time(s['base_step'])}"


def _swept(eff: str, s: dict[str, Any]) -> str:
    """The expected effect with what the sweep measured of it: borne out, cannot tell, or refuted."""
    shown, base = s["shown"], s["base"]
    said = ("the sweep measured " + " and ".join(f"{label} at {m:.2f}×" for label, m in shown)
            + f" the throughput of {base}")
    if s["outcome"] == "unclear":
        return f"{eff}; {said}, but cannot tell whether that bears it out, because {s['gap']}"
    if s["outcome"] == "agrees":
        return f"{eff}; {said}"
    verdict = "workers do not help here" if s["best"] < 1.05 else "workers gain far less than the wait suggests"
    if s["none_near"]:
        label, m = shown[0]
        said = (f"no num_workers in the sweep came near that: the best, {label}, ran at {m:.2f}× the throughput "
                f"of {base}")
    return f"{said}: {verdict}, because {_why(s)}"


def effect(f: Any) -> str:
    """The expected effect of the fix; with what the sweep of the same check measured of a prediction."""
    say = _EFFECTS.get(f.kind)
    eff = say(f) if say is not None else ""
    return _swept(eff, dict(f.sweep)) if f.sweep else eff


_NOTES: dict[str, Callable[[dict[str, Any]], str]] = {
    "one-pass": lambda v: f"{v['name']} is a one-pass iterator: 'loader alone' timed on the batches after the loop",
    "interrupted-warm-up": lambda v: f"interrupted during the warm-up: the last {v['shown']} steps are shown",
    "cuda-unused": lambda v: ("CUDA is initialised in this process but the step does not seem to use it: no GPU "
                              "analysis (the steps were still synchronized)"),
    "short": lambda v: (f"{v['name']} has only {v['n']} batches: {v['n'] - v['warmup']} steps measured after "
                        f"{v['warmup']} warm-up (asked {v['asked']})"),
    "sweep-again": lambda v: (f"{v['label']} measured again: other processes used {_cores(v['first'])} during its "
                              f"first pass and {_cores(v['second'])} during the second; the {v['kept']} is shown"),
    "too-short": lambda v: (f"{v['name']} has only {v['n']} batches, fewer than warm-up + 2 ({v['warmup']} + 2): "
                            f"measured the last {v['n'] - v['skipped']} after skipping {v['skipped']}; start-up "
                            "effects may remain in the numbers"),
}


def _cores(x: float | None) -> str:
    return "an unmeasured number of cores" if x is None else f"{x:.1f} cores"


# the check's notes are findings (perfmagic.findings.Finding, kind "dataloader.<what>"): the ledger keeps their
# numbers; render/findings.py words them with these
WORDS: dict[str, Callable[[Any], str]] = {f"dataloader.{k}": say for k, say in _NOTES.items()}


def line(f: Any) -> str:
    """``"! num_workers: 0: batches load ... → workers load ..."``: the mark, the setting, found → effect."""
    eff = effect(f)
    return f"{MARKS.get(f.level, '·')} {f.topic}: {message(f)}" + (f" → {eff}" if eff else "")


__all__ = ["MARKS", "WORDS", "effect", "line", "loop_label", "message", "speed_change"]
