"""Execute notebooks in a real kernel and leave a readable result beside each one.

    python notebooks/run.py notebooks/00_tour.ipynb [more.ipynb ...]

For each notebook: runs every cell top to bottom in a fresh kernel of this Python (nbclient), writes
the executed copy to ``notebooks/_executed/NAME.ipynb`` (open it in JupyterLab: ``jupyter lab
notebooks/_executed/NAME.ipynb``) and an HTML export to ``notebooks/NAME.html`` (any browser, offline).
A failing cell stops the run with the cell's number, its source and the error.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def drop_dead_widget_views(nb: Any) -> int:
    """Remove widget views whose kernel is gone, so every output shows its static fallback.

    A widget view saved without its model state renders as "Error displaying widget: model not
    found" when the notebook is reopened; the PNG/text fallback beside it reads everywhere.
    """
    dropped = 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if WIDGET_VIEW in data and len(data) > 1:
                del data[WIDGET_VIEW]
                dropped += 1
    nb.metadata.pop("widgets", None)
    return dropped


def run(path: Path, timeout: int) -> Path:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    from nbconvert import HTMLExporter

    nb = nbformat.read(path, as_version=4)
    # the kernel learns its notebook as under jupyter-server, so the ledger is this notebook's
    os.environ["JPY_SESSION_NAME"] = str(path.resolve())
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", store_widget_state=False,
                            resources={"metadata": {"path": str(path.parent)}})
    t = time.perf_counter()
    try:
        client.execute()
    except CellExecutionError as exc:
        print(f"\n{path}: a cell failed.\n{exc}", file=sys.stderr)
        raise SystemExit(1) from None
    drop_dead_widget_views(nb)
    out_dir = path.parent / "_executed"
    out_dir.mkdir(exist_ok=True)
    executed = out_dir / path.name
    nbformat.write(nb, executed)
    body, _ = HTMLExporter().from_notebook_node(nb)
    html = path.with_suffix(".html")
    html.write_text(body, encoding="utf-8")
    print(f"{path}: executed in {time.perf_counter() - t:.1f} s -> {executed} and {html}")
    return html


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("notebooks", nargs="+", type=Path)
    ap.add_argument("--timeout", type=int, default=600, help="seconds per cell (default 600)")
    args = ap.parse_args()
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    for nb in args.notebooks:
        run(nb, args.timeout)


if __name__ == "__main__":
    main()
