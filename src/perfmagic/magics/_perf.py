"""``%perf``: the notebook's ledger — show, baseline, compare, plot, export, forget."""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments

from . import _args, _boundary
from ._template import MagicTemplate

SUBCOMMANDS = ("show", "baseline", "compare", "plot", "export", "forget", "next", "target", "guard")
USAGE = ("%perf | %perf baseline [RUN] | %perf compare [A [B]] | %perf plot [LABEL] | "
         "%perf export PATH | %perf forget RUN | %perf next [--target T] | %perf target [LABEL] T | "
         "%perf guard RUN PATH [--module M]")


_run_id = _args.perf_run_id


@magics_class
class PerfMagics(MagicTemplate):

    @magic_arguments()
    @argument("-n", "--rows", "--limit", type=_args.positive_int, default=20,
              help="show: how many runs to show (default 20, newest first)")
    @argument("--label", default=None, help="show: only the runs of this label (also: %%perf show LABEL)")
    @argument("--all", action="store_true", help="runs of every notebook in this folder, not only this one")
    @argument("--min-effect", type=_args.fraction, default=0.10,
              help="the smallest change worth keeping, for verdicts: 0.1 or 10%% (default 10%%)")
    @argument("--rerun", action="store_true",
              help="compare: re-measure A and B interleaved in this process, or say why that is impossible "
                   "(default: re-measure when both can still run here, else compare the recorded samples)")
    @argument("--historical", action="store_true",
              help="compare: judge the recorded samples only, without re-measuring")
    @argument("--where", action="store_true",
              help="compare: show where the change went (each function's Δ with its interval, a differential "
                   "flame graph) whatever the verdict; it needs A and B re-measured here. Default: sampled "
                   "whenever they are re-measured, shown beside a faster/slower verdict")
    @argument("--no-where", action="store_true", help="compare: do not sample the stacks while re-measuring")
    @argument("-o", "--output", action="store_true",
              help="compare: return the comparison (perfmagic RunComparison: .verdict, .comparison, .notes); "
                   "show N: return the rebuilt result; it becomes the cell's Out[] value")
    @argument("-q", "--quiet", action="store_true", help="compare: show nothing (with -o: only return the comparison)")
    @argument("--no-plot", action="store_true", help="show N: the text and the folded details, no figure")
    @argument("-b", "--budget", type=_args.positive_duration, default=None,
              help="compare: measuring time of the interleaved re-measurement (default 2 s); with --where the "
                   "pairs go on to it (more samples: narrower intervals for each function's change)")
    @argument("--target", default=None, metavar="TIME",
              help="next: the time per call that is fast enough (e.g. 50ms); met -> 'stop'")
    @argument("--module", default=None, metavar="MODULE",
              help="guard: the importable module that holds the functions the run calls, e.g. mypkg.ops")
    @argument("--force", action="store_true", help="guard: replace an existing PATH")
    @argument("command", nargs="?", default="show", help=" | ".join(SUBCOMMANDS) + " (default show)")
    @argument("targets", nargs="*", help="run ids, a label, or a path, depending on the command")
    @line_magic
    @_boundary.user_facing("%perf")
    def perf(self, line: str) -> Any:
        """The per-notebook ledger of every perfmagic run, and one-change-at-a-time comparisons.

        %perf                   this notebook's runs, newest first, with the change vs each label's baseline
                                (-n N: how many, default 20; --label L or %perf show L: one label's)
        %perf show N            run N (or #N) rebuilt from the ledger, as when it was measured: its text,
                                figure and details (--no-plot: no figure; -o: return the result;
                                perfmagic.run(N) does the same)
        %perf baseline [RUN]    mark RUN (default: the latest run) as the baseline of its label
        %perf compare [A [B]]   verdict for B vs A (defaults: B = latest run, A = its label's baseline);
                                A and B are re-measured interleaved in this process when both can still
                                run here (their functions as they were), else their recorded samples are
                                compared and the reason is said (--rerun / --historical force either);
                                re-measured, it says where the change went (--where: always; --no-where: not)
        %perf plot [LABEL]      a label's runs over time with their confidence intervals
        %perf export PATH       write the runs to .csv or .json
        %perf forget RUN        remove a run
        %perf next              the next experiment in the method's order, its expected gain and the command
                                that tests it (--target T: say "stop" when the latest run meets T)
        %perf target [LABEL] T  the time per call that is fast enough for LABEL (default: the latest run's)
        %perf guard RUN PATH    write a pytest file at PATH that fails when RUN's accepted gain is lost
                                (--module M: the module that holds the functions it calls)
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

    def _show(self, led: Any, t: list[str], args: Any, notebook: Any) -> Any:
        if len(t) == 1 and t[0].lstrip("#-").isdigit() and args.label is None:
            return self._show_run(led, t[0], args)
        from ._template import display_bundle
        from ..render.ledger import ledger_bundle
        from ..timing.history import baseline_changes

        from ..storage.views import count, table_context

        label = " ".join(t) if t else args.label
        rows = led.rows(notebook=notebook, limit=args.rows, label=label)
        if label is not None and not rows:
            from ..storage.views import labels

            raise UsageError(f"%perf: label {label!r} has no runs here; labels with runs: "
                             + (", ".join(repr(x) for x in labels(led, notebook=notebook)) or "none"))
        every = table_context(led, rows, notebook=notebook)  # what the table reads beside the rows shown
        changes = baseline_changes(led, rows, every, min_effect=args.min_effect)
        display_bundle(ledger_bundle(rows, total=count(led, notebook=notebook, label=label), where=str(led.path),
                                     notebook=led.notebook, changes=changes, every=every, label=label))

    def _show_run(self, led: Any, token: str, args: Any) -> Any:
        """``%perf show N``: run N rebuilt (:func:`perfmagic.storage.record.run`) and shown as the magic did."""
        from ._template import finish
        from ..errors import PerfmagicError
        from ..storage.record import run

        try:
            result = run(token, ledger=led)
        except PerfmagicError as exc:
            raise UsageError(f"%perf show: {exc}") from None
        if args.output or args.quiet:
            return finish(self.shell, result, args)
        import inspect

        from ..render import renderer_for
        from ..render.bundle import mimebundle

        own = renderer_for(result).mimebundle  # a renderer with its own bundle (the flame graph)
        if own is None:
            bundle = mimebundle(result, plot=not args.no_plot)
        else:
            bundle = own(result, plot=not args.no_plot) if "plot" in inspect.signature(own).parameters else own(result)
        return finish(self.shell, result, args, bundle)

    def _baseline(self, led: Any, t: list[str], args: Any, notebook: Any) -> None:
        if len(t) > 1:
            raise UsageError(f"%perf baseline takes at most one RUN id, got {' '.join(t)!r}")
        from ..storage.codec import rerun_of

        row = led.get(_run_id(t[0])) if t else next((r for r in led.rows() if rerun_of(r) is None), None)
        if row is None:
            raise UsageError("%perf baseline: there are no runs yet; time something with %%gpubench first")
        led.set_baseline(row["label"], row["id"])
        print(f"perfmagic: run #{row['id']} is now the baseline of '{row['label']}'")

    def _compare(self, led: Any, t: list[str], args: Any, notebook: Any) -> Any:
        if len(t) > 2:
            raise UsageError(f"%perf compare takes at most two RUN ids (A B), got {' '.join(t)!r}")
        if len(t) == 2:
            a, b = _run_id(t[0]), _run_id(t[1])
            if a == b:
                raise UsageError(f"%perf compare {a} {b}: A and B are the same run; a run compared with itself "
                                 "tells nothing and would be re-measured against itself. Give two runs: %perf "
                                 "compare BASELINE CHANGE (%perf lists the ids)")
        else:
            from ..storage.codec import rerun_of

            # default B: the latest run of the user's, not a re-measurement made for a comparison
            rb = led.get(_run_id(t[0])) if t else next((r for r in led.rows() if rerun_of(r) is None
                                                         and r.get("magic") != "where"), None)
            if rb is None:
                raise UsageError("%perf compare: there are no runs yet; time something with %%gpubench first")
            b = rb["id"]
            a = led.baseline(rb["label"])
            if a is None or a == b:
                older = [r for r in led.rows(label=rb["label"]) if r["id"] != b and r["id"] < b and rerun_of(r) is None]
                if not older:
                    raise UsageError(f"%perf compare: run #{b} ('{rb['label']}') has no baseline and no earlier run "
                                     "of the same label; give two run ids: %perf compare A B")
                a = older[0]["id"]
                print(f"perfmagic: '{rb['label']}' has no baseline (mark one with %perf baseline RUN): "
                      f"comparing with its previous run #{a}")
        if args.rerun and args.historical:
            raise UsageError("%perf compare: --rerun and --historical exclude each other; give one")
        if args.where and (args.historical or args.no_where):
            other = "--historical" if args.historical else "--no-where"
            raise UsageError(f"%perf compare: --where and {other} exclude each other: --where needs A and B "
                             "re-measured here (their stacks sampled while they run); drop one")
        ra, rb = led.get(a), led.get(b)
        self._comparable(led, ra, rb, args)
        return self._judge(led, ra, rb, args)

    def _judge(self, led: Any, ra: dict[str, Any], rb: dict[str, Any], args: Any) -> Any:
        """The comparison flow (timing/flow.py), shown: re-measured interleaved when both runs can still
        run here, else the recorded samples with the reason said."""
        from ..errors import BenchInterrupted
        from ..render.comparison import comparison_bundle
        from ..timing.flow import RerunError, compare_runs
        from ..timing.history import CompareError
        from ._template import display_bundle, finish

        fnames = (_boundary.cell_filename(self.shell, ra.get("code") or ""),
                  _boundary.cell_filename(self.shell, rb.get("code") or ""))
        try:
            rc = compare_runs(ra, rb, ledger=led, rerun=False if args.historical else (True if args.rerun else None),
                              captures=self.state.get("captures", {}), globals=self.shell.user_ns,
                              budget=args.budget, min_effect=args.min_effect, record=self.record,
                              notify=print, filenames=fnames,
                              where=True if args.where else (False if args.no_where else None),
                              file_labels=_boundary.file_labels(self.shell, fnames))
        except RerunError as exc:
            raise UsageError(f"%perf compare {'--where' if args.where else '--rerun'}: {exc}") from None
        except CompareError as exc:
            raise UsageError(f"%perf compare: {exc}") from None
        except BenchInterrupted as exc:
            if exc.result is None:
                raise _boundary.Interrupted("perfmagic: %perf compare interrupted before one A/B pair was "
                                            "measured; nothing recorded") from None
            if not args.quiet:
                display_bundle({"text/plain": exc.result.text()})
            raise _boundary.Interrupted("perfmagic: %perf compare interrupted; the pairs measured are shown above "
                                        "and recorded as interrupted") from None
        if not hasattr(rc, "what"):  # a PairResult without a verdict (fewer than 3 pairs)
            return finish(self.shell, rc, args, None if args.quiet else {"text/plain": rc.text()})
        return finish(self.shell, rc, args, None if args.quiet else comparison_bundle(rc))

    def _comparable(self, led: Any, ra: dict[str, Any], rb: dict[str, Any], args: Any) -> None:
        """One-line UsageErrors, with the fix, for pairs that cannot be judged as asked."""
        a, b = ra["id"], rb["id"]
        ma, mb = ra.get("magic"), rb.get("magic")
        if ma != mb:
            raise UsageError(f"%perf compare: run #{a} is a %%{ma} run and run #{b} a %%{mb} run; only runs of one "
                             f"magic can be compared. Pick two %%{mb} runs (%perf lists them): %perf compare A {b}")
        if not args.historical:
            for r in (ra, rb):
                if r.get("notebook") != led.notebook:
                    raise UsageError(f"%perf compare: run #{r['id']} was measured in notebook {r.get('notebook')!r}, "
                                     f"not in this one ({led.notebook!r}), so it cannot be re-measured here; compare "
                                     f"the recorded samples with %perf compare {a} {b} --historical, or measure it "
                                     "again in this notebook")

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
            from ..storage.views import labels

            raise UsageError(f"%perf plot: no timed runs with label {label!r}; labels in this ledger: "
                             + (", ".join(repr(x) for x in labels(led, notebook=notebook)) or "none"))
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

    def _next(self, led: Any, t: list[str], args: Any, notebook: Any) -> Any:
        from ._perf_next import perf_next

        return perf_next(self, led, t, args, notebook)

    def _target(self, led: Any, t: list[str], args: Any, notebook: Any) -> Any:
        from ._perf_next import perf_target

        return perf_target(self, led, t, args, notebook)

    def _guard(self, led: Any, t: list[str], args: Any, notebook: Any) -> Any:
        from ._perf_guard import perf_guard

        return perf_guard(self, led, t, args, notebook)
