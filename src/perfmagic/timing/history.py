"""``perfmagic.compare(a, b)``: judge a change between two recorded runs, and say what else changed.

A and B may be run ids (from this notebook's ledger), ledger rows, or :class:`BenchResult` objects.
The verdict comes from :func:`perfmagic.timing.compare.compare_samples` on the raw per-call samples.
Runs measured at different times are *historical*: within-run samples do not see the machine's drift
between them, so the within-run interval is combined (log scale, in quadrature) with the between-run
noise this machine has shown for identical code (:mod:`perfmagic.timing.betweenrun`: the A/A
re-measurements that ``%perf compare`` records). Runs measured interleaved in one process are judged
on their paired samples, where the drift cancels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, ClassVar

from ..record import relation

from ..errors import PerfmagicError
from ..findings import Finding
from ..result import Displayed
from .whatchanged import WhatChanged, what_changed
from .basis import per_call


_WORK_OPTIONS = ("items", "flops", "nbytes", "work")


class CompareError(PerfmagicError):
    """Two runs cannot be compared (unknown id, different magics or metrics, no samples)."""


def _whole(x: Any) -> Any:
    """A run id given as any whole-number type (numpy's int64, as ``perfmagic.ledger()`` and its columns
    give them) as a Python int; anything else as it is. Notebook 10 passed ``ledger(...).loc[b,
    "interleaved_with"]`` and got "cannot compare int64", and its 4.2× change was not kept."""
    import numbers

    if isinstance(x, numbers.Integral) and not isinstance(x, bool):
        return int(x)
    return x


def _as_row(x: Any, ledger: Any) -> dict[str, Any]:
    from .results import BenchResult

    if isinstance(x, BenchResult):
        opts: dict[str, Any] = {"setup": x.setup}
        if x.work:
            opts["work"] = dict(x.work)
        return {"id": x.run_id, "magic": "gpubench", "label": x.label, "code": x.code, "options": opts,
                "samples": x.samples_dict(), "env": x.env, "created_utc": x.started_utc, "status": x.status,
                "primary_metric": "median_s", "metrics": x.metrics()}
    if isinstance(x, dict):
        return x
    if isinstance(x, str) and x.lstrip("#").isdigit():
        x = int(x.lstrip("#"))
    x = _whole(x)
    if isinstance(x, int) and not isinstance(x, bool):
        if ledger is None:
            from ..storage.session import current_ledger

            ledger = current_ledger()
        try:
            return ledger.get(x)
        except KeyError as exc:
            raise CompareError(str(exc.args[0] if exc.args else exc)) from None
    raise CompareError(f"cannot compare {type(x).__name__} {x!r}: give a run id, a ledger row or a BenchResult")


def _minutes_apart(ra: dict[str, Any], rb: dict[str, Any]) -> float | None:
    try:
        ta = datetime.fromisoformat(str(ra["created_utc"]).replace("Z", "+00:00"))
        tb = datetime.fromisoformat(str(rb["created_utc"]).replace("Z", "+00:00"))
    except (KeyError, ValueError, TypeError):
        return None
    return abs((tb - ta).total_seconds()) / 60


@dataclass(frozen=True, repr=False)
class RunComparison(Displayed):
    """Two ledger runs judged: the verdict, its interval and what changed between them."""

    primary_metric: ClassVar[str] = "ratio"
    renderer: ClassVar[str] = "comparison"

    def numbers(self) -> str:
        """The two medians, the ratio and its interval in one line (:func:`perfmagic.render.comparison.numbers`)."""
        from ..render.comparison import numbers

        return numbers(self)

    a: dict[str, Any]
    b: dict[str, Any]
    comparison: Any
    what: WhatChanged
    kind: str  # "historical" | "interleaved"
    drift: float | None = None  # the drift guard's reference ratio B/A - 1 (informational)
    notes: tuple[Any, ...] = field(default_factory=tuple)  # findings (render/findings_timing.py words them)
    between_run: Any = None  # perfmagic.timing.betweenrun.BetweenRun of a historical comparison
    basis: Any = None  # perfmagic.timing.basis.Basis: per call, or per unit of declared work
    where: Any = None  # perfmagic.profile.where.WhereResult: where the change went (re-measured pairs only)

    @property
    def verdict(self) -> str:
        return self.comparison.verdict

    def medians(self) -> tuple[float, float]:
        """The median time per call of A and of B."""
        return _median(per_call(self.a)), _median(per_call(self.b))

    def metrics(self) -> dict[str, Any]:
        c = self.comparison
        return {"ratio": c.ratio, "ci_low": c.ci_low, "ci_high": c.ci_high, "verdict": c.verdict,
                "min_effect": c.min_effect, "n_a": c.n_a, "n_b": c.n_b, "kind": self.kind, "drift": self.drift,
                "between_run": c.between_run, "per": self.basis.unit if self.basis is not None else None}

    def samples(self) -> dict[str, list[Any]]:
        return {"a_per_call_s": list(per_call(self.a)), "b_per_call_s": list(per_call(self.b))}

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a.get("id"), "b": self.b.get("id"), "kind": self.kind, "drift": self.drift,
                "basis": self.basis.to_dict() if self.basis is not None else None,
                "comparison": self.comparison.to_dict(), "what_changed": self.what.things,
                "isolated": self.what.isolated, "notes": [str(n) for n in self.notes]}


def _median(xs: list[float]) -> float:
    from ..core.stats import median

    return median(xs) if xs else math.nan


def _comparable(ra: dict[str, Any], rb: dict[str, Any]) -> tuple[list[float], list[float]]:
    """The per-call samples of A and B, or :class:`CompareError` when the two runs cannot be compared
    (the same run, different magics or metrics, fewer than 3 samples)."""
    if ra.get("id") is not None and ra.get("id") == rb.get("id"):
        raise CompareError(f"A and B are the same run (#{ra['id']}): a run compared with itself tells nothing; "
                           "give two different runs, e.g. the baseline and the change")
    if ra.get("magic") != rb.get("magic"):
        raise CompareError(f"run {ra.get('id')} is a %%{ra.get('magic')} run and run {rb.get('id')} a "
                           f"%%{rb.get('magic')} run: only runs of the same magic can be compared; pick two "
                           f"%%{rb.get('magic')} runs (%perf lists them)")
    if ra.get("primary_metric") != rb.get("primary_metric"):
        raise CompareError(f"runs {ra.get('id')} and {rb.get('id')} measure different metrics "
                           f"({ra.get('primary_metric')} vs {rb.get('primary_metric')})")
    xa, xb = per_call(ra), per_call(rb)
    for r, xs in ((ra, xa), (rb, xb)):
        if len(xs) < 3:
            raise CompareError(f"run {r.get('id')} has {len(xs)} timed samples; a comparison needs at least 3 "
                               "(was it interrupted during warmup?)")
    return xa, xb


def compare(a: Any, b: Any, *, min_effect: float = 0.10, confidence: float = 0.95, ledger: Any = None,
            between_run: float | None = None, n_boot: int = 2000, paired: bool | None = None,
            data_changes: tuple[str, ...] = ()) -> RunComparison:
    """Compare run A (before) with run B (after); never changes the stored rows.

    Runs measured interleaved (one recorded with ``interleaved_with`` the other) are judged on their
    paired samples. Otherwise the comparison is *historical*: ``between_run`` (e.g. 0.08 for ±8%) is
    the between-run noise to admit; ``None`` takes it from this machine's A/A evidence in the ledger
    (:func:`perfmagic.timing.betweenrun.between_run_noise`). ``data_changes``: what A read that has changed since (named under
    "what changed"; ``%perf compare`` passes what stopped it from re-measuring A)."""
    from .betweenrun import BetweenRun, between_run_noise
    from .compare import compare_samples

    from .basis import basis as _basis

    ra, rb = _as_row(a, ledger), _as_row(b, ledger)
    xa, xb = _comparable(ra, rb)
    bs = _basis(ra, rb)
    xa, xb = bs.scale(xa, "A"), bs.scale(xb, "B")   # per unit of work when both declare different amounts
    notes: list[Any] = []
    interleaved = paired if paired is not None else bool(relation(ra, "interleaved_with") == rb.get("id") and rb.get("id") is not None
                       or relation(rb, "interleaved_with") == ra.get("id") and ra.get("id") is not None)
    drift = None
    ref_a, ref_b = (ra.get("env") or {}).get("reference_s"), (rb.get("env") or {}).get("reference_s")
    if ref_a and ref_b:
        drift = ref_b / ref_a - 1
    noise = None
    if interleaved and len(xa) == len(xb):
        comp = compare_samples(xa, xb, paired=True, min_effect=min_effect, confidence=confidence,
                               n_boot=n_boot)
        kind = "interleaved"
        notes.append(Finding.of("history.interleaved"))
    else:
        kind = "historical"
        if between_run is None:
            if ledger is None and (isinstance(_whole(a), int) or isinstance(_whole(b), int)):
                from ..storage.session import current_ledger

                ledger = current_ledger()
            noise = between_run_noise(ledger, rb.get("env"))
        else:
            noise = BetweenRun(float(between_run), 0, Finding.of("noise.given", q=float(between_run)))
        q = noise.noise
        comp = compare_samples(xa, xb, paired=False, min_effect=min_effect, confidence=confidence,
                               between_run=q, n_boot=n_boot)
        notes.append(Finding.of("history.historical", apart=_minutes_apart(ra, rb), noise=str(noise.source),
                                a=ra.get("id")))
        if comp.verdict == "inconclusive":  # measuring longer would not help: say what would
            notes.append(Finding.of("history.cannot-tell", q=q))
    over = _oversubscribed(ra, rb)
    if over and comp.verdict != "inconclusive":  # the pools waited for cores: the ratio is not the code's
        comp = replace(comp, verdict="inconclusive", why="oversubscribed")
    notes += over
    if bs.refusal:  # work declared on one side only (or in different units): no accept/reject per call
        comp = replace(comp, verdict="inconclusive", why="refused", refusal=bs.refusal)
    elif bs.unit:
        comp = replace(comp, per=bs.per,
                       method=comp.method.with_values(per=bs.per, a=_amt(bs.a), b=_amt(bs.b), unit=bs.unit))
    limit = {relation(r, "thread_limit") for r in (ra, rb)}
    if len(limit) == 1 and None not in limit:
        n = limit.pop()
        notes.append(Finding.of("history.thread-limit", n=n))
    oa, ob = ra.get("options"), rb.get("options")
    if bs.unit:  # the declared work is what the verdict divides by, not another change
        oa, ob = ({k: v for k, v in (o or {}).items() if k not in _WORK_OPTIONS} for o in (oa, ob))
    what = what_changed(ra.get("code") or "", rb.get("code") or "", oa, ob,
                        ra.get("env"), rb.get("env"), tuple(data_changes))
    return RunComparison(ra, rb, comp, what, kind, drift, tuple(notes), noise, bs)


def _amt(v: float | None) -> str:
    return "?" if v is None else f"{v:g}" if v < 1e6 else f"{v:.3g}"


def _oversubscribed(ra: dict[str, Any], rb: dict[str, Any]) -> list[str]:
    """Thread oversubscription in either run, named in the comparison it takes part in."""
    from ..core.threads import env_oversubscription

    found: dict[str, list[str]] = {}
    for side, r in (("A", ra), ("B", rb)):
        w = env_oversubscription(r.get("env"))
        if w:
            found.setdefault(w, []).append(f"{side} #{r.get('id')}" if r.get("id") is not None else side)
    return [f"{' and '.join(sides)}: {w}" for w, sides in found.items()]


def baseline_changes(ledger: Any, rows: list[dict[str, Any]], every: list[dict[str, Any]], *,
                     min_effect: float = 0.10) -> dict[int, str]:
    """For the ``%perf`` table: each shown run's change against its label's baseline (the table's
    trend column draws the history).

    The latest same-process verdict between the two (an interleaved pair that re-measured the baseline
    and the run, from ``%perf compare`` or ``--vs``) is used when there is one, marked "A/B": it cancels
    the machine's drift that a historical comparison can only admit. Otherwise the recorded samples are
    compared with a light bootstrap (400 resamples) so the table stays quick; ``%perf compare`` gives
    the full one. Runs that declare work are compared per unit of it (see :mod:`perfmagic.timing.basis`).
    """
    from ..render.comparison import change_cell
    from ..storage.codec import rerun_of

    out: dict[int, str] = {}
    by_label: dict[str, list[dict[str, Any]]] = {}
    by_id = {r["id"]: r for r in every}
    pairs: dict[tuple[int, int], tuple[dict[str, Any], dict[str, Any]]] = {}
    for r in sorted(every, key=lambda r: r["id"]):
        by_label.setdefault(r.get("label") or "", []).append(r)
        x = by_id.get(relation(r, "interleaved_with"))
        if x is not None and r.get("status") == "ok" and x.get("status") == "ok":
            a0, b0 = rerun_of(x), rerun_of(r)
            pairs[(a0 if a0 is not None else x["id"], b0 if b0 is not None else r["id"])] = (x, r)
    bases: dict[str, dict[str, Any] | None] = {}
    for r in rows:
        label = r.get("label") or ""
        if label not in bases:
            bid = ledger.baseline(label) if label else None
            bases[label] = next((x for x in by_label.get(label, []) if x["id"] == bid), None)
        base = bases[label]
        cell = ""
        if rerun_of(r) is not None:  # A of a same-process A/B: judged with its B, not against the baseline
            out[r["id"]] = f"re-run of #{rerun_of(r)}"
            continue
        if base is not None and base["id"] == r["id"]:
            cell = "baseline"
        elif base is not None and base["id"] < r["id"]:
            pair = pairs.get((base["id"], r["id"]))
            try:
                rc = compare(*pair, min_effect=min_effect, n_boot=400) if pair else \
                    compare(base, r, min_effect=min_effect, n_boot=400)
                cell = change_cell(rc, ab=bool(pair))
            except Exception:  # the table never fails on one odd row
                cell = "?"
        out[r["id"]] = cell
    return out
