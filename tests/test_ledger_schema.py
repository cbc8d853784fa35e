"""Schema 2 of the ledger (issue 30): a schema-1 ledger written by the release before it reads the same
before and after its migration; packed samples read back exactly; a newer schema is read, not written.

``tests/data/ledger_v1.sqlite`` was written by perfmagic 0.1.0 at commit 035c9a7 (schema 1): three
``%%gpubench`` runs of one label (a baseline, a ``--vs`` pair with its re-measured A side), one of
another label, an ``%%estimate`` and a ``%%memory`` run, a baseline and a target;
``ledger_v1_rows.json`` is what that release's ``Ledger.rows()`` returned for it.
"""

from __future__ import annotations

import json
import math
import pathlib
import random
import shutil
import sqlite3

import pytest

from perfmagic.storage.compact import pack_samples, split_env, join_env, unpack_samples
from perfmagic.storage.ledger import Ledger, LedgerError

DATA = pathlib.Path(__file__).parent / "data"


def _v1(tmp_path: pathlib.Path) -> Ledger:
    d = tmp_path / "led"
    d.mkdir()
    shutil.copy(DATA / "ledger_v1.sqlite", d / "ledger.sqlite")
    return Ledger(directory=d)


def _expected() -> tuple[list[dict], list]:
    got = json.loads((DATA / "ledger_v1_rows.json").read_text())
    return got["rows"], got["baselines"]


def _as_now(e: dict) -> dict:
    """A row of 0.1.0 as this perfmagic reads it: the magic line apart from the code, the kind, the relations."""
    from perfmagic.storage.codec import split_cell

    out = dict(e)
    out["magic_line"], out["code"] = split_cell(e["code"], None, e["magic"])
    opts = e.get("options") or {}
    out.update(kind=None, rerun_of=opts.get("remeasured_from"), interleaved_with=opts.get("interleaved_with"),
               thread_limit=opts.get("thread_limit"))
    return out


def _same(rows: list[dict], expected: list[dict]) -> None:
    assert [r["id"] for r in rows] == [e["id"] for e in expected]
    for r, e in zip(rows, expected):
        assert json.loads(json.dumps(dict(r), allow_nan=True)) == _as_now(e), r["id"]


def test_a_schema_1_ledger_reads_the_same_before_and_after_its_migration(tmp_path) -> None:
    led = _v1(tmp_path)
    rows, baselines = _expected()
    _same(led.rows(notebook=None, newest_first=False), rows)  # read as schema 1, nothing written
    con = sqlite3.connect(led.path)
    assert con.execute("PRAGMA user_version").fetchone()[0] == 1
    con.close()
    ref = led.record(magic="gpubench", label="after", code="%%gpubench\nf()", options={}, metrics={"median_s": 1.0},
                     samples={"raw": [1.0, 2.0, 3.0, 4.0], "number": 1}, env={"cpu_model": "x", "loadavg_1m": 0.5})
    assert ref.saved
    con = sqlite3.connect(led.path)
    assert con.execute("PRAGMA user_version").fetchone()[0] == 3
    assert con.execute("SELECT COUNT(*) FROM runs WHERE samples IS NOT NULL").fetchone()[0] == 0
    assert con.execute("SELECT COUNT(*) FROM run_data WHERE samples IS NOT NULL").fetchone()[0] == len(rows) + 1
    pair = con.execute("SELECT id, rerun_of, interleaved_with FROM runs WHERE rerun_of IS NOT NULL "
                       "OR interleaved_with IS NOT NULL ORDER BY id").fetchall()
    con.close()
    assert pair == [(2, 1, None), (3, None, 2)]  # the --vs pair's relations are columns now
    fresh = Ledger(directory=led.directory)
    _same([r for r in fresh.rows(notebook=None, newest_first=False) if r["id"] != ref.id], rows)
    assert [[nb, lab, rid] for (nb, lab), rid in fresh.baselines(notebook=None).items()] == baselines
    new = fresh.get(ref.id)
    assert new["samples"] == {"raw": [1.0, 2.0, 3.0, 4.0], "number": 1}
    assert new["env"] == {"cpu_model": "x", "loadavg_1m": 0.5}


