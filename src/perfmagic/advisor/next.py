"""``next_step()``: the single next experiment, in the method's order, from what the ledger holds.

Every magic leaves its evidence in the ledger: ``%%dataloader_check`` the share of each step spent
waiting for data, ``%%flame`` the self-time shares of functions, ``%%roofline`` the fraction of the
roof, ``%%amdahl`` the serial fraction. Each piece bounds what a change can gain, from measurement
alone:

* input-bound with wait share ``w``: infinitely fast data makes the step at most ``1/(1-w)`` faster,
  and while the loop waits, a faster step gains at most ``1/w`` (so the loader comes first);
* a function with self-time share ``f`` (the upper end of its 95% interval, from the sample count):
  making it free gains at most ``1/(1-f)``;
* at a fraction ``r`` of the roof: at most ``1/r`` at this precision and amount of work;
* serial fraction ``S``: at most ``1/S`` on any number of workers.

The newest ``WINDOW`` (2,000) runs of the notebook are read, and the advised label's newest runs when
they are older. Only evidence about the advised label's code is used (:mod:`perfmagic.advisor.scope`): the same
label, the same code, or code the label's code calls; the rest is listed as "not about this code",
each with its reason. A function is hot when its share's 95% interval lies above the share whose
removal would clear the bar, whatever the sample count.

The lower end is 1.0× unless a measurement guarantees more, and the result says so. Candidates
whose upper bound cannot clear the bar (``min_effect``) are dropped with a note; of the rest, the
first in the optimization order (docs/method.md §6) is proposed. Evidence a checked prediction already
used is spent: after the change it described, it describes old code.

A proposal with a gain range is recorded (the ledger's ``predictions`` table). The next ``%%gpubench``
comparison of the same label after it (a ``--vs`` pair, or a later run against the run the proposal
was based on) checks it: the measured gain and its 95% interval against the predicted range.
"""

from __future__ import annotations

import math
from typing import Any

from ..record import relation as run_relation

from ..errors import PerfmagicError
from ..render.advisor_words import say
from .evidence import (_fn_name, _from_amdahl, _from_dataloader, _from_flame, _from_roofline, _num, _user_code,
                       wilson_high)
from .result import LEVELS, Candidate, NextStep, PredictionCheck, found
from .scope import CallSet, call_set, flame_within, relation

_EVIDENCE_MAGICS = ("dataloader_check", "flame", "roofline", "amdahl")
WINDOW = 2000  # the newest runs the advisor reads (and the label's newest, when it is older): a ledger of
# 100,000 runs is advised on in a fraction of a second, and evidence older than that describes older code


class AdvisorError(PerfmagicError):
    """The ledger holds something the advisor cannot read (the message names the run and the fix)."""


def _is_user_row(row: dict[str, Any]) -> bool:
    from ..storage.codec import rerun_of

    return rerun_of(row) is None and row.get("status", "ok") == "ok"


# -- reading the ledger ----------------------------------------------------------------------------


def _timed(rows: list[dict[str, Any]], label: str | None) -> list[dict[str, Any]]:
    """The user's ``%%gpubench`` runs of ``label`` (newest first), without A/A re-measurements."""
    return [r for r in rows if r.get("magic") == "gpubench" and _is_user_row(r)
            and (label is None or r.get("label") == label)
            and _num((r.get("metrics") or {}).get("median_s")) is not None]


def _measured_gain(led: Any, ra: dict[str, Any], rb: dict[str, Any]) -> tuple[float, float, float] | None:
    """A's median over B's, with its 95% interval (from the comparison perfmagic prints)."""
    from ..timing.history import CompareError, compare

    try:
        rc = compare(ra, rb, ledger=led)
        c = rc.comparison
        return 1 / c.ratio, 1 / c.ci_high, 1 / c.ci_low
    except (CompareError, PerfmagicError, ZeroDivisionError, AttributeError, TypeError, ValueError):
        ma, mb = _num(ra["metrics"].get("median_s")), _num(rb["metrics"].get("median_s"))
        if not ma or not mb:
            return None
        g = ma / mb
        return g, g, g


