"""A training loop, one change at a time: perfmagic's default flows on plain torch models against truths
measured apart from perfmagic, quiet and beside one busy neighbour.

The bed (models, data, steps: ``benchmarks/trainbed.py``, importable by DataLoader workers): a small CNN
on 32×32 images, a small ``nn.TransformerEncoder`` (2 layers, d_model 64, seq 32), a one-block transformer
with hand-written attention (a per-head Python loop or one batched matmul), random init from a seed,
synthetic data, and a Dataset whose items cost real NumPy work (flip, normalise, six 3×3 box blurs).

Everything runs in one IPython shell (``start_ipython()`` + ``%load_ext perfmagic``, the ledger in one
temporary working directory for the whole run), driven cell by cell as a notebook user would. Planted
cases, each a *trial* per (repetition, load), in an order shuffled per repetition (seeded):

1. ``batch``: the CNN train step at batch 8 → 32, declared ``--items 8`` / ``--items 32``; truth: the
   time *per item* (B/A per-item; below 1 = more samples/s).
2. ``noop``: the transformer train step, identical code on both sides (A/A); truth: no real change.
3. ``zero_grad``: the CNN train step with ``opt.zero_grad(set_to_none=False)`` → ``True`` (an
   optimizer-state change); truth measured.
4. ``fused``: the one-block transformer's train step, per-head loop → batched attention (same weights);
   the planted real gain, truth measured (≥ 20% on the reference VM).
   Cases 1–4, two flows each: ``%%gpubench -l L -q -o --baseline [--items N]`` on A, ``%%gpubench -l L -q
   -o [--items N]`` on B, then **compare** = ``%perf compare -o -q`` and **vs** = ``%%gpubench -l L --vs
   baseline -o -q [--items N]`` on B.
5. ``loader``: ``%%dataloader_check loader --sweep num_workers=0,1,2 -o -q`` over the CNN train step (batch
   16, ``num_workers=0``); truth, measured right before each check beside the same neighbours (the
   absolute throughputs move with the machine's load): plain loops of each setting, interleaved over
   rounds (samples/s), and the data-wait fraction at 0 workers from the loader alone and the step alone.
6. ``next``: ``%%gpubench`` of the CNN train step (label T) and of inference (``predict``, label I),
   ``%%flame`` of 20 train steps (default label), then ``%perf next T -o -q`` and ``%perf next I -o -q``;
   truth: the Python functions each cell calls (cProfile of one call) — advice must name only functions
   its label's code calls; advice about inference must not mention backward nor rest on the flame (of
   the train loop, which inference does not call).

Truths of cases 1–4 are measured apart from perfmagic in the same process, at each load, at the start
and (full mode) at the end: single calls A and B interleaved ABBA (GC off) for ``--calibrate`` seconds,
median of per-pair ratios with its distribution-free 95% CI (``bench_ab.effect``), per item for case 1.
The truth's category at the 10% bar: *faster* (CI below 1/1.1), *slower* (above 1.1), *no real change*
(inside), or — a CI across a bar — every category it touches is accepted.

Scoring of each output: **right** = right and decisive (a verdict in the truth's categories; a sweep
whose best setting is on the truth's plateau — median within 10% of the truly best — and a wait verdict
that matches the truth's fraction at 0 workers, fetch ÷ (fetch + step), > 0.35 or < 0.25 in every round
(else either verdict counts); the sweep is wrong when its best setting was below 90% of the truly best
in every one of ≥ 4 interleaved rounds; advice naming only code its label calls, or asking for the missing evidence for it); **confidently
wrong** = a decisive verdict outside the truth, advice about code its label does not run; **undecided**
= inconclusive / cannot tell / no verdict / stop / measure again. *Contradictions*: an output whose
verdict or prediction its own numbers refute (a time verdict against the same runs' items/s, a
dataloader audit "N× faster with k workers" against the sweep's own throughput at k workers).
*! lines*: lines starting with ``!`` in the output's text/plain (what the cell shows without ``-q``:
``result.text()``) plus lines printed during the call; the ≤ 2 target is checked on the trials during
which other processes used fewer than 0.3 cores (measured: on a shared machine a trial without planted
neighbours need not be quiet).

    .venv/bin/python benchmarks/bench_training_loop.py           # 3 repetitions at 0 and 1 neighbour (~12-25 min)
    .venv/bin/python benchmarks/bench_training_loop.py --quick   # smoke test: every task once, tiny budgets; no docs
    .venv/bin/python benchmarks/bench_training_loop.py --report-only benchmarks/results/training_loop.json
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import math
import os
import pstats
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _common as C  # noqa: E402
from bench_ab import effect, interleaved, wilson  # noqa: E402

MIN_EFFECT = 0.10
BAND = (1 / (1 + MIN_EFFECT), 1 + MIN_EFFECT)
TARGETS = {0: 0.85, 1: 0.70}
DECIDED_S = 30.0
QUIET_CORES = 0.3           # others' CPU below this during a trial: the machine was quiet
SWEEP = (0, 1, 2)
LOADER_BATCH = 16
# --quick (a smoke run): every magic with a tiny budget / step count, one thread, so the flows only run once each
QUICK_BENCH = " -b 0.05" if C.QUICK else ""
QUICK_STEPS = " --steps 2 --sweep-steps 2 --warmup 0" if C.QUICK else ""
FLAME_STEPS = 2 if C.QUICK else 20
TRUTH_STEPS = 2 if C.QUICK else 12
SECTION_ROW = ("`%perf compare`, `--vs`, `%%dataloader_check --sweep`, `%perf next` on a small CNN and transformer "
               "(batch size with `--items`, A/A, `zero_grad`, a fused-attention gain, num_workers) vs truths measured "
               "apart, 0 and 1 busy neighbour")

INIT = f"""\
import sys
sys.path.insert(0, {str(HERE)!r})
import torch
from torch.utils.data import DataLoader
from trainbed import (AugmentedImages, HeadLoopTransformer, SmallCNN, TinyTransformer, image_batch, predict,
                      seq_batch, train_step)
