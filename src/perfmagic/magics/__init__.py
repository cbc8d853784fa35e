"""The IPython front end: registration and unregistration (the ledger hook every magic shares is
:func:`._template.record_run`, behind :meth:`._template.MagicTemplate.record`).

Only this package imports IPython. ``load`` registers every magic from one table
(:data:`._lazy.MAGICS`) without importing its module: a magic's class, and its option parser, are built
when it is first run or its help is asked for; engines, torch, pandas, matplotlib and ipywidgets are
imported inside the magic methods when used.
"""

from __future__ import annotations

from typing import Any

from ..core.kernel import STATE_ATTR as _STATE_ATTR  # the attribute engines read (core/kernel.py)


def load(shell: Any) -> None:
    """Register every magic of the one registry (:data:`perfmagic.magics._lazy.MAGICS`, each imported on
    first use), the ledger hook and the cell-id listener, once per shell."""
    if getattr(shell, _STATE_ATTR, None) is not None:
        return
    state: dict[str, Any] = {"cell_id": None}

    def pre_run_cell(info: Any) -> None:
        state["cell_id"] = getattr(info, "cell_id", None)
        from ._template import PENDING_INTERRUPT

        PENDING_INTERRUPT.clear()  # one a magic did not raise (it showed nothing) ends with its cell

    from ._lazy import register

    registered = register(shell, state)
    shell.events.register("pre_run_cell", pre_run_cell)
    state["installed"] = {"magics": registered, "pre_run_cell": pre_run_cell}
    setattr(shell, _STATE_ATTR, state)


def unload(shell: Any) -> None:
    state = getattr(shell, _STATE_ATTR, None)
    if state is None:
        return
    from ._lazy import unregister

    unregister(shell, state["installed"]["magics"])
    try:
        shell.events.unregister("pre_run_cell", state["installed"]["pre_run_cell"])
    except ValueError:
        pass
    delattr(shell, _STATE_ATTR)
