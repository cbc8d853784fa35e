"""Re-running a recorded run in this process: what its code called, and whether its data is still there.

The comparison that cancels noise is the interleaved one (A B B A ... in one process): machine drift
hits both sides alike. After the fact that needs run A's code *as it was*: a notebook user measures A,
edits a function, measures B. So when a run is recorded, :func:`capture` keeps, for this kernel's
lifetime, references to what its code called (functions, classes, modules, callables: not data) and a
cheap signature of the data it read. Later :func:`check` says why A can no longer be re-run faithfully
(a name gone; data rebound or changed in place), and :func:`namespace` builds the namespace A runs in:
the notebook's names now, with A's callables over them. A Python function defined in the notebook reads
its globals live, so the ones A called are rebuilt over that namespace too: a function A called that
calls another one the user redefined since still calls the old one.

**What a signature holds: what the cost depends on, not the values** (a tensor's shape, dtype, device
and strides, a module's layers and mode; never the weights): :func:`signature`, in
:mod:`perfmagic.timing.fingerprint`. Where values may matter after all (a sparse tensor, a boolean
mask, ``nonzero()`` in the code), :func:`values_may_matter` says so.

**Re-running changes the notebook's state.** Re-measuring a train step keeps training the user's model:
:func:`perfmagic.timing.snapshot.preserved` copies what the run read
before the re-measurement and writes it back after.

What this cannot see: state inside objects that have no cheap signature (a dict's values replaced
in place when it is large, a file the code reads), and C extensions' internal state.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..findings import Finding
from .fingerprint import _differs, _type_name, signature

_MAX_DEPTH = 4          # how deep the functions a cell calls are followed


@dataclass
class Capture:
    """What one recorded run read from the notebook's namespace."""

    code: str
    setup: str
    callables: dict[str, Any] = field(default_factory=dict)   # name -> the object itself
    data: dict[str, tuple[int, Any]] = field(default_factory=dict)  # name -> (id, signature)
    kinds: dict[str, str] = field(default_factory=dict)       # name -> its type's name (for notes)


def code_names(code: types.CodeType) -> set[str]:
    """The global and attribute names ``code`` and its nested code objects read (``co_names``)."""
    out = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            out |= code_names(const)
    return out


def _is_callable_thing(obj: Any) -> bool:
    return isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.ModuleType,
                            type, staticmethod, classmethod)) or (callable(obj) and not _has_data(obj))


def _has_data(obj: Any) -> bool:
    """Callable objects that carry data a cell changes in place (a torch module, a numpy ufunc is fine)."""
    mod = type(obj).__module__ or ""
    return mod.startswith("torch.nn") or hasattr(obj, "parameters") or hasattr(obj, "state_dict")


# ---- when the values may matter after all ------------------------------------------------------------

_DATA_DEPENDENT = ("nonzero", "argwhere", "masked_select", "unique", "unique_consecutive", "bincount")


def _value_notes(name: str, sig: Any) -> list[Finding]:
    if not isinstance(sig, tuple) or not sig:
        return []
    if sig[0] == "tensor" or sig[0] == "array":
        f = dict(sig[1])
        layout = str(f.get("layout", ""))
        if layout and layout != "torch.strided":
            return [Finding.of("rerun.sparse", name=name, layout=layout.replace("torch.", ""), nnz=f.get("nnz", "?"))]
        if f.get("dtype") in ("torch.bool", "|b1"):
            return [Finding.of("rerun.mask", name=name, what="tensor" if sig[0] == "tensor" else "array")]
        return []
    if isinstance(sig[0], str) and len(sig) == 3 and isinstance(sig[1], int) and isinstance(sig[2], tuple):
        out = []  # a container, item by item: a mapping's items are (repr(key), signature)
        keyed = all(isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], str) for x in sig[2])
        for i, item in enumerate(sig[2]):
            key, sub = item if keyed and sig[0] not in ("list", "tuple", "deque") else (str(i), item)
            out += _value_notes(f"{name}[{key}]", sub)
        return out
    return []


def values_may_matter(cap: Capture) -> list[Finding]:
    """Notes to print under a verdict: where the data's values, which the signatures leave out, may
    steer the cost after all, and which data has no signature at all."""
    out: list[Finding] = []
    for n, (_, sig) in sorted(cap.data.items()):
        out += _value_notes(n, sig)
    names: set[str] = set()
    for src in (cap.setup or "", cap.code or ""):
        try:
            names |= code_names(compile(src, "<perfmagic-capture>", "exec"))
        except SyntaxError:
            pass
    for obj in cap.callables.values():
        if isinstance(obj, types.FunctionType):
            names |= code_names(obj.__code__)
    for fn in _DATA_DEPENDENT:
        if fn in names:
            out.append(Finding.of("rerun.data-dependent", fn=fn))
    unknown = tuple((n, cap.kinds.get(n, "?")) for n, (_, sig) in sorted(cap.data.items()) if sig is None)
    if unknown:
        out.append(Finding.of("rerun.unfingerprinted", names=unknown))
    return out


