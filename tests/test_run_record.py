"""The run record: every kind of result recorded by its magic is rebuilt by ``perfmagic.run(N)`` in a fresh
Python process (after a restart), with its raw samples, the same text, HTML and figure; old ledgers; bad ids.

One module-scoped shell records one small planted run of every kind; one child process reads them all back.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"

SETUP = """
import time
import torch
from concurrent.futures import ThreadPoolExecutor
from torch.utils.data import DataLoader
from tests.test_dataloader import SleepDataset
x = torch.randn(128, 128)
pool = ThreadPoolExecutor(4)
def job(workers, s=0.3, T=0.02):
    time.sleep(s * T)
    list(pool.map(time.sleep, [(1 - s) * T / workers] * workers))
def work(k):
    x = 0
    for _ in range(k):
        x += 1
    return x
io_loader = DataLoader(SleepDataset(60, 0.002), batch_size=4)
def hot():
    end = time.perf_counter() + 0.15
    while time.perf_counter() < end:
        pass
def planted(n):
    s = 0
    for i in range(n): s += i * i
    return s
"""

# kind -> (result class, the cell that records one run of it, quick and planted)
CELLS = {
    "gpubench": ("BenchResult", "%%gpubench -l g -b 0.2 -o -q\nsum(range(500))\n"),
    "roofline": ("RooflineResult", "%%roofline -l r -b 0.2 -o -q\nx @ x\n"),
    "amdahl": ("AmdahlResult", "%%amdahl workers=1,2 -b 0.15 --rounds 2 -l a -o -q\njob(workers)\n"),
    "ranks": ("RanksResult", '%%amdahl --ranks 1 -b 0.05 -o -q --setup "import torch; y = torch.ones(16, 16)"\n'
                             "z = y @ y\n"),
    "estimate": ("EstimateResult", "%%estimate n=10_000 -b 0.3 -o -q\nwork(n)\n"),
    "dataloader_check": ("DataLoaderResult", "%%dataloader_check io_loader --steps 6 -o -q\ntime.sleep(0.002)\n"),
    "memory": ("MemoryResult", "%%memory --no-trace --interval 5ms -o -q\nb = bytearray(8 * 2**20)\n"),
    "flame": ("FlameResult", "%%flame --sampler inprocess -l f -o -q\nhot()\n"),
    "lineprof": ("LineProfResult", "%%lineprof -f planted --top 2 -o -q\nplanted(20_000)\n"),
}

READER = r"""
import json, sys
import perfmagic
out = {}
for kind, rid in json.loads(sys.argv[1]).items():
    try:
        r = perfmagic.run(rid)
        bundle = r._repr_mimebundle_()
        out[kind] = {"type": type(r).__name__, "samples": json.loads(json.dumps(r.samples(), default=list)),
                     "text": r.text(), "mimes": sorted(bundle)}
    except Exception as exc:
        out[kind] = {"error": f"{type(exc).__name__}: {exc}"}
