"""Where a torch change went, op by op: each op's self time under ``torch.profiler``, A and B in the same pairs.

The sampler of :mod:`.where` names the Python function a change went to. For torch code the next question
is *which op*: a loop of ``aten::mm`` swapped for one ``aten::bmm``, a copy that appeared. The profiler
stays off while the pairs are timed (its cost per op would be in the times the verdict reads). After
them, a few more pairs of untimed calls run under ``torch.profiler.profile``, A and B in alternating
order, and each op's self time of the call is read: CPU time on the CPU, the kernels' own time on the
device where the work ran on CUDA (the CUDA timeline, not the launches). Each op's Δ (B − A, per call:
the median over the pairs, so one held-up call does not set it) gets the distribution-free interval of
that median (order statistics: with 16 pairs, 14 on one side of 0 for 99%; 8 more pairs when an op is one
short, 13 of 16, and then 19 of 24 suffice; calls too slow for 16 pairs in the time stop at 8 or more, all
8 on one side), and an op is named under the rule of the functions: the interval excludes 0 and |Δ| ≥
``FLOOR`` of A's op time per call. On the CPU the pairs of a batch run in one profiler session, each call
in its own ``record_function`` window (a session's start and stop cost more than a small call).

On the CPU the profiler also runs its Python tracer (``with_stack``): each op is filed under the user's
function that called it (the innermost function of the user's code around it, a library's functions below
folded into it, as the sampler's rows are), and :meth:`OpsResult.function` gives a function's change in
its ops, under the same rule, for the function table.

Code that reaches no torch object by name (:func:`mentions_torch`: no profiler is started) or runs no
``aten::`` op in the first profiled pair gives no result (``None``): the table would be empty. Ctrl-C while profiling ends the profiling only; the timed pairs are kept. The first
profiled call of a process pays the profiler's start-up once (about 2 s on this project's VM); after it,
one profiled call costs a few ms beside the call itself.
"""

from __future__ import annotations

import contextlib
import functools
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..findings import Finding
from .rule import CONFIDENCE, FLOOR

OPS_PAIRS = 16      # pairs of profiled calls after the timed ones, time allowing (99%: 14 of 16 on one
                    # side of 0 name an op, so two held-up calls do not hide a change)
MIN_OP_PAIRS = 8    # fewer (Ctrl-C, calls too long for the time): no attribution; 8 is the fewest whose
                    # interval of the median reaches 99% (all 8 pairs on one side of 0: p = 2/256)
OPS_MORE_PAIRS = 24  # when an op's 16 pairs are one short of naming it (13 of 16), and past the floor,
                     # the profiling goes on to 24 pairs (time allowing; 19 of 24 name it). An op that did
                     # not change gets there with p = 2 x 0.0085 and is then named with p = 0.14 of that
OPS_SHARE = 0.10    # the pairs past the first 8 only where all fit in this share of the timed pairs' time;
OPS_MIN_S = 0.5     # the first 8 within this much or that share, whichever is more; a spell of slow calls (this VM's torch thread
                    # pool runs a small bmm at 80 µs or at 7 ms) may take it to twice that before it stops

Func = tuple[str, str, str]  # (function, file as the profiler names it, library folded into it): fold's row


@dataclass(frozen=True)
class OpDelta:
    """One torch op and its change: self time per call (medians over the profiled pairs)."""

    name: str
    a_s: float
    b_s: float
    delta_s: float
    low_s: float
    high_s: float
    share: float | None  # of the total Δ over the ops
    named: bool


