"""The run ledger: one row per magic run, kept in an SQLite file beside the notebook.

Every measurement (a timing run, a roofline, a profile...) appends one row to
``.perfmagic/ledger.sqlite`` next to the notebook, so before/after runs can be compared across
kernel restarts. The design rules:

* **Never lose a result.** When the file cannot be written (locked by another process past the
  timeout, not a database, read-only folder, disk full...), ``record()`` keeps the row in memory
  (``Ledger.pending``, negative ids -1, -2, ...) and returns ``RunRef(saved=False, error=...)``
  whose one-line message names the file, the SQLite error, and the fix. The next successful
  ``record()`` writes the pending rows first. A user's file is never deleted or overwritten.
  The message does not start with ``perfmagic:``: whoever prints it adds that prefix.
* **Look before writing.** An existing file is inspected read-only (the SQLite header, then
  ``PRAGMA user_version`` and the tables) before any connection that may write to it is opened,
  so another program's database (or a file that is not SQLite at all) is refused byte-identical:
  not even switched to WAL mode, and with no ``-wal``/``-shm`` files left beside it.
* **A ledger that cannot be written can still be read** (read-only folder, file or mount):
  reading falls back to ``mode=ro`` and then ``immutable=1`` (see :func:`.db.connect_read`).
* **One short transaction per write** (``BEGIN IMMEDIATE`` ... ``COMMIT``) on a connection opened
  for that operation and closed after it: safe across threads, ``fork`` and concurrent kernels.
  The file is in WAL mode, so readers never wait for writers.
* **Cheap import**: stdlib only; ``sqlite3`` is imported inside the functions that use it and
  pandas only inside :meth:`Ledger.to_frame`. No IPython.

Notebook discovery (:func:`locate`): ``$PERFMAGIC_LEDGER_DIR`` (the ledger folder itself), then
``user_ns["__session__"]`` (ipykernel; may be relative to the server root),
``user_ns["__vsc_ipynb_file__"]`` (VS Code), ``$JPY_SESSION_NAME``; otherwise no notebook and
``cwd/.perfmagic``.

The ``notebook`` column holds the notebook's file name when the notebook sits beside the ledger
folder (the usual case, stable when the folder is moved), else the path as found.

:class:`Ledger` is one class, read top to bottom: writing a run, reading runs, baselines, the
advisor's targets and predictions, export, and last the file (one read connection, one write
transaction). What it does with SQL, the schema or packed bytes is a plain function of the module that
owns that concept: ``locate.py`` (notebook discovery), ``codec.py`` (JSON, hashes, the stored form of a
run), ``db.py`` (the file: connections, the schema check before writing, errors), ``schema.py`` (the
tables, the insert, the migration), ``compact.py`` (packed samples, the machine stored once), ``rows.py``
(rows decoded on use, a row's run record), ``views.py`` (what the listing commands read), ``advice.py``
(the advisor's tables) and ``frame.py`` (export and the pandas views).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import threading
import time
from typing import Any

from ..core.interrupts import sigint_deferred
from . import advice
from .codec import STATUSES, _loads, _utc_now, code_hash, rerun_of, storage_row
from .compact import unpack_payload
from .db import (
    LedgerError,
    UnknownRunError,
    classify,
    connect_read,
    connect_write,
    read_error,
    tables,
    transaction,
    write_error,
)
from .locate import ENV_DIR, LEDGER_FILENAME, LEDGER_FOLDER, _notebook_key, locate
from .rows import Reader, decoded, from_row, select_from, unpack
from .schema import OUR_TABLES, SCHEMA_VERSION, insert, writer

__all__ = [
    "ENV_DIR",
    "LEDGER_FILENAME",
    "LEDGER_FOLDER",
    "SCHEMA_VERSION",
    "STATUSES",
    "Ledger",
    "LedgerError",
    "RecordedInterrupt",
    "RunRef",
    "UnknownRunError",
    "code_hash",
    "locate",
    "rerun_of",
]



class RecordedInterrupt(KeyboardInterrupt):
    """Ctrl-C arrived while ``record()`` wrote a run: it was held until the run was saved (or kept in
    memory) once; ``ref`` says which. Still a ``KeyboardInterrupt``; ``message`` is written where it is raised."""

    def __init__(self, ref: RunRef, message: str) -> None:
        super().__init__(message)
        self.ref = ref


@dataclasses.dataclass(frozen=True)
class RunRef:
    """What ``record()`` did: the run's id (negative while only in memory), where, and any error.

    ``error`` is one line without a ``perfmagic:`` prefix: the caller that prints it adds it."""

    id: int
    saved: bool
    path: str
    error: str | None = None



class Ledger:
    """The per-notebook table of runs in ``<directory>/ledger.sqlite``.

    ``directory`` is the ledger folder itself (``None``: found by :func:`locate`, using
    ``user_ns`` when given). ``timeout`` is how long a write waits for another process's lock.
    """

    def __init__(
        self,
        directory: str | os.PathLike | None = None,
        notebook: str | None = None,
        *,
        timeout: float = 10.0,
        user_ns: dict | None = None,
    ) -> None:
        if directory is None:
            found, ledger_dir = locate(user_ns)
            if notebook is None:
                notebook = found
        else:
            d = pathlib.Path(os.path.expanduser(os.fspath(directory)))
            ledger_dir = pathlib.Path(os.path.abspath(d))
        self._dir = ledger_dir
        self._path = ledger_dir / LEDGER_FILENAME
        self._notebook = _notebook_key(notebook, ledger_dir)
        self.timeout = float(timeout)
        self._pending: list[dict[str, Any]] = []  # storage-form rows (JSON text), id < 0
        self._next_pending = -1
        self._renumbered: dict[int, int] = {}  # pending id -> id in the file once flushed
        self._lock = threading.RLock()
        self._machines: dict[int, Any] = {}  # envs rows read so far (a machine description per id)
        self.last_error: str | None = None  # like RunRef.error: no "perfmagic: " prefix
        self.newer: str | None = None  # set when the file has a newer schema: what it is, and that nothing is written

    # -- properties -------------------------------------------------------------------------

    @property
    def path(self) -> pathlib.Path:
        """The SQLite file (it may not exist yet)."""
        return self._path

    @property
    def directory(self) -> pathlib.Path:
        return self._dir

    @property
    def notebook(self) -> str | None:
        """The value of the ``notebook`` column for this ledger's runs (None: no notebook)."""
        return self._notebook

    @property
    def pending(self) -> list[dict]:
        """Runs recorded while the file could not be written, oldest first (``saved=False``)."""
        with self._lock:
            return [self._decode(dict(r), saved=False) for r in self._pending]

    def __repr__(self) -> str:
        extra = f", {len(self._pending)} unsaved" if self._pending else ""
        return f"Ledger({str(self._path)!r}, notebook={self._notebook!r}{extra})"

    # -- writing ----------------------------------------------------------------------------

    def record(
        self,
        *,
        magic: str,
        label: str | None,
        code: str,
        options: dict,
        metrics: dict,
        samples: dict | list | None,
        env: dict,
        env_hash: str | None = None,
        status: str = "ok",
        primary_metric: str | None = None,
        cell_id: str | None = None,
        session: str | None = None,
        note: str | None = None,
        magic_line: str | None = None,
        kind: str | None = None,
        payload: Any = None,
        rerun_of: int | None = None,
        interleaved_with: int | None = None,
        thread_limit: int | None = None,
    ) -> RunRef:
        """Append one run. Never raises over the file: on failure the run is kept in memory and
        ``RunRef(saved=False, error=...)`` says why and what to do.

        ``magic_line`` is the cell's ``%%magic`` line without the magic (``code`` is then the body only);
        ``kind`` the result type when it is not the magic's own; ``payload`` what the result needs beyond
        the other fields to be rebuilt (:meth:`record_run` fills these from a :class:`~perfmagic.record.RunRecord`);
        ``rerun_of``, ``interleaved_with``, ``thread_limit``: the run's relations to others."""
        # Ctrl-C is held from here to the return: the row is written once (with the pending ones before
        # it) or kept in memory once, never both; a held Ctrl-C is raised after, carrying the RunRef
        with sigint_deferred(raise_after=False) as hit:
            row = storage_row(self._notebook, magic=magic, label=label, code=code, options=options,
                              metrics=metrics, samples=samples, env=env, env_hash=env_hash, status=status,
                              primary_metric=primary_metric, cell_id=cell_id, session=session, note=note,
                              magic_line=magic_line, kind=None if kind == magic else kind, payload=payload,
                              rerun_of=rerun_of, interleaved_with=interleaved_with, thread_limit=thread_limit)
            ref = self._record_row(row)
        if hit:
            raise RecordedInterrupt(ref, f"interrupted while recording run #{ref.id}; it was "
                                         f"{'saved' if ref.saved else 'kept in memory'}")
        return ref

    def record_run(self, rec: Any, *, env_hash: str | None = None, cell_id: str | None = None,
                   session: str | None = None) -> RunRef:
        """Append a :class:`~perfmagic.record.RunRecord` (what ``result.to_record(...)`` made)."""
        return self.record(**rec.ledger_fields(), env_hash=env_hash, cell_id=cell_id, session=session)

    def _record_row(self, row: dict[str, Any]) -> RunRef:
        with self._lock:
            try:
                ids = self._write([*self._pending, row])
            except Exception as exc:  # noqa: BLE001 - a result is never lost over the file
                row["id"] = self._next_pending
                self._next_pending -= 1
                self._pending.append(row)
                from ..render.ledger import unsaved_text  # on a failure only: %load_ext stays cheap

                reason, fix = classify(exc, self._path)
                msg = unsaved_text(self._path, reason, row["id"], fix)
                self.last_error = msg
                return RunRef(id=row["id"], saved=False, path=str(self._path), error=msg)
            for old, new in zip(self._pending, ids):
                self._renumbered[old["id"]] = new
            self._pending.clear()
            self.last_error = None
            return RunRef(id=ids[-1], saved=True, path=str(self._path), error=None)

    def flush(self) -> int:
        """Try to write the pending in-memory runs now; returns how many were written."""
        with sigint_deferred(), self._lock:  # Ctrl-C held: the pending rows are written once or not at all
            if not self._pending:
                return 0
            try:
                ids = self._write(list(self._pending))
            except Exception as exc:  # noqa: BLE001
                from ..render.ledger import unwritable_text

                reason, fix = classify(exc, self._path)
                self.last_error = unwritable_text(self._path, reason, fix)
                return 0
            for old, new in zip(self._pending, ids):
                self._renumbered[old["id"]] = new
            n = len(self._pending)
            self._pending.clear()
            self.last_error = None
            return n

    # -- reading ----------------------------------------------------------------------------

    def rows(
        self,
        *,
        notebook: Any = ...,
        label: str | None = None,
        magic: str | None = None,
        status: str | None = None,
        limit: int | None = None,
        newest_first: bool = True,
    ) -> list[dict]:
        """Runs as dicts (every column, JSON decoded, plus ``saved``), unsaved in-memory runs
        included (counted as the newest). ``notebook=...``: this notebook; ``None``: all.
        Raises LedgerError when the file exists but cannot be read."""
        filt, nb = self._resolve_notebook(notebook)
        where, params = [], []
        if filt:
            where.append("notebook IS ?")
            params.append(nb)
        for col, val in (("label", label), ("magic", magic), ("status", status)):
            if val is not None:
                where.append(f"{col} = ?")
                params.append(val)
        sql = " WHERE " + " AND ".join(where) if where else ""
        tail = " ORDER BY id " + ("DESC" if newest_first else "ASC")
        if limit is not None:
            if limit <= 0:
                return []
            tail += f" LIMIT {int(limit)}"
        with self._lock:
            pending = [
                r
                for r in self._pending
                if (not filt or r["notebook"] == nb)
                and (label is None or r["label"] == label)
                and (magic is None or r["magic"] == magic)
                and (status is None or r["status"] == status)
            ]
            pending = [self._decode(dict(r), saved=False) for r in pending]
        saved = self._select(sql, tuple(params), tail)
        if newest_first:
            out = pending[::-1] + saved
        else:
            out = saved + pending
        return out[:limit] if limit is not None else out

    def get(self, run_id: int) -> dict:
        """The run with this id (any notebook of this file). Unknown id: UnknownRunError."""
        rid = self._resolve_id(run_id)
        if rid < 0:
            with self._lock:
                for r in self._pending:
                    if r["id"] == rid:
                        return self._decode(dict(r), saved=False)
            raise self._unknown(run_id)
        got = self._select(" WHERE id = ?", (rid,))
        if not got:
            raise self._unknown(run_id)
        return got[0]

    def latest(
        self, *, label: str | None = None, magic: str | None = None, status: str | None = None
    ) -> dict | None:
        """The newest run of this notebook (optionally with this label / magic / status)."""
        got = self.rows(label=label, magic=magic, status=status, limit=1)
        return got[0] if got else None

    def forget(self, run_id: int) -> dict:
        """Delete a run (and any baseline pointing at it); returns the removed row."""
        rid = self._resolve_id(run_id)
        if rid < 0:
            with self._lock:
                for i, r in enumerate(self._pending):
                    if r["id"] == rid:
                        del self._pending[i]
                        return self._decode(dict(r), saved=False)
            raise self._unknown(run_id)
        if not self._path.exists():
            raise self._unknown(run_id)

        try:
            removed = self.get(rid)
        except UnknownRunError:
            raise self._unknown(run_id) from None
        removed.copy()  # everything read before the row goes

        def delete(con):
            if con.execute("DELETE FROM runs WHERE id = ?", (rid,)).rowcount == 0:
                return None
            con.execute("DELETE FROM baselines WHERE run_id = ?", (rid,))
            con.execute("DELETE FROM run_data WHERE run_id = ?", (rid,))
            return True

        if self._modify(delete) is None:
            raise self._unknown(run_id)
        return removed.copy()

    def record_of(self, run_id: Any) -> Any:
        """The :class:`~perfmagic.record.RunRecord` of a run (saved or kept in memory): what
        :func:`perfmagic.run` rebuilds its result from. Unknown id: UnknownRunError."""
        row = self.get(run_id)
        return from_row(row, self._payload_of(row))

    def _payload_of(self, row: dict[str, Any]) -> Any:
        """A run's payload (schema 3; None for rows written before it, or a file without the column)."""
        if not row.get("saved", True):
            with self._lock:
                stored = next((r for r in self._pending if r["id"] == row["id"]), {})
            return _loads(stored.get("payload"))
        try:
            got = self._query("SELECT payload FROM run_data WHERE run_id = ?", (row["id"],))
        except LedgerError:
            return None  # a file of schema 1, read as it is: no run_data
        value = got[0]["payload"] if got else None
        return _loads(unpack_payload(value))

    def _decode(self, row: dict[str, Any], *, saved: bool) -> dict[str, Any]:
        return decoded(row, saved=saved)

    def _machine(self, env_id: int) -> dict[str, Any] | None:
        """The machine description ``env_id`` names (all of them read once per ledger object)."""
        if env_id not in self._machines:
            got = self._query("SELECT id, data FROM envs") or []
            self._machines.update({r["id"]: _loads(r["data"]) for r in got})
        return self._machines.get(env_id)

    def _samples_of(self, rid: int, v1: bool) -> Any:
        """A saved run's samples (schema 2: unpacked from ``run_data``; schema 1: its JSON column)."""
        got = self._query("SELECT samples FROM runs WHERE id = ?" if v1 else
                          "SELECT samples FROM run_data WHERE run_id = ?", (rid,))
        value = got[0]["samples"] if got else None
        return unpack(value) if isinstance(value, (bytes, memoryview)) else _loads(value)

    def _select(self, where: Any, params: tuple = (), tail: str = "") -> list[dict[str, Any]]:
        """Saved rows matching ``where`` (light columns; heavy values load on use). ``where`` may be a
        function of the file's ``runs`` columns returning ``(where, params, tail)`` (a schema-1 file has
        no relation columns: :func:`.views.column` reads them from the JSON there)."""
        def run(con: Any, version: int, columns: set[str]) -> list[dict[str, Any]]:
            w, p, t = where(columns) if callable(where) else (where, params, tail)
            cur = con.execute(f"{select_from(columns)}{w}{t}", p)
            names = [d[0] for d in cur.description]
            reader = Reader(self, version, columns)
            return [reader.row(dict(zip(names, r))) for r in cur.fetchall()]

        return self._read(run) or []

    def _resolve_notebook(self, notebook: Any) -> tuple[bool, str | None]:
        """(filter?, value) for a ``notebook=`` argument: ``...`` this one, None all."""
        if notebook is ...:
            return True, self._notebook
        if notebook is None:
            return False, None
        return True, _notebook_key(notebook, self._dir)

    def _resolve_id(self, run_id: int) -> int:
        try:
            rid = int(run_id)
        except (TypeError, ValueError):
            raise UnknownRunError(
                f"run id must be an integer, got {run_id!r}", run_id=run_id
            ) from None
        return self._renumbered.get(rid, rid)

    def _recent_ids(self) -> tuple[int, ...]:
        ids = [r["id"] for r in reversed(self._pending) if r["notebook"] == self._notebook]
        try:
            got = self._query(
                "SELECT id FROM runs WHERE notebook IS ? ORDER BY id DESC LIMIT 10",
                (self._notebook,),
            )
        except LedgerError:
            got = None
        ids += [r["id"] for r in got or []]
        return tuple(ids[:10])

    def _unknown(self, run_id: Any) -> UnknownRunError:
        ids = self._recent_ids()
        where = f"notebook {self._notebook}" if self._notebook else "this ledger"
        try:
            rid = int(run_id)
            top = self._query("SELECT MAX(id) AS m FROM runs", ())
            top_id = (top[0]["m"] if top else None) or 0
        except (TypeError, ValueError, LedgerError):
            rid, top_id = None, 0
        gone = "in-memory" if rid is not None and rid < 0 else "removed" if rid is not None and 0 < rid < top_id else ""
        return UnknownRunError(  # the message: the id, why it may be missing, the ids there are, the fix
            f"no run with id {run_id} in the perfmagic ledger {self._path}"
            + {"in-memory": " (runs kept in memory only, when the ledger could not be written, have negative ids "
                            "and last as long as the kernel)",
               "removed": " (it was removed with %perf forget, or never recorded)", "": ""}[gone]
            + (f"; most recent ids for {where}: {', '.join(str(i) for i in ids)}" if ids
               else f"; there are no runs for {where} yet") + "; %perf lists the runs",
            run_id=run_id,
            known_ids=ids,
        )

    # -- baselines --------------------------------------------------------------------------

    def set_baseline(self, label: str, run_id: int) -> None:
        """Make ``run_id`` the baseline for ``label`` in this notebook (replacing any)."""
        rid = self._resolve_id(run_id)
        if rid < 0:
            if any(r["id"] == rid for r in self._pending):
                raise LedgerError(
                    f"run {rid} is only in memory (the ledger {self._path} could not be written); "
                    f"a baseline needs a saved run: fix the ledger and record again"
                )
            raise self._unknown(run_id)
        if not self._path.exists():
            raise self._unknown(run_id)

        def put(con):
            if con.execute("SELECT 1 FROM runs WHERE id = ?", (rid,)).fetchone() is None:
                return False
            con.execute(
                "DELETE FROM baselines WHERE notebook IS ? AND label = ?", (self._notebook, label)
            )
            con.execute(
                "INSERT INTO baselines (notebook, label, run_id, created_utc) VALUES (?, ?, ?, ?)",
                (self._notebook, label, rid, _utc_now()),
            )
            return True

        if not self._modify(put):
            raise self._unknown(run_id)

    def baseline(self, label: str) -> int | None:
        """The baseline run id for ``label`` in this notebook, or None."""
        import sqlite3

        if not self._path.exists():
            return None
        try:
            con = connect_read(self._path, self.timeout)
            try:
                if "baselines" not in tables(con)[1]:
                    return None
                got = con.execute(
                    "SELECT run_id FROM baselines WHERE notebook IS ? AND label = ?",
                    (self._notebook, label),
                ).fetchone()
            finally:
                con.close()
        except (sqlite3.Error, OSError) as exc:
            raise read_error(exc, self._path, len(self._pending)) from exc
        return None if got is None else int(got[0])

    def baselines(self, *, notebook: Any = ...) -> dict[tuple[str | None, str], int]:
        """Every baseline, ``{(notebook, label): run_id}``: of this notebook (``...``), of all
        notebooks (``None``) or of the one named."""
        filt, nb = self._resolve_notebook(notebook)
        sql = "SELECT notebook, label, run_id FROM baselines"
        if self._query("SELECT name FROM sqlite_master WHERE name = 'baselines'") in (None, []):
            return {}
        got = self._query(sql + (" WHERE notebook IS ?" if filt else ""), (nb,) if filt else ())
        return {(r["notebook"], r["label"]): int(r["run_id"]) for r in got or []}

    # -- export and pandas (storage/frame.py) -------------------------------------------------

    def export(self, path: str | os.PathLike, *, notebook: Any = ...) -> pathlib.Path:
        """Write the runs (oldest first) to ``.csv`` (flat: ``metric.<name>`` columns, JSON
        strings for options/env/samples) or ``.json`` (list of full rows). Returns the path."""
        from .frame import export

        return export(self, path, notebook=notebook)

    def to_frame(self, *, notebook: Any = ..., newest_first: bool = False):
        """The runs as a pandas DataFrame, one column per metric key (the ``wide`` view of
        :func:`perfmagic.storage.frame.ledger_frame`, with every column of every magic)."""
        from .frame import wide_frame

        return wide_frame(self.rows(notebook=notebook, newest_first=newest_first))

    # -- the advisor's targets and predictions (storage/advice.py) ------------------------------

    def set_target(self, label: str | None, seconds: float) -> None:
        """The time per call that is fast enough for ``label`` in this notebook (replacing any).
        ``label=None``: the notebook's default target, for every label without its own."""
        value = advice.target_seconds(seconds)
        self._advisor_write(lambda con: advice.put_target(con, self._notebook, label, value))

    def target(self, label: str | None) -> float | None:
        """The target of ``label`` in this notebook (else the notebook's default target), or None."""
        return advice.target_of(self._advisor_rows("targets", advice.TARGETS, (self._notebook,)), label)

    def add_prediction(self, *, label: str | None, level: str, action: str, low: float, high: float,
                       basis: str, evidence: list[int], base_run: int | None, after_run: int | None) -> int:
        """Record a proposal of ``%perf next`` whose gain a later comparison will check; its id."""
        return self._advisor_write(lambda con: advice.put_prediction(
            con, self._notebook, label=label, level=level, action=action, low=low, high=high, basis=basis,
            evidence=evidence, base_run=base_run, after_run=after_run))

    def predictions(self, *, label: str | None = None) -> list[dict[str, Any]]:
        """This notebook's recorded predictions, oldest first (``evidence`` decoded to a list of ids)."""
        sql, params = advice.predictions_query(self._notebook, label)
        return [advice.prediction(r) for r in self._advisor_rows("predictions", sql, params)]

    def check_prediction(self, prediction_id: int, *, run_a: int, run_b: int, measured: float,
                         within: bool) -> None:
        """Store the gain a later comparison (run A -> run B) measured for a prediction."""
        self._advisor_write(lambda con: advice.put_check(con, prediction_id, run_a=run_a, run_b=run_b,
                                                         measured=measured, within=within))

    def _advisor_rows(self, table: str, sql: str, params: tuple = ()) -> list[dict[str, Any]]:
        """Rows of an advisor table; [] when the file or the table does not exist yet (older ledgers)."""
        got = self._query("SELECT name FROM sqlite_master WHERE type='table' AND name = ?", (table,))
        if not got:
            return []
        return self._query(sql, params) or []

    def _advisor_write(self, fn: Any) -> Any:
        def run(con: Any) -> Any:
            advice.create_tables(con)
            return fn(con)

        return self._modify(run)

    # -- the file: one read connection, one write transaction (storage/db.py) -------------------

    def _query(self, sql: str, params: tuple = ()) -> list[dict[str, Any]] | None:
        """Run a read query; None when the file or the table does not exist yet."""
        def run(con: Any, version: int, columns: set[str]) -> list[dict[str, Any]]:
            cur = con.execute(sql, params)
            names = [d[0] for d in cur.description] if cur.description else []
            return [dict(zip(names, row)) for row in cur.fetchall()]  # type: ignore[misc]

        return self._read(run)

    def _read(self, fn: Any) -> Any:
        """``fn(connection, schema version, columns of runs)`` on a read connection; None when the file or
        the table does not exist yet. A file of a newer schema is read as far as this version knows it
        (``newer`` says so; writing it is refused)."""
        import sqlite3

        if not self._path.exists():
            return None
        try:
            con = connect_read(self._path, self.timeout)
            try:
                version, names = tables(con)
                if "runs" not in names:
                    if names - OUR_TABLES:
                        raise LedgerError(f"{self._path} is an SQLite database but not a perfmagic ledger; "
                                          f"move it aside to start a new ledger")
                    return None
                if version > SCHEMA_VERSION and self.newer is None:
                    from ..render.ledger import newer_schema_text

                    self.newer = newer_schema_text(self._path, version, writer(con))
                columns = {r[1] for r in con.execute("PRAGMA table_info(runs)")}
                return fn(con, version, columns)
            finally:
                con.close()
        except LedgerError:
            raise
        except (sqlite3.Error, OSError) as exc:
            raise read_error(exc, self._path, len(self._pending)) from exc

    def _write(self, rows: list[dict[str, Any]]) -> list[int]:
        """Insert ``rows`` in one transaction; returns their ids. Raises on any failure.

        SQLite answers "database is locked" at once, without its busy handler, in a few cases
        (switching a new file to WAL while another process opens it, WAL recovery on open): those
        are retried here until ``timeout`` has passed, like any other wait for the lock."""
        import random
        import sqlite3

        deadline = time.monotonic() + self.timeout
        while True:
            try:
                return self._write_once(rows)
            except sqlite3.OperationalError as exc:
                low = str(exc).lower()
                if ("locked" not in low and "busy" not in low) or time.monotonic() >= deadline:
                    raise
                time.sleep(random.uniform(0.002, 0.02))

    def _write_once(self, rows: list[dict[str, Any]]) -> list[int]:
        con = connect_write(self._path, self.timeout)
        try:
            return transaction(con, lambda c: insert(c, rows))
        finally:
            con.close()

    def _modify(self, fn: Any) -> Any:
        """Run ``fn(con)`` in a write transaction; file errors become LedgerError."""
        import sqlite3

        try:
            con = connect_write(self._path, self.timeout)
        except (sqlite3.Error, OSError, LedgerError) as exc:
            raise write_error(exc, self._path) from exc
        try:
            return transaction(con, fn)
        except (sqlite3.Error, OSError) as exc:
            raise write_error(exc, self._path) from exc
        except LedgerError as exc:
            if isinstance(exc, UnknownRunError) or str(self._path) in str(exc):
                raise
            raise LedgerError(f"perfmagic ledger {self._path}: {exc}") from exc
        finally:
            con.close()
