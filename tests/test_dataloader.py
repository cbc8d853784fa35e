"""%%dataloader_check and perfmagic's dataloader_check on planted loaders: sleep per item (I/O-bound),
spin per item (CPU-bound), steps of known cost. After every test no worker process may survive.

The datasets live at module level so that they pickle (workers started with spawn need that).
"""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

import psutil
import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader, Dataset  # noqa: E402

from perfmagic.dataloader.check import DataLoaderResult, dataloader_check  # noqa: E402
from perfmagic.errors import BadOptionError, BenchInterrupted, PerfmagicError  # noqa: E402


class SleepDataset(Dataset):
    """I/O-bound ground truth: each item sleeps ``s`` seconds (a batch of B costs B·s at 0 workers)."""

    def __init__(self, n: int, s: float) -> None:
        self.n, self.s = n, s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> Any:
        time.sleep(self.s)
        return torch.full((4,), float(i))


def spin(cpu_s: float) -> None:
    """Burn ``cpu_s`` seconds of this thread's CPU time (a shared machine stretches the wall time, not this)."""
    t0 = time.thread_time()
    while time.thread_time() - t0 < cpu_s:
        pass


class SpinDataset(Dataset):
    """CPU-bound ground truth: each item burns ``s`` seconds of CPU."""

    def __init__(self, n: int, s: float) -> None:
        self.n, self.s = n, s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> Any:
        spin(self.s)
        return torch.tensor([float(i)])


class LockedDataset(SleepDataset):
    """Cannot be pickled (holds a lock): fine under fork, refused for spawn workers."""

    def __init__(self, n: int, s: float) -> None:
        super().__init__(n, s)
        import threading

        self.lock = threading.Lock()



def sleeper(c: float) -> Any:
    return lambda batch: time.sleep(c)


def live_children(before: set[int] = frozenset(), wait: float = 3.0) -> list[Any]:
    """Child processes of this one (not in ``before``) still alive after up to ``wait`` seconds."""
    deadline = time.time() + wait
    while True:
        left = []
        for p in psutil.Process().children(recursive=True):
            try:
                if p.pid not in before and p.status() != psutil.STATUS_ZOMBIE:
                    left.append(p)
            except psutil.NoSuchProcess:
                pass
        if not left or time.time() > deadline:
            return left
        time.sleep(0.05)


@pytest.fixture(autouse=True)
def no_worker_survives() -> Any:
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    yield
    left = live_children(before)
    assert not left, f"worker processes survived the test: {left}"


# ---- planted truth --------------------------------------------------------------------------------

def test_io_bound_planted_fraction_and_headroom() -> None:
    # 0 workers: wait = 4 items × 4 ms = 16 ms, step 4 ms -> planted data-wait fraction 0.8
    dl = DataLoader(SleepDataset(200, 0.004), batch_size=4)
    r = dataloader_check(dl, sleeper(0.004), steps=12)
    assert r.input_bound and r.text().startswith("input-bound: ")
    assert abs(r.data_wait_fraction - 0.8) < 0.1, r.text()
    assert r.n_steps == 12 and r.warmup == 2
    from perfmagic.dataloader.audit import LOADED

    # a sleep is a floor: no load makes the loader faster than planted or the step shorter than 4 ms
    assert r.loader_batches_per_s is not None and r.loader_batches_per_s < 1.1 / 0.016
    assert r.compute_only_step_s is not None and 0.0035 < r.compute_only_step_s
    # on a loaded machine every wake-up can come late (make unit-busy on a saturated CI box measured the
    # 16 ms batch at 30 ms): the upper bounds hold only for a pass measured quiet, and a loaded one is named
    for phase, x, ok in (("the loader-alone pass", r.loader_others_cores, r.loader_batches_per_s > 0.6 / 0.016),
                         ("compute alone", r.compute_only_others_cores, r.compute_only_step_s < 0.012)):
        if x is not None and x > LOADED:
            assert f"during {phase}" in " ".join(r.text().split()), r.text()
        else:
            assert ok, (phase, r.text())
    if r.load_gap("loop", "compute"):  # one pass beside other processes, the other quiet: not compared
        assert r.speedup_if_data_free is None and "cannot tell the gain" in r.text(), r.text()
    else:
        assert r.speedup_if_data_free is not None and r.speedup_if_data_free > 2.5, r.text()
    topics = {f.topic: f for f in r.findings()}
    assert topics["num_workers"].level == "warn" and "workers" in topics["num_workers"].effect
    m = r.metrics()
    assert m["verdict"] == "input-bound" and m["num_workers"] == 0 and m["batch_size"] == 4
    assert set(r.samples_dict()["wait_s"]) == set(r.wait_s)
    png = r.figure_png()
    assert png is not None and png.startswith(b"\x89PNG")


def test_result_protocol() -> None:
    from perfmagic.result import Result

    dl = DataLoader(SleepDataset(200, 0.002), batch_size=4)
    r = dataloader_check(dl, sleeper(0.002), steps=6, sweep={"num_workers": [0, 2]}, sweep_steps=4)
    assert isinstance(r, Result) and r.primary_metric == "data_wait_fraction"
    assert r.metrics()[r.primary_metric] == r.data_wait_fraction
    assert r.samples() == r.samples_dict() and r.samples()["wait_s"] == list(r.wait_s)
    assert r.headline() == r.verdict() == r.text().splitlines()[0]
    assert repr(r) == f"<DataLoaderResult: {r.verdict()}>"
    assert r.to_dict()["samples"] == r.samples() and r.to_dict()["metrics"] == r.metrics()
    titles = [t for t, _ in r.html_sections()]
    assert titles[0] == "Sweep (2 settings)" and any(t.startswith("Audit (") for t in titles)
    assert any(t.startswith("Per-step samples (2 warm-up + 6)") for t in titles)
    bundle = r._repr_mimebundle_()
    assert bundle["text/plain"] == r.text() and "image/png" in bundle
    assert bundle["text/html"].count("<details") == len(titles) and "num_workers=2" in bundle["text/html"]


