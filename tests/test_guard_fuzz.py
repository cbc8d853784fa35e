"""Guard files are plain, safe Python whatever the ledger holds (issue 30).

Labels, code, setup, notebook names and a work unit come from a ledger that may be shared or edited by
hand: every one enters the generated file as a literal or as sanitised docstring/comment text. Over
1,200 random values (newlines, carriage returns, quotes, triple quotes, backslashes, NUL, unicode digits
and line separators), every generated file must compile, read back exactly the values it was given, and
have the same statement structure as a file made from harmless values: nothing else can run when pytest
collects it. A few of the nastiest are collected by a real pytest with a canary.
"""

from __future__ import annotations

import ast
import os
import pathlib
import random
import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import pytest

from perfmagic.guard.plan import Plan
from perfmagic.guard.writer import GuardError, render, write_guard

NASTY = ["\n", "\r", "\r\n", '"""', "'''", '"', "'", "\\", "\\n", "#", "\x00", "\x0b", "\x0c", "\x1c", "\x85",
         "\u2028", "\u2029", "²", "½", "①", "é", "λ", "🙂", " ", "\t", "{", "}", "%", "$", "import os",
         "open('CANARY', 'w').write('ran')", "def f():", ")", "(", "\"\"\"\nopen('CANARY','w')\n\"\"\"", "\\\n"]


def _junk(rng: random.Random, k: int = 6) -> str:
    parts = [rng.choice(NASTY) if rng.random() < 0.6 else rng.choice("abcxyz_09 ") for _ in range(rng.randint(1, k))]
    return "".join(parts)


def _code(rng: random.Random) -> str:
    """Valid, self-contained Python (no free names) carrying junk in string literals and comments."""
    lines = [f"s = {_junk(rng)!r}", f"t = len(s) + {rng.randint(0, 9)}"]
    comment = "".join(c for c in _junk(rng) if c.isprintable() and c not in "\\")
    if rng.random() < 0.5:
        lines.append(f"# {comment}")
    return "\n".join(lines)


def _row(rid: int, label: str, code: str, setup: str, notebook: str) -> dict[str, Any]:
    return {"id": rid, "magic": "gpubench", "status": "ok", "label": label, "notebook": notebook,
            "created_utc": "2026-11-26T00:00:00Z", "code": f"{code}\n", "magic_line": "-l x",
            "options": {"setup": setup}, "env": {"device": "cpu"},
            "samples": {"raw": [1e-3, 1.1e-3, 0.9e-3, 1.05e-3], "number": 1}}


def _plan(rng: random.Random | None, pair: bool) -> tuple[Plan, dict[str, str]]:
    if rng is None:  # the harmless reference
        vals = {"la": "a", "lb": "b", "ca": "s = 'a'\nt = len(s) + 1", "cb": "s = 'b'\nt = len(s) + 2",
                "sa": "", "sb": "", "nb": "nb.ipynb", "unit": "items"}
    else:
        vals = {"la": _junk(rng), "lb": _junk(rng), "ca": _code(rng), "cb": _code(rng),
                "sa": f"u = {_junk(rng)!r}", "sb": f"u = {_junk(rng)!r}", "nb": _junk(rng), "unit": _junk(rng, 3)}
        if vals["ca"] == vals["cb"]:
            vals["cb"] += "\nz = 0"
    b = _row(12, vals["lb"], vals["cb"], vals["sb"], vals["nb"])
    if not pair:
        return Plan(b=b, target_s=1e-3, target_source=f"the target of '{vals['lb']}' in the ledger"), vals
    a = _row(11, vals["la"], vals["ca"], vals["sa"], vals["nb"])
    basis = SimpleNamespace(per=f"per {vals['unit']}", unit=vals["unit"], a=1.0, b=2.0)
    comparison = SimpleNamespace(kind="re-measured", basis=basis,
                                 comparison=SimpleNamespace(ratio=0.5, sentence=f"'{vals['lb']}' 2.0x faster"))
    return Plan(b=b, a=a, comparison=comparison, target_s=2e-3, target_source="given"), vals


class _Shape(ast.NodeTransformer):
    """Blank every string constant and test name: what is left is the file's statement structure."""

    def visit_Constant(self, node: ast.Constant) -> Any:
        return ast.Constant("") if isinstance(node.value, str) else node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> Any:
        self.generic_visit(node)
        node.name = "test_" + node.name.rsplit("_", 3)[-1]
        return node


def _shape(text: str) -> str:
    return ast.dump(_Shape().visit(ast.parse(text)))


def _render(plan: Plan, tmp: pathlib.Path) -> str:
    text, _ = render(plan, tmp / "test_g.py", "tests/test_g.py", None, {}, "%perf guard 12 tests/test_g.py")
    return text


