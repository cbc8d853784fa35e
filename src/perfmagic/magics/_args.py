"""Option parsing at the magic boundary.

The magics declare their options with IPython's ``@magic_arguments`` (so ``%%gpubench?`` shows them)
and parse with that same parser here, with two additions ``parse_argstring`` lacks:

* the setup code after the options keeps its exact text (quotes, spacing), as in ``%%timeit``;
* an unknown option or bad value becomes a ``UsageError`` that names it and lists the valid options.
"""

from __future__ import annotations

import argparse
import math
import re
from typing import Any

from IPython.core.error import UsageError

_TOKEN = re.compile(r"""(?:[^\s"']+|"[^"]*"|'[^']*')+""")


_QUOTED = re.compile(r"""^(--?[\w-]+=)?(["'])(.*)\2$""", re.S)


def tokens(line: str) -> list[tuple[str, int]]:
    """Whitespace-separated tokens with their start offsets.

    Quotes group words (``-l "my label"``). A token that is one quoted string (optionally after
    ``--opt=``) loses its quotes; quotes *inside* a token are kept, because they belong to a Python
    expression (``--total float('nan')``, ``--items len(df['a'])``).
    """
    out = []
    for m in _TOKEN.finditer(line):
        raw = m.group(0)
        q = _QUOTED.match(raw)
        value = (q.group(1) or "") + q.group(3) if q else raw
        out.append((value, m.start()))
    return out


def option_names(parser: argparse.ArgumentParser) -> list[str]:
    return sorted({s for a in parser._actions for s in a.option_strings if s.startswith("--") or len(s) == 2})


def parse(parser: argparse.ArgumentParser, line: str, *, remainder: str | None = None) -> tuple[argparse.Namespace, str]:
    """Parse ``line``; returns (options, remainder text). ``remainder`` names the REMAINDER positional."""
    toks = tokens(line)
    argv = [t for t, _ in toks]
    try:
        ns = parser.parse_args(argv)
    except UsageError as exc:
        msg = str(exc)
        raise UsageError(f"{msg}\nvalid options: {', '.join(option_names(parser))}  (see %{parser.prog}?)") from None
    rest = ""
    if remainder is not None:
        rem = getattr(ns, remainder) or []
        if rem:
            start = toks[len(toks) - len(rem)][1]
            rest = line[start:].strip()
        setattr(ns, remainder, rest)
    return ns, rest


def duration(what: str, example: str, limit: str | None = None) -> Any:
    """An argparse type for a duration option: ``what`` names it in messages (``the budget``),
    ``limit="budget"`` caps it at the longest measuring budget (24 h)."""

    def parse_one(text: str) -> float:
        import math

        from ..render.units import parse_duration

        try:
            v = parse_duration(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a duration; use seconds or a unit, e.g. 0.5, 500ms, "
                                             "2s, 1m") from None
        if not (v > 0 and math.isfinite(v)):
            raise argparse.ArgumentTypeError(f"{text!r}: {what} must be more than 0 s and finite, e.g. {example}")
        if limit == "budget":
            from ..timing.bench import MAX_BUDGET_S

            if v > MAX_BUDGET_S:
                raise argparse.ArgumentTypeError(f"{text!r}: {what} can be at most 24h ({MAX_BUDGET_S:.0f} s); a "
                                                 f"measurement stops at its precision target long before, e.g. {example}")
        return v

    parse_one.__name__ = what.replace(" ", "_")
    return parse_one


# the measuring budget of every magic; other durations say what they are
positive_duration = duration("the budget", "0.5 or 2s", limit="budget")


def fraction(text: str) -> float:
    t = text.strip()
    try:
        v = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction; use e.g. 0.01 or 1%") from None
    if not 0 < v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be between 0 and 1 (exclusive), e.g. 0.01 or 1%")
    return v


def warmup_count(text: str) -> Any:
    if text == "auto":
        return "auto"
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: use 'auto' or a number of calls >= 0") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: the number of warmup calls cannot be negative")
    return v


def positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return v


def eval_expr(option: str, expr: str | None, user_ns: dict[str, Any]) -> float | None:
    """Evaluate a work expression (``--flops 2*n**3``) in the user's namespace, as a UsageError on failure."""
    if expr is None:
        return None
    try:
        value = eval(compile(expr, f"<{option}>", "eval"), user_ns)
        value = float(value)
    except Exception as exc:
        raise UsageError(f"{option} {expr!r}: {type(exc).__name__}: {exc}. The expression is evaluated in the "
                         f"notebook's namespace: define its names first, or give a number") from None
    if not (value > 0 and math.isfinite(value)):
        raise UsageError(f"{option} {expr!r} evaluated to {value!r}; the work per call must be a positive, finite "
                         "number")
    return value


def run_id(text: str) -> int:
    t = text.strip().lstrip("#")
    try:
        return int(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a run id; run ids are the numbers in %perf's first column, e.g. 12") from None


def perf_run_id(text: str) -> int:
    """A run id typed after a ``%perf`` subcommand (``%perf forget 12``); a bad one is %perf's UsageError."""
    try:
        return run_id(text)
    except argparse.ArgumentTypeError as exc:
        raise UsageError(f"%perf: {exc}") from None


def run_ref(text: str) -> int | str:
    """A run id, or ``baseline`` (the baseline of the cell's label)."""
    if text.strip().lower() == "baseline":
        return "baseline"
    return run_id(text)
