"""%%roofline and %roofline through the shell, with roofs planted in a temporary cache (no calibration:
the ``roofs`` fixture of conftest)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def test_roofline_cell_classes_a_matmul_and_records_it(shell, roofs) -> None:
    shell.run("import torch\nx = torch.randn(512, 512)")
    res = shell.run("%%roofline -l mm\nx @ x\n")
    assert res.error_in_exec is None, res.error_in_exec
    (bundle,) = shell.bundles
    text = bundle["text/plain"]
    assert text.startswith("compute-bound:") and "label mm" in text and "run #1" in text
    assert "next, in order:" in text and "image/png" in bundle
    assert "application/vnd.jupyter.widget-view+json" not in bundle  # self-contained HTML, folded sections
    assert "run #1" in bundle["text/html"] and "Ops counted (" in bundle["text/html"] and "<details" in bundle["text/html"]
    import perfmagic

    df = perfmagic.ledger(magic="roofline")
    assert list(df["magic"]) == ["roofline"] and df.iloc[0]["bound"] == "compute"
    assert df.iloc[0]["flops"] == pytest.approx(2 * 512**3)
    shell.run("%perf")
    assert "compute-bound" in shell.text()


def test_roofline_given_work_memory_bound_and_history_on_chart(shell, roofs) -> None:
    shell.run("import numpy as np\nn = 2_000_000\nb = np.ones(n); c = np.ones(n)")
    shell.run("%%roofline -l triad --flops 2*n --bytes 24*n -q\na = b + 2.5 * c\n")
    res = shell.run("%%roofline -l triad-again --flops 2*n --bytes 24*n\na = b + 2.5 * c\n")
    assert res.error_in_exec is None
    assert shell.text().startswith("memory-bound:")


def test_roofline_line_shows_the_roofs(shell, roofs) -> None:
    res = shell.run("%roofline --no-plot")
    assert res.error_in_exec is None
    assert "float32" in shell.text() and "bandwidth" in shell.text()


def test_loaded_roofs_are_held_marked_and_not_cached(shell, tmp_path, monkeypatch) -> None:
    """A calibration taken beside busy processes: %roofline and %%roofline say LOADED, nothing is cached,
    and while the machine stays busy the held roofs are reused instead of re-measured each cell."""
    from perfmagic.roofs import ceilings as cm

    monkeypatch.setenv("PERFMAGIC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(cm, "_HELD", {})
    fp, _ = cm.machine_fingerprint("cpu")
    calls = []

    def loaded_measure(dev, **kw):
        calls.append(dev)
        return cm.Ceilings(device="cpu", fingerprint=fp, measured_utc="2026-11-24T00:00:00Z",
                           compute={"float32": 120e9, "float64": 60e9, "bfloat16": 200e9}, bandwidth_Bps=9e9, load_before=1.2,
                           load_after=0.9, warnings=("loaded: other processes kept 1.2 cores busy",))

    monkeypatch.setattr(cm, "measure", loaded_measure)
    monkeypatch.setattr(cm, "_idle_load", lambda seconds=0.15: 1.0)
    res = shell.run("%roofline --no-plot")
    assert res.error_in_exec is None, res.error_in_exec
    assert "LOADED: others kept 1.2 cores busy" in shell.text() and "not cached" in shell.text()
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").iterdir())
    shell.run("import torch\nx = torch.randn(256, 256)")
    res = shell.run("%%roofline --no-plot\nx @ x\n")
    assert res.error_in_exec is None, res.error_in_exec
    text = shell.text()
    assert "LOADED: others kept 1.2 cores busy" in " ".join(text.split())
    assert "the roofs were measured while other processes kept 1.2 cores busy" in " ".join(text.split())
    assert calls == ["cpu"]  # reused, not re-measured, while the machine stays busy


@pytest.mark.parametrize("cell, needle", [
    ("%%roofline\nsum(range(10))\n", "--flops"),
    ("%%roofline --flops nope*2 --bytes 8\n1\n", "NameError"),
    ("%%roofline --dtype float16\nx @ x\n", "float16"),
    ("%%roofline --bogus\nx\n", "unrecognized arguments"),
    ("%roofline x = 1", "no code on the line"),
])
def test_roofline_bad_input_is_a_usage_error(shell, roofs, cell, needle) -> None:
    shell.run("import torch\nx = torch.randn(64, 64)")
    res = shell.run(cell)
    assert type(res.error_in_exec).__name__ == "UsageError", res.error_in_exec
    assert needle in str(res.error_in_exec)


def test_roofline_exception_and_interrupt(shell, roofs) -> None:
    import perfmagic

    shell.run("import torch\nx = torch.randn(64, 64)")
    res = shell.run("%%roofline\ny = x @ x\nraise ValueError('boom')\n")
    assert isinstance(res.error_in_exec, ValueError)
    shell.ip.user_ns["calls"] = {"n": 0}
    # the 4th call: counting (1), the cold call (2), then the first warmup calls, before any sample, even
    # on a loaded machine (with 30 a loaded run sometimes finished its samples first and was recorded)
    res = shell.run("%%roofline\ncalls['n'] += 1\nx @ x\nif calls['n'] == 4:\n    raise KeyboardInterrupt\n")
    assert isinstance(res.error_in_exec, KeyboardInterrupt)
    assert len(perfmagic.ledger()) == 0


@pytest.mark.gpu
def test_cuda_ceilings_and_matmul_is_compute_bound(tmp_path, monkeypatch) -> None:
    import perfmagic

    monkeypatch.setenv("PERFMAGIC_CACHE_DIR", str(tmp_path))
    c = perfmagic.ceilings("cuda", budget_s=20)
    assert c.compute.get("bfloat16", 0) > c.compute.get("float32", 0) > 0 and c.bandwidth_Bps > 1e11
    ns = {"torch": torch, "a": torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)}
    r = perfmagic.roofline("a @ a", globals=ns, ceilings=c)
    assert r.bound == "compute" and r.dtype == "bfloat16" and r.fraction_of_roof > 0.5
