"""What a generated guard file runs: the accepted change measured again, and perfmagic's verdict on it.

A guard written by :func:`perfmagic.guard.write_guard` calls one of two checks:

* :func:`check_pair` — the baseline code A and the accepted change B, measured **interleaved in this
  process** (:func:`perfmagic.bench_pair`: A B / B A pairs in a seeded random order, so the machine's
  drift and a busy neighbour slow both members of a pair and cancel in their ratio). The change is
  *kept* when the whole 95% CI of B/A is below the bar ``1/(1+m)`` (perfmagic's "faster" verdict at
  the minimum effect ``m``), *lost* when the whole interval is at or above it ("no real change" or
  "slower"). ``hold_gain=True`` lowers the bar to ``accepted × (1+m)``: the gain may shrink by no
  more than ``m``.
* :func:`check_target` — the accepted code measured alone (:func:`perfmagic.bench`); *kept* when the
  whole 95% CI of its median is within ``target × (1+m)``, *lost* when the whole interval is above it.

An interval that straddles the bar is measured once more with twice the budget (the interval narrows
as one over the square root of the pairs). Under load (others kept at least ``LOADED_CORES`` busy) a
verdict is measured a second time and must agree: a burst of a neighbour can move a whole interval
(one missed regression in 80 beside a busy neighbour before this rule, ``benchmarks/bench_guard.py``).
Still straddling, or two verdicts that disagree: the verdict is "cannot tell", which fails the guard
too (a guard's job is to show that the gain holds; one that cannot is said to be so, with the
reason, never reported as a loss). Every verdict's text carries perfmagic's own measurement text.

The measured code's exceptions propagate untouched (pytest shows their traceback); Ctrl-C stops the
measurement at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ..result import Displayed

VERDICTS = ("kept", "lost", "cannot tell")
RETRY_FACTOR = 2.0  # an interval on the bar: measured once more with this many times the budget
LOADED_CORES = 0.25  # others' load (cores) above which a verdict is measured twice and must agree


def _loaded(result: Any) -> bool:
    env = getattr(getattr(result, "b", result), "env", None) or {}
    others = env.get("others_cores")
    return others is not None and others >= LOADED_CORES


@dataclass(frozen=True, repr=False)
class GuardVerdict(Displayed):
    """A guard's answer: did the accepted gain hold (``passed``), and perfmagic's evidence for it."""

    primary_metric: ClassVar[str] = "value"
    renderer: ClassVar[str] = "guard"

    status: str          # "kept" | "lost" | "cannot tell"
    evidence: str        # perfmagic's measurement text (the pair's or the run's)
    value: float         # B/A (pair) or the median in seconds (target)
    ci: tuple[float, float]
    bar: float           # the ratio (pair) or the time (target) the interval is judged against
    kind: str            # "pair" | "target"
    attempts: int = 1
    labels: tuple[str, str] = ("A", "B")  # the pair's labels; a target's label is the second
    min_effect: float = 0.10
    held: bool = False                    # the bar is the accepted gain less min_effect (hold_gain)
    accepted: float | None = None         # B/A when the change was accepted
    repeat: tuple[float, float, float] | None = None       # under load, the verdict measured again: B/A, CI
    first: tuple[str, float, float, float] | None = None   # ... and the first one, when the two disagree
    pairs: int = 0                        # pairs in the last measurement
    target_s: float | None = None

    @property
    def sentence(self) -> str:
        """Why, in one line (written by :func:`perfmagic.render.guard.sentence`)."""
        from ..render.guard import sentence

        return sentence(self)

    @property
    def passed(self) -> bool:
        return self.status == "kept"

    def metrics(self) -> dict[str, Any]:
        return {"status": self.status, "value": self.value, "ci_low": self.ci[0], "ci_high": self.ci[1],
                "bar": self.bar, "kind": self.kind, "attempts": self.attempts}

    def samples(self) -> dict[str, list[Any]]:
        return {}

    def to_dict(self) -> dict[str, Any]:
        return {**self.metrics(), "sentence": self.sentence, "evidence": self.evidence}


def check_pair(code_a: str, code_b: str, *, setup_a: str = "", setup_b: str = "",
               namespace: Mapping[str, Any] | None = None, labels: tuple[str, str] = ("A", "B"),
               min_effect: float = 0.10, budget: float = 2.0, accepted: float | None = None,
               hold_gain: bool = False, device: str = "auto", sync: str = "auto",
               gc: bool = False, work: tuple[float, float] | None = None) -> GuardVerdict:
    """Measure A and B interleaved; ``kept`` when the whole 95% CI of B/A is below the bar.

    The bar is ``1/(1+min_effect)`` (B still faster than A by the minimum effect); with ``hold_gain``
    it is also ``accepted × (1+min_effect)``: the gain measured at acceptance (``accepted`` = B/A then)
    may shrink by no more than the minimum effect — stricter, and only as portable as that ratio is
    across machines. ``lost`` when the whole interval is at or above the bar. ``work``: the work per
    call of A and of B (``--items``) when the change was accepted per unit of it: B/A is then judged
    per unit too (the time ratio × A's work / B's)."""
    __tracebackhide__ = True
    from ..timing.pair import bench_pair

    bar = 1.0 / (1.0 + min_effect)
    held = hold_gain and accepted is not None and accepted * (1.0 + min_effect) < bar
    if held:
        bar = accepted * (1.0 + min_effect)

    def measure(b: float) -> tuple[str, Any]:
        pr = bench_pair(code_a, code_b, setup_a, setup_b, globals=dict(namespace or {}), labels=labels,
                        budget=b, min_effect=min_effect, memory=False, device=device, sync=sync, gc=gc,
                        filenames=("<guard A>", "<guard B>"))
        if work:  # per unit of work: every ratio scales by A's work / B's
            from dataclasses import replace

            k = float(work[0]) / float(work[1])
            c0 = pr.comparison
            pr = replace(pr, comparison=replace(c0, ratio=c0.ratio * k, ci_low=c0.ci_low * k, ci_high=c0.ci_high * k))
        c = pr.comparison
        return ("kept" if c.ci_high < bar else "lost" if c.ci_low >= bar else "cannot tell"), pr

    status, pr = measure(budget)
    attempts = 1
    if status == "cannot tell":  # on the bar: the interval narrows with more pairs
        status, pr = measure(budget * RETRY_FACTOR)
        attempts += 1
    first, repeat = None, None
    if status != "cannot tell" and _loaded(pr):  # under load an interval can miss: a verdict must be repeated
        first = (status, pr)
        again, pr2 = measure(budget)
        attempts += 1
        c2 = pr2.comparison
        repeat = (c2.ratio, c2.ci_low, c2.ci_high)
        if again != status:
            status, pr = "cannot tell", pr2
    c, c1 = pr.comparison, first[1].comparison if first is not None else None
    disagreed = (first[0], c1.ratio, c1.ci_low, c1.ci_high) if status == "cannot tell" and c1 is not None else None
    return GuardVerdict(status, pr.text(), c.ratio, (c.ci_low, c.ci_high), bar, "pair", attempts, labels, min_effect,
                        bool(held), accepted, repeat if disagreed is None else None, disagreed, pr.a.n_samples)


def check_target(code: str, *, setup: str = "", namespace: Mapping[str, Any] | None = None,
                 target_s: float, label: str = "B", min_effect: float = 0.10, budget: float = 2.0,
                 device: str = "auto", sync: str = "auto", gc: bool = False) -> GuardVerdict:
    """Measure the code alone; ``kept`` when its median's 95% CI is within ``target_s × (1+min_effect)``."""
    __tracebackhide__ = True
    from ..timing.bench import bench

    limit = target_s * (1.0 + min_effect)
    attempts, b = 0, float(budget)
    while True:
        attempts += 1
        r = bench(code, setup, globals=dict(namespace or {}), label=label, budget=b, memory=False,
                  device=device, sync=sync, gc=gc, filename="<guard>")
        lo, hi = r.ci
        if hi <= limit or lo > limit or attempts >= 2:
            break
        b *= RETRY_FACTOR
    status = "kept" if hi <= limit else "lost" if lo > limit else "cannot tell"
    return GuardVerdict(status, r.text(), r.median, (lo, hi), limit, "target", attempts, ("", label), min_effect,
                        target_s=target_s)


def report(verdict: GuardVerdict) -> None:
    """Print the verdict; fail the calling pytest test with it unless the gain was kept."""
    __tracebackhide__ = True
    if verdict.passed:
        print(verdict.text())  # shown by pytest -s / -rP
        return
    import pytest

    pytest.fail(verdict.text(), pytrace=False)


__all__ = ["GuardVerdict", "check_pair", "check_target", "report", "VERDICTS"]
