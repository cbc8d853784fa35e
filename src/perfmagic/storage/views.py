"""What the listing commands read of a large ledger: counts, a table's context, a label's history.

``%perf`` on a ledger of 100,000 runs shows the newest 20; what it needs beside them is a handful of
rows (each shown label's baseline, the interleaved pairs that judge a shown run against it, the last
runs of its label for the trend), fetched by indexed queries here instead of decoding every run.
"""

from __future__ import annotations

from typing import Any

from ..record import relation

_JSON = {"rerun_of": "json_extract(options, '$.remeasured_from')",
         "interleaved_with": "json_extract(options, '$.interleaved_with')",
         "primary_value": "json_extract(metrics, '$.\"' || primary_metric || '\"')",
         "work": "'?'"}  # schema 1: unknown without reading every run's options (read whole then)


def column(name: str, columns: set[str], table: str = "") -> str:
    """A derived column by its SQL: the column itself (schema 2), else read from the row's JSON (schema 1)."""
    if name in columns:
        return f"{table}{name}"
    return _JSON[name].replace("options", f"{table}options").replace("metrics", f"{table}metrics") \
        .replace("primary_metric", f"{table}primary_metric")


def _notebook(led: Any, notebook: Any) -> tuple[str, list[Any]]:
    filt, nb = led._resolve_notebook(notebook)
    return (" AND notebook IS ?", [nb]) if filt else ("", [])


def count(led: Any, *, notebook: Any = ..., label: str | None = None) -> int:
    """How many runs (the saved ones and those kept in memory)."""
    nb_sql, params = _notebook(led, notebook)
    if label is not None:
        nb_sql += " AND label = ?"
        params.append(label)
    got = led._query(f"SELECT COUNT(*) AS n FROM runs WHERE 1{nb_sql}", tuple(params))
    filt, nb = led._resolve_notebook(notebook)
    pending = sum(1 for r in led.pending if (not filt or r["notebook"] == nb) and (label is None or r["label"] == label))
    return int(got[0]["n"] if got else 0) + pending


def labels(led: Any, *, notebook: Any = ...) -> list[str]:
    """The labels that have runs, sorted (an indexed DISTINCT, no row read)."""
    nb_sql, params = _notebook(led, notebook)
    got = led._query(f"SELECT DISTINCT label FROM runs WHERE label IS NOT NULL{nb_sql}", tuple(params)) or []
    filt, nb = led._resolve_notebook(notebook)
    mine = {r["label"] for r in led.pending if r.get("label") and (not filt or r["notebook"] == nb)}
    return sorted({r["label"] for r in got} | mine)


def history(led: Any, row: dict[str, Any], last: int, *, notebook: Any = ...) -> list[dict[str, Any]]:
    """The last ``last`` runs of ``row``'s label and magic up to it (itself included), no re-measured A sides."""
    nb_sql, params = _notebook(led, notebook)

    def where(columns: set[str]) -> tuple[str, tuple, str]:
        return (f" WHERE label IS ? AND magic IS ? AND id <= ? AND {column('rerun_of', columns)} IS NULL{nb_sql}",
                (row.get("label"), row.get("magic"), row["id"], *params), f" ORDER BY id DESC LIMIT {int(last)}")
    return led._select(where)


def pair(led: Any, a_id: int, b_id: int) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The newest same-process pair that measured A (``a_id`` or a re-measurement of it) beside B (``b_id`` or
    a re-measurement of it), both finished: ``(A row, B row)``, or None."""
    def run(con: Any, version: int, columns: set[str]) -> Any:
        rb, ra = column("rerun_of", columns, "b."), column("rerun_of", columns, "a.")
        iw = column("interleaved_with", columns, "b.")
        got = con.execute(f"SELECT b.id, a.id FROM runs b JOIN runs a ON {iw} = a.id WHERE (b.id = ? OR {rb} = ?) "
                          f"AND (a.id = ? OR {ra} = ?) AND a.status = 'ok' AND b.status = 'ok' "
                          "ORDER BY b.id DESC LIMIT 1", (b_id, b_id, a_id, a_id)).fetchone()
        return got
    got = led._read(run)
    if not got:
        return None
    both = {r["id"]: r for r in led._select(" WHERE id IN (?, ?)", (got[0], got[1]))}
    return (both[got[1]], both[got[0]]) if len(both) == 2 else None


def reruns(led: Any, *, before: int | None = None, limit: int = 200) -> list[dict[str, Any]]:
    """Finished ``%%gpubench`` re-measurements (A/A evidence), newest first, ids below ``before``, with the
    runs they re-measured: the rows :func:`perfmagic.timing.betweenrun.evidence` reads, without the rest."""
    def where(columns: set[str]) -> tuple[str, tuple, str]:
        cut = " AND id < ?" if before is not None else ""
        return (f" WHERE {column('rerun_of', columns)} IS NOT NULL AND magic = 'gpubench' AND status = 'ok'{cut}",
                (before,) if before is not None else (), f" ORDER BY id DESC LIMIT {int(limit)}")
    got = led._select(where)
    want = sorted({relation(r, "rerun_of") for r in got} - {r["id"] for r in got})
    originals: list[dict[str, Any]] = []
    for i in range(0, len(want), 500):
        chunk = want[i:i + 500]
        originals += led._select(f" WHERE id IN ({', '.join('?' * len(chunk))})", tuple(chunk))
    return got + originals


def prefetch_samples(led: Any, rows: list[dict[str, Any]]) -> None:
    """Read the samples of all ``rows`` in a few queries (an export of every run), instead of one query per
    row on first use. Rows of a schema-1 file keep loading theirs on use."""
    from .rows import Row, _loads as _json, unpack

    want = {r["id"]: r for r in rows if isinstance(r, Row) and "samples" in r._lazy}
    ids = sorted(want)

    def run(con: Any, version: int, columns: set[str]) -> list[tuple]:
        if "env_id" not in columns:
            return []
        got: list[tuple] = []
        for i in range(0, len(ids), 900):
            chunk = ids[i:i + 900]
            got += con.execute(f"SELECT run_id, samples FROM run_data WHERE run_id IN ({', '.join('?' * len(chunk))})",
                               tuple(chunk)).fetchall()
        return got
    found = dict(led._read(run) or [])
    for rid, row in want.items():
        if rid in found:  # the others load on use
            value = found[rid]
            row["samples"] = unpack(value) if isinstance(value, (bytes, memoryview)) else _json(value)


def table_context(led: Any, rows: list[dict[str, Any]], *, notebook: Any = ..., last: int = 8) -> list[dict[str, Any]]:
    """The runs the ``%perf`` table reads beside the ``rows`` it shows: each label's baseline, the pairs that
    judged a shown run against it, and the label's last ``last`` runs up to each shown run."""
    out: dict[int, dict[str, Any]] = {r["id"]: r for r in rows}
    bases: dict[str, int | None] = {}
    for r in rows:
        label = r.get("label") or ""
        if label not in bases:
            bases[label] = led.baseline(label) if label else None
        if r.get("saved", True):
            for h in history(led, r, last, notebook=notebook):
                out.setdefault(h["id"], h)
        bid = bases[label]
        if bid is not None and bid != r["id"]:
            if bid not in out:
                try:
                    out[bid] = led.get(bid)
                except KeyError:
                    continue
            if r.get("saved", True):
                got = pair(led, bid, r["id"])
                if got is not None:
                    for x in got:
                        out.setdefault(x["id"], x)
    return sorted(out.values(), key=lambda r: r["id"], reverse=True)


__all__ = ["column", "count", "history", "labels", "pair", "prefetch_samples", "reruns", "table_context"]
