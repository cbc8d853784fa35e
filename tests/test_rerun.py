"""The honest comparison by default: %perf compare re-measures A and B interleaved in this process,
with A's functions as they were, and says why when it cannot."""

from __future__ import annotations

import re

import pytest


def test_capture_keeps_the_functions_a_run_called_even_through_another_function() -> None:
    from perfmagic.timing.rerun import capture, check, namespace

    ns: dict = {}
    exec("def g():\n    return 'old g'\ndef f():\n    return g()\ndata = [1, 2]", ns)
    cap = capture("f(); len(data)", "", ns)
    assert set(cap.callables) == {"f", "g"} and set(cap.data) == {"data"}
    exec("def g():\n    return 'new g'", ns)  # the user redefines g after the run
    old = namespace(cap, ns)
    assert eval("f()", old) == "old g" and eval("f()", ns) == "new g"
    assert check(cap, ns) == []
    ns["data"].append(3)
    assert any("changed in place" in w for w in check(cap, ns))
    ns["data"] = [1, 2]
    assert any("another object" in w for w in check(cap, ns))
    del ns["data"]
    assert any("gone" in w for w in check(cap, ns))


def test_torch_module_changed_in_place_is_named() -> None:
    torch = pytest.importorskip("torch")
    from perfmagic.timing.rerun import capture, check

    ns = {"model": torch.nn.Conv2d(3, 4, 3), "x": torch.randn(1, 3, 8, 8)}
    cap = capture("model(x)", "", ns)
    assert "model" in cap.data and check(cap, ns) == []
    ns["model"].to(memory_format=torch.channels_last)  # in place: every parameter moves
    assert any("`model` was changed in place" in w for w in check(cap, ns))


def test_compare_re_measures_a_redefined_function_interleaved(shell, capsys) -> None:
    import perfmagic

    shell.run("import time\ndef work():\n    time.sleep(0.005)")
    shell.run("%%gpubench -l work -b 0.3 -q\nwork()\n")
    shell.run("def work():\n    time.sleep(0.006)")  # +20%, the same name
    shell.run("%%gpubench -l work -b 0.3 -q\nwork()\n")
    capsys.readouterr()
    res = shell.run("%perf compare 1 2 -b 1.5")
    assert res.error_in_exec is None, res.error_in_exec
    out = capsys.readouterr().out
    assert "re-measured A #1 and B #2 interleaved in this process" in out
    head = shell.text().splitlines()[0]
    assert head.startswith("B #4 work vs A #3 work: slower"), head
    assert sum(ln.startswith("B #") for ln in shell.text().splitlines()) == 1  # one verdict, not two
    df = perfmagic.ledger()
    assert list(df["role"].fillna("")) == ["", "", "rerun-of #1", "rerun-of #2", ""]
    assert list(df["magic"])[-1] == "where"  # where the change went, recorded beside the re-measured pair
    assert "interleaved" in shell.text()
    # the redefined function is one row (A's definition and B's): its change, not two functions
    assert re.search(r"it went to\s+work\s+\+", shell.text()), shell.text()
    # the cells read the same (work()), but A ran with the work() it called then: that is what changed
    text = shell.text()
    assert "what changed: the code (1 place)" in text and "A/A comparison" not in text, text
    assert "--- A: work" in text and "-    time.sleep(0.005)" in text and "+    time.sleep(0.006)" in text, text


def test_function_changes_name_a_redefined_function_and_nothing_else() -> None:
    from perfmagic.timing.rerun import Capture, function_changes

    ns: dict = {}
    exec("def f():\n    return 1\ndef g():\n    return 2\n", ns)
    f_old, g = ns["f"], ns["g"]
    exec("def f():\n    return 3\n", ns)
    a = Capture(code="f(); g()", setup="", callables={"f": f_old, "g": g, "len": len})
    b = Capture(code="f(); g()", setup="", callables={"f": ns["f"], "g": g, "len": len})
    (name, src_a, src_b), = function_changes(a, b)
    assert name == "f" and src_a == src_b == []
    # no source to diff (exec'd code): still one place of the code, named
    from perfmagic.timing.whatchanged import what_changed, with_functions

    w = with_functions(what_changed("f(); g()", "f(); g()", {}, {}, {}, {}), [(name, src_a, src_b)])
    assert w.code_places == 1 and w.diff == () and w.redefined == ("f",)
    assert w.summary() == "what changed: the code (1 place)"
    assert "f: redefined between the runs (no source to show the difference)" in w.text()
    exec("def g():\n    return 2\n", ns)  # redefined with the same code: not a change
    assert function_changes(a, Capture(code="", setup="", callables={"f": f_old, "g": ns["g"]})) == []