def check_predictions(led: Any, rows: list[dict[str, Any]] | None = None) -> list[PredictionCheck]:
    """Check every open prediction against the first comparison of its label after it; store what
    was measured. Returns the whole record, oldest first."""
    rows = led.rows(limit=WINDOW) if rows is None else rows
    out = []
    for p in led.predictions():
        pc = _to_check(p)
        if not pc.checked and p.get("label") is not None:
            after = int(p.get("after_run") or 0)
            later = sorted((r for r in _timed(rows, p["label"]) if r["id"] > after), key=lambda r: r["id"])
            if later:
                rb = later[0]
                a_id = run_relation(rb, "interleaved_with") or p.get("base_run")
                ra = next((r for r in rows if r["id"] == a_id), None) if a_id is not None else None
                if ra is None and a_id is not None:  # older than the runs read: fetched alone
                    try:
                        ra = led.get(a_id)
                    except (KeyError, PerfmagicError):
                        ra = None
                got = _measured_gain(led, ra, rb) if ra is not None else None
                if got is not None:
                    g, g_lo, g_hi = got
                    hi = math.inf if pc.high is None else pc.high
                    within = g_hi >= pc.low and g_lo <= hi
                    try:
                        led.check_prediction(pc.id, run_a=ra["id"], run_b=rb["id"], measured=g, within=within)
                    except Exception:  # noqa: BLE001 - a read-only ledger still shows the check
                        pass
                    pc = PredictionCheck(pc.id, pc.label, pc.action, pc.low, pc.high, pc.basis, pc.evidence,
                                         ra["id"], rb["id"], g, within)
        out.append(_where_went(led, rows, pc) if pc.checked else pc)
    return out


def _where_went(led: Any, rows: list[dict[str, Any]], pc: PredictionCheck) -> PredictionCheck:
    """The check with where its comparison's change went, when the prediction named functions (a flame
    run's hot function) and ``%perf compare`` of its runs A and B re-measured them with ``where``:
    the share of the measured change that went to those functions."""
    from dataclasses import replace

    names = []
    for rid in pc.evidence:
        r = next((x for x in rows if x["id"] == rid), None)
        if r is not None and r.get("magic") == "flame" and (r.get("metrics") or {}).get("top1_self_name"):
            names.append(_fn_name(r["metrics"]["top1_self_name"])[0])
    wr = [r for r in rows if r.get("magic") == "where"
          and (r.get("options") or {}).get("a") == pc.run_a and (r.get("options") or {}).get("b") == pc.run_b]
    if not names or not wr:
        return replace(pc, predicted_in=tuple(names))
    try:
        from ..storage.record import rebuild

        where = rebuild(led.record_of(max(wr, key=lambda r: r["id"])["id"]))
        share = where.share_in(names)
    except Exception:  # noqa: BLE001 - an unreadable where row: the check stands without it
        share = None
    return replace(pc, predicted_in=tuple(names), share_there=share)


def _to_check(p: dict[str, Any]) -> PredictionCheck:
    high = _num(p.get("high"))
    return PredictionCheck(id=int(p["id"]), label=p.get("label"), action=str(p.get("action") or ""),
                           low=float(p.get("low") or 1.0), high=high, basis=str(p.get("basis") or ""),
                           evidence=tuple(p.get("evidence") or ()), run_a=p.get("run_a"), run_b=p.get("run_b"),
                           measured=_num(p.get("measured")), within=p.get("within"))


# -- the candidates each kind of evidence supports --------------------------------------------------


