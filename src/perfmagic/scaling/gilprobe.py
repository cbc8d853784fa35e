"""What this process's threads did while a sweep point ran: the evidence a GIL verdict needs.

:class:`ThreadSampler` runs a sampler thread beside one measurement. Every ``interval`` (4 ms) it

* sleeps, then notes how long it **waited for the GIL**: how late it woke minus the time the OS kept it
  waiting for a core (its run-queue wait, ``/proc/self/task/<tid>/schedstat``), and how long a
  ``time.sleep(0)`` right after takes (it drops the GIL and takes it back; too short a window for the
  OS to matter) — the larger of the two. A thread running Python bytecode hands the GIL over only at
  the switch interval (5 ms), a C function that keeps it (``sorted()`` of a list) only when it returns;
  code inside calls that release it (torch and NumPy kernels, I/O, ``time.sleep``) lets the sampler in
  within microseconds. Measured here (2 cores, 0 or 1 busy neighbour): pure-Python pools left the
  sampler waiting > 0.5 ms at 56–100% of its wake-ups, ``np.sort`` pools and a torch conv at 0–10%;
* reads every other thread's innermost Python frame (``sys._current_frames()``) to say *where* the
  threads were: waiting in the standard library (``threading``, ``queue``, an idle
  ``concurrent.futures`` worker, ``selectors``) is idle; a frame on a ``CALL``/``PRECALL`` sits in a
  native call. The frames alone cannot tell bytecode from native work (``a @ b`` is an operator, not a
  call, and a thread hands the GIL over right after a call returns), so they name sites, not verdicts.

When the measurement ends, each thread's CPU time over it says which threads worked (at least 1% of a
core and 10% of the busiest thread): only those are counted, so the kernel's own idle threads
(heartbeat, IOPub) never enter the evidence. The result, :class:`ThreadEvidence`, keeps the raw per-wake-up waits and per-sample counts.
"""

from __future__ import annotations

import dis
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

INTERVAL_S = 0.004
WORKING_SHARE = 0.01            # a thread that used less of a core than this did not work
_IDLE_FILES = ("threading.py", "queue.py", "selectors.py", os.path.join("concurrent", "futures", "thread.py"),
               os.path.join("concurrent", "futures", "_base.py"))
_CALL_OPS = frozenset(i for i, name in enumerate(dis.opname) if name.startswith(("CALL", "PRECALL")))


def held_threshold() -> float:
    """A wait for the GIL longer than this (a tenth of the switch interval, 0.5 ms) means another thread
    held it: a free GIL is taken in tens of microseconds."""
    return 0.1 * sys.getswitchinterval()


