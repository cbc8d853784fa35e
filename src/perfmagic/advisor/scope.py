"""Which evidence is about a label's code: the advisor reads a profile, a roofline, a sweep or a loader
check for a label only when the label's code calls the code that evidence measured.

A label's **call set** (:func:`call_set`) is what its newest run's code reads: the names in the code
(``ast``; the stored code, as :func:`perfmagic.timing.rerun.capture` compiles it), and, followed four
levels deep, what the notebook's own functions and classes it reaches read in turn. The objects come
from the run's capture (``%%gpubench`` keeps, for the kernel's lifetime, the callables its code read:
the functions *as they were*), else from the notebook's namespace now, else only the code's own names
are known.

A piece of evidence is about the label (:func:`relation`) when it has the same label or the same code,
or when everything its code calls (calls, methods, loops over a loader; not the data it passes) is in
the call set: a flame of ``train_step(batch)`` is about ``for b in loader: train_step(b)``. Sharing a
model is not enough: a flame of ``model(x).sum().backward()`` calls ``backward``, which an inference
cell ``with torch.no_grad(): model(x)`` never does, so it is not about it. Names every cell uses (the
builtins, modules, ``torch``) tie nothing together.

A flame of other code may still have profiled a function the label calls (a flame of the whole loop,
``train_step`` inside it): :func:`flame_within` keeps only the samples under such a function, and the
hot function is read from them.
"""

from __future__ import annotations

import ast
import builtins
import math
import re
import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..render.advisor_words import say
from ..timing.rerun import code_names

_DEPTH = 4
_GENERIC = frozenset(dir(builtins)) | frozenset((
    "self", "cls", "np", "numpy", "torch", "nn", "pd", "math", "os", "sys", "time", "perfmagic", "batch", "F",
    "functional", "random", "itertools", "functools", "collections"))


@dataclass(frozen=True)
class CallSet:
    """What one label's code reads. ``names``: every name and attribute it reads, its functions'
    included; ``functions``: the names it calls and the notebook's module-level functions it
    reaches, which a flame's frames are matched with; ``source``: where the objects came from
    (``"capture"``, ``"namespace"`` or ``"code"``)."""

    label: str | None
    run: int | None
    code: str
    names: frozenset[str]
    functions: frozenset[str]
    source: str


def _clean(code: Any) -> str:
    return "\n".join(ln.rstrip() for ln in str(code or "").strip().splitlines() if ln.strip())


def _parse(code: str) -> ast.AST | None:
    """The code's tree; lines IPython would transform (``%magic``, ``!cmd``) are dropped first."""
    try:
        return ast.parse(code)
    except SyntaxError:
        pass
    kept = "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in code.splitlines())
    try:
        return ast.parse(kept)
    except SyntaxError:
        return None


def _root(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def read_names(code: Any, attributes: bool = True) -> set[str]:
    """Every name (and attribute name, unless ``attributes`` is False) the code reads; unparsable code:
    every identifier in it."""
    text = str(code or "")
    tree = _parse(text)
    if tree is None:
        return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            out.add(node.id)
        elif attributes and isinstance(node, ast.Attribute):
            out.add(node.attr)
    return out


def called_names(code: Any, ignore: frozenset[str] = frozenset(), reads: bool = True) -> set[str]:
    """What the code *runs*: the functions and methods it calls and what its loops iterate over (a
    DataLoader's ``__iter__`` runs its workers), less the names it binds itself, ``ignore`` and names
    every cell uses. Data passed as an argument is not a call. Code that calls nothing by name (``a + b``):
    the names it reads (``reads=False``: nothing)."""
    tree = _parse(str(code or ""))
    if tree is None:
        return set()
    bound: set[str] = set()
    calls: set[str] = set()
    loads: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, ast.Store) else loads).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name):
                calls.add(f.id)
            elif isinstance(f, ast.Attribute):
                calls.add(f.attr)
                root = _root(f)
                if root is not None:
                    calls.add(root)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            root = _root(node.iter)
            if root is not None:
                calls.add(root)
    drop = bound | ignore | _GENERIC
    got = {n for n in calls if n not in drop}
    return got or ({n for n in loads if n not in drop} if reads else set())