@dataclass(frozen=True, repr=False)
class OpsResult:
    """The raw data: ``ops`` (names) and, per profiled pair, each op's self seconds in the call of A
    (``a[i][k]``) and of B (``b[i][k]``); ``clock``: "cpu" (self CPU time) or "cuda" (the kernels' own
    time on the device). Everything shown is derived from these."""

    clock: str
    ops: tuple[str, ...]
    a: tuple[tuple[float, ...], ...]
    b: tuple[tuple[float, ...], ...]
    profiled_s: float = 0.0
    confidence: float = CONFIDENCE
    floor: float = FLOOR
    refused: Finding | None = None
    # the op time of each user function (:data:`Func`: the rows of the sampler's table) per pair, on the
    # CPU: ``fa[i][k]`` is the ops' self seconds that function ``funcs[k]`` called in A's call of pair i
    funcs: tuple[Func, ...] = ()
    fa: tuple[tuple[float, ...], ...] = ()
    fb: tuple[tuple[float, ...], ...] = ()
    # on the CPU, this torch's profiler recorded no Python frames (:func:`python_stacks_recorded`): the ops
    # cannot be filed under the functions that called them
    no_stacks: bool = False

    def __post_init__(self) -> None:  # read back from the ledger, the functions are lists
        object.__setattr__(self, "funcs", tuple(tuple(f) for f in self.funcs))

    @property
    def n_pairs(self) -> int:
        return len(self.a)

    @property
    def ok(self) -> bool:
        return self.refused is None and bool(self.a) and bool(self.ops)

    @property
    def a_total_s(self) -> float:
        """A's op time per call (the median over the profiled pairs)."""
        import statistics

        return float(statistics.median(sum(x) for x in self.a)) if self.a else 0.0

    def _estimates(self) -> Any:
        """Memoised: (A self, B self, Δ, Δ low, Δ high per op; total Δ, its low and high). Medians over the
        pairs, with the distribution-free interval of the median (order statistics): one profiled call held
        up (a GC pass, a preemption) moves a mean of a few pairs by its whole delay (one 330 ms call put a
        1.6 ms change at −82 ms), and a bootstrap of a median of 8 pairs is far narrower than 99%."""
        cached = self.__dict__.get("_cache")
        if cached is None:
            cached = _medians(self.a, self.b, self.confidence)
            object.__setattr__(self, "_cache", cached)
        return cached

    def function(self, row: tuple[str, str, str]) -> OpDelta | None:
        """The change in the ops a sampler's row (function, file, library) called, under the ops' rule: the
        median over the profiled pairs, its distribution-free interval, named when it excludes 0 and |Δ| ≥
        ``FLOOR`` of A's op time per call. None where no op of this result ran in that function."""
        if not self.ok:
            return None
        ks = [k for k, f in enumerate(self.funcs) if joins(row, f)]
        if not ks:
            return None
        # (one row, two profiler functions, a method of two classes in one file: their op times summed)
        sa, sb, d, lo, hi, covered, *_ = _medians(tuple((sum(r[k] for k in ks),) for r in self.fa),
                                                  tuple((sum(r[k] for k in ks),) for r in self.fb), self.confidence)
        return OpDelta(name=row[0], a_s=float(sa[0]), b_s=float(sb[0]), delta_s=float(d[0]), low_s=float(lo[0]),
                       high_s=float(hi[0]), share=None,
                       named=covered[0] and (lo[0] > 0 or hi[0] < 0) and abs(float(d[0])) >= self.floor * self.a_total_s)

    @property
    def total_delta_s(self) -> float | None:
        return self._estimates()[6] if self.ok else None

    @property
    def total_interval(self) -> tuple[float, float] | None:
        return (self._estimates()[7], self._estimates()[8]) if self.ok else None

    def rows(self) -> list[OpDelta]:
        """Every op, named ones first, then by |Δ|."""
        if not self.ok:
            return []
        sa, sb, d, lo, hi, covered, _tot, _lo, _hi = self._estimates()
        tot = sum(d)
        floor = self.floor * self.a_total_s
        out = [OpDelta(name=op, a_s=float(sa[k]), b_s=float(sb[k]), delta_s=float(d[k]), low_s=float(lo[k]),
                       high_s=float(hi[k]), share=float(d[k]) / tot if tot else None,
                       named=covered[k] and (lo[k] > 0 or hi[k] < 0) and abs(float(d[k])) >= floor)
               for k, op in enumerate(self.ops)]
        out.sort(key=lambda r: (not r.named, -abs(r.delta_s)))
        return out

    def named(self) -> list[OpDelta]:
        return [r for r in self.rows() if r.named]

    def to_dict(self) -> dict[str, Any]:
        iv = self.total_interval
        return {"clock": self.clock, "pairs": self.n_pairs, "profiled_s": self.profiled_s,
                "total_delta_s": self.total_delta_s, "total_low_s": iv[0] if iv else None,
                "total_high_s": iv[1] if iv else None, "refused": str(self.refused) if self.refused else None,
                "named": [r.name for r in self.named()], "rows": [r.__dict__ for r in self.rows()],
                "no_stacks": self.no_stacks}


