"""Write notebooks/10_one_change_at_a_time.ipynb (the workshop) from the cells below, without outputs.

    .venv/bin/python tools/notebooks/make_10_one_change_at_a_time.py
    .venv/bin/python notebooks/run.py --check notebooks/10_one_change_at_a_time.ipynb

Edit the text here, not in the .ipynb: the cell metadata (the ``expect`` regexes that ``run.py
--check`` enforces, the collapsed solution cells, the ``rebuild`` tags, stable cell ids) is generated with
it. The data and the model live in notebooks/workshop_data.py.

The catch-up cell (after the set-up) re-runs, after a culled kernel, every cell tagged ``rebuild`` (the
set-up and the cells that build the data, models and loaders), read from the notebook file, and restores
the judged changes and predictions that ``judge``/``skip``/``predict`` save to ``workshop-state.json`` in
the ledger folder. A cell that later sections need and that measures nothing gets ``rebuild=True``.
"""

from __future__ import annotations

import os
from pathlib import Path

from nbformat.v4 import new_code_cell, new_markdown_cell

TARGET = (Path(os.environ.get("PERFMAGIC_NB_OUT") or Path(__file__).resolve().parents[2] / "notebooks")
          / "10_one_change_at_a_time.ipynb")

# a verdict line of a comparison, whatever the verdict (for changes whose effect is not planted huge)
# a judge cell may say "not judged" (too few samples on a busy machine), never because the comparison could not
# read its run ids (every judge of a fresh-clone run said "cannot compare int64" and nothing caught it)
JUDGED = r"\A(?![\s\S]*cannot compare)"
ANY_VERDICT = r"^B #\d+ {b} vs A #\d+ {a}: (\S+× )?(faster|slower|no real change|inconclusive)"
SKIPPED_OR_RUN = r"skipped: no CUDA device|^B #\d+ \S+ vs A #\d+ "
# judge's check of a range stated with predict() before the measurement: either outcome is an answer
PREDICTION_CHECKED = (r"^\s+prediction [\d.]+×–[\d.]+×(, measured [\d.]+× \(95% CI [\d.]+×–[\d.]+×\): "
                      r"(within range|MISSED: .+)|: not checked \(not judged\))$")

cells: list = []


def md(text: str) -> None:
    cells.append(new_markdown_cell(text.strip("\n")))


def code(text: str, expect: list[str] | None = None, solution: bool = False, rebuild: bool = False) -> None:
    meta: dict = {}
    if expect:
        meta["perfmagic"] = {"expect": expect}
    if solution:
        meta["jupyter"] = {"source_hidden": True}
        meta["tags"] = ["solution"]
    if rebuild:  # re-run by the catch-up cell after a culled kernel: cheap, measures nothing
        meta.setdefault("tags", []).append("rebuild")
    cells.append(new_code_cell(text.strip("\n"), metadata=meta))


# ------------------------------------------------------------------------------------------------
md(r"""
# Workshop: one change at a time

This notebook takes a small PyTorch training loop from slow to fast **one measured change at a time**,
the way the method asks (docs/method.md §7): measure a baseline, find the bottleneck, make *one* change,
measure again under the same conditions, keep the change only if the gain is real, and repeat.

"Real" has a precise meaning here: perfmagic compares the two runs' medians with a 95% confidence
interval of their ratio, and a change is kept only when the **whole** interval says faster by more
than 10%. Otherwise the verdict is *no real change* (the interval sits inside ±10%), *inconclusive*
(measure longer) or *slower*.

The changes, in the order the bottleneck asks for them:

| # | change | where it acts | this machine |
|---|---|---|---|
| 1 | DataLoader workers | input pipeline | any |
| 2 | pinned memory + non-blocking copies | host → GPU copies | CUDA only |
| 3 | one `bmm` instead of many small matmuls | the model's compute | any |
| 4 | preallocated buffers | allocations per step | any |
| 5 | a larger batch | per-step overhead | any |
| 6 | mixed precision (`torch.autocast`) | the model's compute | CUDA only |
| 7 | CUDA graphs | kernel-launch overhead | CUDA only |

**About the numbers.** The text of this notebook states no measured number and no verdict: every
figure, every verdict and the final table are printed by the cells, on the machine that runs them. It
is sized to run top to bottom in a few minutes on a shared 2-core CPU with no GPU and about 1 GB of
memory: a tiny model, and budgets of half a second to five seconds per measurement. On such a
machine timings are noisy. That is not a reason to skip the statistics, it is the reason for them: a
change whose gain does not clear the noise is reported as such, and not kept.

**Exercises** are marked *Exercise N*. Each has a hint, a cell for your attempt, and a solution in
the cell after it, collapsed (click the bar or the "…" to open it). The solutions run with the rest of
the notebook when you run all cells.
""")

md(r"""
## 0. Set-up

`%load_ext perfmagic` gives the magics. Every measurement lands in a ledger beside this notebook
(`.perfmagic/ledger.sqlite`): the verdicts and the summary table at the end are read back from it.
""")

code("%load_ext perfmagic", rebuild=True)

code(r"""
import copy
import json
import os

import pandas as pd
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Subset

import perfmagic
from workshop_data import CLASSES, DIM, GROUPS, GroupedNet, SlowSensorData

torch.manual_seed(0)
torch.set_num_threads(1)  # fixed for the whole notebook: one environment for every comparison
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
print(f"torch {torch.__version__} · device {device} · torch intra-op threads {torch.get_num_threads()} · "
      f"usable cores {len(os.sched_getaffinity(0))} · CUDA available: {torch.cuda.is_available()}")
""", expect=[r"^torch \S+ · device (cpu|cuda)"], rebuild=True)

md(r"""
The thread count is part of the environment, so it is set once, here, and never touched again: a
comparison is only about one change if nothing else moved (perfmagic lists what else differs between
two runs, threads included). One intra-op thread also leaves the second core of a 2-core machine to
the DataLoader workers of change 1.

### The data and the model

Both live in [`workshop_data.py`](workshop_data.py), next to this notebook:

* `SlowSensorData`: samples of raw `uint8` readings, 64 groups × 32 features, and a class label. Each
  item **sleeps** for `delay_s` before it is returned: a stand-in for reading or decoding from disk,
  which, like real I/O, keeps a process waiting without using the CPU.
* `GroupedNet`: one small 32 × 32 linear map per feature group, a ReLU, and a linear classifier. With
  `batched=False` the groups run in a Python loop, one small matmul each: that is the planted
  inefficiency of the model.

The dataset is in a module file rather than in a cell for the sake of change 1: DataLoader workers
are separate processes, and each must be able to get at the dataset class (explained there).

### The training step

One function holds the step with every option this workshop will try, so that each change below is a
one-word difference in the cell that times it: `prealloc=True` (change 4) and `amp=True` (change 6).
""")

