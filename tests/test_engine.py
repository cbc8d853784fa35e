"""The measurement engine against planted ground truth (sleep, calibrated spin, slow first call)."""

from __future__ import annotations

import gc
import json
import statistics
import time

import pytest

import perfmagic
from perfmagic import BadOptionError, BenchInterrupted, SetupError

from .conftest import slow_gc_heap, spin_loop


def test_sleep_5ms_is_timed_within_5_0_to_5_8_ms() -> None:
    r = perfmagic.bench("time.sleep(0.005)", "import time")
    assert 5.0e-3 <= r.median <= 5.8e-3, r.text()
    assert r.status == "ok" and r.n_samples >= 10
    assert r.cold_s is not None and r.cold_s >= 5.0e-3


def test_calibrated_spin_within_5_percent_of_independent_measurement(spin_200us: int) -> None:
    """A ~200 µs spin, timed by bench and independently (median of 300 single calls) right around it.

    On a shared 2-core machine a neighbour can slow one of the two measurements; up to three attempts
    are made, and every attempt's numbers are reported if none agrees within 5%.
    """
    k = spin_200us
    ns = {"spin_loop": spin_loop, "k": k}

    def independent() -> float:
        ts = []
        for _ in range(300):
            t = time.perf_counter()
            spin_loop(k)
            ts.append(time.perf_counter() - t)
        return statistics.median(ts)

    attempts = []
    for _ in range(3):
        before = independent()
        r = perfmagic.bench("spin_loop(k)", globals=ns, memory=False, capture_env=False)
        after = independent()
        truth = min((before, after), key=lambda x: abs(x - r.median))
        attempts.append((r.median, before, after))
        assert 50e-6 < truth < 800e-6  # the spin is calibrated cold; a warm core runs it up to 2× faster
        if abs(r.median / truth - 1) <= 0.05:
            return
    pytest.fail(f"bench vs independent (median, before, after) never within 5%: {attempts}")


def test_cold_call_catches_a_slow_first_call() -> None:
    state = {"first": True}

    def f() -> None:
        if state["first"]:
            state["first"] = False
            time.sleep(0.2)
        time.sleep(0.001)

    r = perfmagic.bench(f, memory=False)
    assert r.cold_s is not None and r.cold_s >= 0.2
    assert r.median < 0.01
    assert any("first call" in w for w in r.warnings), r.warnings


def test_fast_python_call_blocks_many_calls_and_overhead_is_small() -> None:
    r = perfmagic.bench("sum(range(30))", memory=False)
    assert r.number > 10  # blocks of many calls for a sub-µs statement
    assert r.timer_overhead_s < 0.01 * r.median * r.number
    assert 1e-8 < r.median < 1e-4


@pytest.mark.parametrize(
    "kwargs, option",
    [({"budget": 0}, "budget"), ({"budget": -1.0}, "budget"), ({"precision": 2.0}, "precision"),
     ({"warmup": -1}, "warmup"), ({"device": "tpu"}, "device"), ({"sync": "magic"}, "sync"),
     ({"min_samples": 0}, "min_samples")],
)
def test_bad_options_name_the_value_and_the_choices(kwargs: dict, option: str) -> None:
    with pytest.raises(BadOptionError) as ei:
        perfmagic.bench("1", **kwargs)
    msg = str(ei.value)
    assert option in msg and "expected" in msg


def test_failing_setup_is_a_setup_error() -> None:
    with pytest.raises(SetupError, match="ZeroDivisionError"):
        perfmagic.bench("1", "x = 1/0")
    with pytest.raises(SetupError, match="not valid Python"):
        perfmagic.bench("1", "x = (")


def test_syntax_error_points_at_the_users_line() -> None:
    with pytest.raises(SyntaxError) as ei:
        perfmagic.bench("x = 1\ny = (\n", filename="<mycell>")
    assert ei.value.filename == "<mycell>"
    assert ei.value.lineno == 2


def test_exception_in_the_code_propagates_unchanged_and_gc_is_restored() -> None:
    assert gc.isenabled()
    with pytest.raises(ZeroDivisionError):
        perfmagic.bench("1/0")
    assert gc.isenabled()


def test_ctrl_c_returns_the_partial_result() -> None:
    calls = {"n": 0}

    def f() -> None:
        calls["n"] += 1
        time.sleep(0.001)
        if calls["n"] == 60:
            raise KeyboardInterrupt

    with pytest.raises(BenchInterrupted) as ei:
        perfmagic.bench(f, budget=5.0, precision=0.0001)
    r = ei.value.result
    assert r is not None and r.status == "interrupted" and r.stop_reason == "interrupted"
    assert r.cold_s is not None
    assert calls["n"] == 60  # stopped promptly: no call after the interrupt
    assert gc.isenabled()


def _best_of(attempts, run, ok):
    """``run()`` until ``ok(result)``, at most ``attempts`` times; returns the last result. A busy
    shared machine can stall one attempt by a tenth of a second; a broken budget fails every one."""
    for _ in range(attempts):
        r = run()
        if ok(r):
            break
    return r


