"""The limits of the container this process runs in: its CPU quota and memory limit (cgroup v2 or v1).

A Binder or JupyterHub pod is a cgroup on a bigger host: ``sched_getaffinity`` and ``/proc/meminfo``
show the host (16 cores, 22 GiB free) while the pod may use 2 CPUs of time and 2 GB of memory. The
kernel publishes the pod's limits in the cgroup filesystem; this module reads them:

* where this process's cgroups are: ``/proc/self/cgroup`` (``0::/path`` on v2, ``N:memory:/path`` on v1)
  mapped onto the mounts of ``/proc/self/mountinfo`` (a cgroup namespace shows the pod's own cgroup as
  the mount's root);
* the CPU quota: v2 ``cpu.max`` (``"150000 100000"`` is 1.5 CPUs; ``"max …"`` none), v1
  ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (-1: none);
* the memory limit and usage: v2 ``memory.max`` / ``memory.current``, v1 ``memory.limit_in_bytes`` /
  ``memory.usage_in_bytes`` (a limit near 2^63 is "none");
* each limit is the tightest on the path from this cgroup up to the mount's root (a pod's limit often
  sits on a parent of the cgroup the kernel runs in);
* CPU time the quota took away: ``cpu.stat`` ``throttled_usec`` (v2) or ``throttled_time`` (v1, ns).

The limits and counters are read fresh on each call (files of a few bytes), since a limit can change
while a kernel runs; only where the cgroups are is read once per process. Where nothing can be read (macOS, no /proc) every field is None.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

from ..findings import Finding

UNLIMITED = 2 ** 60  # v1 writes "no limit" as a page-aligned LONG_MAX


@dataclass(frozen=True)
class Limits:
    """This process's cgroup limits: ``cpu_quota`` in CPUs, ``memory_limit`` / ``memory_usage`` in bytes
    (each None where there is none or it cannot be read), ``version`` (2, 1 or None), ``where`` (the
    cgroup directories read)."""

    version: int | None = None
    cpu_quota: float | None = None
    memory_limit: int | None = None
    memory_usage: int | None = None
    where: tuple[str, ...] = ()

    @property
    def memory_available(self) -> int | None:
        """What the cgroup still allows: its limit minus its usage (None without a limit)."""
        if self.memory_limit is None:
            return None
        return max(self.memory_limit - (self.memory_usage or 0), 0)


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _mounts(proc: str) -> list[tuple[str, str, str, set[str]]]:
    """(fstype, mount root, mount point, controllers) of every cgroup mount."""
    text = _read(os.path.join(proc, "self", "mountinfo")) or ""
    out = []
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        a, b = left.split(), right.split()
        if len(a) < 5 or len(b) < 1 or b[0] not in ("cgroup", "cgroup2"):
            continue
        opts = set(b[2].split(",")) if len(b) > 2 else set()
        out.append((b[0], a[3], a[4].replace("\\040", " "), opts))
    return out


def _memberships(proc: str) -> list[tuple[str, set[str], str]]:
    """(hierarchy id, controllers, path) from /proc/self/cgroup."""
    text = _read(os.path.join(proc, "self", "cgroup")) or ""
    out = []
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            out.append((parts[0], set(filter(None, parts[1].split(","))), parts[2]))
    return out


def _chain(mount_root: str, mount_point: str, path: str) -> list[str]:
    """The cgroup directories from this process's up to the mount point (innermost first)."""
    rel = path
    if mount_root not in ("", "/") and (path == mount_root or path.startswith(mount_root.rstrip("/") + "/")):
        rel = path[len(mount_root.rstrip("/")):]
    leaf = os.path.normpath(os.path.join(mount_point, rel.lstrip("/")))
    if not os.path.isdir(leaf):  # a namespace that hides the path: the mount's root is this cgroup
        leaf = mount_point
    out, d = [], leaf
    top = os.path.normpath(mount_point)
    while True:
        out.append(d)
        if d == top or len(d) <= len(top):
            break
        d = os.path.dirname(d)
    return out


@functools.lru_cache(maxsize=8)
def _controllers(proc: str) -> tuple[int | None, dict[str, list[str]]]:
    """(version, {"cpu"|"cpuacct"|"memory": directories innermost first}); v2 serves "cpuacct" from "cpu".
    Where the cgroups are is read once per process (a process is not moved between cgroups while it
    runs); what is in them is read fresh on every call."""
    mounts, members = _mounts(proc), _memberships(proc)
    found: dict[str, list[str]] = {}
    version = None
    for fstype, root, point, opts in mounts:  # v1 first: on a hybrid host the v2 mount has no controllers
        if fstype != "cgroup":
            continue
        for hid, ctrls, path in members:
            if hid == "0":
                continue
            for name in ("cpu", "cpuacct", "memory"):
                if name in ctrls and name in opts and name not in found:
                    found[name], version = _chain(root, point, path), 1
    for fstype, root, point, _ in mounts:
        if fstype != "cgroup2":
            continue
        path = next((p for hid, _c, p in members if hid == "0"), None)
        if path is None:
            continue
        chain = _chain(root, point, path)
        have = (_read(os.path.join(point, "cgroup.controllers")) or "").split()
        for name, need in (("cpu", "cpu"), ("cpuacct", "cpu"), ("memory", "memory")):
            if name not in found and need in have:
                found[name], version = chain, 2
    return version, found


def _dirs(proc: str) -> tuple[int | None, list[str], list[str]]:
    """(version, the CPU controller's directories, the memory controller's), innermost first."""
    version, found = _controllers(proc)
    return version, found.get("cpu", []), found.get("memory", [])


