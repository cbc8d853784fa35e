"""The advisor's tables of a ledger: targets (``%perf target``) and checked predictions (``%perf next``).

Plain functions on a connection inside the ledger's write transaction, and the queries its readers run;
:class:`~perfmagic.storage.ledger.Ledger` offers them as ``set_target``, ``target``, ``add_prediction``,
``predictions`` and ``check_prediction``. The tables are made on first use (:data:`.schema.ADVISOR_SCHEMA`,
``CREATE TABLE IF NOT EXISTS``), so older ledgers stay readable and unchanged until a target or a
prediction is written.
"""

from __future__ import annotations

from typing import Any

from .codec import _dumps, _loads, _text, _utc_now
from .schema import ADVISOR_SCHEMA

TARGETS = "SELECT label, target_s FROM targets WHERE notebook IS ?"


def create_tables(con: Any) -> None:
    """The advisor's tables, when they are not there yet (inside the caller's transaction)."""
    for stmt in ADVISOR_SCHEMA:
        con.execute(stmt)


def target_seconds(seconds: Any) -> float:
    """A target as a positive, finite number of seconds; ValueError naming the value otherwise."""
    value = float(seconds)
    if not value > 0 or value != value or value == float("inf"):
        raise ValueError(f"target: got {seconds!r}; expected a positive, finite time in seconds")
    return value


def put_target(con: Any, notebook: str | None, label: str | None, seconds: float) -> None:
    """Set ``label``'s target in ``notebook`` (``label=None``: the notebook's default), replacing any."""
    key = "" if label is None else str(label)
    con.execute("DELETE FROM targets WHERE notebook IS ? AND label = ?", (notebook, key))
    con.execute("INSERT INTO targets (notebook, label, target_s, created_utc) VALUES (?, ?, ?, ?)",
                (notebook, key, seconds, _utc_now()))


def target_of(rows: list[dict[str, Any]], label: str | None) -> float | None:
    """``label``'s target among the notebook's :data:`TARGETS` rows, else the notebook's default, or None."""
    by = {r["label"]: float(r["target_s"]) for r in rows}
    return by.get("" if label is None else str(label), by.get(""))


def put_prediction(con: Any, notebook: str | None, *, label: str | None, level: str, action: str, low: float,
                   high: float, basis: str, evidence: list[int], base_run: int | None, after_run: int | None) -> int:
    """Insert a proposal of ``%perf next``; its id."""
    cur = con.execute(
        "INSERT INTO predictions (created_utc, notebook, label, level, action, low, high, basis, "
        "evidence, base_run, after_run) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (_utc_now(), notebook, _text(label), level, action, float(low), float(high), basis,
         _dumps([int(e) for e in evidence]), base_run, after_run))
    return int(cur.lastrowid)


def predictions_query(notebook: str | None, label: str | None) -> tuple[str, tuple]:
    """The SQL and parameters of a notebook's predictions (of one label when given), oldest first."""
    sql = "SELECT * FROM predictions WHERE notebook IS ?"
    params: tuple = (notebook,)
    if label is not None:
        sql += " AND label = ?"
        params += (label,)
    return sql + " ORDER BY id", params


def prediction(row: dict[str, Any]) -> dict[str, Any]:
    """A stored prediction as read: ``evidence`` a list of run ids, ``within`` a bool or None."""
    r = dict(row)
    ev = _loads(r.get("evidence"))
    r["evidence"] = [int(e) for e in ev] if isinstance(ev, list) else []
    r["within"] = None if r.get("within") is None else bool(r["within"])
    return r


def put_check(con: Any, prediction_id: int, *, run_a: int, run_b: int, measured: float, within: bool) -> None:
    """Store the gain a later comparison (run A -> run B) measured for a prediction."""
    con.execute("UPDATE predictions SET run_a = ?, run_b = ?, measured = ?, within = ?, checked_utc = ? "
                "WHERE id = ?", (int(run_a), int(run_b), float(measured), int(bool(within)), _utc_now(),
                                 int(prediction_id)))


__all__ = ["TARGETS", "create_tables", "prediction", "predictions_query", "put_check", "put_prediction",
           "put_target", "target_of", "target_seconds"]
