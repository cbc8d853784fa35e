"""The ceilings cache on disk: one JSON file per machine fingerprint, written atomically.

Under ``$PERFMAGIC_CACHE_DIR`` or ``~/.cache/perfmagic/ceilings/``; written to a temporary file in the
same folder and moved into place with ``os.replace``, so an interrupted calibration leaves no file,
never half of one. A corrupt or unreadable file reads as None (re-measured). Only quiet calibrations
are written here (:mod:`perfmagic.roofs.ceilings` decides, and turns the stored dict into its
:class:`~perfmagic.roofs.ceilings.Ceilings`: this module knows only files and dicts).
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any


def cache_dir(path: str | os.PathLike[str] | None = None) -> str:
    """The ceilings cache folder: ``path``, else ``$PERFMAGIC_CACHE_DIR``, else ``~/.cache/perfmagic/ceilings``."""
    if path is not None:
        return os.fspath(path)
    env = os.environ.get("PERFMAGIC_CACHE_DIR")
    return env if env else os.path.join(os.path.expanduser("~"), ".cache", "perfmagic", "ceilings")


def cache_path(fp: str, path: str | os.PathLike[str] | None = None) -> str:
    return os.path.join(cache_dir(path), f"ceilings-{fp}.json")


def read(fp: str, path: str | os.PathLike[str] | None = None) -> dict[str, Any] | None:
    """The cached ceilings of fingerprint ``fp`` as stored (a dict), or None (missing, unreadable, not JSON)."""
    try:
        with open(cache_path(fp, path), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write(fp: str, data: dict[str, Any], path: str | os.PathLike[str] | None = None) -> str:
    """Write the ceilings ``data`` of fingerprint ``fp`` atomically (temp file in the same folder +
    ``os.replace``); returns the file path."""
    folder = cache_dir(path)
    os.makedirs(folder, exist_ok=True)
    target = cache_path(fp, path)
    fd, tmp = tempfile.mkstemp(prefix=".ceilings-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True)
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


__all__ = ["cache_dir", "cache_path", "read", "write"]
