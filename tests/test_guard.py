"""%perf guard: a gain accepted through the real magics, written out as a pytest file, run outside the
notebook — it passes on the accepted change and fails, with perfmagic's verdict, when the change is
reverted. Planted ground truth: a pure-Python loop (~0.4 ms) against its closed form (~50 ns), a
sleep against targets it cannot or easily can meet."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest

SLOW = """\
def slow_sum(n):
    s = 0
    for i in range(n):
        s += i
    return s
"""
FAST = """\
def fast_sum(n):
    return n * (n - 1) // 2
"""
REVERTED = """\
def fast_sum(n):
    s = 0
    for i in range(n):
        s += i
    return s
"""
RAISES = """\
def fast_sum(n):
    raise ValueError("planted failure inside fast_sum")
"""


@pytest.fixture
def pkg(tmp_path: Any, monkeypatch: Any) -> Any:
    """A package ``guardpkg`` with ``ops.py`` (slow_sum, fast_sum) importable by the shell and by the guard."""
    root = tmp_path / "proj"
    (root / "guardpkg").mkdir(parents=True)
    (root / "guardpkg" / "__init__.py").write_text("")
    (root / "guardpkg" / "ops.py").write_text(SLOW + "\n\n" + FAST)
    (root / "tests").mkdir()
    monkeypatch.syspath_prepend(str(root))
    yield root
    for name in [m for m in sys.modules if m == "guardpkg" or m.startswith("guardpkg.")]:
        del sys.modules[name]


def _pytest(path: Any, cwd: Any) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", str(path)],
                          cwd=str(cwd), capture_output=True, text=True, timeout=120, env=env)


def _accept(shell: Any) -> None:
    """Run #1: the loop; #2 (A re-measured) and #3 (B): the closed form, interleaved with it and accepted."""
    shell.run("from guardpkg.ops import slow_sum, fast_sum")
    assert shell.run("%%gpubench -l loop -b 0.3 -q\nslow_sum(20000)\n").error_in_exec is None
    res = shell.run("%%gpubench -l closed -b 0.5 --no-where --vs 1\nfast_sum(20000)\n")  # no `where` row
    assert res.error_in_exec is None
    assert "faster" in shell.text() and "accept" in shell.text()


def test_guard_round_trip_passes_on_the_change_and_fails_when_reverted(shell, pkg) -> None:
    _accept(shell)
    path = pkg / "tests" / "test_guard_sum.py"
    res = shell.run(f"%perf guard 3 {path} --module guardpkg.ops")
    assert res.error_in_exec is None, res.error_in_exec
    shown = shell.text()
    assert "wrote a regression guard for run #3 vs #2" in shown and f"file:       {path}" in shown
    assert "slow_sum, fast_sum from guardpkg.ops" in shown and "fails when: B #3 'closed' is no longer" in shown
    assert all(len(ln) <= 100 for ln in shown.splitlines() if str(path) not in ln)
    text = path.read_text()
    assert "run #3 'closed' must stay faster than run #2 'loop'" in text      # the docstring says what it guards
    assert "from guardpkg.ops import slow_sum, fast_sum" in text and "%perf guard 3" in text
    assert "import IPython" not in text and "ledger" not in text.split('"""', 2)[2]  # runs outside a notebook

    kept = _pytest(path, pkg.parent)  # a plain `python -m pytest PATH`, in a fresh process
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert "1 passed" in kept.stdout

    (pkg / "guardpkg" / "ops.py").write_text(SLOW + "\n\n" + REVERTED)  # the change reverted
    lost = _pytest(path, pkg.parent)
    out = " ".join((lost.stdout + lost.stderr).split())
    assert lost.returncode == 1, out
    assert "perfmagic guard: LOST" in out or "perfmagic guard: cannot tell" in out, out
    assert "A/B interleaved in one process" in out and "B/A" in out  # perfmagic's own verdict text
    if "LOST" in out:
        assert "no real change" in out or "slower" in out


def test_guard_of_the_a_side_takes_its_pair_and_the_engine_runs_from_a_script(shell, pkg, ledger_dir) -> None:
    _accept(shell)
    from perfmagic.guard import write_guard
    from perfmagic.storage.session import current_ledger

    led = current_ledger(shell.ip.user_ns)
    gf = write_guard(2, pkg / "tests" / "test_a.py", module="guardpkg.ops", ledger=led)
    assert (gf.kind, gf.run_id, gf.baseline_id) == ("pair", 3, 2)
    assert gf.command == f"python -m pytest {pkg / 'tests' / 'test_a.py'}"
    assert set(gf.names) == {"slow_sum", "fast_sum"} and gf.budget_s >= 2.0
    assert "text/html" in gf._repr_mimebundle_() and gf.to_dict()["kind"] == "pair"


