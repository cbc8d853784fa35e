"""Tests for perfmagic.core.env (environment capture, fingerprint, cache sizes, warnings) and perfmagic.core.load (the load probe)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

import pytest

from perfmagic.core import env as _env
from perfmagic.core import load as _load

SRC = str(Path(__file__).resolve().parents[1] / "src")
KEYS = {
    "python", "platform", "hostname", "cpu_model", "logical_cores", "usable_cores", "loadavg_1m",
    "mem_available_bytes", "mem_total_bytes", "gc_enabled", "torch_threads", "torch_interop_threads",
    "blas", "versions", "device", "cuda_available", "gpu", "cpu_freq_mhz", "llc_bytes",
}
HEAVY = ("torch", "numpy", "pandas", "matplotlib", "ipywidgets", "psutil", "pynvml", "threadpoolctl", "jax", "cupy")


def _run_python(code: str) -> str:
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True, timeout=120).stdout


def test_import_is_light() -> None:
    out = _run_python(f"import sys, perfmagic.core.env; print([m for m in {HEAVY!r} if m in sys.modules])")
    assert out.strip() == "[]"


def test_capture_never_imports_torch_or_numpy() -> None:
    out = _run_python("import sys, json; from perfmagic.core import env as _env; json.dumps(_env.capture('cuda:0'));"
                      "print([m for m in ('torch', 'numpy', 'jax', 'cupy') if m in sys.modules])")
    assert out.strip() == "[]"


def test_capture_keys_and_json() -> None:
    env = _env.capture()
    assert KEYS <= set(env)
    json.dumps(env)
    assert env["device"] == "cpu" and env["gpu"] is None
    assert env["python"].count(".") == 2 and env["logical_cores"] == os.cpu_count()
    assert isinstance(env["gc_enabled"], bool) and env["llc_bytes"] > 0
    assert {"python", "ipython", "numpy", "torch", "jax", "cupy", "perfmagic"} <= set(env["versions"])
    for pool in env["blas"] or []:
        assert set(pool) == {"user_api", "internal_api", "num_threads", "version"}


def test_capture_cuda_without_driver() -> None:
    env = _env.capture("cuda:0")
    json.dumps(env)
    assert env["device"] == "cuda:0"


def test_fingerprint_stable_and_sensitive() -> None:
    a, b = _env.capture(), _env.capture()
    fp = _env.fingerprint(a)
    assert len(fp) == 12 and int(fp, 16) >= 0
    assert fp == _env.fingerprint(b)
    volatile = dict(a, loadavg_1m=99.0, mem_available_bytes=1, hostname="elsewhere", cpu_freq_mhz=1.0)
    assert _env.fingerprint(volatile) == fp
    assert _env.fingerprint(dict(a, cpu_model="Other CPU 9000")) != fp
    assert _env.fingerprint(dict(a, device="cuda:0")) != fp
    assert _env.fingerprint(dict(a, gpu={"name": "H100", "driver": "550.1", "sm_clock_mhz": 1})) == \
        _env.fingerprint(dict(a, gpu={"name": "H100", "driver": "550.1", "sm_clock_mhz": 2}))


@pytest.mark.parametrize("text, expected", [
    ("32K", 32 * 1024), ("1024K", 1024 * 1024), ("32M", 32 * 1024 ** 2), ("2G", 2 * 1024 ** 3),
    ("512", 512), ("48K\n", 48 * 1024),
])
def test_parse_size(text: str, expected: int) -> None:
    assert _env._parse_size(text) == expected


def test_parse_size_rejects_garbage() -> None:
    with pytest.raises(ValueError):
        _env._parse_size("lots")


def test_cache_sizes() -> None:
    sizes = _env.cache_sizes()
    assert set(sizes) == {"l1d_bytes", "l2_bytes", "l3_bytes", "llc_bytes", "llc_source"}
    assert sizes["llc_source"] in ("sysfs", "default") and sizes["llc_bytes"] > 0
    if sizes["llc_source"] == "sysfs":
        known = [v for v in (sizes["l1d_bytes"], sizes["l2_bytes"], sizes["l3_bytes"]) if v]
        assert sizes["llc_bytes"] == known[-1]


def test_load_probe_quiet() -> None:
    probe = _load.LoadProbe().start()
    time.sleep(0.3)
    others = probe.stop()
    assert others is not None and others >= 0  # the machine may be loaded by others: no upper bound
    assert probe.own_cores is not None and probe.own_cores < 0.5


def test_load_probe_too_short() -> None:
    probe = _load.LoadProbe().start()
    assert probe.stop() is None


def test_load_probe_detects_spinner() -> None:
    spin = "import time; print('go', flush=True); t = time.perf_counter() + 0.8\nwhile time.perf_counter() < t: pass"
    proc = subprocess.Popen([sys.executable, "-c", spin], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "go"
        import psutil

        child = psutil.Process(proc.pid)
        c0, t0 = sum(child.cpu_times()[:2]), time.perf_counter()
        probe = _load.LoadProbe().start()
        time.sleep(0.5)
        others = probe.stop()
        truth = (sum(child.cpu_times()[:2]) - c0) / (time.perf_counter() - t0)  # the spinner's own CPU use
    finally:
        proc.kill()
        proc.wait()
    # on a busy shared machine the spinner may get less than a core, and others may add load:
    # the probe must see at least what the spinner really used, and no more than the machine has
    assert truth > 0.2, truth
    assert others is not None and truth - 0.2 <= others <= len(os.sched_getaffinity(0)) + 0.2, (others, truth)


def test_gpu_info_without_driver() -> None:
    if _env._nvml() is not None:  # a machine with an NVIDIA driver: a real reading instead
        info = _env.gpu_info(0)
        assert info is not None and info["name"] and isinstance(info["throttle_reasons"], list)
        json.dumps(info)
        return
    assert _env.gpu_info() is None
    assert _env.gpu_info(3) is None
    assert _env.capture("cuda:1")["gpu"] is None


class _FakeNvml(types.SimpleNamespace):
    """Stand-in for pynvml on a GPU machine; ``fail`` names queries that raise."""

    def __init__(self, reasons: int, fail: tuple[str, ...] = ()) -> None:
        def query(name: str, value: Any) -> Any:
            def fn(*args: Any) -> Any:
                if name in fail:
                    raise RuntimeError(name)
                return value(*args) if callable(value) else value
            return fn

        super().__init__(
            nvmlInit=lambda: None, nvmlDeviceGetHandleByIndex=lambda i: ("h", i),
            nvmlDeviceGetHandleByUUID=lambda u: ("h", u),
            nvmlDeviceGetName=query("name", b"NVIDIA H100 80GB HBM3"),
            nvmlSystemGetDriverVersion=query("driver", "550.54.15"),
            nvmlSystemGetCudaDriverVersion=query("cuda", 12040),
            nvmlDeviceGetMemoryInfo=query("mem", types.SimpleNamespace(total=80 * 2 ** 30)),
            nvmlDeviceGetClockInfo=query("clock", lambda h, k: 1200 if k == 1 else 2600),
            nvmlDeviceGetMaxClockInfo=query("maxclock", lambda h, k: 1980 if k == 1 else 2619),
            nvmlDeviceGetTemperature=query("temp", 71),
            nvmlDeviceGetPowerUsage=query("power", 650_000),
            nvmlDeviceGetUtilizationRates=query("util", types.SimpleNamespace(gpu=98)),
            nvmlDeviceGetCurrentClocksThrottleReasons=query("reasons", reasons),
        )


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> Any:
    def install(reasons: int, fail: tuple[str, ...] = ()) -> _FakeNvml:
        fake = _FakeNvml(reasons, fail)
        monkeypatch.setattr(_env, "_nvml", lambda: fake)
        return fake
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return install


def test_gpu_info_decodes(fake_nvml: Any) -> None:
    fake_nvml(0x4 | 0x40)  # sw_power_cap + hw_thermal, only the older query name exists
    info = _env.gpu_info(0)
    assert info is not None
    assert info["name"] == "NVIDIA H100 80GB HBM3" and info["cuda_driver"] == "12.4"
    assert info["sm_clock_mhz"] == 1200 and info["sm_clock_max_mhz"] == 1980 and info["power_w"] == 650.0
    assert info["throttle_reasons"] == ["sw_power_cap", "hw_thermal"] and info["throttled"] is True
    json.dumps(info)
    env = dict(_env.capture("cuda:0"), gpu=info)
    warnings = [str(w) for w in _env.doubt_warnings(env, env, 0.0, 2)]
    assert any("throttled" in w and "sw_power_cap" in w for w in warnings)
    assert "GPU SM clock at 1200 of 1980 MHz" in warnings


def test_gpu_info_idle_and_partial_failure(fake_nvml: Any) -> None:
    fake_nvml(0x1, fail=("temp", "power"))
    info = _env.gpu_info(1)
    assert info is not None and info["temperature_c"] is None and info["power_w"] is None
    assert info["throttle_reasons"] == ["gpu_idle"] and info["throttled"] is False
    assert _env.doubt_warnings({"gpu": info}, None, None, None) == []  # idle: low clocks are expected
    fake_nvml(0x0)
    assert _env.gpu_info(0)["throttle_reasons"] == ["none"]


def test_gpu_clock_held_names_only_the_reasons_that_hold_the_clock(fake_nvml: Any) -> None:
    fake_nvml(0x4 | 0x1 | 0x10)  # power cap, plus idle and sync boost (which hold nothing down)
    assert _env.gpu_clock_held(0) == ("sw_power_cap",)
    fake_nvml(0x1)
    assert _env.gpu_clock_held(0) == ()
    fake_nvml(0x4, fail=("reasons",))
    assert _env.gpu_clock_held(0) is None  # cannot say: not "free"


def test_doubt_warnings_load() -> None:
    env: dict[str, Any] = {"gpu": None}
    warnings = [str(w) for w in _env.doubt_warnings(env, env, 1.2, 2)]
    assert len(warnings) == 1
    assert "1.2 of 2 usable cores" in warnings[0]
    assert _env.doubt_warnings(env, env, 0.0, 2) == []
    assert _env.doubt_warnings(env, None, None, None) == []
    assert _env.doubt_warnings(env, None, 0.3, 64) == []  # under 10 % of a big machine


def test_load_probe_counts_waited_for_children_as_own_work() -> None:
    """A child that spins 0.6 s and is waited for (the ceilings' wide-kernel probe runs so) is this
    process's work, not other processes' load."""
    import subprocess
    import sys

    from perfmagic.core.load import LoadProbe

    p = LoadProbe().start()
    subprocess.run([sys.executable, "-c", "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass"],
                   check=True)
    p.stop()
    # the child's 0.6 s of CPU counted as this process's (before: ~0 own, the child's cores as others');
    # process-time based, so a busy neighbour stretching the wall time to ~1.3 s still leaves > 0.4
    assert p.own_cores is not None and p.own_cores > 0.4, p.own_cores