def _medians(a: tuple[tuple[float, ...], ...], b: tuple[tuple[float, ...], ...], confidence: float) -> Any:
    """Per column: A's and B's medians, the Δs' median with its distribution-free interval and whether that
    reached ``confidence``; then the total's median Δ and interval (the columns summed per pair)."""
    from ..core.stats import median, median_ci

    cols = range(len(a[0]) if a else 0)
    d = [[y - x for x, y in zip(ra, rb)] for ra, rb in zip(a, b)]  # per pair, per column
    ci = [median_ci([row[k] for row in d], confidence) for k in cols]
    tot = median_ci([sum(row) for row in d], confidence)
    return ([median([r[k] for r in a]) for k in cols], [median([r[k] for r in b]) for k in cols],
            [median([row[k] for row in d]) for k in cols], [c[0] for c in ci], [c[1] for c in ci],
            [c[2] >= confidence for c in ci], float(median([sum(row) for row in d])), tot[0], tot[1])


UNREADABLE = "<name unreadable>"


def event_name(e: Any) -> str:
    """A profiler event's name, or ``UNREADABLE``. With ``with_stack``, torch's Python tracer keeps a pointer
    to each code object's name, and a code object freed while profiling (a function redefined, a compiled
    cell run and dropped) leaves bytes that are not UTF-8 behind it: ``name()`` raised UnicodeDecodeError in
    benchmarks/bench_where.py once in a fresh-clone CI run (pytorch/pytorch#64345, #113564). No pattern
    matches that name: a Python event so named files its ops under the row around it, as a built-in's does,
    and an op's time is kept under that name."""
    try:
        return e.name()
    except UnicodeDecodeError:
        return UNREADABLE


def _annotation(e: Any) -> bool:
    """Whether profiler event ``e`` is a ``record_function`` range (on the host, or its projection on the
    device's timeline) rather than an op or a kernel."""
    f = getattr(e, "is_user_annotation", None)
    return bool(f is not None and f()) or event_name(e).startswith("perfmagic.ops:")


