"""The ledger's tables (schema 3), the migrations from schemas 1 and 2, and the read of a newer schema.

Schema 2 keeps a run's light fields in ``runs`` and its heavy ones beside it, so that the commands
that list runs (``%perf``, ``%perf next``, ``perfmagic.ledger()``) read a few columns and decode no
samples:

* ``runs``: the run's light fields, all a listing reads (a row stays ~200 bytes, so a scan of 100,000
  runs reads a few MB): ``env_id`` the machine it ran on (``envs``); and, as columns, what listing
  needs without JSON: ``primary_value`` (the headline metric's value), ``rerun_of`` (the run this row
  re-measured, ``--vs``), ``interleaved_with`` (the A side a B was measured beside) and ``work`` (the
  work per call the run declared, ``--items``/``--flops``/``--bytes``, or recorded as a throughput, as
  JSON: ``{"items": 32.0}``; NULL when none: a comparison judges such runs per unit of it).
  ``options``, ``metrics``, ``samples`` and ``env`` are NULL there (schema 1 kept their JSON in them).
* ``run_data``: the heavy fields, one row per run: ``options``, ``metrics`` and ``env`` (only the fields the
  run measured itself) as JSON deflated against a fixed dictionary (:func:`.compact.pack_json`), and the
  ``samples`` packed (:func:`.compact.pack_samples`). Reading a row joins it; its samples are read on use.
* ``envs``: each distinct machine description once.
* ``meta``: which perfmagic wrote the file last (a newer one is named when this one cannot write it).

Schema 3 (the run record, :mod:`perfmagic.record`) adds to ``runs`` the ``magic_line`` (the cell's
``%%magic`` line, apart from ``code``, now the cell body only; NULL in older rows, whose code still holds
it: :func:`.codec.split_cell` splits it on read), ``kind`` (the result type when it is not the magic's
own: ``ranks``) and ``thread_limit`` (the third relation beside ``rerun_of`` and ``interleaved_with``, all
three now written from the record's fields, not the user's options); and to ``run_data`` the ``payload``:
what a result needs beyond options, metrics and samples to be rebuilt (:func:`.compact.pack_payload`).

:func:`migrate` turns a schema-1 file into schema 3 in the write transaction that first finds it
(every row rewritten once; a ledger of 20,000 runs takes a few seconds, once); a schema-2 file gets the new
columns and its interleaved rows' ``thread_limit`` from their options (a few rows). Rows written before
schema 3 have no payload: the results that need one say so when rebuilt.
"""

from __future__ import annotations

import json
from typing import Any

from .compact import pack_json, pack_payload, pack_samples, split_env, unpack_json

SCHEMA_VERSION = 3

# Columns of ``runs`` in schema order; JSON-encoded ones are decoded when read.
V1_COLUMNS = ("id", "created_utc", "notebook", "cell_id", "session", "magic", "label", "status", "code", "code_hash",
              "options", "metrics", "primary_metric", "samples", "env", "env_hash", "note")
NEW_COLUMNS = (("env_id", "INTEGER"), ("primary_value", ""), ("rerun_of", "INTEGER"), ("interleaved_with", "INTEGER"),
               ("work", "TEXT"), ("magic_line", "TEXT"), ("kind", "TEXT"), ("thread_limit", "INTEGER"))
COLUMNS = V1_COLUMNS + tuple(c for c, _ in NEW_COLUMNS)
RELATIONS = ("rerun_of", "interleaved_with", "thread_limit")
# what a row dict holds: schema 1's columns, the magic line and kind, the relations (derived from the options
# of a row written before they were columns)
ROW_COLUMNS = V1_COLUMNS + ("magic_line", "kind") + RELATIONS
JSON_COLUMNS = ("options", "metrics", "samples", "env")
HEAVY = ("options", "metrics", "env", "samples")  # in run_data (schema 2); in runs (schema 1)
LIGHT = tuple(c for c in COLUMNS if c not in HEAVY)  # what listing reads of runs

