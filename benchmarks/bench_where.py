"""Where a change went (``%perf compare``'s differential profile, issue 33), on planted changes beside 0
and 1 busy neighbour: is the changed function the top Δ with an interval that excludes 0, are untouched
functions left unnamed, does a net-zero change show both moves, do the Δs add up, and what does the
sampling cost?

Planted truth. Each shape is a step that calls three functions; A's and B's are compiled in two
namespaces from two sources (as two notebook cells define them), so a changed function is a
redefinition, as a user makes it:

* ``slow2x``: ``load``, ``parse``, ``train`` spin 1 ms of wall clock each (a ``perf_counter`` loop: its
  time does not depend on the machine's load); in B ``parse`` spins 2 ms.
* ``netzero``: in B ``load`` spins 0.5 ms and ``train`` 1.5 ms: the step's time does not change.
* ``torch``: ``embed`` (a 256² matmul), ``attn`` (a Python loop of 64 small matmuls in A, one ``bmm`` in B),
  ``head`` (a softmax): the op swapped inside one function.
* ``numpy``: ``load`` spins 1 ms, ``prep`` sorts an array of 200k floats in A, 400k in B (a numpy call with
  a larger array), ``score`` a dot product.
* ``aa``: ``slow2x``'s A on both sides.
* ``torch_op2x``: ``torch``'s B on both sides, but B's ``head`` takes the softmax of a 512×256 input (A: 256×256):
  one of three ops made 2× slower.
* ``torch_aa``: ``torch``'s A on both sides.

The torch shapes are also scored op by op (:data:`OP_CHANGES`): ``--where`` profiles each torch op after the
timed pairs (:func:`perfmagic.profile.where_ops.profile_ops`).

A trial is :func:`perfmagic.bench_pair` of A's and B's step with a :class:`~perfmagic.profile.where.PairSampler`
as ``%perf compare --where`` makes it (measured again with the thread pools limited to the free cores
when they were oversubscribed, as ``%perf compare`` does) (budget 1 s; a clear verdict stops the pairs once each side has
300 samples), then :func:`~perfmagic.profile.where.attribute`. *Top Δ right*: the
first row is the changed function and named (its 99% interval excludes 0; torch code: or the change in the
ops it called, profiled after the pairs, is named), with the right sign. *Untouched named*: over every
(trial, untouched function), the share named; in the A/A, every function is untouched. *Both moves*:
the net-zero trials whose two moved functions are both named with the right signs. *Δs add up*: the
trials whose measured B − A (the pair's medians) lies in the interval of the attributed total. *Cost*:
two steps of fixed work (:data:`COST_STEPS`) in rounds of a block without and a block with the sampler
(:func:`one_cost`: the median per-round ratio), and ``attribute()``'s time over the comparison's.

    .venv/bin/python benchmarks/bench_where.py            # 20 trials per shape and load (~12 min on 2 cores)
    .venv/bin/python benchmarks/bench_where.py --quick    # smoke test: one trial per shape, quiet only
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402
from bench_ab import wilson  # noqa: E402

LOADS = (0, 1)
JSON = C.RESULTS / "where.json"
BUDGET = 0.2 if C.QUICK else 1.0
TARGETS = {"top Δ right": "≥ 95%", "untouched named": "≤ 5%", "both moves (net zero)": "shown",
           "Δs add up": "within the total's interval", "cost": "≤ 10% of the comparison's time"}

SPIN = """
import time
def _spin(s):
    end = time.perf_counter() + s
    while time.perf_counter() < end:
        pass
"""


def _three(a: float, b: float, c: float) -> str:
    body = "    end = time.perf_counter() + {s}\n    while time.perf_counter() < end:\n        pass\n"
    return SPIN + "".join(f"def {n}():\n" + body.format(s=s) for n, s in (("load", a), ("parse", b), ("train", c))) \
        + "def step():\n    load(); parse(); train()\n"


TORCH = """
import torch
torch.manual_seed(0)
x, w = torch.randn(256, 256), torch.randn(256, 256)
q, k = torch.randn(64, 32, 32), torch.randn(64, 32, 32)
def embed():
    return x @ w
