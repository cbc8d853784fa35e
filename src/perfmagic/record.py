"""The run record: one typed value between a result and the ledger.

A magic turns its result into a :class:`RunRecord` (``result.to_record(magic=..., code=..., ...)``), the
ledger stores it (``Ledger.record_run``), and ``perfmagic.run(N)`` reads it back and turns it into the
result again (``ResultClass.from_record(rec)``), raw samples included, after a restart. The record keeps
apart what the old rows mixed:

* ``magic_line`` (``-l x -b 2s``) and ``code`` (the cell body only) are two fields;
* ``options`` are the user's options only; the relations between runs are fields of their own:
  ``rerun_of`` (the run this one re-measured), ``interleaved_with`` (the A side a B was measured beside),
  ``thread_limit`` (the pools' threads both sides of an interleaved pair were measured with);
* ``payload``: what the result needs beyond ``options``, ``metrics``, ``samples`` and ``env`` to rebuild
  itself (plain JSON from :func:`encode`; a ``%%gpubench`` run keeps only a few small fields there).

:func:`encode` / :func:`decode` turn a frozen result dataclass into plain JSON data and back, led by the
fields' declared types (nested dataclasses, tuples, ``X | None``): a field that holds a dataclass declares
its class (``bench: BenchResult``), since a value read under ``Any`` comes back as the plain JSON it was.
Exceptions kept in a result (``FlameResult.exception``) are not stored: they come back as ``None``.

Stdlib only; imports no result module (the result classes import this one).
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any

__all__ = ["RunRecord", "decode", "encode", "relation"]

_TAG = "__type__"  # the class name early schema-3 payloads kept in each dataclass (dropped on read)


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """One run as the ledger keeps it (see the module docstring). ``kind`` names the result type that
    :func:`perfmagic.storage.record.rebuild` makes of it (``"gpubench"``, ``"amdahl"``, ``"ranks"``...)."""

    kind: str
    magic: str
    code: str = ""
    magic_line: str = ""
    label: str | None = None
    status: str = "ok"
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    metrics: dict[str, Any] = dataclasses.field(default_factory=dict)
    samples: Any = None
    env: dict[str, Any] = dataclasses.field(default_factory=dict)
    primary_metric: str | None = None
    payload: Any = None
    rerun_of: int | None = None
    interleaved_with: int | None = None
    thread_limit: int | None = None
    id: int | None = None
    created_utc: str | None = None
    notebook: str | None = None
    note: str | None = None

    @property
    def cell(self) -> str:
        """The cell as the user typed it: ``%%magic line`` and the body."""
        return f"%%{self.magic} {self.magic_line}".rstrip() + "\n" + self.code

    def ledger_fields(self) -> dict[str, Any]:
        """The keyword arguments of :meth:`perfmagic.storage.ledger.Ledger.record` for this record."""
        return {"magic": self.magic, "label": self.label, "code": self.code, "magic_line": self.magic_line,
                "options": dict(self.options), "metrics": dict(self.metrics), "samples": self.samples,
                "env": dict(self.env), "status": self.status, "primary_metric": self.primary_metric,
                "kind": self.kind, "payload": self.payload, "rerun_of": self.rerun_of,
                "interleaved_with": self.interleaved_with, "thread_limit": self.thread_limit, "note": self.note}


# ---- the typed codec --------------------------------------------------------------------------------

def encode(obj: Any) -> Any:
    """``obj`` as plain JSON data: dataclasses as dicts of their fields, tuples as lists; exceptions and
    other values JSON cannot hold become None (callables) or their ``repr``."""
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return obj
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: encode(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): encode(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [encode(v) for v in obj]
    if isinstance(obj, BaseException) or callable(obj):
        return None
    if hasattr(obj, "item") and getattr(obj, "shape", None) == ():
        return obj.item()  # numpy scalar
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return repr(obj)


def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - an annotation that cannot be resolved: read the values as they are
        return {f.name: Any for f in dataclasses.fields(cls)}


def decode(tp: Any, data: Any) -> Any:
    """The value of type ``tp`` that :func:`encode` wrote as ``data``."""
    if data is None:
        return None
    if isinstance(tp, type) and dataclasses.is_dataclass(tp) and isinstance(data, dict):
        hints = _hints(tp)
        kwargs = {f.name: decode(hints.get(f.name, Any), data[f.name]) for f in dataclasses.fields(tp)
                  if f.init and f.name in data}
        return tp(**kwargs)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return decode(inner[0], data) if len(inner) == 1 else _plain(data)
    if origin is tuple and isinstance(data, list):
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(decode(args[0], v) for v in data)
        if args and len(args) == len(data):
            return tuple(decode(a, v) for a, v in zip(args, data))
        return tuple(_plain(v) for v in data)
    if origin is dict and isinstance(data, dict):
        vt = args[1] if len(args) == 2 else Any
        return {k: decode(vt, v) for k, v in data.items()}
    if tp is float and isinstance(data, int) and not isinstance(data, bool):
        return float(data)
    return _plain(data)


def _plain(data: Any) -> Any:
    """A value read under ``Any``: as JSON gave it (a payload written before the fields declared their types
    carries a ``__type__`` key in each dataclass: dropped)."""
    if isinstance(data, dict):
        return {k: _plain(v) for k, v in data.items() if k != _TAG}
    if isinstance(data, list):
        return [_plain(v) for v in data]
    return data


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and not (isinstance(v, float) and math.isnan(v))


_OPTION_KEYS = {"rerun_of": "remeasured_from", "interleaved_with": "interleaved_with", "thread_limit": "thread_limit"}


def relation(row: Any, name: str) -> int | None:
    """A run's relation to another (``rerun_of``, ``interleaved_with``, ``thread_limit``) from a ledger row:
    its field (schema 3; the ledger fills it for older rows too), else the option key a hand-made or
    exported row of an older perfmagic kept it in."""
    value = row.get(name) if hasattr(row, "get") else getattr(row, name, None)
    if value is None and hasattr(row, "get"):
        value = (row.get("options") or {}).get(_OPTION_KEYS[name])
    try:
        return int(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None
