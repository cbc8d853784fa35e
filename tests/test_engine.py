"""The measurement engine against planted ground truth (sleep, calibrated spin, slow first call)."""

from __future__ import annotations

import gc
import json
import statistics
import time
from typing import Any

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
    """A ~200 µs spin, timed by bench and independently by the spin itself, call by call, in the same run.

    Timings taken before and after bench disagreed by 20-50% beside a busy neighbour (this VM's speed swings
    within a second), so the independent truth is taken from the very calls bench times: the function
    records ``perf_counter`` around its own work, and bench's median must agree with the median of those
    records within 5%. Up to three attempts; every attempt's numbers are reported if none agrees.
    """
    k = spin_200us
    took: list[float] = []

    def timed_spin(k: int) -> None:
        t = time.perf_counter()
        spin_loop(k)
        took.append(time.perf_counter() - t)

    ns = {"timed_spin": timed_spin, "k": k}
    attempts = []
    for _ in range(3):
        took.clear()
        r = perfmagic.bench("timed_spin(k)", globals=ns, memory=False, capture_env=False)
        n = len(r.raw) * r.number          # the measured calls are the last ones (warmup and cold call first)
        assert 0 < n <= len(took), (n, len(took))
        truth = statistics.median(took[-n:])
        attempts.append((r.median, truth, len(took)))
        assert 50e-6 < truth < 800e-6  # the spin is calibrated cold; a warm core runs it up to 2× faster
        if abs(r.median / truth - 1) <= 0.05:
            return
    pytest.fail(f"bench vs the calls' own timings (median, truth, calls) never within 5%: {attempts}")


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


def test_asking_for_a_missing_cuda_device_names_the_fix() -> None:
    from perfmagic.core.sync import cuda_in_use
    from perfmagic.errors import BadOptionError

    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    for dev in ("cuda", "cuda:7"):
        with pytest.raises(BadOptionError, match=r"no CUDA device here.*use -d auto"):
            perfmagic.bench("1", device=dev, memory=False)
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


def _planted(times: list[float], cold: float | None = None, **env: Any) -> Any:
    """A BenchResult built by hand: one call per sample, the environment given."""
    from perfmagic.timing.results import BenchResult

    return BenchResult(code="planted()", raw=tuple(times), number=1, cold_s=cold, env=dict(env),
                       policy={"confidence": 0.95})


FAST, SLOW = 19e-6, 31e-6  # the reference loop in the machine's two speed states (1.6× apart)


def test_a_slow_machine_state_is_named_only_where_the_samples_show_it() -> None:
    from perfmagic.timing.bench import speed_state_warning

    fast = [1.00e-3 * (1 + 0.01 * (i % 3)) for i in range(30)]
    switched = fast[:20] + [1.55e-3 * (1 + 0.01 * (i % 3)) for i in range(10)]  # the last 10 in the slow state
    r = _planted(switched, reference_before_s=FAST, reference_s=SLOW, reference_best_s=FAST, others_cores=0.03)
    w = speed_state_warning(r)
    assert w is not None and str(w).startswith("this machine ran in its slow state during the last 10 of 30 samples"), w
    assert "a fixed reference loop took 31 µs vs 19 µs at its fastest, not because of other processes (0.03 cores)" in w
    assert str(w).endswith("An interleaved A/B (%perf compare, --vs) cancels it; this single number does not")
    # the state at the start of the run
    first = list(reversed(switched))
    w = speed_state_warning(_planted(first, reference_before_s=SLOW, reference_s=FAST, reference_best_s=FAST,
                                     others_cores=0.03))
    assert w is not None and "during the first 10 of 30 samples" in w
    # negative: a slow reading but uniform samples (nothing in this run shows it), no earlier run to compare
    assert speed_state_warning(_planted(fast, reference_before_s=FAST, reference_s=SLOW, reference_best_s=FAST,
                                        others_cores=0.03)) is None
    assert speed_state_warning(_planted(fast, reference_before_s=SLOW, reference_s=SLOW, reference_best_s=FAST,
                                        others_cores=0.03)) is None
    # negative: samples that switch, but both readings fast (the reference did not see a state)
    assert speed_state_warning(_planted(switched, reference_before_s=FAST, reference_s=FAST * 1.1,
                                        reference_best_s=FAST, others_cores=0.03)) is None
    # negative: the slow stretch at the other end from the slow reading
    assert speed_state_warning(_planted(first, reference_before_s=FAST, reference_s=SLOW, reference_best_s=FAST,
                                        others_cores=0.03)) is None
    # negative: a jump 3× the others while the reference loop slowed 1.6×: something else changed
    jump = fast[:20] + [3.0e-3] * 10
    assert speed_state_warning(_planted(jump, reference_before_s=FAST, reference_s=SLOW, reference_best_s=FAST,
                                        others_cores=0.03)) is None
    # negative: other processes were busy: their load is its own warning; the state is not claimed
    assert speed_state_warning(_planted(switched, reference_before_s=FAST, reference_s=SLOW, reference_best_s=FAST,
                                        others_cores=1.2)) is None
    # the whole run slow: shown against this code's earlier run while the machine was fast
    slow_run = [1.6e-3 * (1 + 0.01 * (i % 3)) for i in range(30)]
    whole = _planted(slow_run, reference_before_s=SLOW, reference_s=SLOW, reference_best_s=FAST, others_cores=0.0)
    w = speed_state_warning(whole, earlier_fast_median=1.0e-3)
    assert w is not None and "during this run (its median 1.62× this code's earlier run in this session)" in w, w
    assert speed_state_warning(whole, earlier_fast_median=1.5e-3) is None  # within what noise explains
    assert speed_state_warning(whole, earlier_fast_median=0.3e-3) is None  # 5× : beyond the machine's 1.6×
    # load not measured (a run under 20 ms): said so, not claimed either way
    w = speed_state_warning(_planted(switched, reference_before_s=FAST, reference_s=SLOW, reference_best_s=FAST))
    assert w is not None and "other processes' load was not measured" in w and "not because" not in w


