"""``%%estimate``: how long and how much memory the full run takes, before committing to it."""

from __future__ import annotations

import re
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import cell_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments

from . import _args, _boundary
from ._template import MagicTemplate
from ._progress import progress_bar

_SPEC = re.compile(r"^([A-Za-z_]\w*)=(.+)$")


def _number(what: str, expr: str, ns: dict[str, Any]) -> float:
    """Evaluate a size or a total (``1_000_000``, ``len(df)``, ``119*2000``) in the notebook's namespace."""
    try:
        value = float(eval(compile(expr, f"<{what}>", "eval"), ns))
    except Exception as exc:
        raise UsageError(f"%%estimate {what}{expr!r}: {type(exc).__name__}: {exc}. The expression is evaluated in the "
                         "notebook's namespace: define its names first, or give a number") from None
    if not value >= 1 or value != value or value == float("inf"):
        raise UsageError(f"%%estimate {what}{expr!r} is {value!r}; it must be a whole number >= 1, e.g. "
                         f"{what}1_000_000")
    if value != int(value):
        raise UsageError(f"%%estimate {what}{expr!r} is {value!r}, not a whole number of "
                         f"{'steps' if what.startswith('--total') else 'items'}; give one, e.g. {what}{int(value)}")
    return value


def _sizes(text: str) -> list[int]:
    import argparse

    try:
        out = [int(float(x)) for x in text.replace("_", "").split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give sizes as integers separated by commas, e.g. 1000,2000,4000") from None
    if len(out) < 3:
        raise argparse.ArgumentTypeError(f"{text!r}: give at least 3 sizes to fit a model")
    return out


@magics_class
class EstimateMagics(MagicTemplate):

    @magic_arguments()
    @argument("spec", nargs="?", metavar="NAME=FULL",
              help="scaling form: the cell uses NAME; FULL (a Python expression) is the size of the full run, "
                   "e.g. n=1_000_000 or n=len(df)")
    @argument("--total", metavar="EXPR",
              help="per-iteration form: the cell is one unit of work; EXPR is the number of units of the full job, "
                   "e.g. --total 119*2000")
    @argument("-b", "--budget", type=_args.duration("the measuring budget", "3s or 10s", limit="budget"), default=None,
              help="most time to spend measuring (default 3s); the measuring also stops at --max-fraction of the "
                   "predicted full run")
    @argument("--limit", type=_args.duration("the full run's allowed time", "10m or 2h"), default=None,
              help="time the full run may take (10m, 2h, 90s): the gate says whether it will fit and the largest "
                   "size that does")
    @argument("--max-fraction", type=_args.fraction, default=0.10,
              help="spend at most this fraction of the predicted full run measuring: 0.1 or 10%% (default 10%%)")
    @argument("--sizes", type=_sizes, metavar="LIST",
              help="scaling form: measure these sizes instead of doubling ones (comma-separated, all below FULL)")
    @argument("--run", action="store_true",
              help="then run the full job when the gate does not rule it out (progress bar with the prediction as ETA); "
                   "the ledger keeps predicted vs actual")
    @argument("--force", action="store_true", help="with --run: run the full job even when the gate says it will not fit")
    @argument("-d", "--device", default="auto", help="auto, cpu, cuda, cuda:N (default auto: CUDA when the cell uses it)")
    @argument("--no-memory", action="store_true", help="time only: skip the peak-memory measurements")
    @argument("-l", "--label", help="name of this estimate in the ledger (default: the cell's first code line)")
    @argument("--no-plot", action="store_true", help="text only, no chart")
    @argument("-o", "--output", action="store_true", help="return the EstimateResult")
    @argument("-q", "--quiet", action="store_true", help="display nothing (use with -o)")
    @no_var_expand
    @cell_magic
    @_boundary.user_facing("%%estimate")
    def estimate(self, line: str, cell: str) -> Any:
        """Estimate the full run's time and peak memory from a few small runs, before committing to it.

        ``%%estimate n=1_000_000``: the cell uses ``n``; it runs at doubling sizes (a few seconds at most,
        and at most --max-fraction of the predicted full run), a cost model (a + b·n^k, n log n, ...) is
        chosen by AICc, and the full size is predicted with a 90% interval, with its peak memory.
        ``%%estimate --total 119*2000``: the cell is one step; a few warmed-up steps give the full job's time.
        ``-b 5s`` measures for up to 5 s instead of 3 s.
        ``--limit 10m`` adds the gate: will it fit 10 minutes and the memory available now, and the largest
        size that does. ``--run`` then runs it, with the prediction as ETA, and records predicted vs actual.
        Ctrl-C while measuring fits the points done; Ctrl-C during --run records how far the job got.
        """
        __tracebackhide__ = True
        from ..errors import BenchInterrupted

        args, _ = _args.parse(self.estimate.parser, line)
        ns = self.shell.user_ns
        if (args.spec is None) == (args.total is None):
            raise UsageError("%%estimate needs either NAME=FULL (scaling, e.g. %%estimate n=1_000_000) or "
                             "--total EXPR (per-iteration, e.g. %%estimate --total 119*2000)")
        var, full, total = "n", None, None
        if args.spec is not None:
            m = _SPEC.match(args.spec)
            if not m:
                raise UsageError(f"%%estimate: {args.spec!r} is not NAME=FULL; e.g. %%estimate n=1_000_000")
            var = m.group(1)
            full = _number(f"{var}=", m.group(2), ns)
        else:
            total = _number("--total ", args.total, ns)
        if args.sizes is not None and args.spec is None:
            raise UsageError("%%estimate: --sizes applies to the scaling form (NAME=FULL), not to --total")
        if args.force and not args.run:
            raise UsageError("%%estimate: --force goes with --run (run the full job even when it will not fit)")
        if not cell.strip():
            raise UsageError("%%estimate: the cell is empty; put the code to estimate in it")
        from ..estimation.estimate import estimate
        from ._template import default_label

        label = args.label or default_label(cell, self.state)
        update, close = progress_bar(100, "estimating")
        run_update, run_close = progress_bar(100, "full run (ETA = estimate)")
        status = "ok"
        interrupted_at = None
        try:
            result = estimate(cell, n=full, total=total, var=var, globals=ns, budget=args.budget,
                              filename=_boundary.cell_filename(self.shell, cell),
                              max_fraction=args.max_fraction, limit=args.limit, sizes=args.sizes,
                              memory=not args.no_memory, device=args.device, run=args.run, force=args.force,
                              progress=lambda f, msg: update(100 * f, msg),
                              run_progress=lambda f, msg: run_update(100 * f, msg))
        except BenchInterrupted as exc:
            result, status, interrupted_at = exc.result, "interrupted", "measuring"
            if result is None:
                raise _boundary.Interrupted("perfmagic: estimate interrupted before anything was measured") from None
        finally:
            close()
            run_close()
        if result.actual is not None and result.actual.status == "interrupted":
            status, interrupted_at = "interrupted", "the full run"
        failure = result.actual.exception if result.actual is not None and result.actual.status == "failed" else None
        if failure is not None:
            status = "failed"
        # text, png, self-contained html with the measured points folded; no widget (result.widget() is the
        # opt-in live view: a saved notebook would keep a dead one)
        return self.conclude(
            result, args, magic="estimate", line=line, cell=cell, label=label, status=status,
            text=lambda run_id: result.text(run_id=run_id),
            interrupted=f"perfmagic: %%estimate interrupted during {interrupted_at}; what was done is shown above "
            "and recorded" if status == "interrupted" else None, failure=failure)