@pytest.mark.parametrize("line, needle", [
    ("%perf guard", "needs a RUN id and a PATH (got nothing)"),
    ("%perf guard 3", "needs a RUN id and a PATH (got '3')"),
    ("%perf guard 99 {tests}/t.py --module guardpkg.ops", "no run with id 99"),
    ("%perf guard 3 {tests}/t.txt --module guardpkg.ops", "must end in .py"),
    ("%perf guard 3 {tests}/nowhere/t.py --module guardpkg.ops", "does not exist; create it"),
    ("%perf guard 3 {tests}/t.py", "reads slow_sum, fast_sum from the notebook; pass --module M"),
    ("%perf guard 3 {tests}/t.py --module guardpkg", "module 'guardpkg' does not provide slow_sum, fast_sum"),
    ("%perf guard 3 {tests}/t.py --module guardpkg.nope", "cannot import --module 'guardpkg.nope'"),
    ("%perf guard 1 {tests}/t.py --module guardpkg.ops", "not an accepted comparison (it was measured alone"),
    ("%perf guard 3 {tests}/t.py --module guardpkg.ops --target soon", "--target 'soon' is not a time"),
    ("%perf guard 3 {tests}/t.py --module guardpkg.ops --min-effect 0", "between 0 and 1"),
])
def test_bad_input_is_a_usage_error_naming_the_fix(shell, pkg, line, needle) -> None:
    _accept(shell)
    res = shell.run(line.format(tests=pkg / "tests"))
    assert type(res.error_in_exec).__name__ == "UsageError", res.error_in_exec
    assert needle in str(res.error_in_exec), str(res.error_in_exec)
    assert not (pkg / "tests" / "t.py").exists()


def test_refusals_existing_path_slower_change_inline_function_and_same_code(shell, pkg) -> None:
    _accept(shell)
    path = pkg / "tests" / "test_g.py"
    path.write_text("# the user's own file\n")
    res = shell.run(f"%perf guard 3 {path} --module guardpkg.ops")
    assert "exists; give another PATH, or replace it with --force" in str(res.error_in_exec)
    assert path.read_text() == "# the user's own file\n"
    assert shell.run(f"%perf guard 3 {path} --module guardpkg.ops --force").error_in_exec is None
    assert "check_pair" in path.read_text()

    # a change perfmagic did not accept: the loop measured against the closed form is slower
    shell.run("%%gpubench -l back -b 0.3 -q --no-where --vs 3\nslow_sum(20000)\n")  # runs #4 (A) and #5 (B)
    res = shell.run(f"%perf guard 5 {pkg / 'tests' / 't5.py'} --module guardpkg.ops")
    assert "not an accepted comparison (B #5 vs A #4: " in str(res.error_in_exec) and "slower" in str(res.error_in_exec)

    # the measured function was defined in a notebook cell
    shell.run("def mine(n):\n    return n\n")
    shell.run("%%gpubench -l mine -b 0.3 -q --no-where --vs 1\nmine(20000)\n")  # runs #6, #7
    res = shell.run(f"%perf guard 7 {pkg / 'tests' / 't7.py'} --module guardpkg.ops")
    assert "the run calls mine, defined in a notebook cell" in str(res.error_in_exec)
    assert "move it to a module" in str(res.error_in_exec) and "--module" in str(res.error_in_exec)

    # the change was made inside a function: A's code is B's code, and the old function is gone
    shell.run("work = slow_sum")
    shell.run("%%gpubench -l work -b 0.3 -q\nwork(20000)\n")  # run #8
    shell.run("work = fast_sum")
    shell.run("%%gpubench -l work -b 0.3 -q\nwork(20000)\n")  # run #9
    shell.run("%perf compare 8 9 -q")  # re-measured interleaved with the old `work`: #10, #11, faster
    res = shell.run(f"%perf guard 11 {pkg / 'tests' / 't11.py'} --module guardpkg.ops")
    msg = str(res.error_in_exec)
    assert "run the same code and setup" in msg and "--target" in msg, msg


def test_target_guard_passes_within_and_fails_beyond_a_planted_sleep(shell, pkg) -> None:
    assert shell.run("%%gpubench -l nap -b 0.3 -q import time\ntime.sleep(0.002)\n").error_in_exec is None
    ok, bad = pkg / "tests" / "test_within.py", pkg / "tests" / "test_beyond.py"
    assert shell.run(f"%perf guard 1 {ok} --target 6ms").error_in_exec is None
    assert "fails when: 'nap' takes more than 6 ms + 10% per call" in shell.text()
    assert shell.run(f"%perf guard 1 {bad} --target 1ms").error_in_exec is None
    out = _pytest(pkg / "tests", pkg.parent)  # both files in one run: a sleep of 2 ms cannot meet 1.1 ms
    text = " ".join((out.stdout + out.stderr).split())  # the verdict wraps at 100 columns
    assert out.returncode == 1 and "1 failed, 1 passed" in text, text
    assert "perfmagic guard: LOST — the target is lost: 'nap' takes" in text and "above the target 1 ms" in text


