"""``%%flame``: a sampling flame graph of the cell (py-spy on the kernel itself, or an in-process sampler)."""

from __future__ import annotations

from typing import Any

from IPython.core.magic import cell_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments

from . import _args, _boundary
from ._template import MagicTemplate


def _rate(text: str) -> int:
    import argparse

    from ..profile.flame import DEFAULT_RATE, MAX_RATE

    v = _args.positive_int(text)
    if v > MAX_RATE:
        raise argparse.ArgumentTypeError(f"{text!r}: at most {MAX_RATE} samples per second ({DEFAULT_RATE} is "
                                         "the default)")
    return v


@magics_class
class FlameMagics(MagicTemplate):

    @magic_arguments()
    @argument("--rate", type=_rate, default=None, metavar="HZ",
              help="samples per second (default 1500: at least 100 samples for a cell of 0.1 s; a long "
                   "run keeps at most 10,000, one per block; 25 with --native, which pauses the kernel at "
                   "every sample; at most 2000)")
    @argument("--sampler", choices=("auto", "py-spy", "inprocess"), default="auto",
              help="auto (default): py-spy on the kernel's own process, else the in-process sampler; "
                   "py-spy: fail if it cannot attach; inprocess: a thread reading the cell's Python stack")
    @argument("--native", action="store_true", help="py-spy: include native (C/C++/Rust) frames; py-spy then "
                                                    "pauses the kernel at each sample (default rate 25 Hz): a 0.65 s "
                                                    "torch cell ran ~1.2x slower at 25 Hz, ~1.8x at 100 Hz; short "
                                                    "cells pay ~0.4 s more (py-spy loads libtorch's symbols)")
    @argument("--all-threads", action="store_true",
              help="py-spy: also graph the kernel process's other busy threads (threads the cell started, "
                   "library pools) as 'thread NAME'; by default only the thread running the cell is graphed "
                   "and the others are only counted (waiting kernel threads are never graphed without --idle)")
    @argument("--idle", action="store_true", help="py-spy: keep samples of waiting threads (sleep, I/O, locks)")
    @argument("--subprocesses", action="store_true",
              help="py-spy: also sample child processes (DataLoader workers, multiprocessing pools)")
    @argument("--top", type=_args.positive_int, default=10, metavar="N",
              help="rows in the table of top functions (default 10)")
    @argument("-l", "--label", help="name of this run in the ledger (default: the cell's first line)")
    @argument("--no-plot", action="store_true", help="text only: no interactive graph, no PNG")
    @argument("-o", "--output", action="store_true", help="return the FlameResult")
    @argument("-q", "--quiet", action="store_true", help="display nothing (use with -o)")
    @no_var_expand
    @cell_magic
    @_boundary.user_facing("%%flame")
    def flame(self, line: str, cell: str) -> Any:
        """Run the cell once under a sampling profiler and show an interactive flame graph.

        py-spy samples the kernel's own process from outside (no overhead on the cell in its
        non-blocking mode); where it is missing or may not attach (containers without SYS_PTRACE,
        macOS) an in-process sampler thread takes over and the output says why. The root of the graph
        is the cell: IPython's own frames are cut away and cell lines show as ``In [n] line k``. The graph
        (click to zoom, hover for file:line and self/total time, search) is plain HTML and inline
        JavaScript with its data inline: it works offline and in exported HTML; a PNG and a text table
        of the top functions by self and total time come with it. An exception in the cell shows the
        profile up to the error, then the exception.
        """
        __tracebackhide__ = True
        from ..errors import BenchInterrupted
        from ..profile.flame import flame
        from ._template import default_label, with_run_id

        args, _ = _args.parse(self.flame.parser, line)
        label = args.label or default_label(cell, self.state)
        src = self.shell.transform_cell(cell)
        number = max(self.shell.execution_count - 1, 0)  # run_cell has already counted this cell
        compiler = self.shell.compile
        # one leading newline: line k of the cell (the %%flame line is line 1) is line k of this file
        filename = compiler.cache("\n" + src, number, raw_code="\n" + cell)
        labels = {name: f"In [{n}]" for name, n in getattr(compiler, "_filename_map", {}).items()}
        status = "ok"
        try:
            result = flame("\n" + src, globals=self.shell.user_ns, rate=args.rate, sampler=args.sampler,
                           native=args.native, idle=args.idle, subprocesses=args.subprocesses,
                           all_threads=args.all_threads, label=label,
                           filename=filename, file_labels=labels, on_error="return")
        except BenchInterrupted as exc:
            result, status = exc.result, "interrupted"
        if result.status == "failed":
            status = "failed"
        from ..render.flame import mimebundle

        return self.conclude(
            result, args, magic="flame", line=line, cell=cell, label=label, status=status,
            primary_metric="top_self_fraction",
            bundle=lambda run_id: mimebundle(result, text=with_run_id(result.text(top=args.top), run_id),
                                             plot=not args.no_plot),
            interrupted="perfmagic: %%flame interrupted; the profile up to Ctrl-C is shown and recorded"
            if status == "interrupted" else None,
            failure=result.exception if status == "failed" else None)

