"""How a frame is named in the tables of ``%perf compare --where``: the library a file belongs to, and the
names of the rows that are not a function of the user's (the cell's own code, the measuring loop). Both
the sampler's rows (:mod:`.where`) and the profiler's functions (:mod:`.where_ops`) use them, so the two
tables join."""

from __future__ import annotations

import os
import sysconfig
from typing import Any

HARNESS = "(timing loop)"  # samples between two calls of the code: the measuring loop's own time
CELL = "<cell>"            # the measured cell's own code (its compiled function's frame)

_PERFMAGIC_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _library_roots() -> tuple[tuple[str, str], ...]:
    """(directory, kind) of installed packages ("site") and of the standard library ("stdlib")."""
    paths = sysconfig.get_paths()
    roots = [(os.path.abspath(paths[k]) + os.sep, "site") for k in ("purelib", "platlib") if paths.get(k)]
    roots += [(os.path.abspath(paths[k]) + os.sep, "stdlib") for k in ("stdlib", "platstdlib") if paths.get(k)]
    return tuple(sorted(set(roots), key=lambda r: -len(r[0])))


_ROOTS = _library_roots()
_LIB_CACHE: dict[str, str] = {}


def library_of(file: str) -> str:
    """The library a file belongs to (``numpy``, ``torch``, ``json``; ``perfmagic`` for the harness), or
    ``""`` for the user's own code (a notebook cell, a script, a package outside site-packages)."""
    lib = _LIB_CACHE.get(file)
    if lib is not None:
        return lib
    lib = ""
    if file.startswith("<frozen "):
        lib = file[len("<frozen "):].rstrip(">").split(".")[0]
    elif file.startswith(_PERFMAGIC_DIR + os.sep):
        lib = "perfmagic"
    elif not file.startswith("<"):
        path = os.path.abspath(file)
        for root, _kind in _ROOTS:
            if path.startswith(root):
                lib = path[len(root):].split(os.sep)[0].removesuffix(".py") or "?"
                break
        else:
            for marker in (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep):
                if marker in path:
                    lib = path.split(marker, 1)[1].split(os.sep)[0].removesuffix(".py")
                    break
    _LIB_CACHE[file] = lib
    return lib


def redefined(in_a: set[Any], in_b: set[Any]) -> dict[Any, Any]:
    """A function redefined between A and B (same name and library, another cell) is one row, B's: ``{A's key:
    B's key}`` for each (name, library) with exactly two keys (name, file, library), one seen in A alone and
    the other in B alone, so two different functions of one name (``forward`` of two modules) stay apart."""
    by_name: dict[tuple[str, str], list[Any]] = {}
    for k in in_a | in_b:
        by_name.setdefault((k[0], k[2]), []).append(k)
    out = {}
    for ks in by_name.values():
        only_a = [k for k in ks if k in in_a and k not in in_b]
        only_b = [k for k in ks if k in in_b and k not in in_a]
        if len(ks) == 2 and len(only_a) == 1 and len(only_b) == 1:
            out[only_a[0]] = only_b[0]
    return out


__all__ = ["CELL", "HARNESS", "library_of", "redefined"]
