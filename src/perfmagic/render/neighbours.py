"""The words of ``python -m perfmagic.core.neighbours`` (a planted noisy neighbour, run from a shell): its
usage errors and the line it ends with. :func:`perfmagic.core.neighbours.main` measures; this says it."""

from __future__ import annotations

#: no command after ``--``
NO_COMMAND = "no command given: put it after --, e.g. -- python -m pytest -q"


def bad_count(n: int) -> str:
    """A negative number of neighbours, and the fix."""
    return f"n: got {n}; expected a number of processes >= 0, e.g. 1"


def summary(n: int, command: list[str], seconds: float, neighbour_cores: float | None,
            others_cores: float | None, rc: int) -> str:
    """The closing line: how long the command ran beside ``n`` neighbours, the load they put on the machine
    (``neighbour_cores``) and that of every process but this one (``others_cores``; None: not measured),
    and the command's exit status."""
    theirs = "unknown" if neighbour_cores is None else f"{neighbour_cores:.2f}"
    everyone = "unknown" if others_cores is None else f"{others_cores:.2f}"
    return (f"perfmagic.core.neighbours: {n} busy neighbour(s) ran beside `{' '.join(command)}` for "
            f"{seconds:.0f} s; the neighbours kept {theirs} cores busy on average (all processes but this "
            f"one, the command included: {everyone}); exit status {rc}")


__all__ = ["NO_COMMAND", "bad_count", "summary"]
