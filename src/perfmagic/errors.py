"""Exceptions raised by perfmagic's engines.

The hierarchy::

    PerfmagicError                 anything perfmagic itself refuses or cannot do
    ├── BadOptionError (ValueError) a bad argument: names the value, the valid choices, the fix
    └── SetupError                  the setup code given to a measurement raised
    BenchInterrupted (KeyboardInterrupt)
                                    Ctrl-C during a measurement; ``.result`` holds what was measured

Exceptions raised by the *user's* code propagate unchanged: perfmagic never wraps them, so the
traceback the user sees ends in their own line. The IPython magics turn ``PerfmagicError`` into
``UsageError`` at the magic boundary; engines never import IPython.
"""

from __future__ import annotations

from typing import Any


class PerfmagicError(Exception):
    """Base class for errors perfmagic raises about its own input or state."""


class BadOptionError(PerfmagicError, ValueError):
    """An argument has a value perfmagic cannot use.

    The message names the option, the value received, the valid choices and the fix.
    """

    def __init__(self, option: str, value: Any, expected: str, fix: str | None = None) -> None:
        self.option = option
        self.value = value
        self.expected = expected
        msg = f"{option}: got {value!r}; expected {expected}"
        if fix:
            msg += f". {fix}"
        super().__init__(msg)


class SetupError(PerfmagicError):
    """The setup code raised; ``__cause__`` is the original exception."""


class BenchInterrupted(KeyboardInterrupt):
    """Ctrl-C during a measurement. ``result`` is the partial result (or None if nothing was measured)."""

    def __init__(self, result: Any = None) -> None:
        super().__init__("measurement interrupted")
        self.result = result
