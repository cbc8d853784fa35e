"""Every sentence a person reads is written in ``src/perfmagic/render/`` (issue 31: one render contract).

The engines return numbers and categories (a verdict, a bound, a kind of advice); ``render/`` turns them
into words, with the shared wording of :mod:`perfmagic.render.text`. This test reads the source with
:mod:`ast` and lists the sentences written anywhere else.

**What counts as a sentence.** A string literal, or an f-string with each ``{...}`` read as one word
``X``, whose text has at least 4 words (runs of letters) and that

* ends with ``.``, ``!`` or ``?`` (a written-out sentence), or
* has ``": "`` or ``" — "`` followed by a letter (a statement and its explanation: ``"memory-bound: ..."``), or
* has at least 6 words (a phrase long enough to be read as prose).

Adjacent literals (``"a " "b"``) and f-strings are read as the one string Python makes of them; a string
concatenated with ``+`` is judged part by part.

**What does not count** (each is another layer's text, or not shown as a report):

* docstrings (the first statement of a module, class or function);
* error messages: anything inside a ``raise`` statement, the arguments of a call to a class whose name
  ends in ``Error``, ``Exception`` or ``Interrupted``, and the methods of such a class (its message is the
  class itself: ``BadOptionError.__init__``). Errors say what is wrong and the fix where they are raised
  (STYLE.md practice 7);
* ``warnings.warn(...)`` messages, and option help: the ``help=`` and ``epilog=``/``description=``
  keyword arguments (argparse and IPython's ``@argument``);
* SQL statements and fragments, and HTML markup (text starting, after any spaces, with ``SELECT``,
  ``CREATE``, ``WHERE``, ``ORDER``, ``AND``, ``FROM``, ``LIMIT``, ``GROUP``, ... in capitals, or with ``<``);
* text that is not prose: a string with no space (or other whitespace) in it, such as an identifier
  (``aten._scaled_dot_product_flash_attention_for_cpu``) or a path (``/sys/devices/system/cpu``); a
  regular expression (it contains ``\\s``, ``\\d``, ``(?:`` or ``(?P<``, or starts with ``^``); source code
  handed to another interpreter (it has a newline and any of ``import ``, ``while ``, ``def `` or `` = ``).
  A one-line sentence with `` = `` in it, and a sentence broken over lines, still count;
* the magics' notices to the user in ``magics/``: ``print``/``say``/``notify``/``log``/``warn`` calls,
  lines starting ``"perfmagic: "`` and module-level usage strings: the front end's own voice, not a
  result's report;
* anything in ``render/`` itself.

Every offender is listed as ``path:line in function``. Sentences not yet moved are allowed per file in
:data:`ALLOWED` below; the counts may only go down: a file with more sentences than allowed fails (listing
them), so does a file with fewer (lower its count), and the total may not exceed :data:`MAX_SENTENCES`.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "perfmagic"

_WORD = re.compile(r"[A-Za-z]+(?:['’-][A-Za-z]+)*")
_EXPLAINED = re.compile(r"(?::|\s—)\s+[A-Za-z]")
_ERROR_CLASS = re.compile(r"(Error|Exception|Interrupted)$")
_NOTICE_CALLS = {"print", "say", "notify", "log", "warn", "note", "_say", "_notify", "echo"}
_HELP_KEYWORDS = {"help", "epilog", "description", "usage"}
_NOT_PROSE = re.compile(r"^\s*(<|(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|PRAGMA|DROP|WITH|CASE|CAST|COALESCE"
                        r"|WHERE|ORDER|AND|FROM|LIMIT|GROUP)\b)")
_REGEX = re.compile(r"\\[sd]|\(\?:|\(\?P<|^\^")  # \s, \d, (?:, (?P< anywhere, or ^ first
_CODE = re.compile(r"import |while |def | = ")  # with a newline: Python source run by another interpreter


def is_code(text: str) -> bool:
    """Text that is not prose: an identifier or path (no space), a regular expression, or source code
    (several lines, with Python's keywords or an assignment) handed to another interpreter."""
    if not re.search(r"\s", text) or _REGEX.search(text):
        return True
    return "\n" in text and bool(_CODE.search(text))


def is_sentence(text: str) -> bool:
    """The rule of the module docstring, on a string's text (f-string placeholders as ``X``)."""
    words = _WORD.findall(text)
    if len(words) < 4 or _NOT_PROSE.match(text) or is_code(text):
        return False
    t = text.rstrip()
    return t.endswith((".", "!", "?")) or bool(_EXPLAINED.search(t)) or len(words) >= 6


def _text_of(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "X"
                       for v in node.values)
    return None


def _call_name(call: ast.Call) -> str:
    f = call.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        return f.attr
    return ""


def sentences(source: str, *, front_end: bool = False) -> list[tuple[int, str, str]]:
    """``(line, function, text)`` of every sentence in ``source`` (``front_end``: a magics/ module, whose
    notices do not count)."""
    tree = ast.parse(source)
    skip: set[int] = set()  # ids of nodes whose strings do not count

    def skip_all(node: ast.AST) -> None:
        skip.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                skip_all(body[0])
            if isinstance(node, ast.ClassDef) and _ERROR_CLASS.search(node.name):  # its message is the class
                for item in body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        skip_all(item)
        elif isinstance(node, ast.Raise):
            skip_all(node)
        elif isinstance(node, ast.Call):
            name = _call_name(node)
            if _ERROR_CLASS.search(name) or name == "warn" and isinstance(node.func, ast.Attribute) \
                    or front_end and name in _NOTICE_CALLS:
                skip_all(node)
            for kw in node.keywords:
                if kw.arg in _HELP_KEYWORDS:
                    skip_all(kw.value)

    found: list[tuple[int, str, str]] = []

    def visit(node: ast.AST, where: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            where = f"{where}.{node.name}" if where else node.name
        if isinstance(node, ast.JoinedStr) or isinstance(node, ast.Constant):
            text = _text_of(node)
            notice = front_end and (text or "").startswith("perfmagic: ") or front_end and not where
            if text is not None and id(node) not in skip and not notice and is_sentence(text):
                found.append((node.lineno, where or "<module>", text))
            if isinstance(node, ast.JoinedStr):
                return  # its parts were read as one string
        for child in ast.iter_child_nodes(node):
            visit(child, where)

    visit(tree, "")
    return found


def offenders() -> list[tuple[str, int, str, str]]:
    """``(path, line, function, text)`` of every sentence outside ``render/``."""
    out = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("render/"):
            continue
        for line, fn, text in sentences(path.read_text(), front_end=rel.startswith("magics/")):
            out.append((rel, line, fn, text))
    return out


# ---- what is left to move (issue 31): may only shrink --------------------------------------------

#: sentences outside render/: 622 before issue 31's render contract, 585 after it, 293 after the scaling,
#: rank, data-loader, advisor and guard words moved, then less the estimate's and the rank sweep's 48
#: (render/findings_estimate.py), the roofline's and core's 79 (render/findings_roofs.py, findings_core.py),
#: the timing, profile and storage 84 (render/findings_timing.py) and the payload dictionary's 5
#: (2026-11-26), then the last 77 (core, errors.py, the magics: render/findings_core.py, neighbours.py,
#: littles.py, bench.py, bundle.py; profile: render/findings_profile.py, flame.py, memory.py; ranks, scaling
#: and storage: render/ranks.py, scalability.py, ledger.py; the identifiers, paths, regular expressions and
#: code that are not prose no longer counted). None is left: a new one fails the test.
MAX_SENTENCES = 0
#: ``path`` -> how many sentences it may still write. Empty: every sentence is written in render/. Kept so
#: that a sentence that cannot move yet is allowed by name, never silently.
ALLOWED: dict[str, int] = {}


def test_the_rule_catches_a_planted_sentence_and_spares_the_exceptions() -> None:
    src = '''
"""A module docstring: it is long enough to be a sentence, and it is not counted."""
import warnings


def engine(x, y):
    """A function docstring that reads like a sentence, which is fine."""
    if x < 0:
        raise ValueError(f"x must be positive, got {x!r}: give a number above zero")
    err = BadOptionError("x", x, "a number above zero, because the engine divides by it")
    warnings.warn("the machine was busy while measuring, the numbers may be high")
    parser.add_argument("--x", help="how many times the cell runs before it is timed")
    short = "ok"
    label = "median per call"
    planted = f"{x} is faster than {y} by a wide margin."
    return f"memory-bound: the kernel reads {x} bytes"
'''
    found = sentences(src)
    assert [(line, fn) for line, fn, _ in found] == [(15, "engine"), (16, "engine")], found
    assert found[0][2] == "X is faster than X by a wide margin."
    magic = 'def cell(self):\n    print(f"perfmagic: recorded run #{n} in the ledger, as the first of its label")\n'
    assert sentences(magic, front_end=True) == [] and len(sentences(magic)) == 1
    assert is_sentence("faster by 25% (95% CI 18%–33%): accept — the whole interval clears the 10% bar")
    assert not is_sentence("B/A = 1.23") and not is_sentence("median per call") and not is_sentence("a: b")
    # text that is not prose is spared; a real sentence of the same shape is still caught
    assert not is_sentence("aten._scaled_dot_product_flash_attention_for_cpu")  # an identifier
    assert not is_sentence("/sys/devices/system/cpu/cpu0/cache")  # a path
    assert not is_sentence(r"\s*(\d+)\s*([KMG]?)i?B?\s*") and not is_sentence(r"^Process (\d+) Thread (\d+)")
    assert not is_sentence('(?:the|a) run (?P<id>[0-9]+) was not saved')  # regular expressions
    assert not is_sentence("while os.getppid() == parent:\n    for _ in range(200_000):\n        pass\n")
    assert not is_sentence("import json, sys\nout = {'runs': []}\nprint(json.dumps(out))\n")  # code to run
    assert not is_sentence(" WHERE label IS ? AND magic IS ? AND id <= ?") and not is_sentence(
        " ORDER BY id DESC LIMIT 5") and not is_sentence("FROM runs GROUP BY label, magic, status")  # SQL
    assert is_sentence("the run was not saved: move the file aside")
    assert is_sentence("the run was not saved:\nmove the file aside")  # prose broken over lines
    assert is_sentence("the fitted speedup S = 1.2 lies beyond the ideal.")  # one line with an assignment
    assert is_sentence("Where the ledger is not writable, the run is kept in memory.")  # not SQL's WHERE
    assert is_sentence("the size did not match: give it as 32K, 1M or 2G")  # no regex in it
    errors = """
class LedgerFullError(Exception):
    def __init__(self, path):
        msg = f"the ledger {path} is full: move it aside to start a new one"
        super().__init__(msg)


class LedgerFull:
    def __init__(self, path):
        self.msg = f"the ledger {path} is full: move it aside to start a new one"
"""
    assert [(line, fn) for line, fn, _ in sentences(errors)] == [(10, "LedgerFull.__init__")]


def test_no_new_sentences_outside_render() -> None:
    found = offenders()
    per_file = Counter(path for path, _, _, _ in found)
    over = {p for p, n in per_file.items() if n > ALLOWED.get(p, 0)}
    new = [f"{path}:{line} in {fn}: {text[:70]!r}" for path, line, fn, text in found if path in over]
    assert not new, ("sentences written outside src/perfmagic/render/ beyond the allowed count (write them in a "
                     "render module, with perfmagic.render.text's wording; allowed per file: "
                     f"{ {p: ALLOWED.get(p, 0) for p in sorted(over)} }):\n" + "\n".join(new))
    fewer = {p: (per_file.get(p, 0), n) for p, n in ALLOWED.items() if per_file.get(p, 0) < n}
    assert not fewer, f"fewer sentences than allowed (found, allowed): lower ALLOWED to match: {fewer}"
    assert len(found) <= MAX_SENTENCES


def test_the_moved_reports_stay_in_render() -> None:
    """The reports moved out of their result classes (issue 31) do not come back."""
    moved = ("timing/results.py", "timing/pair.py", "timing/history.py", "timing/compare.py",
             "roofs/roofline.py", "roofs/ceilings.py", "scaling/littles.py", "profile/flameresult.py",
             "profile/memresult.py", "profile/lineprof.py", "estimation/result.py")
    back = [f"{p}:{line} in {fn}" for p, line, fn, _ in offenders()
            if p in moved and fn.split(".")[-1] in ("text", "headline", "verdict", "summary_line", "numbers")]
    assert not back, back
