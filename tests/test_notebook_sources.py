"""The committed notebooks are exactly what their generators in tools/notebooks/ write.

Notebooks are never edited by hand: a hand edit would be lost (with its expectations) the next time
the generator runs. This test regenerates every notebook into a temporary folder and compares.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "tools" / "notebooks"


def _cells(path: Path) -> list[tuple[str, str, dict]]:
    nb = nbformat.read(path, as_version=4)
    return [(c.cell_type, c.source, dict(c.metadata)) for c in nb.cells]


def test_committed_notebooks_match_their_generators(tmp_path: Path) -> None:
    env = {**os.environ, "PERFMAGIC_NB_OUT": str(tmp_path)}
    for script in ("nbbuild.py", "make_tour.py", "make_09_pool_class_results.py", "make_10_one_change_at_a_time.py"):
        subprocess.run([sys.executable, str(TOOLS / script)], check=True, env=env, cwd=ROOT,
                       capture_output=True, text=True)
    made = sorted(p.name for p in tmp_path.glob("*.ipynb"))
    committed = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9]*.ipynb"))
    assert made == committed, "a notebook without a generator, or a generator without its notebook"
    for name in made:
        fresh, ours = _cells(tmp_path / name), _cells(ROOT / "notebooks" / name)
        assert len(fresh) == len(ours), f"{name}: {len(ours)} cells committed, the generator writes {len(fresh)}"
        for i, (a, b) in enumerate(zip(fresh, ours)):
            assert a == b, (f"{name} cell {i} differs from its generator (edit tools/notebooks/, then run it):\n"
                            f"generator: {a[1][:200]!r}\ncommitted: {b[1][:200]!r}")
