"""The run ledger: round trip, persistence across processes, concurrent writers, a corrupt or
locked file (no result is ever lost), exports, the DataFrame view and notebook discovery."""

from __future__ import annotations

import csv
import json
import math
import os
import pathlib
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from perfmagic.storage.ledger import (
    Ledger,
    LedgerError,
    RunRef,
    UnknownRunError,
    code_hash,
    locate,
)

SRC = str(pathlib.Path(__file__).resolve().parents[1] / "src")


def rec(led: Ledger, label: str | None = "a", median: float = 0.005, **kw):
    args = dict(
        magic="bench",
        label=label,
        code="x = sum(range(100))\n",
        options={"repeat": 7, "mode": "auto"},
        metrics={"median_s": median, "ci_low_s": median * 0.9, "cold_s": median * 3},
        samples={"raw": [median, median * 1.1]},
        env={"python": "3.11", "cpu": "test"},
        env_hash="e" * 16,
        primary_metric="median_s",
    )
    args.update(kw)
    return led.record(**args)


def file_rows(path: pathlib.Path) -> list[tuple]:
    con = sqlite3.connect(str(path))
    try:
        return con.execute("SELECT id, label, notebook FROM runs ORDER BY id").fetchall()
    finally:
        con.close()


def run_py(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=SRC)
    env.pop("PERFMAGIC_LEDGER_DIR", None)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# --------------------------------------------------------------------------------------------


