"""The ledger as files and as pandas frames: ``export()`` to .csv/.json, and three tidy views.

:func:`ledger_frame` (what ``perfmagic.ledger()`` returns) offers:

``view="common"`` (default)
    one row per run, the columns every magic has: index ``id`` (Int64); ``created`` (UTC
    timestamp), ``magic`` and ``status`` (category), ``label``, ``primary_metric`` (string),
    ``value`` (the primary metric, float), ``unit`` (of ``value``: ``s``, ``B``, ``fraction``...),
    ``vs_baseline`` (float: B/A, this run's primary metric over its label's baseline's, for
    ``gpubench`` runs whose label has a baseline; where the two were re-measured interleaved in one
    process (``--vs``, ``%perf compare``), the latest such pair's B/A, as the ``%perf`` table's "A/B";
    NaN otherwise) and ``code``.
``view="wide"`` (the default when ``magic=`` is given)
    the common columns, then one column per metric key *of the selected runs only*, each with
    its own dtype (Int64 for counts, float for measures, boolean, string), then ``magic_line``
    (the cell's ``%%magic`` line), the run's relations ``rerun_of``, ``interleaved_with`` (the run
    an A/B pair measured it with) and ``thread_limit`` (Int64, <NA> for none) and ``options`` (the
    user's, a dict). ``magic="roofline"`` gives the roofline metrics and no others.
``view="long"``
    one row per (run, metric): ``id``, ``created``, ``magic``, ``label``, ``status``, ``metric``,
    ``value`` (float, NaN for a text metric), ``text`` (the value of a text metric) and ``unit``.

With ``all_notebooks=True`` a ``notebook`` column follows ``created``. :meth:`Ledger.to_frame`
keeps the older layout (every metric of every magic, plus ``code_hash``, ``env_hash``,
``options``, ``saved``) through :func:`wide_frame`. pandas is imported inside the functions.
"""

from __future__ import annotations

import math
import os
import pathlib
from typing import Any

from .codec import STATUSES, _dumps_strict
from .db import LedgerError, UnknownRunError

__all__ = ["KNOWN_MAGICS", "VIEWS", "export", "ledger_frame", "metric_unit", "wide_frame"]

VIEWS = ("common", "wide", "long")
KNOWN_MAGICS = ("gpubench", "roofline", "amdahl", "estimate", "dataloader_check", "memory", "flame",
                "lineprof", "where")
# magics whose runs are compared with their label's baseline in ``vs_baseline`` (a time ratio)
COMPARED = ("gpubench",)

_UNITS = {
    "flops": "FLOP", "bytes": "B", "intensity": "FLOP/B", "ridge": "FLOP/B",
    "flops_per_s": "FLOP/s", "peak_flops_per_s": "FLOP/s", "attainable_flops_per_s": "FLOP/s",
    "bytes_per_s": "B/s", "loader_batches_per_s": "batch/s", "units_per_s": "unit/s",
    "best_throughput": "batch/s", "rate_hz": "Hz",
    "S": "fraction", "S_stderr": "fraction", "sigma": "1", "kappa": "1", "exponent": "1", "exponent_at_full": "1",
    "ceiling": "×", "max_speedup": "×", "speedup_if_data_free": "×",
    "fraction_of_roof": "fraction", "actual_completed": "fraction", "time_error": "fraction",
    "memory_error": "fraction",
    "peak_n": "workers", "base_n": "workers", "recommended_workers": "workers",
    "num_workers": "workers", "best_num_workers": "workers", "cores": "cores",
    "batch_size": "count", "number": "calls", "steps_measured": "steps", "warmup_steps": "steps",
    "outside_samples": "count", "full": "unit", "largest_fit": "unit",
}  # fmt: skip


