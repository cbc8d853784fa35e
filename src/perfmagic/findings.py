"""Findings as small data: what an analysis noticed, as a kind and its numbers; ``render/`` writes the words.

An engine that has something to say beside its numbers (a note, a warning, why a fit is not a finding)
returns a :class:`Finding`: ``Finding.of("scaling.few-counts", k=2, eg="workers=1,2,4")``. The kind names
the sentence; the values fill it. :mod:`perfmagic.render.findings` holds the sentence of every kind, so the
wording lives in one place and a finding survives the ledger as data (``to_record()`` stores its kind and
values; ``from_record()`` rebuilds it). ``str(finding)`` is its sentence, so a result's ``to_dict()``, the
warning ranking and a test's ``"..." in str(note)`` read it as text, and code that treated a note as a
string keeps working (``note.lower()``, ``note.startswith(...)``, ``"! " + note``, ``"..." in note``); a note stored as text by an older
perfmagic stays a ``str`` and is shown as it is.

Imports nothing: this module is read by every analysis package and by ``render/``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Finding:
    """One thing an analysis found: ``kind`` (``"area.what"``) and ``values`` (name, number or short
    string) pairs. Build one with :meth:`of`; read a value with ``f["name"]`` or ``f.get("name")``."""

    kind: str
    values: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:  # lists (as JSON gives them back) kept as tuples: equal and hashable
        object.__setattr__(self, "values", tuple((str(k), tuple(v) if isinstance(v, list) else v)
                                                 for k, v in self.values))

    @classmethod
    def of(cls, kind: str, **values: Any) -> Finding:
        return cls(kind, tuple(values.items()))

    def get(self, name: str, default: Any = None) -> Any:
        return dict(self.values).get(name, default)

    def __getitem__(self, name: str) -> Any:
        return dict(self.values)[name]

    def __contains__(self, text: object) -> bool:
        """``"..." in finding``: whether its sentence says it (as for a note that is text)."""
        return isinstance(text, str) and text in str(self)

    def with_values(self, **values: Any) -> Finding:
        """The same finding with some values replaced or added."""
        return Finding.of(self.kind, **{**dict(self.values), **values})

    def __str__(self) -> str:
        from .render.findings import words

        return words(self)

    # read as text where a note used to be text: ``w.lower()``, ``w.startswith(...)``, ``"! " + w``
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(str(self), name)

    def __len__(self) -> int:
        return len(str(self))

    def __lt__(self, other: Any) -> bool:  # sorted(warnings): by their words, as when they were text
        return str(self) < str(other)

    def __add__(self, other: Any) -> str:
        return str(self) + other

    def __radd__(self, other: Any) -> str:
        return other + str(self)


def text_of(item: Any) -> str:
    """A finding's sentence, or a note that is already text (an older ledger row's) as it is."""
    return str(item)


__all__ = ["Finding", "text_of"]
