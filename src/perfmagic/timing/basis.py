"""What a comparison judges: time per call, or time per unit of the work each run declared.

A run that declares its work per call (``--items``, ``--flops``, ``--bytes``) is judged per unit of that
work when the other run declares the same unit: batch 8 → 32 is 3× slower per call and may be 1.4×
faster per item, and only the second is the question. When one side declares work and the other does
not, or they use different units, neither can be judged (:attr:`Basis.refusal`). :func:`per_call` reads
a ledger row's samples as times per call. Used by the comparison flow (:mod:`perfmagic.timing.flow`),
the historical comparison (:mod:`perfmagic.timing.history`), the between-run noise and the ledger's views.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..findings import Finding
WORK_UNITS = ("items", "flops", "bytes")
UNIT_WORD = {"items": "item", "flops": "FLOP", "bytes": "byte"}
OPTION = {"items": "--items", "flops": "--flops", "bytes": "--bytes"}


def work_of(row: Mapping[str, Any]) -> dict[str, float]:
    """The work one call of a recorded run declared: ``{"items": 32.0}``; empty when none
    (:func:`perfmagic.storage.codec.work_of`, which the ledger also keeps as a column)."""
    from ..storage.codec import work_of as _work_of

    return _work_of(row.get("options") or {}, row.get("metrics") or {})


def _amount(v: float) -> str:
    return f"{v:g}" if v < 1e6 else f"{v:.3g}"


@dataclass(frozen=True)
class Basis:
    """What a comparison judges: time per call (``unit`` None) or per unit of declared work.

    ``a``/``b``: the work per call of each side in ``unit``; ``refusal``: why neither per call nor per
    unit can be judged (one side declares work, the other none; or different units)."""

    unit: str | None = None
    a: float | None = None
    b: float | None = None
    refusal: Any = None  # a basis.* finding

    @property
    def per(self) -> str:
        return f"per {UNIT_WORD.get(self.unit or '', self.unit)}" if self.unit else "per call"

    def scale(self, xs: list[float], side: str) -> list[float]:
        """Per-call times -> times per unit of work (unchanged when judged per call)."""
        if not self.unit:
            return xs
        w = self.a if side == "A" else self.b
        return [x / w for x in xs] if w else xs

    def to_dict(self) -> dict[str, Any]:
        return {"unit": self.unit, "a": self.a, "b": self.b,
                "refusal": None if self.refusal is None else str(self.refusal)}


def basis(ra: Mapping[str, Any], rb: Mapping[str, Any]) -> Basis:
    """Per call when neither run declares work or both declare the same amount; per unit when both
    declare different amounts of one unit (items first, then FLOPs, then bytes); else a refusal."""
    wa, wb = work_of(ra), work_of(rb)
    if not wa and not wb:
        return Basis()
    common = [k for k in WORK_UNITS if k in wa and k in wb]
    if common:
        k = common[0]
        if wa[k] == wb[k]:
            return Basis(None, wa[k], wb[k])   # the same work per call: per call is per unit
        return Basis(k, wa[k], wb[k])
    if wa and wb:
        ua, ub = next(iter(wa)), next(iter(wb))
        return Basis(refusal=Finding.of("basis.units-differ", ua=ua, ub=ub, oa=OPTION[ua], ob=OPTION[ub]))
    has, side, other = (wa, "A", "B") if wa else (wb, "B", "A")
    k = next(iter(has))
    return Basis(refusal=Finding.of("basis.one-side", side=side, other=other, amount=_amount(has[k]), unit=k,
                                    option=OPTION[k], word=UNIT_WORD[k]))


def per_call(row: Mapping[str, Any]) -> list[float]:
    """A ledger row's raw samples as times per call (each block's time over its calls)."""
    s = row.get("samples") or {}
    raw, number = s.get("raw") or [], s.get("number") or 1
    return [t / number for t in raw]


__all__ = ["Basis", "OPTION", "UNIT_WORD", "WORK_UNITS", "basis", "per_call", "work_of"]