def _quota(d: str) -> float | None:
    v2 = _read(os.path.join(d, "cpu.max"))
    if v2 is not None:
        q, _, period = v2.partition(" ")
        if q == "max" or not period:
            return None
        try:
            return int(q) / int(period)
        except ValueError:
            return None
    q1, p1 = _read(os.path.join(d, "cpu.cfs_quota_us")), _read(os.path.join(d, "cpu.cfs_period_us"))
    try:
        if q1 is None or p1 is None or int(q1) <= 0:
            return None
        return int(q1) / int(p1)
    except ValueError:
        return None


def _memory(d: str) -> tuple[int | None, int | None]:
    for lim_f, use_f in (("memory.max", "memory.current"), ("memory.limit_in_bytes", "memory.usage_in_bytes")):
        lim = _read(os.path.join(d, lim_f))
        if lim is None:
            continue
        use = _read(os.path.join(d, use_f))
        try:
            limit = None if lim == "max" or int(lim) >= UNLIMITED else int(lim)
        except ValueError:
            limit = None
        try:
            usage = int(use) if use is not None else None
        except ValueError:
            usage = None
        return limit, usage
    return None, None


def limits(proc: str = "/proc") -> Limits:
    """This process's container limits now (see the module docstring)."""
    try:
        version, cpu_dirs, mem_dirs = _dirs(proc)
    except Exception:  # noqa: BLE001 - an unreadable /proc: no limits known
        return Limits()
    quotas = [q for q in (_quota(d) for d in cpu_dirs) if q is not None]
    best: tuple[int, int | None, int | None] | None = None  # (available, limit, usage) of the tightest level
    for d in mem_dirs:
        limit, usage = _memory(d)
        if limit is None:
            continue
        avail = limit - (usage or 0)
        if best is None or avail < best[0]:
            best = (avail, limit, usage)
    return Limits(version=version, cpu_quota=min(quotas) if quotas else None,
                  memory_limit=best[1] if best else None, memory_usage=best[2] if best else None,
                  where=tuple(dict.fromkeys(cpu_dirs[:1] + mem_dirs[:1])))


def throttled_s(proc: str = "/proc") -> float | None:
    """Seconds of CPU this cgroup's quota has withheld so far (``cpu.stat``), None where not exposed."""
    try:
        _v, cpu_dirs, _m = _dirs(proc)
    except Exception:  # noqa: BLE001
        return None
    for d in cpu_dirs:
        text = _read(os.path.join(d, "cpu.stat"))
        if not text:
            continue
        fields = dict(line.split()[:2] for line in text.splitlines() if len(line.split()) >= 2)
        if "throttled_usec" in fields:
            return int(fields["throttled_usec"]) / 1e6
        if "throttled_time" in fields:
            return int(fields["throttled_time"]) / 1e9
    return None


def cpu_usage_s(proc: str = "/proc") -> float | None:
    """CPU seconds used so far by every process of this process's container, or None where this process
    is not in a container (its cgroup is the host's root: /proc/stat already tells) or it is not exposed.

    A container is a cgroup below the root: on v1 a directory below the hierarchy's mount, on v2 one with
    a ``cpu.max`` file (the root cgroup has none; a cgroup namespace shows the pod's own cgroup as "/")."""
    try:
        version, found = _controllers(proc)
    except Exception:  # noqa: BLE001
        return None
    dirs = found.get("cpuacct") or []
    if not dirs:
        return None
    leaf = dirs[0]
    if version == 2:
        if not os.path.exists(os.path.join(leaf, "cpu.max")):
            return None
        text = _read(os.path.join(leaf, "cpu.stat")) or ""
        for line in text.splitlines():
            k, _, v = line.partition(" ")
            if k == "usage_usec":
                return int(v) / 1e6
        return None
    if len(dirs) < 2:  # v1: the hierarchy's root is the whole machine
        return None
    v = _read(os.path.join(leaf, "cpuacct.usage"))
    try:
        return int(v) / 1e9 if v is not None else None
    except ValueError:
        return None


def available_memory(proc: str = "/proc") -> tuple[int | None, str]:
    """Bytes a new allocation can have now, and what bounds it: the host's available RAM, or the
    container's limit minus its usage where that is smaller (a pod's 2 GB limit on a 22 GB host)."""
    host = None
    try:
        import psutil

        host = int(psutil.virtual_memory().available)
    except Exception:  # noqa: BLE001 - no psutil: the container's figure alone, if any
        pass
    lim = limits(proc)
    pod = lim.memory_available
    if pod is not None and (host is None or pod < host):
        # what bounds it as text (render/findings_core.py words it): callers store it beside the number
        return pod, str(Finding.of("core.container-memory", limit=lim.memory_limit, used=lim.memory_usage or 0))
    return host, "available RAM"


def usable_cpus(proc: str = "/proc") -> float:
    """CPUs of time this process can use: its CPU affinity, capped by the container's CPU quota."""
    try:
        aff = float(len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        aff = float(os.cpu_count() or 1)
    q = limits(proc).cpu_quota
    return min(aff, q) if q is not None else aff


def env_fields(proc: str = "/proc") -> dict[str, object]:
    """The container's CPU quota and memory limit for a result's environment (None where there is none)."""
    lim = limits(proc)
    return {"cpu_quota": lim.cpu_quota, "mem_limit_bytes": lim.memory_limit,
            "mem_limit_available_bytes": lim.memory_available}


__all__ = ["Limits", "limits", "throttled_s", "cpu_usage_s", "available_memory", "usable_cpus", "env_fields"]
