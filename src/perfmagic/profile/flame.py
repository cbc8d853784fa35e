"""Sampling flame graphs of a cell: py-spy against the kernel's own process, or an in-process sampler.

``flame(code_or_fn)`` runs the code once while a sampler records call stacks, and returns a frozen
:class:`FlameResult` that keeps every sample (stack + weight in seconds).

Samplers, in the order ``sampler="auto"`` tries them:

* **py-spy** (``py-spy record --pid <this process> --format speedscope``) started before the code runs
  and stopped with SIGINT after it, in its own session so a Ctrl-C aimed at the kernel does not reach
  it. The code starts only once py-spy says it is sampling (its start-up time is ``startup_s``), so the
  first sample lands within one interval of the cell's start. It reads the interpreter's memory from
  outside (``--nonblocking``: the process is never paused, the overhead on the cell is ~0; ``--native``
  needs the blocking mode, which pauses the process for each sample). Where Yama's
  ``ptrace_scope=1`` forbids a child to read its parent, the kernel names py-spy as its tracer with
  ``prctl(PR_SET_PTRACER, pid)`` for the duration and clears it afterwards. Without ``--idle`` py-spy
  drops samples of threads that wait (sleep, I/O, locks): the graph shows where the CPU went.
* **in-process**: a daemon thread that wakes ``rate`` times a second and reads the cell thread's frame
  via ``sys._current_frames()``. It needs no permission (containers without ``SYS_PTRACE``, macOS)
  but it is a *wall-clock* sampler of Python frames only: waits are included, native frames are not,
  and a long call that holds the GIL delays the next sample (each sample is weighted by the time
  since the previous one, so the time attributed stays right).

Every stack is cut at the engine's own entry frame (:func:`_flame_cell_root`), so the root of the
graph is the cell (or the function) and the IPython/ipykernel frames above it are gone; samples
taken outside the cell are counted in ``outside_samples`` and not shown. Cell file names (the
kernel's ``/tmp/ipykernel_<pid>/<hash>.py`` or IPython's ``<ipython-input-N-…>``) are shown as
``In [N]`` through ``file_labels``.

Nothing is left behind: py-spy writes into a temporary folder removed afterwards, the py-spy process
is stopped (killed if it does not stop), the sampler thread is joined and the ptracer is cleared —
also after an exception in the code or a Ctrl-C. An exception in the code keeps the profile up to the
error (``status="failed"``); Ctrl-C raises :class:`~perfmagic._errors.BenchInterrupted` carrying it.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import BadOptionError, BenchInterrupted, PerfmagicError
from ..render.units import fmt_time

SAMPLERS = ("auto", "py-spy", "inprocess")
MAX_RATE = 1000
MAX_DEPTH = 256            # deeper stacks keep their first and last 128 frames
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 20.0
PR_SET_PTRACER = 0x59616D61
_THIS_FILE = __file__
_INFRA = ("/ipykernel/", "/IPython/", "/zmq/", "/tornado/", "/asyncio/", "/jupyter_client/", "/traitlets/",
          "/threading.py", "/selectors.py", "/queue.py", "/socket.py", "/comm/", "/debugpy/", "/perfmagic/",
          "/concurrent/futures/thread.py")
_INPUT_NAME = re.compile(r"^<ipython-input-(\d+)-[0-9a-f]+>$")
_THREAD_NAME = re.compile(r'^(?:Process (\d+) )?Thread (\d+)(?: "(.*)")?', re.S)

Frame = tuple[str, str, int]  # (function, file, line)


# ---------------------------------------------------------------------------------------------
# the result
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FuncStat:
    """One function (name + file) over all samples: self and total seconds, its busiest line."""

    name: str
    file: str
    line: int
    self_s: float
    total_s: float
    self_frac: float
    total_frac: float
    where: str  # "In [3]:4" or "module.py:12"


@dataclass(frozen=True)
class FlameResult:
    """The samples of one run of a cell, cut so the cell is the root. Derived tables are computed."""

    frames: tuple[Frame, ...]
    stacks: tuple[tuple[int, ...], ...]   # root-first indices into ``frames``, one per sample
    weights: tuple[float, ...]            # seconds each sample stands for
    sampler: str                          # "py-spy" | "inprocess"
    rate_hz: float
    wall_s: float                         # the cell's run time
    label: str = ""
    code: str = ""
    status: str = "ok"                    # "ok" | "failed" (the code raised) | "interrupted"
    error: str | None = None              # "ZeroDivisionError: division by zero"
    fallback_reason: str | None = None    # why py-spy did not run, when it was tried
    startup_s: float | None = None        # sampler start -> ready to sample
    outside_samples: int = 0              # samples outside the cell (perfmagic/IPython), dropped
    native: bool = False
    idle: bool = False
    subprocesses: bool = False
    file_labels: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()
    exception: BaseException | None = field(default=None, repr=False, compare=False)

    # ---- derived ------------------------------------------------------------------------------
    @property
    def n_samples(self) -> int:
        return len(self.stacks)

    @property
    def sampled_s(self) -> float:
        return float(sum(self.weights))

    @property
    def interval_s(self) -> float:
        return 1.0 / self.rate_hz

    def where(self, file: str, line: int) -> str:
        """``In [3]:4`` for a cell, ``name.py:12`` for a file, ``file`` alone for a native library."""
        lab = dict(self.file_labels).get(file)
        if lab is None:
            m = _INPUT_NAME.match(file)
            lab = f"In [{m.group(1)}]" if m else (os.path.basename(file) if file else "")
        if not lab:
            return ""
        return f"{lab}:{line}" if line else lab

    def display_name(self, frame: Frame) -> str:
        name, file, _ = frame
        if name == "<module>":
            lab = dict(self.file_labels).get(file)
            if lab is None:
                m = _INPUT_NAME.match(file)
                lab = f"In [{m.group(1)}]" if m else None
            if lab == "cell":
                return "cell"
            return f"cell {lab}" if lab else f"<module> {os.path.basename(file)}".strip()
        return name

    def functions(self) -> list[FuncStat]:
        """Every function with its self and total time, most self time first."""
        tot = self.sampled_s
        selfw: Counter[tuple[str, str]] = Counter()
        totw: Counter[tuple[str, str]] = Counter()
        lines: dict[tuple[str, str], Counter[int]] = {}
        for st, w in zip(self.stacks, self.weights):
            if not st:
                continue
            seen = set()
            for i in st:
                n, f, ln = self.frames[i]
                if _synthetic(self.frames[i]):
                    continue
                key = (n, f)
                lines.setdefault(key, Counter())[ln] += w
                if key not in seen:
                    seen.add(key)
                    totw[key] += w
            leaf = self.frames[st[-1]]
            if not _synthetic(leaf):
                selfw[(leaf[0], leaf[1])] += w
        out = []
        for key, t in totw.items():
            s = selfw.get(key, 0.0)
            ln = lines[key].most_common(1)[0][0] if lines.get(key) else 0
            out.append(FuncStat(self.display_name((key[0], key[1], ln)), key[1], ln, s, t,
                                s / tot if tot else 0.0, t / tot if tot else 0.0, self.where(key[1], ln)))
        out.sort(key=lambda f: (-f.self_s, -f.total_s, f.name))
        return out

    def top(self, n: int = 10, by: str = "self") -> list[FuncStat]:
        fs = self.functions()
        if by == "total":
            fs.sort(key=lambda f: (-f.total_s, -f.self_s, f.name))
        else:
            fs = [f for f in fs if f.self_s > 0]
        return fs[:n]

    def tree(self) -> dict[str, Any]:
        """The flame graph: nested ``{"name", "file", "where", "total", "self", "lines", "children"}``.

        A node is a function (name + file) on one call path; ``lines`` maps each line of it to the
        seconds sampled there. The root is the whole run; its children are the cell (and, with
        py-spy, other threads or child processes that were busy).
        """
        root: dict[str, Any] = {"name": "all", "file": "", "where": "", "total": 0.0, "self": 0.0,
                                "lines": {}, "children": {}}
        for st, w in zip(self.stacks, self.weights):
            node = root
            node["total"] += w
            for i in st:
                fr = self.frames[i]
                key = (fr[0], fr[1])
                ch = node["children"].get(key)
                if ch is None:
                    ch = node["children"][key] = {"name": self.display_name(fr), "file": fr[1],
                                                  "where": self.where(fr[1], 0), "total": 0.0, "self": 0.0,
                                                  "lines": {}, "children": {}}
                ch["total"] += w
                if fr[2]:
                    ch["lines"][fr[2]] = ch["lines"].get(fr[2], 0.0) + w
                node = ch
            node["self"] += w

        def fix(n: dict[str, Any]) -> dict[str, Any]:
            kids = sorted(n["children"].values(), key=lambda c: -c["total"])
            n["children"] = [fix(c) for c in kids]
            return n

        return fix(root)

    # ---- text -----------------------------------------------------------------------------------
    def sampler_line(self) -> str:
        if self.sampler == "py-spy":
            mode = "native+Python, pauses the process per sample" if self.native else "non-blocking"
            s = f"py-spy {self.rate_hz:g} Hz ({mode}{', idle threads included' if self.idle else ''}" \
                f"{', child processes' if self.subprocesses else ''})"
        else:
            s = f"in-process sampler {self.rate_hz:g} Hz (wall-clock, Python frames of the cell's thread)"
            got = self.n_samples / self.wall_s if self.wall_s > 0 else 0.0
            if self.n_samples >= 5 and got < 0.8 * self.rate_hz:
                s += (f"; achieved {got:.0f} Hz: the cell held the GIL, and a sampler thread only gets it every "
                      "switch interval (sys.getswitchinterval())")
        if self.fallback_reason:
            s += f" — py-spy not used: {self.fallback_reason}"
        return s

    def verdict(self) -> str:
        tag = {"interrupted": "  [INTERRUPTED]", "failed": f"  [the cell raised {self.error}]"}.get(self.status, "")
        if not self.stacks:
            if self.wall_s < self.interval_s:
                why = (f"the cell ran {fmt_time(self.wall_s)}, less than one sample interval "
                       f"({fmt_time(self.interval_s)} at {self.rate_hz:g} Hz): raise --rate or repeat the work in a loop")
            elif self.sampler == "py-spy" and not self.idle:
                why = (f"the cell ran {fmt_time(self.wall_s)} but was never on the CPU (waiting: sleep, I/O, "
                       "locks); add --idle to sample waits too")
            else:
                why = f"the cell ran {fmt_time(self.wall_s)} and no sample landed in it"
            return f"flame: no samples — {why}{tag}"
        top = self.top(1)
        head = (f"flame: {top[0].name} ({top[0].where}) has {top[0].self_frac:.0%} of the self time"
                if top else "flame: no function has self time")
        return (f"{head} · {self.n_samples} samples, {fmt_time(self.sampled_s)} sampled of a "
                f"{fmt_time(self.wall_s)} cell{tag}")

    def text(self, n: int = 10) -> str:
        lines = [self.verdict()]
        if self.stacks:
            def row(f: FuncStat) -> str:
                name = f.name if len(f.name) <= 40 else f.name[:39] + "…"
                st = fmt_time(f.self_s, 3) if f.self_s else "·"
                return (f"  {st:>10} {f.self_frac:>6.1%}  {fmt_time(f.total_s, 3):>10} "
                        f"{f.total_frac:>6.1%}  {name:<40}  {f.where}")
            head = f"  {'self':>10} {'self%':>6}  {'total':>10} {'total%':>6}  {'function':<40}  where"
            lines += ["  top functions by self time (time in the function itself):", head]
            lines += [row(f) for f in self.top(n, "self")]
            lines += ["  top functions by total time (including what they call):", head]
            lines += [row(f) for f in self.top(min(n, 5), "total")]
        lines.append(f"  sampler: {self.sampler_line()}")
        if self.startup_s is not None:
            lines.append(f"  sampler start-up: {fmt_time(self.startup_s)} (before the cell started)")
        if self.outside_samples:
            lines.append(f"  {self.outside_samples} samples outside the cell (perfmagic, IPython) not shown")
        lines += [f"  note: {x}" for x in self.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return f"<FlameResult {self.verdict()}>"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.text())

    def html(self, png: bytes | None = None, height: int | None = None) -> str:
        """A self-contained interactive flame graph (inline JS + data, no network)."""
        from ..render.flame_html import flame_html

        return flame_html(self, png=png)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        png = self.figure_png()
        out: dict[str, Any] = {"text/plain": self.text(), "text/html": self.html(png)}
        if png is not None:
            import base64

            out["image/png"] = base64.b64encode(png).decode("ascii")
        return out

    def figure_png(self) -> bytes | None:
        """A static icicle of the flame graph (for GitHub and other views that drop JavaScript)."""
        try:
            from ..render.flame_html import flame_png
        except ImportError:  # pragma: no cover
            return None
        return flame_png(self)

    # ---- serialisation ------------------------------------------------------------------------
    def folded(self) -> dict[str, float]:
        """Brendan Gregg's folded stacks: ``"cell In [5];f;g" -> seconds``."""
        out: dict[str, float] = {}
        for st, w in zip(self.stacks, self.weights):
            key = ";".join(f"{self.display_name(self.frames[i])} ({self.where(*self.frames[i][1:])})" for i in st)
            out[key] = out.get(key, 0.0) + w
        return out

    def metrics(self) -> dict[str, float | int | str | None]:
        top = self.top(3)
        m: dict[str, float | int | str | None] = {
            "top_self_fraction": top[0].self_frac if top else None,
            "n_samples": self.n_samples, "sampled_s": self.sampled_s, "wall_s": self.wall_s,
            "sampler": self.sampler, "rate_hz": self.rate_hz, "startup_s": self.startup_s,
            "outside_samples": self.outside_samples, "fallback_reason": self.fallback_reason,
        }
        for k in range(3):
            f = top[k] if k < len(top) else None
            m[f"top{k + 1}_self_name"] = f"{f.name} ({f.where})" if f else None
            m[f"top{k + 1}_self_fraction"] = f.self_frac if f else None
        return m

    def samples_dict(self) -> dict[str, list[Any]]:
        fo = self.folded()
        return {"stack": list(fo), "seconds": list(fo.values())}

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "code": self.code, "status": self.status, "error": self.error,
                "sampler": self.sampler, "rate_hz": self.rate_hz, "wall_s": self.wall_s,
                "metrics": self.metrics(), "samples": self.samples_dict(), "notes": list(self.notes)}