def head():
    return torch.softmax(x, dim=1)
def step():
    embed(); attn(); head()
"""
ATTN_LOOP = "def attn():\n    out = []\n    for i in range(q.shape[0]):\n        out.append(q[i] @ k[i])\n    return out\n"
ATTN_BMM = "def attn():\n    return torch.bmm(q, k)\n"
HEAD_2X = "x2 = torch.randn(512, 256)\ndef head():\n    return torch.softmax(x2, dim=1)\n"  # after TORCH: redefines head

NUMPY = SPIN + """
import numpy as np
rng = np.random.default_rng(0)
data = rng.random({n})
u, v = rng.random(200_000), rng.random(200_000)
def load():
    _spin(1e-3)
def prep():
    return np.sort(data)
def score():
    return float(u @ v)
def step():
    load(); prep(); score()
"""

# shape -> (A source, B source, the changed functions with the sign of their change, the untouched ones)
SHAPES: dict[str, tuple[str, str, dict[str, int], tuple[str, ...]]] = {
    "slow2x": (_three(1e-3, 1e-3, 1e-3), _three(1e-3, 2e-3, 1e-3), {"parse": +1}, ("load", "train")),
    "netzero": (_three(1e-3, 1e-3, 1e-3), _three(0.5e-3, 1e-3, 1.5e-3), {"load": -1, "train": +1}, ("parse",)),
    "torch": (TORCH + ATTN_LOOP, TORCH + ATTN_BMM, {"attn": -1}, ("embed", "head")),
    "numpy": (NUMPY.format(n=200_000), NUMPY.format(n=400_000), {"prep": +1}, ("load", "score")),
    "aa": (_three(1e-3, 1e-3, 1e-3), _three(1e-3, 1e-3, 1e-3), {}, ("load", "parse", "train")),
    "torch_op2x": (TORCH + ATTN_BMM, TORCH + ATTN_BMM + HEAD_2X, {"head": +1}, ("embed", "attn")),
    "torch_aa": (TORCH + ATTN_LOOP, TORCH + ATTN_LOOP, {}, ("embed", "attn", "head")),
}
#: torch shapes, op by op (``%perf compare --where`` profiles each op after the timed pairs): the ops the
#: change moves, with the sign of their change; every other op the profiler saw is untouched. The loop →
#: ``bmm`` swap removes the loop's indexing (``select``, ``as_strided``) and its 64 ``matmul``/``mm`` calls
#: (with their ``resolve_conj``); ``torch_op2x`` doubles the softmax's input; ``torch_aa`` changes nothing.
OP_CHANGES: dict[str, dict[str, int]] = {
    "torch": {"aten::bmm": +1, "aten::mm": -1, "aten::matmul": -1, "aten::select": -1, "aten::as_strided": -1,
              "aten::resolve_conj": -1},
    "torch_op2x": {"aten::_softmax": +1},
    "torch_aa": {},
}


def namespace(src: str, name: str) -> dict[str, Any]:
    ns: dict[str, Any] = {}
    exec(compile(src, f"<cell {name}>", "exec"), ns)
    return ns


def one_trial(shape: str) -> dict[str, Any]:
    import contextlib

    from perfmagic.core.load import free_cores
    from perfmagic.core.threads import env_oversubscription, thread_limits
    from perfmagic.profile.where import WHERE_MIN_SAMPLES, PairSampler, attribute
    from perfmagic.timing.pair import bench_pair

    src_a, src_b, changed, untouched = SHAPES[shape]
    ns_a, ns_b = namespace(src_a, "A"), namespace(src_b, "B")
    t0 = time.perf_counter()
    # as %perf compare --where measures (timing/flow.remeasure): when the pair's thread pools were larger than
    # the cores the load left free, A and B are measured again with the pools limited to those cores
    limit = None
    for _ in range(2):
        watch = PairSampler(min_samples=WHERE_MIN_SAMPLES, ops=shape in OP_CHANGES)  # --where (torch: ops too)
        with thread_limits(limit) if limit is not None else contextlib.nullcontext():
            pr = bench_pair("step()", "step()", globals=ns_a, globals_b=ns_b, budget=BUDGET, watch=watch)
        if limit is not None or not env_oversubscription(pr.b.env):
            break
        limit = free_cores(pr.b.env)
    wall = time.perf_counter() - t0
    t1 = time.perf_counter()
    w = attribute(watch, labels=("A", "B"))
    w.rows()  # the bootstrap is part of the cost
    cost_s = time.perf_counter() - t1
    med_a, med_b = pr.a.median, pr.b.median
    rows = {r.name: r for r in w.rows()}
    first = w.rows()[0] if w.rows() else None
    iv = w.total_interval
    out = {"shape": shape, "refused": w.refused is not None, "pairs": w.n_pairs, "samples": w.n_samples,
            "thread_limit": limit,
            "wall_s": wall, "attribute_s": cost_s, "measured_delta_s": med_b - med_a,
            "total_delta_s": w.total_delta_s, "total_low_s": iv[0] if iv else None,
            "total_high_s": iv[1] if iv else None,
            "first": first.name if first else None, "first_named": bool(first and first.named),
            "first_delta_s": first.evidence_s if first else None, "first_by_ops": bool(first and first.by_ops),
            "changed": {n: _row(rows.get(n)) for n in changed}, "signs": changed,
            "untouched": {n: _row(rows.get(n)) for n in untouched},
            "ops": _ops(w.ops, OP_CHANGES[shape]) if shape in OP_CHANGES else None}
    out["hint"] = _follow_hint(w, shape, ns_a, ns_b, limit) if changed and shape != "netzero" \
        and not (out["first_named"] and out["first"] in changed) else None
    return out


def _follow_hint(w: Any, shape: str, ns_a: dict[str, Any], ns_b: dict[str, Any], limit: Any) -> dict[str, Any]:
    """A missed trial: did the output say it cannot tell, with a budget, and does that budget name the
    changed function (``%perf compare --where -b N``: the pairs go on to the budget)?"""
    import contextlib

    from perfmagic.core.threads import thread_limits
    from perfmagic.profile.where import TELL_MAX, PairSampler, attribute
    from perfmagic.timing.flow import WHERE_TO_BUDGET
    from perfmagic.timing.pair import bench_pair

    u = w.untold()
    if u is None or u[1] > TELL_MAX:
        return {"budget_s": None, "right": False, "said": u is not None}
    budget = w.tell_budget_s(u[1])
    watch = PairSampler(min_samples=WHERE_TO_BUDGET)
    with thread_limits(limit) if limit is not None else contextlib.nullcontext():
        bench_pair("step()", "step()", globals=ns_a, globals_b=ns_b, budget=budget, watch=watch)
    rows = attribute(watch).rows()
    changed = SHAPES[shape][2]
    right = bool(rows) and rows[0].named and rows[0].name in changed \
        and (rows[0].evidence_s > 0) == (changed[rows[0].name] > 0)
    return {"budget_s": budget, "right": right, "said": True, "untold": u[0].name, "factor": u[1]}


def _ops(ops: Any, changed: dict[str, int]) -> dict[str, Any] | None:
    """The op table's answer: the first row and whether it is a moved op, named, with the right sign;
    how many untouched ops were named; the profiled pairs' time."""
    if ops is None:
        return {"refused": "no op table", "profiled_s": 0.0}
    rows = ops.rows()
    first = rows[0] if rows else None
    untouched = [r for r in rows if r.name not in changed]
    return {"refused": str(ops.refused) if ops.refused is not None else None, "pairs": ops.n_pairs,
            "profiled_s": ops.profiled_s, "first": first.name if first else None,
            "first_right": bool(first and first.named and first.name in changed
                                and (first.delta_s > 0) == (changed[first.name] > 0)),
            "untouched": len(untouched), "untouched_named": sum(r.named for r in untouched),
            "named": [r.name for r in rows if r.named], "total_delta_s": ops.total_delta_s}