def test_compute_bound_planted_fraction() -> None:
    # 0 workers: wait = 4 × 4 ms = 16 ms, step 120 ms -> planted 16/136 ≈ 0.12. Sleeps, not spins, but long
    # ones: beside a busy neighbour each wake-up can come ~2 ms late (4 × 1 ms items measured 10.5 ms), which
    # would move a 1 ms-item plant by 0.14; here by at most ~0.06
    dl = DataLoader(SleepDataset(200, 0.004), batch_size=4)
    r = dataloader_check(dl, sleeper(0.120), steps=8)
    assert not r.input_bound and r.text().startswith("compute-bound: ")
    assert abs(r.data_wait_fraction - 16 / 136) < 0.1, r.text()
    assert r.metrics()["verdict"] == "compute-bound"


def test_cpu_bound_spin_dataset_both_ways() -> None:
    # 4 items × 3 ms of CPU per batch, a step of 4 ms of CPU -> planted 12 / 16 = 0.75. Both run in this
    # process, so load from other processes stretches wait and compute alike and the planted fraction holds
    ds = SpinDataset(400, 0.003)
    r = dataloader_check(DataLoader(ds, batch_size=4), lambda b: spin(0.004), steps=16)
    assert r.input_bound, r.text()
    assert abs(r.data_wait_fraction - 0.75) < 0.1, r.text()
    # and the other way: a step of 48 ms of CPU -> planted 12 / 60 = 0.2 (0.1 below the threshold: a busy
    # neighbour's 10 ms time slices landing in the wait windows of a few steps must not cross it)
    r = dataloader_check(DataLoader(ds, batch_size=4), lambda b: spin(0.048), steps=12, loader_alone=False,
                         compute_alone=False)
    assert not r.input_bound, r.text()
    assert abs(r.data_wait_fraction - 0.2) < 0.1, r.text()


def test_workers_steady_state_skips_prefetched_batches() -> None:
    # 2 workers, 4 × 5 ms = 20 ms per batch per worker -> one batch per 10 ms; step 4 ms -> wait ≈ 6 ms: 0.6
    dl = DataLoader(SleepDataset(400, 0.005), batch_size=4, num_workers=2)
    r = dataloader_check(dl, sleeper(0.004), steps=14)
    assert r.warmup == 2 * 2 + 2  # workers × prefetch_factor + 2
    assert r.first_batch_s is not None and r.first_batch_s > 0.015
    assert abs(r.data_wait_fraction - 0.6) < 0.1, r.text()
    assert r.input_bound
    assert r.respawn_s is not None and r.respawn_s > 0  # not persistent: re-spawn measured on the 2nd pass
    assert any(f.topic == "persistent_workers" for f in r.findings())
    assert "starting 2 workers" in r.text()


def test_persistent_workers_reused_then_shut_down() -> None:
    dl = DataLoader(SleepDataset(400, 0.002), batch_size=4, num_workers=2, persistent_workers=True)
    r = dataloader_check(dl, sleeper(0.002), steps=8)
    assert r.n_steps == 8 and r.loader_s and r.respawn_s is None
    assert r.loader_first_batch_s is not None and r.first_batch_s is not None
    assert any(f.topic == "persistent_workers" and f.level == "ok" for f in r.findings())
    assert dl._iterator is None and not live_children(wait=1.0)
    assert next(iter(DataLoader(SleepDataset(8, 0), batch_size=4))).shape == (4, 4)


def test_sweep_more_workers_help_io_bound() -> None:
    dl = DataLoader(SleepDataset(400, 0.004), batch_size=4)
    r = dataloader_check(dl, sleeper(0.003), steps=6, sweep={"num_workers": [0, 2, 4]}, sweep_steps=8,
                         loader_alone=False, compute_alone=False)
    pts = {dict(p.setting)["num_workers"]: p for p in r.sweep}
    assert all(p.ok for p in pts.values()), r.sweep_table()
    assert pts[4].throughput > 1.5 * pts[0].throughput and pts[2].throughput > 1.3 * pts[0].throughput
    assert r.best is not None and dict(r.best.setting)["num_workers"] >= 2
    assert r.metrics()["best_num_workers"] >= 2
    t = " ".join(r.text().split())
    if "best: cannot tell" in t:  # the settings ran under uneven loads: the best is not named as a fact
        assert "because other processes used" in t and "(highest measured: num_workers=" in t, r.text()
    else:
        assert "best: num_workers=" in t and "sweep:" in t, r.text()


# ---- bad input and faults ---------------------------------------------------------------------------

def test_short_loader_uses_what_there_is() -> None:
    dl = DataLoader(SleepDataset(12, 0.001), batch_size=4)  # 3 batches, warm-up 2 + steps 10
    r = dataloader_check(dl, sleeper(0.001), steps=10)
    assert 1 <= r.n_steps <= 3
    assert any("only 3 batches" in n for n in r.notes), r.notes
    assert "only 3 batches" in r.text()
    # the note is data (its kind and numbers), so the ledger keeps it as such and perfmagic.run() rewords it
    from perfmagic.findings import Finding

    note = next(n for n in r.notes if "only 3 batches" in n)
    assert isinstance(note, Finding) and note.kind in ("dataloader.short", "dataloader.too-short"), note
    back = DataLoaderResult.from_record(r.to_record(magic="dataloader_check"))
    assert back.notes == r.notes and back.text() == r.text()


