"""``%perf guard RUN PATH [--module M] [--target T] [--force]``: the front end of :mod:`perfmagic.guard`.

Parses RUN and PATH, hands the engine what the notebook knows that a script would not (the functions
the runs called when they were measured, to refuse ones defined in a cell) and shows the GuardFile.
"""

from __future__ import annotations

from typing import Any

from ..record import relation

from IPython.core.error import UsageError

USAGE = "%perf guard RUN PATH --module M [--target T] [--force], e.g. %perf guard 12 tests/test_guard_fast.py " \
        "--module mypkg.ops"


def _target(text: str | None) -> float | None:
    if text is None:
        return None
    from ..render.units import parse_duration

    try:
        v = parse_duration(text)
    except ValueError:
        v = None
    if v is None or not v > 0:
        raise UsageError(f"%perf guard: --target {text!r} is not a time per call; use seconds or a unit, "
                         "e.g. --target 5ms or --target 0.005")
    return v


def perf_guard(magics: Any, led: Any, t: list[str], args: Any, notebook: Any) -> Any:
    from ..guard import GuardError, write_guard
    from ._args import perf_run_id
    from ._template import display_bundle

    if len(t) != 2:
        got = f"got {' '.join(t)!r}" if t else "got nothing"
        raise UsageError(f"%perf guard needs a RUN id and a PATH ({got}). Usage: {USAGE}")
    rid, path = perf_run_id(t[0]), t[1]
    row = led.get(rid)  # unknown: the LedgerError becomes %perf's UsageError listing the known ids
    caps = magics.state.get("captures", {})
    ns = magics.shell.user_ns
    ids = {rid, relation(row, "interleaved_with")}
    ids |= {r["id"] for r in led.rows() if relation(r, "interleaved_with") == rid}
    ids.add(led.baseline(row["label"]) if row.get("label") else None)
    seen = {k: v for k, v in ns.items() if not k.startswith("_")}
    for i in ids:  # what the runs called when they were measured wins over what the names hold now
        if i in caps:
            seen.update(caps[i].callables)
    line = f"%perf guard {rid} {path}" + (f" --module {args.module}" if args.module else "") + (
        f" --target {args.target}" if args.target else "") + " --force"
    try:
        gf = write_guard(rid, path, module=args.module, ledger=led, min_effect=args.min_effect,
                         target=_target(args.target), force=bool(getattr(args, "force", False)), namespace=seen,
                         regenerate=line)
    except GuardError as exc:
        raise UsageError(f"%perf guard: {exc}") from None
    display_bundle(gf._repr_mimebundle_())
    return None