def test_packed_samples_read_back_exactly() -> None:
    rng = random.Random(30)
    for _ in range(300):
        raw = [rng.random() * 10 ** rng.randint(-9, 3) for _ in range(rng.randint(0, 60))]
        value = {"raw": raw, "number": rng.randint(1, 9), "warmup": [[1, rng.random()] for _ in range(5)],
                 "cold_s": rng.random(), "nested": {"xs": [rng.random() for _ in range(7)], "ints": [1, 2, 3, 4]},
                 "odd": [math.inf, -math.inf, 0.5, 1e308], "text": "µs"}
        back = unpack_samples(pack_samples(value))
        assert json.dumps(back, allow_nan=True) == json.dumps(value, allow_nan=True)
    nan = unpack_samples(pack_samples({"raw": [math.nan, 1.0, 2.0, 3.0]}))["raw"]
    assert math.isnan(nan[0]) and nan[1:] == [1.0, 2.0, 3.0]
    tricky = {"__f64__": 3, "raw": [1.0, 2.0, 3.0, 4.0]}  # the marker itself in the data
    assert unpack_samples(pack_samples(tricky)) == tricky
    thirty = {"raw": [rng.random() * 1e-5 for _ in range(30)], "number": 5}
    assert len(pack_samples(thirty)) < 0.6 * len(json.dumps(thirty))
    # timings are whole numbers of one ulp of perf_counter's magnitude: stored as 32-bit integers, exactly
    timings = {"raw": [rng.randint(1, 2 ** 30) * 2.0 ** -38 for _ in range(30)], "warmup": [[4, 1e-4 + 2.0 ** -38]] * 5,
               "edge": [0.0, 2.0 ** -38, 3 * 2.0 ** -38, 1.0], "negzero": [-0.0, 1.0, 2.0, 3.0]}
    back = unpack_samples(pack_samples(timings))
    assert back == timings and math.copysign(1, back["negzero"][0]) < 0
    assert len(pack_samples(timings)) < 0.85 * len(pack_samples({**timings, "raw": [x * (1 + 1e-9) for x in timings["raw"]]}))


def test_the_machine_is_stored_once_and_joined_back() -> None:
    env = {"cpu_model": "AMD EPYC", "versions": {"torch": "2.13.0"}, "loadavg_1m": 0.3, "reference_s": 2e-5}
    machine, digest, own = split_env(env)
    assert own == {"loadavg_1m": 0.3, "reference_s": 2e-5} and digest
    assert join_env(json.loads(machine), own) == env


def test_a_ledger_of_a_newer_schema_is_read_and_never_written(tmp_path) -> None:
    led = Ledger(directory=tmp_path / "led")
    led.record(magic="gpubench", label="a", code="f()", options={}, metrics={"median_s": 1.0},
               samples={"raw": [1.0] * 4}, env={})
    con = sqlite3.connect(led.path)
    con.execute("ALTER TABLE runs ADD COLUMN future_column TEXT")
    con.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('writer', 'perfmagic 9.0')")
    con.execute("PRAGMA user_version = 7")
    con.commit()
    con.close()
    before = led.path.read_bytes()
    later = Ledger(directory=led.directory)
    rows = later.rows(notebook=None)
    assert [r["label"] for r in rows] == ["a"] and rows[0]["samples"] == {"raw": [1.0] * 4}
    assert "schema version 7, written by perfmagic 9.0" in later.newer and "writes nothing" in later.newer
    ref = later.record(magic="gpubench", label="b", code="f()", options={}, metrics={}, samples=None, env={})
    assert not ref.saved and "newer perfmagic (perfmagic 9.0)" in ref.error and "upgrade perfmagic" in ref.error
    with pytest.raises(LedgerError, match="newer perfmagic"):
        later.set_baseline("a", rows[0]["id"])
    assert led.path.read_bytes() == before


def test_a_new_ledger_has_large_pages_and_an_old_one_keeps_its_own(tmp_path) -> None:
    # a run's record (650-850 B) packs into 4 KiB pages 5 or 6 to a page: 16 KiB pages waste less
    from perfmagic.storage.db import PAGE_SIZE

    new = Ledger(tmp_path / "new", notebook="nb.ipynb")
    new.record(magic="gpubench", label="a", code="x", options={}, samples=None, env={}, primary_metric="median_s",
               metrics={"median_s": 1e-3})
    con = sqlite3.connect(new.path)
    assert con.execute("PRAGMA page_size").fetchone()[0] == PAGE_SIZE == 16384
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.close()
    old_dir = tmp_path / "old"
    old_dir.mkdir()
    con = sqlite3.connect(old_dir / "ledger.sqlite")  # an existing ledger's page size is its own: never rewritten
    con.execute("PRAGMA page_size = 4096")
    con.execute("CREATE TABLE t (x)")
    con.execute("DROP TABLE t")
    con.close()
    old = Ledger(old_dir, notebook="nb.ipynb")
    old.record(magic="gpubench", label="a", code="x", options={}, samples=None, env={}, primary_metric="median_s",
               metrics={"median_s": 1e-3})
    con = sqlite3.connect(old.path)
    assert con.execute("PRAGMA page_size").fetchone()[0] == 4096
    assert len(old.rows()) == 1
    con.close()