def test_an_exception_in_the_measured_code_fails_the_guard_with_its_traceback(shell, pkg) -> None:
    _accept(shell)
    path = pkg / "tests" / "test_raise.py"
    assert shell.run(f"%perf guard 3 {path} --module guardpkg.ops").error_in_exec is None
    (pkg / "guardpkg" / "ops.py").write_text(SLOW + "\n\n" + RAISES)
    out = _pytest(path, pkg.parent)  # the timeout in _pytest turns a hang into a failure
    text = out.stdout + out.stderr
    assert out.returncode == 1, text
    assert "ValueError: planted failure inside fast_sum" in text and "ops.py" in text, text


def test_a_cuda_run_is_skipped_with_its_reason_where_there_is_no_cuda(pkg, ledger_dir, tmp_path) -> None:
    pytest.importorskip("torch")
    import torch

    from perfmagic.guard import write_guard
    from perfmagic.storage.ledger import Ledger

    led = Ledger(directory=tmp_path / "cudaledger", notebook="gpu.ipynb")
    per_call = [1e-3, 1.1e-3, 1.05e-3, 0.98e-3, 1.02e-3]
    ref = led.record(magic="gpubench", label="mm", code="%%gpubench -l mm\nx @ x\n",
                     options={"setup": "import torch; x = torch.ones(8, 8, device='cuda')", "device": "cuda"},
                     metrics={"median_s": 1e-3}, samples={"raw": per_call, "number": 1}, env={"device": "cuda:0"},
                     primary_metric="median_s")
    path = pkg / "tests" / "test_cuda.py"
    write_guard(ref.id, path, ledger=led, target=2e-3)
    text = path.read_text()
    assert 'pytest.importorskip("torch"' in text and "skipif(not torch.cuda.is_available()" in text
    if torch.cuda.is_available():
        return
    out = _pytest(path, pkg.parent)
    assert out.returncode == 0 and "1 skipped" in out.stdout, out.stdout + out.stderr
    assert "was measured on CUDA and this machine has no CUDA device" in out.stdout