torch.set_num_threads({1 if C.QUICK else C.usable_cores()})
cnn = SmallCNN(seed=0)
opt = torch.optim.SGD(cnn.parameters(), lr=0.01, momentum=0.9)
x8, y8 = image_batch(8, seed=1)
x16, y16 = image_batch(16, seed=2)
x32, y32 = image_batch(32, seed=3)
tf = TinyTransformer(seed=0)
opt_tf = torch.optim.AdamW(tf.parameters(), lr=1e-3)
xs, ys = seq_batch(16, seed=4)
loopy = HeadLoopTransformer(fused=False, seed=0)
fused = HeadLoopTransformer(fused=True, seed=0)
fused.load_state_dict(loopy.state_dict())
opt_loopy = torch.optim.AdamW(loopy.parameters(), lr=1e-3)
opt_fused = torch.optim.AdamW(fused.parameters(), lr=1e-3)
images = AugmentedImages(2048, seed=5)
loader = DataLoader(images, batch_size={LOADER_BATCH}, shuffle=True, num_workers=0)
"""

CASES: list[dict[str, Any]] = [
    {"slug": "batch", "name": "CNN train step, batch 8 → 32 (`--items`)", "a": "train_step(cnn, opt, x8, y8)",
     "b": "train_step(cnn, opt, x32, y32)", "items": (8, 32)},
    {"slug": "noop", "name": "transformer train step, no-op change (A/A)", "a": "train_step(tf, opt_tf, xs, ys)",
     "b": "train_step(tf, opt_tf, xs, ys)", "items": None},
    {"slug": "zero_grad", "name": "CNN train step, `zero_grad(set_to_none=False → True)`",
     "a": "train_step(cnn, opt, x16, y16, set_to_none=False)", "b": "train_step(cnn, opt, x16, y16, set_to_none=True)",
     "items": None},
    {"slug": "fused", "name": "attention: per-head loop → batched (train step)",
     "a": "train_step(loopy, opt_loopy, xs, ys)", "b": "train_step(fused, opt_fused, xs, ys)", "items": None},
]
BY_SLUG = {c["slug"]: c for c in CASES}
TASKS = [*BY_SLUG, "loader", "next"]
FLOWS = ("compare", "vs", "dataloader_check", "next")


# ---------------------------------------------------------------------------------------------
# driving the shell
# ---------------------------------------------------------------------------------------------
class CellError(RuntimeError):
    pass


def run(ip: Any, src: str) -> tuple[Any, str, float]:
    """Run one cell as a notebook would: ``(its value, what it printed, wall seconds)``."""
    out = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        res = ip.run_cell(src, store_history=True)
    wall = time.perf_counter() - t0
    printed = re.sub(r"[^\n]*\r", "", out.getvalue())  # progress bars redraw with \r
    printed = re.sub(r"(?m)^Out\[\d+\]:\s*$\n?", "", printed)  # a terminal's empty Out[n] of an -o -q cell
    if not res.success:
        err = res.error_in_exec or res.error_before_exec
        raise CellError(f"{type(err).__name__}: {err} | printed: {printed.strip()[-300:]}")
    return res.result, printed, wall


def bang_lines(*texts: str) -> int:
    return sum(1 for t in texts if t for ln in t.splitlines() if ln.strip().startswith("!"))


def text_of(obj: Any) -> str:
    try:
        return obj.text() if obj is not None else ""
    except Exception as exc:  # noqa: BLE001 - a result that cannot render is itself a finding
        return f"<text() failed: {exc}>"


# ---------------------------------------------------------------------------------------------
# truths, measured apart from perfmagic
# ---------------------------------------------------------------------------------------------
def categories(lo: float, hi: float) -> list[str]:
    """Every verdict region the truth's interval touches (faster / no real change / slower)."""
    out = []
    if lo < BAND[0]:
        out.append("faster")
    if hi >= BAND[0] and lo <= BAND[1]:
        out.append("no real change")
    if hi > BAND[1]:
        out.append("slower")
    return out


def truth_cases(ns: dict[str, Any], seconds: float) -> dict[str, Any]:
    out = {}
    for c in CASES:
        e = effect(*interleaved(ns, c["a"], c["b"], seconds))
        k = c["items"][0] / c["items"][1] if c["items"] else 1.0  # per item: (tB / nB) / (tA / nA)
        e = {**e, "per_item": bool(c["items"]), "ratio": e["ratio"] * k, "ci": [e["ci"][0] * k, e["ci"][1] * k]}
        if c["a"] == c["b"]:
            e["categories"] = ["no real change"]  # identical code: by construction
        else:
            e["categories"] = categories(*e["ci"])
        out[c["slug"]] = e
    return out