def test_plain_iterable_and_generator() -> None:
    batches = [torch.zeros(4) for _ in range(20)]
    r = dataloader_check(batches, sleeper(0.002), steps=8)
    assert not r.is_dataloader and not r.findings() and not r.input_bound
    r = dataloader_check((b for b in batches), sleeper(0.001), steps=5)
    assert r.n_steps == 5 and any("one-pass" in n for n in r.notes)


def test_bad_input() -> None:
    with pytest.raises(BadOptionError, match="iterable"):
        dataloader_check(5, sleeper(0))
    with pytest.raises(BadOptionError, match="DataLoader"):
        dataloader_check([1, 2, 3], sleeper(0), sweep={"num_workers": [0, 1]})
    dl = DataLoader(SleepDataset(8, 0), batch_size=4)
    with pytest.raises(BadOptionError, match="num_workers"):
        dataloader_check(dl, sleeper(0), sweep={"num_wrokers": [0, 1]})
    with pytest.raises(BadOptionError, match="steps"):
        dataloader_check(dl, sleeper(0), steps=0)
    with pytest.raises(PerfmagicError, match="no batch"):
        dataloader_check([], sleeper(0))


def test_unpicklable_dataset_is_a_clear_error(monkeypatch) -> None:
    # spawn workers receive the dataset pickled: refused up front, before any worker starts
    dl = DataLoader(LockedDataset(40, 0.0), batch_size=4, num_workers=2,
                    multiprocessing_context=multiprocessing.get_context("spawn"))
    with pytest.raises(PerfmagicError, match="cannot be pickled for the worker processes"):
        dataloader_check(dl, sleeper(0), steps=3)
    # in a sweep: a 0-worker loader swept to 2 workers where the start method is spawn (macOS, Windows)
    dl = DataLoader(LockedDataset(40, 0.0), batch_size=4)
    monkeypatch.setattr(multiprocessing, "get_start_method", lambda allow_none=False: "spawn")
    with pytest.raises(PerfmagicError, match=r"in the sweep \(num_workers=2\).*cannot be pickled"):
        dataloader_check(dl, sleeper(0), steps=3, sweep={"num_workers": [0, 2]})