code(r"""
MEAN, STD = 127.5, 73.6   # of uniform uint8 readings: (255/2, 255/sqrt(12))
LR = 0.05
MAX_BATCH = 128
x_buf = torch.empty(MAX_BATCH, GROUPS, DIM, device=device)  # change 4: allocated once, reused by every step


def normalise(xb, prealloc=False):
    # the raw uint8 batch as float32 on the device, centred and scaled
    if prealloc:
        x = x_buf[: len(xb)]
        x.copy_(xb, non_blocking=True)   # convert (and, on a GPU, copy) into the preallocated buffer
        return x.sub_(MEAN).div_(STD)    # in place: no new tensor
    return (xb.to(device).float() - MEAN) / STD   # three new tensors per step (.float(), -, /)


def step(model, opt, xb, yb, prealloc=False, amp=False):
    # one training step on a batch (xb, yb)
    x = normalise(xb, prealloc)
    y = yb.to(device)
    opt.zero_grad()
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):  # change 6
        loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def new_model(batched=False):
    model = GroupedNet(batched=batched).to(device)   # same seed: same initial weights every time
    return model, torch.optim.SGD(model.parameters(), lr=LR)


def make_loader(num_workers, batch_size=32, dataset=None, **kwargs):
    # a fresh DataLoader over `dataset` (default: all of `data`); workers, if any, stay alive between epochs
    return DataLoader(data if dataset is None else dataset, batch_size=batch_size, shuffle=True,
                      num_workers=num_workers, persistent_workers=num_workers > 0, **kwargs)


def train_epoch(loader, model, opt, step_fn=step, **opts):
    # one pass over `loader`, step after step: the unit the whole-loop timings use
    for xb, yb in loader:
        step_fn(model, opt, xb, yb, **opts)


def train_chunk(model, opt, batch_size=32, step_fn=step, **opts):
    # train on the 128 cached samples X, Y: the step alone, with no waiting for data
    for i in range(0, len(Y), batch_size):
        step_fn(model, opt, X[i:i + batch_size], Y[i:i + batch_size], **opts)
""", rebuild=True)

md(r"""
A few small helpers read the ledger. `last_run(label)` is the id of the newest run of a label.
`judge(change, label)` applies the rule of the method to the newest run of `label`: it compares it
with the run it was measured against (`perfmagic.compare`, the same verdict `%perf compare` prints),
keeps the change only if the verdict is *faster*, and then makes that run the new baseline of its
label, so the next change is measured against the improved code. It also records the change for the
summary table at the end. `predict(change, low, high, why)` states, *before* a change is measured,
the range of gains expected from it; `judge` then checks the measured gain against that range.
The judged changes and the predictions are also saved to a small file beside the ledger, so that the
catch-up cell below can restore them after a culled kernel.
""")

code(r"""
CHANGES = []       # every judged change: name, label, run A, run B, kept, prediction; the summary table is built from it
SKIPPED = []       # changes that need CUDA, on a machine without it
PREDICTIONS = {}   # change -> [low, high, why]: stated before the change is measured, checked by judge
STATE = perfmagic.Ledger(user_ns=get_ipython().user_ns).directory / "workshop-state.json"
_ran = perfmagic.ledger()
FIRST_RUN = int(_ran.index.max()) if len(_ran) else 0   # runs after this one are this session's


def save_state():   # what the catch-up cell restores after a culled kernel
    STATE.parent.mkdir(parents=True, exist_ok=True)
    STATE.write_text(json.dumps(dict(first_run=FIRST_RUN, changes=CHANGES, skipped=SKIPPED,
                                     predictions=PREDICTIONS)))


def skip(change, why):   # a change that needs CUDA, on a machine without it: listed in the summary, not kept
    SKIPPED.append(change)
    save_state()
    print(f"skipped: no CUDA device — {why}")
    return False


def last_run(label):
    runs = perfmagic.ledger()
    return int(runs.index[runs.label == label].max())


def predict(change, low, high, why):
    # a range of gains (A's time / B's time), stated before the change is measured; judge checks it
    PREDICTIONS[change] = [float(low), float(high), why]
    save_state()
    print(f"predicted for {change}: {low:.2f}×–{high:.2f}× — {why}")


def check_prediction(change, c):
    # within range when the measured gain's 95% interval reaches the range, MISSED when all of it lies outside
    low, high, _ = PREDICTIONS[change]
    gain, g_low, g_high = 1 / c.ratio, 1 / c.ci_high, 1 / c.ci_low
    if g_high < low:
        where = "MISSED: the whole interval is below the low end"
    elif g_low > high:
        where = "MISSED: the whole interval is above the high end"
    else:
        where = "within range"
    print(f"  prediction {low:.2f}×–{high:.2f}×, measured {gain:.2f}× (95% CI {g_low:.2f}×–{g_high:.2f}×): {where}")
    return where


def judge(change, label, a=None):
    b = last_run(label)
    if a is None:  # a same-process A/B (%%gpubench --vs): A is the run measured interleaved with B
        a = perfmagic.ledger("gpubench").loc[b, "interleaved_with"]
    entry = dict(change=change, label=label, a=int(a), b=int(b), kept=False, prediction=None)
    CHANGES.append(entry)
    try:
        rc = perfmagic.compare(a, b)
    except perfmagic.PerfmagicError as exc:  # e.g. a run with too few samples on a very busy machine
        save_state()
        print(f"{change}: not judged ({exc}) → not kept: measure again with a larger -b")
        if change in PREDICTIONS:
            low, high, _ = PREDICTIONS[change]
            print(f"  prediction {low:.2f}×–{high:.2f}×: not checked (not judged)")
        return False
    c = rc.comparison
    entry["kept"] = kept = rc.verdict == "faster"
    why = {"faster": "kept", "no real change": "not kept: the gain, if any, is inside the ±10% bar",
           "inconclusive": "not kept: the interval straddles the bar (measure longer to decide)",
           "slower": "not kept: it is slower"}[rc.verdict]
    print(f"{change}: {rc.verdict} — B/A = {c.ratio:.3f} (95% CI {c.ci_low:.3f}–{c.ci_high:.3f}, "
          f"{rc.kind}, run #{b} vs run #{a}) → {why}")
    if change in PREDICTIONS:
        entry["prediction"] = check_prediction(change, c)
    save_state()
    if kept:
        get_ipython().run_line_magic("perf", f"baseline {b}")
    return kept


save_state()   # a fresh set-up starts a fresh record (the ledger keeps every run)
""", rebuild=True)

md(r"""
### Catch-up after a culled kernel

Binder stops a kernel that has been idle for about 10 minutes. The ledger survives (it is a file beside
this notebook); the Python state does not: the data, the models, the loaders, which changes were kept.
**After a culled kernel, restart it if it is not already (Kernel → Restart Kernel), run this one cell,
then carry on at the section where you were**; do not re-run the sections in between.

The cell runs again every cell of this notebook tagged `rebuild` (the set-up above, and the cells
below that build the data, the models and the loaders: they measure nothing), read from the notebook
file; restores the judged changes and the predictions from `workshop-state.json` in the ledger folder;
and finds the baseline of the whole loop in the ledger again. `--vs baseline` and `%perf baseline RUN`
then work as before: the baselines are in the ledger, and their code finds its objects again. It takes
a few seconds. In a kernel that still has its state (as when the notebook runs from top to bottom) it
does nothing, so running it twice is harmless. On a GPU, a CUDA graph (section 9) cannot be restored:
run that section's cell again if you had got past it.
""")

