"""The benchmark scripts cannot drift out of `make bench`, `make bench-quick` and docs/benchmarks.md.

Cheap checks, no benchmark runs: every ``benchmarks/bench_*.py`` is run by both Makefile targets and
takes ``--quick`` and ``--no-docs``; every ``--quick`` run says it is a smoke run (``_common.SMOKE``, printed
first and last) and does not swallow a failing trial; every section of docs/benchmarks.md belongs to a
script that writes it, through the one writer (``benchmarks/_common.publish``), and is listed in the
page's index table.
"""

from __future__ import annotations

import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
SCRIPTS = sorted(p.name for p in BENCH.glob("bench_*.py"))
DOCS = ROOT / "docs" / "benchmarks.md"


def make_var(name: str) -> list[str]:
    """The words of a Makefile variable (``NAME := ...`` with backslash continuations)."""
    text = (ROOT / "Makefile").read_text(encoding="utf-8").replace("\\\n", " ")
    m = re.search(rf"^{name}\s*:?=(.*)$", text, re.M)
    assert m, f"Makefile has no {name} variable"
    return m.group(1).split()


def recipe(target: str) -> str:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    m = re.search(rf"^{re.escape(target)}:[^\n]*\n((?:\t[^\n]*\n|\n)*)", text, re.M)
    assert m, f"Makefile has no {target} target"
    return m.group(1)


def test_there_are_scripts() -> None:
    assert len(SCRIPTS) >= 18, SCRIPTS


def test_every_script_is_in_make_bench_and_bench_quick() -> None:
    full = {w.split("+")[0] for w in make_var("BENCH_RUNS")}
    quick = full | {w.split("+")[0] for w in make_var("BENCH_QUICK_ONLY")}
    assert "$(BENCH_RUNS)" in recipe("bench")
    assert "$(BENCH_RUNS)" in recipe("bench-quick") and "$(BENCH_QUICK_ONLY)" in recipe("bench-quick")
    assert "--quick --no-docs" in recipe("bench-quick")
    assert not set(SCRIPTS) - full, f"not in make bench (BENCH_RUNS): {sorted(set(SCRIPTS) - full)}"
    assert not set(SCRIPTS) - quick, f"not in make bench-quick: {sorted(set(SCRIPTS) - quick)}"
    assert not (full | quick) - set(SCRIPTS), f"the Makefile names missing scripts: {sorted((full | quick) - set(SCRIPTS))}"


def test_make_test_runs_bench_quick() -> None:
    assert "bench-quick" in make_var("STAGES")


def _help(script: str) -> str:
    p = subprocess.run([sys.executable, str(BENCH / script), "--help"], capture_output=True, text=True, timeout=120,
                       cwd=ROOT)
    assert p.returncode == 0, f"{script} --help failed:\n{p.stderr[-2000:]}"
    return p.stdout


def test_every_script_takes_quick_and_no_docs() -> None:
    with ThreadPoolExecutor(2) as pool:
        helps = dict(zip(SCRIPTS, pool.map(_help, SCRIPTS)))
    for script, text in helps.items():
        assert "--quick" in text and "--no-docs" in text, f"{script} --help lists no --quick / --no-docs:\n{text}"


def test_every_quick_run_says_it_is_a_smoke_run() -> None:
    # the banner is printed by _common itself, at import under --quick (and again by publish()); so every script
    # must import it and take its flags from it
    code = "import sys; sys.argv.append('--quick'); sys.path.insert(0, 'benchmarks'); import _common"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.startswith("SMOKE RUN (--quick)") and "numbers mean nothing" in p.stdout, p.stdout
    p = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, 'benchmarks'); import _common"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert "SMOKE" not in p.stdout, "a full run must not call itself a smoke run"
    for s in SCRIPTS:
        src = (BENCH / s).read_text(encoding="utf-8")
        assert re.search(r"^import _common as C\b", src, re.M), f"{s} does not import benchmarks/_common as C"
        assert "C.add_args(" in src, f"{s} does not take --quick / --no-docs from _common.add_args"


def test_quick_runs_do_not_swallow_a_failing_trial() -> None:
    # a handler that records a failed trial and goes on must re-raise under --quick (a smoke run fails with the error)
    for s in SCRIPTS:
        lines = (BENCH / s).read_text(encoding="utf-8").splitlines()
        for i, ln in enumerate(lines):
            if re.search(r"except (Exception|BaseException)\b.*#.*(trial|goes on)|except CellError\b", ln):
                nxt = next((x for x in lines[i + 1:] if x.strip()), "")
                assert re.search(r"\bif (args\.quick|C\.QUICK)\b", nxt), (
                    f"{s}:{i + 1}: a failed trial is recorded and the run goes on, also under --quick; add "
                    f"`if C.QUICK: raise` first")


def sections() -> list[str]:
    return re.findall(r"^<!-- BEGIN (\S+) -->$", DOCS.read_text(encoding="utf-8"), re.M)


def _id(name: str) -> str:
    return f"section-{name}"  # not the bare name: a test keyworded "gpu" is skipped without CUDA (conftest)


def test_sections_are_well_formed() -> None:
    text = DOCS.read_text(encoding="utf-8")
    names = sections()
    assert names and len(names) == len(set(names)), names
    for n in names:
        assert text.count(f"\n<!-- END {n} -->") == 1 and text.index(f"<!-- BEGIN {n} -->") < text.index(
            f"<!-- END {n} -->"), n


@pytest.mark.parametrize("name", sections(), ids=_id)
def test_every_section_is_written_by_a_script(name: str) -> None:
    owners = [s for s in SCRIPTS if "publish(" in (src := (BENCH / s).read_text(encoding="utf-8"))
              and re.search(rf"""["']{re.escape(name)}["']""", src)]
    assert owners, f"no benchmarks/bench_*.py writes section {name!r} (C.publish({name!r}, ...))"


@pytest.mark.parametrize("name", sections(), ids=_id)
def test_every_section_is_in_the_index_table(name: str) -> None:
    assert re.search(rf"^\| `{re.escape(name)}` \| `benchmarks/bench_\w+\.py[^`]*` \|", DOCS.read_text(encoding="utf-8"),
                     re.M), f"the index table of docs/benchmarks.md has no row | `{name}` | `benchmarks/...` |"


def test_only_common_writes_the_page() -> None:
    for s in SCRIPTS:
        src = (BENCH / s).read_text(encoding="utf-8")
        assert "replace_section(" not in src and "add_section_row(" not in src, (
            f"{s} writes docs/benchmarks.md itself; use _common.publish (clean tree, full run, stamp)")
        assert "publish(" in src, f"{s} never calls _common.publish"
