"""``scalability()``: the USL, Amdahl and Gustafson fitted to any (load, throughput) data, X(1) free.

The offline counterpart of ``%%amdahl``: nothing is measured here, so nothing is said about this machine's
cores. The data can be

* two sequences (lists, numpy arrays, pandas Series): ``scalability([1, 2, 4, 8], [95, 180, 310, 420])``;
  ``time=`` instead of ``throughput=`` takes seconds per unit of work (per request, per step of a fixed
  size) and fits throughput = 1/time;
* a pandas DataFrame and its column names: ``scalability("users", "tput", data=df)`` (a two-column frame
  alone is read as load, throughput);
* ``%%amdahl`` / ``perfmagic.amdahl`` results, ledger rows or run ids (``perfmagic.ledger("amdahl")`` ids
  or a list of them): one point per worker count of each run, throughput = calls/s from the median of its
  per-call times (work units/s, N/T(N), for a weak-scaling sweep); rows of rank-aware jobs with
  ``world_size`` and ``median_s`` metrics give one point each.

Loads are real numbers > 0 (0.3 average active sessions is a load). The fits, their intervals and the
model choice are :mod:`perfmagic.scaling.models`; this module checks the input, marks fits that must not be
reported as findings and words the verdict, which always shows its evidence (R², AICc, the intervals) and
says "cannot tell" where an interval leaves the answer open.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from . import models as _m
from ..errors import BadOptionError, PerfmagicError
from ..findings import Finding
from ..result import Displayed

MIN_LOADS = 3          # distinct loads for Amdahl / Gustafson (2 parameters)
MIN_LOADS_USL = 4      # distinct loads for the USL (3 parameters)
MIN_R2 = 0.5           # a fit explaining less of the variation than this is not a finding


@dataclass(frozen=True, repr=False)
class ScalabilityResult(Displayed):
    """Fitted scaling laws on given data: the points (kept as given), the fits, the choice and the verdict.

    ``usl.sigma``, ``usl.kappa``, ``usl.gamma`` (X(1)), ``usl.peak`` (N*), ``amdahl.serial`` and ``model``
    ("usl" | "amdahl" | "gustafson" | None) are the findings; a fit listed in ``unreliable`` is kept for
    inspection but is not one (``reliable(name)`` returns None for it)."""

    primary_metric: ClassVar[str] = "peak_n"
    renderer: ClassVar[str] = "scalability"
    min_loads: ClassVar[int] = MIN_LOADS
    min_loads_usl: ClassVar[int] = MIN_LOADS_USL
    peak_range: ClassVar[float] = _m.PEAK_RANGE

    load: tuple[float, ...]
    throughput: tuple[float, ...]
    time: tuple[float, ...] | None = None      # seconds per unit of work, when given as time
    load_name: str = "load"
    throughput_name: str = "throughput"
    source: str = "data"
    weak: bool = False
    usl: _m.Fit | None = None
    amdahl: _m.Fit | None = None
    gustafson: _m.Fit | None = None
    model: str | None = None
    unreliable: tuple[tuple[str, Finding], ...] = ()  # (model, why its fit is not a finding)
    notes: tuple[Finding, ...] = ()   # worded by render/findings.py
    level: float = 0.95
    boot: int = 0
    seed: int = 0

    # ---- derived -------------------------------------------------------------------------------
    @property
    def distinct_loads(self) -> tuple[float, ...]:
        return tuple(sorted(set(self.load)))

    def reliable(self, name: str) -> _m.Fit | None:
        f = {"usl": self.usl, "amdahl": self.amdahl, "gustafson": self.gustafson}[name]
        return None if f is None or name in dict(self.unreliable) else f

    def r2(self, fit: _m.Fit | None) -> float | None:
        if fit is None:
            return None
        mean = sum(self.throughput) / len(self.throughput)
        tss = sum((x - mean) ** 2 for x in self.throughput)
        return 1.0 - fit.rss / tss if tss > 0 else None

    @property
    def chosen(self) -> _m.Fit | None:
        return self.reliable(self.model) if self.model else None

    # ---- text ----------------------------------------------------------------------------------
    def verdict(self) -> str:
        """One line: the model that fits and what it says, or why none is a finding
        (:func:`perfmagic.render.scalability.verdict`)."""
        return self._render("verdict")(self)

    # ---- serialisation -------------------------------------------------------------------------
    def metrics(self) -> dict[str, Any]:
        u, a, g = self.reliable("usl"), self.reliable("amdahl"), self.reliable("gustafson")
        sf = g if self.weak else a
        return {"model": self.model, "sigma": u.sigma if u else None, "kappa": u.kappa if u else None,
                "gamma": (u or sf).gamma if (u or sf) else None, "peak_n": u.peak_n if u else None,
                "peak_throughput": u.peak_throughput if u else None, "S": sf.serial if sf else None,
                "n_points": len(self.load), "n_loads": len(self.distinct_loads),
                "aicc_usl": self.usl.aicc if self.usl else None, "aicc_amdahl": self.amdahl.aicc if self.amdahl else None,
                "r2": self.r2(self.chosen)}

    def samples(self) -> dict[str, Any]:
        out: dict[str, Any] = {"load": list(self.load), "throughput": list(self.throughput)}
        if self.time is not None:
            out["time_s"] = list(self.time)
        return out

    def to_dict(self) -> dict[str, Any]:
        def fit(f: _m.Fit | None) -> dict[str, Any] | None:
            return None if f is None else {"params": dict(f.params), "stderr": dict(f.stderr), "rss": f.rss,
                                           "aicc": f.aicc, "intervals": {k: list(v) for k, v in f.intervals.items()}}
        return {"load_name": self.load_name, "throughput_name": self.throughput_name, "source": self.source,
                "weak": self.weak, "model": self.model, "usl": fit(self.usl), "amdahl": fit(self.amdahl),
                "gustafson": fit(self.gustafson), "unreliable": [[m, str(why)] for m, why in self.unreliable],
                "notes": [str(n) for n in self.notes], "level": self.level, "boot": self.boot, "seed": self.seed,
                "metrics": self.metrics(), "samples": self.samples()}


# ---- input ----------------------------------------------------------------------------------------------
def _floats(name: str, xs: Any) -> list[float]:
    if isinstance(xs, (str, bytes)) or not hasattr(xs, "__iter__"):
        raise BadOptionError(name, xs, "a sequence of numbers (list, array, Series) or a column name with data=",
                             f"e.g. {name}=[1, 2, 4, 8]")
    out = []
    for i, v in enumerate(list(xs)):
        try:
            out.append(float(v))
        except (TypeError, ValueError):
            raise BadOptionError(name, v, f"numbers only; position {i} is not one", "fix or drop that value") from None
    return out


def _column(data: Any, key: Any, name: str) -> tuple[list[float], str]:
    if isinstance(key, str):
        if key not in data.columns:
            raise BadOptionError(name, key, "a column of data: " + ", ".join(map(str, data.columns)))
        return _floats(name, data[key]), key
    return _floats(name, key), name


def _from_runs(runs: Any) -> tuple[list[float], list[float], bool | None, str, bool]:
    """Points from AmdahlResults, ledger rows (dicts) or run ids: (loads, throughputs, weak (None: the runs do
    not say), source, all from rank-aware job rows (throughput = steps/s))."""
    from .result import AmdahlResult

    items = list(runs) if isinstance(runs, (list, tuple)) else [runs]
    ids = [int(x) for x in items if isinstance(x, int) and not isinstance(x, bool)]
    rows_by_id = {}
    if ids:
        from ..storage.session import current_ledger

        led = current_ledger()
        rows_by_id = {i: led.get(i) for i in ids}
    ns: list[float] = []
    xs: list[float] = []
    weak: set[bool] = set()
    names = []
    jobs = 0
    for it in items:
        if isinstance(it, AmdahlResult):
            weak.add(it.weak)
            for p in it.good:
                ns.append(float(p.n))
                xs.append((p.n if it.weak else 1.0) / p.median)
            names.append("an amdahl() result")
            continue
        row = rows_by_id.get(it) if isinstance(it, int) and not isinstance(it, bool) else it
        if not isinstance(row, dict):
            raise BadOptionError("load", it, "an AmdahlResult, a ledger row (dict) or a run id",
                                 "e.g. scalability(perfmagic.ledger('amdahl').index.tolist())")
        names.append(f"run #{row.get('id')}")
        metrics, samples = row.get("metrics") or {}, row.get("samples") or {}
        if row.get("magic") == "amdahl" and isinstance(samples, dict) and "points" in samples:
            w = bool((row.get("options") or {}).get("weak"))
            weak.add(w)
            for p in samples["points"]:
                per = sorted(t / (r.get("number") or 1) for r in p.get("rounds") or [] for t in r.get("raw") or [])
                if p.get("error") is None and per:
                    med = per[len(per) // 2] if len(per) % 2 else (per[len(per) // 2 - 1] + per[len(per) // 2]) / 2
                    ns.append(float(p["n"]))
                    xs.append((p["n"] if w else 1.0) / med)
        elif metrics.get("world_size") is not None and metrics.get("median_s"):
            ns.append(float(metrics["world_size"]))
            xs.append(1.0 / float(metrics["median_s"]))
            jobs += 1
        else:
            raise BadOptionError("load", f"run #{row.get('id')} ({row.get('magic')})",
                                 "a %%amdahl run, or a rank-aware job's row with world_size and median_s metrics")
    if len(weak) > 1:
        raise BadOptionError("load", "strong and weak scaling runs mixed", "runs of one kind",
                             "fit the strong-scaling and the weak-scaling runs separately")
    src = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    return ns, xs, (weak.pop() if weak else None), src, jobs == len(items)


def _points(load: Any, throughput: Any, time: Any, data: Any) -> tuple[list[float], list[float], list[float] | None, str, str, str, bool | None]:
    """(loads, throughputs, times or None, load name, throughput name, source, weak from the runs or None)."""
    is_frame = hasattr(load, "columns") and hasattr(load, "iloc") and data is None
    if is_frame and "magic" in getattr(load, "columns", ()) and getattr(load.index, "name", None) == "id":
        load = [int(i) for i in load.index]  # a perfmagic.ledger() frame: its run ids
        is_frame = False
    from .result import AmdahlResult

    def run_like(x: Any) -> bool:
        return isinstance(x, (AmdahlResult, dict)) or (isinstance(x, int) and not isinstance(x, bool))

    if throughput is None and time is None and data is None and (
            run_like(load) or (isinstance(load, (list, tuple)) and load and all(run_like(x) for x in load))):
        try:
            ns, xs, weak, src, jobs = _from_runs(load)
        except (KeyError, LookupError) as exc:  # an unknown run id (the ledger's message names the fix)
            raise BadOptionError("load", load, "run ids of this notebook's ledger, or loads with throughput= / "
                                 "time=", str(exc.args[0] if exc.args else exc)) from None
        if jobs:
            return ns, xs, None, "world_size", "steps/s", src, weak
        return ns, xs, None, "workers", "calls/s", src, weak
    if is_frame:
        data, cols = load, list(load.columns)
        if throughput is None and time is None:
            if len(cols) != 2:
                raise BadOptionError("data", f"a DataFrame with columns {cols}", "two columns (load, throughput), "
                                     "or column names", "e.g. scalability('users', 'tput', data=df)")
            load, throughput = cols
        else:
            raise BadOptionError("load", "a DataFrame", "a column name with data=df",
                                 "e.g. scalability('users', 'tput', data=df)")
    if throughput is not None and time is not None:
        raise BadOptionError("time", "given with throughput", "one of throughput= or time= (throughput = 1/time)")
    if throughput is None and time is None:
        raise BadOptionError("throughput", None, "throughput= (work per second) or time= (seconds per unit of work)",
                             "e.g. scalability([1, 2, 4], [10, 18, 30])")
    if data is not None:
        if not hasattr(data, "columns"):
            raise BadOptionError("data", type(data).__name__, "a pandas DataFrame whose columns the names refer to")
        ns, lname = _column(data, load, "load")
        ys, yname = _column(data, throughput if throughput is not None else time,
                            "throughput" if throughput is not None else "time")
    else:
        ns, lname = _floats("load", load), getattr(load, "name", None) or "load"
        yname = "throughput" if throughput is not None else "time"
        ys = _floats(yname, throughput if throughput is not None else time)
        yname = getattr(throughput if throughput is not None else time, "name", None) or yname
    return ns, ys, None, str(lname), str(yname), "DataFrame" if data is not None else "data", None


def _check(ns: list[float], ys: list[float], lname: str, yname: str, is_time: bool) -> None:
    if len(ns) != len(ys):
        raise BadOptionError(yname, f"{len(ys)} values for {len(ns)} loads",
                             f"one {'time' if is_time else 'throughput'} per load", "give lists of equal length")
    for i, n in enumerate(ns):
        if not (n > 0 and math.isfinite(n)):
            raise BadOptionError(lname, n, "loads > 0 and finite (workers, users, sessions; fractions are fine)",
                                 f"position {i}: drop that point or fix its load")
    for i, y in enumerate(ys):
        if not (y > 0 and math.isfinite(y)):
            raise BadOptionError(yname, y, f"{'times' if is_time else 'throughputs'} > 0 and finite (no NaN)",
                                 f"position {i} (load {ns[i]:g}): drop that point or re-measure it")


def _why_unreliable(fit: _m.Fit, r2: float | None, ns: Sequence[float], xs: Sequence[float]) -> Finding | None:
    if fit.dof <= 0:
        return Finding.of("fit.no-dof", n=fit.n, p=len(fit.params))
    for k, v in fit.params.items():
        if k in ("S", "sigma", "kappa") and v >= 0.999:
            return Finding.of("fit.at-bound", param=k, value=v)
    base = min(range(len(ns)), key=lambda i: ns[i])
    per0 = xs[base] / ns[base]
    if (fit.params.get("S", fit.params.get("sigma", 1.0)) <= 1e-9
            and any(x / n > 1.05 * per0 for n, x in zip(ns, xs) if n > ns[base])):
        return Finding.of("fit.super-linear")
    if r2 is not None and r2 < MIN_R2:
        return Finding.of("fit.low-r2", r2=r2)
    return None


def scalability(load: Any = None, throughput: Any = None, time: Any = None, *, data: Any = None,
                weak: bool | None = None, boot: int = _m.DEFAULT_BOOT, seed: int = 0,
                level: float = 0.95) -> ScalabilityResult:
    """Fit the USL and Amdahl (or Gustafson with ``weak=True``) to (load, throughput) data, X(1) free.

    ``boot`` wild-bootstrap replicates (fixed ``seed``) give the ``level`` intervals; ``boot=0`` skips them
    (standard errors only). See the module docstring for the forms of input."""
    if isinstance(boot, bool) or not isinstance(boot, int) or not (boot == 0 or 50 <= boot <= 100_000):
        raise BadOptionError("boot", boot, "0 (no intervals) or an integer from 50 to 100000", "e.g. boot=1000")
    if not (isinstance(level, float) and 0.5 <= level < 1):
        raise BadOptionError("level", level, "a probability between 0.5 and 1", "e.g. level=0.95")
    ns, ys, _, lname, yname, source, run_weak = _points(load, throughput, time, data)
    is_time = time is not None
    _check(ns, ys, lname, yname, is_time)
    times = tuple(ys) if is_time else None
    xs = [1.0 / y for y in ys] if is_time else ys
    if is_time:
        yname = "throughput (1/time)"
    if weak is None:
        weak = bool(run_weak)
    elif weak and yname == "steps/s" and run_weak is None:  # rank-aware jobs, per-rank batch fixed
        xs = [n * x for n, x in zip(ns, xs)]
        yname = "work/s (world_size / step)"
    base = ScalabilityResult(load=tuple(ns), throughput=tuple(xs), time=times, load_name=lname,
                             throughput_name=yname, source=source, weak=weak, level=level, boot=boot, seed=seed)
    k = len(base.distinct_loads)
    if k < MIN_LOADS:
        return base
    kw = {"boot": boot, "seed": seed, "level": level}
    fits: dict[str, _m.Fit] = {}
    notes: list[Finding] = []
    try:
        if weak:
            fits["gustafson"] = _m.fit_gustafson(ns, xs, **kw)
        else:
            fits["amdahl"] = _m.fit_amdahl(ns, xs, **kw)
            if k >= MIN_LOADS_USL:
                fits["usl"] = _m.fit_usl(ns, xs, **kw)
            else:
                notes.append(Finding.of("scalability.no-usl", k=k, need=MIN_LOADS_USL))
    except ValueError as exc:  # pragma: no cover - the input was checked above
        raise PerfmagicError(str(exc)) from None
    unreliable = {}
    for name, f in fits.items():
        why = _why_unreliable(f, _r2(f, xs), ns, xs)
        if why is not None:
            unreliable[name] = why
    if weak:
        model = None if unreliable else "gustafson"
    else:
        ok_a = fits["amdahl"] if "amdahl" not in unreliable else None
        ok_u = fits.get("usl") if "usl" not in unreliable else None
        model, choice = _m.choose_model(ok_a, ok_u, max(ns))
        notes += [c.with_values(unit="distinct loads") for c in choice]
        a = fits["amdahl"]
        if model == "amdahl" and a.params["S"] > 0:
            notes.append(Finding.of("scalability.ceiling", ceiling=a.params["gamma"] / a.params["S"], load_name=lname))
    return _replace(base, usl=fits.get("usl"), amdahl=fits.get("amdahl"), gustafson=fits.get("gustafson"),
                    model=model, unreliable=tuple(unreliable.items()), notes=tuple(notes))


def _r2(f: _m.Fit, xs: Sequence[float]) -> float | None:
    mean = sum(xs) / len(xs)
    tss = sum((x - mean) ** 2 for x in xs)
    return 1.0 - f.rss / tss if tss > 0 else None


def _replace(r: ScalabilityResult, **kw: Any) -> ScalabilityResult:
    import dataclasses

    return dataclasses.replace(r, **kw)


__all__ = ["ScalabilityResult", "scalability", "MIN_LOADS", "MIN_LOADS_USL"]