def _pick_label(rows: list[dict[str, Any]], label: str | None, led: Any) -> str | None:
    if label is not None:
        known = {r.get("label") for r in rows}
        if label not in known:
            labels = sorted(x for x in known if x)
            raise AdvisorError(f"label {label!r} has no runs in this notebook; labels with runs: "
                               + (", ".join(repr(x) for x in labels) or "none") + ". Fix: give one of them, or "
                               f"time the code first: %%gpubench -l {label} --baseline")
        return label
    timed = _timed(rows, None)
    return timed[0].get("label") if timed else None


def _check_row(r: dict[str, Any]) -> None:
    if not isinstance(r.get("metrics"), dict) or not isinstance(r.get("options"), dict):
        raise AdvisorError(f"run #{r.get('id')} ({r.get('magic')}) has unreadable metrics or options; "
                           f"Fix: remove it with %perf forget {r.get('id')} and measure again")


def next_step(ledger: Any = None, *, target: float | str | None = None, label: str | None = None,
              notebook: Any = ..., min_effect: float = 0.10, record: bool = True,
              namespace: dict[str, Any] | None = None, captures: Any = None) -> NextStep:
    """The next experiment for this notebook's ledger (``ledger=None``: the current notebook's).

    ``target``: the time per call that is fast enough (seconds, or ``"50ms"``); default: the one set
    with ``%perf target`` (:meth:`Ledger.set_target`). ``label``: the timed code to advise on
    (default: the label of the newest ``%%gpubench`` run). ``record``: store a proposal with a gain
    range as a prediction, checked by the next comparison of its label. ``namespace``: the kernel's
    variables (``%perf next`` passes them): a DataLoader check bounds only timed code that names a
    DataLoader there, and the notebook's functions the code calls are followed to what they call.
    ``captures``: ``{run id: Capture}``, what each ``%%gpubench`` run's code called, as the kernel keeps
    it (:func:`perfmagic.timing.rerun.capture`); without it (a plain script, another kernel) the call set
    is read from the namespace, else from the run's stored code alone."""
    import dataclasses

    from ..render.units import parse_duration

    if ledger is None:
        from ..storage.session import current_ledger

        ledger = current_ledger()
    led = ledger
    if isinstance(target, str):
        try:
            target = parse_duration(target)
        except ValueError:
            raise AdvisorError(f"target: got {target!r}; expected a time per call such as 50ms, 2s or 0.05") from None
    if target is not None and not (_num(target) and float(target) > 0):
        raise AdvisorError(f"target: got {target!r}; expected a positive time per call such as 50ms or 0.05")
    rows = led.rows(notebook=notebook, limit=WINDOW)  # the newest runs: older evidence describes older code
    if label is not None and not any(r.get("label") == label for r in rows):
        more = {r["id"]: r for r in rows + led.rows(notebook=notebook, label=label, limit=WINDOW)}
        rows = sorted(more.values(), key=lambda r: r["id"], reverse=True)
    for r in rows:
        _check_row(r)
    step = _advise(led, rows, target, label, min_effect, record, namespace, captures)
    by_id = {r["id"]: r for r in rows}
    cited = set(step.evidence) | {e for p in step.record for e in p.evidence}
    names = tuple((e, _row_name(by_id[e])) for e in sorted(cited) if e in by_id)
    return dataclasses.replace(step, evidence_names=names)


def _row_name(r: dict[str, Any]) -> str:
    from ..render.units import clip

    lab = str(r.get("label") or "").splitlines()[0] if r.get("label") else ""
    return f"{r.get('magic')} {clip(lab, 24)}".strip()


def _kept_change(rows: list[dict[str, Any]], label: str | None, min_effect: float) -> int | None:
    """The newest run of ``label`` that a same-process A/B showed faster than its A by more than the
    bar (a kept change): evidence older than it describes the code before it."""
    if label is None:
        return None
    by_id = {r["id"]: r for r in rows}
    for r in rows:  # newest first
        if r.get("magic") != "gpubench" or r.get("label") != label or not _is_user_row(r):
            continue
        a = by_id.get(run_relation(r, "interleaved_with"))
        ma = _num(((a or {}).get("metrics") or {}).get("median_s"))
        mb = _num((r.get("metrics") or {}).get("median_s"))
        if ma and mb and ma / mb > 1 + min_effect:
            return int(r["id"])
    return None


