"""Notebook discovery: which notebook this kernel runs, and where its ledger folder is.

:func:`locate` reads ``$PERFMAGIC_LEDGER_DIR`` (the ledger folder itself), then
``user_ns["__session__"]`` (ipykernel; may be relative to the server root),
``user_ns["__vsc_ipynb_file__"]`` (VS Code), ``$JPY_SESSION_NAME``; otherwise there is no notebook
and the ledger folder is ``cwd/.perfmagic``. :func:`_notebook_key` is the value of the ledger's
``notebook`` column. Stdlib only.
"""

from __future__ import annotations

import os
import pathlib

__all__ = ["ENV_DIR", "LEDGER_FILENAME", "LEDGER_FOLDER", "locate"]

LEDGER_FOLDER = ".perfmagic"
LEDGER_FILENAME = "ledger.sqlite"
ENV_DIR = "PERFMAGIC_LEDGER_DIR"


def _is_notebook_value(value: str) -> bool:
    return value.lower().endswith(".ipynb")


def locate(
    user_ns: dict | None = None, cwd: str | os.PathLike | None = None
) -> tuple[str | None, pathlib.Path]:
    """Find the running notebook and its ledger folder: ``(notebook_path or None, ledger_dir)``.

    Order: ``$PERFMAGIC_LEDGER_DIR`` (that folder is the ledger folder; the notebook is still
    looked up for the ``notebook`` column), ``user_ns["__session__"]``,
    ``user_ns["__vsc_ipynb_file__"]``, ``$JPY_SESSION_NAME``; else ``(None, cwd/.perfmagic)``.
    Only values ending in ``.ipynb`` or naming an existing file count as notebooks. A relative
    path that does not exist under ``cwd`` (ipykernel gives paths relative to the server root)
    still names the notebook: its file name, in ``cwd``.
    """
    base = pathlib.Path(os.path.abspath(os.fspath(cwd) if cwd is not None else os.getcwd()))
    ns = user_ns or {}
    notebook: pathlib.Path | None = None
    for value in (
        ns.get("__session__"),
        ns.get("__vsc_ipynb_file__"),
        os.environ.get("JPY_SESSION_NAME"),
    ):
        if not isinstance(value, (str, os.PathLike)):
            continue
        text = os.fspath(value).strip()
        if not text:
            continue
        p = pathlib.Path(os.path.expanduser(text))
        full = p if p.is_absolute() else base / p
        try:
            exists = full.is_file()
        except OSError:
            exists = False
        if exists:
            notebook = pathlib.Path(os.path.abspath(full))
            break
        if _is_notebook_value(text):
            notebook = full if p.is_absolute() else base / p.name
            notebook = pathlib.Path(os.path.abspath(notebook))
            break

    override = os.environ.get(ENV_DIR, "").strip()
    if override:
        d = pathlib.Path(os.path.expanduser(override))
        ledger_dir = pathlib.Path(os.path.abspath(d if d.is_absolute() else base / d))
    elif notebook is not None:
        ledger_dir = notebook.parent / LEDGER_FOLDER
    else:
        ledger_dir = base / LEDGER_FOLDER
    return (str(notebook) if notebook is not None else None), ledger_dir


def _notebook_key(notebook: str | os.PathLike | None, ledger_dir: pathlib.Path) -> str | None:
    """The value of the ``notebook`` column: the file name when the notebook sits beside the
    ledger folder, else the notebook as given."""
    if notebook is None:
        return None
    text = os.fspath(notebook)
    p = pathlib.Path(text)
    if p.is_absolute() and os.path.normcase(str(p.parent)) == os.path.normcase(
        str(ledger_dir.parent)
    ):
        return p.name
    return text