def truth_loader(ns: dict[str, Any], rounds: int, steps: int = TRUTH_STEPS) -> dict[str, Any]:
    """Plain loops: samples/s of the train step over the loader at each num_workers (rounds interleaved,
    settings rotated), the loader alone and the step alone at 0 workers."""
    from torch.utils.data import DataLoader

    images, cnn, opt, step = ns["images"], ns["cnn"], ns["opt"], ns["train_step"]
    thr: dict[int, list[float]] = {w: [] for w in SWEEP}
    fetch, comp = [], []
    for r in range(rounds):
        for w in SWEEP[r % len(SWEEP):] + SWEEP[:r % len(SWEEP)]:
            dl = DataLoader(images, batch_size=LOADER_BATCH, shuffle=True, num_workers=w)
            it = iter(dl)
            for _ in range(2 * w + 2):
                x, y = next(it)
                step(cnn, opt, x, y)
            t0 = time.perf_counter()
            for _ in range(steps):
                x, y = next(it)
                step(cnn, opt, x, y)
            thr[w].append(steps * LOADER_BATCH / (time.perf_counter() - t0))
            del it
        it = iter(DataLoader(images, batch_size=LOADER_BATCH, shuffle=True))
        t0 = time.perf_counter()
        for _ in range(steps):
            x, y = next(it)
        fetch.append((time.perf_counter() - t0) / steps)
        t0 = time.perf_counter()
        for _ in range(steps):
            step(cnn, opt, x, y)
        comp.append((time.perf_counter() - t0) / steps)
    med = {w: statistics.median(v) for w, v in thr.items()}
    best_w = max(med, key=med.get)
    f, c = statistics.median(fetch), statistics.median(comp)
    frac = f / (f + c)
    fr = [a / (a + b) for a, b in zip(fetch, comp)]  # per round: the verdict is clear only if every round agrees
    # clearly worse: below 90% of the best setting in every one of >= 4 rounds (interleaved: same conditions;
    # a sign test's p <= 1/16)
    worse = [w for w in SWEEP if w != best_w and rounds >= 4
             and all(a < 0.9 * b for a, b in zip(thr[w], thr[best_w]))]
    return {"throughput": {str(w): {"median": med[w], "min": min(v), "max": max(v), "rounds": v}
                           for w, v in thr.items()},
            "plateau": [w for w in SWEEP if med[w] >= 0.9 * med[best_w]], "clearly_worse": worse, "best": best_w,
            "fetch_s": f, "compute_s": c, "wait_fraction_w0": frac, "wait_fraction_rounds": fr,
            "input_bound": [True] if min(fr) > 0.35 else [False] if max(fr) < 0.25 else [True, False]}


def call_set(ns: dict[str, Any], stmt: str) -> list[str]:
    """The names of every Python function (and builtin) one call of ``stmt`` runs, by cProfile."""
    f = eval(compile("lambda: " + stmt, "<callset>", "eval"), ns)
    f()
    pr = cProfile.Profile()
    pr.enable()
    f()
    pr.disable()
    names = set()
    for (_file, _line, func) in pstats.Stats(pr).stats:  # type: ignore[attr-defined]
        m = re.search(r"'([^']+)'", func) if func.startswith("<") else None
        names.add((m.group(1) if m else func).split(".")[-1])
    return sorted(names)


def measure_truths(ns: dict[str, Any], loads: list[int], seconds: float, rounds: int, when: str) -> dict[str, Any]:
    """The truths at each load; ``rounds`` 0: the cases only (the end-of-run check of drift)."""
    from perfmagic.core.neighbours import busy_neighbours

    out: dict[str, Any] = {}
    for load in loads:
        with busy_neighbours(load) as nb:
            t = {"cases": truth_cases(ns, seconds)}
            if rounds:
                t["loader"] = truth_loader(ns, rounds)
        t["others_cores"] = nb.others_cores
        out[str(load)] = t
        for slug, e in t["cases"].items():
            print(f"  truth {when} @{load}: {slug}: B/A {'per item ' if e['per_item'] else ''}{e['ratio']:.3f} "
                  f"({e['ci'][0]:.3f}–{e['ci'][1]:.3f}) → {' or '.join(e['categories'])}; "
                  f"A {C.fmt_time(e['a_median_s'])}",
                  flush=True)
        lt = t.get("loader")
        if lt:
            print(f"  truth {when} @{load}: loader samples/s " + ", ".join(
                f"{w} workers {v['median']:.0f}" for w, v in lt["throughput"].items())
                + f"; wait fraction at 0 workers {lt['wait_fraction_w0']:.2f}", flush=True)
    return out


# ---------------------------------------------------------------------------------------------
# trials
# ---------------------------------------------------------------------------------------------
def score(verdict: str | None, accepted: list[str]) -> str:
    if verdict in accepted:
        return "right"
    if verdict in ("faster", "slower", "no real change"):
        return "wrong"
    return "undecided"


def items_ratio(ra: dict[str, Any], rb: dict[str, Any]) -> float | None:
    """B/A of the runs' own items/s, where both declare items."""
    a, b = (ra.get("metrics") or {}).get("items_per_s"), (rb.get("metrics") or {}).get("items_per_s")
    return b / a if a and b else None


