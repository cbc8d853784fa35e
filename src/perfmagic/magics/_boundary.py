"""What the user sees when a magic stops early: one line for Ctrl-C, their own line for a SyntaxError.

IPython shows an exception raised inside a magic with every frame between the cell and the raise,
perfmagic's included. That is right for a bug in perfmagic and wrong for the two ways a *user* ends a
magic on purpose or by a typo:

* **Ctrl-C.** The magic has already shown and recorded what was measured; the traceback through
  ``magics/_bench.py`` only hides that. :class:`Interrupted` renders as one line,
  ``KeyboardInterrupt: perfmagic: … interrupted; …``, and is still a ``KeyboardInterrupt`` (the cell
  fails, a notebook run stops there, ``except KeyboardInterrupt`` catches it).
* **A SyntaxError in the cell.** IPython shows a plain cell's SyntaxError as four lines: the cell, the
  line, the caret, the message. Raised from a magic it would come with the whole stack.
  :class:`CellSyntaxError` renders exactly as IPython renders a plain cell's (its ``SyntaxTB`` with no
  stack). It cannot subclass ``SyntaxError``: IPython routes those to a renderer that prints the stack.

Both use IPython's documented hook for exceptions that render themselves (``_render_traceback_``).
:func:`user_facing` applies them to a magic method, turns a stray ``PerfmagicError`` into a
``UsageError``, and gives an exception of the user's code the user's traceback (perfmagic's frames
between the magic and the cell dropped), so each magic does not repeat the mapping.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any

from IPython.core.error import UsageError

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Interrupted(KeyboardInterrupt):
    """Ctrl-C in a magic, after its partial result was shown (and recorded): rendered as one line."""

    def _render_traceback_(self) -> list[str]:
        return [f"KeyboardInterrupt: {self}"]


class CellSyntaxError(Exception):
    """A SyntaxError in the code of a magic's cell, shown as IPython shows a plain cell's.

    ``error`` is the original ``SyntaxError`` (its file name is the cell's ``In [n]`` name).
    """

    def __init__(self, error: SyntaxError) -> None:
        super().__init__(str(error))
        self.error = error

    def _render_traceback_(self) -> list[str]:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is None:  # pragma: no cover - only IPython calls this hook
            import traceback

            return traceback.format_exception_only(type(self.error), self.error)
        return shell.SyntaxTB.structured_traceback(type(self.error), self.error, [])


def file_labels(shell: Any, fnames: tuple[str, str]) -> dict[str, str]:
    """How a differential profile names the files of this kernel's cells: ``In [3]``, and A's and B's
    cells (``fnames``) as they were re-run."""
    labels = {name: f"In [{n}]" for name, n in getattr(getattr(shell, "compile", None), "_filename_map", {}).items()}
    labels.update({fnames[0]: "cell A", fnames[1]: "cell B"})
    return labels


def cell_filename(shell: Any, code: str, raw: str | None = None) -> str:
    """Register ``code`` with IPython's compiler so tracebacks and line sites read ``In [n]``.

    ``n`` is the number of the cell that called the magic. IPython counts a cell before it runs it, so
    ``shell.execution_count`` is already the *next* number; the number is read from the frame of the
    running cell (its file is in IPython's map) and ``execution_count`` is only the fallback.
    """
    fmap = getattr(getattr(shell, "compile", None), "_filename_map", {}) or {}
    number = None
    f: Any = sys._getframe(1)
    while f is not None and number is None:
        number = fmap.get(f.f_code.co_filename)
        f = f.f_back
    if number is None:
        number = shell.execution_count
    try:
        return shell.compile.cache(code, number, raw_code=raw if raw is not None else code)
    except Exception:  # an unusual shell: fall back to our own name (sources still go to linecache)
        return f"<perfmagic-cell-{shell.execution_count}>"


def without_perfmagic_frames(exc: BaseException) -> BaseException:
    """``exc`` with the traceback entries of perfmagic's own frames dropped from its start, so the
    traceback a user sees for an exception of their code begins at their code."""
    tb = exc.__traceback__
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(_PACKAGE_DIR):
        tb = tb.tb_next
    return exc.with_traceback(tb) if tb is not None else exc


def _has_user_frame(shell: Any, exc: BaseException) -> bool:
    """True when the traceback passes through the user's code: a cell (a name IPython's compiler
    gave out) or code compiled from a string (``<perfmagic-cell>``, ``<string>``)."""
    fmap = getattr(getattr(shell, "compile", None), "_filename_map", {}) or {}
    tb = exc.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if name in fmap or name.startswith("<"):
            return True
        tb = tb.tb_next
    return False


def _from_compiling(shell: Any, exc: SyntaxError) -> bool:
    """True for a SyntaxError perfmagic met compiling the cell; False for one raised while the
    code ran (``exec`` of a bad string), which keeps its stack."""
    return not _has_user_frame(shell, exc)


def _as_cell_syntax_error(shell: Any, exc: SyntaxError, cell: Any) -> CellSyntaxError:
    """The cell's SyntaxError, named after the running cell (``Cell In [n], line k``)."""
    fmap = getattr(getattr(shell, "compile", None), "_filename_map", {}) or {}
    if str(getattr(exc, "filename", "") or "") not in fmap and isinstance(cell, str) and shell is not None:
        try:
            exc.filename = cell_filename(shell, cell)
        except Exception:  # noqa: BLE001 - keep the name it had
            pass
    return CellSyntaxError(exc.with_traceback(None))


def user_facing(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a magic method: a cell's SyntaxError, Ctrl-C and perfmagic's refusals reach the user
    as one clear message, not as a traceback through perfmagic. ``name`` is shown, e.g. ``%%gpubench``."""

    def wrap(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def magic(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True
            from ..errors import PerfmagicError

            try:
                return method(*args, **kwargs)
            except (Interrupted, UsageError, CellSyntaxError):
                raise
            except SyntaxError as exc:
                shell = getattr(args[0], "shell", None) if args else None
                if not _from_compiling(shell, exc):
                    raise
                raise _as_cell_syntax_error(shell, exc, args[2] if len(args) > 2 else None) from None
            except PerfmagicError as exc:
                raise UsageError(f"{name}: {exc}") from None
            except KeyboardInterrupt:
                raise Interrupted(f"perfmagic: {name} interrupted") from None
            except Exception as exc:
                shell = getattr(args[0], "shell", None) if args else None
                if not _has_user_frame(shell, exc):
                    raise  # perfmagic's own fault: the whole stack helps the bug report
                raise without_perfmagic_frames(exc)  # the user's error: their traceback, from their cell

        return magic

    return wrap
