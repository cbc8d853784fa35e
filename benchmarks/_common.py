"""Shared helpers for the benchmark scripts: machine description, date, command, docs sections.

Every script prints a markdown table and writes it into ``docs/benchmarks.md`` between
``<!-- BEGIN name -->`` and ``<!-- END name -->``; only that section is replaced, so the scripts can
be re-run independently and in any order.
"""

from __future__ import annotations

import datetime
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "benchmarks.md"
RESULTS = ROOT / "benchmarks" / "results"

# Fixed order of the sections in docs/benchmarks.md (a missing one is created in this order).
SECTIONS = ("load_ext", "timing_quality", "timing_quality_busy", "gpu")

INTRO = """\
# Benchmarks

How perfmagic compares with the tools people already use. Every table below is produced by a
script in `benchmarks/` and written here by that script between
`<!-- BEGIN name -->` / `<!-- END name -->` markers; re-running a script replaces only its own
section. Each section states the date, the machine and the exact command (run from the repository
root) that produced it. `--quick` runs fewer repetitions and is only meant as a smoke test.

| section | script | what it measures |
|---|---|---|
| `%load_ext` time | `benchmarks/bench_load_ext.py` | time of `%load_ext X` in a fresh IPython shell, perfmagic vs other profiling extensions |
| timing quality | `benchmarks/bench_timing_quality.py` | spread of the answer over repeated measurements and the time spent per answer, vs `%timeit` and `torch.utils.benchmark` (CPU) |
| GPU timing | `benchmarks/bench_gpu.py` | the same on a CUDA device, vs `triton.testing.do_bench` and `torch.utils.benchmark` |
| the ledger at 100k runs | `benchmarks/bench_ledger.py` | `%perf`, `%perf next`, `%perf target`, `perfmagic.ledger()`, a historical `%perf compare` and one new row on ledgers of 1k, 10k and 100k runs; bytes per run on disk |

Numbers from a small shared cloud VM are noisy by nature; that noise is exactly what the
timing-quality benchmark is about. Compare rows of the same section only (same run, same machine).
"""


# ---------------------------------------------------------------------------------------------
# machine / software description
# ---------------------------------------------------------------------------------------------
def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _version(mod: str) -> str | None:
    try:
        m = __import__(mod)
    except Exception:
        return None
    return str(getattr(m, "__version__", "?"))