code(r"""
# Catch-up after a culled kernel: run this one cell (only this one), then carry on where you were
import json
import os
from pathlib import Path

if "judge" in globals():
    print("nothing to catch up: this kernel has its state. After a culled kernel, restart it and run only this cell.")
else:
    import perfmagic

    saved_file = perfmagic.Ledger(user_ns=get_ipython().user_ns).directory / "workshop-state.json"
    saved = json.loads(saved_file.read_text()) if saved_file.is_file() else {}
    session = Path(str(globals().get("__session__") or "")).name   # the notebook open in Jupyter
    nb_file = next((p for p in (Path(session), Path("10_one_change_at_a_time.ipynb")) if p.suffix and p.is_file()), None)
    if nb_file is None:
        raise FileNotFoundError("the catch-up reads the set-up from 10_one_change_at_a_time.ipynb in the working "
                                f"directory ({os.getcwd()}): open the notebook from its own folder")
    rebuild = [c for c in json.loads(nb_file.read_text())["cells"] if "rebuild" in c["metadata"].get("tags", [])]
    for cell in rebuild:   # the set-up, the data, the models and the loaders
        if not get_ipython().run_cell("".join(cell["source"])).success:
            saved_file.write_text(json.dumps(saved))   # the set-up started a fresh record: keep the saved one
            raise RuntimeError(f"a cell tagged rebuild failed (its error is above); {nb_file} may be an older copy")
    FIRST_RUN = saved.get("first_run", FIRST_RUN)
    CHANGES[:], SKIPPED[:] = saved.get("changes", []), saved.get("skipped", [])
    PREDICTIONS.update(saved.get("predictions", {}))
    save_state()

    def was_kept(number):
        return any(ch["kept"] for ch in CHANGES if ch["change"].startswith(f"{number}. "))

    kept_workers, kept_pinned, kept_bmm, kept_prealloc, kept_batch, kept_amp = (was_kept(n) for n in range(1, 7))
    kept_graph = False   # a CUDA graph cannot be restored: on a GPU, run section 9's graph cell again
    opts_kept = dict(prealloc=True) if kept_prealloc else {}
    batch_kept = 128 if kept_batch else 32
    amp_run = next((ch["b"] for ch in CHANGES if ch["change"].startswith("6. ")), None)
    _epoch = perfmagic.ledger()
    _epoch = _epoch.index[(_epoch.label == "epoch") & (_epoch.index > FIRST_RUN)]
    if len(_epoch):
        v0_run = int(_epoch.min())   # the first run of the whole loop: the baseline section 10 goes back to
    print(f"\ncaught up: {len(rebuild)} cells re-run from {nb_file}; {len(CHANGES)} judged change(s) restored"
          + "".join(f"\n  {ch['change']}: {'kept' if ch['kept'] else 'not kept'}" for ch in CHANGES)
          + (f"\n  baseline of the whole loop: run #{v0_run}" if len(_epoch) else "")
          + "\ncarry on at the section where you were")
""", expect=[r"^(nothing to catch up|caught up)"])

# ------------------------------------------------------------------------------------------------
md(r"""
## 1. The baseline

The slow loop: batches of 32, items loaded in the main process (`num_workers=0`, the DataLoader
default), the model's groups in a Python loop, the input normalised into new tensors every step.

Each item sleeps 0.4 ms (`delay_s=0.0004`). The whole-loop timings below measure **one epoch over
the first 256 samples** per call (`train_epoch` over `EPOCH`): the same work for every version of the
loop whatever its batch size, and `--items 256` turns the time into samples per second. A whole
epoch per call also matters for fairness, as change 1 explains.
""")

code(r"""
data = SlowSensorData(n=4096, delay_s=0.0004)
EPOCH = Subset(data, range(256))        # a short epoch: the unit of the whole-loop timings
X, Y = data.cached(128)                 # 128 samples in memory, for timing the step alone (section 5)
model_v0, opt_v0 = new_model(batched=False)
epoch_v0 = make_loader(num_workers=0, dataset=EPOCH)  # the DataLoader defaults: items load in the main process
loader_v0 = make_loader(num_workers=0)                # the same settings over all the data, for the checks
loss = step(model_v0, opt_v0, *next(iter(loader_v0)))
print(f"one step runs: loss {loss.item():.3f} (chance level is ln {CLASSES} = {torch.log(torch.tensor(float(CLASSES))):.3f})")
""", expect=[r"^one step runs: loss \d"], rebuild=True)

code(r"""
%%gpubench -l epoch -b 3 --no-memory --items 256 --baseline
train_epoch(epoch_v0, model_v0, opt_v0)
""", expect=[r"median\s+\(\d+% CI", r"\[label epoch, run #\d+\]", r"is now the baseline of 'epoch'"])

md(r"""
The first line is the median time of one call (an epoch of 256 samples) with its 95% confidence
interval; below it the spread, the cold first call, the throughput from `--items`, and the figure of
every sample, warm-up included. `--no-memory` skips the extra call that measures memory: these calls
are long. The budget (`-b`, seconds) is a hard limit, so on a slow or busy machine there are fewer
samples and a wider interval, and the warnings at the end say so.
""")

code(r"""
v0_run = last_run("epoch")
print(f"baseline of the whole loop: run #{v0_run}")
""", expect=[r"^baseline of the whole loop: run #\d+"])

md(r"""
What next? `%perf next` reads this notebook's ledger and proposes **one** experiment, in the method's
order, with the evidence it rests on, the gain to expect (a range with its basis) and the command that
tests it. With only a timing in the ledger it can only say what to measure first:
""")

code(r"""
%perf next
""", expect=[r"^next: "])

# ------------------------------------------------------------------------------------------------
md(r"""
## 2. Find the bottleneck first

Before changing anything, ask where the time goes (docs/method.md §1). A training loop can only be as fast
as the slower of two things: delivering batches and computing on them. `%%dataloader_check` runs the
loop over the loader and, for every step, separates the time spent **waiting for the next batch** from
the time spent **computing** on it (the cell is one training step that uses `batch`). It then times
the loader alone and the step alone on a cached batch, audits the DataLoader's settings, and with
`--sweep` rebuilds the loader at several settings. Above 30% of the step spent waiting, the loop is
*input-bound*: then no amount of work on the model will help, and the input pipeline comes first.
""")

code(r"""
%%dataloader_check loader_v0 --steps 8 --sweep num_workers=0,2,4 --sweep-steps 6
step(model_v0, opt_v0, *batch)
""", expect=[r"^input-bound: \d+% of each step waits for data",
             r"^\s+best: (num_workers=\d|cannot tell, because other processes used)"])

md(r"""
Now the ledger has evidence, and `%perf next` turns it into a proposal: its upper bound is what
infinitely fast data would give (the share of each step spent waiting), its low end what nothing
guarantees (workers need free cores). The proposal is recorded; the next comparison of the same label
checks it. A low end of 1.0× is honest (nothing guarantees a gain), but it also means that check can
only fail if the change makes the loop *slower*; section 3 states a range that can fail both ways.
""")

code(r"""
%perf next
""", expect=[r"^next: "])

md(r"""
Read it from the top: the first line is the verdict and the share of each step spent waiting. The
*loader alone* and *compute alone* lines are the two speeds the loop is caught between: with
infinitely fast data, the step alone would set the pace. The configuration audit says which setting
to change and by how much it should help; the sweep measures it.
""")

# ------------------------------------------------------------------------------------------------
md(r"""
## 3. Change 1: DataLoader workers

With `num_workers=0` the main process fetches every item itself, in series with the step: while an
item "reads from disk", the model waits. With `num_workers=2`, two worker **processes** fetch and
collate batches in the background and hand them over through a queue, prefetching
`prefetch_factor` (by default 2) batches each; the main process only computes.
`persistent_workers=True` keeps them alive from one epoch to the next instead of starting them again.

Two workers, because the machine this workshop is sized for has two cores. The loading here is
mostly waiting (sleep, like I/O), which is why the sweep above could also try more workers than
cores; for CPU-heavy decoding, more workers than free cores only compete with the main process
(docs/method.md §2).

**Why the dataset lives in `workshop_data.py`.** Each worker is a separate Python process that needs
the dataset object. On Linux (up to Python 3.13) the default start method is `fork`: the worker is a
copy of this kernel, memory included, so even a class defined in a cell would work. With `spawn` or
`forkserver` (macOS, Windows, Python 3.14 on Linux) each worker is a fresh interpreter that receives
the dataset *pickled* and must **import its class by module name**; a class defined in a notebook
lives in `__main__`, which a fresh worker cannot import. A class in a small module next to the
notebook works with every start method; the cell below prints which one this kernel uses.
""")