def test_the_slow_state_line_rides_on_the_result_and_remembers_fast_runs(monkeypatch) -> None:
    from perfmagic.core import reference as _reference
    from perfmagic.timing.bench import _with_doubts

    monkeypatch.setattr(_reference, "_best_seen", [FAST])
    monkeypatch.setattr(_reference, "_fast_runs", {})
    quiet = _planted([1e-3] * 30, reference_before_s=FAST, reference_s=FAST, reference_best_s=FAST, others_cores=0.0)
    assert not _with_doubts(quiet, [], 10, 0.01).warnings  # remembered as this code's fast run
    slow = _planted([1.6e-3] * 30, reference_before_s=SLOW, reference_s=SLOW, reference_best_s=FAST, others_cores=0.0)
    got = _with_doubts(slow, [], 10, 0.01)
    assert len(got.warnings) == 1 and str(got.warnings[0]).startswith("this machine ran in its slow state during this run")
    # an interleaved A/B cancels the state: never said there
    inter = _planted([1.6e-3] * 30, reference_before_s=SLOW, reference_s=SLOW, reference_best_s=FAST, others_cores=0.0)
    from dataclasses import replace

    assert not _with_doubts(replace(inter, policy={"interleaved": True}), [], 10, 0.01).warnings
    # other code: no earlier run, nothing shown
    other = replace(slow, code="other()")
    assert not _with_doubts(other, [], 10, 0.01).warnings


def test_bench_records_the_readings_the_warnings_are_judged_on() -> None:
    r = perfmagic.bench("sum(range(100))", memory=False, budget=0.2)
    for k in ("reference_before_s", "reference_s", "reference_best_s", "cold_preempted", "cold_off_cpu_s"):
        assert k in r.env, (k, r.env)
    assert r.env["reference_best_s"] <= min(r.env["reference_before_s"], r.env["reference_s"])
    assert "cold_others_cores" in r.env  # None: a cold call under 20 ms is too short for /proc/stat


def test_the_first_calls_cause_is_named_only_when_the_probe_was_quiet() -> None:
    from perfmagic.timing.bench import cold_call_warning

    warm = [1e-3] * 20
    quiet = cold_call_warning(_planted(warm, cold=9e-3, cold_others_cores=0.03, cold_preempted=0))
    assert str(quiet) == ("the first call took 9× a warm call (9 ms) with no other load (0.03 cores): lazy init, JIT, "
                     "autotuning or cold caches; it is reported apart, not in the samples")
    # a cached lookup (notebook 00): 200 ms cold against 52 ns warm read "3854668×"; and in the headline
    huge = _planted([52e-9] * 20, cold=0.2004, cold_others_cores=0.0, cold_preempted=0)
    assert str(cold_call_warning(huge)).startswith("the first call took 3.9 million× a warm call (200.4 ms)")
    assert "cold call 200.4 ms (3.9 million× warm)" in huge.text(), huge.text()
    loaded = cold_call_warning(_planted(warm, cold=9e-3, cold_others_cores=1.4, cold_preempted=3))
    assert loaded is not None and "while other processes used 1.4 cores: cause unknown" in loaded
    assert "lazy init" not in loaded
    # too short for /proc/stat: the scheduler's count decides
    never = cold_call_warning(_planted(warm, cold=9e-3, cold_others_cores=None, cold_preempted=0, cold_off_cpu_s=0.0))
    assert never is not None and "never preempted by other processes: lazy init" in never
    took = cold_call_warning(_planted(warm, cold=9e-3, cold_others_cores=None, cold_preempted=2, cold_off_cpu_s=6e-3))
    assert took is not None and "while other processes took its CPU 2× (6 ms off the CPU): cause unknown" in took
    brief = cold_call_warning(_planted(warm, cold=9e-3, cold_others_cores=None, cold_preempted=1, cold_off_cpu_s=1e-3))
    assert brief is not None and "off the CPU for only 1 ms of it: lazy init" in brief
    unknown = cold_call_warning(_planted(warm, cold=9e-3))  # a result from before the probe existed
    assert unknown is not None and "was not measured, so its cause is unknown" in unknown
    assert cold_call_warning(_planted(warm, cold=2e-3, cold_others_cores=0.0)) is None  # 2×: no line at all


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


