"""What differs between two runs besides the number: the code, the options, the environment.

A comparison isolates one change only if one thing changed. This module lists every difference and
says plainly when there is more than one: code *and* environment, or a code diff that touches several
separate places.

The running conditions (load from other processes, GPU clocks, throttling) are kept apart: nobody chose
them, so they do not count as a second change, but they are printed under the verdict so that a reader
can weigh it (a historical verdict admits the machine's between-run noise; an interleaved one cancels it).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace
from typing import Any

# options that change how long or how the result is shown, not what is measured
_IGNORED_OPTIONS = {"label", "output", "quiet", "no_plot", "baseline", "vs", "budget", "precision", "warmup",
                    "min_samples", "no_memory", "min_effect", "interleaved", "interleaved_with", "remeasured_from"}
# stable environment fields: any difference is reported
_STABLE_ENV = ("cpu_model", "usable_cores", "logical_cores", "device", "torch_threads", "torch_interop_threads",
               "gc_enabled", "python")


@dataclass(frozen=True)
class WhatChanged:
    diff: tuple[str, ...]               # unified diff lines of the cell body
    code_places: int                    # separate changed places in the code
    options: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    env: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    conditions: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    data: tuple[str, ...] = ()          # what A read that changed since: "`L` was changed in place since ..."
    redefined: tuple[str, ...] = ()     # functions redefined between the runs whose sources show no difference

    @property
    def things(self) -> list[str]:
        """Each thing that changed, in a few words (:func:`perfmagic.render.whatchanged.things`)."""
        from ..render import whatchanged

        return whatchanged.things(self)

    @property
    def isolated(self) -> bool:
        """True when at most one thing changed (one code place, or only options, or only environment)."""
        kinds = sum(bool(x) for x in (self.code_places, self.options, self.env, self.data))
        return kinds <= 1 and self.code_places <= 1

    def summary(self) -> str:
        from ..render import whatchanged

        return whatchanged.summary(self)

    def text(self) -> str:
        from ..render import whatchanged

        return whatchanged.text(self)

    def html(self) -> str:
        from ..render import whatchanged

        return whatchanged.html(self)


def _flat_env(env: dict[str, Any]) -> dict[str, Any]:
    out = {k: env.get(k) for k in _STABLE_ENV}
    for name, ver in (env.get("versions") or {}).items():
        out[f"version {name}"] = ver
    blas = env.get("blas") or []
    out["blas threads"] = ",".join(str(b.get("num_threads")) for b in blas) or None
    gpu = env.get("gpu") or {}
    out["gpu"] = f"{gpu.get('name')} (driver {gpu.get('driver')})" if gpu else None
    return out


def _lazy(key: str) -> bool:
    """Fields known only once something is loaded: threadpoolctl sees no BLAS pool before numpy's
    first call, a version is None until the library is imported. Unknown on one side is not a change."""
    return key == "blas threads" or key.startswith("version ")


def env_diff(ea: dict[str, Any], eb: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Differences in the set-up: hardware, versions, thread counts (things someone chose)."""
    if not ea or not eb:
        return {}
    fa, fb = _flat_env(ea), _flat_env(eb)
    return {k: (fa[k], fb.get(k)) for k in fa
            if fa[k] != fb.get(k) and not (_lazy(k) and (fa[k] is None or fb.get(k) is None))}


def conditions_diff(ea: dict[str, Any], eb: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Differences in the running conditions beyond their thresholds: other processes' load, GPU clocks."""
    if not ea or not eb:
        return {}
    out: dict[str, tuple[Any, Any]] = {}
    oa, ob = ea.get("others_cores"), eb.get("others_cores")
    if oa is not None and ob is not None and abs(oa - ob) > 0.25:
        out["load from other processes (cores)"] = (round(oa, 2), round(ob, 2))
    ga, gb = ea.get("gpu") or {}, eb.get("gpu") or {}
    ca, cb = ga.get("sm_clock_mhz"), gb.get("sm_clock_mhz")
    if ca and cb and abs(cb / ca - 1) > 0.05:
        out["GPU SM clock (MHz)"] = (ca, cb)
    if bool(ga.get("throttled")) != bool(gb.get("throttled")):
        out["GPU throttled"] = (ga.get("throttle_reasons"), gb.get("throttle_reasons"))
    return out


def _diff(a: list[str], b: list[str], name_a: str, name_b: str) -> tuple[int, tuple[str, ...]]:
    """(separate changed places, unified diff lines) of two texts."""
    sm = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    places = sum(1 for tag, *_ in sm.get_opcodes() if tag != "equal")
    return places, tuple(difflib.unified_diff(a, b, name_a, name_b, n=1, lineterm="")) if places else ()


def what_changed(code_a: str, code_b: str, options_a: dict[str, Any] | None, options_b: dict[str, Any] | None,
                 env_a: dict[str, Any] | None, env_b: dict[str, Any] | None,
                 data: tuple[str, ...] = ()) -> WhatChanged:
    a, b = (code_a or "").splitlines(), (code_b or "").splitlines()  # cell bodies: the magic line is its own field
    places, diff = _diff(a, b, "A", "B")
    oa, ob = options_a or {}, options_b or {}
    opts = {k: (oa.get(k), ob.get(k)) for k in sorted(set(oa) | set(ob))
            if k not in _IGNORED_OPTIONS and oa.get(k) != ob.get(k)}
    ea, eb = env_a or {}, env_b or {}
    return WhatChanged(diff, places, opts, env_diff(ea, eb), conditions_diff(ea, eb), tuple(data))


def with_functions(w: WhatChanged, functions: list[tuple[str, list[str], list[str]]]) -> WhatChanged:
    """``w`` with the notebook functions both runs called under one name whose code differs
    (:func:`perfmagic.timing.rerun.function_changes`: a function redefined between the runs, which the
    cells' text cannot show), each diffed as a place of the code."""
    places, diff, unseen = w.code_places, w.diff, w.redefined
    for name, fa, fb in functions:
        n, d = _diff(fa, fb, f"A: {name}", f"B: {name}")
        places, diff = places + max(n, 1), diff + d
        unseen += () if d else (name,)  # no source to diff (code made by exec): named, not shown
    return replace(w, code_places=places, diff=diff, redefined=unseen)
