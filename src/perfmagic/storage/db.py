"""The ledger file itself: how it is opened, what may be written to it, and what a failure means.

Plain functions on a path or a connection, which :class:`~perfmagic.storage.ledger.Ledger` calls:
:func:`connect_write` looks at an existing file read-only before any connection that may write to it
(:func:`check_before_write`: another program's database is refused byte-identical), :func:`connect_read`
reads a ledger that cannot be written (``mode=ro``, then ``immutable=1``), :func:`ensure_schema` creates
or migrates the tables inside a write transaction, :func:`tables` says what a file holds, and
:func:`classify` turns an SQLite/OS error into a short reason and the fix. ``sqlite3`` is imported inside
the functions that use it.
"""

from __future__ import annotations

import os
import pathlib
from typing import Any

from .locate import ENV_DIR

from .schema import COLUMNS, JSON_COLUMNS, OUR_TABLES, SCHEMA, SCHEMA_VERSION, migrate, stamp, writer

__all__ = ["COLUMNS", "JSON_COLUMNS", "SCHEMA_VERSION", "LedgerError", "UnknownRunError", "check_before_write",
           "classify", "connect_read", "connect_write", "ensure_schema", "read_error", "refusal", "tables",
           "transaction", "write_error"]

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



def refusal(version: int, tables: set[str], writer: str | None = None) -> LedgerError | None:
    """The :class:`LedgerError` refusing to write a database with this ``user_version`` and these tables
    (raised by the caller), or None when it is a perfmagic ledger of this schema or an empty database that
    can become one.

    Many programs set ``user_version`` too, so version 1 alone does not make a ledger: it must
    hold ``runs``. A higher version is a newer perfmagic only when ``runs`` is there."""
    if version > SCHEMA_VERSION and "runs" in tables:
        return LedgerError(f"ledger schema version {version} was written by a newer perfmagic"
                           f"{f' ({writer})' if writer else ''}; this one reads what it can and writes nothing "
                           f"(it writes version {SCHEMA_VERSION}): upgrade perfmagic to record here")
    if tables - OUR_TABLES or (version != 0 and "runs" not in tables):
        return LedgerError("file is an SQLite database but not a perfmagic ledger")
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


def classify(exc: BaseException, path: pathlib.Path) -> tuple[str, str]:
    """(short reason, fix) for a failed write: the cause is read here, the fix is worded by
    :func:`perfmagic.render.ledger.write_fix` (imported on a failure only: ``%load_ext`` stays cheap)."""
    from ..render.ledger import write_fix

    text = " ".join(str(exc).split()) or type(exc).__name__
    return text, write_fix(_cause(exc, text.lower()), path, ENV_DIR)


def _cause(exc: BaseException, low: str) -> str:
    """What made a write fail, from the error and its lowered text ``low``, as
    :func:`perfmagic.render.ledger.write_fix` names it."""
    if "locked" in low or "busy" in low:
        return "locked"
    if "not a database" in low or "malformed" in low or "corrupt" in low:
        return "damaged"
    if "newer perfmagic" in low or "not a perfmagic ledger" in low:  # refusal()'s words
        return "foreign"
    if "disk is full" in low or "no space" in low or getattr(exc, "errno", None) == 28:
        return "disk-full"
    if (
        isinstance(exc, PermissionError)
        or "readonly" in low
        or "read-only" in low
        or "permission" in low
        or "unable to open" in low
        or isinstance(exc, OSError)
    ):
        return "permission"
    return "other"



#: a new ledger's page size. A run's stored record is 650-850 bytes; SQLite fills a 4 KiB page with whole
#: records, so one just over 682 bytes left 5 to a page and cost 819 bytes instead of 683 (a ledger of the
#: same runs measured 890 or 1,027 bytes a run from one template to the next). 16 KiB pages hold 19-25.
PAGE_SIZE = 16384


def connect_write(path: pathlib.Path, timeout: float):
    """A connection for writing: creates the folder and file, WAL mode, no implicit txns.

    An existing file is inspected read-only first (:func:`check_before_write`): opening it for writing
    and setting WAL mode would change another program's database (the header records the journal mode)
    before the schema check inside the transaction could refuse it."""
    import sqlite3

    path.parent.mkdir(parents=True, exist_ok=True)
    check_before_write(path, timeout)
    new = header(path) is None
    con = sqlite3.connect(str(path), timeout=timeout, isolation_level=None)
    try:
        con.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
        if new:  # set before the first table and before WAL, or never: see PAGE_SIZE
            con.execute(f"PRAGMA page_size = {PAGE_SIZE}")
        con.execute("PRAGMA journal_mode = WAL")
        con.execute("PRAGMA synchronous = NORMAL")
    except BaseException:
        con.close()
        raise
    return con


def header(path: pathlib.Path) -> bytes | None:
    """The first 100 bytes of the file; None when it is missing or empty (a new ledger).

    A file that does not start with the SQLite header raises the error SQLite itself would give ("file
    is not a database") without SQLite ever opening it, so it is left as it is."""
    import sqlite3

    try:
        with open(path, "rb") as fh:
            head = fh.read(100)
    except FileNotFoundError:
        return None
    if not head:
        return None
    if not head.startswith(_SQLITE_MAGIC):
        raise sqlite3.DatabaseError("file is not a database")
    return head