def test_user_budget_is_a_hard_limit() -> None:
    t = time.perf_counter()
    r = _best_of(3, lambda: perfmagic.bench("time.sleep(0.02)", "import time", budget=0.3, precision=1e-6,
                                            memory=False), lambda r: r.wall_s <= 0.3 + 0.05)
    wall = time.perf_counter() - t
    assert r.stop_reason == "budget"
    assert r.wall_s <= 0.3 + 0.05, r.wall_s  # without the limit, precision 1e-6 would run for seconds
    assert wall < 3.0
    assert any("samples fit" in w or "precision" in w for w in r.warnings)


def test_missing_cuda_falls_back_to_cpu_with_a_note() -> None:
    from perfmagic.core.sync import cuda_in_use

    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    r = perfmagic.bench("1", device="cuda", memory=False)
    assert r.device == "cpu" and any("no CUDA" in n for n in r.notes)
    assert not cuda_in_use()


def test_result_keeps_raw_samples_and_serialises() -> None:
    r = perfmagic.bench("sum(range(100))", items=100)
    d = r.to_dict()
    json.dumps(d)
    assert d["samples"]["raw"] == list(r.raw)
    assert d["metrics"]["median_s"] == r.median
    assert r.throughput["items"] == pytest.approx(100 / r.median)
    assert "items/s" in r.text()
    assert r.memory is not None and r.memory.rss_method in ("vmhwm", "after-before", "unavailable")
    assert r.env["usable_cores"] >= 1


def test_peak_memory_sees_a_planted_allocation() -> None:
    r = perfmagic.bench("b = bytearray(50 * 2**20); del b", budget=0.5)
    assert r.memory is not None
    assert r.memory.traced_peak_bytes >= 50 * 2**20
    if r.memory.rss_method == "vmhwm":
        assert r.memory.rss_peak_increase_bytes >= 40 * 2**20


def test_peak_memory_is_seen_when_the_heap_kept_the_pages_of_earlier_runs() -> None:
    # 100k chunks of 1 KB from the malloc heap, then one small chunk above them: when the list is freed
    # its chunks cannot fall back into the heap's top, so the heap keeps their pages, and the next run
    # reuses them without a page fault. The memory call hands them back first (malloc_trim), so its
    # RSS high-water mark sees the run's own 100 MB.
    ns = {"keep": []}
    r = perfmagic.bench("b = [bytes(1000) for _ in range(100_000)]\nkeep.append(bytes(1000))\ndel b",
                        globals=ns, budget=0.3)
    assert r.memory is not None
    if r.memory.rss_method == "vmhwm":
        assert r.memory.rss_peak_increase_bytes >= 60 * 2**20, r.memory


def test_fixed_warmup_runs_that_many_calls() -> None:
    r = perfmagic.bench("time.sleep(0.001)", "import time", warmup=7, memory=False)
    assert r.policy["warmup_calls"] == 7


def test_flush_forces_one_call_per_sample() -> None:
    r = perfmagic.bench("sum(range(1000))", flush=True, budget=0.5, memory=False)
    assert r.number == 1
    assert any("flushed" in n for n in r.notes)


@pytest.mark.gpu
def test_cuda_matmul_uses_events_and_reports_cuda_peak() -> None:
    import torch

    ns = {"torch": torch, "a": torch.randn(2048, 2048, device="cuda")}
    r = perfmagic.bench("a @ a", globals=ns, flops=2 * 2048**3)
    assert r.sync == "cuda" and r.device.startswith("cuda")
    assert r.memory is not None and r.memory.cuda_peak_bytes is not None
    assert r.memory.cuda_peak_bytes >= 2048 * 2048 * 4
    assert r.env.get("gpu") is not None


def test_slow_phase_of_the_machine_is_flagged(monkeypatch) -> None:
    from perfmagic.core import reference as _reference

    monkeypatch.setattr(_reference, "_best_seen", [1e-7])  # as if the machine had been far faster before
    r = perfmagic.bench("1", memory=False)
    assert any("slower than earlier in this session" in w for w in r.warnings), r.warnings
    monkeypatch.setattr(_reference, "_best_seen", [1.0])  # far slower before: nothing to flag
    r = perfmagic.bench("1", memory=False)
    assert not any("slower than earlier" in w for w in r.warnings)


def test_setup_code_is_not_charged_to_the_budget() -> None:
    t = time.perf_counter()
    r = _best_of(3, lambda: perfmagic.bench("sum(range(100))", "import time; time.sleep(0.5)", budget=0.3,
                                            memory=False), lambda r: r.wall_s <= 0.3 + 0.1)
    assert time.perf_counter() - t >= 0.5  # the setup ran
    assert r.wall_s <= 0.3 + 0.1, r.wall_s  # 0.5 s of setup would put it far above
    assert r.n_samples >= 5, r


def test_full_collection_of_a_big_heap_is_not_charged_to_the_budget() -> None:
    # planted: a heap whose full collection takes a large part of the budget (torch loaded in a
    # notebook: ~0.3 s). The engine collects before it disables the GC; that is preparation.
    with slow_gc_heap(0.35) as collect_s:  # a collection costs more than the budget
        r = _best_of(3, lambda: perfmagic.bench("sum(range(100))", budget=0.3, memory=False),
                     lambda r: r.wall_s <= 0.3 + 0.05 and r.n_samples >= 5)
        assert r.n_samples >= 5, (r, collect_s)
        assert r.wall_s <= 0.3 + 0.05, (r.wall_s, collect_s)
