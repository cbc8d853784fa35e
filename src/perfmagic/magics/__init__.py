"""The IPython front end: registration, unregistration, and the ledger hook shared by every magic.

Only this package imports IPython. ``load`` imports the magic classes (which import nothing heavy);
engines, torch, pandas, matplotlib and ipywidgets are imported inside the magic methods when used.
"""

from __future__ import annotations

import os
import sys
from typing import Any

_STATE_ATTR = "_perfmagic_state"


def _record_factory(shell: Any, state: dict[str, Any]) -> Any:
    def record(*, magic_line: str = "", code: str, **fields: Any) -> Any:
        """Append a ledger row; on failure keep it in memory and say so in one line."""
        from ..storage.session import current_ledger

        led = current_ledger(shell.user_ns)
        session = f"pid {os.getpid()}"
        kernel = getattr(shell, "kernel", None)
        ident = getattr(getattr(kernel, "session", None), "session", None)
        if ident:
            session += f", kernel session {ident}"
        full = f"%%{fields['magic']} {magic_line}".rstrip() + "\n" + code
        from ..storage.ledger import RecordedInterrupt

        try:
            ref = led.record(code=full, cell_id=state.get("cell_id"), session=session, **fields)
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
    from ._bench import BenchMagics
    from ._perf import PerfMagics
    from ._amdahl import ScalingMagics
    from ._roofline import RooflineMagics

    if getattr(shell, _STATE_ATTR, None) is not None:
        return
    state: dict[str, Any] = {"cell_id": None}
    state["record"] = _record_factory(shell, state)

    def pre_run_cell(info: Any) -> None:
        state["cell_id"] = getattr(info, "cell_id", None)
        from ._template import PENDING_INTERRUPT

        PENDING_INTERRUPT.clear()  # one a magic did not raise (it showed nothing) ends with its cell

    magics = [BenchMagics(shell, state), PerfMagics(shell, state), RooflineMagics(shell, state),
              ScalingMagics(shell, state)]
    for m in magics:
        shell.register_magics(m)
    from ._lazy import register

    lazy = register(shell, state)
    shell.events.register("pre_run_cell", pre_run_cell)
    state["installed"] = {"magics": magics, "lazy": lazy, "pre_run_cell": pre_run_cell}
    setattr(shell, _STATE_ATTR, state)


def unload(shell: Any) -> None:
    state = getattr(shell, _STATE_ATTR, None)
    if state is None:
        return
    mm = shell.magics_manager
    for m in state["installed"]["magics"]:
        for kind, names in m.magics.items():
            for name in names:
                mm.magics[kind].pop(name, None)
        mm.registry.pop(type(m).__name__, None)
    from ._lazy import unregister

    unregister(shell, state["installed"]["lazy"])
    try:
        shell.events.unregister("pre_run_cell", state["installed"]["pre_run_cell"])
    except ValueError:
        pass
    delattr(shell, _STATE_ATTR)
