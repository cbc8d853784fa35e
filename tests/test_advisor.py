"""perfmagic.next_step(): the next experiment from planted ledgers (rows written through the Ledger API
with the metrics each magic records), and from real runs where a planted fix is applied afterwards
and its measured gain must fall inside the proposed range."""

from __future__ import annotations

import json

import math
from typing import Any

import pytest

from perfmagic.advisor import AdvisorError, NextStep, next_step
from perfmagic.advisor.next import wilson_high
from perfmagic.storage.ledger import Ledger


@pytest.fixture
def led(tmp_path: Any) -> Ledger:
    return Ledger(tmp_path / ".perfmagic", notebook="nb.ipynb")


def timed(led: Ledger, label: str, median_s: float, *, spread: float = 0.01, n: int = 20, code: str | None = None,
          **options: Any) -> int:
    """A %%gpubench row: ``n`` samples around ``median_s`` (±spread, deterministic)."""
    raw = [median_s * (1 + spread * ((i * 7) % 11 - 5) / 5) for i in range(n)]
    s = sorted(raw)
    metrics = {"median_s": s[n // 2], "ci_low_s": s[n // 2 - 3], "ci_high_s": s[n // 2 + 3], "min_s": s[0],
               "n_samples": n, "number": 1}
    return led.record(magic="gpubench", label=label, code=code or f"run_{label}()", options={"label": label, **options},
                      metrics=metrics, samples={"raw": raw, "number": 1}, env={}, primary_metric="median_s").id


def loader_row(led: Ledger, wait: float, compute_s: float = 0.003, workers: int = 0,
               label: str = "step(batch)", best: int | None = None) -> int:
    step = compute_s / (1 - wait)
    m = {"data_wait_fraction": wait, "verdict": "input-bound" if wait >= 0.3 else "compute-bound",
         "step_s": step, "wait_s": step * wait, "compute_s": compute_s, "compute_only_step_s": compute_s,
         "speedup_if_data_free": step / compute_s, "num_workers": workers, "batch_size": 32, "cores": 2,
         "best_num_workers": best}
    return led.record(magic="dataloader_check", label=label, code="step(batch)",
                      options={"loader": "loader", "steps": 8}, metrics=m, samples={}, env={},
                      primary_metric="data_wait_fraction").id


def flame_row(led: Ledger, name: str, share: float, n: int = 300, label: str = "loop") -> int:
    m = {"top_self_fraction": share, "n_samples": n, "sampled_s": n / 100, "top1_self_name": name,
         "top1_self_fraction": share, "top2_self_name": "rest (In [2]:9)", "top2_self_fraction": 1 - share}
    return led.record(magic="flame", label=label, code="loop()", options={"rate": None}, metrics=m,
                      samples={}, env={}, primary_metric="top_self_fraction").id


def roof_row(led: Ledger, fraction: float, dtype: str = "float32") -> int:
    m = {"median_s": 0.01, "fraction_of_roof": fraction, "bound": "compute", "dtype": dtype,
         "peak_flops_per_s": 2.5e11, "flops_per_s": 2.5e11 * fraction}
    return led.record(magic="roofline", label="mm", code="a @ b", options={"label": "mm"}, metrics=m, samples={},
                      env={}, primary_metric="median_s").id


def amdahl_row(led: Ledger, s: float, counts: tuple[int, ...] = (1, 2, 4)) -> int:
    m = {"S": s, "best_model": "amdahl", "recommended_workers": 2, "n_points": len(counts),
         "max_speedup": 1 / (s + (1 - s) / max(counts))}
    return led.record(magic="amdahl", label="work", code="work(N)", options={"threads": list(counts)}, metrics=m,
                      samples={}, env={}, primary_metric="S").id


# -- planted ledgers ------------------------------------------------------------------------------


def test_empty_ledger_asks_to_measure_first(led: Ledger) -> None:
    r = next_step(led)
    assert isinstance(r, NextStep) and r.kind == "measure"
    assert r.text().startswith("next: measure first") and "%%gpubench" in r.command
    assert r.record == () and led.predictions() == []


def test_a_timing_alone_asks_to_profile_first(led: Ledger) -> None:
    timed(led, "loop", 0.02)
    r = next_step(led)
    assert r.kind == "measure" and r.command == "%%flame -l loop", r.text()
    assert r.text() == "next: no evidence about 'loop' yet: profile it first with %%flame -l loop"
    assert r.evidence == () and led.predictions() == []


def test_input_bound_loop_proposes_the_loader_first_with_the_bound(led: Ledger) -> None:
    a = timed(led, "epoch", 0.012)
    f = flame_row(led, "forward (/w/model.py:30)", 0.6, label="epoch")   # hot too: the wait comes first
    d = loader_row(led, wait=0.75, label="epoch")
    r = next_step(led)
    assert r.kind == "experiment" and r.level == "I/O", r.text()
    assert "num_workers" in r.action and r.label == "epoch"
    assert r.low == 1.0 and r.high == pytest.approx(4.0, rel=1e-6)
    assert f"input-bound, 75% wait (dataloader_check #{d}): at most 4.0× with infinitely fast data" in r.basis
    assert "nothing guarantees" in r.low_why
    assert "--sweep num_workers" in r.command and "--vs baseline" in r.command
    assert set(r.evidence) == {a, d}
    # the hot function stays a candidate, capped by the wait: a faster step gains at most 1/0.75
    alt = [c for c in r.alternatives if c.level == "algorithm"]
    assert alt and alt[0].high == pytest.approx(1 / 0.75) and f in alt[0].evidence
    assert max(len(x) for x in r.text().splitlines()) <= 100


def test_a_loader_check_does_not_bound_timed_code_that_reads_no_loader(led: Ledger) -> None:
    class Loader:
        dataset, batch_size = None, 32

    timed(led, "step", 0.003)   # its code: run_step()
    d = loader_row(led, wait=0.8, label="step")
    r = next_step(led, namespace={"run_step": print, "loader": Loader()})
    assert r.kind == "measure" and r.command == "%%flame -l step", r.text()
    assert any(f"dataloader_check #{d} measured a loop over a DataLoader; 'step'" in x for x in r.findings)
    led2 = Ledger(led.directory, notebook="other.ipynb")
    timed(led2, "epoch", 0.012)
    led2.record(magic="gpubench", label="epoch", code="for b in loader: step(b)", options={}, env={},
                metrics={"median_s": 0.012}, samples={"raw": [0.012] * 10, "number": 1})
    loader_row(led2, wait=0.8)
    assert next_step(led2, namespace={"loader": Loader()}).level == "I/O"


def test_evidence_older_than_a_kept_change_is_not_used(led: Ledger) -> None:
    a = timed(led, "cpu", 0.010)
    f = flame_row(led, "parse (In [3]:4)", 0.7, label="cpu")
    b = timed(led, "cpu", 0.004, interleaved_with=a)   # a change kept: 2.5x faster
    r = next_step(led)
    assert r.kind == "measure" and r.command == "%%flame -l cpu"
    assert any(f"flame #{f} predates the change kept in run #{b}" in x for x in r.findings), r.findings


def test_a_hot_library_function_sets_no_upper_bound(led: Ledger) -> None:
    import torch.autograd.graph  # noqa: F401 - the module the short name resolves to

    timed(led, "step", 0.01)
    flame_row(led, "_engine_run_backward (graph.py:979)", 0.56, n=55, label="step")
    r = next_step(led)
    assert r.level == "vectorization" and r.high is None and "vectorize the code that calls it" in r.action
    assert "sets no upper bound" in r.basis


def test_not_input_bound_says_the_loader_is_not_the_lever(led: Ledger) -> None:
    timed(led, "epoch", 0.012)
    d = loader_row(led, wait=0.05, label="epoch")
    r = next_step(led)
    assert r.kind == "measure" and "%%flame" in r.command
    assert any(f"not input-bound: 5% of each step waits for data (dataloader_check #{d})" in x for x in r.findings)


def test_hot_pure_python_function_proposes_that_function(led: Ledger) -> None:
    timed(led, "cpu", 0.01)
    f = flame_row(led, "parse (In [3]:4)", 0.71, n=300, label="cpu")
    r = next_step(led)
    assert r.kind == "experiment" and r.level == "algorithm", r.text()
    assert "`parse`" in r.action and "vectorize" in r.action
    assert r.basis.startswith(f"71% of self time in `parse` (flame #{f}, 300 samples, 66%–76% at 95%): at most ")
    # the bound uses the top of the share's 95% interval: never below 1/(1-0.71) = 3.4
    assert r.high == pytest.approx(1 / (1 - wilson_high(0.71, 300))) and r.high > 1 / (1 - 0.71)
    assert "--vs baseline" in r.command


def test_fifteen_of_fifteen_samples_is_hot(led: Ledger) -> None:
    """The user's case: one function held 15 of 15 samples of a 0.12 s cell. Its share is above 80%
    at 95%: enough to propose the change, not "measure first"."""
    timed(led, "cpu", 0.12)
    f = led.record(magic="flame", label="cpu", code="run_cpu()", options={"rate": None}, samples={}, env={},
                   metrics={"n_samples": 15, "sampled_s": 0.12, "wall_s": 0.12, "rate_hz": 125.0,
                            "top1_self_name": "parse (In [3]:4)", "top1_self_fraction": 1.0},
                   primary_metric="top_self_fraction").id
    r = next_step(led)
    assert r.kind == "experiment" and r.level == "algorithm" and "`parse`" in r.action, r.text()
    assert f"100% of self time in `parse` (flame #{f}, 15 samples, 80%–100% at 95%)" in r.basis
    assert "measure first" not in r.text() and "--rate" not in r.text()


def test_a_share_whose_interval_reaches_below_the_bar_asks_for_the_samples_that_tell(led: Ledger) -> None:
    timed(led, "cpu", 0.05)
    led.record(magic="flame", label="cpu", code="run_cpu()", options={"rate": None}, samples={}, env={},
               metrics={"n_samples": 8, "sampled_s": 0.08, "wall_s": 0.08, "rate_hz": 100.0,
                        "top1_self_name": "parse (In [3]:4)", "top1_self_fraction": 0.25},
               primary_metric="top_self_fraction")
    r = next_step(led)
    assert r.kind == "measure" and r.action.startswith("measure first: %%flame -l cpu"), r.text()
    assert any(x.startswith("cannot tell yet: `parse` has 25% of 8 samples") and "9.1% that a 10% gain" in x
               for x in r.findings), r.findings
    from perfmagic.advisor.evidence import samples_to_tell, wilson_low

    need = samples_to_tell(0.25, 0.1 / 1.1)
    assert need is not None and wilson_low(0.25, need) >= 0.1 / 1.1 > wilson_low(0.25, need - 1)
    assert f"≥ {need} samples" in r.text() and max(len(x) for x in r.text().splitlines()) <= 100


TRAIN = "opt.zero_grad()\nloss = model(x).sum()\nloss.backward()\nopt.step()"
BACKWARD_STACKS = {"stack": ["cell (In [4]);backward (_tensor.py:521);_engine_run_backward (graph.py:979)",
                             "cell (In [4]);_wrapped_call_impl (module.py:1739);forward (linear.py:125)",
                             "cell (In [4]);step (optimizer.py:485)"],
                   "seconds": [0.56, 0.3, 0.14]}


def _train_and_inference(led: Ledger) -> tuple[int, int]:
    """The user's ledger: a flame of a train step, a roofline of another model, then two inference
    cells under torch.no_grad()."""
    import torch.autograd.graph  # noqa: F401 - the module the short name resolves to

    timed(led, "train-step", 0.2, code=TRAIN)
    fl = led.record(magic="flame", label="train-step", code=TRAIN, options={}, samples=BACKWARD_STACKS, env={},
                    metrics={"n_samples": 100, "sampled_s": 1.0, "wall_s": 1.0, "rate_hz": 100.0,
                             "top1_self_name": "_engine_run_backward (graph.py:979)", "top1_self_fraction": 0.56},
                    primary_metric="top_self_fraction").id
    ro = led.record(magic="roofline", label="gpt2-forward", code="gpt(tokens)", options={}, samples={}, env={},
                    metrics={"fraction_of_roof": 0.2, "bound": "compute", "dtype": "float32"},
                    primary_metric="median_s").id
    timed(led, "resnet-inference", 0.05, code="with torch.no_grad():\n    model(x)")
    timed(led, "gpt2-inference", 0.04, code="with torch.no_grad():\n    gpt(tokens)")
    return fl, ro


@pytest.mark.parametrize("label", ["resnet-inference", "gpt2-inference", None])
def test_inference_cells_get_no_advice_from_a_train_step_flame(led: Ledger, label: str | None) -> None:
    fl, ro = _train_and_inference(led)
    r = next_step(led, label=label)
    shown = r.label
    assert shown == (label or "gpt2-inference")
    t = r.text()
    assert "backward" not in r.action and "_engine_run_backward" not in t.splitlines()[0], t
    assert r.kind == "measure" and "%%flame -l " + shown in r.command, t
    if shown == "resnet-inference":   # nothing in the ledger is about it: one line names the fix
        assert t.splitlines()[0] == (f"next: no evidence about '{shown}' yet: profile it first with %%flame -l "
                                     f"{shown}"), t
    else:   # the roofline of gpt(tokens) is about it, and says nothing to change: profile it
        assert t.startswith(f"next: profile first: %%flame -l {shown} (where the time goes)"), t
        assert any(f"(roofline #{ro})" in x for x in r.findings)
    ids = {x[0]: x for x in r.not_about}
    assert fl in ids and "`backward`" in ids[fl][3] and f"which '{shown}' does not call" in ids[fl][3]
    if shown == "resnet-inference":
        assert ro in ids and ids[ro][3] == "it ran `gpt`, which 'resnet-inference' does not call"
    else:  # the same model's roofline (gpt(tokens)) is about gpt2-inference: it calls `gpt`
        assert ro not in ids
    assert "  not about this code (not used):" in t and f"#{fl} flame 'train-step': it ran" in t
    html = r._repr_mimebundle_()["text/html"]
    assert "not about this code" in html and "train-step" in html and "<script" not in html
    assert max(len(x) for x in t.splitlines()) <= 100
    assert not led.predictions()
    # the train step itself is advised on from its own flame
    r = next_step(led, label="train-step")
    assert r.kind == "experiment" and "_engine_run_backward" in r.action and fl in r.evidence, r.text()
    assert ro in {x[0] for x in r.not_about}


def test_a_flame_of_a_loop_is_read_under_the_function_the_label_calls(led: Ledger) -> None:
    """A flame of ``for b in loader: train_step(b)`` also profiled the loader: only the samples under
    ``train_step`` are about 'step' (``train_step(batch)``), and the hot function is read from them."""
    timed(led, "step", 0.01, code="train_step(batch)")
    fl = led.record(magic="flame", label="epoch", code="for b in loader:\n    train_step(b)", options={}, env={},
                    samples={"stack": ["cell (In [5]);__next__ (dataloader.py:631);decode (In [2]:7)",
                                       "cell (In [5]);train_step (In [3]:2);parse (In [3]:9)",
                                       "cell (In [5]);train_step (In [3]:2)"],
                             "seconds": [6.0, 3.0, 1.0]},
                    metrics={"n_samples": 1000, "sampled_s": 10.0, "wall_s": 10.0, "rate_hz": 100.0,
                             "top1_self_name": "decode (In [2]:7)", "top1_self_fraction": 0.6},
                    primary_metric="top_self_fraction").id
    r = next_step(led)
    assert r.kind == "experiment" and "`parse`" in r.action and "decode" not in r.action, r.text()
    assert fl in r.evidence and "within `train_step`, which 'step' calls (40% of the profile)" in r.basis
    assert r.basis.startswith("75% of self time in `parse` within `train_step`")


def test_matmul_near_the_roof_proposes_precision_or_less_work_not_threads(led: Ledger) -> None:
    timed(led, "mm", 0.01)
    ro = roof_row(led, 0.93)
    r = next_step(led)
    assert r.kind == "experiment" and r.level == "compute", r.text()
    assert "less work" in r.action and "lower precision" in r.action and "not more threads" in r.action
    assert f"at 93% of the float32 roof (roofline #{ro}): only less work or lower precision can help" in r.basis
    assert r.high is None and "no upper bound" in r.text()   # lower precision raises the roof
    assert all("workers" not in c.action for c in r.alternatives)


def test_serial_fraction_half_says_not_more_workers(led: Ledger) -> None:
    timed(led, "work", 0.01)
    am = amdahl_row(led, 0.5)
    r = next_step(led)
    assert r.kind == "experiment" and r.level == "concurrency", r.text()
    assert r.action.startswith("not more workers")
    assert f"serial fraction 0.50 (amdahl #{am}): at most 2.0× on any number of workers" in r.basis
    assert r.high == pytest.approx(1 + 0.5 * 4 / 0.5)   # removing the serial part at 4 workers


def test_target_met_says_stop_and_a_straddling_interval_cannot_tell(led: Ledger) -> None:
    a = timed(led, "loop", 0.040, spread=0.02)
    loader_row(led, wait=0.75, label="loop")
    r = next_step(led, target="50ms")
    assert r.kind == "stop" and r.action == "already fast enough: stop" and r.evidence == (a,)
    led.set_target("loop", 0.050)
    assert next_step(led).kind == "stop"
    r = next_step(led, target=0.0401)   # the median meets it, the interval does not
    assert r.kind == "inconclusive" and "cannot tell" in r.action and "-b 10" in r.command
    r = next_step(led, target="20ms")
    assert r.kind == "experiment" and any("target 20 ms not met: 2.0× to go" in x for x in r.findings), r.findings
    # the findings are data (a kind and its numbers), worded by render/, and survive the result's encoding
    from perfmagic.findings import Finding
    from perfmagic.record import decode, encode

    miss = next(f for f in r.findings if "not met" in f)
    assert isinstance(miss, Finding) and miss.kind == "advisor.next.target-not-met", miss
    assert miss["target"] == pytest.approx(0.020) and miss["to_go"] == pytest.approx(2.0, rel=0.05)
    back = decode(type(r), json.loads(json.dumps(encode(r))))
    assert back.findings == r.findings and [str(f) for f in back.findings] == [str(f) for f in r.findings]
    assert r.to_dict()["findings"] == [str(f) for f in r.findings]  # the dictionary view holds the words


def test_predictions_are_recorded_once_then_checked_by_the_next_comparison(led: Ledger) -> None:
    a = timed(led, "epoch", 0.012)
    loader_row(led, wait=0.75, label="epoch")
    r1 = next_step(led)
    r2 = next_step(led)
    assert r1.prediction_id is not None and r1.prediction_id == r2.prediction_id
    assert len(led.predictions()) == 1 and "waiting for a comparison" in r2.record_line()
    b = timed(led, "epoch", 0.006, interleaved_with=a)    # the change: 2x faster, inside 1.0-4.0x
    r3 = next_step(led)
    (p,) = r3.record
    assert p.checked and p.within is True and (p.run_a, p.run_b) == (a, b)
    assert p.measured == pytest.approx(2.0, rel=0.02)
    assert r3.record_line() == "1 of 1 prediction within range"
    assert led.predictions()[0]["measured"] == pytest.approx(p.measured)
    # the loader's evidence is spent: it describes the loop before the change
    assert r3.kind == "measure" and any("used by a checked prediction" in x for x in r3.findings)


def test_a_gain_beyond_the_range_is_a_miss(led: Ledger) -> None:
    timed(led, "cpu", 0.010)
    flame_row(led, "parse (In [3]:4)", 0.5, n=400, label="cpu")   # at most ~2.2x
    r = next_step(led)
    assert r.high is not None and r.high < 2.5
    timed(led, "cpu", 0.001)   # a later run of the label, 10x faster: outside the range whatever the noise
    r2 = next_step(led)
    (p,) = r2.record
    assert p.within is False and p.measured == pytest.approx(10, rel=0.05)
    assert r2.record_line() == "0 of 1 prediction within range" and "MISSED" in r2.text()


def test_unknown_label_and_bad_target_and_corrupt_rows_are_clear_errors(led: Ledger) -> None:
    timed(led, "loop", 0.01)
    with pytest.raises(AdvisorError, match=r"label 'nope' has no runs.*'loop'"):
        next_step(led, label="nope")
    with pytest.raises(AdvisorError, match=r"target: got 'abc'; expected a time per call"):
        next_step(led, target="abc")
    bad = led.record(magic="amdahl", label="loop", code="w()", options={"threads": "abc"}, metrics={"S": 0.1},
                     samples={}, env={}).id
    with pytest.raises(AdvisorError, match=rf"run #{bad} \(amdahl\) cannot be read.*%perf forget {bad}"):
        next_step(led)
    led.forget(bad)
    bad = led.record(magic="flame", label="w", code="w()", options=[1, 2], metrics={}, samples={}, env={}).id
    with pytest.raises(AdvisorError, match=rf"run #{bad} .*unreadable.*%perf forget {bad}"):
        next_step(led)


def test_an_old_ledger_without_the_advisor_tables_stays_readable(led: Ledger) -> None:
    import sqlite3

    timed(led, "loop", 0.01)
    con = sqlite3.connect(led.path)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    con.close()
    assert "predictions" not in tables and "targets" not in tables
    assert led.predictions() == [] and led.target("loop") is None
    led.set_target(None, 0.5)           # the notebook's default target
    assert led.target("loop") == 0.5 and led.rows()[0]["label"] == "loop"
    assert Ledger(led.directory, notebook="nb.ipynb").target("other") == 0.5


def test_result_protocol_text_and_self_contained_html(led: Ledger) -> None:
    timed(led, "epoch", 0.012)
    loader_row(led, wait=0.75, label="epoch")
    r = next_step(led)
    b = r._repr_mimebundle_()
    assert b["text/plain"] == r.text() and "<details" in b["text/html"] and "<script" not in b["text/html"]
    assert "predictions" in b["text/html"] and "http" not in b["text/html"]
    assert r.metrics()["level"] == "I/O" and r.to_dict()["record"][0]["low"] == 1.0
    assert max(len(x) for x in r.text().splitlines()) <= 100


# -- real runs: a planted fix applied, its measured gain inside the proposed range --------------------


LOADER_CELLS = """
import time
import torch
from torch.utils.data import DataLoader

class Slow(torch.utils.data.Dataset):
    def __init__(self, delay): self.delay = delay
    def __len__(self): return 16
    def __getitem__(self, i):
        time.sleep(self.delay)
        return torch.zeros(4)

def spin(s):
    t = time.perf_counter()
    while time.perf_counter() - t < s:
        pass

def step(batch):
    spin(0.003)

loader = DataLoader(Slow(0.003), batch_size=4)     # 12 ms of loading per 3 ms step
cheap = DataLoader(Slow(0.0015), batch_size=4)     # the planted fix: loading twice as cheap
"""


def _gain_in_range(pc: Any) -> None:
    assert pc.checked, pc
    print(f"prediction #{pc.id}: predicted {pc.low:.2f}-{pc.high}, measured {pc.measured:.2f}x")
    assert pc.within is True, f"measured {pc.measured:.2f}x outside {pc.low}-{pc.high}"
    hi = math.inf if pc.high is None else pc.high
    assert pc.low * 0.9 <= pc.measured <= hi * 1.1


def test_real_input_bound_loop_then_cheaper_loading_lands_in_range(shell: Any) -> None:
    from perfmagic.storage.session import current_ledger

    shell.run(LOADER_CELLS)
    shell.run("%%gpubench -l epoch -b 2 --no-memory --no-plot --baseline\nfor b in loader: step(b)")
    shell.run("%%dataloader_check loader --steps 3 --no-plot\nstep(batch)")
    led = current_ledger(shell.ip.user_ns)
    r = next_step(led)
    assert r.kind == "experiment" and r.level == "I/O", r.text()
    assert r.high is not None and 2.5 < r.high   # 12 ms wait + 3 ms step: at most ~5x (looser under load)
    shell.run("%%gpubench -l epoch -b 2 --no-memory --no-plot --vs baseline\nfor b in cheap: step(b)")
    r2 = next_step(led)
    (pc,) = r2.checked
    _gain_in_range(pc)
    assert 1.1 < pc.measured < r.high   # (12 + 3) / (6 + 3) = 1.7x expected


HOT_CELLS = """
import numpy as np

def parse(k):                 # the planted hot pure-Python function
    s = 0
    for i in range(k):
        s += i * i
    return s

def parse_np(k):              # the planted fix: the same sum, vectorized
    a = np.arange(k, dtype=np.int64)
    return int((a * a).sum())

def rest(k):                  # the rest of the work: pure Python too, so load slows both alike
    s = 0
    for i in range(k):
        s += i
    return s

K = 60_000                    # parse ~3 times the cost of rest(K // 2): ~75% of the time in parse
assert parse(K) == parse_np(K)
"""


def test_real_hot_function_then_vectorized_lands_in_range(shell: Any) -> None:
    from perfmagic.storage.session import current_ledger

    shell.run(HOT_CELLS)
    shell.run("%%gpubench -l cpu -b 1 --no-memory --no-plot --baseline\nparse(K); rest(K // 2)")
    out = shell.run("%%flame --rate 500 --no-plot\nfor i in range(40): parse(K); rest(K // 2)")  # not `_`: IPython keeps a user-set `_`
    assert out.success, shell.text()
    led = current_ledger(shell.ip.user_ns)
    r = next_step(led)
    assert r.kind == "experiment" and r.level == "algorithm" and "`parse`" in r.action, r.text()
    shell.run("%%gpubench -l cpu -b 1 --no-memory --no-plot --vs baseline\nparse_np(K); rest(K // 2)")
    (pc,) = next_step(led).checked
    _gain_in_range(pc)
    assert pc.measured > 1.5   # parse made ~free: about 3-4x expected


SERIAL_CELLS = """
import time
from concurrent.futures import ThreadPoolExecutor

pool = ThreadPoolExecutor(4)

def work(n, serial=0.008, parallel=0.008):
    time.sleep(serial)                                   # the serial part
    list(pool.map(time.sleep, [parallel / n] * n))       # the parallel part, split over n workers
"""


def test_real_serial_fraction_half_then_smaller_serial_part_lands_in_range(shell: Any) -> None:
    from perfmagic.storage.session import current_ledger

    shell.run(SERIAL_CELLS)
    out = shell.run("%%amdahl N=1,2,4 -b 2 --no-plot\nwork(N)")
    assert out.success, shell.text()
    shell.run("%%gpubench -l work -b 1 --no-memory --no-plot --baseline\nwork(4)")
    led = current_ledger(shell.ip.user_ns)
    r = next_step(led)
    assert r.kind == "experiment" and r.action.startswith("not more workers"), r.text()
    s = led.rows(magic="amdahl")[0]["metrics"]["S"]
    assert 0.35 < s < 0.65
    shell.run("%%gpubench -l work -b 1 --no-memory --no-plot --vs baseline\nwork(4, serial=0.004)")
    (pc,) = next_step(led).checked
    _gain_in_range(pc)
    assert 1.1 < pc.measured   # (8 + 2) / (4 + 2) = 1.7x expected
    assert pc.high == pytest.approx(1 + s * 4 / (1 - s))   # the serial part removed at 4 workers


def test_evidence_about_another_timed_label_is_not_used(led: Ledger) -> None:
    """The tour's case: a roofline of `a + b` ('numpy-add', also timed) is not evidence about
    'sum-of-squares'; a roofline that shares a name with the timed code is."""
    timed(led, "numpy-add", 0.001)
    ro = led.record(magic="roofline", label="numpy-add", code="a + b", options={}, samples={}, env={},
                    metrics={"fraction_of_roof": 0.93, "bound": "compute", "dtype": "float32"},
                    primary_metric="median_s").id
    timed(led, "sum-of-squares", 0.002)
    r = next_step(led, label="sum-of-squares")
    assert r.kind == "measure" and "no evidence about 'sum-of-squares' yet" in r.action, r.text()
    assert ro not in r.evidence and (ro, "roofline", "numpy-add",
                                     "it read `a`, `b`, which 'sum-of-squares' does not read") in r.not_about
    assert f"#{ro} roofline 'numpy-add': it read `a`, `b`" in r.text()
    # the same roofline with a name in common with the timed code ("run_sum" vs "run_sum-of-squares()"): used
    led.record(magic="roofline", label="sq-roof", code="run_sum(values)", options={}, samples={}, env={},
               metrics={"fraction_of_roof": 0.93, "bound": "compute", "dtype": "float32"}, primary_metric="median_s")
    assert next_step(led, label="sum-of-squares").level == "compute"


def test_memory_bound_and_above_the_roof_are_read_as_such(led: Ledger) -> None:
    timed(led, "mm", 0.01)
    ro = led.record(magic="roofline", label="mm", code="a + b", options={}, samples={}, env={},
                    metrics={"fraction_of_roof": 0.85, "bound": "memory", "dtype": "float32"},
                    primary_metric="median_s").id
    r = next_step(led)
    assert r.level == "memory" and "move less data" in r.action, r.text()
    assert f"memory-bound at 85% of the bandwidth roof (roofline #{ro})" in r.basis and "float32 roof" not in r.basis
    # above the roof (data in cache): no bound read from it, never "at most 0.8×"
    timed(led, "add", 0.01)
    up = led.record(magic="roofline", label="add", code="a + b", options={}, samples={}, env={},
                    metrics={"fraction_of_roof": 1.3, "bound": "memory", "dtype": "float32"},
                    primary_metric="median_s").id
    r = next_step(led, label="add")
    assert r.level != "memory" and "0.8×" not in r.text(), r.text()
    assert any(f"roofline #{up}: at 130% of the bandwidth roof, above it: the data stays in cache" in f
               for f in r.findings)


def test_a_memory_bound_roofline_whose_tensors_fit_in_cache_proposes_no_data_movement(led: Ledger) -> None:
    # notebook 10: the training step counted memory-bound at 67% of the DRAM roof (tensors of a few MiB,
    # a 32 MiB cache) gave "move less data … at most 1.5× at this traffic"; the next change gave 3.9×
    timed(led, "compute", 0.01)
    ro = led.record(magic="roofline", label="compute", code="step()", options={}, samples={}, env={},
                    metrics={"fraction_of_roof": 0.67, "bound": "memory", "dtype": "float32", "fits_cache": True,
                             "footprint_bytes": 5 * 2**20}, primary_metric="median_s").id
    r = next_step(led, label="compute")
    assert r.level != "memory" and "move less data" not in (r.action or ""), r.text()
    assert any(f"not the bandwidth roof: roofline #{ro} counted the call memory-bound, but its tensors fit" in f
               for f in r.findings), r.findings


def test_the_loaders_low_end_names_what_its_sweep_did_not_measure(led: Ledger, tmp_path: Any) -> None:
    """Notebook 10: the check's sweep found 4 workers best on 2 cores (loading that waits: the cores were not
    the limit), and %perf next said the low end was 1.0× because 'workers need free cores (2 here, shared
    with the step)', which that sweep had refuted. The low end stays 1.0×, with the reason the evidence
    leaves: the sweep measured the loop alone. Without a sweep beyond the cores, the cores are the reason."""
    timed(led, "epoch", 0.17)
    loader_row(led, 0.76, best=4, label="epoch")
    r = next_step(led)
    t = " ".join(r.text().split())
    assert r.low == 1.0 and "workers need free cores" not in t, t
    assert "the sweep's best, 4 workers on 2 usable cores, shows loading that waits" in t, t
    plain = Ledger(tmp_path / "plain" / ".perfmagic", notebook="nb.ipynb")
    timed(plain, "epoch", 0.17)
    loader_row(plain, 0.76, best=2, label="epoch")
    t = " ".join(next_step(plain).text().split())
    assert "nothing guarantees a gain: workers need free cores (2 here, shared with the step)" in t, t
