"""``%%roofline``: where the cell sits against this machine's measured compute and bandwidth roofs.

``%roofline`` alone shows the device's ceilings (measured on first use, then cached per machine);
``%roofline --calibrate`` re-measures them with a progress bar. The cell form is a thin front end over
:func:`perfmagic.roofline`; earlier roofline runs of this notebook are drawn on the chart.
"""

from __future__ import annotations

import argparse
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import line_cell_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments

from . import _args, _boundary
from ._template import MagicTemplate
from ._progress import progress_bar


@magics_class
class RooflineMagics(MagicTemplate):

    @magic_arguments()
    @argument("-l", "--label", help="name of this point on the chart and in the ledger (default: the cell's first line)")
    @argument("--flops", metavar="EXPR", help="FLOPs per call (Python expression, e.g. 2*n**3); default: counted from torch ops")
    @argument("--bytes", metavar="EXPR", dest="nbytes",
              help="bytes moved per call (Python expression); default: counted from torch ops (algorithmic traffic)")
    @argument("--dtype", help="which compute roof applies: float32, float64, bfloat16, float16, tf32, fp8 "
                              "(default: the dominant dtype of the counted ops)")
    @argument("-d", "--device", default="auto", help="auto, cpu, cuda, cuda:N (default auto)")
    @argument("-b", "--budget", type=_args.positive_duration, default=None, help="timing budget, as for %%gpubench")
    @argument("--calibrate", action="store_true", help="re-measure this machine's roofs first (about 10 s on a CPU)")
    @argument("--no-plot", action="store_true", help="text only, no chart")
    @argument("-o", "--output", action="store_true", help="return the RooflineResult (or the Ceilings)")
    @argument("-q", "--quiet", action="store_true", help="display nothing (use with -o)")
    @argument("setup", nargs=argparse.REMAINDER, help="setup code, run once before timing (as in %%%%timeit)")
    @no_var_expand
    @line_cell_magic
    @_boundary.user_facing("%%roofline")
    def roofline(self, line: str, cell: str | None = None) -> Any:
        """Is the cell compute-bound or bandwidth-bound, on this machine's measured roofs?

        Times the cell through the perfmagic engine (warmup, sync), counts its FLOPs (torch's
        FlopCounterMode) and bytes (the input and output tensors of every op: algorithmic traffic, a
        lower bound on DRAM traffic), and places it under the roofs measured on this machine. Without
        torch ops give --flops and --bytes. ``%roofline`` alone shows the roofs; ``--calibrate``
        re-measures them.
        """
        __tracebackhide__ = True
        from ..errors import BenchInterrupted

        args, setup = _args.parse(self.roofline.parser, line, remainder="setup")
        try:
            # the roofs follow the device the cell ran on: with --device auto they are fetched after timing
            roofs = self._ceilings(args) if cell is None or args.device != "auto" else None
            if cell is None:
                if setup:
                    raise UsageError(f"%roofline takes no code on the line ({setup!r}); use the cell form %%roofline")
                from ._template import finish

                return finish(self.shell, roofs, args)
            return self._cell(args, line, setup, cell, roofs)
        except BenchInterrupted:
            raise _boundary.Interrupted("perfmagic: %%roofline interrupted before a sample was timed; nothing "
                                        "recorded") from None

    def _ceilings(self, args: argparse.Namespace) -> Any:
        from ..roofs.ceilings import ceilings
        from ..timing.bench import resolve_device

        dev, _ = resolve_device(args.device)
        bar, close = progress_bar(100, "measuring the roofs")

        def update(frac: float, msg: str) -> None:  # ceilings() reports a fraction
            bar(round(100 * frac), msg)

        try:
            return ceilings(dev if dev.startswith("cuda") else "cpu", recalibrate=args.calibrate, progress=update)
        except KeyboardInterrupt:
            raise _boundary.Interrupted("perfmagic: calibration interrupted; the cache was left as it was") from None
        finally:
            close()

    def _cell(self, args: argparse.Namespace, line: str, setup: str, cell: str, roofs: Any) -> Any:
        __tracebackhide__ = True
        from ..core.env import fingerprint
        from ..errors import BenchInterrupted
        from ..roofs.roofline import roofline
        from ._template import default_label

        ns = self.shell.user_ns
        flops = _args.eval_expr("--flops", args.flops, ns)
        nbytes = _args.eval_expr("--bytes", args.nbytes, ns)
        label = args.label or default_label(cell, self.state)
        filename = _boundary.cell_filename(self.shell, cell)
        from ..core.cells import register_source

        register_source(cell, filename)
        status = "ok"
        bar: list[Any] = []

        def update(frac: float, msg: str) -> None:  # a calibration after timing (first use of a device)
            if not bar:
                bar.extend(progress_bar(100, "measuring the roofs"))
            bar[0](round(100 * frac), msg)

        try:
            r = roofline(cell, setup, globals=ns, flops=flops, bytes=nbytes, device=args.device, dtype=args.dtype,
                         budget=args.budget, ceilings=roofs, label=label, filename=filename, progress=update)
        except BenchInterrupted as exc:
            if exc.result is None:
                raise
            r, status = exc.result, "interrupted"
        except KeyboardInterrupt:
            raise _boundary.Interrupted("perfmagic: calibration interrupted; the cache was left as it was") from None
        finally:
            if bar:
                bar[1]()
        options = {k: v for k, v in vars(args).items() if k != "setup"}
        options["setup"] = setup
        from ..render.bundle import NO_FIGURE, bundle_of
        from ._template import with_run_id

        def bundle(run_id: int | None) -> dict[str, Any]:
            text = with_run_id(r.text(), run_id)
            png = None
            if not args.no_plot:  # earlier roofline points of this notebook drawn beside this one
                history = [dict(h, label=f"#{h['id']} {h['label']}") for h in self._history(run_id)]
                try:
                    png = r.figure_png(history=history)
                except ImportError:
                    text += "\n  " + NO_FIGURE
            return bundle_of(text, png, r.figure_alt, r.html_sections())

        return self.conclude(
            r, args, magic="roofline", line=line, cell=cell, label=label, status=status, options=options,
            env=r.bench.env, env_hash=fingerprint(r.bench.env) if r.bench.env else None, bundle=bundle,
            interrupted="perfmagic: %%roofline interrupted; the point from the samples timed so far is shown above "
            "and recorded as interrupted" if status == "interrupted" else None)

    def _history(self, run_id: int | None) -> list[dict[str, Any]]:
        """Earlier roofline points of this notebook for the chart; none (and one line) when the ledger
        cannot be read."""
        import sys

        from ..storage.ledger import LedgerError
        from ..storage.session import current_ledger

        led = current_ledger(self.shell.user_ns)
        try:
            rows = led.rows(magic="roofline", newest_first=False)
        except LedgerError as exc:
            print(f"perfmagic: earlier runs unavailable: {str(exc).rstrip('.')}. The chart shows this session's "
                  "unsaved runs only.", file=sys.stderr)
            rows = [r for r in led.pending if r.get("magic") == "roofline"]
        return [row for row in rows if row["id"] != run_id and "intensity" in (row.get("metrics") or {})][-8:]