def _synthetic(fr: Frame) -> bool:
    return not fr[1] and fr[0].startswith(("thread ", "process ", "… "))


def _native(fr: Frame) -> bool:
    name, file, _ = fr
    return name.startswith("0x") or file.endswith((".c", ".h", ".cc", ".cpp", ".so", ".rs")) or ".so." in file


def _infra(fr: Frame) -> bool:
    return any(s in fr[1] for s in _INFRA)


# ---------------------------------------------------------------------------------------------
# samplers
# ---------------------------------------------------------------------------------------------
class SamplerUnavailable(Exception):
    """py-spy is missing or could not attach; ``str()`` is the one-line reason."""


def find_py_spy() -> str | None:
    """py-spy on PATH, or next to this Python (a virtual environment's ``bin``)."""
    exe = shutil.which("py-spy")
    if exe:
        return exe
    cand = os.path.join(os.path.dirname(sys.executable), "py-spy" + (".exe" if os.name == "nt" else ""))
    return cand if os.path.isfile(cand) and os.access(cand, os.X_OK) else None


def yama_scope() -> int | None:
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return None


def _prctl_ptracer(pid: int) -> bool:
    """``prctl(PR_SET_PTRACER, pid)``: let ``pid`` read this process under Yama (0 clears)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PTRACER, ctypes.c_ulong(pid), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


class PySpy:
    """One ``py-spy record`` of this process into a speedscope file in ``tmpdir``."""

    def __init__(self, exe: str, tmpdir: str, rate: int, *, native: bool, idle: bool, subprocesses: bool) -> None:
        self.exe, self.tmpdir = exe, tmpdir
        self.out = os.path.join(tmpdir, "profile.speedscope.json")
        self.logpath = os.path.join(tmpdir, "py-spy.log")
        self.cmd = [exe, "record", "--pid", str(os.getpid()), "--format", "speedscope", "--output", self.out,
                    "--rate", str(rate)]
        self.cmd.append("--native" if native else "--nonblocking")
        if idle:
            self.cmd.append("--idle")
        if subprocesses:
            self.cmd.append("--subprocesses")
        self.proc: subprocess.Popen[bytes] | None = None
        self.ptracer_set = False
        self.startup_s: float | None = None

    def _log(self) -> str:
        try:
            with open(self.logpath, "rb") as fh:
                return fh.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def start(self, timeout: float | None = None) -> None:
        timeout = START_TIMEOUT_S if timeout is None else timeout
        t0 = time.perf_counter()
        with open(self.logpath, "wb") as log:
            try:
                self.proc = subprocess.Popen(self.cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                             start_new_session=True)
            except OSError as exc:
                raise SamplerUnavailable(f"py-spy could not be started ({exc.strerror or exc})") from None
        if yama_scope() == 1:
            self.ptracer_set = _prctl_ptracer(self.proc.pid)
        while True:
            text = self._log()
            if "Sampling process" in text or "Press Control-C" in text:
                self.startup_s = time.perf_counter() - t0
                return
            if self.proc.poll() is not None:
                raise SamplerUnavailable(self._reason(text))
            if time.perf_counter() - t0 > timeout:
                self.close()
                raise SamplerUnavailable(f"py-spy did not start sampling within {timeout:g} s")
            time.sleep(0.002)

    def _reason(self, text: str) -> str:
        last = next((ln.strip() for ln in reversed(text.splitlines()) if ln.strip()), "")
        last = re.sub(r"^(py-spy>\s*|Error:\s*)", "", last)[:160]
        scope = yama_scope()
        hint = ""
        if "ermission" in text or "EPERM" in text or "Operation not permitted" in text:
            if sys.platform == "darwin":
                hint = " (macOS: py-spy needs root)"
            elif scope is not None and scope >= 2:
                hint = f" (Yama ptrace_scope={scope}: only root may attach)"
            else:
                hint = " (the container lacks the SYS_PTRACE capability?)"
        code = self.proc.returncode if self.proc is not None else None
        return f"py-spy could not attach (exit {code}: {last or 'no message'}){hint}"

    def stop(self) -> dict[str, Any] | None:
        """SIGINT, wait for the speedscope file, read it; None when py-spy wrote nothing."""
        p = self.proc
        if p is not None and p.poll() is None:
            try:
                p.send_signal(signal.SIGINT)
                p.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                pass
        self.close()
        try:
            with open(self.out, encoding="utf-8") as fh:
                return json.load(fh)
        except (OSError, ValueError):
            return None

    def close(self) -> None:
        """Make sure py-spy is gone and the ptracer cleared (idempotent)."""
        p = self.proc
        if p is not None and p.poll() is None:
            p.kill()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:  # pragma: no cover
                pass
        if self.ptracer_set:
            _prctl_ptracer(0)
            self.ptracer_set = False


class InProcessSampler:
    """A daemon thread reading one thread's Python stack ``rate`` times a second."""

    def __init__(self, thread_id: int, rate: float) -> None:
        self.tid, self.interval = thread_id, 1.0 / rate
        self.samples: list[tuple[tuple[Frame, ...], float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="perfmagic-flame-sampler", daemon=True)
        self.startup_s: float | None = None

    def start(self) -> None:
        t0 = time.perf_counter()
        self._t_last = t0
        self._thread.start()
        self.startup_s = time.perf_counter() - t0

    def _run(self) -> None:
        frames = sys._current_frames
        last = self._t_last
        while not self._stop.wait(self.interval):
            f = frames().get(self.tid)
            now = time.perf_counter()
            w, last = now - last, now
            stack = []
            while f is not None:
                co = f.f_code
                stack.append((getattr(co, "co_qualname", co.co_name), co.co_filename, f.f_lineno or 0))
                f = f.f_back
            stack.reverse()
            self.samples.append((tuple(stack), w))

    def stop(self) -> list[tuple[tuple[Frame, ...], float]]:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5.0)
        return self.samples


