"""A regression guard written (:class:`~perfmagic.guard.writer.GuardFile`): where, what makes it fail,
the evidence at acceptance, the names it imports, and the command that runs it."""

from __future__ import annotations

from typing import Any

from ..result import Result
from .text import fmt_time, wrap


def text(r: Result) -> str:
    g: Any = r
    what = f"run #{g.run_id} vs #{g.baseline_id}" if g.baseline_id is not None else f"run #{g.run_id}"
    names = f"{', '.join(g.names)} from {g.module}" if g.module and g.names else (
        ", ".join(g.names) if g.names else "none (the code is self-contained)")
    lines = [f"perfmagic: wrote a regression guard for {what}", f"  file:       {g.path}"]
    for key, value in (("fails when", g.checks), ("accepted", g.accepted), ("names", names)):
        lines += wrap(f"  {key + ':':<11} {value}", "", " " * 14, break_long_words=True)
    lines.append(f"  run it:     {g.command}   (about {g.budget_s:.0f} s)")
    return "\n".join(lines)


# ---- the guard file itself: Python source a person reads and pytest runs ---------------------------
# The file is perfmagic's text as much as its report is: its docstring says what it guards and what was
# accepted, its comments say what each constant means, its skip reasons say why it did not run. So its
# template is written here, from the numbers and code the writer gathered (guard.writer.GuardSpec).


def literal(text: str) -> str:
    """A readable Python literal for code: triple-quoted when that is exact (printable characters and
    newlines only: a carriage return in source would be read back as a newline), else repr."""
    if (text and "\n" in text and '"""' not in text and "\\" not in text and not text.endswith('"')
            and all(c == "\n" or c.isprintable() for c in text)):
        return '"""\\\n' + text + '\\\n"""'  # the backslashes: no newline added at either end
    return repr(text)


def safe(text: Any) -> str:
    """Text from the ledger (a label, a path, a notebook name) for the docstring or a ``#`` comment: one
    line of printable characters, no backslash, no triple quote. A newline or carriage return in a label
    would otherwise end a comment and make the rest of it code."""
    one = "".join(c if c.isprintable() else " " for c in str(text))
    return one.replace("\\", "/").replace('"""', "'''")


def slug(label: str) -> str:
    """An ASCII identifier fragment from a label (a label's '²' or '①' is no identifier character)."""
    import re

    return re.sub(r"[^a-z0-9]+", "_", label.lower(), flags=re.ASCII).strip("_")[:40] or "run"


def checks(s: Any) -> str:
    """What makes the guard fail, in one line."""
    m = s.min_effect
    if s.kind == "pair":
        out = (f"B #{s.run_id} '{s.label_b}' is no longer faster than A #{s.baseline_id} '{s.label_a}' by at "
               f"least {m:.0%}")
        if s.hold_gain:
            out += f", or B/A rises above {s.accepted_ratio * (1 + m):.3g} (the accepted gain less {m:.0%})"
    else:
        out = f"'{s.label_b}' takes more than {fmt_time(s.target_s)} + {m:.0%} per call (95% CI above it)"
    if s.baseline_id is not None and s.target_s is not None:
        out += f"; or '{s.label_b}' takes more than {fmt_time(s.target_s)} + {m:.0%} per call"
    return out


def accepted(s: Any) -> str:
    """The evidence at acceptance, in one line."""
    if s.kind == "pair":
        return (f"{s.comparison_kind}: {s.comparison_sentence}; A {fmt_time(s.median_a)} → "
                f"B {fmt_time(s.median_b)} median")
    return f"target {fmt_time(s.target_s)} ({_source(s)}); measured then {fmt_time(s.median_b)} median"


def _source(s: Any) -> str:
    """Where the target came from: given, or the label's target in the ledger."""
    return f"the target of '{s.label_b}' in the ledger" if s.target_source == "ledger" else str(s.target_source)


def _docstring(s: Any) -> list[str]:
    m = s.min_effect
    if s.kind == "pair":
        title = f"run #{s.run_id} '{s.label_b}' must stay faster than run #{s.baseline_id} '{s.label_a}'"
        how = (f"re-measures A's and B's code interleaved in one process (perfmagic.bench_pair, about "
               f"{s.budget_s:.0f} s) and fails when B is no longer faster than A by at least {m:.0%}: the accepted "
               "gain lost")
    else:
        title = f"run #{s.run_id} '{s.label_b}' must stay within {fmt_time(s.target_s)} per call"
        how = (f"measures the run's code alone (perfmagic.bench, about {s.budget_s:.0f} s) and fails when its "
               f"median is above the target by more than {m:.0%}")
    if s.baseline_id is not None and s.target_s is not None:
        how += f", or when B's median is above the target {fmt_time(s.target_s)} by more than {m:.0%}"
    where = f"notebook {safe(s.notebook)}" if s.notebook else "no notebook (a script's ledger)"
    paras = [f"Guards {where}, run #{s.run_id} of {safe(s.created_utc)}"
             + (f" (A: run #{s.baseline_id})" if s.baseline_id is not None else "")
             + f"; written {s.written_utc:%Y-%m-%d %H:%M UTC} by perfmagic {s.version}. "
             f"Accepted then, {safe(accepted(s))}.",
             f"This test {how}. On failure it prints perfmagic's verdict."]
    doc = [f'"""perfmagic regression guard: {safe(title)}.', ""]
    for para in paras:
        doc += wrap(para, "", "", break_long_words=True) + [""]
    return doc + [f"Run it:        {safe(s.command)}", f"Regenerate it: {safe(s.regenerate)}   (in the notebook)",
                  '"""', "", "from __future__ import annotations", "", "import pathlib", "import sys", "",
                  "import pytest", ""]


