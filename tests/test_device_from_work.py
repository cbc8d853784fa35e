"""The device comes from the work, not from the process (issue 28, items 1-4).

A notebook that used CUDA once keeps it initialised; a CPU cell measured after that is a CPU
measurement. On this CPU machine CUDA is stood in for: ``torch.cuda.is_available``/``is_initialized``
report True and the allocator's counter is a planted number, as in a process whose earlier cells used a
GPU. Any attempt to synchronise or time with CUDA events then fails loudly (this torch has no CUDA), so a
CPU cell treated as CUDA work cannot pass. The real-device versions are the ``gpu`` tests.
"""

from __future__ import annotations

import time

import pytest

torch = pytest.importorskip("torch")


@pytest.fixture
def cuda_initialised(monkeypatch):
    """CUDA 'available and initialised' with one device; ``allocs['n']`` is its allocation counter."""
    if torch.cuda.is_available():
        pytest.skip("a real CUDA device is here: the gpu tests cover it")
    allocs = {"n": 100}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "memory_stats", lambda i=None: {"allocation.all.allocated": allocs["n"]})

    def no_init(*a, **k):
        raise AssertionError("perfmagic initialised CUDA (or synchronised it) for a CPU cell")

    monkeypatch.setattr(torch.cuda, "_lazy_init", no_init)
    import sys

    monkeypatch.delitem(sys.modules, "torch._dynamo", raising=False)  # no torch.compile in play (restored after)
    return allocs


def test_the_watch_reads_the_work(cuda_initialised) -> None:
    from perfmagic.core.devicework import watch
    from perfmagic.core.sync import detect

    with watch() as w:
        x = torch.ones(64) * 2
    assert not w.use.cuda and w.use.cpu_ops and "CPU tensors only" in w.use.why
    assert detect(x, "cpu", w.use)[0] == "none"
    with watch() as w:  # work the mode cannot see (a C extension): the allocator's counter moved
        cuda_initialised["n"] += 3
    assert w.use.cuda and "3 CUDA allocation(s)" in w.use.why
    assert detect(None, "cpu", w.use) == ("cuda", w.use.why)
    with watch() as w:  # pure Python: nothing on any device
        sum(range(100))
    assert not w.use.cuda and not w.use.cpu_ops


def test_with_torch_compile_in_play_the_watch_installs_no_mode(cuda_initialised, monkeypatch) -> None:
    # Dynamo guards on the function-mode stack: a mode around the cold call alone would make the next
    # call recompile. The allocation counter still tells.
    import sys
    import types

    from torch.overrides import _get_current_function_mode_stack

    from perfmagic.core.devicework import watch

    monkeypatch.setitem(sys.modules, "torch._dynamo", types.ModuleType("torch._dynamo"))
    seen = []
    with watch() as w:
        seen.append(len(_get_current_function_mode_stack()))
        cuda_initialised["n"] += 1
    assert seen == [0] and w.use.cuda and "1 CUDA allocation(s)" in w.use.why


def test_dynamo_imported_but_nothing_compiled_keeps_the_mode(cuda_initialised, monkeypatch) -> None:
    # many libraries import torch._dynamo; only compiled code makes the mode a recompile hazard. Seen on
    # an H100: with Dynamo merely imported, a mixed CPU/CUDA cell lost its "mixed cell" note
    import collections
    import sys
    import types

    from torch.overrides import _get_current_function_mode_stack

    from perfmagic.core.devicework import watch

    fake = types.ModuleType("torch._dynamo")
    counters = collections.defaultdict(collections.Counter)
    fake.utils = types.SimpleNamespace(counters=counters)
    monkeypatch.setitem(sys.modules, "torch._dynamo", fake)
    seen = []
    with watch() as w:
        seen.append(len(_get_current_function_mode_stack()))
        torch.ones(4) + 1
    assert seen == [1] and w.use.cpu_ops
    counters["stats"]["unique_graphs"] += 1  # now something was compiled: no mode
    with watch() as w:
        seen.append(len(_get_current_function_mode_stack()))
    assert seen == [1, 0]


def test_a_kernel_no_op_or_allocation_shows_is_seen_on_the_stream(cuda_initialised, monkeypatch) -> None:
    # torch.cuda._sleep or an extension's own launch: no torch op, no allocation; the stream is still busy
    import types

    from perfmagic.core.devicework import watch

    state = {"busy": False}
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: state.update(busy=False))
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a, **k: types.SimpleNamespace(
        query=lambda: not state["busy"]))
    state["busy"] = True  # an earlier cell's queued work: waited for before the call, not the call's
    with watch() as w:
        sum(range(10))
    assert not w.use.cuda, w.use.why
    with watch() as w:
        state["busy"] = True  # the call launched a kernel
    assert w.use.cuda and "left kernels running on the CUDA stream" in w.use.why


def test_a_cpu_cell_after_cuda_is_a_cpu_measurement(cuda_initialised) -> None:
    import perfmagic

    ns = {"torch": torch, "a": torch.randn(64, 64)}
    r = perfmagic.bench("a @ a", globals=ns, capture_env=False)
    assert r.sync == "none" and r.device == "cpu", (r.sync, r.device, r.notes)
    assert any("this cell did not use it" in n for n in r.notes), r.notes
    assert r.memory is not None and r.memory.cuda_peak_bytes is None   # host memory, not a CUDA 0 B


