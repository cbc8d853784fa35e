"""Output that survives every front end: a notebook executed by plain nbclient (not the project's
runner, nothing stripped) and exported by plain ``nbconvert --to html`` shows every magic's headline and
figure, with no widget view and no progress bar left behind."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
nbconvert = pytest.importorskip("nbconvert")
torch = pytest.importorskip("torch")

pytestmark = pytest.mark.slow

SETUP = """\
import time, torch
from torch.utils.data import DataLoader, TensorDataset
x = torch.randn(256, 256)
loader = DataLoader(TensorDataset(torch.randn(64, 8)), batch_size=8)
def work(n):
    time.sleep(n * 2e-7)
def hot(n):
    s = 0
    for i in range(n):
        s += i * i
    return s
"""

# (cell, text the headline must show)
CELLS = [
    ("%%gpubench -l nap -b 0.3\ntime.sleep(0.002)", "median"),
    ("%%roofline -l mm -b 0.3\nx @ x", "-bound"),
    ("%%amdahl workers=1,2 -b 0.2 --rounds 1\ntime.sleep(0.004 / workers)", "speedup"),
    ("%%estimate n=200_000 -b 1s\nwork(n)", "estimate for n=200,000"),
    ("%%dataloader_check loader\ntime.sleep(0.002)", "data"),
    ("%%memory\nkeep = bytearray(64 * 2**20)", "peak"),
    ("%%lineprof -f hot\nhot(20_000)", "hot"),
]


def test_plain_nbconvert_export_shows_every_magic(tmp_path: Path, roofs, monkeypatch) -> None:
    monkeypatch.delenv("PERFMAGIC_LEDGER_DIR", raising=False)
    cells = ["%load_ext perfmagic", SETUP] + [c for c, _ in CELLS]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_notebook_node(nb)  # the default template, as a user would run it
    assert "widget-view+json" not in body and "Error displaying widget" not in body
    for (source, needle), cell in zip(CELLS, nb.cells[2:]):
        name = source.split()[0]
        kinds = [o.output_type for o in cell.outputs]
        assert "error" not in kinds, (name, cell.outputs)
        shown = [o for o in cell.outputs if o.output_type in ("display_data", "execute_result")
                 and (o.data.get("text/plain") or "").strip()]
        assert shown, f"{name}: no output"
        html_out = "".join(o.data.get("text/html", "") for o in shown)
        assert needle in html_out, f"{name}: {needle!r} not in its HTML"
        assert not any("widget-view+json" in o.data for o in cell.outputs), name
        # no progress bar left behind: no output that is a bar, and no 0% line
        assert not any(re.search(r"<progress|\b0%\|", o.get("data", {}).get("text/html", "")
                                 + o.get("data", {}).get("text/plain", "")) for o in cell.outputs), name
        if name != "%%lineprof":  # a table, not a figure
            pngs = [o.data["image/png"] for o in shown if "image/png" in o.data]
            assert pngs and base64.b64decode(pngs[0])[:8] == b"\x89PNG\r\n\x1a\n", f"{name}: no figure"
            assert "data:image/png;base64," in html_out, f"{name}: the HTML does not carry the figure"
        # the exported page itself shows the headline and embeds the figure (nbconvert re-serialises HTML)
        head = (shown[0].data.get("text/plain") or "").splitlines()[0]
        assert html.escape(head[:30], quote=False) in body, f"{name}: headline missing from the exported page"
        if name != "%%lineprof":
            assert pngs[0][:80] in body, f"{name}: the figure is not in the exported page"