def test_step_raises_workers_shut_down() -> None:
    dl = DataLoader(SleepDataset(100, 0.001), batch_size=2, num_workers=2)
    calls = {"n": 0}

    def step(batch: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 4:
            raise ValueError("boom in step")

    with pytest.raises(ValueError, match="boom in step") as ei:
        dataloader_check(dl, step, steps=10)
    # the traceback (held by ei) keeps the iterator's frame alive: the workers must be shut down explicitly
    assert ei.value.__traceback__ is not None and not live_children(wait=1.0)


def test_ctrl_c_gives_partial_result_and_shuts_workers() -> None:
    dl = DataLoader(SleepDataset(200, 0.002), batch_size=2, num_workers=2, persistent_workers=True)
    calls = {"n": 0}

    def step(batch: Any) -> None:
        calls["n"] += 1
        time.sleep(0.002)
        if calls["n"] == 14:
            raise KeyboardInterrupt

    with pytest.raises(BenchInterrupted) as ei:
        dataloader_check(dl, step, steps=20)
    r = ei.value.result
    assert isinstance(r, DataLoaderResult) and r.status == "interrupted" and r.n_steps >= 1
    assert "[INTERRUPTED]" in r.text()
    assert dl._iterator is None  # persistent workers dropped with the check's iterator


# ---- the magic ----------------------------------------------------------------------------------------

SETUP = """
import time
from torch.utils.data import DataLoader
from tests.test_dataloader import SleepDataset
io_loader = DataLoader(SleepDataset(200, 0.004), batch_size=4)
not_a_loader = 5
"""


def test_magic_reports_and_records(shell) -> None:
    import perfmagic

    shell.run(SETUP)
    res = shell.run("%%dataloader_check io_loader --steps 10 -l planted\ntime.sleep(0.004)\n")
    assert res.error_in_exec is None, res.error_in_exec
    (bundle,) = shell.bundles
    text = bundle["text/plain"]
    assert text.startswith("input-bound: ") and "loader alone" in text and "compute alone" in text
    assert "num_workers" in text and "run #1" in text
    assert "image/png" in bundle and "application/vnd.jupyter.widget-view+json" not in bundle
    assert "run #1" in bundle["text/html"] and "<details" in bundle["text/html"]
    assert shell.ip.user_ns["batch"].shape == (4, 4)
    df = perfmagic.ledger(magic="dataloader_check")
    assert list(df["magic"]) == ["dataloader_check"] and abs(df.iloc[0]["data_wait_fraction"] - 0.8) < 0.1
    assert df.iloc[0]["primary_metric"] == "data_wait_fraction"


def test_magic_sweep(shell) -> None:
    shell.run(SETUP)
    res = shell.run("%%dataloader_check io_loader --steps 4 --sweep num_workers=0,2 --sweep-steps 6 "
                    "--no-loader-alone --no-compute-alone --no-plot\ntime.sleep(0.003)\n")
    assert res.error_in_exec is None, res.error_in_exec
    text = shell.text()
    assert "sweep:" in text, text
    if "best: cannot tell" in text:  # a sweep point ran beside other processes and another did not
        assert "best: cannot tell, because other processes used" in " ".join(text.split()), text
    else:
        assert "best: num_workers=2" in text, text


@pytest.mark.parametrize("cell, needle", [
    ("%%dataloader_check\nbatch\n", "needs the loader"),
    ("%%dataloader_check no_such_loader\nbatch\n", "no loader named 'no_such_loader'"),
    ("%%dataloader_check not_a_loader\nbatch\n", "iterable"),
    ("%%dataloader_check io_loader --sweep num_workers\nbatch\n", "NAME=V1,V2"),
    ("%%dataloader_check io_loader --sweep bogus=1,2 --steps 2\nbatch\n", "a DataLoader argument"),
    ("%%dataloader_check io_loader --steps 0\nbatch\n", "at least 1"),
    ("%%dataloader_check io_loader --bogus\nbatch\n", "unrecognized arguments"),
])
def test_magic_bad_input(shell, cell, needle) -> None:
    shell.run(SETUP)
    res = shell.run(cell)
    assert type(res.error_in_exec).__name__ == "UsageError", res.error_in_exec
    assert needle in str(res.error_in_exec)


def test_magic_step_error_and_interrupt(shell) -> None:
    import perfmagic

    shell.run(SETUP + "w_loader = DataLoader(SleepDataset(200, 0.001), batch_size=2, num_workers=2)\n")
    res = shell.run("%%dataloader_check w_loader --steps 5\nraise ValueError('bad step')\n")
    assert isinstance(res.error_in_exec, ValueError) and "bad step" in str(res.error_in_exec)
    assert len(perfmagic.ledger()) == 0
    shell.ip.user_ns["calls"] = {"n": 0}
    res = shell.run("%%dataloader_check w_loader --steps 20 --no-plot\ncalls['n'] += 1\ntime.sleep(0.002)\n"
                    "if calls['n'] == 12:\n    raise KeyboardInterrupt\n")
    assert isinstance(res.error_in_exec, KeyboardInterrupt)
    assert "[INTERRUPTED]" in shell.text()
    df = perfmagic.ledger()
    assert len(df) == 1 and df.iloc[0]["status"] == "interrupted"


def test_magic_help(shell) -> None:
    doc = shell.ip.find_cell_magic("dataloader_check").__doc__
    assert "--sweep" in doc and "--steps" in doc and "batch" in doc


# ---- GPU ------------------------------------------------------------------------------------------

@pytest.mark.gpu
def test_gpu_idle_share_and_copies() -> None:
    dev = torch.device("cuda")
    w = torch.randn(2048, 2048, device=dev)

    def step(batch: Any) -> None:
        x = batch.to(dev)  # blocking copy from pageable memory
        for _ in range(20):
            x = torch.tanh(x @ w[: x.shape[1], :])

    class Big(Dataset):
        def __len__(self) -> int:
            return 400

        def __getitem__(self, i: int) -> Any:
            time.sleep(0.002)
            return torch.randn(2048)

    r = dataloader_check(DataLoader(Big(), batch_size=64), step, steps=10)
    assert r.cuda and r.gpu_idle_fraction is not None and 0 <= r.gpu_idle_fraction <= 1
    assert r.h2d_s is not None and r.batch_pinned is False and r.copies_non_blocking is False
    assert any(f.topic == "pin_memory" and f.level == "warn" for f in r.findings())
    # the GPU is idle at least while the step waits for data
    assert r.gpu_idle_fraction >= r.data_wait_fraction - 0.1


# ---- a real kernel ---------------------------------------------------------------------------------

KERNEL_CELLS = [
    "%load_ext perfmagic",
    "import time, torch, psutil\nfrom torch.utils.data import DataLoader, Dataset\n"
    "class Nap(Dataset):  # defined in the notebook: fork workers inherit it\n"
    "    def __len__(self): return 400\n"
    "    def __getitem__(self, i):\n        time.sleep(0.003)\n        return torch.zeros(4)\n"
    "loader = DataLoader(Nap(), batch_size=4, num_workers=2)",
    "%%dataloader_check loader --steps 8 --sweep num_workers=0,2 --sweep-steps 6\ntime.sleep(0.003)",
    "[p.pid for p in psutil.Process().children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE]",
]


@pytest.mark.slow
def test_magic_in_a_real_kernel(tmp_path: Any) -> None:
    pytest.importorskip("nbclient")
    from tests.test_kernel import _run, _texts

    cells = _run(KERNEL_CELLS, tmp_path)
    data = cells[2].outputs[-1].data
    assert data["text/plain"].startswith(("input-bound", "compute-bound")) and "sweep:" in data["text/plain"]
    assert "image/png" in data and "application/vnd.jupyter.widget-view+json" not in data  # static, no dead view
    html = data["text/html"]  # self-contained: the figure inline, sweep and audit folded in <details>
    assert "data:image/png;base64," in html and "<summary" in html and "Sweep (2 settings)" in html
    assert "Audit (" in html
    assert _texts(cells[3]).strip() == "[]"  # no worker left running in the kernel


# ---- workers competing with the step (the issue: "✓ 2 workers on 2 cores keep up" while the step
# slowed 474 → 838 ms; and "0.89× faster") ------------------------------------------------------------

def _planted_result(compute: float, alone: float, workers: int = 2, torch_threads: int | None = 2,
                    cores: int = 2, **kw: Any) -> DataLoaderResult:
    return DataLoaderResult(**kw,
        wait_s=(0.002,) * 10, compute_s=(compute,) * 10, compute_only_s=(alone,) * 5,
        config=(("num_workers", workers), ("batch_size", 64), ("pin_memory", False),
                ("persistent_workers", False), ("prefetch_factor", 2)),
        is_dataloader=True, cores=cores, torch_threads=torch_threads, loader_s=(0.2,) * 10)


def test_planted_issue_numbers_flag_oversubscription_not_a_tick() -> None:
    r = _planted_result(0.838, 0.474)
    assert r.step_slowed and abs(r.step_slowdown - 0.838 / 0.474) < 1e-9 and r.threads_wanted == 4
    fs = r.findings()
    assert not [f for f in fs if f.level == "ok" and f.topic == "num_workers"], [f.text() for f in fs]
    (th,) = [f for f in fs if f.topic == "threads"]
    assert th.level == "warn"
    assert th.message == ("2 workers + 2 torch threads on 2 usable cores: the step slowed 474 ms → 838 ms with "
                          "workers (1.77× its time alone, medians)"), th.message
    assert th.effect.startswith("torch.set_num_threads(1) and num_workers=1 (2 threads on 2 cores), or compare "
                                "--sweep num_workers=0,1,2"), th.effect
    t = r.text()
    assert "the step itself slowed 474 ms → 838 ms" in t and "✓ num_workers" not in t, t
    assert max(len(ln) for ln in t.splitlines()[1:]) <= 100, t
    assert r.metrics()["step_slowed_by_workers"] is True and r.metrics()["torch_threads"] == 2
    # the same loop whose step did not slow keeps its tick (and says the thread count is over the cores)
    r = _planted_result(0.480, 0.474)
    fs = r.findings()
    assert [f for f in fs if f.level == "ok" and f.topic == "num_workers"]
    assert [f.level for f in fs if f.topic == "threads"] == ["info"]
    assert not r.step_slowed
    # no workers: nothing to blame on them
    r = _planted_result(0.838, 0.474, workers=0)
    assert r.step_slowdown is None and not r.step_slowed


def test_under_load_the_tick_needs_idle_workers_and_the_others_are_named() -> None:
    # another process kept 0.9 cores busy; busy workers and a step 1.1x slower: cannot tell, no tick
    r = _planted_result(0.52, 0.474, workers_cores=1.2, others_cores=0.9)
    fs = {f.topic: f for f in r.findings()}
    assert fs["threads"].level == "info" and fs["threads"].message.startswith(
        "cannot tell whether the workers slow the step: 2 workers + 2 torch threads (the workers used 1.20 cores) "
        "on 2 usable cores; other processes kept 0.9 cores busy meanwhile"), fs["threads"].message
    assert fs["num_workers"].level == "info" and "cannot be told" in fs["num_workers"].message
    # the workers barely ran (I/O): they cannot have taken the step's cores, the tick stands
    r = _planted_result(0.52, 0.474, workers_cores=0.02, others_cores=0.9)
    assert [f.level for f in r.findings() if f.topic == "num_workers"] == ["ok"]
    # the step slowed 1.5x but the workers barely ran: the other processes are named, the workers are not blamed
    r = _planted_result(0.711, 0.474, workers_cores=0.02, others_cores=0.9)
    (th,) = [f for f in r.findings() if f.topic == "threads"]
    assert th.level == "info" and "used only 0.02 cores" in th.message and "not the workers" in th.effect
    # busy workers on a loaded machine and a slowed step: the warning, with the others' load said
    r = _planted_result(0.711, 0.474, workers_cores=1.2, others_cores=0.9)
    (th,) = [f for f in r.findings() if f.topic == "threads"]
    assert th.level == "warn" and "other processes kept 0.9 cores busy meanwhile" in th.message


@pytest.mark.parametrize("ratio, words", [(1.77, "1.77× faster"), (0.89, "1.12× slower"), (1.0, "no gain (within 5%)"),
                                          (1.03, "no gain (within 5%)"), (0.0, "no measurable change")])
def test_speed_change_never_calls_a_loss_faster(ratio: float, words: str) -> None:
    from perfmagic.render.dataloader import speed_change

    assert speed_change(ratio) == words


def test_compute_alone_slower_than_the_loop_is_not_faster() -> None:
    # the step alone (0.53 s) took longer than the loop's step (0.47 s): faster data gains nothing
    r = _planted_result(0.468, 0.53, workers=0)
    t = r.text()
    line = " ".join(t.split("compute alone", 1)[1].split("headroom", 1)[0].split())
    assert "× faster" not in line and "no gain from infinitely fast data (alone it ran 1.13× slower)" in line, t


def _two_cores() -> Any:
    import os

    if not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two cores and sched_setaffinity")
    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, sorted(old)[:2])  # workers (forked) inherit it: a planted 2-core machine
    return old


