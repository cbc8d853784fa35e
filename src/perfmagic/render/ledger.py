"""The ``%perf`` table: one line per ledger run, fitted to the terminal, every number with its unit.

Reads ledger rows (plain dicts from :meth:`perfmagic.storage.ledger.Ledger.rows`); imports no
analysis module. The text table fits ``shutil.get_terminal_size()`` (100 columns where there is no
terminal, as in a kernel): the label and code columns are cut with "…" first, then the trend,
when and code columns are dropped, then the result is cut. The HTML table shows every cell whole.

Columns: ``id`` (``*`` for a run kept only in memory), ``when`` (local time), ``magic``,
``label``, ``status``, ``result`` (the run's headline metric, in words and units: "median 5.07 ms
±0.2% (120 × 1 calls)", "49% of samples in hot()"), ``vs baseline`` (the change against the
label's baseline and its verdict) and ``trend`` (a sparkline of the label's headline metric over
its last runs, with the first and last values beside it), then ``code`` (the cell's first line).

The ledger file's own messages are worded here too: the fix for a failed write (:func:`write_fix`), a run
kept in memory (:func:`unsaved_text`, :func:`unwritable_text`) and a ledger of a newer schema
(:func:`newer_schema_text`). The storage code imports them inside the functions that need them, so
``%load_ext`` never loads this module.
"""

from __future__ import annotations

import html
import math
import shutil
from typing import Any

from .comparison import VERDICT_COLORS
from .text import pct, wrap
from .units import fmt_bytes, fmt_time

__all__ = ["history_text", "ledger_bundle", "newer_schema_text", "result_text", "sparkline", "terminal_width",
           "unsaved_text", "unwritable_text", "write_fix"]

SPARK = "▁▂▃▄▅▆▇█"
COLUMNS = ("id", "when", "magic", "label", "status", "result", "vs baseline", "trend", "code")
_MIN = {"label": 10, "code": 12, "result": 24}


def terminal_width(default: int = 100) -> int:
    """The terminal's width (``$COLUMNS`` first), ``default`` where there is none; at least 60."""
    return max(60, shutil.get_terminal_size((default, 24)).columns)


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and not (isinstance(v, float) and math.isnan(v))


def _pct(v: Any) -> str:
    """A fraction as a whole percentage (:func:`perfmagic.render.text.pct`); "—" when there is none."""
    return pct(v, 0) if _num(v) else "—"


def value_text(v: Any, key: str) -> str:
    """A metric value with its unit, from the metric's name (``_s``, ``_bytes``, fractions)."""
    if not _num(v):
        return "—" if v is None else str(v)
    if key.endswith("_per_s"):
        return f"{v:.4g} {key[:-6]}/s"
    if key.endswith("_s"):
        return fmt_time(v, 3)
    if key.endswith("_bytes") or key == "bytes":
        return fmt_bytes(v)
    if "fraction" in key or key == "S":
        return f"{v:.0%}"
    return f"{v:.4g} ({key})"


def _short_fn(name: Any) -> str:
    """``hot (In [3]:2)`` -> ``hot()``."""
    text = str(name or "?")
    return text.split(" (", 1)[0] + "()" if " (" in text else text


