"""%%estimate through the shell: both forms, the gate, --run, bad input, an exception, Ctrl-C."""

from __future__ import annotations

import pytest

SETUP = """
import time
def work(k):
    x = 0
    for _ in range(k):
        x += 1
    return x
"""


def test_scaling_form_reports_predicts_and_records(shell) -> None:
    shell.run(SETUP)
    res = shell.run("%%estimate n=3_000_000 --budget 1m --run --measure 1s\nwork(n)\n")
    assert res.error_in_exec is None, res.error_in_exec
    (bundle,) = shell.bundles
    text = bundle["text/plain"]
    assert text.startswith("estimate for n=3,000,000:") and "WILL FIT" in text and "actual full run" in text
    assert "run #1" in text and "image/png" in bundle
    import perfmagic

    row = perfmagic.ledger().iloc[0]
    assert row["magic"] == "estimate" and row["verdict"] == "will fit"
    assert row["actual_s"] > 0 and abs(row["time_error"]) < 0.5
    assert "n" not in shell.ip.user_ns  # the size variable is not left in the notebook
    shell.run("%perf")
    assert "predicts" in shell.text() and "actual" in shell.text()


def test_per_iteration_form_and_the_gate(shell) -> None:
    shell.run(SETUP)
    res = shell.run("%%estimate --total 119*20 --budget 2s --no-plot\ntime.sleep(0.002)\n")
    assert res.error_in_exec is None, res.error_in_exec
    text = shell.text()
    assert text.startswith("estimate for 2,380 units:") and "WILL NOT FIT" in text
    assert "units/s" in text and "the most units that fit" in text
    import perfmagic

    assert perfmagic.ledger().iloc[0]["verdict"] == "will not fit"


def test_output_returns_the_result(shell) -> None:
    shell.run(SETUP)
    shell.run("r = None")
    res = shell.run("%%estimate n=10_000 -o -q --measure 0.3\nwork(n)\n")
    assert res.error_in_exec is None and res.result is not None
    assert res.result.mode == "scaling" and shell.bundles == []


@pytest.mark.parametrize("cell, needle", [
    ("%%estimate\nwork(1)\n", "needs either NAME=FULL"),
    ("%%estimate n=10 --total 5\nwork(n)\n", "needs either NAME=FULL"),
    ("%%estimate n=0\nwork(n)\n", ">= 1"),
    ("%%estimate n=undefined_name\nwork(n)\n", "NameError"),
    ("%%estimate 12\nwork(n)\n", "is not NAME=FULL"),
    ("%%estimate n=100 --sizes 10,20,400\nwork(n)\n", "no larger than the full size"),
    ("%%estimate n=100 --sizes a,b\nwork(n)\n", "integers"),
    ("%%estimate --total 10 --sizes 1,2,3\nwork(1)\n", "--sizes applies to the scaling form"),
    ("%%estimate n=100 --force\nwork(n)\n", "--force goes with --run"),
    ("%%estimate n=100 --budget soon\nwork(n)\n", "soon"),
    ("%%estimate n=100\n\n", "empty"),
    ("%%estimate n=100 --bogus\nwork(n)\n", "unrecognized arguments"),
])
def test_bad_input(shell, cell, needle) -> None:
    shell.run(SETUP)
    res = shell.run(cell)
    assert type(res.error_in_exec).__name__ == "UsageError", res.error_in_exec
    assert needle in str(res.error_in_exec)


def test_exception_in_the_cell_is_the_users(shell) -> None:
    import perfmagic

    shell.run(SETUP)
    res = shell.run("%%estimate n=1000\nraise ValueError('boom')\n")
    assert isinstance(res.error_in_exec, ValueError)
    assert len(perfmagic.ledger()) == 0


def test_ctrl_c_while_measuring_shows_the_fit_and_records_it(shell) -> None:
    import perfmagic

    shell.run(SETUP)
    shell.ip.user_ns["calls"] = {"k": 0}
    res = shell.run("%%estimate n=10_000_000 --measure 2s --no-plot\ncalls['k'] += 1\n"
                    "if calls['k'] == 20:\n    raise KeyboardInterrupt\nwork(n)\n")
    assert isinstance(res.error_in_exec, KeyboardInterrupt)
    assert "interrupted" in shell.text()
    df = perfmagic.ledger()
    assert list(df["status"]) == ["interrupted"]


def test_ctrl_c_during_the_run_records_how_far_it_got(shell) -> None:
    import perfmagic

    shell.run(SETUP)
    shell.ip.user_ns["calls"] = {"k": 0}
    res = shell.run("%%estimate --total 400 --run --no-plot --measure 0.2s\ncalls['k'] += 1\ntime.sleep(0.002)\n"
                    "if calls['k'] == 200:\n    raise KeyboardInterrupt\n")
    assert isinstance(res.error_in_exec, KeyboardInterrupt)
    assert "full run interrupted" in shell.text()
    row = perfmagic.ledger().iloc[0]
    assert row["status"] == "interrupted" and 0 < row["actual_completed"] < 1
