"""The evidence each magic leaves in the ledger, read as bounds on what a change can gain
(:func:`perfmagic.advisor.next.next_step` chooses among them). One reader per magic: ``%%dataloader_check``
(the data-wait share), ``%%flame`` (self-time shares), ``%%roofline`` (the fraction of the compute or the
bandwidth roof), ``%%amdahl`` (the serial fraction). Whether a piece of evidence describes the code being
advised on at all is :mod:`perfmagic.advisor.scope`'s question, asked before these readers run.
"""

from __future__ import annotations

import math
from typing import Any

from .result import Candidate
from .scope import share_interval

#: a function whose share of self time is below this even at the top of its 95% interval is not "hot":
#: the time is spread
HOT_SHARE = 0.20
#: the data-wait share above which a loop is input-bound (docs/method.md §8)
INPUT_BOUND = 0.30
#: at this fraction of the roof and above, only less work or lower precision can help
NEAR_ROOF = 0.60
#: above this fraction of the roof the roof is not this code's (data in cache, a roof measured under load)
ABOVE_ROOF = 1.05
#: below this fraction of the roof, overheads (not the hardware) set the pace
FAR_FROM_ROOF = 0.30
#: serial fractions from here on make more workers a poor bet
SERIAL_HIGH = 0.25



# -- small helpers ------------------------------------------------------------------------------


def _num(value: Any) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _x(v: float | None) -> str:
    if v is None:
        return "∞"
    return f"{v:.1f}×" if v < 9.95 else f"{v:.0f}×"


def _pct(f: float) -> str:
    return f"{f * 100:.0f}%"


def wilson_high(p: float, n: int, z: float = 1.96) -> float:
    """The upper end of the 95% Wilson interval of a share ``p`` observed in ``n`` samples."""
    return share_interval(p, n, z)[1]


def wilson_low(p: float, n: int, z: float = 1.96) -> float:
    """The lower end of the 95% Wilson interval of a share ``p`` observed in ``n`` samples."""
    return share_interval(p, n, z)[0]


def samples_to_tell(p: float, need: float, limit: int = 1_000_000) -> int | None:
    """The fewest samples at which a share ``p`` would have its whole 95% interval above ``need``
    (None when ``p`` is not above it: no number of samples separates them)."""
    if p <= need:
        return None
    n = 1
    while wilson_low(p, n) < need:
        n *= 2
        if n > limit:
            return None
    lo, hi = n // 2, n
    while lo + 1 < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if wilson_low(p, mid) >= need else (mid, hi)
    return hi


def _fn_name(name: str) -> tuple[str, str]:
    """``"parse (In [3]:4)"`` -> ``("parse", "In [3]:4")``."""
    name = str(name)
    if name.endswith(")") and " (" in name:
        fn, _, where = name[:-1].partition(" (")
        return fn, where
    return name, ""


_LIBRARY_PARTS = ("site-packages/", "dist-packages/", "/lib/python", "<frozen", "<built-in")


def _user_code(where: str) -> bool:
    """Is a flame frame's ``where`` (``"In [3]:4"``, ``"graph.py:979"``, a path) the user's own code?
    A short file name is looked up among the loaded modules: one under site-packages or the
    standard library is a library's."""
    import sys

    w = where.replace("\\", "/")
    if w.startswith("In ["):
        return True
    if any(s in w for s in _LIBRARY_PARTS):
        return False
    file = w.rsplit(":", 1)[0]
    if not file.endswith(".py"):
        return True
    if "/" in file:
        return True
    for mod in list(sys.modules.values()):
        f = str(getattr(mod, "__file__", None) or "").replace("\\", "/")
        if f.endswith("/" + file) and any(s in f for s in _LIBRARY_PARTS):
            return False
    return True


