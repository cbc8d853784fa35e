"""%%estimate through the shell: both forms, the gate, --run, bad input, an exception, Ctrl-C; and what
an EstimateResult shows by itself (the result protocol: text, PNG, self-contained HTML)."""

from __future__ import annotations

import time

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
    res = shell.run("%%estimate n=3_000_000 --limit 1m --run --budget 1s\nwork(n)\n")
    assert res.error_in_exec is None, res.error_in_exec
    (bundle,) = shell.bundles
    text = bundle["text/plain"]
    if "no estimate: runs of the same size differ by" in text:
        # the honest refusal on a machine whose speed swings between runs of one size (a fresh-clone run on
        # the 2-core VM: ±41%): it must show its evidence and start no full run; the normal path cannot be
        # tested on such a machine
        assert "1 sd over" in text and "the widest:" in text and "actual full run" not in text, text
        pytest.skip("the VM's runs of one size swung too much for an estimate: " + text.splitlines()[0][:160])
    assert text.startswith("estimate for n=3,000,000:") and "WILL FIT" in text and "actual full run" in text
    # the interval says what run-to-run variation it carries, and where it was measured
    assert "run-to-run variation ±" in text and "(1 sd, " in text and "in the interval" in text
    assert "run #1" in text and "image/png" in bundle
    page = bundle["text/html"]  # self-contained: the text, the figure inline, the measured points folded
    assert "run #1" in page and "data:image/png;base64," in page and "<details" in page and "Measured points" in page
    import perfmagic

    row = perfmagic.ledger("estimate").iloc[0]
    assert row["magic"] == "estimate" and row["verdict"] == "will fit"
    assert row["actual_s"] > 0
    if abs(row["time_error"]) >= 0.5:
        # one full run on a VM whose speed swings (beside a busy neighbour the same 3M-step loop took
        # 0.08-0.16 s within seconds): the prediction must be within 50% of some run of the job timed here
        work = shell.ip.user_ns["work"]
        runs = [row["actual_s"]]
        for _ in range(3):
            t = time.perf_counter()
            work(3_000_000)
            runs.append(time.perf_counter() - t)
        assert min(abs(row["predicted_s"] / a - 1) for a in runs) < 0.5, (row["predicted_s"], runs)
    assert "n" not in shell.ip.user_ns  # the size variable is not left in the notebook
    shell.run("%perf")
    assert "predicts" in shell.text() and "actual" in shell.text()


def test_per_iteration_form_and_the_gate(shell) -> None:
    shell.run(SETUP)
    res = shell.run("%%estimate --total 119*20 --limit 2s --no-plot\ntime.sleep(0.002)\n")
    assert res.error_in_exec is None, res.error_in_exec
    text = shell.text()
    assert text.startswith("estimate for 2,380 units:") and "WILL NOT FIT" in text
    assert "units/s" in text and "the most units that fit" in text and "(limit 2 s," in text
    assert "budget" not in text  # the allowed time of the full run is the limit; "budget" is the measuring
    import perfmagic

    row = perfmagic.ledger("estimate").iloc[0]
    assert row["verdict"] == "will not fit" and row["limit_s"] == 2.0


def test_a_slow_phase_in_the_units_is_shown(shell) -> None:
    # planted with sleep: units 2 ms until the 15th, 5 ms after; the text names the step and the pace assumed
    shell.run(SETUP + "import itertools\nunit = itertools.count()\n")
    res = shell.run("%%estimate --total 400 --no-plot\ntime.sleep(0.002 if next(unit) < 15 else 0.005)\n")
    assert res.error_in_exec is None, res.error_in_exec
    text = shell.text()
    assert "a slow phase" in text and "the total assumes the later pace goes on" in text, text
    import perfmagic

    row = perfmagic.ledger("estimate").iloc[0]
    assert row["predicted_s"] == pytest.approx(400 * 0.005, rel=0.2), text


def test_output_returns_the_result(shell) -> None:
    shell.run(SETUP)
    shell.run("r = None")
    res = shell.run("%%estimate n=10_000 -o -q -b 0.3\nwork(n)\n")
    assert res.error_in_exec is None and res.result is not None
    assert res.result.mode == "scaling" and shell.bundles == []