def metric_unit(name: str) -> str | None:
    """The unit of a ledger metric, from its name: ``median_s`` -> ``s``, ``peak_bytes`` -> ``B``,
    ``items_per_s`` -> ``items/s``, ``hot_fraction`` -> ``fraction`` (0 to 1), ``n_samples`` ->
    ``count``; None for a text metric or an unknown name."""
    if name in _UNITS:
        return _UNITS[name]
    if name.endswith("_bytes"):
        return "B"
    if name.endswith("_Bps"):
        return "B/s"
    if name.endswith("_per_s"):
        return f"{name[:-len('_per_s')]}/s"
    if name.endswith("_s"):
        return "s"
    if name.endswith("_fraction") or name.startswith("fraction"):
        return "fraction"
    if name.startswith("n_"):
        return "count"
    return None


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _series(values: list[Any], index: Any):
    """One column with the narrowest honest dtype: Int64 (integers, missing as <NA>), float64
    (any float; missing as NaN), boolean, string; object for anything else (lists, dicts)."""
    import pandas as pd

    present = [v for v in values if v is not None]
    if not present:
        return pd.Series([math.nan] * len(values), index=index, dtype="float64")
    if all(isinstance(v, bool) for v in present):
        return pd.Series(values, index=index, dtype="boolean")
    if all(_is_number(v) for v in present):
        if all(isinstance(v, int) for v in present) and all(-(2**63) <= v < 2**63 for v in present):
            return pd.Series(values, index=index, dtype="Int64")
        return pd.Series([math.nan if v is None else float(v) for v in values], index=index,
                         dtype="float64")
    if all(isinstance(v, str) for v in present):
        return pd.Series(values, index=index, dtype="string")
    return pd.Series(values, index=index, dtype=object)


LIGHT_FIELDS = ("id", "created_utc", "notebook", "magic", "label", "status", "primary_metric", "primary_value",
                "rerun_of", "work", "code", "ratio", "needs", "base_work")


