"""``write_guard()``: a ledger run's accepted gain written out as a plain pytest file.

The file rebuilds the measured call from the run's recorded code and setup, with the names that code
reads imported from the user's module (``--module mypkg.ops``), and calls
:func:`perfmagic.guard.check_pair` (A and B interleaved in one process) or
:func:`perfmagic.guard.check_target`. It needs no notebook, no ledger and no IPython: ``python -m
pytest PATH``. It is written to a temporary file beside PATH and moved into place, so an interrupted
write leaves nothing behind; an existing PATH is never overwritten unless ``force``.
"""

from __future__ import annotations

import math
import os
import pathlib
import re
import textwrap
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


def _literal(text: str) -> str:
    """A readable Python literal for code: triple-quoted when that is exact (printable characters and
    newlines only: a carriage return in source would be read back as a newline), else repr."""
    if (text and "\n" in text and '"""' not in text and "\\" not in text and not text.endswith('"')
            and all(c == "\n" or c.isprintable() for c in text)):
        return '"""\\\n' + text + '\\\n"""'  # the backslashes: no newline added at either end
    return repr(text)


def _safe(text: Any) -> str:
    """Text from the ledger (a label, a path, a notebook name) for the docstring or a ``#`` comment: one
    line of printable characters, no backslash, no triple quote. A newline or carriage return in a label
    would otherwise end a comment and make the rest of it code."""
    one = "".join(c if c.isprintable() else " " for c in str(text))
    return one.replace("\\", "/").replace('"""', "'''")


def _slug(label: str) -> str:
    """An ASCII identifier fragment from a label (a label's '²' or '①' is no identifier character)."""
    return re.sub(r"[^a-z0-9]+", "_", label.lower(), flags=re.ASCII).strip("_")[:40] or "run"


def _median(row: dict[str, Any]) -> float:
    from ..core.stats import median
    from ..timing.basis import per_call

    xs = per_call(row)
    return median(xs) if xs else math.nan


def _root_line(mod: Any, module: str, path: pathlib.Path) -> list[str]:
    """A sys.path line so the guard imports the user's working copy of ``module`` (none when installed)."""
    f = getattr(mod, "__file__", None)
    if not f:
        return []
    root = pathlib.Path(f).resolve().parent
    for _ in range(module.count(".") + (1 if pathlib.Path(f).name == "__init__.py" else 0)):
        root = root.parent
    if {"site-packages", "dist-packages"} & set(root.parts):
        return []
    try:
        rel = os.path.relpath(root, path.resolve().parent)
        where = f'pathlib.Path(__file__).resolve().parent / {rel.replace(os.sep, "/")!r}'
    except ValueError:  # another drive
        where = f"pathlib.Path({str(root)!r})"
    return [f"_ROOT = {where}  # the folder that holds {_safe(module.split('.')[0])}",
            "if str(_ROOT.resolve()) not in sys.path:",
            "    sys.path.insert(0, str(_ROOT.resolve()))"]


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