def tables(con: Any) -> tuple[int, set[str]]:
    """``(PRAGMA user_version, names of the tables)`` of an open file."""
    version = con.execute("PRAGMA user_version").fetchone()[0]
    return version, {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def check_before_write(path: pathlib.Path, timeout: float) -> None:
    """Refuse an existing file that is not a perfmagic ledger, looking at it read-only.

    A file in rollback-journal mode (the default of other programs) is opened ``mode=ro``, which
    creates nothing beside it. A file in WAL mode (every ledger) is opened ``mode=ro`` when its ``-wal``
    exists (a connection is open: the newest rows may be there), else ``immutable=1`` (everything is in
    the file): a ``mode=ro`` connection would create ``-wal``/``-shm`` files it cannot remove when it
    closes. For a WAL file only a verdict counts; a failed look is left to the check inside the write
    transaction, which holds the lock, since opening a WAL file for writing changes nothing in it by
    itself."""
    import sqlite3

    head = header(path)
    if head is None:
        return
    wal = len(head) > 19 and head[18] == 2
    query = "mode=ro"
    if wal and not os.path.exists(f"{path}-wal"):
        query += "&immutable=1"
    try:
        con = sqlite3.connect(f"{path.as_uri()}?{query}", timeout=timeout, isolation_level=None, uri=True)
        try:
            con.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            version, names = tables(con)
        finally:
            con.close()
    except sqlite3.Error:
        if wal:
            return
        raise
    refused = refusal(version, names, _writer_of(path, timeout, version))
    if refused is not None:
        raise refused


def _writer_of(path: pathlib.Path, timeout: float, version: int) -> str | None:
    """Which perfmagic wrote a file of a newer schema (its ``meta`` table), read apart."""
    if version <= SCHEMA_VERSION:
        return None
    try:
        con = connect_read(path, timeout)
    except Exception:  # noqa: BLE001 - the version alone is said then
        return None
    try:
        return writer(con)
    finally:
        con.close()


def connect_read(path: pathlib.Path, timeout: float):
    """A connection for reading an existing file (never creates it, never changes it).

    Read-write first: that connection removes the ``-wal``/``-shm`` files when it is the last to
    close. A ledger that cannot be written (read-only folder, file or mount) fails on the first
    statement, not on open ("attempt to write a readonly database": SQLite wants to create the
    ``-shm``), so each way of opening is tried with a statement: ``mode=ro`` (works while the
    ``-wal``/``-shm`` exist), then ``immutable=1``, which reads the main file alone, without locks: the
    runs checkpointed into it, which is all of them once the last writer closed (a ``-wal`` that cannot
    be opened is not read). Other errors (locked, not a database) are raised as they are: reading
    without locks would not help."""
    import sqlite3

    header(path)
    uri = path.as_uri()
    first: BaseException | None = None
    for query in ("mode=rw", "mode=ro", "mode=ro&immutable=1"):
        try:
            con = sqlite3.connect(f"{uri}?{query}", timeout=timeout, isolation_level=None, uri=True)
        except sqlite3.OperationalError as exc:
            first = first or exc
            continue
        try:
            con.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            con.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        except sqlite3.OperationalError as exc:
            con.close()
            if not _cannot_write(exc):
                raise
            first = first or exc
            continue
        except BaseException:
            con.close()
            raise
        return con
    assert first is not None
    raise first


def ensure_schema(con: Any) -> None:
    """Inside a write transaction: create the tables of a new file, migrate an older one (schema 1 or 2:
    :func:`.schema.migrate`, once), refuse a foreign one or one of a newer schema.

    :func:`check_before_write` already refused a foreign file before it was opened for writing; this
    repeats the check under the lock, for a file replaced meanwhile."""
    from .. import __version__

    version, names = tables(con)
    refused = refusal(version, names, writer(con) if version > SCHEMA_VERSION else None)
    if refused is not None:
        raise refused
    if version == SCHEMA_VERSION:
        return
    if version in (1, 2) and "runs" in names:
        migrate(con, version)  # once: schema 1's rows rewritten (packed samples, columns); 2 → 3: columns added
    else:
        for stmt in SCHEMA:
            con.execute(stmt)
    stamp(con, __version__)


def transaction(con: Any, fn: Any) -> Any:
    """``fn(con)`` inside one ``BEGIN IMMEDIATE`` ... ``COMMIT``, the tables created, migrated or refused
    first (:func:`ensure_schema`); rolled back on any error, which is raised as it is."""
    con.execute("BEGIN IMMEDIATE")
    try:
        ensure_schema(con)
        result = fn(con)
        con.execute("COMMIT")
    except BaseException:
        if con.in_transaction:
            try:
                con.execute("ROLLBACK")
            except Exception:  # noqa: BLE001
                pass
        raise
    return result


def read_error(exc: BaseException, path: pathlib.Path, unsaved: int) -> LedgerError:
    """A failed read as one LedgerError: the file, the error, the fix, and the runs kept in memory."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    reason, fix = classify(exc, path)
    locked = "locked" in reason.lower() or "busy" in reason.lower()
    return LedgerError(f"cannot read the perfmagic ledger {path} ({text}); "
                       + ("another process holds the ledger; try again in a moment" if locked else fix) + "."
                       + (f" {unsaved} unsaved run(s) of this session are in Ledger.pending." if unsaved else ""))


def write_error(exc: BaseException, path: pathlib.Path) -> LedgerError:
    """A failed write (of a baseline, a target, a removal) as one LedgerError naming the file and the fix."""
    reason, fix = classify(exc, path)
    return LedgerError(f"cannot write the perfmagic ledger {path} ({reason}); {fix}.")
