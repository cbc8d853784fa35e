"""Scaling across ranks (gloo on this CPU machine): a tiny DDP step at 1, 2, 4 ranks, a planted straggler,
a planted serial fraction, a failing rank, Ctrl-C, bad input, the magic; NCCL at world size 1 on a GPU.

Every test checks that no rank outlives the call (psutil: this process has no children left)."""

from __future__ import annotations

import json
import os
import threading
import _thread

import psutil
import pytest

from perfmagic.core.load import usable_cores
from perfmagic.errors import BadOptionError, BenchInterrupted
from perfmagic.ranks.sweep import RankFailed, amdahl_ranks, spawn_namespace

DDP_SETUP = """
import torch
from torch.nn.parallel import DistributedDataParallel as DDP
torch.manual_seed(0)
model = DDP(torch.nn.Linear(128, 128))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(128 // world_size, 128)
"""
DDP_STEP = "opt.zero_grad()\nmodel(x).sum().backward()\nopt.step()\n"


def _no_children() -> None:
    """No rank left. multiprocessing's resource tracker (started once by spawn, for this process's lifetime,
    by Python itself) is not a rank."""
    kids = [p for p in psutil.Process().children(recursive=True) if p.is_running()
            and p.status() != psutil.STATUS_ZOMBIE and "resource_tracker" not in " ".join(p.cmdline())]
    assert not kids, [(p.pid, p.cmdline()[:3]) for p in kids]


def test_ddp_step_at_1_2_4_ranks() -> None:
    r = amdahl_ranks(DDP_STEP, [1, 2, 4], setup=DDP_SETUP, budget=0.15)
    _no_children()
    assert [p.world for p in r.points] == [1, 2, 4] and all(p.ok for p in r.points), r.errors
    for p in r.points:
        assert len(p.ranks) == p.world and sorted(s.rank for s in p.ranks) == list(range(p.world))
        assert all(len(s.times) >= 10 and len(s.times) == len(p.ranks[0].times) for s in p.ranks)
        assert all(0 < m < 1 for m in p.rank_medians)
        assert p.median >= max(p.rank_medians) * 0.999   # the job's step is the slowest rank's
        if p.world > 1:
            assert p.straggler_ratio is not None and p.straggler_ratio >= 1.0
            # DDP all-reduces the gradients every step: collectives take a real, bounded share of it
            assert p.comm_share is not None and 0.0 < p.comm_share <= 1.0
            assert p.busbw is not None and p.busbw > 0 and p.link_roof is not None and p.link_roof > 0
            # 128×128+128 float32 gradients, all-reduced once per step
            assert all(abs(b - (128 * 128 + 128) * 4) < 1 for s in p.ranks for b in s.allreduce_bytes), \
                [s.allreduce_bytes for s in p.ranks]
    if usable_cores() < 4:
        assert any("exceed the" in w for w in r.warnings)
        assert 4 in dict(r.excluded) or any("4 ranks exceed" in n for n in r.notes)
    text = r.text()
    assert all(len(line) <= 100 for line in text.splitlines()), text
    assert "ranks (gloo)" in text.splitlines()[0]
    from perfmagic.render.bundle import mimebundle

    b = mimebundle(r, plot=False)
    assert "<details" in b["text/html"] and "http" not in b["text/html"].replace("https://", "")
    m = r.metrics()
    assert m["worlds"] == "1,2,4" and m["w2_comm_share"] == r.points[1].comm_share


STRAGGLE = """
import time, torch, torch.distributed as dist
t = torch.ones(8)
def step():
    time.sleep(0.010)
    if rank == 1:
        time.sleep(0.020)           # the planted straggler: 20 ms more work per step
    dist.all_reduce(t)              # the others wait for it here
"""


