"""Throughput-aware verdicts: runs that declare their work (--items/--flops/--bytes) are judged per unit
of it, in %perf compare, --vs, perfmagic.compare and the %perf table; work on one side only is refused.

Planted truth: a "batch" cell that sleeps 1 ms per item plus 6 ms per call (batch 8: 14 ms, 1.75 ms per
item; batch 32: 38 ms, 1.19 ms per item): per call B is 2.7x slower, per item 1.47x faster. Sleeps hold
beside a busy neighbour (they need no core)."""

from __future__ import annotations

import random
import re

import pytest

from perfmagic.render.comparison import numbers
from perfmagic.timing.flow import Basis, basis, work_of
from perfmagic.timing.history import baseline_changes, compare


def _row(rid: int, per_call_s: float, *, work: dict | None = None, metrics_work: dict | None = None,
         n: int = 40, seed: int = 0, **opts) -> dict:
    rng = random.Random(seed)
    raw = [per_call_s * rng.uniform(0.98, 1.02) for _ in range(n)]
    metrics = {"median_s": per_call_s}
    for k, v in (metrics_work or {}).items():
        metrics[f"{k}_per_s"] = v / per_call_s
    options = dict(opts)
    if work is not None:
        options["work"] = work
    return {"id": rid, "magic": "gpubench", "label": "step", "code": "step()", "options": options,
            "samples": {"raw": raw, "number": 1}, "env": {}, "created_utc": "2026-11-25T10:00:00+00:00",
            "status": "ok", "primary_metric": "median_s", "metrics": metrics}


# ---- the basis: per call, per unit, or refused ----------------------------------------------------------

def test_basis_per_item_when_both_declare_different_amounts() -> None:
    b = basis(_row(1, 0.014, work={"items": 8}), _row(2, 0.038, work={"items": 32}))
    assert (b.unit, b.a, b.b, b.refusal, b.per) == ("items", 8.0, 32.0, None, "per item")
    same = basis(_row(1, 0.014, work={"items": 8}), _row(2, 0.012, work={"items": 8}))
    assert same.unit is None and same.refusal is None                # same work: per call is per item
    assert basis(_row(1, 0.01), _row(2, 0.01)) == Basis()
    # items win over FLOPs when both are declared
    assert basis(_row(1, 0.01, work={"flops": 1e9, "items": 8}), _row(2, 0.02, work={"flops": 4e9, "items": 32})).unit == "items"


def test_basis_refuses_work_on_one_side_or_in_different_units() -> None:
    one = basis(_row(1, 0.014), _row(2, 0.038, work={"items": 32}))
    assert one.unit is None and one.refusal is not None
    assert str(one.refusal).startswith("B declares 32 items per call (--items) and A declares none") and "--items" in one.refusal
    other = basis(_row(1, 0.014, work={"items": 8}), _row(2, 0.038))
    assert str(other.refusal).startswith("A declares 8 items per call")
    units = basis(_row(1, 0.014, work={"items": 8}), _row(2, 0.038, work={"flops": 2e9}))
    assert "A declares its work in items (--items) and B in flops (--flops)" in units.refusal


def test_work_is_read_back_from_older_rows_throughput() -> None:
    assert work_of(_row(1, 0.014, metrics_work={"items": 8})) == {"items": 8.0}
    assert work_of(_row(1, 0.014, work={"items": 8, "flops": None, "bytes": -1})) == {"items": 8.0}
    assert work_of(_row(1, 0.014)) == {}


# ---- the verdict ------------------------------------------------------------------------------------------

def test_a_bigger_batch_is_judged_per_item_not_per_call() -> None:
    a, b = _row(1, 0.014, work={"items": 8}), _row(2, 0.038, work={"items": 32}, seed=1)
    rc = compare(a, b, between_run=0.02)
    c = rc.comparison
    assert c.verdict == "faster", rc.text()
    assert abs(c.ratio - (0.038 / 32) / (0.014 / 8)) < 0.03            # 0.68: time per item
    assert re.match(r"per item: faster by 4[5-9]%", c.sentence), c.sentence
    assert re.search(r"per item: A 1\.7\d* ms → B 1\.1\d* ms", numbers(rc)), numbers(rc)
    assert rc.metrics()["per"] == "items" and rc.to_dict()["basis"]["unit"] == "items"
    per_call = compare(_row(1, 0.014), _row(2, 0.038, seed=1), between_run=0.02)   # no work declared
    assert per_call.comparison.verdict == "slower"                      # the old answer, for the old question


def test_work_on_one_side_gives_no_accept_or_reject() -> None:
    rc = compare(_row(1, 0.014), _row(2, 0.038, work={"items": 32}, seed=1), between_run=0.02)
    assert rc.verdict == "inconclusive" and not rc.comparison.accept
    assert rc.comparison.sentence.startswith("cannot tell — B declares 32 items per call"), rc.comparison.sentence


