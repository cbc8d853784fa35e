"""The tour in a real browser: JupyterLab + headless Debian Chromium.

Opens ``notebooks/00_tour.ipynb`` (a temporary copy) in JupyterLab, runs every cell from the Run menu,
waits until the kernel is idle and every cell has run, then checks what a user would see: the
self-contained outputs of %%gpubench, %%roofline, %%amdahl, %%estimate, %%dataloader_check and
%%memory render (the headline, a figure that loaded, folded details that open on a click, no
ipywidgets view), the flame graph's own JavaScript draws and zooms, the comparison and ledger tables
show, no output says "Error displaying widget" / "model not found" or shows a traceback, no progress
bar is left, and the browser asked nothing of any host but this machine. Screenshots of the
notebook and of each key output go to ``tests/browser/artifacts/`` (listed at the end of the run).

Run with ``make browser`` (``python -m pytest -q tests/browser``); needs /usr/bin/chromium (Debian's
``chromium`` package) and the ``browser`` extra (jupyterlab, playwright). Playwright's own browser
download is never used.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from .conftest import ARTIFACTS, Browser, Lab, record_artifact, record_note

pytestmark = pytest.mark.browser

NOTEBOOK = "00_tour.ipynb"
OPEN_TIMEOUT_S = 90
RUN_TIMEOUT_S = 330            # the tour takes 1-2 min here (2 cores), with the roofs' calibration; the whole test stays < 8 min
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}
LOCAL_SCHEMES = {"data", "blob", "about", "chrome", "chrome-extension", "devtools"}

# key outputs: (artifact name, first line of the cell's source, what must render there)
WIDGET_CELLS = [
    ("gpubench", "%%gpubench -l sleep-5ms", "static"),
    ("roofline", "%%roofline -l matmul-512", "static"),
    ("amdahl", "%%amdahl workers=", "static"),
    ("estimate", "%%estimate n=len(data)", "static"),
    ("dataloader", "%%dataloader_check train_loader", "static"),
    ("memory", "%%memory", "static"),
    ("flame", "%%flame", "flame"),
    ("lineprof", "%%lineprof -f slow", "html"),
    ("compare", "%perf compare", "compare"),
    ("perf_plot", "%perf plot", "image"),
    ("ledger", "%perf\n", "html"),
]

# the notebook's state through JupyterLab's own model (window.jupyterapp, --LabApp.expose_app_in_browser)
JS_STATE = """() => {
  const app = window.jupyterapp;
  const w = app && app.shell.currentWidget;
  if (!w || !w.content || !w.sessionContext) return null;
  const kernel = w.sessionContext.session && w.sessionContext.session.kernel;
  const cells = w.content.widgets.map((c, i) => ({
    i, type: c.model.type, source: c.model.sharedModel.getSource(),
    count: c.model.type === 'code' ? c.model.executionCount : null,
    outputs: c.model.type === 'code' ? c.model.outputs.toJSON() : [],
  }));
  const prompts = Array.from(document.querySelectorAll('.jp-Notebook .jp-InputPrompt')).map(e => e.textContent.trim());
  return {kernel: kernel ? kernel.status : null, cells, prompts,
          path: w.context ? w.context.path : null};
}"""


def _state(page: Any) -> dict[str, Any] | None:
    return page.evaluate(JS_STATE)


def _wait_kernel_idle(page: Any, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    st = None
    while time.monotonic() < deadline:
        st = _state(page)
        if st and st["kernel"] == "idle" and st["path"] == NOTEBOOK:
            return st
        time.sleep(1)
    raise AssertionError(f"the notebook did not open with an idle kernel within {timeout_s:.0f} s "
                         f"(last state: kernel {st and st['kernel']!r})")


def _run_all(page: Any) -> str:
    """Run → Run All Cells from the menu bar, as a user would; the command itself if the menu fails."""
    try:
        page.locator(".lm-MenuBar-item", has_text=re.compile(r"^\s*Run\s*$")).first.click(timeout=10_000)
        page.locator(".lm-Menu-item:visible", has_text=re.compile(r"^\s*Run All Cells")).first.click(timeout=10_000)
        return "Run menu → Run All Cells"
    except Exception:
        page.keyboard.press("Escape")
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        return "command notebook:run-all-cells"


def _errors_in(cells: list[dict[str, Any]]) -> list[str]:
    out = []
    for c in cells:
        for o in c["outputs"]:
            if o.get("output_type") == "error":
                out.append(f"cell {c['i'] + 1}: {o.get('ename')}: {o.get('evalue')}")
            elif o.get("output_type") == "stream" and o.get("name") == "stderr" and "Traceback" in "".join(o.get("text", "")):
                out.append(f"cell {c['i'] + 1}: a traceback on stderr")
    return out


def _wait_all_run(page: Any, timeout_s: float) -> dict[str, Any]:
    """Until every non-empty code cell has an execution count, no prompt shows [*] and the kernel is
    idle (twice in a row); or the run stopped at an error (kernel idle, nothing queued, for 10 s)."""
    deadline = time.monotonic() + timeout_s
    done_once = False
    stalled_since = None
    st: dict[str, Any] = {}
    while time.monotonic() < deadline:
        st = _state(page) or {}
        code = [c for c in st.get("cells", []) if c["type"] == "code" and c["source"].strip()]
        busy = any("*" in p for p in st.get("prompts", []))
        idle = st.get("kernel") == "idle"
        if idle and not busy and code and all(isinstance(c["count"], int) for c in code):
            if done_once:
                return st
            done_once = True
        else:
            done_once = False
        if idle and not busy and _errors_in(code):
            stalled_since = stalled_since or time.monotonic()
            if time.monotonic() - stalled_since > 10:
                return st
        else:
            stalled_since = None
        time.sleep(2)
    waiting = [c["i"] + 1 for c in st.get("cells", []) if c["type"] == "code" and c["source"].strip()
               and not isinstance(c["count"], int)]
    raise AssertionError(f"the tour did not finish within {timeout_s:.0f} s: kernel {st.get('kernel')!r}, "
                         f"cells not run yet: {waiting[:20]}")


def _cell_index(st: dict[str, Any], source_start: str) -> int:
    for c in st["cells"]:
        if c["type"] == "code" and (c["source"] + "\n").startswith(source_start):
            return int(c["i"])
    raise AssertionError(f"no cell starts with {source_start!r} in {NOTEBOOK}")


def _shot(locator: Any, name: str) -> Path | None:
    path = ARTIFACTS / f"{name}.png"
    try:
        locator.scroll_into_view_if_needed(timeout=10_000)
        locator.screenshot(path=str(path), timeout=30_000, animations="disabled")
    except Exception:
        return None
    return record_artifact(path)


def _notebook_pages(page: Any, prefix: str, max_parts: int = 20) -> list[Path]:
    """The whole notebook, top to bottom, in screen-high parts (JupyterLab's page never scrolls: the
    notebook panel does, so a full-page screenshot would show one screen)."""
    scroller = ".jp-NotebookPanel .jp-WindowedPanel-outer"
    if page.locator(scroller).count() == 0:
        return []
    page.set_viewport_size({"width": 1400, "height": 2400})
    shots = []
    try:
        page.evaluate(f"() => {{ document.querySelector({scroller!r}).scrollTop = 0; }}")
        for k in range(1, max_parts + 1):
            page.wait_for_timeout(500)
            path = ARTIFACTS / f"{prefix}_{k:02d}.png"
            page.screenshot(path=str(path), timeout=60_000, animations="disabled")
            shots.append(record_artifact(path))
            more = page.evaluate(f"""() => {{ const s = document.querySelector({scroller!r});
                const cells = s.querySelectorAll('.jp-Cell'), last = cells[cells.length - 1];
                if (s.scrollTop + s.clientHeight >= s.scrollHeight - 2) return false;
                if (last && last.getBoundingClientRect().bottom <= s.getBoundingClientRect().bottom) return false;
                s.scrollTop += s.clientHeight - 60; return true; }}""")
            if not more:
                break
    finally:
        page.set_viewport_size({"width": 1400, "height": 1000})
    return shots


def _loaded_images(output: Any, selector: str) -> int:
    return int(output.evaluate(f"""(el) => Array.from(el.querySelectorAll({selector!r}))
                                   .filter(i => i.complete && i.naturalWidth > 0).length"""))


def _check_static(output: Any, name: str, problems: list[str]) -> None:
    """A self-contained result: its headline, a figure that loaded, no widget view, and folded
    details (<details>) that open on a click with no kernel round trip."""
    if output.locator(".jupyter-widgets").count():
        problems.append(f"{name}: an ipywidgets view is in the output (live views are opt-in)")
    if output.locator(".perfmagic-result").count() == 0:
        problems.append(f"{name}: no self-contained result (.perfmagic-result) rendered")
        return
    if _loaded_images(output, "img") == 0:
        problems.append(f"{name}: no figure loaded")
    if "median" not in output.inner_text() and name in ("gpubench",):
        problems.append(f"{name}: the text summary is missing")
    if output.locator("progress").count():
        problems.append(f"{name}: a progress bar was left in the output")
    details = output.locator("details")
    if details.count() == 0:
        problems.append(f"{name}: no folded details")
        return
    first = details.first
    first.locator("summary").click()
    output.page.wait_for_timeout(300)
    if not first.evaluate("(d) => d.open"):
        problems.append(f"{name}: clicking the details' summary did not open it")
    elif not first.inner_text().strip():
        problems.append(f"{name}: the opened details show nothing")


def _check_flame(output: Any, problems: list[str]) -> None:
    """perfmagic's own flame graph: the inline script ran (live graph shown, static PNG hidden), frames
    are drawn as .pmf-n divs, and a click zooms."""
    live = output.locator(".perfmagic-flame .pmf-live")
    if live.count() == 0 or not live.first.is_visible():
        problems.append("flame: the interactive graph is not shown (its inline script did not run?)")
        return
    frames = output.locator(".pmf-graph .pmf-n")
    if frames.count() < 2:
        problems.append(f"flame: {frames.count()} frames drawn")
        return
    target = None
    for k in range(min(frames.count(), 40)):
        f = frames.nth(k)
        if "parse" in f.inner_text():
            target = f
            break
    if target is None:
        problems.append("flame: no frame named parse(...) drawn")
        return
    target.click()
    output.page.wait_for_timeout(300)
    if "zoomed on" not in output.locator(".pmf-info").inner_text():
        problems.append("flame: clicking a frame did not zoom")
    else:
        _shot(output, "output_flame_zoomed")
    output.locator(".pmf-bar button").click()  # reset zoom


def test_tour_renders_in_jupyterlab(jupyter_lab: Lab, browser: Browser) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    for old in ARTIFACTS.glob("*.png"):
        old.unlink()
    page = browser.page
    page.set_default_timeout(30_000)
    t0 = time.monotonic()
    problems: list[str] = []

    page.goto(jupyter_lab.url(f"/lab/tree/{NOTEBOOK}?reset"), wait_until="domcontentloaded", timeout=90_000)
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell", timeout=OPEN_TIMEOUT_S * 1000)
    st = _wait_kernel_idle(page, OPEN_TIMEOUT_S)
    t_open = time.monotonic() - t0
    page.locator(".jp-NotebookPanel .jp-Notebook").first.click(position={"x": 5, "y": 5})
    how = _run_all(page)
    st = _wait_all_run(page, RUN_TIMEOUT_S)
    t_run = time.monotonic() - t0 - t_open
    page.wait_for_timeout(1500)  # the last images settle

    cells = page.locator(".jp-Notebook .jp-Cell")
    assert cells.count() == len(st["cells"]), "the DOM does not hold every cell (windowing left on?)"
    code = [c for c in st["cells"] if c["type"] == "code" and c["source"].strip()]
    problems += [f"error output: {e}" for e in _errors_in(code)]
    not_run = [c["i"] + 1 for c in code if not isinstance(c["count"], int)]
    if not_run:
        problems.append(f"cells not run: {not_run}")

    nb_text = page.locator(".jp-Notebook").inner_text()
    for bad in ("Error displaying widget", "model not found", "Traceback (most recent call last)"):
        if bad in nb_text:
            problems.append(f"an output shows {bad!r}")
    stderr_tb = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']",
                             has_text=re.compile(r"Traceback|\w+Error: "))
    if stderr_tb.count():
        problems.append(f"{stderr_tb.count()} output(s) show an error on stderr: "
                        f"{stderr_tb.first.inner_text()[:300]!r}")

    n_widgets = page.locator(".jp-Notebook .jp-OutputArea-output .jupyter-widgets").count()
    for name, source, kind in WIDGET_CELLS:
        i = _cell_index(st, source)
        output = cells.nth(i).locator(".jp-Cell-outputWrapper")
        if output.count() == 0 or not output.inner_text().strip() and not _loaded_images(output, "img"):
            problems.append(f"{name}: cell {i + 1} shows no output")
            continue
        _shot(output, f"output_{name}")
        if kind == "static":
            _check_static(output, name, problems)
            if name == "roofline":
                _shot(output, f"output_{name}_details_open")
        elif kind == "flame":
            _check_flame(output, problems)
        elif kind == "compare":
            if output.locator(".perfmagic-compare").count() == 0:
                problems.append("compare: the coloured comparison (.perfmagic-compare) is not shown")
            elif not re.search(r"faster|slower|no real change|inconclusive", output.inner_text()):
                problems.append("compare: no verdict in the comparison")  # which verdict is run.py's check
        elif kind == "image" and _loaded_images(output, "img") == 0:
            problems.append(f"{name}: no loaded image")
        elif kind == "html" and output.locator("table, pre").count() == 0:
            problems.append(f"{name}: no table shown")

    page.screenshot(path=str(record_artifact(ARTIFACTS / "page_end.png")))
    _notebook_pages(page, "notebook")

    outside = sorted({u for u in browser.requests
                      if urlsplit(u).scheme not in LOCAL_SCHEMES and urlsplit(u).hostname not in LOCAL_HOSTS})
    if outside:
        problems.append(f"{len(outside)} request(s) went to another host than this machine:\n    "
                        + "\n    ".join(outside[:50]))
    page_errors = [c for c in browser.console if "pageerror" in c or "widget" in c.lower()]

    record_note(f"JupyterLab open + kernel idle in {t_open:.1f} s; {how}; all {len(code)} code cells run in "
                f"{t_run:.1f} s; checks and screenshots {time.monotonic() - t0 - t_open - t_run:.1f} s")
    if n_widgets:
        problems.append(f"{n_widgets} ipywidgets elements in the outputs: the tour's magics must add none")
    record_note(f"{n_widgets} ipywidgets elements in outputs; {len(browser.requests)} requests, "
                f"{len(outside)} to another host; {len(browser.console)} console errors")
    for c in browser.console[:20]:
        record_note("    " + c[:300])
    assert not problems, "the tour in JupyterLab:\n  " + "\n  ".join(problems) + (
        "\n  page errors:\n    " + "\n    ".join(page_errors[:10]) if page_errors else "")