def render(plan: Plan, path: pathlib.Path, shown_path: str, module: str | None, seen: dict[str, Any],
           regenerate: str, hold_gain: bool = False) -> tuple[str, GuardFile]:
    """The guard file's text, and the GuardFile describing it."""
    from .. import __version__
    from ..render.units import fmt_time

    b, a = plan.b, plan.a
    code_b, setup_b = cell(b)
    code_a, setup_a = cell(a) if a is not None else ("", "")
    names = free_names(setup_a, code_a) + [n for n in free_names(setup_b, code_b)
                                           if n not in free_names(setup_a, code_a)]
    lines_import, mod = imports(names, module, seen)
    torch, cuda = _needs(plan, mod, names, seen)
    budget = _budget(plan)
    m = plan.min_effect
    label_b, label_a = str(b.get("label") or "B"), str((a or {}).get("label") or "A")
    opts = b.get("options") or {}
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    command = f"python -m pytest {shown_path}"
    if plan.kind == "pair":
        c = plan.comparison.comparison
        title = f"run #{b['id']} '{label_b}' must stay faster than run #{a['id']} '{label_a}'"
        checks = f"B #{b['id']} '{label_b}' is no longer faster than A #{a['id']} '{label_a}' by at least {m:.0%}"
        if hold_gain:
            checks += (f", or B/A rises above {plan.comparison.comparison.ratio * (1 + m):.3g} (the accepted gain "
                       f"less {m:.0%})")
        accepted = (f"{plan.comparison.kind}: {c.sentence}; A {fmt_time(_median(a))} → B {fmt_time(_median(b))} "
                    "median")
        how = (f"re-measures A's and B's code interleaved in one process (perfmagic.bench_pair, about\n"
               f"{budget:.0f} s) and fails when B is no longer faster than A by at least {m:.0%}: the accepted "
               "gain lost")
    else:
        title = f"run #{b['id']} '{label_b}' must stay within {fmt_time(plan.target_s)} per call"
        checks = (f"'{label_b}' takes more than {fmt_time(plan.target_s)} + {m:.0%} per call (95% CI above it)")
        accepted = (f"target {fmt_time(plan.target_s)} ({plan.target_source}); measured then "
                    f"{fmt_time(_median(b))} median")
        how = (f"measures the run's code alone (perfmagic.bench, about {budget:.0f} s) and fails when its\n"
               f"median is above the target by more than {m:.0%}")
    where = f"notebook {_safe(b['notebook'])}" if b.get("notebook") else "no notebook (a script's ledger)"
    if a is not None and plan.target_s is not None:
        checks += f"; or '{label_b}' takes more than {fmt_time(plan.target_s)} + {m:.0%} per call"
        how += f", or when B's median is above the target {fmt_time(plan.target_s)} by more than {m:.0%}"
    paras = [f"Guards {where}, run #{b['id']} of {_safe(b.get('created_utc'))}"
             + (f" (A: run #{a['id']})" if a is not None else "") + f"; written {when} by perfmagic {__version__}. "
             f"Accepted then, {_safe(accepted)}.",
             f"This test {how}. On failure it prints perfmagic's verdict."]
    doc = [f'"""perfmagic regression guard: {_safe(title)}.', ""]
    for para in paras:
        doc += textwrap.wrap(para.replace("\n", " "), 100, break_on_hyphens=False) + [""]
    doc += [f"Run it:        {_safe(command)}",
            f"Regenerate it: {_safe(regenerate)}   (in the notebook)", '"""', "",
            "from __future__ import annotations", "", "import pathlib", "import sys", "", "import pytest", ""]
    body = _root_line(mod, module, path) if mod is not None else []
    if torch:
        body += [f'torch = pytest.importorskip("torch", reason="run #{b["id"]} used torch, which is not installed '
                 'here")']
    if cuda:
        body += ["pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),",
                 f'                                reason="run #{b["id"]} was measured on CUDA and this machine has '
                 'no CUDA device")']
    used = (["check_pair"] if a is not None else []) + (["check_target"] if plan.target_s is not None else [])
    body += ["", f"from perfmagic.guard import {', '.join(used)}, report  # noqa: E402"]
    body += [f"{ln}  # noqa: E402" for ln in lines_import]
    body += ["", "NAMES = {" + ", ".join(f"{n!r}: {n}" for n in names) + "}  # what the run's code reads"]
    if a is not None:
        body += [f"A_LABEL, A_SETUP, A_CODE = {label_a!r}, {_literal(setup_a)}, {_literal(code_a)}"]
    body += [f"B_LABEL, B_SETUP, B_CODE = {label_b!r}, {_literal(setup_b)}, {_literal(code_b)}",
             f"MIN_EFFECT = {m!r}  # the bar: {'B faster than A' if a is not None else 'over the target'} "
             f"by at least this much",
             f"BUDGET_S = {budget!r}  # measuring time; an interval on the bar is measured once more with twice it"]
    if plan.target_s is not None:
        body += [f"TARGET_S = {plan.target_s!r}  # seconds per call ({_safe(plan.target_source)})"]
    if a is not None:
        bs = getattr(plan.comparison, "basis", None)
        per = f" {_safe(bs.per)}" if bs is not None and bs.unit else ""
        body += [f"ACCEPTED_RATIO = {plan.comparison.comparison.ratio!r}  # B/A{per} when the change was accepted",
                 f"HOLD_GAIN = {hold_gain!r}  # True: also fail when B/A > ACCEPTED_RATIO × (1 + MIN_EFFECT)"]
        if per:  # judged per unit of declared work (--items): the guard judges the same way
            body += [f"WORK = ({bs.a!r}, {bs.b!r})  # {_safe(bs.unit)} per call of A and of B: B/A is judged{per}"]
    kw = (f"device={opts.get('device') or 'auto'!r}, sync={opts.get('sync') or 'auto'!r}, "
          f"gc={bool(opts.get('gc', False))!r}")
    slug = _slug(label_b)
    if a is not None:
        body += ["", "", f"def test_run_{b['id']}_{slug}_keeps_its_gain() -> None:",
                 "    report(check_pair(A_CODE, B_CODE, setup_a=A_SETUP, setup_b=B_SETUP, namespace=NAMES,",
                 "                      labels=(A_LABEL, B_LABEL), min_effect=MIN_EFFECT, budget=BUDGET_S,",
                 f"                      accepted=ACCEPTED_RATIO, hold_gain=HOLD_GAIN, {kw}"
                 + (", work=WORK" if per else "") + "))"]
    if plan.target_s is not None:
        body += ["", "", f"def test_run_{b['id']}_{slug}_stays_within_target() -> None:",
                 "    report(check_target(B_CODE, setup=B_SETUP, namespace=NAMES, target_s=TARGET_S, label=B_LABEL,",
                 f"                        min_effect=MIN_EFFECT, budget=BUDGET_S, {kw}))"]
    text = "\n".join(doc + body) + "\n"
    compile(text, str(path), "exec")  # never write a file that does not parse
    gf = GuardFile(shown_path, plan.kind, int(b["id"]), int(a["id"]) if a is not None else None, module,
                   tuple(names), checks, accepted, command, budget, m, plan.target_s)
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


__all__ = ["GuardFile", "GuardError", "write_guard", "atomic_write", "render"]