def light_rows(led: Any, *, notebook: Any = ..., magic: str | None = None, newest_first: bool = False
               ) -> dict[str, list[Any]]:
    """What the common view reads of each run, as columns (``LIGHT_FIELDS`` plus ``saved``), from a few
    queries (:func:`_light_columns`: no JSON decoded, no samples read) and the runs kept in memory.

    ``ratio`` is ``vs_baseline`` from the columns (the run's headline value over its label's baseline's,
    same magic and metric, a compared magic, not a re-measurement; the few baselines read once); ``needs``
    marks the runs whose ratio depends on the work they declared (``work``, ``base_work``): :func:`_ratios`
    judges those."""
    from .schema import derived
    from .views import column

    filt, nb = led._resolve_notebook(notebook)
    where, params = ["1"], []
    if filt:
        where.append("notebook IS ?")
        params.append(nb)
    if magic is not None:
        where.append("magic = ?")
        params.append(magic)

    def run(con: Any, version: int, columns: set[str]) -> tuple[dict[str, list[Any]], dict[Any, tuple]]:
        pv, w = column("primary_value", columns), column("work", columns)
        cols = _light_columns(con, " AND ".join(where), tuple(params), columns, nb if filt else ...)
        base = {(nb_, label): rest for nb_, label, *rest in con.execute(
            f"SELECT b.notebook, b.label, r.magic, r.primary_metric, {pv}, {w}, b.run_id FROM baselines b "
            "JOIN runs r ON r.id = b.run_id").fetchall()}
        ab: dict[tuple[Any, ...], float] = {}
        if base:
            iw, rb, ra = (column("interleaved_with", columns, "b."), column("rerun_of", columns, "b."),
                          column("rerun_of", columns, "a."))
            pa, pb = column("primary_value", columns, "a."), column("primary_value", columns, "b.")
            for nb_, label, target, source, va, vb in con.execute(
                    f"SELECT b.notebook, b.label, COALESCE({rb}, b.id), COALESCE({ra}, a.id), {pa}, {pb} "
                    f"FROM runs b JOIN runs a ON a.id = {iw} WHERE {iw} IS NOT NULL AND a.status = 'ok' "
                    "AND b.status = 'ok' AND a.magic = b.magic AND a.primary_metric IS b.primary_metric "
                    "ORDER BY b.id").fetchall():
                if type(va) in (int, float) and va > 0 and type(vb) in (int, float):
                    ab[(nb_, label, source, target)] = vb / va  # the latest pair of the two wins
        return cols, base, ab

    got, bases, pairs = led._read(run) or ({c: [] for c in LIGHT_FIELDS[:11]}, {}, {})
    cols: dict[str, list[Any]] = got
    n = len(cols["id"])
    ratio: list[Any] = [None] * n
    needs: list[int] = [0] * n
    base_work: list[Any] = [None] * n
    compared, num = set(COMPARED), (int, float)
    if bases:  # only the runs of labels that have a baseline are looked at
        for i, key in enumerate(zip(cols["notebook"], cols["label"])):
            b = bases.get(key)
            if b is None or cols["rerun_of"][i] is not None or cols["magic"][i] not in compared \
                    or b[0] != cols["magic"][i] or b[1] != cols["primary_metric"][i]:
                continue
            bv, value = b[2], cols["primary_value"][i]
            if type(bv) in num and bv > 0 and type(value) in num:
                ratio[i] = value / bv
            # a same-process A/B of the baseline (re-measured) and this run is the ratio, as the %perf table
            # says it (timing/history.py baseline_changes): an A/A 1.84x apart in history read +6.4% there
            ratio[i] = pairs.get((key[0], key[1], b[4], cols["id"][i]), ratio[i])
            needs[i] = int(cols["work"][i] is not None or b[3] is not None)
            base_work[i] = b[3]
    cols.update(ratio=ratio, needs=needs, base_work=base_work)
    saved = [True] * len(cols["id"])
    for p in led.pending:
        if (filt and p["notebook"] != nb) or (magic is not None and p["magic"] != magic):
            continue
        d = {c: p.get(c) for c in LIGHT_FIELDS}
        d["primary_value"], d["rerun_of"], _, d["work"] = derived(p.get("options"), p.get("metrics"),
                                                                  p.get("primary_metric"))
        d["ratio"], d["needs"], d["base_work"] = None, 1, None  # judged whole by _ratios
        d["created_utc"] = _epoch(p.get("created_utc"))
        for c in LIGHT_FIELDS:
            cols[c].append(d[c])
        saved.append(False)
    cols["saved"] = saved
    if newest_first:
        cols = {c: v[::-1] for c, v in cols.items()}
    return cols


_EPOCH_SQL: list[str] = []


def _epoch_sql(con: Any) -> str:
    """SQL for a run's time in epoch seconds: ``unixepoch`` (SQLite >= 3.38, ten times faster than
    ``strftime('%s')`` over 100,000 runs), else ``strftime``."""
    if not _EPOCH_SQL:
        try:
            con.execute("SELECT unixepoch('2026-01-01T00:00:00Z')").fetchone()
            _EPOCH_SQL.append("unixepoch(created_utc)")
        except Exception:
            _EPOCH_SQL.append("CAST(strftime('%s', created_utc) AS INTEGER)")
    return _EPOCH_SQL[0]


# magic and status by the 7-bit key _light_columns packs them in (magic * 8 + status; 127: neither known)
_MAGIC_OF_KEY = [KNOWN_MAGICS[k >> 3] if k >> 3 < len(KNOWN_MAGICS) else None for k in range(128)]
_STATUS_OF_KEY = [STATUSES[k & 7] if k & 7 < len(STATUSES) else None for k in range(128)]


