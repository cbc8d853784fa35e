"""The one way every figure is made: matplotlib's object API on an Agg canvas, returned as PNG bytes.

No pyplot and no global backend state, so drawing works in any kernel, thread or script. matplotlib
is imported here, on the first figure, never at ``%load_ext``.
"""

from __future__ import annotations

import io
from typing import Any


def new_figure(width: float, height: float) -> Any:
    """A ``width`` × ``height`` inch figure at 100 dpi, constrained layout, on its own Agg canvas."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def png_bytes(fig: Any) -> bytes:
    """The figure as PNG bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()