def test_compare_falls_back_and_says_why(shell, capsys) -> None:
    shell.run("data = list(range(20_000))")
    shell.run("%%gpubench -l s -b 0.2 -q\nsum(data)\n")
    shell.run("data.append(1)")  # changed in place after A
    shell.run("%%gpubench -l s -b 0.2 -q\nsum(data)\n")
    capsys.readouterr()
    res = shell.run("%perf compare 1 2")
    assert res.error_in_exec is None
    out = capsys.readouterr().out
    assert "historical comparison (recorded samples)" in out and "`data` was changed in place" in out
    assert "historical comparison" in shell.text()
    # the in-place change is named under "what changed", not "nothing changed but time"
    assert "what changed: the data A read (data)" in shell.text() and "nothing changed" not in shell.text()
    res = shell.run("%perf compare 1 2 --rerun")
    assert type(res.error_in_exec).__name__ == "UsageError" and "changed in place" in str(res.error_in_exec)
    res = shell.run("%perf compare 1 2 --rerun --historical")
    assert "exclude each other" in str(res.error_in_exec)


def test_runs_of_another_kernel_are_compared_historically(shell, capsys) -> None:
    shell.run("%%gpubench -l z -b 0.2 -q\nsum(range(100))\n")
    shell.run("%%gpubench -l z -b 0.2 -q\nsum(range(120))\n")
    shell.ip._perfmagic_state.pop("captures", None)  # as if they were measured by another kernel
    capsys.readouterr()
    shell.run("%perf compare 1 2")
    assert "measured in another kernel" in capsys.readouterr().out


def test_runs_measured_with_different_options_are_not_re_measured_as_a_pair(shell, capsys) -> None:
    shell.run("%%gpubench -l g -b 0.2 -q\nsum(range(100))\n")
    shell.run("%%gpubench -l g -b 0.2 -q --gc\nsum(range(100))\n")
    capsys.readouterr()
    shell.run("%perf compare 1 2")
    out = capsys.readouterr().out
    assert "different options (gc)" in out and "historical comparison" in out


@pytest.mark.slow
def test_re_measured_verdict_holds_beside_a_busy_neighbour(shell) -> None:
    """The same planted +20% (5 -> 6 ms of sleep), judged while one process spins on a core."""
    from perfmagic.core.neighbours import busy_neighbours

    shell.run("import time\ndef work():\n    time.sleep(0.005)")
    shell.run("%%gpubench -l work -b 0.3 -q\nwork()\n")
    shell.run("def work():\n    time.sleep(0.006)")
    shell.run("%%gpubench -l work -b 0.3 -q\nwork()\n")
    with busy_neighbours(1) as nb:
        res = shell.run("%perf compare 1 2 -b 1.5")
    assert nb.others_cores is not None and nb.others_cores > 0.5
    assert res.error_in_exec is None, res.error_in_exec
    assert shell.text().splitlines()[0].startswith("B #4 work vs A #3 work: slower")


# ---- stateful cells: a training step is judged by what its cost depends on ------------------------------

TRAIN_STEP = "opt.zero_grad()\nloss = F.cross_entropy(model(x), y)\nloss.backward()\nopt.step()\n"


