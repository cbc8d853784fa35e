"""Historical comparisons calibrated from this machine's A/A evidence, not padded by a fixed floor."""

from __future__ import annotations

import math
import random

import pytest

from perfmagic.timing import betweenrun as B
from perfmagic.timing.history import compare

ENV = {"cpu_model": "Planted CPU", "usable_cores": 2, "hostname": "box"}


def _row(rid: int, code: str, median: float, *, rerun_of: int | None = None, env=ENV, status="ok",
         n: int = 40, seed: int = 0, spread: float = 0.002) -> dict:
    rng = random.Random(seed * 1000 + rid)
    raw = [median * math.exp(rng.gauss(0.0, spread)) for _ in range(n)]
    opts = {"remeasured_from": rerun_of} if rerun_of is not None else {}
    return {"id": rid, "magic": "gpubench", "label": "x", "code": code, "magic_line": "-l x", "options": opts,
            "samples": {"raw": raw, "number": 1}, "env": dict(env or {}), "status": status,
            "created_utc": "2026-11-23T10:00:00Z", "primary_metric": "median_s"}


class _Ledger:
    def __init__(self, rows: list[dict]) -> None:
        self._rows = rows

    def rows(self, notebook=None):
        return sorted(self._rows, key=lambda r: -r["id"])


def _evidence_rows(drifts: list[float], code: str = "f()") -> list[dict]:
    rows, rid = [], 100
    for d in drifts:  # an original run and its re-measurement, the re-measurement off by d
        rows += [_row(rid, code, 1e-3), _row(rid + 1, code, 1e-3 * (1 + d), rerun_of=rid)]
        rid += 2
    return rows


def test_no_evidence_takes_the_prior_and_says_so() -> None:
    n = B.between_run_noise(_Ledger([]), ENV)
    assert n.noise == B.PRIOR and n.n == 0 and "no A/A re-measurements" in n.source


def test_the_quantile_of_this_machines_a_a_pairs() -> None:
    drifts = [0.01 * k for k in range(1, 21)]  # 1% ... 20%
    n = B.between_run_noise(_Ledger(_evidence_rows(drifts)), ENV)
    assert n.n == 20
    # order statistic ceil(0.95 * 21) = 20 of 20: the largest, 20% (the median of each run moves a little)
    assert n.noise == pytest.approx(0.20, abs=0.01) and "largest of 20" in n.source
    quiet = B.between_run_noise(_Ledger(_evidence_rows([0.005, -0.004, 0.006, 0.003, -0.006, 0.004])), ENV)
    assert quiet.noise == B.FLOOR and "least admitted" in quiet.source  # never below the floor
    few = B.between_run_noise(_Ledger(_evidence_rows([0.01, 0.02])), ENV)
    assert few.noise == B.PRIOR and few.n == 2 and "only 2" in few.source


def test_only_same_code_same_machine_complete_pairs_count() -> None:
    rows = _evidence_rows([0.5])  # a 50% pair that must not count in any of the cases below
    rows[1]["code"] = "g()"  # different code: not an A/A pair
    other = _evidence_rows([0.5])
    for r in other:
        r["id"] += 50
    other[1]["options"]["remeasured_from"] = other[0]["id"]
    other[1]["env"] = {**ENV, "hostname": "elsewhere"}  # another machine
    broken = _evidence_rows([0.5])
    for r in broken:
        r["id"] += 80
    broken[1]["options"]["remeasured_from"] = broken[0]["id"]
    broken[1]["status"] = "interrupted"
    over = _evidence_rows([0.5])
    for r in over:
        r["id"] += 120
    over[1]["options"]["remeasured_from"] = over[0]["id"]
    over[1]["env"] = {**ENV, "blas": [{"num_threads": 2}], "others_cores": 1.5, "own_cores": 0.5,
                      "active_threads": 2}  # its threads waited for cores: a named distortion, not drift
    assert B.evidence(rows + other + broken + over, ENV) == []
    # the magic line differs (re-measurements record the bare magic): still the same code
    good = _evidence_rows([0.1])
    good[1]["magic_line"] = ""
    assert B.evidence(good, ENV) == [pytest.approx(math.log(1.1), abs=0.01)]


def test_a_historical_verdict_is_decisive_with_quiet_evidence_and_honest_without() -> None:
    a, b = _row(1, "f()", 1e-3), _row(2, "g()", 1.2e-3)  # a planted +20% change, tight runs
    quiet = _Ledger(_evidence_rows([0.01, -0.01, 0.02, 0.015, -0.02, 0.01, 0.005, -0.012]) + [a, b])
    rc = compare(a, b, ledger=quiet)
    assert rc.kind == "historical" and rc.verdict == "slower", rc.text()
    assert "A/A re-measurements on this machine" in rc.text()
    bare = compare(a, b, ledger=_Ledger([a, b]))  # no evidence: ±20% admitted, a 20% change cannot be told
    assert bare.verdict == "inconclusive"
    assert "cannot tell, because runs of identical code on this machine differ by up to ±20%" in bare.text()
    assert "measure longer" not in bare.comparison.sentence
    # identical code, no evidence: never a false change
    aa = compare(a, _row(3, "f()", 1.05e-3), ledger=_Ledger([]))
    assert aa.verdict in ("no real change", "inconclusive")
    # a given between-run noise is used as given
    given = compare(a, b, between_run=0.01)
    assert given.verdict == "slower" and "as given" in given.text()
