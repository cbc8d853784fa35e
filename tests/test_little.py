"""Little's law helper: the arithmetic, the units, the cap by free cores, and %littles."""

from __future__ import annotations

import os

import pytest

from perfmagic import BadOptionError
from perfmagic.scaling.littles import littles, parse_rate, workers_for


def test_solves_the_missing_quantity() -> None:
    assert littles(throughput=100, latency=1.0).concurrency == pytest.approx(100)
    assert littles(concurrency=10, latency=0.5).throughput == pytest.approx(20)
    assert littles(throughput=50, concurrency=5).latency == pytest.approx(0.1)
    with pytest.raises(BadOptionError, match="exactly two"):
        littles(throughput=1)
    with pytest.raises(BadOptionError):
        littles(throughput=-1, latency=1)


def test_little_follows_the_result_protocol() -> None:
    from perfmagic.result import Result

    r = littles(throughput=100, latency=0.25)
    assert isinstance(r, Result) and r.metrics()[r.primary_metric] == pytest.approx(25)
    assert r.headline().startswith("needed concurrency: 25 tasks in flight") and r.samples() == {}
    assert r.to_dict()["solved"] == "concurrency" and repr(r).startswith("<Little: needed concurrency")
    bundle = r._repr_mimebundle_()
    assert bundle["text/plain"] == r.text() and "25 tasks in flight" in bundle["text/html"]


def test_units() -> None:
    assert parse_rate("100/s") == 100 and parse_rate("6000/min") == pytest.approx(100)
    assert parse_rate("2/ms") == pytest.approx(2000) and parse_rate("7") == 7
    for bad in ("fast", "10/fortnight", "0/s"):
        with pytest.raises(BadOptionError):
            parse_rate(bad)


def test_cpu_bound_workers_are_capped_by_free_cores(monkeypatch) -> None:
    from perfmagic.scaling import littles as _little

    monkeypatch.setattr(_little, "free_cores", lambda: (1.5, 2))
    n, notes = workers_for(100, 1.0)
    assert n == 1 and "capped at 1" in notes[0] and "100 CPU-bound workers" in notes[0]
    n, notes = workers_for(100, 1.0, cpu_bound=False)
    assert n == 100 and "I/O-bound" in notes[0]
    n, notes = workers_for(1, 0.5)
    assert n == 1 and not notes


def test_littles_magic(shell, capsys) -> None:
    res = shell.run("%littles throughput=100/s latency=1s --io")
    assert res.error_in_exec is None
    out = capsys.readouterr().out
    assert "needed concurrency: 100 tasks in flight" in out and "workers: 100" in out
    shell.run("import time")
    shell.run("%%gpubench -q -l nap\ntime.sleep(0.01)\n")
    # more tasks in flight than this machine has cores (a 10 ms CPU task): the workers are capped at the cores
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    res = shell.run(f"%littles throughput={100 * (cores + 4)}/s run=1")
    out = capsys.readouterr().out
    assert res.error_in_exec is None and "latency = run #1 'nap' median" in out and "capped" in out
    res = shell.run("%littles speed=3")
    assert type(res.error_in_exec).__name__ == "UsageError" and "throughput=" in str(res.error_in_exec)
    res = shell.run("%littles throughput=100/s run=99")
    assert "99" in str(res.error_in_exec)
