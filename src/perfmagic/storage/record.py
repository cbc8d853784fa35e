"""Ledger records rebuilt into their results (a row becomes its :class:`~perfmagic.record.RunRecord` in :mod:`.rows`).

:func:`kinds` is the registry: a record's ``kind`` (the magic's name, or ``ranks`` for ``%%amdahl --ranks``)
→ the result class whose ``from_record`` rebuilds it. :func:`run` is ``perfmagic.run(N)``: run #N of the
ledger, rebuilt — raw samples, text, figure and HTML as when it was measured — after a restart too.
"""

from __future__ import annotations

from typing import Any

from ..record import RunRecord

__all__ = ["kinds", "rebuild", "run"]


def kinds() -> dict[str, type]:
    """``{kind: result class}``: every kind of run the ledger holds (imports the result modules)."""
    from ..dataloader.result import DataLoaderResult
    from ..estimation.result import EstimateResult
    from ..profile.flameresult import FlameResult
    from ..profile.lineprof import LineProfResult
    from ..profile.memresult import MemoryResult
    from ..profile.where import WhereResult
    from ..roofs.roofline import RooflineResult
    from ..ranks.result import RanksResult
    from ..scaling.result import AmdahlResult
    from ..timing.results import BenchResult

    return {"gpubench": BenchResult, "roofline": RooflineResult, "amdahl": AmdahlResult, "ranks": RanksResult,
            "distributed": RanksResult, "estimate": EstimateResult, "dataloader_check": DataLoaderResult,
            "memory": MemoryResult, "flame": FlameResult, "lineprof": LineProfResult,
            "where": WhereResult}


def rebuild(rec: RunRecord) -> Any:
    """The result ``rec`` stored. A kind this perfmagic does not know, or a row that lacks what its result
    needs (written before payloads were stored): :class:`~perfmagic.errors.PerfmagicError` naming the run."""
    from ..errors import PerfmagicError

    cls = kinds().get(rec.kind)
    if cls is None:
        raise PerfmagicError(f"run #{rec.id} was recorded by %%{rec.magic}, whose results perfmagic cannot rebuild "
                             f"(kinds it rebuilds: {', '.join(sorted(kinds()))}); perfmagic.ledger() shows its numbers")
    try:
        return cls.from_record(rec)
    except PerfmagicError:
        raise
    except Exception as exc:  # noqa: BLE001 - a payload of another version: say which run, not a traceback
        raise PerfmagicError(f"run #{rec.id} ({rec.magic}) cannot be rebuilt as a {cls.__name__}: its stored "
                             f"fields do not fit this perfmagic ({type(exc).__name__}: {exc})") from exc


def _valid_id(value: Any) -> int:
    from ..errors import PerfmagicError

    text = str(value).strip()
    if isinstance(value, bool) or not text.lstrip("#").lstrip("-").isdigit():
        raise PerfmagicError(f"run: got {value!r}; expected a run id, a whole number ≥ 1 (12 or #12); "
                             "%perf lists the runs")
    rid = int(text.lstrip("#"))
    if rid < 1:
        raise PerfmagicError(f"run: got {value!r}; run ids start at 1 (12 or #12); %perf lists the runs")
    return rid


def _range(led: Any) -> str:
    try:
        got = led._query("SELECT MIN(id) AS lo, MAX(id) AS hi FROM runs") or []
    except Exception:  # noqa: BLE001
        got = []
    lo, hi = (got[0]["lo"], got[0]["hi"]) if got else (None, None)
    return f"runs #{lo} to #{hi}" if lo is not None else "no runs yet"


def run(run_id: Any, *, ledger: Any = None) -> Any:
    """Run ``run_id`` (``12``, ``"12"`` or ``"#12"``) of ``ledger`` (a :class:`Ledger`, a ledger folder, or
    None: this notebook's) rebuilt into its result. Bad or unknown id: one-line PerfmagicError naming it
    and the ids there are."""
    from ..errors import PerfmagicError
    from .db import UnknownRunError
    from .ledger import Ledger
    from .session import current_ledger

    led = ledger if isinstance(ledger, Ledger) else (Ledger(ledger) if ledger is not None else current_ledger())
    pending = {r["id"] for r in led.pending}  # runs kept in memory (the file could not be written): ids < 0
    rid = run_id if isinstance(run_id, int) and run_id in pending else _valid_id(run_id)
    try:
        rec = led.record_of(rid)
    except UnknownRunError:
        raise PerfmagicError(f"run: no run #{rid} in the ledger {led.path} ({_range(led)}); %perf lists them") \
            from None
    return rebuild(rec)