@functools.cache
def python_stacks_recorded() -> bool:
    """Whether ``torch.profiler`` with ``with_stack=True`` records Python frames in this process (one tiny
    profiled call, once per process). On an H200 machine (torch 2.11.0+cu130, Python 3.12.3, 2026-11-28) it
    recorded the ops and no Python frame at all; torch 2.13 on Python 3.11 and 3.12 here records them."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    x = torch.zeros(4)

    def one() -> Any:
        return torch.add(x, 1)

    try:
        with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], with_stack=True) as prof:
            one()
        events = prof.profiler.kineto_results.events()
        return any(bool(getattr(e, "is_python_function", lambda: False)()) for e in events)
    except Exception:  # noqa: BLE001 - a profiler that cannot start here: no frames either
        return False


def ran_torch(pairs: list[Any], clock: str) -> bool:
    """Whether profiled pairs ran torch's work: an ``aten::`` op on the CPU, any kernel on CUDA (the device's
    events are named by kernel, ``ampere_sgemm_…``, not by op)."""
    return any((clock == "cuda" or k.startswith("aten::")) for pr in pairs for d in pr[:2] for k in d)


def _self_times(prof: Any, clock: str, labels: tuple[str, ...] = (),
                funcs: dict[str, dict[Func, float]] | None = None) -> dict[str, dict[str, float]]:
    """Each profiled call's op self seconds (events of 0 s left out), by the call's label: on the CPU, an
    op's time less the ops it called (nested on its thread), filed under the call (its
    ``record_function`` annotation, ``labels``) in whose time the op started; on CUDA, each kernel's own
    time on the device, the session's one call (``labels[0]``). Read from the profiler's raw events
    (about 2 ms for 600 events; ``key_averages()`` took ~70 ms).

    ``funcs`` (CPU, a session profiled ``with_stack``): filled with each call's op self seconds by the
    row of the user's function that called the op (:func:`event_function`), so that a function's change
    in its ops is read on the same pairs."""
    import bisect

    try:
        events = prof.profiler.kineto_results.events()
    except AttributeError:  # pragma: no cover - another torch: its averaged table (one call per session)
        return {labels[0] if labels else "": _averaged(prof, clock)}
    out: dict[str, dict[str, float]] = {k: {} for k in labels}
    if clock == "cuda":
        one = out.setdefault(labels[0] if labels else "", {})
        for e in events:
            # the call's own record_function range is projected onto the device timeline too (a GPU
            # user annotation spanning the kernels): a label, not a kernel
            if str(e.device_type()).endswith("CUDA") and e.duration_ns() > 0 and not _annotation(e):
                name = event_name(e)
                one[name] = one.get(name, 0.0) + e.duration_ns() * 1e-9
        return out
    import torch

    cpu = torch.autograd.DeviceType.CPU
    rows = []  # (thread, start, -duration, duration, name, user function or None for an op): each event's
    windows = []  # (start, end, label) of each call                    accessors called once (they cost)
    wanted = set(labels)
    for e in events:
        if e.device_type() != cpu or e.is_async():
            continue
        if e.is_user_annotation():
            name = event_name(e)
            if name in wanted:
                windows.append((e.start_ns(), e.start_ns() + e.duration_ns(), name))
            continue
        d = e.duration_ns()
        py = getattr(e, "is_python_function", None)
        rows.append((e.start_thread_id(), e.start_ns(), -d, d, event_name(e), py is not None and py()))
    rows.sort(key=lambda r: r[:3])  # by thread, then start; a parent (longer) before a child that starts with it
    windows.sort()
    starts = [w[0] for w in windows]
    if funcs is not None:
        funcs.update({k: {} for k in labels})

    def close(top: list[Any]) -> None:  # an op's self time: its duration less its children's
        ns = top[2] - top[3]
        k = bisect.bisect_right(starts, top[4]) - 1
        if top[6] or ns <= 0 or k < 0 or top[4] >= windows[k][1]:
            return  # a Python function's event: its ops are filed under it, its own time is not an op's
        one = out[windows[k][2]]
        one[top[1]] = one.get(top[1], 0.0) + ns * 1e-9
        if funcs is not None and top[5] is not None:
            fn = funcs[windows[k][2]]
            fn[top[5]] = fn.get(top[5], 0.0) + ns * 1e-9
    # [end_ns, name, duration_ns, children's ns, start_ns, the row it runs in (Func), a Python event]
    stack: list[list[Any]] = []
    thread = None
    for tid, start, _, dur, name, py in rows:
        if tid != thread:
            while stack:
                close(stack.pop())
            thread = tid
        while stack and start >= stack[-1][0]:
            close(stack.pop())
        outer = stack[-1][5] if stack else None
        if stack:
            stack[-1][3] += dur
        stack.append([start + dur, name, dur, 0, start, event_function(name, outer) if py else outer, py])
    while stack:
        close(stack.pop())
    return out


_PY_EVENT = re.compile(r"^(?P<file>.*)\((?P<line>\d+)\): (?P<name>.+)$")
_LIB_OF: dict[str, str] = {}


def _library(file: str) -> str:
    """:func:`perfmagic.profile.rows.library_of` for a file as the profiler names it: relative to the
    ``sys.path`` entry it was imported from (``torch/nn/functional.py``, ``json/__init__.py``)."""
    lib = _LIB_OF.get(file)
    if lib is None:
        import os
        import sys

        from .rows import library_of

        full = file
        if not file.startswith("<") and not os.path.isabs(file):
            full = next((os.path.join(d, file) for d in sys.path if d and os.path.isfile(os.path.join(d, file))),
                        file)
        lib = _LIB_OF[file] = library_of(full) if os.path.isabs(full) or full.startswith("<") else ""
    return lib


def event_function(event: str, outer: Func | None) -> Func | None:
    """The row a profiler Python event's ops are filed under, as :func:`perfmagic.profile.where.fold` files
    a sample: the innermost function of the user's code (``<cell B>(12): head`` → ``head``; the compiled
    cell's own frame → ``<cell>``), with the first library called below it (``forward`` · ``torch``);
    ``outer``, the row around the event. A built-in's event changes nothing."""
    from ..core.cells import CELL_FUNCTION
    from .rows import CELL

    m = _PY_EVENT.match(event)
    if m is None:  # <built-in method softmax ...>, nn.Module: Linear_0
        return outer
    name, file = m.group("name"), m.group("file")
    if name == CELL_FUNCTION:
        return (CELL, CELL, "")
    if name.startswith(CELL_FUNCTION + ".<locals>."):
        return (CELL + "." + name[len(CELL_FUNCTION + ".<locals>."):], CELL, "")
    lib = _library(file)
    if not lib:
        return (name, file, "")
    if outer is None or lib == "perfmagic":
        return None if lib == "perfmagic" else outer
    return outer if outer[2] else (outer[0], outer[1], lib)


