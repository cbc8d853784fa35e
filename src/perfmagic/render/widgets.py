"""Live views (ipywidgets), opt-in: ``result.widget()``.

A widget needs a running kernel: saved in a notebook it outlives its kernel only as "model not
found". So no magic adds one to its output (the default display is self-contained HTML, see
:mod:`perfmagic.render.bundle`); a user who wants tabs that switch without re-running asks for them,
and the view says it is live. Uses only ipywidgets' own JavaScript, which JupyterLab and Notebook
ship (nothing is loaded from a CDN).
"""

from __future__ import annotations

import html
from typing import Any

from .bundle import figure_of

LIVE_NOTE = ("live view: needs a running kernel (a saved notebook keeps the static result printed by the "
             "magic, not this view)")


def live_view(result: Any) -> Any:
    """An ipywidgets VBox: a note that it is live, the text report, and a Tab with the figure and
    each of the result's folded sections."""
    try:
        import ipywidgets as w
    except ImportError as exc:  # a dependency, but say what to do if it is missing
        raise ImportError("result.widget() needs ipywidgets: pip install ipywidgets") from exc
    png, _ = figure_of(result)
    children, titles = [], []
    if png is not None:
        children.append(w.Image(value=png, format="png"))
        titles.append("Figure")
    sections = result.html_sections() if callable(getattr(result, "html_sections", None)) else []
    for title, body in sections:
        children.append(w.HTML(body))
        titles.append(title)
    parts = [w.HTML(f"<div style='font-size:11px;color:#666'>{html.escape(LIVE_NOTE)}</div>"),
             w.HTML(f"<pre style='margin:0;font-size:12px'>{html.escape(result.text())}</pre>")]
    if children:
        tab = w.Tab(children=children)
        for i, t in enumerate(titles):
            tab.set_title(i, t)
        parts.append(tab)
    return w.VBox(parts)
