"""Regression guards: a gain accepted in a notebook kept as a plain pytest file.

``%perf guard RUN PATH --module mypkg.ops`` (or :func:`write_guard`) writes a test that rebuilds the
measured call from the run's code and setup, with the names it reads imported from ``mypkg.ops``,
measures it with perfmagic's same-process interleaved method against the recorded baseline code (or
against a target) and fails, printing perfmagic's verdict, when the accepted gain is lost beyond the
minimum effect. ``plan.py`` finds what a run stands for (its accepted comparison or its target) and the
names its code reads; ``writer.py`` renders and writes the file; ``runtime.py`` is what the file calls.
"""

from __future__ import annotations

from .plan import GuardError
from .runtime import GuardVerdict, check_pair, check_target, report
from .writer import GuardFile, write_guard

__all__ = ["write_guard", "GuardFile", "GuardError", "check_pair", "check_target", "report", "GuardVerdict"]