def test_cpu_workers_slow_the_step_flagged_on_two_cores() -> None:
    """Planted: 2 workers burning CPU non-stop (4 items × 20 ms per batch, slower than the step) and a
    40 ms-of-CPU step, all on 2 cores: the step shares its core with them. Alone it takes its CPU time;
    in the loop ~1.5× longer (3 busy threads on 2 cores; ~1.75× beside one busy neighbour)."""
    import os

    old = _two_cores()
    try:
        dl = DataLoader(SpinDataset(400, 0.020), batch_size=4, num_workers=2)
        r = dataloader_check(dl, lambda b: spin(0.040), steps=12)
    finally:
        os.sched_setaffinity(0, old)
    from perfmagic.dataloader.audit import LOADED, WORKERS_IDLE

    assert r.cores == 2
    fs = r.findings()
    loaded = any(x is not None and x > LOADED for x in (r.others_cores, r.compute_only_others_cores))
    assert r.workers_cores is not None, r.text()
    if loaded and r.workers_cores <= 0.3:
        # the plant did not take: other processes kept the cores so busy that the workers hardly ran (a
        # saturated CI box: others on 1.7 of 2 cores, the workers on 0.19). Nothing to flag then; what must
        # hold is that the load is named and the workers are not blamed for a slowdown they cannot cause
        assert "! load: other processes used" in r.text(), r.text()
        if r.workers_cores < WORKERS_IDLE:
            assert not [f for f in fs if f.topic == "threads" and f.level == "warn"], r.text()
        return
    assert r.workers_cores > 0.3, r.text()  # they burn CPU
    # never ✓: the workers took the step's cores
    assert not [f for f in fs if f.level == "ok" and f.topic == "num_workers"], r.text()
    (th,) = [f for f in fs if f.topic == "threads"]
    if loaded:
        # others' load moves the step's time in the loop or alone: the slowdown is measured, or it says it
        # cannot tell (and names the load)
        assert th.level == "warn" or th.message.startswith("cannot tell whether the workers slow the step"), r.text()
    elif r.step_slowed:
        assert th.level == "warn" and "the step itself slowed" in r.text(), r.text()
    else:
        # fresh-clone CI runs measured the step's median only 1.15–1.16× its time alone (the mean 1.3×), and
        # once 1.08× (the mean 1.31×: the workers slow only the steps they overlap): below the 1.25× that
        # counts as slowed, so it says it cannot tell — and gives no ✓ (asserted above)
        assert r.step_slowdown is not None and max(r.step_slowdown, r.step_slowdown_mean) >= 1.10, r.text()
        assert th.message.startswith("cannot tell whether the workers slow the step"), r.text()