def result_text(row: dict[str, Any]) -> str:
    """The headline of a ledger row in words and units, e.g. ``median 5.07 ms ±0.2% (120 × 1 calls)``."""
    m = row.get("metrics") or {}
    magic = row.get("magic")
    if magic == "amdahl":
        parts = [f"serial fraction S={m['S']:.3g}" if _num(m.get("S")) else "no fit"]
        if _num(m.get("max_speedup")):
            parts.append(f"best speedup {m['max_speedup']:.2f}×")
        if m.get("recommended_workers"):
            parts.append(f"worth {m['recommended_workers']} workers")
        return ", ".join(parts)
    if magic == "dataloader_check" and _num(m.get("data_wait_fraction")):
        txt = f"{m.get('verdict') or ''}: {m['data_wait_fraction']:.0%} of each step waits for data".lstrip(": ")
        if _num(m.get("step_s")):
            txt += f" (step {fmt_time(m['step_s'], 3)})"
        if m.get("best_setting"):
            txt += f"; best {m['best_setting']}"
        return txt
    if magic == "estimate":
        if not _num(m.get("predicted_s")) or not m.get("reliable", True):
            return "no reliable estimate"
        txt = f"predicts {fmt_time(m['predicted_s'], 3)}"
        if _num(m.get("low_s")) and _num(m.get("high_s")):
            txt += f" [{fmt_time(m['low_s'], 3)} – {fmt_time(m['high_s'], 3)}]"
        if m.get("verdict") and m["verdict"] not in ("no budget given", "no limit given"):
            txt += f", {m['verdict']}"
        if _num(m.get("actual_s")):
            err = m.get("time_error")
            txt += f"; actual {fmt_time(m['actual_s'], 3)}" + (f" ({err:+.0%} off)" if _num(err) else "")
        return txt
    if magic == "flame" or row.get("primary_metric") == "top_self_fraction":
        if not _num(m.get("top_self_fraction")):
            return "no samples" if m.get("n_samples") == 0 else "—"
        return f"{m['top_self_fraction']:.0%} of samples in {_short_fn(m.get('top1_self_name'))}"
    if magic == "where":  # where a re-measured change went (%perf compare)
        if not _num(m.get("total_delta_s")):
            return "where: cannot tell"
        from .where import signed_time

        named = ", ".join(map(str, m.get("named") or [])) or "no function told from 0"
        return f"B − A {signed_time(m['total_delta_s'])} per call; went to {named}"
    if magic == "lineprof" or row.get("primary_metric") == "total_s" and "hot_line" in m:
        txt = f"total {fmt_time(m.get('total_s'), 3)}"
        if _num(m.get("hot_fraction")) and m.get("hot_line"):
            txt += f", {m['hot_fraction']:.0%} in {str(m['hot_line']).split(':', 1)[0]}"
        return txt
    if m.get("bound") and _num(m.get("fraction_of_roof")):  # a roofline run
        bound = "at the ridge" if m.get("at_ridge") else f"{m['bound']}-bound"
        return f"{bound}, {m['fraction_of_roof']:.0%} of roof (median {fmt_time(m.get('median_s'))})"
    key = row.get("primary_metric")
    v = m.get(key) if key else None
    if not _num(v):
        return "no samples" if m.get("n_samples") == 0 else "—"
    if key == "median_s":
        txt = f"median {fmt_time(v)}"
        lo, hi = m.get("ci_low_s"), m.get("ci_high_s")
        if _num(lo) and _num(hi) and v:
            txt += f" ±{(hi - lo) / 2 / v:.1%}"
        if m.get("n_samples") is not None:
            txt += f" ({m['n_samples']} × {m.get('number', 1)} calls)"
        return txt
    if key == "peak_bytes":
        txt = f"peak +{fmt_bytes(v)}"
        if _num(m.get("increment_bytes")):
            txt += f", increment {fmt_bytes(m['increment_bytes'])}"
        return txt
    return f"{key} {value_text(v, key)}"


def sparkline(values: list[Any]) -> str:
    """``▁▃█``: one block per value, lowest to highest (missing values are skipped)."""
    vals = [v for v in values if _num(v)]
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    if hi <= lo:
        return SPARK[3] * len(vals)
    return "".join(SPARK[min(7, int((v - lo) / (hi - lo) * 7.999))] for v in vals)


def _rerun(row: dict[str, Any]) -> bool:
    from ..record import relation

    return relation(row, "rerun_of") is not None


def _trends(rows: list[dict[str, Any]], every: list[dict[str, Any]], last: int = 8) -> dict[Any, str]:
    """Per shown run: its label's headline metric over the label's last ``last`` runs of the same
    magic up to this one, as a sparkline with the first and last values beside it."""
    out: dict[Any, str] = {}
    series: dict[tuple[Any, Any, Any], list[tuple[int, Any]]] = {}
    for r in sorted(every, key=lambda r: r["id"]):
        if _rerun(r):
            continue  # the A side re-measured by --vs: evidence for one comparison, not history
        key = (r.get("label"), r.get("magic"), r.get("primary_metric"))
        series.setdefault(key, []).append((r["id"], (r.get("metrics") or {}).get(r.get("primary_metric") or "")))
    for r in rows:
        metric = r.get("primary_metric") or ""
        hist = [v for i, v in series.get((r.get("label"), r.get("magic"), metric), []) if i <= r["id"] and _num(v)]
        hist = hist[-last:]
        if len(hist) > 1:
            first, end = value_text(hist[0], metric), value_text(hist[-1], metric)
            unit = first.rpartition(" ")[2]
            if " " in first and end.endswith(" " + unit):
                first = first.rpartition(" ")[0]  # "4→2 ms", not "4 ms→2 ms"
            out[r["id"]] = f"{sparkline(hist)} {first}→{end}"
    return out


