"""``%%amdahl`` (measured scaling, Amdahl and USL fits) and ``%littles`` (Little's law)."""

from __future__ import annotations

import argparse
import re
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import cell_magic, line_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments

from . import _args, _boundary
from ._template import MagicTemplate
from ._progress import progress_bar

_SPEC = re.compile(r"^([A-Za-z_]\w*)=(.+)$")


def worker_list(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give worker counts as integers separated by commas, e.g. 1,2,4,8") from None
    return out


@magics_class
class ScalingMagics(MagicTemplate):

    @magic_arguments()
    @argument("spec", nargs="?", help="NAME=1,2,4,8: inject NAME into the cell with each worker count")
    @argument("--threads", type=worker_list, metavar="LIST",
              help="instead of a variable: set torch and BLAS/OpenMP threads to each count around the cell (threadpoolctl)")
    @argument("--ranks", type=worker_list, metavar="LIST",
              help="instead: run the cell (one training step) in torch.distributed process groups of each size, "
                   "e.g. --ranks 1,2,4 (see perfmagic.amdahl_ranks)")
    @argument("--backend", default=None, choices=["gloo", "nccl"],
              help="with --ranks: the torch.distributed backend (default gloo; nccl needs one GPU per rank)")
    @argument("--setup", metavar="CODE", default="",
              help="with --ranks: code run once in each rank after its process group is up (build the DDP model "
                   "there), e.g. --setup \"model, opt, x = make_ddp()\"")
    @argument("-l", "--label", help="name of this sweep in the ledger (default: the cell's first line)")
    @argument("-b", "--budget", type=_args.positive_duration, default=None,
              help="timing budget per worker count (default about 1 s)")
    @argument("--rounds", type=_args.positive_int, default=3, help="interleaved rounds over the worker counts (default 3)")
    @argument("--weak", action="store_true", help="weak scaling: the work grows with the workers (Gustafson)")
    @argument("--no-plot", action="store_true", help="text only, no chart")
    @argument("-o", "--output", action="store_true", help="return the AmdahlResult")
    @argument("-q", "--quiet", action="store_true", help="display nothing (use with -o)")
    @no_var_expand
    @cell_magic
    @_boundary.user_facing("%%amdahl")
    def amdahl(self, line: str, cell: str) -> Any:
        """Run the cell at several worker counts and fit Amdahl's law and the Universal Scalability Law.

        ``%%amdahl workers=1,2,4,8`` injects ``workers`` into the cell; ``%%amdahl --threads 1,2,4`` sets
        torch and BLAS thread counts around it (restored afterwards); ``%%amdahl --ranks 1,2,4 --setup CODE``
        runs the cell as one training step in torch.distributed process groups of each size (gloo, or
        ``--backend nccl``): per-rank medians, straggler, time in collectives, all-reduce bandwidth. Reports speedup, efficiency and the
        Karp–Flatt serial fraction per point, the serial fraction S and ceiling 1/S, USL's σ, κ and peak,
        the better-supported model, and how many workers are worth it. Other processes' load is named
        first (and, when it leaves under 1.5 cores free, the answer is "cannot tell"); the GIL is blamed
        only on evidence sampled while the threads run; with fewer than 3 counts no model is fitted, and
        a fit at a bound or without degrees of freedom is marked unreliable, not reported.
        """
        __tracebackhide__ = True
        from ..errors import BenchInterrupted

        args, _ = _args.parse(self.amdahl.parser, line)
        if args.ranks is not None:
            return self._ranks(args, line, cell)
        if args.backend is not None or args.setup:
            raise UsageError("%%amdahl: --backend and --setup go with --ranks LIST, e.g. "
                             "%%amdahl --ranks 1,2,4 --backend gloo --setup \"model = make_ddp()\"")
        if (args.spec is None) == (args.threads is None):
            raise UsageError("%%amdahl needs either NAME=LIST (e.g. workers=1,2,4,8), --threads LIST (e.g. --threads 1,2,4) "
                             "or --ranks LIST (e.g. --ranks 1,2,4)")
        if args.spec is not None:
            m = _SPEC.match(args.spec)
            if not m:
                raise UsageError(f"%%amdahl: {args.spec!r} is not NAME=LIST; e.g. %%amdahl workers=1,2,4,8")
            var, workers, mode = m.group(1), m.group(2), "variable"
            try:
                workers = worker_list(workers)
            except argparse.ArgumentTypeError as exc:
                raise UsageError(f"%%amdahl: {exc}") from None
        else:
            var, workers, mode = "workers", args.threads, "threads"
        from ..scaling.sweep import amdahl
        from ._template import default_label

        label = args.label or default_label(cell, self.state)
        bar, close = progress_bar(100, "scaling sweep")
        status = "ok"
        try:
            result = amdahl(cell, workers, mode=mode, var=var, globals=self.shell.user_ns, budget=args.budget,
                            rounds=args.rounds, weak=args.weak, progress=lambda f, msg: bar(100 * f, msg),
                            filename=_boundary.cell_filename(self.shell, cell))
        except BenchInterrupted as exc:
            result, status = exc.result, "interrupted"
            if result is None:
                raise _boundary.Interrupted("perfmagic: scaling sweep interrupted before any point was measured") from None
        finally:
            close()
        return self.conclude(
            result, args, magic="amdahl", line=line, cell=cell, label=label, status=status,
            interrupted="perfmagic: %%amdahl interrupted; the points measured are fitted above and recorded"
            if status == "interrupted" else None)

    def _ranks(self, args: Any, line: str, cell: str) -> Any:
        """``%%amdahl --ranks LIST``: the engine is :func:`perfmagic.ranks.amdahl_ranks`."""
        __tracebackhide__ = True
        from ..errors import BenchInterrupted, PerfmagicError

        if args.spec is not None or args.threads is not None:
            raise UsageError("%%amdahl: --ranks LIST replaces NAME=LIST and --threads; give only one, e.g. "
                             "%%amdahl --ranks 1,2,4")
        from ..ranks.sweep import amdahl_ranks
        from ._template import default_label

        label = args.label or default_label(cell, self.state)
        bar, close = progress_bar(100, "rank sweep")
        status = "ok"
        try:
            result = amdahl_ranks(cell, args.ranks, backend=args.backend or "gloo", setup=args.setup,
                                  globals=self.shell.user_ns, budget=args.budget, weak=args.weak,
                                  progress=lambda f, msg: bar(100 * f, msg),
                                  filename=_boundary.cell_filename(self.shell, cell))
        except BenchInterrupted as exc:
            result, status = exc.result, "interrupted"
            if result is None:
                raise _boundary.Interrupted("perfmagic: rank sweep interrupted before any world size was measured; "
                                            "every rank was stopped") from None
        except PerfmagicError as exc:
            raise UsageError(f"%%amdahl --ranks: {exc}") from None
        finally:
            close()
        return self.conclude(
            result, args, magic="amdahl", line=line, cell=cell, label=label, status=status,
            interrupted="perfmagic: %%amdahl --ranks interrupted; the world sizes measured are shown and "
            "recorded" if status == "interrupted" else None)

    @magic_arguments()
    @argument("terms", nargs="*", help="two of throughput=RATE (100/s), latency=DURATION (1s, 250ms), "
                                       "concurrency=N, or run=RUN (latency = that run's median time)")
    @argument("--io", action="store_true", help="the work is I/O-bound (waits): do not cap workers at the free cores")
    @line_magic
    @_boundary.user_facing("%littles")
    def littles(self, line: str) -> Any:
        """Little's law: concurrency = throughput × latency.

        ``%littles throughput=100/s latency=1s`` -> 100 tasks in flight. ``%littles throughput=500/s run=12``
        takes run 12's median time as the latency and answers the worker count, capped by the cores
        this machine has free for CPU-bound work (``--io`` lifts the cap).
        """
        from ..scaling.littles import littles, parse_concurrency, parse_duration, parse_rate, workers_for
        from ..render.littles import workers_line

        args, _ = _args.parse(self.littles.parser, line)
        kv: dict[str, str] = {}
        for t in args.terms:
            k, eq, v = t.partition("=")
            if not eq or k not in ("throughput", "latency", "concurrency", "run"):
                raise UsageError(f"%littles: {t!r} is not one of throughput=, latency=, concurrency=, run=; "
                                 "e.g. %littles throughput=100/s latency=1s")
            kv[k] = v
        thr = parse_rate(kv["throughput"]) if "throughput" in kv else None
        lat = parse_duration(kv["latency"]) if "latency" in kv else None
        conc = parse_concurrency(kv["concurrency"]) if "concurrency" in kv else None
        source = ""
        if "run" in kv:
            from ..storage.ledger import LedgerError, UnknownRunError
            from ..storage.session import current_ledger

            try:
                row = current_ledger(self.shell.user_ns).get(_args.run_id(kv["run"]))
            except (UnknownRunError, argparse.ArgumentTypeError) as exc:
                raise UsageError(f"%littles run={kv['run']}: {exc.args[0] if exc.args else exc}") from None
            except LedgerError as exc:
                raise UsageError(f"%littles run={kv['run']}: earlier runs unavailable: {str(exc).rstrip('.')}. Give the latency "
                                 "itself instead, e.g. latency=20ms") from None
            lat = (row.get("metrics") or {}).get("median_s")
            if not lat:
                raise UsageError(f"%littles: run #{row['id']} has no median time to use as the latency")
            source = f" (latency = run #{row['id']} '{row.get('label')}' median)"
        res = littles(throughput=thr, latency=lat, concurrency=conc)
        lines = [res.text() + source]
        if thr is not None and lat is not None:
            n, notes = workers_for(thr, lat, cpu_bound=not args.io)
            lines.append(workers_line(n, args.io))
            lines += [f"  ! {x}" for x in notes]
        print("\n".join(lines))
        return None
