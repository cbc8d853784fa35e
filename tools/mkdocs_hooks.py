"""mkdocs hooks for the perfmagic site (``hooks:`` in mkdocs.yml).

* **Notebooks in the site.** mkdocs only sees files under ``docs/``; the notebooks live in
  ``notebooks/``. ``on_files`` adds every ``notebooks/[0-9]*.ipynb`` to the site as
  ``notebooks/NAME.ipynb`` (mkdocs-jupyter renders it; the file is copied to ``build/docs-notebooks/``
  first, since mkdocs-jupyter reads a page from its source path), taken from the executed copy
  ``notebooks/_executed/NAME.ipynb`` when one exists (``make notebooks`` / ``make tour`` write it, with
  outputs), else from the source (inputs only). ``on_config`` fills the ``Notebooks`` section of the
  nav with the same list, titled by each notebook's first ``# heading``, so a new notebook appears
  without editing mkdocs.yml.
* **Reference tables from the code.** In a page, ``<!-- perfmagic:options NAME -->`` becomes the
  table of the magic's options, read from its ``@magic_arguments`` parser (what ``%%NAME?`` prints),
  and ``<!-- perfmagic:signature NAME -->`` the signature of ``perfmagic.NAME``, read with ``inspect``:
  the reference cannot drift from the code. An unknown name or an import error is a warning (strict
  builds fail).
* **Offline.** nbconvert's page template adds a MathJax loader and a Mermaid module import from a CDN
  to every notebook page; ``on_post_page`` removes those two (the notebooks write their formulas in
  Unicode, not LaTeX, and draw no Mermaid diagrams). ``on_post_build`` then checks every page with ``tools/check_site_offline.py`` and
  reports each network load as a warning, which fails ``mkdocs build --strict``.
"""

from __future__ import annotations

import html
import inspect
import json
import logging
import re
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

import check_site_offline  # tools/ is on sys.path while mkdocs imports this hook

log = logging.getLogger("mkdocs.hooks.perfmagic")

NOTEBOOKS_DIR = "notebooks"
EXECUTED_DIR = "_executed"
SITE_FOLDER = "notebooks"  # where the rendered notebooks go in the site
NAV_TITLE = "Notebooks"
STAGING = "build/docs-notebooks"  # the copies mkdocs reads (build/ is git-ignored)


def _repo_root(config: Any) -> Path:
    return Path(config.config_file_path).resolve().parent


def notebooks(root: Path) -> list[tuple[str, Path, bool]]:
    """``(name, path to render, executed?)`` of each ``notebooks/[0-9]*.ipynb``, in name order."""
    out = []
    for src in sorted((root / NOTEBOOKS_DIR).glob("[0-9]*.ipynb")):
        executed = root / NOTEBOOKS_DIR / EXECUTED_DIR / src.name
        use = executed if executed.is_file() else src
        out.append((src.name, use, use is executed))
    return out


def title_of(path: Path, name: str) -> str:
    """The notebook's first ``# heading``, else its file name without the number and extension."""
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
        for cell in nb.get("cells", []):
            if cell.get("cell_type") != "markdown":
                continue
            src = cell.get("source", "")
            for line in (src if isinstance(src, str) else "".join(src)).splitlines():
                if line.startswith("# "):
                    return line[2:].replace("`", "").strip() or name  # nav titles are plain text
    except (OSError, ValueError):
        pass
    stem = re.sub(r"^\d+_", "", Path(name).stem)
    return stem.replace("_", " ").capitalize()


def on_config(config: Any) -> Any:
    entries = [{title_of(path, name): f"{SITE_FOLDER}/{name}"} for name, path, _ in notebooks(_repo_root(config))]
    nav = config.nav
    if nav is None:  # no nav in mkdocs.yml: mkdocs builds one from the files, notebooks included
        return config
    for i, item in enumerate(nav):
        if isinstance(item, dict) and NAV_TITLE in item:
            if entries:
                nav[i] = {NAV_TITLE: entries}
            else:
                del nav[i]
            break
    else:
        if entries:
            nav.append({NAV_TITLE: entries})
    return config


@event_priority(50)  # before mkdocs-jupyter's on_files, which turns .ipynb files into pages
def on_files(files: Files, config: Any) -> Files:
    root = _repo_root(config)
    stage = root / STAGING
    (stage / SITE_FOLDER).mkdir(parents=True, exist_ok=True)
    wanted = set()
    for name, path, executed in notebooks(root):
        uri = f"{SITE_FOLDER}/{name}"
        if files.get_file_from_path(uri) is not None:
            log.warning(f"docs/{uri} exists and shadows notebooks/{name}; remove it from docs/")
            continue
        # a copy, not a virtual file: mkdocs-jupyter reads the notebook from the file's abs_src_path
        copy = stage / uri
        data = path.read_bytes()
        if not copy.is_file() or copy.read_bytes() != data:
            copy.write_bytes(data)
        wanted.add(copy.name)
        f = File(uri, src_dir=str(stage), dest_dir=config.site_dir, use_directory_urls=config.use_directory_urls)
        f.edit_uri = None
        files.append(f)
        if not executed:
            log.info(f"notebook {uri}: no executed copy in {NOTEBOOKS_DIR}/{EXECUTED_DIR}/, rendering the source "
                     "without outputs (make notebooks writes the executed copies)")
        elif path.stat().st_mtime < (root / NOTEBOOKS_DIR / name).stat().st_mtime:
            log.info(f"notebook {uri}: the executed copy is older than the source (make notebooks refreshes it)")
    for old in (stage / SITE_FOLDER).glob("*.ipynb"):
        if old.name not in wanted:
            old.unlink()
    return files


