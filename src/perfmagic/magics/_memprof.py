"""``%%memory``: memory over one run of the cell (RSS timeline, true peaks, allocation sites, CUDA)."""

from __future__ import annotations

import argparse
from typing import Any

from IPython.core.magic import cell_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments

from . import _args, _boundary
from ._template import MagicTemplate


def device_choice(text: str) -> str:
    t = text.strip().lower()
    if t in ("auto", "cpu", "cuda") or (t.startswith("cuda:") and t[5:].isdigit()):
        return t
    raise argparse.ArgumentTypeError(f"{text!r}: choose auto, cpu, cuda or cuda:N")


@magics_class
class MemoryMagics(MagicTemplate):

    @magic_arguments()
    @argument("--interval", type=_args.duration("the sampling interval", "10ms or 0.02"), default=0.01, metavar="DURATION",
              help="RSS sampling period (default 10ms; at least 1ms), e.g. 5ms or 0.02")
    @argument("--top", type=_args.positive_int, default=10, metavar="N", help="allocation sites to list (default 10)")
    @argument("--trace", choices=("sample", "auto", "on", "off"), default="sample",
              help="how allocations are tied to lines: sample (default: the RSS sampler charges each growth to the "
                   "line running at the sample, a few us per sample, full speed), auto (tracemalloc once RSS grows "
                   "16 MiB), on (tracemalloc from the first line: every allocation site, but 20-200x slower on "
                   "allocation-heavy Python code), off (no line attribution)")
    @argument("--no-trace", action="store_true",
              help="same as --trace off: RSS, VmHWM (and CUDA) only, no line attribution, least overhead")
    @argument("--device", type=device_choice, default="auto",
              help="auto (CUDA when torch is imported and has a GPU), cpu, cuda or cuda:N")
    @argument("-l", "--label", help="name of this run in the ledger (default: the cell's first line)")
    @argument("--no-plot", action="store_true", help="text only, no chart")
    @argument("-o", "--output", action="store_true", help="return the MemoryResult")
    @argument("-q", "--quiet", action="store_true", help="display nothing (use with -o)")
    @no_var_expand
    @cell_magic
    @_boundary.user_facing("%%memory")
    def memory(self, line: str, cell: str) -> Any:
        """Memory over one run of the cell: an RSS timeline, true peaks, allocation sites, CUDA memory.

        The cell runs once in the notebook's namespace (its assignments persist). A background thread
        samples RSS every ``--interval``; the kernel's high-water mark (VmHWM) and tracemalloc's peak
        are reset before each top-level statement and read after it, so a peak shorter than the
        sampling interval is still caught and tied to its line. By default the sampler also notes the
        line of your code running at each sample and charges the growth since the previous sample to
        it (cheap, sampled). With tracemalloc (``--trace on``) the blocks still allocated at the end
        are charged exactly to the line that made them, at a cost on allocation-heavy code.
        On CUDA: allocated/reserved memory over time, the peak (max_memory_allocated), and the blocks
        live at the peak from the allocator's history. Shows a text summary and a chart with the peak
        marked (self-contained HTML: allocation sites, statements and every metric folded under it),
        and records the peak and increment in the ledger.
        """
        __tracebackhide__ = True
        from ..profile.memory import run_memory
        from ._template import default_label, with_run_id

        args, _ = _args.parse(self.memory.parser, line)
        code = self.shell.transform_cell(cell)
        fname = _boundary.cell_filename(self.shell, code, cell)
        result, exc = run_memory(code, globals=self.shell.user_ns, filename=fname, interval=args.interval,
                                 top=args.top, trace="off" if args.no_trace else args.trace,
                                 device=args.device)
        status = {"ok": "ok", "interrupted": "interrupted", "error": "failed"}[result.status]
        stopped = isinstance(exc, KeyboardInterrupt)
        return self.conclude(
            result, args, magic="memory", line=line, cell=cell, label=args.label or default_label(cell, self.state),
            status=status, primary_metric="peak_bytes",
            text=lambda run_id: with_run_id(result.text(top=args.top), run_id),
            interrupted="perfmagic: %%memory interrupted; the profile up to there is shown above and recorded"
            if stopped else None, failure=None if stopped else exc)