def _row(r: Any) -> dict[str, Any] | None:
    if r is None:
        return None
    o = r.ops
    return {"delta_s": r.delta_s, "low_s": r.low_s, "high_s": r.high_s, "named": r.named, "share": r.share,
            "by_ops": r.by_ops, "ops_delta_s": o.delta_s if o else None, "ops_low_s": o.low_s if o else None,
            "ops_high_s": o.high_s if o else None, "ops_named": o.named if o else None}


#: the sampler's cost is measured on steps of fixed work (a deadline spin, as the planted shapes use,
#: runs for its time whatever the sampler takes from it, so it cannot show a cost): a pure-Python loop
#: (the GIL held; each sample makes it hand the GIL over) and the torch loop of 64 small matmuls (the GIL
#: dropped in every op)
COST_STEPS = {
    "python": "def work():\n    s = 0\n    for i in range(3000):\n        s += i * i\n    return s\n"
              "def step():\n    work(); work(); work()\n",
    "torch": TORCH + ATTN_LOOP,
}


COST_ROUNDS, COST_BLOCK_S = 20, 0.025  # rounds of (a block without, a block with), 25 ms blocks


def one_cost(trial: int) -> dict[str, Any]:
    """Each fixed-work step in :data:`COST_ROUNDS` rounds of two blocks of calls, one without and one with
    the sampler running (as in a pair: started, the block filed as pair 0, A), the order alternating by
    round: adjacent blocks share the machine's speed state (this VM's states last seconds; two 1 s runs
    back to back differed by ×0.65–×1.66), so the per-round ratio cancels it. Returns the median per-call
    times and the median of the rounds' ratios (with ÷ without)."""
    from perfmagic.profile.where import PairSampler

    out: dict[str, Any] = {}
    for name, src in COST_STEPS.items():
        step = namespace(src, "A")["step"]
        for _ in range(20):
            step()
        t0 = time.perf_counter()
        for _ in range(5):
            step()
        calls = max(3, int(COST_BLOCK_S / max((time.perf_counter() - t0) / 5, 1e-6)))
        times: dict[str, list[float]] = {"without": [], "with": []}
        ratios = []
        for r in range(COST_ROUNDS):
            got = {}
            for mode in (("without", "with") if (trial + r) % 2 == 0 else ("with", "without")):
                watch = PairSampler() if mode == "with" else None
                if watch is not None:
                    watch.start()
                    watch.begin(0, 0)
                t1 = time.perf_counter()
                for _ in range(calls):
                    step()
                got[mode] = (time.perf_counter() - t1) / calls
                if watch is not None:
                    watch.end(got[mode] * calls, calls)
                    watch.stop()
                times[mode].append(got[mode])
            ratios.append(got["with"] / got["without"])
        out[name] = {"without": statistics.median(times["without"]), "with": statistics.median(times["with"]),
                     "ratio": statistics.median(ratios)}
    return out


