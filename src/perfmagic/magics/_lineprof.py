"""``%%lineprof -f FUNC``: line-by-line time of functions (notebook cells included), shown in the output."""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import cell_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments

from . import _args, _boundary
from ._template import MagicTemplate


@magics_class
class LineProfMagics(MagicTemplate):

    def _function(self, expr: str) -> Any:
        try:
            return eval(compile(expr, "<-f>", "eval"), self.shell.user_ns)
        except Exception as exc:
            raise UsageError(f"%%lineprof -f {expr}: {type(exc).__name__}: {exc}. FUNC is an expression evaluated in "
                             "the notebook's namespace (e.g. f, model.forward, mod.func): define it first") from None

    @magic_arguments()
    @argument("-f", "--function", dest="functions", action="append", default=[], metavar="FUNC",
              help="function to profile, an expression in the notebook's namespace (f, obj.method, mod.func, "
                   "a class); repeat for several")
    @argument("--top", type=_args.positive_int, default=5, metavar="N", help="hottest lines to list (default 5)")
    @argument("-l", "--label", help="name of this run in the ledger (default: the cell's first line)")
    @argument("-o", "--output", action="store_true", help="return the LineProfResult")
    @argument("-q", "--quiet", action="store_true", help="display nothing (use with -o)")
    @no_var_expand
    @cell_magic
    @_boundary.user_facing("%%lineprof")
    def lineprof(self, line: str, cell: str) -> Any:
        """Time every line of the functions given with -f while the cell runs once (line_profiler).

        ``%%lineprof -f slow -f Model.forward`` runs the cell in the notebook's namespace and shows,
        for each function, hits, time, time per hit and share of the function's time per line, the
        hottest lines marked, in the cell's output (text, and HTML tables shaded by each line's share,
        folded under it; never the pager).
        Functions defined in notebook cells show as ``In [n]`` with their own source. Methods,
        static/class methods, properties, partials and decorated functions are unwrapped to the
        Python function inside; a class profiles all its methods. Records the hottest line in the ledger.
        """
        __tracebackhide__ = True
        from ..profile.lineprof import run_lineprof
        from ._template import default_label, with_run_id

        args, _ = _args.parse(self.lineprof.parser, line)
        if not args.functions:
            raise UsageError("%%lineprof needs at least one function to profile: -f FUNC, e.g. %%lineprof -f slow")
        funcs = [self._function(expr) for expr in args.functions]
        code = self.shell.transform_cell(cell)
        fname = _boundary.cell_filename(self.shell, code, cell)
        result, exc = run_lineprof(code, funcs, names=args.functions, globals=self.shell.user_ns,
                                   filename=fname, top=args.top)
        status = {"ok": "ok", "interrupted": "interrupted", "error": "failed"}[result.status]
        from ..render.bundle import mimebundle

        stopped = isinstance(exc, KeyboardInterrupt)
        return self.conclude(
            result, args, magic="lineprof", line=line, cell=cell, label=args.label or default_label(cell, self.state),
            status=status, primary_metric="total_s",
            bundle=lambda run_id: mimebundle(result, text=with_run_id(result.text(), run_id), plot=False),
            interrupted="perfmagic: %%lineprof interrupted; the lines timed up to there are shown above and "
            "recorded" if stopped else None, failure=None if stopped else exc)