def test_io_workers_do_not_slow_the_step_on_two_cores() -> None:
    """Control: workers that sleep (I/O) leave the cores to the step: no slowdown flagged."""
    import os

    old = _two_cores()
    try:
        dl = DataLoader(SleepDataset(400, 0.005), batch_size=4, num_workers=2)
        r = dataloader_check(dl, lambda b: spin(0.040), steps=12)
    finally:
        os.sched_setaffinity(0, old)
    from perfmagic.dataloader.audit import LOADED

    fs = r.findings()
    # what must hold however busy the machine: the workers are seen to sleep and are never blamed
    assert r.workers_cores is not None and r.workers_cores < 0.25, r.text()  # they sleep
    assert not [f for f in fs if f.topic == "threads" and f.level == "warn"], r.text()
    assert r.step_slowdown is not None, r.text()
    if any(x is not None and x > LOADED for x in (r.others_cores, r.compute_only_others_cores)):
        # Beside a busy neighbour (make unit-busy) the strict ✓ cannot be asserted: the neighbour shares the
        # 2 cores with the spinning step, and each wake-up of a sleeping worker can make the scheduler move
        # the step onto the neighbour's core, so the step may be measured slower in the loop than alone
        # because of the neighbour (CI: "compute-bound: data wait is 4%" and no ✓). The audit then rightly
        # withholds the ✓; what it must still get right is whom it blames: any slowdown goes to the other
        # processes, never to the workers, and the load is named. (A neighbour during compute alone only
        # makes the two times incomparable: the same holds.)
        levels = [f.level for f in fs if f.topic == "num_workers"]
        assert levels in (["ok"], ["info"]), r.text()
        if r.step_slowed or levels == ["info"]:
            (th,) = [f for f in fs if f.topic == "threads"]
            assert "not the workers" in th.effect or th.message.startswith("cannot tell"), r.text()
            assert "other processes" in th.text(), r.text()
    else:  # a quiet machine: the step's time does not grow with sleeping workers, and the ✓ stands
        assert not r.step_slowed and r.step_slowdown < 1.2, r.text()
        assert [f.level for f in fs if f.topic == "num_workers"] == ["ok"], r.text()


def test_busy_workers_that_slow_only_some_steps_get_no_check_mark() -> None:
    """Planted (no timing), from fresh-clone run fc8: busy workers slow the steps they overlap. The
    median step was 1.08× its time alone and the mean 1.31×, and the audit gave a ✓ on the median. The
    ✓ needs the step not to grow by either measure."""
    r = DataLoaderResult(wait_s=(0.002,) * 12, compute_s=(0.041,) * 7 + (0.075,) * 5, compute_only_s=(0.040,) * 5,
                         config=(("num_workers", 2), ("batch_size", 4), ("pin_memory", False),
                                 ("persistent_workers", False), ("prefetch_factor", 2)),
                         is_dataloader=True, cores=2, torch_threads=2, loader_s=(0.04,) * 10,
                         workers_cores=1.31, others_cores=0.0)
    assert r.step_slowdown < 1.10 <= r.step_slowdown_mean and not r.step_slowed
    fs = r.findings()
    assert not [f for f in fs if f.level == "ok" and f.topic == "num_workers"], [f.text() for f in fs]
    (th,) = [f for f in fs if f.topic == "threads"]
    assert th.level == "info" and th.message.startswith("cannot tell whether the workers slow the step"), th.message
    assert "on average" in th.message, th.message
    # the same loop with every step at its time alone keeps the ✓
    ok = DataLoaderResult(wait_s=(0.002,) * 12, compute_s=(0.041,) * 12, compute_only_s=(0.040,) * 5,
                          config=r.config, is_dataloader=True, cores=2, torch_threads=2, loader_s=(0.04,) * 10,
                          workers_cores=1.31, others_cores=0.0)
    assert [f.level for f in ok.findings() if f.topic == "num_workers"] == ["ok"]


def test_oversubscribed_busy_workers_and_a_grown_step_get_no_check_mark() -> None:
    """Planted (no timing): the CI case — 2 workers on 1.27 cores + 2 torch threads on 2 cores, quiet, the
    step 1.15× its time alone (below the 1.25× that counts as slowed): not blamed, and no ✓ either."""
    r = _planted_result(0.046, 0.040, workers_cores=1.27, others_cores=0.0)
    fs = r.findings()
    assert not [f for f in fs if f.level == "ok" and f.topic == "num_workers"], [f.text() for f in fs]
    (th,) = [f for f in fs if f.topic == "threads"]
    assert th.message.startswith("cannot tell whether the workers slow the step") and "1.15×" in th.message
    quiet = _planted_result(0.041, 0.040, workers_cores=1.27, others_cores=0.0).findings()  # 1.025×: ✓ stands
    assert [f.level for f in quiet if f.topic == "num_workers"] == ["ok"], [f.text() for f in quiet]


