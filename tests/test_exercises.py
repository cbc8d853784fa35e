"""Every per-magic notebook (01–08) has at least one exercise with a checkable outcome.

Read statically from the committed notebooks (they are generated from tools/notebooks/, and
test_notebook_sources checks that they match). An exercise is, in this order:

1. a markdown cell ``### Exercise N: title`` that states the outcome up front ("You are done when the
   check cell prints `exercise N: passed`");
2. a code cell for the student's attempt, ``# ... your code here`` and nothing else that runs, so an
   unattended run passes over it;
3. one or more solution cells, tagged ``solution`` and collapsed, one of which states the expected
   verdict (``# Expected: ...``);
4. a check cell, plain Python with ``assert``, whose expectation (``perfmagic.expect``, checked by
   ``notebooks/run.py --check``) matches ``exercise N: passed``.

The notebooks run in CI with ``notebooks/run.py --check``: the solutions and checks run there.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("0[1-8]_*.ipynb"))
HEADING = re.compile(r"^### Exercise (\d+): \S")


def _tags(cell: Any) -> list[str]:
    return list(cell.metadata.get("tags", []))


def _expect(cell: Any) -> list[str]:
    meta = cell.metadata.get("perfmagic", {})
    pats = meta.get("expect", []) if isinstance(meta, dict) else []
    return [pats] if isinstance(pats, str) else list(pats)


def exercises(nb: Any) -> list[tuple[int, int, list[Any]]]:
    """(number, index of the heading, the cells up to the next heading of any level) per exercise."""
    out = []
    for i, cell in enumerate(nb.cells):
        m = HEADING.match(cell.source) if cell.cell_type == "markdown" else None
        if not m:
            continue
        body = []
        for c in nb.cells[i + 1:]:
            if c.cell_type == "markdown" and c.source.startswith("#"):
                break
            body.append(c)
        out.append((int(m.group(1)), i, body))
    return out


def test_there_are_eight_per_magic_notebooks() -> None:
    assert [p.name[:2] for p in NOTEBOOKS] == [f"0{i}" for i in range(1, 9)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_each_notebook_has_a_checkable_exercise(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    found = exercises(nb)
    assert found, f"{path.name}: no '### Exercise N: title' markdown cell"
    numbers = [n for n, _, _ in found]
    assert numbers == list(range(1, len(numbers) + 1)), f"{path.name}: exercises numbered {numbers}"
    for n, i, body in found:
        where = f"{path.name}, exercise {n} (cell {i + 1})"
        text = nb.cells[i].source
        # 1. the outcome, up front
        assert "You are done when" in text and f"`exercise {n}: passed`" in text, (
            f"{where}: the markdown must state the checkable outcome up front "
            f"(\"You are done when the check cell prints `exercise {n}: passed`\")")
        assert "Hint" in text, f"{where}: no hint"
        code = [c for c in body if c.cell_type == "code"]
        # 2. the attempt: a cell that says where the student's code goes and runs as it is
        attempts = [k for k, c in enumerate(code) if "your code here" in c.source]
        assert attempts, f"{where}: no cell for the student's attempt ('# ... your code here')"
        attempt = code[attempts[0]]
        assert all(not ln.strip() or ln.lstrip().startswith("#") or ln.strip() == "pass"
                   for ln in attempt.source.splitlines()), (
            f"{where}: the attempt cell must run unattended (comments or pass only): {attempt.source!r}")
        after = code[attempts[0] + 1:]
        # 3. the solution: tagged, collapsed, with the expected verdict and why
        solutions = [c for c in after if "solution" in _tags(c)]
        assert solutions, f"{where}: no solution cell (tagged 'solution') after the attempt"
        for c in solutions:
            assert c.metadata.get("jupyter", {}).get("source_hidden") is True, (
                f"{where}: a solution cell is not collapsed (metadata jupyter.source_hidden)")
        assert any(re.search(r"^\s*# Expected: \S.*", c.source, re.M) for c in solutions), (
            f"{where}: no solution cell states the expected verdict ('# Expected: ... because ...')")
        # 4. the check: after the solutions, asserting, expected to print "exercise N: passed"
        last_solution = max(k for k, c in enumerate(after) if "solution" in _tags(c))
        checks = [c for c in after[last_solution + 1:]
                  if "solution" not in _tags(c)
                  and any(re.search(p, f"exercise {n}: passed", re.M) for p in _expect(c))]
        assert checks, (f"{where}: no check cell after the solution whose expected output "
                        f"matches 'exercise {n}: passed'")
        for c in checks:
            assert "assert " in c.source and f"exercise {n}: passed" in c.source, (
                f"{where}: the check cell must assert the outcome and print 'exercise {n}: passed'")
            assert not any(re.search(p, f"exercise {n}: failed", re.M) for p in _expect(c)), (
                f"{where}: the check's expectation must not match a failure")


def test_the_builder_tags_solutions_as_the_workshop_does() -> None:
    """nbbuild.solution() marks a cell as make_10_one_change_at_a_time's code(..., solution=True) does."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("nbbuild", ROOT / "tools" / "notebooks" / "nbbuild.py")
    assert spec and spec.loader
    nbbuild = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nbbuild)
    kind, src, expect, meta = nbbuild.solution("x = 1\n", r"^x")
    assert (kind, src, expect) == ("code", "x = 1", (r"^x",))
    assert meta == {"jupyter": {"source_hidden": True}, "tags": ["solution"]}
    kind, src, expect = nbbuild.check("print('exercise 3: passed')", 3)
    assert len(expect) == 1 and re.search(expect[0], "exercise 3: passed")
    assert not re.search(expect[0], "exercise 3: failed") and not re.search(expect[0], "exercise 13: passed")
