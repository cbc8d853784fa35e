"""A regression guard's answer (:class:`~perfmagic.guard.runtime.GuardVerdict`): kept, LOST or cannot
tell with its reason, then perfmagic's measurement text, every line within 100 columns."""

from __future__ import annotations

from typing import Any

from ..result import Result
from .text import wrap


def text(r: Result) -> str:
    v: Any = r
    head = {"kept": "kept", "lost": "LOST", "cannot tell": "cannot tell"}[v.status]
    lines = wrap(f"perfmagic guard: {head} — {v.sentence}", "", "    ", break_long_words=True)
    for ln in v.evidence.splitlines():
        lines += wrap("  " + ln, "", "      ", break_long_words=True) if ln.strip() else [""]
    return "\n".join(lines)
