"""``write_guard()``: a ledger run's accepted gain written out as a plain pytest file.

The file rebuilds the measured call from the run's recorded code and setup, with the names that code
reads imported from the user's module (``--module mypkg.ops``), and calls
:func:`perfmagic.guard.check_pair` (A and B interleaved in one process) or
:func:`perfmagic.guard.check_target`. It needs no notebook, no ledger and no IPython: ``python -m
pytest PATH``. It is written to a temporary file beside PATH and moved into place, so an interrupted
write leaves nothing behind; an existing PATH is never overwritten unless ``force``.

The writer gathers what the file holds into a :class:`GuardSpec` (the runs' code and labels, the numbers at
acceptance, the imports); the file's source, a text a person reads as much as pytest runs, is written by
:func:`perfmagic.render.guardfile.source`.
"""

from __future__ import annotations

import math
import os
import pathlib
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, ClassVar

from ..result import Displayed
from .plan import GuardError, Plan, cell, free_names, imports, resolve

MIN_BUDGET_S = 2.0   # a guard takes a few seconds ...
PAIRS_WANTED = 12    # ... or as long as this many pairs of slow calls take
MAX_BUDGET_S = 30.0


@dataclass(frozen=True, repr=False)
class GuardFile(Displayed):
    """A guard written: where, what it checks, and the command that runs it."""

    primary_metric: ClassVar[str] = "budget_s"
    renderer: ClassVar[str] = "guardfile"

    path: str
    kind: str                 # "pair" | "target"
    run_id: int
    baseline_id: int | None
    module: str | None
    names: tuple[str, ...]
    checks: str               # what makes it fail, in one line
    accepted: str             # the evidence at acceptance, in one line
    command: str
    budget_s: float
    min_effect: float
    target_s: float | None = None

    def metrics(self) -> dict[str, Any]:
        return {"kind": self.kind, "run_id": self.run_id, "baseline_id": self.baseline_id,
                "budget_s": self.budget_s, "min_effect": self.min_effect, "target_s": self.target_s}

    def samples(self) -> dict[str, list[Any]]:
        return {}

    def to_dict(self) -> dict[str, Any]:
        return {**self.metrics(), "path": self.path, "module": self.module, "names": list(self.names),
                "checks": self.checks, "accepted": self.accepted, "command": self.command}


def _median(row: dict[str, Any]) -> float:
    from ..core.stats import median
    from ..timing.basis import per_call

    xs = per_call(row)
    return median(xs) if xs else math.nan


def _root(mod: Any, module: str, path: pathlib.Path) -> tuple[str, str] | None:
    """Where the user's working copy of ``module`` lives, for a sys.path line in the guard: ("relative",
    the folder relative to the guard's) or ("absolute", the folder); None when it is installed."""
    f = getattr(mod, "__file__", None)
    if not f:
        return None
    root = pathlib.Path(f).resolve().parent
    for _ in range(module.count(".") + (1 if pathlib.Path(f).name == "__init__.py" else 0)):
        root = root.parent
    if {"site-packages", "dist-packages"} & set(root.parts):
        return None
    try:
        return "relative", os.path.relpath(root, path.resolve().parent).replace(os.sep, "/")
    except ValueError:  # another drive
        return "absolute", str(root)


def _needs(plan: Plan, mod: Any, names: list[str], seen: dict[str, Any]) -> tuple[bool, bool]:
    """(torch needed, CUDA needed) by the run."""
    rows = [r for r in (plan.a, plan.b) if r is not None]
    cuda = any(str((r.get("env") or {}).get("device") or "").startswith("cuda")
               or (r.get("options") or {}).get("device") == "cuda" for r in rows)
    text = "\n".join("\n".join(cell(r)) for r in rows)
    objs = [getattr(mod, n, seen.get(n)) if mod is not None else seen.get(n) for n in names]
    torch = cuda or "torch" in text or any("torch" in (getattr(o, "__module__", None) or getattr(o, "__name__", "")
                                                       if o is not None else "") for o in objs)
    return torch, cuda


