"""The Binder environment and the set-up commands stay in step with pyproject.toml."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# PyPI name -> its name in binder/environment.yml where they differ
CONDA_NAME = {"torch": "pytorch-cpu", "py-spy": "py-spy", "nvidia-ml-py": "nvidia-ml-py"}


def _pyproject() -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0].strip().lower().replace("_", "-")


def test_binder_environment_has_every_runtime_dependency() -> None:
    env = (ROOT / "binder" / "environment.yml").read_text().lower().replace("_", "-")
    listed = {_name(ln.strip().lstrip("-").strip()) for ln in env.splitlines()
              if ln.strip().startswith("-") and not ln.strip().endswith(":")}
    deps = [_name(d) for d in _pyproject()["project"]["dependencies"]] + ["torch"]
    missing = [d for d in deps if CONDA_NAME.get(d, d) not in listed]
    assert not missing, f"binder/environment.yml lacks {missing}"
    assert "pytorch-cpu" in listed and "pytorch" not in listed, "Binder must get the CPU build of torch"


def test_binder_postbuild_installs_perfmagic_without_pulling_dependencies() -> None:
    post = (ROOT / "binder" / "postBuild").read_text()
    assert re.search(r"pip install --no-deps -e \.", post)


def test_setup_installs_pinned_torch_before_perfmagic() -> None:
    mk = (ROOT / "Makefile").read_text()
    torch_line = mk.index('pip install "$(TORCH)"')
    pm_line = mk.index("pip install -e")
    assert torch_line < pm_line and "TORCH    ?= torch==2.13.0" in mk
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci and "make test" in (ROOT / "README.md").read_text()