class ColdAfterPause:
    """A planted step that is slow after a pause (as a short step whose caches go cold while the loader
    works): 3 ms when more than 4 ms passed since its last call, 0.3 ms back to back. ``memo``: a batch seen
    before costs 0.3 ms whatever the pause (a step that caches per-batch work: the batches do not all do the
    same work). ``stop_in_pause``: Ctrl-C at the first call after a pause that follows the back-to-back calls
    of compute alone."""

    def __init__(self, memo: bool = False, stop_in_pause: bool = False) -> None:
        self.last, self.streak, self.alone_seen, self.seen = 0.0, 0, False, set()
        self.memo, self.stop_in_pause = memo, stop_in_pause

    def __call__(self, batch: Any) -> None:
        now = time.perf_counter()
        gap = now - self.last
        self.streak = self.streak + 1 if gap < 0.002 else 0
        self.alone_seen = self.alone_seen or self.streak >= 3
        if self.stop_in_pause and self.alone_seen and gap > 0.004:
            raise KeyboardInterrupt
        key = float(batch[0][0])  # the first item's index (ids of freed batches are reused)
        cheap = (key in self.seen) if self.memo else gap <= 0.004
        self.seen.add(key)
        time.sleep(0.0003 if cheap else 0.003)
        self.last = time.perf_counter()


def test_a_step_slower_after_a_pause_is_measured_so_and_compute_alone_stands() -> None:
    """Planted: 8 ms of loading per batch in the main process, a step of 3 ms after a pause and 0.3 ms back
    to back. The loop's compute (3 ms) is 10× compute alone (0.3 ms); the step timed after pauses as long as
    the loop's wait reproduces it, so the gap has its cause measured and compute alone stands for infinitely
    fast data (steps back to back)."""
    dl = DataLoader(SleepDataset(200, 0.002), batch_size=4)
    r = dataloader_check(dl, ColdAfterPause(), steps=8, loader_alone=False)
    assert r.pause_s is not None and 0.006 <= r.pause_s <= 0.05 and len(r.compute_paused_s) == 5
    assert r.pause_explains and r.compute_disagreement is None and r.compute_alone_usable
    assert r.speedup_if_data_free == pytest.approx(r.step_s / r.compute_only_step_s)
    t = " ".join(r.text().split())
    assert "inconsistent" not in t and "a short step runs slower after a pause" in t, t
    assert r.metrics()["compute_after_pause_s"] >= 0.0025 and r.metrics()["pause_s"] == r.pause_s


def test_a_gap_a_pause_does_not_reproduce_is_still_named_with_the_pause_measured() -> None:
    """Planted: the step caches per-batch work, so the cached batch of compute alone is cheap whatever the
    pause: the gap stays unexplained, and the line says that a pause was tried and what it measured."""
    dl = DataLoader(SleepDataset(200, 0.002), batch_size=4)
    r = dataloader_check(dl, ColdAfterPause(memo=True), steps=8, loader_alone=False)
    assert len(r.compute_paused_s) == 5 and not r.pause_explains and r.compute_disagreement is not None
    t = " ".join(r.text().split())
    assert "! inconsistent: the step's compute in the loop took" in t, t
    assert "nor does a pause between steps (after a " in t and "check that every batch does the same work" in t, t


def test_no_paused_calls_where_the_loop_and_compute_alone_agree_or_workers_ran() -> None:
    dl = DataLoader(SleepDataset(200, 0.002), batch_size=4)
    r = dataloader_check(dl, lambda b: time.sleep(0.001), steps=6, loader_alone=False)
    assert r.compute_paused_s == () and r.pause_s is None and not r.pause_explains


def test_ctrl_c_during_the_paused_calls_keeps_what_was_measured() -> None:
    dl = DataLoader(SleepDataset(200, 0.002), batch_size=4)
    with pytest.raises(BenchInterrupted) as ei:
        dataloader_check(dl, ColdAfterPause(stop_in_pause=True), steps=8, loader_alone=False)
    r = ei.value.result
    assert r.status == "interrupted" and r.n_steps >= 1 and len(r.compute_only_s) >= 3
    assert r.compute_paused_s == () and "[INTERRUPTED]" in r.text()


def test_idle_workers_are_not_blamed_for_a_step_the_pause_slows() -> None:
    """Planted, from notebook 10 (fresh clone at 979fa8c): 2 workers that mostly wait (0.10 cores) and a step
    1.81× slower in the loop than alone. The audit said "! threads: ... the workers and the step's threads
    compete for the same cores → num_workers=1" and "mostly the step's own compute slowed by the workers,
    not waiting for data" under a headline of 85% data wait; its own sweep then found 4 workers 1.9× faster.
    Here the step is slow after a pause (3 ms, 0.3 ms back to back) and the workers sleep: the step timed
    after the loop's pause, with the workers stopped, reproduces the loop, so the pause is named, not the
    workers."""
    dl = DataLoader(SleepDataset(400, 0.004), batch_size=4, num_workers=2, persistent_workers=True)
    r = dataloader_check(dl, ColdAfterPause(), steps=8)
    assert r.step_slowed and len(r.compute_paused_s) == 5 and r.pause_explains
    fs = r.findings()
    (th,) = [f for f in fs if f.topic == "threads"]
    assert th.kind == "threads.pause-slowed" and th.level == "info", th.text()
    assert not [f for f in fs if f.kind == "workers.keep-up-slowed"]
    t = " ".join(r.text().split())
    assert "the pause before each step slows it, not the workers" in t and "compete for" not in t, t
    assert "mostly the step's own compute slowed by the workers" not in t, t