# ---------------------------------------------------------------------------------------------
# stacks: cut to the cell
# ---------------------------------------------------------------------------------------------
def _flame_cell_root(code: Any, ns: dict[str, Any] | None, fn: Callable[[], Any] | None) -> Any:
    """Every sample is cut at this frame: what it calls is the root of the flame graph."""
    __tracebackhide__ = True
    if fn is not None:
        return fn()
    exec(code, ns)
    return None


def _is_marker(fr: Frame) -> bool:
    return fr[0] == "_flame_cell_root" and fr[1] == _THIS_FILE


def cut_to_cell(stack: tuple[Frame, ...] | list[Frame]) -> list[Frame] | None:
    """The frames below the engine's entry frame (leading native frames dropped), or None if absent."""
    idx = None
    for i in range(len(stack) - 1, -1, -1):
        if _is_marker(stack[i]):
            idx = i
            break
    if idx is None:
        return None
    rest = list(stack[idx + 1:])
    while rest and _native(rest[0]):
        rest.pop(0)
    return rest


def parse_speedscope(doc: dict[str, Any], pid: int, tid: int) -> tuple[list[tuple[list[Frame], float]], int]:
    """py-spy's speedscope file -> (cell-rooted stacks with weights, samples outside the cell).

    The cell's thread (native id ``tid`` of process ``pid``) is cut at the entry frame; other busy
    threads of this process go under ``thread NAME``, child processes under ``process PID: cmd``.
    Threads whose every frame is kernel/IPython machinery are dropped (with ``--idle`` they would
    show the kernel waiting on its sockets).
    """
    frames = [(str(f.get("name") or "?"), str(f.get("file") or ""), int(f.get("line") or 0))
              for f in doc.get("shared", {}).get("frames", [])]
    out: list[tuple[list[Frame], float]] = []
    outside = 0
    for prof in doc.get("profiles", []):
        m = _THREAD_NAME.match(prof.get("name", ""))
        ppid = int(m.group(1)) if m and m.group(1) else pid
        ptid = int(m.group(2)) if m else -1
        tname = (m.group(3) if m else None) or str(ptid)
        weights = prof.get("weights") or [1.0] * len(prof.get("samples", []))
        for st, w in zip(prof.get("samples", []), weights):
            stack = [frames[i] for i in st]
            procs = [fr for fr in stack if not fr[1] and fr[0].startswith("process ")]
            stack = [fr for fr in stack if fr not in procs]
            if ppid == pid and ptid == tid:
                cut = cut_to_cell(stack)
                if cut is None:
                    outside += 1
                    continue
                out.append((cut, float(w)))
            elif ppid == pid:
                if not stack or all(_infra(fr) for fr in stack):
                    continue
                k = next((j for j, fr in enumerate(stack) if not (_native(fr) or "/threading.py" in fr[1])), 0)
                stack = stack[k:]  # drop thread start-up frames, unless the thread is native only
                out.append(([(f"thread {tname}", "", 0), *stack], float(w)))
            else:
                head = procs[-1][0] if procs else f"process {ppid}"
                head = re.sub(r"\s+", " ", head)
                head = head if len(head) <= 60 else head[:59] + "…"
                out.append(([(head, "", 0), *stack], float(w)))
    return out, outside


