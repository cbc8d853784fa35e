"""Per-kernel state that must outlive one magic call: the ledger object of each notebook.

A :class:`~perfmagic.storage.ledger.Ledger` keeps the rows it could not write (locked or corrupt file) in
memory, so one object per (folder, notebook) lives for the kernel's lifetime here. Nothing else is
global: the magics hold their own state on their instance and remove it on unload.
"""

from __future__ import annotations

import sys
from typing import Any

_LEDGERS: dict[tuple[str, str | None], Any] = {}


def _user_ns() -> dict[str, Any] | None:
    ipy = sys.modules.get("IPython")
    if ipy is None:
        return None
    try:
        shell = ipy.get_ipython()
    except Exception:  # pragma: no cover
        return None
    return getattr(shell, "user_ns", None)


def current_ledger(user_ns: dict[str, Any] | None = None) -> Any:
    """The ledger of the notebook this kernel runs (or of the working directory)."""
    from .ledger import Ledger, locate

    notebook, directory = locate(user_ns if user_ns is not None else _user_ns())
    key = (str(directory), notebook)
    led = _LEDGERS.get(key)
    if led is None:
        led = _LEDGERS[key] = Ledger(directory, notebook)
    return led


def forget_ledgers() -> None:
    """Drop cached ledger objects (tests, and after the user moves the ledger folder)."""
    _LEDGERS.clear()
