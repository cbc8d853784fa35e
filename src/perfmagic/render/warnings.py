"""The ``!`` lines of an output: the two that matter most shown, the rest folded.

A result may carry many warnings; a reader acts on the first two. :func:`shown_and_folded` ranks them
(a stable sort, so equal ranks keep the order the analysis gave them):

0. the number itself is invalid or not what was asked: thread oversubscription, throttled clocks, a failed
   or interrupted step, roofs of another device or measured under load, work miscounted;
1. other processes' load during the measurement;
2. this machine's speed state (the fixed reference workload);
3. the measurement's own quality: precision not reached, few samples, high spread, still drifting;
4. information (the first call's cost, a short sample, anything else).

:func:`warning_lines` draws them for text/plain (each ``!`` line wrapped within 100 columns, then one
``(+N more: ...)`` line); :func:`folded_html` gives the folded ones for a ``<details>`` section of the HTML
(:func:`perfmagic.render.bundle.mimebundle` adds it). The rank is read from the text, so warnings read back
from a ledger row fold the same way.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from typing import Any

from .text import wrap

WIDTH = 100
LIMIT = 2

# (rank, pattern), checked in this order; the first pattern that matches the lower-cased text gives the rank
_RANKS: tuple[tuple[int, str], ...] = (
    (0, r"oversubscription|throttled|sm clock|^failed at|failed:|interrupted after|roofs were measured while"
        r"|but the roofs are of|undercounted|above the dram roof|not fitted|roof is unreliable|emulation"
        r"|counted tensors live on|memory-bound against dram only"),
    (4, r"^the first call"),  # reported apart from the samples, whatever the load during it
    (2, r"slow state|speed state|machine ran .* slower|machine's own speed|host's memory (ran|changed phase)"),
    (1, r"other processes|others kept|busy neighbour"),
    (3, r"precision target|only \d+ samples|spread is high|still drifting|noisy"),
)


def rank(warning: str) -> int:
    """0 (invalidates the number) … 4 (information); see the module docstring."""
    low = warning.lower()
    for r, pat in _RANKS:
        if re.search(pat, low):
            return r
    return 4


def shown_and_folded(warnings: Iterable[str], limit: int = LIMIT) -> tuple[list[str], list[str]]:
    """``(shown, folded)``: the ``limit`` most important warnings, most important first, and the rest
    (in the same order). Duplicates are dropped; equal ranks keep their given order."""
    items = [w for w in dict.fromkeys(str(w) for w in warnings if w)]
    ordered = sorted(items, key=rank)  # stable
    return ordered[:max(limit, 0)], ordered[max(limit, 0):]


def _topic(warning: str, most: int = 40) -> str:
    """The first words of a warning, up to its first colon, semicolon, dash or parenthesis (cut at a word)."""
    head = re.split(r"[:;(—]| - ", warning, maxsplit=1)[0].strip().rstrip(",.")
    if len(head) <= most:
        return head
    return head[:head.rfind(" ", 0, most)].rstrip(",.") + "…"


def fold_line(folded: Sequence[str], indent: str = "  ", width: int = WIDTH) -> str | None:
    """``  (+N more: topic; topic; see …)`` within ``width`` columns (as many topics as fit, whole),
    or None when nothing is folded."""
    if not folded:
        return None
    head = f"{indent}(+{len(folded)} more: "
    topics = [_topic(w) for w in folded]
    for k in range(len(topics), 0, -1):  # as many topics as fit, then the longer pointer where it fits
        for tail in ("; see .warnings or the HTML details)", "; see .warnings)"):
            line = head + "; ".join(topics[:k]) + ("; …" if k < len(topics) else "") + tail
            if len(line) <= width:
                return line
    return f"{indent}(+{len(folded)} more warnings: see .warnings)"


def warning_lines(warnings: Iterable[str], limit: int = LIMIT, indent: str = "  ", width: int = WIDTH) -> list[str]:
    """The text/plain ``!`` lines: the shown warnings, each wrapped within ``width`` columns (continuation
    lines under the text), then the fold line when some are folded."""
    shown, folded = shown_and_folded(warnings, limit)
    first, rest = indent + "! ", indent + "  "
    lines: list[str] = []
    for w in shown:
        lines += wrap(w, first, rest, width)
    more = fold_line(folded, indent, width)
    return lines + ([more] if more else [])


def all_warnings(result: Any) -> list[str]:
    """Every ``!`` item of a result: ``result.all_warnings()`` where it composes several lists, else
    ``result.warnings``."""
    fn = getattr(result, "all_warnings", None)
    if callable(fn):
        return [str(w) for w in fn()]
    return [str(w) for w in getattr(result, "warnings", None) or ()]


def folded_html(warnings: Iterable[str], limit: int = LIMIT) -> tuple[str, str] | None:
    """``(title, html)`` of the folded warnings for a ``<details>`` section, or None when none are folded."""
    _, folded = shown_and_folded(warnings, limit)
    if not folded:
        return None
    body = "".join(f"<li>{html.escape(w)}</li>" for w in folded)
    return (f"{len(folded)} more warning{'s' if len(folded) != 1 else ''}",
            f"<ul style='margin:2px 0;padding-left:1.4em'>{body}</ul>")


__all__ = ["LIMIT", "all_warnings", "fold_line", "folded_html", "rank", "shown_and_folded", "warning_lines"]
