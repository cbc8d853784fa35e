"""perfmagic: a notebook performance lab.

``%load_ext perfmagic`` registers the magics; the same analyses are plain functions for scripts::

    import perfmagic
    r = perfmagic.bench("a @ b", setup="import torch; a = b = torch.randn(512, 512)")
    print(r.median, r.ci)
    perfmagic.ledger()          # every recorded run of this notebook, as a pandas DataFrame

Importing this package is cheap: every submodule (and torch, pandas, matplotlib, ipywidgets) is
imported only when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "bench", "bench_pair", "compare", "amdahl", "AmdahlResult", "littles", "estimate", "EstimateResult", "flame", "FlameResult", "dataloader_check", "DataLoaderResult", "memory", "MemoryResult", "lineprof", "LineProfResult", "roofline", "RooflineResult", "ceilings", "Ceilings", "BenchResult", "PairResult", "RunComparison", "ledger", "Ledger", "PerfmagicError", "BadOptionError", "SetupError",
    "BenchInterrupted", "load_ipython_extension", "unload_ipython_extension", "__version__",
]

_LAZY = {
    "bench": ("._engine", "bench"),
    "BenchResult": ("._results", "BenchResult"),
    "bench_pair": ("._pair", "bench_pair"),
    "PairResult": ("._pair", "PairResult"),
    "compare": ("._history", "compare"),
    "roofline": ("._roofline", "roofline"),
    "amdahl": ("._amdahl", "amdahl"),
    "AmdahlResult": ("._amdahl", "AmdahlResult"),
    "littles": ("._little", "littles"),
    "estimate": ("._estimate", "estimate"),
    "EstimateResult": ("._estimate", "EstimateResult"),
    "flame": ("._flame", "flame"),
    "dataloader_check": ("._dataloader", "dataloader_check"),
    "memory": ("._memprof", "memory"),
    "MemoryResult": ("._memprof", "MemoryResult"),
    "lineprof": ("._lineprof", "lineprof"),
    "LineProfResult": ("._lineprof", "LineProfResult"),
    "DataLoaderResult": ("._dataloader", "DataLoaderResult"),
    "FlameResult": ("._flame", "FlameResult"),
    "RooflineResult": ("._roofline", "RooflineResult"),
    "ceilings": ("._ceilings", "ceilings"),
    "Ceilings": ("._ceilings", "Ceilings"),
    "RunComparison": ("._history", "RunComparison"),
    "Ledger": ("._ledger", "Ledger"),
    "PerfmagicError": ("._errors", "PerfmagicError"),
    "BadOptionError": ("._errors", "BadOptionError"),
    "SetupError": ("._errors", "SetupError"),
    "BenchInterrupted": ("._errors", "BenchInterrupted"),
}

if TYPE_CHECKING:  # pragma: no cover
    from ._engine import bench
    from ._amdahl import AmdahlResult, amdahl
    from ._ceilings import Ceilings, ceilings
    from ._little import littles
    from ._estimate import EstimateResult, estimate
    from ._flame import FlameResult, flame
    from ._dataloader import DataLoaderResult, dataloader_check
    from ._lineprof import LineProfResult, lineprof
    from ._memprof import MemoryResult, memory
    from ._history import RunComparison, compare
    from ._roofline import RooflineResult, roofline
    from ._pair import PairResult, bench_pair
    from ._errors import BadOptionError, BenchInterrupted, PerfmagicError, SetupError
    from ._ledger import Ledger
    from ._results import BenchResult


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        mod, attr = _LAZY[name]
        value = getattr(importlib.import_module(mod, __name__), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'perfmagic' has no attribute {name!r}")


def ledger(*, all_notebooks: bool = False, newest_first: bool = False) -> Any:
    """The ledger of this notebook (or of every notebook in its folder) as a pandas DataFrame.

    One row per recorded run, one column per metric. Outside IPython the ledger of the working
    directory is used (``$PERFMAGIC_LEDGER_DIR`` overrides the folder).
    """
    from ._session import current_ledger

    return current_ledger().to_frame(notebook=None if all_notebooks else ..., newest_first=newest_first)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext perfmagic``: register the magics (imports only the thin magic layer)."""
    from .magics import load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext perfmagic``: remove every magic and hook that loading installed."""
    from .magics import unload

    unload(ipython)