def run(trials: int, quick: bool) -> dict[str, Any]:
    from perfmagic.core.neighbours import busy_neighbours

    rng = random.Random(20261126)
    _start_profiler()
    got: list[dict[str, Any]] = []
    costs: list[dict[str, Any]] = []
    for it in range(trials):
        for load in LOADS[:1] if quick else rng.sample(LOADS, len(LOADS)):
            with busy_neighbours(load) as nb:
                for shape in rng.sample(list(SHAPES), len(SHAPES)):
                    got.append({"load": load, "trial": it, **one_trial(shape)})
                c = one_cost(it)
            for r in got[-len(SHAPES):]:
                r["others_cores"] = nb.others_cores
            costs.append({"load": load, "others_cores": nb.others_cores, **c})
            print(f"trial {it + 1}/{trials} load {load}: " + ", ".join(
                f"{r['shape']} → {r['first']}{'*' if r['first_named'] else ''}" for r in got[-len(SHAPES):])
                + "; cost " + ", ".join(f"{k} ×{v['ratio']:.3f}" for k, v in c.items()), flush=True)
    return {"date": C.today(), "commit": C.git_state(), "machine": C.machine(), "command": C.command(),
            "load_before": C.LOAD_BEFORE, "trials": got, "costs": costs}


def _start_profiler() -> None:
    """torch.profiler's start-up (about 2 s, once per process), paid before the trials: no trial's cost
    depends on whether a torch shape came first."""
    from torch.profiler import profile

    from perfmagic.profile.where_ops import _quiet_stderr

    with _quiet_stderr(), profile():
        pass


