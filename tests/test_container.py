"""Limits from the container (issue 32): a pod's CPU quota and memory limit, not the host's cores and RAM.

Planted cgroup trees (v2 and v1, in a temporary folder) check the reading; a real cgroup made by the
test (a 2 GB memory limit and a 1.5-CPU quota; this machine runs the tests as root) checks that the
estimate's gate, the usable cores and the load probe follow it. Skipped, with the reason, where
cgroups cannot be made.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from perfmagic.core import container


def _plant_v2(tmp: Path, members: str = "0::/pod\n", mount_root: str = "/") -> tuple[str, Path]:
    proc, cg = tmp / "proc", tmp / "cg"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "cgroup").write_text(members)
    (proc / "self" / "mountinfo").write_text(
        f"30 23 0:26 {mount_root} {cg} rw,nosuid - cgroup2 cgroup2 rw\n"
        f"31 23 0:27 / {tmp / 'other'} rw - tmpfs tmpfs rw\n")
    cg.mkdir()
    (cg / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (cg / "cpu.stat").write_text("usage_usec 999000000\n")  # the root: no cpu.max, no memory.max
    return str(proc), cg


def test_v2_limits_are_read_and_the_tightest_level_wins(tmp_path) -> None:
    proc, cg = _plant_v2(tmp_path, "0::/pod/kernel\n")
    pod, kernel = cg / "pod", cg / "pod" / "kernel"
    kernel.mkdir(parents=True)
    (pod / "cpu.max").write_text("150000 100000\n")
    (pod / "memory.max").write_text(f"{2 * 2**30}\n")
    (pod / "memory.current").write_text(f"{512 * 2**20}\n")
    (kernel / "cpu.max").write_text("max 100000\n")
    (kernel / "memory.max").write_text("max\n")
    (kernel / "memory.current").write_text(f"{400 * 2**20}\n")
    (kernel / "cpu.stat").write_text("usage_usec 5000000\nuser_usec 4000000\nthrottled_usec 250000\n")
    lim = container.limits(proc)
    assert lim.version == 2 and lim.cpu_quota == 1.5
    assert lim.memory_limit == 2 * 2**30 and lim.memory_available == 2 * 2**30 - 512 * 2**20
    assert container.cpu_usage_s(proc) == 5.0 and container.throttled_s(proc) == 0.25


def test_v2_in_a_cgroup_namespace_reads_the_mount_root_as_the_pod(tmp_path) -> None:
    proc, cg = _plant_v2(tmp_path, "0::/\n", mount_root="/kubepods/pod42")
    (cg / "cpu.max").write_text("200000 100000\n")
    (cg / "memory.max").write_text(f"{2**30}\n")
    (cg / "memory.current").write_text("0\n")
    (cg / "cpu.stat").write_text("usage_usec 1500000\n")
    lim = container.limits(proc)
    assert lim.cpu_quota == 2.0 and lim.memory_limit == 2**30
    assert container.cpu_usage_s(proc) == 1.5  # a container: its own usage, not the host's


def test_the_host_root_cgroup_is_not_a_container(tmp_path) -> None:
    proc, _cg = _plant_v2(tmp_path, "0::/\n")
    assert container.limits(proc).cpu_quota is None and container.limits(proc).memory_limit is None
    assert container.cpu_usage_s(proc) is None  # /proc/stat already tells the host's load


def test_v1_limits_and_its_unlimited_value(tmp_path) -> None:
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    mem, cpu, acct = tmp_path / "memory", tmp_path / "cpu", tmp_path / "cpuacct"
    (proc / "self" / "cgroup").write_text("4:memory:/job\n2:cpuacct:/job\n1:cpu:/job\n0::/\n")
    (proc / "self" / "mountinfo").write_text(
        f"32 31 0:29 / {cpu} rw - cgroup cgroup rw,cpu\n33 31 0:30 / {acct} rw - cgroup cgroup rw,cpuacct\n"
        f"35 31 0:32 / {mem} rw - cgroup cgroup rw,memory\n")
    for d in (mem / "job", cpu / "job", acct / "job"):
        d.mkdir(parents=True)
    (mem / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    (mem / "job" / "memory.limit_in_bytes").write_text(f"{3 * 2**30}\n")
    (mem / "job" / "memory.usage_in_bytes").write_text(f"{2**30}\n")
    (cpu / "job" / "cpu.cfs_quota_us").write_text("50000\n")
    (cpu / "job" / "cpu.cfs_period_us").write_text("100000\n")
    (cpu / "job" / "cpu.stat").write_text("nr_periods 10\nnr_throttled 2\nthrottled_time 3000000000\n")
    (acct / "job" / "cpuacct.usage").write_text("7000000000\n")
    lim = container.limits(str(proc))
    assert lim.version == 1 and lim.cpu_quota == 0.5 and lim.memory_available == 2 * 2**30
    assert container.cpu_usage_s(str(proc)) == 7.0 and container.throttled_s(str(proc)) == 3.0
    (mem / "job" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert container.limits(str(proc)).memory_limit is None


def test_no_cgroups_readable_means_no_limits(tmp_path) -> None:
    lim = container.limits(str(tmp_path / "nothing"))
    assert lim == container.Limits() and lim.memory_available is None
    avail, kind = container.available_memory(str(tmp_path / "nothing"))
    assert kind == "available RAM" and (avail is None or avail > 0)


# ---- a real cgroup -----------------------------------------------------------------------------------------
CHILD = textwrap.dedent("""
    import json, time
    from perfmagic.core.container import usable_cpus, limits
    from perfmagic.core.load import LoadProbe, usable_cores
    from perfmagic.estimation.gate import available_memory
    from perfmagic.estimation.estimate import Point, analyse_scaling, gate
    p = LoadProbe().start(); time.sleep(0.5); p.stop()
    # a job whose memory grows 1 byte per element: 3e9 elements need ~3 GB, more than the 2 GB pod allows
    pts = [Point(n, (1e-9 * n,), (n,)) for n in (2**20, 2**21, 2**22, 2**23)]
    g = gate(analyse_scaling(pts, N=3_000_000_000), None)
    avail, kind = available_memory("cpu")
    print(json.dumps({"cores": usable_cores(), "cpus": usable_cpus(), "avail": avail, "kind": kind,
                      "limit": limits().memory_limit, "verdict": g.verdict, "why": g.text(),
                      "scope": p.scope, "others": p.others_cores, "host_others": p.host_others_cores}))