code(r"""
epoch_w2 = make_loader(num_workers=2, dataset=EPOCH)
print(f"start method of the worker processes: {torch.multiprocessing.get_start_method()}; "
      f"dataset class from module {type(data).__module__!r}")
""", expect=[r"start method of the worker processes: \w+; dataset class from module 'workshop_data'"], rebuild=True)

md(r"""
The change is judged with `--vs baseline`: perfmagic re-runs the baseline's code **interleaved**
with this cell's code (A B B A …) in this process, and compares them pair by pair. Whatever the
machine does meanwhile (another process waking up, a frequency change) hits both members of a pair
and cancels in their ratio: on a shared machine this is the drift-proof verdict.

Interleaving is only fair to code that does nothing between its calls, and a loader with workers
works in the background. Here each call is **one whole epoch**: when it ends, the workers have no
index left to fetch, so during A's turn B's workers sit idle, and each of B's epochs starts by
filling its pipeline exactly as a real epoch does. Had the timed unit been "the next 8 batches of an
endless stream", B's workers would have kept fetching during A's turn, and B would have found
batches ready that a real loop would have waited for: a flattering, wrong verdict.
""")

md(r"""
**First, a prediction that can fail.** Say before measuring what the change should gain, as a range
that the measurement can miss on *either* side, derived from what the check above measured. Call `w`
the share of each step spent waiting for data:

* **high end `1/(1 − w)`**: with infinitely fast data the wait disappears and only the step is left
  (the bound `%perf next` gave);
* **low end `1/(1 − w/2)`**: two workers load two batches at once, each as fast as the main process
  did, so the wait at least halves, even if none of it overlapped the step.

`judge` checks the measured gain against it: *within range* when the gain's 95% interval reaches the
range; *MISSED* when the whole interval lies below the low end (the workers did less than that
arithmetic: no free core, start-up or hand-over costs) or above the high end (the bound, or the check
it came from, was wrong).
""")

code(r"""
wait = float(perfmagic.ledger("dataloader_check")["data_wait_fraction"].iloc[-1])   # the check of section 2
predict("1. DataLoader workers: 0 → 2", low=1 / (1 - wait / 2), high=1 / (1 - wait),
        why=f"{wait:.0%} of each step waited for data: two workers at least halve the wait, no loader removes more "
            "than all of it")
""", expect=[r"^predicted for 1\. DataLoader workers: 0 → 2: [\d.]+×–[\d.]+× — \d+% of each step waited"])

code(r"""
%%gpubench -l epoch -b 5 --no-memory --items 256 --vs baseline --no-plot
train_epoch(epoch_w2, model_v0, opt_v0)
""", expect=[r"^B #\d+ epoch vs A #\d+ epoch: ", r"same-process A/B"])

code(r"""
kept_workers = judge("1. DataLoader workers: 0 → 2", "epoch")
""", expect=[r"^1\. DataLoader workers: 0 → 2: .*(→ (kept|not kept)|not judged)", JUDGED, PREDICTION_CHECKED])

md(r"""
The comparison just made also tested `%perf next`'s proposal: it shows the measured gain beside its
predicted range (low end 1.0×), the running record of its predictions, and the next experiment.
""")

code(r"""
%perf next
""", expect=[r"\d+ of \d+ predictions? within range"])

md(r"""
`judge` prints the verdict in one line. The magic behind it is `%perf compare A B`, which compares any
two runs of the ledger (with no run numbers, the latest run against its label's baseline) and also
says what else differed between them: the code, the options, the environment.
""")

code(r"""
a1, b1 = CHANGES[-1]["a"], CHANGES[-1]["b"]
%perf compare {a1} {b1}
""", expect=[r"B #\d+ epoch vs A #\d+ epoch: ", r"what changed: the code"])

md(r"""
After a change, look again: the bottleneck may have moved. The check below runs on a fresh loader
with the same settings (`-o` returns the result, so the next cell can read its verdict).
""")

code(r"""
%%dataloader_check make_loader(num_workers=2) --steps 8 -o
step(model_v0, opt_v0, *batch)
""", expect=[r"^(input|compute)-bound: "])

code(r"""
check_w2 = _
if check_w2.input_bound:
    print("still input-bound: the loop waits for data more than 30% of each step. In a real project, more "
          "loading capacity would come first (Exercise 1 tries 4 workers); the sections below time the step "
          "alone, on cached data, where the loader plays no part")
else:
    print("compute-bound now: the step itself sets the pace, so the step is the next place to look")
""", expect=[r"^(still input-bound|compute-bound now)"])

md(r"""
### Exercise 1: more workers?

Time the loop with **4 workers** and judge the change against the current baseline of `epoch`.
Before you run it, predict the verdict from the check above.

*Hint:* build the loader with `make_loader(num_workers=4, dataset=EPOCH)` and time
`train_epoch(...)` on it with `%%gpubench -l epoch -b 5 --no-memory --items 256 --vs baseline`. If
the loop is compute-bound, the workers already deliver faster than the step consumes: what can more
of them change? (torch warns when `num_workers` exceeds the cores it counts: a fair warning for
CPU-heavy loading, less so for loading that mostly waits; the measurement decides.)
""")

code(r"""
# Exercise 1: your code here (a loader, then a %%gpubench --vs baseline cell)
""")

code(r"""
epoch_w4 = make_loader(num_workers=4, dataset=EPOCH)
""", solution=True)

code(r"""
%%gpubench -l epoch -b 5 --no-memory --items 256 --vs baseline --no-plot
train_epoch(epoch_w4, model_v0, opt_v0)
""", expect=[ANY_VERDICT.format(a="epoch", b="epoch")], solution=True)

code(r"""
del epoch_w4   # ends its 4 worker processes (memory on a small machine)
""", solution=True)

# ------------------------------------------------------------------------------------------------
md(r"""
## 4. Change 2: pinned memory and non-blocking copies (CUDA only)

On a GPU machine every batch is copied from host memory to the GPU. From ordinary (*pageable*)
memory, the driver first copies the batch into a page-locked staging buffer, and the CPU waits for
the transfer. From **pinned** (page-locked) memory the GPU's copy engine reads the batch directly,
and with `.to(device, non_blocking=True)` the copy is only queued: the CPU goes on preparing the next
step while the bytes travel. `DataLoader(..., pin_memory=True)` makes the workers' batches pinned.

On a machine without CUDA there is no host→device copy at all: the batch already is where the model
computes. The cell shows that on such a machine, then measures the copy where there is a GPU.
""")