def judged(rc: Any, printed: str, wall: float, accepted: list[str], rows: tuple[Any, Any] | None) -> dict[str, Any]:
    if rc is None:
        return {"verdict": None, "score": "undecided", "wall_s": wall, "said": printed.strip()[:600],
                "bangs": bang_lines(printed), "contradiction": None}
    c = rc.comparison
    rec = {"verdict": c.verdict, "score": score(c.verdict, accepted), "ratio": c.ratio, "ci": [c.ci_low, c.ci_high],
           "kind": getattr(rc, "kind", None), "wall_s": wall, "headline": rc.headline(),
           "said": printed.strip()[:600], "bangs": bang_lines(text_of(rc), printed), "contradiction": None}
    # its own throughput lines against its verdict (runs A and B as recorded, or the pair's rows)
    ir = None
    for ra, rb in ([(rc.a, rc.b)] + ([rows] if rows else [])):
        ir = items_ratio(ra, rb) if isinstance(ra, dict) and isinstance(rb, dict) else None
        if ir is not None:
            break
    if ir is not None:
        rec["items_ratio"] = ir
        if (c.verdict == "slower" and ir > BAND[1]) or (c.verdict == "faster" and ir < BAND[0]):
            rec["contradiction"] = f"{c.verdict} while items/s went ×{ir:.2f}"
    return rec


def trial_case(ip: Any, case: dict[str, Any], label: str, truth: dict[str, Any]) -> dict[str, Any]:
    accepted = truth["categories"]
    ia, ib = (f" --items {case['items'][0]}", f" --items {case['items'][1]}") if case["items"] else ("", "")
    t0 = time.perf_counter()
    ra, pa, wa = run(ip, f"%%gpubench -l {label} -q -o --baseline{ia}{QUICK_BENCH}\n{case['a']}")
    rb, pb, wb = run(ip, f"%%gpubench -l {label} -q -o{ib}{QUICK_BENCH}\n{case['b']}")
    rec: dict[str, Any] = {"a_s": ra.median if ra is not None else None, "b_s": rb.median if rb is not None else None,
                           "bench_wall_s": [wa, wb], "bench_bangs": [bang_lines(text_of(ra), pa),
                                                                     bang_lines(text_of(rb), pb)],
                           "bench_warnings": [list(getattr(r, "warnings", ()) or ()) for r in (ra, rb)]}
    led_rows = None
    try:
        from perfmagic.storage.session import current_ledger

        led = current_ledger(ip.user_ns)
        led_rows = (led.get(ra.run_id), led.get(rb.run_id))
    except Exception:  # noqa: BLE001 - only for the items/s cross-check
        pass
    try:
        rc, said, wall = run(ip, f"%perf compare -o -q{QUICK_BENCH}")
        rec["compare"] = judged(rc, said, wall, accepted, led_rows)
    except CellError as exc:
        if C.QUICK:  # a smoke run fails on the first error
            raise
        rec["compare"] = {"verdict": None, "score": "error", "error": str(exc)[:400], "bangs": 0}
    rec["compare"]["flow_s"] = wa + wb + rec["compare"].get("wall_s", 0.0)
    try:
        rc, said, wall = run(ip, f"%%gpubench -l {label} --vs baseline -o -q{ib}{QUICK_BENCH}\n{case['b']}")
        rec["vs"] = judged(rc, said, wall, accepted, led_rows)
    except CellError as exc:
        if C.QUICK:
            raise
        rec["vs"] = {"verdict": None, "score": "error", "error": str(exc)[:400], "bangs": 0}
    rec["vs"]["flow_s"] = wa + rec["vs"].get("wall_s", 0.0)
    rec["trial_s"] = time.perf_counter() - t0
    return rec


# "with 1: step ≈ 20 ms, 1.86× faster" (today's audit) and "1.86× faster with 1 worker" / "1 worker: 1.86× faster"
AUDIT_PRED = (re.compile(r"with (?P<k>\d+)(?: workers?)?: step ≈ [^,]+, (?P<x>[\d.]+)× (?P<d>faster|slower)"),
              re.compile(r"(?P<x>[\d.]+)× (?P<d>faster|slower) with (?P<k>\d+) workers?"),
              re.compile(r"(?P<k>\d+) workers?: (?P<x>[\d.]+)× (?P<d>faster|slower)"))


def trial_loader(ip: Any, truth: dict[str, Any]) -> dict[str, Any]:
    src = (f"%%dataloader_check loader --sweep num_workers={','.join(map(str, SWEEP))} -o -q{QUICK_STEPS}\n"
           "train_step(cnn, opt, *batch)")
    r, said, wall = run(ip, src)
    text = text_of(r)
    sweep = {}
    for p in getattr(r, "sweep", ()):
        w = dict(p.setting).get("num_workers")
        sweep[str(w)] = p.throughput if p.ok else None
    best = getattr(r, "best", None)
    best_w = dict(best.setting).get("num_workers") if best is not None else None
    tt = {int(k): v["median"] for k, v in truth["throughput"].items()}
    bound = bool(r.input_bound)
    notes = []
    verdict_ok = bound in truth["input_bound"]
    if best_w is None:
        best_score = "undecided"
    else:  # on the truth's plateau: right; below the truly best in every round: wrong; else cannot be scored
        best_score = ("right" if best_w in truth["plateau"] else "wrong" if best_w in truth["clearly_worse"]
                      else "undecided")
    if not verdict_ok:
        notes.append(f"said {'input' if bound else 'compute'}-bound, truth wait fraction "
                     f"{truth['wait_fraction_w0']:.2f}")
    if best_score == "wrong":
        notes.append(f"best {best_w} workers: truly {tt[best_w]:.0f} samples/s vs {max(tt.values()):.0f} best, "
                     "below it in every round")
    sc = "wrong" if (not verdict_ok or best_score == "wrong") else best_score
    contra = []
    cur = sweep.get("0")
    for f in [x.text() for x in r.findings()] + text.splitlines():
        for m in (m for pat in AUDIT_PRED for m in pat.finditer(f)):
            k, x, d = int(m.group("k")), float(m.group("x")), m.group("d")
            pred = x if d == "faster" else 1 / x
            meas = sweep.get(str(k)) / cur if cur and sweep.get(str(k)) else None
            if meas is not None and ((pred >= 1.05 and meas < 1.0) or (pred <= 1 / 1.05 and meas > 1.0)):
                contra.append(f"audit: with {k} workers {x:g}× {d}; its sweep: ×{meas:.2f} samples/s")
    contra = sorted(set(contra))
    return {"flow": "dataloader_check", "score": sc, "input_bound": bound, "wait_fraction": r.data_wait_fraction,
            "sweep": sweep, "best": best_w, "wall_s": wall, "flow_s": wall, "notes": notes,
            "contradiction": "; ".join(contra) or None, "bangs": bang_lines(text, said),
            "said": said.strip()[:600], "text": text[-1500:]}


