"""The honest comparison by default: %perf compare re-measures A and B interleaved in this process,
with A's functions as they were, and says why when it cannot."""

from __future__ import annotations

import pytest


def test_capture_keeps_the_functions_a_run_called_even_through_another_function() -> None:
    from perfmagic.timing.rerun import capture, check, namespace

    ns: dict = {}
    exec("def g():\n    return 'old g'\ndef f():\n    return g()\ndata = [1, 2]", ns)
    cap = capture("f(); len(data)", "", ns)
    assert set(cap.callables) == {"f", "g"} and set(cap.data) == {"data"}
    exec("def g():\n    return 'new g'", ns)  # the user redefines g after the run
    old = namespace(cap, ns)
    assert eval("f()", old) == "old g" and eval("f()", ns) == "new g"
    assert check(cap, ns) == []
    ns["data"].append(3)
    assert any("changed in place" in w for w in check(cap, ns))
    ns["data"] = [1, 2]
    assert any("another object" in w for w in check(cap, ns))
    del ns["data"]
    assert any("gone" in w for w in check(cap, ns))


def test_torch_module_changed_in_place_is_named() -> None:
    torch = pytest.importorskip("torch")
    from perfmagic.timing.rerun import capture, check

    ns = {"model": torch.nn.Conv2d(3, 4, 3), "x": torch.randn(1, 3, 8, 8)}
    cap = capture("model(x)", "", ns)
    assert "model" in cap.data and check(cap, ns) == []
    ns["model"].to(memory_format=torch.channels_last)  # in place: every parameter moves
    assert any("`model` was changed in place" in w for w in check(cap, ns))


def test_compare_re_measures_a_redefined_function_interleaved(shell, capsys) -> None:
    import perfmagic

    shell.run("import time\ndef work():\n    time.sleep(0.005)")
    shell.run("%%gpubench -l work -b 0.3 -q\nwork()\n")
    shell.run("def work():\n    time.sleep(0.006)")  # +20%, the same name
    shell.run("%%gpubench -l work -b 0.3 -q\nwork()\n")
    capsys.readouterr()
    res = shell.run("%perf compare 1 2 -b 1.5")
    assert res.error_in_exec is None, res.error_in_exec
    out = capsys.readouterr().out
    assert "re-measured A #1 and B #2 interleaved in this process" in out
    head = shell.text().splitlines()[0]
    assert head.startswith("B #4 work vs A #3 work: slower"), head
    assert sum(ln.startswith("B #") for ln in shell.text().splitlines()) == 1  # one verdict, not two
    df = perfmagic.ledger()
    assert list(df["role"].fillna("")) == ["", "", "rerun-of #1", "rerun-of #2"]
    assert "interleaved" in shell.text()


def test_compare_falls_back_and_says_why(shell, capsys) -> None:
    shell.run("data = list(range(20_000))")
    shell.run("%%gpubench -l s -b 0.2 -q\nsum(data)\n")
    shell.run("data.append(1)")  # changed in place after A
    shell.run("%%gpubench -l s -b 0.2 -q\nsum(data)\n")
    capsys.readouterr()
    res = shell.run("%perf compare 1 2")
    assert res.error_in_exec is None
    out = capsys.readouterr().out
    assert "historical comparison (recorded samples)" in out and "`data` was changed in place" in out
    assert "historical comparison" in shell.text()
    # the in-place change is named under "what changed", not "nothing changed but time"
    assert "what changed: the data A read (data)" in shell.text() and "nothing changed" not in shell.text()
    res = shell.run("%perf compare 1 2 --rerun")
    assert type(res.error_in_exec).__name__ == "UsageError" and "changed in place" in str(res.error_in_exec)
    res = shell.run("%perf compare 1 2 --rerun --historical")
    assert "exclude each other" in str(res.error_in_exec)


def test_runs_of_another_kernel_are_compared_historically(shell, capsys) -> None:
    shell.run("%%gpubench -l z -b 0.2 -q\nsum(range(100))\n")
    shell.run("%%gpubench -l z -b 0.2 -q\nsum(range(120))\n")
    shell.ip._perfmagic_state.pop("captures", None)  # as if they were measured by another kernel
    capsys.readouterr()
    shell.run("%perf compare 1 2")
    assert "measured in another kernel" in capsys.readouterr().out


def test_runs_measured_with_different_options_are_not_re_measured_as_a_pair(shell, capsys) -> None:
    shell.run("%%gpubench -l g -b 0.2 -q\nsum(range(100))\n")
    shell.run("%%gpubench -l g -b 0.2 -q --gc\nsum(range(100))\n")
    capsys.readouterr()
    shell.run("%perf compare 1 2")
    out = capsys.readouterr().out
    assert "different options (gc)" in out and "historical comparison" in out


@pytest.mark.slow
def test_re_measured_verdict_holds_beside_a_busy_neighbour(shell) -> None:
    """The same planted +20% (5 -> 6 ms of sleep), judged while one process spins on a core."""
    from perfmagic.core.neighbours import busy_neighbours

    shell.run("import time\ndef work():\n    time.sleep(0.005)")
    shell.run("%%gpubench -l work -b 0.3 -q\nwork()\n")
    shell.run("def work():\n    time.sleep(0.006)")
    shell.run("%%gpubench -l work -b 0.3 -q\nwork()\n")
    with busy_neighbours(1) as nb:
        res = shell.run("%perf compare 1 2 -b 1.5")
    assert nb.others_cores is not None and nb.others_cores > 0.5
    assert res.error_in_exec is None, res.error_in_exec
    assert shell.text().splitlines()[0].startswith("B #4 work vs A #3 work: slower")
