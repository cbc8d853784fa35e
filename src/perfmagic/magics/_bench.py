"""``%%gpubench``: the timing magic, a thin front end over :func:`perfmagic.bench`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import cell_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments

from . import _args, _boundary
from ._template import MagicTemplate


@magics_class
class BenchMagics(MagicTemplate):
    """Timing magics. ``state`` is shared with the other perfmagic magics (current cell id, ...)."""

    @magic_arguments()
    @argument("-l", "--label", help="name of this measurement in the ledger (default: the cell's first code line)")
    @argument("-b", "--budget", type=_args.positive_duration, default=None,
              help="time budget for the whole measurement: 0.5, 500ms, 2s, 1m (default: about 1 s; a budget you give is never exceeded)")
    @argument("-p", "--precision", type=_args.fraction, default=0.01,
              help="stop when the 95%% CI of the median is within ± this fraction: 0.01 or 1%% (default 1%%; with the "
                   "default budget, ±2.5%% is accepted after 0.1 s: give -b to hold the target)")
    @argument("-w", "--warmup", type=_args.warmup_count, default="auto",
              help="warmup calls: 'auto' (until timings stop drifting, at least 5 calls) or a number (default auto)")
    @argument("--min-samples", type=_args.positive_int, default=10, help="minimum number of timed samples (default 10)")
    @argument("-d", "--device", default="auto",
              help="auto, cpu, cuda, cuda:N or mps (default auto: CUDA when the cell uses it; without CUDA, the CPU)")
    @argument("--sync", default="auto", choices=["auto", "none", "cuda", "mps", "jax", "cupy"],
              help="how to wait for the device at block boundaries (default auto: from what the cell touches)")
    @argument("--flush", action="store_true",
              help="flush the cache before every sample, outside the timed region (GPU: 2x L2; CPU: 2x last-level cache)")
    @argument("--items", metavar="EXPR", help="items processed per call (Python expression): reports items/s")
    @argument("--flops", metavar="EXPR", help="floating-point operations per call (Python expression, e.g. 2*n**3): reports FLOP/s")
    @argument("--bytes", metavar="EXPR", dest="nbytes", help="bytes moved per call (Python expression): reports B/s")
    @argument("--gc", action="store_true", help="keep the garbage collector enabled while timing (default: disabled, as timeit)")
    @argument("--no-memory", action="store_true", help="skip the extra untimed call that measures peak memory")
    @argument("--no-plot", action="store_true", help="text only, no figure")
    @argument("-o", "--output", action="store_true", help="return the BenchResult (it becomes the cell's Out[] value)")
    @argument("-q", "--quiet", action="store_true", help="display nothing (use with -o)")
    @argument("--baseline", action="store_true", help="mark this run as the baseline of its label (%%perf compares later runs with it)")
    @argument("--vs", metavar="RUN", type=_args.run_ref,
              help="same-process A/B: re-run RUN's code (a run id, or 'baseline' for this label's baseline) "
                   "interleaved with this cell (A B B A ...) and compare; machine drift cancels. "
                   "RUN's code must still run in this namespace; a run of this kernel re-runs with the functions "
                   "it called then (one redefined since is the change measured, and its diff is shown)")
    @argument("--where", action="store_true",
              help="with --vs: show where the change went (each function's and torch op's Δ with its interval, a "
                   "differential flame graph) whatever the verdict. Default: sampled while the pairs run, shown "
                   "beside a faster/slower verdict")
    @argument("--no-where", action="store_true", help="with --vs: do not sample the stacks while the pairs run")
    @argument("--min-effect", type=_args.fraction, default=0.10,
              help="the smallest change worth keeping, for --vs verdicts: 0.1 or 10%% (default 10%%)")
    @argument("setup", nargs=argparse.REMAINDER, help="setup code, run once before timing (as in %%%%timeit)")
    @no_var_expand
    @cell_magic
    @_boundary.user_facing("%%gpubench")
    def gpubench(self, line: str, cell: str) -> Any:
        """Time the cell on the GPU (or the CPU), with warmup, device sync, a CI and peak memory.

        The cell is compiled once, its first (cold) call is reported apart, it is warmed up until
        timings stop drifting, and it is timed in calibrated blocks until the 95% CI of the median is
        within --precision or the --budget is spent. Every run is recorded in the notebook's ledger
        (``%perf`` shows it). Names the cell assigns stay local to the measurement, as in ``%%timeit``.

        Examples::

            %%gpubench -l matmul --flops 2*n**3 a = torch.randn(n, n, device="cuda")
            a @ a
        """
        __tracebackhide__ = True
        from ..timing import bench as _engine
        from ..errors import BenchInterrupted

        from ._template import default_label

        args, setup = _args.parse(self.gpubench.parser, line, remainder="setup")
        ns = self.shell.user_ns
        work = {k: _args.eval_expr(f"--{o}", getattr(args, k), ns)
                for k, o in (("items", "items"), ("flops", "flops"), ("nbytes", "bytes"))}
        label = args.label or default_label(cell, self.state)
        filename = _boundary.cell_filename(self.shell, cell)
        if (args.where or args.no_where) and args.vs is None:
            raise UsageError(f"%%gpubench {'--where' if args.where else '--no-where'} is about an A/B pair: add "
                             "--vs RUN (a run id, or baseline) to time this cell against RUN and see where the "
                             "change went, or use %perf compare A B --where for two recorded runs")
        if args.where and args.no_where:
            raise UsageError("%%gpubench: --where and --no-where exclude each other; keep one")
        if args.vs is not None:
            pair = self._vs(args, line, cell, setup, label, filename, work)
            if pair is not _ALONE:
                return pair
        stopped = None
        try:
            result = _engine.bench(
                cell, setup, globals=ns, label=label, budget=args.budget, precision=args.precision,
                warmup=args.warmup, min_samples=args.min_samples, device=args.device, sync=args.sync,
                flush=args.flush, memory=not args.no_memory, gc=args.gc, items=work["items"],
                flops=work["flops"], bytes_moved=work["nbytes"], filename=filename)
        except BenchInterrupted as exc:
            if exc.result is None:
                raise _boundary.Interrupted("perfmagic: %%gpubench interrupted before anything was measured; "
                                            "nothing recorded") from None
            result = exc.result
            stopped = "perfmagic: %%gpubench interrupted; partial result above, recorded as interrupted"
        return self._finish(result, line, cell, args, interrupted=stopped)

    def _finish(self, result: Any, line: str, cell: str, args: argparse.Namespace, *,
                interrupted: str | None = None) -> Any:
        """Record the run, show it and end the cell (:meth:`conclude`); the result shown and returned
        carries its run id, and a run that finished is kept for re-runs (``%perf compare``) and marked
        the baseline with ``--baseline``."""
        from dataclasses import replace

        from ..core.env import fingerprint

        options = {k: v for k, v in vars(args).items() if k not in ("setup",)}
        options["setup"] = result.setup
        if result.work:
            options["work"] = dict(result.work)

        def recorded(res: Any, run_id: int) -> Any:
            if res.status == "ok":
                self._capture(run_id, cell, res.setup)
            if args.baseline:
                self._mark_baseline(res.label, run_id)
            return replace(res, run_id=run_id)

        return self.conclude(
            result, args, magic="gpubench", line=line, cell=cell, label=result.label, status=result.status,
            options=options, env=result.env, env_hash=fingerprint(result.env) if result.env else None,
            text=lambda run_id: result.text(run_id=run_id), recorded=recorded,
            interrupted=interrupted)

    def _capture(self, run_id: int, code: str, setup: str) -> None:
        """Keep, for this kernel's lifetime, what the run's code called (so ``%perf compare`` can re-run
        it as it was) and a fingerprint of the data it read (to see when that changed)."""
        from ..timing.rerun import capture

        try:
            self.state.setdefault("captures", {})[run_id] = capture(code, setup, self.shell.user_ns)
        except Exception:  # noqa: BLE001 - never lose a run over this; compare falls back to historical
            pass

    def _mark_baseline(self, label: str, run_id: int) -> None:
        from ..storage.session import current_ledger

        try:
            current_ledger(self.shell.user_ns).set_baseline(label, run_id)
            print(f"perfmagic: run #{run_id} is now the baseline of '{label}'")
        except Exception as exc:  # a ledger that cannot be written: the run is still shown
            print(f"perfmagic: could not mark the baseline ({exc})")

    def _vs(self, args: argparse.Namespace, line: str, cell: str, setup: str, label: str, filename: str,
            work: dict[str, Any]) -> Any:
        """Same-process A/B against a recorded run: both codes interleaved, one paired verdict.

        Returns ``_ALONE`` when the ledger cannot be read (run A's code is unknown): the caller then
        measures this cell alone, after a one-line message, so the user still gets a result."""
        __tracebackhide__ = True
        from ..errors import BenchInterrupted
        from ..storage.ledger import LedgerError, UnknownRunError
        from ..storage.session import current_ledger
        from ..timing.flow import measure_against

        led = current_ledger(self.shell.user_ns)
        try:
            if args.vs == "baseline":
                base = led.baseline(label)
                if base is None:
                    raise UsageError(f"%%gpubench --vs baseline: label {label!r} has no baseline; mark one with "
                                     "%%gpubench --baseline or %perf baseline RUN, or give a run id")
                args.vs = base
            row_a = led.get(args.vs)
        except UnknownRunError as exc:
            raise UsageError(f"%%gpubench --vs: {exc}") from None
        except LedgerError as exc:
            print(f"perfmagic: earlier runs unavailable: {str(exc).rstrip('.')}. --vs {args.vs} needs that run's "
                  "code: this cell is measured alone.", file=sys.stderr)
            return _ALONE
        if row_a.get("magic") != "gpubench":
            raise UsageError(f"%%gpubench --vs {args.vs}: run #{args.vs} is a %%{row_a.get('magic')} run; "
                             "--vs needs a %%gpubench run")
        opts_a = row_a.get("options") or {}
        code_a = row_a.get("code") or ""  # the cell body (the ledger keeps the magic line apart)
        fn_a = _boundary.cell_filename(self.shell, code_a)
        status, watches = "ok", []
        cap_a = self.state.get("captures", {}).get(row_a.get("id", args.vs))  # what A called when it ran
        try:
            pr = measure_against(row_a, cell, setup, self.shell.user_ns, label_b=label, cap_a=cap_a,
                                 work_b={k if k != "nbytes" else "bytes": v for k, v in work.items() if v},
                                 budget=args.budget, precision=args.precision, min_effect=args.min_effect,
                                 min_samples=args.min_samples, device=args.device, sync=args.sync,
                                 memory=not args.no_memory, gc=args.gc, filenames=(fn_a, filename), notify=print,
                                 where=True if args.where else (False if args.no_where else None), watches=watches)
        except BenchInterrupted as exc:
            if exc.result is None:
                raise _boundary.Interrupted("perfmagic: %%gpubench --vs interrupted before one A/B pair was "
                                            "measured; nothing recorded") from None
            pr, status = exc.result, "interrupted"
        rc, b_id = self._record_pair(pr, row_a, code_a, opts_a, args, line, cell, setup, status, led,
                                     where=(watches, _boundary.file_labels(self.shell, (fn_a, filename))),
                                     cap_a=cap_a)
        if pr.advice():
            print(f"perfmagic: {pr.advice()}")
        from dataclasses import replace

        from ..render.bundle import mimebundle
        from ..render.comparison import comparison_bundle
        from ._template import finish

        # the comparison, then B's run (too few pairs for a verdict: no comparison to return, so -o shows them)
        shown = None if args.quiet else [comparison_bundle(rc) if rc is not None else {"text/plain": pr.text()},
                                         mimebundle(replace(pr.b, run_id=b_id), plot=not args.no_plot)]
        stopped = ("perfmagic: %%gpubench --vs interrupted; the pairs measured are shown above and recorded as "
                   "interrupted") if status == "interrupted" else None
        return finish(self.shell, rc, args, shown, interrupted=stopped)

    def _record_pair(self, pr: Any, row_a: dict[str, Any], code_a: str, opts_a: dict[str, Any],
                     args: argparse.Namespace, line: str, cell: str, setup: str, status: str, led: Any, *,
                     where: tuple[list[Any], dict[str, str]] = ([], {}), cap_a: Any = None) -> Any:
        """Record both sides of an A/B pair through the comparison flow (:func:`perfmagic.timing.flow.record_pair`,
        as ``%perf compare``'s re-measurement does): ``(comparison or None when too few pairs, B's run id)``.
        ``where``: the pairs' stack sampler (if any) and the cells' file labels; the comparison then says
        where the change went (:func:`perfmagic.timing.flow.attach_where`, recorded as a ``where`` row)."""
        from ..render.bench import interleaved_note
        from ..timing.flow import attach_where, functions_changed, pair_verdict, record_pair

        options = {k: v for k, v in vars(args).items() if k != "setup"}
        options["setup"] = setup
        row_b = {"code": cell, "magic_line": line, "options": options}  # this cell: a new run, no id yet
        ref_a, ref_b = record_pair(pr, {**row_a, "id": args.vs}, row_b, record=self.record, status=status,
                                   limit=pr.b.policy.get("thread_limit"), notes=(interleaved_note(args.vs), None))
        b_id = ref_b.id if ref_b is not None else None
        if status == "ok":
            for ref, code, stp in ((ref_a, code_a, opts_a.get("setup") or ""), (ref_b, cell, setup)):
                if ref is ref_a and ref is not None and cap_a is not None:  # A ran with the functions it called then
                    self.state.setdefault("captures", {})[ref.id] = cap_a
                elif ref is not None:
                    self._capture(ref.id, code, stp)
        if args.baseline and ref_b is not None and status == "ok":
            self._mark_baseline(pr.b.label, ref_b.id)
        if pr.comparison is None:
            return None, b_id
        rc = pair_verdict(pr, [ref_a, ref_b], ledger=led, min_effect=args.min_effect)
        # a function redefined since A ran is a place of the code, though the cells read alike
        cap_b = self.state.get("captures", {}).get(b_id)
        if cap_b is None:  # not kept (an interrupted pair): what this cell calls now
            from ..timing.rerun import capture

            cap_b = capture(cell, setup, self.shell.user_ns)
        rc = functions_changed(rc, cap_a, cap_b)
        if status == "ok":
            rc = attach_where(rc, where[0], {**row_a, "id": args.vs}, {"label": pr.b.label, "id": b_id},
                              [ref_a, ref_b], record=self.record, shown=bool(args.where), file_labels=where[1])
        return rc, b_id


_ALONE = object()  # _vs's answer when run A cannot be read: measure this cell alone