def _reads_a_loader(row: dict[str, Any], namespace: dict[str, Any]) -> bool:
    """Does the timed code (or its setup) name a DataLoader-like object of the namespace?"""
    import re

    text = f"{row.get('code') or ''}\n{(row.get('options') or {}).get('setup') or ''}"
    for name in set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text)):
        obj = namespace.get(name)
        if obj is None or callable(obj) and not hasattr(obj, "__iter__"):
            continue
        if type(obj).__name__ == "DataLoader" or (hasattr(obj, "dataset") and hasattr(obj, "batch_size")):
            return True
    return False


def _subject_call_set(rows: list[dict[str, Any]], subject: str | None, latest: dict[str, Any] | None,
                      captures: Any, namespace: dict[str, Any] | None) -> CallSet | None:
    """The call set of the advised label: its newest timed run's code, else its newest row's."""
    if subject is None:
        return None
    row = latest or next((r for r in rows if r.get("label") == subject and _is_user_row(r)), None)
    cap = None
    if row is not None and captures:
        try:
            cap = captures.get(row["id"])
        except AttributeError:
            cap = None
    return call_set(row, subject, cap, namespace)


def _advise(led: Any, rows: list[dict[str, Any]], target: Any, label: str | None, min_effect: float,
            record: bool, namespace: dict[str, Any] | None = None, captures: Any = None) -> NextStep:
    record_ = tuple(check_predictions(led, rows))
    common = dict(record=record_, min_effect=min_effect)
    if not rows:
        return NextStep(kind="measure", action=say("next.empty"), command="%%gpubench -l NAME --baseline", **common)
    subject = _pick_label(rows, label, led)
    if target is None and subject is not None:
        target = led.target(subject)
    timed = _timed(rows, subject) if subject is not None else []
    latest = timed[0] if timed else None
    lm = (latest or {}).get("metrics") or {}
    base = dict(label=subject, target_s=None if target is None else float(target),
                latest_run=None if latest is None else latest["id"], latest_s=_num(lm.get("median_s")),
                latest_ci_high_s=_num(lm.get("ci_high_s")) or _num(lm.get("median_s")), **common)
    findings: list[str] = []
    if target is not None:  # a target decides first: already fast enough is the end of the method (§10)
        done = _against_target(float(target), subject, latest, base, findings)
        if done is not None:
            return done
    newest = _evidence(rows, subject, latest, record_, min_effect, namespace, captures, base, findings)
    if newest is None:
        cmd = f"%%flame -l {subject}"
        return NextStep(kind="measure", action=say("next.no-evidence", label=subject, command=cmd), command=cmd,
                        findings=tuple(findings), **base)
    cands, measure, cap = _candidates(newest, subject, min_effect, findings)
    kept = _clearing(cands, cap, min_effect, findings)
    evidence_ids = tuple(sorted({c.evidence[0] for c in cands} | ({latest["id"]} if latest else set())))
    if not kept:
        return _without_candidate(measure, newest, subject, latest, min_effect, evidence_ids, findings, base)
    best = kept[0]
    pid = None
    if record:
        after = max(r["id"] for r in rows)
        pid = _remember(led, best, subject, latest, after, record_, findings)
        if pid is not None and all(p.id != pid for p in record_):
            base["record"] = record_ + (PredictionCheck(pid, subject, best.action, best.low, best.high, best.basis,
                                                        best.evidence),)
    ev = tuple(sorted(set(best.evidence) | ({latest["id"]} if latest else set())))
    return NextStep(kind="experiment", action=best.action, level=best.level, low=best.low, high=best.high,
                    basis=best.basis, low_why=best.low_why, command=best.command, evidence=ev,
                    findings=tuple(findings), alternatives=tuple(kept[1:]), prediction_id=pid, **base)


