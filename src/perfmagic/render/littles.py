"""Little's law solved (:class:`~perfmagic.scaling.littles.Little`) in one line: the quantity solved
for, then the law with all three numbers."""

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
