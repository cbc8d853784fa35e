"""Turning results into what a person reads: text, figures, mime bundles, the flame graph's HTML.

Every result class names its renderer, one module here, in its ``renderer`` class attribute (one of
:data:`RENDERERS`); :func:`renderer_for` is the one edge from a result to its renderer, and gives it
as a typed :class:`Renderer` (the module's functions, None where it has none):

===================  ==============================  ===================================
result               ``renderer``                    draws
===================  ==============================  ===================================
BenchResult          ``bench``                       text, figure, folded details
PairResult           ``pair``                        text (verdict, advice), figure
RunComparison        ``comparison``                  text, the coloured bundle
RooflineResult       ``roofline``                    text, roofline chart, details
Ceilings             ``ceilings``                    text, roofs chart, details
AmdahlResult         ``scaling``                     text, figure, details
ScalabilityResult    ``scalability``                 text, figure, details
RanksResult          ``ranks``                       text, figure, details
Little               ``littles``                     text
EstimateResult       ``estimate``                    text, figure, details
DataLoaderResult     ``dataloader``                  text, figure, details
MemoryResult         ``memory``                      text, figure, details
FlameResult          ``flame``                       text, flame graph bundle
LineProfResult       ``lineprof``                    text, figure, details
NextStep             ``advisor``                     text, details
GuardVerdict         ``guard``                       text
GuardFile            ``guardfile``                   text
WhereResult          ``where``                       text, differential flame graph, details
===================  ==============================  ===================================

A renderer module offers ``text(result, **options)`` (the full report) and any of ``headline``,
``figure_png``, ``html_sections`` and ``mimebundle``; :class:`perfmagic.result.Displayed` calls them.
Every sentence a result shows is written here, with the shared wording of :mod:`.text` (wrapping at
100 columns, percentages, times, ratios). Nothing is imported at import time: each module is imported
when a result is first shown (``%load_ext`` stays cheap), and matplotlib only inside the functions that
draw.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import cache
from typing import Any

#: the modules of this package that draw a result: the values a result class may give ``renderer``
#: (tests/test_render.py checks every result class against this tuple and the table above)
RENDERERS: tuple[str, ...] = (
    "advisor", "bench", "ceilings", "comparison", "dataloader", "estimate", "flame", "guard", "guardfile",
    "lineprof", "littles", "memory", "pair", "ranks", "roofline", "scalability", "scaling", "where")


@dataclass(frozen=True)
class Renderer:
    """What one renderer module offers a result, as typed callables: ``text`` always, the others where
    the module defines them (None where it does not; :class:`perfmagic.result.Displayed` then falls
    back: the headline is the text's first line, no figure, no folded details, the common bundle)."""

    name: str
    text: Callable[..., str]
    headline: Callable[[Any], str] | None = None
    verdict: Callable[[Any], str] | None = None
    advice: Callable[[Any], str] | None = None
    figure_png: Callable[..., bytes | None] | None = None
    html_sections: Callable[..., list[tuple[str, str]]] | None = None
    mimebundle: Callable[..., dict[str, Any]] | None = None
    figure_alt: str = ""


#: the module-level names a renderer module may define, by the :class:`Renderer` field they fill
_OPTIONAL = {f.name: f.name for f in fields(Renderer) if f.name not in ("name", "text", "figure_alt")}
_OPTIONAL["figure_alt"] = "FIGURE_ALT"


@cache
def _load(name: str) -> Renderer:
    import importlib

    module = importlib.import_module(f"{__name__}.{name}")
    found = {field: getattr(module, attr) for field, attr in _OPTIONAL.items() if hasattr(module, attr)}
    return Renderer(name=name, text=module.text, **found)


def renderer_for(result: Any) -> Renderer:
    """The :class:`Renderer` named by ``type(result).renderer`` (one of :data:`RENDERERS`), its module
    imported on first use and kept."""
    name = getattr(type(result), "renderer", "")
    if name not in RENDERERS:
        raise NotImplementedError(f"{type(result).__name__} names no renderer of perfmagic.render "
                                  f"(renderer = {name!r}); give its class attribute renderer one of: "
                                  f"{', '.join(RENDERERS)}")
    return _load(name)


__all__ = ["RENDERERS", "Renderer", "renderer_for"]
