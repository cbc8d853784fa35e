"""Run a command inside a made-up pod: a cgroup with a memory limit and a CPU quota, as Binder and
JupyterHub give (mybinder.org: about 2 CPUs and 1-2 GB). Reports what the command used: its peak
memory, its CPU time and wall time, and whether the kernel killed anything for memory.

    sudo .venv/bin/python tools/pod_check.py --memory 2G --cpus 2 -- \\
        .venv/bin/python notebooks/run.py --check notebooks/10_one_change_at_a_time.ipynb
    make pod-check          # the workshop notebook, as above

Needs root and a writable cgroup filesystem (v1 memory/cpu/cpuacct, or v2 with the cpu and memory
controllers delegated); exits 2 with the reason where the pod cannot be made.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

BASE = Path("/sys/fs/cgroup")


def parse_bytes(text: str) -> int:
    units = {"k": 2**10, "m": 2**20, "g": 2**30}
    t = text.strip().lower().rstrip("ib").rstrip("b")
    return int(float(t[:-1]) * units[t[-1]]) if t and t[-1] in units else int(t)


class Pod:
    """A cgroup (v1: one per controller; v2: one) with ``memory`` bytes and ``cpus`` CPUs of quota."""

    def __init__(self, name: str, memory: int, cpus: float) -> None:
        self.name, self.memory, self.cpus = name, memory, cpus
        self.dirs: list[Path] = []
        self.version = 0

    def make(self) -> str | None:
        """Create it; None, or why it cannot be made here."""
        if os.geteuid() != 0:
            return "not root: cannot make cgroups"
        v1 = {c: BASE / c for c in ("memory", "cpu", "cpuacct")}
        try:
            if all((d / "cgroup.procs").exists() for d in v1.values()):
                self.version = 1
                self.dirs = [v1[c] / self.name for c in ("memory", "cpu", "cpuacct")]
                for d in self.dirs:
                    d.mkdir(exist_ok=True)
                (self.dirs[0] / "memory.limit_in_bytes").write_text(str(self.memory))
                (self.dirs[1] / "cpu.cfs_period_us").write_text("100000")
                (self.dirs[1] / "cpu.cfs_quota_us").write_text(str(int(self.cpus * 100000)))
                return None
            if (BASE / "cgroup.controllers").exists():
                have = (BASE / "cgroup.subtree_control").read_text().split()
                if not {"cpu", "memory"} <= set(have):
                    return f"cgroup v2 without the cpu and memory controllers delegated (have {have})"
                self.version = 2
                self.dirs = [BASE / self.name]
                self.dirs[0].mkdir(exist_ok=True)
                (self.dirs[0] / "memory.max").write_text(str(self.memory))
                (self.dirs[0] / "cpu.max").write_text(f"{int(self.cpus * 100000)} 100000")
                return None
        except OSError as exc:
            self.remove()
            return f"cgroups not writable here: {exc}"
        return "no cgroup filesystem mounted"

    def join_line(self) -> str:
        """A shell line that moves the shell into the pod (then ``exec`` the command)."""
        return " && ".join(f"echo $$ > {d}/cgroup.procs" for d in self.dirs)

    def usage(self) -> dict[str, float | int | None]:
        """Peak memory (bytes), CPU seconds and OOM kills so far."""
        def read(path: Path) -> str | None:
            try:
                return path.read_text().strip()
            except OSError:
                return None

        out: dict[str, float | int | None] = {"peak_bytes": None, "cpu_s": None, "oom_kills": None}
        if self.version == 1:
            mem, _cpu, acct = self.dirs
            p, u = read(mem / "memory.max_usage_in_bytes"), read(acct / "cpuacct.usage")
            out["peak_bytes"] = int(p) if p else None
            out["cpu_s"] = int(u) / 1e9 if u else None
            oom = dict(line.split() for line in (read(mem / "memory.oom_control") or "").splitlines() if " " in line)
            out["oom_kills"] = int(oom["oom_kill"]) if "oom_kill" in oom else None
        elif self.version == 2:
            d = self.dirs[0]
            p = read(d / "memory.peak")
            out["peak_bytes"] = int(p) if p else None
            stat = dict(line.split() for line in (read(d / "cpu.stat") or "").splitlines() if " " in line)
            out["cpu_s"] = int(stat["usage_usec"]) / 1e6 if "usage_usec" in stat else None
            ev = dict(line.split() for line in (read(d / "memory.events") or "").splitlines() if " " in line)
            out["oom_kills"] = int(ev["oom_kill"]) if "oom_kill" in ev else None
        return out

    def remove(self) -> None:
        for d in self.dirs:
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--memory", default="2G", help="memory limit, e.g. 2G (default 2G)")
    ap.add_argument("--cpus", type=float, default=2.0, help="CPU quota in CPUs, e.g. 1.5 (default 2)")
    ap.add_argument("cmd", nargs=argparse.REMAINDER, help="-- then the command to run inside")
    a = ap.parse_args(argv)
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        ap.error("give the command after --")
    pod = Pod(f"perfmagic-pod-{os.getpid()}", parse_bytes(a.memory), a.cpus)
    why = pod.make()
    if why:
        print(f"pod_check: cannot make the pod: {why}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    try:
        shell = f"{pod.join_line()} && exec " + " ".join(subprocess.list2cmdline([c]) for c in cmd)
        rc = subprocess.call(["sh", "-c", shell])
        wall = time.perf_counter() - t0
        use = pod.usage()
    finally:
        pod.remove()
    peak = use["peak_bytes"]
    print(f"\npod_check: {a.memory} / {a.cpus:g} CPUs (cgroup v{pod.version}): exit {rc}, wall {wall:.1f} s, "
          f"CPU {use['cpu_s'] or 0:.1f} s, peak memory {peak / 2**20 if peak else float('nan'):.0f} MiB, "
          f"OOM kills {use['oom_kills']}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
