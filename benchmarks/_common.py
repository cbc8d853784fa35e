"""Shared helpers for the benchmark scripts: machine description, stamp, tables, docs sections.

Every script prints a markdown table and, from a full run, writes it into ``docs/benchmarks.md``
between ``<!-- BEGIN name -->`` and ``<!-- END name -->`` through :func:`publish`, the one path that
writes the page. Only that section (and its row of the index table) is replaced, so the scripts can
be re-run independently and in any order. A section is written only when

* the run is a full one: never from ``--quick`` (a smoke test), ``--no-docs`` or a re-render of saved data;
* the code is committed: ``git status --porcelain -- src benchmarks`` (``benchmarks/results/``, the data the
  scripts save, left out) was empty when the script started and still is, at the same commit.

Otherwise the script prints its table and says why the page was not written. Every section starts
with :func:`header`: date, commit, machine, load average before and after the run, and the command.

``--quick`` runs write their JSON into a temporary folder (``RESULTS`` points there), never over the
saved results of full runs in ``benchmarks/results/``. A ``--quick`` run is a smoke test (``make bench-quick``,
part of ``make test``): it runs every code path of its script once with the smallest work, says so
(:data:`SMOKE`, printed first and last), and fails, with the error, when any trial or case raises.
"""

from __future__ import annotations

import datetime
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "benchmarks.md"
QUICK = "--quick" in sys.argv[1:]  # a smoke test: nothing saved where full runs keep their data
RESULTS = (Path(tempfile.mkdtemp(prefix="perfmagic-bench-quick-")) if QUICK
           else ROOT / "benchmarks" / "results")
# What every --quick run says first and last (tests/test_benchmarks_quick.py checks every script goes through here).
SMOKE = ("SMOKE RUN (--quick): every code path once, with the smallest work and settings no real measurement "
         "would use; its numbers mean nothing and are never written to docs/benchmarks.md. In --quick a failing "
         "trial or case stops the script with its error.")
if QUICK:
    import atexit
    import shutil

    atexit.register(shutil.rmtree, RESULTS, True)
    print(SMOKE, flush=True)

# Fixed order of the sections in docs/benchmarks.md (a missing one is created in this order).
SECTIONS = ("load_ext", "timing_quality", "timing_quality_busy", "gpu")

INTRO = """\
# Benchmarks

Every table below is written by a script in `benchmarks/`, between `<!-- BEGIN name -->` /
`<!-- END name -->` markers, from a full run at a committed tree; each states its date, commit,
machine, load and command. History is in git.

| section | script | what it measures |
|---|---|---|
"""

LOAD_AFTER = "@@load-after@@"  # filled in by publish(), when the run is over
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
    """The installed version of ``mod``: from its distribution's metadata when there is one (importing torch
    only to read its version costs seconds), else ``mod.__version__``."""
    if mod != "perfmagic":  # perfmagic: the imported code's own version (an editable checkout)
        try:
            from importlib.metadata import PackageNotFoundError, version

            try:
                return version(mod)
            except PackageNotFoundError:
                pass
        except ImportError:  # pragma: no cover
            pass
    try:
        m = __import__(mod)
    except Exception:
        return None
    return str(getattr(m, "__version__", "?"))