def _light_columns(con: Any, where: str, params: tuple, columns: set[str], notebook: Any = ...
                   ) -> dict[str, list[Any]]:
    """The light columns of the runs matching ``where``, oldest first, read with as few values per run as
    it takes: each value read costs ~0.4 µs in Python's sqlite3 whatever its type, so the id, the time
    and a small int for magic and status travel packed in one integer, the notebook not at all when the
    caller filtered on it (``notebook``), and rerun_of and work (mostly NULL) only for the runs that have
    them."""
    from .views import column

    pv, ro, w = column("primary_value", columns), column("rerun_of", columns), column("work", columns)
    known = ", ".join(f"'{m}'" for m in KNOWN_MAGICS)
    statuses = ", ".join(f"'{x}'" for x in STATUSES)
    mcase = "CASE magic " + " ".join(f"WHEN '{m}' THEN {i}" for i, m in enumerate(KNOWN_MAGICS)) + " END"
    scase = "CASE status " + " ".join(f"WHEN '{x}' THEN {i}" for i, x in enumerate(STATUSES)) + " END"
    key = f"CASE WHEN magic IN ({known}) AND status IN ({statuses}) THEN ({mcase}) * 8 + ({scase}) ELSE 127 END"
    epoch = f"COALESCE({_epoch_sql(con)}, -1)"
    # id (24 bits), epoch + 1 (32 bits: until 2106), key (7 bits) in one 63-bit integer
    packed = f"CASE WHEN id < 16777216 AND {epoch} BETWEEN -1 AND 4294967294 THEN (id << 39) | (({epoch} + 1) << 7) | ({key}) END"
    strings = "label, primary_metric, code" + (", notebook" if notebook is ... else "")
    got = con.execute(f"SELECT {packed}, {pv}, {strings} FROM runs r WHERE {where} ORDER BY id", params).fetchall()
    cols: dict[str, list[Any]] = {}
    n = len(got)
    packs = [r[0] for r in got]
    if None in packs:  # an id or a time that does not pack: read them as they are
        extra = con.execute(f"SELECT id, {epoch}, {key} FROM runs r WHERE {where} ORDER BY id", params).fetchall()
        ids, created, keys = (list(c) for c in zip(*extra)) if extra else ([], [], [])
        created = [None if c == -1 else c for c in created]
    else:
        import numpy as np

        p = np.array(packs, dtype=np.int64)
        ids = (p >> 39).tolist()
        e = ((p >> 7) & 0xFFFFFFFF) - 1
        created = [None if c == -1 else c for c in e.tolist()] if n and int(e.min()) == -1 else e.tolist()
        keys = (p & 0x7F).tolist()
    cols["id"], cols["created_utc"] = ids, created
    cols["primary_value"] = [r[1] for r in got]
    cols["label"] = [r[2] for r in got]
    cols["primary_metric"] = [r[3] for r in got]
    cols["code"] = [r[4] for r in got]
    cols["notebook"] = [r[5] for r in got] if notebook is ... else [notebook] * n
    cols["magic"] = [_MAGIC_OF_KEY[k] for k in keys]
    cols["status"] = [_STATUS_OF_KEY[k] for k in keys]
    cols["rerun_of"], cols["work"] = [None] * n, [None] * n
    pos: dict[int, int] = {}

    def put(i: int, **values: Any) -> None:  # a run read apart from the rest, put at its place
        if not pos:
            pos.update((run, j) for j, run in enumerate(ids))
        for name, v in values.items():
            cols[name][pos[i]] = v

    if 127 in set(keys):  # a magic or status this perfmagic does not know (a newer one wrote it)
        for i, m, st in con.execute(f"SELECT id, magic, status FROM runs r WHERE {where} AND NOT "
                                    f"(magic IN ({known}) AND status IN ({statuses}))", params):
            put(i, magic=m, status=st)
    # one pass over the table without an index (an index on the notebook would look up every row)
    for i, r, wk in con.execute(f"SELECT id, {ro}, {w} FROM runs r NOT INDEXED WHERE {where} AND ({ro} IS NOT NULL "
                                f"OR {w} IS NOT NULL)", params):
        put(i, rerun_of=r, work=wk)
    return {c: cols[c] for c in LIGHT_FIELDS[:11]}


