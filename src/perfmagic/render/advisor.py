"""``%perf next``: the proposal, its expected gain and basis, the command that tests it, the evidence,
and the record of earlier predictions against what was measured."""

from __future__ import annotations

import html
from typing import Any

from .bundle import table_html
from .text import WIDTH, clip, fmt_time, gain, wrap

ORDER = ("algorithm", "data structure", "I/O", "memory", "concurrency", "vectorization", "compute", "caching")


def _x(v: float | None) -> str:
    return gain(v, "no upper bound")


def _wrap(head: str, body: str, indent: int = 4) -> list[str]:
    return wrap(body, head, " " * indent, WIDTH, break_long_words=True) if body else [head]


def gain_text(low: float | None, high: float | None) -> str:
    if low is None:
        return ""
    if high is None:
        return f"at least {_x(low)}, no upper bound from the evidence"
    return f"{_x(low)}–{_x(high)}"


def order_line(level: str | None) -> str:
    return "order: " + " → ".join(f"[{lv}]" if lv == level else lv for lv in ORDER)


def check_line(p: Any) -> str:
    rng = gain_text(p.low, p.high)
    if not p.checked:
        return f"#{p.id} {p.label}: {p.action} — predicted {rng}, not tested yet"
    mark = "within range" if p.within else "MISSED"
    return (f"#{p.id} {p.label}: predicted {rng}, measured {_x(p.measured)} (run #{p.run_b} vs #{p.run_a}): {mark}"
            f"{where_line(p)} — {p.action}")


def where_line(p: Any) -> str:
    """``"; predicted in parse: 92% of the change is in parse"`` when the comparison said where it went."""
    share = getattr(p, "share_there", None)
    if share is None or not p.predicted_in:
        return ""
    names = ", ".join(p.predicted_in)
    return f"; predicted in {names}: {share:.0%} of the change is in {names}"


def record_line(r: Any) -> str:
    """``"3 of 4 predictions within range (1 not tested yet)"``, or ``""`` with no predictions."""
    if not r.record:
        return ""
    checked, open_ = len(r.checked), len(r.record) - len(r.checked)
    head = (f"{r.within} of {checked} prediction{'s' if checked != 1 else ''} within range"
            if checked else "no prediction tested yet")
    if open_ and checked:
        head += f" ({open_} not tested yet)"
    elif open_:
        head += f" ({open_} waiting for a comparison)"
    return head


NOT_ABOUT_SHOWN = 8


def not_about_lines(r: Any) -> list[str]:
    """One line per run left out: which run, which label, why."""
    rows = list(getattr(r, "not_about", ()) or ())
    if not rows:
        return []
    lines = ["  not about this code (not used):"]
    for rid, magic, label, why in rows[:NOT_ABOUT_SHOWN]:
        lab = f" '{clip(label.splitlines()[0], 40)}'" if label else ""
        lines += _wrap("    ", f"#{rid} {magic}{lab}: {why}", 6)
    if len(rows) > NOT_ABOUT_SHOWN:
        lines.append(f"    … and {len(rows) - NOT_ABOUT_SHOWN} more")
    return lines


def text(r: Any) -> str:
    lines: list[str] = []
    named = r.label and (f"'{r.label}'" in r.action or f"-l {r.label}" in r.action)
    where = f" on '{r.label}'" if r.label and not named else ""
    if r.kind == "experiment":
        lines += _wrap("next: ", f"{r.action} ({r.level}){where} — expected {gain_text(r.low, r.high)}", 6)
        lines += _wrap("  why: ", r.basis, 7)
        if r.low_why:
            lines += _wrap("  low end: ", f"{_x(r.low)}: {r.low_why}", 7)
        lines += _wrap("  test: ", r.command, 8)
    elif r.kind == "stop":
        lines += _wrap("", f"{r.action}{where}", 4)
        if r.basis:
            lines += _wrap("  why: ", r.basis, 7)
    else:
        lines += _wrap("next: " if r.kind == "measure" else "", f"{r.action}{where}", 6)
        if r.basis:
            lines += _wrap("  why: ", r.basis, 7)
        if r.command and r.command not in r.action:
            lines += _wrap("  run: ", r.command, 7)
    if r.target_s is not None:
        latest = (f"latest {fmt_time(r.latest_s)} (run #{r.latest_run}, CI to {fmt_time(r.latest_ci_high_s)})"
                  if r.latest_s is not None else "no timed run yet")
        lines += _wrap("  target: ", f"{fmt_time(r.target_s)} per call; {latest}", 10)
    if r.evidence:
        names = dict(r.evidence_names)
        lines += _wrap("  evidence: ", ", ".join(f"#{e} {names.get(e, '')}".rstrip() for e in r.evidence), 12)
    for f in r.findings:
        lines += _wrap("  · ", f, 4)
    lines += not_about_lines(r)
    for c in r.alternatives:
        lines += _wrap("  then: ", f"{c.action} ({c.level}) — {gain_text(c.low, c.high)}: {c.basis}", 8)
    if r.kind == "experiment":
        lines += _wrap("  ", order_line(r.level), 9)
    rec = r.record_line()
    if rec:
        lines.append(f"  predictions: {rec}")
        for p in r.record[-3:]:
            lines += _wrap("    ", check_line(p), 6)
    for n in r.notes:
        lines += _wrap("  note: ", n, 8)
    return "\n".join(lines)


def html_sections(r: Any) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if getattr(r, "not_about", ()):
        rows = [(f"#{i}", mg, lab, why) for i, mg, lab, why in r.not_about]
        out.append((f"not about this code: {len(rows)} run{'s' if len(rows) != 1 else ''} not used",
                    table_html(rows, ("run", "magic", "label", "why"))))
    if r.record:
        rows = [(f"#{p.id}", p.label or "", p.action, gain_text(p.low, p.high),
                 "" if p.measured is None else _x(p.measured),
                 "" if p.run_b is None else f"#{p.run_b} vs #{p.run_a}",
                 "not tested" if p.within is None else ("within" if p.within else "missed"),
                 ", ".join(f"#{e}" for e in p.evidence)) for p in r.record]
        out.append((f"predictions: {r.record_line()}",
                    table_html(rows, ("id", "label", "proposed", "predicted", "measured", "runs", "result",
                                      "evidence"), scroll=True)))
    if r.alternatives:
        rows = [(c.level, c.action, gain_text(c.low, c.high), c.basis, c.command) for c in r.alternatives]
        out.append(("other candidates, in the method's order",
                    table_html(rows, ("level", "change", "expected", "basis", "test"))))
    out.append(("the optimization order (docs/method.md §6)", f"<pre style='margin:0'>{html.escape(order_line(r.level))}"
                                                          "</pre>"))
    return out


__all__ = ["check_line", "gain_text", "record_line", "html_sections", "not_about_lines", "order_line", "text"]