PROPOSAL = ("action", "basis", "command", "low_why")
NAME = re.compile(r"`([^`]+)`")


def named_functions(ns: Any) -> list[str]:
    out = []
    for field in ("action",):
        for tok in NAME.findall(getattr(ns, field, "") or ""):
            tok = tok.strip().rstrip("()")
            if not tok or " " in tok or tok.startswith("%") or "=" in tok:
                continue
            parts = [p for p in tok.split(".") if p and not p.startswith("<")]
            if parts:
                out.append(parts[-1])
    return out


def flame_run_id(ip: Any) -> int | None:
    """The newest %%flame run in this notebook's ledger."""
    try:
        from perfmagic.storage.session import current_ledger

        return next((row["id"] for row in current_ledger(ip.user_ns).rows() if row.get("magic") == "flame"), None)
    except Exception:  # noqa: BLE001 - only used to tell which evidence the advice rests on
        return None


def judge_next(r: Any, calls: list[str], inference: bool, flame_id: int | None) -> dict[str, Any]:
    proposal = " ".join(str(getattr(r, f, "") or "") for f in PROPOSAL)
    names = named_functions(r)
    outside = [n for n in names if n not in calls]
    backward = bool(re.search(r"backward", proposal, re.I))
    kind = getattr(r, "kind", None)
    evidence = [int(e) for e in (getattr(r, "evidence", ()) or ())]
    # the flame is of the train step's loop, which inference does not call: not evidence about inference
    foreign = inference and kind == "experiment" and flame_id is not None and flame_id in evidence
    if (inference and backward) or outside or foreign:
        sc = "wrong"
    elif kind == "experiment" and names:
        sc = "right"
    elif kind == "measure" and inference:
        sc = "right"  # no evidence about this code: asking for it is the method's next step
    else:
        sc = "undecided"
    return {"kind": kind, "level": getattr(r, "level", None), "action": getattr(r, "action", None),
            "names": names, "outside_call_set": outside, "mentions_backward": backward, "evidence": evidence,
            "flame_run": flame_id, "rests_on_other_code": foreign, "score": sc}


def trial_next(ip: Any, i: str, calls: dict[str, list[str]]) -> list[dict[str, Any]]:
    t_lab, i_lab = f"train-{i}", f"infer-{i}"
    run(ip, f"%%gpubench -l {t_lab} -q{QUICK_BENCH}\ntrain_step(cnn, opt, x16, y16)")
    run(ip, f"%%gpubench -l {i_lab} -q{QUICK_BENCH}\npredict(cnn, x16)")
    fl, fsaid, fwall = run(ip, f"%%flame -q -o --no-plot\nfor _ in range({FLAME_STEPS}):\n    train_step(cnn, opt, x16, y16)")
    flame_id = flame_run_id(ip)
    out = []
    for lab, inf in ((t_lab, False), (i_lab, True)):
        r, said, wall = run(ip, f"%perf next {lab} -o -q")
        rec = judge_next(r, calls["infer" if inf else "train"], inf, flame_id)
        rec.update(flow="next", which="inference" if inf else "train step", wall_s=wall, flow_s=wall,
                   bangs=bang_lines(text_of(r), said), said=said.strip()[:600], text=text_of(r)[-1500:],
                   contradiction=None, flame_bangs=bang_lines(text_of(fl), fsaid))
        out.append(rec)
    return out


