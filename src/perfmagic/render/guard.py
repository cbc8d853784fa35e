"""A regression guard's answer (:class:`~perfmagic.guard.runtime.GuardVerdict`): kept, LOST or cannot
tell with its reason, then perfmagic's measurement text, every line within 100 columns."""

from __future__ import annotations

from typing import Any

from ..result import Result
from .text import change_words, fmt_time, wrap


def text(r: Result) -> str:
    v: Any = r
    head = {"kept": "kept", "lost": "LOST", "cannot tell": "cannot tell"}[v.status]
    lines = wrap(f"perfmagic guard: {head} — {v.sentence}", "", "    ", break_long_words=True)
    for ln in v.evidence.splitlines():
        lines += wrap("  " + ln, "", "      ", break_long_words=True) if ln.strip() else [""]
    return "\n".join(lines)


def _r(x: float) -> str:
    return f"{x:.3g}"


def _pair_sentence(v: Any) -> str:
    m, bar, (la, lb) = v.min_effect, v.bar, v.labels
    then = f" (at acceptance: {change_words(v.accepted)}, B/A {_r(v.accepted)})" if v.accepted else ""
    what = f"the accepted gain less {m:.0%} (B/A {bar:.3g})" if v.held else f"the {m:.0%} bar (B/A {bar:.3f})"
    repeat = (f"; repeated under load: B/A {_r(v.repeat[0])}, 95% CI {_r(v.repeat[1])}–{_r(v.repeat[2])}"
              if v.repeat else "")
    now = f"B/A {_r(v.value)}, 95% CI {_r(v.ci[0])}–{_r(v.ci[1])}"
    if v.status == "kept":
        return f"B '{lb}' vs A '{la}' is still {change_words(v.value)} ({now}, below {what}{repeat}){then}"
    if v.status == "lost":
        return (f"the accepted gain is lost: B '{lb}' vs A '{la}' is now {change_words(v.value)} ({now}; B must "
                f"stay below {what}{repeat}){then}")
    if v.first is not None:
        st, r1, lo1, hi1 = v.first
        return (f"cannot tell, because two measurements under load disagree: B/A {_r(r1)} (95% CI "
                f"{_r(lo1)}–{_r(hi1)}: {st}), then {now}, against {what}{then}; run it on a quieter machine")
    return (f"cannot tell, because after {v.attempts} measurements ({v.pairs} pairs in the last) the {now} still "
            f"straddles {what}: the gain is not shown to hold{then}; run it on a quieter machine or raise BUDGET_S")


def _target_sentence(v: Any) -> str:
    label, (lo, hi) = v.labels[1], v.ci
    ci = f"95% CI {fmt_time(lo)}–{fmt_time(hi)}"
    goal = f"the target {fmt_time(v.target_s)} (+{v.min_effect:.0%}: {fmt_time(v.bar)})"
    if v.status == "kept":
        return f"'{label}' takes {fmt_time(v.value)} ({ci}), within {goal}"
    if v.status == "lost":
        return f"the target is lost: '{label}' takes {fmt_time(v.value)} ({ci}), above {goal}"
    return (f"cannot tell, because the {ci} of '{label}' still straddles {goal} after {v.attempts} measurements; "
            "run it on a quieter machine or raise BUDGET_S")


def sentence(r: Result) -> str:
    """A guard verdict's reason in one line, from its numbers: kept, lost, or why it cannot tell."""
    v: Any = r
    return _pair_sentence(v) if v.kind == "pair" else _target_sentence(v)
