"""A :class:`~perfmagic.profile.flameresult.FlameResult` drawn: the verdict, the text tables of the top
functions, and the display bundle whose HTML is the interactive flame graph.

The graph itself (inline JavaScript and data, no network) and the static PNG icicle are built by
:mod:`perfmagic.render.flame_html`. Reads the result's attributes and imports no analysis module.

The bundle is not the generic :func:`perfmagic.render.bundle.mimebundle`: that page shows the
figure as an always-visible ``<img>`` and can carry more HTML only folded in ``<details>``, which
would hide the interactive graph (the point of ``%%flame``) behind a click and show the picture
twice. :func:`mimebundle` takes ``text/plain`` and ``image/png`` from
:func:`~perfmagic.render.bundle.bundle_of` and puts the flame graph page in ``text/html``: the
text, the PNG (hidden once the script runs, so static views keep a picture) and the live graph,
then the result's ``html_sections()`` folded in ``<details>`` as everywhere else.
"""

from __future__ import annotations

import html as _html
from typing import Any

from ..result import Result
from .bundle import bundle_of, table_html
from .text import wrap
from .units import fmt_time

#: the alt text of the figure in the HTML bundle (render/bundle.py)
FIGURE_ALT = "flame graph of the cell (static)"


#: the likely cause of a refused attach, by what :class:`~perfmagic.profile.samplers.PySpy` saw
_ATTACH_HINTS = {"macos": " (macOS: py-spy needs root)",
                 "capability": " (the container lacks the SYS_PTRACE capability?)"}


def attach_failure(code: int | None, message: str, why: str | None = None, scope: int | None = None) -> str:
    """Why py-spy could not attach (the one-line reason a fallback shows after "py-spy not used: ", or an
    error message): its exit code, its last message and, for a refused permission, the likely cause
    (``why``: ``"macos"``, ``"yama"`` with the ptrace ``scope``, ``"capability"``)."""
    hint = (f" (Yama ptrace_scope={scope}: only root may attach)" if why == "yama"
            else _ATTACH_HINTS.get(why or "", ""))
    return f"py-spy could not attach (exit {code}: {message or 'no message'}){hint}"


def sampler_line(r: Any) -> str:
    """Which sampler ran, at what rate, in which mode; why py-spy was not used."""
    if r.sampler == "py-spy":
        mode = ("native+Python: pauses the kernel per sample and when it first meets a large library, so "
                "the cell ran slower; the shares hold" if r.native else "non-blocking")
        s = f"py-spy {r.rate_hz:g} Hz ({mode}{', idle threads included' if r.idle else ''}" \
            f"{', child processes' if r.subprocesses else ''}" \
            f"{', all threads' if getattr(r, 'all_threads', False) else ', the cell thread only'})"
    else:
        s = f"in-process sampler {r.rate_hz:g} Hz (wall-clock, Python frames of the cell's thread)"
        got = r.n_samples / r.wall_s if r.wall_s > 0 else 0.0
        if r.n_samples >= 5 and got < 0.8 * r.rate_hz:
            s += (f"; achieved {got:.0f} Hz: the cell held the GIL, and a sampler thread only gets it every "
                  "switch interval (sys.getswitchinterval())")
    if r.fallback_reason:
        s += f" — py-spy not used: {r.fallback_reason}"
    return s


def other_threads_line(r: Any) -> str | None:
    """What the process's other threads did while the cell ran (py-spy): shown, or left out and why."""
    ot = list(getattr(r, "other_threads", ()) or ())
    if not ot:
        return None
    busy = [(n, b) for n, b, _ in ot if b]
    n_busy, n_wait = sum(b for _, b in busy), sum(i for _, _, i in ot)
    fate = "shown (--idle)" if r.idle and r.all_threads else "left out"
    waiting = (f"{n_wait} samples of waiting threads (the kernel's I/O, heartbeat, shell: epoll_wait, poll, "
               f"read) {fate}") if n_wait else ""
    if not busy:
        out = f"other threads: {len(ot)}, all waiting: {waiting}"
    else:
        names = ", ".join(n for n, _ in busy[:3]) + (", …" if len(busy) > 3 else "")
        if r.all_threads:
            shown = f"{len(busy)} busy, shown as 'thread NAME' ({names})"
        else:
            share = n_busy / (n_busy + len(r.stacks)) if n_busy + len(r.stacks) else 0.0
            shown = (f"{len(busy)} busy for {n_busy} samples ({share:.0%} of all busy samples: {names}), not "
                     "shown: only the cell's thread is graphed, --all-threads adds them")
        out = "other threads: " + shown + (f"; {waiting}" if waiting else "")
    return "\n".join(wrap(out, "", "    ", 98, break_long_words=True))


