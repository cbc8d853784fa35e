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
    "bench", "bench_pair", "compare", "amdahl", "AmdahlResult", "amdahl_ranks", "RanksResult", "distributed_bench", "scalability", "littles", "estimate", "EstimateResult", "flame", "FlameResult", "dataloader_check", "DataLoaderResult", "memory", "MemoryResult", "lineprof", "LineProfResult", "roofline", "RooflineResult", "ceilings", "Ceilings", "BenchResult", "PairResult", "RunComparison", "WhereResult", "ledger", "run", "Ledger", "next_step", "NextStep", "busy_neighbours", "PerfmagicError", "BadOptionError", "SetupError",
    "BenchInterrupted", "load_ipython_extension", "unload_ipython_extension", "__version__",
]

_LAZY = {
    "bench": (".timing.bench", "bench"),
    "BenchResult": (".timing.results", "BenchResult"),
    "bench_pair": (".timing.pair", "bench_pair"),
    "PairResult": (".timing.pair", "PairResult"),
    "compare": (".timing.flow", "compare_runs"),
    "busy_neighbours": (".core.neighbours", "busy_neighbours"),
    "roofline": (".roofs.roofline", "roofline"),
    "amdahl": (".scaling.sweep", "amdahl"),
    "AmdahlResult": (".scaling.result", "AmdahlResult"),
    "amdahl_ranks": (".ranks.sweep", "amdahl_ranks"),
    "RanksResult": (".ranks.result", "RanksResult"),
    "distributed_bench": (".ranks.distributed", "distributed_bench"),
    "scalability": (".scaling.scalability", "scalability"),
    "littles": (".scaling.littles", "littles"),
    "estimate": (".estimation.estimate", "estimate"),
    "EstimateResult": (".estimation.estimate", "EstimateResult"),
    "flame": (".profile.flame", "flame"),
    "dataloader_check": (".dataloader.check", "dataloader_check"),
    "memory": (".profile.memory", "memory"),
    "MemoryResult": (".profile.memory", "MemoryResult"),
    "lineprof": (".profile.lineprof", "lineprof"),
    "LineProfResult": (".profile.lineprof", "LineProfResult"),
    "DataLoaderResult": (".dataloader.result", "DataLoaderResult"),
    "FlameResult": (".profile.flame", "FlameResult"),
    "RooflineResult": (".roofs.roofline", "RooflineResult"),
    "ceilings": (".roofs.ceilings", "ceilings"),
    "Ceilings": (".roofs.ceilings", "Ceilings"),
    "RunComparison": (".timing.history", "RunComparison"),
    "WhereResult": (".profile.where", "WhereResult"),
    "write_guard": (".guard", "write_guard"),
    "Ledger": (".storage.ledger", "Ledger"),
    "PerfmagicError": (".errors", "PerfmagicError"),
    "BadOptionError": (".errors", "BadOptionError"),
    "SetupError": (".errors", "SetupError"),
    "BenchInterrupted": (".errors", "BenchInterrupted"),
    "next_step": (".advisor.next", "next_step"), "NextStep": (".advisor.result", "NextStep"),
}

if TYPE_CHECKING:  # pragma: no cover
    from .timing.bench import bench
    from .scaling.sweep import AmdahlResult, amdahl
    from .roofs.ceilings import Ceilings, ceilings
    from .scaling.littles import littles
    from .estimation.estimate import EstimateResult, estimate
    from .profile.flame import FlameResult, flame
    from .dataloader.check import DataLoaderResult, dataloader_check
    from .profile.lineprof import LineProfResult, lineprof
    from .profile.memory import MemoryResult, memory
    from .timing.flow import compare_runs as compare
    from .timing.history import RunComparison
    from .roofs.roofline import RooflineResult, roofline
    from .timing.pair import PairResult, bench_pair
    from .errors import BadOptionError, BenchInterrupted, PerfmagicError, SetupError
    from .storage.ledger import Ledger
    from .timing.results import BenchResult


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        mod, attr = _LAZY[name]
        value = getattr(importlib.import_module(mod, __name__), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'perfmagic' has no attribute {name!r}")


def ledger(magic: str | None = None, view: str | None = None, *, all_notebooks: bool = False,
           newest_first: bool = False) -> Any:
    """The runs of this notebook (or of every notebook in its folder) as a pandas DataFrame.

    Default: the common columns, one row per run (id, created, magic, label, status, the primary
    metric's name, value and unit, the change vs the label's baseline, code), with proper dtypes.
    ``magic="roofline"``: that magic's own metric columns too; ``view="long"``: one row per run and
    metric. Outside IPython the ledger of the working directory is used (``$PERFMAGIC_LEDGER_DIR``
    overrides the folder).
    """
    from .storage.frame import ledger_frame
    from .storage.session import current_ledger

    return ledger_frame(magic, view, ledger=current_ledger(), all_notebooks=all_notebooks, newest_first=newest_first)


def run(run_id: Any, *, ledger: Any = None) -> Any:
    """Run ``run_id`` (``12`` or ``"#12"``) of this notebook's ledger rebuilt into the result it was: a
    :class:`BenchResult`, :class:`RooflineResult`, :class:`AmdahlResult`... with its raw samples, shown as
    when it was measured (text, HTML, figure), after a kernel restart too. ``ledger``: a :class:`Ledger` or a
    ledger folder (default: this notebook's; ``$PERFMAGIC_LEDGER_DIR`` overrides the folder). A bad or
    unknown id, or a run recorded before perfmagic stored what its result needs: :class:`PerfmagicError`."""
    from .storage.record import run as _run

    return _run(run_id, ledger=ledger)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext perfmagic``: register the magics (imports only the thin magic layer)."""
    from .magics import load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext perfmagic``: remove every magic and hook that loading installed."""
    from .magics import unload

    unload(ipython)