def _budget(plan: Plan) -> float:
    per_pair = _median(plan.b) + (_median(plan.a) if plan.a is not None else 0.0)
    if not math.isfinite(per_pair):
        return MIN_BUDGET_S
    return float(min(MAX_BUDGET_S, max(MIN_BUDGET_S, math.ceil(PAIRS_WANTED * 1.3 * per_pair))))


@dataclass(frozen=True)
class GuardSpec:
    """What a guard file holds, gathered from the plan: the runs' code and labels, the numbers at acceptance,
    the names it imports and how it measures. ``render/guardfile.py`` writes the file's text from it."""

    kind: str                       # "pair" | "target"
    run_id: int
    baseline_id: int | None
    label_a: str
    label_b: str
    setup_a: str
    code_a: str
    setup_b: str
    code_b: str
    min_effect: float
    budget_s: float
    target_s: float | None
    target_source: str | None
    hold_gain: bool
    accepted_ratio: float | None    # B/A when the change was accepted (a pair)
    comparison_kind: str | None
    comparison_sentence: str | None
    median_a: float
    median_b: float
    notebook: str | None
    created_utc: Any
    written_utc: datetime
    version: str
    command: str
    regenerate: str
    module: str | None
    root: tuple[str, str] | None    # the sys.path line: ("relative" | "absolute", folder)
    import_lines: tuple[str, ...]
    names: tuple[str, ...]
    torch: bool
    cuda: bool
    work: tuple[float, float] | None  # judged per unit of declared work: (A's, B's) per call ...
    work_unit: str | None             # ... of this unit ...
    work_per: str | None              # ... said "per item"
    device: str
    sync: str
    gc: bool


def _spec(plan: Plan, path: pathlib.Path, shown_path: str, module: str | None, seen: dict[str, Any],
          regenerate: str, hold_gain: bool) -> GuardSpec:
    from .. import __version__

    b, a = plan.b, plan.a
    code_b, setup_b = cell(b)
    code_a, setup_a = cell(a) if a is not None else ("", "")
    names = free_names(setup_a, code_a) + [n for n in free_names(setup_b, code_b)
                                           if n not in free_names(setup_a, code_a)]
    lines_import, mod = imports(names, module, seen)
    torch, cuda = _needs(plan, mod, names, seen)
    opts = b.get("options") or {}
    c = plan.comparison.comparison if plan.kind == "pair" else None
    bs = getattr(plan.comparison, "basis", None) if a is not None else None
    work = bs is not None and bool(bs.unit)
    return GuardSpec(
        plan.kind, int(b["id"]), int(a["id"]) if a is not None else None, str((a or {}).get("label") or "A"),
        str(b.get("label") or "B"), setup_a, code_a, setup_b, code_b, plan.min_effect, _budget(plan),
        plan.target_s, plan.target_source, hold_gain,
        plan.comparison.comparison.ratio if a is not None else None,
        plan.comparison.kind if c is not None else None, c.sentence if c is not None else None,
        _median(a) if a is not None else math.nan, _median(b), b.get("notebook") or None, b.get("created_utc"),
        datetime.now(timezone.utc), __version__,
        f"python -m pytest {shown_path}", regenerate, module,
        _root(mod, module, path) if mod is not None and module else None, tuple(lines_import), tuple(names),
        torch, cuda, (bs.a, bs.b) if work else None, bs.unit if work else None, bs.per if work else None,
        opts.get("device") or "auto", opts.get("sync") or "auto", bool(opts.get("gc", False)))


