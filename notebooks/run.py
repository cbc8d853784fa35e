"""Execute notebooks in a real kernel and leave a readable result beside each one; optionally check them.

    python notebooks/run.py notebooks/00_tour.ipynb [more.ipynb ...]
    python notebooks/run.py --check notebooks/[0-9]*.ipynb        # what `make notebooks` (CI) runs

For each notebook: runs every cell top to bottom in a fresh kernel of this Python (nbclient), writes
the executed copy to ``notebooks/_executed/NAME.ipynb`` (open it in JupyterLab: ``jupyter lab
notebooks/_executed/NAME.ipynb``) and an HTML export to ``notebooks/NAME.html`` (any browser, offline:
the export loads no script from a CDN). Nothing is stripped: perfmagic's outputs are self-contained
(text, inline PNG, HTML with folded details), so the executed notebook reads the same everywhere.

Without ``--check`` a failing cell stops the run with the cell's number, its source and the error.

With ``--check`` every notebook runs to the end and these checks are made; all failures are listed at
the end, and the exit status is 1 if there is any:

* errors: no cell has an error output (cells tagged ``raises-exception`` may), and no cell wrote a
  ``Traceback`` to stderr;
* expected text: a code cell may carry ``{"perfmagic": {"expect": ["REGEX", ...]}}`` in its metadata;
  each regex must ``re.search`` (``re.MULTILINE``) the cell's printed text: its stream output and the
  ``text/plain`` of its displays and results, joined by newlines;
* static outputs: no output exists only as a widget view (a live view a cell asks for, such as
  ``result.widget()``, must have a text/plain, image/png or text/html sibling), and in the HTML export
  every code cell with outputs shows text or an image;
* offline HTML: the export loads no external script, stylesheet, image or module (no CDN).
"""

from __future__ import annotations

import argparse
import html as html_lib
import os
import shutil
import re
import sys
import time
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
STATIC_MIMES = ("text/plain", "image/png", "text/html")
SHOW_LINES = 20  # lines of a failing cell's source / output shown in a failure

# nbconvert's lab template loads require.js, MathJax and mermaid from cdnjs (and the widget
# manager from unpkg when the notebook keeps widget state). None of them is needed here: outputs are
# static HTML, PNG and perfmagic's inline scripts. This template is the lab one without those tags.
OFFLINE_TEMPLATE = """{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
"""

# what a page would fetch from elsewhere: <script src>, <link href>, <img src>, <iframe src>,
# CSS url()/@import and JS module imports of an absolute or protocol-relative URL
_EXTERNAL = re.compile(
    r"""<(?:script|img|iframe|embed|source|audio|video)\b[^>]*\bsrc\s*=\s*["']?\s*(?:https?:)?//[^"'\s>]*"""
    r"""|<link\b[^>]*\bhref\s*=\s*["']?\s*(?:https?:)?//[^"'\s>]*"""
    r"""|url\(\s*["']?\s*(?:https?:)?//[^"')\s]*"""
    r"""|@import\s+["']\s*(?:https?:)?//[^"']*"""
    r"""|\bimport\s*\(\s*["']\s*(?:https?:)?//[^"']*"""
    r"""|\bfrom\s+["']\s*(?:https?:)?//[^"']*""",
    re.IGNORECASE,
)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def html_exporter() -> Any:
    """nbconvert's lab HTML exporter with no script loaded from a CDN (see OFFLINE_TEMPLATE)."""
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter

    return HTMLExporter(extra_loaders=[DictLoader({"perfmagic_offline.html.j2": OFFLINE_TEMPLATE})],
                        template_file="perfmagic_offline.html.j2")


# ---------------------------------------------------------------------------------------------------
# checks


