"""What every magic shares around its engine call: :class:`MagicTemplate` (parse → engine → record →
display → outcome), the ledger hook (:func:`record_run`), the default label, and the end — showing the
result the way ``-o``/``-q`` ask.

A magic method parses its line (``_args.parse``), calls its engine (a public function a ``.py`` file
can call too), and hands the result to :meth:`MagicTemplate.conclude`, which records one ledger row,
shows the result and ends the cell: normally, with a one-line ``KeyboardInterrupt`` after showing what
was measured (``interrupted``), or with the user's own exception after showing it (``failure``).

* no flag: the result's bundle is displayed (self-contained HTML, PNG, text); the cell returns None;
* ``-o``: the result is returned, so IPython shows it once as ``Out[n]`` (its ``_repr_mimebundle_``);
* ``-q``: nothing is shown, nothing returned;
* ``-o -q``: nothing is shown and the result is returned: it is ``Out[n]`` and ``_`` as with ``-o``,
  but IPython's display hook shows an empty bundle for this one cell.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from IPython.core.magic import Magics


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


def finish(shell: Any, result: Any, args: Any, bundle: dict[str, Any] | list[dict[str, Any]] | None = None, *,
           interrupted: str | None = None, failure: BaseException | None = None) -> Any:
    """Show ``result`` (or ``bundle``, its prepared display; a list: several outputs, in order, as
    ``%%gpubench --vs`` shows its comparison and then B's run) as ``args.output``/``args.quiet`` ask.

    ``interrupted``: the measurement was stopped by Ctrl-C; what was measured is shown (unless ``-q``)
    and the cell ends with this one-line message (:class:`~perfmagic.magics._boundary.Interrupted`).
    ``failure``: the user's code raised; what was measured is shown, then their exception is raised
    with their traceback. With ``-o`` and no result to return (a ``--vs`` with too few pairs for a
    verdict), what was measured is shown instead.
    """
    output = bool(getattr(args, "output", False)) and result is not None
    quiet = bool(getattr(args, "quiet", False))
    stopped = interrupted is not None or failure is not None
    if bundle is None and not quiet and (stopped or not output):
        from ..render.bundle import mimebundle

        bundle = mimebundle(result, plot=not getattr(args, "no_plot", False))
    if stopped:
        from ._boundary import Interrupted, without_perfmagic_frames

        if not quiet:
            _display_all(bundle)
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
    _display_all(bundle)
    return None


def _display_all(bundle: Any) -> None:
    for b in bundle if isinstance(bundle, list) else [bundle]:
        display_bundle(b)


def record_run(shell: Any, state: dict[str, Any], *, magic_line: str = "", code: str, result: Any = None,
               **fields: Any) -> Any:
    """Append one ledger row for a magic's run; on failure keep it in memory and say so in one line.

    ``code`` is the cell body, ``magic_line`` its ``%%magic`` line (stored apart); ``result``: the result
    the run made, whose ``to_record`` gives the kind and payload that rebuild it (``perfmagic.run(N)``,
    ``%perf show N``). Returns the row's reference (``.id``, ``.saved``) or None when it could not be
    written at all. A Ctrl-C while writing is held until the row is saved once; the magic shows its
    result, then the cell stops (:func:`interrupt_after_show`).
    """
    if result is not None:
        rec = result.to_record(magic=fields["magic"], code=code, magic_line=magic_line,
                               label=fields.get("label"), options=fields.get("options"), env=fields.get("env"),
                               status=fields.get("status"))
        fields = {**{k: v for k, v in rec.ledger_fields().items() if k not in ("code", "magic_line")}, **fields}
        fields.update(kind=rec.kind, payload=rec.payload)
    from ..storage.ledger import RecordedInterrupt
    from ..storage.session import current_ledger

    led = current_ledger(shell.user_ns)
    session = f"pid {os.getpid()}"
    ident = getattr(getattr(getattr(shell, "kernel", None), "session", None), "session", None)
    if ident:
        session += f", kernel session {ident}"
    try:
        ref = led.record(code=code, magic_line=magic_line, cell_id=state.get("cell_id"), session=session, **fields)
    except RecordedInterrupt as stop:  # saved once; the result is shown, then the cell stops
        ref = stop.ref
        interrupt_after_show(f"perfmagic: Ctrl-C while run #{ref.id} was being recorded; it was "
                             f"{'saved' if ref.saved else 'kept in memory'} once and is shown above")
    except Exception as exc:  # never lose the measurement to a ledger bug
        print(f"perfmagic: could not record this run in the ledger ({type(exc).__name__}: {exc})", file=sys.stderr)
        return None
    if not ref.saved:
        print(f"perfmagic: {ref.error}", file=sys.stderr)
    return ref


def with_run_id(text: str, run_id: int | None) -> str:
    """A result's text with the ledger's run number under it (how a user finds it in ``%perf``)."""
    return text + (f"\n  run #{run_id}" if run_id is not None else "")


class MagicTemplate(Magics):
    """The base of every perfmagic ``Magics`` class: parse → engine → record → display → outcome.

    Subclasses define the magic methods (``@magic_arguments``, ``@cell_magic``, ``@user_facing``); each
    parses its line, calls its engine and returns :meth:`conclude`. ``state`` is the shell's perfmagic
    state (the cell id, the re-run captures), shared by every magic of the shell.
    """

    def __init__(self, shell: Any, state: dict[str, Any]) -> None:
        super().__init__(shell)
        self.state = state

    def record(self, **fields: Any) -> Any:
        """One ledger row (:func:`record_run`); the comparison flow gets this method as its ``record``."""
        return record_run(self.shell, self.state, **fields)

    def conclude(self, result: Any, args: Any, *, magic: str, line: str, cell: str, label: str,
                 status: str = "ok", options: dict[str, Any] | None = None, env: dict[str, Any] | None = None,
                 text: Callable[[int | None], str] | None = None,
                 bundle: Callable[[int | None], dict[str, Any]] | None = None,
                 interrupted: str | None = None, failure: BaseException | None = None,
                 recorded: Callable[[Any, int], Any] | None = None, **fields: Any) -> Any:
        """Record ``result`` as one ledger row, show it as ``-o``/``-q`` ask, and end the cell.

        ``options``: what the row keeps of the parsed arguments (default: all of them). ``text(run_id)``
        writes the text shown (default: the result's text and its run number); ``bundle(run_id)`` the
        whole display (default: :func:`perfmagic.render.bundle.mimebundle` of that text, with the figure
        unless ``--no-plot``). With ``interrupted`` (a one-line message) the cell ends after the display
        with that ``KeyboardInterrupt``; with ``failure`` (the user's exception) it ends with that exception.
        ``recorded(result, run_id)``, called once the row is written, returns the result to show and
        return (``%%gpubench``'s carries its run id) and may do what the run's id is needed for (keep its
        code for re-runs, mark it the baseline). ``fields`` go to the row as they are (``env_hash``,
        ``primary_metric``...).
        """
        fields.setdefault("primary_metric", getattr(result, "primary_metric", ""))
        ref = self.record(magic=magic, label=label, code=cell, magic_line=line, result=result,
                          options=dict(vars(args)) if options is None else options, metrics=result.metrics(),
                          samples=result.samples(), env=env or {}, status=status, **fields)
        run_id = ref.id if ref is not None else None
        if recorded is not None and run_id is not None:
            result = recorded(result, run_id)
        if bundle is not None:
            shown = bundle(run_id)
        else:
            from ..render.bundle import mimebundle

            body = text(run_id) if text is not None else with_run_id(result.text(), run_id)
            shown = mimebundle(result, text=body, plot=not getattr(args, "no_plot", False))
        return finish(self.shell, result, args, shown, interrupted=interrupted, failure=failure)