code(r"""
xb, yb = next(iter(make_loader(num_workers=0, batch_size=MAX_BATCH)))
moved = xb.to(device, non_blocking=True)
print(f"device {device}: xb.to(device, non_blocking=True) is xb → {moved is xb} "
      f"({'no copy: the call returns the same tensor, so there is nothing to pin for' if moved is xb else 'a real copy'})")

if torch.cuda.is_available():
    xb_pinned = xb.pin_memory()
    get_ipython().run_cell_magic("gpubench", "-l h2d-copy -b 2 --baseline --no-plot",
                                 "xb.to(device)")
    get_ipython().run_cell_magic("gpubench", "-l h2d-copy -b 2 --vs baseline --no-plot",
                                 "xb_pinned.to(device, non_blocking=True)")
    kept_pinned = judge("2. pinned memory + non_blocking copy", "h2d-copy")
else:
    kept_pinned = skip("2. pinned memory + non_blocking copy", "pin_memory=True and non_blocking=True are no-ops on the CPU")
""", expect=[r"is xb → (True|False)", SKIPPED_OR_RUN])

# ------------------------------------------------------------------------------------------------
md(r"""
## 5. Where does the step spend its time?

If the check says the step now sets the pace, the next question is *which part of the step*. The
step alone is timed on the 128 cached samples (`train_chunk`): no loader, no waiting, the same data
every time. That isolates the compute changes that follow from the input pipeline and its noise.

`%%flame` runs the cell once under a sampling profiler and shows a flame graph: the wider a box,
the more time was spent in that function and what it calls (click to zoom, hover for file and
line). The text table below it lists the top functions by *self* time: the time spent on the
function's own lines, including the torch operations those lines call (the profiler sees Python
frames; the C++ below them is counted to the line that called it). It samples 1,500 times a second, so
that a cell of well under a second still gets enough samples.
""")

code(r"""
%%flame
for _ in range(8):
    train_chunk(model_v0, opt_v0, 32)
""", expect=[r"^flame: .+ has \d+% of the self time", r"workshop_data\.py"])

md(r"""
Two places to read in the table and the graph:

* `workshop_data.py`: the model's `forward` and its list comprehension, the loop that runs one
  small matmul per group, with the indexing `x[:, k]` and `self.w[k]` that feeds each of them;
* `_engine_run_backward`: autograd's C++ engine running the backward pass. The profiler does not
  see inside it, so the whole backward pass lands on this one frame. For this model, the backward
  of each of the 64 matmuls and of each of the 64 `self.w[k]` selections is a separate small
  operation: the loop costs there too, not only in `forward`.

`%%roofline` asks the hardware question: is this step limited by the arithmetic units, by memory
bandwidth, or by neither? It counts the FLOPs and bytes of the step's torch ops, times it, and places
it under this machine's measured roofs (measured once, about 15 s on a CPU, then cached). A point far
below both roofs means overhead, not hardware, is the limit: Python loops, many tiny operations.
The roofs follow the device the step ran on, read from its work: on a GPU machine with the model on
CUDA they are the GPU's, here the CPU's.
""")

code(r"""
%%roofline -l step-loop -b 0.5
step(model_v0, opt_v0, X[:32], Y[:32])
""", expect=[r"^(memory|compute)-bound: \S+ FLOP/B vs ridge", r"next, in order:"])

md(r"""
The baseline for the compute changes: the step alone, over the 128 cached samples in batches of 32.
""")

code(r"""
%%gpubench -l compute -b 1 --items 128 --baseline --no-plot
train_chunk(model_v0, opt_v0, 32)
""", expect=[r"\[label compute, run #\d+\]", r"is now the baseline of 'compute'"])

code(r"""
%perf next compute
""", expect=[r"^(next: |already fast enough|cannot tell)"])

# ------------------------------------------------------------------------------------------------
md(r"""
## 6. Change 3: one `bmm` instead of many small matmuls

The model multiplies each of its 64 groups by its own 32 × 32 matrix, in a Python loop: 64 small
matmuls forward, each with its own Python call, dispatch and autograd bookkeeping, and again in the
backward pass. `torch.bmm` does all of them in one call: a batch of 64 matrix products,
`(64, batch, 32) @ (64, 32, 32)`. This is vectorization, step 6 of the optimization order
(docs/method.md §6), and on a GPU the same change turns 64 kernel launches per pass into one.

First make sure the change changes nothing else: same initial weights, same output.
""")

code(r"""
model_bmm, opt_bmm = new_model(batched=True)
model_ref, _ = new_model(batched=False)
x = normalise(X[:32])
torch.testing.assert_close(model_bmm(x), model_ref(x))
print("same output: the bmm model computes what the loop model computes")
del model_ref
""", expect=[r"^same output"], rebuild=True)

md(r"""
**The prediction.** `%perf next compute` above bounded nothing from above: the hot frame is a library's
(autograd's backward engine), spent on behalf of the code that calls it. A bound can be measured
instead. The change can only remove time spent in the 64 group maps (their matmuls forward and
backward, and the Python loop around them); the rest of the step stays: the normalisation, the
classifier, the loss, the optimizer update. So time the step with the group maps removed altogether
(a model whose groups cost nothing, with the same classifier) against the step as it is, interleaved:
no rewrite of the groups can beat that ratio (Amdahl's law), and the upper end of its 95% interval is
the high end of the range. The low end is the bar: the prediction is that the change is kept. It can
fail both ways: a `bmm` that does not clear 10%, or one faster than removing the groups altogether
(which would mean a broken measurement).
""")

code(r"""
class NoGroups(GroupedNet):   # the step without the 64 group maps: what no rewrite of them can beat
    def forward(self, x):
        return self.head(torch.relu(x).flatten(1))


model_nog = NoGroups().to(device)
opt_nog = torch.optim.SGD(model_nog.parameters(), lr=LR)
bound = perfmagic.bench_pair("train_chunk(model_v0, opt_v0, 32)", "train_chunk(model_nog, opt_nog, 32)",
                             globals=globals(), budget=1.5, memory=False).comparison
print(f"the step without its group maps: {1 / bound.ratio:.1f}× faster "
      f"(95% CI {1 / bound.ci_high:.1f}×–{1 / bound.ci_low:.1f}×)")
predict("3. many small matmuls → one bmm", low=1.10, high=1 / bound.ci_low,
        why="the bar (kept) up to the step with no group maps at all (Amdahl)")
del model_nog, opt_nog
""", expect=[r"^the step without its group maps: [\d.]+× faster",
             r"^predicted for 3\. many small matmuls → one bmm: 1\.10×–[\d.]+×"])

md(r"""
As for change 1, `--vs baseline` times the baseline's code and this cell's code interleaved in
one process. The step is self-contained: nothing runs in the background between its calls.
""")

code(r"""
%%gpubench -l compute -b 2 --items 128 --vs baseline --no-plot
train_chunk(model_bmm, opt_bmm, 32)
""", expect=[r"^B #\d+ compute vs A #\d+ compute: \S+× faster", r"same-process A/B"])

code(r"""
kept_bmm = judge("3. many small matmuls → one bmm", "compute")
""", expect=[r"^3\. many small matmuls → one bmm: .*(→ (kept|not kept)|not judged)", JUDGED, PREDICTION_CHECKED])

code(r"""
%perf next compute
""", expect=[r"\d+ of \d+ predictions? within range"])

md(r"""
The roofline again, for the new step: the chart also draws the earlier point, so the move is
visible. Compare the fraction of the roof each reaches and the advice that comes with it.
""")

code(r"""
%%roofline -l step-bmm -b 0.5
step(model_bmm, opt_bmm, X[:32], Y[:32])
""", expect=[r"^(memory|compute)-bound: \S+ FLOP/B vs ridge"])