def verdict(r: Any) -> str:
    """The first line: the function with the most self time, or why there are no samples."""
    tag = {"interrupted": "  [INTERRUPTED]", "failed": f"  [the cell raised {r.error}]"}.get(r.status, "")
    if not r.stacks:
        if r.wall_s < r.interval_s:
            why = (f"the cell ran {fmt_time(r.wall_s)}, less than one sample interval "
                   f"({fmt_time(r.interval_s)} at {r.rate_hz:g} Hz): raise --rate or repeat the work in a loop")
        elif r.sampler == "py-spy" and not r.idle:
            why = (f"the cell ran {fmt_time(r.wall_s)} but was never on the CPU (waiting: sleep, I/O, "
                   "locks); add --idle to sample waits too")
        else:
            why = f"the cell ran {fmt_time(r.wall_s)} and no sample landed in it"
        return f"flame: no samples — {why}{tag}"
    top = r.top(1)
    head = (f"flame: {top[0].name} ({top[0].where}) has {top[0].self_frac:.0%} of the self time"
            if top else "flame: no function has self time")
    return (f"{head} · {r.n_samples} samples, {fmt_time(r.sampled_s)} sampled of a "
            f"{fmt_time(r.wall_s)} cell{tag}")


headline = verdict


def text(r: Result, *, top: int | None = None) -> str:
    """The verdict, the ``top`` (10) functions by self time and by total time, the sampler and notes."""
    n = 10 if top is None else top
    lines = [verdict(r)]
    if r.stacks:
        def row(f: Any) -> str:
            name = f.name if len(f.name) <= 40 else f.name[:39] + "…"
            st = fmt_time(f.self_s, 3) if f.self_s else "·"
            return (f"  {st:>10} {f.self_frac:>6.1%}  {fmt_time(f.total_s, 3):>10} "
                    f"{f.total_frac:>6.1%}  {name:<40}  {f.where}")
        head = f"  {'self':>10} {'self%':>6}  {'total':>10} {'total%':>6}  {'function':<40}  where"
        lines += ["  top functions by self time (time in the function itself):", head]
        lines += [row(f) for f in r.top(n, "self")]
        lines += ["  top functions by total time (including what they call):", head]
        lines += [row(f) for f in r.top(min(n, 5), "total")]
    sl = f"  sampler: {sampler_line(r)}"
    lines += [sl] if len(sl) <= 100 or not r.native else wrap(sl, "", "    ", 100, break_long_words=True)
    if r.startup_s is not None:
        lines.append(f"  sampler start-up: {fmt_time(r.startup_s)} (before the cell started)")
    if r.outside_samples:
        lines.append(f"  {r.outside_samples} samples outside the cell (perfmagic, IPython) not shown")
    other = other_threads_line(r)
    if other:
        lines += ["  " + ln for ln in other.splitlines()]
    lines += [f"  note: {x}" for x in r.notes]
    return "\n".join(lines)


def html(r: Any, png: bytes | None = None, text: str | None = None) -> str:
    """The self-contained interactive flame graph (inline JS + data, no network), sections folded under it."""
    from .flame_html import flame_html

    return flame_html(r, png=png, text=text, extra=_sections_html(html_sections(r)), sampler=sampler_line(r))


def figure_png(r: Any) -> bytes | None:
    """A static icicle of the flame graph (for GitHub and other views that drop JavaScript)."""
    from .flame_html import flame_png

    return flame_png(r, sampler=sampler_line(r))


def html_sections(r: Any, n: int = 50) -> list[tuple[str, str]]:
    """``[(title, html)]``: every function (up to ``n``) by self time, beyond the text's top 10."""
    fs = r.functions()
    if not fs:
        return []
    rows = [(fmt_time(f.self_s, 3) if f.self_s else "·", f"{f.self_frac:.1%}", fmt_time(f.total_s, 3),
             f"{f.total_frac:.1%}", f.name, f.where) for f in fs[:n]]
    more = f" (the first {n} of {len(fs)})" if len(fs) > n else ""
    return [(f"All functions by self time{more}",
             table_html(rows, ("self", "self%", "total", "total%", "function", "where"), scroll=True))]


def _sections_html(sections: list[tuple[str, str]]) -> str:
    return "".join(f"<details style='font-size:12px;margin-top:4px'><summary style='cursor:pointer'>"
                   f"{_html.escape(title)}</summary>{body}</details>" for title, body in sections)


def mimebundle(r: Any, *, text: str | None = None, plot: bool = True) -> dict[str, Any]:
    """``text/plain``, ``image/png`` and the flame graph page as ``text/html`` (see the module docstring).

    ``text`` replaces ``r.text()`` (the magic adds the run id); ``plot=False`` gives the text and its
    static HTML page only: no graph, no PNG, no script.
    """
    body = r.text() if text is None else text
    if not plot:
        return bundle_of(body)
    png = figure_png(r)
    out = bundle_of(body, png, "flame graph of the cell (static)")
    out["text/html"] = html(r, png=png, text=body)
    return out
