"""What differs between two runs besides the number (:class:`~perfmagic.timing.whatchanged.WhatChanged`):
the list of what changed, the one line that says whether the comparison still isolates one change, the
diff and the running conditions, as text and as HTML."""

from __future__ import annotations

import html as _html
from typing import Any


def _moved(reason: str) -> str:
    """The notebook name a re-run reason is about: ``"`L` was changed in place ..."`` -> ``"L"``."""
    parts = reason.split("`")
    return parts[1] if len(parts) >= 3 else reason


def things(w: Any) -> list[str]:
    """Each thing that changed, in a few words: the code (its places), the data, options, environment."""
    out = []
    if w.code_places:
        out.append(f"the code ({w.code_places} place{'s' if w.code_places != 1 else ''})")
    if w.data:
        out.append("the data A read (" + ", ".join(_moved(d) for d in w.data) + ")")
    if w.options:
        out.append("options " + ", ".join(w.options))
    if w.env:
        out.append("environment " + ", ".join(w.env))
    return out


def summary(w: Any) -> str:
    """One line: nothing changed (an A/A comparison), what changed, or more than one thing."""
    t = things(w)
    if not t:
        return "nothing changed between the two runs but time: an A/A comparison"
    if w.isolated:
        return "what changed: " + t[0]
    return "more than one thing changed — " + "; ".join(t) + ": this comparison no longer isolates one change"


def text(w: Any) -> str:
    """The summary, the diff, the data, options and environment changed, and the running conditions."""
    lines = [summary(w)]
    lines += ["  " + ln for ln in w.diff]
    lines += [f"  {name}: redefined between the runs (no source to show the difference)"
              for name in getattr(w, "redefined", ())]
    lines += [f"  data: {d}" for d in w.data]
    lines += [f"  option {k}: {a!r} -> {b!r}" for k, (a, b) in w.options.items()]
    lines += [f"  env {k}: {a} -> {b}" for k, (a, b) in w.env.items()]
    if w.conditions:
        lines.append("  running conditions differed (not a change of yours; weigh the verdict with them):")
        lines += [f"    {k}: {a} -> {b}" for k, (a, b) in w.conditions.items()]
    return "\n".join(lines)


def html(w: Any) -> str:
    """The same as HTML: the diff coloured, the summary green when one thing changed."""
    esc, rows = _html.escape, []
    for ln in w.diff:
        style = ""
        if ln.startswith("+") and not ln.startswith("+++"):
            style = "background:#e6ffec"
        elif ln.startswith("-") and not ln.startswith("---"):
            style = "background:#ffebe9"
        elif ln.startswith("@@"):
            style = "color:#6e7781"
        rows.append(f"<div style='{style}'>{esc(ln) or '&nbsp;'}</div>")
    extra = "".join(f"<div>{esc(n)}: redefined between the runs (no source to show the difference)</div>"
                    for n in getattr(w, "redefined", ()))
    extra += "".join(f"<div>data: {esc(d)}</div>" for d in w.data)
    extra += "".join(f"<div>option <b>{esc(k)}</b>: {esc(repr(a))} → {esc(repr(b))}</div>"
                     for k, (a, b) in w.options.items())
    extra += "".join(f"<div>env <b>{esc(k)}</b>: {esc(str(a))} → {esc(str(b))}</div>" for k, (a, b) in w.env.items())
    extra += "".join(f"<div style='color:#6e7781'>running conditions differed: <b>{esc(k)}</b>: "
                     f"{esc(str(a))} → {esc(str(b))}</div>" for k, (a, b) in w.conditions.items())
    color = "#1a7f37" if w.isolated else "#9a6700"
    return (f"<div style='font-size:12px'><div style='color:{color}'>{esc(summary(w))}</div>"
            f"<pre style='font-size:12px;margin:2px 0'>{''.join(rows)}</pre>{extra}</div>")