def _when(created: str | None) -> str:
    if not created:
        return ""
    from datetime import datetime

    try:
        dt = datetime.fromisoformat(created.replace("Z", "+00:00")).astimezone()
    except ValueError:
        return created
    return dt.strftime("%m-%d %H:%M")


def _first_code_line(code: str | None) -> str:
    lines = [ln for ln in (code or "").splitlines() if ln.strip()]
    body = [ln for ln in lines if not ln.lstrip().startswith("%%")]
    return (body[0] if body else (lines[0] if lines else "")).strip()


def _verdict_only(cell: str) -> str:
    """A ``vs baseline`` cell without any sparkline its maker appended (the trend column has it)."""
    return cell.rstrip(SPARK + " ")


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else (text[: width - 1] + "…" if width > 1 else "…")


def _fit(table: list[list[str]], width: int) -> tuple[list[str], list[int]]:
    """The columns to show and their widths so that a line fits ``width``."""
    cols = list(COLUMNS)
    widths = {c: max([len(c)] + [len(t[i]) for t in table]) for i, c in enumerate(COLUMNS)}
    for c in ("trend", "vs baseline"):
        if widths[c] == len(c) and not any(t[COLUMNS.index(c)] for t in table):
            cols.remove(c)  # an empty column says nothing
    if table and all(t[COLUMNS.index("status")] == "ok" for t in table):
        cols.remove("status")  # nor does one that says "ok" on every row

    def total() -> int:
        return sum(widths[c] for c in cols) + 2 * (len(cols) - 1)

    natural = dict(widths)
    for c in ("code", "label"):
        widths[c] = min(widths[c], _MIN[c])
    for c in ("trend", "when", "code"):
        if total() > width and c in cols:
            cols.remove(c)
    for c, least in (("result", _MIN["result"]), ("label", 6)):
        if total() > width:
            widths[c] = max(min(widths[c], least), widths[c] - (total() - width))
    for c in ("label", "code"):  # what is left goes to the cut columns
        if c in cols and total() < width:
            widths[c] = min(natural[c], widths[c] + width - total())
    return cols, [widths[c] for c in cols]