def test_the_table_column_says_per_item_and_prefers_the_same_process_verdict() -> None:
    class Led:
        def baseline(self, label: str) -> int:
            return 1

    base = _row(1, 0.014, work={"items": 8})
    later = _row(2, 0.038, work={"items": 32}, seed=1)
    cells = baseline_changes(Led(), [later], [base, later])
    assert cells[2].startswith("per item ") and cells[2].endswith("faster"), cells
    # an A/A label: the baseline was slow (measured under load), the later run is the same code; a
    # same-process pair re-measured both afterwards: the column shows that verdict, not the historical one
    slow_base = _row(1, 0.060)
    again = _row(2, 0.010, seed=2)
    a2 = _row(3, 0.010, seed=3, remeasured_from=1, interleaved=True)
    b2 = _row(4, 0.010, seed=4, remeasured_from=2, interleaved=True, interleaved_with=3)
    for r in (a2, b2):  # paired samples: the same drift on both members
        r["samples"]["raw"] = [0.010 * (1 + 0.001 * i) for i in range(40)]
    cells = baseline_changes(Led(), [again], [slow_base, again, a2, b2])
    assert cells[2].startswith("+0.0% no real change") and cells[2].endswith("(A/B)"), cells
    alone = baseline_changes(Led(), [again], [slow_base, again])
    assert "no real change" not in alone[2], alone                     # without the pair: 6x, not the truth


# ---- in a real shell: %perf compare, --vs, perfmagic.compare ---------------------------------------------

BATCH = "import time\ndef step(batch):\n    time.sleep(0.006 + 0.001 * batch)\n"


def test_perf_compare_judges_a_batch_change_per_item(shell) -> None:
    shell.run(BATCH)
    shell.run("%%gpubench -l bs -q --items 8 --baseline -b 0.4\nstep(8)\n")
    shell.run("%%gpubench -l bs -q --items 32 -b 0.5\nstep(32)\n")
    res = shell.run("rc = %perf compare -o -q")
    assert res.error_in_exec is None, res.error_in_exec
    rc = shell.ip.user_ns["rc"]
    assert rc.kind == "interleaved" and rc.basis.unit == "items", rc.text()
    assert rc.verdict == "faster" and rc.comparison.sentence.startswith("per item:"), rc.text()
    assert 0.6 < rc.comparison.ratio < 0.78, rc.text()                  # truth 0.68
    import perfmagic

    df = perfmagic.ledger(magic="gpubench").sort_values("id")
    assert df["items_per_s"].notna().all()                              # the re-measured rows keep their work
    vs = perfmagic.ledger().sort_values("id")["vs_baseline"]
    assert 0.55 < vs.iloc[1] < 0.85, vs                                  # per item, not the 2.7x per call


def test_vs_judges_per_item_and_refuses_work_on_one_side(shell) -> None:
    shell.run(BATCH)
    shell.run("%%gpubench -l bs -q --items 8 -b 0.4\nstep(8)\n")
    rc = shell.run("%%gpubench -l bs -q -o --items 32 --vs 1 -b 1.5\nstep(32)\n").result
    assert rc.basis.unit == "items" and rc.verdict == "faster", rc.text()
    rc2 = shell.run("%%gpubench -l bs -q -o --vs 1 -b 1\nstep(32)\n").result       # B without --items
    assert rc2.verdict == "inconclusive" and "A declares 8 items per call" in rc2.comparison.sentence, rc2.text()


def test_bad_work_is_refused_at_the_magic_boundary(shell) -> None:
    shell.run(BATCH)
    res = shell.run("%%gpubench -q --items 0\nstep(1)\n")
    assert type(res.error_in_exec).__name__ == "UsageError" and "--items '0'" in str(res.error_in_exec)
    assert "positive" in str(res.error_in_exec)


def test_perfmagic_compare_in_a_script_re_measures_with_globals(ledger_dir) -> None:
    import time

    import perfmagic
    from perfmagic.storage.ledger import Ledger

    ns = {"time": time}
    exec(BATCH, ns)
    a = perfmagic.bench("step(8)", globals=ns, items=8, budget=0.3, memory=False)
    b = perfmagic.bench("step(32)", globals=ns, items=32, budget=0.4, memory=False)
    hist = perfmagic.compare(a, b, between_run=0.05)                    # no globals: the recorded samples
    assert hist.kind == "historical" and hist.basis.unit == "items"
    led = Ledger(ledger_dir / "script.sqlite", notebook="script")
    said: list[str] = []
    rc = perfmagic.compare(a, b, globals=ns, ledger=led, notify=said.append)
    assert rc.kind == "interleaved" and rc.verdict == "faster", rc.text()
    assert any("re-measured" in s for s in said), said
    rows = led.rows()                                                   # both re-measured rows recorded,
    assert [r["magic"] for r in rows] == ["where", "gpubench", "gpubench"]  # and where the gain went
    assert rc.where is not None and rows[0]["options"] == {"a": None, "b": None}
    from perfmagic.timing.flow import RerunError

    with pytest.raises(RerunError, match="no namespace"):
        perfmagic.compare(a, b, rerun=True)


def test_a_guard_of_a_per_item_gain_checks_per_item() -> None:
    import time

    from perfmagic.guard.runtime import check_pair

    ns = {"time": time}
    kept = check_pair("time.sleep(0.014)", "time.sleep(0.038)", namespace=ns, budget=1.0, work=(8.0, 32.0))
    assert kept.status == "kept" and 0.6 < kept.value < 0.78, kept.sentence
    per_call = check_pair("time.sleep(0.014)", "time.sleep(0.038)", namespace=ns, budget=1.0)
    assert per_call.status == "lost", per_call.sentence                  # 2.7x slower per call
