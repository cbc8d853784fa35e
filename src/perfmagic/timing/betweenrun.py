"""How far two runs of identical code stray apart on this machine: the evidence a historical
comparison is calibrated with.

Runs measured at different times differ by more than their within-run intervals show: the machine
drifts (frequency, other tenants, memory layout). A historical verdict must admit that drift, and the
honest size of it is what *this* machine showed for code that did not change. perfmagic records such
A/A evidence as a side effect of its default comparison: every ``%perf compare`` that re-measures run A
in this process stores the re-measurement as ``rerun-of #A`` — the same code, the same functions, data
checked unchanged — so ``|log(median(re-run) / median(A))|`` is one draw of the between-run noise.
Pairs in which either run was thread-oversubscribed are left out: that distortion is named on its own
(its pools waited for cores: a 0.5 ms call took 8 ms) and is not the machine's drift.

:func:`between_run_noise` takes the most recent ``EVIDENCE_MAX`` such pairs measured on this machine
(same CPU model, usable cores and host), pooled over every workload (so the noisiest code sets the
quantile: conservative for quiet code), and returns the 99% quantile (``LEVEL``) of their absolute
log ratios: order statistic ``ceil(0.99 * (n + 1))``, which for up to 98 pairs is the largest. The
noise is heavy-tailed (on the 2-core VM: median 1%, 95% quantile 7–8%, largest 40–50% at no load) and
a historical verdict must be confidently wrong at most 1% of the time: with the 95% quantile, 2 of 20
historical verdicts on a planted +20% in-place change beside one busy neighbour said "faster"; with
the largest of 50, none did (``benchmarks/bench_verdicts.py``, docs/benchmarks.md). With fewer than ``EVIDENCE_MIN`` pairs it does not trust them alone and
uses at least ``PRIOR``, and never less than ``FLOOR`` (2%: the evidence pairs are minutes apart, runs
compared historically may be hours apart). The prior is the between-run noise measured on the 2-core reference VM (historical A/A
pairs of ``benchmarks/bench_ab.py``: 90th–95th percentile ±16–32%, so ±20%). Each evidence ratio also
holds both runs' within-run noise, so combining it with the within-run interval errs on the wide side.

The drift guard (a fixed pure-Python workload timed with every run, ``env["reference_s"]``) is *not*
used here: ``benchmarks/bench_verdicts.py`` measured whether it makes historical verdicts more right
(docs/benchmarks.md, "Verdicts"); the reference workload does not track the measured code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..record import relation
from ..findings import Finding

PRIOR = 0.20
FLOOR = 0.02  # evidence pairs are minutes apart; runs compared historically may be hours apart
LEVEL = 0.99  # quantile of the evidence: historical verdicts must be wrong at most 1% of the time
EVIDENCE_MIN = 5
EVIDENCE_MAX = 50


@dataclass(frozen=True)
class BetweenRun:
    """The between-run noise a historical comparison admits: ``noise`` (0.08 = ±8%, the 99% quantile
    of this machine's A/A pairs), from ``n`` of them; ``source`` says where it came from."""

    noise: float
    n: int
    source: Any  # where it came from: a noise.* finding


def _machine(env: dict[str, Any] | None) -> tuple[Any, ...]:
    env = env or {}
    return env.get("cpu_model"), env.get("usable_cores"), env.get("hostname")


def _median_per_call(row: dict[str, Any]) -> float | None:
    from ..core.stats import median
    from .basis import per_call

    xs = [t for t in per_call(row) if t > 0]
    return median(xs) if len(xs) >= 3 else None


def evidence(rows: list[dict[str, Any]], machine_env: dict[str, Any] | None = None) -> list[float]:
    """Absolute log ratios of every A/A pair in ``rows`` (a re-measurement and the run it re-measured,
    same code, both complete, neither oversubscribed), newest first; only pairs measured on
    ``machine_env``'s machine when given."""
    from ..core.threads import env_oversubscription
    from ..storage.codec import rerun_of

    by_id = {r.get("id"): r for r in rows}
    want = _machine(machine_env) if machine_env is not None else None
    out: list[tuple[int, float]] = []
    for r in rows:
        src = rerun_of(r)
        orig = by_id.get(src) if src is not None else None
        if orig is None or r.get("magic") != "gpubench" or \
                (orig.get("code") or "") != (r.get("code") or ""):
            continue
        if r.get("status") != "ok" or orig.get("status") != "ok":
            continue
        if want is not None and (_machine(r.get("env")) != want or _machine(orig.get("env")) != want):
            continue
        if env_oversubscription(r.get("env")) or env_oversubscription(orig.get("env")):
            continue  # a named distortion (threads waiting for cores), not the machine's drift
        m0, m1 = _median_per_call(orig), _median_per_call(r)
        if m0 and m1:
            out.append((int(r.get("id") or 0), abs(math.log(m1 / m0))))
    out.sort(key=lambda t: -t[0])
    return [d for _, d in out[:EVIDENCE_MAX]]


def _newest_evidence(ledger: Any, env: dict[str, Any] | None) -> list[float]:
    """The newest ``EVIDENCE_MAX`` A/A pairs of the ledger, read page by page (re-measurements and what they
    re-measured only: a ledger of 100,000 runs is not read whole). A ledger object without the paged
    reader (a stand-in) is read whole."""
    if not hasattr(ledger, "_select"):
        return evidence(ledger.rows(notebook=None), env)
    from ..storage.views import reruns

    rows: dict[Any, dict[str, Any]] = {}
    before = None
    while True:
        page = reruns(ledger, before=before)
        rows.update({r["id"]: r for r in page})
        found = evidence(list(rows.values()), env)
        again = [r["id"] for r in page if relation(r, "rerun_of") is not None]
        pending = [r for r in getattr(ledger, "pending", [])]
        if len(found) >= EVIDENCE_MAX or len(again) < 200:
            if pending:  # runs kept in memory are evidence too
                from ..storage.rows import decoded

                rows.update({r["id"]: decoded(r, saved=False) for r in pending})
                found = evidence(list(rows.values()), env)
            return found
        before = min(again)


def between_run_noise(ledger: Any, env: dict[str, Any] | None = None) -> BetweenRun:
    """The between-run noise for a historical comparison of runs measured on ``env``'s machine, from
    the A/A evidence in ``ledger`` (see the module docstring); :data:`PRIOR` when there is too little."""
    ds: list[float] = []
    if ledger is not None:
        try:
            ds = _newest_evidence(ledger, env)
        except Exception:  # an unreadable ledger: no evidence, the prior stands
            ds = []
    n = len(ds)
    if n == 0:
        return BetweenRun(PRIOR, 0, Finding.of("noise.prior", q=PRIOR))
    s = sorted(ds)
    k = min(n, math.ceil(LEVEL * (n + 1)))
    q = math.expm1(s[k - 1])
    if n < EVIDENCE_MIN:
        q = max(q, PRIOR)
        return BetweenRun(q, n, Finding.of("noise.few", q=q, n=n, largest=math.expm1(s[-1]), prior=PRIOR))
    seen = {"n": n, "level": None if k == n else LEVEL, "median": math.expm1(s[(n - 1) // 2])}
    if q < FLOOR:
        return BetweenRun(FLOOR, n, Finding.of("noise.floor", floor=FLOOR, q=q, **seen))
    return BetweenRun(q, n, Finding.of("noise.seen", q=q, **seen))
