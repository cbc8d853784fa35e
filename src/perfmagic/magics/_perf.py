"""``%perf``: the notebook's ledger — show, baseline, compare, plot, export, forget."""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments

from . import _args, _boundary

SUBCOMMANDS = ("show", "baseline", "compare", "plot", "export", "forget")
USAGE = ("%perf | %perf baseline [RUN] | %perf compare [A [B]] | %perf plot [LABEL] | "
         "%perf export PATH | %perf forget RUN")


def _run_id(text: str) -> int:
    try:
        return _args.run_id(text)
    except Exception as exc:
        raise UsageError(f"%perf: {exc}") from None


@magics_class
class PerfMagics(Magics):
    def __init__(self, shell: Any, state: dict[str, Any]) -> None:
        super().__init__(shell)
        self.state = state

    @magic_arguments()
    @argument("-n", "--rows", type=_args.positive_int, default=20, help="how many runs to show (default 20, newest first)")
    @argument("--all", action="store_true", help="runs of every notebook in this folder, not only this one")
    @argument("--min-effect", type=_args.fraction, default=0.10,
              help="the smallest change worth keeping, for verdicts: 0.1 or 10%% (default 10%%)")
    @argument("command", nargs="?", default="show", help=" | ".join(SUBCOMMANDS) + " (default show)")
    @argument("targets", nargs="*", help="run ids, a label, or a path, depending on the command")
    @line_magic
    @_boundary.user_facing("%perf")
    def perf(self, line: str) -> Any:
        """The per-notebook ledger of every perfmagic run, and one-change-at-a-time comparisons.

        %perf                   this notebook's runs, newest first, with the change vs each label's baseline
        %perf baseline [RUN]    mark RUN (default: the latest run) as the baseline of its label
        %perf compare [A [B]]   verdict for B vs A (defaults: B = latest run, A = its label's baseline)
        %perf plot [LABEL]      a label's runs over time with their confidence intervals
        %perf export PATH       write the runs to .csv or .json
        %perf forget RUN        remove a run
        perfmagic.ledger() returns the same rows as a pandas DataFrame; perfmagic.compare(a, b) the verdict.
        """
        from ..storage.ledger import LedgerError
        from ..storage.session import current_ledger

        args, _ = _args.parse(self.perf.parser, line)
        led = current_ledger(self.shell.user_ns)
        notebook = None if args.all else ...
        cmd, t = args.command, args.targets
        if cmd not in SUBCOMMANDS:
            raise UsageError(f"%perf: unknown command {cmd!r}; valid commands: {', '.join(SUBCOMMANDS)}. Usage: {USAGE}")
        try:
            return getattr(self, f"_{cmd}")(led, t, args, notebook)
        except (LedgerError, KeyError) as exc:
            msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            raise UsageError(f"%perf {cmd}: {msg}") from None

    def _show(self, led: Any, t: list[str], args: Any, notebook: Any) -> None:
        from ._template import display_bundle
        from ..render.ledger import ledger_bundle
        from ..timing.history import baseline_changes

        rows = led.rows(notebook=notebook, limit=args.rows)
        every = led.rows(notebook=notebook)
        changes = baseline_changes(led, rows, every, min_effect=args.min_effect)
        display_bundle(ledger_bundle(rows, total=len(every), where=str(led.path), notebook=led.notebook,
                                     changes=changes, every=every))

    def _baseline(self, led: Any, t: list[str], args: Any, notebook: Any) -> None:
        if len(t) > 1:
            raise UsageError(f"%perf baseline takes at most one RUN id, got {' '.join(t)!r}")
        row = led.get(_run_id(t[0])) if t else led.latest()
        if row is None:
            raise UsageError("%perf baseline: there are no runs yet; time something with %%gpubench first")
        led.set_baseline(row["label"], row["id"])
        print(f"perfmagic: run #{row['id']} is now the baseline of '{row['label']}'")

    def _compare(self, led: Any, t: list[str], args: Any, notebook: Any) -> Any:
        from ..render.timing import comparison_bundle
        from ._template import display_bundle
        from ..timing.history import CompareError, compare

        if len(t) > 2:
            raise UsageError(f"%perf compare takes at most two RUN ids (A B), got {' '.join(t)!r}")
        if len(t) == 2:
            a, b = _run_id(t[0]), _run_id(t[1])
        else:
            rb = led.get(_run_id(t[0])) if t else led.latest()
            if rb is None:
                raise UsageError("%perf compare: there are no runs yet; time something with %%gpubench first")
            b = rb["id"]
            a = led.baseline(rb["label"])
            if a is None or a == b:
                from ..storage.codec import rerun_of

                older = [r for r in led.rows(label=rb["label"]) if r["id"] != b and r["id"] < b and rerun_of(r) is None]
                if not older:
                    raise UsageError(f"%perf compare: run #{b} ('{rb['label']}') has no baseline and no earlier run "
                                     "of the same label; give two run ids: %perf compare A B")
                a = older[0]["id"]
                print(f"perfmagic: '{rb['label']}' has no baseline (mark one with %perf baseline RUN): "
                      f"comparing with its previous run #{a}")
        try:
            rc = compare(a, b, min_effect=args.min_effect, ledger=led)
        except CompareError as exc:
            raise UsageError(f"%perf compare: {exc}") from None
        display_bundle(comparison_bundle(rc))
        return None

    def _plot(self, led: Any, t: list[str], args: Any, notebook: Any) -> None:
        from ..render.bundle import bundle_of
        from ..render.timing import history_png
        from ._template import display_bundle
        from ..render.ledger import history_text

        label = " ".join(t) if t else (led.latest() or {}).get("label")
        if label is None:
            raise UsageError("%perf plot: there are no runs yet; time something with %%gpubench first")
        from ..storage.codec import rerun_of

        rows = [r for r in led.rows(notebook=notebook, label=label, newest_first=False)
                if (r.get("metrics") or {}).get("median_s") is not None and rerun_of(r) is None]
        if not rows:
            labels = sorted({r["label"] for r in led.rows(notebook=notebook) if r.get("label")})
            raise UsageError(f"%perf plot: no timed runs with label {label!r}; labels in this ledger: "
                             + (", ".join(repr(x) for x in labels) or "none"))
        base = led.baseline(label)
        text = history_text(rows, label, base)
        display_bundle(bundle_of(text, history_png(rows, label, base), f"history of {label}"))

    def _export(self, led: Any, t: list[str], args: Any, notebook: Any) -> None:
        if len(t) != 1:
            raise UsageError("%perf export needs one PATH ending in .csv or .json, e.g. %perf export runs.csv")
        print(f"perfmagic: wrote {led.export(t[0], notebook=notebook)}")

    def _forget(self, led: Any, t: list[str], args: Any, notebook: Any) -> None:
        if len(t) != 1:
            raise UsageError("%perf forget needs one RUN id, e.g. %perf forget 12 (ids are in %perf's first column)")
        row = led.forget(_run_id(t[0]))
        print(f"perfmagic: forgot run #{row['id']} ({row['magic']}, {row['label']})")