def ledger_bundle(rows: list[dict[str, Any]], *, total: int, where: str, notebook: str | None,
                  changes: dict[Any, str] | None = None, every: list[dict[str, Any]] | None = None,
                  width: int | None = None, label: str | None = None) -> dict[str, Any]:
    """text/plain and text/html for ``%perf``: one line per run, newest first.

    ``changes``: ``{run id: "+2.1% slower"}`` for the *vs baseline* column; ``every``: all runs of
    the ledger view (for the trend column; default ``rows``); ``width``: the text width (default:
    the terminal's, see :func:`terminal_width`)."""
    width = terminal_width() if width is None else max(40, width)
    changes = changes or {}
    trends = _trends(rows, every if every is not None else rows)
    shown = f" (newest {len(rows)} shown; -n N for more)" if total > len(rows) else ""
    of = f", label {label!r}" if label is not None else ""
    title = (f"perfmagic ledger of {notebook or 'no notebook (working directory)'}{of}: {total} "
             f"run{'s' if total != 1 else ''}{shown}")
    where_line = f"file: {where}" if len(where) + 6 <= width else f"file: …{where[-(width - 7):]}"
    table = [[str(r.get("id")) + ("" if r.get("saved", True) else "*"), _when(r.get("created_utc")),
              r.get("magic") or "", r.get("label") or "", r.get("status") or "", result_text(r),
              _verdict_only(changes.get(r.get("id"), "")), trends.get(r.get("id"), ""),
              _first_code_line(r.get("code"))] for r in rows]
    cols, widths = _fit(table, width)
    idx = [COLUMNS.index(c) for c in cols]
    fmt = "  ".join("{:<%d}" % w for w in widths)
    lines = [_cut(title, width), where_line, fmt.format(*cols).rstrip()]
    lines += [fmt.format(*(_cut(t[i], w) for i, w in zip(idx, widths))).rstrip() for t in table]
    notes = []
    if not rows:
        notes.append("(no runs yet: time something with %%gpubench)")
    if any(not r.get("saved", True) for r in rows):
        notes.append("* kept in memory only: the ledger file could not be written")
    if "vs baseline" in cols:
        notes.append("vs baseline: the change of the headline metric against the label's baseline run "
                     "(%perf baseline RUN), with its verdict; %perf compare gives the full comparison.")
    if "trend" in cols:
        notes.append("trend: the label's headline metric over its last runs, oldest to this one, "
                     "with the first and last values.")
    for n in notes:
        lines += wrap(n, "", "  ", width, break_long_words=True)

    def td(c: str, x: str) -> str:
        style = "text-align:left;padding-right:1em"
        if c == "vs baseline":
            for verdict, color in VERDICT_COLORS.items():
                if verdict in x:
                    style += f";color:{color};font-weight:bold"
        return f"<td style='{style}'>{html.escape(x)}</td>"

    head = "".join(f"<th style='text-align:left'>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(td(c, t[i]) for c, i in zip(cols, idx)) + "</tr>" for t in table)
    foot = "".join(f"<div style='color:#555'>{html.escape(n)}</div>" for n in notes)
    htm = (f"<div class='perfmagic-ledger' style='font-size:12px'><div style='font-weight:bold'>"
           f"{html.escape(title)}</div><div style='color:#555'>{html.escape(where_line)}</div>"
           f"<table style='font-size:12px'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
           f"{foot}</div>")
    return {"text/plain": "\n".join(lines), "text/html": htm}


def history_text(rows: list[dict[str, Any]], label: str, baseline_id: int | None) -> str:
    """The text beside ``%perf plot``: one line per run of the label, oldest first."""
    head = (f"history of '{label}' ({len(rows)} runs; baseline #{baseline_id})" if baseline_id
            else f"history of '{label}' ({len(rows)} runs; no baseline)")
    return "\n".join([head] + [f"  #{r['id']:<4} {_when(r.get('created_utc'))}  {result_text(r)}"
                               + ("  (baseline)" if r["id"] == baseline_id else "") for r in rows])


# ---- the ledger file's own messages (storage/db.py, storage/ledger.py) -----------------------------------


def write_fix(cause: str, path: Any, env_dir: str) -> str:
    """The fix for a failed write of the ledger file ``path`` (a :class:`pathlib.Path`), by the cause
    :func:`perfmagic.storage.db.classify` found: ``"locked"``, ``"damaged"``, ``"foreign"`` (another
    program's database, or a newer perfmagic's ledger), ``"disk-full"``, ``"permission"`` or ``"other"``.
    ``env_dir`` is the variable that moves the ledger elsewhere."""
    elsewhere = f"or set {env_dir} to a writable folder"
    if cause == "locked":
        return "another process holds the ledger; the run will be written on the next record()"
    if cause == "damaged":
        return f"move {path} aside to start a new ledger"
    if cause == "foreign":
        return f"move {path} aside to start a new ledger, {elsewhere}"
    if cause == "disk-full":
        return f"free disk space on the drive holding {path.parent} {elsewhere}"
    if cause == "permission":
        return f"make {path.parent} writable {elsewhere}"
    return f"check that {path} is a writable perfmagic ledger {elsewhere}"


def unsaved_text(path: Any, reason: str, run_id: int, fix: str) -> str:
    """``RunRef.error`` of a run kept in memory because the ledger could not be written: the file, the
    reason, where the run is and the fix; no ``perfmagic:`` prefix (whoever prints it adds that)."""
    return (f"run not saved to the ledger {path} ({reason}); it is kept in memory for this kernel session only "
            f"(Ledger.pending, id {run_id}). Fix: {fix[:1].upper()}{fix[1:]}.")


def unwritable_text(path: Any, reason: str, fix: str) -> str:
    """``Ledger.last_error`` after a flush of the runs kept in memory failed again."""
    return f"ledger {path} still not writable ({reason}); {fix}."


def newer_schema_text(path: Any, version: int, writer: str | None) -> str:
    """``Ledger.newer``: the file was written by a newer perfmagic (``writer``, when it says which), so
    it is read as far as this one knows it and never written."""
    return (f"the ledger {path} has schema version {version}, written by {writer or 'a newer perfmagic'}; this "
            "perfmagic reads what it knows of it and writes nothing there: upgrade perfmagic to record here")
