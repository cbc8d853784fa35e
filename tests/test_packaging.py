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
    torch_line = mk.index('pip install $(TORCH_PIP) "$(TORCH)"')
    pm_line = mk.index("pip install -e")
    assert torch_line < pm_line and "TORCH    ?= torch==2.13.0" in mk
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci and "make test" in (ROOT / "README.md").read_text()


def test_torch_index_is_passed_to_the_torch_install_only() -> None:
    import subprocess

    def dry(*extra: str) -> str:
        out = subprocess.run(["make", "-n", "-B", "-f", "Makefile", ".venv/.perfmagic-installed", *extra],
                             cwd=ROOT, capture_output=True, text=True, timeout=60)
        return out.stdout

    default = [ln for ln in dry().splitlines() if "pip install" in ln]
    assert any('"torch==2.13.0"' in ln and "--index-url" not in ln for ln in default)
    cpu = [ln for ln in dry("TORCH_INDEX=https://example.invalid/whl/cpu").splitlines() if "pip install" in ln]
    torch_ln = next(ln for ln in cpu if "torch==2.13.0" in ln)
    assert "--index-url https://example.invalid/whl/cpu" in torch_ln
    assert all("--index-url" not in ln for ln in cpu if ln is not torch_ln)
    readme = (ROOT / "README.md").read_text()
    assert "TORCH_INDEX=" in readme and "never pulls a CUDA build" not in readme


def test_make_test_runs_every_stage_and_fails_at_the_end(tmp_path) -> None:
    """Stage targets replaced by ones that pass or fail: every stage runs, one line each, exit != 0."""
    import subprocess

    mk = tmp_path / "Makefile"
    text = (ROOT / "Makefile").read_text()
    body = text[text.index("# every stage runs"):]
    body = body[: body.index("\nunit:")]
    mk.write_text("VENV := .\nSTAMP := stamp\nSTAGES := unit notebooks docs browser\n\nstamp:\n\ttouch stamp\n\n"
                  + body + "\n\nunit:\n\t@true\nnotebooks:\n\t@false\ndocs:\n\t@true\nbrowser:\n\t@true\n")
    out = subprocess.run(["make", "test"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("make test:")]
    assert out.returncode != 0
    assert [ln.split()[2:4] for ln in lines] == [["unit", "ok"], ["notebooks", "FAILED"], ["docs", "ok"],
                                                ["browser", "ok"]], out.stdout


def test_the_method_is_cited_from_the_repository_and_every_section_exists() -> None:
    # outputs and notebooks cited METHOD.md, a file that is in neither the repository nor a Binder image
    sections = set(re.findall(r"^## (\d+)\. ", (ROOT / "docs" / "method.md").read_text(), re.M))
    assert sections == {str(n) for n in range(1, 11)}, sections
    cited = []
    for folder in ("src", "docs", "notebooks", "tools"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix not in (".py", ".md", ".ipynb") or "_executed" in path.parts or not path.is_file():
                continue
            text = path.read_text(errors="replace")
            assert "METHOD.md" not in text, f"{path} cites METHOD.md, which is not in the repository"
            cited += [(path, n) for n in re.findall(r"method\.md(?:#| §)(\d+)", text)]
    assert cited, "nothing cites the method: the test would pass on any text"
    missing = [(str(p), n) for p, n in cited if n not in sections]
    assert not missing, missing


def test_binder_has_what_the_notebooks_run_in_a_subprocess() -> None:
    # the workshop's guard cell runs `python -m pytest`; Binder lacked pytest and the cell printed a blank
    # line, then the next one said "The guard passed"
    env = (ROOT / "binder" / "environment.yml").read_text()
    run = set()
    for nb in (ROOT / "notebooks").glob("*.ipynb"):
        run |= set(re.findall(r'\\"-m\\", \\"([\w.]+)\\"', nb.read_text()))
    assert "pytest" in run, "the workshop no longer runs pytest: update this test"
    missing = [m for m in run if not re.search(rf"^\s*-\s*{re.escape(m)}\b", env, re.M)]
    assert not missing, f"binder/environment.yml lacks {missing}, which a notebook runs with python -m"


def test_binder_pins_the_torch_ci_tests() -> None:
    # Binder keeps conda-forge's CPU build of PyTorch, at the version CI tests (the Makefile's TORCH)
    env = (ROOT / "binder" / "environment.yml").read_text()
    conda = re.search(r"^\s*-\s*pytorch-cpu\s*=+\s*([\w.]+)", env, re.M)
    assert conda, "binder/environment.yml does not pin pytorch-cpu"
    ci = re.search(r"^TORCH\s*\?=\s*torch==([\w.]+)", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert conda.group(1) == ci, f"Binder gets pytorch-cpu {conda.group(1)}, CI tests torch {ci}"


def test_binder_requirements_are_the_environment_in_pip_terms() -> None:
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import binder_requirements
    finally:
        sys.path.remove(str(ROOT / "tools"))
    reqs, left_out = binder_requirements.requirements((ROOT / "binder" / "environment.yml").read_text())
    assert set(left_out) == {"python", "pip", "pytorch-cpu"}, left_out
    names = {_name(r) for r in reqs}
    assert {"pytest", "nbclient", "nbconvert", "ipykernel", "nvidia-ml-py", "line-profiler"} <= names, names
    assert not any(n in ("torch", "pytorch", "pytorch-cpu", "python", "pip") for n in names)
    planted, _ = binder_requirements.requirements(
        "name: x\ndependencies:\n  - python=3.11\n  - numpy=2.1  # a comment\n  - pandas>=2\n  - scipy=1.14.1\n"
        "  - pip:\n      - nvidia-ml-py>=12\n  - tqdm\n")
    assert planted == ["numpy==2.1.*", "pandas>=2", "scipy==1.14.1", "nvidia-ml-py>=12", "tqdm"], planted


def test_binder_check_runs_the_workshop_in_binders_package_set() -> None:
    import subprocess

    out = subprocess.run(["make", "-n", "-B", "-f", "Makefile", "binder-check"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60).stdout.splitlines()
    step = lambda *needles: next(i for i, ln in enumerate(out) if all(n in ln for n in needles))  # noqa: E731
    torch = step(".binder-venv/bin/python -m pip install", '"torch==2.13.0"')
    assert torch < step("-r .binder-venv/requirements.txt")
    assert step("-r .binder-venv/requirements.txt") < step("bash binder/postBuild") < step("tools/pod_check.py")
    run = out[step("tools/pod_check.py")]
    assert "--memory 2G --cpus 2 -- .binder-venv/bin/python notebooks/run.py --check" in run
    assert "10_one_change_at_a_time.ipynb" in run and ".venv/bin" not in run.replace(".binder-venv/bin", "")
    assert "PERFMAGIC_CACHE_DIR=" in run, "a fresh pod has no cached roofs: the calibration must run in the pod"
    assert ".binder-venv/" in (ROOT / ".gitignore").read_text().splitlines()
