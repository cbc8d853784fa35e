"""The advisor's tables of a ledger: targets (``%perf target``) and checked predictions (``%perf next``).

A mixin of :class:`perfmagic.storage.ledger.Ledger`: it uses the ledger's ``_query``, ``_modify`` and
``_notebook``. The tables are made on first use (``db.ADVISOR_SCHEMA``, ``CREATE TABLE IF NOT EXISTS``),
so older ledgers stay readable and unchanged until a target or a prediction is written.
"""

from __future__ import annotations

from typing import Any

from .codec import _dumps, _loads, _text, _utc_now


class AdviceStore:
    """Targets and predictions of this notebook (see the module docstring)."""

    # provided by the database class the ledger also derives from (storage/db.py)
    _notebook: Any
    _query: Any
    _modify: Any

    def _advisor_rows(self, table: str, sql: str, params: tuple = ()) -> list[dict[str, Any]]:
        """Rows of an advisor table; [] when the file or the table does not exist yet (older ledgers)."""
        got = self._query("SELECT name FROM sqlite_master WHERE type='table' AND name = ?", (table,))
        if not got:
            return []
        return self._query(sql, params) or []

    def _advisor_write(self, fn):
        from .db import ADVISOR_SCHEMA

        def run(con):
            for stmt in ADVISOR_SCHEMA:
                con.execute(stmt)
            return fn(con)

        return self._modify(run)

    def set_target(self, label: str | None, seconds: float) -> None:
        """The time per call that is fast enough for ``label`` in this notebook (replacing any).
        ``label=None``: the notebook's default target, for every label without its own."""
        value = float(seconds)
        if not value > 0 or value != value or value == float("inf"):
            raise ValueError(f"target: got {seconds!r}; expected a positive, finite time in seconds")
        key = "" if label is None else str(label)

        def put(con):
            con.execute("DELETE FROM targets WHERE notebook IS ? AND label = ?", (self._notebook, key))
            con.execute("INSERT INTO targets (notebook, label, target_s, created_utc) VALUES (?, ?, ?, ?)",
                        (self._notebook, key, value, _utc_now()))

        self._advisor_write(put)

    def target(self, label: str | None) -> float | None:
        """The target of ``label`` in this notebook (else the notebook's default target), or None."""
        got = self._advisor_rows("targets", "SELECT label, target_s FROM targets WHERE notebook IS ?",
                                 (self._notebook,))
        by = {r["label"]: float(r["target_s"]) for r in got}
        return by.get("" if label is None else str(label), by.get(""))

    def add_prediction(self, *, label: str | None, level: str, action: str, low: float, high: float,
                       basis: str, evidence: list[int], base_run: int | None, after_run: int | None) -> int:
        """Record a proposal of ``%perf next`` whose gain a later comparison will check; its id."""

        def put(con):
            cur = con.execute(
                "INSERT INTO predictions (created_utc, notebook, label, level, action, low, high, basis, "
                "evidence, base_run, after_run) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (_utc_now(), self._notebook, _text(label), level, action, float(low), float(high), basis,
                 _dumps([int(e) for e in evidence]), base_run, after_run))
            return int(cur.lastrowid)

        return self._advisor_write(put)

    def predictions(self, *, label: str | None = None) -> list[dict[str, Any]]:
        """This notebook's recorded predictions, oldest first (``evidence`` decoded to a list of ids)."""
        sql = "SELECT * FROM predictions WHERE notebook IS ?"
        params: tuple = (self._notebook,)
        if label is not None:
            sql += " AND label = ?"
            params += (label,)
        out = []
        for r in self._advisor_rows("predictions", sql + " ORDER BY id", params):
            r = dict(r)
            ev = _loads(r.get("evidence"))
            r["evidence"] = [int(e) for e in ev] if isinstance(ev, list) else []
            r["within"] = None if r.get("within") is None else bool(r["within"])
            out.append(r)
        return out

    def check_prediction(self, prediction_id: int, *, run_a: int, run_b: int, measured: float,
                         within: bool) -> None:
        """Store the gain a later comparison (run A -> run B) measured for a prediction."""

        def put(con):
            con.execute("UPDATE predictions SET run_a = ?, run_b = ?, measured = ?, within = ?, checked_utc = ? "
                        "WHERE id = ?", (int(run_a), int(run_b), float(measured), int(bool(within)), _utc_now(),
                                         int(prediction_id)))

        self._advisor_write(put)
