"""How a frame is named in the tables of ``%perf compare --where``: the library a file belongs to, and the
names of the rows that are not a function of the user's (the cell's own code, the measuring loop). Both
the sampler's rows (:mod:`.where`) and the profiler's functions (:mod:`.where_ops`) use them, so the two
tables join."""

from __future__ import annotations

import os
import sysconfig

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


__all__ = ["CELL", "HARNESS", "library_of"]
