"""One display bundle per result, readable in every front end with no kernel and no network.

``mimebundle(result)`` gives:

* ``text/plain``: ``result.text()`` (terminals, ``print``, the fallback everywhere);
* ``image/png``: ``result.figure_png()`` when the result draws a figure (static exports pick it
  when they show no HTML);
* ``text/html``: self-contained — the headline in bold, the rest of the text, the figure as an
  inline PNG, then — where the text folded some of its ``!`` lines (:mod:`perfmagic.render.warnings`)
  — those warnings, then each of ``result.html_sections()`` (``[(title, html), ...]``, optional), each folded
  in a ``<details>`` element, which opens and closes with no script. Inline styles only: nothing
  is loaded from anywhere, so nbconvert, GitHub's viewer, VS Code and a reopened notebook all show
  the whole result.

No ipywidgets view is added here: widgets need a live kernel, and a saved notebook would show
"model not found" in their place. Live, linked views are opt-in (``result.widget()`` where a result
offers one).
"""

from __future__ import annotations

import base64
import html
import re
from typing import Any

_PRE = "margin:0;font-size:12px;white-space:pre-wrap"
#: the note shown in place of a figure when matplotlib is missing
NO_FIGURE = "(matplotlib is not installed: no figure)"


def figure_of(result: Any, plot: bool = True) -> tuple[bytes | None, str | None]:
    """``(png, note)``: the result's figure, or a note saying why there is none."""
    if not plot or not callable(getattr(result, "figure_png", None)):
        return None, None
    try:
        return result.figure_png(), None
    except ImportError:
        return None, NO_FIGURE


def html_page(text: str, png: bytes | None = None, alt: str = "figure",
              sections: list[tuple[str, str]] | None = None) -> str:
    """The self-contained HTML of a text report, its figure and folded sections."""
    head, _, rest = text.partition("\n")
    parts = [f"<div class='perfmagic-result'><pre style='{_PRE};font-weight:bold'>{html.escape(head)}</pre>"]
    if rest:
        parts.append(f"<pre style='{_PRE}'>{html.escape(rest)}</pre>")
    if png is not None:
        b64 = base64.b64encode(png).decode("ascii")
        parts.append(f"<img src='data:image/png;base64,{b64}' alt='{html.escape(alt)}' style='max-width:100%'>")
    for title, body in sections or []:
        parts.append(f"<details style='font-size:12px;margin-top:4px'><summary style='cursor:pointer'>"
                     f"{html.escape(title)}</summary>{body}</details>")
    parts.append("</div>")
    return "".join(parts)


def bundle_of(text: str, png: bytes | None = None, alt: str = "figure",
              sections: list[tuple[str, str]] | None = None) -> dict[str, Any]:
    """``text/plain``, ``image/png`` (when there is a figure) and the self-contained ``text/html``."""
    out: dict[str, Any] = {"text/plain": text, "text/html": html_page(text, png, alt, sections)}
    if png is not None:
        out["image/png"] = base64.b64encode(png).decode("ascii")
    return out


def mimebundle(result: Any, *, plot: bool = True, text: str | None = None) -> dict[str, Any]:
    """The display bundle of any perfmagic result (see the module docstring). ``text`` replaces
    ``result.text()`` (the magics add the run id)."""
    body = result.text() if text is None else text
    png, note = figure_of(result, plot)
    if note:
        body += "\n  " + note
    sections = result.html_sections() if callable(getattr(result, "html_sections", None)) else None
    from .warnings import all_warnings, folded_html

    # the text shows the two most important `!` lines and a "(+N more" line; the folded ones open here
    folded = folded_html(all_warnings(result)) if re.search(r"\n *\(\+\d+ more", body) else None
    if folded is not None:
        sections = [folded] + list(sections or [])
    own = getattr(result, "_render", None)  # the renderer module's FIGURE_ALT, else the result's figure_alt
    alt = (own("figure_alt") if callable(own) else None) or getattr(result, "figure_alt", None) \
        or f"{type(result).__name__} figure"
    return bundle_of(body, png, alt, sections)


def table_html(rows: list[tuple[Any, ...]], header: tuple[str, ...] | None = None, scroll: bool = False) -> str:
    """A small HTML table of plain values (escaped), for a folded section."""
    head = "".join(f"<th style='text-align:left;padding-right:1em'>{html.escape(str(c))}</th>" for c in header or ())
    body = "".join("<tr>" + "".join(f"<td style='text-align:left;padding-right:1em'>{html.escape(str(c))}</td>"
                                    for c in r) + "</tr>" for r in rows)
    table = f"<table style='font-size:12px'>{f'<thead><tr>{head}</tr></thead>' if head else ''}<tbody>{body}</tbody></table>"
    return f"<div style='max-height:260px;overflow:auto'>{table}</div>" if scroll else table


__all__ = ["NO_FIGURE", "bundle_of", "figure_of", "html_page", "mimebundle", "table_html"]