def git_state() -> str:
    """``<short commit>`` plus ``+ uncommitted changes`` when the src/ tree is dirty."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "src"], cwd=ROOT, capture_output=True,
                               text=True, timeout=10).stdout.strip()
    except Exception:
        return "unknown commit"
    if not head:
        return "unknown commit"
    return head + (" + uncommitted changes in src/" if dirty else "")


def machine(gpu: str | None = None) -> str:
    """One line: CPU model, usable cores, (GPU), Python/torch/numpy/IPython/perfmagic versions."""
    parts = [f"{cpu_model()}, {usable_cores()} usable cores (os.sched_getaffinity)"]
    if gpu:
        parts.append(gpu)
    parts.append(f"Linux {platform.release()}" if sys.platform.startswith("linux") else platform.platform())
    sw = [f"Python {platform.python_version()}"]
    for mod, name in (("torch", "torch"), ("numpy", "numpy"), ("IPython", "IPython")):
        v = _version(mod)
        sw.append(f"{name} {v}" if v else f"{name} not installed")
    pm = _version("perfmagic")
    sw.append(f"perfmagic {pm} ({git_state()})" if pm else "perfmagic not installed")
    return "; ".join(parts) + "; " + ", ".join(sw)


class LoadMeter:
    """CPU used by *other* processes while something runs: /proc/stat busy time minus this process tree's.

    ``stop()`` returns ``{"others_cores": ..., "steal_cores": ...}`` averaged over the interval (cores
    busy; steal = time the hypervisor gave to other VMs). Resolution is one clock tick (~10 ms), so
    short intervals are coarse. Outside Linux both are NaN.
    """

    _tck = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    @classmethod
    def _read(cls) -> tuple[float, float, float, float]:
        t = os.times()
        own = t.user + t.system + t.children_user + t.children_system
        try:
            with open("/proc/stat") as fh:
                f = [float(v) for v in fh.readline().split()[1:]]
        except (OSError, ValueError):
            return time.perf_counter(), own, float("nan"), float("nan")
        # user nice system idle iowait irq softirq steal ...
        busy = (f[0] + f[1] + f[2] + f[5] + f[6]) / cls._tck
        steal = (f[7] if len(f) > 7 else 0.0) / cls._tck
        return time.perf_counter(), own, busy, steal

    def start(self) -> "LoadMeter":
        self._a = self._read()
        return self

    def stop(self) -> dict[str, float]:
        b = self._read()
        dt = max(b[0] - self._a[0], 1e-9)
        others = max(0.0, (b[2] - self._a[2]) - (b[1] - self._a[1])) / dt
        return {"others_cores": others, "steal_cores": (b[3] - self._a[3]) / dt}


def loadavg() -> str:
    try:
        return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    except OSError:  # pragma: no cover
        return "n/a"


def today() -> str:
    return datetime.date.today().isoformat()


def command() -> str:
    """The command line that is running now, as typed from the repository root."""
    exe = sys.executable
    try:
        exe = os.path.relpath(exe, ROOT) if Path(exe).absolute().is_relative_to(ROOT) else exe
    except ValueError:
        pass
    script = sys.argv[0]
    try:
        p = Path(script).resolve()
        if p.is_relative_to(ROOT):
            script = str(p.relative_to(ROOT))
    except (OSError, ValueError):
        pass
    return shlex.join([exe, script, *sys.argv[1:]])


def header(title: str, gpu: str | None = None) -> str:
    return (f"## {title}\n\n"
            f"- **date:** {today()}\n"
            f"- **machine:** {machine(gpu)}\n"
            f"- **command:** `{command()}`\n")


# ---------------------------------------------------------------------------------------------
# statistics and tables
# ---------------------------------------------------------------------------------------------
def spread_pct(xs: Sequence[float]) -> float:
    """(max - min) / median, in percent."""
    xs = [x for x in xs if x == x]
    if not xs:
        return float("nan")
    return (max(xs) - min(xs)) / statistics.median(xs) * 100


def cv_pct(xs: Sequence[float]) -> float:
    """Coefficient of variation (sample standard deviation / mean), in percent."""
    xs = [x for x in xs if x == x]
    if len(xs) < 2:
        return float("nan")
    return statistics.stdev(xs) / statistics.fmean(xs) * 100


def fmt_time(s: float) -> str:
    if s != s:
        return "n/a"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if abs(s) >= scale or unit == "ns":
            v = s / scale
            return f"{v:.4g} {unit}" if v < 1000 else f"{v:.0f} {unit}"
    return f"{s} s"  # pragma: no cover


def md_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# docs/benchmarks.md sections
# ---------------------------------------------------------------------------------------------
def _markers(name: str) -> tuple[str, str]:
    return f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"


def _empty(name: str) -> str:
    b, e = _markers(name)
    return f"{b}\n_not run yet_\n{e}\n"


def replace_section(name: str, body: str, path: Path = DOCS) -> Path:
    """Write ``body`` between the markers of section ``name``; everything else in the file is kept.

    Creates the file (intro + an empty section for every known benchmark) if it does not exist,
    and appends the section if its markers are missing.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        text = path.read_text(encoding="utf-8")
    else:
        text = INTRO + "\n" + "\n".join(_empty(n) for n in SECTIONS)
    b, e = _markers(name)
    block = f"{b}\n{body.strip()}\n{e}"
    i = text.find(b)
    j = text.find(e, i + len(b)) if i >= 0 else -1
    if i >= 0 and j >= 0:
        text = text[:i] + block + text[j + len(e):]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


def add_section_row(key: str, row: str, path: Path = DOCS) -> Path:
    """Put ``row`` in the table of sections (the first table whose header starts ``| section | script``).

    A row of that table containing ``key`` (e.g. the script's path) is replaced; otherwise ``row`` is
    appended after the table's last row. Nothing else in the file changes; a file without that table
    is left alone.
    """
    if not path.exists():
        return path
    lines = path.read_text(encoding="utf-8").split("\n")
    start = next((i for i, ln in enumerate(lines) if ln.startswith("| section | script")), None)
    if start is None:
        return path
    end = start
    while end + 1 < len(lines) and lines[end + 1].startswith("|"):
        end += 1
    hit = next((i for i in range(start + 2, end + 1) if key in lines[i]), None)
    if hit is not None:
        lines[hit] = row
    else:
        lines.insert(end + 1, row)
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
    tmp.write_text("\n".join(lines), encoding="utf-8")
    os.replace(tmp, path)
    return path