def _train_ns(torch, optimizer: str = "sgd") -> dict:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                torch.nn.Dropout(0.2), torch.nn.Flatten(), torch.nn.Linear(8 * 6 * 6, 5))
    opt = (torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9) if optimizer == "sgd"
           else torch.optim.Adam(model.parameters(), lr=1e-2))
    ns = {"model": model, "opt": opt, "F": torch.nn.functional,
          "x": torch.randn(16, 3, 8, 8), "y": torch.randint(0, 5, (16,))}
    exec(TRAIN_STEP, dict(ns))  # measured once: the optimizer's state exists, as after a %%gpubench
    return ns


def _weights(ns: dict) -> dict:
    return {k: v.clone() for k, v in ns["model"].state_dict().items()}


def _same(a, b) -> bool:
    """Bit-identical nested state (tensors by torch.equal, dtype included)."""
    import torch

    if torch.is_tensor(a):
        return torch.is_tensor(b) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(_same(x, z) for x, z in zip(a, b))
    return a == b


def test_a_train_step_is_not_a_change_of_what_it_read() -> None:
    torch = pytest.importorskip("torch")
    from perfmagic.timing.rerun import capture, check

    ns = _train_ns(torch)
    cap = capture(TRAIN_STEP, "", ns)
    assert {"model", "opt", "x", "y"} <= set(cap.data) and "F" in cap.callables
    before, versions = _weights(ns), [p._version for p in ns["model"].parameters()]
    for _ in range(5):
        exec(TRAIN_STEP, dict(ns))
    # the planted truth: every weight and its version counter moved, yet the cost did not
    assert all(not torch.equal(before[k], v) for k, v in ns["model"].state_dict().items() if k.endswith("weight"))
    assert all(p._version != v for p, v in zip(ns["model"].parameters(), versions))
    assert check(cap, ns) == []


@pytest.mark.parametrize("change, words", [
    ("model.to(memory_format=torch.channels_last)", "strides"),
    ("model.half()", "dtype"),
    ("model[0].requires_grad_(False)", "requires_grad"),
    ("model.to('meta')", "device"),
    ("model.append(torch.nn.Softmax(dim=1))", "layers"),
    ("model.eval()", "training/eval mode"),
    ("opt.param_groups[0]['momentum'] = 0.0", "its momentum changed"),  # no momentum buffer: less work
    ("opt.add_param_group({'params': [torch.nn.Parameter(torch.ones(3))]})", "parameter groups"),
    ("x.resize_(8, 3, 8, 8)", "shape"),
])
def test_what_the_cost_depends_on_is_still_a_change(change: str, words: str) -> None:
    torch = pytest.importorskip("torch")
    from perfmagic.timing.rerun import capture, check

    ns = _train_ns(torch)
    cap = capture(TRAIN_STEP, "", ns)
    exec(change, {"torch": torch, **ns})
    moved = check(cap, ns)
    assert len(moved) == 1 and moved[0].startswith("`") and "was changed in place since" in moved[0], moved
    assert words in moved[0], moved


def test_values_that_may_matter_are_named() -> None:
    torch = pytest.importorskip("torch")
    from perfmagic.timing.rerun import capture, values_may_matter

    dense = torch.randn(6, 6)
    ns = {"dense": dense, "sp": dense.relu().to_sparse(), "mask": dense[0] > 0,
          "batch": {"ids": dense, "pad": dense > 1}}
    notes = values_may_matter(capture("dense @ dense", "", ns))
    assert notes == []  # a dense float tensor: its values change nothing of the work
    notes = values_may_matter(capture("sp @ dense; dense[mask]; batch", "", ns))
    assert any(n.startswith("`sp` is a sparse tensor (sparse_coo): its cost depends on its values (nnz")
               for n in notes), notes
    assert any(n.startswith("`mask` is a bool tensor") for n in notes), notes
    assert any(n.startswith("`batch['ids']`") for n in notes) is False
    assert any(n.startswith("`batch['pad']` is a bool tensor") for n in notes), notes
    notes = values_may_matter(capture("dense.nonzero()", "", ns))
    assert any("calls `nonzero`" in n for n in notes), notes