def test_planted_straggler_is_named_with_its_ratio() -> None:
    r = amdahl_ranks("step()", [3], setup=STRAGGLE, budget=0.4, link=False)
    _no_children()
    (p,) = r.points
    assert p.ok, p.error
    # busy (step minus collectives): ranks 0, 2 ≈ 10 ms, rank 1 ≈ 30 ms -> slowest / median ≈ 3
    assert p.straggler == 1, (p.straggler_ratio, [s.busy for s in p.ranks])
    assert 2.2 <= p.straggler_ratio <= 3.6, [s.busy for s in p.ranks]
    # the fast ranks wait ~20 of ~30 ms in the all-reduce; the straggler hardly waits
    fast = [s.comm_share for s in p.ranks if s.rank != 1]
    assert all(0.45 <= c <= 0.8 for c in fast), fast
    assert p.ranks[1].comm_share < 0.25
    assert "rank 1" in r.text()


def test_no_straggler_named_when_ranks_are_alike() -> None:
    r = amdahl_ranks("step()", [2], setup=STRAGGLE.replace("rank == 1", "False"), budget=0.3, link=False)
    _no_children()
    (p,) = r.points
    assert p.ok and p.straggler is None, (p.straggler_ratio, [s.busy_s for s in p.ranks])
    assert p.straggler_ratio < 1.3


AMDAHL_STEP = """
import time, torch.distributed as dist
def step():
    time.sleep(0.012)                       # serial: every rank does it whole
    time.sleep(0.036 / world_size)          # parallel: split over the ranks
    dist.barrier()
"""


def _slept_step(world_size: int, reps: int = 9) -> float:
    """The planted step's sleeps as this machine actually sleeps them (median seconds). A VM's sleeps
    overshoot by up to a few ms each, which alone moves the planted speedup at 4 ranks from 2.29 to ~2.0
    (CI stop 36 measured 1.85 against the nominal 2.29); the truth is what was slept."""
    import statistics
    import time

    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        time.sleep(0.012)
        time.sleep(0.036 / world_size)
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def test_planted_serial_fraction_across_world_sizes() -> None:
    """Step ≈ 12 ms + 36 ms / N: speedups 1, 1.6, 2.29 (Amdahl S = 0.25) as planted, measured against the
    sleeps as this machine sleeps them. Sleeping ranks need no cores, so even 4 ranks on 2 cores are fitted,
    and the result says they share the cores.

    Where the ranks fit the cores the speedup is the planted one (±15%). Beyond them the ranks' waking,
    profiling and barrier share 2 cores: 4 ranks measured 22.5–25.5 ms of busy time per step against the
    21.4 ms slept (CI stops 36 and fc19: speedup 1.85 against 2.26), which the tool reports rightly; there the
    speedup may fall short of the planted one by up to 30% and never exceed it by more than 15%."""
    r = amdahl_ranks("step()", [1, 2, 4], setup=AMDAHL_STEP, budget=0.4, link=False)
    _no_children()
    assert all(p.ok for p in r.points), r.errors
    slept = {n: _slept_step(n) for n in (1, 2, 4)}
    cores = usable_cores()
    why = (r.speedups, {k: round(v * 1e3, 1) for k, v in slept.items()}, cores)
    for s, n in zip(r.speedups, (1, 2, 4)):
        want = slept[1] / slept[n]
        if n <= cores:
            assert abs(s / want - 1) < 0.15, why
        else:
            assert 0.70 < s / want < 1.15, why
    if cores < 4:
        assert "exceed the" in r.text() and "usable cores" in r.text(), r.text()
    assert not r.excluded and r.scaling is not None and len(r.scaling.good) == 3
    a = r.scaling.reliable("amdahl")
    if a is not None:
        # planted S = 0.25. Where 4 ranks share fewer cores their speedup may fall 30% short (above), and a
        # 4-rank speedup of 0.7 × 2.29 alone fits S = 0.5; S = 0.383 was fitted once on 2 cores (fresh-clone CI,
        # 2026-11-28)
        assert 0.12 <= a.params["S"] <= (0.38 if cores >= 4 else 0.5), (a.params, why)


