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

and displays through ``render/``: every class names its renderer (``renderer = "bench"``: the module
:mod:`perfmagic.render.bench`), which writes every sentence of its text. ``repr()`` is the class name
and the headline, ``_repr_pretty_`` (IPython's text) is ``text()``, ``_repr_mimebundle_`` is
:func:`perfmagic.render.bundle.mimebundle` (text/plain, a self-contained text/html and, when the
result draws one, image/png). :class:`Displayed` gives a class all of these from its renderer, and
``widget()``: an opt-in live view (ipywidgets) for a running kernel. ``text()`` is always the full
report; a renderer's options are keywords (``text(top=5)``, ``text(run_id=12)``).

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
    """Mixin: ``repr``, IPython's pretty text and the mime bundle, all drawn by the result's renderer.

    Every result class names its renderer: ``renderer = "bench"`` is :mod:`perfmagic.render.bench`,
    found by :func:`perfmagic.render.renderer_for` (imported on first use, so ``%load_ext`` stays cheap).
    ``text()``, ``headline()``, ``figure_png()``, ``html_sections()`` and the mime bundle call that
    module's functions of the same names, given the result; the module may leave out all but ``text``
    (then ``headline()`` is the first line of the text, there is no figure and no folded detail, and
    the bundle is :func:`perfmagic.render.bundle.mimebundle`). ``samples_dict()`` is the older name of
    ``samples()``.
    """

    primary_metric: ClassVar[str] = ""
    #: the module of :mod:`perfmagic.render` that draws this result (``"scaling"``)
    renderer: ClassVar[str] = ""

    def _render(self, name: str) -> Any:
        """The renderer's function ``name``, or None when it has none."""
        from .render import renderer_for

        return getattr(renderer_for(self), name, None)

    def text(self, **options: Any) -> str:
        """The full report (100 columns); ``options`` are the renderer's (``top=``, ``run_id=``)."""
        return self._render("text")(self, **options)

    def __str__(self) -> str:
        return self.text()

    def figure_png(self, **options: Any) -> bytes | None:
        draw = self._render("figure_png")
        return draw(self, **options) if draw is not None else None

    def html_sections(self) -> list[tuple[str, str]]:
        sections = self._render("html_sections")
        return sections(self) if sections is not None else []

    def headline(self) -> str:
        head = self._render("headline")
        if head is not None:
            return head(self)
        text = self.text()
        return text.splitlines()[0] if text else ""

    def verdict(self) -> str:
        """What was found, in one line: the renderer's ``verdict`` (the headline where it has none). A
        result whose verdict is a field or a category (``EstimateResult``, ``RunComparison``) has its own."""
        say = self._render("verdict")
        return say(self) if say is not None else self.headline()

    @property
    def figure_alt(self) -> str:
        """The figure's alternative text (the renderer module's ``FIGURE_ALT``)."""
        from .render import renderer_for

        return renderer_for(self).figure_alt or f"{type(self).__name__} figure"

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
        own = self._render("mimebundle")  # a renderer with its own bundle (the flame graph, a comparison)
        if own is not None:
            return own(self)
        from .render.bundle import mimebundle

        return mimebundle(self)

    # ---- the run record (perfmagic.record): what the ledger stores and reads back ---------------------
    #: the ``kind`` a :class:`~perfmagic.record.RunRecord` of this result carries; the ledger's registry
    #: (:func:`perfmagic.storage.record.kinds`) maps it back to this class
    record_kind: ClassVar[str] = ""

    def record_payload(self) -> Any:
        """What this result needs beyond its metrics, samples and options to be rebuilt: every field
        (:func:`perfmagic.record.encode`). A result that rebuilds from less overrides it."""
        from .record import encode

        return encode(self)

    def to_record(self, *, magic: str, code: str = "", magic_line: str = "", label: str | None = None,
                  options: dict[str, Any] | None = None, env: dict[str, Any] | None = None,
                  status: str | None = None, **relations: Any) -> Any:
        """This result as a :class:`~perfmagic.record.RunRecord` (the magic gives what the result does not
        hold: the magic line, the cell body, the user's options; ``relations``: ``rerun_of``,
        ``interleaved_with``, ``thread_limit``, ``note``)."""
        from .record import RunRecord

        return RunRecord(kind=self.record_kind or magic, magic=magic, code=code, magic_line=magic_line,
                         label=label if label is not None else getattr(self, "label", None),
                         status=status or getattr(self, "status", "ok"), options=dict(options or {}),
                         metrics=self.metrics(), samples=self.samples(),  # type: ignore[attr-defined]
                         env=dict(env if env is not None else getattr(self, "env", None) or {}),
                         primary_metric=self.primary_metric or None, payload=self.record_payload(), **relations)

    @classmethod
    def from_record(cls, rec: Any) -> Any:
        """The result a :class:`~perfmagic.record.RunRecord` stored (its payload decoded by field type)."""
        from .record import decode

        if not isinstance(rec.payload, dict):
            from .errors import PerfmagicError

            raise PerfmagicError(f"run #{rec.id} ({rec.magic}) was recorded before perfmagic stored what a "
                                 f"{cls.__name__} needs to be rebuilt (its metrics and samples are in the ledger: "
                                 "perfmagic.ledger() shows them)")
        return decode(cls, rec.payload)

    def widget(self) -> Any:
        """A live ipywidgets view (text, then tabs: figure and details). It needs a running kernel
        and says so; the magics never add one to their output (see :mod:`perfmagic.render.widgets`)."""
        from .render.widgets import live_view

        return live_view(self)


__all__ = ["Displayed", "Result"]