def _epoch(text: Any) -> int | None:
    from datetime import datetime

    try:
        return int(datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp())
    except ValueError:
        return None


def _num(v: Any) -> float:
    return float(v) if _is_number(v) else math.nan


def _work(text: Any) -> dict[str, Any]:
    import json

    try:
        w = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        w = None
    return {"options": {"work": w if isinstance(w, dict) else {}}}


def _ratios(led: Any, t: dict[str, list[Any]]) -> list[float]:
    """``vs_baseline`` of each run of the light table ``t``: SQL's ratio, except where it depends on the
    work the runs declared (``needs``): per unit of work when both declare different amounts of it, NaN
    when only one does (:func:`perfmagic.timing.basis.basis`). A run kept in memory, or one of a schema-1
    file (whose work is not a column), is read whole for that."""
    from ..timing.basis import basis

    out = t["ratio"]
    if any(t["needs"]):
        out = list(out)
    bases = None
    for i in (i for i, n in enumerate(t["needs"]) if n):
        if t["saved"][i] and t["work"][i] != "?" and t["base_work"][i] != "?":  # schema 2: the work columns
            if t["ratio"][i] is None:
                continue
            bs = basis(_work(t["base_work"][i]), _work(t["work"][i]))
            a, b = 1.0, float(t["ratio"][i])
        else:
            if bases is None:
                bases = led.baselines(notebook=None)
            bid = bases.get((t["notebook"][i], t["label"][i]))
            if t["magic"][i] not in COMPARED or bid is None or t["rerun_of"][i] is not None:
                continue
            try:
                ra, rb = led.get(bid), (led.get(t["id"][i]) if t["saved"][i] else
                                        next(r for r in led.rows(notebook=None) if r["id"] == t["id"][i]))
            except (UnknownRunError, LedgerError, StopIteration):
                continue
            if (ra.get("magic"), ra.get("primary_metric")) != (rb.get("magic"), rb.get("primary_metric")):
                continue
            a = _num((ra.get("metrics") or {}).get(ra.get("primary_metric") or ""))
            b = _num((rb.get("metrics") or {}).get(rb.get("primary_metric") or ""))
            if not (a > 0 and b == b):
                continue
            bs = basis(ra, rb)
        if bs.refusal:
            out[i] = math.nan
        elif bs.unit and bs.a and bs.b:
            out[i] = (b / bs.b) / (a / bs.a)
        else:
            out[i] = b / a
    return out


def _category(values: list[Any], index: Any, categories: tuple[str, ...] | None = None) -> Any:
    """A categorical column from a list of few distinct strings (None: missing), coded through a dict
    rather than hashed by pandas: ``categories`` fixed, else the values present, sorted."""
    import pandas as pd

    cats = list(categories) if categories is not None else sorted({v for v in set(values) if v is not None})
    code = {c: i for i, c in enumerate(cats)}
    code[None] = -1
    try:
        codes = [code[v] for v in values]
    except KeyError:  # a value outside fixed categories: missing, as pandas would make it
        codes = [code.get(v, -1) for v in values]
    return pd.Series(pd.Categorical.from_codes(codes, categories=cats), index=index)


