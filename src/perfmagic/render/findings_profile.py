"""The sentences of the profilers' :class:`~perfmagic.findings.Finding` kinds: the notes of ``%%flame``
(``flame.*``: :mod:`perfmagic.profile.flame`), ``%%memory`` (``memory.*``: :mod:`perfmagic.profile.memory`,
:mod:`perfmagic.profile.memsampler`) and ``%%lineprof`` (``lineprof.*``: :mod:`perfmagic.profile.lineprof`).

:mod:`perfmagic.render.findings` merges :data:`WORDS` into its table, so ``str(finding)`` of any of these
kinds is its sentence; the notes are stored in the ledger as data and worded again when a run is read back.
The printed text is the one these engines wrote before the words moved here. Imports no analysis module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .units import fmt_time

# ---- a %%flame run (profile/flame.py) ---------------------------------------------------------------


def _ignored(f: Any) -> str:
    """The options the in-process sampler cannot honour (py-spy's alone)."""
    names = f["options"]
    return f"{' and '.join(names)} ignored: {'they need' if len(names) > 1 else 'needs'} py-spy"


def _fell_behind(f: Any) -> str:
    taken, wall = f["taken"], f["wall_s"]
    return (f"{f['sampler']} fell behind: {taken} samples in {wall:.2g} s ({taken / wall:.0f} a second of the "
            f"{f['rate']:g} asked; other processes held the cores?), so each share is known less well")


_FLAME: dict[str, Callable[[Any], str]] = {
    "flame.ignored": _ignored,
    "flame.idle-inprocess": lambda f: "idle: the in-process sampler always includes waits (it samples wall-clock time)",
    "flame.no-profile": lambda f: f"py-spy wrote no profile: {f['log']}",
    "flame.fell-behind": _fell_behind,
    "flame.thinned": lambda f: (f"{f['taken']:,} samples at {f['rate']:g} Hz: one in {f['every']} kept (at most "
                                f"{f['most']:,}), each weighted by its block"),
}

# ---- a %%memory run (profile/memory.py, profile/memsampler.py) ----------------------------------------


def _short_run(f: Any) -> str:
    """The cell ended before the sampler's first tick: what the peaks rest on instead."""
    return (f"the cell ran for {fmt_time(f['wall_s'])}, less than one sampling interval "
            f"({fmt_time(f['interval_s'])}): the timeline has only its start and end; the peaks come from "
            + ("VmHWM and tracemalloc" if f.get("tracing") else "VmHWM"))


_MEMORY: dict[str, Callable[[Any], str]] = {
    "memory.host": lambda f: f"host memory: {f['why']}",
    "memory.cuda-unrecorded": lambda f: (f"{f['why']}; its device memory was not recorded (CUDA was not initialised "
                                         "when it started, and perfmagic does not initialise it): run it again, or "
                                         "use --device cuda"),
    "memory.history-unreadable": lambda f: f"CUDA allocator history not readable ({f['error']})",
    "memory.short-run": _short_run,
    "memory.no-hwm": lambda f: ("VmHWM cannot be reset here (/proc/self/clear_refs): RSS peaks are sampled only and "
                                "can miss short-lived ones"),
    "memory.no-rss": lambda f: "RSS is not readable here (no /proc, no psutil)",
    "memory.tracemalloc-cost": lambda f: ("tracemalloc slows allocation-heavy Python code while it runs (the wall "
                                          "time above includes it); --no-trace (trace='off') keeps the timeline and "
                                          "true peaks without it"),
    "memory.no-history": lambda f: "this torch has no allocator history: CUDA sites not attributed",
    "memory.history-running": lambda f: "CUDA allocator history was already being recorded; left as it was",
    "memory.history-unavailable": lambda f: f"CUDA allocator history unavailable ({f['error']})",
}

# ---- a %%lineprof run (profile/lineprof.py) --------------------------------------------------------------

_LINEPROF: dict[str, Callable[[Any], str]] = {
    "lineprof.no-source": lambda f: ("the source of some functions is not available (linecache): lines shown "
                                     "without text"),
}

_WHERE_WHY: dict[str, Callable[[Any], str]] = {
    "historical": lambda f: "the recorded samples only were asked for (--historical, rerun=False)",
    "pair": lambda f: f"runs #{f['a']} and #{f['b']} are a pair measured already (their samples are compared)",
    "no-namespace": lambda f: "there is no namespace to run their code in",
    "obstacles": lambda f: f"they cannot be re-measured in this process: {f['detail']}",
}

_WHERE: dict[str, Callable[[Any], str]] = {
    "where.ops-few-pairs": lambda f: (f"the profiling stopped after {f['pairs']} of the {f['need']} pairs it needs "
                                      "at least (Ctrl-C, or the time given ran out)"),
    "where.few-pairs": lambda f: (f"only {f['pairs']} of the {f['measured']} pairs had samples of both sides (at least "
                                 f"{f['need']} are needed): the blocks are shorter than the sampler's interval "
                                 f"({1000 / f['rate']:.2g} ms); give the comparison a longer budget"),
    "where.row-note": lambda f: f"where the change went between runs #{f['a']} and #{f['b']}, re-measured",
    "where.historical": lambda f: (f"--where needs A and B re-measured here, and {_WHERE_WHY[f['reason']](f)}; the "
                                   "recorded runs hold no samples of their stacks. Run both cells again in this "
                                   "kernel (or pass globals= in a script), then %perf compare A B --where"),
}

WORDS: dict[str, Callable[[Any], str]] = {**_FLAME, **_MEMORY, **_LINEPROF, **_WHERE}

__all__ = ["WORDS"]