@pytest.mark.parametrize("ending", ["normal", "exception", "ctrl-c"])
def test_preserved_puts_weights_and_optimizer_state_back_bit_identically(ending: str) -> None:
    torch = pytest.importorskip("torch")
    import copy
    import random

    from perfmagic.timing.rerun import capture
    from perfmagic.timing.snapshot import preserved

    ns = _train_ns(torch, "adam")
    ns["sched"] = torch.optim.lr_scheduler.StepLR(ns["opt"], step_size=3, gamma=0.5)
    code = TRAIN_STEP + "sched.step()\n"
    cap = capture(code, "", ns)
    weights, opt_state = _weights(ns), copy.deepcopy(ns["opt"].state_dict())
    sched_state = copy.deepcopy(ns["sched"].state_dict())
    grads = [p.grad.clone() for p in ns["model"].parameters()]
    rng, py_rng = torch.get_rng_state(), random.getstate()
    raised = {"normal": None, "exception": ValueError, "ctrl-c": KeyboardInterrupt}[ending]
    try:
        with preserved(cap, ns) as snap:
            for _ in range(10):
                exec(code, dict(ns))
            # the planted truth: the re-run did train the model (else this test could not fail)
            assert not _same(weights, _weights(ns)) and not _same(opt_state, ns["opt"].state_dict())
            assert ns["opt"].param_groups[0]["lr"] != opt_state["param_groups"][0]["lr"]
            if raised is not None:
                raise raised("in the middle of the re-measurement")
    except (ValueError, KeyboardInterrupt) as exc:
        assert raised is not None and isinstance(exc, raised)  # the user's exception, unchanged
    assert _same(weights, _weights(ns))
    assert _same(opt_state, ns["opt"].state_dict()) and _same(sched_state, ns["sched"].state_dict())
    assert all(torch.equal(g, p.grad) for g, p in zip(grads, ns["model"].parameters()))
    assert torch.equal(rng, torch.get_rng_state()) and py_rng == random.getstate()
    # the optimizer still updates the model's own parameters (identity kept, not copies)
    assert ns["opt"].param_groups[0]["params"][0] is ns["model"][0].weight
    # the size: the model's weights, buffers and gradients, Adam's two moments (+ its step), the batch
    params = sum(p.numel() * 4 for p in ns["model"].parameters())
    buffers = sum(b.numel() * b.element_size() for b in ns["model"].buffers())
    steps = sum(s["step"].numel() * 4 for s in ns["opt"].state.values())
    batch = ns["x"].numel() * 4 + ns["y"].numel() * 8
    assert snap.nbytes == 2 * params + buffers + 2 * params + steps + batch
    assert set(snap.names) == {"model", "opt", "sched", "x", "y"}


def test_preserved_undoes_a_change_of_structure_too() -> None:
    torch = pytest.importorskip("torch")
    from perfmagic.timing.rerun import capture, check
    from perfmagic.timing.snapshot import preserved

    ns = _train_ns(torch)
    cap = capture(TRAIN_STEP, "", ns)
    weights, first = _weights(ns), ns["model"][0].weight
    with preserved(cap, ns):
        ns["model"].half().append(torch.nn.Tanh())
        ns["model"][5].weight = torch.nn.Parameter(torch.zeros(5, 288))
        ns["model"].to(memory_format=torch.channels_last)
        ns["opt"].param_groups[0]["momentum"] = 0.0
        assert len(check(cap, ns)) == 2
    assert check(cap, ns) == [] and len(ns["model"]) == 6 and ns["model"][0].weight is first
    assert _same(weights, _weights(ns)) and ns["model"][0].weight.is_contiguous()