md(r"""
### Exercise 2: `einsum` instead of `bmm`

The same grouped product can be written `torch.einsum("bgi,gio->bgo", x, w)`. Is it faster, slower,
or the same as `bmm`? Write a model that uses it, check that its output matches, and judge it against
the current baseline with a same-process A/B.

*Hint:* subclass `GroupedNet` and override `forward` (copy the `batched` branch from
`workshop_data.py`), create it with `.to(device)` and an optimizer as `new_model` does, then time
`train_chunk(your_model, your_opt, 32)` with `%%gpubench -l compute -b 2 --items 128 --vs baseline`.
Don't call `judge` for it: an exercise should not move the baseline of the main line.
""")

code(r"""
# Exercise 2: your code here
""")

code(r"""
class EinsumNet(GroupedNet):
    def forward(self, x):
        h = torch.einsum("bgi,gio->bgo", x, self.w)
        return self.head(torch.relu(h).flatten(1))


model_ein = EinsumNet().to(device)
model_ein.load_state_dict(model_bmm.state_dict())   # the same weights as the bmm model has now
opt_ein = torch.optim.SGD(model_ein.parameters(), lr=LR)
torch.testing.assert_close(model_ein(x), model_bmm(x), rtol=1e-4, atol=1e-4)
print("same output as the bmm model")
""", expect=[r"^same output"], solution=True)

code(r"""
%%gpubench -l compute -b 2 --items 128 --vs baseline --no-plot
train_chunk(model_ein, opt_ein, 32)
""", expect=[ANY_VERDICT.format(a="compute", b="compute")], solution=True)

md(r"""
Two formulations of the same product may end in the same kernel, or not: `einsum` decides at run
time how to map its expression onto matmuls. Whatever the verdict, it is an answer: *no real change*
says that the choice between them is a matter of readability on this machine.
""")

# ------------------------------------------------------------------------------------------------
md(r"""
## 7. Change 4: preallocated buffers

Every step turns the raw `uint8` batch into a normalised float tensor:
`(xb.float() - MEAN) / STD` allocates three new tensors per step, and the memory of each is written
and later freed. With `prealloc=True` the step converts the batch into `x_buf`, a buffer allocated
once before the loop, and normalises it in place (`sub_`, `div_`): no allocation per step and fewer
passes over fresh memory (docs/method.md §6, "memory"). On a GPU the same buffer is also where the
host→device copy lands, which CUDA graphs (change 7) require.

Whether this pays depends on how large a share of the step those allocations are, which is exactly
what a measurement answers. First, the same input either way:
""")

code(r"""
torch.testing.assert_close(normalise(X[:32], prealloc=True).clone(), normalise(X[:32]))
print("same normalised input with and without the preallocated buffer")
""", expect=[r"^same normalised input"])

code(r"""
%%gpubench -l compute -b 2 --items 128 --vs baseline --no-plot
train_chunk(model_bmm, opt_bmm, 32, prealloc=True)
""", expect=[ANY_VERDICT.format(a="compute", b="compute"), r"same-process A/B"])

code(r"""
kept_prealloc = judge("4. preallocated input buffer", "compute")
opts_kept = dict(prealloc=True) if kept_prealloc else {}   # the step options kept so far
print(f"step options kept so far: {opts_kept}")
""", expect=[r"^4\. preallocated input buffer: .*(→ (kept|not kept)|not judged)", JUDGED, r"^step options kept so far: "])

md(r"""
If the verdict is not *faster*, that is the method working, not failing: a quick win from a list
(docs/method.md §9) is a hypothesis about *some* loop, and on this one, at this size, the allocations may
be too small a part of the step to matter. The change is then not kept, and the next one is measured
without it (`opts_kept` holds what was kept).
""")

# ------------------------------------------------------------------------------------------------
md(r"""
## 8. Change 5: a larger batch

Each step pays a fixed cost whatever its size: Python calls, dispatch, autograd bookkeeping, the
optimizer update. Batches of 128 instead of 32 pay it once per 128 samples instead of four times, and
give the matmuls larger operands, which use the hardware better. The timed work stays the same: the
same 128 cached samples per call, as one step of 128 instead of four steps of 32.

A larger batch is not free for the *training*, only for the speed: four updates become one, so the
learning rate and the number of epochs usually need retuning (a common start is to scale the learning
rate with the batch size). Keep that in mind when a speed-up comes from the batch size.
""")

code(r"""
%%gpubench -l compute -b 2 --items 128 --vs baseline --no-plot
train_chunk(model_bmm, opt_bmm, 128, **opts_kept)
""", expect=[ANY_VERDICT.format(a="compute", b="compute"), r"same-process A/B"])

code(r"""
kept_batch = judge("5. batch 32 → 128", "compute")
batch_kept = 128 if kept_batch else 32
print(f"batch size kept: {batch_kept}")
""", expect=[r"^5\. batch 32 → 128: .*(→ (kept|not kept)|not judged)", JUDGED, r"^batch size kept: (32|128)"])

# ------------------------------------------------------------------------------------------------
md(r"""
## 9. On a GPU: mixed precision and CUDA graphs

The last two changes are measured here on a GPU. On a machine without CUDA their cells say so and skip;
their code is complete and runs as written where `torch.cuda.is_available()`. Each is timed with
the same `%%gpubench --vs baseline` as above, called from code
(`get_ipython().run_cell_magic(...)`) so that it can sit inside the `if`.

**Mixed precision.** Under `torch.autocast(device_type="cuda", dtype=torch.bfloat16)` matmuls run
in bfloat16 on the tensor cores, while reductions and the loss stay in float32. bfloat16 has the
exponent range of float32, so unlike float16 it needs no `GradScaler` (docs/method.md §8). The step's
`amp=True` option turns it on; the cell first checks that the loss stays close to the float32 loss.
""")

code(r"""
if torch.cuda.is_available():
    model_amp = copy.deepcopy(model_bmm)
    with torch.no_grad():
        x32 = normalise(X[:batch_kept])
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss_bf16 = F.cross_entropy(model_amp(x32), Y[:batch_kept].to(device))
        loss_fp32 = F.cross_entropy(model_amp(x32), Y[:batch_kept].to(device))
    print(f"loss in float32 {loss_fp32.item():.4f}, under bfloat16 autocast {loss_bf16.item():.4f}")
    get_ipython().run_cell_magic("gpubench", "-l compute -b 2 --items 128 --vs baseline --no-plot",
                                 "train_chunk(model_bmm, opt_bmm, batch_kept, amp=True, **opts_kept)")
    amp_run = last_run("compute")
    kept_amp = judge("6. mixed precision (bfloat16 autocast)", "compute")
else:
    kept_amp = skip("6. mixed precision (bfloat16 autocast)",
                    "this section measures it on CUDA; CPU bfloat16 autocast exists too, and pays only where the CPU "
                    "has bf16 matrix instructions (AMX, AVX-512-BF16): there, time torch.autocast('cpu', "
                    "dtype=torch.bfloat16) with --vs before keeping it")
""", expect=[SKIPPED_OR_RUN])

md(r"""
**CUDA graphs.** A small step is a long series of small GPU kernels, and launching each from Python
costs more than running it. A CUDA graph records the whole step once (forward, backward and
optimizer update) and then replays it with one launch. The price: static shapes, no data-dependent
control flow, and **static input buffers**: each replay reads the same addresses, so new data is
copied into the captured buffers before each replay (the preallocated buffers of change 4, now
required). The recipe follows PyTorch's *whole-network capture*: warm up on a side stream, capture,
then copy and replay. The graph gets its own copy of the model, and the cell checks that one
replayed step gives the same loss as one eager step.
""")

