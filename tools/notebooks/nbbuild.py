"""Build the per-magic notebooks (``notebooks/01_*.ipynb`` … ``08_*.ipynb``) from their sources here.

    python tools/notebooks/nbbuild.py                 # every notebook
    python tools/notebooks/nbbuild.py 03 07           # only those whose name starts with 03 or 07

Each ``nbNN_*.py`` beside this file defines ``NAME`` (the notebook's file name, without ``.ipynb``)
and ``CELLS``, a list made with :func:`md`, :func:`code` and :func:`magic`. A magic cell carries its
expected output in the cell metadata, ``{"perfmagic": {"expect": [REGEX, ...]}}``: regular
expressions that ``re.search`` (MULTILINE) the cell's printed text when the notebooks are checked.
Notebooks are written without outputs, with stable cell ids, for the ``python3`` kernel.

Exercises (docs/teaching.md, "Exercises in notebooks 01–08") are made of a markdown cell
``### Exercise N: title`` that states the checkable outcome, a code cell for the student's attempt,
:func:`solution` cells (tagged ``solution`` and collapsed, as in the workshop notebook; they run with
the rest, so the notebook checks itself unattended) and a :func:`check` cell that prints
``exercise N: passed`` or raises AssertionError with what was expected and what was measured.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent
# PERFMAGIC_NB_OUT: write elsewhere (the test that the committed notebooks match their sources uses it)
NOTEBOOKS = Path(os.environ.get("PERFMAGIC_NB_OUT") or HERE.parent.parent / "notebooks")


def _clean(src: str) -> str:
    return textwrap.dedent(src).strip("\n")


def md(src: str) -> tuple[str, str, tuple[str, ...]]:
    """A markdown cell."""
    return ("markdown", _clean(src), ())


def code(src: str) -> tuple[str, str, tuple[str, ...]]:
    """A plain code cell."""
    return ("code", _clean(src), ())


def magic(src: str, *expect: str) -> tuple[str, str, tuple[str, ...]]:
    """A code cell that runs a magic, with one to three regexes its printed text must match."""
    if not 1 <= len(expect) <= 3:
        raise ValueError(f"a magic cell needs one to three expectations, got {len(expect)}: {src!r}")
    return ("code", _clean(src), tuple(expect))


def solution(src: str, *expect: str) -> tuple[str, str, tuple[str, ...], dict[str, Any]]:
    """A solution cell: code tagged ``solution`` and collapsed (``jupyter.source_hidden``), with zero to
    three regexes its printed text must match. It runs with the rest of the notebook."""
    if len(expect) > 3:
        raise ValueError(f"a solution cell takes at most three expectations, got {len(expect)}: {src!r}")
    return ("code", _clean(src), tuple(expect), {"jupyter": {"source_hidden": True}, "tags": ["solution"]})


def check(src: str, number: int) -> tuple[str, str, tuple[str, ...]]:
    """The check cell of exercise ``number``: it must print ``exercise N: passed`` (its expectation)."""
    return ("code", _clean(src), (rf"^exercise {number}: passed",))


def build(name: str, cells: list[tuple[Any, ...]]) -> Path:
    nb = new_notebook()
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    prefix = name.split("_", 1)[0]
    for i, (kind, src, expect, *meta) in enumerate(cells):
        cell: Any = new_markdown_cell(src) if kind == "markdown" else new_code_cell(src)
        cell.id = f"nb{prefix}-{i:02d}"
        if expect:
            cell.metadata["perfmagic"] = {"expect": list(expect)}
        for extra in meta:
            cell.metadata.update(extra)
        nb.cells.append(cell)
    nbformat.validate(nb)
    path = NOTEBOOKS / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path


def write_notebook(cells: list[Any], target: Path) -> None:
    """Write the cells of a workshop-style generator (``make_09_…``, ``make_10_…``: cells made with their own
    ``md``/``code``) to ``target``: the ipykernel kernelspec, stable cell ids (a hash of position and source,
    which keeps diffs of regenerated notebooks small), validated."""
    import hashlib

    nb = new_notebook(cells=cells)
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    for i, cell in enumerate(nb.cells):
        cell.id = hashlib.sha1(f"{i}:{cell.source}".encode()).hexdigest()[:8]
    nbformat.validate(nb)
    nbformat.write(nb, target)
    print(f"wrote {target} ({len(nb.cells)} cells)")


def _load(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = mod
    spec.loader.exec_module(mod)
    return mod


def main(argv: list[str]) -> None:
    sys.path.insert(0, str(HERE))
    for path in sorted(HERE.glob("nb[0-9][0-9]_*.py")):
        mod = _load(path)
        if argv and not any(mod.NAME.startswith(a) for a in argv):
            continue
        out = build(mod.NAME, mod.CELLS)
        n_magic = sum(1 for c in mod.CELLS if c[2])
        print(f"{out}: {len(mod.CELLS)} cells, {n_magic} with expectations")


if __name__ == "__main__":
    main(sys.argv[1:])
