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
  reading falls back to ``mode=ro`` and then ``immutable=1`` (see ``Ledger._connect_read``).
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
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import math
import os
import pathlib
import re
import sys
import threading
import time
from typing import Any

__all__ = [
    "LEDGER_FILENAME",
    "LEDGER_FOLDER",
    "SCHEMA_VERSION",
    "STATUSES",
    "Ledger",
    "LedgerError",
    "RunRef",
    "UnknownRunError",
    "code_hash",
    "locate",
]

SCHEMA_VERSION = 1
LEDGER_FOLDER = ".perfmagic"
LEDGER_FILENAME = "ledger.sqlite"
ENV_DIR = "PERFMAGIC_LEDGER_DIR"
STATUSES = ("ok", "interrupted", "failed")

# Columns of ``runs`` in schema order; JSON-encoded ones are decoded by ``rows()``.
COLUMNS = (
    "id",
    "created_utc",
    "notebook",
    "cell_id",
    "session",
    "magic",
    "label",
    "status",
    "code",
    "code_hash",
    "options",
    "metrics",
    "primary_metric",
    "samples",
    "env",
    "env_hash",
    "note",
)
JSON_COLUMNS = ("options", "metrics", "samples", "env")
_INSERT_COLUMNS = COLUMNS[1:]

_SCHEMA = (
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
        note TEXT
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
    f"PRAGMA user_version = {SCHEMA_VERSION}",
)
_OUR_TABLES = {"runs", "baselines", "sqlite_sequence"}
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


@dataclasses.dataclass(frozen=True)
class RunRef:
    """What ``record()`` did: the run's id (negative while only in memory), where, and any error.

    ``error`` is one line without a ``perfmagic:`` prefix: the caller that prints it adds it."""

    id: int
    saved: bool
    path: str
    error: str | None = None


# --------------------------------------------------------------------------------------------
# helpers