def test_preserved_restores_a_notebook_object_and_its_containers() -> None:
    torch = pytest.importorskip("torch")
    from perfmagic.timing.rerun import capture
    from perfmagic.timing.snapshot import preserved

    ns = _train_ns(torch)
    ns_run: dict = {"__name__": "__main__"}  # as in a notebook
    exec("class Trainer:\n    def __init__(self, model, opt):\n"
         "        self.model, self.opt, self.steps, self.losses = model, opt, 0, []\n", ns_run)
    ns["trainer"] = ns_run["Trainer"](ns["model"], ns["opt"])
    ns["history"] = {"loss": []}
    code = ("opt.zero_grad(); loss = F.cross_entropy(trainer.model(x), y); loss.backward(); trainer.opt.step()\n"
            "trainer.steps += 1; trainer.losses.append(loss.item()); history['loss'].append(loss.item())")
    cap = capture(code, "", ns)
    weights = _weights(ns)
    with preserved(cap, ns):
        for _ in range(3):
            exec(code, dict(ns))
        assert ns["trainer"].steps == 3 and len(ns["history"]["loss"]) == 3
    assert ns["trainer"].steps == 0 and ns["trainer"].losses == [] and ns["history"] == {"loss": []}
    assert _same(weights, _weights(ns))


def test_what_cannot_be_restored_is_refused_by_name_with_the_fix(tmp_path) -> None:
    import threading

    from perfmagic.errors import PerfmagicError
    from perfmagic.timing.rerun import capture
    from perfmagic.timing.snapshot import SnapshotError, preserved

    f = open(tmp_path / "log.txt", "w")  # noqa: SIM115 - the cell writes to it
    ns = {"rows": iter(range(100)), "log": f, "lock": threading.Lock(), "n": 3, "data": [1, 2]}
    cap = capture("next(rows); log.write('x'); lock; n; data.append(1)", "", ns)
    with pytest.raises(SnapshotError) as err:
        preserved(cap, ns)
    f.close()
    msg = str(err.value)
    assert isinstance(err.value, PerfmagicError) and set(err.value.names) == {"rows", "log", "lock"}
    assert "`rows` (range_iterator) is an iterator: a re-run advances it and it cannot be rewound" in msg
    assert "`log` (TextIOWrapper) is an open file" in msg and "`lock` (lock)" in msg
    assert msg.endswith("re-run with `--rerun` to re-measure anyway (their state will keep changing), or "
                        "`--historical` to compare the recorded samples")
    assert "`n`" not in msg and "`data`" not in msg  # a number needs no snapshot; a list has one
    with preserved(cap, ns, skip=err.value.names) as snap:  # --rerun: the rest is still protected
        ns["data"].append(1)
    assert ns["data"] == [1, 2] and set(snap.skipped) == {"rows", "log", "lock"}


def test_a_snapshot_larger_than_its_limit_is_refused() -> None:
    torch = pytest.importorskip("torch")
    from perfmagic.timing.rerun import capture
    from perfmagic.timing.snapshot import SnapshotError, preserved

    ns = _train_ns(torch)
    cap = capture(TRAIN_STEP, "", ns)
    size = preserved(cap, ns).nbytes
    with pytest.raises(SnapshotError) as err:
        preserved(cap, ns, limit_bytes=size - 1)
    assert err.value.nbytes == size and set(err.value.names) == {"model", "opt", "x", "y"}
    assert "snapshot, more than the" in str(err.value) and "`--rerun`" in str(err.value)


def test_compare_re_measures_a_train_step(shell, capsys) -> None:
    """The issue's case: a train step mutates its weights on every call; it is re-measured, not refused."""
    pytest.importorskip("torch")
    shell.run("import torch\nimport torch.nn.functional as F\ntorch.manual_seed(0)\n"
              "model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))\n"
              "opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)\n"
              "x, y = torch.randn(64, 32), torch.randint(0, 4, (64,))")
    shell.run("%%gpubench -l step -b 0.3 -q\n" + TRAIN_STEP)
    shell.run("%%gpubench -l step -b 0.3 -q\nopt.zero_grad(set_to_none=True)\n" + TRAIN_STEP.split("\n", 1)[1])
    capsys.readouterr()
    res = shell.run("%perf compare 1 2 -b 1")
    assert res.error_in_exec is None, res.error_in_exec
    out = capsys.readouterr().out
    assert "re-measured A #1 and B #2 interleaved in this process" in out and "changed in place" not in out