_V2_ONLY = (
    "CREATE TABLE IF NOT EXISTS run_data (run_id INTEGER PRIMARY KEY, options BLOB, metrics BLOB, env BLOB, "
    "samples BLOB, payload BLOB)",
    "CREATE TABLE IF NOT EXISTS envs (id INTEGER PRIMARY KEY, hash TEXT UNIQUE NOT NULL, data TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)",
    # partial: only the few re-measured and interleaved runs are in them (a sweep's rows add nothing)
    "CREATE INDEX IF NOT EXISTS runs_interleaved ON runs (interleaved_with) WHERE interleaved_with IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS runs_rerun ON runs (rerun_of) WHERE rerun_of IS NOT NULL",
)
SCHEMA = (
    """CREATE TABLE IF NOT EXISTS runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        created_utc TEXT NOT NULL,
        notebook TEXT,
        cell_id TEXT,
        session TEXT,
        magic TEXT NOT NULL,
        label TEXT,
        status TEXT NOT NULL,
        code TEXT,
        code_hash TEXT,
        options TEXT,
        metrics TEXT,
        primary_metric TEXT,
        samples TEXT,
        env TEXT,
        env_hash TEXT,
        note TEXT,
        env_id INTEGER,
        primary_value,
        rerun_of INTEGER,
        interleaved_with INTEGER,
        work TEXT,
        magic_line TEXT,
        kind TEXT,
        thread_limit INTEGER
    )""",
    "CREATE INDEX IF NOT EXISTS runs_notebook_id ON runs (notebook, id)",
    "CREATE INDEX IF NOT EXISTS runs_notebook_label ON runs (notebook, label)",
    """CREATE TABLE IF NOT EXISTS baselines (
        notebook TEXT,
        label TEXT,
        run_id INTEGER,
        created_utc TEXT,
        PRIMARY KEY (notebook, label)
    )""",
    *_V2_ONLY,
)
OUR_TABLES = {"runs", "baselines", "sqlite_sequence", "targets", "predictions", "run_data", "envs", "meta"}
# Tables of the advisor (``%perf target``, ``%perf next``'s checked predictions), created on first use by
# their writers (:mod:`.advice`) with CREATE TABLE IF NOT EXISTS: a ledger of schema version 1 stays version 1.
ADVISOR_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS targets (
        notebook TEXT,
        label TEXT,
        target_s REAL NOT NULL,
        created_utc TEXT,
        PRIMARY KEY (notebook, label)
    )""",
    """CREATE TABLE IF NOT EXISTS predictions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        created_utc TEXT NOT NULL,
        notebook TEXT,
        label TEXT,
        level TEXT,
        action TEXT,
        low REAL,
        high REAL,
        basis TEXT,
        evidence TEXT,
        base_run INTEGER,
        after_run INTEGER,
        run_a INTEGER,
        run_b INTEGER,
        measured REAL,
        within INTEGER,
        checked_utc TEXT
    )""",
)



def _int(v: Any) -> int | None:
    try:
        return int(v) if v is not None and not isinstance(v, bool) else None
    except (TypeError, ValueError):
        return None


def derived(options_text: str | None, metrics_text: str | None, primary: str | None,
            relations: dict[str, Any] | None = None) -> tuple[Any, Any, Any, Any, Any]:
    """``(primary_value, rerun_of, interleaved_with, work, thread_limit)`` from a row's options and metrics
    JSON; a relation given in ``relations`` (the record's field) wins over the option key older rows used."""
    from .codec import work_of

    try:
        opts = json.loads(options_text) if options_text else {}
    except ValueError:
        opts = {}
    try:
        mets = json.loads(metrics_text) if metrics_text else {}
    except ValueError:
        mets = {}
    opts = opts if isinstance(opts, dict) else {}
    mets = mets if isinstance(mets, dict) else {}
    value = mets.get(primary) if primary else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        value = None
    work = work_of(opts, mets)
    rel = relations or {}

    def relation(name: str, key: str) -> int | None:
        return _int(rel[name]) if rel.get(name) is not None else _int(opts.get(key))

    return (value, relation("rerun_of", "remeasured_from"), relation("interleaved_with", "interleaved_with"),
            json.dumps(work, sort_keys=True) if work else None, relation("thread_limit", "thread_limit"))


def env_id(con: Any, machine: str | None, digest: str | None) -> int | None:
    """The ``envs`` id of a machine description, added when new."""
    if machine is None:
        return None
    got = con.execute("SELECT id FROM envs WHERE hash = ?", (digest,)).fetchone()
    if got is not None:
        return int(got[0])
    return int(con.execute("INSERT INTO envs (hash, data) VALUES (?, ?)", (digest, machine)).lastrowid)


def storage_parts(row: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], tuple[str | None, str | None]]:
    """A storage-form row (JSON text, as ``Ledger.record`` builds it) split for schema 2: the ``runs``
    columns, the ``run_data`` columns (packed), and the machine description with its hash."""
    out = {c: row.get(c) for c in V1_COLUMNS if c not in ("id", *HEAVY)}
    data: dict[str, Any] = {}
    if row.get("samples") is not None:
        try:
            data["samples"] = pack_samples(json.loads(row["samples"]))
        except ValueError:  # not JSON: kept as it was
            data["samples"] = row["samples"]
    machine, digest = None, None
    env_text = row.get("env")
    if env_text is not None:
        try:
            env = json.loads(env_text)
        except ValueError:
            env = None
        if isinstance(env, dict):
            machine, digest, own = split_env(env)
            env_text = json.dumps(own, allow_nan=True)
    out["primary_value"], out["rerun_of"], out["interleaved_with"], out["work"], out["thread_limit"] = derived(
        row.get("options"), row.get("metrics"), row.get("primary_metric"), {r: row.get(r) for r in RELATIONS})
    for c in ("magic_line", "kind"):
        out[c] = row.get(c)
    for c, text in (("options", row.get("options")), ("metrics", row.get("metrics")), ("env", env_text)):
        data[c] = pack_json(text) if isinstance(text, str) else text  # deflated against the format's dictionary
    payload = row.get("payload")
    data["payload"] = pack_payload(payload) if isinstance(payload, str) else payload
    return out, data, (machine, digest)