def rate(k: int, n: int) -> str:
    if not n:
        return "—"
    lo, hi = wilson(k, n)
    return f"{k}/{n} = {k / n:.0%} ({lo:.0%}–{hi:.0%})"


def _top_right(t: dict[str, Any]) -> bool:
    if t["shape"] == "netzero":  # both moves named, with the right signs
        return all(r is not None and r["named"] and (r["delta_s"] > 0) == (t["signs"][n] > 0)
                   for n, r in t["changed"].items())
    return bool(t["signs"]) and t["first_named"] and t["first"] in t["signs"] \
        and (t.get("first_delta_s", t["signs"][t["first"]]) > 0) == (t["signs"][t["first"]] > 0)


def _missed(ts: list[dict[str, Any]]) -> str:
    """The trials whose changed function was not named first: how many said "cannot tell" with a budget,
    and how many of those named it when measured again at that budget."""
    hs = [t["hint"] for t in ts if t.get("hint") is not None]
    if not hs:
        return "—"
    given = [h for h in hs if h["budget_s"] is not None]
    budgets = sorted(h["budget_s"] for h in given)
    at = f" at -b {budgets[0]}–{budgets[-1]}" if budgets and budgets[0] != budgets[-1] else (
        f" at -b {budgets[0]}" if budgets else "")
    return f"{len(hs)}: {len(given)} said; {sum(h['right'] for h in given)}/{len(given)} named{at}"


def _adds_up(t: dict[str, Any]) -> bool:
    return t["total_low_s"] is not None and t["total_low_s"] <= t["measured_delta_s"] <= t["total_high_s"]


