"""The BLAS's kernels against the CPU's vector width: the compute roof a library's fallback hides.

OpenBLAS (numpy's BLAS) chooses its kernels once, when it is loaded, from the CPUs it knows
(``DYNAMIC_ARCH``). A CPU newer than the OpenBLAS build gets a fallback: on this workplace's VM (AMD
family 26, Zen 5, with 512-bit FMA units) OpenBLAS 0.3.31 picks its 256-bit "Haswell" kernels and numpy's
fp32 matmul runs at ~255 GFLOP/s, where the same library with its AVX-512 ("SkylakeX") kernels reaches
~490 — and a hand FMA loop ~540 (``benchmarks/bench_ceilings.py``). A roof measured only through the
fallback would call a half-speed matmul "at the roof".

The kernel choice cannot change after OpenBLAS is loaded (``OPENBLAS_CORETYPE`` is read at load time),
so :func:`probe` measures numpy's matmul in a **child process** started with ``OPENBLAS_CORETYPE`` set,
with the same sweep and agreeing trials as the in-process calibration
(:func:`perfmagic.roofs.kernels._sweep`). It runs only where :func:`mismatch` finds a narrow kernel
family on a CPU whose flags have AVX-512; the calibration keeps the higher roof and records both, and
``%%roofline`` then says why the user's matmul sits at about half of it and how numpy gets the rest.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

from ..findings import Finding

# OpenBLAS core types whose kernels use at most 256-bit vectors (lower-case, as threadpoolctl reports them)
NARROW = frozenset({"haswell", "zen", "sandybridge", "nehalem", "core2", "penryn", "dunnington", "atom",
                    "prescott", "bulldozer", "piledriver", "steamroller", "excavator", "barcelona", "opteron",
                    "opteron_sse3", "katmai", "coppermine", "northwood", "banias", "athlon", "nano"})
# the x86 flags OpenBLAS's AVX-512 kernels need; the core type to ask for when they are all present
AVX512_FLAGS = ("avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl")
CHILD_TIMEOUT_EXTRA_S = 20.0   # child start (python + numpy import) and its last trial, past its budget


def cpu_flags() -> set[str] | None:
    """The CPU feature flags of ``/proc/cpuinfo`` (x86 ``flags``, Arm ``Features``), or None where
    there is no such file."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        return None
    return None


def openblas_architecture() -> str | None:
    """The core type of the OpenBLAS loaded in this process (threadpoolctl), or None (no OpenBLAS,
    no threadpoolctl)."""
    try:
        import numpy  # noqa: F401  (loads numpy's OpenBLAS so threadpoolctl sees it)
        from threadpoolctl import threadpool_info
    except Exception:
        return None
    for p in threadpool_info():
        if p.get("internal_api") == "openblas" and p.get("architecture"):
            return str(p["architecture"])
    return None


def mismatch(flags: set[str] | None = None, architecture: str | None = None) -> dict[str, str] | None:
    """``{"architecture", "coretype", "why"}`` (why: a :class:`~perfmagic.findings.Finding`) when numpy's OpenBLAS runs narrow (≤ 256-bit) kernels on
    a CPU with AVX-512 (so a child process with ``OPENBLAS_CORETYPE=coretype`` may be ~2× faster), else
    None. ``PERFMAGIC_NO_WIDE_PROBE=1`` turns the check off."""
    if os.environ.get("PERFMAGIC_NO_WIDE_PROBE"):
        return None
    if flags is None:
        flags = cpu_flags()
    if not flags or not all(f in flags for f in AVX512_FLAGS):
        return None
    arch = architecture if architecture is not None else openblas_architecture()
    if not arch or arch.lower() not in NARROW:
        return None
    # SkylakeX: OpenBLAS's AVX-512 sgemm/dgemm kernels (its Cooperlake and SapphireRapids types add bf16
    # kernels on top of the same ones, and report themselves as SkylakeX where the build lacks them)
    return {"architecture": arch, "coretype": "SkylakeX", "why": Finding.of("roofs.wide-fallback", arch=arch)}


_CHILD = r"""
import json, sys, time
import numpy as np
from threadpoolctl import threadpool_info
from perfmagic.roofs.kernels import _sweep, _wall
budget, trial_s = float(sys.argv[1]), float(sys.argv[2])
dtypes = sys.argv[3].split(",")
arch = next((p.get("architecture") for p in threadpool_info() if p.get("internal_api") == "openblas"), None)
out = {"architecture": arch, "results": {}}
rng = np.random.default_rng(0)
for i, d in enumerate(dtypes):
    ndt = getattr(np, d)
    def make(n, ndt=ndt):
        x = rng.standard_normal((n, n)).astype(ndt)
        y = rng.standard_normal((n, n)).astype(ndt)
        o = np.empty((n, n), dtype=ndt)
        return lambda: np.matmul(x, y, out=o)
    deadline = time.perf_counter() + budget / len(dtypes)
    out["results"][d] = _sweep(make, (512, 1024, 2048), deadline, _wall, min_s=trial_s)
print("PERFMAGIC-WIDE " + json.dumps(out))
"""


def probe(coretype: str, dtypes: tuple[str, ...], budget_s: float, trial_s: float = 0.1) -> dict[str, Any]:
    """numpy matmul rates (the calibration's sweep) in a child process with ``OPENBLAS_CORETYPE=coretype``.
    Returns ``{"architecture": <what the child's OpenBLAS used>, "results": {dtype: sweep result}}`` or
    ``{"error": why}``; the child is killed on timeout and on KeyboardInterrupt (re-raised)."""
    dtypes = tuple(d for d in dtypes if d in ("float32", "float64"))
    if not dtypes:
        return {"error": "no numpy dtype to probe"}
    env = dict(os.environ, OPENBLAS_CORETYPE=coretype)
    pkg_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = [sys.executable, "-c", _CHILD, repr(budget_s), repr(trial_s), ",".join(dtypes)]
    try:
        cp = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=budget_s + CHILD_TIMEOUT_EXTRA_S)
    except subprocess.TimeoutExpired:
        return {"error": Finding.of("roofs.child-timeout", seconds=budget_s + CHILD_TIMEOUT_EXTRA_S)}
    except OSError as exc:
        return {"error": Finding.of("roofs.child-not-started", python=sys.executable, error=str(exc))}
    line = next((x for x in cp.stdout.splitlines() if x.startswith("PERFMAGIC-WIDE ")), None)
    if cp.returncode == -signal.SIGILL:
        return {"error": Finding.of("roofs.child-sigill", coretype=coretype)}
    if cp.returncode != 0 or line is None:
        tail = (cp.stderr or cp.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"error": Finding.of("roofs.child-failed", code=cp.returncode, tail=tail[0][:200])}
    try:
        return json.loads(line[len("PERFMAGIC-WIDE "):])
    except ValueError as exc:
        return {"error": Finding.of("roofs.child-unreadable", error=str(exc))}
