"""%%lineprof and perfmagic.profile.lineprof: a planted hot line, unwrapping, cleanup, bad input, errors, Ctrl-C."""

from __future__ import annotations

import functools
import linecache
import re
import sys
import threading

import pytest

from perfmagic.errors import BadOptionError, BenchInterrupted
from perfmagic.profile.lineprof import lineprof, resolve, run_lineprof

SRC = '''\
def cheap(x):
    return x + 1

def planted(n):
    a = cheap(1)
    b = [a] * 3
    s = 0
    for i in range(n): s += i * i
    c = len(b)
    return s + c

class Model:
    def forward(self, n):
        y = planted(n)
        return y

    @staticmethod
    def helper(n):
        t = 0
        for i in range(n): t += i
        return t

    @property
    def size(self):
        return 3
'''


def _ns(filename: str = "<planted>") -> dict:
    linecache.cache[filename] = (len(SRC), None, SRC.splitlines(True), filename)
    ns: dict = {"__name__": "planted"}
    exec(compile(SRC, filename, "exec"), ns)
    return ns


@pytest.fixture(autouse=True)
def nothing_left_behind():
    yield
    assert sys.gettrace() is None and sys.getprofile() is None
    if sys.version_info >= (3, 12):
        assert all(sys.monitoring.get_tool(i) is None for i in range(6))


def test_planted_hot_line_tops_the_profile() -> None:
    ns = _ns()
    code = ns["planted"].__code__
    r = lineprof("out = planted(200_000)", [ns["planted"], ns["cheap"]], globals=ns)
    assert ns["out"] == sum(i * i for i in range(200_000)) + 3
    hot = r.hot_lines()
    assert hot[0].label == "<planted> line 8" and hot[0].function == "planted"
    assert hot[0].share > 0.9 and hot[0].hits >= 1
    f = next(p for p in r.functions if p.name == "planted")
    assert {ln.lineno for ln in f.lines} >= {5, 6, 7, 8, 9, 10}
    assert f.total_s > 0 and f.source[0].startswith("def planted")
    assert ns["planted"].__code__ is code  # the padded copy line_profiler swaps in is swapped back
    m = r.metrics()
    assert "line 8" in m["hot_line"] and m["hot_fraction"] > 0.9 and m["total_s"] == pytest.approx(f.total_s)
    text = r.text()
    assert text.startswith("lineprof: hottest line <planted> line 8 in planted()")
    assert "> " in text and "for i in range(n): s += i * i" in text
    assert "rgba(255,99,71," in r.html()


def test_lineprof_result_follows_the_result_protocol() -> None:
    from perfmagic.result import Result

    ns = _ns()
    r = lineprof("out = planted(50_000)", [ns["planted"]], globals=ns)
    assert isinstance(r, Result) and r.primary_metric == "total_s"
    assert r.metrics()[r.primary_metric] == r.total_s > 0
    assert r.samples() == r.samples_dict() and set(r.samples()) == {"0:planted:lineno", "0:planted:hits",
                                                                     "0:planted:time_s"}
    assert r.headline() == r.text().splitlines()[0] and repr(r) == f"<LineProfResult: {r.headline()}>"
    bundle = r._repr_mimebundle_()
    assert bundle["text/plain"] == r.text() and "<details" in bundle["text/html"]
    assert "rgba(255,99,71," in bundle["text/html"] and "rgba(255,99,71," in r.html_sections()[0][1]


def test_unwrapping() -> None:
    ns = _ns()
    Model = ns["Model"]

    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*a):
            return fn(*a)
        return wrapper

    assert resolve(Model().forward) == [Model.forward]
    assert resolve(Model.helper) == [Model.__dict__["helper"].__func__]
    assert resolve(Model.size) == [Model.__dict__["size"].fget]
    assert resolve(functools.partial(ns["planted"], 3)) == [ns["planted"]]
    assert resolve(deco(ns["cheap"])) == [ns["cheap"]]
    assert {f.__name__ for f in resolve(Model)} == {"forward", "helper", "size"}
    r = lineprof("Model().forward(50_000)", [Model().forward, ns["planted"]], globals=ns)
    assert [f.name for f in r.functions] == ["Model.forward", "planted"]
    assert r.hot_lines(1)[0].label == "<planted> line 14"  # inclusive time: the call to planted()


