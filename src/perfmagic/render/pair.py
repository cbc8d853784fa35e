"""An interleaved A/B measurement (:class:`~perfmagic.timing.pair.PairResult`) in words: the verdict,
both medians and the ratio, the method, and what a decision at the bar would take."""

from __future__ import annotations

from typing import Any

from ..result import Result
from .text import fmt_time, pct
from .timing import pair_figure_png as figure_png  # noqa: F401
from .warnings import warning_lines


def text(r: Result) -> str:
    """The verdict of the pairs, both medians, B/A with its interval, the method, warnings, the advice."""
    pr: Any = r
    c = pr.comparison
    medians = (f"A {pr.a.label or 'A'}: {fmt_time(pr.a.median)} median   "
               f"B {pr.b.label or 'B'}: {fmt_time(pr.b.median)} median")
    if c is None:
        return (f"A/B interleaved in one process: interrupted after {pr.a.n_samples} pair(s), too few for a "
                f"verdict (3 at least)\n  {medians}")
    lines = [f"A/B interleaved in one process ({pr.a.n_samples} pairs): {c.sentence}",
             f"  {medians}   B/A = {c.ratio:.3f} (CI {c.ci_low:.3f}–{c.ci_high:.3f})",
             f"  method: {c.method}"]
    lines += warning_lines(list(dict.fromkeys(pr.a.warnings + pr.b.warnings)))
    advice = pr.advice()  # what to do next, not a warning: never folded
    if advice:
        lines.append(f"  → {advice}")
    return "\n".join(lines)


def advice(need: Any) -> str | None:
    """What a decision at the bar would take, from :func:`perfmagic.timing.pair.budget_needed`'s numbers
    (``None``: nothing to advise)."""
    if need is None:
        return None
    bar = f"±{pct(need.min_effect, 0)}"
    if need.kind == "on the bar":
        return (f"the change (B/A {need.ratio:.3f}) sits on the {bar} bar: no budget will settle it; judge it "
                f"against another bar (--min-effect)")
    if need.kind == "near the bar":
        return (f"the change (B/A {need.ratio:.3f}, CI {need.ci_low:.3f}–{need.ci_high:.3f}) is near the {bar} bar "
                f"and {need.pairs} pairs leave its interval wide: measure longer to see which side it settles on "
                f"(e.g. -b {need.secs}s), or judge it against another bar (--min-effect)")
    return (f"{need.pairs} pairs were too few for a decision at {bar}: it needs ~{need.secs} s (about "
            f"{need.pairs_needed} pairs of {need.pair_s * 1e3:.3g} ms); run with -b {need.secs}s")