# ---- reference tables from the code ----------------------------------------------------------------

def _magic_names() -> list[str]:
    """Every magic, from the one registry the extension itself registers from."""
    from perfmagic.magics._lazy import MAGICS

    return list(MAGICS)
_MARKER = re.compile(r"<!--\s*perfmagic:(options|signature)\s+([\w.]+)\s*-->")


def _parser(name: str) -> Any:
    from perfmagic.magics._lazy import method_of

    return method_of(name).parser


def options_table(name: str) -> str:
    """An HTML table of the magic's arguments: invocation and help, exactly as its parser has them."""
    parser = _parser(name)
    fmt = parser._get_formatter()
    rows = []
    for a in parser._actions:
        if a.dest == "help":
            continue
        if a.option_strings:
            value = ""
            if a.nargs != 0:
                value = a.metavar or ("{" + ",".join(map(str, a.choices)) + "}" if a.choices else a.dest.upper())
            *short, last = a.option_strings
            inv = ", ".join([f"<code>{html.escape(o)}</code>" for o in short]
                            + [f"<code>{html.escape(last)}{(' ' + html.escape(value)) if value else ''}</code>"])
            if a.__class__.__name__ == "_AppendAction":
                inv += " <small>(repeatable)</small>"
        else:
            shown = a.metavar or a.dest
            if a.nargs == "...":
                shown += " …"
            inv = f"<code>{html.escape(shown)}</code> <small>(positional{', optional' if a.nargs in ('?', '*', '...') else ''})</small>"
        help_text = fmt._expand_help(a) if a.help else ""
        rows.append(f"<tr><td>{inv}</td><td>{html.escape(help_text)}</td></tr>")
    return ("<table>\n<thead><tr><th>option</th><th>what it does</th></tr></thead>\n<tbody>\n"
            + "\n".join(rows) + "\n</tbody>\n</table>\n")


def _default_text(value: Any) -> str:
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{getattr(value, '__module__', '') or ''}.{value.__qualname__}".lstrip(".")
    return repr(value)


def signature_block(name: str) -> str:
    """``perfmagic.NAME(...)`` with one parameter per line, as a Python code block."""
    import perfmagic

    obj = getattr(perfmagic, name)
    sig = inspect.signature(obj)
    parts: list[str] = []
    star = False
    for p in sig.parameters.values():
        if p.kind is p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        text = ("*" if p.kind is p.VAR_POSITIONAL else "**" if p.kind is p.VAR_KEYWORD else "") + p.name
        star = star or p.kind is p.VAR_POSITIONAL
        ann = p.annotation
        if ann is not p.empty:
            text += ": " + (ann if isinstance(ann, str) else inspect.formatannotation(ann))
        if p.default is not p.empty:
            text += (" = " if ann is not p.empty else "=") + _default_text(p.default)
        parts.append(text)
    ret = sig.return_annotation
    tail = "" if ret is sig.empty else " -> " + (ret if isinstance(ret, str) else inspect.formatannotation(ret))
    one = f"perfmagic.{name}({', '.join(parts)}){tail}"
    body = one if len(one) <= 100 else f"perfmagic.{name}(\n" + "".join(f"    {x},\n" for x in parts) + f"){tail}"
    return f"```python\n{body}\n```\n"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    def replace(m: re.Match[str]) -> str:
        kind, name = m.group(1), m.group(2)
        try:
            if kind == "options":
                if name not in _magic_names():
                    raise KeyError(f"no magic {name!r} (known: {', '.join(_magic_names())})")
                return options_table(name)
            return signature_block(name)
        except Exception as exc:  # a broken reference must fail a strict build, not vanish
            log.warning(f"{page.file.src_uri}: cannot render <!-- perfmagic:{kind} {name} -->: "
                        f"{type(exc).__name__}: {exc}")
            return f"*({kind} of {name} unavailable: {html.escape(str(exc))})*"

    return _MARKER.sub(replace, markdown)


# ---- offline ---------------------------------------------------------------------------------------

# nbconvert's page template adds these two loaders to every notebook page (base/mathjax.html.j2 and
# lab/mermaidjs.html.j2). Only they are removed: anything else that loads from the network (a notebook
# output, say) is left for on_post_build to report.
_MATHJAX = re.compile(r"<!-- Load mathjax -->\s*<script src=\"[^\"]*\">\s*</script>\s*<!-- MathJax configuration -->"
                      r"\s*<script type=\"text/x-mathjax-config\">.*?</script>\s*<!-- End of mathjax configuration -->",
                      re.S)
_MERMAID = re.compile(r"<script type=\"module\">\s*document\.addEventListener\(\"DOMContentLoaded\", async \(\) => \{"
                      r"\s*const diagrams = document\.querySelectorAll\(\"\.jp-Mermaid > pre\.mermaid\"\);.*?</script>",
                      re.S)


def on_post_page(output: str, page: Any, config: Any) -> str:
    if page.file.src_uri.endswith(".ipynb"):
        output = _MERMAID.sub("", _MATHJAX.sub("", output, count=1), count=1)
    return output


def on_post_build(config: Any) -> None:
    findings = check_site_offline.check_site(config.site_dir)
    for f in findings:
        log.warning(f"the site must work offline, but {f}")