def test_a_learning_rate_annealed_to_zero_is_no_change() -> None:
    torch = pytest.importorskip("torch")
    from perfmagic.timing.rerun import capture, check

    ns = _train_ns(torch)
    ns["sched"] = torch.optim.lr_scheduler.CosineAnnealingLR(ns["opt"], T_max=4, eta_min=0.0)
    code = TRAIN_STEP + "sched.step()\n"
    cap = capture(code, "", ns)
    for _ in range(4):
        exec(code, dict(ns))
    assert ns["opt"].param_groups[0]["lr"] == 0.0  # the planted truth: it reached zero
    assert check(cap, ns) == []


def test_numpy_weights_updated_in_place_are_judged_and_restored() -> None:
    np = pytest.importorskip("numpy")
    from perfmagic.timing.rerun import capture, check
    from perfmagic.timing.snapshot import preserved

    rng = np.random.default_rng(0)
    ns = {"W": rng.standard_normal((64, 32)), "X": rng.standard_normal((128, 64)), "sizes": np.array([8, 16]),
          "np": np}
    code = "G = X.T @ (X @ W) / len(X)\nW -= 0.01 * G\nk = int(sizes[0])"
    cap = capture(code, "", ns)
    before = ns["W"].copy()
    with preserved(cap, ns) as snap:
        for _ in range(5):
            exec(code, dict(ns))
        assert not np.array_equal(before, ns["W"])  # planted: the re-run did change the weights
        assert check(cap, ns) == []  # values only: no change of cost
    assert np.array_equal(before, ns["W"]) and snap.nbytes == ns["W"].nbytes + ns["X"].nbytes + 16
    ns["sizes"][0] = 9  # a small integer array may be a size: its values count
    ns["X"] = np.asfortranarray(ns["X"])
    assert {m.split("`")[1] for m in check(cap, ns)} == {"sizes", "X"}


def test_a_data_loader_and_its_dataset_are_read_not_copied() -> None:
    torch = pytest.importorskip("torch")
    from perfmagic.timing.rerun import capture, check
    from perfmagic.timing.snapshot import preserved

    big = torch.randn(1000, 64)
    ns = {"loader": torch.utils.data.DataLoader(torch.utils.data.TensorDataset(big), batch_size=100, shuffle=True)}
    cap = capture("for (b,) in loader:\n    b.sum()", "", ns)
    with preserved(cap, ns) as snap:
        first = next(iter(ns["loader"]))[0]
    assert snap.nbytes == 0 and snap.names == ()  # nothing of it is copied
    assert torch.equal(first, next(iter(ns["loader"]))[0])  # the shuffle's generator was put back
    assert check(cap, ns) == []


def test_a_refused_object_inside_a_container_is_named_by_its_path() -> None:
    from perfmagic.timing.rerun import capture
    from perfmagic.timing.snapshot import SnapshotError, preserved

    ns = {"batch": {"rows": iter([1, 2]), "n": [3]}}
    cap = capture("next(batch['rows'])", "", ns)
    with pytest.raises(SnapshotError) as err:
        preserved(cap, ns)
    assert err.value.names == ["batch"] and list(err.value.reasons) == ["batch['rows']"]
    assert "`batch['rows']` (list_iterator) is an iterator" in str(err.value)


def test_ctrl_c_during_the_restore_waits_until_everything_is_back(monkeypatch) -> None:
    import os
    import signal

    from perfmagic.timing import rerun, snapshot

    ns = {"a": [1], "b": [2]}
    cap = rerun.capture("a.append(0); b.append(0)", "", ns)
    real, calls = snapshot._refill, []

    def refill_then_ctrl_c(obj, saved):
        calls.append(obj)
        if len(calls) == 1:
            os.kill(os.getpid(), signal.SIGINT)  # the user presses Ctrl-C while the first is put back
        real(obj, saved)

    monkeypatch.setattr(snapshot, "_refill", refill_then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        with snapshot.preserved(cap, ns):
            ns["a"].append(0)
            ns["b"].append(0)
    assert len(calls) == 2 and ns == {"a": [1], "b": [2]}  # both put back, then the interrupt
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