def _schedstat(tid: int) -> tuple[float, float] | None:
    """(CPU seconds, run-queue wait seconds) of one thread of this process, or None where unreadable."""
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as f:
            cpu, wait = f.read().split()[:2]
        return int(cpu) / 1e9, int(wait) / 1e9
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class ThreadEvidence:
    """What the threads did during one or more measurements (raw samples kept; shares derived)."""

    wall_s: float = 0.0
    gil_waits: tuple[float, ...] = ()  # per sampler wake-up: seconds it waited for the GIL (empty: unknown)
    working: int = 0                   # Python threads other than the sampler that worked (see stop())
    concurrent: tuple[int, ...] = ()   # per sample: working threads seen in user code at once
    bytecode: int = 0                  # observations of working threads running bytecode
    native: int = 0                    # observations of working threads on a call into native code
    sites: tuple[tuple[str, int], ...] = ()  # where the native calls sat, most seen first

    @property
    def samples(self) -> int:
        return len(self.concurrent)

    @property
    def held_share(self) -> float | None:
        """Share of the sampler's wake-ups that found the GIL held by another thread (None: not measured)."""
        if not self.gil_waits:
            return None
        lim = held_threshold()
        return sum(1 for w in self.gil_waits if w > lim) / len(self.gil_waits)

    @property
    def median_wait_s(self) -> float | None:
        if not self.gil_waits:
            return None
        w = sorted(self.gil_waits)
        return w[len(w) // 2]

    @property
    def native_share(self) -> float | None:
        seen = self.bytecode + self.native
        return self.native / seen if seen else None

    @property
    def concurrent_share(self) -> float | None:
        """Share of samples with at least two working threads in user code at the same moment."""
        if not self.concurrent:
            return None
        return sum(1 for c in self.concurrent if c >= 2) / len(self.concurrent)

    def gil_bound(self) -> bool:
        """Python code held the GIL: at least two Python threads worked, and the sampler found the GIL held by
        another thread at most of its wake-ups (planted pure-Python pools: 52–93%; NumPy/torch pools: 0–20%,
        one busy neighbour included)."""
        held = self.held_share
        return self.working >= 2 and len(self.gil_waits) >= 5 and held is not None and held >= 0.4

    def gil_free(self) -> bool:
        """The GIL stayed free: the sampler got it at once at most wake-ups (the working threads were in calls
        that release it: native kernels, I/O, sleep)."""
        held = self.held_share
        return len(self.gil_waits) >= 5 and held is not None and held <= 0.25

    def evidence(self) -> dict[str, Any]:
        """The numbers a one-line description reads: working threads, samples, GIL-held share, median
        wait (ms) and the native call they mostly sat in (when at least half the samples were native)."""
        native = self.sites[0][0] if self.sites and (self.native_share or 0.0) >= 0.5 else None
        return {"working": self.working, "samples": self.samples, "held": self.held_share,
                "wait_ms": 1e3 * (self.median_wait_s or 0), "native_site": native}

    def describe(self) -> str:
        """One line of evidence (:func:`perfmagic.render.findings.thread_evidence`)."""
        from ..render.findings import thread_evidence

        return thread_evidence(self.evidence())

    @staticmethod
    def merge(evs: Iterable[ThreadEvidence | None]) -> ThreadEvidence | None:
        evs = [e for e in evs if e is not None]
        if not evs:
            return None
        sites: Counter[str] = Counter()
        for e in evs:
            sites.update(dict(e.sites))
        return ThreadEvidence(wall_s=sum(e.wall_s for e in evs), gil_waits=tuple(w for e in evs for w in e.gil_waits),
                              working=max(e.working for e in evs),
                              concurrent=tuple(c for e in evs for c in e.concurrent),
                              bytecode=sum(e.bytecode for e in evs), native=sum(e.native for e in evs),
                              sites=tuple(sites.most_common(3)))


class ThreadSampler:
    """``ThreadSampler().start()`` ... ``.stop()`` -> :class:`ThreadEvidence` (see the module docstring)."""

    def __init__(self, interval: float = INTERVAL_S) -> None:
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._obs: list[tuple[int, str, str]] = []   # (sample index, thread ident, state, site)
        self._waits: list[float] = []
        self._n = 0
        self._cpu0: dict[int, float] = {}
        self._t0 = 0.0

    def _threads(self) -> dict[int, int]:
        """ident -> native thread id of the Python threads alive now."""
        return {t.ident: t.native_id for t in threading.enumerate() if t.ident is not None and t.native_id}

    def start(self) -> ThreadSampler:
        self._cpu0 = {ident: s[0] for ident, nid in self._threads().items() if (s := _schedstat(nid))}
        self._t0 = time.perf_counter()
        self._thread = threading.Thread(target=self._run, name="perfmagic-gil-sampler", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        me = threading.get_ident()
        nid = threading.get_native_id()
        obs, waits = self._obs, self._waits
        idle_files = _IDLE_FILES
        while not self._stop.is_set():
            s0 = _schedstat(nid)
            t0 = time.perf_counter()
            time.sleep(self.interval)
            late = time.perf_counter() - t0 - self.interval
            s1 = _schedstat(nid)
            # and once more at once: a GIL wanted by a thread running bytecode comes back only after the
            # switch interval; a free one in microseconds (this window is too short for the OS to matter)
            t0 = time.perf_counter()
            time.sleep(0)
            again = time.perf_counter() - t0
            if s0 is not None and s1 is not None:
                waits.append(max(again, late - (s1[1] - s0[1])))
            else:
                waits.append(again)
            k = self._n
            for ident, frame in sys._current_frames().items():
                if ident == me:
                    continue
                code = frame.f_code
                fn = code.co_filename
                i = frame.f_lasti
                on_call = 0 <= i < len(code.co_code) and code.co_code[i] in _CALL_OPS
                if on_call and fn.endswith(idle_files):
                    obs.append((k, ident, "idle", ""))
                elif on_call:
                    obs.append((k, ident, "native", f"{code.co_name} ({os.path.basename(fn)}:{frame.f_lineno})"))
                else:
                    obs.append((k, ident, "bytecode", ""))
            del frame
            self._n += 1

    def stop(self) -> ThreadEvidence:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        wall = time.perf_counter() - self._t0
        me = self._thread.ident if self._thread is not None else None
        alive = self._threads()
        used = {}
        for ident, nid in alive.items():
            s = _schedstat(nid)
            if ident != me and s is not None:
                used[ident] = s[0] - self._cpu0.get(ident, 0.0)
        # a pool hands its tasks to any idle thread, so N busy workers may be spread over more threads, each
        # with a small share: a thread works when it used >= 1% of a core and >= 10% of the busiest one
        # (the kernel's IOPub or heartbeat threads stay far below)
        top = max(used.values(), default=0.0)
        working = {i for i, c in used.items() if c >= max(WORKING_SHARE * wall, 0.1 * top) and c > 0}
        # threads that ended meanwhile (started and joined by the cell): working if seen in user code
        seen = Counter(ident for _, ident, state, _ in self._obs if state != "idle" and ident not in alive)
        working |= {ident for ident, c in seen.items() if c >= 2}
        per_sample = [0] * self._n
        bytecode = native = 0
        sites: Counter[str] = Counter()
        for k, ident, state, site in self._obs:
            if ident not in working or state == "idle" or k >= self._n:
                continue
            per_sample[k] += 1
            if state == "native":
                native += 1
                sites[site] += 1
            else:
                bytecode += 1
        return ThreadEvidence(wall_s=wall, gil_waits=tuple(self._waits), working=len(working),
                              concurrent=tuple(per_sample), bytecode=bytecode, native=native,
                              sites=tuple(sites.most_common(3)))


__all__ = ["ThreadEvidence", "ThreadSampler", "held_threshold", "INTERVAL_S"]
