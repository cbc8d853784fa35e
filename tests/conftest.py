"""Shared fixtures: a real IPython shell with perfmagic loaded, capturing every display bundle."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

try:  # no CUDA here: the GPU tests are skipped, but stay real for the machines that have one
    import torch as _torch

    HAS_CUDA = bool(_torch.cuda.is_available())
    if HAS_CUDA and os.environ.get("PERFMAGIC_TEST_CUDA_FIRST"):
        # tools/gpu_check.sh: CUDA initialised before any test, as a notebook that used the GPU earlier
        # has it; every CPU test must still measure the CPU
        _torch.zeros(1, device="cuda")
except Exception:  # pragma: no cover
    HAS_CUDA = False


os.environ.setdefault("COLUMNS", "100")  # %perf fits the terminal: the tests read it at 100 columns


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords and not HAS_CUDA:
            item.add_marker(skip)


class Shell:
    """A thin wrapper over InteractiveShell: run cells, read what the user would see."""

    def __init__(self, ip: Any, pub: Any) -> None:
        self.ip = ip
        self.pub = pub

    def run(self, source: str) -> Any:
        self.pub.outputs.clear()
        return self.ip.run_cell(source, store_history=True)

    @property
    def bundles(self) -> list[dict[str, Any]]:
        return [o["data"] for o in self.pub.outputs]

    def text(self) -> str:
        return "\n".join(b.get("text/plain", "") for b in self.bundles)


@pytest.fixture(autouse=True)
def _no_working_folder_ledger(tmp_path_factory: Any, monkeypatch: Any) -> Any:
    """Every test gets a ledger folder of its own, never the working folder's (a developer's
    ``.perfmagic/`` there would otherwise leak runs into tests that call the engines: run ids 1, 2 and 4
    made ``scalability(load=[1, 2, 4])`` read loads as runs). Tests of where the ledger lives remove the
    variable (``clean_env``) or set their own (``ledger_dir``)."""
    monkeypatch.setenv("PERFMAGIC_LEDGER_DIR", str(tmp_path_factory.mktemp("ledger") / ".perfmagic"))
    from perfmagic.storage import session as _session

    _session.forget_ledgers()
    yield
    _session.forget_ledgers()


@pytest.fixture(autouse=True)
def _fresh_speed_readings(monkeypatch: Any) -> None:
    """Every test starts with no drift-guard readings in its history: the machine's speed states an estimate
    reads (core.reference.recent_readings) are those of its own test, not of the tests before it."""
    from collections import deque

    from perfmagic.core import reference

    monkeypatch.setattr(reference, "_readings", deque(maxlen=64))


@pytest.fixture
def ledger_dir(tmp_path: Any, monkeypatch: Any) -> Any:
    d = tmp_path / ".perfmagic"
    monkeypatch.setenv("PERFMAGIC_LEDGER_DIR", str(d))
    from perfmagic.storage import session as _session

    _session.forget_ledgers()
    yield d
    _session.forget_ledgers()


@pytest.fixture
def shell(ledger_dir: Any, monkeypatch: Any) -> Any:
    from IPython.core.displaypub import CapturingDisplayPublisher
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    old_pub = ip.display_pub
    pub = CapturingDisplayPublisher()
    ip.display_pub = pub
    ip.run_line_magic("load_ext", "perfmagic")
    try:
        yield Shell(ip, pub)
    finally:
        ip.run_line_magic("unload_ext", "perfmagic")
        ip.display_pub = old_pub


@pytest.fixture
def gate_off(monkeypatch: Any) -> None:
    """The speed gate kept from acting: a test that plants Ctrl-C at a cell's k-th call needs the run still
    sampling then. With the gate on, a slow machine state longer than the gate's wait (0.25 s) ends the run
    on the fast samples kept, before call k (fresh-clone CI at abe7280: a roofline run with -b 10 ended
    before its 400th call)."""
    from perfmagic.core import reference

    monkeypatch.setattr(reference, "fast_is_usual", lambda: False)


@pytest.fixture
def roofs(tmp_path: Any, monkeypatch: Any) -> Any:
    """CPU roofs planted in a temporary cache, so %%roofline never calibrates in a test."""
    from perfmagic.roofs import ceilings as _ceilings

    monkeypatch.setenv("PERFMAGIC_CACHE_DIR", str(tmp_path / "cache"))
    fp, _ = _ceilings.machine_fingerprint("cpu")
    c = _ceilings.Ceilings(device="cpu", fingerprint=fp, measured_utc="2026-11-22T00:00:00Z",
                           compute={"float32": 250e9, "float64": 120e9, "bfloat16": 140e9}, bandwidth_Bps=20e9)
    _ceilings.save(c)
    return c


@contextlib.contextmanager
def slow_gc_heap(min_collect_s: float) -> Iterator[float]:
    """A planted heap whose full ``gc.collect()`` takes at least ``min_collect_s`` (a notebook with torch
    loaded: ~0.3 s), or as long as 6 million small objects make it; yields the collection's time."""
    import gc
    import time

    heap: list = []
    collect_s = 0.0
    while collect_s < min_collect_s and len(heap) < 6_000_000:
        heap.extend({"a": [i]} for i in range(500_000))
        t = time.perf_counter()
        gc.collect()
        collect_s = time.perf_counter() - t
    try:
        yield collect_s
    finally:
        del heap


def amdahl_truth(cell: Any, base: int, n: int, reps: int = 5) -> float:
    """The serial fraction a planted cell really has here, timed apart from perfmagic: ``cell(base)`` and
    ``cell(n)`` alternated ``reps`` times, medians, Amdahl's law solved for S from their ratio q:
    S = (q/n − 1/base) / ((1 − 1/base) − q·(1 − 1/n)). A planted sleep-based cell carries the thread
    pool's own wake-up cost, which grows with n and with the VM's state: this is the S to recover."""
    import statistics
    import time

    tb, tn = [], []
    for _ in range(reps):
        for k, out in ((base, tb), (n, tn)):
            t = time.perf_counter()
            cell(k)
            out.append(time.perf_counter() - t)
    q = statistics.median(tb) / statistics.median(tn)
    return (q / n - 1 / base) / ((1 - 1 / base) - q * (1 - 1 / n))


def spin_loop(k: int) -> int:
    x = 0
    for i in range(k):
        x += i
    return x


@pytest.fixture(scope="session")
def spin_200us() -> int:
    """The loop count of a pure-Python spin calibrated to take about 200 µs here."""
    import time

    k = 2000
    for _ in range(20):
        t = time.perf_counter()
        spin_loop(k)
        dt = time.perf_counter() - t
        if dt > 0:
            k = max(100, int(k * 200e-6 / dt))
    return k
