"""Exact under Ctrl-C (issue 30): a run is written once or not at all, wherever the interrupt lands.

The interrupt is injected the way Ctrl-C arrives: ``_thread.interrupt_main()`` (the SIGINT handler
runs at the next bytecode boundary of the main thread), at a random line event inside
``Ledger.record()`` (a trace function counts every line of every frame under it: our code, sqlite3's
Python wrapper, json). Half the trials start with a run kept in memory from a failed write (the case
that duplicated rows: the pending run written, then written again).
"""

from __future__ import annotations

import _thread
import random
import sqlite3
import sys
from typing import Any

import pytest

from perfmagic.storage.ledger import Ledger, RecordedInterrupt


def _record(led: Ledger, label: str) -> Any:
    return led.record(magic="gpubench", label=label, code="x = 1\n", options={}, metrics={"median_s": 1e-3},
                      samples={"raw": [1e-3] * 30, "number": 1}, env={}, primary_metric="median_s")


def _line_events(fn: Any) -> int:
    n = [0]

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        if event == "line":
            n[0] += 1
        return tracer
    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(None)
    return n[0]


def _interrupt_at(k: int, fn: Any) -> BaseException | None:
    n = [0]

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        if event == "line":
            n[0] += 1
            if n[0] == k:
                _thread.interrupt_main()
        return tracer
    try:
        sys.settrace(tracer)
        try:
            fn()
        finally:
            sys.settrace(None)
        for _ in range(1000):  # an interrupt noted on the very last line is delivered here
            pass
    except KeyboardInterrupt as exc:
        return exc
    return None


def _fail_once(led: Ledger, monkeypatch: Any) -> None:
    real = led._write_once
    calls = [0]

    def flaky(rows: Any) -> Any:
        calls[0] += 1
        if calls[0] == 1:
            raise sqlite3.OperationalError("disk I/O error (planted)")
        return real(rows)
    monkeypatch.setattr(led, "_write_once", flaky)


def test_200_interrupts_at_random_points_of_record_never_duplicate_or_lose_a_run(tmp_path, monkeypatch) -> None:
    led = Ledger(directory=tmp_path / "led", notebook="nb.ipynb")
    _record(led, "warm")  # the file exists: later records take the usual path
    total = _line_events(lambda: _record(led, "count"))
    assert total > 50
    rng = random.Random(30)
    outcomes = {"outside": 0, "after": 0}
    for i in range(200):
        pending_label = None
        if i % 2:
            with monkeypatch.context() as m:
                _fail_once(led, m)
                pending_label = f"pending{i}"
                ref = _record(led, pending_label)
                assert not ref.saved and len(led.pending) == 1
        label = f"run{i}"
        exc = _interrupt_at(rng.randint(1, total), lambda: _record(led, label))
        assert isinstance(exc, KeyboardInterrupt), f"trial {i}: the injected interrupt was lost"
        led.flush()  # what was kept in memory is written now, once
        saved = [r["label"] for r in led.rows(notebook=None) if r["label"] in (label, pending_label)]
        kept = [r["label"] for r in led.pending if r["label"] in (label, pending_label)]
        if isinstance(exc, RecordedInterrupt):  # held until the run was written: it is there once
            outcomes["after"] += 1
            assert exc.ref.saved and saved.count(label) == 1, (i, saved, kept)
        else:  # landed just before record() held Ctrl-C (not written) or just after it let go (written)
            outcomes["outside"] += 1
            assert saved.count(label) + kept.count(label) <= 1, (i, saved, kept)
        if pending_label is not None:
            assert saved.count(pending_label) == 1 and pending_label not in kept, (i, saved, kept)
    labels = [r["label"] for r in led.rows(notebook=None)]
    assert len(labels) == len(set(labels)), "a run was written twice"
    assert outcomes["after"] >= 150, outcomes  # the hold covers nearly all of record()


def test_a_ctrl_c_while_recording_shows_the_result_then_stops_the_cell(shell, ledger_dir, monkeypatch) -> None:
    from perfmagic.storage import ledger as ledger_mod

    real = ledger_mod.Ledger._record_row

    def interrupted(self: Any, row: Any) -> Any:
        ref = real(self, row)
        _thread.interrupt_main()  # Ctrl-C just after the COMMIT
        for _ in range(1000):
            pass
        return ref
    monkeypatch.setattr(ledger_mod.Ledger, "_record_row", interrupted)
    res = shell.run("%%gpubench -b 0.2 --no-plot -l held\nsum(range(100))\n")
    monkeypatch.setattr(ledger_mod.Ledger, "_record_row", real)
    assert "held" in shell.text() and "median" in shell.text(), shell.text()  # shown, then stopped
    assert isinstance(res.error_in_exec, KeyboardInterrupt), res.error_in_exec
    assert "was being recorded; it was saved once" in str(res.error_in_exec)
    rows = [r for r in ledger_mod.Ledger(directory=ledger_dir).rows(notebook=None) if r["label"] == "held"]
    assert len(rows) == 1 and rows[0]["status"] == "ok"
    nxt = shell.run("%%gpubench -b 0.2 --no-plot -l next\nsum(range(100))\n")  # the next cell is not hit
    assert nxt.error_in_exec is None, nxt.error_in_exec


def test_without_an_interrupt_record_returns_and_the_handler_is_restored(tmp_path) -> None:
    import signal

    before = signal.getsignal(signal.SIGINT)
    led = Ledger(directory=tmp_path / "led2", notebook="nb.ipynb")
    ref = _record(led, "plain")
    assert ref.saved and signal.getsignal(signal.SIGINT) is before
    with pytest.raises(KeyboardInterrupt):
        _thread.interrupt_main()
        for _ in range(1000):
            pass
