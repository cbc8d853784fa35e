"""The layering and the result protocol: every result renders the same way, and heavy or front-end
libraries stay in their layer."""

from __future__ import annotations

import ast
import base64
import json
import time
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "perfmagic"


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def test_import_boundaries() -> None:
    """matplotlib and ipywidgets only under render/, IPython only under magics/ (the engines run from
    a plain script), and render/ imports no analysis module."""
    bad = []
    analysis = ("core", "timing", "roofs", "scaling", "ranks", "estimation", "dataloader", "profile", "storage")
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        top = rel.parts[0] if len(rel.parts) > 1 else ""
        mods = _imports(path)
        for lib in ("matplotlib", "ipywidgets"):
            if lib in mods and top != "render":
                bad.append(f"{rel} imports {lib}")
        if "IPython" in mods and top != "magics":
            bad.append(f"{rel} imports IPython")
        if top == "render":
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.level >= 2 and (node.module or "").split(".")[0] in analysis:
                    bad.append(f"{rel} imports the analysis module {node.module}")
    assert not bad, "\n".join(bad)


# ---- the protocol, on a result of every class ---------------------------------------------------


def _results(roofs):  # noqa: ANN001
    import perfmagic

    ns = {"time": time}
    b = perfmagic.bench("time.sleep(0.001)", globals=ns, budget=0.2, label="nap")
    yield b
    yield perfmagic.bench_pair("time.sleep(0.001)", "time.sleep(0.0012)", globals=ns, budget=0.3)
    yield perfmagic.roofline("time.sleep(0.001)", globals=ns, flops=1e6, bytes=8e6, budget=0.2, ceilings=roofs)
    yield roofs
    yield perfmagic.amdahl("time.sleep(0.004 / workers)", [1, 2], globals=ns, budget=0.1, rounds=1)
    yield perfmagic.scalability([1, 2, 4, 8], [1, 1.9, 3.4, 5.5], boot=0)
    yield perfmagic.estimate("time.sleep(n * 1e-7)", n=100_000, globals=ns)
    yield perfmagic.memory("keep = bytearray(8 * 2**20)", globals={})
    yield perfmagic.lineprof("f(2000)", [_spin], globals={"f": _spin})
    yield perfmagic.flame("f(200_000)", globals={"f": _spin}, sampler="inprocess")
    from perfmagic.profile.where import PairSampler, attribute

    watch = PairSampler()
    perfmagic.bench_pair("f(2000)", "f(4000)", globals={"f": _spin}, budget=0.5, watch=watch)
    yield attribute(watch)
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader, TensorDataset

    loader = DataLoader(TensorDataset(torch.randn(32, 4)), batch_size=8)
    yield perfmagic.dataloader_check(loader, lambda batch: time.sleep(0.001), steps=8)


def _spin(n: int) -> int:
    s = 0
    for i in range(n):
        s += i
    return s


def test_every_result_class_follows_the_protocol(roofs) -> None:
    from perfmagic.result import Result

    seen = set()
    for r in _results(roofs):
        name = type(r).__name__
        seen.add(name)
        assert isinstance(r, Result), f"{name} lacks part of the protocol"
        assert type(r).primary_metric, name
        m = r.metrics()
        assert isinstance(m, dict) and (r.primary_metric in m or name == "Ceilings"), (name, r.primary_metric)
        assert isinstance(r.samples(), dict), name
        json.dumps(r.to_dict(), default=str)  # plain data
        text = r.text()
        head = r.headline()
        assert head and "\n" not in head and len(text.splitlines()[0]) <= 200, name
        assert repr(r).startswith(f"<{name}") and "\n" not in repr(r), name
        bundle = r._repr_mimebundle_()
        assert bundle["text/plain"].strip(), name
        htm = bundle["text/html"]
        assert "<script src" not in htm and "http://" not in htm and "https://" not in htm, name
        assert "widget-view" not in json.dumps(list(bundle)), name
        if "image/png" in bundle:
            assert base64.b64decode(bundle["image/png"])[:4] == b"\x89PNG", name
            assert "data:image/png;base64," in htm, name
    assert {"BenchResult", "PairResult", "RooflineResult", "Ceilings", "AmdahlResult", "EstimateResult",
            "MemoryResult", "LineProfResult", "FlameResult", "DataLoaderResult", "WhereResult"} <= seen


def test_live_view_is_opt_in_and_says_it_is_live() -> None:
    pytest.importorskip("ipywidgets")
    import perfmagic

    r = perfmagic.bench("x = 1", budget=0.1)
    assert "application/vnd.jupyter.widget-view+json" not in r._repr_mimebundle_()
    view = r.widget()
    assert "needs a running kernel" in view.children[0].value


# ---- -o / -q -------------------------------------------------------------------------------------