def _put_data(con: Any, rid: int, data: dict[str, Any]) -> None:
    con.execute("INSERT OR REPLACE INTO run_data (run_id, options, metrics, env, samples, payload) "
                "VALUES (?, ?, ?, ?, ?, ?)", (rid, data.get("options"), data.get("metrics"), data.get("env"),
                                              data.get("samples"), data.get("payload")))


def insert(con: Any, rows: list[dict[str, Any]]) -> list[int]:
    """Insert storage-form rows (inside the caller's transaction); returns their ids."""
    ids = []
    for r in rows:
        cols, data, (machine, digest) = storage_parts(r)
        cols["env_id"] = env_id(con, machine, digest)
        names = list(cols)
        cur = con.execute(f"INSERT INTO runs ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
                          tuple(cols[c] for c in names))
        rid = int(cur.lastrowid)
        _put_data(con, rid, data)
        ids.append(rid)
    return ids


def migrate(con: Any, version: int = 1) -> int:
    """Schema 1 or 2 → 3 inside the caller's write transaction; returns the rows rewritten."""
    have = {r[1] for r in con.execute("PRAGMA table_info(runs)")}
    for name, kind in NEW_COLUMNS:
        if name not in have:
            con.execute(f"ALTER TABLE runs ADD COLUMN {name} {kind}".rstrip())
    for stmt in _V2_ONLY:
        con.execute(stmt)
    if "payload" not in {r[1] for r in con.execute("PRAGMA table_info(run_data)")}:
        con.execute("ALTER TABLE run_data ADD COLUMN payload BLOB")
    return _from_v1(con) if version == 1 else _from_v2(con)


def _from_v2(con: Any) -> int:
    """Schema 2 → 3: the interleaved rows' thread limit, from their options (an indexed handful of rows)."""
    got = con.execute("SELECT runs.id, d.options FROM runs JOIN run_data d ON d.run_id = runs.id "
                      "WHERE runs.rerun_of IS NOT NULL OR runs.interleaved_with IS NOT NULL").fetchall()
    n = 0
    for rid, options in got:
        try:
            opts = json.loads(unpack_json(options) or "{}")
        except (TypeError, ValueError):
            continue
        limit = _int(opts.get("thread_limit")) if isinstance(opts, dict) else None
        if limit is not None:
            con.execute("UPDATE runs SET thread_limit = ? WHERE id = ?", (limit, rid))
            n += 1
    return n


def _from_v1(con: Any) -> int:
    """Schema 1 → 3: every row's heavy fields moved to ``run_data`` (packed), its columns derived."""
    n = 0
    last = 0
    while True:
        batch = con.execute("SELECT id, options, metrics, primary_metric, samples, env FROM runs WHERE id > ? "
                            "ORDER BY id LIMIT 2000", (last,)).fetchall()
        if not batch:
            break
        for rid, options, metrics, primary, samples, env in batch:
            cols, data, (machine, digest) = storage_parts(
                {"options": options, "metrics": metrics, "primary_metric": primary, "samples": samples, "env": env})
            con.execute("UPDATE runs SET options = NULL, metrics = NULL, samples = NULL, env = NULL, env_id = ?, "
                        "primary_value = ?, rerun_of = ?, interleaved_with = ?, work = ?, thread_limit = ? "
                        "WHERE id = ?", (env_id(con, machine, digest), cols["primary_value"], cols["rerun_of"],
                                         cols["interleaved_with"], cols["work"], cols["thread_limit"], rid))
            _put_data(con, rid, data)
            n += 1
            last = rid
    return n


def stamp(con: Any, version: str) -> None:
    """Record the writer and the schema version (inside the caller's transaction)."""
    con.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('writer', ?)", (f"perfmagic {version}",))
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def writer(con: Any) -> str | None:
    """Which perfmagic wrote the file last (schema 2 and later), or None."""
    try:
        got = con.execute("SELECT value FROM meta WHERE key = 'writer'").fetchone()
    except Exception:  # noqa: BLE001 - no meta table: schema 1
        return None
    return str(got[0]) if got else None


__all__ = ["ADVISOR_SCHEMA", "COLUMNS", "HEAVY", "JSON_COLUMNS", "LIGHT", "OUR_TABLES", "RELATIONS", "SCHEMA",
           "SCHEMA_VERSION", "derived", "insert", "migrate", "stamp", "storage_parts", "writer"]
