"""What a guard checks: the accepted comparison (or the target) a ledger run stands for, and the names
its code reads, each traced to the module that must provide it.

An *accepted comparison* is a pair of ``%%gpubench`` runs, A (the baseline) and B (the change), whose
verdict is "faster" at the minimum effect:

1. B measured interleaved with A (``%%gpubench --vs A`` or a re-measuring ``%perf compare``: B's
   row has ``interleaved_with`` = A's re-measured row) — the pair's own paired samples are judged;
2. RUN is the A side of such a pair — the newest B measured with it is taken;
3. otherwise B's label has a baseline (``%perf baseline``) other than B — the historical comparison
   of the two rows (with this machine's between-run noise) is judged.

A run that is no accepted comparison can still be guarded against a target (seconds per call): the
``target`` given, or the label's target kept by ``%perf target`` (``Ledger.target``).
"""

from __future__ import annotations

import builtins
import symtable
import types
from dataclasses import dataclass, field
from typing import Any

from ..record import relation

from ..errors import PerfmagicError


class GuardError(PerfmagicError):
    """A guard that cannot be written as asked; the message names the fix."""


@dataclass
class Plan:
    """Everything the guard file is rendered from."""

    b: dict[str, Any]                      # the guarded run (the change)
    a: dict[str, Any] | None = None        # the baseline run of an accepted comparison
    comparison: Any = None                 # RunComparison of A and B, when there is a pair
    target_s: float | None = None
    target_source: str = ""  # "given", "ledger" (the label's target there), or the words to show
    min_effect: float = 0.10
    names: list[str] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return "pair" if self.a is not None else "target"


def cell(row: dict[str, Any]) -> tuple[str, str]:
    """A ``%%gpubench`` row's (cell body, setup); ``code`` holds the body only (the ledger splits the magic
    line off older rows on read)."""
    return (row.get("code") or "").strip("\n"), str((row.get("options") or {}).get("setup") or "")


def _as_row(run: Any, ledger: Any) -> dict[str, Any]:
    if isinstance(run, dict):
        return run
    if hasattr(run, "a") and hasattr(run, "b") and isinstance(getattr(run, "b"), dict):  # a RunComparison
        return run.b
    if isinstance(run, bool) or not isinstance(run, int):
        raise GuardError(f"RUN must be a run id (an int), a ledger row or a comparison, got {run!r}")
    return ledger.get(run)