def _from_dataloader(r: dict[str, Any], label: str | None, findings: list[str]) -> tuple[Candidate | None, float | None]:
    """(candidate, cap on compute-side gains)."""
    m, o = r.get("metrics") or {}, r.get("options") or {}
    w = _num(m.get("data_wait_fraction"))
    if w is None:
        findings.append(f"dataloader_check #{r['id']}: no data-wait share recorded; nothing to go on")
        return None, None
    if w < INPUT_BOUND and m.get("verdict") != "input-bound":
        findings.append(f"not input-bound: {_pct(w)} of each step waits for data (dataloader_check #{r['id']}): "
                        "the loader is not the lever")
        return None, None
    free = 1 / (1 - w) if w < 1 else math.inf
    free = max(free, _num(m.get("speedup_if_data_free")) or 0.0)
    high = None if math.isinf(free) else free
    workers = m.get("num_workers")
    loader = o.get("loader") or "loader"
    best = m.get("best_num_workers")
    if workers == 0:
        action = "load batches in DataLoader workers (num_workers > 0, persistent_workers=True)"
        if best:
            action = f"load batches in DataLoader workers (num_workers={best}, the sweep's best)"
    else:
        action = "a faster input pipeline: more workers, cheaper transforms, or caching the decoded data"
    cores = m.get("cores")
    basis = (f"input-bound, {_pct(w)} wait (dataloader_check #{r['id']}): at most {_x(high)} with infinitely "
             "fast data")
    low_why = ("nothing guarantees a gain: workers need free cores"
               + (f" ({cores} here, shared with the step)" if cores else ""))
    sweep = "" if best else f"%%dataloader_check {loader} --sweep num_workers=0,2,4, then "
    subject = f"-l {label} " if label else ""
    cmd = f"{sweep}%%gpubench {subject}--vs baseline with the new loader"
    cap = 1 / w if w > 0 else None
    findings.append(f"while {_pct(w)} of each step waits for data, a faster step gains at most {_x(cap)}")
    return Candidate("I/O", action, 1.0, high, basis, cmd, (r["id"],), low_why), cap


def _more_samples(r: dict[str, Any], label: str | None, n_now: int, n_need: int | None) -> str:
    """The ``%%flame`` that takes ``n_need`` samples: a higher rate while that reaches them in the
    cell's run time, else a longer run (the code repeated in the cell)."""
    from ..profile.flame import MAX_RATE

    m = r.get("metrics") or {}
    subject = f"-l {label} " if label else ""
    wall = _num(m.get("wall_s")) or _num(m.get("sampled_s"))
    rate = _num(m.get("rate_hz")) or (n_now / wall if wall and n_now else None)
    if n_need is None:
        return f"%%flame {subject}on a longer run of the code (the code repeated in the cell)"
    if wall and wall > 0:
        want = math.ceil(n_need * 1.25 / wall / 50) * 50
        if want <= MAX_RATE and (rate is None or want > rate):
            return f"%%flame {subject}--rate {want} (≥ {n_need} samples in its {wall:.2g} s)"
        if rate:
            reps = math.ceil(n_need * 1.25 / (min(MAX_RATE, max(rate, want)) * wall))
            return (f"%%flame {subject}on the code repeated {max(reps, 2)} times in the cell (≥ {n_need} "
                    "samples)")
    return f"%%flame {subject}on a longer run of the code (≥ {n_need} samples)"


