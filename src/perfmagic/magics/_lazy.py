"""Magics whose module is imported on first use, so that ``%load_ext perfmagic`` stays cheap.

Building an ``@magic_arguments`` parser costs a few milliseconds per magic; with a dozen magics
that would dominate the load time. A :class:`LazyMagic` is registered under the magic's name and
imports its ``Magics`` class (building the parser) only when the magic is first run or its help
(``%%name?``) is asked for. The instance is shared per shell, with the same ``state`` as the others.
"""

from __future__ import annotations

import importlib
from typing import Any

from IPython.core.magic import MAGIC_NO_VAR_EXPAND_ATTR


class LazyMagic:
    """A callable standing in for ``module.Class.method`` until it is first used."""

    def __init__(self, shell: Any, state: dict[str, Any], kind: str, name: str, target: str) -> None:
        self.shell, self.state, self.kind, self.name = shell, state, kind, name
        self.module, rest = target.split(":")
        self.cls_name, self.method = rest.split(".")
        self.__name__ = name
        setattr(self, MAGIC_NO_VAR_EXPAND_ATTR, True)

    def _bound(self) -> Any:
        instances = self.state.setdefault("lazy_instances", {})
        key = (self.module, self.cls_name)
        inst = instances.get(key)
        if inst is None:
            mod = importlib.import_module(self.module, __package__)
            inst = instances[key] = getattr(mod, self.cls_name)(self.shell, self.state)
        return getattr(inst, self.method)

    def __call__(self, line: str, cell: str | None = None) -> Any:
        __tracebackhide__ = True
        fn = self._bound()
        return fn(line) if self.kind == "line" else fn(line, cell)

    @property  # type: ignore[override]
    def __doc__(self) -> str | None:  # what ``%%name?`` shows: the real magic's help, parser included
        return self._bound().__doc__

    def __repr__(self) -> str:
        return f"<perfmagic magic %{'%' if self.kind == 'cell' else ''}{self.name} (loaded on first use)>"


# name -> (kind, "module:Class.method"); the modules live in this package.
LAZY_MAGICS: dict[str, tuple[str, str]] = {
    "estimate": ("cell", "._estimate:EstimateMagics.estimate"),
    "dataloader_check": ("cell", "._dataloader:DataLoaderMagics.dataloader_check"),
    "flame": ("cell", "._flame:FlameMagics.flame"),
    "memory": ("cell", "._memprof:MemoryMagics.memory"),
    "lineprof": ("cell", "._lineprof:LineProfMagics.lineprof"),
}


def register(shell: Any, state: dict[str, Any]) -> list[tuple[str, str]]:
    """Register every lazy magic whose module exists; return the (kind, name) pairs registered."""
    import importlib.util

    done = []
    for name, (kind, target) in LAZY_MAGICS.items():
        module = target.split(":")[0]
        if importlib.util.find_spec(module, __package__) is None:
            continue  # not built yet
        shell.magics_manager.register_function(LazyMagic(shell, state, kind, name, target), magic_kind=kind,
                                                magic_name=name)
        done.append((kind, name))
    return done


def unregister(shell: Any, registered: list[tuple[str, str]]) -> None:
    mm = shell.magics_manager
    for kind, name in registered:
        mm.magics[kind].pop(name, None)
        if hasattr(mm.user_magics, name):
            try:
                delattr(mm.user_magics, name)
            except AttributeError:
                pass
