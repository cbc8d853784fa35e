"""Ledger rows as read: plain dicts whose heavy values are decoded on first use.

A command that lists 100,000 runs reads their light columns only; a row's ``options``, ``metrics`` and
``env`` are JSON-decoded when something reads them, and its ``samples`` fetched (one query) and
unpacked then. :class:`Row` is a ``dict``: ``row["samples"]``, ``row.get("env")``, ``"options" in row``,
iteration, ``dict(row)``, ``json.dumps(row)`` and ``==`` all see every key (iterating decodes the rest).
:func:`from_row` turns a row into the :class:`~perfmagic.record.RunRecord` that ``perfmagic.run(N)`` rebuilds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ..record import RunRecord
from .codec import _loads as _json_loads
from .codec import split_cell
from .compact import join_env, unpack_json, unpack_samples
from .schema import LIGHT, RELATIONS, ROW_COLUMNS

_OPTION_KEYS = {"rerun_of": "remeasured_from", "interleaved_with": "interleaved_with", "thread_limit": "thread_limit"}


def _loads(text: Any) -> Any:
    return _json_loads(unpack_json(text))  # schema 2 stores the JSON deflated


class Row(dict):
    """A ledger row; the values named in ``lazy`` are computed on first access."""

    __slots__ = ("_lazy",)

    def __init__(self, plain: dict[str, Any], lazy: dict[str, Callable[[], Any]]) -> None:
        super().__init__(plain)
        self._lazy = lazy

    def _load(self, key: str) -> Any:
        value = self._lazy.pop(key)()
        dict.__setitem__(self, key, value)
        return value

    def _all(self) -> None:
        for key in list(self._lazy):
            self._load(key)

    def __missing__(self, key: str) -> Any:
        if key in self._lazy:
            return self._load(key)
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        if key in self._lazy:
            return self._load(key)
        return dict.get(self, key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._lazy or dict.__contains__(self, key)

    def __iter__(self) -> Iterator[str]:
        self._all()
        return dict.__iter__(self)

    def __len__(self) -> int:
        return dict.__len__(self) + len(self._lazy)

    def keys(self):  # type: ignore[override]
        self._all()
        return dict.keys(self)

    def items(self):  # type: ignore[override]
        self._all()
        return dict.items(self)

    def values(self):  # type: ignore[override]
        self._all()
        return dict.values(self)

    def __setitem__(self, key: str, value: Any) -> None:
        self._lazy.pop(key, None)
        dict.__setitem__(self, key, value)

    def __delitem__(self, key: str) -> None:
        lazy = self._lazy.pop(key, None) is not None
        if dict.__contains__(self, key):
            dict.__delitem__(self, key)
        elif not lazy:
            raise KeyError(key)

    def pop(self, key: str, *default: Any) -> Any:  # type: ignore[override]
        if key in self._lazy:
            self._load(key)
        return dict.pop(self, key, *default)

    def setdefault(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        if key in self._lazy:
            return self._load(key)
        return dict.setdefault(self, key, default)

    def copy(self) -> dict[str, Any]:  # type: ignore[override]
        self._all()
        return dict(dict.items(self))

    def __eq__(self, other: object) -> bool:
        self._all()
        if isinstance(other, Row):
            other._all()
        return dict.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        self._all()
        return dict.__repr__(self)

    def __reduce__(self) -> Any:
        return (dict, (self.copy(),))


def decoded(stored: dict[str, Any], *, saved: bool) -> dict[str, Any]:
    """A storage-form row (JSON text) fully decoded, as ``rows()`` gives it (pending rows, removed rows)."""
    out = {c: stored.get(c) for c in ROW_COLUMNS}
    for c in ("options", "metrics", "samples", "env"):
        out[c] = _loads(out[c])
    out["magic_line"], out["code"] = split_cell(out.get("code"), out.get("magic_line"), out.get("magic"))
    for r in RELATIONS:
        if out.get(r) is None:
            out[r] = _relation(out.get("options"), r)
    return finish(out, saved)


def _relation(options: Any, name: str) -> int | None:
    """A relation read from the option key a row written before schema 3 kept it in."""
    value = options.get(_OPTION_KEYS[name]) if isinstance(options, dict) else None
    try:
        return int(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None


def finish(out: dict[str, Any], saved: bool) -> dict[str, Any]:
    if not isinstance(out.get("metrics"), dict):
        out["metrics"] = {} if out.get("metrics") is None else {"value": out["metrics"]}
    if out.get("options") is None:
        out["options"] = {}
    if out.get("env") is None:
        out["env"] = {}
    out["saved"] = saved
    return out


def select_from(columns: set[str]) -> str:
    """``SELECT … FROM …`` of a row without its samples: the light columns present in this file's ``runs``
    (a newer schema may have more; an older fewer) and the heavy ones, from ``run_data`` (schema 2)."""
    light = ", ".join(f"runs.{c}" for c in LIGHT if c in columns)
    if "env_id" in columns:
        return (f"SELECT {light}, d.options, d.metrics, d.env FROM runs LEFT JOIN run_data d ON d.run_id = runs.id")
    return f"SELECT {light}, runs.options, runs.metrics, runs.env FROM runs"


class Reader:
    """Turns fetched light rows into :class:`Row` s whose heavy values load from ``ledger`` on use."""

    def __init__(self, ledger: Any, version: int, columns: set[str]) -> None:
        self.ledger = ledger
        self.v1_samples = "samples" in columns and not {"env_id"} <= columns  # schema 1: samples in runs
        self.old_relations = "thread_limit" not in columns  # schema 1 or 2 read as it is: options hold some

    def row(self, stored: dict[str, Any]) -> Row:
        rid = stored["id"]
        plain = {c: stored.get(c) for c in ROW_COLUMNS if c not in ("options", "metrics", "samples", "env")}
        plain["saved"] = True
        # the one place a row's magic line is split from its code (rows before schema 3 glued them)
        plain["magic_line"], plain["code"] = split_cell(stored.get("code"), stored.get("magic_line"), stored.get("magic"))
        options, metrics, own, env_id = stored.get("options"), stored.get("metrics"), stored.get("env"), \
            stored.get("env_id")
        led = self.ledger

        def opts() -> Any:
            v = _loads(options)
            return {} if v is None else v

        def mets() -> Any:
            v = _loads(metrics)
            return v if isinstance(v, dict) else ({} if v is None else {"value": v})

        def env() -> Any:
            v = join_env(led._machine(env_id) if env_id is not None else None, _loads(own))
            return {} if v is None else v

        lazy = {"options": opts, "metrics": mets, "env": env, "samples": lambda: led._samples_of(rid, self.v1_samples)}
        if self.old_relations:  # a file of an older schema, read as it is: its relations may be option keys
            for r in RELATIONS:
                if plain.get(r) is None:
                    plain.pop(r, None)
                    lazy[r] = (lambda name: lambda: _relation(opts(), name))(r)
        return Row(plain, lazy)


def unpack(blob: Any) -> Any:
    try:
        return unpack_samples(blob)
    except Exception:  # noqa: BLE001 - a blob of a newer format: no samples, rather than no row
        return None


# ---- a row as a run record --------------------------------------------------------------------------

def kind_of(row: dict[str, Any]) -> str:
    """A row's kind: its ``kind`` column, else its magic's own (a row before schema 3: ``%%amdahl --ranks``
    is told by its options)."""
    if row.get("kind"):
        return str(row["kind"])
    magic = str(row.get("magic") or "")
    if magic == "amdahl" and (row.get("options") or {}).get("ranks"):
        return "ranks"
    return magic


def from_row(row: dict[str, Any], payload: Any = None) -> RunRecord:
    """The record of a ledger row (as ``Ledger.get`` returns it: code and magic line already apart)."""
    return RunRecord(kind=kind_of(row), magic=str(row.get("magic") or ""), code=row.get("code") or "",
                     magic_line=row.get("magic_line") or "", label=row.get("label"), status=row.get("status") or "ok",
                     options=dict(row.get("options") or {}), metrics=dict(row.get("metrics") or {}),
                     samples=row.get("samples"), env=dict(row.get("env") or {}),
                     primary_metric=row.get("primary_metric"), payload=payload, rerun_of=row.get("rerun_of"),
                     interleaved_with=row.get("interleaved_with"), thread_limit=row.get("thread_limit"),
                     id=row.get("id"), created_utc=row.get("created_utc"), notebook=row.get("notebook"),
                     note=row.get("note"))


__all__ = ["Reader", "Row", "decoded", "finish", "from_row", "kind_of", "select_from", "unpack"]
