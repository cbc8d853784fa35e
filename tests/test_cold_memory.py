"""First touch of fresh memory on a VM whose host takes freed memory back (issue 29: model the break,
do not widen for it): the huge-page counter, the first-touch probe, and the estimate that adds the cost of
the full run's cold memory to its prediction and interval."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from typing import Any

import pytest

from perfmagic import estimate
from perfmagic.core import memory as core_memory
from perfmagic.core.memory import FreshTouch, huge_page_faults, probe_fresh_memory, vm_pages
from perfmagic.errors import BenchInterrupted
from perfmagic.estimation.estimate import Point, analyse_scaling
from perfmagic.estimation.fit import fresh_every_run, warm_runs

MiB = 2**20
SIZES = (10**5, 2 * 10**5, 4 * 10**5, 8 * 10**5, 16 * 10**5)


def _points(huge: bool) -> list[Point]:
    """Planted: 1 ms per 1000 elements, 8 B per element of RSS peak; each run touched its peak in fresh huge
    pages (NumPy-like)."""
    return [Point(n, (1e-3 * n / 1000,), (8 * n,), huge_bytes=8 * n if huge else 0) for n in SIZES]


# 10 warm chunks of 16 MiB at 0.1 ns/byte, then 4 cold ones at 1.5-2.5 ns/byte: 224 MiB touched
PROBE = FreshTouch(16 * MiB, (0.10,) * 10 + (1.5, 2.0, 2.0, 2.5), "cold chunks")


def test_the_probe_record_reads_warm_and_cold_memory() -> None:
    assert PROBE.warm_ns == pytest.approx(0.10)
    assert PROBE.warm_bytes == 160 * MiB and PROBE.touched_bytes == 224 * MiB and PROBE.edge == 10
    assert PROBE.cold_ns == (1.5, 2.0, 2.0, 2.5)
    warm = FreshTouch(16 * MiB, (0.12, 0.10, 0.11), "size")
    assert warm.cold_ns == () and warm.edge is None and warm.warm_bytes == warm.touched_bytes == 48 * MiB
    # a lone dear chunk among warm ones is not the edge; the walk's last chunk, cold, is
    lone = FreshTouch(16 * MiB, (1.1, 0.1, 0.1, 0.1, 2.0, 2.2), "cold chunks")
    assert lone.edge == 4 and lone.warm_bytes == 64 * MiB and lone.cold_ns == (2.0, 2.2)
    assert FreshTouch(16 * MiB, (0.1, 0.1, 2.0), "cold chunks").edge == 2


def test_the_cold_memory_of_the_full_run_is_in_the_prediction_and_the_interval() -> None:
    N = 10**8  # peak 800 MB: 800 MB - 224 MiB is cold now, all 800 MB once the host takes back what is free
    plain = analyse_scaling(_points(True), N=N, host_reclaims=True)
    r = analyse_scaling(_points(True), N=N, host_reclaims=True, fresh=PROBE)
    now = 8e8 - 224 * MiB
    # the cold rates above the warm one: 1.4, 1.9, 1.9, 2.4 ns/byte, mean 1.9
    assert r.predicted_s == pytest.approx(plain.predicted_s + now * 1.9e-9, rel=1e-6)  # cold now, mean rate
    assert r.low_s == pytest.approx(plain.low_s + now * 1.4e-9, rel=1e-6)  # ... at the cheapest chunk's rate
    assert r.high_s == pytest.approx(plain.high_s + 8e8 * 1.9e-9, rel=1e-6)  # all of it cold, later
    assert r.reliable and r.fresh_touch == PROBE
    kinds = [getattr(w, "kind", "") for w in r.warnings]
    assert "estimate.cold-memory" in kinds and "estimate.fresh-memory" not in kinds
    text = " ".join(r.text().split())
    assert "a first-touch probe found 160.0 MiB still backed (0.10 ns/byte), then memory at 1.50–2.50 " \
        "ns/byte" in text, text
    assert "pays about 1.074 s for 538.9 MiB" in text and "up to 1.52 s" in text and "Reusing arrays" in text
    assert "threads at once" not in text
    # the plain estimate warned instead, and its interval did not move
    assert "estimate.fresh-memory" in [getattr(w, "kind", "") for w in plain.warnings]
    # the probe is kept with the result, and read back from its record
    rec = r.to_record(magic="estimate")
    back = type(r).from_record(replace(rec, payload=json.loads(json.dumps(rec.payload))))
    assert back.fresh_touch == PROBE and back.points[-1].huge_bytes == 8 * SIZES[-1]


def test_runs_on_several_threads_take_the_faults_in_parallel(monkeypatch: Any) -> None:
    from perfmagic.estimation import fit

    monkeypatch.setattr(fit, "cores", lambda: 2)
    N = 10**8
    two = [replace(p, cpu_share=2.0) for p in _points(True)]
    plain = analyse_scaling(two, N=N, host_reclaims=True)
    r = analyse_scaling(two, N=N, host_reclaims=True, fresh=PROBE)
    assert r.predicted_s == pytest.approx(plain.predicted_s + (8e8 - 224 * MiB) * 1.9e-9 / 2, rel=1e-6)
    assert "taken on 2.0 threads at once" in " ".join(r.text().split())
    # no more faults at once than there are cores: a CPU time 2.25× the wall time on 2 cores counts as 2
    more = [replace(p, cpu_share=2.25) for p in _points(True)]
    r = analyse_scaling(more, N=N, host_reclaims=True, fresh=PROBE)
    plain = analyse_scaling(more, N=N, host_reclaims=True)
    assert r.predicted_s == pytest.approx(plain.predicted_s + (8e8 - 224 * MiB) * 1.9e-9 / 2, rel=1e-6)


def test_the_first_touch_of_cold_memory_is_taken_out_of_the_runs() -> None:
    # planted: the first run of each size found its 8 B/element cold (+2.4 ns/byte), the second did not
    pts = [Point(n, (1e-8 * n + 8 * n * 2.4e-9, 1e-8 * n), (8 * n,), huge_bytes=8 * n) for n in SIZES]
    warm = warm_runs(pts, PROBE)
    assert all(w.times[0] == pytest.approx(w.times[1]) for w in warm)
    r = analyse_scaling(pts, N=10**8, host_reclaims=True, fresh=PROBE)
    assert r.run_noise == pytest.approx(0.04)  # the floor: no run-to-run variation left
    noisy = analyse_scaling(pts, N=10**8, host_reclaims=True)
    assert noisy.run_noise > 0.1  # without the probe, the cold first runs read as variation
    # a run slower than cold memory can explain keeps the rest of its excess
    slow = [replace(p, times=(p.times[1] * 3 + 8 * p.n * 2.4e-9, p.times[1])) for p in pts]
    assert all(w.times[0] > w.times[1] * 2.5 for w in warm_runs(slow, PROBE))


def test_no_cold_term_without_fresh_pages_without_cold_chunks_or_without_a_reclaiming_host() -> None:
    N = 10**8
    reused = [replace(p, huge_bytes=0, small_bytes=0) for p in _points(True)]  # memory reused between runs
    kept_heap = analyse_scaling(reused, N=N, host_reclaims=True, fresh=PROBE)
    assert not fresh_every_run(reused) and fresh_every_run(_points(True))
    assert fresh_every_run([replace(p, huge_bytes=0, small_bytes=8 * p.n) for p in _points(True)])
    assert "estimate.fresh-memory" in [getattr(w, "kind", "") for w in kept_heap.warnings]
    assert kept_heap.predicted_s == analyse_scaling(reused, N=N).predicted_s
    warm = FreshTouch(16 * MiB, (0.1,) * 20, "time")
    all_warm = analyse_scaling(_points(True), N=N, host_reclaims=True, fresh=warm)
    assert all_warm.predicted_s == analyse_scaling(_points(True), N=N).predicted_s
    kept = analyse_scaling(_points(True), N=N, host_reclaims=False, fresh=PROBE)
    assert kept.predicted_s == analyse_scaling(_points(True), N=N).predicted_s and not kept.warnings
    near = analyse_scaling(_points(True), N=2 * 10**7, host_reclaims=True, fresh=PROBE)  # within 256 MiB
    assert near.predicted_s == analyse_scaling(_points(True), N=2 * 10**7).predicted_s


def test_the_page_counters_read_vmstat(tmp_path: Any) -> None:
    f = tmp_path / "vmstat"
    f.write_text("nr_free_pages 12\npgalloc_dma 1\npgalloc_dma32 20\npgalloc_normal 300\npgalloc_movable 0\n"
                 "thp_fault_alloc 4077\nthp_fault_fallback 3\n")
    assert vm_pages(str(f)) == (321, 4077) and huge_page_faults(str(f)) == 4077
    f.write_text("nr_free_pages 12\n")
    assert vm_pages(str(f)) == (None, None)
    assert vm_pages(str(tmp_path / "absent")) == (None, None)


def test_a_file_written_in_every_run_counts_its_page_cache() -> None:
    # planted: the runs write 4 KiB per element into a file (page cache), their RSS peak is 1 MiB
    pts = [Point(n, (1e-5 * n,), (2**20,), huge_bytes=0, small_bytes=0, alloc_bytes=4096 * n)
           for n in (1024, 2048, 4096, 8192)]
    assert fresh_every_run(pts)
    r = analyse_scaling(pts, N=300_000, host_reclaims=True)  # a 1.2 GB file
    w = [x for x in r.warnings if getattr(x, "kind", "") == "estimate.fresh-memory"]
    assert len(w) == 1 and w[0]["cache"] == pytest.approx(4096 * 300_000, rel=0.01), r.warnings
    c = analyse_scaling(pts, N=300_000, host_reclaims=True, fresh=PROBE)
    # the page cache is in 4 KiB pages: the huge pages the probe walked do not make it warm (its 1 MiB of RSS
    # is within them); the probe read no free blocks below the reporting order, so all of it is cold
    assert c.predicted_s == pytest.approx(r.predicted_s + 4096 * 300_000 * 1.9e-9, rel=1e-3)
    assert "of it the page cache of the files it writes" in " ".join(c.text().split())


def test_the_probe_touches_fresh_memory_chunk_by_chunk() -> None:
    p = probe_fresh_memory(4 * MiB, chunk=MiB)
    assert p is not None and len(p.ns_per_byte) == 4 and p.stopped in ("size", "cold chunks")
    # ... and reads the free blocks the host never takes back, where the kernel shows them
    import os

    assert (p.small_warm is None) == (not os.path.exists("/proc/buddyinfo"))
    assert all(0 < x < 1e3 for x in p.ns_per_byte)  # a first write costs well under a microsecond a byte
    assert probe_fresh_memory(MiB // 2, chunk=MiB) is None  # below one chunk: nothing to time
    once = probe_fresh_memory(64 * MiB, time_s=0.0, chunk=MiB)
    assert once is not None and once.stopped == "time" and len(once.ns_per_byte) == 1


def _planted_machine(monkeypatch: Any, probe: Any) -> dict[str, int]:
    """A VM that reclaims freed memory, whose huge-page counter grows by 1000 pages (2 GB) per read (every
    run then touched fresh huge pages), and whose first-touch probe is planted."""
    calls = {"probe": 0}
    counter = itertools.count(0, 1000)
    monkeypatch.setattr(core_memory, "host_reclaims_freed_memory", lambda *a: True)
    monkeypatch.setattr(core_memory, "vm_pages", lambda *a: (None, next(counter)))

    def planted(max_bytes: int, time_s: float = 1.0, **kw: Any) -> Any:
        calls["probe"] += 1
        calls["max_bytes"] = max_bytes
        return probe()
    monkeypatch.setattr(core_memory, "probe_fresh_memory", planted)
    return calls


def test_an_estimate_probes_when_the_full_run_maps_far_more_fresh_memory(monkeypatch: Any) -> None:
    calls = _planted_machine(monkeypatch, lambda: PROBE)
    code = "b = bytearray(n)\nb[::4096] = b'x' * len(range(0, n, 4096))\ndel b"
    r = estimate(code, n=4 * 10**9, budget=1.0)  # sizes up to tens of MB; the full run maps 4 GB
    assert r.points[-1].huge_bytes == 1000 * 2 * MiB
    # at most the full run's peak as known when it ran (the sizes measured after it move the fit by RSS noise:
    # 0.8 MB of 4 GB in one run)
    assert calls["probe"] == 1 and calls["max_bytes"] <= 1.01 * (r.peak_bytes or 0) + 1, (calls, r.peak_bytes)
    assert r.fresh_touch == PROBE
    assert "estimate.cold-memory" in [getattr(w, "kind", "") for w in r.warnings], r.text()
    # a small full run (within 256 MiB of the sizes measured) is not probed
    small = estimate(code, n=2 * 10**6, budget=0.3)
    assert calls["probe"] == 1 and small.fresh_touch is None


def test_ctrl_c_in_the_probe_keeps_the_sizes_measured(monkeypatch: Any) -> None:
    def stop() -> Any:
        raise KeyboardInterrupt
    _planted_machine(monkeypatch, stop)
    code = "b = bytearray(n)\nb[::4096] = b'x' * len(range(0, n, 4096))\ndel b"
    with pytest.raises(BenchInterrupted) as ei:
        estimate(code, n=4 * 10**9, budget=1.0)
    r = ei.value.result
    assert r is not None and r.status == "interrupted" and len(r.points) >= 3 and r.fresh_touch is None


def test_an_error_in_the_cell_is_raised_before_any_probe(monkeypatch: Any) -> None:
    calls = _planted_machine(monkeypatch, lambda: PROBE)
    with pytest.raises(ZeroDivisionError):
        estimate("x = bytearray(n)\n1 / 0", n=4 * 10**9, budget=0.5)
    assert calls["probe"] == 0


def test_a_walk_that_starts_in_cold_memory_is_read_against_the_warm_reference() -> None:
    all_cold = FreshTouch(16 * MiB, (2.1, 2.7, 2.7, 2.6), "cold chunks", warm_ref=0.12)
    assert all_cold.warm_ns == pytest.approx(0.12) and all_cold.edge == 0 and all_cold.warm_bytes == 0
    assert all_cold.cold_ns == (2.1, 2.7, 2.7, 2.6)
    # without the reference, nothing would read as cold
    assert FreshTouch(16 * MiB, (2.1, 2.7, 2.7, 2.6), "time").cold_ns == ()
    # a reference merely cheaper than every chunk is not the warm rate: 0.05 ns/byte beside warm chunks of
    # 0.14-0.24 read those as cold ("cold memory at 0.21 ns/byte"); the chunks' own cheapest is the rate
    warm = FreshTouch(16 * MiB, (0.21, 0.155, 0.16, 0.244, 0.18, 1.11, 0.14, 0.2147), "size", warm_ref=0.05)
    assert warm.warm_ns == pytest.approx(0.14) and warm.cold_ns == () and warm.edge is None


def test_the_probe_counts_cold_chunks_against_the_warm_rate_of_the_chunks_so_far(monkeypatch: Any) -> None:
    """The probe's own stopping rule reads chunks as FreshTouch does: with a reference far cheaper than its warm
    chunks (0.05 against 0.14-0.24 ns/byte), it walks on instead of stopping at four "cold" warm chunks."""
    ref = 0.05e-9 * core_memory.REF_BYTES  # the reference's two touches, then the walk's chunks
    costs = [x * 1e-9 * 16 * MiB for x in (0.21, 0.155, 0.244, 0.22, 0.23, 0.24, 0.16, 2.5, 2.6, 2.4, 2.7)]
    # perf_counter in the order the probe reads it: around each reference touch, once for its deadline,
    # then around each chunk
    calls = iter([0.0, ref, 0.0, ref, 0.0] + [v for c in costs for v in (0.0, c)])
    monkeypatch.setattr("time.perf_counter", lambda: next(calls))
    t = probe_fresh_memory(20 * 16 * MiB, time_s=1e9)
    assert t is not None and t.stopped == "cold chunks" and len(t.ns_per_byte) == 11, t
    assert t.warm_ns == pytest.approx(0.155, rel=0.01) and t.edge == 7


def test_memory_a_measured_size_just_freed_may_be_warm_for_the_full_run() -> None:
    """The probe found 96 MiB warm, yet a repeat of the largest size (417 MiB, freed just before) ran warm
    right after it (120 ms against 756 ms): the low end counts as cold only what lies beyond the largest
    footprint measured, where that is more than the probe found warm."""
    sizes = (5 * 10**6, 10**7, 2 * 10**7, 4 * 10**7, 5 * 10**7)  # 8 B per element: 400 MB at the top
    pts = [Point(n, (1e-3 * n / 1000,), (8 * n,), huge_bytes=8 * n) for n in sizes]
    probe = FreshTouch(16 * MiB, (0.10, 0.10, 1.5, 2.0, 2.0, 2.5), "cold chunks")  # 32 MiB warm, 96 MiB touched
    N = 10**8
    plain = analyse_scaling(pts, N=N, host_reclaims=True)
    r = analyse_scaling(pts, N=N, host_reclaims=True, fresh=probe)
    now = 8e8 - 96 * MiB
    unseen = 4e8 - 32 * MiB  # the largest footprint measured, beyond what the probe found warm
    assert r.predicted_s == pytest.approx(plain.predicted_s + now * 1.9e-9, rel=1e-6)
    assert r.low_s == pytest.approx(plain.low_s + (now - unseen) * 1.4e-9, rel=1e-6)
    assert r.high_s == pytest.approx(plain.high_s + 8e8 * 1.9e-9, rel=1e-6)


def test_unreported_free_blocks_are_read_from_buddyinfo(tmp_path: Any) -> None:
    """Free page reporting reports only free blocks of its order and up: the smaller free blocks, which the
    host never took back, are summed from /proc/buddyinfo (orders below the reporting order)."""
    info = tmp_path / "buddyinfo"
    info.write_text("Node 0, zone      DMA      1      0      0      0      0      0      0      0      0      1      3\n"
                    "Node 0, zone   Normal    100     10      0      0      0      0      0      0      1      7      9\n")
    order = tmp_path / "order"
    order.write_text("9\n")
    page = 4096
    want = (1 + 100) * page + 10 * 2 * page + 1 * 256 * page  # orders 0, 1 and 8; 9 and 10 are reported
    assert core_memory.unreported_free_bytes(str(info), str(order)) == want
    order.write_text("10\n")  # a larger reporting order leaves the order-9 blocks unreported too
    assert core_memory.unreported_free_bytes(str(info), str(order)) == want + (1 + 7) * 512 * page
    # the kernel's default order where the parameter cannot be read; None where buddyinfo cannot
    assert core_memory.unreported_free_bytes(str(info), str(tmp_path / "none")) == want
    assert core_memory.unreported_free_bytes(str(tmp_path / "none"), str(order)) is None


def _io_points() -> list[Point]:
    """Planted: a file written in 4 KiB writes, 4 µs and 4 KiB of page cache per write, 1 MiB of RSS; no
    pages of its own (alloc_bytes: all the kernel handed out, the page cache)."""
    return [Point(n, (4e-6 * n,), (MiB,), huge_bytes=0, small_bytes=0, alloc_bytes=4096 * n)
            for n in (3072, 6144, 12288, 24576, 49152)]


def test_page_cache_within_the_unreported_free_blocks_costs_no_cold_faults() -> None:
    """A file write of ~950 MiB in 4 KiB writes took 1.6-1.8 s, as the warm runs said; the cold-memory term
    had added 2.1 s for its page cache (2.2x over). 4 KiB pages come from the free blocks below the reporting
    order first, which the host never took back: with 2 GiB of them, none of the page cache is cold; with
    none, all of it is, as before."""
    N = 242_796
    pts = _io_points()
    plain = analyse_scaling(pts, N=N, host_reclaims=True)
    assert "estimate.fresh-memory" in [getattr(w, "kind", "") for w in plain.warnings]
    pooled = analyse_scaling(pts, N=N, host_reclaims=True, fresh=replace(PROBE, small_warm=2 * 2**30))
    assert pooled.predicted_s == pytest.approx(plain.predicted_s, rel=1e-6)
    assert pooled.high_s == pytest.approx(plain.high_s, abs=0.01)  # (its 1 MiB of RSS may be cold later)
    text = " ".join(pooled.text().split())
    assert "come warm from free blocks too small for the host to take back" in text, text
    # nothing cold now, ~2 ms later (its 1 MiB of RSS) against ~1 s: a note that says so, not a warning
    # that prices "0 ns for 0 B" (the I/O workload of bench_estimate printed that as a warning)
    assert "estimate.cold-memory" not in [getattr(w, "kind", "") for w in pooled.warnings]
    assert "estimate.cold-memory" in [getattr(n, "kind", "") for n in pooled.notes]
    assert "none of it is cold now" in text and "0 B of it" not in text, text
    none = analyse_scaling(pts, N=N, host_reclaims=True, fresh=replace(PROBE, small_warm=0))
    cache = 4096 * N  # page cache of the full run, at the growth of the largest sizes
    assert none.predicted_s == pytest.approx(plain.predicted_s + cache * 1.9e-9, rel=0.02)
    unknown = analyse_scaling(pts, N=N, host_reclaims=True, fresh=PROBE)  # no pool read: as cold as before
    assert unknown.predicted_s == pytest.approx(none.predicted_s, rel=1e-6)
    # half of it fits: the other half is cold now and later
    half = analyse_scaling(pts, N=N, host_reclaims=True, fresh=replace(PROBE, small_warm=cache // 2))
    assert half.predicted_s == pytest.approx(plain.predicted_s + cache / 2 * 1.9e-9, rel=0.02)
    assert half.high_s == pytest.approx(plain.high_s + (cache / 2 + MiB) * 1.9e-9, rel=0.02)


def test_huge_pages_stay_cold_whatever_the_unreported_blocks() -> None:
    """Transparent huge pages (NumPy arrays) come from the 2 MiB blocks the host takes back: the small free
    blocks do not make them warm."""
    N = 10**8
    a = analyse_scaling(_points(True), N=N, host_reclaims=True, fresh=PROBE)
    b = analyse_scaling(_points(True), N=N, host_reclaims=True, fresh=replace(PROBE, small_warm=4 * 2**30))
    assert (a.predicted_s, a.low_s, a.high_s) == (b.predicted_s, b.low_s, b.high_s)


def test_no_first_touch_is_priced_for_memory_the_machine_does_not_have(monkeypatch: Any) -> None:
    """Notebook 05 (n=10**12 of a bytearray, 22 GiB available): the gate said WILL NOT FIT and "no time
    estimate", and a warning below said the full run pays 35.7 min for the page faults of 930 GiB "in the
    prediction". Where the gate finds more memory needed than there is, no first touch is probed or
    priced; where the memory fits, the cold-memory warning stays."""
    from perfmagic.estimation import gate as gate_mod
    from perfmagic.estimation.gate import gate

    r = analyse_scaling(_points(True), N=10**11, host_reclaims=True, fresh=PROBE)  # 800 GB at 8 B per element
    assert "estimate.cold-memory" in [getattr(w, "kind", "") for w in r.warnings]
    out = gate(r, None, available=256 * MiB)
    kinds = [getattr(w, "kind", "") for w in out.warnings]
    assert out.verdict == "will not fit" and not {"estimate.cold-memory", "estimate.fresh-memory"} & set(kinds)
    assert "fresh memory" not in out.text() and "WILL NOT FIT" in out.headline()
    room = gate(r, None, available=10**15)
    assert "estimate.cold-memory" in [getattr(w, "kind", "") for w in room.warnings]
    # the whole estimate: the probe is not run (it would spend the budget pricing what cannot happen)
    calls = _planted_machine(monkeypatch, lambda: PROBE)
    monkeypatch.setattr(gate_mod, "available_memory", lambda device: (16 * 2**30, "available RAM"))
    code = "b = bytearray(n)\nb[::4096] = b'x' * len(range(0, n, 4096))\ndel b"
    big = estimate(code, n=10**13, budget=1.0)
    assert calls["probe"] == 0 and big.fresh_touch is None
    assert big.verdict == "will not fit" and "fresh memory" not in big.text(), big.text()


def test_what_other_processes_allocate_is_not_this_runs_page_cache(monkeypatch: Any, tmp_path: Any) -> None:
    """The machine-wide page counters also count other processes' allocations: notebook 05's pure-Python
    n² loop, run beside another notebook, was said to fill 3.6 GiB of page cache "of the files it writes"
    and priced 6.3 s for its first touch. A run's page cache is at most what it read and wrote
    (/proc/self/io): planted, another process allocating 1 GiB/s beside a loop that touches no file."""
    import time as _time

    from perfmagic.estimation.runner import _Runner

    import os

    if not os.path.exists("/proc/self/io") or core_memory.vm_pages()[0] is None:
        pytest.skip("no /proc/self/io or /proc/vmstat here")
    t0 = _time.perf_counter()
    monkeypatch.setattr(core_memory, "vm_pages", lambda *a: (int((_time.perf_counter() - t0) * 2**30) // 4096, 0))
    loop = _Runner("s = 0\nfor i in range(n):\n    s += i", "n", {}, "cpu", "<loop>")
    loop.once(300_000, memory=True)
    huge, small, alloc = loop.last_fresh
    assert alloc is not None and alloc <= (small or 0) + (huge or 0) + 2**20, loop.last_fresh  # not ~10 MiB+
    # ... and their huge pages (thp_fault_alloc is machine-wide too): at most this process's own faults
    thp = itertools.count(0, 1000)
    monkeypatch.setattr(core_memory, "vm_pages", lambda *a: (0, next(thp)))
    loop.once(300_000, memory=True)
    assert loop.last_fresh[0] is not None and loop.last_fresh[0] <= 64 * 2 * MiB, loop.last_fresh  # not 2,000 MiB
    monkeypatch.setattr(core_memory, "vm_pages", lambda *a: (int((_time.perf_counter() - t0) * 2**30) // 4096, 0))
    monkeypatch.setattr(core_memory, "host_reclaims_freed_memory", lambda *a: True)
    r = estimate("s = 0\nfor i in range(n):\n    s += i", n=3 * 10**8, budget=1.0)
    assert "estimate.fresh-memory" not in [getattr(w, "kind", "") for w in r.warnings], r.text()
    assert "page cache" not in r.text()
    # a run that writes a file keeps its page cache: what it wrote bounds it, and the kernel counted it
    path = tmp_path / "f.bin"
    writer = _Runner("with open(path, 'wb') as f:\n    for _ in range(n):\n        f.write(b'x' * 4096)", "n",
                     {"path": str(path)}, "cpu", "<writer>")
    monkeypatch.setattr(core_memory, "vm_pages", lambda *a: (int((_time.perf_counter() - t0) * 2**40) // 4096, 0))
    writer.once(2000, memory=True)  # (others allocating 1 TiB/s: the cap, not their pages, is the answer)
    assert writer.last_fresh[2] >= 2000 * 4096, writer.last_fresh