def _preamble(s: Any) -> list[str]:
    body: list[str] = []
    if s.root is not None:
        how, where = s.root
        expr = (f"pathlib.Path(__file__).resolve().parent / {where!r}" if how == "relative"
                else f"pathlib.Path({where!r})")
        body += [f"_ROOT = {expr}  # the folder that holds {safe(s.module.split('.')[0])}",
                 "if str(_ROOT.resolve()) not in sys.path:", "    sys.path.insert(0, str(_ROOT.resolve()))"]
    if s.torch:
        body += [f'torch = pytest.importorskip("torch", reason="run #{s.run_id} used torch, which is not installed '
                 'here")']
    if s.cuda:
        body += ["pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),",
                 f'                                reason="run #{s.run_id} was measured on CUDA and this machine '
                 'has no CUDA device")']
    used = (["check_pair"] if s.baseline_id is not None else []) + (["check_target"] if s.target_s is not None
                                                                      else [])
    body += ["", f"from perfmagic.guard import {', '.join(used)}, report  # noqa: E402"]
    body += [f"{ln}  # noqa: E402" for ln in s.import_lines]
    return body + ["", "NAMES = {" + ", ".join(f"{n!r}: {n}" for n in s.names) + "}  # what the run's code reads"]


def _constants(s: Any) -> list[str]:
    pair = s.baseline_id is not None
    body = [f"A_LABEL, A_SETUP, A_CODE = {s.label_a!r}, {literal(s.setup_a)}, {literal(s.code_a)}"] if pair else []
    body += [f"B_LABEL, B_SETUP, B_CODE = {s.label_b!r}, {literal(s.setup_b)}, {literal(s.code_b)}",
             f"MIN_EFFECT = {s.min_effect!r}  # the bar: {'B faster than A' if pair else 'over the target'} "
             f"by at least this much",
             f"BUDGET_S = {s.budget_s!r}  # measuring time; an interval on the bar is measured once more with twice it"]
    if s.target_s is not None:
        body += [f"TARGET_S = {s.target_s!r}  # seconds per call ({safe(_source(s))})"]
    if pair:
        per = f" {safe(s.work_per)}" if s.work is not None else ""
        body += [f"ACCEPTED_RATIO = {s.accepted_ratio!r}  # B/A{per} when the change was accepted",
                 f"HOLD_GAIN = {s.hold_gain!r}  # True: also fail when B/A > ACCEPTED_RATIO × (1 + MIN_EFFECT)"]
        if s.work is not None:  # judged per unit of declared work (--items): the guard judges the same way
            body += [f"WORK = ({s.work[0]!r}, {s.work[1]!r})  # {safe(s.work_unit)} per call of A and of B: B/A is "
                     f"judged{per}"]
    return body


def _tests(s: Any) -> list[str]:
    kw = f"device={s.device!r}, sync={s.sync!r}, gc={s.gc!r}"
    name, body = f"test_run_{s.run_id}_{slug(s.label_b)}", []
    if s.baseline_id is not None:
        body += ["", "", f"def {name}_keeps_its_gain() -> None:",
                 "    report(check_pair(A_CODE, B_CODE, setup_a=A_SETUP, setup_b=B_SETUP, namespace=NAMES,",
                 "                      labels=(A_LABEL, B_LABEL), min_effect=MIN_EFFECT, budget=BUDGET_S,",
                 f"                      accepted=ACCEPTED_RATIO, hold_gain=HOLD_GAIN, {kw}"
                 + (", work=WORK" if s.work is not None else "") + "))"]
    if s.target_s is not None:
        body += ["", "", f"def {name}_stays_within_target() -> None:",
                 "    report(check_target(B_CODE, setup=B_SETUP, namespace=NAMES, target_s=TARGET_S, label=B_LABEL,",
                 f"                        min_effect=MIN_EFFECT, budget=BUDGET_S, {kw}))"]
    return body


def source(s: Any) -> str:
    """The guard file's Python source, from a :class:`~perfmagic.guard.writer.GuardSpec`."""
    return "\n".join(_docstring(s) + _preamble(s) + _constants(s) + _tests(s)) + "\n"
