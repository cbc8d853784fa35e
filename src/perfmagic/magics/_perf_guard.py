"""``%perf guard``: the front end of :mod:`perfmagic.guard` (being built, issue 20)."""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError


def perf_guard(magics: Any, led: Any, t: list[str], args: Any, notebook: Any) -> Any:
    raise UsageError("%perf guard: not built yet (issue 20)")
