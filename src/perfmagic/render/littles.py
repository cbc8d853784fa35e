"""Little's law solved (:class:`~perfmagic.scaling.littles.Little`) in one line: the quantity solved
for, then the law with all three numbers; and the workers ``%littles`` sizes a pool with."""

from __future__ import annotations

from typing import Any

from ..result import Result
from .text import fmt_time


def text(r: Result) -> str:
    x: Any = r
    head = {"concurrency": f"needed concurrency: {x.concurrency:.3g} tasks in flight",
            "throughput": f"throughput: {x.throughput:.4g} tasks/s",
            "latency": f"latency allowed per task: {fmt_time(x.latency)}"}[x.solved]
    return (f"{head}   (Little's law L = λ·W: {x.concurrency:.3g} in flight = "
            f"{x.throughput:.4g}/s × {fmt_time(x.latency)})")


def workers_line(n: int, io: bool) -> str:
    """``%littles``' line of the workers the target needs (``io``: the tasks mostly wait, so the free cores
    do not bound them; otherwise the line says how to tell it so)."""
    return f"  workers: {n}" + ("" if io else " (CPU-bound; --io if the tasks mostly wait)")
