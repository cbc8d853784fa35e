"""Check that a built documentation site loads nothing from the network.

    python tools/check_site_offline.py [SITE_DIR]      (default: site)

Every ``.html`` file under SITE_DIR is parsed; the check fails (exit status 1, one line per finding)
when a page would *load* something from another host when opened:

* an element that fetches by itself with an absolute URL (``http://``, ``https://`` or
  protocol-relative ``//``): ``<script src>``, ``<img src>``, ``<iframe src>``, ``<source>``,
  ``<video>``, ``<audio>``, ``<embed>``, ``<object data>``, ``<track>``, ``<input type=image>``;
* a ``<link href>`` to another host, except ``rel=canonical`` / ``alternate`` (metadata, not loaded);
* inside inline ``<script>`` and ``<style>`` text and ``style=`` attributes: a dynamic
  ``import("https://…")``, a script URL assigned to ``.src``, an ``@import`` or ``url(https://…)``;
* known trackers and font services named anywhere in the page (Google Fonts, Google Analytics /
  Tag Manager).

Plain ``<a href="https://…">`` links are fine: following a link is the reader's choice. The bundled
JavaScript of the theme is not scanned (it is shipped with the site, not fetched); the theme loads
extra libraries only for features this site does not enable (Mermaid diagrams, math).

The mkdocs hook (``tools/mkdocs_hooks.py``) runs the same check at the end of every build, so
``mkdocs build --strict`` fails on a finding; this script is the stand-alone form.
"""

from __future__ import annotations

import re
import sys
from html.parser import HTMLParser
from pathlib import Path

_EXTERNAL = re.compile(r"^\s*(?:https?:)?//", re.I)
_FETCHING = {  # tag -> attributes whose URL the browser fetches on its own
    "script": ("src",), "img": ("src", "srcset"), "iframe": ("src",), "frame": ("src",),
    "source": ("src", "srcset"), "video": ("src", "poster"), "audio": ("src",), "embed": ("src",),
    "object": ("data",), "track": ("src",), "input": ("src",),
}
_LINK_METADATA = {"canonical", "alternate", "author", "license", "me", "help", "search"}
_INLINE = [
    (re.compile(r"""\bimport\s*\(\s*["'`](?:https?:)?//""", re.I), "dynamic import from the network"),
    (re.compile(r"""\bimport\s+[^;'"`]*?from\s*["'`](?:https?:)?//""", re.I), "module import from the network"),
    (re.compile(r"""\.src\s*=\s*["'`](?:https?:)?//""", re.I), "script URL assigned to .src"),
    (re.compile(r"""@import\s+(?:url\()?\s*["']?(?:https?:)?//""", re.I), "CSS @import from the network"),
    (re.compile(r"""url\(\s*["']?(?:https?:)?//""", re.I), "CSS url() from the network"),
]
_SERVICES = re.compile(r"fonts\.googleapis\.com|fonts\.gstatic\.com|googletagmanager\.com|google-analytics\.com",
                       re.I)


class _Scanner(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.findings: list[str] = []
        self._raw: str | None = None  # the tag whose text is collected (script, style)
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k.lower(): (v or "") for k, v in attrs}
        for attr in _FETCHING.get(tag, ()):
            value = a.get(attr, "")
            urls = [u.strip().split(" ")[0] for u in value.split(",")] if attr == "srcset" else [value]
            for u in urls:
                if _EXTERNAL.match(u):
                    self.findings.append(f"<{tag} {attr}={u[:100]!r}>")
        if tag == "link" and _EXTERNAL.match(a.get("href", "")):
            rels = set(a.get("rel", "").lower().split())
            if not rels or not rels <= _LINK_METADATA:
                self.findings.append(f"<link rel={a.get('rel', '')!r} href={a['href'][:100]!r}>")
        if "style" in a:
            self._inline(a["style"], f"<{tag} style=…>")
        if tag in ("script", "style"):
            self._raw, self._text = tag, []

    def handle_data(self, data: str) -> None:
        if self._raw is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == self._raw:
            self._inline("".join(self._text), f"inline <{tag}>")
            self._raw = None

    def _inline(self, text: str, where: str) -> None:
        for rx, what in _INLINE:
            m = rx.search(text)
            if m:
                self.findings.append(f"{where}: {what}: {text[m.start():m.start() + 100]!r}")


def check_file(path: Path) -> list[str]:
    """The findings of one HTML file (empty when it loads nothing from the network)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    scanner = _Scanner()
    scanner.feed(text)
    scanner.close()
    found = scanner.findings
    for m in _SERVICES.finditer(text):
        found.append(f"names a tracking or font service: {m.group(0)!r}")
    return found


def check_site(site_dir: str | Path) -> list[str]:
    """``"relative/path.html: finding"`` for every finding under ``site_dir``."""
    root = Path(site_dir)
    out = []
    for path in sorted(root.rglob("*.html")):
        out += [f"{path.relative_to(root)}: {f}" for f in check_file(path)]
    return out


def main(argv: list[str]) -> int:
    site = Path(argv[0]) if argv else Path("site")
    if not site.is_dir():
        print(f"check_site_offline: no site at {site}/; build it first (make docs)", file=sys.stderr)
        return 2
    pages = len(list(site.rglob("*.html")))
    findings = check_site(site)
    for f in findings:
        print(f"check_site_offline: {f}", file=sys.stderr)
    if findings:
        print(f"check_site_offline: {len(findings)} network load(s) in {site}/ ({pages} pages): the site must "
              "work offline", file=sys.stderr)
        return 1
    print(f"check_site_offline: {pages} pages in {site}/ load nothing from the network")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
