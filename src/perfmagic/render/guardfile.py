"""A regression guard written (:class:`~perfmagic.guard.writer.GuardFile`): where, what makes it fail,
the evidence at acceptance, the names it imports, and the command that runs it."""

from __future__ import annotations

from typing import Any

from ..result import Result
from .text import wrap


def text(r: Result) -> str:
    g: Any = r
    what = f"run #{g.run_id} vs #{g.baseline_id}" if g.baseline_id is not None else f"run #{g.run_id}"
    names = f"{', '.join(g.names)} from {g.module}" if g.module and g.names else (
        ", ".join(g.names) if g.names else "none (the code is self-contained)")
    lines = [f"perfmagic: wrote a regression guard for {what}", f"  file:       {g.path}"]
    for key, value in (("fails when", g.checks), ("accepted", g.accepted), ("names", names)):
        lines += wrap(f"  {key + ':':<11} {value}", "", " " * 14, break_long_words=True)
    lines.append(f"  run it:     {g.command}   (about {g.budget_s:.0f} s)")
    return "\n".join(lines)