# ---------------------------------------------------------------------------------------------
# the public function
# ---------------------------------------------------------------------------------------------
def _compile(code: str, filename: str) -> Any:
    try:
        return compile(code, filename, "exec", dont_inherit=True)
    except SyntaxError:
        try:
            co = compile(code, filename, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
        except SyntaxError:
            co = None
        if co is not None and co.co_flags & 0x80:  # CO_COROUTINE: top-level await
            raise PerfmagicError(
                "the cell uses top-level `await`, which a profiling cell magic cannot run (it runs "
                "synchronously inside the kernel's event loop). Profile the synchronous work instead, or "
                "from a script: perfmagic.flame(lambda: asyncio.run(main()))") from None
        raise  # the user's own SyntaxError


def _check(rate: Any, sampler: str, native: bool, subprocesses: bool, on_error: str) -> None:
    if sampler not in SAMPLERS:
        raise BadOptionError("sampler", sampler, " | ".join(SAMPLERS), "auto tries py-spy and falls back to inprocess")
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 1 <= rate <= MAX_RATE:
        raise BadOptionError("rate", rate, f"samples per second between 1 and {MAX_RATE}",
                             "e.g. rate=100 (the default); higher rates see shorter calls but cost more")
    if sampler == "inprocess" and (native or subprocesses):
        opt = "native" if native else "subprocesses"
        raise BadOptionError(opt, True, "py-spy (the in-process sampler sees only this process's Python frames)",
                             "use sampler='auto' or 'py-spy', or drop this option")
    if on_error not in ("raise", "return"):
        raise BadOptionError("on_error", on_error, "'raise' or 'return'")


def flame(target: str | Callable[[], Any], *, globals: dict[str, Any] | None = None, rate: float = 100,
          sampler: str = "auto", native: bool = False, idle: bool = False, subprocesses: bool = False,
          label: str | None = None, filename: str | None = None, file_labels: Mapping[str, str] | None = None,
          py_spy: str | None = None, on_error: str = "raise") -> FlameResult:
    """Run ``target`` (code or a no-argument callable) once under a sampling profiler.

    ``sampler``: ``"auto"`` (py-spy, else the in-process sampler, saying why), ``"py-spy"`` (raise
    :class:`PerfmagicError` if it cannot attach) or ``"inprocess"``. ``rate`` in samples per second.
    ``native``/``idle``/``subprocesses`` are py-spy's ``--native``, ``--idle``, ``--subprocesses``.
    ``filename`` names the code for tracebacks (register it in ``linecache`` for source lines);
    ``file_labels`` maps file names to display names (``{"/tmp/ipykernel_1/ab.py": "In [3]"}``).
    ``on_error="raise"`` re-raises an exception of the code unchanged; ``"return"`` returns the
    partial result with ``status="failed"`` and the exception in ``.exception``. Ctrl-C raises
    :class:`BenchInterrupted` whose ``.result`` is the profile so far.
    """
    __tracebackhide__ = True
    _check(rate, sampler, native, subprocesses, on_error)
    fn: Callable[[], Any] | None = None
    code_obj = None
    if callable(target):
        fn, code_text = target, getattr(target, "__qualname__", repr(target))
    elif isinstance(target, str):
        code_text = target
        code_obj = _compile(target, filename or "<perfmagic.flame cell>")
    else:
        raise BadOptionError("target", type(target).__name__, "a string of code or a callable taking no arguments")
    ns = globals if globals is not None else ({"__name__": "__main__"} if fn is None else None)
    labels = dict(file_labels or {})
    notes: list[str] = []
    fallback = None
    tid = threading.get_native_id()
    tmp = tempfile.mkdtemp(prefix="perfmagic-flame-")
    spy: PySpy | None = None
    inproc: InProcessSampler | None = None
    used = sampler
    try:
        if sampler in ("auto", "py-spy"):
            exe = py_spy or find_py_spy()
            try:
                if exe is None:
                    raise SamplerUnavailable("py-spy is not installed (pip install py-spy)")
                spy = PySpy(exe, tmp, int(round(rate)), native=native, idle=idle, subprocesses=subprocesses)
                spy.start()
                used = "py-spy"
            except SamplerUnavailable as exc:
                if spy is not None:
                    spy.close()
                spy = None
                if sampler == "py-spy":
                    raise PerfmagicError(f"{exc}. Use sampler 'inprocess' (or 'auto' to fall back by itself)") from None
                fallback = str(exc)
                ignored = [o for o, on in (("native", native), ("subprocesses", subprocesses)) if on]
                if ignored:
                    notes.append(f"{' and '.join(ignored)} ignored: {'they need' if len(ignored) > 1 else 'needs'} py-spy")
        if spy is None:
            used = "inprocess"
            if idle:
                notes.append("idle: the in-process sampler always includes waits (it samples wall-clock time)")
            inproc = InProcessSampler(threading.get_ident(), float(rate))
            inproc.start()
        status, exc_caught, err = "ok", None, None
        t0 = time.perf_counter()
        try:
            _flame_cell_root(code_obj, ns, fn)
        except KeyboardInterrupt:
            status = "interrupted"
        except BaseException as exc:  # the user's exception: profile kept, re-raised below
            status, exc_caught = "failed", exc
            err = f"{type(exc).__name__}: {exc}"[:200]
        wall = time.perf_counter() - t0
        if spy is not None:
            doc = spy.stop()
            if doc is None:
                raw, outside = [], 0
                notes.append("py-spy wrote no profile: " + (spy._log().strip().splitlines() or ["no message"])[-1][:160])
            else:
                raw, outside = parse_speedscope(doc, os.getpid(), tid)
            startup = spy.startup_s
        else:
            assert inproc is not None
            raw, outside = [], 0
            for st, w in inproc.stop():
                cut = cut_to_cell(st)
                if cut is None:
                    outside += 1
                else:
                    raw.append((cut, w))
            startup = inproc.startup_s
    finally:
        if spy is not None:
            spy.close()
        if inproc is not None:
            inproc.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    weights = [w for _, w in raw]
    if used == "py-spy" and sum(weights) > wall > 0:
        # py-spy weighs every sample 1/rate; when it falls behind it catches up in a burst, so the sum
        # can exceed the run time: scale to the run time (the shares are unchanged)
        k = wall / sum(weights)
        weights = [w * k for w in weights]
    if code_obj is not None:
        labels.setdefault(code_obj.co_filename, labels.get(code_obj.co_filename, "cell"))
    index: dict[Frame, int] = {}
    stacks = []
    for st, _ in raw:
        if len(st) > MAX_DEPTH:  # deep recursion: keep both ends, elide the middle
            half = MAX_DEPTH // 2
            st = [*st[:half], (f"… {len(st) - 2 * half} frames …", "", 0), *st[-half:]]
        stacks.append(tuple(index.setdefault(fr, len(index)) for fr in st))
    result = FlameResult(
        frames=tuple(index), stacks=tuple(stacks), weights=tuple(weights), sampler=used,
        rate_hz=float(rate), wall_s=wall, label=label or "", code=code_text, status=status, error=err,
        fallback_reason=fallback, startup_s=startup, outside_samples=outside, native=native and used == "py-spy",
        idle=idle, subprocesses=subprocesses and used == "py-spy", file_labels=tuple(labels.items()),
        notes=tuple(notes), exception=exc_caught)
    if status == "interrupted":
        raise BenchInterrupted(result)
    if exc_caught is not None and on_error == "raise":
        raise exc_caught
    return result