def joins(row: tuple[str, str, str], func: Func) -> bool:
    """Whether a sampler's row (qualified name, full file, library) is the profiler's function ``func``
    (name, file as the profiler names it, library)."""
    import os

    name, file, lib = row
    fname, ffile, flib = func
    if lib != flib or name.rsplit(".", 1)[-1] != fname.rsplit(".", 1)[-1]:
        return False
    return file == ffile or file.endswith(os.sep + ffile) or (file.startswith("<") and ffile.startswith("<"))


def _averaged(prof: Any, clock: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for e in prof.key_averages():
        us = getattr(e, "self_device_time_total", 0.0) if clock == "cuda" else e.self_cpu_time_total
        if us and us > 0:
            out[e.key] = out.get(e.key, 0.0) + us * 1e-6
    return out


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """The process's stderr (file descriptor 2) sent to /dev/null for the duration: some torch builds'
    profiler (kineto) write a line to it at every start and stop, which a kernel forwards to the notebook.
    Only the profiler's start and stop run inside it, never the user's code."""
    import os
    import sys

    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no real fd 2 here: nothing to quiet
        yield
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def mentions_torch(code: Any, ns: Any, depth: int = 2) -> bool:
    """Whether code (source text, or a function) reaches a torch object by name: a tensor, a module, an
    optimizer or ``torch`` itself among the global names it uses, or among those of the functions it
    calls, ``depth`` calls down. Cheap (no call); :func:`profile_ops` then checks that torch ops really run."""
    import sys
    import types

    torch = sys.modules.get("torch")
    if torch is None:
        return False
    kinds = (torch.Tensor, torch.nn.Module, torch.optim.Optimizer)
    if isinstance(code, str):
        try:
            code = compile(code, "<perfmagic-names>", "exec")
        except SyntaxError:
            return True  # cannot tell from the names: let the profiler look
    elif not isinstance(code, types.CodeType):
        fn = getattr(code, "__func__", code)
        if not hasattr(fn, "__code__"):
            return True
        ns, code = getattr(fn, "__globals__", ns), fn.__code__

    from ..timing.rerun import code_names

    for name in code_names(code):
        v = ns.get(name) if hasattr(ns, "get") else None
        if v is None:
            continue
        if v is torch or isinstance(v, kinds):
            return True
        fn = getattr(v, "__func__", v)
        if depth > 0 and isinstance(fn, types.FunctionType) and mentions_torch(fn, fn.__globals__, depth - 1):
            return True
    return False


def _needed(n: int, confidence: float = CONFIDENCE) -> int:
    """How many of n pairs must move one way for the interval of their median to exclude 0."""
    from ..core.stats import sign_count_needed

    return sign_count_needed(n, confidence)


def _borderline(got: list[tuple[dict[str, float], dict[str, float]]], floor: float = FLOOR) -> bool:
    """Whether some op's pairs are one short of naming it (13 of 16; 7 of 8) with a median change past
    the floor of A's op time per call: not named with these pairs, and possibly with more."""
    from ..core.stats import median

    ops = {k for pa, pb, *_ in got for k in (*pa, *pb)}
    a_total = median([sum(pa.values()) for pa, *_ in got])
    need = _needed(len(got))
    for k in ops:
        d = [pb.get(k, 0.0) - pa.get(k, 0.0) for pa, pb, *_ in got]
        up, down = sum(x > 0 for x in d), sum(x < 0 for x in d)
        if max(up, down) == need - 1 and abs(median(d)) >= floor * a_total:
            return True
    return False


def _time_up(guard: tuple[float, float, float, int, int], n: int) -> bool:
    """Whether the profiling stops after ``n`` pairs of this batch. Before the fewest that attribute
    (``MIN_OP_PAIRS``): when the pairs so far show that those will not fit (2.5× over ``max_s``: stop now
    rather than late) or they passed 2× ``max_s``. After them: when the pairs wanted would take more
    than ``more_s`` (the share of the comparison the profiling may add)."""
    t0, max_s, more_s, want, before = guard
    spent, done = time.perf_counter() - t0, before + n
    if done >= want:
        return False
    if done < MIN_OP_PAIRS:
        return spent > 2 * max_s or spent / done * MIN_OP_PAIRS > 2.5 * max_s
    return spent / done * want > more_s


def _profiled_pairs(run_a: Callable[[], Any], run_b: Callable[[], Any], acts: list[Any], clock: str,
                    pairs: list[int], guard: tuple[float, float, float, int, int] | None) -> tuple[list[Any], bool]:
    """The pairs ``pairs`` (A first in even ones, B first in odd ones) profiled: on the CPU all in one
    profiler session, each call inside its own ``record_function`` (a session's start and stop cost
    several ms: for the 1.2 ms torch loop of ``bench_where.py``, a session per call took 7.4 ms a call,
    one session for 18 calls 4.3 ms), on CUDA one session per call (a kernel's device time is read per
    session). ``guard`` (start, max_s, more_s, pairs wanted, pairs profiled before these): :func:`_time_up`.
    Returns the complete pairs' (A's ops, B's ops, A's op time by function, B's), and whether Ctrl-C
    stopped them."""
    from torch.profiler import profile, record_function

    labels: list[tuple[str, str]] = []
    results: dict[str, dict[str, float]] = {}
    funcs: dict[str, dict[Func, float]] = {}
    stopped = False
    prof: Any = None

    def start() -> None:
        nonlocal prof
        # on the CPU with the Python tracer: each op's calling function (the function table's ops column)
        prof = profile(activities=acts, with_stack=clock == "cpu")
        with _quiet_stderr():  # kineto logs each start and stop on the process's stderr
            prof.__enter__()

    def stop(names: tuple[str, ...]) -> None:
        nonlocal prof
        if prof is None:
            return
        with _quiet_stderr():
            prof.__exit__(None, None, None)
        results.update(_self_times(prof, clock, names, funcs=funcs if clock == "cpu" else None))
        prof = None

    try:
        if clock == "cpu":
            start()
        for n, i in enumerate(pairs):
            for side in ((0, 1) if i % 2 == 0 else (1, 0)):
                name = f"perfmagic.ops:{i}:{'AB'[side]}"
                if clock != "cpu":
                    start()
                with record_function(name):
                    (run_a if side == 0 else run_b)()
                if clock != "cpu":
                    stop((name,))
            labels.append((f"perfmagic.ops:{i}:A", f"perfmagic.ops:{i}:B"))
            if guard is not None and _time_up(guard, n + 1):
                break
    except KeyboardInterrupt:
        stopped = True  # the profiled pairs end; the timed ones were done before
    finally:
        stop(tuple(x for pr in labels for x in pr))
    return [(results.get(la, {}), results.get(lb, {}), funcs.get(la, {}), funcs.get(lb, {}))
            for la, lb in labels], stopped


def profile_ops(run_a: Callable[[], Any], run_b: Callable[[], Any], *, device: str = "cpu",
                pairs: int = OPS_PAIRS, max_s: float = OPS_MIN_S, more_s: float | None = None) -> OpsResult | None:
    """``pairs`` pairs of one call of each side under ``torch.profiler`` (A first in even pairs, B first in
    odd ones; one pair before them is a warm-up, dropped), 24 when an op is one pair short of named after
    16 (:data:`OPS_MORE_PAIRS`): the first ``MIN_OP_PAIRS`` within about ``max_s`` of wall time, the
    pairs past them only where they fit in ``more_s`` (default ``max_s``; :func:`_time_up`), or until
    Ctrl-C; with fewer than ``MIN_OP_PAIRS`` pairs the result says so instead of attributing. None where the calls run no torch op. ``run_a``/``run_b`` run one call, synchronized."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None:
        return None
    from torch.profiler import ProfilerActivity, profile

    clock = "cuda" if str(device).startswith("cuda") else "cpu"
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if clock == "cuda" else [])
    with _quiet_stderr(), profile(activities=acts):  # the profiler's start-up (~2 s once per process) is
        pass                                          # not a pair's: the time guard reads the pairs alone
    # pair -1 is a warm-up, dropped: the first profiled calls of a process run many times slower (48 ms
    # for a 7 ms bmm here), which would set the medians and the time guard's projection
    warm, stopped = _profiled_pairs(run_a, run_b, acts, clock, [-1], None)
    if stopped or not ran_torch(warm, clock):
        return None  # no torch op ran (nothing to attribute per op), or Ctrl-C in the warm-up
    t0 = time.perf_counter()
    more_s = max_s if more_s is None else more_s
    first = min(pairs, MIN_OP_PAIRS)
    got, stopped = _profiled_pairs(run_a, run_b, acts, clock, list(range(first)), (t0, max_s, more_s, first, 0))
    # then the pairs past the first batch, a batch at a time, where the whole cost so far (a session's stop
    # and the reading of its events included, which a pair's own time does not show) says they fit in
    # ``more_s``; the last batch only when an op is one pair short of named (:func:`_borderline`)
    for want in (pairs, OPS_MORE_PAIRS if pairs == OPS_PAIRS else 0):
        spent = time.perf_counter() - t0
        if stopped or not got or len(got) >= want or spent / len(got) * want > more_s \
                or (want == OPS_MORE_PAIRS and not _borderline(got)):
            break
        more, stopped = _profiled_pairs(run_a, run_b, acts, clock, list(range(len(got), want)),
                                        (t0, max_s, more_s, want, len(got)))
        if want == OPS_MORE_PAIRS and len(got) + len(more) < want:
            more = []  # the extra pairs stopped short of 24 (time, Ctrl-C): they count only whole
        got += more
    spent = time.perf_counter() - t0
    if not got:
        return None
    ops = tuple(sorted({k for pa, pb, *_ in got for k in (*pa, *pb)}))
    a = tuple(tuple(pa.get(k, 0.0) for k in ops) for pa, *_ in got)
    b = tuple(tuple(pb.get(k, 0.0) for k in ops) for _, pb, *_ in got)
    fa, fb = _merge_redefined([g[2] for g in got], [g[3] for g in got])
    funcs = tuple(sorted({k for d in (*fa, *fb) for k in d}))
    refused = (Finding.of("where.ops-few-pairs", pairs=len(got), need=MIN_OP_PAIRS) if len(got) < MIN_OP_PAIRS
               else None)
    return OpsResult(clock=clock, ops=ops, a=a, b=b, profiled_s=spent, refused=refused, funcs=funcs,
                     no_stacks=clock == "cpu" and not funcs and not python_stacks_recorded(),
                     fa=tuple(tuple(d.get(k, 0.0) for k in funcs) for d in fa),
                     fb=tuple(tuple(d.get(k, 0.0) for k in funcs) for d in fb))


def _merge_redefined(fa: list[dict[Func, float]], fb: list[dict[Func, float]]) -> tuple[list[dict[Func, float]],
                                                                                      list[dict[Func, float]]]:
    """A function redefined between A and B is one function, B's, as the sampler's table makes one row of it
    (:func:`.rows.redefined`)."""
    from .rows import redefined

    rename = redefined({k for d in fa for k in d}, {k for d in fb for k in d})
    return [{rename.get(k, k): v for k, v in d.items()} for d in fa], fb


__all__ = ["OPS_MORE_PAIRS", "OPS_PAIRS", "OpDelta", "OpsResult", "mentions_torch", "profile_ops"]