def code_hash(code: str | None) -> str:
    """First 16 hex chars of the SHA-256 of ``code``, ignoring trailing whitespace on each line
    (and trailing blank lines), so re-indenting the end of a cell does not change the hash."""
    text = "\n".join(line.rstrip() for line in (code or "").splitlines()).rstrip("\n")
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _text(value: Any) -> str | None:
    """A string SQLite can store (lone surrogates escaped), or None."""
    if value is None:
        return None
    text = value if isinstance(value, str) else str(value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


_KERNEL_ID: list[str | None] = []


def _kernel_id() -> str | None:
    """The kernel id from ipykernel's ``-f .../kernel-<id>.json`` argument, without importing it."""
    if not _KERNEL_ID:
        found = None
        for arg in sys.argv:
            m = re.search(r"kernel-([0-9A-Za-z_\-]+)\.json$", str(arg))
            if m:
                found = m.group(1)
                break
        _KERNEL_ID.append(found)
    return _KERNEL_ID[0]


def _default_session() -> str:
    kid = _kernel_id()
    return f"pid={os.getpid()}" + (f" kernel={kid}" if kid else "")


def _json_default(obj: Any) -> Any:
    """``json.dumps`` hook: numpy scalars/arrays, paths, sets, dataclasses... become plain JSON.

    Never raises: anything unknown becomes its ``repr``, because a result must not be lost over an
    odd value in its options.
    """
    try:
        if hasattr(obj, "shape") and getattr(obj, "shape", None) == () and hasattr(obj, "item"):
            return obj.item()  # numpy / torch scalar
        if hasattr(obj, "tolist") and callable(obj.tolist):
            return obj.tolist()  # numpy array, array.array, pandas objects
        if isinstance(obj, os.PathLike):
            return os.fspath(obj)
        if isinstance(obj, (set, frozenset)):
            return sorted(obj, key=repr)
        if isinstance(obj, (bytes, bytearray)):
            return bytes(obj).decode("utf-8", "replace")
        if isinstance(obj, complex):
            return {"real": obj.real, "imag": obj.imag}
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            return dataclasses.asdict(obj)
        if hasattr(obj, "isoformat") and callable(obj.isoformat):
            return obj.isoformat()  # datetime, date, pandas Timestamp
        if isinstance(obj, enum.Enum):
            return obj.value
        if hasattr(obj, "to_dict") and callable(obj.to_dict):
            return obj.to_dict()
        if hasattr(obj, "__float__") and not isinstance(obj, str):
            return float(obj)
    except Exception:  # noqa: BLE001 - fall through to repr
        pass
    return repr(obj)


def _plain(obj: Any, _depth: int = 0) -> Any:
    """Recursively turn ``obj`` into plain JSON types (string keys, lists) - the slow path."""
    if _depth > 200:
        return repr(obj)
    if obj is None or isinstance(obj, (str, bool, int, float)):
        return obj
    if isinstance(obj, dict):
        return {
            (k if isinstance(k, str) else str(_plain(k, _depth + 1))): _plain(v, _depth + 1)
            for k, v in obj.items()
        }
    if isinstance(obj, (list, tuple)):
        return [_plain(v, _depth + 1) for v in obj]
    converted = _json_default(obj)
    if isinstance(converted, str) or converted is obj:
        return converted
    return _plain(converted, _depth + 1)


def _dumps(obj: Any) -> str:
    """JSON text for storage. NaN/inf are kept (Python's json reads them back); never raises."""
    try:
        return json.dumps(obj, default=_json_default, allow_nan=True)
    except (TypeError, ValueError, RecursionError):  # non-string keys, cycles
        pass
    try:
        return json.dumps(_plain(obj), allow_nan=True)
    except Exception:  # noqa: BLE001
        return json.dumps({"unencodable": repr(obj)[:10_000]})


def _finite(obj: Any) -> Any:
    """Replace non-finite floats by None, for strict JSON in exported files."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def _dumps_strict(obj: Any) -> str:
    return json.dumps(_finite(_plain(obj)), allow_nan=False)


def _loads(text: Any) -> Any:
    if text is None or not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def _is_notebook_value(value: str) -> bool:
    return value.lower().endswith(".ipynb")


def locate(
    user_ns: dict | None = None, cwd: str | os.PathLike | None = None
) -> tuple[str | None, pathlib.Path]:
    """Find the running notebook and its ledger folder: ``(notebook_path or None, ledger_dir)``.

    Order: ``$PERFMAGIC_LEDGER_DIR`` (that folder is the ledger folder; the notebook is still
    looked up for the ``notebook`` column), ``user_ns["__session__"]``,
    ``user_ns["__vsc_ipynb_file__"]``, ``$JPY_SESSION_NAME``; else ``(None, cwd/.perfmagic)``.
    Only values ending in ``.ipynb`` or naming an existing file count as notebooks. A relative
    path that does not exist under ``cwd`` (ipykernel gives paths relative to the server root)
    still names the notebook: its file name, in ``cwd``.
    """
    base = pathlib.Path(os.path.abspath(os.fspath(cwd) if cwd is not None else os.getcwd()))
    ns = user_ns or {}
    notebook: pathlib.Path | None = None
    for value in (
        ns.get("__session__"),
        ns.get("__vsc_ipynb_file__"),
        os.environ.get("JPY_SESSION_NAME"),
    ):
        if not isinstance(value, (str, os.PathLike)):
            continue
        text = os.fspath(value).strip()
        if not text:
            continue
        p = pathlib.Path(os.path.expanduser(text))
        full = p if p.is_absolute() else base / p
        try:
            exists = full.is_file()
        except OSError:
            exists = False
        if exists:
            notebook = pathlib.Path(os.path.abspath(full))
            break
        if _is_notebook_value(text):
            notebook = full if p.is_absolute() else base / p.name
            notebook = pathlib.Path(os.path.abspath(notebook))
            break

    override = os.environ.get(ENV_DIR, "").strip()
    if override:
        d = pathlib.Path(os.path.expanduser(override))
        ledger_dir = pathlib.Path(os.path.abspath(d if d.is_absolute() else base / d))
    elif notebook is not None:
        ledger_dir = notebook.parent / LEDGER_FOLDER
    else:
        ledger_dir = base / LEDGER_FOLDER
    return (str(notebook) if notebook is not None else None), ledger_dir


def _notebook_key(notebook: str | os.PathLike | None, ledger_dir: pathlib.Path) -> str | None:
    """The value of the ``notebook`` column: the file name when the notebook sits beside the
    ledger folder, else the notebook as given."""
    if notebook is None:
        return None
    text = os.fspath(notebook)
    p = pathlib.Path(text)
    if p.is_absolute() and os.path.normcase(str(p.parent)) == os.path.normcase(
        str(ledger_dir.parent)
    ):
        return p.name
    return text


def _refusal(version: int, tables: set[str]) -> str | None:
    """Why a database with this ``user_version`` and these tables must not be written, or None
    when it is a perfmagic ledger of this schema or an empty database that can become one.

    Many programs set ``user_version`` too, so version 1 alone does not make a ledger: it must
    hold ``runs``. A higher version is a newer perfmagic only when ``runs`` is there."""
    if version > SCHEMA_VERSION and "runs" in tables:
        return (
            f"ledger schema version {version} was written by a newer perfmagic "
            f"(this one writes version {SCHEMA_VERSION})"
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


# --------------------------------------------------------------------------------------------
# the ledger


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
        self.last_error: str | None = None  # like RunRef.error: no "perfmagic: " prefix

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

    # -- connections ------------------------------------------------------------------------

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
        reason = _refusal(version, tables)
        if reason:
            raise LedgerError(reason)

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
        version = con.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        reason = _refusal(version, tables)
        if reason:
            raise LedgerError(reason)
        if version == SCHEMA_VERSION:
            return
        for stmt in _SCHEMA:
            con.execute(stmt)

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
        import sqlite3

        if not self._path.exists():
            return None
        try:
            con = self._connect_read()
            try:
                version = con.execute("PRAGMA user_version").fetchone()[0]
                if version > SCHEMA_VERSION:
                    raise LedgerError(
                        f"cannot read the perfmagic ledger {self._path}: schema version {version} "
                        f"was written by a newer perfmagic; upgrade perfmagic"
                    )
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
                cur = con.execute(sql, params)
                names = [d[0] for d in cur.description] if cur.description else []
                return [dict(zip(names, row)) for row in cur.fetchall()]  # type: ignore[misc]
            finally:
                con.close()
        except LedgerError:
            raise
        except (sqlite3.Error, OSError) as exc:
            raise self._read_error(exc) from exc

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
    ) -> RunRef:
        """Append one run. Never raises over the file: on failure the run is kept in memory and
        ``RunRef(saved=False, error=...)`` says why and what to do."""
        if status not in STATUSES:
            raise ValueError(f"status: got {status!r}; expected one of {', '.join(STATUSES)}")
        if not isinstance(magic, str) or not magic:
            raise ValueError(f"magic: got {magic!r}; expected the magic's name, e.g. 'bench'")
        row: dict[str, Any] = {
            "created_utc": _utc_now(),
            "notebook": _text(self._notebook),
            "cell_id": _text(cell_id),
            "session": _text(session if session is not None else _default_session()),
            "magic": _text(magic),
            "label": _text(label),
            "status": status,
            "code": _text(code if code is not None else ""),
            "code_hash": code_hash(code),
            "options": _dumps(options if options is not None else {}),
            "metrics": _dumps(metrics if metrics is not None else {}),
            "primary_metric": _text(primary_metric),
            "samples": None if samples is None else _dumps(samples),
            "env": _dumps(env if env is not None else {}),
            "env_hash": _text(env_hash),
            "note": _text(note),
        }
        with self._lock:
            try:
                ids = self._write([*self._pending, row])
            except Exception as exc:  # noqa: BLE001 - a result is never lost over the file
                row["id"] = self._next_pending
                self._next_pending -= 1
                self._pending.append(row)
                reason, fix = _classify(exc, self._path)
                msg = (
                    f"run not saved to the ledger {self._path} ({reason}); it is kept "
                    f"in memory for this kernel session only (Ledger.pending, id {row['id']}). "
                    f"Fix: {fix[:1].upper()}{fix[1:]}."
                )
                self.last_error = msg
                return RunRef(id=row["id"], saved=False, path=str(self._path), error=msg)
            for old, new in zip(self._pending, ids):
                self._renumbered[old["id"]] = new
            self._pending.clear()
            self.last_error = None
            return RunRef(id=ids[-1], saved=True, path=str(self._path), error=None)

    def flush(self) -> int:
        """Try to write the pending in-memory runs now; returns how many were written."""
        with self._lock:
            if not self._pending:
                return 0
            try:
                ids = self._write(list(self._pending))
            except Exception as exc:  # noqa: BLE001
                reason, fix = _classify(exc, self._path)
                self.last_error = f"ledger {self._path} still not writable ({reason}); {fix}."
                return 0
            for old, new in zip(self._pending, ids):
                self._renumbered[old["id"]] = new
            n = len(self._pending)
            self._pending.clear()
            self.last_error = None
            return n

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
                sql = (
                    f"INSERT INTO runs ({', '.join(_INSERT_COLUMNS)}) "
                    f"VALUES ({', '.join('?' * len(_INSERT_COLUMNS))})"
                )
                ids = []
                for r in rows:
                    cur = con.execute(sql, tuple(r[c] for c in _INSERT_COLUMNS))
                    ids.append(int(cur.lastrowid))
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

    # -- reading ----------------------------------------------------------------------------

    def _decode(self, row: dict[str, Any], *, saved: bool) -> dict[str, Any]:
        out = {c: row.get(c) for c in COLUMNS}
        for c in JSON_COLUMNS:
            out[c] = _loads(out[c])
        if not isinstance(out["metrics"], dict):
            out["metrics"] = {} if out["metrics"] is None else {"value": out["metrics"]}
        if out["options"] is None:
            out["options"] = {}
        if out["env"] is None:
            out["env"] = {}
        out["saved"] = saved
        return out

    def _resolve_notebook(self, notebook: Any) -> tuple[bool, str | None]:
        """(filter?, value) for a ``notebook=`` argument: ``...`` this one, None all."""
        if notebook is ...:
            return True, self._notebook
        if notebook is None:
            return False, None
        return True, _notebook_key(notebook, self._dir)

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
        sql = "SELECT * FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id " + ("DESC" if newest_first else "ASC")
        if limit is not None:
            if limit <= 0:
                return []
            sql += f" LIMIT {int(limit)}"
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
        saved = [self._decode(r, saved=True) for r in (self._query(sql, tuple(params)) or [])]
        if newest_first:
            out = pending[::-1] + saved
        else:
            out = saved + pending
        return out[:limit] if limit is not None else out

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
        if ids:
            known = f"most recent ids for {where}: {', '.join(str(i) for i in ids)}"
        else:
            known = f"there are no runs for {where} yet"
        return UnknownRunError(
            f"no run with id {run_id} in the perfmagic ledger {self._path}; {known}",
            run_id=run_id,
            known_ids=ids,
        )

    def get(self, run_id: int) -> dict:
        """The run with this id (any notebook of this file). Unknown id: UnknownRunError."""
        rid = self._resolve_id(run_id)
        if rid < 0:
            with self._lock:
                for r in self._pending:
                    if r["id"] == rid:
                        return self._decode(dict(r), saved=False)
            raise self._unknown(run_id)
        got = self._query("SELECT * FROM runs WHERE id = ?", (rid,))
        if not got:
            raise self._unknown(run_id)
        return self._decode(got[0], saved=True)

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

        def delete(con):
            cur = con.execute("SELECT * FROM runs WHERE id = ?", (rid,))
            names = [d[0] for d in cur.description]
            found = cur.fetchone()
            if found is None:
                return None
            con.execute("DELETE FROM baselines WHERE run_id = ?", (rid,))
            con.execute("DELETE FROM runs WHERE id = ?", (rid,))
            return dict(zip(names, found))

        removed = self._modify(delete)
        if removed is None:
            raise self._unknown(run_id)
        return self._decode(removed, saved=True)

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
            con = self._connect_read()
            try:
                tables = {
                    r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")
                }
                if "baselines" not in tables:
                    return None
                got = con.execute(
                    "SELECT run_id FROM baselines WHERE notebook IS ? AND label = ?",
                    (self._notebook, label),
                ).fetchone()
            finally:
                con.close()
        except (sqlite3.Error, OSError) as exc:
            raise self._read_error(exc) from exc
        return None if got is None else int(got[0])

    # -- export -----------------------------------------------------------------------------

    def export(self, path: str | os.PathLike, *, notebook: Any = ...) -> pathlib.Path:
        """Write the runs (oldest first) to ``.csv`` (flat: ``metric.<name>`` columns, JSON
        strings for options/env/samples) or ``.json`` (list of full rows). Returns the path."""
        import csv

        target = pathlib.Path(os.path.expanduser(os.fspath(path)))
        suffix = target.suffix.lower()
        if suffix not in (".csv", ".json"):
            raise LedgerError(
                f"cannot export to {target}: the file name must end in .csv or .json "
                f"(got {suffix or 'no suffix'!r})"
            )
        rows = self.rows(notebook=notebook, newest_first=False)
        try:
            if suffix == ".json":
                with open(target, "w", encoding="utf-8") as fh:
                    fh.write(_dumps_strict(rows))
                    fh.write("\n")
                return target
            metric_names: list[str] = []
            for r in rows:
                for k in r["metrics"]:
                    if k not in metric_names:
                        metric_names.append(k)
            head = [
                "id", "created_utc", "notebook", "cell_id", "session", "magic", "label",
                "status", "primary_metric",
            ]  # fmt: skip
            tail = ["code", "code_hash", "options", "env", "env_hash", "samples", "note", "saved"]
            fields = head + [f"metric.{k}" for k in metric_names] + tail
            with open(target, "w", encoding="utf-8", newline="") as fh:
                writer = csv.DictWriter(fh, fieldnames=fields)
                writer.writeheader()
                for r in rows:
                    out: dict[str, Any] = {k: r[k] for k in head}
                    for k in metric_names:
                        v = r["metrics"].get(k)
                        if v is not None and not isinstance(v, (str, int, float)):
                            v = _dumps_strict(v)
                        out[f"metric.{k}"] = v
                    for k in ("code", "code_hash", "env_hash", "note", "saved"):
                        out[k] = r[k]
                    for k in ("options", "env", "samples"):
                        out[k] = None if r[k] is None else _dumps_strict(r[k])
                    writer.writerow(out)
        except OSError as exc:
            raise LedgerError(f"cannot write the export {target}: {exc}") from exc
        return target

    def to_frame(self, *, notebook: Any = ..., newest_first: bool = False):
        """The runs as a pandas DataFrame: index ``id``; ``created`` (UTC Timestamp), notebook,
        magic, label, status, primary_metric, one column per metric key (NaN where absent; named
        ``metric.<key>`` if it would clash), code, code_hash, env_hash, options (dicts), saved."""
        import pandas as pd

        rows = self.rows(notebook=notebook, newest_first=newest_first)
        lead = ["created", "notebook", "magic", "label", "status", "primary_metric"]
        trail = ["code", "code_hash", "env_hash", "options", "saved"]
        metric_names: list[str] = []
        for r in rows:
            for k in r["metrics"]:
                if k not in metric_names:
                    metric_names.append(k)
        taken = set(lead) | set(trail) | {"id"}
        metric_cols = {k: (f"metric.{k}" if k in taken else k) for k in metric_names}
        index = pd.Index([r["id"] for r in rows], name="id", dtype="int64")
        data: dict[str, Any] = {
            "created": pd.to_datetime(
                pd.Series([r["created_utc"] for r in rows], index=index, dtype=object), utc=True
            ),
        }
        for c in lead[1:]:
            data[c] = [r[c] for r in rows]
        for k, col in metric_cols.items():
            data[col] = [r["metrics"].get(k, math.nan) for r in rows]
            if all(isinstance(v, (int, float)) and not isinstance(v, bool) or v is None
                   for v in data[col]):  # fmt: skip
                data[col] = [math.nan if v is None else float(v) for v in data[col]]
        for c in trail:
            data[c] = [r[c] for r in rows]
        frame = pd.DataFrame(data, index=index)
        frame["saved"] = frame["saved"].astype(bool)
        return frame