def test_idle_workers_and_an_unexplained_slow_step_say_cannot_tell() -> None:
    """Planted: the step caches per-batch work (cheap on the cached batch whatever the pause), the workers
    sleep (40 ms a batch): the loop's step is 10× its time alone, a pause does not reproduce that, and the
    workers used too little CPU to take its cores: 'cannot tell what slows the step', no warning on them."""
    dl = DataLoader(SleepDataset(400, 0.01), batch_size=4, num_workers=2, persistent_workers=True)
    r = dataloader_check(dl, ColdAfterPause(memo=True), steps=8, loader_alone=False)
    assert r.step_slowed and not r.pause_explains and r.workers_cores is not None
    (th,) = [f for f in r.findings() if f.topic == "threads"]
    if r.workers_cores < 0.25 and (r.others_cores or 0.0) <= 0.3 and not r.load_gap("loop", "compute"):
        assert th.kind == "threads.idle-slowed" and th.level == "info", th.text()
        t = " ".join(r.text().split())
        assert "cannot tell what slows the step" in t and "made up" in t, t
    else:  # (a busy machine: the workers' share or the others' load decides another branch)
        assert th.kind != "threads.idle-slowed"


def test_a_slowed_step_is_not_called_most_of_the_loop_when_the_wait_is() -> None:
    """Planted (no timing): busy workers slow the step 2.7 → 4.9 ms while the loop waits 28 ms a step for
    data. The compute line said "mostly the step's own compute slowed by the workers, not waiting for data";
    2.2 ms of slowdown against 28 ms of waiting is not most of it."""
    r = DataLoaderResult(wait_s=(0.028,) * 6, compute_s=(0.0049,) * 6, compute_only_s=(0.0027,) * 5,
                         config=(("num_workers", 2), ("batch_size", 128), ("pin_memory", False),
                                 ("persistent_workers", True), ("prefetch_factor", 2)),
                         is_dataloader=True, cores=2, torch_threads=1, loader_s=(0.032,) * 6,
                         workers_cores=0.9, others_cores=0.0)
    t = " ".join(r.text().split())
    assert "mostly the step's own compute slowed" not in t and "is the wait for data" in t, t
    busy = DataLoaderResult(wait_s=(0.001,) * 6, compute_s=(0.0049,) * 6, compute_only_s=(0.0027,) * 5,
                            config=r.config, is_dataloader=True, cores=2, torch_threads=1, loader_s=(0.004,) * 6,
                            workers_cores=0.9, others_cores=0.0)
    assert "mostly the step's own compute slowed by the workers" in " ".join(busy.text().split())


def test_an_input_bound_loop_is_not_said_to_keep_up_without_the_loaders_rate() -> None:
    """Planted (no timing): 2 workers, 85% of each step waiting for data, no loader-alone pass. The audit
    said '2 workers keep up with the step (data wait 85%)'; they do not, and how many would is unknown."""
    r = DataLoaderResult(wait_s=(0.017,) * 8, compute_s=(0.003,) * 8, compute_only_s=(0.003,) * 5,
                         config=(("num_workers", 2), ("batch_size", 4), ("pin_memory", False),
                                 ("persistent_workers", True), ("prefetch_factor", 2)),
                         is_dataloader=True, cores=2, torch_threads=1, workers_cores=0.1, others_cores=0.0)
    (nw,) = [f for f in r.findings() if f.topic == "num_workers"]
    assert nw.kind == "workers.behind" and nw.level == "warn", nw.text()
    t = " ".join(r.text().split())
    assert "keep up with the step" not in t and "do not keep up: the loop waits 85%" in t, t


def test_a_step_grown_below_the_slowed_mark_is_not_said_not_to_slow() -> None:
    """Planted (no timing), from notebook 10: idle workers (0.15 cores), oversubscribed, the step 1.36× its
    time alone but only 0.75 ms more (a slowdown counts from 1.25× and 1 ms). The line read 'the step did
    not slow with workers (×1.36)'. Where a pause as long as the loop's wait reproduces the loop's step, the
    pause is named instead."""
    r = _planted_result(0.00285, 0.0021, workers_cores=0.15, others_cores=0.0)
    assert not r.step_slowed
    t = " ".join(r.text().split())
    assert "did not slow" not in t and "1.36× its time alone with them, too little to count as slowed" in t, t
    paused = _planted_result(0.00285, 0.0021, workers_cores=0.15, others_cores=0.0,
                             compute_paused_s=(0.0028,) * 5, pause_s=0.002)
    assert paused.pause_explains
    (th,) = [f for f in paused.findings() if f.topic == "threads"]
    assert th.kind == "threads.pause-slowed", th.text()


def test_too_few_workers_that_mostly_wait_are_not_told_the_cores_cap_them() -> None:
    """Planted (no timing), from notebook 10: 2 workers at 0.05 cores deliver 31 batches/s, the step takes
    384/s. The advice said 'about 25 workers needed; more than the 2 usable cores: make each item cheaper',
    and the sweep in the same notebook measured 4 workers 1.97× faster: workers that wait (I/O) are not
    capped by the cores. Busy workers (1.9 cores) still are."""
    kw = dict(wait_s=(0.0289,) * 6, compute_s=(0.0043,) * 6, compute_only_s=(0.0026,) * 5,
              config=(("num_workers", 2), ("batch_size", 128), ("pin_memory", False),
                      ("persistent_workers", True), ("prefetch_factor", 2)),
              is_dataloader=True, cores=2, torch_threads=1, loader_s=(0.0325,) * 6, others_cores=0.0)
    idle = " ".join(DataLoaderResult(**kw, workers_cores=0.05).text().split())
    assert "workers beyond the 2 usable cores can still add throughput" in idle, idle
    assert "compare --sweep num_workers=2,4,8" in idle and "more than the 2 usable cores: make" not in idle, idle
    busy = " ".join(DataLoaderResult(**kw, workers_cores=1.9).text().split())
    assert "more than the 2 usable cores: make each item cheaper" in busy and "can still add" not in busy, busy