def _from_flame(r: dict[str, Any], label: str | None, findings: list[str],
                min_effect: float = 0.10) -> tuple[Candidate | None, str | None]:
    """(candidate, a measurement to take first).

    Hotness is read from the share's 95% interval, not a sample count: 15 of 15 samples put a
    function's share above 80%. A function is proposed when its whole interval lies above the share
    whose removal would gain the bar (``min_effect``: 10% needs 9.1% of the time); "measure first"
    only when the interval reaches both below that share and above :data:`HOT_SHARE`."""
    m = r.get("metrics") or {}
    f, n = _num(m.get("top1_self_fraction")), int(_num(m.get("n_samples")) or 0)
    name = m.get("top1_self_name")
    subject = f"-l {label} " if label else ""
    if f is None or not name or n <= 0:
        findings.append(f"flame #{r['id']}: no function sampled (the cell waited, or ran too briefly)")
        return None, f"%%flame {subject}on a longer run of the code (or --idle when it waits)"
    fn, where = _fn_name(name)
    lo, hi = share_interval(f, n)
    need = min_effect / (1 + min_effect)  # the share a function must hold for its removal to clear the bar
    within = m.get("within") or []
    scope = (f" within `{within[0]}`, which '{label}' calls ({_pct(_num(m.get('within_share')) or 0)} of the "
             "profile)") if within else ""
    if hi < HOT_SHARE:
        findings.append(f"no hot function: the top one, `{fn}`, has {_pct(f)} of the self time{scope} (flame "
                        f"#{r['id']}); the time is spread")
        return None, None
    if lo < need:
        findings.append(f"cannot tell yet: `{fn}` has {_pct(f)} of {n} samples{scope} (flame #{r['id']}), "
                        f"{_pct(lo)}–{_pct(hi)} at 95%: it may hold less than the {need * 100:.1f}% that a "
                        f"{_pct(min_effect)} gain needs")
        return None, _more_samples(r, label, n, samples_to_tell(f, need))
    share = f"{_pct(f)} of self time in `{fn}`"
    counted = f"flame #{r['id']}, {n} samples, {_pct(lo)}–{_pct(hi)} at 95%"
    if _user_code(where):
        high = 1 / (1 - hi) if hi < 1 else None
        basis = f"{share}{scope} ({counted}): at most {_x(high)} if it cost nothing"
        level = "algorithm"
        action = (f"rewrite `{fn}`: a better algorithm or data structure, or vectorize its Python loop "
                  "(NumPy/torch ops)")
    else:  # a library's time, spent on behalf of the code that calls it: the change acts on those calls
        high = None
        basis = (f"{share}, a library function ({where}){scope} ({counted}), spent for the code that calls "
                 "it: fewer, larger calls cut it and the work around it, so the profile sets no upper bound")
        level = "vectorization"
        action = f"call `{fn}` less often: vectorize the code that calls it (fewer, larger operations)"
        return Candidate(level, action, 1.0, high, basis, f"%%gpubench {subject}--vs baseline with its callers "
                         "vectorized", (r["id"],), "nothing guarantees a gain: only a change that removes its "
                         "time pays"), None
    cmd = f"%%gpubench {subject}--vs baseline with `{fn}` changed"
    return Candidate(level, action, 1.0, high, basis, cmd, (r["id"],),
                     "nothing guarantees a gain: only a change that removes its time pays"), None


def _from_roofline(r: dict[str, Any], label: str | None, findings: list[str]) -> Candidate | None:
    m = r.get("metrics") or {}
    frac, dtype = _num(m.get("fraction_of_roof")), m.get("dtype") or "this precision's"
    memory = m.get("bound") == "memory"
    roof = "bandwidth" if memory else dtype
    if frac is None or frac <= 0:
        findings.append(f"roofline #{r['id']}: no fraction of the roof recorded")
        return None
    if frac > ABOVE_ROOF:  # above the roof: the roof is not this code's (cache, a loaded calibration)
        findings.append(f"roofline #{r['id']}: at {_pct(frac)} of the {roof} roof, above it: "
                        + ("the data stays in cache, so the DRAM roof does not bound it" if memory else
                           "the roof is too low (measured under load?): %roofline --calibrate")
                        + "; no bound from it")
        return None
    subject = f"-l {label} " if label else ""
    if frac >= NEAR_ROOF:
        basis = (f"{'memory' if memory else 'compute'}-bound at {_pct(frac)} of the {roof} roof (roofline "
                 f"#{r['id']}): only " + ("less data movement" if memory else "less work or lower precision")
                 + f" can help; at most {_x(1 / frac)} "
                 + ("at this traffic" if memory else "at this precision and work") + ", if the roof is right")
        findings.append(f"not threads: the {roof} roof was measured with every core (roofline #{r['id']})")
        if memory:
            return Candidate("memory", "move less data: fuse passes, drop temporaries, a smaller storage dtype "
                             "(not more threads)", 1.0, None, basis,
                             f"%%roofline {subject}on the changed code, then %%gpubench {subject}--vs baseline",
                             (r["id"],), "nothing guarantees a gain; less traffic per result raises the "
                             "attainable rate, so no upper bound holds for it")
        return Candidate("compute", f"less work or a lower precision than {dtype} (not more threads)", 1.0, None,
                         basis, f"%%roofline {subject}on the changed code, then %%gpubench {subject}--vs baseline",
                         (r["id"],), "nothing guarantees a gain; lower precision raises the roof, so no upper "
                         "bound holds for it")
    if frac < FAR_FROM_ROOF:
        findings.append(f"only {_pct(frac)} of the {roof} roof (roofline #{r['id']}): overheads, not the "
                        "hardware, set the pace (Python loops, small tensors, many tiny calls)")
    else:
        findings.append(f"{_pct(frac)} of the {roof} roof (roofline #{r['id']}): up to {_x(1 / frac)} of headroom")
    return None


