"""The progress bar the long-running magics share (calibration, sweeps)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def progress_bar(total: int, desc: str) -> tuple[Callable[[float, str], None], Callable[[], None]]:
    """``(update(done, message), close())``. The tqdm bar (a widget in notebooks, text elsewhere) is
    created on the first update, so work that needs no progress (a cache hit) shows nothing."""
    state: dict[str, Any] = {}

    def update(done: float, msg: str = "") -> None:
        bar = state.get("bar")
        if bar is None:
            try:
                from tqdm.auto import tqdm
            except ImportError:  # tqdm is a dependency, but never fail on a progress bar
                print(f"  {desc}: {done}/{total} {msg}")
                return
            bar = state["bar"] = tqdm(total=total, desc=desc)
        bar.n = int(min(max(done, 0), total))
        bar.set_postfix_str(msg[:40], refresh=False)
        bar.refresh()

    def close() -> None:
        if state.get("bar") is not None:
            state["bar"].close()

    return update, close
