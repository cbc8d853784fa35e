"""Print the pip requirements of Binder's package set: ``binder/environment.yml`` translated to pip.

    python tools/binder_requirements.py [binder/environment.yml] > requirements.txt

``make binder-check`` uses it to build ``.binder-venv``: a virtual environment with exactly the packages
Binder's image gets, so that the workshop is run against what a class will have, not against ``.venv``
and its test extras. The translation, one dependency a line:

* ``python`` and ``pip`` are left out (the venv is made with the Python that runs ``make``; a
  different minor version than the file pins is reported on stderr);
* ``pytorch-cpu`` is left out: the Makefile installs torch first, pinned (``TORCH``), from the index
  it names (``TORCH_INDEX``), as it does for ``.venv``; conda-forge's CPU build corresponds to
  PyPI's ``+cpu`` wheel;
* a conda version spec ``NAME=1.2`` (conda: any 1.2.x) becomes ``NAME==1.2.*``; ``>=``, ``<``,
  ``==`` and ``!=`` are kept as they are;
* the entries under ``- pip:`` are pip requirements already and are kept verbatim.

perfmagic itself is not listed: ``binder/postBuild`` installs it with ``--no-deps``, and the Makefile
runs that very script in the venv. Stdlib only (no YAML parser: the file is a flat list).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

# conda-forge names that are not PyPI names (None: installed by the Makefile, or not a package)
CONDA_TO_PIP: dict[str, str | None] = {"python": None, "pip": None, "pytorch-cpu": None, "pytorch": None}


def _spec(entry: str) -> tuple[str, str]:
    """``"ipython>=8"`` -> ``("ipython", ">=8")``; ``"python=3.11"`` -> ``("python", "==3.11.*")``."""
    m = re.match(r"^([A-Za-z0-9_.\-]+)\s*(.*)$", entry)
    if not m:
        raise ValueError(f"cannot read the dependency {entry!r}")
    name, rest = m.group(1), m.group(2).replace(" ", "")
    if re.match(r"^=[^=]", rest):  # conda's "=1.2" is "1.2.*"; a full "=1.2.3" stays exact enough
        version = rest[1:]
        rest = f"=={version}" if version.endswith("*") or version.count(".") >= 2 else f"=={version}.*"
    return name, rest


def requirements(text: str) -> tuple[list[str], dict[str, str]]:
    """(pip requirement lines, {conda name: spec} of the entries left out)."""
    out: list[str] = []
    left_out: dict[str, str] = {}
    section = None
    in_pip = False
    pip_indent = None
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        if not line.startswith((" ", "\t", "-")):
            section = line.split(":", 1)[0].strip()
            in_pip = False
            continue
        if section != "dependencies":
            continue
        indent = len(line) - len(line.lstrip())
        item = line.strip()
        if not item.startswith("-"):
            continue
        item = item[1:].strip()
        if item == "pip:":
            in_pip, pip_indent = True, indent
            continue
        if in_pip and pip_indent is not None and indent > pip_indent:
            out.append(item)
            continue
        in_pip = False
        name, spec = _spec(item)
        if name.lower() in CONDA_TO_PIP and CONDA_TO_PIP[name.lower()] is None:
            left_out[name.lower()] = spec
            continue
        out.append(f"{CONDA_TO_PIP.get(name.lower()) or name}{spec}")
    return out, left_out


def main(argv: list[str]) -> int:
    path = Path(argv[0] if argv else Path(__file__).resolve().parents[1] / "binder" / "environment.yml")
    reqs, left_out = requirements(path.read_text(encoding="utf-8"))
    want = left_out.get("python", "").lstrip("=").rstrip(".*")
    have = f"{sys.version_info.major}.{sys.version_info.minor}"
    if want and not (have == want or have.startswith(want + ".")):
        print(f"binder_requirements: {path} pins python {want}; this is python {have}: the check runs on a "
              "different Python than Binder's", file=sys.stderr)
    print(f"# from {path}: pip's names for Binder's packages (torch is installed first, pinned, by the Makefile)")
    print("\n".join(reqs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