def report(data: dict[str, Any]) -> str:
    rows = []
    for load in LOADS:
        for shape in SHAPES:
            ts = [t for t in data["trials"] if t["load"] == load and t["shape"] == shape]
            if not ts:
                continue
            un = [r for t in ts for r in t["untouched"].values()]
            others = [t["others_cores"] for t in ts if t.get("others_cores") is not None]
            rows.append([load, shape, len(ts),
                         "—" if not SHAPES[shape][2] else rate(sum(map(_top_right, ts)), len(ts)),
                         "—" if not SHAPES[shape][2] else sum(_top_right(t) and t.get("first_by_ops", False) for t in ts),
                         rate(sum(bool(r and r["named"]) for r in un), len(un)),
                         sum(bool(r and r["named"] and r.get("by_ops")) for r in un),
                         rate(sum(map(_adds_up, ts)), len(ts)), _missed(ts), sum(t["refused"] for t in ts),
                         sum(t.get("thread_limit") is not None for t in ts),
                         f"{statistics.median(t['pairs'] for t in ts):.0f}",
                         f"{statistics.median(t['samples'] for t in ts):.0f}",
                         f"{statistics.median(t['wall_s'] for t in ts):.2f}",
                         f"{statistics.median(others):.2f}" if others else "n/a"])
    table = C.md_table(["busy neighbours", "shape", "trials", "top Δ right (named)", "of which by its ops",
                        "untouched named", "of which by their ops",
                        "Δs add up", "missed: said cannot tell; named at its -b", "cannot tell", "thread limit", "pairs (median)", "samples (median)", "s per comparison (median)",
                        "others' cores"], rows)
    c_rows = []
    for load in LOADS:
        cs = [c for c in data["costs"] if c["load"] == load]
        ts = [t for t in data["trials"] if t["load"] == load]
        if cs:
            cells = []
            for step in COST_STEPS:
                ratios = [c[step].get("ratio", c[step]["with"] / c[step]["without"]) for c in cs if step in c]
                cells.append(f"×{statistics.median(ratios):.3f} (×{min(ratios):.3f} … ×{max(ratios):.3f})"
                             if ratios else "n/a")
            c_rows.append([load, len(cs), *cells,
                           f"{statistics.median(t['attribute_s'] / t['wall_s'] for t in ts):.1%}"])
    c_table = C.md_table(["busy neighbours", "trials (20 rounds each)", "Python loop: per call with the sampler ÷ without",
                          "torch op loop: with ÷ without", "attribute() ÷ the comparison's wall time"], c_rows)
    targets = ", ".join(f"{k}: {v}" for k, v in TARGETS.items())
    o_table = _ops_table(data)
    head = C.header("Where a change went: `%perf compare`'s differential profile on planted changes (CPU)")
    return (head + f"- **targets (issue 33):** {targets}\n\n"
            "Each trial: `bench_pair` of A's and B's step (two namespaces, as two cells define them), 1 s budget, "
            "sampled by `PairSampler` as `--where` makes it (1000 Hz, in-process; a clear verdict stops the "
            "pairs once each side has 300 samples), then `attribute()` (99% "
            "intervals, 2000 bootstrap resamples of the pairs). Rates are k/n with Wilson 95% intervals. "
            "*Top Δ right*: the changed function is the first row and named, with the right sign (by its samples; "
            "torch code also by the change in the ops it called, profiled after the pairs: the ops table below, "
            "filed by calling function); for `netzero`, both moved "
            "functions named with the right signs. *Of which by its ops*: the right first rows named by their ops' "
            "change where their sampled interval alone included 0. *Untouched named*: the share of (trial, "
            "untouched function) named (*of which by their ops*: as before). *Δs add up*: the pair's measured B − A (medians) lies in the attributed total's interval. "
            "*Missed*: the trials whose changed function was not the first named row (not `netzero`): how many "
            "said \"cannot tell, because … too few samples\" with the budget that would tell a move of that size "
            "(`WhereResult.untold()`; the output's `%perf compare --where -b N`), and how many named the changed "
            "function first when measured again at that budget, the pairs going on to it as `--where -b` makes "
            "them. "
            "*Thread limit*: the trials measured again with the thread pools limited to the cores the load left "
            "free, as `%perf compare` does when the pair's pools were larger (the trial's figures are then "
            "that measurement's).\n\n"
            + table + "\nCost of sampling: two steps of fixed work (a pure-Python loop, the GIL held, and the torch loop of 64 "
            "small matmuls, the GIL dropped in each op), each trial 20 rounds of two 25 ms blocks of calls, one "
            "without and one with the sampler at its default 1000 Hz (the order alternating by round; adjacent "
            "blocks share the machine's speed state, which two 1 s runs back to back did not: ×0.65–×1.66); the "
            "median over the trials of each trial's median per-round ratio with ÷ without, and its range over "
            "the trials. (The planted shapes' deadline spins cannot show this cost: "
            "a spin runs for its time whatever the sampler takes from it. Until 2026-11-27 this table timed one, "
            "and read ×1.00.) Both sides of a `--where` pair are sampled alike, so the cost inflates A and B "
            "together; the verdict is a ratio.\n\n"
            + c_table + "\nTorch shapes, op by op: after the timed pairs, 16 pairs of untimed calls under `torch.profiler`, "
            "in one profiler session (one warm-up pair first, dropped; 24 when an op is one pair short of named "
            "after 16; the pairs past 8 only where all 16 fit in a tenth of the timed pairs' time), each op's self CPU time per "
            "call, Δ = the median over the pairs with its distribution-free 99% interval; an op is named when that interval excludes 0 and |Δ| ≥ 2% of A's op "
            "time (the functions' floor). *Top op right*: the first row is an op the change moved (`torch`: `aten::bmm` +, the loop's "
            "`aten::mm`, `aten::matmul`, `aten::select`, `aten::as_strided`, `aten::resolve_conj` −; "
            "`torch_op2x`: `aten::_softmax` +), named, with the right sign. *Untouched ops named*: the share of "
            "(trial, op the change did not move) named. *Profiling ÷ comparison*: the profiled pairs' wall time "
            "over the whole comparison's (the profiler's start-up, about 2 s once per process, is paid before the "
            "trials here; a notebook pays it in its first torch comparison). *Op Δ ÷ measured Δ*: the ops' total Δ over the pair's measured B − A (the rest is Python "
            "around the ops).\n\n" + o_table)