def _against_target(t: float, subject: str | None, latest: dict[str, Any] | None, base: dict[str, Any],
                    findings: list[str]) -> NextStep | None:
    """Fast enough (stop), maybe (measure longer), no timed run to tell (measure), or how far to go."""
    if latest is None:
        return NextStep(kind="measure", action=say("next.time-for-target"),
                        command=f"%%gpubench -l {subject or 'NAME'} --baseline", **base)
    med, hi, rid = base["latest_s"], base["latest_ci_high_s"], latest["id"]
    if hi is not None and hi <= t:
        return NextStep(kind="stop", action=say("next.fast-enough"), evidence=(rid,),
                        basis=say("next.fast-enough-basis", run=rid, label=subject), **base)
    if med is not None and med <= t:
        return NextStep(kind="inconclusive", evidence=(rid,), action=say("next.maybe-fast-enough"),
                        basis=say("next.maybe-fast-enough-basis", run=rid),
                        command=say("next.longer-run", label=subject), **base)
    findings.append(found("next.target-not-met", target=t, to_go=med / t, run=rid))
    return None


def _evidence(rows: list[dict[str, Any]], subject: str | None, latest: dict[str, Any] | None,
              record_: tuple[PredictionCheck, ...], min_effect: float, namespace: dict[str, Any] | None,
              captures: Any, base: dict[str, Any], findings: list[str]) -> dict[str, dict[str, Any]] | None:
    """The newest evidence of each magic about this code, not yet spent by a checked prediction or outdated
    by a kept change; the rest goes to ``base["not_about"]``. None: nothing at all is about this code."""
    spent = {e for p in record_ if p.checked for e in p.evidence}
    kept_at = _kept_change(rows, subject, min_effect)
    cs = _subject_call_set(rows, subject, latest, captures, namespace)
    newest: dict[str, dict[str, Any]] = {}
    not_about: list[tuple[int, str, str, str]] = []
    n_about = 0
    for r in rows:  # newest first
        mg = r.get("magic")
        if mg not in _EVIDENCE_MAGICS or not _is_user_row(r):
            continue
        if cs is not None:
            is_about, why = relation(r, cs, namespace)
            if not is_about and mg == "flame":
                inside = flame_within(r, cs, _user_code)
                if inside is not None:
                    r, is_about = {**r, "metrics": inside}, True
            if not is_about:
                not_about.append((int(r["id"]), str(mg), str(r.get("label") or ""), why))
                continue
        n_about += 1
        if mg in newest:
            continue
        newest[mg] = {}
        if r["id"] in spent:
            findings.append(found("next.spent", magic=mg, id=r["id"]))
        elif kept_at is not None and r["id"] < kept_at:
            findings.append(found("next.outdated", magic=mg, id=r["id"], kept=kept_at, label=subject))
        elif mg == "dataloader_check" and namespace is not None and latest is not None \
                and not _reads_a_loader(latest, namespace):
            findings.append(found("next.no-loader", id=r["id"], label=subject, run=latest["id"]))
        else:
            newest[mg] = r
    base["not_about"] = tuple(not_about)
    if subject is not None and n_about == 0:
        return None
    return {k: v for k, v in newest.items() if v}


def _candidates(newest: dict[str, dict[str, Any]], subject: str | None, min_effect: float,
                findings: list[str]) -> tuple[list[Candidate], list[str], float | None]:
    """Each reader's candidate, the measurements to take first, and the cap while input-bound."""
    cands: list[Candidate] = []
    measure: list[str] = []
    cap = None
    for mg, read in (("dataloader_check", _from_dataloader), ("flame", _from_flame), ("roofline", _from_roofline),
                     ("amdahl", _from_amdahl)):
        if mg not in newest:
            continue
        r = newest[mg]
        try:
            got = read(r, subject, findings, min_effect) if mg == "flame" else read(r, subject, findings)
        except Exception as exc:  # noqa: BLE001 - a damaged row: name it and the fix, never a traceback
            raise AdvisorError(f"run #{r['id']} ({mg}) cannot be read ({type(exc).__name__}: {exc}); Fix: remove it "
                               f"with %perf forget {r['id']} and measure again") from None
        c, extra = got if isinstance(got, tuple) else (got, None)
        cands += [c] if c else []
        if mg == "dataloader_check":
            cap = extra
        elif extra:
            measure.append(extra)
    return cands, measure, cap