def test_a_failing_rank_reports_its_traceback_and_leaves_no_process() -> None:
    code = "if rank == 1:\n    raise ValueError('planted failure in rank 1')\n"
    with pytest.raises(RankFailed) as ei:
        amdahl_ranks(code, [2], budget=0.1, link=False, filename="<cell-7>")
    _no_children()
    msg = str(ei.value)
    assert ei.value.rank == 1 and "ValueError: planted failure in rank 1" in msg
    assert "Traceback" in msg and "raise ValueError" in msg  # the user's line, as the rank printed it
    assert "<cell-7>" in msg and "spawn.py" not in msg and "worker.py" not in msg  # from the user's frame on
    # once a smaller world size worked, a failure is that world size's, and the sweep keeps the rest
    r = amdahl_ranks(code, [1, 2], budget=0.1, link=False)
    _no_children()
    assert r.points[0].ok and not r.points[1].ok and "planted failure" in (r.points[1].traceback or "")
    assert "failed" in r.text()


def test_ctrl_c_tears_down_every_rank() -> None:
    import signal

    # Python's own SIGINT handler for the test (a shell's background job starts with SIGINT ignored, and then
    # interrupt_main() does nothing); a kernel's Ctrl-C arrives the same way
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(2.5, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(BenchInterrupted) as ei:
            amdahl_ranks("time.sleep(0.05)", [1, 2], setup="import time", budget=5, link=False)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, old)
    _no_children()
    res = ei.value.result
    assert res is None or (res.status == "interrupted" and "[INTERRUPTED]" in res.text().splitlines()[0])


@pytest.mark.parametrize("kw, words", [
    ({"backend": "nccl"}, ["gloo", "CUDA"]),
    ({"backend": "mpi"}, ["gloo, nccl"]),
    ({"ranks": [0, 1]}, ["world sizes >= 1"]),
    ({"ranks": [1, 1000]}, ["ranks on this machine", "e.g. ranks="]),
    ({"ranks": "1,2"}, ["a list of world sizes"]),
    ({"budget": -1}, ["positive"]),
])
def test_bad_input_is_one_line_naming_the_fix(kw, words) -> None:
    import torch

    if kw.get("backend") == "nccl" and torch.cuda.is_available():
        pytest.skip("CUDA is available here: NCCL is a valid backend")
    args = {"ranks": [1, 2], **kw}
    with pytest.raises(BadOptionError) as ei:
        amdahl_ranks("pass", **args)
    msg = str(ei.value)
    assert "\n" not in msg and all(w in msg for w in words), msg
    _no_children()


def test_spawn_refuses_names_a_fresh_process_cannot_receive() -> None:
    import math

    ns = {"f": lambda: 1, "lock": threading.Lock(), "n": 3, "math": math}
    with pytest.raises(BadOptionError) as ei:
        spawn_namespace("f(); lock; n; math.pi", "", ns)
    assert "f, lock" in str(ei.value) and "setup" in str(ei.value) and "fork" in str(ei.value)
    sent = spawn_namespace("n + math.pi", "", ns)
    assert set(sent) == {"n", "math"}


def test_spawn_runs_the_step_from_source() -> None:
    import torch

    r = amdahl_ranks("y = x @ x", [1], setup="x = torch.ones(32, 32)", globals={"torch": torch},
                     start_method="spawn", budget=0.05, link=False)
    _no_children()
    assert r.start_method == "spawn" and r.points[0].ok and len(r.points[0].ranks[0].times) >= 10


def test_magic_ranks_records_and_refuses_bad_options(shell) -> None:
    shell.run(DDP_SETUP.replace("model = DDP", "net = lambda: DDP").replace("world_size", "2"))
    res = shell.run(f'%%amdahl --ranks 1,2 -b 0.1 --no-plot --setup "{DDP_SETUP.strip().replace(chr(10), "; ")}"\n'
                    + DDP_STEP)
    assert res.error_in_exec is None, res.error_in_exec
    text = shell.bundles[-1]["text/plain"]
    assert text.startswith("ranks (gloo)") and "run #1" in text
    import perfmagic

    df = perfmagic.ledger(magic="amdahl")
    assert list(df["worlds"]) == ["1,2"]
    for line, want in [("%%amdahl --ranks 0,1", "world sizes >= 1"), ("%%amdahl --ranks 1,2 --backend nccl", "gloo"),
                       ("%%amdahl --ranks 1,2 --threads 1,2", "only one"), ("%%amdahl --setup x=1 workers=1,2", "--ranks")]:
        import torch

        if "nccl" in line and torch.cuda.is_available():
            continue
        res = shell.run(line + "\npass\n")
        assert type(res.error_in_exec).__name__ == "UsageError" and want in str(res.error_in_exec), (line, res.error_in_exec)
    _no_children()