def _git(*argv: str) -> str:
    return subprocess.run(["git", *argv], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()


def tree_state() -> dict[str, Any]:
    """The commit and the uncommitted paths of the code the numbers come from (``src/``, ``benchmarks/``;
    ``benchmarks/results/``, the data the scripts save, left out).

    A copy of the tree whose git folder does not match its files (the lent GPU machine's) names its
    commit in ``PERFMAGIC_TREE_COMMIT`` (tools/gpu_check.sh says how: send a clean tree, name its commit)."""
    sent = os.environ.get("PERFMAGIC_TREE_COMMIT")
    if sent:  # the device machine's copy: its files are this commit's, its git folder may be older
        return {"commit": sent + " (this commit's files, copied to the machine that ran it)", "dirty": []}
    try:
        head = _git("rev-parse", "--short", "HEAD")
        dirty = _git("status", "--porcelain", "--", "src", "benchmarks", ":(exclude)benchmarks/results")
    except Exception:
        return {"commit": None, "dirty": ["(git not available)"]}
    return {"commit": head or None, "dirty": [ln[3:] for ln in dirty.splitlines() if ln.strip()]}


TREE_AT_START = tree_state()  # the scripts import this module first: the state the run starts from


def git_state(tree: dict[str, Any] | None = None) -> str:
    """``<short commit>`` plus ``+ uncommitted changes`` when src/ or benchmarks/ were dirty at the start."""
    tree = tree or TREE_AT_START
    if not tree["commit"]:
        return "unknown commit"
    return tree["commit"] + (" + uncommitted changes in src/ or benchmarks/" if tree["dirty"] else "")


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


LOAD_BEFORE = loadavg()  # at the script's start (this module is imported first)


def header(title: str, gpu: str | None = None) -> str:
    """The stamp every section starts with: date, commit, machine, load average before/after, command.

    The load average after the run is a placeholder that :func:`publish` fills in."""
    return (f"## {title}\n\n"
            f"- **date:** {today()}\n"
            f"- **commit:** {git_state()}\n"
            f"- **machine:** {machine(gpu)}\n"
            f"- **load average (1, 5, 15 min):** {LOAD_BEFORE} before, {LOAD_AFTER} after\n"
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


# ---------------------------------------------------------------------------------------------
# the one path that writes docs/benchmarks.md
# ---------------------------------------------------------------------------------------------
def add_args(ap: Any, quick: str = "the smallest run that exercises every path (a smoke test; never written "
             "to the docs)") -> None:
    """``--quick`` and ``--no-docs``, the flags every script takes (``make bench-quick`` passes both)."""
    ap.add_argument("--quick", action="store_true", help=quick)
    ap.add_argument("--no-docs", action="store_true", help="print only; do not write docs/benchmarks.md")


def not_written_because(args: Any = None, reason: str | None = None) -> str | None:
    """Why this run must not write its section, or None when it may."""
    if reason:
        return reason
    if getattr(args, "quick", False):
        return "--quick is a smoke test; only a full run writes its section"
    if getattr(args, "no_docs", False):
        return "--no-docs"
    if getattr(args, "report_only", None) or getattr(args, "from_json", None):
        return "a re-render of saved data; only a full run writes its section"
    if not TREE_AT_START["commit"]:
        return "not a git checkout: no commit to stamp"
    if TREE_AT_START["dirty"]:
        return ("the code was not committed when the run started (" + ", ".join(TREE_AT_START["dirty"][:5])
                + (", ..." if len(TREE_AT_START["dirty"]) > 5 else "") + "): commit, then run again")
    now = tree_state()
    if now["commit"] != TREE_AT_START["commit"] or now["dirty"]:
        return (f"the code changed during the run (commit {TREE_AT_START['commit']} -> {now['commit']}, "
                f"uncommitted: {', '.join(now['dirty'][:5]) or 'none'}): run again on a clean tree")
    return None


def script_command() -> str:
    """The running script as a path from the repository root, ``benchmarks/bench_x.py``."""
    script = Path(sys.argv[0])
    try:
        script = script.resolve().relative_to(ROOT)
    except (OSError, ValueError):
        pass
    return str(script)


def publish(name: str, body: str, args: Any = None, *, row: str | None = None, script: str | None = None,
            reason: str | None = None) -> bool:
    """Print ``body`` (its stamp completed with the load average now) and, when the run may write
    (:func:`not_written_because`), put it in section ``name`` of docs/benchmarks.md and ``row`` (what the
    section measures) in the index table. Returns whether the page was written."""
    body = body.replace(LOAD_AFTER, loadavg())
    print()
    print(body.rstrip("\n"))
    if QUICK:
        print("\n" + SMOKE, flush=True)
    why = not_written_because(args, reason)
    if why:
        print(f"\ndocs/benchmarks.md not written ({why}); section `{name}` unchanged.", flush=True)
        return False
    path = replace_section(name, body)
    if row:
        add_section_row(f"| `{name}` |", f"| `{name}` | `{script or script_command()}` | {row} |", path)
    print(f"\nwritten to {path} (section `{name}`)", flush=True)
    return True
