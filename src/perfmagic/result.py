"""The result protocol: what every perfmagic result offers, whichever analysis made it.

A result is frozen data that keeps its raw samples; statistics are derived from them. Every result
class (``BenchResult``, ``PairResult``, ``RunComparison``, ``RooflineResult``, ``AmdahlResult``,
``EstimateResult``, ``DataLoaderResult``, ``MemoryResult``, ``FlameResult``, ``LineProfResult``)
satisfies :class:`Result`:

=====================  ==========================================================================
``to_dict()``          every field as plain JSON types (what ``perfmagic.ledger()`` and files get)
``metrics()``          flat ``{name: number or short string}``: one ledger row's columns
``samples()``          the raw samples, ``{series: [numbers]}`` (``{}`` when there are none)
``primary_metric``     the key of ``metrics()`` that stands for the run (``median_s``, ``peak_bytes``...)
``headline()``         one line that says what was found
``text()``             the full text report, readable at 100 columns in a terminal
=====================  ==========================================================================

and displays through ``render/``: ``repr()`` is the class name and the headline, ``_repr_pretty_``
(IPython's text) is ``text()``, ``_repr_mimebundle_`` is :func:`perfmagic.render.bundle.mimebundle`
(text/plain, a self-contained text/html and, when the result draws one, image/png).
:class:`Displayed` gives a class those three from its ``text()``, and ``widget()``: an opt-in live
view (ipywidgets) for a running kernel. A result may still override them.

Imports nothing heavy: this module is read by every result module.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol, runtime_checkable


@runtime_checkable
class Result(Protocol):
    """What every result offers (see the module docstring)."""

    primary_metric: ClassVar[str]

    def to_dict(self) -> dict[str, Any]: ...

    def metrics(self) -> dict[str, Any]: ...

    def samples(self) -> dict[str, list[Any]]: ...

    def headline(self) -> str: ...

    def text(self) -> str: ...


class Displayed:
    """Mixin: ``repr``, IPython's pretty text and the mime bundle, all from the result's ``text()``.

    Defaults for the protocol's small methods come with it: ``headline()`` is the first line of
    ``text()``; ``samples_dict()`` is the older name of ``samples()``; ``text()``, ``figure_png()``
    and ``html_sections()`` come from the ``render`` module the class names in ``renderer``.
    """

    primary_metric: ClassVar[str] = ""
    #: the module of ``perfmagic.render`` that draws this result (``"scaling"``): ``text()``,
    #: ``figure_png()`` and ``html_sections()`` call its functions of the same names, given the result
    renderer: ClassVar[str] = ""

    def _render(self, name: str) -> Any:
        import importlib

        if not self.renderer:
            raise NotImplementedError(f"{type(self).__name__} names no renderer and does not define {name}()")
        return getattr(importlib.import_module(f"perfmagic.render.{self.renderer}"), name, None)

    def text(self) -> str:
        return self._render("text")(self)

    def __str__(self) -> str:
        return self.text()

    def figure_png(self) -> bytes | None:
        draw = self._render("figure_png") if self.renderer else None
        return draw(self) if draw is not None else None

    def html_sections(self) -> list[tuple[str, str]]:
        sections = self._render("html_sections") if self.renderer else None
        return sections(self) if sections is not None else []

    def headline(self) -> str:
        text = self.text()  # type: ignore[attr-defined]
        return text.splitlines()[0] if text else ""

    def samples_dict(self) -> dict[str, list[Any]]:
        return self.samples()  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        try:
            head = self.headline()
        except Exception:  # noqa: BLE001 - a repr must never raise
            head = "(unprintable)"
        return f"<{type(self).__name__}: {head}>"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(f"<{type(self).__name__}>" if cycle else self.text())  # type: ignore[attr-defined]

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        from .render.bundle import mimebundle

        return mimebundle(self)

    def widget(self) -> Any:
        """A live ipywidgets view (text, then tabs: figure and details). It needs a running kernel
        and says so; the magics never add one to their output (see :mod:`perfmagic.render.widgets`)."""
        from .render.widgets import live_view

        return live_view(self)


__all__ = ["Displayed", "Result"]
