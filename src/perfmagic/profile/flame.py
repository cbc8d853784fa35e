"""Sampling flame graphs of a cell: py-spy against the kernel's own process, or an in-process sampler.

``flame(code_or_fn)`` runs the code once while a sampler records call stacks, and returns a frozen
:class:`FlameResult` that keeps every sample (stack + weight in seconds).

Samplers, in the order ``sampler="auto"`` tries them:

* **py-spy** (``py-spy record --pid <this process> --format speedscope``) started before the code runs
  and stopped with SIGINT after it, in its own session so a Ctrl-C aimed at the kernel does not reach
  it. The code starts only once py-spy says it is sampling (its start-up time is ``startup_s``), so the
  first sample lands within one interval of the cell's start. It reads the interpreter's memory from
  outside (``--nonblocking``: the process is never paused, the overhead on the cell is ~0; ``--native``
  needs the blocking mode, which pauses the whole process for each sample, so its default rate is
  25 Hz, not 100). Where Yama's
  ``ptrace_scope=1`` forbids a child to read its parent, the kernel names py-spy as its tracer with
  ``prctl(PR_SET_PTRACER, pid)`` for the duration and clears it afterwards. Without ``--idle`` py-spy
  drops samples of threads that wait (sleep, I/O, locks): the graph shows where the CPU went.
  Only the thread running the cell goes into the graph: with ``--native`` py-spy reports the kernel's
  own threads (IOPub, heartbeat, shell, control) as busy in ``epoll_wait``/``poll``/``read``, which
  took 27% of the self time of a torch cell. Other threads are counted (busy or waiting, see
  :func:`idle_stack`) and, with ``all_threads=True``, the busy ones are drawn as ``thread NAME``.
* **in-process**: a daemon thread that wakes ``rate`` times a second and reads the cell thread's frame
  via ``sys._current_frames()``. It needs no permission (containers without ``SYS_PTRACE``, macOS)
  but it is a *wall-clock* sampler of Python frames only: waits are included, native frames are not,
  and a long call that holds the GIL delays the next sample (each sample is weighted by the time
  since the previous one, so the time attributed stays right).

Every stack is cut at the engine's own entry frame (:func:`_flame_cell_root`), so the root of the
graph is the cell (or the function) and the IPython/ipykernel frames above it are gone; samples
taken outside the cell are counted in ``outside_samples`` and not shown. Cell file names (the
kernel's ``/tmp/ipykernel_<pid>/<hash>.py`` or IPython's ``<ipython-input-N-…>``) are shown as
``In [N]`` through ``file_labels``.

Nothing is left behind: py-spy writes into a temporary folder removed afterwards, the py-spy process
is stopped (killed if it does not stop), the sampler thread is joined and the ptracer is cleared —
also after an exception in the code or a Ctrl-C. An exception in the code keeps the profile up to the
error (``status="failed"``); Ctrl-C raises :class:`~perfmagic.errors.BenchInterrupted` carrying it.

Where each part lives: :mod:`~perfmagic.profile.samplers` (py-spy, the in-process sampler),
:mod:`~perfmagic.profile.flameresult` (:class:`FlameResult`: the samples and what is derived from
them), :mod:`perfmagic.render.flame` (text, the flame graph, the PNG); this module runs the code,
cuts every stack to the cell (:func:`cut_to_cell`, :func:`parse_speedscope`) and builds the result.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import BadOptionError, BenchInterrupted, PerfmagicError
from ..findings import Finding
from .flameresult import FlameResult, Frame, FuncStat
from .samplers import InProcessSampler, PySpy, SamplerUnavailable, find_py_spy, frame_stack

SAMPLERS = ("auto", "py-spy", "inprocess")
MAX_RATE = 2000
# ≥ 100 samples for a cell of 0.1 s, as pyinstrument's 1 ms interval gives (a function's share is then
# known to a few percent, and 15 of 15 samples already bound it above 80%). py-spy asked for 1000 Hz gave
# 94-159 samples in 0.1 s (it samples on a timer and catches up in bursts), so 1500
DEFAULT_RATE = 1500
# a long cell at that rate would keep 1500 samples a second (90,000 in a minute: the function table of
# 72,000 took 8 s to derive); past this many, one sample per block of k is kept, weighted by the block
MAX_SAMPLES = 10_000
# --native pauses the whole process at every sample (all its threads, ~5-10 ms each with a kernel's 15
# threads and torch's OpenMP pool, measured): at 100 Hz a 0.65 s torch cell ran 1.7-1.8x slower, at 20 Hz
# 1.15-1.25x; a 0.11 s one 7.9x and 4.1x, as each run's fresh py-spy also loads libtorch's symbols with
# the process paused (docs/benchmarks.md, %%flame --native)
NATIVE_RATE = 25
MAX_DEPTH = 256            # deeper stacks keep their first and last 128 frames
_THIS_FILE = __file__
_INFRA = ("/ipykernel/", "/IPython/", "/zmq/", "/tornado/", "/asyncio/", "/jupyter_client/", "/traitlets/",
          "/threading.py", "/selectors.py", "/queue.py", "/socket.py", "/comm/", "/debugpy/", "/perfmagic/",
          "/concurrent/futures/thread.py")
_THREAD_NAME = re.compile(r'^(?:Process (\d+) )?Thread (\d+)(?: "(.*)")?', re.S)


def _native(fr: Frame) -> bool:
    name, file, _ = fr
    return name.startswith("0x") or file.endswith((".c", ".h", ".cc", ".cpp", ".so", ".rs")) or ".so." in file


def _infra(fr: Frame) -> bool:
    return any(s in fr[1] for s in _INFRA)


class PacedSampler(InProcessSampler):
    """The in-process sampler at high rates: each wait runs to the next tick rather than a fixed
    interval (``Event.wait`` overshoots, which lost 10-15% of the samples at 1 kHz), never shorter than
    half an interval (no burst of samples of one frame after a late one); while it runs the cell's
    thread is asked to hand over the GIL every half interval (``sys.setswitchinterval``, restored by
    :meth:`stop`): at the default 5 ms a pure-Python cell let it take 8 samples in 50 ms at 1 kHz.
    ``jitter``: each step is the interval times a uniform factor in [1 − jitter, 1 + jitter] (0: a fixed
    grid), so the samples' phase is not locked to a loop of the same period."""

    jitter = 0.0

    def start(self) -> None:
        self._switch = sys.getswitchinterval()
        sys.setswitchinterval(max(min(self._switch, self.interval / 4), 5e-5))
        super().start()

    def _run(self) -> None:
        last = self._t_last
        due = last + self.interval
        rnd = random.Random(self.tid ^ int(last * 1e9)).random if self.jitter else None
        while not self._stop.wait(max(due - time.perf_counter(), 0.0)):
            last = self._take(last)
            step = self.interval * (1 + self.jitter * (2 * rnd() - 1)) if rnd else self.interval
            due = max(due + step, last + self.interval / 2)

    def _take(self, last: float) -> float:
        """One sample of the thread's stack, weighted by the time since the one before; returns its time.
        (:class:`perfmagic.profile.where.PairSampler` files its samples by block instead.)"""
        f = sys._current_frames().get(self.tid)
        now = time.perf_counter()
        self.samples.append((frame_stack(f), now - last))
        return now

    def stop(self) -> list[tuple[tuple[Frame, ...], float]]:
        out = super().stop()
        switch = getattr(self, "_switch", None)
        if switch is not None:
            sys.setswitchinterval(switch)
            self._switch = None
        return out


