"""Comparisons in words: the verdict sentence of a time ratio, and the report of two runs compared.

The engine (:mod:`perfmagic.timing.compare`, :mod:`perfmagic.timing.history`) decides a verdict
*category* (``faster``, ``slower``, ``no real change``, ``inconclusive``) and keeps the numbers; every
sentence about it is written here, once:

* :func:`verdict_sentence` — the verdict on a ratio B/A with its CI, against the ``min_effect`` bar;
* :func:`comparison_sentence` — a :class:`~perfmagic.timing.compare.Comparison`'s sentence, with what
  the engine overrode (thread oversubscription, a refused per-call comparison, a ratio per unit of work);
* :func:`change_cell` — the short form of the ``%perf`` table's "vs baseline" column;
* ``text``/``headline``/``numbers``/``mimebundle`` (also ``comparison_bundle``) — a
  :class:`~perfmagic.timing.history.RunComparison`; :data:`VERDICT_COLORS` colours a verdict in HTML.

Percentages follow the verdicts' symmetric convention (:mod:`perfmagic.render.text`).
"""

from __future__ import annotations

import html
from typing import Any

from ..result import Result
from .text import fmt_time, pct, span, times

#: what an inconclusive verdict advises, by how the interval was made
UNDECIDED = {"within": "measure longer", "apart": "cannot tell from runs taken apart"}
#: the colour of each verdict category in HTML (the comparison's headline, the %perf table's cells)
VERDICT_COLORS = {"faster": "#1a7f37", "slower": "#cf222e", "no real change": "#57606a", "inconclusive": "#9a6700"}


def verdict_sentence(verdict: str, ratio: float, lo: float, hi: float, min_effect: float, *,
                     confidence: float = 0.95, undecided: str = UNDECIDED["within"]) -> str:
    """The verdict on a time ratio ``B/A`` = ``ratio`` with CI ``[lo, hi]`` at the ``min_effect`` bar, as one
    sentence: "faster by 25% (95% CI 18%–33%): accept — the whole interval clears the 10% bar"."""
    bar = f"{min_effect * 100:g}%"
    ci = f"{confidence * 100:g}% CI"
    if verdict == "faster":
        if ratio <= 0.5:  # large effects read better as factors: "128× faster", not "12741%"
            return (f"{times(1.0 / ratio)} faster ({ci} {times(1.0 / hi)}–{times(1.0 / lo)}): "
                    f"accept — the whole interval clears the {bar} bar")
        return (f"faster by {pct(1.0 / ratio - 1.0)} ({ci} {pct(1.0 / hi - 1.0)}–{pct(1.0 / lo - 1.0)}): "
                f"accept — the whole interval clears the {bar} bar")
    if verdict == "slower":
        if ratio >= 2.0:
            return (f"{times(ratio)} slower ({ci} {times(lo)}–{times(hi)}): "
                    f"reject the change — the whole interval is past the {bar} bar")
        return (f"slower by {pct(ratio - 1.0)} ({ci} {pct(lo - 1.0)}–{pct(hi - 1.0)}): "
                f"reject the change — the whole interval is past the {bar} bar")
    if verdict == "no real change":
        return f"no real change: within ±{bar} ({ci} {span(lo, hi)})"
    return f"inconclusive — {undecided} ({ci} {span(lo, hi)} straddles the {bar} bar)"


def comparison_sentence(c: Any) -> str:
    """A :class:`~perfmagic.timing.compare.Comparison` in one sentence: its verdict, or why the engine
    overrode it (``c.why``), prefixed with the unit of work the ratio is per (``c.per``)."""
    if c.why == "refused":  # work declared on one side only: no accept/reject per call
        return f"cannot tell — {c.refusal}"
    if c.why == "oversubscribed":  # the pools waited for cores: the ratio is not the code's
        s = (f"inconclusive — cannot tell, because of thread oversubscription ({c.confidence * 100:g}% CI "
             f"{span(c.ci_low, c.ci_high)} measured while the thread pools waited for cores)")
    else:
        # with between-run noise admitted, more samples of the same runs would not settle it
        undecided = UNDECIDED["apart" if c.between_run else "within"]
        s = verdict_sentence(c.verdict, c.ratio, c.ci_low, c.ci_high, c.min_effect, confidence=c.confidence,
                             undecided=undecided)
    return f"{c.per}: {s}" if c.per else s