def trial(ip: Any, task: str, load: int, i: int, truth: dict[str, Any], calls: dict[str, list[str]],
          rounds: int) -> list[dict]:
    from perfmagic.core.neighbours import busy_neighbours

    base = {"task": task, "load": load, "iteration": i}
    t0 = time.perf_counter()
    with busy_neighbours(load) as nb:
        try:
            if task in BY_SLUG:
                rec = trial_case(ip, BY_SLUG[task], f"{task}-{load}-{i}", truth["cases"][task])
                recs = [{**base, "flow": f, **rec[f], "truth": truth["cases"][task]["categories"],
                         "a_s": rec["a_s"], "b_s": rec["b_s"], "bench_bangs": rec["bench_bangs"],
                         "bench_warnings": rec["bench_warnings"]} for f in ("compare", "vs")]
            elif task == "loader":
                lt = truth_loader(ip.user_ns, rounds)  # beside the check: same machine state
                recs = [{**base, **trial_loader(ip, lt), "loader_truth": lt}]
            else:
                recs = [{**base, **r} for r in trial_next(ip, f"{load}-{i}", calls)]
        except Exception as exc:  # noqa: BLE001 - one failed trial is reported, the run goes on
            if C.QUICK:  # a smoke run fails on the first error, with it
                raise RuntimeError(f"--quick: task {task} at {load} neighbour(s) failed") from exc
            recs = [{**base, "flow": "?", "score": "error", "error": f"{type(exc).__name__}: {exc}"[:500], "bangs": 0}]
    for r in recs:
        r["others_cores"], r["task_s"] = nb.others_cores, time.perf_counter() - t0
    return recs


# ---------------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------------
def pct(k: int, n: int) -> str:
    if not n:
        return "n/a"
    lo, hi = wilson(k, n)
    return f"{k}/{n} = {k / n:.0%} ({lo:.0%}–{hi:.0%})"


def med(xs: list[Any], fmt: str = "{:.1f}") -> str:
    xs = [x for x in xs if isinstance(x, (int, float)) and x == x]
    return fmt.format(statistics.median(xs)) if xs else "n/a"


def fmt_truth(e: dict[str, Any]) -> str:
    cats = "any verdict (interval too wide)" if len(e["categories"]) == 3 else " or ".join(e["categories"])
    return f"{e['ratio']:.3f} ({e['ci'][0]:.3f}–{e['ci'][1]:.3f}) → {cats}"


def outcome(r: dict[str, Any]) -> str:
    if r.get("flow") in ("compare", "vs"):
        v = r.get("verdict") or r.get("error", "no verdict")[:60]
        return f"{v} ({r['ratio']:.2f})" if r.get("ratio") else str(v)
    if r.get("flow") == "dataloader_check":
        sw = ", ".join(f"{k}: {v:.0f}" if v else f"{k}: –" for k, v in (r.get("sweep") or {}).items())
        return f"{'input' if r.get('input_bound') else 'compute'}-bound, best {r.get('best')} workers [{sw}]"
    if r.get("flow") == "next":
        return f"{r.get('kind')}: {(r.get('action') or '')[:70]}"
    return r.get("error", "?")[:80]