def _common(led: Any, t: dict[str, list[Any]], *, notebooks: bool) -> Any:
    import pandas as pd

    index = pd.Index(t["id"], name="id", dtype="Int64")
    if None in t["created_utc"]:
        created = pd.to_datetime(pd.Series(t["created_utc"], index=index, dtype="Int64"), unit="s", utc=True)
    else:  # every time known: no masked array to build
        import numpy as np

        created = pd.Series(pd.to_datetime(np.asarray(t["created_utc"], dtype=np.int64), unit="s", utc=True),
                            index=index)
    data: dict[str, Any] = {"created": created}
    if notebooks:
        data["notebook"] = pd.Series(t["notebook"], index=index, dtype="string")
    data["magic"] = _category(t["magic"], index)
    data["label"] = pd.Series(t["label"], index=index, dtype="string")
    data["status"] = _category(t["status"], index, ("ok", "interrupted", "failed"))
    names = t["primary_metric"]
    data["primary_metric"] = pd.Series(names, index=index, dtype="string")
    try:
        data["value"] = pd.Series(t["primary_value"], index=index, dtype="float64")
    except (TypeError, ValueError):  # schema 1's JSON: any type
        data["value"] = pd.Series([_num(v) for v in t["primary_value"]], index=index, dtype="float64")
    units = {n: metric_unit(n) for n in set(names) if n}
    data["unit"] = data["primary_metric"].map(units).astype("string")
    data["vs_baseline"] = pd.Series(_ratios(led, t) if t["id"] else [], index=index, dtype="float64")
    again = t["rerun_of"]
    roles = [None if x is None else f"rerun-of #{x}" for x in again] if any(x is not None for x in again) else None
    data["role"] = pd.Series(roles, index=index, dtype="string")  # <NA>: an ordinary run of its label
    return pd.DataFrame(data, index=index)


def _metric_names(rows: list[dict[str, Any]]) -> list[str]:
    names: list[str] = []
    for r in rows:
        for k in r["metrics"]:
            if k not in names:
                names.append(k)
    return names


def _long(rows: list[dict[str, Any]], *, notebooks: bool) -> Any:
    import pandas as pd

    recs = []
    for r in rows:
        for k, v in r["metrics"].items():
            if v is None or (isinstance(v, float) and math.isnan(v)):
                continue
            num = _is_number(v)
            recs.append((r["id"], r["created_utc"], r.get("notebook"), r.get("magic"), r.get("label"),
                         r.get("status"), k, float(v) if num else math.nan,
                         None if num else (v if isinstance(v, str) else _dumps_strict(v)), metric_unit(k)))
    cols = ["id", "created", "notebook", "magic", "label", "status", "metric", "value", "text", "unit"]
    z = list(zip(*recs)) if recs else [()] * len(cols)
    frame = pd.DataFrame({
        "id": pd.Series(z[0], dtype="Int64"),
        "created": pd.to_datetime(pd.Series(z[1], dtype=object), utc=True),
        "notebook": pd.Series(z[2], dtype="string"),
        "magic": pd.Series(z[3], dtype="category"),
        "label": pd.Series(z[4], dtype="string"),
        "status": pd.Series(z[5], dtype=pd.CategoricalDtype(["ok", "interrupted", "failed"])),
        "metric": pd.Series(z[6], dtype="string"),
        "value": pd.Series(z[7], dtype="float64"),
        "text": pd.Series(z[8], dtype="string"),
        "unit": pd.Series(z[9], dtype="string"),
    })
    return frame if notebooks else frame.drop(columns="notebook")