def test_import_is_cheap_and_has_no_heavy_dependencies():
    # the ledger is a package of stdlib-only modules (locate, codec, db, ledger, frame): importing
    # all of them pulls in neither sqlite3 nor pandas, IPython or numpy
    code = """
        import sys
        import perfmagic.storage.ledger, perfmagic.storage.frame, perfmagic.storage.session
        print(sorted(m for m in ("sqlite3", "pandas", "IPython", "numpy") if m in sys.modules))
    """
    out = run_py(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_round_trip_rows_get_latest_forget(tmp_path):
    led = Ledger(tmp_path, notebook="nb.ipynb")
    assert led.path == tmp_path / "ledger.sqlite"
    assert not led.path.exists()  # nothing written before the first record
    assert led.rows() == [] and led.latest() is None
    refs = [rec(led, "a", 0.001), rec(led, "b", 0.002), rec(led, "a", 0.003, status="failed")]
    assert all(isinstance(r, RunRef) and r.saved and r.error is None for r in refs)
    assert all(r.path == str(led.path) for r in refs)
    ids = [r.id for r in refs]
    assert ids == sorted(ids) and len(set(ids)) == 3

    rows = led.rows()
    assert [r["id"] for r in rows] == ids[::-1]
    assert [r["id"] for r in led.rows(newest_first=False)] == ids
    assert [r["id"] for r in led.rows(limit=2)] == ids[:0:-1]
    assert [r["id"] for r in led.rows(label="a")] == [ids[2], ids[0]]
    assert led.rows(magic="roofline") == []

    r = led.get(ids[1])
    assert r["label"] == "b" and r["magic"] == "bench" and r["notebook"] == "nb.ipynb"
    assert r["metrics"] == {"median_s": 0.002, "ci_low_s": 0.002 * 0.9, "cold_s": 0.002 * 3}
    assert r["options"] == {"repeat": 7, "mode": "auto"}
    assert r["samples"] == {"raw": [0.002, 0.002 * 1.1]}
    assert r["env"] == {"python": "3.11", "cpu": "test"}
    assert r["primary_metric"] == "median_s" and r["status"] == "ok" and r["saved"] is True
    assert r["code_hash"] == code_hash("x = sum(range(100))") and len(r["code_hash"]) == 16
    assert r["created_utc"].endswith("Z") and len(r["created_utc"]) == 20
    assert str(os.getpid()) in r["session"]

    assert led.latest()["id"] == ids[2]
    assert led.latest(label="b")["id"] == ids[1]
    assert led.latest(label="a", status="ok")["id"] == ids[0]
    assert led.latest(label="zzz") is None

    removed = led.forget(ids[1])
    assert removed["id"] == ids[1] and removed["label"] == "b"
    assert [r["id"] for r in led.rows()] == [ids[2], ids[0]]
    with pytest.raises(UnknownRunError) as ei:
        led.get(ids[1])
    with pytest.raises(UnknownRunError) as ei:
        led.forget(9999)
    msg = str(ei.value)
    assert "9999" in msg and f"{ids[2]}, {ids[0]}" in msg and str(led.path) in msg
    assert isinstance(ei.value, KeyError) and isinstance(ei.value, LedgerError)
    assert ei.value.known_ids == (ids[2], ids[0])


def test_record_validates_status(tmp_path):
    led = Ledger(tmp_path)
    with pytest.raises(ValueError, match="interrupted"):
        rec(led, status="great")
    assert not led.path.exists()


def test_baseline_set_get_and_removed_on_forget(tmp_path):
    led = Ledger(tmp_path, notebook="nb.ipynb")
    assert led.baseline("a") is None
    a1, a2 = rec(led, "a").id, rec(led, "a").id
    led.set_baseline("a", a1)
    assert led.baseline("a") == a1
    led.set_baseline("a", a2)  # replaces
    assert led.baseline("a") == a2
    assert led.baseline("other") is None
    assert Ledger(tmp_path, notebook="other.ipynb").baseline("a") is None  # per notebook
    with pytest.raises(UnknownRunError):
        led.set_baseline("a", 12345)
    led.forget(a2)
    assert led.baseline("a") is None
    assert led.get(a1)["id"] == a1


def test_rows_are_per_notebook(tmp_path):
    one, two = Ledger(tmp_path, notebook="one.ipynb"), Ledger(tmp_path, notebook="two.ipynb")
    r1, r2 = rec(one).id, rec(two).id
    assert [r["id"] for r in one.rows()] == [r1]
    assert [r["id"] for r in two.rows()] == [r2]
    assert [r["id"] for r in one.rows(notebook=None)] == [r2, r1]
    assert [r["id"] for r in one.rows(notebook="two.ipynb")] == [r2]
    assert one.get(r2)["notebook"] == "two.ipynb"  # ids are global to the file
    # a full path beside the ledger folder is stored as the notebook's file name
    led = Ledger(tmp_path / ".perfmagic", notebook=str(tmp_path / "one.ipynb"))
    assert led.notebook == "one.ipynb"


def test_schema(tmp_path):
    led = Ledger(tmp_path)
    rec(led)
    con = sqlite3.connect(str(led.path))
    try:
        assert con.execute("PRAGMA user_version").fetchone()[0] == 3
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        cols = [r[1] for r in con.execute("PRAGMA table_info(runs)")]
        assert cols == [
            "id", "created_utc", "notebook", "cell_id", "session", "magic", "label", "status",
            "code", "code_hash", "options", "metrics", "primary_metric", "samples", "env",
            "env_hash", "note", "env_id", "primary_value", "rerun_of", "interleaved_with", "work",
            "magic_line", "kind", "thread_limit",
        ]  # fmt: skip
        bcols = [r[1] for r in con.execute("PRAGMA table_info(baselines)")]
        assert bcols == ["notebook", "label", "run_id", "created_utc"]
        assert [r[1] for r in con.execute("PRAGMA table_info(run_data)")] == ["run_id", "options", "metrics", "env",
                                                                               "samples", "payload"]
        assert [r[1] for r in con.execute("PRAGMA table_info(envs)")] == ["id", "hash", "data"]
        writer = con.execute("SELECT value FROM meta WHERE key = 'writer'").fetchone()[0]
        assert writer.startswith("perfmagic ")
        assert con.execute("SELECT samples, options FROM runs").fetchone() == (None, None)  # packed in run_data
        idx = {r[1] for r in con.execute("PRAGMA index_list(runs)")}
        cols_of = {
            name: [r[2] for r in con.execute(f"PRAGMA index_info({name})")] for name in idx
        }
        assert ["notebook", "id"] in cols_of.values()
        assert ["notebook", "label"] in cols_of.values()
        assert ["interleaved_with"] in cols_of.values() and ["rerun_of"] in cols_of.values()
    finally:
        con.close()


def test_json_encoding_of_odd_values(tmp_path):
    np = pytest.importorskip("numpy")
    led = Ledger(tmp_path)
    ref = led.record(
        magic="bench",
        label=None,
        code="pass",
        options={"path": pathlib.Path("/x/y"), "shape": (2, 3), "n": np.int64(5), 3: "int key"},
        metrics={"median_s": np.float32(0.5), "nan": float("nan"), "inf": math.inf},
        samples=np.arange(3.0),
        env={"tags": {"b"}, "obj": object()},
    )
    assert ref.saved, ref.error
    r = led.get(ref.id)
    assert r["options"] == {"path": "/x/y", "shape": [2, 3], "n": 5, "3": "int key"}
    assert r["metrics"]["median_s"] == 0.5 and math.isnan(r["metrics"]["nan"])
    assert r["metrics"]["inf"] == math.inf
    assert r["samples"] == [0.0, 1.0, 2.0]
    assert r["env"]["tags"] == ["b"] and r["env"]["obj"].startswith("<object")
    assert r["label"] is None and r["primary_metric"] is None


def test_code_hash_ignores_trailing_whitespace():
    assert code_hash("a = 1  \nb = 2\t\n\n") == code_hash("a = 1\nb = 2")
    assert code_hash("a = 1\nb = 2") != code_hash("a = 1\nb = 3")
    assert code_hash(" a = 1") != code_hash("a = 1")  # leading whitespace matters


# --------------------------------------------------------------------------------------------
# persistence


def test_new_ledger_object_sees_rows(tmp_path):
    ids = [rec(Ledger(tmp_path, notebook="nb.ipynb"), str(i)).id for i in range(3)]
    again = Ledger(tmp_path, notebook="nb.ipynb")
    assert [r["id"] for r in again.rows()] == ids[::-1]
    assert again.get(ids[0])["label"] == "0"


def test_row_written_by_another_process_persists(tmp_path):
    code = """
        import sys
        from perfmagic.storage.ledger import Ledger
        ref = Ledger(sys.argv[1], notebook="nb.ipynb").record(
            magic="bench", label="child", code="pass", options={}, metrics={"median_s": 0.25},
            samples=None, env={}, primary_metric="median_s")
        assert ref.saved, ref.error
        print(ref.id)
    """
    out = run_py(code, str(tmp_path))
    assert out.returncode == 0, out.stderr
    child_id = int(out.stdout.strip())
    led = Ledger(tmp_path, notebook="nb.ipynb")
    row = led.get(child_id)
    assert row["label"] == "child" and row["metrics"] == {"median_s": 0.25}
    assert str(os.getpid()) not in row["session"]
    assert led.latest()["id"] == child_id
    mine = rec(led, "parent")
    assert mine.saved and mine.id > child_id


def test_two_processes_recording_at_once_lose_nothing(tmp_path):
    go = tmp_path / "go"
    code = """
        import os, sys, time
        from perfmagic.storage.ledger import Ledger
        directory, name, go = sys.argv[1], sys.argv[2], sys.argv[3]
        led = Ledger(directory, notebook="nb.ipynb")
        deadline = time.monotonic() + 60
        while not os.path.exists(go):
            if time.monotonic() > deadline:
                sys.exit("start barrier never opened")
            time.sleep(0.001)
        unsaved = 0
        for i in range(150):
            ref = led.record(magic="bench", label=name, code=f"x = {i}", options={"i": i},
                             metrics={"i": i}, samples=None, env={})
            unsaved += not ref.saved
            if not ref.saved:
                print(ref.error, file=sys.stderr)
        while led.pending and time.monotonic() < deadline:
            led.flush()
        print(unsaved, len(led.pending))
    """
    procs = []
    for name in ("p0", "p1"):
        env = dict(os.environ, PYTHONPATH=SRC)
        env.pop("PERFMAGIC_LEDGER_DIR", None)
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", textwrap.dedent(code), str(tmp_path), name, str(go)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    time.sleep(0.5)  # both interpreters are up and polling
    go.write_text("go")
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
        unsaved, left = out.split()
        assert left == "0", out  # nothing left only in memory
        assert unsaved == "0", out + err  # and with a 10 s timeout no write even had to wait in memory

    rows = file_rows(tmp_path / "ledger.sqlite")
    assert len(rows) == 300
    assert len({r[0] for r in rows}) == 300
    assert sum(r[1] == "p0" for r in rows) == 150
    assert sum(r[1] == "p1" for r in rows) == 150
    led = Ledger(tmp_path, notebook="nb.ipynb")
    for name in ("p0", "p1"):
        got = sorted(r["metrics"]["i"] for r in led.rows(label=name))
        assert got == list(range(150))


# --------------------------------------------------------------------------------------------
# the file cannot be written: the run is kept in memory


GARBAGE = b"this is not an sqlite file, it is the user's data\n" * 40


def test_corrupt_file_keeps_run_in_memory_and_is_untouched(tmp_path):
    led = Ledger(tmp_path, notebook="nb.ipynb")
    led.path.write_bytes(GARBAGE)
    t0 = time.monotonic()
    ref = rec(led, "lost?")
    assert time.monotonic() - t0 < 5
    assert ref.saved is False and ref.id == -1
    assert str(led.path) in ref.error
    assert "not a database" in ref.error
    assert "aside" in ref.error and "memory" in ref.error
    assert "\n" not in ref.error
    assert led.path.read_bytes() == GARBAGE

    ref2 = rec(led, "lost too")
    assert ref2.saved is False and ref2.id == -2
    assert led.path.read_bytes() == GARBAGE

    with pytest.raises(LedgerError) as ei:
        led.rows()
    assert str(led.path) in str(ei.value) and "not a database" in str(ei.value)
    assert "pending" in str(ei.value)
    with pytest.raises(LedgerError):
        led.to_frame()

    pend = led.pending
    assert [r["id"] for r in pend] == [-1, -2]
    assert [r["label"] for r in pend] == ["lost?", "lost too"]
    assert all(r["saved"] is False for r in pend)
    assert pend[0]["metrics"]["median_s"] == 0.005
    assert led.get(-1)["label"] == "lost?"

    # the user moves the file aside: the next record writes everything, oldest first
    led.path.rename(tmp_path / "ledger.sqlite.broken")
    ref3 = rec(led, "after")
    assert ref3.saved and ref3.error is None
    assert led.pending == []
    assert [r[1] for r in file_rows(led.path)] == ["lost?", "lost too", "after"]
    assert (tmp_path / "ledger.sqlite.broken").read_bytes() == GARBAGE
    assert led.get(-1)["label"] == "lost?"  # the old in-memory id still finds the run
    assert led.get(-1)["saved"] is True


def test_missing_file_reads_only_pending(tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the ledger folder should be")
    led = Ledger(blocker / ".perfmagic", notebook="nb.ipynb")
    ref = rec(led)
    assert not ref.saved and str(led.path) in ref.error
    assert "PERFMAGIC_LEDGER_DIR" in ref.error
    assert [r["id"] for r in led.rows()] == [-1]
    assert led.latest()["saved"] is False
    assert blocker.read_text().startswith("a file")
    removed = led.forget(-1)
    assert removed["id"] == -1 and led.rows() == [] and led.pending == []
    with pytest.raises(UnknownRunError):
        led.get(-1)


def test_locked_file_returns_quickly_then_flushes(tmp_path):
    led = Ledger(tmp_path, notebook="nb.ipynb", timeout=0.2)
    other = sqlite3.connect(str(led.path), isolation_level=None)
    try:
        other.execute("BEGIN EXCLUSIVE")
        t0 = time.monotonic()
        ref = rec(led, "while locked")
        elapsed = time.monotonic() - t0
        assert elapsed < 3, elapsed
        assert ref.saved is False and ref.id == -1
        assert "locked" in ref.error and str(led.path) in ref.error
        assert "next record()" in ref.error
        other.execute("ROLLBACK")
    finally:
        other.close()
    ref2 = rec(led, "after")
    assert ref2.saved, ref2.error
    assert [r[1] for r in file_rows(led.path)] == ["while locked", "after"]
    assert led.pending == []
    assert [r["label"] for r in led.rows()] == ["after", "while locked"]
    assert all(r["saved"] for r in led.rows())


def test_locked_wal_file_still_readable_while_writer_holds_it(tmp_path):
    led = Ledger(tmp_path, notebook="nb.ipynb", timeout=0.2)
    first = rec(led, "first").id
    other = sqlite3.connect(str(led.path), isolation_level=None)
    try:
        other.execute("BEGIN EXCLUSIVE")
        other.execute("INSERT INTO runs (created_utc, magic, status) VALUES ('x', 'm', 'ok')")
        ref = rec(led, "blocked")
        assert not ref.saved and "locked" in ref.error
        # readers are not blocked in WAL mode: saved and unsaved runs are both listed
        assert [(r["id"], r["saved"]) for r in led.rows()] == [(-1, False), (first, True)]
        assert led.flush() == 0
        other.execute("COMMIT")
    finally:
        other.close()
    assert led.flush() == 1
    assert [r[1] for r in file_rows(led.path)] == ["first", None, "blocked"]


def test_error_message_has_no_perfmagic_prefix(tmp_path):
    # the magics print f"perfmagic: {ref.error}": a prefix here would be printed twice
    led = Ledger(tmp_path, notebook="nb.ipynb")
    led.path.write_bytes(GARBAGE)
    ref = rec(led)
    assert not ref.saved and ref.error.startswith("run not saved to the ledger ")
    assert led.last_error == ref.error
    assert led.flush() == 0
    assert led.last_error.startswith(f"ledger {led.path} still not writable (")
    assert "perfmagic:" not in ref.error + led.last_error


# --------------------------------------------------------------------------------------------
# a ledger that cannot be written is still read


def _drop_write_capabilities():
    """``preexec_fn`` for root: drop CAP_DAC_OVERRIDE and CAP_FOWNER from the bounding set, so
    that after ``exec`` the child is a root that file modes apply to (its capabilities are the
    bounding set). Linux only; raises when the capabilities cannot be dropped."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 3):  # CAP_DAC_OVERRIDE, CAP_FOWNER
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


READ_ONLY_CHILD = """
    import json, os, sys
    from perfmagic.storage.ledger import Ledger
    folder, first = sys.argv[1], int(sys.argv[2])
    try:
        open(os.path.join(folder, "probe"), "w").close()
    except PermissionError:
        pass
    else:
        os.remove(os.path.join(folder, "probe"))
        print("WRITABLE")
        sys.exit(0)
    led = Ledger(folder, notebook="nb.ipynb")
    out = {
        "rows": [[r["id"], r["label"], r["saved"]] for r in led.rows()],
        "get": led.get(first)["label"],
        "baseline": led.baseline("a"),
        "latest": led.latest(label="b")["id"],
        "all": len(led.rows(notebook=None)),
    }
    ref = led.record(magic="bench", label="new", code="pass", options={}, metrics={},
                     samples=None, env={})
    out["ref"] = [ref.saved, ref.id, ref.error]
    out["after"] = [[r["id"], r["label"], r["saved"]] for r in led.rows()]
    print(json.dumps(out))
"""


@pytest.mark.parametrize("file_mode", [0o444, 0o644], ids=["file-read-only", "file-writable"])
def test_read_only_folder_still_reads_old_runs(tmp_path, file_mode):
    """The real thing: a WAL ledger in a folder nobody may write to (no -wal/-shm can be made).
    The reader is a child process; as root it runs without the capabilities that ignore file
    modes, so the folder is read-only for it too."""
    folder = tmp_path / "ro"
    led = Ledger(folder, notebook="nb.ipynb")
    a, b = rec(led, "a").id, rec(led, "b").id
    led.set_baseline("a", a)
    os.chmod(led.path, file_mode)
    os.chmod(folder, 0o555)
    before = led.path.read_bytes()
    preexec = None
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        if not sys.platform.startswith("linux"):
            pytest.skip("root outside Linux: no way to make the folder read-only for the reader")
        preexec = _drop_write_capabilities
    env = dict(os.environ, PYTHONPATH=SRC)
    env.pop("PERFMAGIC_LEDGER_DIR", None)
    try:
        try:
            out = subprocess.run(
                [sys.executable, "-c", textwrap.dedent(READ_ONLY_CHILD), str(folder), str(a)],
                env=env, capture_output=True, text=True, timeout=120, preexec_fn=preexec,
            )  # fmt: skip
        except subprocess.SubprocessError as exc:
            pytest.skip(f"cannot drop root's write capabilities here: {exc}")
        assert out.returncode == 0, out.stderr
        if out.stdout.strip() == "WRITABLE":
            pytest.skip("the folder stays writable for this user (chmod does not bind it)")
        got = json.loads(out.stdout)
        assert got["rows"] == [[b, "b", True], [a, "a", True]]
        assert got["get"] == "a" and got["baseline"] == a and got["latest"] == b
        assert got["all"] == 2
        saved, rid, error = got["ref"]
        assert saved is False and rid == -1
        assert str(led.path) in error and "readonly" in error and "writable" in error
        assert not error.startswith("perfmagic")
        assert got["after"] == [[-1, "new", False], [b, "b", True], [a, "a", True]]
        assert sorted(p.name for p in folder.iterdir()) == ["ledger.sqlite"]
        assert led.path.read_bytes() == before
    finally:
        os.chmod(folder, 0o755)
        os.chmod(led.path, 0o644)


@pytest.mark.parametrize(
    "refused",
    [("mode=rw", "mode=ro"), ("mode=rw",)],
    ids=["only-immutable-opens", "read-only-opens"],
)
def test_read_only_ledger_falls_back_to_read_only_connections(tmp_path, monkeypatch, refused):
    """The same in this process, for any user (root included): every connection to the ledger
    except the ``refused`` kinds of URI is opened as usual; those fail on their first statement
    as SQLite does in a read-only folder. The plain path is ``record()``'s write connection."""
    led = Ledger(tmp_path, notebook="nb.ipynb")
    a, b = rec(led, "a").id, rec(led, "b").id
    led.set_baseline("a", a)
    before = led.path.read_bytes()
    real_connect = sqlite3.connect

    class ReadOnlyFolder(sqlite3.Connection):
        def execute(self, *args, **kwargs):
            raise sqlite3.OperationalError("attempt to write a readonly database")

    opened = []

    def connect(database, *args, **kwargs):
        name = os.fspath(database)
        query = name.partition("?")[2]
        kind = "plain" if not query else query
        opened.append(kind)
        if "ledger.sqlite" in name and (kind == "plain" or kind in refused):
            kwargs["factory"] = ReadOnlyFolder
        return real_connect(database, *args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", connect)
    fresh = Ledger(tmp_path, notebook="nb.ipynb")
    assert [(r["id"], r["label"]) for r in fresh.rows()] == [(b, "b"), (a, "a")]
    assert fresh.get(a)["label"] == "a"
    assert fresh.baseline("a") == a
    assert fresh.latest()["id"] == b
    expected = "mode=ro&immutable=1" if "mode=ro" in refused else "mode=ro"
    assert expected in opened

    ref = rec(fresh, "new")
    assert ref.saved is False and ref.id == -1
    assert "attempt to write a readonly database" in ref.error and str(fresh.path) in ref.error
    assert [(r["id"], r["saved"]) for r in fresh.rows()] == [(-1, False), (b, True), (a, True)]
    with pytest.raises(LedgerError, match="readonly"):
        fresh.forget(a)
    monkeypatch.undo()
    assert led.path.read_bytes() == before


# --------------------------------------------------------------------------------------------
# another program's file at the ledger path: refused, and left exactly as it was


def _foreign_file(path: pathlib.Path, kind: str, user_version: int) -> None:
    if kind == "random":
        import random

        path.write_bytes(random.Random(0).randbytes(8192))
        return
    con = sqlite3.connect(str(path), isolation_level=None)
    try:
        con.execute(f"PRAGMA journal_mode = {kind}")
        con.execute(f"PRAGMA user_version = {user_version}")  # programs version schemas too
        con.execute("CREATE TABLE users (name TEXT, email TEXT)")
        con.execute("INSERT INTO users VALUES ('ada', 'ada@example.org')")
    finally:
        con.close()


@pytest.mark.parametrize(
    "kind, user_version",
    [("delete", 0), ("delete", 1), ("wal", 0), ("wal", 1), ("random", None)],
    ids=["rollback", "rollback-version-1", "wal", "wal-version-1", "random-bytes"],
)
def test_foreign_file_is_refused_and_left_byte_identical(tmp_path, kind, user_version):
    led = Ledger(tmp_path, notebook="nb.ipynb")
    _foreign_file(led.path, kind, user_version)
    before = led.path.read_bytes()

    def untouched():  # after every call: a later read could remove a -wal/-shm left by one
        assert led.path.read_bytes() == before
        assert sorted(os.listdir(tmp_path)) == ["ledger.sqlite"]  # no -wal, -shm, -journal

    untouched()
    ref = rec(led, "mine")
    untouched()
    assert ref.saved is False and ref.id == -1
    assert str(led.path) in ref.error and "aside" in ref.error
    why = "not a database" if kind == "random" else "not a perfmagic ledger"
    assert why in ref.error
    assert led.flush() == 0 and why in led.last_error
    untouched()
    with pytest.raises(LedgerError, match=why):
        led.rows()
    untouched()
    with pytest.raises(LedgerError, match=why):
        led.set_baseline("mine", 1)
    untouched()
    with pytest.raises(LedgerError, match=why):
        led.forget(1)
    untouched()
    if kind == "random":
        with pytest.raises(LedgerError, match=why):
            led.baseline("mine")
    else:
        assert led.baseline("mine") is None  # no baselines table: nothing to read
    untouched()
    assert [r["label"] for r in led.pending] == ["mine"]


# --------------------------------------------------------------------------------------------
# exports and the DataFrame


def test_export_csv_and_json_round_trip(tmp_path):
    led = Ledger(tmp_path, notebook="nb.ipynb")
    rec(led, "a", 0.001)
    rec(led, "b", 0.002, metrics={"median_s": 0.002, "gflops": 12.5})
    rec(Ledger(tmp_path, notebook="other.ipynb"), "c")
    rows = led.rows(newest_first=False)

    j = led.export(tmp_path / "out.json")
    assert j == tmp_path / "out.json"
    assert json.loads(j.read_text()) == rows

    c = led.export(str(tmp_path / "out.csv"))
    with open(c, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        got = list(reader)
        header = reader.fieldnames
    assert [int(r["id"]) for r in got] == [r["id"] for r in rows]
    assert "metric.median_s" in header and "metric.gflops" in header
    assert "metrics" not in header
    assert [float(r["metric.median_s"]) for r in got] == [0.001, 0.002]
    assert got[0]["metric.gflops"] == "" and float(got[1]["metric.gflops"]) == 12.5
    assert json.loads(got[0]["options"]) == rows[0]["options"]
    assert json.loads(got[1]["samples"]) == rows[1]["samples"]
    assert json.loads(got[1]["env"]) == rows[1]["env"]
    assert got[0]["code"] == rows[0]["code"] and got[0]["label"] == "a"

    everything = led.export(tmp_path / "all.json", notebook=None)
    assert len(json.loads(everything.read_text())) == 3

    with pytest.raises(LedgerError, match=r"\.csv or \.json"):
        led.export(tmp_path / "out.xlsx")
    assert not (tmp_path / "out.xlsx").exists()


def test_to_frame_has_one_column_per_metric(tmp_path):
    pd = pytest.importorskip("pandas")
    led = Ledger(tmp_path, notebook="nb.ipynb")
    assert led.to_frame().empty
    ids = [
        led.record(magic="bench", label="a", code="a", options={"k": 1}, samples=None, env={},
                   metrics={"median_s": 0.1, "ci_low_s": 0.09}, primary_metric="median_s").id,
        led.record(magic="roofline", label="b", code="b", options={}, samples=None, env={},
                   metrics={"gflops": 3.5, "status": "x"}).id,
    ]  # fmt: skip
    df = led.to_frame()
    assert list(df.index) == ids and df.index.name == "id"
    for col in ("median_s", "ci_low_s", "gflops", "metric.status"):
        assert col in df.columns
    assert list(df.columns[:6]) == ["created", "notebook", "magic", "label", "status",
                                    "primary_metric"]  # fmt: skip
    assert df.loc[ids[0], "median_s"] == 0.1 and math.isnan(df.loc[ids[1], "median_s"])
    assert math.isnan(df.loc[ids[0], "gflops"])
    assert df["status"].tolist() == ["ok", "ok"]
    assert df.loc[ids[1], "metric.status"] == "x"
    assert df.loc[ids[0], "options"] == {"k": 1}
    assert str(df["created"].dt.tz) == "UTC"
    assert isinstance(df.loc[ids[0], "created"], pd.Timestamp)
    assert df["saved"].tolist() == [True, True]
    assert list(led.to_frame(newest_first=True).index) == ids[::-1]


# --------------------------------------------------------------------------------------------
# locate()


@pytest.fixture
def clean_env(monkeypatch):
    monkeypatch.delenv("PERFMAGIC_LEDGER_DIR", raising=False)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    return monkeypatch


def test_locate_env_override(tmp_path, clean_env):
    clean_env.setenv("PERFMAGIC_LEDGER_DIR", str(tmp_path / "shared"))
    nb, d = locate({}, cwd=str(tmp_path / "work"))
    assert nb is None and d == tmp_path / "shared"
    (tmp_path / "nb.ipynb").write_text("{}")
    nb, d = locate({"__session__": str(tmp_path / "nb.ipynb")}, cwd=str(tmp_path))
    assert nb == str(tmp_path / "nb.ipynb") and d == tmp_path / "shared"
    clean_env.setenv("PERFMAGIC_LEDGER_DIR", "rel")
    assert locate({}, cwd=str(tmp_path))[1] == tmp_path / "rel"


def test_locate_session_notebook(tmp_path, clean_env):
    sub = tmp_path / "proj"
    sub.mkdir()
    (sub / "analysis.ipynb").write_text("{}")
    nb, d = locate({"__session__": str(sub / "analysis.ipynb")}, cwd=str(tmp_path))
    assert nb == str(sub / "analysis.ipynb") and d == sub / ".perfmagic"
    # relative to cwd and existing
    nb, d = locate({"__session__": "proj/analysis.ipynb"}, cwd=str(tmp_path))
    assert nb == str(sub / "analysis.ipynb") and d == sub / ".perfmagic"
    # relative to the server root (not to cwd): the file name, in cwd
    nb, d = locate({"__session__": "some/where/analysis.ipynb"}, cwd=str(sub))
    assert pathlib.Path(nb).name == "analysis.ipynb" and d == sub / ".perfmagic"
    led = Ledger(d, nb)
    assert led.notebook == "analysis.ipynb"
    # not a notebook: ignored
    nb, d = locate({"__session__": "a-console-session"}, cwd=str(sub))
    assert nb is None and d == sub / ".perfmagic"


def test_locate_vscode_jpy_and_fallback(tmp_path, clean_env):
    (tmp_path / "v.ipynb").write_text("{}")
    nb, d = locate({"__vsc_ipynb_file__": str(tmp_path / "v.ipynb")}, cwd="/")
    assert nb == str(tmp_path / "v.ipynb") and d == tmp_path / ".perfmagic"
    # __session__ comes first
    (tmp_path / "s.ipynb").write_text("{}")
    nb, _ = locate(
        {"__session__": str(tmp_path / "s.ipynb"), "__vsc_ipynb_file__": str(tmp_path / "v.ipynb")}
    )
    assert nb == str(tmp_path / "s.ipynb")
    clean_env.setenv("JPY_SESSION_NAME", str(tmp_path / "j.ipynb"))
    nb, d = locate({}, cwd="/")
    assert nb == str(tmp_path / "j.ipynb") and d == tmp_path / ".perfmagic"
    clean_env.delenv("JPY_SESSION_NAME")
    assert locate(None, cwd=str(tmp_path)) == (None, tmp_path / ".perfmagic")
    clean_env.chdir(tmp_path)
    assert locate() == (None, tmp_path / ".perfmagic")
    led = Ledger()
    assert led.path == tmp_path / ".perfmagic" / "ledger.sqlite" and led.notebook is None