def report(data: dict[str, Any]) -> str:
    recs = data["records"]
    loads = data["loads"]
    lines = [data["header"]]
    lines.append(
        f"- **load:** load average {data.get('loadavg_start')} at the start, {data.get('loadavg_end')} at the end; "
        f"others' CPU per trial in the tables\n"
        f"- **mode:** {'QUICK smoke run (every task once, tiny budgets) — its numbers mean nothing' if data['quick'] else 'full'}; "
        f"{data['iterations_done']} repetition(s) per task and load, loads {', '.join(map(str, loads))} busy "
        f"neighbour(s), order shuffled per repetition (seed {data['seed']}), torch threads {data['torch_threads']}; "
        f"total run time {data.get('total_wall_s', math.nan) / 60:.1f} min\n"
        + (f"- **perfmagic imported from:** `{data['perfmagic_from']}` (not this checkout's src/)\n"
           if data.get("perfmagic_from") and not data["perfmagic_from"].startswith(str(C.ROOT / "src")) else ""))
    lines.append("A small CNN, a small transformer and a hand-written attention block (random init, synthetic data, "
                 "`benchmarks/trainbed.py`) driven through a real IPython shell, one change at a time. Method, "
                 "truths and scoring: the docstring of `benchmarks/bench_training_loop.py`.\n")
    # truths
    rows = []
    for c in CASES:
        cells = []
        for ld in loads:
            s = data["truth"]["start"].get(str(ld), {}).get("cases", {}).get(c["slug"])
            e = data["truth"].get("end", {}).get(str(ld), {}).get("cases", {}).get(c["slug"])
            cells.append(fmt_truth(s) + (f"; end {fmt_truth(e)}" if e else "") if s else "n/a")
        a0 = data["truth"]["start"].get(str(loads[0]), {}).get("cases", {}).get(c["slug"], {})
        rows.append([c["name"], f"`{c['a']}` → `{c['b']}`", C.fmt_time(a0.get("a_median_s", math.nan)), *cells])
    lines.append("**Truths, measured apart from perfmagic** (B/A time, per item for the batch case; ABBA single "
                 f"calls for {data['calibrate_s']:g} s, median of per-pair ratios, 95% CI → the verdicts it admits "
                 "at "
                 "the 10% bar):\n")
    oc = lambda ld: data["truth"]["start"].get(str(ld), {}).get("others_cores")  # noqa: E731
    lines.append(C.md_table(["case", "A → B", "A (median call)",
                             *[f"{ld} neighbour(s), others' CPU {oc(ld):.2f}" if oc(ld) is not None else
                               f"{ld} neighbour(s)" for ld in loads]], rows))
    lrows = []
    for r in recs:
        lt = r.get("loader_truth")
        if not lt:
            continue
        sw = r.get("sweep") or {}
        lrows.append([r["load"], r["iteration"] + 1,
                      *[f"{lt['throughput'][str(w)]['median']:.0f} ({lt['throughput'][str(w)]['min']:.0f}–"
                        f"{lt['throughput'][str(w)]['max']:.0f}) / "
                        + (f"{sw[str(w)]:.0f}" if sw.get(str(w)) else "–") for w in SWEEP],
                      ", ".join(map(str, lt["plateau"])), r.get("best"), f"{lt['fetch_s'] * 1e3:.1f} ms",
                      f"{lt['compute_s'] * 1e3:.1f} ms",
                      f"{lt['wait_fraction_w0']:.2f} / {r['wait_fraction']:.2f}" if r.get("wait_fraction") is not None
                      else f"{lt['wait_fraction_w0']:.2f}"])
    lines.append(f"**Loader: truth beside each check / the check's sweep** (plain loops of the CNN train step over "
                 f"`DataLoader(images, batch_size={LOADER_BATCH}, num_workers=w)`, {data['loader_rounds']} "
                 "interleaved rounds, measured right before each `%%dataloader_check`; samples/s median (range) / "
                 "the sweep's throughput; plateau = settings within 10% of the truly best):\n")
    lines.append(C.md_table(["neighbours", "rep", *[f"{w} workers" for w in SWEEP], "truth plateau", "sweep's best",
                             "batch fetch alone", "step alone", "wait fraction at 0 workers: truth / check"],
                            lrows))
    # per task and flow
    hdr = ["task", "flow", "neighbours", "n", "right & decisive", "undecided", "confidently wrong", "errors",
           "contradictions", "max ! lines", "s/judgement", "s/flow", "others' CPU", "outcomes"]
    trows = []
    keyed: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for r in recs:
        flow = r.get("flow", "?") if r["task"] != "next" else f"next ({r.get('which', '?')})"
        keyed.setdefault((r["task"], flow, r["load"]), []).append(r)
    for (task, flow, ld), rs in sorted(keyed.items(), key=lambda kv: (TASKS.index(kv[0][0]), kv[0][1], kv[0][2])):
        sc = [r["score"] for r in rs]
        trows.append([task, flow, ld, len(rs), sc.count("right"), sc.count("undecided"), sc.count("wrong"),
                      sc.count("error"), sum(bool(r.get("contradiction")) for r in rs),
                      max((r.get("bangs", 0) for r in rs), default=0), med([r.get("wall_s") for r in rs]),
                      med([r.get("flow_s") for r in rs]), med([r.get("others_cores") for r in rs], "{:.2f}"),
                      "; ".join(sorted({outcome(r) for r in rs}))[:300]])
    lines.append("**Each flow against the truth** (*! lines*: the most in one output of that row; *s/judgement*: "
                 "the judging call; *s/flow*: for compare A + B + `%perf compare`, for --vs A + the `--vs` cell):\n")
    lines.append(C.md_table(hdr, trows))
    # targets
    tl = []
    for ld in loads:
        rs = [r for r in recs if r["load"] == ld]
        n, k_r, k_w = len(rs), sum(r["score"] == "right" for r in rs), sum(r["score"] == "wrong" for r in rs)
        k_c = sum(bool(r.get("contradiction")) for r in rs)
        msg = f"- {ld} neighbour(s): right & decisive {pct(k_r, n)}"
        if ld in TARGETS:
            msg += f" (target ≥ {TARGETS[ld]:.0%}: {'met' if n and k_r / n >= TARGETS[ld] else '**MISSED**'})"
        msg += f"; confidently wrong {k_w} (target 0: {'met' if k_w == 0 else '**MISSED**'})"
        msg += f"; contradictions {k_c} (target 0: {'met' if k_c == 0 else '**MISSED**'})"
        train = [r for r in rs if r.get("flow") in ("compare", "vs")]
        if train:
            fast = sum(r["score"] in ("right", "wrong") and (r.get("flow_s") or math.inf) <= DECIDED_S for r in train)
            msg += f"; train-step comparisons decided within {DECIDED_S:g} s (whole flow): {fast}/{len(train)}"
        if ld == 0:
            def outs(sel: list[dict[str, Any]]) -> list[int]:
                return [b for r in sel for b in [r.get("bangs", 0), *(r.get("bench_bangs") or []),
                                                 *([r["flame_bangs"]] if "flame_bangs" in r else [])]]
            quiet = outs([r for r in rs if (r.get("others_cores") or 0) < QUIET_CORES])
            every = outs(rs)
            over = sum(b > 2 for b in quiet)
            msg += (f"; outputs with > 2 ! lines on a measured-quiet machine (others < {QUIET_CORES:g} cores): "
                    + (f"{over} of {len(quiet)} (target 0: {'met' if over == 0 else '**MISSED**'})" if quiet else
                       "n/a, no trial ran quiet")
                    + f"; at 0 neighbours whatever the others' load: {sum(b > 2 for b in every)} of {len(every)}, "
                    f"most in one output {max(every, default=0)}")
        tl.append(msg + ".")
    lines.append("**Against the targets of issue 27** (all flows pooled):\n\n" + "\n".join(tl) + "\n")
    odd = [r for r in recs if r.get("contradiction") or r["score"] in ("wrong", "error")]
    if odd:
        lines.append("Confidently wrong, contradicting or failed outputs:\n\n" + "\n".join(
            f"- {r['task']} / {r.get('flow')}{' (' + r['which'] + ')' if r.get('which') else ''} @{r['load']}: "
            + (r.get("headline") or outcome(r)).replace("\n", " ")[:240]
            + (f" — contradiction: {r['contradiction']}" if r.get("contradiction") else "")
            + (f" — {'; '.join(r['notes'])}" if r.get("notes") else "")
            + (f" — names outside its call set: {', '.join(r['outside_call_set'])}"
               if r.get("outside_call_set") else "")
            + (f" — rests on flame #{r['flame_run']} of the train-step loop, code inference does not call"
               if r.get("rests_on_other_code") else "")
            for r in odd[:30]) + "\n")
    return "\n".join(lines)




