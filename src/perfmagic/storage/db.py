"""The ledger file itself: its schema, how it is opened, and what a failure to write it means.

:class:`_Database` holds the connection logic that :class:`~perfmagic.storage.ledger.Ledger`
builds on: look at an existing file read-only before any connection that may write to it
(another program's database is refused byte-identical), read a ledger that cannot be written
(``mode=ro``, then ``immutable=1``), and one short ``BEGIN IMMEDIATE`` transaction per write,
retried while another process holds the lock. :func:`_classify` turns an SQLite/OS error into a
short reason and the fix. ``sqlite3`` is imported inside the methods that use it.
"""

from __future__ import annotations

import os
import pathlib
import time
from typing import Any

from .locate import ENV_DIR

__all__ = ["COLUMNS", "JSON_COLUMNS", "SCHEMA_VERSION", "LedgerError", "UnknownRunError"]

from .schema import COLUMNS, JSON_COLUMNS, OUR_TABLES as _OUR_TABLES, SCHEMA as _SCHEMA, SCHEMA_VERSION  # noqa: E402

# Tables of the advisor (``%perf target``, ``%perf next``'s checked predictions), created on first
# use by their writers with CREATE TABLE IF NOT EXISTS: a ledger of schema version 1 stays version 1.
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
_SQLITE_MAGIC = b"SQLite format 3\x00"


class LedgerError(Exception):
    """The ledger file cannot be read or an operation on it is impossible; the message says why."""


class UnknownRunError(LedgerError, KeyError):
    """No run has this id. The message lists the most recent ids of this notebook."""

    def __init__(self, message: str, run_id: Any = None, known_ids: tuple[int, ...] = ()) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.known_ids = known_ids

    def __str__(self) -> str:  # KeyError would repr-quote the message
        return str(self.args[0]) if self.args else ""



def _refusal(version: int, tables: set[str], writer: str | None = None) -> str | None:
    """Why a database with this ``user_version`` and these tables must not be written, or None
    when it is a perfmagic ledger of this schema or an empty database that can become one.

    Many programs set ``user_version`` too, so version 1 alone does not make a ledger: it must
    hold ``runs``. A higher version is a newer perfmagic only when ``runs`` is there."""
    if version > SCHEMA_VERSION and "runs" in tables:
        return (
            f"ledger schema version {version} was written by a newer perfmagic"
            f"{f' ({writer})' if writer else ''}; this one reads what it can and writes nothing "
            f"(it writes version {SCHEMA_VERSION}): upgrade perfmagic to record here"
        )
    if tables - _OUR_TABLES or (version != 0 and "runs" not in tables):
        return "file is an SQLite database but not a perfmagic ledger"
    return None


def _cannot_write(exc: BaseException) -> bool:
    """True when SQLite failed only because it may not write beside the file: a read-only
    folder (no ``-wal``/``-shm`` can be created), file or mount. A lock ("database is locked")
    or a damaged file is not such a failure: reading it read-only would not help, and reading
    it ``immutable=1`` would ignore the other process's lock."""
    name = str(getattr(exc, "sqlite_errorname", "") or "")
    if name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN")):
        return True
    low = str(exc).lower()
    return "readonly" in low or "read-only" in low or "unable to open" in low


