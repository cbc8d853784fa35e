"""Holding Ctrl-C over a few lines that must finish once they start (a ledger write, a state restore).

:func:`sigint_deferred` swaps the main thread's SIGINT handler for one that only notes the signal, and
puts the old one back on exit. A ``KeyboardInterrupt`` can then land only before the block or after
it, never between a COMMIT and the bookkeeping that follows it. Off the main thread (where no signal
is delivered) and where signals cannot be handled, the block runs as it is.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def sigint_deferred(raise_after: bool = True) -> Iterator[list[Any]]:
    """Run the block with Ctrl-C held; yields the list of signals that arrived meanwhile.

    ``raise_after``: on exit, deliver a held signal to the old handler (``KeyboardInterrupt`` for
    Python's default). With ``False`` the caller looks at the list and decides (e.g. raise an
    interrupt that carries what the block produced)."""
    hit: list[Any] = []
    if threading.current_thread() is not threading.main_thread():
        yield hit
        return
    try:
        old = signal.signal(signal.SIGINT, lambda *a: hit.append(a))
    except (ValueError, OSError, TypeError):  # no signals here
        yield hit
        return
    try:
        yield hit
    finally:
        signal.signal(signal.SIGINT, old)
    if hit and raise_after:
        if callable(old) and old is not signal.default_int_handler:
            old(*hit[0])
        else:
            raise KeyboardInterrupt


__all__ = ["sigint_deferred"]