""")


def test_a_real_2gb_1_5_cpu_cgroup_sets_the_gate_the_cores_and_the_load(tmp_path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
    from pod_check import Pod

    pod = Pod(f"perfmagic-test-{os.getpid()}", 2 * 2**30, 1.5)
    why = pod.make()
    if why:
        pytest.skip(why)
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # a tenant outside the pod
    try:
        time.sleep(0.2)
        (tmp_path / "child.py").write_text(CHILD)
        out = subprocess.run(["sh", "-c", f"{pod.join_line()} && exec {sys.executable} {tmp_path / 'child.py'}"],
                             capture_output=True, text=True, timeout=120)
    finally:
        spin.kill()
        spin.wait()
        pod.remove()
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["cpus"] == pytest.approx(min(1.5, len(os.sched_getaffinity(0)))), got
    assert got["cores"] == max(1, int(got["cpus"])), got
    assert got["limit"] == 2 * 2**30, got
    assert 0 < got["avail"] <= 2 * 2**30 and "container" in got["kind"], got
    assert got["verdict"] == "will not fit" and "container" in got["why"], got
    # the spinning process outside the pod is the host's, not this pod's neighbour
    assert got["scope"] == "container" and got["others"] is not None and got["others"] < 0.3, got
    assert got["host_others"] is not None and got["host_others"] > 0.5, got