print("RESULT " + json.dumps(out))
"""


def _child(code: str, *args: str, ledger: Path) -> subprocess.CompletedProcess:
    # the parent's path too: where perfmagic runs from its source tree (the GPU machine's copy) it is not installed
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, PERFMAGIC_LEDGER_DIR=str(ledger), PYTHONPATH=path, COLUMNS="100")
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          env=env, timeout=300, cwd=str(ROOT))


def _result(p: subprocess.CompletedProcess) -> Any:
    assert p.returncode == 0, p.stderr[-3000:]
    line = next(x for x in p.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: Any) -> Any:
    """Every kind recorded in one shell; then read back in a fresh process: ``(originals, rebuilt)``."""
    from IPython.core.displaypub import CapturingDisplayPublisher
    from IPython.core.interactiveshell import InteractiveShell

    from perfmagic.roofs import ceilings as _ceilings
    from perfmagic.storage import session as _session

    base = tmp_path_factory.mktemp("record")
    mp = pytest.MonkeyPatch()
    mp.setenv("PERFMAGIC_LEDGER_DIR", str(base / ".perfmagic"))
    mp.setenv("PERFMAGIC_CACHE_DIR", str(base / "cache"))
    _session.forget_ledgers()
    fp, _ = _ceilings.machine_fingerprint("cpu")
    _ceilings.save(_ceilings.Ceilings(device="cpu", fingerprint=fp, measured_utc="2026-11-22T00:00:00Z",
                                      compute={"float32": 250e9, "float64": 120e9, "bfloat16": 140e9},
                                      bandwidth_Bps=20e9))
    ip = InteractiveShell.instance()
    old_pub, ip.display_pub = ip.display_pub, CapturingDisplayPublisher()
    ip.run_line_magic("load_ext", "perfmagic")
    originals: dict[str, Any] = {}
    try:
        assert ip.run_cell(SETUP).error_in_exec is None
        for kind, (_, cell) in CELLS.items():
            res = ip.run_cell(cell)
            err = res.error_in_exec or res.error_before_exec
            originals[kind] = res.result if err is None else f"{type(err).__name__}: {err}"
        from perfmagic.storage.session import current_ledger

        ids = {r["magic"] if r.get("kind") is None else r["kind"]: r["id"] for r in current_ledger(ip.user_ns).rows()}
    finally:
        ip.run_line_magic("unload_ext", "perfmagic")
        ip.display_pub = old_pub
        _session.forget_ledgers()
        mp.undo()
    rebuilt = _result(_child(READER, json.dumps(ids), ledger=base / ".perfmagic"))
    return originals, rebuilt, base / ".perfmagic"


@pytest.mark.parametrize("kind", list(CELLS))
def test_every_kind_is_rebuilt_after_a_restart(recorded: Any, kind: str) -> None:
    originals, rebuilt, _ = recorded
    orig, got = originals[kind], rebuilt.get(kind, {"error": "not recorded"})
    assert not isinstance(orig, str), f"%%{kind} failed when recording: {orig}"
    assert "error" not in got, got
    assert got["type"] == CELLS[kind][0] == type(orig).__name__
    assert got["samples"] == json.loads(json.dumps(orig.samples(), default=list))  # the raw samples, equal
    assert got["text"] == orig.text()
    mimes = set(orig._repr_mimebundle_())
    assert "text/html" in got["mimes"] and mimes <= set(got["mimes"]), (mimes, got["mimes"])


def test_perf_show_n_displays_the_rebuilt_run(recorded: Any, shell: Any, monkeypatch: Any) -> None:
    _, _, ledger = recorded
    from perfmagic.storage import session as _session

    monkeypatch.setenv("PERFMAGIC_LEDGER_DIR", str(ledger))
    _session.forget_ledgers()
    res = shell.run("%perf show 1")
    assert res.error_in_exec is None, res.error_in_exec
    (bundle,) = shell.bundles
    assert "run #1" in bundle["text/plain"] and "image/png" in bundle and "text/html" in bundle
    res = shell.run("%perf show #1 -o -q")
    assert type(res.result).__name__ == "BenchResult" and res.result.run_id == 1
    res = shell.run("%perf show 1 --no-plot")  # the tour's cell: text and folded details, no figure
    assert res.error_in_exec is None, res.error_in_exec
    (bundle,) = shell.bundles
    assert "run #1" in bundle["text/plain"] and "image/png" not in bundle and "text/html" in bundle


@pytest.mark.parametrize("bad, needle", [("0", "run ids start at 1"), ("abc", "'abc'"), ("99999", "no run #99999")])
def test_bad_run_ids_say_the_value_and_the_range(recorded: Any, bad: str, needle: str) -> None:
    import perfmagic
    from perfmagic.errors import PerfmagicError

    _, _, ledger = recorded
    with pytest.raises(PerfmagicError) as ei:
        perfmagic.run(bad, ledger=ledger)
    msg = str(ei.value)
    assert needle in msg and "\n" not in msg, msg
    if bad == "99999":
        assert "runs #1 to #" in msg


def test_bad_id_at_the_magic_is_one_usage_line(recorded: Any, shell: Any, monkeypatch: Any) -> None:
    _, _, ledger = recorded
    from perfmagic.storage import session as _session

    monkeypatch.setenv("PERFMAGIC_LEDGER_DIR", str(ledger))
    _session.forget_ledgers()
    res = shell.run("%perf show 99999")
    assert type(res.error_in_exec).__name__ == "UsageError" and "no run #99999" in str(res.error_in_exec)


def test_a_schema_1_ledger_migrates_and_its_runs_rebuild_or_say_why(tmp_path: Any) -> None:
    """The 0.1.0 ledger: its %%gpubench runs rebuild from their samples (saying what was not stored); a kind
    that needs a payload names the run and why."""
    d = tmp_path / ".perfmagic"
    d.mkdir()
    shutil.copy(DATA / "ledger_v1.sqlite", d / "ledger.sqlite")
    code = """
    import json, perfmagic
    from perfmagic.storage.ledger import Ledger
    led = Ledger()
    out = {}
    for r in led.rows(notebook=None):
        try:
            res = perfmagic.run(r["id"])
            out[r["id"]] = {"type": type(res).__name__, "n": len(r["samples"]["raw"]) if isinstance(r["samples"], dict)
                            and "raw" in r["samples"] else None, "raw": len(getattr(res, "raw", ())),
                            "text": res.text(), "magic": r["magic"], "code": r["code"], "line": r["magic_line"]}
        except perfmagic.PerfmagicError as exc:
            out[r["id"]] = {"error": str(exc), "magic": r["magic"]}
    led.record(magic="gpubench", label="new", code="pass", magic_line="-l new", options={}, metrics={},
               samples=None, env={})  # the write migrates the file
    import sqlite3
    print("RESULT " + json.dumps({"runs": out, "version": sqlite3.connect(str(led.path)).execute(
        "PRAGMA user_version").fetchone()[0], "after": perfmagic.run(out and min(int(k) for k in out)).text()}))
    """
    got = _result(_child(code, ledger=d))
    runs = got["runs"]
    assert runs and got["version"] == 3
    bench = [r for r in runs.values() if r["magic"] == "gpubench"]
    assert bench and all(r.get("type") == "BenchResult" and r["raw"] == r["n"] for r in bench), bench
    assert all("not shown" in r["text"] and not r["code"].startswith("%%") for r in bench)  # the line split on read
    for rid, r in runs.items():
        if "error" in r:
            assert f"run #{rid}" in r["error"] and "\n" not in r["error"]
    assert got["after"] == runs[str(min(int(k) for k in runs))]["text"] or "error" in runs[str(min(int(k) for k in runs))]


def test_relations_are_columns_and_options_stay_the_users(tmp_path: Any) -> None:
    from perfmagic.storage.ledger import Ledger

    led = Ledger(tmp_path)
    a = led.record(magic="gpubench", label="x", code="f()", magic_line="-l x", options={"budget": 1},
                   metrics={"median_s": 1.0}, samples={"raw": [1.0] * 5, "number": 1}, env={})
    b = led.record(magic="gpubench", label="x", code="f()", magic_line="-l x", options={"budget": 1},
                   metrics={"median_s": 1.0}, samples={"raw": [1.0] * 5, "number": 1}, env={}, rerun_of=a.id,
                   interleaved_with=a.id, thread_limit=2)
    row = led.get(b.id)
    assert row["options"] == {"budget": 1} and row["code"] == "f()" and row["magic_line"] == "-l x"
    assert (row["rerun_of"], row["interleaved_with"], row["thread_limit"]) == (a.id, a.id, 2)
    con = sqlite3.connect(str(led.path))
    assert con.execute("SELECT rerun_of, interleaved_with, thread_limit, magic_line FROM runs WHERE id = ?",
                       (b.id,)).fetchone() == (a.id, a.id, 2, "-l x")
    rec = led.record_of(b.id)
    assert (rec.rerun_of, rec.thread_limit, rec.cell) == (a.id, 2, "%%gpubench -l x\nf()")


def test_a_schema_2_ledger_gets_the_new_columns_and_its_thread_limits(tmp_path: Any) -> None:
    """A schema-2 file (issue 30's layout: relations and thread limit as option keys, code with its magic line)
    is read as it is, then migrated by the first write: columns added, the pair's thread limit filled in."""
    from perfmagic.storage.ledger import Ledger

    led = Ledger(tmp_path)
    a = led.record(magic="gpubench", label="x", code="%%gpubench -l x\nf()", options={"budget": 1},
                   metrics={"median_s": 1.0}, samples={"raw": [1.0] * 5, "number": 1}, env={})
    b = led.record(magic="gpubench", label="x", code="%%gpubench -l x\ng()",
                   options={"interleaved_with": a.id, "thread_limit": 1, "interleaved": True},
                   metrics={"median_s": 1.0}, samples={"raw": [2.0] * 5, "number": 1}, env={})
    con = sqlite3.connect(str(led.path))
    for c in ("magic_line", "kind", "thread_limit"):
        con.execute(f"ALTER TABLE runs DROP COLUMN {c}")
    con.execute("ALTER TABLE run_data DROP COLUMN payload")
    con.execute("PRAGMA user_version = 2")
    con.commit()
    con.close()
    old = Ledger(tmp_path)
    row = old.get(b.id)  # read as schema 2: the line split on read, the relations from the options
    assert (row["code"], row["magic_line"], row["interleaved_with"], row["thread_limit"]) == ("g()", "-l x", a.id, 1)
    assert type(old.record_of(b.id).payload) is type(None)
    old.record(magic="gpubench", label="y", code="h()", magic_line="", options={}, metrics={}, samples=None, env={})
    con = sqlite3.connect(str(led.path))
    assert con.execute("PRAGMA user_version").fetchone()[0] == 3
    assert con.execute("SELECT interleaved_with, thread_limit, magic_line FROM runs WHERE id = ?",
                       (b.id,)).fetchone() == (a.id, 1, None)
    import perfmagic

    r = perfmagic.run(b.id, ledger=tmp_path)
    assert r.raw == (2.0,) * 5 and r.code == "g()" and "not shown" in r.text()
