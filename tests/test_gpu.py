"""GPU timing with teeth (issue 28): planted device time, a sync that cannot be dropped unnoticed, and
CPU cells in a process that has CUDA initialised. Skipped without a CUDA device (conftest)."""

from __future__ import annotations

import statistics

import pytest

import perfmagic

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu


def _cycles_per_second() -> float:
    """``torch.cuda._sleep`` spins a number of GPU clock cycles: its rate, from CUDA events."""
    torch.cuda.synchronize()
    rates = []
    for _ in range(5):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.cuda._sleep(2_000_000)
        e.record()
        e.synchronize()
        rates.append(2_000_000 / (s.elapsed_time(e) / 1e3))
    return statistics.median(rates)


def _event_time(cycles: int, reps: int = 30) -> float:
    """The planted kernel's duration, timed apart from perfmagic: one call between two events, median."""
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.cuda._sleep(cycles)
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) / 1e3)
    return statistics.median(ts)


@pytest.mark.parametrize("target_s", [100e-6, 2e-3])
def test_planted_gpu_sleep_is_timed_within_2_percent(target_s) -> None:
    torch.zeros(1, device="cuda")
    cycles = int(target_s * _cycles_per_second())
    before = _event_time(cycles)
    r = perfmagic.bench("torch.cuda._sleep(c)", globals={"torch": torch, "c": cycles}, device="cuda",
                        memory=False, budget=1.0)
    after = _event_time(cycles)
    truth = (before + after) / 2
    assert r.sync == "cuda"
    assert abs(r.median / truth - 1) <= 0.02, (r.median, before, after, r.text())


def test_the_sync_cannot_be_dropped_unnoticed(monkeypatch) -> None:
    # the same check as above, with the sync taken out: it must fail (a CudaSync that timed launches)
    from perfmagic.core import sync as sync_mod

    torch.zeros(1, device="cuda")
    cycles = int(2e-3 * _cycles_per_second())
    truth = _event_time(cycles, reps=10)
    r = perfmagic.bench("torch.cuda._sleep(c)", globals={"torch": torch, "c": cycles}, memory=False, budget=0.5)
    assert r.sync == "cuda" and abs(r.median / truth - 1) <= 0.05
    monkeypatch.setattr(sync_mod.CudaSync, "after", lambda self, v: None)
    monkeypatch.setattr(sync_mod.CudaSync, "elapsed", lambda self, tok: None)
    monkeypatch.setattr(sync_mod.CudaSync, "finish", lambda self: None)
    broken = perfmagic.bench("torch.cuda._sleep(c)", globals={"torch": torch, "c": cycles}, memory=False,
                             budget=0.5)
    torch.cuda.synchronize()
    assert not abs(broken.median / truth - 1) <= 0.05, (broken.median, truth)


def test_cpu_cells_after_cuda_are_cpu_measurements(tmp_path, monkeypatch) -> None:
    torch.zeros(1, device="cuda")  # a notebook's earlier cell used the GPU
    assert torch.cuda.is_initialized()
    ns = {"torch": torch, "a": torch.randn(256, 256)}
    r = perfmagic.bench("a @ a", globals=ns)
    assert r.sync == "none" and r.device == "cpu", r.notes
    assert r.memory is not None and r.memory.cuda_peak_bytes is None
    from perfmagic.profile.memory import run_memory

    m, exc = run_memory("b = bytearray(30_000_000)\nb[::4096] = b'x' * len(range(0, 30_000_000, 4096))",
                        globals={}, trace="off")
    assert exc is None and m.device == "cpu" and m.peak_bytes > 20e6, m.text()
    e = perfmagic.estimate("b = bytearray(n)\nb[::4096] = b'x' * len(range(0, n, 4096))\ndel b", n=40_000_000,
                           globals={}, budget=1, max_fraction=1.0)
    assert e.device == "cpu" and e.memory_source == "rss" and e.peak_bytes > 20e6, e.text()
    g = perfmagic.bench("a @ a", globals={"a": torch.randn(1024, 1024, device="cuda")})
    assert g.sync == "cuda" and g.device.startswith("cuda")
    mixed = perfmagic.bench("(a @ a).sum().item() + float(b.sum())",
                            globals={"a": torch.randn(512, 512, device="cuda"), "b": torch.randn(512)})
    assert mixed.sync == "cuda" and any("mixed cell" in n for n in mixed.notes), mixed.notes
