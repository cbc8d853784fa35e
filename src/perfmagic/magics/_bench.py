"""``%%gpubench``: the timing magic, a thin front end over :func:`perfmagic.bench`."""

from __future__ import annotations

import argparse
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments

from . import _args


def default_label(cell: str) -> str:
    for line in cell.splitlines():
        s = line.strip()
        if s and not s.startswith("#"):
            return s if len(s) <= 40 else s[:39] + "…"
    return "empty cell"


@magics_class
class BenchMagics(Magics):
    """Timing magics. ``state`` is shared with the other perfmagic magics (current cell id, ...)."""

    def __init__(self, shell: Any, state: dict[str, Any]) -> None:
        super().__init__(shell)
        self.state = state

    @magic_arguments()
    @argument("-l", "--label", help="name of this measurement in the ledger (default: the cell's first code line)")
    @argument("-b", "--budget", type=_args.positive_duration, default=None,
              help="time budget for the whole measurement: 0.5, 500ms, 2s, 1m (default: about 1 s; a budget you give is never exceeded)")
    @argument("-p", "--precision", type=_args.fraction, default=0.01,
              help="stop when the 95%% CI of the median is within ± this fraction: 0.01 or 1%% (default 1%%)")
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
    @argument("setup", nargs=argparse.REMAINDER, help="setup code, run once before timing (as in %%%%timeit)")
    @no_var_expand
    @cell_magic
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
        from .. import _engine
        from .._errors import BenchInterrupted, PerfmagicError

        args, setup = _args.parse(self.gpubench.parser, line, remainder="setup")
        ns = self.shell.user_ns
        work = {k: _args.eval_expr(f"--{o}", getattr(args, k), ns)
                for k, o in (("items", "items"), ("flops", "flops"), ("nbytes", "bytes"))}
        label = args.label or default_label(cell)
        filename = self.shell.compile.cache(cell, self.shell.execution_count)
        try:
            result = _engine.bench(
                cell, setup, globals=ns, label=label, budget=args.budget, precision=args.precision,
                warmup=args.warmup, min_samples=args.min_samples, device=args.device, sync=args.sync,
                flush=args.flush, memory=not args.no_memory, gc=args.gc, items=work["items"],
                flops=work["flops"], bytes_moved=work["nbytes"], filename=filename)
        except BenchInterrupted as exc:
            if exc.result is not None:
                self._finish(exc.result, line, cell, args)
            raise KeyboardInterrupt("perfmagic: measurement interrupted; what was measured is shown above "
                                    "and recorded as interrupted") from None
        except PerfmagicError as exc:
            raise UsageError(f"%%gpubench: {exc}") from None
        return self._finish(result, line, cell, args)

    def _finish(self, result: Any, line: str, cell: str, args: argparse.Namespace) -> Any:
        from dataclasses import replace

        from .._display import bench_bundle, display_bundle, widgets_available
        from .._env import fingerprint

        options = {k: v for k, v in vars(args).items() if k not in ("setup",)}
        options["setup"] = result.setup
        ref = self.state["record"](
            magic="gpubench", label=result.label, code=cell, options=options, metrics=result.metrics(),
            samples=result.samples_dict(), env=result.env, env_hash=fingerprint(result.env) if result.env else None,
            status=result.status, primary_metric="median_s", magic_line=line)
        result = replace(result, run_id=ref.id if ref is not None else None)
        if args.output and not args.quiet:
            return result  # IPython shows it as Out[n] through its _repr_mimebundle_
        if not args.quiet:
            display_bundle(bench_bundle(result, widget=widgets_available(self.shell), plot=not args.no_plot))
        return result if args.output else None

