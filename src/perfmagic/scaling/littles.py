"""Little's law: concurrency = throughput × latency (L = λ·W), and the workers a target needs.

``littles(throughput=100, latency=1.0)`` -> 100 tasks in flight. Give any two of the three and the
third is solved. ``workers_for`` turns a target throughput and a measured per-task latency into a
worker count, capped by what this machine has *free* (usable cores minus the load other processes
put on them) when the work is CPU-bound: CPU work gains nothing from more workers than free cores,
while I/O waits (latency spent blocked) can use many more, bounded by the resource they wait on.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from ..errors import BadOptionError
from ..findings import Finding
from ..result import Displayed

_PER = {"s": 1.0, "sec": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "min": 60.0, "m": 60.0, "h": 3600.0}


def parse_rate(text: str) -> float:
    """``'100/s'``, ``'6000/min'``, ``'2/ms'``, ``'100'`` (per second) -> tasks per second."""
    t = str(text).strip().lower().replace(" ", "")
    num, _, unit = t.partition("/")
    try:
        value = float(num)
    except ValueError:
        raise BadOptionError("throughput", text, "a rate such as 100/s, 6000/min or 100 (per second)") from None
    scale = _PER.get(unit or "s")
    if scale is None:
        raise BadOptionError("throughput", text, "a rate per s, ms, min or h, e.g. 100/s")
    if not (value > 0 and math.isfinite(value)):
        raise BadOptionError("throughput", text, "a positive, finite rate", "e.g. 100/s")
    return value / scale


def parse_duration(text: str, option: str = "latency") -> float:
    from ..render.units import parse_duration as pd

    try:
        v = pd(str(text))
    except ValueError:
        raise BadOptionError(option, text, "a positive, finite duration such as 1s, 250ms, 2m or 0.5 (seconds)") from None
    if not (v > 0 and math.isfinite(v)):
        raise BadOptionError(option, text, "a positive, finite duration", "e.g. 250ms or 1s")
    return v


def parse_concurrency(text: str) -> float:
    """``'8'``, ``'2.5'`` (average tasks in flight) -> a positive float."""
    try:
        v = float(str(text).strip())
    except ValueError:
        raise BadOptionError("concurrency", text, "a number of tasks in flight, e.g. 8 or 2.5") from None
    if not (v > 0 and math.isfinite(v)):
        raise BadOptionError("concurrency", text, "a positive, finite number of tasks in flight", "e.g. 8")
    return v


@dataclass(frozen=True, repr=False)
class Little(Displayed):
    """L = λ·W solved for one quantity; the one computed is named by ``solved``."""

    primary_metric: ClassVar[str] = "concurrency"
    renderer: ClassVar[str] = "littles"

    throughput: float  # tasks/s
    latency: float     # s per task
    concurrency: float  # tasks in flight
    solved: str        # which of the three was computed

    def metrics(self) -> dict[str, Any]:
        return {"throughput": self.throughput, "latency_s": self.latency, "concurrency": self.concurrency,
                "solved": self.solved}

    def samples(self) -> dict[str, list[Any]]:
        return {}  # arithmetic, nothing sampled

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)



def littles(*, throughput: float | None = None, latency: float | None = None,
            concurrency: float | None = None) -> Little:
    """Solve L = λ·W for the one quantity not given (exactly two must be given)."""
    given = {k: v for k, v in (("throughput", throughput), ("latency", latency), ("concurrency", concurrency))
             if v is not None}
    if len(given) != 2:
        raise BadOptionError("littles", ", ".join(given) or "nothing", "exactly two of throughput, latency, concurrency",
                             "e.g. %littles throughput=100/s latency=1s")
    for k, v in given.items():
        if not (isinstance(v, (int, float)) and v > 0 and math.isfinite(v)):
            raise BadOptionError(k, v, "a positive, finite number")
    if concurrency is None:
        return Little(throughput, latency, throughput * latency, "concurrency")  # type: ignore[operator]
    if throughput is None:
        return Little(concurrency / latency, latency, concurrency, "throughput")  # type: ignore[operator]
    return Little(throughput, concurrency / throughput, concurrency, "latency")


def free_cores() -> tuple[float, int]:
    """``(free, usable)``: usable cores minus the 1-minute load average, at least 0."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = 0.0
    return max(usable - load, 0.0), usable


def workers_for(throughput: float, latency: float, *, cpu_bound: bool = True) -> tuple[int, list[Finding]]:
    """Workers needed for ``throughput`` tasks/s at ``latency`` s each, and the caveats that apply
    (:class:`~perfmagic.findings.Finding` s: ``str()`` of one is its sentence)."""
    need = math.ceil(littles(throughput=throughput, latency=latency).concurrency - 1e-9)
    notes: list[Finding] = []
    free, usable = free_cores()
    if cpu_bound and need > max(1, math.floor(free)):
        cap = max(1, math.floor(free))
        notes.append(Finding.of("littles.capped", need=need, free=free, usable=usable, cap=cap,
                                reachable=cap / latency))
        need = cap
    elif not cpu_bound:
        notes.append(Finding.of("littles.io-bound"))
    return need, notes