# ---------------------------------------------------------------------------------------------
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    C.add_args(ap, "every task once at 0 neighbours, tiny budgets and step counts, one torch thread; a failing "
               "trial stops the run (smoke test; never written to the docs)")
    ap.add_argument("--reps", type=int, default=None, help="repetitions per task and load (default 3, --quick 1)")
    ap.add_argument("--loads", default=None, help="busy neighbour counts (default 0,1; --quick 0)")
    ap.add_argument("--tasks", default=",".join(TASKS), help=f"comma-separated, of: {', '.join(TASKS)}")
    ap.add_argument("--calibrate", type=float, default=None, metavar="S",
                    help="seconds of ABBA single calls per case and load for the truth (default 4, --quick 0.05)")
    ap.add_argument("--seed", type=int, default=2027)
    ap.add_argument("--json", default=None,
                    help="per-output data (default benchmarks/results/training_loop[_quick].json)")
    ap.add_argument("--report-only", metavar="JSON", help="re-render the section from a saved JSON; measure nothing")
    args = ap.parse_args()

    if args.report_only:
        data = json.loads(Path(args.report_only).read_text(encoding="utf-8"))
        C.publish("training_loop", report(data), args, row=SECTION_ROW)
        return 0

    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    if any(t not in TASKS for t in tasks):
        ap.error(f"unknown task(s) in {args.tasks!r}; tasks: {', '.join(TASKS)}")
    loads = [int(x) for x in (args.loads or ("0" if args.quick else "0,1")).split(",") if x.strip()]
    reps = args.reps or (1 if args.quick else 3)
    cal_s = args.calibrate if args.calibrate is not None else (0.05 if args.quick else 4.0)
    rounds = 1 if args.quick else 5
    out = Path(args.json or C.RESULTS / ("training_loop_quick.json" if args.quick else "training_loop.json")).resolve()

    import torch
    from IPython.testing.globalipapp import start_ipython

    import perfmagic

    os.environ.pop("PERFMAGIC_LEDGER_DIR", None)  # the ledger lives in the working directory, as a user's
    head = C.header("A training loop, one change at a time: verdicts and advice against independent truths (CPU)")
    tmp = tempfile.TemporaryDirectory(prefix="perfmagic-trainloop-")
    os.chdir(tmp.name)
    t_start = time.perf_counter()
    ip = start_ipython()
    run(ip, "%load_ext perfmagic")
    run(ip, INIT)
    ns = ip.user_ns
    calls = {"train": call_set(ns, "train_step(cnn, opt, x16, y16)"), "infer": call_set(ns, "predict(cnn, x16)")}
    print(f"ledger folder {tmp.name}; truths ({cal_s:g} s per case and load, {rounds} loader rounds)", flush=True)
    data: dict[str, Any] = {
        "header": head, "command": C.command(), "quick": bool(args.quick), "seed": args.seed, "loads": loads,
        "tasks": tasks, "torch_threads": torch.get_num_threads(), "calibrate_s": cal_s, "loader_rounds": rounds,
        "reps": reps, "iterations_done": 0, "loadavg_start": C.loadavg(), "calls": calls,
        "perfmagic_from": str(Path(perfmagic.__file__).resolve().parent),
        "truth": {"start": measure_truths(ns, loads, cal_s, 0, "start")}, "records": []}
    jobs = [(t, ld) for t in tasks for ld in loads]
    t_loop = time.perf_counter()
    for i in range(reps):
        order = jobs[:]
        random.Random(args.seed * 1000 + i).shuffle(order)
        for task, ld in order:
            recs = trial(ip, task, ld, i, data["truth"]["start"][str(ld)], calls, rounds)
            data["records"] += recs
            print(f"  rep {i + 1} {task} @{ld}: " + "; ".join(
                f"{r.get('flow')}{'/' + r['which'] if r.get('which') else ''} {r['score']}: {outcome(r)[:90]}"
                + (f" [{r['wall_s']:.1f}s]" if r.get("wall_s") else "") for r in recs), flush=True)
        data["iterations_done"] = i + 1
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(_jsonable(data), indent=1), encoding="utf-8")
        el = time.perf_counter() - t_loop
        print(f"repetition {i + 1}/{reps}: {el / 60:.1f} min, ETA {el / (i + 1) * (reps - i - 1) / 60:.1f} min",
              flush=True)
    if not args.quick:
        data["truth"]["end"] = measure_truths(ns, loads, cal_s, 0, "end")
    data["total_wall_s"] = time.perf_counter() - t_start
    data["loadavg_end"] = C.loadavg()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(_jsonable(data), indent=1, default=str), encoding="utf-8")
    print(f"per-output data written to {out}; total run time {data['total_wall_s'] / 60:.1f} min")
    C.publish("training_loop", report(data), args, row=SECTION_ROW)
    os.chdir(C.ROOT)
    tmp.cleanup()
    return 0


def _jsonable(data: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(data, default=str))


if __name__ == "__main__":
    sys.exit(main())