def change_cell(rc: Any, *, ab: bool = False) -> str:
    """A run comparison in the few words of the ``%perf`` table: ``−12% faster``, ``3.1× slower``,
    ``per item +4.0% no real change (A/B)`` (``ab``: judged on a same-process A/B pair)."""
    from .text import signed_change

    c = rc.comparison
    if rc.basis is not None and rc.basis.refusal:
        return "cannot tell (work on one side)"
    if c.ratio <= 0.5 or c.ratio >= 2:
        factor = 1 / c.ratio if c.ratio < 1 else c.ratio
        cell = f"{factor:.3g}× {c.verdict}"
    else:
        cell = f"{signed_change(c.ratio)} {c.verdict}"  # −x%: faster by x% (A/B − 1), as the verdicts
    if rc.basis is not None and rc.basis.unit:
        cell = f"{rc.basis.per} {cell}"
    return cell + (" (A/B)" if ab else "")


# ---- a RunComparison ----------------------------------------------------------------------------

def _name(r: dict[str, Any]) -> str:
    rid = r.get("id")
    return (f"#{rid} " if rid is not None else "") + str(r.get("label") or "")


def headline(rc: Result) -> str:
    """``B #12 new vs A #10 old: faster by 25% (95% CI 18%–33%): accept — ...``"""
    return f"B {_name(rc.b)} vs A {_name(rc.a)}: {rc.comparison.sentence}"  # type: ignore[attr-defined]


def numbers(rc: Any) -> str:
    """The medians, the ratio and its interval, the sample counts (per unit of work when declared)."""
    c, bs = rc.comparison, rc.basis
    ma, mb = rc.medians()
    if bs is not None and bs.unit:
        return (f"A {fmt_time(ma)} → B {fmt_time(mb)} median per call; {bs.per}: A {fmt_time(ma / bs.a)} → "
                f"B {fmt_time(mb / bs.b)}  (B/A {c.ratio:.3f}, CI {c.ci_low:.3f}–{c.ci_high:.3f}; "
                f"{c.n_a} vs {c.n_b} samples)")
    return (f"A {fmt_time(ma)} → B {fmt_time(mb)} median  (B/A {c.ratio:.3f}, CI {c.ci_low:.3f}–"
            f"{c.ci_high:.3f}; {c.n_a} vs {c.n_b} samples)")


def where_shown(rc: Any) -> Any:
    """The comparison's :class:`~perfmagic.profile.where.WhereResult` when it is shown: asked for
    (``--where``), or beside a verdict that is a change (faster, slower); else None."""
    w = getattr(rc, "where", None)
    if w is None:
        return None
    return w if w.shown or rc.comparison.verdict in ("faster", "slower") else None


def text(rc: Result) -> str:
    """The headline, the numbers, the notes, what else changed between the runs; where the change went."""
    r: Any = rc
    lines = [headline(r), "  " + numbers(r)]
    lines += [f"  {n}" for n in r.notes]
    lines += ["  " + ln for ln in r.what.text().splitlines()]
    w = where_shown(r)
    if w is not None:
        lines += ["", w.text()]
    return "\n".join(lines)


def mimebundle(rc: Result) -> dict[str, Any]:
    """text/plain and a self-contained text/html (the verdict coloured, the diff of what changed, and
    where the change went: its table, differential icicle and PNG)."""
    r: Any = rc
    color = VERDICT_COLORS.get(r.comparison.verdict, "#000")
    notes = "".join(f"<div>{html.escape(str(n))}</div>" for n in r.notes)
    w = where_shown(r)
    extra, out = "", {}
    if w is not None:
        wb = w._repr_mimebundle_()
        extra = f"<div style='margin-top:6px'>{wb['text/html']}</div>"
        if "image/png" in wb:
            out["image/png"] = wb["image/png"]
    htm = (f"<div class='perfmagic-compare' style='font-size:12px'>"
           f"<div style='font-weight:bold;color:{color}'>{html.escape(r.headline())}</div>"
           f"<div>{html.escape(numbers(r))}</div>{notes}{r.what.html()}{extra}</div>")
    return {"text/plain": r.text(), "text/html": htm, **out}


comparison_bundle = mimebundle  # the name the magics display a RunComparison by
