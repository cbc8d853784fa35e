"""``NextStep``: the next experiment ``%perf next`` proposes, its expected gain and the record of
earlier predictions checked against what was measured afterwards."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from ..findings import Finding
from ..result import Displayed


def found(kind: str, **values: Any) -> Finding:
    """One reading of the evidence as data, ``advisor.<kind>`` (worded by
    :mod:`perfmagic.render.advisor_words`, which has the sentence of every kind)."""
    return Finding.of("advisor." + kind, **values)

# The optimization order of docs/method.md §6: a lower level only after the higher ones are ruled out.
LEVELS = ("algorithm", "data structure", "I/O", "memory", "concurrency", "vectorization", "compute",
          "caching")


@dataclass(frozen=True)
class Candidate:
    """One experiment the evidence supports, with its expected gain ``low``–``high`` (``high``
    None: the evidence sets no upper bound) and the sentence that says where the numbers come from."""

    level: str
    action: str
    low: float
    high: float | None
    basis: str
    command: str
    evidence: tuple[int, ...]
    low_why: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["evidence"] = list(self.evidence)
        return d


@dataclass(frozen=True)
class PredictionCheck:
    """A proposal recorded earlier, and (once a later comparison tested it) the gain measured.

    ``measured`` is A's median over B's (2.0: twice as fast), ``measured_low``/``measured_high`` its
    95% interval; ``within`` is True when that interval reaches the predicted range, False when it
    lies wholly outside (a miss), None while no comparison has tested it yet."""

    id: int
    label: str | None
    action: str
    low: float
    high: float | None
    basis: str
    evidence: tuple[int, ...]
    run_a: int | None = None
    run_b: int | None = None
    measured: float | None = None
    within: bool | None = None
    # where the measured change went (a %perf compare that re-measured A and B, issue 33): the functions
    # the prediction was about, and the share of the change that went to them (None: not known)
    predicted_in: tuple[str, ...] = ()
    share_there: float | None = None

    @property
    def checked(self) -> bool:
        return self.measured is not None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["evidence"] = list(self.evidence)
        return d


@dataclass(frozen=True)
class NextStep(Displayed):
    """What to do next, and why.

    ``kind``: ``"experiment"`` (a change to try, with its expected gain), ``"measure"`` (the
    evidence is missing: the measurement to take first), ``"stop"`` (the target is met, or nothing
    measured points to a gain above the bar) or ``"inconclusive"`` (the target may be met: measure
    longer to tell). ``low``/``high`` is the expected gain (× faster) of the proposed change, ``high``
    None when no measurement bounds it; ``basis`` says where both ends come from. ``evidence``: the
    run ids it rests on. ``not_about``: the evidence left out because it is about other code, as
    ``(run id, magic, label, why)``. ``record``: every prediction of this notebook, checked or still
    open."""

    primary_metric: ClassVar[str] = "high"
    renderer: ClassVar[str] = "advisor"

    kind: str
    action: str
    label: str | None = None
    level: str | None = None
    low: float | None = None
    high: float | None = None
    basis: str = ""
    low_why: str = ""
    command: str = ""
    evidence: tuple[int, ...] = ()
    evidence_names: tuple[tuple[int, str], ...] = ()
    findings: tuple[Finding, ...] = ()  # advisor.* findings; an older row's text stays a str
    not_about: tuple[tuple[int, str, str, str], ...] = ()
    alternatives: tuple[Candidate, ...] = ()
    target_s: float | None = None
    latest_run: int | None = None
    latest_s: float | None = None
    latest_ci_high_s: float | None = None
    record: tuple[PredictionCheck, ...] = ()
    prediction_id: int | None = None
    min_effect: float = 0.10
    notes: tuple[Finding, ...] = field(default_factory=tuple)  # as findings

    # -- the record of checked predictions ---------------------------------------------------

    @property
    def checked(self) -> tuple[PredictionCheck, ...]:
        return tuple(p for p in self.record if p.checked)

    @property
    def within(self) -> int:
        return sum(1 for p in self.checked if p.within)

    def record_line(self) -> str:
        """``"3 of 4 predictions within range (1 not tested yet)"``, or ``""`` with no predictions
        (:func:`perfmagic.render.advisor.record_line`)."""
        from ..render.advisor import record_line

        return record_line(self)

    # -- the result protocol -----------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["evidence"] = list(self.evidence)
        d["findings"] = [str(f) for f in self.findings]
        d["not_about"] = [list(x) for x in self.not_about]
        d["notes"] = [str(n) for n in self.notes]
        d["alternatives"] = [c.to_dict() for c in self.alternatives]
        d["record"] = [p.to_dict() for p in self.record]
        return d

    def metrics(self) -> dict[str, Any]:
        return {"kind": self.kind, "level": self.level, "label": self.label, "low": self.low, "high": self.high,
                "target_s": self.target_s, "latest_s": self.latest_s, "predictions": len(self.record),
                "predictions_checked": len(self.checked), "predictions_within": self.within}

    def samples(self) -> dict[str, list[Any]]:
        chk = self.checked
        return {"predicted_low": [p.low for p in chk],
                "predicted_high": [math.inf if p.high is None else p.high for p in chk],
                "measured": [p.measured for p in chk]}


__all__ = ["Candidate", "LEVELS", "NextStep", "PredictionCheck"]