@pytest.mark.parametrize("obj, needle", [(len, "built-in"), (sum, "built-in"), (3, "not callable"),
                                         (sys, "module"), (object, "defines no Python functions"),
                                         (threading.Lock(), "not callable")])
def test_not_python_functions(obj, needle) -> None:
    with pytest.raises(BadOptionError, match=needle):
        resolve(obj)


def test_exception_and_interrupt_in_the_engine() -> None:
    ns = _ns()
    r, exc = run_lineprof("planted(1000)\nraise ValueError('boom')", [ns["planted"]], globals=ns)
    assert isinstance(exc, ValueError) and r.status == "error" and r.hot_lines()
    with pytest.raises(ValueError):
        lineprof("raise ValueError('boom')", [ns["planted"]], globals=ns)
    with pytest.raises(BenchInterrupted) as ei:
        lineprof("planted(1000)\nraise KeyboardInterrupt", [ns["planted"]], globals=ns)
    assert ei.value.result.status == "interrupted" and ei.value.result.hot_lines()
    with pytest.raises(BadOptionError):
        lineprof("1", [])


def test_an_existing_trace_function_is_restored() -> None:
    ns = _ns()
    calls = []

    def tracer(frame, event, arg):
        calls.append(event)
        return None

    sys.settrace(tracer)
    try:
        lineprof("planted(100)", [ns["planted"]], globals=ns)
        assert sys.gettrace() is tracer
    finally:
        sys.settrace(None)


# ---- through the shell ---------------------------------------------------------------------------

def test_lineprof_magic_on_a_notebook_function(shell) -> None:
    res = shell.run(SRC)
    assert res.error_in_exec is None
    num = shell.ip.execution_count - 1
    res = shell.run("%%lineprof -f planted -f Model.forward -f cheap -l lp\ny = Model().forward(200_000)\n")
    assert res.error_in_exec is None, res.error_in_exec
    (bundle,) = shell.bundles
    text, htm = bundle["text/plain"], bundle["text/html"]
    assert text.startswith(f"lineprof: hottest line In [{num}] line 14 in Model.forward()") or \
        text.startswith(f"lineprof: hottest line In [{num}] line 8 in planted()")
    assert f"planted() — In [{num}], lines 4–10" in text and "run #1" in text
    assert "rgba(255,99,71,0.9" in htm or "rgba(255,99,71,1.0" in htm  # the hot loop line, strongly shaded
    assert "<details" in htm and "application/vnd.jupyter.widget-view+json" not in bundle
    assert "y" in shell.ip.user_ns
    import perfmagic

    row = perfmagic.ledger("lineprof").iloc[-1]  # the wide view: one column per metric
    assert row["magic"] == "lineprof" and row["label"] == "lp" and row["primary_metric"] == "total_s"
    assert row["total_s"] > 0 and row["hot_fraction"] > 0.9 and f"In [{num}]" in row["hot_line"]


def test_lineprof_magic_output_option(shell) -> None:
    shell.run(SRC)
    res = shell.run("%%lineprof -f planted -o -q --top 2\nplanted(10_000)\n")
    assert res.error_in_exec is None and shell.bundles == []
    assert len(res.result.hot_lines()) == 2 and res.result.top == 2


@pytest.mark.parametrize("cell, needle", [
    ("%%lineprof\nplanted(1)\n", "at least one function"),
    ("%%lineprof -f nothere\n1\n", "name 'nothere' is not defined"),
    ("%%lineprof -f len\n1\n", "built-in"),
    ("%%lineprof -f np_sum\n1\n", "built-in"),
    ("%%lineprof -f 'Model()'\n1\n", "Model instance"),
    ("%%lineprof -f planted --top 0\n1\n", "at least 1"),
    ("%%lineprof -f planted --bogus\n1\n", "unrecognized arguments"),
    ("%%lineprof -f planted\nimport asyncio\nawait asyncio.sleep(0)\n", "top-level 'await'"),
])
def test_lineprof_magic_bad_input(shell, cell, needle) -> None:
    shell.run(SRC)
    shell.ip.user_ns["np_sum"] = sum
    res = shell.run(cell)
    assert type(res.error_in_exec).__name__ == "UsageError", res.error_in_exec
    assert needle in str(res.error_in_exec)


