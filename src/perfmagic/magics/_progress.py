"""The progress bar the long-running magics share (calibration, sweeps, estimates, the full run).

A bar must end cleanly wherever the output is read later. In a kernel the bar is one display
output updated in place (a ``display_id``: an HTML ``<progress>`` element and a text line, no widget,
no script); ``close()`` (after success, an error or Ctrl-C) empties that output, so a finished bar
leaves nothing behind — not a red or frozen widget in JupyterLab, not a ``0%`` line in a static
export. Outside a kernel it is a plain text tqdm bar on stderr that erases itself when closed.
The bar is created on the first update, so work that needs no progress (a cache hit) shows nothing.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

_MIN_INTERVAL_S = 0.1  # at most ten redraws a second: each one is a message to the front end


def _in_kernel() -> bool:
    ipy = sys.modules.get("IPython")
    shell = ipy.get_ipython() if ipy is not None else None
    return getattr(shell, "kernel", None) is not None


class _NotebookBar:
    """One display output updated in place; emptied on close."""

    def __init__(self, total: int, desc: str) -> None:
        from IPython.display import display

        self.total, self.desc = max(total, 1), desc
        self.handle = display(self._bundle(0, ""), raw=True, display_id=True)
        self.last = 0.0

    def _bundle(self, done: float, msg: str) -> dict[str, str]:
        import html  # here, not at %load_ext: this module is imported when the magics are registered

        frac = min(max(done / self.total, 0.0), 1.0)
        text = f"{self.desc}: {frac:4.0%} {msg}".rstrip()
        return {"text/plain": text,
                "text/html": (f"<div style='font-size:12px'>{html.escape(self.desc)} "
                              f"<progress value='{frac:.3f}' max='1' style='vertical-align:middle'></progress> "
                              f"{frac:.0%} {html.escape(msg)}</div>")}

    def update(self, done: float, msg: str) -> None:
        now = time.monotonic()
        if now - self.last < _MIN_INTERVAL_S and done < self.total:
            return
        self.last = now
        if self.handle is not None:
            self.handle.update(self._bundle(done, msg), raw=True)

    def close(self) -> None:
        if self.handle is not None:
            self.handle.update({"text/plain": ""}, raw=True)
            self.handle = None


class _TextBar:
    """tqdm's text bar on stderr; ``leave=False`` erases it when closed.

    tqdm starts a monitor thread with its first bar (it lives on in the process, waking every 10 s);
    a profiler sampling every thread would see it. This bar class turns the monitor off."""

    def __init__(self, total: int, desc: str) -> None:
        from tqdm.std import tqdm

        class Bar(tqdm):  # type: ignore[misc,valid-type]
            monitor_interval = 0  # no TMonitor thread (a class attribute tqdm reads in __new__)

        self.bar = Bar(total=total, desc=desc, leave=False, file=sys.stderr)
        self.total = total

    def update(self, done: float, msg: str) -> None:
        self.bar.n = int(min(max(done, 0), self.total))
        self.bar.set_postfix_str(msg[:40], refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        self.bar.close()


def progress_bar(total: int, desc: str) -> tuple[Callable[[float, str], None], Callable[[], None]]:
    """``(update(done, message), close())``: see the module docstring. ``close()`` is safe to call
    more than once, and before any update."""
    state: dict[str, Any] = {}

    def update(done: float, msg: str = "") -> None:
        bar = state.get("bar")
        if bar is None:
            try:
                bar = state["bar"] = _NotebookBar(total, desc) if _in_kernel() else _TextBar(total, desc)
            except Exception:  # noqa: BLE001 - never fail a measurement over its progress bar
                state["bar"] = bar = False
        if bar:
            bar.update(done, msg)

    def close() -> None:
        bar = state.pop("bar", None)
        if bar:
            bar.close()

    return update, close