def render(plan: Plan, path: pathlib.Path, shown_path: str, module: str | None, seen: dict[str, Any],
           regenerate: str, hold_gain: bool = False) -> tuple[str, GuardFile]:
    """The guard file's text (written by :func:`perfmagic.render.guardfile.source`), and the GuardFile
    describing it."""
    from ..render import guardfile

    s = _spec(plan, path, shown_path, module, seen, regenerate, hold_gain)
    text = guardfile.source(s)
    compile(text, str(path), "exec")  # never write a file that does not parse
    gf = GuardFile(shown_path, s.kind, s.run_id, s.baseline_id, module, s.names, guardfile.checks(s),
                   guardfile.accepted(s), s.command, s.budget_s, s.min_effect, s.target_s)
    return text, gf


def atomic_write(path: pathlib.Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path``, then move it into place: an interrupted
    write (Ctrl-C, a full disk) leaves neither a half-written guard nor the temporary file.

    The temporary file gets an unpredictable name and is created exclusively (``O_EXCL``: a file or
    symlink planted at that name makes it fail, never write through it); ``os.replace`` then renames
    it over ``path``, which replaces a symlink at ``path`` rather than writing to its target."""
    import tempfile

    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = pathlib.Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise


def write_guard(run: Any, path: str | os.PathLike, *, module: str | None = None, ledger: Any = None,
                min_effect: float = 0.10, target: float | None = None, force: bool = False,
                namespace: dict[str, Any] | None = None, regenerate: str | None = None,
                hold_gain: bool = False) -> GuardFile:
    """Write a pytest file at ``path`` that fails when run ``run``'s accepted gain is lost.

    ``run``: a run id (read from ``ledger``, default this notebook's), a ledger row, or a
    :class:`~perfmagic.RunComparison`. ``module``: the importable module that provides the names the
    run's code reads. ``target``: seconds per call the run must stay within (besides, or instead of,
    an accepted comparison). ``namespace``: what those names were bound to when the run was measured
    (the notebook's), to refuse functions defined in a notebook cell. ``hold_gain``: the file also
    fails when the gain shrinks by more than ``min_effect`` from the one accepted (HOLD_GAIN in it).
    Raises :class:`GuardError` naming the fix when the guard cannot be written as asked."""
    if not (0 < min_effect < 1):
        raise GuardError(f"min_effect must be a fraction between 0 and 1 (e.g. 0.1 for 10%), got {min_effect!r}")
    if target is not None and not (isinstance(target, (int, float)) and math.isfinite(target) and target > 0):
        raise GuardError(f"target must be a time per call in seconds, more than 0 (e.g. 0.005), got {target!r}")
    p = pathlib.Path(path)
    if p.suffix != ".py":
        raise GuardError(f"the guard's PATH must end in .py, got {str(path)!r}; e.g. tests/test_guard_fast.py")
    if p.is_dir():
        raise GuardError(f"{str(path)!r} is a folder; give the PATH of a file ending in .py inside it, e.g. "
                         f"{str(p / 'test_guard_fast.py')!r}")
    if (p.exists() or p.is_symlink()) and not force:
        raise GuardError(f"{str(path)!r} exists; give another PATH, or replace it with --force")
    if not p.parent.is_dir():
        raise GuardError(f"the folder {str(p.parent)!r} does not exist; create it, or give a PATH in an existing "
                         "folder")
    plan = resolve(run, ledger, min_effect=min_effect, target=target)
    regen = regenerate or (f"%perf guard {plan.b['id']} {path}" + (f" --module {module}" if module else "")
                           + (f" --target {target}s" if target is not None else "") + " --force")
    text, gf = render(plan, p, str(path), module, namespace or {}, regen, hold_gain)
    try:
        atomic_write(p, text)
    except OSError as exc:  # a read-only folder, /proc, a full disk: one line, not a traceback
        raise GuardError(f"cannot write {str(path)!r} ({exc.strerror or type(exc).__name__}); give a PATH in a "
                         "folder you can write to, e.g. tests/test_guard_fast.py in your project") from None
    return gf


__all__ = ["GuardFile", "GuardSpec", "GuardError", "write_guard", "atomic_write", "render"]
