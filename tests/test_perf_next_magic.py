"""%perf next and %perf target through a real InteractiveShell: what the user sees, and the errors."""

from __future__ import annotations

import re
from typing import Any

import pytest


def _usage(shell: Any, line: str, capsys: Any) -> str:
    res = shell.run(line)
    assert not res.success
    err = capsys.readouterr()
    text = err.err + err.out
    assert "Traceback" not in text, text
    return text


def test_perf_next_on_an_empty_ledger_says_measure_first(shell: Any) -> None:
    res = shell.run("%perf next")
    assert res.success, res.error_in_exec
    out = shell.text()
    assert out.startswith("next: measure first") and "%%gpubench -l NAME --baseline" in out
    html = shell.bundles[-1]["text/html"]
    assert "<script" not in html and "measure first" in html


def test_perf_next_after_real_runs_proposes_and_checks_a_prediction(shell: Any) -> None:
    shell.run("import time\ndef slow():\n    time.sleep(0.002)\ndef fast():\n    time.sleep(0.001)\n"
              "class Loader:  # stands for a DataLoader: %perf next checks that the timed code reads one\n"
              "    dataset, batch_size = None, 1\n"
              "    def __iter__(self):\n        return iter(range(2))\n"
              "loader = Loader()")
    shell.run("%%gpubench -l io -b 0.5 --no-memory --no-plot --baseline\nfor _ in loader: slow()")
    shell.run("%perf next")
    assert shell.text() == "next: no evidence about 'io' yet: profile it first with %%flame -l io"
    # planted evidence of an input-bound loop on the same notebook (as %%dataloader_check records it)
    from perfmagic.storage.session import current_ledger

    led = current_ledger(shell.ip.user_ns)
    d = led.record(magic="dataloader_check", label="slow()", code="slow()", options={"loader": "loader"},
                   metrics={"data_wait_fraction": 0.6, "verdict": "input-bound", "num_workers": 0, "cores": 2},
                   samples={}, env={}).id
    res = shell.run("%perf next -o")
    r = res.result
    assert r.kind == "experiment" and r.level == "I/O" and r.high == pytest.approx(2.5)
    assert d in r.evidence and r.prediction_id is not None
    shell.run("%perf next")
    out = shell.text()
    assert out.startswith("next: load batches in DataLoader workers")
    assert f"input-bound, 60% wait (dataloader_check #{d}): at most 2.5× with infinitely fast data" in out
    assert "predictions: no prediction tested yet (1 waiting for a comparison)" in out
    assert max(len(x) for x in out.splitlines()) <= 100
    shell.run("%%gpubench -l io -b 0.5 --no-memory --no-plot --vs baseline\nfor _ in loader: fast()")  # ~2x
    shell.run("%perf next")
    out = shell.text()
    assert "predictions: 1 of 1 prediction within range" in out, out
    # planted 2 × 2 ms against 2 × 1 ms of sleep: each sleep overshoots by 0.05-0.2 ms on this VM, so the
    # true ratio is 1.83-1.95 (fc39 measured 1.8×)
    assert re.search(r"measured (1\.[89]|2\.[01])×", out), out


def test_perf_target_sets_checks_and_stops(shell: Any, capsys: Any) -> None:
    shell.run("import time")
    shell.run("%%gpubench -l nap -b 0.5 --no-memory --no-plot\ntime.sleep(0.002)")
    capsys.readouterr()
    assert shell.run("%perf target 50ms").success
    assert "target of 'nap' is 50 ms per call" in capsys.readouterr().out
    shell.run("%perf target")
    assert "every label" not in capsys.readouterr().out
    shell.run("%perf next")
    out = shell.text()
    assert out.startswith("already fast enough: stop on 'nap'") and "target: 50 ms per call" in out
    shell.run("%perf next --target 1ms")   # an explicit target wins: 2 ms is not fast enough
    assert "target 1 ms not met: 2.0× to go" in shell.text() or "not met" in shell.text()