@pytest.mark.parametrize("cell, needle", [
    ("%%estimate\nwork(1)\n", "needs either NAME=FULL"),
    ("%%estimate n=10 --total 5\nwork(n)\n", "needs either NAME=FULL"),
    ("%%estimate n=0\nwork(n)\n", ">= 1"),
    ("%%estimate --total 0\nwork(1)\n", "whole number >= 1"),
    ("%%estimate --total 2.5\nwork(1)\n", "not a whole number of steps"),
    ("%%estimate n=1000.5\nwork(n)\n", "not a whole number of items"),
    ("%%estimate n=undefined_name\nwork(n)\n", "NameError"),
    ("%%estimate 12\nwork(n)\n", "is not NAME=FULL"),
    ("%%estimate n=100 --sizes 10,20,400\nwork(n)\n", "no larger than the full size"),
    ("%%estimate n=100 --sizes a,b\nwork(n)\n", "integers"),
    ("%%estimate --total 10 --sizes 1,2,3\nwork(1)\n", "--sizes applies to the scaling form"),
    ("%%estimate n=100 --force\nwork(n)\n", "--force goes with --run"),
    ("%%estimate n=100 --limit soon\nwork(n)\n", "soon"),
    ("%%estimate n=100 --budget soon\nwork(n)\n", "soon"),
    ("%%estimate n=100 -b 25h\nwork(n)\n", "at most 24h"),
    ("%%estimate n=100 --measure 1s\nwork(n)\n", "unrecognized arguments"),  # the old name of -b
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
    res = shell.run("%%estimate n=10_000_000 --budget 2s --no-plot\ncalls['k'] += 1\n"
                    "if calls['k'] == 20:\n    raise KeyboardInterrupt\nwork(n)\n")
    assert isinstance(res.error_in_exec, KeyboardInterrupt)
    assert "interrupted" in shell.text()
    df = perfmagic.ledger()
    assert list(df["status"]) == ["interrupted"]


def test_ctrl_c_during_the_run_records_how_far_it_got(shell) -> None:
    import perfmagic

    shell.run(SETUP)
    shell.ip.user_ns["calls"] = {"k": 0}
    res = shell.run("%%estimate --total 400 --run --no-plot -b 0.2s\ncalls['k'] += 1\ntime.sleep(0.002)\n"
                    "if calls['k'] == 200:\n    raise KeyboardInterrupt\n")
    assert isinstance(res.error_in_exec, KeyboardInterrupt)
    assert "full run interrupted" in shell.text()
    row = perfmagic.ledger("estimate").iloc[0]
    assert row["status"] == "interrupted" and 0 < row["actual_completed"] < 1


def test_estimate_result_follows_the_result_protocol() -> None:
    import json

    from perfmagic.estimation.estimate import EstimateResult, Point, analyse_iteration, analyse_scaling, gate
    from perfmagic.result import Displayed, Result

    pts = [Point(n, (1e-3 * n / 1000, 1.1e-3 * n / 1000), (8 * n,)) for n in (10**5, 2 * 10**5, 4 * 10**5,
                                                                              8 * 10**5, 16 * 10**5)]
    r = gate(analyse_scaling(pts, N=10**7), limit=60, available=10**12)
    assert isinstance(r, EstimateResult) and isinstance(r, Displayed) and isinstance(r, Result)
    assert r.primary_metric == "predicted_s" and r.metrics()[r.primary_metric] == r.predicted_s
    assert r.headline() == r.text().splitlines()[0] and r.headline().startswith("estimate for n=10,000,000:")
    assert repr(r) == f"<EstimateResult: {r.headline()}>"
    s = r.samples()
    assert s["size"] == [float(p.n) for p in pts] and len(s["all_times_s"]) == 10 and r.samples_dict() == s
    d = json.loads(json.dumps(r.to_dict()))
    assert d["points"][0]["times"] == list(pts[0].times) and d["time_fit"]["best"]["name"] == r.time_fit.best.name
    assert d["metrics"]["limit_s"] == 60
    bundle = r._repr_mimebundle_()
    page = bundle["text/html"]
    assert bundle["text/plain"] == r.text() and "image/png" in bundle and "data:image/png;base64," in page
    assert "<details" in page and "Measured points (5 sizes)" in page and "1,600,000" in page
    assert "Time models (by AICc)" in page
    # the per-iteration form: its blocks are the measured table
    it = analyse_iteration([Point(10, (0.01 + 1e-4 * i,), (4096,), rss_after=(10**6,)) for i in range(6)], T=1000,
                           cold_s=0.002)
    titles = [t for t, _ in it.html_sections()]
    assert titles == ["Measured blocks (6)"] and "time per unit" in it.html_sections()[0][1]
    assert "per unit" in it.text() and it.samples()["unit_s"] == it.unit_times


def test_a_refused_estimate_records_no_predicted_time_in_the_ledger(shell, monkeypatch) -> None:
    """Planted: the engine returns an estimate that refuses (the cost jumped 16× inside the sizes measured)."""
    from perfmagic.estimation import estimate as _estimate_mod
    from perfmagic.estimation.estimate import Point, analyse_scaling

    sizes = (3_000, 6_000, 12_000, 24_000, 48_000, 96_000, 192_000, 384_000)
    refused = analyse_scaling([Point(n, ((1e-7 if n < 50_000 else 8e-7) * n,)) for n in sizes], N=12_000_000)
    assert refused.predicted_s is not None and not refused.reliable  # a number was fitted, and refused
    monkeypatch.setattr(_estimate_mod, "estimate", lambda *a, **k: refused)
    res = shell.run("%%estimate n=12_000_000 --no-plot\nwork(n)\n")
    assert res.error_in_exec is None, res.error_in_exec
    text = shell.text()
    assert text.startswith("estimate for n=12,000,000: no estimate: the cost changed its growth"), text
    import perfmagic

    row = perfmagic.ledger("estimate").iloc[0]
    assert row["predicted_s"] is None or row["predicted_s"] != row["predicted_s"], row["predicted_s"]  # None/NaN
    assert "jumped 16.0×" in row["refused"]
    res = shell.run("%perf")  # the table reads a row with no predicted time
    assert res.error_in_exec is None, res.error_in_exec
    assert "no reliable estimate" in shell.text(), shell.text()
