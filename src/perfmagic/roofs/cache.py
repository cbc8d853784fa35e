"""The ceilings cache on disk: one JSON file per machine fingerprint, written atomically.

Under ``$PERFMAGIC_CACHE_DIR`` or ``~/.cache/perfmagic/ceilings/``; written to a temporary file in the
same folder and moved into place with ``os.replace``, so an interrupted calibration leaves no file,
never half of one. A corrupt or unreadable file reads as None (re-measured). Only quiet calibrations
are written here (:mod:`perfmagic.roofs.ceilings` decides).
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .ceilings import Ceilings


def cache_dir(path: str | os.PathLike[str] | None = None) -> str:
    """The ceilings cache folder: ``path``, else ``$PERFMAGIC_CACHE_DIR``, else ``~/.cache/perfmagic/ceilings``."""
    if path is not None:
        return os.fspath(path)
    env = os.environ.get("PERFMAGIC_CACHE_DIR")
    return env if env else os.path.join(os.path.expanduser("~"), ".cache", "perfmagic", "ceilings")


def cache_path(fp: str, path: str | os.PathLike[str] | None = None) -> str:
    return os.path.join(cache_dir(path), f"ceilings-{fp}.json")


def load_cached(fp: str, path: str | os.PathLike[str] | None = None) -> Ceilings | None:
    """The cached ceilings for fingerprint ``fp``, or None (missing, unreadable, corrupt, other version)."""
    from .ceilings import Ceilings

    try:
        with open(cache_path(fp, path), encoding="utf-8") as f:
            return Ceilings.from_dict(json.load(f))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def save(c: Ceilings, path: str | os.PathLike[str] | None = None) -> str:
    """Write ``c`` atomically (temp file in the same folder + ``os.replace``); returns the file path."""
    folder = cache_dir(path)
    os.makedirs(folder, exist_ok=True)
    target = cache_path(c.fingerprint, path)
    fd, tmp = tempfile.mkstemp(prefix=".ceilings-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(c.to_dict(), f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return target


__all__ = ["cache_dir", "cache_path", "load_cached", "save"]
