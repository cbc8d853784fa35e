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
    return 2_000_000 / _event_time(2_000_000, reps=5)


def _event_time(cycles: int, reps: int = 30) -> float:
    """The planted kernel's duration, timed apart from perfmagic: one call between two events, median.
    An untimed lead kernel keeps the stream busy while the host launches the timed one, so the start
    event is passed when the lead ends, not before the launch (on an H100 the launch added 4-5 us:
    a 101 us kernel read 105.8 us)."""
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(cycles)
        s.record()
        torch.cuda._sleep(cycles)
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) / 1e3)
    return statistics.median(ts)


@pytest.mark.parametrize("pace", ["isolated", "sustained"])
@pytest.mark.parametrize("target_s", [100e-6, 2e-3])
def test_planted_gpu_sleep_is_timed_within_2_percent(target_s, pace, monkeypatch) -> None:
    from perfmagic.core import sync as sync_mod

    monkeypatch.setattr(sync_mod.CudaSync, "pace", pace)
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
    # the same check as above, with the sync taken out: it must fail (a CudaSync that timed launches).
    # Few samples and no warmup: over a long run the launch queue fills (about a thousand launches) and
    # then each launch waits for the device, so timed launches converge on the device's pace (seen on an
    # H100: 1.959 ms against 1.997 ms) and a long run could not tell the sync was gone
    from perfmagic.core import sync as sync_mod

    monkeypatch.setattr(sync_mod.CudaSync, "pace", "isolated")  # the path whose sync is taken out below
    torch.zeros(1, device="cuda")
    cycles = int(2e-3 * _cycles_per_second())
    truth = _event_time(cycles, reps=10)
    short = {"memory": False, "warmup": 0, "min_samples": 3, "max_samples": 5}
    r = perfmagic.bench("torch.cuda._sleep(c)", globals={"torch": torch, "c": cycles}, **short)
    assert r.sync == "cuda" and abs(r.median / truth - 1) <= 0.05, (r.median, truth, r.notes)
    monkeypatch.setattr(sync_mod.CudaSync, "after", lambda self, v: None)
    monkeypatch.setattr(sync_mod.CudaSync, "elapsed", lambda self, tok: None)
    monkeypatch.setattr(sync_mod.CudaSync, "finish", lambda self: None)
    broken = perfmagic.bench("torch.cuda._sleep(c)", globals={"torch": torch, "c": cycles}, **short)
    torch.cuda.synchronize()
    assert not abs(broken.median / truth - 1) <= 0.05, (broken.median, truth)


def test_sustained_pace_keeps_the_device_busy(monkeypatch) -> None:
    # sustained: the next block is launched before the last is awaited, so a host pause between samples
    # (the engine's statistics) does not leave the device idle; isolated: it does. 1 ms kernels, 0.5 ms pauses.
    import time

    from perfmagic.core import sync as sync_mod
    from perfmagic.core.subject import Subject

    torch.zeros(1, device="cuda")
    cycles = int(1e-3 * _cycles_per_second())
    truth = _event_time(cycles, reps=10)
    share = {}
    for pace in ("isolated", "sustained"):
        monkeypatch.setattr(sync_mod.CudaSync, "pace", pace)
        subj = Subject("torch.cuda._sleep(c)", "", {"torch": torch, "c": cycles}, "<t>", "cuda", "cuda",
                       time.perf_counter)
        subj.sample()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(40):
            subj.sample()
            time.sleep(0.0005)
        subj.finish()
        wall = time.perf_counter() - t0
        share[pace] = sum(subj.raw[1:]) / wall
        assert abs(statistics.median(subj.raw) / truth - 1) <= 0.03, (pace, statistics.median(subj.raw), truth)
    assert share["sustained"] >= 0.9 and share["isolated"] <= 0.8, share


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
    # %%roofline: the roofs follow the device the cell ran on (a stand-in for the calibration)
    from perfmagic.roofs import ceilings as ceil_mod

    asked: list[str] = []

    def fake_ceilings(device: str = "auto", **kw: object) -> object:
        asked.append(device)
        return ceil_mod.Ceilings(device=device, fingerprint="t", measured_utc="", compute={"float32": 1e12},
                                 bandwidth_Bps=1e11)

    monkeypatch.setattr(ceil_mod, "ceilings", fake_ceilings)
    rl = perfmagic.roofline("a @ a", globals=ns)
    assert asked == ["cpu"] and rl.ceilings.device == "cpu", asked
    perfmagic.roofline("a @ a", globals={"a": torch.randn(1024, 1024, device="cuda")})
    assert asked[1].startswith("cuda"), asked
    mixed = perfmagic.bench("(a @ a).sum().item() + float(b.sum())",
                            globals={"a": torch.randn(512, 512, device="cuda"), "b": torch.randn(512)})
    assert mixed.sync == "cuda" and any("mixed cell" in n for n in mixed.notes), mixed.notes


def test_where_ops_on_cuda_read_the_kernels_time_on_the_device() -> None:
    """``%perf compare --where`` on CUDA code: the ops' table reads each kernel's own time on the device
    (the CUDA timeline, one profiler session per call), and a matmul made 8× the work is named there."""
    from perfmagic.profile.where_ops import profile_ops

    a, b = torch.randn(512, 512, device="cuda"), torch.randn(1024, 1024, device="cuda")

    def run(x: object) -> object:
        def one() -> None:
            x @ x
            torch.cuda.synchronize()
        return one
    o = profile_ops(run(a), run(b), device="cuda", max_s=5.0)
    assert o is not None and o.ok and o.clock == "cuda", o
    named = o.named()
    assert named and named[0].delta_s > 0 and named[0].b_s > 4 * named[0].a_s, o.rows()
    assert not o.funcs  # the device's kernels are not filed by Python function


def test_a_gpu_roof_trial_times_planted_device_time_back_to_back() -> None:
    """The roofs' sustained trial (roofs/kernels.py ``_cuda_sustained``): a planted 200 µs kernel reads its
    own time within 3%, its calls run back to back for the trial's length (not one call), and a trial
    asked for longer runs more calls."""
    from perfmagic.roofs.kernels import SUSTAINED_S, _cuda_sustained

    torch.zeros(1, device="cuda")
    cycles = int(200e-6 * _cycles_per_second())
    truth = _event_time(cycles)
    run = _cuda_sustained("cuda:0")
    t, calls = run(lambda: torch.cuda._sleep(cycles), 0.0)
    assert abs(t / truth - 1) <= 0.03, (t, truth)
    # a burst of SUSTAINED_S, not a single call (its length is planned from one call timed alone, which
    # carries the launch: 211-242 µs for this 200 µs kernel on an H200)
    assert calls >= 0.75 * SUSTAINED_S / truth, calls
    _, more = run(lambda: torch.cuda._sleep(cycles), 2 * SUSTAINED_S)
    assert more >= 1.5 * calls, (more, calls)
