"""The evidence each magic leaves in the ledger, read as bounds on what a change can gain
(:func:`perfmagic.advisor.next.next_step` chooses among them). One reader per magic: ``%%dataloader_check``
(the data-wait share), ``%%flame`` (self-time shares), ``%%roofline`` (the fraction of the compute or the
bandwidth roof), ``%%amdahl`` (the serial fraction). Whether a piece of evidence describes the code being
advised on at all is :mod:`perfmagic.advisor.scope`'s question, asked before these readers run.
"""

from __future__ import annotations

import math
from typing import Any

from ..render.advisor_words import say
from .result import Candidate, found
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
        findings.append(found("dataloader.no-share", id=r["id"]))
        return None, None
    if w < INPUT_BOUND and m.get("verdict") != "input-bound":
        findings.append(found("dataloader.not-input-bound", w=w, id=r["id"]))
        return None, None
    free = 1 / (1 - w) if w < 1 else math.inf
    free = max(free, _num(m.get("speedup_if_data_free")) or 0.0)
    high = None if math.isinf(free) else free
    best = m.get("best_num_workers")
    action = (say("dataloader.use-workers", best=best) if m.get("num_workers") == 0
              else say("dataloader.faster-pipeline"))
    basis = say("dataloader.basis", w=w, id=r["id"], high=high)
    low_why = say("dataloader.low", cores=m.get("cores"), best=best)
    cmd = say("dataloader.test", best=best, loader=o.get("loader") or "loader", label=label)
    cap = 1 / w if w > 0 else None
    findings.append(found("dataloader.cap", w=w, cap=cap))
    return Candidate("I/O", action, 1.0, high, basis, cmd, (r["id"],), low_why), cap


def _more_samples(r: dict[str, Any], label: str | None, n_now: int, n_need: int | None) -> str:
    """The ``%%flame`` that takes ``n_need`` samples: a higher rate while that reaches them in the
    cell's run time, else a longer run (the code repeated in the cell)."""
    from ..profile.flame import MAX_RATE

    m = r.get("metrics") or {}
    wall = _num(m.get("wall_s")) or _num(m.get("sampled_s"))
    rate = _num(m.get("rate_hz")) or (n_now / wall if wall and n_now else None)
    if n_need is None:
        return say("flame.more-samples", how="longer", label=label)
    if wall and wall > 0:
        want = math.ceil(n_need * 1.25 / wall / 50) * 50
        if want <= MAX_RATE and (rate is None or want > rate):
            return say("flame.more-samples", how="rate", label=label, rate=want, need=n_need, wall=wall)
        if rate:
            reps = math.ceil(n_need * 1.25 / (min(MAX_RATE, max(rate, want)) * wall))
            return say("flame.more-samples", how="repeat", label=label, reps=max(reps, 2), need=n_need)
    return say("flame.more-samples", how="longer-n", label=label, need=n_need)


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
    if f is None or not name or n <= 0:
        findings.append(found("flame.nothing", id=r["id"]))
        return None, say("flame.longer", label=label)
    fn, where = _fn_name(name)
    lo, hi = share_interval(f, n)
    need = min_effect / (1 + min_effect)  # the share a function must hold for its removal to clear the bar
    within = m.get("within") or []
    v = dict(id=r["id"], fn=fn, f=f, n=n, lo=lo, hi=hi, label=label, within=within[0] if within else None,
             within_share=_num(m.get("within_share")) or 0)
    if hi < HOT_SHARE:
        findings.append(found("flame.spread", **v))
        return None, None
    if lo < need:
        findings.append(found("flame.unsure", need=need, min_effect=min_effect, **v))
        return None, _more_samples(r, label, n, samples_to_tell(f, need))
    if _user_code(where):
        high = 1 / (1 - hi) if hi < 1 else None
        return Candidate("algorithm", say("flame.own-action", **v), 1.0, high, say("flame.own-basis", high=high, **v),
                         say("flame.own-test", **v), (r["id"],), say("flame.low")), None
    # a library's time, spent on behalf of the code that calls it: the change acts on those calls
    return Candidate("vectorization", say("flame.library-action", **v), 1.0, None,
                     say("flame.library-basis", where=where, **v), say("flame.library-test", **v), (r["id"],),
                     say("flame.low")), None


def _from_roofline(r: dict[str, Any], label: str | None, findings: list[str]) -> Candidate | None:
    m = r.get("metrics") or {}
    frac, dtype = _num(m.get("fraction_of_roof")), m.get("dtype") or "this precision's"
    memory = m.get("bound") == "memory"
    v = dict(id=r["id"], frac=frac, roof="bandwidth" if memory else dtype, memory=memory, label=label, dtype=dtype)
    if frac is None or frac <= 0:
        findings.append(found("roofline.nothing", **v))
        return None
    if frac > ABOVE_ROOF:  # above the roof: the roof is not this code's (cache, a loaded calibration)
        findings.append(found("roofline.above", **v))
        return None
    if memory and m.get("fits_cache"):  # its tensors fit in the last-level cache: the DRAM roof need not bound it
        findings.append(found("roofline.fits-cache", footprint=m.get("footprint_bytes"), **v))
        return None
    if frac >= NEAR_ROOF:
        findings.append(found("roofline.not-threads", **v))
        kind = "memory" if memory else "compute"
        return Candidate(kind, say(f"roofline.{kind}-action", **v), 1.0, None, say("roofline.basis", **v),
                         say("roofline.test", **v), (r["id"],), say(f"roofline.{kind}-low", **v))
    findings.append(found("roofline.far" if frac < FAR_FROM_ROOF else "roofline.headroom", **v))
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
        findings.append(found("amdahl.nothing", id=r["id"], n_points=m.get("n_points")))
        if counts:
            more = sorted({*map(int, counts), 1, 2, 4})
            return None, f"%%amdahl --threads {','.join(map(str, more))} (≥ 3 worker counts)"
        return None, None
    nmax = max([int(c) for c in counts] or [1])
    v = dict(id=r["id"], s=s, ceiling=1 / s if s > 0 else None, nmax=nmax, label=label)
    if s >= SERIAL_HIGH:
        shrink = 1 + s * nmax / (1 - s) if s < 1 else None
        findings.append(found("amdahl.serial", at_n=_amdahl_speedup(s, nmax), **v))
        return Candidate("concurrency", say("amdahl.serial-action"), 1.0, shrink,
                         say("amdahl.serial-basis", shrink=shrink, **v), say("amdahl.serial-test", **v),
                         (r["id"],), "nothing guarantees a gain"), None
    rec = _num(m.get("recommended_workers"))
    if rec and rec > nmax:
        gain = _amdahl_speedup(s, rec) / _amdahl_speedup(s, nmax)
        return Candidate("concurrency", f"run on {int(rec)} workers", 1.0, gain,
                         say("amdahl.more-basis", rec=int(rec), gain=gain, **v),
                         f"%%amdahl --threads 1,{nmax},{int(rec)}", (r["id"],), "nothing guarantees a gain"), None
    findings.append(found("amdahl.ceiling", **v))
    return None, None