def _user_thing(obj: Any) -> bool:
    """A function or class the notebook defined (its module is ``__main__``)."""
    if isinstance(obj, types.FunctionType):
        return obj.__globals__.get("__name__") == "__main__"
    if isinstance(obj, type):
        return getattr(obj, "__module__", None) == "__main__"
    return False


def _follow(obj: Any, names: set[str], functions: set[str], depth: int, seen: set[int]) -> None:
    """Add what a notebook function or class (or an instance of one: a model) reads, ``depth`` deep."""
    if depth <= 0 or id(obj) in seen:
        return
    seen.add(id(obj))
    if not _user_thing(obj) and not isinstance(obj, types.ModuleType) and _user_thing(type(obj)):
        obj = type(obj)  # an instance of a notebook class (a model): its methods run
        if id(obj) in seen:
            return
        seen.add(id(obj))
    if isinstance(obj, type) and _user_thing(obj):
        for k, v in vars(obj).items():  # its methods' names are read, but never tie a flame's frame:
            fn = getattr(v, "__func__", v)  # py-spy names `Net.forward` only `forward`, as every module's
            if isinstance(fn, types.FunctionType):
                names.add(k)
                _follow(fn, names, functions, depth - 1, seen)
        return
    if not (isinstance(obj, types.FunctionType) and _user_thing(obj)):
        return
    if "." not in obj.__qualname__:  # a module-level function: the same name in either sampler's frames
        functions.add(obj.__name__)
    read = code_names(obj.__code__)
    names |= read
    for n in read:
        if n in obj.__globals__:
            _follow(obj.__globals__[n], names, functions, depth - 1, seen)
    # what it calls through a default or a closure: ``def train_epoch(loader, step_fn=step)``
    bound = [*(obj.__defaults__ or ()), *(obj.__kwdefaults__ or {}).values()]
    for cell in obj.__closure__ or ():
        try:
            bound.append(cell.cell_contents)
        except ValueError:  # an empty cell
            pass
    for v in bound:
        if _user_thing(v):
            names.add(v.__name__)
            _follow(v, names, functions, depth - 1, seen)


def call_set(row: Mapping[str, Any] | None, label: str | None, capture: Any = None,
             namespace: Mapping[str, Any] | None = None) -> CallSet:
    """The call set of ``label``'s code (``row``: its newest run): from ``capture`` (a
    :class:`~perfmagic.timing.rerun.Capture` of that run) when there is one, else ``namespace``."""
    row = row or {}
    code = str(row.get("code") or "")
    setup = str((row.get("options") or {}).get("setup") or "")
    names = read_names(code) | (read_names(setup) if setup else set())
    functions = called_names(code) & read_names(code, attributes=False)  # `f(x)`, not `opt.step()`
    objects: dict[str, Any] = {}
    source = "code"
    if capture is not None:
        objects = {**dict(getattr(capture, "callables", {}) or {})}
        if namespace is not None:  # the data a capture fingerprints only: the objects now (a model)
            objects.update({n: namespace[n] for n in getattr(capture, "data", {}) if n in namespace})
        source = "capture"
    elif namespace is not None:
        plain = read_names(code, attributes=False) | (read_names(setup, attributes=False) if setup else set())
        objects = {n: namespace[n] for n in plain if n in namespace}
        source = "namespace"
    seen: set[int] = set()
    extra: set[str] = set()
    for n, obj in objects.items():
        names.add(n)
        _follow(obj, extra, functions, _DEPTH, seen)
    return CallSet(label=label, run=row.get("id"), code=_clean(code), names=frozenset(names | extra),
                   functions=frozenset(functions), source=source)


def _modules(namespace: Mapping[str, Any] | None) -> frozenset[str]:
    if not namespace:
        return frozenset()
    return frozenset(n for n, v in namespace.items() if isinstance(v, types.ModuleType))


def _ignored(evidence: Mapping[str, Any]) -> frozenset[str]:
    """Names a magic binds for the code it measures: %%amdahl's swept variable (``N=1,2,4``)."""
    spec = (evidence.get("options") or {}).get("spec")
    if isinstance(spec, str) and "=" in spec:
        return frozenset({spec.split("=", 1)[0].strip()})
    return frozenset()