def thin(raw: list[tuple[Any, float]], cap: int = MAX_SAMPLES, seed: int = 0) -> tuple[list[tuple[Any, float]], int]:
    """At most ``cap`` samples: one sample drawn at random from each block of ``k`` consecutive ones,
    weighted by the block's time (the shares stay unbiased; random, not every k-th, so a loop whose
    period is k samples is not aliased). Returns (samples, k); k = 1: unchanged."""
    if len(raw) <= cap:
        return raw, 1
    import random

    k = -(-len(raw) // cap)
    rng = random.Random(seed)
    out = []
    for i in range(0, len(raw), k):
        block = raw[i:i + k]
        out.append((block[rng.randrange(len(block))][0], sum(w for _, w in block)))
    return out, k


# ---------------------------------------------------------------------------------------------
# stacks: cut to the cell
# ---------------------------------------------------------------------------------------------
def _flame_cell_root(code: Any, ns: dict[str, Any] | None, fn: Callable[[], Any] | None) -> Any:
    """Every sample is cut at this frame: what it calls is the root of the flame graph."""
    __tracebackhide__ = True
    if fn is not None:
        return fn()
    exec(code, ns)
    return None


def _is_marker(fr: Frame) -> bool:
    return fr[0] == "_flame_cell_root" and fr[1] == _THIS_FILE


def cut_to_cell(stack: tuple[Frame, ...] | list[Frame]) -> list[Frame] | None:
    """The frames below the engine's entry frame (leading native frames dropped), or None if absent."""
    idx = None
    for i in range(len(stack) - 1, -1, -1):
        if _is_marker(stack[i]):
            idx = i
            break
    if idx is None:
        return None
    rest = list(stack[idx + 1:])
    while rest and _native(rest[0]):
        rest.pop(0)
    return rest


# native leaf functions of a thread that waits (a kernel's IOPub/heartbeat/shell threads sit in these)
_IDLE_CALLS = ("epoll_wait", "epoll_pwait2?", "poll", "ppoll", "select", "pselect6?", "read", "recv", "recvfrom",
               "recvmsg", "accept4?", "nanosleep", "clock_nanosleep", "futex_wait", "futex", "do_futex_wait",
               "futex_abstimed_wait_common(64)?", "pthread_cond_wait", "pthread_cond_timedwait", "sem_wait",
               "sem_timedwait", "wait4", "waitpid", "pause", "sleep", "usleep", "zmq_poll", "take_gil",
               "PyThread_acquire_lock_timed")
_IDLE_NATIVE = re.compile(r"^_*(?:GI_+|libc_)?(" + "|".join(_IDLE_CALLS) + r")(@@.*|(\.\w+)*)$")


BUSY_CORES = 0.05  # ... and only when it kept at least this much of a core busy (its CPU time, /proc)
BUSY_SHARE = 0.2  # --all-threads draws another thread only when busy in at least this share of its samples
# (not more: a busy Python thread beside the cell waits for the GIL, in take_gil, much of the time)


def idle_stack(stack: tuple[Frame, ...] | list[Frame]) -> bool:
    """Whether a stack of a thread other than the cell's is a thread waiting, not working.

    True when its innermost frame is a native blocking call (``epoll_wait``, ``poll``, ``read``, a
    futex wait, ...: py-spy ``--native`` reports such threads as active), or when every Python frame in
    it is kernel/IPython machinery (the IOPub, heartbeat, shell and control threads of ipykernel,
    IPython's history thread).
    """
    if not stack:
        return True
    k = len(stack)
    while k > 0 and _native(stack[k - 1]):
        k -= 1
    if any(_IDLE_NATIVE.match(fr[0]) for fr in stack[k:]):  # the native frames under the last Python one
        return True
    py = [fr for fr in stack if not _native(fr)]
    return bool(py) and all(_infra(fr) for fr in py)


def parse_speedscope(doc: dict[str, Any], pid: int, tid: int, *, all_threads: bool = False, idle: bool = False,
                     others: dict[str, list[int]] | None = None,
                     thread_cores: dict[int, float] | None = None) -> tuple[list[tuple[list[Frame], float]], int]:
    """py-spy's speedscope file -> (cell-rooted stacks with weights, samples outside the cell).

    The cell's thread (native id ``tid`` of process ``pid``) is cut at the entry frame. Other threads
    of this process are left out unless ``all_threads``: then the busy ones go under ``thread NAME``
    and the waiting ones (:func:`idle_stack`: the kernel's own threads in ``epoll_wait``) are dropped
    unless ``idle``. ``others`` (when given) receives ``{thread name: [busy samples, waiting samples]}``
    for every other thread seen, shown or not. Child processes (``--subprocesses``) go under
    ``process PID: cmd``. ``thread_cores`` (native thread id -> cores it kept busy over the profile, from
    ``/proc``): a thread under :data:`BUSY_CORES` is not drawn, whatever its samples say (beside a busy
    neighbour an event-loop thread is caught runnable, between two waits, in a fifth of a dozen samples).
    """
    frames = [(str(f.get("name") or "?"), str(f.get("file") or ""), int(f.get("line") or 0))
              for f in doc.get("shared", {}).get("frames", [])]
    out: list[tuple[list[Frame], float]] = []
    outside = 0
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # other threads: [busy, waiting] samples
    idle_cpu: set[str] = set()  # other threads that used under BUSY_CORES of a core over the profile
    owner: list[str | None] = []  # per stack in out: the other thread it came from (None: the cell, a child)
    for prof in doc.get("profiles", []):
        m = _THREAD_NAME.match(prof.get("name", ""))
        ppid = int(m.group(1)) if m and m.group(1) else pid
        ptid = int(m.group(2)) if m else -1
        tname = (m.group(3) if m else None) or str(ptid)
        weights = prof.get("weights") or [1.0] * len(prof.get("samples", []))
        for st, w in zip(prof.get("samples", []), weights):
            stack = [frames[i] for i in st]
            procs = [fr for fr in stack if not fr[1] and fr[0].startswith("process ")]
            stack = [fr for fr in stack if fr not in procs]
            if ppid == pid and ptid == tid:
                cut = cut_to_cell(stack)
                if cut is None:
                    outside += 1
                    continue
                out.append((cut, float(w)))
                owner.append(None)
            elif ppid == pid:
                if thread_cores is not None and thread_cores.get(ptid, 1.0) < BUSY_CORES:
                    idle_cpu.add(tname)
                waiting = idle_stack(stack)
                counts[tname][1 if waiting else 0] += 1
                if not all_threads or (waiting and not idle) or not stack or all(_infra(fr) for fr in stack):
                    continue
                k = next((j for j, fr in enumerate(stack) if not (_native(fr) or "/threading.py" in fr[1])), 0)
                stack = stack[k:]  # drop thread start-up frames, unless the thread is native only
                out.append(([(f"thread {tname}", "", 0), *stack], float(w)))
                owner.append(tname)
            else:
                head = procs[-1][0] if procs else f"process {ppid}"
                head = re.sub(r"\s+", " ", head)
                head = head if len(head) <= 60 else head[:59] + "…"
                out.append(([(head, "", 0), *stack], float(w)))
                owner.append(None)
    # a waiting thread is now and then caught between two waits (in its loop's bytecode): drawn only the
    # threads busy in at least BUSY_SHARE of their samples (a fresh-clone CI run drew an event-loop
    # thread, in select() 0.05 s at a time, as busy)
    for tname, (busy, waiting) in counts.items():
        if others is not None:
            got = others.setdefault(tname, [0, 0])
            got[0] += busy
            got[1] += waiting
    shown = {t for t, (busy, waiting) in counts.items()
             if idle or (busy >= BUSY_SHARE * (busy + waiting) and t not in idle_cpu)}
    return [st for st, t in zip(out, owner) if t is None or t in shown], outside


# ---------------------------------------------------------------------------------------------
# the public function
# ---------------------------------------------------------------------------------------------
def _compile(code: str, filename: str) -> Any:
    from ..core.cells import compile_module

    return compile_module(code, filename)


def _check(rate: Any, sampler: str, native: bool, subprocesses: bool, on_error: str,
           all_threads: bool = False) -> None:
    if sampler not in SAMPLERS:
        raise BadOptionError("sampler", sampler, " | ".join(SAMPLERS), "auto tries py-spy and falls back to inprocess")
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 1 <= rate <= MAX_RATE:
        raise BadOptionError("rate", rate, f"samples per second between 1 and {MAX_RATE}",
                             f"e.g. rate={DEFAULT_RATE} (the default); higher rates see shorter calls but cost more")
    if sampler == "inprocess" and (native or subprocesses or all_threads):
        opt = "native" if native else "subprocesses" if subprocesses else "all_threads"
        raise BadOptionError(opt, True, "py-spy (the in-process sampler sees only this process's Python frames)",
                             "use sampler='auto' or 'py-spy', or drop this option")
    if on_error not in ("raise", "return"):
        raise BadOptionError("on_error", on_error, "'raise' or 'return'")


def _code_of(code: Any, filename: str | None) -> tuple[Callable[[], Any] | None, Any, str]:
    """(the callable or None, the compiled code or None, the code's text for the result)."""
    if callable(code):
        return code, None, getattr(code, "__qualname__", repr(code))
    if isinstance(code, str):
        return None, _compile(code, filename or "<perfmagic.flame cell>"), code
    raise BadOptionError("code", type(code).__name__, "a string of code or a callable taking no arguments")


class _Samplers:
    """The sampler of one run, held here from the moment it exists, so that the caller's ``finally``
    stops it (:meth:`close`) whatever happens after."""

    def __init__(self) -> None:
        self.spy: PySpy | None = None
        self.inproc: InProcessSampler | None = None

    def close(self) -> None:
        if self.spy is not None:
            self.spy.close()
        if self.inproc is not None:
            self.inproc.stop()


@dataclass(frozen=True)
class _Ran:
    """How the one run of the code went: its status, the exception it raised, the wall time, and (py-spy
    with ``all_threads``) the cores each thread of this process kept busy meanwhile."""
    status: str
    exception: BaseException | None
    error: str | None
    wall: float
    cores: dict[int, float] | None


def _start_py_spy(run: _Samplers, sampler: str, rate: float, py_spy: str | None, tmp: str, *, native: bool,
                  idle: bool, subprocesses: bool) -> str | None:
    """Start py-spy into ``run.spy``: None, or why it could not start (``sampler="py-spy"``: raises
    :class:`PerfmagicError` instead)."""
    exe = py_spy or find_py_spy()
    try:
        if exe is None:
            raise SamplerUnavailable("py-spy is not installed (pip install py-spy)")
        run.spy = PySpy(exe, tmp, int(round(rate)), native=native, idle=idle, subprocesses=subprocesses)
        run.spy.start()
        return None
    except SamplerUnavailable as exc:
        if run.spy is not None:
            run.spy.close()
        run.spy = None
        if sampler == "py-spy":
            raise PerfmagicError(f"{exc}. Use sampler 'inprocess' (or 'auto' to fall back by itself)") from None
        return str(exc)


def _start_sampler(run: _Samplers, sampler: str, rate: float, rate_default: bool, py_spy: str | None, tmp: str,
                   *, native: bool, idle: bool, subprocesses: bool, all_threads: bool,
                   notes: list[Finding]) -> tuple[str, float, str | None]:
    """Start py-spy (``auto``, ``py-spy``), else the in-process sampler, into ``run``. Returns the sampler
    used, the rate (the in-process default, when the --native default was chosen for a py-spy that did
    not start) and why py-spy was not used; what the fallback drops goes into ``notes``."""
    fallback = None
    if sampler in ("auto", "py-spy"):
        fallback = _start_py_spy(run, sampler, rate, py_spy, tmp, native=native, idle=idle,
                                 subprocesses=subprocesses)
        if fallback is not None:
            ignored = [o for o, on in (("native", native), ("subprocesses", subprocesses),
                                       ("all_threads", all_threads)) if on]
            if ignored:
                notes.append(Finding.of("flame.ignored", options=tuple(ignored)))
            if native and rate_default:
                rate = DEFAULT_RATE
    if run.spy is not None:
        return "py-spy", rate, fallback
    if idle:
        notes.append(Finding.of("flame.idle-inprocess"))
    run.inproc = PacedSampler(threading.get_ident(), float(rate))
    run.inproc.start()
    return "inprocess", rate, fallback


def _run_cell(code_obj: Any, ns: dict[str, Any] | None, fn: Callable[[], Any] | None, per_thread_cpu: bool) -> _Ran:
    """Run the code once, the sampler running: its exception and a Ctrl-C are kept in the record, not
    raised. ``per_thread_cpu``: also read each thread's CPU time before and after."""
    __tracebackhide__ = True
    status, exc_caught, err = "ok", None, None
    from ..core.load import thread_cpu

    cpu0 = thread_cpu() if per_thread_cpu else None
    t0 = time.perf_counter()
    try:
        _flame_cell_root(code_obj, ns, fn)
    except KeyboardInterrupt:
        status = "interrupted"
    except BaseException as exc:  # the user's exception: profile kept, re-raised by flame()
        status, exc_caught = "failed", exc
        err = f"{type(exc).__name__}: {exc}"[:200]
    wall = time.perf_counter() - t0
    cpu1 = thread_cpu() if cpu0 is not None else None
    cores = ({t: (c - cpu0.get(t, 0.0)) / wall for t, c in cpu1.items()}
             if cpu0 is not None and cpu1 is not None and wall > 0 else None)
    return _Ran(status, exc_caught, err, wall, cores)


def _samples(run: _Samplers, tid: int, ran: _Ran, *, all_threads: bool, idle: bool, others: dict[str, list[int]],
             notes: list[Finding]) -> tuple[list[tuple[list[Frame], float]], int, float | None]:
    """Stop the sampler; (its samples cut to the cell with their weights, the samples outside the cell,
    its start-up time). py-spy's other threads are counted into ``others``."""
    spy = run.spy
    if spy is not None:
        doc = spy.stop()
        if doc is None:
            raw, outside = [], 0
            notes.append(Finding.of("flame.no-profile",
                                    log=(spy._log().strip().splitlines() or ["no message"])[-1][:160]))
        else:
            raw, outside = parse_speedscope(doc, os.getpid(), tid, all_threads=all_threads, idle=idle,
                                            others=others, thread_cores=ran.cores)
        return raw, outside, spy.startup_s
    assert run.inproc is not None
    raw, outside = [], 0
    for st, w in run.inproc.stop():
        cut = cut_to_cell(st)
        if cut is None:
            outside += 1
        else:
            raw.append((cut, w))
    return raw, outside, run.inproc.startup_s


def _weighted(raw: list[tuple[list[Frame], float]], used: str, rate: float, wall: float, native: bool,
              notes: list[Finding]) -> tuple[list[tuple[list[Frame], float]], int, list[float]]:
    """(the samples thinned to :data:`MAX_SAMPLES`, one kept in how many, their weights); a sampler that
    fell behind and the thinning are said in ``notes``."""
    taken = len(raw)
    if not (native and used == "py-spy") and wall >= 0.1 and taken < min(100, 0.67 * rate * wall):
        notes.append(Finding.of("flame.fell-behind", sampler=used, taken=taken, wall_s=wall, rate=rate))
    raw, every = thin(raw)
    if every > 1:
        notes.append(Finding.of("flame.thinned", taken=taken, rate=rate, every=every, most=MAX_SAMPLES))
    weights = [w for _, w in raw]
    if used == "py-spy" and sum(weights) > wall > 0:
        # py-spy weighs every sample 1/rate; when it falls behind it catches up in a burst, so the sum
        # can exceed the run time: scale to the run time (the shares are unchanged)
        k = wall / sum(weights)
        weights = [w * k for w in weights]
    return raw, every, weights


def _stack_table(raw: list[tuple[list[Frame], float]]) -> tuple[tuple[Frame, ...], tuple[tuple[int, ...], ...]]:
    """(every distinct frame, each stack as indices into them); stacks deeper than :data:`MAX_DEPTH` keep
    both ends."""
    index: dict[Frame, int] = {}
    stacks = []
    for st, _ in raw:
        if len(st) > MAX_DEPTH:  # deep recursion: keep both ends, elide the middle
            half = MAX_DEPTH // 2
            st = [*st[:half], (f"… {len(st) - 2 * half} frames …", "", 0), *st[-half:]]
        stacks.append(tuple(index.setdefault(fr, len(index)) for fr in st))
    return tuple(index), tuple(stacks)


def flame(code: str | Callable[[], Any], *, globals: dict[str, Any] | None = None, rate: float | None = None,
          sampler: str = "auto", native: bool = False, idle: bool = False, subprocesses: bool = False,
          all_threads: bool = False,
          label: str | None = None, filename: str | None = None, file_labels: Mapping[str, str] | None = None,
          py_spy: str | None = None, on_error: str = "raise") -> FlameResult:
    """Run ``code`` (code or a no-argument callable) once under a sampling profiler.

    ``sampler``: ``"auto"`` (py-spy, else the in-process sampler, saying why), ``"py-spy"`` (raise
    :class:`PerfmagicError` if it cannot attach) or ``"inprocess"``. ``rate`` in samples per second
    (default :data:`DEFAULT_RATE`, 1500: ≥ 100 samples for a cell of 0.1 s; 25 with ``native``, which
    pauses the process at every sample); an explicit rate is kept. Past :data:`MAX_SAMPLES` samples a
    long run keeps one per block (:func:`thin`), and says so in its notes.
    ``native``/``idle``/``subprocesses`` are py-spy's ``--native``, ``--idle``, ``--subprocesses``.
    Only the thread running the code is sampled into the graph; ``all_threads=True`` (py-spy) adds the
    other busy threads of this process (``thread NAME``). What the others did is counted either way
    (``FlameResult.other_threads``: busy and waiting samples per thread).
    ``filename`` names the code for tracebacks (register it in ``linecache`` for source lines);
    ``file_labels`` maps file names to display names (``{"/tmp/ipykernel_1/ab.py": "In [3]"}``).
    ``on_error="raise"`` re-raises an exception of the code unchanged; ``"return"`` returns the
    partial result with ``status="failed"`` and the exception in ``.exception``. Ctrl-C raises
    :class:`BenchInterrupted` whose ``.result`` is the profile so far.
    """
    __tracebackhide__ = True
    rate_default = rate is None
    if rate is None:
        rate = NATIVE_RATE if native and sampler != "inprocess" else DEFAULT_RATE
    _check(rate, sampler, native, subprocesses, on_error, all_threads)
    fn, code_obj, code_text = _code_of(code, filename)
    ns = globals if globals is not None else ({"__name__": "__main__"} if fn is None else None)
    labels = dict(file_labels or {})
    notes: list[Finding] = []
    tid = threading.get_native_id()
    tmp = tempfile.mkdtemp(prefix="perfmagic-flame-")
    run = _Samplers()
    try:
        used, rate, fallback = _start_sampler(run, sampler, rate, rate_default, py_spy, tmp, native=native, idle=idle,
                                              subprocesses=subprocesses, all_threads=all_threads, notes=notes)
        ran = _run_cell(code_obj, ns, fn, per_thread_cpu=run.spy is not None and all_threads)
        others: dict[str, list[int]] = {}
        raw, outside, startup = _samples(run, tid, ran, all_threads=all_threads, idle=idle, others=others,
                                         notes=notes)
    finally:
        run.close()
        shutil.rmtree(tmp, ignore_errors=True)
    raw, every, weights = _weighted(raw, used, rate, ran.wall, native, notes)
    if code_obj is not None:
        labels.setdefault(code_obj.co_filename, labels.get(code_obj.co_filename, "cell"))
    frames, stacks = _stack_table(raw)
    result = FlameResult(
        frames=frames, stacks=stacks, weights=tuple(weights), sampler=used,
        rate_hz=float(rate) / every, wall_s=ran.wall, label=label or "", code=code_text, status=ran.status,
        error=ran.error, fallback_reason=fallback, startup_s=startup, outside_samples=outside,
        native=native and used == "py-spy", idle=idle, subprocesses=subprocesses and used == "py-spy",
        file_labels=tuple(labels.items()), all_threads=all_threads and used == "py-spy",
        other_threads=tuple((n, b, i) for n, (b, i) in sorted(others.items(), key=lambda kv: -sum(kv[1]))),
        notes=tuple(notes), exception=ran.exception)
    if ran.status == "interrupted":
        raise BenchInterrupted(result)
    if ran.exception is not None and on_error == "raise":
        raise ran.exception
    return result


__all__ = ["DEFAULT_RATE", "MAX_DEPTH", "MAX_RATE", "MAX_SAMPLES", "NATIVE_RATE", "PacedSampler", "SAMPLERS",
           "FlameResult", "Frame", "FuncStat", "InProcessSampler", "PySpy", "SamplerUnavailable", "cut_to_cell",
           "find_py_spy", "flame", "idle_stack", "parse_speedscope", "thin"]
