"""The samplers behind ``%%flame``: py-spy recording this process from outside, and an in-process
thread reading the cell thread's Python stack (see :mod:`perfmagic.profile.flame` for when each runs).

Each sampler starts, stops and cleans up after itself (``close()`` is idempotent: py-spy killed if it
does not stop, the Yama ptracer cleared); what it returns is raw stacks, which
:mod:`perfmagic.profile.flame` cuts to the cell.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from ..render.flame import attach_failure
from .flameresult import Frame

START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 20.0
PR_SET_PTRACER = 0x59616D61


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
        why = None
        if "ermission" in text or "EPERM" in text or "Operation not permitted" in text:
            if sys.platform == "darwin":
                why = "macos"
            elif scope is not None and scope >= 2:
                why = "yama"
            else:
                why = "capability"
        code = self.proc.returncode if self.proc is not None else None
        return attach_failure(code, last, why, scope)

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


def frame_stack(f: Any) -> tuple[Frame, ...]:
    """A thread's frames, outermost first, as (qualified name, file, line)."""
    stack = []
    while f is not None:
        co = f.f_code
        stack.append((getattr(co, "co_qualname", co.co_name), co.co_filename, f.f_lineno or 0))
        f = f.f_back
    stack.reverse()
    return tuple(stack)


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
            self.samples.append((frame_stack(f), w))

    def stop(self) -> list[tuple[tuple[Frame, ...], float]]:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5.0)
        return self.samples