@pytest.mark.parametrize("where", ["write", "fsync", "replace"])
def test_ctrl_c_while_writing_leaves_no_file(pkg, monkeypatch, where) -> None:
    from perfmagic.guard import writer

    path = pkg / "tests" / "test_cc.py"

    def interrupt(*a: Any, **k: Any) -> None:
        raise KeyboardInterrupt

    if where == "write":
        real_fdopen = os.fdopen

        class Half:
            def __init__(self, fh: Any) -> None:
                self.fh = fh

            def __enter__(self) -> Any:
                return self

            def __exit__(self, *exc: Any) -> None:
                self.fh.close()

            def write(self, text: str) -> None:
                self.fh.write(text[: len(text) // 2])
                raise KeyboardInterrupt

        monkeypatch.setattr(writer.os, "fdopen", lambda fd, *a, **k: Half(real_fdopen(fd, *a, **k)))
    else:
        monkeypatch.setattr(writer.os, where, interrupt)
    with pytest.raises(KeyboardInterrupt):
        writer.atomic_write(path, "x = 1\n" * 1000)
    monkeypatch.undo()
    assert not path.exists()
    assert os.listdir(pkg / "tests") == []  # nor the temporary file


def test_free_names_are_what_the_code_reads_and_does_not_assign() -> None:
    from perfmagic.guard.plan import free_names

    code = textwrap.dedent("""
        y = f(x)
        z = [g(i) for i in range(3)]
        def h():
            return k
        print(len(y), np.sum(z))
    """)
    assert sorted(free_names("x = 1", code)) == ["f", "g", "k", "np"]
    assert free_names("import numpy as np\nx = np.ones(3)", "np.sum(x)") == []


def test_a_target_kept_in_the_ledger_is_guarded_without_target_option(shell, pkg) -> None:
    assert shell.run("%%gpubench -l nap -b 0.3 -q import time\ntime.sleep(0.002)\n").error_in_exec is None
    assert shell.run("%perf target nap 6ms").error_in_exec is None
    path = pkg / "tests" / "test_ledger_target.py"
    res = shell.run(f"%perf guard 1 {path}")
    assert res.error_in_exec is None, res.error_in_exec
    assert "target 6 ms (the target of 'nap' in the ledger)" in shell.text()
    assert "TARGET_S = 0.006" in path.read_text() and "check_pair" not in path.read_text()


def test_hold_gain_fails_a_change_that_kept_only_part_of_its_gain(spin_200us) -> None:
    """Planted: B = the loop over a fifth of the items (accepted at B/A 0.2), regressed to half of them
    (B/A 0.5): still faster than A beyond 10%, so the default guard keeps it; HOLD_GAIN loses it."""
    from perfmagic.guard import check_pair

    from .conftest import spin_loop

    k, ns = spin_200us, {"spin_loop": spin_loop}
    a, b = f"spin_loop({k})", f"spin_loop({k // 2})"
    kept = check_pair(a, b, namespace=ns, accepted=0.2)
    assert kept.status == "kept" and 0.4 < kept.value < 0.6, kept.text()
    held = check_pair(a, b, namespace=ns, accepted=0.2, hold_gain=True)
    assert held.status == "lost", held.text()
    said = " ".join(held.text().split())
    assert "the accepted gain less 10% (B/A 0.22)" in said and "at acceptance: 5× faster" in said, said
    assert check_pair(a, f"spin_loop({k // 5})", namespace=ns, accepted=0.2, hold_gain=True).status == "kept"


def test_under_load_a_verdict_is_repeated_and_two_that_disagree_cannot_tell(monkeypatch) -> None:
    """Logic, with planted pair results: beside others' load a verdict counts only when a second
    measurement agrees; disagreeing ones fail as 'cannot tell' showing both, never as 'lost'."""
    from types import SimpleNamespace

    from perfmagic.guard import check_pair
    from perfmagic.timing import pair

    def planted(ratios: list[tuple[float, float, float]], others: float) -> list[Any]:
        calls: list[Any] = []

        def fake(*a: Any, **k: Any) -> Any:
            r, lo, hi = ratios[len(calls)]
            calls.append(k["budget"])
            return SimpleNamespace(comparison=SimpleNamespace(ratio=r, ci_low=lo, ci_high=hi),
                                   a=SimpleNamespace(n_samples=30), b=SimpleNamespace(env={"others_cores": others}),
                                   text=lambda: f"planted B/A {r}")

        monkeypatch.setattr(pair, "bench_pair", fake)
        return calls

    calls = planted([(0.5, 0.45, 0.55)], others=0.0)  # quiet: one measurement decides
    assert check_pair("a()", "b()").status == "kept" and calls == [2.0]
    calls = planted([(0.5, 0.45, 0.55), (0.5, 0.46, 0.54)], others=1.0)  # loaded: repeated, agrees
    v = check_pair("a()", "b()")
    assert v.status == "kept" and len(calls) == 2 and "repeated under load: B/A 0.5" in v.sentence
    calls = planted([(0.88, 0.61, 0.904), (0.95, 0.93, 0.97)], others=1.0)  # the miss the benchmark saw
    v = check_pair("a()", "b()")
    assert v.status == "cannot tell" and not v.passed and "two measurements under load disagree" in v.sentence
    calls = planted([(0.9, 0.85, 0.95), (0.9, 0.86, 0.94)], others=0.0)  # on the bar: once more, twice the budget
    v = check_pair("a()", "b()")
    assert v.status == "cannot tell" and calls == [2.0, 4.0] and "straddles the 10% bar" in v.sentence
    planted([(1.0, 0.97, 1.03)], others=0.0)
    assert check_pair("a()", "b()").status == "lost"


def test_a_change_accepted_against_its_label_baseline_is_guarded_from_the_historical_pair(shell, pkg) -> None:
    shell.run("from guardpkg.ops import slow_sum, fast_sum")
    assert shell.run("%%gpubench -l sum -b 0.3 -q --baseline\nslow_sum(20000)\n").error_in_exec is None  # #1
    assert shell.run("%%gpubench -l sum -b 0.3 -q\nfast_sum(20000)\n").error_in_exec is None  # #2, not paired
    path = pkg / "tests" / "test_hist.py"
    res = shell.run(f"%perf guard 2 {path} --module guardpkg.ops --min-effect 20%")
    assert res.error_in_exec is None, res.error_in_exec
    said = " ".join(shell.text().split())
    assert "for run #2 vs #1" in said and "accepted: historical:" in said and "by at least 20%" in said
    text = path.read_text()
    assert "A_LABEL, A_SETUP, A_CODE = 'sum', '', 'slow_sum(20000)'" in text and "MIN_EFFECT = 0.2" in text
    assert "B_LABEL, B_SETUP, B_CODE = 'sum', '', 'fast_sum(20000)'" in text


def test_an_accepted_change_with_a_target_gets_both_checks(shell, pkg) -> None:
    _accept(shell)
    path = pkg / "tests" / "test_both.py"
    assert shell.run(f"%perf guard 3 {path} --module guardpkg.ops --target 1ms").error_in_exec is None
    said = " ".join(shell.text().split())
    assert "no longer faster than A #2 'loop' by at least 10%; or 'closed' takes more than 1 ms + 10%" in said
    out = _pytest(path, pkg.parent)
    assert out.returncode == 0 and "2 passed" in out.stdout, out.stdout + out.stderr