def test_output_and_quiet_flags(shell, capsys) -> None:
    capsys.readouterr()
    res = shell.run("%%gpubench -o -q -b 0.1\nx = 1\n")
    assert res.error_in_exec is None and shell.bundles == []  # shows nothing...
    assert "median" not in capsys.readouterr().out  # ...not even as Out[n]...
    assert type(res.result).__name__ == "BenchResult"  # ...and returns the result (Out[n], _)
    assert shell.ip.user_ns["_"] is res.result
    res = shell.run("%%gpubench -q -b 0.1\nx = 1\n")
    assert res.result is None and shell.bundles == [] and "median" not in capsys.readouterr().out
    res = shell.run("%%gpubench -o -b 0.1\nx = 1\n")
    assert type(res.result).__name__ == "BenchResult" and shell.bundles == []
    assert "median" in capsys.readouterr().out  # shown once, as Out[n]
    res = shell.run("1 + 1")
    assert res.result == 2 and "2" in capsys.readouterr().out  # the display hook is itself again


# ---- progress bars end cleanly --------------------------------------------------------------------


@pytest.mark.parametrize("outcome", ["ok", "error", "interrupt"])
def test_progress_bar_is_emptied_after_success_error_and_ctrl_c(shell, monkeypatch, outcome) -> None:
    from perfmagic.magics import _progress

    monkeypatch.setattr(_progress, "_in_kernel", lambda: True)
    body = {"ok": "time.sleep(0.002)",
            "error": "if workers == 2:\n    raise ValueError('boom')\ntime.sleep(0.002)",
            "interrupt": "if workers == 2:\n    raise KeyboardInterrupt\ntime.sleep(0.002)"}[outcome]
    shell.run("import time")
    shell.run(f"%%amdahl workers=1,2 -b 0.1 --rounds 1 --no-plot\n{body}\n")
    bars = [o for o in shell.pub.outputs if "<progress" in (o["data"].get("text/html") or "")]
    assert bars, "no progress bar was shown"
    ids = {(o.get("transient") or {}).get("display_id") for o in bars}
    assert None not in ids
    for did in ids:
        last = [o for o in shell.pub.outputs if (o.get("transient") or {}).get("display_id") == did][-1]
        assert last["data"] == {"text/plain": ""}, (outcome, last["data"])


def test_text_progress_bar_starts_no_monitor_thread() -> None:
    """tqdm's monitor thread would outlive the bar and show up in every later %%flame (seen in CI)."""
    import subprocess
    import sys

    code = ("import threading\nfrom perfmagic.magics._progress import progress_bar\n"
            "update, close = progress_bar(10, 'x')\nupdate(3, 'm')\nclose()\n"
            "print(sorted(t.name for t in threading.enumerate()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['MainThread']", out.stdout


def test_results_keep_their_public_methods_after_the_words_moved_to_render() -> None:
    """Moving the sentences into render/ (issue 31) kept every public method a result had: the notebooks
    and users call ``r.verdict()``, ``r.summary_line()``... (they now forward to the renderer)."""
    from perfmagic.profile.flameresult import FlameResult
    from perfmagic.profile.lineprof import LineProfResult
    from perfmagic.profile.memresult import MemoryResult
    from perfmagic.roofs.roofline import RooflineResult
    from perfmagic.timing.history import RunComparison
    from perfmagic.timing.results import BenchResult

    kept = {FlameResult: ("verdict", "sampler_line", "figure_alt"), LineProfResult: ("verdict", "figure_alt"),
            MemoryResult: ("verdict", "sites_html", "statements_html", "figure_alt"),
            RooflineResult: ("verdict",), RunComparison: ("numbers",), BenchResult: ("summary_line", "figure_alt")}
    missing = [f"{cls.__name__}.{m}" for cls, names in kept.items() for m in names if not hasattr(cls, m)]
    assert not missing, missing


def _result_classes() -> list[type]:
    """Every class of the package that displays through render/ (a subclass of ``Displayed``)."""
    import importlib
    import pkgutil

    import perfmagic
    from perfmagic.result import Displayed

    for info in pkgutil.walk_packages(perfmagic.__path__, "perfmagic."):
        if ".magics" not in info.name and not info.name.endswith("__main__"):
            importlib.import_module(info.name)
    out, todo = [], list(Displayed.__subclasses__())
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if cls.__module__.startswith("perfmagic.") and "renderer" in vars(cls):
            out.append(cls)
    return out


def test_every_result_names_a_renderer_of_the_table_and_it_resolves_to_typed_functions() -> None:
    """The result → renderer edge (issue 31): each result class's ``renderer`` is one of ``RENDERERS``,
    its module defines ``text``, ``renderer_for`` gives a typed ``Renderer``, and the table in
    render/__init__'s docstring lists exactly these pairs (so a reader sees every edge in one place)."""
    import re

    import perfmagic.render as render
    from perfmagic.render import RENDERERS, Renderer, renderer_for

    classes = _result_classes()
    assert len(classes) >= 17, [c.__name__ for c in classes]
    pairs = {(cls.__name__, cls.renderer) for cls in classes}
    table = set(re.findall(r"^(\w+)\s+``(\w+)``", render.__doc__ or "", re.M)) - {("result", "renderer")}
    assert pairs == table, (sorted(pairs - table), sorted(table - pairs))
    for cls in classes:
        r = renderer_for(cls.__new__(cls))
        assert isinstance(r, Renderer) and r.name == cls.renderer in RENDERERS and callable(r.text)
    assert {name for _, name in pairs} == set(RENDERERS)

    class Stray:
        renderer = "bench_typo"

    with pytest.raises(NotImplementedError, match=r"renderer = 'bench_typo'.*one of: advisor, bench"):
        renderer_for(Stray())