code(r"""
def make_graphed_step(model, opt, batch_size, amp=False):
    static_x = torch.zeros(batch_size, GROUPS, DIM, device=device)
    static_y = torch.zeros(batch_size, dtype=torch.long, device=device)

    def forward_backward():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            loss = F.cross_entropy(model(static_x), static_y)
        loss.backward()
        opt.step()
        return loss

    side = torch.cuda.Stream()                    # warm-up on a side stream, as capture requires
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            forward_backward()
    torch.cuda.current_stream().wait_stream(side)

    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)               # gradients are allocated inside the graph's pool
    with torch.cuda.graph(graph):
        static_loss = forward_backward()

    def graphed_step(model_, opt_, xb, yb, **_):
        static_x.copy_(xb, non_blocking=True).sub_(MEAN).div_(STD)   # new data into the captured buffers
        static_y.copy_(yb, non_blocking=True)
        graph.replay()
        return static_loss

    return graphed_step


if torch.cuda.is_available():
    model_g = copy.deepcopy(model_bmm)
    opt_g = torch.optim.SGD(model_g.parameters(), lr=LR)
    model_e = copy.deepcopy(model_bmm)
    opt_e = torch.optim.SGD(model_e.parameters(), lr=LR)
    graphed_step = make_graphed_step(model_g, opt_g, batch_kept, amp=kept_amp)
    model_g.load_state_dict(model_e.state_dict())   # undo the warm-up's updates: same weights as the eager copy
    eager = step(model_e, opt_e, X[:batch_kept], Y[:batch_kept], amp=kept_amp, **opts_kept).item()
    replayed = graphed_step(model_g, opt_g, X[:batch_kept], Y[:batch_kept]).item()
    print(f"one step: eager loss {eager:.5f}, graph replay loss {replayed:.5f}")
    get_ipython().run_cell_magic("gpubench", "-l compute -b 2 --items 128 --vs baseline --no-plot",
                                 "train_chunk(model_g, opt_g, batch_kept, step_fn=graphed_step)")
    kept_graph = judge("7. CUDA graph of the whole step", "compute")
else:
    kept_graph = skip("7. CUDA graph of the whole step", "CUDA graphs record and replay GPU kernels")
""", expect=[SKIPPED_OR_RUN])

md(r"""
### Exercise 3 (GPU): float16 instead of bfloat16

On a GPU, try `dtype=torch.float16` in the autocast. float16 has a much smaller exponent range than
bfloat16, so small gradients underflow to zero unless the loss is scaled: use
`scaler = torch.amp.GradScaler("cuda")`, then `scaler.scale(loss).backward()`,
`scaler.step(opt)`, `scaler.update()` in place of `loss.backward()` and `opt.step()`. Is it faster
than bfloat16 here? On a machine without CUDA, read the solution; it prints that it skipped.

*Hint:* write a `step_fp16(model, opt, xb, yb, **opts)` with the same signature as `step` and time
`train_chunk(model, opt, batch_kept, step_fn=step_fp16)` against the bfloat16 run: `--vs RUN` takes
a run id as well as `baseline`, and the bfloat16 run's id is in `amp_run`. The magic line cannot read
Python variables, so call it from code with an f-string, as the cells above do.
""")

code(r"""
# Exercise 3: your code here
""")

code(r"""
if torch.cuda.is_available():
    scaler = torch.amp.GradScaler("cuda")

    def step_fp16(model, opt, xb, yb, **opts):
        x = normalise(xb, opts.get("prealloc", False))
        y = yb.to(device)
        opt.zero_grad()
        with torch.autocast("cuda", dtype=torch.float16):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    model_16 = copy.deepcopy(model_bmm)
    opt_16 = torch.optim.SGD(model_16.parameters(), lr=LR)
    get_ipython().run_cell_magic("gpubench", f"-l compute -b 2 --items 128 --vs {amp_run} --no-plot",
                                 "train_chunk(model_16, opt_16, batch_kept, step_fn=step_fp16, **opts_kept)")
else:
    print("skipped: no CUDA device — float16 autocast with a GradScaler is a GPU exercise")
""", expect=[SKIPPED_OR_RUN], solution=True)

# ------------------------------------------------------------------------------------------------
md(r"""
## 10. The whole loop again

Every change since change 1 was timed on the step alone. Now put the kept ones together in the real
loop, loader included, and time it exactly as the baseline was: one epoch of 256 samples per call.
Every part of it is what was kept: the bmm model if change 3 was, the number of workers, the batch
size, the step options, and on a GPU pinned batches, autocast and the CUDA graph if they were.
""")

code(r"""
model_final, opt_final = (model_bmm, opt_bmm) if kept_bmm else (model_v0, opt_v0)
step_final, opts_final = step, dict(opts_kept, amp=True) if kept_amp else dict(opts_kept)
if kept_graph:  # the graph replays the whole step (with autocast if it was kept) on its own model copy
    model_final, opt_final, step_final, opts_final = model_g, opt_g, graphed_step, {}
workers_final = 2 if kept_workers else 0
pin = kept_pinned   # True only with CUDA, where change 2 was measured
epoch_final = make_loader(workers_final, batch_size=batch_kept, dataset=EPOCH, pin_memory=pin)
check_final = make_loader(workers_final, batch_size=batch_kept, pin_memory=pin)  # for the check below
print(f"final loop: {workers_final} workers, batch {batch_kept}, {'bmm' if kept_bmm else 'loop'} model, "
      f"step options {opts_final}, CUDA graph {kept_graph}, pin_memory {pin}")
""", expect=[r"^final loop: \d workers, batch (32|128)"])

md(r"""
The comparison that sums up the workshop is the final loop against the very first one. `%perf
baseline RUN` makes the first run the baseline of `epoch` again, so that `--vs baseline`
interleaves the two.
""")

code(r"""
%perf baseline {v0_run}
""", expect=[r"is now the baseline of 'epoch'"])

code(r"""
%%gpubench -l epoch -b 5 --no-memory --items 256 --vs baseline --no-plot
train_epoch(epoch_final, model_final, opt_final, step_final, **opts_final)
""", expect=[r"^B #\d+ epoch vs A #\d+ epoch: ", r"same-process A/B"])

code(r"""
kept_all = judge("all kept changes: first loop → final loop", "epoch")
""", expect=[r"^all kept changes: first loop → final loop: .*(→ (kept|not kept)|not judged)", JUDGED])

md(r"""
And the first question again: where is the bottleneck *now*? The changes since change 1 made the
step cheaper, but each item still takes as long to read as it did at the start. If the step now
consumes batches faster than the workers deliver them, the loop is input-bound again, and the next
change belongs to the input pipeline: that is what "repeat until returns diminish" looks like.
""")

code(r"""
%%dataloader_check check_final --steps 6
step_final(model_final, opt_final, *batch, **opts_final)
""", expect=[r"^(input|compute)-bound: "])

md(r"""
### Exercise 4: the next bottleneck

If the check above says *input-bound*, find the number of workers that lets the input pipeline keep
up with the faster step.

*Hint:* the same check with `--sweep num_workers=2,4` (and `--steps 6 --sweep-steps 4` to keep it
short) rebuilds the loader at each setting and measures the loop there; its last line names the best
setting and where the plateau starts.
""")

code(r"""
# Exercise 4: your code here
""")