@pytest.mark.gpu
def test_nccl_world_size_one() -> None:
    r = amdahl_ranks("y = x @ x", [1], backend="nccl", setup="import torch\nx = torch.ones(1024, 1024, device=device)",
                     budget=0.2)
    _no_children()
    (p,) = r.points
    assert p.ok and r.start_method == "spawn" and r.device == "cuda" and len(p.ranks[0].times) >= 10


def test_weak_scaling_of_a_fixed_step_per_rank_is_ideal() -> None:
    """Each rank sleeps 20 ms per step whatever the world size: the global work grows with the ranks, the
    step does not, so the scaled speedup is N and the efficiency ≈ 100%."""
    r = amdahl_ranks("time.sleep(0.02)\ndist.barrier()", [1, 2, 3], setup="import time\nimport torch.distributed as dist",
                     weak=True, budget=0.3, link=False)
    _no_children()
    assert r.weak and all(p.ok for p in r.points), r.errors
    # within 20%: the step's barrier itself costs more with more ranks than cores (3 ranks on 2 cores: a
    # fresh-clone CI run measured 2.60× at 3, efficiency 0.87); a strong-scaling reading would give ~1×
    for n, s, e in zip(r.worlds, r.speedups, r.efficiencies):
        assert abs(s / n - 1) < 0.2 and 0.8 < e < 1.2, (r.speedups, r.efficiencies)
    assert "scaled speedup" in r.text().splitlines()[0]


def test_forked_ranks_after_the_kernel_used_openmp_do_not_hang() -> None:
    """A fresh process that ran a multi-threaded torch op first (its OpenMP pool is up, as in a notebook after a
    `--threads` sweep), then the rank sweep: forked ranks run 1 thread and finish; the profiler's start/stop lines
    (kineto writes them on fd 2) do not reach the output."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f'''
        import torch
        torch.set_num_threads(2)
        a = torch.randn(512, 512)
        for _ in range(3):
            a @ a
        from perfmagic.ranks.sweep import amdahl_ranks
        r = amdahl_ranks({DDP_STEP!r}, [1, 2], setup={DDP_SETUP!r}, budget=0.15, timeout=60)
        print("threads", [p.threads for p in r.points], "ok", all(p.ok for p in r.points))
    ''')
    cp = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180)
    assert cp.returncode == 0, cp.stderr[-2000:]
    assert "threads [1, 1] ok True" in cp.stdout, cp.stdout + cp.stderr[-2000:]
    assert "USDT" not in cp.stdout + cp.stderr, (cp.stdout + cp.stderr)[-2000:]


LISTENERS = '''
import os, json
def _listening():
    """This process's listening TCP sockets: (local address hex, port) from /proc/net/tcp{,6}."""
    mine = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            mine.add(link[8:-1])
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for ln in lines:
            f = ln.split()
            if f[3] == "0A" and f[9] in mine:  # LISTEN, and ours
                out.append(f[1])
    return out
'''


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="needs Linux's /proc/net/tcp")
def test_ranks_listen_on_loopback_only(tmp_path) -> None:
    """Every socket a rank listens on (rendezvous, gloo pairs) is bound to 127.0.0.1 or ::1, none to
    every interface (``*:PORT``, as torch's TCPStore server was)."""
    code = (f"json.dump(_listening(), open({str(tmp_path)!r} + f'/rank{{rank}}.json', 'w')); "
            "import torch.distributed as dist; dist.all_reduce(torch.ones(4))")
    amdahl_ranks(code, [2], setup=LISTENERS + "import torch", budget=0.1, link=False)
    seen = [a for p in tmp_path.glob("rank*.json") for a in json.load(open(p))]
    assert len(list(tmp_path.glob("rank*.json"))) == 2
    loop4, loop6 = "0100007F", "00000000000000000000000001000000"
    assert seen and all(a.split(":")[0] in (loop4, loop6) for a in seen), seen