def ledger_frame(magic: str | None = None, view: str | None = None, *, ledger: Any, all_notebooks: bool = False,
                 newest_first: bool = False) -> Any:
    """The runs of ``ledger``'s notebook (``all_notebooks=True``: of every notebook sharing the ledger
    file) as a pandas DataFrame, oldest first; see the module docstring for the three views.

    ``magic`` keeps that magic's runs (``"gpubench"``, ``"roofline"``...); ``view`` defaults to
    ``"common"``, or ``"wide"`` when ``magic`` is given. ``perfmagic.ledger()`` passes the ledger of the
    running notebook (or of the working directory outside IPython)."""
    if view is None:
        view = "common" if magic is None else "wide"
    if view not in VIEWS:
        raise ValueError(f"view: got {view!r}; expected one of {', '.join(repr(v) for v in VIEWS)}")
    notebook = None if all_notebooks else ...
    light = light_rows(ledger, notebook=notebook, magic=magic, newest_first=newest_first)
    if magic is not None and not light["id"] and magic not in KNOWN_MAGICS:
        present = sorted(set(light_rows(ledger, notebook=notebook)["magic"]))
        raise ValueError(f"magic: got {magic!r}, which is not a perfmagic magic; expected one of "
                         f"{', '.join(KNOWN_MAGICS)}" + (f" (this ledger has runs of {', '.join(present)})"
                                                         if present else ""))
    if view == "long":
        return _long(ledger.rows(notebook=notebook, magic=magic, newest_first=newest_first), notebooks=all_notebooks)
    frame = _common(ledger, light, notebooks=all_notebooks)
    if view == "wide":
        rows = ledger.rows(notebook=notebook, magic=magic, newest_first=newest_first)
        taken = set(frame.columns) | {"id", "code"}
        for k in _metric_names(rows):
            col = f"metric.{k}" if k in taken else k
            frame[col] = _series([r["metrics"].get(k) for r in rows], frame.index)
    import pandas as pd

    frame["code"] = pd.Series(light["code"], index=frame.index, dtype="string")
    if view == "wide":
        from ..record import relation

        frame["magic_line"] = pd.Series([r.get("magic_line") or "" for r in rows], index=frame.index, dtype="string")
        for name in RELATIONS:  # the runs this one was measured with or for (Int64, <NA>: none)
            frame[name] = pd.Series([relation(r, name) for r in rows], index=frame.index, dtype="Int64")
        frame["options"] = _series([r.get("options") for r in rows], frame.index)
    return frame


#: a run's relations to other runs, its own columns in the wide view and the CSV export
RELATIONS = ("rerun_of", "interleaved_with", "thread_limit")


def wide_frame(rows: list[dict[str, Any]]) -> Any:
    """:meth:`Ledger.to_frame`: index ``id``; ``created`` (UTC), notebook, magic, label, status,
    primary_metric, one column per metric key of every run (missing: NaN or <NA>; named
    ``metric.<key>`` if it would clash), code, code_hash, env_hash, options (dicts), saved."""
    import pandas as pd

    lead = ["created", "notebook", "magic", "label", "status", "primary_metric"]
    trail = ["code", "code_hash", "env_hash", "options", "saved"]
    taken = set(lead) | set(trail) | {"id"}
    index = pd.Index([r["id"] for r in rows], name="id", dtype="Int64")
    data: dict[str, Any] = {
        "created": pd.to_datetime(
            pd.Series([r["created_utc"] for r in rows], index=index, dtype=object), utc=True
        ),
    }
    for c in lead[1:]:
        data[c] = [r[c] for r in rows]
    for k in _metric_names(rows):
        data[f"metric.{k}" if k in taken else k] = _series([r["metrics"].get(k) for r in rows], index)
    for c in trail:
        data[c] = [r[c] for r in rows]
    frame = pd.DataFrame(data, index=index)
    frame["saved"] = frame["saved"].astype(bool)
    return frame


def export(led: Any, path: str | os.PathLike, *, notebook: Any = ...) -> pathlib.Path:
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
    rows = led.rows(notebook=notebook, newest_first=False)
    from ..record import relation
    from .views import prefetch_samples

    prefetch_samples(led, rows)  # every run's samples in a few queries, not one each
    try:
        if suffix == ".json":
            with open(target, "w", encoding="utf-8") as fh:
                fh.write(_dumps_strict(rows))
                fh.write("\n")
            return target
        metric_names = _metric_names(rows)
        head = [
            "id", "created_utc", "notebook", "cell_id", "session", "magic", "label",
            "status", "primary_metric",
        ]  # fmt: skip
        tail = ["magic_line", "code", "code_hash", *RELATIONS, "options", "env", "env_hash", "samples", "note",
                "saved"]
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
                out["magic_line"] = r.get("magic_line") or ""
                for k in RELATIONS:
                    out[k] = relation(r, k)
                for k in ("options", "env", "samples"):
                    out[k] = None if r[k] is None else _dumps_strict(r[k])
                writer.writerow(out)
    except OSError as exc:
        raise LedgerError(f"cannot write the export {target}: {exc}") from exc
    return target
