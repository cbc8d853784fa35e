"""The IPython front end: registration, unregistration, and the ledger hook shared by every magic.

Only this package imports IPython. ``load`` registers every magic from one table
(:data:`._lazy.MAGICS`) without importing its module: a magic's class, and its option parser, are built
when it is first run or its help is asked for; engines, torch, pandas, matplotlib and ipywidgets are
imported inside the magic methods when used.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from ..core.kernel import STATE_ATTR as _STATE_ATTR  # the attribute engines read (core/kernel.py)


def _record_factory(shell: Any, state: dict[str, Any]) -> Any:
    def record(*, magic_line: str = "", code: str, result: Any = None, **fields: Any) -> Any:
        """Append a ledger row; on failure keep it in memory and say so in one line. ``code`` is the cell
        body, ``magic_line`` its ``%%magic`` line (stored apart); ``result``: the result the run made, whose
        ``to_record`` gives the kind and payload that rebuild it (``perfmagic.run(N)``, ``%perf show N``)."""
        if result is not None:
            rec = result.to_record(magic=fields["magic"], code=code, magic_line=magic_line,
                                   label=fields.get("label"), options=fields.get("options"), env=fields.get("env"),
                                   status=fields.get("status"))
            fields = {**{k: v for k, v in rec.ledger_fields().items() if k not in ("code", "magic_line")}, **fields}
            fields.update(kind=rec.kind, payload=rec.payload)
        from ..storage.session import current_ledger

        led = current_ledger(shell.user_ns)
        session = f"pid {os.getpid()}"
        kernel = getattr(shell, "kernel", None)
        ident = getattr(getattr(kernel, "session", None), "session", None)
        if ident:
            session += f", kernel session {ident}"
        from ..storage.ledger import RecordedInterrupt

        try:
            ref = led.record(code=code, magic_line=magic_line, cell_id=state.get("cell_id"), session=session, **fields)
        except RecordedInterrupt as stop:  # saved once; the result is shown, then the cell stops
            ref = stop.ref
            from ._template import interrupt_after_show

            interrupt_after_show(f"perfmagic: Ctrl-C while run #{ref.id} was being recorded; it was "
                                 f"{'saved' if ref.saved else 'kept in memory'} once and is shown above")
        except Exception as exc:  # never lose the measurement to a ledger bug
            print(f"perfmagic: could not record this run in the ledger ({type(exc).__name__}: {exc})", file=sys.stderr)
            return None
        if not ref.saved:
            print(f"perfmagic: {ref.error}", file=sys.stderr)
        return ref

    return record


def load(shell: Any) -> None:
    """Register every magic of the one registry (:data:`perfmagic.magics._lazy.MAGICS`, each imported on
    first use), the ledger hook and the cell-id listener, once per shell."""
    if getattr(shell, _STATE_ATTR, None) is not None:
        return
    state: dict[str, Any] = {"cell_id": None}
    state["record"] = _record_factory(shell, state)

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