class _QueuedDevice:
    """A stand-in for a CUDA stream on the CPU: ``enqueue`` runs the block at once and keeps its wall
    time as the 'device' time; ``wait`` returns it. Counts what the sustained pace asked of it."""

    name = "cuda"
    device_timed = True
    pace = "sustained"

    def __init__(self) -> None:
        self.enqueued, self.waited = 0, 0

    def before(self) -> Any:
        return time.perf_counter()

    def after(self, value: Any) -> None:
        return None

    def elapsed(self, token: Any) -> float | None:
        return None

    def finish(self) -> None:
        return None

    def enqueue(self, run: Any) -> tuple[float, float]:
        self.enqueued += 1
        t0 = time.perf_counter()
        run()
        return t0, time.perf_counter()

    def wait(self, token: tuple[float, float]) -> float:
        self.waited += 1
        return token[1] - token[0]


def test_sustained_pace_launches_one_block_ahead_and_loses_none() -> None:
    from perfmagic.core.subject import Subject

    subj = Subject("time.sleep(0.002)", "", {"time": time}, "<t>", "none", "cpu", time.perf_counter)
    fake = _QueuedDevice()
    subj.sync = fake
    subj.number = 1
    for _ in range(5):
        subj.sample()
    # the first sample launched two blocks; every later one launches one and waits for the one before
    assert (fake.enqueued, fake.waited, len(subj.raw)) == (6, 5, 5)
    subj.finish()  # the block still in flight is waited for and kept
    assert (fake.waited, len(subj.raw)) == (6, 6)
    assert all(0.0019 < dt < 0.05 for dt in subj.raw), subj.raw
    # an isolated pace (or a flushed subject) never takes that path
    subj2 = Subject("time.sleep(0.001)", "", {"time": time}, "<t>", "none", "cpu", time.perf_counter)
    fake2 = _QueuedDevice()
    fake2.pace = "isolated"
    subj2.sync = fake2
    subj2.sample()
    assert fake2.enqueued == 0 and len(subj2.raw) == 1


def test_an_exception_in_a_sustained_block_propagates_and_the_last_block_is_still_waited() -> None:
    from perfmagic.core.subject import Subject

    ns = {"time": time, "calls": [0]}
    subj = Subject("calls[0] += 1\nif calls[0] == 4: raise ValueError('boom')", "", ns, "<t>", "none", "cpu",
                   time.perf_counter)
    fake = _QueuedDevice()
    subj.sync = fake
    subj.number = 1
    subj.sample()  # blocks 1 and 2
    subj.sample()  # block 3
    with pytest.raises(ValueError, match="boom"):
        subj.sample()  # block 4 raises while it is launched
    subj.finish()
    assert (fake.enqueued, fake.waited, len(subj.raw)) == (4, 3, 3)  # the 4th never reached its end event


def _noisy_call(rng: Any) -> Any:
    """A planted call of 1.0-1.2 ms (uniform, busy-waited): its median's 95% interval needs ~200 samples
    to reach ±1% and ~35 to reach ±2.5%."""

    def call() -> None:
        end = time.perf_counter() + 1e-3 * (1.0 + 0.2 * rng.random())
        while time.perf_counter() < end:
            pass
    return call