def _worker_counts(r: dict[str, Any]) -> list[int]:
    """The worker counts a sweep measured: its points, else --threads, else the NAME=1,2,4 spec."""
    o, smp = r.get("options") or {}, r.get("samples") or {}
    pts = smp.get("points") if isinstance(smp, dict) else None
    got = [int(p["n"]) for p in pts or [] if isinstance(p, dict) and p.get("n") is not None and not p.get("error")]
    if got:
        return sorted(set(got))
    if o.get("threads"):
        return [int(c) for c in o["threads"]]
    spec = o.get("spec")
    if isinstance(spec, str) and "=" in spec:
        return [int(c) for c in spec.split("=", 1)[1].split(",") if c.strip()]
    return []


def _amdahl_speedup(s: float, n: float) -> float:
    return 1 / (s + (1 - s) / n)


def _from_amdahl(r: dict[str, Any], label: str | None, findings: list[str]) -> tuple[Candidate | None, str | None]:
    m = r.get("metrics") or {}
    s = _num(m.get("S"))
    counts = _worker_counts(r)
    if s is None:
        n_points = m.get("n_points")
        findings.append(f"amdahl #{r['id']}: no serial fraction fitted ({n_points} worker counts)")
        if counts:
            more = sorted({*map(int, counts), 1, 2, 4})
            return None, f"%%amdahl --threads {','.join(map(str, more))} (≥ 3 worker counts)"
        return None, None
    ceiling = 1 / s if s > 0 else None
    nmax = max([int(c) for c in counts] or [1])
    subject = f"-l {label} " if label else ""
    if s >= SERIAL_HIGH:
        at_n = _amdahl_speedup(s, nmax)
        shrink = 1 + s * nmax / (1 - s) if s < 1 else None
        findings.append(f"not more workers: serial fraction {s:.2f} (amdahl #{r['id']}): at most {_x(ceiling)} on "
                        f"any number of workers ({_x(at_n)} at {nmax} already)")
        basis = (f"serial fraction {s:.2f} (amdahl #{r['id']}): at most {_x(ceiling)} on any number of workers; "
                 f"removing the serial part at {nmax} workers: at most {_x(shrink)}")
        return Candidate("concurrency", "not more workers: shrink the serial part (profile it with %%flame)", 1.0,
                         shrink, basis, f"%%flame on the serial part, then %%gpubench {subject}--vs baseline",
                         (r["id"],), "nothing guarantees a gain"), None
    rec = _num(m.get("recommended_workers"))
    if rec and rec > nmax:
        gain = _amdahl_speedup(s, rec) / _amdahl_speedup(s, nmax)
        basis = (f"serial fraction {s:.2f} (amdahl #{r['id']}): {int(rec)} workers give at most {_x(gain)} over "
                 f"{nmax}")
        return Candidate("concurrency", f"run on {int(rec)} workers", 1.0, gain, basis,
                         f"%%amdahl --threads 1,{nmax},{int(rec)}", (r["id"],), "nothing guarantees a gain"), None
    findings.append(f"serial fraction {s:.2f} (amdahl #{r['id']}): at most {_x(ceiling)} on any number of workers")
    return None, None