# ---- capture, check, namespace ----------------------------------------------------------------------

def _follow(obj: Any, ns: Mapping[str, Any], depth: int, seen: set[int]) -> set[str]:
    """Names a notebook-defined function reads from the namespace, followed ``depth`` levels deep."""
    if depth <= 0 or id(obj) in seen or not isinstance(obj, types.FunctionType) or obj.__globals__ is not ns:
        return set()
    seen.add(id(obj))
    names = {n for n in code_names(obj.__code__) if n in ns}
    for n in list(names):
        names |= _follow(ns[n], ns, depth - 1, seen)
    return names


def capture(code: str, setup: str, ns: Mapping[str, Any]) -> Capture:
    """What ``code`` (and ``setup``) read from ``ns``: callables kept, data fingerprinted."""
    names: set[str] = set()
    for src in (setup or "", code or ""):
        try:
            names |= code_names(compile(src, "<perfmagic-capture>", "exec"))
        except SyntaxError:
            pass
    names = {n for n in names if n in ns}
    seen: set[int] = set()
    for n in list(names):
        names |= _follow(ns[n], ns, _MAX_DEPTH, seen)
    cap = Capture(code=code, setup=setup)
    for n in sorted(names):
        obj = ns[n]
        if _is_callable_thing(obj):
            cap.callables[n] = obj
        else:
            cap.data[n] = (id(obj), signature(obj))
            cap.kinds[n] = _type_name(obj)
    return cap


def _source_lines(fn: Any) -> list[str]:
    """A function's source lines (a notebook cell's through IPython's line cache); none where the source
    cannot be read (code made by ``exec``)."""
    import inspect

    try:
        return inspect.getsource(fn).splitlines()
    except (OSError, TypeError):
        return []


def _same_function(fa: Any, fb: Any) -> bool:
    """The same object, or two definitions with the same code (bytecode, constants, names)."""
    if fa is fb:
        return True
    ca, cb = getattr(fa, "__code__", None), getattr(fb, "__code__", None)
    if ca is None or cb is None:
        return False
    return (ca.co_code, ca.co_consts, ca.co_names) == (cb.co_code, cb.co_consts, cb.co_names)


def function_changes(cap_a: Capture, cap_b: Capture) -> list[tuple[str, list[str], list[str]]]:
    """The notebook functions A and B called under one name whose code differs (a function redefined
    between the two runs, which a comparison of the cells' text cannot see: both may be ``step()``), as
    (name, A's source lines, B's). A re-measured A runs with the functions it called then, so this is
    a change the verdict measures."""
    out = []
    for name in sorted(set(cap_a.callables) & set(cap_b.callables)):
        fa, fb = cap_a.callables[name], cap_b.callables[name]
        if isinstance(fa, types.FunctionType) and isinstance(fb, types.FunctionType) and not _same_function(fa, fb):
            out.append((name, _source_lines(fa), _source_lines(fb)))
    return out


def moved_name(reason: Any) -> str | None:
    """The notebook name a :func:`check` reason is about (its ``name``; in a reason that is text, the first
    name in backticks: ``"`L` was changed in place ..."`` -> ``"L"``)."""
    if isinstance(reason, Finding):
        return reason.get("name")
    parts = str(reason).split("`")
    return parts[1] if len(parts) >= 3 else None


def check(cap: Capture, ns: Mapping[str, Any]) -> list[Finding]:
    """Why the run can no longer be re-run as it was: one reason per name (empty: it can). A change of
    values alone (a training step's weights) is no reason: see the module docstring."""
    out = []
    for n, (oid, sig) in cap.data.items():
        if n not in ns:
            out.append(Finding.of("rerun.gone", name=n))
        elif id(ns[n]) != oid:
            out.append(Finding.of("rerun.rebound", name=n))
        elif sig is not None:
            now = signature(ns[n])
            if now != sig:
                out.append(Finding.of("rerun.in-place", name=n, how=str(_differs(sig, now))))
    return out


def namespace(cap: Capture, ns: dict[str, Any]) -> dict[str, Any]:
    """The namespace the run re-runs in: ``ns`` now, with the run's callables over it; the notebook's
    own functions it called are rebuilt to read this namespace (see the module docstring)."""
    out = dict(ns)
    out.update(cap.callables)
    for n, obj in cap.callables.items():
        if isinstance(obj, types.FunctionType) and obj.__globals__ is ns:
            clone = types.FunctionType(obj.__code__, out, obj.__name__, obj.__defaults__, obj.__closure__)
            clone.__kwdefaults__ = obj.__kwdefaults__
            clone.__dict__.update(obj.__dict__)
            out[n] = clone
    return out


__all__ = ["function_changes", "Capture", "capture", "check", "code_names", "namespace", "signature",
           "values_may_matter"]