@pytest.mark.parametrize("pair", [False, True])
def test_random_ledger_values_make_files_that_compile_read_back_exactly_and_run_nothing_else(tmp_path, pair) -> None:
    rng = random.Random(20261126 + pair)
    ref = _shape(_render(_plan(None, pair)[0], tmp_path))
    n = 0
    for _ in range(600):
        plan, vals = _plan(rng, pair)
        text = _render(plan, tmp_path)  # render compiles the text: a SyntaxError fails the test here
        assert _shape(text) == ref, text
        consts = {t.targets[0].elts[i].id if isinstance(t.targets[0], ast.Tuple) else t.targets[0].id:
                  ast.literal_eval(v) for t in ast.parse(text).body if isinstance(t, ast.Assign)
                  and isinstance(t.value, (ast.Tuple, ast.Constant))
                  for i, v in enumerate(t.value.elts if isinstance(t.value, ast.Tuple) else [t.value])
                  if isinstance(v, ast.Constant)}
        assert consts["B_LABEL"] == vals["lb"] and consts["B_CODE"] == vals["cb"] and consts["B_SETUP"] == vals["sb"]
        if pair:
            assert consts["A_LABEL"] == vals["la"] and consts["A_CODE"] == vals["ca"]
        for fn in (t for t in ast.parse(text).body if isinstance(t, ast.FunctionDef)):
            assert fn.name.isascii() and fn.name.isidentifier(), fn.name
        n += 1
    assert n == 600


def test_a_label_that_tries_to_run_code_is_collected_by_pytest_without_running_it(tmp_path) -> None:
    canary = tmp_path / "CANARY"
    evil = f"x\nimport pathlib; pathlib.Path({str(canary)!r}).write_text('ran')\n#"
    evil_r = evil.replace("\n", "\r")
    for i, label in enumerate([evil, evil_r, f'"""{evil}"""', "n²_½_①"]):
        plan, _ = _plan(None, False)
        plan.b = {**plan.b, "label": label, "notebook": label}
        plan.target_source = f"the target of '{label}' in the ledger"
        path = tmp_path / f"test_evil_{i}.py"
        path.write_text(_render(plan, tmp_path), encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          str(tmp_path)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "4 tests collected" in out.stdout or "4 tests" in out.stdout, out.stdout
    assert not canary.exists(), "collecting a guard ran code from its label"


def _ledger_row(tmp_path: pathlib.Path) -> Any:
    from perfmagic.storage.ledger import Ledger

    led = Ledger(directory=tmp_path / "led", notebook="nb.ipynb")
    ref = led.record(magic="gpubench", label="n²", code="%%gpubench -l n²\nsum(range(10))\n", options={},
                     metrics={"median_s": 1e-3}, samples={"raw": [1e-3, 1.1e-3, 0.9e-3], "number": 1},
                     env={"device": "cpu"}, primary_metric="median_s")
    return led, ref.id


def test_a_read_only_folder_is_one_line_naming_the_fix(tmp_path, monkeypatch) -> None:
    led, rid = _ledger_row(tmp_path)
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    if os.geteuid() == 0:  # root writes a read-only folder anyway: the kernel's refusal, planted
        import tempfile

        def refuse(*a: Any, **k: Any) -> Any:
            raise PermissionError(13, "Permission denied")
        monkeypatch.setattr(tempfile, "mkstemp", refuse)
    try:
        with pytest.raises(GuardError, match="cannot write .*Permission denied.*give a PATH in a folder you can"):
            write_guard(rid, ro / "test_g.py", ledger=led, target=2e-3)
    finally:
        ro.chmod(0o700)
    assert list(ro.iterdir()) == []


def test_unwritable_paths_are_one_line_naming_the_fix(tmp_path) -> None:
    led, rid = _ledger_row(tmp_path)
    with pytest.raises(GuardError, match="cannot write .*give a PATH in a folder you can write to"):
        write_guard(rid, "/proc/test_guard_x.py", ledger=led, target=2e-3)
    folder = tmp_path / "x.py"
    folder.mkdir()
    with pytest.raises(GuardError, match="is a folder; give the PATH of a file"):
        write_guard(rid, folder, ledger=led, target=2e-3, force=True)
    gf = write_guard(rid, tmp_path / "test_sq.py", ledger=led, target=2e-3)  # '²' in the label: a valid file
    assert "def test_run_" in (tmp_path / "test_sq.py").read_text() and gf.run_id == rid


def test_the_temporary_file_is_never_a_planted_symlink(tmp_path) -> None:
    led, rid = _ledger_row(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    target = tmp_path / "test_s.py"
    for name in [f".{target.name}.{os.getpid()}.tmp", f".{target.name}.tmp"]:  # the old predictable names
        (tmp_path / name).symlink_to(victim)
    write_guard(rid, target, ledger=led, target=2e-3)
    assert victim.read_text() == "keep me"
    assert target.read_text().startswith('"""perfmagic regression guard')
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp") and not p.is_symlink()]
    assert leftovers == []