def test_bad_input_is_a_one_line_usage_error(shell: Any, capsys: Any) -> None:
    shell.run("import time")
    shell.run("%%gpubench -l nap -b 0.3 --no-memory --no-plot\ntime.sleep(0.001)")
    capsys.readouterr()
    text = _usage(shell, "%perf target abc", capsys)
    assert "'abc' is not a positive time per call" in text and "%perf target 50ms" in text
    text = _usage(shell, "%perf target nolabel 5ms", capsys)
    assert "label 'nolabel' has no runs" in text and "'nap'" in text
    text = _usage(shell, "%perf next --target soon", capsys)
    assert "%perf next --target: 'soon' is not a positive time" in text
    text = _usage(shell, "%perf next nolabel", capsys)
    assert "%perf next: label 'nolabel' has no runs" in text and "'nap'" in text
    text = _usage(shell, "%perf compare 1 1", capsys)  # a run against itself: refused, nothing re-measured
    assert "A and B are the same run" in text and "%perf compare BASELINE CHANGE" in text
    from perfmagic.storage.session import current_ledger

    assert len(current_ledger(shell.ip.user_ns).rows()) == 1


def test_times_down_to_nanoseconds_are_accepted(shell: Any, capsys: Any) -> None:
    from perfmagic.render.units import parse_duration

    assert parse_duration("1ns") == 1e-9 and parse_duration("500 ns") == pytest.approx(5e-7)
    assert parse_duration("3µs") == parse_duration("3us") == pytest.approx(3e-6)
    with pytest.raises(ValueError):
        parse_duration("1n")
    shell.run("import time")
    shell.run("%%gpubench -l nap -b 0.3 --no-memory --no-plot\ntime.sleep(0.001)")
    capsys.readouterr()
    assert shell.run("%perf target nap 500ns").success
    assert "500 ns" in capsys.readouterr().out
    assert shell.run("%perf next --target 1ns").success
    assert "not met" in shell.text()


def test_a_corrupt_row_is_named_with_the_fix(shell: Any, capsys: Any) -> None:
    from perfmagic.storage.session import current_ledger

    led = current_ledger(shell.ip.user_ns)
    bad = led.record(magic="amdahl", label="w", code="w()", options={"threads": ["x"]}, metrics={"S": 0.1},
                     samples={}, env={}).id
    text = _usage(shell, "%perf next", capsys)
    assert f"run #{bad} (amdahl) cannot be read" in text and f"%perf forget {bad}" in text


def test_perf_target_without_runs_says_what_to_do(shell: Any, capsys: Any) -> None:
    text = _usage(shell, "%perf target 50ms", capsys)
    assert "no timed run yet" in text and "%perf target NAME 50ms" in text


TORCH_CELLS = """
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(64, 256)

def train_step():
    opt.zero_grad()
    loss = model(x).square().mean()
    loss.backward()
    opt.step()

def infer():
    with torch.no_grad():
        return model(x)
"""


def test_perf_next_on_inference_ignores_a_train_step_flame(shell: Any) -> None:
    """Issue 27: after a flame of a train step, `%perf next` on an inference cell (torch.no_grad())
    proposes nothing from it (inference never calls backward) and lists it as not about this code;
    on the train step it reads the flame, through the call set the kernel captured."""
    assert shell.run(TORCH_CELLS).success
    assert shell.run("%%gpubench -l train -b 0.3 --no-memory --no-plot\ntrain_step()").success
    res = shell.run("%%flame -l train-loop --no-plot\nfor i in range(200):\n    train_step()")
    assert res.success, shell.text()
    assert shell.run("%%gpubench -l infer -b 0.3 --no-memory --no-plot\ninfer()").success
    from perfmagic.storage.session import current_ledger

    fl = current_ledger(shell.ip.user_ns).rows(magic="flame")[0]["id"]
    r = shell.run("%perf next -o").result   # the default label: the newest timed run's, 'infer'
    shell.run("%perf next")
    out = shell.text()
    assert r.label == "infer" and "backward" not in out.splitlines()[0], out
    assert out.splitlines()[0] == "next: no evidence about 'infer' yet: profile it first with %%flame -l infer"
    assert "not about this code (not used):" in out and f"#{fl} flame 'train-loop': it ran `train_step`, which " \
        "'infer' does not call" in out, out
    assert max(len(x) for x in out.splitlines()) <= 100
    r = shell.run("%perf next train -o").result
    shell.run("%perf next train")
    print(out + "\n---\n" + shell.text())
    assert fl in r.evidence and r.kind in ("experiment", "measure"), shell.text()
    assert (fl, "flame", "train-loop") not in {x[:3] for x in r.not_about}
