"""Re-running a recorded run in this process: what its code called, and whether its data is still there.

The comparison that cancels noise is the interleaved one (A B B A ... in one process): machine drift
hits both sides alike. After the fact that needs run A's code *as it was*: a notebook user measures A,
edits a function, measures B. So when a run is recorded, :func:`capture` keeps, for this kernel's
lifetime, references to what its code called (functions, classes, modules, callables: not data) and a
cheap signature of the data it read. Later :func:`check` says why A can no longer be re-run faithfully
(a name gone; data rebound or changed in place, e.g. ``model.to(memory_format=torch.channels_last)``
moves every parameter), and :func:`namespace` builds the namespace A runs in: the notebook's names
now, with A's callables over them. A Python function defined in the notebook reads its globals live,
so the ones A called are rebuilt over that namespace too: a function A called that calls another one
the user redefined since still calls the old one.

What this cannot see: state inside objects that have no cheap signature (a dict's values replaced
in place when it is large, a file the code reads), and C extensions' internal state.
"""

from __future__ import annotations

import hashlib
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_MAX_DEPTH = 4          # how deep the functions a cell calls are followed
_SMALL_BYTES = 1 << 20  # data up to this size is fingerprinted by content


@dataclass
class Capture:
    """What one recorded run read from the notebook's namespace."""

    code: str
    setup: str
    callables: dict[str, Any] = field(default_factory=dict)   # name -> the object itself
    data: dict[str, tuple[int, Any]] = field(default_factory=dict)  # name -> (id, signature)


def _names(code: types.CodeType) -> set[str]:
    out = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            out |= _names(const)
    return out


def _is_callable_thing(obj: Any) -> bool:
    return isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.ModuleType,
                            type, staticmethod, classmethod)) or (callable(obj) and not _has_data(obj))


def _has_data(obj: Any) -> bool:
    """Callable objects that carry data a cell changes in place (a torch module, a numpy ufunc is fine)."""
    mod = type(obj).__module__ or ""
    return mod.startswith("torch.nn") or hasattr(obj, "parameters") or hasattr(obj, "state_dict")


def signature(obj: Any) -> Any:
    """A cheap fingerprint of data: what changes when the data is changed in place. None: unknown."""
    try:
        if hasattr(obj, "data_ptr") and hasattr(obj, "_version"):  # a torch tensor
            return ("tensor", tuple(obj.shape), tuple(obj.stride()), obj.data_ptr(), int(obj._version),
                    str(obj.dtype), str(obj.device))
        if hasattr(obj, "named_parameters") and hasattr(obj, "named_buffers"):  # a torch module
            parts = []
            for name, t in list(obj.named_parameters()) + list(obj.named_buffers()):
                parts.append((name, tuple(t.shape), tuple(t.stride()), t.data_ptr(), int(t._version), str(t.dtype)))
            return ("module", type(obj).__name__, bool(getattr(obj, "training", False)), tuple(parts))
        iface = getattr(obj, "__array_interface__", None)
        if isinstance(iface, dict):  # a numpy array (or one that speaks its interface)
            nbytes = int(getattr(obj, "nbytes", 0) or 0)
            digest = hashlib.sha1(obj.tobytes()).hexdigest() if 0 < nbytes <= _SMALL_BYTES and hasattr(obj, "tobytes") else None
            return ("array", iface.get("shape"), iface.get("strides"), iface.get("data"), iface.get("typestr"), digest)
        if isinstance(obj, (int, float, complex, str, bytes, bool, type(None), tuple, frozenset)):
            return ("value", obj if len(repr(obj)) <= 10_000 else hashlib.sha1(repr(obj).encode()).hexdigest())
        if isinstance(obj, (list, dict, set, bytearray)):
            text = repr(obj) if len(obj) <= 10_000 else None
            return (type(obj).__name__, len(obj), hashlib.sha1(text.encode()).hexdigest() if text is not None else None)
    except Exception:  # noqa: BLE001 - a fingerprint is a best effort
        return None
    return None


def _follow(obj: Any, ns: Mapping[str, Any], depth: int, seen: set[int]) -> set[str]:
    """Names a notebook-defined function reads from the namespace, followed ``depth`` levels deep."""
    if depth <= 0 or id(obj) in seen or not isinstance(obj, types.FunctionType) or obj.__globals__ is not ns:
        return set()
    seen.add(id(obj))
    names = {n for n in _names(obj.__code__) if n in ns}
    for n in list(names):
        names |= _follow(ns[n], ns, depth - 1, seen)
    return names


def capture(code: str, setup: str, ns: Mapping[str, Any]) -> Capture:
    """What ``code`` (and ``setup``) read from ``ns``: callables kept, data fingerprinted."""
    names: set[str] = set()
    for src in (setup or "", code or ""):
        try:
            names |= _names(compile(src, "<perfmagic-capture>", "exec"))
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
    return cap


def moved_name(reason: str) -> str | None:
    """The notebook name a :func:`check` reason is about: ``"`L` was changed in place ..."`` -> ``"L"``."""
    parts = reason.split("`")
    return parts[1] if len(parts) >= 3 else None


def check(cap: Capture, ns: Mapping[str, Any]) -> list[str]:
    """Why the run can no longer be re-run as it was: one reason per name (empty: it can)."""
    out = []
    for n, (oid, sig) in cap.data.items():
        if n not in ns:
            out.append(f"`{n}` is gone from the notebook")
        elif id(ns[n]) != oid:
            out.append(f"`{n}` now names another object than when the run was measured")
        elif sig is not None and signature(ns[n]) != sig:
            out.append(f"`{n}` was changed in place since (its shape, layout, storage or contents moved)")
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


__all__ = ["Capture", "capture", "check", "namespace", "signature"]
