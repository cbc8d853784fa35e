"""The perfmagic state kept on the running IPython shell, readable without importing IPython.

``%load_ext perfmagic`` (:mod:`perfmagic.magics`) sets :data:`STATE_ATTR` on the shell: the ledger hook
and what each run's code called (its captures). An engine that wants them when it runs in a notebook
(the comparison flow re-measures with them) reads them through :func:`kernel_state`, so no engine
imports the front end.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

STATE_ATTR = "_perfmagic_state"


def kernel_state() -> tuple[dict[str, Any] | None, Mapping[str, Any] | None]:
    """The perfmagic state and the namespace of the running IPython shell, when the extension is loaded
    there (``(None, None)`` in a script, or where IPython is not imported)."""
    ip_mod = sys.modules.get("IPython")
    try:
        shell = ip_mod.get_ipython() if ip_mod is not None else None
    except Exception:  # noqa: BLE001
        shell = None
    if shell is None:
        return None, None
    state = getattr(shell, STATE_ATTR, None)
    return (state, shell.user_ns) if state is not None else (None, None)


__all__ = ["STATE_ATTR", "kernel_state"]