def test_the_default_budget_answers_a_noisy_millisecond_call_at_2_5_percent_after_0_1_s() -> None:
    import random

    from perfmagic.timing.bench import ANSWER_PRECISION

    quick = perfmagic.bench(_noisy_call(random.Random(1)), warmup=5, memory=False)
    assert quick.stop_reason == "time", (quick.stop_reason, quick.rel_ci, quick.n_samples)
    assert 0.01 < quick.rel_ci <= ANSWER_PRECISION
    assert "stopped: time (the default answer: ±" in quick.text()
    # a budget given is a hard limit and the stricter target holds: no early answer
    strict = perfmagic.bench(_noisy_call(random.Random(1)), budget=3.0, warmup=5, memory=False)
    assert strict.stop_reason == "precision" and strict.rel_ci <= 0.01
    assert strict.n_samples > quick.n_samples
    # the planted truth (1.1 ms median) is inside both intervals' reach
    assert 1.0e-3 < quick.median < 1.2e-3 and 1.0e-3 < strict.median < 1.2e-3


def test_the_gate_note_does_not_say_every_kept_sample_was_fast_when_the_last_ones_were_not() -> None:
    """Notebook 01 (fresh clone at 979fa8c), one result: the gate's note said '3 samples set aside ... every
    sample kept ran in the usual state' and the warning below it 'this machine ran in its slow state during the
    last 7 of 184 samples (1.40× the others)': samples taken after the gate's last check were kept. The note
    now names them; without the slow-state warning it keeps its sentence."""
    from dataclasses import replace

    from perfmagic.findings import Finding
    from perfmagic.timing.bench import _with_doubts

    fast = [1.00e-3 * (1 + 0.01 * (i % 3)) for i in range(30)]
    switched = fast[:23] + [1.45e-3 * (1 + 0.01 * (i % 3)) for i in range(7)]
    gate = Finding.of("bench.speed-gate", n=3, waited_s=0.002, waits=1, gave_up=False, kept_answer=False,
                      cap_s=0.1, slow_ref_s=SLOW, best_ref_s=FAST)
    r = replace(_planted(switched, reference_before_s=FAST, reference_s=SLOW, reference_best_s=FAST,
                         others_cores=0.0), notes=(gate,))
    out = _with_doubts(r, [], 10, 0.01)
    assert any(getattr(w, "kind", "") == "bench.slow-state" for w in out.warnings)
    (note,) = [str(n) for n in out.notes if getattr(n, "kind", "") == "bench.speed-gate"]
    assert "every sample kept ran in the usual state" not in note
    assert "the last 7 samples kept still ran slow (see the slow-state warning)" in note, note
    quiet = replace(_planted(fast, reference_before_s=FAST, reference_s=FAST, reference_best_s=FAST,
                             others_cores=0.0), notes=(gate,))
    (note,) = [str(n) for n in _with_doubts(quiet, [], 10, 0.01).notes if getattr(n, "kind", "") == "bench.speed-gate"]
    assert note.endswith("every sample kept ran in the usual state"), note


@pytest.mark.parametrize("held", [(), ("sw_power_cap",)])
def test_a_device_clock_held_down_keeps_the_precision_stop_sampling_longer(monkeypatch, held) -> None:
    """Where NVML says the device's clock is held down when the interval is met, the stop waits for
    CAPPED_MIN_SPAN_S of samples (a share of the budget); a free clock stops at DEVICE_MIN_SPAN_S."""
    from perfmagic.core import env as _env
    from perfmagic.core.subject import Subject
    from perfmagic.timing import bench as _bench

    asked: list[int] = []
    monkeypatch.setattr(_env, "gpu_clock_held", lambda i=0: asked.append(i) or held)
    subj = Subject("time.sleep(0.002)", "", {"time": time}, "<t>", "none", "cuda:0", time.perf_counter)
    subj.sync = _QueuedDevice()
    subj.number = 1
    t0 = time.perf_counter()
    stop = _bench._sample(subj, lambda: time.perf_counter() - t0, soft_budget=0.4, hard=False, precision=0.05,
                          confidence=0.95, min_samples=10, max_samples=10_000, memory=False)
    sampled = sum(subj.raw)
    subj.finish()
    assert asked == [0]  # asked once, when the interval was first met
    if held:
        assert stop in ("precision", "time") and sampled >= 0.3, (stop, sampled)  # min(0.75 s, 0.75 × 0.4 s)
        assert subj.held["reasons"] == ("sw_power_cap",) and subj.held["span_s"] == pytest.approx(0.3)
        note = str(perfmagic.findings.Finding.of("bench.clock-held", reasons=("sw_power_cap",), span_s=0.3,
                                                   sampled_s=sampled))
        assert "held down (sw_power_cap)" in note and "sampled for 3" in note
    else:
        assert stop in ("precision", "time") and 0.12 <= sampled < 0.25, (stop, sampled)  # min(0.25, 0.3 × 0.4)
        assert subj.held is None
