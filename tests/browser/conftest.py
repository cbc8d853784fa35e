"""Fixtures of the real-browser test: an isolated JupyterLab server and a headless Debian Chromium.

Everything runs from a temporary folder (the notebook copy, its ledger, HOME, the Jupyter, IPython,
matplotlib and perfmagic config/cache folders, the browser profile), so nothing leaks into the repo or
the user's home. Every process the test starts carries a marker in its environment; after the test,
pass or fail, the server (and its kernels) and the browser are stopped, and any process still
carrying the marker, or any descendant of the test process seen during the test (Chromium's forked
processes do not all show the marker), is killed and reported as an error.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
CHROMIUM = os.environ.get("PERFMAGIC_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
MARKER = "PERFMAGIC_BROWSER_TEST_RUN"
SERVER_START_S = 120

_artifacts: list[Path] = []
_notes: list[str] = []


def record_artifact(path: Path) -> Path:
    _artifacts.append(path)
    return path


def record_note(line: str) -> None:
    """A line for the end of the test output (timings, request counts), pass or fail."""
    _notes.append(line)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _notes:
        terminalreporter.write_sep("-", "browser test")
        for line in _notes:
            terminalreporter.write_line(line)
    if _artifacts:
        terminalreporter.write_sep("-", "browser test artifacts")
        for p in _artifacts:
            try:
                shown = p.relative_to(REPO)
            except ValueError:
                shown = p
            size = f"{p.stat().st_size / 1024:.0f} KiB" if p.exists() else "missing"
            terminalreporter.write_line(f"{shown}  ({size})")


# ---------------------------------------------------------------------------------------------------
# processes


def _marked_processes(token: str) -> list[Any]:
    """Every process but this one whose environment carries ``MARKER=token``."""
    import psutil

    me = os.getpid()
    found = []
    for p in psutil.process_iter(["pid", "name"]):
        if p.pid == me:
            continue
        try:
            if p.environ().get(MARKER) == token:
                found.append(p)
        except (psutil.Error, OSError):
            continue
    return found


_seen: dict[int, Any] = {}   # every descendant of this test process seen while the test ran


def remember_descendants() -> None:
    """Note this process's descendants (the server, its kernels, the Playwright driver, Chromium and
    the processes it forks, which do not all show the marker in their environment)."""
    import psutil

    try:
        for p in psutil.Process().children(recursive=True):
            _seen.setdefault(p.pid, p)
    except psutil.Error:
        pass


def _still_running(p: Any) -> bool:
    import psutil

    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _describe(p: Any) -> str:
    try:
        return f"pid {p.pid} {' '.join(p.cmdline())[:160]}"
    except Exception:
        return f"pid {p.pid}"


def _kill_all(procs: list[Any], grace: float = 5.0) -> None:
    import psutil

    for p in procs:
        try:
            p.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(procs, timeout=grace)
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=grace)


@pytest.fixture
def no_leftovers() -> Iterator[str]:
    """Marks every process started during the test; afterwards none may remain (they are killed)."""
    token = secrets.token_hex(8)
    old = os.environ.get(MARKER)
    os.environ[MARKER] = token
    try:
        yield token
    finally:
        if old is None:
            os.environ.pop(MARKER, None)
        else:
            os.environ[MARKER] = old
        remember_descendants()

        def leftovers() -> list[Any]:
            found = {p.pid: p for p in _marked_processes(token)}
            found.update({pid: p for pid, p in _seen.items() if _still_running(p)})
            return list(found.values())

        deadline = time.monotonic() + 10
        left = leftovers()
        while left and time.monotonic() < deadline:  # processes on their way out
            time.sleep(0.5)
            left = leftovers()
        _seen.clear()
        if left:
            names = [_describe(p) for p in left]
            _kill_all(left)
            pytest.fail("processes of the browser test were still running after it (killed now):\n  "
                        + "\n  ".join(names), pytrace=False)


# ---------------------------------------------------------------------------------------------------
# the isolated workspace and the JupyterLab server


@dataclass
class Lab:
    root: Path                  # the notebook folder the server serves (a temporary copy)
    base: str                   # http://127.0.0.1:PORT
    token: str
    log: Path
    proc: subprocess.Popen[bytes]
    env: dict[str, str] = field(default_factory=dict)

    def url(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.base}{path}{sep}token={self.token}"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")


@pytest.fixture
def workdir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="perfmagic-browser-"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def lab_environment(work: Path) -> dict[str, str]:
    """The server's (and so the kernels') environment: every config, data, cache and runtime folder
    in ``work``; the ledger beside the notebook copy."""
    env = dict(os.environ)
    for k in ("PERFMAGIC_WIDGETS", "PERFMAGIC_LEDGER_DIR", "PERFMAGIC_CACHE_DIR", "JPY_SESSION_NAME",
              "JUPYTER_PATH", "JUPYTER_CONFIG_PATH", "JUPYTER_PREFER_ENV_PATH", "MPLBACKEND"):
        env.pop(k, None)
    home = work / "home"
    dirs = {
        "HOME": home,
        "XDG_CACHE_HOME": home / ".cache",
        "XDG_CONFIG_HOME": home / ".config",
        "XDG_DATA_HOME": home / ".local" / "share",
        "JUPYTER_CONFIG_DIR": work / "jupyter" / "config",
        "JUPYTER_DATA_DIR": work / "jupyter" / "data",
        "JUPYTER_RUNTIME_DIR": work / "jupyter" / "runtime",
        "JUPYTERLAB_SETTINGS_DIR": work / "jupyter" / "lab-settings",
        "JUPYTERLAB_WORKSPACES_DIR": work / "jupyter" / "lab-workspaces",
        "IPYTHONDIR": work / "ipython",
        "MPLCONFIGDIR": work / "matplotlib",
        "TMPDIR": work / "tmp",
    }
    for k, v in dirs.items():
        v.mkdir(parents=True, exist_ok=True)
        env[k] = str(v)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    settings = dirs["JUPYTERLAB_SETTINGS_DIR"]
    # every cell in the DOM (no virtual scrolling), so every output renders and can be inspected
    _write_json(settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings",
                {"windowingMode": "none", "scrollPastEnd": False})
    # no news feed, no update check, no extension manager: nothing that would reach outside
    _write_json(settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings",
                {"fetchNews": "false", "checkForUpdates": False})
    _write_json(settings / "@jupyterlab" / "extensionmanager-extension" / "plugin.jupyterlab-settings",
                {"enabled": False})
    _write_json(dirs["JUPYTER_CONFIG_DIR"] / "labconfig" / "page_config.json",
                {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    return env


def _stop_server(lab: Lab) -> None:
    """POST /api/shutdown (the server stops its kernels), then SIGTERM/SIGKILL to its process group and
    every descendant seen."""
    import psutil

    try:
        descendants = psutil.Process(lab.proc.pid).children(recursive=True)
    except psutil.Error:
        descendants = []
    if lab.proc.poll() is None:
        try:
            req = urllib.request.Request(lab.url("/api/shutdown"), method="POST", data=b"")
            urllib.request.urlopen(req, timeout=10).read()
        except (OSError, urllib.error.URLError):
            pass
        try:
            lab.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        if lab.proc.poll() is not None:
            break
        try:
            os.killpg(lab.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        try:
            lab.proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            pass
    try:  # the server's group is gone; its kernels (own sessions) and their children too
        os.killpg(lab.proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    _kill_all([p for p in descendants if p.is_running()], grace=5)


@pytest.fixture
def jupyter_lab(no_leftovers: str, workdir: Path) -> Iterator[Lab]:
    root = workdir / "notebooks"
    root.mkdir()
    shutil.copy2(REPO / "notebooks" / "00_tour.ipynb", root / "00_tour.ipynb")
    env = lab_environment(workdir)
    token = secrets.token_hex(16)
    port = _free_port()
    log = workdir / "jupyterlab.log"
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser",
           "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
           "--LabApp.expose_app_in_browser=True", "--LabApp.news_url=None",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
           "--LabApp.extension_manager=readonly", "--ServerApp.terminals_enabled=False"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # CI and containers run as root
        cmd.append("--allow-root")
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    lab = Lab(root=root, base=f"http://127.0.0.1:{port}", token=token, log=log, proc=proc, env=env)
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(lab.url("/api/status"), timeout=5) as r:
                    if r.status == 200:
                        break
            except (OSError, urllib.error.URLError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"JupyterLab did not answer within {SERVER_START_S} s:\n"
                                   f"{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield lab
    finally:
        remember_descendants()
        _stop_server(lab)
        ARTIFACTS.mkdir(exist_ok=True)
        if log.exists():
            shutil.copy(log, record_artifact(ARTIFACTS / "jupyterlab.log"))


# ---------------------------------------------------------------------------------------------------
# the browser


@dataclass
class Browser:
    context: Any
    page: Any
    requests: list[str] = field(default_factory=list)   # every URL the browser asked for
    console: list[str] = field(default_factory=list)    # console errors and page errors


@pytest.fixture
def browser(jupyter_lab: Lab, workdir: Path) -> Iterator[Browser]:
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        pytest.fail(f"{CHROMIUM} not found: install Debian's chromium (apt-get install chromium)", pytrace=False)
    from playwright.sync_api import sync_playwright

    profile = workdir / "chromium-profile"
    profile.mkdir()
    pw = sync_playwright().start()
    context = None
    try:
        context = pw.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1400, "height": 1000}, env={**jupyter_lab.env, MARKER: os.environ[MARKER]},
            timeout=60_000)
        b = Browser(context=context, page=None)
        context.on("request", lambda r: b.requests.append(r.url))
        page = context.pages[0] if context.pages else context.new_page()
        page.on("websocket", lambda ws: b.requests.append(ws.url))
        page.on("pageerror", lambda e: b.console.append(f"pageerror: {e}"))
        page.on("console", lambda m: b.console.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
        b.page = page
        yield b
    finally:
        remember_descendants()
        try:
            if context is not None:
                context.close()
        finally:
            pw.stop()