def _clearing(cands: list[Candidate], cap: float | None, min_effect: float, findings: list[str]) -> list[Candidate]:
    """The candidates whose upper bound (capped while input-bound) can clear the bar, in the method's order:
    while the loop waits for data the loader first (docs/method.md §1), then the levels."""
    bar, kept = 1 + min_effect, []
    for c in cands:
        high = c.high
        if cap is not None and c.level != "I/O" and (high is None or high > cap):
            high = cap
            c = Candidate(c.level, c.action, c.low, high, say("next.capped", basis=c.basis, cap=cap), c.command,
                          c.evidence, c.low_why)
        if high is not None and high < bar:
            findings.append(found("next.below-bar", level=c.level, action=c.action.split(":")[0],
                                min_effect=min_effect, high=high))
            continue
        kept.append(c)
    kept.sort(key=lambda c: (not (cap is not None and c.level == "I/O"), LEVELS.index(c.level),
                             -(c.high or math.inf)))
    return kept


def _without_candidate(measure: list[str], newest: dict[str, Any], subject: str | None,
                       latest: dict[str, Any] | None, min_effect: float, evidence_ids: tuple[int, ...],
                       findings: list[str], base: dict[str, Any]) -> NextStep:
    """No change to propose: the measurement to take first, or stop."""
    more = dict(findings=tuple(findings), evidence=evidence_ids, **base)
    if measure:
        return NextStep(kind="measure", action=say("next.measure", command=measure[0]),
                        command=measure[0].split(" (")[0], **more)
    missing = [mg for mg in ("flame", "dataloader_check", "roofline") if mg not in newest]
    if "flame" in missing:
        cmd = f"%%flame -l {subject}" if subject else "%%flame"
        return NextStep(kind="measure", action=say("next.profile", command=cmd, loader="dataloader_check" in missing),
                        command=cmd, **more)
    if latest is None:
        return NextStep(kind="measure", action=say("next.time-first"), command="%%gpubench -l NAME --baseline",
                        **more)
    if missing:
        cmd = say("next.loader-sweep") if missing[0] == "dataloader_check" else f"%%roofline -l {subject}"
        return NextStep(kind="measure", action=say("next.measure", command=cmd), command=cmd, **more)
    return NextStep(kind="stop", action=say("next.stop"), basis=say("next.stop-basis", bar=1 + min_effect), **more)


def _remember(led: Any, c: Candidate, label: str | None, latest: dict[str, Any] | None, after: int,
              record_: tuple[PredictionCheck, ...], findings: list[str]) -> int | None:
    """Record the proposal as a prediction (once: an open one with the same action and evidence is reused)."""
    if label is None or latest is None:
        findings.append(found("next.not-recorded", error=None))
        return None
    for p in record_:
        if not p.checked and p.label == label and p.action == c.action and p.evidence == c.evidence:
            return p.id
    try:
        return led.add_prediction(label=label, level=c.level, action=c.action, low=c.low,
                                  high=math.inf if c.high is None else c.high, basis=c.basis,
                                  evidence=list(c.evidence), base_run=latest["id"], after_run=after)
    except Exception as exc:  # noqa: BLE001 - the advice stands without its record
        findings.append(found("next.not-recorded", error=str(exc)))
        return None


__all__ = ["AdvisorError", "check_predictions", "next_step", "wilson_high"]
