"""How busy the CPU was during a measurement, and how many cores this process can use.

:class:`LoadProbe` reads, around an interval, the CPU *other* processes used (``/proc/stat``, or in a
container its cgroup: :mod:`perfmagic.core.container`), this process's own cores, its threads that took
CPU and how often the scheduler preempted it. :func:`processes_cpu_s` and :func:`thread_cpu` read the CPU
of given processes and of this process's threads; :func:`usable_cores` and :func:`free_cores` say how
many cores a run may keep busy, and how many other processes left it. Linux ``/proc`` readings; each
degrades to ``None`` elsewhere. Stdlib only.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

from .container import cpu_usage_s, throttled_s, usable_cpus


def usable_cores() -> int:
    """The cores this process can keep busy: its CPU affinity (else the logical cores), capped by the
    container's CPU quota rounded down (a 1.5-CPU pod keeps one core busy unthrottled; at least 1)."""
    return max(1, int(usable_cpus() + 1e-9))


def free_cores(env: dict[str, Any] | None) -> int:
    """Whole cores other processes left free during a run (at least 1)."""
    env = env or {}
    usable, others = env.get("usable_cores") or os.cpu_count() or 1, env.get("others_cores") or 0.0
    return max(1, int(usable - others + 0.25))


def _proc_stat_busy() -> float | None:
    """Seconds of non-idle CPU time on the CPUs this process may use, from ``/proc/stat``.

    busy = user+nice+system+irq+softirq+steal (total minus idle and iowait; guest time is already in
    user). Sums the per-CPU lines of the affinity set when it is a strict subset, else the aggregate line.
    """
    try:
        with open("/proc/stat") as f:
            lines = [ln.split() for ln in f if ln.startswith("cpu")]
        allowed = {f"cpu{c}" for c in os.sched_getaffinity(0)} if hasattr(os, "sched_getaffinity") else set()
        per_cpu = [ln for ln in lines if ln[0] in allowed]
        rows = per_cpu if per_cpu and len(per_cpu) < len(lines) - 1 else [ln for ln in lines if ln[0] == "cpu"]
        busy = sum(sum(int(x) for x in r[1:9]) - int(r[4]) - int(r[5]) for r in rows)
        return busy / os.sysconf("SC_CLK_TCK") if rows else None
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def processes_cpu_s(pids: Sequence[int]) -> float | None:
    """CPU seconds (user + system) used so far by the processes ``pids``, from ``/proc``; None outside
    Linux or when none can be read."""
    tck, total, seen = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100, 0.0, 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                f = fh.read().rsplit(")", 1)[1].split()
            total += (int(f[11]) + int(f[12])) / tck
            seen += 1
        except (OSError, IndexError, ValueError):
            continue
    return total if seen else None


def thread_cpu() -> dict[int, float] | None:
    """CPU seconds used so far by each thread of this process (``/proc/self/task/*/stat``), or None."""
    try:
        tck = os.sysconf("SC_CLK_TCK")
        out = {}
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except FileNotFoundError:  # the thread ended meanwhile
                continue
            out[int(tid)] = (int(fields[11]) + int(fields[12])) / tck  # utime, stime
        return out
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def _own_cpu() -> float:
    """CPU seconds of this process and of its children that ended and were waited for."""
    t = os.times()
    return time.process_time() + t.children_user + t.children_system


def _involuntary_switches() -> int | None:
    """Involuntary context switches of this process so far (the scheduler gave its CPU to another task)."""
    try:
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw)
    except (ImportError, OSError, AttributeError):  # pragma: no cover - not Unix
        return None


class LoadProbe:
    """CPU used by *other* processes during an interval: busy time from ``/proc/stat`` (in a container,
    the container's own CPU usage from its cgroup, so that other tenants of the host are not counted as
    this pod's neighbours; ``host_others_cores`` keeps the host-wide reading) minus this
    process's CPU time (``time.process_time``) and that of its children that ended and were waited for
    meanwhile (``os.times``: a probe run in a child process, as the ceilings' wide-kernel probe does, is
    this process's own work), divided by wall time. Resolution is one clock tick (usually 10 ms), so
    intervals under 20 ms give None. Children still running count as others (``%%amdahl`` subtracts its
    own; DataLoader workers are reported as such).
    ``active_threads``: this process's threads that each used at least 5% of a core (and a clock tick)
    meanwhile — a BLAS or torch pool at work shows as more than one, even when its threads mostly wait.
    ``preempted``: how often the scheduler took a CPU from this process's threads meanwhile (involuntary
    context switches, ``getrusage``): exact at any length, where ``others_cores`` needs 20 ms; None
    outside Unix.
    """

    def __init__(self) -> None:
        self._busy0: float | None = None
        self._cpu0 = self._wall0 = 0.0
        self.others_cores: float | None = None
        self.own_cores: float | None = None
        self.active_threads: int | None = None
        self.preempted: int | None = None
        self.wall_s: float | None = None
        self._threads0: dict[int, float] | None = None
        self._nivcsw0: int | None = None
        self._pod0: float | None = None
        self._thr0: float | None = None
        self.scope = "host"  # "container": others_cores counts this container's other processes only
        self.host_others_cores: float | None = None  # in a container: the whole host's others (other tenants)
        self.throttled_cores: float | None = None    # in a container: CPU its quota withheld, in cores

    def start(self) -> LoadProbe:
        """Take the starting readings; returns self."""
        self._threads0 = thread_cpu()
        self._nivcsw0 = _involuntary_switches()
        self._pod0 = cpu_usage_s()  # in a container: its own processes, not the host's other tenants
        self._thr0 = throttled_s() if self._pod0 is not None else None
        self._busy0, self._cpu0, self._wall0 = _proc_stat_busy(), _own_cpu(), time.perf_counter()
        return self

    def stop(self) -> float | None:
        """Average number of cores kept busy by other processes since start() (>= 0), or None."""
        wall, own = time.perf_counter() - self._wall0, _own_cpu() - self._cpu0
        busy1 = _proc_stat_busy()
        nivcsw = _involuntary_switches()
        self.preempted = nivcsw - self._nivcsw0 if nivcsw is not None and self._nivcsw0 is not None else None
        self.own_cores = own / wall if wall > 0 else None
        self.wall_s = wall
        t1 = thread_cpu()
        if t1 is not None and self._threads0 is not None and wall > 0:
            least = max(0.05 * wall, 1.0 / os.sysconf("SC_CLK_TCK"))
            self.active_threads = sum(1 for tid, c in t1.items() if c - self._threads0.get(tid, 0.0) >= least)
        if self._busy0 is None or busy1 is None or wall < 0.02:
            self.others_cores = None
        else:
            self.others_cores = max(0.0, (busy1 - self._busy0 - own) / wall)
        if self._pod0 is not None:
            pod1, thr1 = cpu_usage_s(), throttled_s()
            self.host_others_cores, self.scope = self.others_cores, "container"
            self.others_cores = (None if pod1 is None or wall < 0.02 else
                                 max(0.0, (pod1 - self._pod0 - own) / wall))
            if thr1 is not None and self._thr0 is not None and wall > 0:
                self.throttled_cores = max(0.0, (thr1 - self._thr0) / wall)
        return self.others_cores


__all__ = ["LoadProbe", "free_cores", "processes_cpu_s", "thread_cpu", "usable_cores"]
