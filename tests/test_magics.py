"""%%gpubench and %perf through a real InteractiveShell, asserting on what the user sees."""

from __future__ import annotations

import sys
import subprocess
import textwrap

import pytest


def test_load_ext_imports_nothing_heavy_and_unload_removes_everything() -> None:
    code = textwrap.dedent("""
        import sys
        from IPython.core.interactiveshell import InteractiveShell
        ip = InteractiveShell.instance()
        before_events = len(ip.events.callbacks["pre_run_cell"])
        ip.run_line_magic("load_ext", "perfmagic")
        heavy = [m for m in ("torch", "matplotlib", "pandas", "ipywidgets", "numpy") if m in sys.modules]
        assert not heavy, heavy
        assert "gpubench" in ip.magics_manager.magics["cell"]
        assert "perf" in ip.magics_manager.magics["line"]
        assert "estimate" in ip.magics_manager.magics["cell"]  # registered lazily: its module is not imported
        assert "perfmagic.magics._estimate" not in sys.modules
        assert "--total" in ip.find_cell_magic("estimate").__doc__  # help builds it on demand
        ip.run_line_magic("unload_ext", "perfmagic")
        assert "estimate" not in ip.magics_manager.magics["cell"]
        assert "gpubench" not in ip.magics_manager.magics["cell"]
        assert "perf" not in ip.magics_manager.magics["line"]
        assert len(ip.events.callbacks["pre_run_cell"]) == before_events
        assert not hasattr(ip, "_perfmagic_state")
        ip.run_line_magic("load_ext", "perfmagic")  # loads again after an unload
        assert "gpubench" in ip.magics_manager.magics["cell"]
        print("OK")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "OK" in out.stdout, out.stderr


def test_gpubench_times_a_sleep_and_records_a_row(shell, ledger_dir) -> None:
    shell.run("import time")
    res = shell.run("%%gpubench -l nap --items 1\ntime.sleep(0.005)\n")
    assert res.error_in_exec is None and res.error_before_exec is None
    (bundle,) = shell.bundles
    text = bundle["text/plain"]
    first = text.splitlines()[0]
    assert "median" in first and "95% CI" in first and "label nap" in first and "run #1" in first
    assert "cold call" in text and "peak memory" in text and "items/s" in text
    assert "image/png" in bundle  # the static figure
    import perfmagic

    df = perfmagic.ledger(magic="gpubench")
    assert len(df) == 1
    row = df.iloc[0]
    assert row["magic"] == "gpubench" and row["label"] == "nap" and row["status"] == "ok"
    assert 5.0e-3 <= row["median_s"] <= 5.8e-3
    assert "time.sleep(0.005)" in row["code"]


def test_gpubench_help_lists_every_option(shell) -> None:
    doc = shell.ip.find_cell_magic("gpubench").__doc__
    for opt in ("--label", "--budget", "--precision", "--warmup", "--device", "--flush", "--flops", "--bytes", "-o"):
        assert opt in doc


@pytest.mark.parametrize("line, needle", [
    ("--bogus", "unrecognized arguments: --bogus"),
    ("-b 0", "must be more than 0"),
    ("-b -1s", "budget"),
    ("-b soon", "not a duration"),
    ("-p 150%", "between 0 and 1"),
    ("-w many", "'auto' or a number"),
    ("--sync magic", "invalid choice"),
    ("-d tpu", "expected one of auto, cpu, cuda"),
    ("--flops undefined_name*2", "NameError"),
])
def test_bad_input_is_a_usage_error_without_traceback(shell, capsys, line, needle) -> None:
    res = shell.run(f"%%gpubench {line}\n1\n")
    assert res.error_in_exec is not None
    assert type(res.error_in_exec).__name__ == "UsageError"
    msg = str(res.error_in_exec)
    assert needle in msg, msg
    err = capsys.readouterr()
    assert "Traceback" not in err.out + err.err


def test_setup_on_the_magic_line_and_failing_setup(shell) -> None:
    res = shell.run('%%gpubench -q -o xs = list(range(100)); s = "a b"\nsum(xs)\n')
    assert res.error_in_exec is None
    assert res.result.setup == 'xs = list(range(100)); s = "a b"'
    res = shell.run("%%gpubench x = 1/0\nx\n")
    assert type(res.error_in_exec).__name__ == "UsageError"
    assert "setup code raised ZeroDivisionError" in str(res.error_in_exec)


def test_exception_in_the_cell_shows_the_users_traceback_and_records_nothing(shell, capsys) -> None:
    import perfmagic

    res = shell.run("%%gpubench\nx = 1\ny = x / 0\n")
    assert isinstance(res.error_in_exec, ZeroDivisionError)
    out = capsys.readouterr().out
    assert "y = x / 0" in out  # the user's own line
    assert "timing/bench.py" not in out and "core/cells.py" not in out
    assert len(perfmagic.ledger()) == 0  # documented: a failing cell records no row


def test_ctrl_c_shows_partial_result_and_records_it_interrupted(shell) -> None:
    import perfmagic

    shell.ip.user_ns["calls"] = {"n": 0}
    shell.run("import time")
    cell = ("%%gpubench -l ctrlc -b 10 -p 0.0001 -w 5\n"
            "calls['n'] += 1\n"
            "time.sleep(0.001)\n"
            "if calls['n'] == 80:\n"
            "    raise KeyboardInterrupt\n")
    res = shell.run(cell)
    assert isinstance(res.error_in_exec, KeyboardInterrupt)
    assert shell.ip.user_ns["calls"]["n"] == 80
    text = shell.text()
    assert "INTERRUPTED" in text and "median" in text
    df = perfmagic.ledger(magic="gpubench")
    assert list(df["status"]) == ["interrupted"]
    assert df.iloc[0]["n_samples"] > 0


def test_ctrl_c_during_warmup_says_so(shell) -> None:
    shell.ip.user_ns["calls"] = {"n": 0}
    shell.run("import time")
    res = shell.run("%%gpubench -b 10\ncalls['n'] += 1\ntime.sleep(0.001)\n"
                    "if calls['n'] == 20:\n    raise KeyboardInterrupt\n")
    assert isinstance(res.error_in_exec, KeyboardInterrupt)
    assert "stopped during warmup after" in shell.text()


def test_output_option_returns_the_result_object(shell) -> None:
    res = shell.run("%%gpubench -o --no-plot\nsum(range(10))\n")
    r = res.result
    assert type(r).__name__ == "BenchResult" and r.run_id == 1 and r.n_samples >= 10
    assert r.to_dict()["metrics"]["median_s"] == r.median


def test_cell_assignments_stay_local_like_timeit(shell) -> None:
    shell.run("%%gpubench -q\nnot_leaked = 42\n")
    assert "not_leaked" not in shell.ip.user_ns


def test_perf_shows_exports_and_forgets(shell, tmp_path) -> None:
    shell.run("%%gpubench -q -l one\n1+1\n")
    shell.run("%%gpubench -q -l two\n2+2\n")
    shell.run("%perf")
    text = shell.text()
    lines = text.splitlines()
    assert "2 runs" in text
    header = next(i for i, l in enumerate(lines) if l.startswith("id "))
    body = lines[header + 1:]
    assert body[0].split()[0] == "2" and body[1].split()[0] == "1"  # newest first
    assert "text/html" in shell.bundles[0]
    out = tmp_path / "runs.csv"
    res = shell.run(f"%perf export {out}")
    assert res.error_in_exec is None and out.exists()
    assert "one" in out.read_text() and "two" in out.read_text()
    res = shell.run("%perf forget 1")
    assert res.error_in_exec is None
    import perfmagic

    assert list(perfmagic.ledger()["label"]) == ["two"]
    res = shell.run("%perf forget 77")
    assert type(res.error_in_exec).__name__ == "UsageError" and "2" in str(res.error_in_exec)
    res = shell.run("%perf frobnicate")
    assert "valid commands" in str(res.error_in_exec)
    res = shell.run("%perf export out.txt")
    assert ".csv" in str(res.error_in_exec)


def test_unwritable_ledger_keeps_the_result_in_memory(shell, ledger_dir, capsys) -> None:
    ledger_dir.mkdir(parents=True, exist_ok=True)
    (ledger_dir / "ledger.sqlite").write_bytes(b"this is not a database" * 100)
    res = shell.run("%%gpubench -q\n1+1\n")
    assert res.error_in_exec is None
    err = capsys.readouterr().err
    assert "ledger.sqlite" in err and "memory" in err
    assert (ledger_dir / "ledger.sqlite").read_bytes().startswith(b"this is not a database")


def test_one_registry_names_every_magic_and_every_class_uses_the_template() -> None:
    """Every ``@line_magic``/``@cell_magic``/``@line_cell_magic`` method in magics/ is in the one registry
    (``_lazy.MAGICS``) with its kind, and its class derives from ``MagicTemplate`` (parse -> engine ->
    conclude: record, show, outcome)."""
    import ast
    import pathlib

    import perfmagic.magics as pkg
    from perfmagic.magics._lazy import MAGICS, method_of
    from perfmagic.magics._template import MagicTemplate

    kinds = {"line_magic": "line", "cell_magic": "cell", "line_cell_magic": "line_cell"}
    found = {}
    for path in pathlib.Path(pkg.__file__).parent.glob("_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef):
                for d in node.decorator_list:
                    if isinstance(d, ast.Name) and d.id in kinds:
                        found[node.name] = kinds[d.id]
    assert found and found == {name: kind for name, (kind, _) in MAGICS.items()}, (found, MAGICS)
    from IPython.core.magic import MAGIC_NO_VAR_EXPAND_ATTR

    from perfmagic.magics._lazy import EXPANDS_VARS

    for name in MAGICS:
        cls = method_of(name).__qualname__.split(".")[0]
        owner = getattr(__import__(method_of(name).__module__, fromlist=[cls]), cls)
        assert issubclass(owner, MagicTemplate), name
        # the stand-in tells IPython what the real method would: expand {vars} in the line, or not
        keeps_line = getattr(method_of(name), MAGIC_NO_VAR_EXPAND_ATTR, False)
        assert keeps_line == (name not in EXPANDS_VARS), name


def test_perf_and_littles_expand_variables_in_their_line(shell, capsys) -> None:
    """``%perf baseline {r.run_id}``, as the notebooks write it (a lazily registered magic keeps IPython's
    variable expansion for the line magics that had it)."""
    shell.run("import time")
    shell.run("%%gpubench -l nap -q\ntime.sleep(0.001)\n")
    shell.run("rid = 1")
    res = shell.run("%perf baseline {rid}")
    assert res.error_in_exec is None, res.error_in_exec
    res = shell.run("%littles throughput=200/s run={rid}")
    assert res.error_in_exec is None, res.error_in_exec
    out = capsys.readouterr().out
    assert "run #1 is now the baseline of 'nap'" in out and "latency = run #1" in out, out