def _classify(exc: BaseException, path: pathlib.Path) -> tuple[str, str]:
    """(short reason, fix) for a failed write."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    low = text.lower()
    folder = path.parent
    elsewhere = f"or set {ENV_DIR} to a writable folder"
    if "locked" in low or "busy" in low:
        return text, (
            "another process holds the ledger; the run will be written on the next record()"
        )
    if "not a database" in low or "malformed" in low or "corrupt" in low:
        return text, f"move {path} aside to start a new ledger"
    if "newer perfmagic" in low or "not a perfmagic ledger" in low:
        return text, f"move {path} aside to start a new ledger, {elsewhere}"
    if "disk is full" in low or "no space" in low or getattr(exc, "errno", None) == 28:
        return text, f"free disk space on the drive holding {folder} {elsewhere}"
    if (
        isinstance(exc, PermissionError)
        or "readonly" in low
        or "read-only" in low
        or "permission" in low
        or "unable to open" in low
        or isinstance(exc, OSError)
    ):
        return text, f"make {folder} writable {elsewhere}"
    return text, f"check that {path} is a writable perfmagic ledger {elsewhere}"



class _Database:
    """Connections and transactions on ``self._path`` (the SQLite file in ``self._dir``).

    The subclass sets ``_dir``, ``_path``, ``timeout`` and ``_pending`` (the rows kept in memory,
    named in read errors)."""

    _dir: pathlib.Path
    _path: pathlib.Path
    timeout: float
    _pending: list[dict[str, Any]]
    newer: str | None = None  # set when the file has a newer schema: what it is, and that nothing is written

    def _connect(self):
        """A connection for writing: creates the folder and file, WAL mode, no implicit txns.

        An existing file is inspected read-only first (:meth:`_check_before_write`): opening it
        for writing and setting WAL mode would change another program's database (the header
        records the journal mode) before the schema check inside the transaction could refuse
        it."""
        import sqlite3

        self._dir.mkdir(parents=True, exist_ok=True)
        self._check_before_write()
        con = sqlite3.connect(str(self._path), timeout=self.timeout, isolation_level=None)
        try:
            con.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            con.execute("PRAGMA journal_mode = WAL")
            con.execute("PRAGMA synchronous = NORMAL")
        except BaseException:
            con.close()
            raise
        return con

    def _header(self) -> bytes | None:
        """The first 100 bytes of the file; None when it is missing or empty (a new ledger).

        A file that does not start with the SQLite header raises the error SQLite itself would
        give ("file is not a database") without SQLite ever opening it, so it is left as it is."""
        import sqlite3

        try:
            with open(self._path, "rb") as fh:
                header = fh.read(100)
        except FileNotFoundError:
            return None
        if not header:
            return None
        if not header.startswith(_SQLITE_MAGIC):
            raise sqlite3.DatabaseError("file is not a database")
        return header

    def _check_before_write(self) -> None:
        """Refuse an existing file that is not a perfmagic ledger, looking at it read-only.

        A file in rollback-journal mode (the default of other programs) is opened ``mode=ro``,
        which creates nothing beside it. A file in WAL mode (every ledger) is opened ``mode=ro``
        when its ``-wal`` exists (a connection is open: the newest rows may be there), else
        ``immutable=1`` (everything is in the file): a ``mode=ro`` connection would create
        ``-wal``/``-shm`` files it cannot remove when it closes. For a WAL file only a verdict
        counts; a failed look is left to the check inside the write transaction, which holds
        the lock, since opening a WAL file for writing changes nothing in it by itself."""
        import sqlite3

        header = self._header()
        if header is None:
            return
        wal = len(header) > 19 and header[18] == 2
        query = "mode=ro"
        if wal and not os.path.exists(f"{self._path}-wal"):
            query += "&immutable=1"
        try:
            con = sqlite3.connect(
                f"{self._path.as_uri()}?{query}",
                timeout=self.timeout,
                isolation_level=None,
                uri=True,
            )
            try:
                con.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
                version = con.execute("PRAGMA user_version").fetchone()[0]
                tables = {
                    r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")
                }
            finally:
                con.close()
        except sqlite3.Error:
            if wal:
                return
            raise
        reason = _refusal(version, tables, self._writer_of(version))
        if reason:
            raise LedgerError(reason)

    def _writer_of(self, version: int) -> str | None:
        """Which perfmagic wrote a file of a newer schema (its ``meta`` table), read apart."""
        if version <= SCHEMA_VERSION:
            return None
        try:
            con = self._connect_read()
        except Exception:  # noqa: BLE001 - the version alone is said then
            return None
        try:
            from .schema import writer

            return writer(con)
        finally:
            con.close()

    def _connect_read(self):
        """A connection for reading an existing file (never creates it, never changes it).

        Read-write first: that connection removes the ``-wal``/``-shm`` files when it is the
        last to close. A ledger that cannot be written (read-only folder, file or mount) fails
        on the first statement, not on open ("attempt to write a readonly database": SQLite
        wants to create the ``-shm``), so each way of opening is tried with a statement:
        ``mode=ro`` (works while the ``-wal``/``-shm`` exist), then ``immutable=1``, which reads
        the main file alone, without locks: the runs checkpointed into it, which is all of them
        once the last writer closed (a ``-wal`` that cannot be opened is not read). Other errors
        (locked, not a database) are raised as they are: reading without locks would not help."""
        import sqlite3

        self._header()
        uri = self._path.as_uri()
        first: BaseException | None = None
        for query in ("mode=rw", "mode=ro", "mode=ro&immutable=1"):
            try:
                con = sqlite3.connect(
                    f"{uri}?{query}", timeout=self.timeout, isolation_level=None, uri=True
                )
            except sqlite3.OperationalError as exc:
                if first is None:
                    first = exc
                continue
            try:
                con.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
                con.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
            except sqlite3.OperationalError as exc:
                con.close()
                if not _cannot_write(exc):
                    raise
                if first is None:
                    first = exc
                continue
            except BaseException:
                con.close()
                raise
            return con
        assert first is not None
        raise first

    def _ensure_schema(self, con) -> None:
        """Inside a write transaction: create the tables of a new file, refuse a foreign one.

        :meth:`_check_before_write` already refused a foreign file before it was opened for
        writing; this repeats the check under the lock, for a file replaced meanwhile."""
        from .. import __version__
        from .schema import migrate, stamp, writer

        version = con.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        reason = _refusal(version, tables, writer(con) if version > SCHEMA_VERSION else None)
        if reason:
            raise LedgerError(reason)
        if version == SCHEMA_VERSION:
            return
        if version in (1, 2) and "runs" in tables:
            migrate(con, version)  # once: schema 1's rows rewritten (packed samples, columns); 2 → 3: columns added
        else:
            for stmt in _SCHEMA:
                con.execute(stmt)
        stamp(con, __version__)

    def _read_error(self, exc: BaseException) -> LedgerError:
        text = " ".join(str(exc).split()) or type(exc).__name__
        reason, fix = _classify(exc, self._path)
        if "locked" in reason.lower() or "busy" in reason.lower():
            fix = "another process holds the ledger; try again in a moment"
        unsaved = (
            f" {len(self._pending)} unsaved run(s) of this session are in Ledger.pending."
            if self._pending
            else ""
        )
        return LedgerError(f"cannot read the perfmagic ledger {self._path} ({text}); {fix}.{unsaved}")

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
            con = self._connect_read()
            try:
                version = con.execute("PRAGMA user_version").fetchone()[0]
                tables = {
                    r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")
                }
                if "runs" not in tables:
                    if tables - _OUR_TABLES:
                        raise LedgerError(
                            f"{self._path} is an SQLite database but not a perfmagic ledger; "
                            f"move it aside to start a new ledger"
                        )
                    return None
                if version > SCHEMA_VERSION and self.newer is None:
                    from .schema import writer

                    self.newer = (f"the ledger {self._path} has schema version {version}, written by "
                                  f"{writer(con) or 'a newer perfmagic'}; this perfmagic reads what it knows of it "
                                  f"and writes nothing there: upgrade perfmagic to record here")
                columns = {r[1] for r in con.execute("PRAGMA table_info(runs)")}
                return fn(con, version, columns)
            finally:
                con.close()
        except LedgerError:
            raise
        except (sqlite3.Error, OSError) as exc:
            raise self._read_error(exc) from exc

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
        con = self._connect()
        try:
            con.execute("BEGIN IMMEDIATE")
            try:
                self._ensure_schema(con)
                from .schema import insert

                ids = insert(con, rows)
                con.execute("COMMIT")
            except BaseException:
                if con.in_transaction:
                    try:
                        con.execute("ROLLBACK")
                    except Exception:  # noqa: BLE001
                        pass
                raise
            return ids
        finally:
            con.close()

    def _modify(self, fn):
        """Run ``fn(con)`` in a write transaction; file errors become LedgerError."""
        import sqlite3

        try:
            con = self._connect()
        except (sqlite3.Error, OSError, LedgerError) as exc:
            reason, fix = _classify(exc, self._path)
            raise LedgerError(f"cannot write the perfmagic ledger {self._path} ({reason}); {fix}.") from exc
        try:
            try:
                con.execute("BEGIN IMMEDIATE")
                self._ensure_schema(con)
                result = fn(con)
                con.execute("COMMIT")
                return result
            except BaseException as exc:
                if con.in_transaction:
                    try:
                        con.execute("ROLLBACK")
                    except Exception:  # noqa: BLE001
                        pass
                if isinstance(exc, (sqlite3.Error, OSError)):
                    reason, fix = _classify(exc, self._path)
                    raise LedgerError(
                        f"cannot write the perfmagic ledger {self._path} ({reason}); {fix}."
                    ) from exc
                if isinstance(exc, LedgerError) and not isinstance(exc, UnknownRunError):
                    if str(self._path) not in str(exc):
                        raise LedgerError(f"perfmagic ledger {self._path}: {exc}") from exc
                raise
        finally:
            con.close()