def _calls_of(evidence: Mapping[str, Any], namespace: Mapping[str, Any] | None) -> tuple[set[str], bool]:
    """(what the evidence's code runs, True) or, when it calls nothing by name, (what it reads, False).
    A DataLoader check's code is the step it ran per batch; its loader is not asked for (the timed loop
    often iterates another loader object of the same settings): whether the timed code reads a
    DataLoader at all is :mod:`perfmagic.advisor.next`'s own check."""
    ignore = _ignored(evidence) | _modules(namespace)
    calls = called_names(evidence.get("code"), ignore, reads=False)
    if calls:
        return calls, True
    return called_names(evidence.get("code"), ignore), False


def relation(evidence: Mapping[str, Any], cs: CallSet, namespace: Mapping[str, Any] | None = None
             ) -> tuple[bool, str]:
    """(is ``evidence`` about the code of ``cs``, why): same label, same code, or the label's code calls
    everything the evidence's code calls."""
    if cs.label is not None and evidence.get("label") == cs.label:
        return True, "same label"
    if cs.code and _clean(evidence.get("code")) == cs.code:
        return True, "same code"
    calls, ran = _calls_of(evidence, namespace)
    if not calls:
        return False, say("scope.unrelated")
    missing = calls - cs.names
    if not missing:
        return True, say("scope.calls", label=cs.label, names=calls)
    return False, say("scope.ran" if ran else "scope.read", label=cs.label, names=missing)


# -- a flame of other code, read under the functions the label calls ----------------------------------


def _frames(stack: str) -> list[tuple[str, str]]:
    """``"cell In [5] (In [5]);parse (In [3]:4)"`` -> ``[("cell In [5]", "In [5]"), ("parse", "In [3]:4")]``."""
    out = []
    for part in stack.split(";"):
        if part.endswith(")") and " (" in part:
            name, _, where = part[:-1].rpartition(" (")
            out.append((name, where))
        else:
            out.append((part, ""))
    return out


def _matches(name: str, functions: frozenset[str]) -> bool:
    return name in functions or name.split(".<locals>", 1)[0] in functions


def flame_within(evidence: Mapping[str, Any], cs: CallSet, user_code: Any) -> dict[str, Any] | None:
    """A flame's metrics restricted to the samples under a notebook function the label calls
    (``top1_self_name``, ``top1_self_fraction``, ``n_samples``, ``within``), or None when it profiled
    none. ``user_code(where)``: is a frame the notebook's own code (a library frame never ties)."""
    smp, m = evidence.get("samples"), evidence.get("metrics")
    if not isinstance(smp, dict) or not isinstance(m, dict):
        return None
    stacks, secs = smp.get("stack") or [], smp.get("seconds") or []
    total = sum(float(s) for s in secs if isinstance(s, (int, float)))
    n_all = int(m.get("n_samples") or 0)
    if not stacks or len(stacks) != len(secs) or total <= 0 or n_all <= 0 or not cs.functions:
        return None
    kept = 0.0
    under: dict[str, float] = {}
    leaf: dict[tuple[str, str], float] = {}
    for st, s in zip(stacks, secs):
        fr = _frames(str(st))
        hit = next((nm for nm, wh in fr[1:] if _matches(nm, cs.functions) and user_code(wh)), None)
        if hit is None:
            continue
        w = float(s)
        kept += w
        under[hit] = under.get(hit, 0.0) + w
        leaf[fr[-1]] = leaf.get(fr[-1], 0.0) + w
    if kept <= 0:
        return None
    (name, where), top = max(leaf.items(), key=lambda kv: kv[1])
    n = max(1, int(round(n_all * kept / total)))
    return {**m, "top1_self_name": f"{name} ({where})" if where else name, "top1_self_fraction": top / kept,
            "n_samples": n, "within": sorted(under, key=lambda k: -under[k]), "within_share": kept / total}


def share_interval(p: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson interval of a share ``p`` observed in ``n`` samples (15 of 15: 0.80–1.0)."""
    if n <= 0:
        return 0.0, 1.0
    den = 1 + z * z / n
    centre = p + z * z / (2 * n)
    half = z * math.sqrt(max(p * (1 - p), 0.0) / n + z * z / (4 * n * n))
    return max(0.0, (centre - half) / den), min(1.0, (centre + half) / den)


__all__ = ["CallSet", "call_set", "called_names", "flame_within", "read_names", "relation", "share_interval"]
