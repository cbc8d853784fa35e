"""How ledger values are stored: JSON that never fails, code hashes, SQLite-safe text, timestamps.

``_dumps`` turns anything a magic hands over (numpy scalars, paths, dataclasses...) into JSON text
and never raises: a result must not be lost over an odd value in its options. ``_dumps_strict``
writes the strict JSON of exported files (no NaN). Stdlib only.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import math
import os
import re
import sys
from typing import Any

__all__ = ["STATUSES", "code_hash", "split_cell", "storage_row"]

STATUSES = ("ok", "interrupted", "failed")


def storage_row(notebook: str | None, *, magic: str, label: Any, code: Any, options: Any, metrics: Any,
                samples: Any, env: Any, env_hash: Any = None, status: str = "ok", primary_metric: Any = None,
                cell_id: Any = None, session: Any = None, note: Any = None, magic_line: Any = None,
                kind: Any = None, payload: Any = None, rerun_of: Any = None, interleaved_with: Any = None,
                thread_limit: Any = None) -> dict[str, Any]:
    """A run in the form the ledger stores (JSON text), checked; what ``Ledger.record`` writes.

    ``magic_line`` (None: ``code`` may still hold it glued, as before schema 3) and ``code`` are stored
    apart; the code hash covers both as the user typed them, so it stays comparable with older rows."""
    if status not in STATUSES:
        raise ValueError(f"status: got {status!r}; expected one of {', '.join(STATUSES)}")
    if not isinstance(magic, str) or not magic:
        raise ValueError(f"magic: got {magic!r}; expected the magic's name, e.g. 'bench'")
    return {
        "created_utc": _utc_now(),
        "notebook": _text(notebook),
        "cell_id": _text(cell_id),
        "session": _text(session if session is not None else _default_session()),
        "magic": _text(magic),
        "label": _text(label),
        "status": status,
        "code": _text(code if code is not None else ""),
        "code_hash": code_hash(code if magic_line is None else f"%%{magic} {magic_line}".rstrip() + "\n" + (code or "")),
        "magic_line": _text(magic_line),
        "kind": None if kind == magic else _text(kind),  # stored only when the result is not the magic's own
        "payload": None if payload is None else _dumps(payload),
        "rerun_of": _int_or_none(rerun_of),
        "interleaved_with": _int_or_none(interleaved_with),
        "thread_limit": _int_or_none(thread_limit),
        "options": _dumps(options if options is not None else {}),
        "metrics": _dumps(metrics if metrics is not None else {}),
        "primary_metric": _text(primary_metric),
        "samples": None if samples is None else _dumps(samples),
        "env": _dumps(env if env is not None else {}),
        "env_hash": _text(env_hash),
        "note": _text(note),
    }


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None


def split_cell(code: str | None, magic_line: str | None, magic: str | None) -> tuple[str, str]:
    """``(magic line, cell body)`` of a stored run: as stored (schema 3), or — a row written before, its
    ``%%magic line`` glued on the code — split here, the one place that strips it."""
    code = code or ""
    if magic_line is not None:
        return magic_line, code
    first, sep, rest = code.partition("\n")
    head = first.lstrip()
    if head.startswith("%%"):
        name = f"%%{magic}" if magic and head.startswith(f"%%{magic}") else head.split(" ", 1)[0]
        return head[len(name):].strip(), rest
    return "", code


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
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


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

WORK_UNITS = ("items", "flops", "bytes")


def _clean(x: float) -> float:
    r = round(x)
    return float(r) if r and abs(x - r) <= 1e-6 * abs(x) else float(x)


def work_of(options: Any, metrics: Any) -> dict[str, float]:
    """The work one call of a recorded run declared, from its options and metrics: ``{"items": 32.0}``;
    empty when none. Runs record it in ``options["work"]``; older runs only have the throughput
    (``items_per_s``), which times the median gives the same number back."""
    w = options.get("work") if isinstance(options, dict) else None
    if isinstance(w, dict):
        out = {}
        for k in WORK_UNITS:
            v = w.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 and math.isfinite(v):
                out[k] = float(v)
        return out
    m = metrics if isinstance(metrics, dict) else {}
    med = m.get("median_s")
    out = {}
    for k in WORK_UNITS:
        rate = m.get(f"{k}_per_s")
        if isinstance(rate, (int, float)) and isinstance(med, (int, float)) and rate > 0 and med > 0:
            out[k] = _clean(rate * med)
    return out


def rerun_of(row: dict[str, Any]) -> int | None:
    """The run a row re-measured, when it is the A side that ``%%gpubench --vs RUN`` measured again
    (its role is ``rerun-of #RUN``): such a row is evidence for that one comparison, not a new point
    in its label's history."""
    from ..record import relation

    return relation(row, "rerun_of")