def ledger_target(ledger: Any, row: dict[str, Any]) -> float | None:
    """The label's target (seconds per call) that ``%perf target`` kept in the ledger, else None."""
    getter = getattr(ledger, "target", None)
    if not callable(getter):
        return None
    try:
        value = getter(row.get("label"))
    except Exception:  # noqa: BLE001 - an unreadable targets table: no target, the refusal says what to do
        return None
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def _pair_of(led: Any, row: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """The baseline row A of B = ``row`` (or, when ``row`` is an A side, the B it was measured with)."""
    from ..storage.codec import rerun_of

    a_id = relation(row, "interleaved_with")
    if a_id is not None:
        return led.get(int(a_id)), "interleaved"
    partners = [r for r in led.rows() if relation(r, "interleaved_with") == row["id"]]
    if partners:
        return row, "a-side"
    base = led.baseline(row["label"]) if row.get("label") else None
    if base is not None and base != row["id"] and rerun_of(row) is None:
        return led.get(base), "baseline"
    return None, ""


def resolve(run: Any, ledger: Any, *, min_effect: float, target: float | None) -> Plan:
    """The plan for RUN: its accepted comparison, or its target (GuardError says why neither)."""
    from ..timing.history import CompareError, compare

    if ledger is None:
        from ..storage.session import current_ledger

        ledger = current_ledger()
    row = _as_row(run, ledger)
    rid = row.get("id")
    if row.get("magic") != "gpubench":
        raise GuardError(f"run #{rid} is a %%{row.get('magic')} run; a guard re-measures %%gpubench runs: "
                         "guard the %%gpubench comparison of the change (%perf lists the runs)")
    if row.get("status") != "ok":
        raise GuardError(f"run #{rid} is {row.get('status')}; guard a run that finished")
    plan = Plan(b=row, min_effect=min_effect)
    a, how = _pair_of(ledger, row)
    if how == "a-side":  # RUN was the baseline side: guard the newest change measured against it
        b = max((r for r in ledger.rows() if relation(r, "interleaved_with") == rid),
                key=lambda r: r["id"])
        plan.b, a = b, row
    why_not: tuple[str, Any] = ("", None) if a is not None else ("alone", row.get("label"))
    if a is not None:
        try:
            rc = compare(a, plan.b, min_effect=min_effect, ledger=ledger)
        except CompareError as exc:
            rc, why_not = None, ("error", str(exc))
        if rc is not None and rc.verdict == "faster":
            if cell(a) == cell(plan.b):
                why_not = ("same code", a["id"])
            else:
                plan.a, plan.comparison = a, rc
        elif rc is not None:
            why_not = ("verdict", (a["id"], rc.comparison.sentence))
    if target is not None:
        plan.target_s, plan.target_source = float(target), "given"
    elif plan.a is None:
        t = ledger_target(ledger, plan.b)
        if t is not None:
            plan.target_s, plan.target_source = t, "ledger"
    if plan.a is None and plan.target_s is None:
        why, x = why_not
        raise GuardError(
            f"run #{rid} is not an accepted comparison"
            + (f" (it was measured alone: no %%gpubench --vs pair, and its label '{x}' has no other baseline)"
               if why == "alone" else
               f" (A #{x} and B #{plan.b['id']} run the same code and setup: the change was inside a function, "
               "whose earlier version the module no longer holds, so the guard cannot rebuild A)"
               if why == "same code" else f" (B #{plan.b['id']} vs A #{x[0]}: {x[1]})" if why == "verdict"
               else f" ({x})" if why == "error" else "")
            + " and has no target. Guard a change that perfmagic accepted (run the change with %%gpubench --vs A, "
            "or mark A with %perf baseline A), or give a time per call it must stay within: --target 5ms (or "
            "%perf target LABEL 5ms)")
    return plan


# ---- the names the code reads ----------------------------------------------------------------

def free_names(*sources: str) -> list[str]:
    """Names the sources read and do not assign themselves (builtins left out), in first-read order."""
    read: dict[str, None] = {}
    assigned: set[str] = set()

    def walk(t: Any, top: bool) -> None:
        for s in t.get_symbols():
            n = s.get_name()
            if top:
                if s.is_assigned() or s.is_imported():
                    assigned.add(n)
                if s.is_referenced():
                    read.setdefault(n)
            elif s.is_global() and s.is_referenced():
                read.setdefault(n)
        for child in t.get_children():
            walk(child, False)

    for src in sources:
        if not src.strip():
            continue
        try:
            walk(symtable.symtable(src, "<guard>", "exec"), True)
        except SyntaxError as exc:
            raise GuardError(f"the run's code is not plain Python ({exc.msg}, line {exc.lineno}); a guard runs "
                             "outside IPython: measure plain Python code") from None
    return [n for n in read if n not in assigned and not hasattr(builtins, n)]


def _defined_inline(obj: Any) -> bool:
    mod = getattr(obj, "__module__", None)
    return isinstance(obj, (types.FunctionType, type)) and mod in ("__main__", None) or (
        isinstance(obj, types.FunctionType) and obj.__code__.co_filename.startswith("<ipython-input"))


def imports(names: list[str], module: str | None, seen: dict[str, Any]) -> tuple[list[str], Any]:
    """Import lines that provide ``names`` from ``module`` (modules by their own name): ``(lines, the
    imported module)``. ``seen``: what the names were bound to when the run was measured (its captures,
    else the notebook now), to refuse functions defined in the notebook."""
    import importlib

    inline = [n for n in names if n in seen and _defined_inline(seen[n])]
    if inline:
        where = f" (e.g. {module})" if module else " (e.g. mypkg/ops.py)"
        raise GuardError(f"the run calls {', '.join(inline)}, defined in a notebook cell; a guard runs outside "
                         f"the notebook: move {'them' if len(inline) > 1 else 'it'} to a module{where}, import "
                         "it in the notebook, measure again, and pass --module")
    mod = None
    if module is not None:
        try:
            mod = importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - any import failure is the user's to fix
            raise GuardError(f"cannot import --module {module!r} ({type(exc).__name__}: {exc}); give the dotted "
                             "name of an importable module, e.g. --module mypkg.ops (its folder on sys.path)") from None
    lines: list[str] = []
    from_mod: list[str] = []
    missing = []
    for n in names:
        obj = getattr(mod, n, None) if mod is not None and hasattr(mod, n) else seen.get(n)
        if isinstance(obj, types.ModuleType):
            real = obj.__name__
            lines.append(f"import {real}" if real == n else f"import {real} as {n}")
        elif mod is not None and hasattr(mod, n):
            from_mod.append(n)
        else:
            missing.append(n)
    if missing:
        if module is None:
            raise GuardError(f"the run's code reads {', '.join(missing)} from the notebook; pass --module M naming "
                             "the importable module that provides them, e.g. --module mypkg.ops")
        raise GuardError(f"module {module!r} does not provide {', '.join(missing)}, which the run's code reads; "
                         f"define {'them' if len(missing) > 1 else 'it'} in {module} (data too, or build it in "
                         "the run's setup), or pass the --module that does")
    if from_mod:
        lines.append(f"from {module} import {', '.join(from_mod)}")
    return lines, mod


__all__ = ["GuardError", "Plan", "resolve", "free_names", "imports", "ledger_target", "cell"]
