"""Turning results into what a person reads: text, figures, mime bundles, the flame graph's HTML.

Every result class names its renderer, one module here, in its ``renderer`` class attribute;
:func:`renderer_for` is the one edge from a result to its renderer:

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

from types import ModuleType
from typing import Any


def renderer_for(result: Any) -> ModuleType:
    """The module of this package named by ``type(result).renderer``, imported on first use."""
    import importlib

    name = getattr(type(result), "renderer", "")
    if not name or not name.isidentifier():
        raise NotImplementedError(f"{type(result).__name__} names no renderer (class attribute renderer = "
                                  f"'<module of perfmagic.render>')")
    return importlib.import_module(f"{__name__}.{name}")


__all__ = ["renderer_for"]
