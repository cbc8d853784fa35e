"""``%%dataloader_check LOADER``: is the training loop waiting for data?"""

from __future__ import annotations

import argparse
import ast
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import cell_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments

from . import _args, _boundary
from ._template import MagicTemplate
from ._progress import progress_bar



def sweep_spec(text: str) -> tuple[str, list[Any]]:
    """``num_workers=0,1,2,4`` -> ("num_workers", [0, 1, 2, 4]); values are Python literals or plain words."""
    name, eq, values = text.partition("=")
    if not eq or not name.strip().isidentifier() or not values.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=V1,V2,...; e.g. --sweep num_workers=0,1,2,4")
    out: list[Any] = []
    for v in values.split(","):
        v = v.strip()
        if not v:
            continue
        low = v.lower()
        if low in ("true", "false", "none"):
            out.append({"true": True, "false": False, "none": None}[low])
            continue
        try:
            out.append(ast.literal_eval(v))
        except (ValueError, SyntaxError):
            out.append(v)
    return name.strip(), out


@magics_class
class DataLoaderMagics(MagicTemplate):

    @magic_arguments()
    @argument("loader", nargs="?", help="the loader: a name (or expression) in the notebook, e.g. train_loader")
    @argument("--steps", type=_args.positive_int, default=20,
              help="steady-state steps measured after the warm-up (default 20)")
    @argument("--warmup", type=int, default=None,
              help="batches skipped before measuring (default num_workers × prefetch_factor + 2; 2 without workers)")
    @argument("--sweep", type=sweep_spec, action="append", metavar="ARG=V1,V2",
              help="rebuild the DataLoader at each value of a DataLoader argument and measure the loop, e.g. "
                   "--sweep num_workers=0,1,2,4 (repeat for a grid)")
    @argument("--sweep-steps", type=_args.positive_int, default=None,
              help="steps measured at each sweep setting (default min(steps, 10))")
    @argument("--no-loader-alone", action="store_true", help="skip the pass over the loader without compute")
    @argument("--no-compute-alone", action="store_true", help="skip the step on a cached batch")
    @argument("-l", "--label", help="name of this run in the ledger (default: the cell's first line)")
    @argument("--no-plot", action="store_true", help="text only, no chart")
    @argument("-o", "--output", action="store_true", help="return the DataLoaderResult")
    @argument("-q", "--quiet", action="store_true", help="display nothing (use with -o)")
    @no_var_expand
    @cell_magic
    @_boundary.user_facing("%%dataloader_check")
    def dataloader_check(self, line: str, cell: str) -> Any:
        """Measure a training loop's data wait: is it input-bound, and what would fix it?

        The cell is one training step that uses the variable ``batch``; ``%%dataloader_check train_loader``
        runs it over the loader's batches and reports the steady-state share of each step spent waiting
        for the next batch (above 0.3: input-bound), the first-batch latency (worker start-up), the loader
        alone (batches/s without compute), the step alone on a cached batch (infinitely fast data), a
        configuration audit of a torch DataLoader (num_workers vs cores, pin_memory and non_blocking copies,
        persistent_workers, prefetch_factor, batch size, collate cost) and, with ``--sweep
        num_workers=0,1,2,4``, the loop at each setting with the best one and where it plateaus. With
        CUDA: GPU idle share from CUDA events and whether host→device copies can overlap compute.
        Workers are always shut down afterwards; ``batch`` is left bound to the last batch.
        The same analysis from a script: ``perfmagic.dataloader_check(loader, step_fn)``.
        """
        __tracebackhide__ = True
        from ..errors import BenchInterrupted

        args, _ = _args.parse(self.dataloader_check.parser, line)
        if not args.loader:
            raise UsageError("%%dataloader_check needs the loader, e.g. %%dataloader_check train_loader "
                             "(the cell is one step using `batch`)")
        if args.warmup is not None and args.warmup < 0:
            raise UsageError(f"%%dataloader_check: --warmup {args.warmup}: the warm-up cannot be negative; "
                             "give 0 or more batches")
        ns = self.shell.user_ns
        try:
            loader = eval(compile(args.loader, "<loader>", "eval"), ns)
        except NameError:
            raise UsageError(f"%%dataloader_check: no loader named {args.loader!r} in the notebook; define it "
                             "first (e.g. train_loader = DataLoader(dataset, batch_size=32)) or check the "
                             "spelling") from None
        except Exception as exc:
            raise UsageError(f"%%dataloader_check: the loader {args.loader!r} could not be evaluated: "
                             f"{type(exc).__name__}: {exc}") from None
        sweep: dict[str, list[Any]] = {}
        for name, values in args.sweep or []:
            sweep.setdefault(name, []).extend(values)
        from ..core.cells import compile_module
        from ..dataloader.check import dataloader_check
        from ._template import default_label

        code = compile_module(cell, _boundary.cell_filename(self.shell, cell))

        def step(batch: Any) -> None:
            ns["batch"] = batch
            exec(code, ns)

        label = args.label or default_label(cell, self.state)
        bar, close = progress_bar(100, "dataloader check")
        status = "ok"
        try:
            result = dataloader_check(loader, step, steps=args.steps, warmup=args.warmup, sweep=sweep or None,
                                      sweep_steps=args.sweep_steps, loader_alone=not args.no_loader_alone,
                                      compute_alone=not args.no_compute_alone, step_source=cell,
                                      name=args.loader, progress=lambda f, msg: bar(100 * f, msg))
        except BenchInterrupted as exc:
            result, status = exc.result, "interrupted"
            if result is None:
                raise _boundary.Interrupted("perfmagic: dataloader check interrupted before a step was measured; "
                                            "the workers are shut down") from None
        finally:
            close()
        options = {k: v for k, v in vars(args).items() if k != "sweep"}
        from ..dataloader.audit import jsonable

        options["sweep"] = {k: [jsonable(x) for x in v] for k, v in sweep.items()}
        return self.conclude(
            result, args, magic="dataloader_check", line=line, cell=cell, label=label, status=status,
            options=options,
            interrupted="perfmagic: %%dataloader_check interrupted; the steps measured are shown above and "
            "recorded; the workers are shut down" if status == "interrupted" else None)


