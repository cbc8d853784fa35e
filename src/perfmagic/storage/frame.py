"""The ledger as files and as pandas frames: ``export()`` to .csv/.json, and three tidy views.

:func:`ledger_frame` (what ``perfmagic.ledger()`` returns) offers:

``view="common"`` (default)
    one row per run, the columns every magic has: index ``id`` (Int64); ``created`` (UTC
    timestamp), ``magic`` and ``status`` (category), ``label``, ``primary_metric`` (string),
    ``value`` (the primary metric, float), ``unit`` (of ``value``: ``s``, ``B``, ``fraction``...),
    ``vs_baseline`` (float: B/A, this run's primary metric over its label's baseline's, for
    ``gpubench`` runs whose label has a baseline; NaN otherwise) and ``code``.
``view="wide"`` (the default when ``magic=`` is given)
    the common columns, then one column per metric key *of the selected runs only*, each with
    its own dtype (Int64 for counts, float for measures, boolean, string). ``magic="roofline"``
    gives the roofline metrics and no others.
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

from .codec import _dumps_strict
from .db import LedgerError, UnknownRunError

__all__ = ["KNOWN_MAGICS", "VIEWS", "export", "ledger_frame", "metric_unit", "wide_frame"]

VIEWS = ("common", "wide", "long")
KNOWN_MAGICS = ("gpubench", "roofline", "amdahl", "estimate", "dataloader_check", "memory", "flame",
                "lineprof")
# magics whose runs are compared with their label's baseline in ``vs_baseline`` (a time ratio)
COMPARED = ("gpubench",)

_UNITS = {
    "flops": "FLOP", "bytes": "B", "intensity": "FLOP/B", "ridge": "FLOP/B",
    "flops_per_s": "FLOP/s", "peak_flops_per_s": "FLOP/s", "attainable_flops_per_s": "FLOP/s",
    "bytes_per_s": "B/s", "loader_batches_per_s": "batch/s", "units_per_s": "unit/s",
    "best_throughput": "batch/s", "rate_hz": "Hz",
    "S": "fraction", "S_stderr": "fraction", "sigma": "1", "kappa": "1", "exponent": "1",
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
                "rerun_of", "has_work", "code")


def light_rows(led: Any, *, notebook: Any = ..., magic: str | None = None, newest_first: bool = False
               ) -> dict[str, list[Any]]:
    """What the common view reads of each run, as columns (``LIGHT_FIELDS`` plus ``saved``), from one query
    (no JSON decoded, no samples read) and the runs kept in memory."""
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

    def run(con: Any, version: int, columns: set[str]) -> list[tuple]:
        pick = ", ".join(f"{column(c, columns)} AS {c}" if c in ("primary_value", "rerun_of", "has_work") else c
                         for c in LIGHT_FIELDS)
        return con.execute(f"SELECT {pick} FROM runs WHERE {' AND '.join(where)} ORDER BY id", tuple(params)).fetchall()

    got = list(led._read(run) or [])
    n_saved = len(got)
    for p in led.pending:
        if (filt and p["notebook"] != nb) or (magic is not None and p["magic"] != magic):
            continue
        d = {c: p.get(c) for c in LIGHT_FIELDS}
        d["primary_value"], d["rerun_of"], _, d["has_work"] = derived(p.get("options"), p.get("metrics"),
                                                                      p.get("primary_metric"))
        got.append(tuple(d[c] for c in LIGHT_FIELDS))
    saved = [True] * n_saved + [False] * (len(got) - n_saved)
    if newest_first:
        got, saved = got[::-1], saved[::-1]
    cols = dict(zip(LIGHT_FIELDS, (list(c) for c in zip(*got)))) if got else {c: [] for c in LIGHT_FIELDS}
    cols["saved"] = saved
    return cols


def _light(row: dict[str, Any]) -> dict[str, Any]:
    """A full row (``Ledger.get``) as a light record."""
    from .codec import _dumps
    from .schema import derived

    d = {c: row.get(c) for c in LIGHT_FIELDS}
    d["primary_value"], d["rerun_of"], _, d["has_work"] = derived(_dumps(row.get("options")),
                                                                  _dumps(row.get("metrics")), row.get("primary_metric"))
    return d


def _num(v: Any) -> float:
    return float(v) if _is_number(v) else math.nan


def _ratios(led: Any, t: dict[str, list[Any]]) -> list[float]:
    """``vs_baseline`` of each run of the light table ``t``: primary metric / the label's baseline's (same
    magic and metric, a compared magic, both positive), else NaN; per unit of work when both runs declare
    different amounts of it, NaN when only one does (:func:`perfmagic.timing.flow.basis`: the two runs
    are read whole only then)."""
    pos = {rid: i for i, rid in enumerate(t["id"])}
    bases = led.baselines(notebook=None)
    cache: dict[int, dict[str, Any] | None] = {}

    def base_of(bid: int) -> dict[str, Any] | None:
        if bid not in cache:
            i = pos.get(bid)
            try:
                cache[bid] = {c: t[c][i] for c in LIGHT_FIELDS} if i is not None else _light(led.get(bid))
            except (UnknownRunError, LedgerError):
                cache[bid] = None
        return cache[bid]

    out = []
    for i, (nb, label, magic, metric, value, again, work) in enumerate(zip(
            t["notebook"], t["label"], t["magic"], t["primary_metric"], t["primary_value"], t["rerun_of"],
            t["has_work"])):
        bid = bases.get((nb, label))
        if magic not in COMPARED or bid is None or again is not None:
            out.append(math.nan)
            continue
        base = base_of(bid)
        a = _num(base["primary_value"]) if base else math.nan
        b = _num(value)
        same = base is not None and (base["magic"], base["primary_metric"]) == (magic, metric)
        if same and magic == "gpubench" and (work or base["has_work"]):
            from ..timing.flow import basis

            try:
                bs = basis(led.get(bid), led.get(t["id"][i]) if t["saved"][i] else _pending(led, t["id"][i]))
            except (UnknownRunError, LedgerError):
                bs = None
            if bs is None or bs.refusal:
                same = False
            elif bs.unit and bs.a and bs.b:
                a, b = a / bs.a, b / bs.b
        out.append(b / a if same and a > 0 and b == b else math.nan)
    return out


def _pending(led: Any, rid: int) -> dict[str, Any]:
    return next(r for r in led.rows(notebook=None) if r["id"] == rid)


def _common(led: Any, t: dict[str, list[Any]], *, notebooks: bool) -> Any:
    import pandas as pd

    index = pd.Index(t["id"], name="id", dtype="Int64")
    created = pd.to_datetime(pd.Series(t["created_utc"], index=index, dtype=object), utc=True, format="ISO8601")
    data: dict[str, Any] = {"created": created}
    if notebooks:
        data["notebook"] = pd.Series(t["notebook"], index=index, dtype="string")
    data["magic"] = pd.Series(t["magic"], index=index, dtype="category")
    data["label"] = pd.Series(t["label"], index=index, dtype="string")
    data["status"] = pd.Series(t["status"], index=index, dtype=pd.CategoricalDtype(["ok", "interrupted", "failed"]))
    names = t["primary_metric"]
    data["primary_metric"] = pd.Series(names, index=index, dtype="string")
    data["value"] = pd.Series([_num(v) for v in t["primary_value"]], index=index, dtype="float64")
    units = {n: metric_unit(n) for n in set(names) if n}
    data["unit"] = pd.Series([units.get(n) for n in names], index=index, dtype="string")
    data["vs_baseline"] = pd.Series(_ratios(led, t) if t["id"] else [], index=index, dtype="float64")
    data["role"] = pd.Series([None if x is None else f"rerun-of #{x}" for x in t["rerun_of"]], index=index,
                             dtype="string")  # <NA>: an ordinary run of its label
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


def ledger_frame(magic: str | None = None, view: str | None = None, *, all_notebooks: bool = False,
                 newest_first: bool = False, ledger: Any = None) -> Any:
    """The runs of this notebook (``all_notebooks=True``: of every notebook sharing the ledger
    file) as a pandas DataFrame, oldest first; see the module docstring for the three views.

    ``magic`` keeps that magic's runs (``"gpubench"``, ``"roofline"``...); ``view`` defaults to
    ``"common"``, or ``"wide"`` when ``magic`` is given. ``ledger`` defaults to the ledger of
    the running notebook (or of the working directory outside IPython)."""
    if view is None:
        view = "common" if magic is None else "wide"
    if view not in VIEWS:
        raise ValueError(f"view: got {view!r}; expected one of {', '.join(repr(v) for v in VIEWS)}")
    if ledger is None:
        from .session import current_ledger

        ledger = current_ledger()
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
    frame["code"] = _series(light["code"], frame.index).astype("string")
    if view == "wide":
        frame["options"] = _series([r.get("options") for r in rows], frame.index)
    return frame


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
