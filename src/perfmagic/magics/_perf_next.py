"""``%perf next`` and ``%perf target``: the front end of :mod:`perfmagic.advisor` (being built, issue 20)."""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError


def perf_next(magics: Any, led: Any, t: list[str], args: Any, notebook: Any) -> Any:
    raise UsageError("%perf next: not built yet (issue 20)")


def perf_target(magics: Any, led: Any, t: list[str], args: Any, notebook: Any) -> Any:
    raise UsageError("%perf target: not built yet (issue 20)")
