"""``%perf``: the notebook's ledger — show it, export it, forget a run."""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments

from . import _args

SUBCOMMANDS = ("show", "export", "forget")


def _run_id(text: str) -> int:
    t = text.strip().lstrip("#")
    try:
        return int(t)
    except ValueError:
        raise UsageError(f"%perf: {text!r} is not a run id; run ids are the numbers in the first column of %perf, e.g. 12 or #12") from None


@magics_class
class PerfMagics(Magics):
    def __init__(self, shell: Any, state: dict[str, Any]) -> None:
        super().__init__(shell)
        self.state = state

    @magic_arguments()
    @argument("-n", "--rows", type=_args.positive_int, default=20, help="how many runs to show (default 20, newest first)")
    @argument("--all", action="store_true", help="runs of every notebook in this folder, not only this one")
    @argument("command", nargs="?", default="show",
              help="show (default) | export PATH (.csv or .json) | forget RUN")
    @argument("target", nargs="?", help="the PATH for export, the RUN id for forget")
    @line_magic
    def perf(self, line: str) -> Any:
        """The per-notebook ledger of every perfmagic run.

        ``%perf`` shows the most recent runs of this notebook; ``%perf export runs.csv`` writes them
        (CSV or JSON); ``%perf forget 12`` removes run 12. ``perfmagic.ledger()`` returns the same
        rows as a pandas DataFrame.
        """
        from .._ledger import LedgerError
        from .._session import current_ledger

        args, _ = _args.parse(self.perf.parser, line)
        led = current_ledger(self.shell.user_ns)
        notebook = None if args.all else ...
        try:
            if args.command == "show":
                from .._display import display_bundle, ledger_bundle

                rows = led.rows(notebook=notebook, limit=args.rows)
                total = len(led.rows(notebook=notebook))
                display_bundle(ledger_bundle(rows, total=total, where=str(led.path), notebook=led.notebook))
                return None
            if args.command == "export":
                if not args.target:
                    raise UsageError("%perf export needs a PATH ending in .csv or .json, e.g. %perf export runs.csv")
                out = led.export(args.target, notebook=notebook)
                print(f"perfmagic: wrote {out}")
                return None
            if args.command == "forget":
                if not args.target:
                    raise UsageError("%perf forget needs a RUN id, e.g. %perf forget 12 (ids are in %perf's first column)")
                row = led.forget(_run_id(args.target))
                print(f"perfmagic: forgot run #{row['id']} ({row['magic']}, {row['label']})")
                return None
        except (LedgerError, KeyError) as exc:
            msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            raise UsageError(f"%perf {args.command}: {msg}") from None
        raise UsageError(f"%perf: unknown command {args.command!r}; valid commands: {', '.join(SUBCOMMANDS)} "
                         "(e.g. %perf, %perf export runs.csv, %perf forget 12)")
