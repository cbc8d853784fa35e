"""The one registry of perfmagic's magics: each is imported on first use, so that ``%load_ext perfmagic``
stays cheap.

Building an ``@magic_arguments`` parser costs a few milliseconds per magic; with ten magics that would
dominate the load time. :data:`MAGICS` names every magic, its kind and the ``Magics`` method that runs
it. :func:`register` puts a :class:`LazyMagic` under each name; it imports the method's module (building
the parser) only when the magic is first run or its help (``%%name?``) is asked for. One instance per
``Magics`` class is shared per shell, with the shell's ``state`` (the ledger hook, the cell id).
"""

from __future__ import annotations

import importlib
from typing import Any

from IPython.core.magic import MAGIC_NO_VAR_EXPAND_ATTR

#: name -> (kind, "module:Class.method"); kind is IPython's: "line", "cell" or "line_cell". The modules
#: live in this package. The documentation's option tables (tools/mkdocs_hooks.py) read this table too.
MAGICS: dict[str, tuple[str, str]] = {
    "gpubench": ("cell", "._bench:BenchMagics.gpubench"),
    "perf": ("line", "._perf:PerfMagics.perf"),
    "roofline": ("line_cell", "._roofline:RooflineMagics.roofline"),
    "amdahl": ("cell", "._amdahl:ScalingMagics.amdahl"),
    "littles": ("line", "._amdahl:ScalingMagics.littles"),
    "estimate": ("cell", "._estimate:EstimateMagics.estimate"),
    "dataloader_check": ("cell", "._dataloader:DataLoaderMagics.dataloader_check"),
    "flame": ("cell", "._flame:FlameMagics.flame"),
    "memory": ("cell", "._memprof:MemoryMagics.memory"),
    "lineprof": ("cell", "._lineprof:LineProfMagics.lineprof"),
}
#: the magics whose line IPython expands (``{expr}``, ``$name``) before calling them, as a plain magic's is:
#: ``%perf baseline {r.run_id}``. The others keep their line as typed (``@no_var_expand``: code and
#: expressions such as ``--flops 2*n**3`` or ``{...}`` in setup code are theirs to read).
EXPANDS_VARS = frozenset({"perf", "littles"})


def method_of(name: str) -> Any:
    """The unbound ``Magics`` method behind magic ``name`` (its ``.parser`` is the option parser)."""
    module, rest = MAGICS[name][1].split(":")
    cls_name, method = rest.split(".")
    return getattr(getattr(importlib.import_module(module, __package__), cls_name), method)


class LazyMagic:
    """A callable standing in for ``module.Class.method`` until it is first used."""

    def __init__(self, shell: Any, state: dict[str, Any], kind: str, name: str, target: str) -> None:
        self.shell, self.state, self.kind, self.name = shell, state, kind, name
        self.module, rest = target.split(":")
        self.cls_name, self.method = rest.split(".")
        self.__name__ = name
        if name not in EXPANDS_VARS:  # IPython reads this attribute before calling: it must be right unloaded
            setattr(self, MAGIC_NO_VAR_EXPAND_ATTR, True)

    def _bound(self) -> Any:
        instances = self.state.setdefault("magic_instances", {})
        key = (self.module, self.cls_name)
        inst = instances.get(key)
        if inst is None:
            mod = importlib.import_module(self.module, __package__)
            inst = instances[key] = getattr(mod, self.cls_name)(self.shell, self.state)
        return getattr(inst, self.method)

    def __call__(self, line: str, cell: str | None = None) -> Any:
        __tracebackhide__ = True
        fn = self._bound()
        if self.kind == "line" or (self.kind == "line_cell" and cell is None):
            return fn(line)
        return fn(line, cell)

    @property  # type: ignore[override]
    def __doc__(self) -> str | None:  # what ``%%name?`` shows: the real magic's help, parser included
        return self._bound().__doc__

    def __repr__(self) -> str:
        prefix = {"line": "%", "cell": "%%", "line_cell": "%/%%"}[self.kind]
        return f"<perfmagic magic {prefix}{self.name} (loaded on first use)>"


def register(shell: Any, state: dict[str, Any]) -> list[tuple[str, str]]:
    """Register every magic of :data:`MAGICS`; return the (kind, name) pairs registered."""
    done = []
    for name, (kind, target) in MAGICS.items():
        shell.magics_manager.register_function(LazyMagic(shell, state, kind, name, target), magic_kind=kind,
                                                magic_name=name)
        done.append((kind, name))
    return done


def unregister(shell: Any, registered: list[tuple[str, str]]) -> None:
    mm = shell.magics_manager
    for kind, name in registered:
        for table in (("line", "cell") if kind == "line_cell" else (kind,)):
            mm.magics[table].pop(name, None)
        if hasattr(mm.user_magics, name):
            try:
                delattr(mm.user_magics, name)
            except AttributeError:
                pass