def test_lineprof_magic_exception_and_interrupt(shell) -> None:
    import perfmagic

    shell.run(SRC)
    res = shell.run("%%lineprof -f planted\nplanted(1000)\nraise ValueError('boom')\n")
    assert isinstance(res.error_in_exec, ValueError)
    assert "STOPPED BY AN EXCEPTION" in shell.text() and "s += i * i" in shell.text()
    shell.ip.user_ns["calls"] = {"n": 0}
    res = shell.run("%%lineprof -f planted\nfor k in range(10):\n    planted(1000)\n    calls['n'] += 1\n"
                    "    if calls['n'] == 3:\n        raise KeyboardInterrupt\n")
    assert isinstance(res.error_in_exec, KeyboardInterrupt)
    assert "INTERRUPTED" in shell.text()
    assert re.search(r"\n.\s+7\s+3\s", shell.text())  # line 7 (s = 0): hit once in each of the 3 calls
    assert list(perfmagic.ledger()["status"]) == ["failed", "interrupted"]


def test_lineprof_magic_syntax_error_is_the_users(shell) -> None:
    shell.run(SRC)
    code = shell.ip.user_ns["planted"].__code__
    res = shell.run("%%lineprof -f planted\nx = (\n")
    err = res.error_in_exec  # shown as IPython shows a plain cell's SyntaxError (tests/test_reliability.py)
    assert isinstance(getattr(err, "error", None), SyntaxError) and shell.bundles == []
    assert shell.ip.user_ns["planted"].__code__ is code


def test_lineprof_magic_help(shell) -> None:
    doc = shell.ip.find_cell_magic("lineprof").__doc__
    for opt in ("-f", "--top", "-o", "-q", "-l"):
        assert opt in doc


@pytest.mark.slow
def test_both_magics_in_a_real_kernel(tmp_path) -> None:
    """ipykernel names cells /tmp/ipykernel_PID/HASH.py: both magics must still say In [n]."""
    from tests.test_kernel import _run, _texts

    cells = _run(["%load_ext perfmagic",
                  "def hot(n):\n    s = 0\n    for i in range(n):\n        s += i * i\n    return s",
                  "%%lineprof -f hot\nhot(100_000)",
                  "%%memory\nn = len(bytearray(100 * 2**20))\nkeep = [bytearray(1000) for _ in range(2000)]",
                  "import sys, threading\n(sys.gettrace(), [t.name for t in threading.enumerate() "
                  "if t.name.startswith('perfmagic')])"], tmp_path)
    lp = _texts(cells[2])
    assert "hottest line In [2] line 4 in hot()" in lp and "hot() — In [2], lines 1–5" in lp
    assert any("rgba(255,99,71" in o.get("data", {}).get("text/html", "") for o in cells[2].outputs)
    mem = _texts(cells[3])
    assert "memory: peak +10" in mem  # the 100 MiB that lived for one line
    assert "In [4] line 1" in mem and "In [4] line 2" in mem
    data = cells[3].outputs[0].data
    assert "image/png" in data and "<img" in data["text/html"]
    # self-contained: no ipywidgets view (a saved notebook would show "model not found"); the tables
    # are folded under the report instead of in widget tabs
    assert "application/vnd.jupyter.widget-view+json" not in data
    assert "<details" in data["text/html"] and "Allocation sites" in data["text/html"]
    assert "(None, [])" in _texts(cells[4])
    assert sorted(p.name for p in tmp_path.iterdir()) == [".perfmagic"]  # nothing else left in the cwd