def _ops_table(data: dict[str, Any]) -> str:
    from perfmagic.profile.where_ops import OPS_MORE_PAIRS as OPS_MORE

    rows = []
    for load in LOADS:
        for shape, changed in OP_CHANGES.items():
            ts = [t["ops"] | {"measured": t["measured_delta_s"], "wall": t["wall_s"]} for t in data["trials"]
                  if t["load"] == load and t["shape"] == shape and t.get("ops")]
            if not ts:
                continue
            ok = [t for t in ts if t["refused"] is None]
            ratios = [t["total_delta_s"] / t["measured"] for t in ok if t["measured"] and t["total_delta_s"] is not None]
            rows.append([load, shape, len(ts), len(ts) - len(ok), sum(t.get("pairs") == OPS_MORE for t in ts),
                         f"{statistics.median(t.get('pairs') or 0 for t in ts):.0f}",
                         "—" if not changed else rate(sum(t["first_right"] for t in ok), len(ts)),
                         rate(sum(t["untouched_named"] for t in ok), sum(t["untouched"] for t in ok)),
                         f"{statistics.median(t['profiled_s'] / t['wall'] for t in ts):.1%}",
                         f"{statistics.median(ratios):.2f}" if changed and ratios else "—"])
    return C.md_table(["busy neighbours", "shape", "trials", "no op table", f"{OPS_MORE} pairs", "profiled pairs (median)", "top op right (named)",
                       "untouched ops named", "profiling ÷ comparison (median)", "op Δ ÷ measured Δ (median)"], rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    C.add_args(ap, "one trial per shape at 0 neighbours, 0.2 s budgets (smoke test; never written to the docs)")
    ap.add_argument("--trials", type=int, default=20, help="trials per shape and load (default 20)")
    ap.add_argument("--report-only", action="store_true", help=f"re-render the table from {JSON}")
    args = ap.parse_args()
    if args.report_only:
        data = json.loads(JSON.read_text())
    else:
        data = run(1 if args.quick else args.trials, args.quick)
        if not args.quick:
            JSON.parent.mkdir(parents=True, exist_ok=True)
            JSON.write_text(json.dumps(data, indent=1))
    C.publish("where", report(data), args, row="where a change went (`%perf compare`): the changed function named "
              "first, untouched ones not, net-zero moves, Δs adding up, the sampler's cost; 0 and 1 busy neighbour")


if __name__ == "__main__":
    main()
