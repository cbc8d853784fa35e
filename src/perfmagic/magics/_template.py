"""What every magic shares around its engine call: the default label, and the end — showing the
result the way ``-o``/``-q`` ask.

* no flag: the result's bundle is displayed (self-contained HTML, PNG, text); the cell returns None;
* ``-o``: the result is returned, so IPython shows it once as ``Out[n]`` (its ``_repr_mimebundle_``);
* ``-q``: nothing is shown, nothing returned;
* ``-o -q``: nothing is shown and the result is returned: it is ``Out[n]`` and ``_`` as with ``-o``,
  but IPython's display hook shows an empty bundle for this one cell.
"""

from __future__ import annotations

from typing import Any


def default_label(cell: str, state: dict[str, Any] | None = None) -> str:
    """A run's label when the user gives none: the cell's first code line (40 characters at most),
    and, where the front end names its cells (JupyterLab, Notebook 7, VS Code send a cell id), the
    start of the cell's id: two cells that begin alike never share a history by accident, and a cell
    keeps its label when its code is edited. Without a cell id (a terminal, nbclient) it is the first
    line alone."""
    first = "empty cell"
    for line in cell.splitlines():
        s = line.strip()
        if s and not s.startswith("#"):
            first = s if len(s) <= 40 else s[:39] + "…"
            break
    cid = (state or {}).get("cell_id")
    return f"{first} [cell {str(cid)[:8]}]" if cid else first


def quiet_out(shell: Any) -> None:
    """Let the running cell's value reach ``Out[n]``, ``_`` and ``ExecutionResult.result`` while
    nothing is shown: for this cell, IPython's display hook formats the value as an empty bundle
    (Jupyter sends no ``execute_result`` for one; a terminal prints a bare ``Out[n]:``)."""
    hook = getattr(shell, "displayhook", None)
    events = getattr(shell, "events", None)
    if hook is None or events is None or "compute_format_data" in vars(hook):
        return  # no hook, or already quiet for this cell (a loop of run_cell_magic calls registers once)
    hook.compute_format_data = lambda result: ({}, {})  # an instance attribute: this cell only

    def restore(*_: Any) -> None:
        hook.__dict__.pop("compute_format_data", None)
        try:
            events.unregister("post_execute", restore)
        except ValueError:
            pass

    events.register("post_execute", restore)


PENDING_INTERRUPT: list[str] = []  # a Ctrl-C held while the ledger wrote this cell's run


def interrupt_after_show(message: str) -> None:
    """Ctrl-C arrived while the run was recorded: the result is still shown, then the cell stops."""
    PENDING_INTERRUPT[:] = [message]


def _raise_pending() -> None:
    if PENDING_INTERRUPT:
        from ._boundary import Interrupted

        message = PENDING_INTERRUPT.pop()
        PENDING_INTERRUPT.clear()
        raise Interrupted(message)


def display_bundle(bundle: dict[str, Any]) -> None:
    """Show a prepared mime bundle as one output (``raw``: the keys are mimetypes); then a Ctrl-C held
    while the run was recorded ends the cell."""
    from IPython.display import display

    display(bundle, raw=True)
    _raise_pending()


def finish(shell: Any, result: Any, args: Any, bundle: dict[str, Any] | None = None, *,
           interrupted: str | None = None, failure: BaseException | None = None) -> Any:
    """Show ``result`` (or ``bundle``, its prepared display) as ``args.output``/``args.quiet`` ask.

    ``interrupted``: the measurement was stopped by Ctrl-C; what was measured is shown (unless ``-q``)
    and the cell ends with this one-line message (:class:`~perfmagic.magics._boundary.Interrupted`).
    ``failure``: the user's code raised; what was measured is shown, then their exception is raised
    with their traceback.
    """
    output, quiet = bool(getattr(args, "output", False)), bool(getattr(args, "quiet", False))
    stopped = interrupted is not None or failure is not None
    if bundle is None and not quiet and (stopped or not output):
        from ..render.bundle import mimebundle

        bundle = mimebundle(result, plot=not getattr(args, "no_plot", False))
    if stopped:
        from ._boundary import Interrupted, without_perfmagic_frames

        if not quiet:
            display_bundle(bundle)  # type: ignore[arg-type]
        if interrupted is not None:
            raise Interrupted(interrupted)
        raise without_perfmagic_frames(failure)  # type: ignore[arg-type]
    if quiet or output:
        _raise_pending()  # nothing to show first
    if quiet:
        if output:
            quiet_out(shell)
            return result
        return None
    if output:
        return result
    display_bundle(bundle)  # type: ignore[arg-type]
    return None