code(r"""
%%dataloader_check check_final --steps 6 --sweep num_workers=2,4 --sweep-steps 4
step_final(model_final, opt_final, *batch, **opts_final)
""", expect=[r"^(input|compute)-bound: ",
             r"^\s+best: (num_workers=\d|cannot tell, because other processes used)"], solution=True)

md(r"""
*Going further:* to confirm the sweep's answer with `%%gpubench --vs`, time an epoch with at least
as many batches as workers, for both sides: each worker loads whole batches, so an epoch of
`EPOCH`'s 256 samples in batches of 128 gives only two workers anything to do, however many there
are (`Subset(data, range(1024))` gives eight batches).
""")

# ------------------------------------------------------------------------------------------------
md(r"""
## 11. Stop when it is fast enough, and keep the gain

Say what *fast enough* is, and `%perf next` says when to stop instead of proposing another
experiment. Its record shows how its earlier predictions fared against what the comparisons measured.
""")

code(r"""
%perf target epoch 100ms
""", expect=[r"target of 'epoch'"])

code(r"""
%perf next epoch
""", expect=[r"(already fast enough: stop|cannot tell|^next: )"])

md(r"""
A gain accepted in a notebook is lost silently the next time someone edits the code. `%perf guard`
writes a plain pytest file that re-measures the accepted change with the same interleaved method and
fails when the gain is gone. A guard rebuilds the call from a module's functions, not from notebook
cells, so the final step lives in `workshop_data.training_chunk` too: the loop model
(`batched=False`) against the bmm model (`batched=True`), measured as an interleaved pair.
""")

code(r"""
from workshop_data import training_chunk
""")

code(r"""
%%gpubench -l final-step -b 1 --items 128 --baseline --no-plot
training_chunk(batched=False)
""", expect=[r"is now the baseline of 'final-step'"])

code(r"""
%%gpubench -l final-step -b 2 --items 128 --vs baseline --no-plot
training_chunk(batched=True)
""", expect=[r"^B #\d+ final-step vs A #\d+ final-step: "])

code(r"""
import subprocess, sys, tempfile

guard_path = os.path.join(tempfile.mkdtemp(prefix="workshop-guard-"), "test_final_step.py")
get_ipython().run_line_magic("perf", f"guard {last_run('final-step')} {guard_path} --module workshop_data")
done = subprocess.run([sys.executable, "-m", "pytest", "-q", "--color=no", "-p", "no:cacheprovider", guard_path],
                      capture_output=True, text=True, cwd=os.getcwd())
print("\n".join(done.stdout.strip().splitlines()[-3:]))
if done.returncode not in (0, 1):  # 1: the guard ran and failed (shown above); anything else: it did not run
    raise RuntimeError(f"the guard did not run (pytest exit status {done.returncode}):\n"
                       + (done.stderr.strip() or done.stdout.strip())[-1500:])
print("guard:", "passed" if done.returncode == 0 else "FAILED: the gain is gone (see above)")
""", expect=[r"wrote a regression guard", r"(1 passed|cannot tell)", r"^guard: passed"])

md(r"""
When the last line says `guard: passed`, the bmm model is still faster than the loop model beyond the
10% bar. Put the file in your test suite (`tests/`), and the next edit that loses the gain fails CI with
perfmagic's verdict instead of slipping through. (A guard that cannot run at all, e.g. without pytest,
stops the cell with pytest's own error rather than looking like a pass.)
""")


# ------------------------------------------------------------------------------------------------
md(r"""
## 12. Summary

The table is built from the ledger: for every judged change, the runs it compared (A before, B
after), their medians per call, the speed-up A/B with its 95% confidence interval, the verdict,
whether the change was kept, and the range predicted before measuring, where one was stated
(`predict`), with the outcome of its check. The *timed* column names the label and how the pair was measured:
*interleaved* for a same-process A/B (`--vs`), *historical* for runs taken at different times
(whose intervals are widened for the machine's drift).
Rows of the same label build on each other: each change is measured against the last kept one.
For an interleaved pair the speed-up is the median of the per-pair ratios (that is what cancels the
drift), so it need not equal the ratio of the two medians beside it.
""")

code(r"""
def fmt_s(s):
    return f"{s * 1e3:.3g} ms" if s >= 1e-3 else f"{s * 1e6:.3g} µs"


runs = perfmagic.ledger("gpubench")
rows = []
for ch in CHANGES:
    try:
        rc = perfmagic.compare(ch["a"], ch["b"])
    except perfmagic.PerfmagicError:
        rows.append({"change": ch["change"], "runs": f"#{ch['a']} → #{ch['b']}", "verdict": "not judged", "kept": "no"})
        continue
    low_high = PREDICTIONS.get(ch["change"])
    c = rc.comparison
    rows.append({
        "change": ch["change"],
        "timed": f"{ch['label']} ({rc.kind})",
        "runs": f"#{ch['a']} → #{ch['b']}",
        "before": fmt_s(runs.loc[ch["a"], "median_s"]),
        "after": fmt_s(runs.loc[ch["b"], "median_s"]),
        "speed-up": f"{1 / c.ratio:.2f}×",
        "95% CI": f"{1 / c.ci_high:.2f}–{1 / c.ci_low:.2f}×",
        "verdict": rc.verdict,
        "kept": "yes" if ch["kept"] else "no",
        "predicted": (f"{low_high[0]:.2f}–{low_high[1]:.2f}×: {(ch.get('prediction') or '').split(':')[0]}"
                      if low_high else ""),
    })
for name in SKIPPED:
    rows.append({"change": name, "verdict": "skipped: no CUDA device", "kept": "no"})
summary = pd.DataFrame(rows).set_index("change").fillna("")
with pd.option_context("display.width", 200, "display.max_colwidth", 60):
    print(summary.sort_index().to_string())
""", expect=[r"speed-up\s+95% CI\s+verdict\s+kept\s+predicted", r"^1\. DataLoader workers", r"^3\. many small matmuls"])

md(r"""
The history of the `compute` label, every run with its confidence interval and the baseline
marked. The ledger beside the notebook survives kernel restarts: run the notebook again in the same
folder and the history grows.
""")

code(r"""
%perf plot compute
""", expect=[r"^history of 'compute'"])

md(r"""
How to read the table: every row is one hypothesis tested on this machine, with the evidence for its
verdict. A large speed-up with a narrow interval is a change to keep; *no real change* means the
change does not matter *here* (which does not make it wrong elsewhere: pinned memory or CUDA graphs
do nothing on a CPU and can matter on a GPU); *inconclusive* means the budget was too small for the
noise of the machine, and a longer measurement (a larger `-b`) would decide. Run the notebook again
and the figures move; a change with a large real effect should keep its verdict, and one near the bar
may not: that is the point of judging by the whole interval rather than by one number.

What to take away, whatever your machine printed:

1. **Find the bottleneck first.** The input pipeline, then the step, then the input pipeline again:
   each fix can move the bottleneck somewhere else, so check again after each one.
2. **One change at a time**, each with a before and an after, under the same conditions; the
   interleaved A/B (`--vs`) whenever each call is self-contained (a step, a whole epoch), so that
   nothing of one side runs in the background during the other's turn.
3. **Keep only real gains.** A change that does not clear the bar is not kept, even when a list of
   quick wins says it should help: those are hypotheses to measure, not results.
""")


def main() -> None:
    from nbbuild import write_notebook  # this script's folder is on sys.path when it runs

    write_notebook(cells, TARGET)


if __name__ == "__main__":
    main()