def test_estimate_of_a_cpu_job_after_cuda_measures_ram_and_gates_on_it(cuda_initialised, monkeypatch) -> None:
    # 40 MB of RAM per run: before, the job was taken for CUDA work, its peak read 0 B and the gate asked
    # the GPU for room
    import perfmagic
    from perfmagic.estimation import gate as gate_mod

    asked = []
    real = gate_mod.available_memory
    monkeypatch.setattr(gate_mod, "available_memory", lambda d: (asked.append(d), real(d))[1])
    code = "b = bytearray(n)\nb[::4096] = b'x' * len(range(0, n, 4096))\ndel b"
    r = perfmagic.estimate(code, n=40_000_000, globals={}, budget=1, max_fraction=1.0)
    assert r.device == "cpu" and r.memory_source == "rss", (r.device, r.memory_source)
    assert r.peak_bytes is not None and r.peak_bytes > 20e6, r.text()
    assert asked and set(asked) == {"cpu"}, asked  # the gate (and the measuring's memory stop) asked the host


def test_memory_of_a_cpu_cell_after_cuda_reports_the_host(cuda_initialised, monkeypatch) -> None:
    from perfmagic.profile import memory as memmod

    # the sampler would read CUDA counters (the process has it initialised): stand them in at zero
    for name in ("memory_allocated", "memory_reserved", "max_memory_allocated", "max_memory_reserved"):
        monkeypatch.setattr(torch.cuda, name, lambda *a, **k: 0)
    for name in ("synchronize", "reset_peak_memory_stats"):
        monkeypatch.setattr(torch.cuda, name, lambda *a, **k: None)
    res, exc = memmod.run_memory("b = bytearray(30_000_000)\nb[::4096] = b'x' * len(range(0, 30_000_000, 4096))",
                                 globals={}, trace="off")
    assert exc is None
    assert res.device == "cpu" and not res.cuda_allocated_bytes, (res.device, res.notes)
    assert res.peak_bytes is not None and res.peak_bytes > 20e6, res.text()
    assert any("host memory" in n for n in res.notes)


def test_roofs_follow_the_device_the_cell_ran_on(monkeypatch) -> None:
    # the magic used to fetch the roofs before timing (auto -> the CPU's); now roofline() asks for the
    # roofs of the device the timing ran on
    from perfmagic.roofs import ceilings as ceil_mod
    from perfmagic.roofs import roofline as rl
    from perfmagic.timing import bench as bench_mod

    real_bench = bench_mod.bench
    asked = []

    def bench_on_cuda(*a, **k):
        import dataclasses

        return dataclasses.replace(real_bench(*a, **k), device="cuda:0")

    def fake_ceilings(device, **k):
        asked.append(device)
        raise RuntimeError("stop here")

    monkeypatch.setattr(bench_mod, "bench", bench_on_cuda)
    monkeypatch.setattr(ceil_mod, "ceilings", fake_ceilings)
    with pytest.raises(RuntimeError, match="stop here"):
        rl.roofline("time.sleep(0.0005)", globals={"time": time}, flops=1e6, bytes=1e6, budget=0.2)
    assert asked == ["cuda:0"]


def test_the_roofline_magic_does_not_choose_roofs_before_timing(shell, roofs, monkeypatch) -> None:
    from perfmagic.magics import _roofline

    monkeypatch.setattr(_roofline.RooflineMagics, "_ceilings",
                        lambda self, args: pytest.fail("roofs fetched before the cell ran (device auto)"))
    from perfmagic.roofs import ceilings as ceil_mod

    real = ceil_mod.ceilings
    asked = []
    monkeypatch.setattr(ceil_mod, "ceilings", lambda device="cpu", **k: (asked.append(device), real(device, **k))[1])
    shell.run("import time")
    res = shell.run("%%roofline --flops 1e6 --bytes 1e6 -b 0.2 --no-plot\ntime.sleep(0.0005)\n")
    assert res.error_in_exec is None, res.error_in_exec
    assert asked and set(asked) == {"cpu"}, asked  # the gate (and the measuring's memory stop) asked the host


def test_nccl_needs_a_gpu_per_local_rank(monkeypatch) -> None:
    from perfmagic.ranks import distributed as d

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    ok, why = d._gpus_per_rank(torch)
    assert not ok and why == "1 GPU(s) visible for 2 rank(s) on this machine"
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert d._gpus_per_rank(torch)[0]


def test_a_cell_that_raises_under_the_watch_propagates_and_leaves_no_mode(cuda_initialised) -> None:
    import perfmagic
    from torch.overrides import _get_current_function_mode_stack

    with pytest.raises(ZeroDivisionError):
        perfmagic.bench("torch.ones(2) / 0 if False else 1 / 0", globals={"torch": torch}, memory=False)
    assert not _get_current_function_mode_stack()


def test_interrupt_under_the_watch_leaves_no_mode(cuda_initialised) -> None:
    from torch.overrides import _get_current_function_mode_stack

    from perfmagic.core.devicework import watch

    with pytest.raises(KeyboardInterrupt):
        with watch():
            torch.ones(2) + 1
            raise KeyboardInterrupt
    assert not _get_current_function_mode_stack()
