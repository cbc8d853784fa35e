"""Roofline: analytic FLOP/byte counts, the ceilings cache, the verdict on this machine, bad inputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

from perfmagic.roofs.ceilings import Ceilings, cache_path, ceilings, load_cached, machine_fingerprint, measure, save  # noqa: E402
from perfmagic.roofs.counting import count  # noqa: E402
from perfmagic.errors import BadOptionError, PerfmagicError  # noqa: E402
from perfmagic.roofs.roofline import RooflineResult, roofline  # noqa: E402


def _fake(fp: str = "0123456789ab", **kw: Any) -> Ceilings:
    base = dict(device="cpu", fingerprint=fp, measured_utc="2026-01-01T00:00:00Z",
                compute={"float32": 250e9, "float64": 125e9}, bandwidth_Bps=20e9,
                details={"bandwidth": {"methods": {"torch_add": {"bytes_per_s": 20e9}}}}, load_before=0.0,
                load_after=0.1, warnings=(), calibration_s=1.0)
    base.update(kw)
    return Ceilings(**base)


@pytest.fixture(scope="module")
def quick_ceilings() -> Ceilings:
    """A real but short calibration of this machine (float32/float64 only)."""
    return measure("cpu", dtypes=("float32", "float64"), budget_s=3.0)


# ---- counting --------------------------------------------------------------------------------------
def test_matmul_flops_and_bytes() -> None:
    m, k, n = 64, 48, 32
    a, b = torch.randn(m, k), torch.randn(k, n)
    c = count(lambda: a @ b)
    assert c.flops == 2 * m * n * k
    assert c.bytes == (m * k + k * n + m * n) * 4
    assert c.dtype == "float32"


def test_conv2d_flops() -> None:
    N, Cin, H, W, Cout, kh, kw = 2, 3, 16, 12, 8, 3, 5
    x, w = torch.randn(N, Cin, H, W), torch.randn(Cout, Cin, kh, kw)
    c = count(lambda: torch.nn.functional.conv2d(x, w))
    Hout, Wout = H - kh + 1, W - kw + 1
    assert c.flops == 2 * N * Cout * Hout * Wout * Cin * kh * kw


def test_mlp_forward_backward_flops() -> None:
    B, i, h, o = 16, 32, 64, 10
    l1, l2 = torch.nn.Linear(i, h), torch.nn.Linear(h, o)
    x = torch.randn(B, i, requires_grad=True)  # so backward computes input grads of both layers
    fwd = count(lambda: l2(torch.relu(l1(x))))
    assert fwd.flops_counter == 2 * B * (i * h + h * o)
    both = count(lambda: l2(torch.relu(l1(x))).sum().backward())
    # FlopCounterMode: addmm counts the product only; backward = grad wrt weights + wrt inputs = 2× forward
    assert both.flops_counter == 3 * 2 * B * (i * h + h * o)
    assert both.flops >= both.flops_counter  # + formula FLOPs for relu / sum / threshold_backward
    assert "aten.relu" in both.formula_ops


def test_attention_on_cpu_gets_a_formula() -> None:
    B, H, L, D = 2, 2, 64, 16
    q = torch.randn(B, H, L, D)
    c = count(lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q))
    assert c.flops_counter == 0  # FlopCounterMode misses CPU attention
    assert c.flops == 4 * B * H * L * L * D
    assert c.formula_ops and "attention" in c.formula_ops[0]


def test_elementwise_bytes() -> None:
    n, m = 1000, 37
    x, y, o = torch.randn(n), torch.randn(n), torch.empty(n)
    assert count("x + y", {"x": x, "y": y}).bytes == 3 * n * 4
    assert count("torch.add(x, y, out=o)", {"x": x, "y": y, "o": o, "torch": torch}).bytes == 3 * n * 4
    assert count("o.copy_(x)", {"x": x, "o": o}).bytes == 2 * n * 4
    assert count("o.add_(x)", {"x": x, "o": o}).bytes == 3 * n * 4
    assert count("x.view(10, 100).t()", {"x": x}).bytes == 0  # views move nothing
    X, v = torch.randn(n, m), torch.randn(m)
    assert count("X * v", {"X": X, "v": v}).bytes == (2 * n * m + m) * 4  # broadcast operand counted once
    xd = torch.randn(n, dtype=torch.float64)
    c = count("xd * 2.0", {"xd": xd})
    assert c.bytes == 2 * n * 8 and c.dtype == "float64"


def test_zero_flop_compute_ops_listed() -> None:
    x = torch.randn(100)
    c = count(lambda: torch.exp(x))
    assert c.zero_flop_compute_ops == ("aten.exp",)


# ---- ceilings cache -----------------------------------------------------------------------------------
def test_cache_round_trip(tmp_path: Any) -> None:
    c = _fake()
    path = save(c, tmp_path)
    assert os.path.basename(path) == "ceilings-0123456789ab.json"
    back = load_cached(c.fingerprint, tmp_path)
    assert back is not None and back.source == "cache"
    assert back.to_dict() == c.to_dict()
    assert back.ridge("float32") == pytest.approx(12.5)
    assert [p.name for p in tmp_path.iterdir()] == ["ceilings-0123456789ab.json"]  # no temp file left
    assert "float32" in back.text() and back._repr_mimebundle_()["image/png"]


def test_cached_ceilings_used_and_env_override(tmp_path: Any, monkeypatch: Any) -> None:
    fp, _ = machine_fingerprint("cpu")
    monkeypatch.setenv("PERFMAGIC_CACHE_DIR", str(tmp_path))
    save(_fake(fp), None)
    monkeypatch.setattr("perfmagic.roofs.ceilings.measure", lambda *a, **k: pytest.fail("re-measured"))
    got = ceilings("cpu", dtypes=["float32", "fp64"])
    assert got.source == "cache" and got.compute["float32"] == 250e9


def test_corrupt_cache_remeasures(tmp_path: Any, monkeypatch: Any) -> None:
    fp, _ = machine_fingerprint("cpu")
    p = cache_path(fp, tmp_path)
    os.makedirs(tmp_path, exist_ok=True)
    with open(p, "w") as f:
        f.write('{"version": 1, "compute": {"float32": ')  # truncated JSON
    calls = []

    def fake_measure(dev: str, **kw: Any) -> Ceilings:
        calls.append(dev)
        return _fake(fp)

    monkeypatch.setattr("perfmagic.roofs.ceilings.measure", fake_measure)
    got = ceilings("cpu", dtypes=["float32"], cache_dir=tmp_path)
    assert calls == ["cpu"] and got.compute["float32"] == 250e9
    assert json.load(open(p))["compute"]["float32"] == 250e9  # repaired


def test_interrupted_calibration_writes_nothing(tmp_path: Any) -> None:
    class Stop(Exception):
        pass

    def progress(fraction: float, message: str) -> None:
        raise Stop(message)

    with pytest.raises(Stop):
        ceilings("cpu", recalibrate=True, cache_dir=tmp_path, progress=progress)
    assert list(tmp_path.iterdir()) == []


def test_quick_calibration_is_sane(quick_ceilings: Ceilings) -> None:
    c = quick_ceilings
    assert set(c.compute) == {"float32", "float64"}
    assert c.compute["float32"] > 1e9 and c.bandwidth_Bps > 1e9
    methods = c.details["bandwidth"]["methods"]
    assert c.bandwidth_Bps == max(m["bytes_per_s"] for m in methods.values())
    for d, per in c.details["compute"].items():
        assert c.compute[d] == max(m["flops_per_s"] for m in per.values())
    assert "counting" in c.details["bandwidth"] and c.ridge("float32") > 0
    assert c.calibration_s < 10


# ---- verdicts on this machine -------------------------------------------------------------------------
@pytest.mark.slow
def test_numpy_triad_is_memory_bound(quick_ceilings: Ceilings) -> None:
    from perfmagic.core.env import cache_sizes

    n = int(min(cache_sizes()["llc_bytes"], 256 * 1024 ** 2) // 8)  # each array ≥ the LLC (or 256 MiB)
    ns = {"np": np, "b": np.ones(n), "c": np.ones(n), "s": 3.0}
    # numpy makes two passes: tmp = s*c (read c, write tmp), a = b + tmp (read b, tmp, write a): 5 × 8 B/elt
    r = roofline("a = b + s*c", globals=ns, flops=2 * n, bytes=5 * 8 * n, dtype="float64",
                 ceilings=quick_ceilings, budget=0.8)
    assert r.bound == "memory"
    assert r.intensity == pytest.approx(0.05)
    assert r.flops_source == r.bytes_source == "given"
    assert 0 < r.fraction_of_roof < 1.5
    assert r.text().startswith("memory-bound")
    assert r.advice[-1].startswith("compute is not the limit") or "reduce data movement" in " ".join(r.advice)


@pytest.mark.slow
def test_matmul_is_compute_bound(quick_ceilings: Ceilings) -> None:
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    r = roofline("a @ b", globals={"a": a, "b": b}, ceilings=quick_ceilings, budget=0.8)
    assert r.flops == 2 * 1024 ** 3 and r.flops_source == "counted"
    assert r.dtype == "float32" and r.bound == "compute"
    assert r.fraction_of_roof > 0.2
    m = r.metrics()
    assert m["bound"] == "compute" and m["intensity"] == pytest.approx(2 * 1024 ** 3 / (3 * 1024 ** 2 * 4))
    png = r.figure_png(history=[("earlier", 0.1, 1e9), {"label": "ledger", "intensity": 3.0, "flops_per_s": 5e9}])
    assert png[:4] == b"\x89PNG"
    bundle = r._repr_mimebundle_()
    assert "compute-bound" in bundle["text/plain"] and "<img" in bundle["text/html"]


def test_cache_resident_working_set_warns() -> None:
    x, y = torch.randn(4096), torch.randn(4096)
    r = roofline("x + y", globals={"x": x, "y": y}, ceilings=_fake(bandwidth_Bps=1e6), budget=0.2)
    assert any("above the DRAM roof" in w for w in r.warnings)
    assert isinstance(r, RooflineResult)
    # the result protocol: median_s is the primary metric, the timing's raw samples are the samples
    from perfmagic.result import Result

    assert isinstance(r, Result) and r.primary_metric == "median_s" and r.metrics()["median_s"] == r.time_s
    assert r.samples() == r.bench.samples() == r.samples_dict() and r.headline() == r.verdict()
    assert repr(r) == f"<RooflineResult: {r.verdict()}>"
    titles = [t for t, _ in r.html_sections()]
    assert titles[0].startswith("Ops counted (") and "Roofs (cpu, measured)" in titles and titles[-1] == "Timing"
    bundle = r._repr_mimebundle_()
    assert bundle["text/plain"] == r.text() and "image/png" in bundle
    assert bundle["text/html"].count("<details") == len(titles) and "aten.add" in bundle["text/html"]


def test_ceilings_follow_the_protocol_and_draw_without_the_roofline_module() -> None:
    from perfmagic.result import Result

    sweep = {"compute": {"float32": {"torch_matmul": {"flops_per_s": 250e9, "size": 1024,
                                                      "sweep": [[512, 200e9], [1024, 250e9]]}}}}
    c = _fake(details={**_fake().details, **sweep})
    assert isinstance(c, Result) and c.primary_metric == "bandwidth_Bps"
    m = c.metrics()
    assert m["bandwidth_Bps"] == 20e9 and m["peak_flops_per_s_float32"] == 250e9 and m["ridge_float32"] == 12.5
    assert c.samples() == {"float32/torch_matmul": [200e9, 250e9]} and c.headline().startswith("ceilings of cpu")
    assert [t for t, _ in c.html_sections()] == ["compute sweep", "bandwidth kernels"]
    assert c._repr_mimebundle_()["text/html"].count("<details") == 2
    code = ("import sys, json\nfrom perfmagic.roofs.ceilings import Ceilings\n"
            f"c = Ceilings.from_dict(json.loads({json.dumps(json.dumps(c.to_dict()))}))\n"
            "assert c.figure_png(history=[('earlier', 0.5, 1e9)])[:4] == b'\\x89PNG'\n"
            "assert 'perfmagic.roofs.roofline' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- bad inputs -----------------------------------------------------------------------------------
def test_no_torch_ops_and_no_flops() -> None:
    with pytest.raises(BadOptionError, match="--flops"):
        roofline("a = sum(range(10))", ceilings=_fake())


@pytest.mark.parametrize("kw", [{"flops": -1, "bytes": 10}, {"flops": 10, "bytes": 0}, {"flops": float("nan"), "bytes": 1},
                                {"flops": "many", "bytes": 1}])
def test_bad_work_numbers(kw: dict[str, Any]) -> None:
    with pytest.raises(BadOptionError):
        roofline("pass", ceilings=_fake(), **kw)


def test_unknown_or_missing_dtype() -> None:
    x = torch.randn(100)
    with pytest.raises(BadOptionError, match="float32, float64"):
        roofline("x * 2", globals={"x": x}, ceilings=_fake(), dtype="bfloat16", budget=0.1)
    with pytest.raises(BadOptionError, match="dtypes"):
        ceilings("cpu", dtypes=["tf32"])
    with pytest.raises(BadOptionError):
        _fake().ridge("fp8")


def test_zero_time(monkeypatch: Any) -> None:
    from perfmagic.timing.results import BenchResult

    monkeypatch.setattr("perfmagic.timing.bench.bench",
                        lambda *a, **k: BenchResult(code="pass", raw=(0.0,) * 5, number=1, cold_s=0.0))
    with pytest.raises(PerfmagicError, match="time per call"):
        roofline("pass", flops=1, bytes=1, ceilings=_fake())


def test_modules_import_light() -> None:
    code = ("import sys, perfmagic.roofs.ceilings, perfmagic.roofs.counting, perfmagic.roofs.roofline\n"
            "heavy = [m for m in ('torch', 'numpy', 'matplotlib') if m in sys.modules]\n"
            "assert not heavy, heavy\n")
    subprocess.run([sys.executable, "-c", code], check=True)