@dataclass
class Report:
    """What happened to one notebook: counts for the summary line, and the failures in full."""

    path: Path
    cells: int = 0
    code_cells: int = 0
    seconds: float = 0.0
    passed: dict[str, int] = field(default_factory=dict)
    fails: list[tuple[int, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    cell_seconds: dict[int, float] = field(default_factory=dict)
    ref: Any = None

    def ok(self, check: str, n: int = 1) -> None:
        self.passed[check] = self.passed.get(check, 0) + n

    def fail(self, text: str, cell_index: int = 1 << 30) -> None:
        self.fails.append((cell_index, text))

    @property
    def failures(self) -> list[str]:
        """In cell order; failures of the whole notebook last."""
        return [t for _, t in sorted(self.fails, key=lambda f: f[0])]


def _src(x: Any) -> str:
    return "".join(x) if isinstance(x, list) else str(x or "")


def _indent(lines: list[str], prefix: str = "    | ") -> str:
    return "\n".join(prefix + ln for ln in lines)


def _first_lines(text: str, n: int = SHOW_LINES) -> str:
    lines = text.rstrip("\n").splitlines() or ["(nothing)"]
    more = f"\n    ... ({len(lines) - n} more lines)" if len(lines) > n else ""
    return _indent(lines[:n]) + more


class CellRef:
    """How a failure names a cell: ``code cell 14 (cell 24 of 59)``, both 1-based, with its source."""

    def __init__(self, path: Path, nb: Any) -> None:
        self.path = path
        self.total = len(nb.cells)
        self.code_no: dict[int, int] = {}
        for i, c in enumerate(nb.cells):
            if c.cell_type == "code":
                self.code_no[i] = len(self.code_no) + 1

    def name(self, i: int) -> str:
        if i in self.code_no:
            return f"code cell {self.code_no[i]} (cell {i + 1} of {self.total})"
        return f"cell {i + 1} of {self.total}"

    def head(self, i: int, cell: Any) -> str:
        lines = _src(cell.source).splitlines() or ["(empty)"]
        shown = lines[:5] + (["..."] if len(lines) > 5 else [])
        return f"{self.path}, {self.name(i)}:\n{_indent(shown, '    > ')}"


def printed_text(cell: Any) -> str:
    """What the cell printed: stream text and the text/plain of displays and results, in order."""
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(_src(out.get("text")))
        elif out.get("output_type") in ("display_data", "execute_result"):
            t = out.get("data", {}).get("text/plain")
            if t is not None:
                parts.append(_src(t))
    return "\n".join(p.rstrip("\n") for p in parts)


def error_text(out: Any) -> str:
    tb = [_ANSI.sub("", ln) for ln in out.get("traceback", [])]
    lines = "\n".join(tb).splitlines()
    head = f"{out.get('ename', 'Error')}: {out.get('evalue', '')}"
    tail = lines[-SHOW_LINES:] if lines else [head]
    return f"error {head}\n" + _indent(tail)


def check_errors(nb: Any, ref: CellRef, rep: Report, executed: set[int], stopped_at: int = -1) -> None:
    """Error outputs (not in cells tagged raises-exception) and tracebacks on stderr. The cell the run
    stopped at (a timeout) is reported as such, not again for the KeyboardInterrupt that stopped it."""
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        allowed = "raises-exception" in cell.metadata.get("tags", [])
        bad = []
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error" and i == stopped_at and out.get("ename") == "KeyboardInterrupt":
                continue
            if out.get("output_type") == "error" and not allowed:
                bad.append(error_text(out))
            elif (out.get("output_type") == "stream" and out.get("name") == "stderr"
                  and "Traceback" in _src(out.get("text"))):
                bad.append("a traceback on stderr:\n" + _first_lines(_ANSI.sub("", _src(out.get("text")))))
        if bad:
            rep.fail(ref.head(i, cell) + "\n  " + "\n  ".join(bad), i)
        elif i in executed:
            rep.ok("code cells without errors")


def check_expected(nb: Any, ref: CellRef, rep: Report, executed: set[int]) -> None:
    for i, cell in enumerate(nb.cells):
        meta = cell.metadata.get("perfmagic", {})
        patterns = meta.get("expect") if isinstance(meta, dict) else None
        if not patterns or cell.cell_type != "code":
            continue
        if isinstance(patterns, str):
            patterns = [patterns]
        if i not in executed:
            rep.fail(ref.head(i, cell) + f"\n  not run, so its {len(patterns)} expected "
                                         "pattern(s) were not checked", i)
            continue
        text = printed_text(cell)
        missing = []
        for pat in patterns:
            try:
                found = re.search(pat, text, re.MULTILINE)
            except (re.error, TypeError) as exc:
                missing.append(f"bad expected pattern {pat!r}: {exc}")
                continue
            if found:
                rep.ok("expected patterns")
            else:
                missing.append(f"missing expected pattern {pat!r}")
        if missing:
            n = len(text.splitlines())
            rep.fail(ref.head(i, cell) + "\n  " + "\n  ".join(missing)
                     + f"\n  the cell printed ({n} lines):\n" + _first_lines(text), i)


def check_widget_fallbacks(nb: Any, ref: CellRef, rep: Report) -> None:
    """Every widget view has a static sibling to fall back to once the kernel is gone."""
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if WIDGET_VIEW not in data:
                continue
            if any(m in data for m in STATIC_MIMES):
                rep.ok("widget views with a static form")
            else:
                rep.fail(ref.head(i, cell) + "\n  an output exists only as a widget view "
                         f"(mimetypes {sorted(data)}): nothing to show once the kernel is gone", i)


class _OutputReader(HTMLParser):
    """Text (outside <script>/<style>) and images inside the output wrapper of one exported cell."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.skip = 0
        self.text: list[str] = []
        self.images = 0

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in ("script", "style"):
            self.skip += 1
        elif tag == "img" and dict(attrs).get("src"):
            self.images += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style") and self.skip:
            self.skip -= 1

    def handle_data(self, data: str) -> None:
        if not self.skip and data.strip():
            self.text.append(data.strip())


def html_code_cells(body: str) -> list[str]:
    """The HTML of each exported code cell, in order (nbconvert's lab template: one ``jp-Cell`` div per
    markdown or code cell; a code cell's chunk runs to the next cell)."""
    starts = list(re.finditer(r"<div\b[^>]*\bclass=[\"']jp-Cell ([^\"']*)[\"']", body))
    return [body[m.start(): starts[k + 1].start() if k + 1 < len(starts) else len(body)]
            for k, m in enumerate(starts) if "jp-CodeCell" in m.group(1).split()]


def check_html(nb: Any, body: str, ref: CellRef, rep: Report) -> None:
    chunks = html_code_cells(body)
    code = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    if len(chunks) != len(code):
        rep.fail(f"{ref.path}: the HTML export has {len(chunks)} code cells, the notebook "
                 f"{len(code)}: cannot match outputs to cells")
    else:
        for (i, cell), chunk in zip(code, chunks):
            if not cell.get("outputs"):
                continue
            k = chunk.find("jp-Cell-outputWrapper")
            reader = _OutputReader()
            if k >= 0:
                reader.feed(chunk[chunk.rfind("<", 0, k):])
            if reader.text or reader.images:
                rep.ok("cells with a static output in the HTML")
            else:
                kinds = sorted({m for o in cell.outputs for m in o.get("data", {})} |
                               {o.output_type for o in cell.outputs if o.output_type in ("stream", "error")})
                rep.fail(ref.head(i, cell) + "\n  has outputs in the executed notebook "
                         f"({', '.join(kinds)}) but no text or image in the HTML export", i)
    external = sorted({html_lib.unescape(m.group(0)) for m in _EXTERNAL.finditer(body)})
    if external:
        rep.fail(f"{ref.path}: the HTML export loads {len(external)} external resource(s) "
                 "(it must work offline):\n" + _indent(external))
    else:
        rep.ok("HTML offline (no external script)")


# ---------------------------------------------------------------------------------------------------
# running


def run(path: Path, timeout: int, check: bool = False) -> Report:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    nb = nbformat.read(path, as_version=4)
    ref = CellRef(path, nb)
    rep = Report(path, cells=len(nb.cells), code_cells=len(ref.code_no), ref=ref)
    # the kernel learns its notebook as under jupyter-server, so the ledger is this notebook's
    os.environ["JPY_SESSION_NAME"] = str(path.resolve())
    # each run starts with an empty ledger of its own, so what the notebook shows is this run alone
    # (an interactive session's ledger in notebooks/.perfmagic/ is left as it is)
    ledger_dir = path.resolve().parent / "_executed" / f".perfmagic-{path.stem}"
    shutil.rmtree(ledger_dir, ignore_errors=True)
    ledger_dir.mkdir(parents=True)
    os.environ["PERFMAGIC_LEDGER_DIR"] = str(ledger_dir)
    started: dict[int, float] = {}
    executed: set[int] = set()
    current = [-1]

    def on_execute(cell: Any, cell_index: int) -> None:
        current[0] = cell_index
        started[cell_index] = time.perf_counter()

    def on_executed(cell: Any, cell_index: int, execute_reply: Any) -> None:
        executed.add(cell_index)
        rep.cell_seconds[cell_index] = time.perf_counter() - started.get(cell_index, time.perf_counter())

    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", store_widget_state=False,
                            allow_errors=check, on_cell_execute=on_execute, on_cell_executed=on_executed,
                            resources={"metadata": {"path": str(path.parent)}})
    t = time.perf_counter()
    stopped = None
    try:
        client.execute()
    except CellExecutionError as exc:  # only without --check (allow_errors=False)
        print(f"\n{path}: a cell failed.\n{exc}", file=sys.stderr)
        raise SystemExit(1) from None
    except (CellTimeoutError, DeadKernelError, TimeoutError, RuntimeError) as exc:
        i = current[0]
        where = ref.head(i, nb.cells[i]) if i >= 0 else f"{path}:"
        what = "timed out (--timeout %d s per cell)" % timeout if isinstance(exc, TimeoutError) else \
            f"stopped the run: {type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        stopped = f"{where}\n  {what}; the cells after it were not run"
        if not check:
            print(f"\n{stopped}", file=sys.stderr)
            raise SystemExit(1) from None
    rep.seconds = time.perf_counter() - t

    if check:
        if stopped:
            rep.fail(stopped, current[0] if current[0] >= 0 else 1 << 30)
        check_errors(nb, ref, rep, executed, current[0] if stopped else -1)
        check_expected(nb, ref, rep, executed)
        check_widget_fallbacks(nb, ref, rep)
    out_dir = path.parent / "_executed"
    out_dir.mkdir(exist_ok=True)
    executed_path = out_dir / path.name
    nbformat.write(nb, executed_path)
    body, _ = html_exporter().from_notebook_node(nb)
    html = path.with_suffix(".html")
    html.write_text(body, encoding="utf-8")
    if check:
        check_html(nb, body, ref, rep)
    rep.notes.append(f"-> {executed_path} and {html}")
    return rep


def summary(rep: Report) -> str:
    slow = sorted(rep.cell_seconds.items(), key=lambda kv: -kv[1])[:3]
    slowest = ", ".join(f"{rep.ref.name(i) if rep.ref else f'cell {i + 1}'} {s:.1f} s" for i, s in slow)
    checks = "; ".join(f"{n} {what}" for what, n in rep.passed.items())
    status = "OK" if not rep.failures else f"FAILED ({len(rep.failures)} failure{'s' * (len(rep.failures) > 1)})"
    lines = [f"{rep.path}: {rep.cells} cells ({rep.code_cells} code), executed in {rep.seconds:.1f} s  {status}"]
    if rep.passed:
        lines.append(f"  checks passed: {checks}")
    if slowest:
        lines.append(f"  slowest: {slowest}")
    lines += [f"  {n}" for n in rep.notes]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("notebooks", nargs="+", type=Path)
    ap.add_argument("--timeout", type=int, default=600, help="seconds per cell (default 600)")
    ap.add_argument("--check", action="store_true",
                    help="run every notebook, check errors, expected text and the HTML export; exit 1 on any failure")
    args = ap.parse_args()
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    reports = []
    t = time.perf_counter()
    for path in args.notebooks:
        if not path.is_file():
            if not args.check:
                raise SystemExit(f"{path}: no such notebook")
            rep = Report(path)
            rep.fail(f"{path}: no such notebook")
        else:
            try:
                rep = run(path, args.timeout, check=args.check)
            except SystemExit:
                raise
            except Exception as exc:  # a notebook that cannot even start must not hide the others
                if not args.check:
                    raise
                rep = Report(path)
                rep.fail(f"{path}: could not be run: {type(exc).__name__}: {exc}")
        print(summary(rep), flush=True)
        reports.append(rep)
    if not args.check:
        return
    failures = [f for r in reports for f in r.failures]
    bad = [r for r in reports if r.failures]
    print(f"\n{len(reports)} notebook(s) in {time.perf_counter() - t:.1f} s: "
          f"{len(reports) - len(bad)} passed, {len(bad)} failed")
    if failures:
        print(f"\n{len(failures)} failure(s) (each executed notebook is in _executed/ beside it, "
              "its HTML export beside it):", file=sys.stderr)
        for k, f in enumerate(failures, 1):
            print(f"\n[{k}] FAIL {f}", file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
