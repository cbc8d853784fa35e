"""What kind of object a piece of notebook data is, and what the cost of using it depends on.

A recorded run keeps a cheap :func:`signature` of the data it read (:mod:`perfmagic.timing.rerun`), so
that a later re-run can tell whether that data still means the same work; the kind predicates here are
shared with the snapshot around a re-measurement (:mod:`perfmagic.timing.snapshot`). torch and numpy
are never imported here: a torch object cannot exist unless the notebook imported torch.

**What a signature holds: what the cost depends on, not the values.** A training step changes every
weight and every optimizer moment on each call, and its cost does not depend on them. So a tensor is
fingerprinted by shape, dtype, device, layout, strides (the memory format: ``channels_last`` moves
them), requires_grad (and nnz when sparse); a torch module by its type, the training mode and type of
every submodule, each parameter's and buffer's fingerprint by name, and the parameter count; an
optimizer by its type and, per parameter group, the parameter count and its hyperparameters as far as
they choose the work (integers and flags exactly, a float only as zero or not: ``momentum=0`` skips a
buffer; learning rates not at all: a scheduler moves them every step, to zero too); a numpy array by
shape, dtype and strides (small integer arrays, which may be sizes, by content too). Never a data
pointer, a version counter or the values. Plain Python values (numbers, strings, small containers)
steer control flow and sizes, so they keep a content digest. Where values may matter after all (a
sparse tensor, a boolean mask, ``nonzero()`` in the code), :func:`~perfmagic.timing.rerun.values_may_matter`
says so.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import sys
import types
from collections import deque
from collections.abc import Mapping
from typing import Any

from ..findings import Finding
_SMALL_BYTES = 1 << 20  # data up to this size is fingerprinted by content
_MAX_ITEMS = 10_000     # containers up to this length are fingerprinted item by item
_SMALL_ARRAY = 64       # integer/bool arrays up to this many elements keep a digest (used as sizes)
_NEST = 4               # how deep containers and plain objects are followed
_MISSING = object()    # a default no stored value equals


# ---- what a piece of data's cost depends on -----------------------------------------------------------

def _torch() -> Any:
    """torch if the notebook imported it (a torch object cannot exist otherwise): never imported here."""
    return sys.modules.get("torch")


def _is_tensor(obj: Any) -> bool:
    torch = _torch()
    return torch is not None and isinstance(obj, torch.Tensor)


def _is_module(obj: Any) -> bool:
    torch = _torch()
    return torch is not None and isinstance(obj, torch.nn.Module)


def _is_optimizer(obj: Any) -> bool:
    return hasattr(obj, "state_dict") and hasattr(obj, "param_groups") and hasattr(obj, "state")


def _type_name(obj: Any) -> str:
    return type(obj).__qualname__


def _tensor_fields(t: Any) -> tuple[tuple[str, Any], ...]:
    """A tensor's cost-relevant facts as ``(field, value)`` pairs (see the module docstring)."""
    torch = _torch()
    out: list[tuple[str, Any]] = [("shape", tuple(t.shape)), ("dtype", str(t.dtype)), ("device", str(t.device)),
                                  ("layout", str(t.layout)), ("requires_grad", bool(t.requires_grad))]
    try:
        if t.layout == torch.strided:
            out.append(("strides", tuple(t.stride())))
        else:
            out.append(("nnz", int(t._nnz())))
    except Exception:  # noqa: BLE001 - nested, lazy or exotic tensors: the rest still holds
        pass
    return tuple(out)


def _module_fields(m: Any) -> tuple[tuple[str, Any], ...]:
    mods = tuple((name, type(sub).__qualname__, bool(sub.training)) for name, sub in m.named_modules())
    params, count = [], 0
    for name, p in m.named_parameters():
        try:
            params.append((name, _tensor_fields(p)))
            count += p.numel()
        except Exception:  # noqa: BLE001 - an uninitialised (lazy) parameter has no shape yet
            params.append((name, None))
    buffers = tuple((name, _tensor_fields(b)) for name, b in m.named_buffers())
    return (("type", type(m).__qualname__), ("modules", mods), ("parameters", tuple(params)),
            ("buffers", buffers), ("parameter count", count))


def _hyper(v: Any) -> Any:
    """An optimizer hyperparameter as far as it chooses the work: counts and flags exactly, a float as
    zero or not (``momentum=0`` skips the buffer; the learning rate's value changes nothing)."""
    if v is None or isinstance(v, (bool, str, int)):
        return v
    if isinstance(v, float):
        return "0" if v == 0 else "non-zero"
    if isinstance(v, (tuple, list)):
        return tuple(_hyper(x) for x in v)
    if _is_tensor(v):
        return ("tensor",) + _tensor_fields(v)
    return type(v).__qualname__


def _optimizer_fields(opt: Any) -> tuple[tuple[str, Any], ...]:
    groups = []
    for g in opt.param_groups:
        ps = list(g.get("params", ()))
        groups.append((("parameters", len(ps)), ("elements", sum(int(p.numel()) for p in ps)))
                      + tuple((k, _hyper(v)) for k, v in sorted(g.items()) if k != "params" and "lr" not in k))
    return (("type", type(opt).__qualname__), ("groups", tuple(groups)))


def _dataloader_fields(dl: Any) -> tuple[tuple[str, Any], ...]:
    keys = ("batch_size", "num_workers", "pin_memory", "drop_last", "persistent_workers", "prefetch_factor")
    out = tuple((k, getattr(dl, k, None)) for k in keys)
    try:
        out += (("dataset length", len(dl.dataset)),)
    except Exception:  # noqa: BLE001 - an iterable dataset has no length
        pass
    return (("type", type(dl).__qualname__),) + out


_PLAIN = (int, float, complex, str, bytes, bool, type(None), range, slice, enum.Enum)


def _is_plain(obj: Any, depth: int = _NEST) -> bool:
    """A Python value whose content steers control flow and sizes (compared by value)."""
    if isinstance(obj, _PLAIN):
        return True
    if depth > 0 and isinstance(obj, (tuple, list, set, frozenset, deque)) and len(obj) <= _MAX_ITEMS:
        return all(_is_plain(x, depth - 1) for x in obj)
    if depth > 0 and isinstance(obj, dict) and len(obj) <= _MAX_ITEMS:
        return all(_is_plain(k, depth - 1) and _is_plain(v, depth - 1) for k, v in obj.items())
    return False


def _digest(obj: Any) -> str:
    return hashlib.sha1(repr(obj).encode()).hexdigest()


def signature(obj: Any, _depth: int = _NEST) -> Any:
    """A cheap fingerprint of what the cost of using ``obj`` depends on (see the module docstring);
    two equal signatures mean the same work. None: unknown (changes to it are not seen)."""
    try:
        if _is_tensor(obj):
            return ("tensor", _tensor_fields(obj))
        if _is_module(obj):
            return ("module", _module_fields(obj))
        if _is_optimizer(obj):
            return ("optimizer", _optimizer_fields(obj))
        if hasattr(obj, "batch_size") and hasattr(obj, "num_workers") and hasattr(obj, "dataset"):
            return ("dataloader", _dataloader_fields(obj))
        iface = getattr(obj, "__array_interface__", None)
        if isinstance(iface, dict):  # a numpy array (or one that speaks its interface)
            return ("array", _array_fields(obj, iface))
        if isinstance(obj, (int, float, complex, str, bytes, bool, type(None), tuple, frozenset)) and _is_plain(obj):
            return ("value", obj if len(repr(obj)) <= 10_000 else _digest(obj))
        if isinstance(obj, (list, dict, set, bytearray, deque)) and (isinstance(obj, bytearray) or _is_plain(obj)):
            return (type(obj).__name__, len(obj), _digest(obj) if len(obj) <= _MAX_ITEMS else None)
        if isinstance(obj, (list, tuple, set, frozenset, deque, Mapping)):  # holds tensors, arrays, modules ...
            if _depth <= 0 or len(obj) > _MAX_ITEMS:
                return (type(obj).__name__, len(obj), None)
            if isinstance(obj, Mapping):  # a dict, or a dict-like batch (transformers' BatchEncoding)
                items = tuple((repr(k), signature(v, _depth - 1)) for k, v in obj.items())
            elif isinstance(obj, (set, frozenset)):
                items = tuple(sorted(repr(signature(v, _depth - 1)) for v in obj))
            else:
                items = tuple(signature(v, _depth - 1) for v in obj)
            return (type(obj).__name__, len(obj), items)
        if hasattr(obj, "state_dict") and hasattr(obj, "load_state_dict"):  # a scheduler, a grad scaler
            return ("stateful", type(obj).__qualname__)
    except Exception:  # noqa: BLE001 - a fingerprint is a best effort
        return None
    return None


def _array_fields(obj: Any, iface: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    shape = tuple(iface.get("shape") or ())
    typestr = str(iface.get("typestr"))
    strides = tuple(getattr(obj, "strides", None) or iface.get("strides") or ())
    out: tuple[tuple[str, Any], ...] = (("shape", shape), ("dtype", typestr), ("strides", strides))
    size = 1
    for n in shape:
        size *= int(n)
    if typestr[1:2] in ("i", "u", "b") and size <= _SMALL_ARRAY and hasattr(obj, "tobytes"):
        out += (("values", hashlib.sha1(obj.tobytes()).hexdigest()),)  # small integers: sizes, counts, indices
    return out


def _differs(old: Any, new: Any) -> Finding:
    """What moved between two signatures: a ``rerun.changed`` finding (``"its strides changed"``)."""
    if not (isinstance(old, tuple) and isinstance(new, tuple) and len(old) == 2 == len(new)
            and old[0] == new[0] and old[0] in ("tensor", "module", "optimizer", "dataloader", "array")):
        if isinstance(old, tuple) and isinstance(new, tuple) and old[:1] != new[:1]:
            return Finding.of("rerun.changed", what="kind")
        return Finding.of("rerun.changed", what="contents")
    a, b = dict(old[1]), dict(new[1])
    if old[0] == "optimizer" and a["type"] == b["type"] and len(a["groups"]) == len(b["groups"]):
        keys = [k for ga, gb in zip(a["groups"], b["groups"]) for k, v in ga if dict(gb).get(k, _MISSING) != v]
        if keys:
            return Finding.of("rerun.changed", what="fields", fields=tuple(dict.fromkeys(keys)))
    if old[0] != "module":
        moved = [k for k in a.keys() | b.keys() if a.get(k) != b.get(k)]
        order = [k for k in a if k in moved] + [k for k in b if k in moved and k not in a]
        return Finding.of("rerun.changed", what="fields",
                          fields=tuple("parameter groups" if k == "groups" else k for k in order))
    if a["type"] != b["type"]:
        return Finding.of("rerun.changed", what="type", old=a["type"], new=b["type"])
    if [m[:2] for m in a["modules"]] != [m[:2] for m in b["modules"]]:
        return Finding.of("rerun.changed", what="layers")
    if a["modules"] != b["modules"]:
        return Finding.of("rerun.changed", what="mode")
    for kind in ("parameters", "buffers"):
        pa, pb = dict(a[kind]), dict(b[kind])
        if pa.keys() != pb.keys():
            return Finding.of("rerun.changed", what="members", member=kind)
        moved = [n for n in pa if pa[n] != pb[n]]
        if moved:
            fa, fb = dict(pa[moved[0]] or ()), dict(pb[moved[0]] or ())
            what = ", ".join(k for k in fa.keys() | fb.keys() if fa.get(k) != fb.get(k)) or "shape"
            return Finding.of("rerun.changed", what="tensor", fields=what, member=kind[:-1], name=moved[0],
                              more=len(moved) - 1)
    return Finding.of("rerun.changed", what="count")


# ---- what a re-run can change, and what it cannot ----------------------------------------------------

def _is_users_class(cls: type) -> bool:
    """Defined in the notebook, or in the user's own modules (not an installed package, not the
    standard library): a plain Python class whose state is its attributes."""
    if cls.__module__ == "__main__":
        return True
    path = getattr(sys.modules.get(cls.__module__), "__file__", None) or ""
    if not path.endswith(".py"):
        return False
    import sysconfig

    libs = {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")} - {None}
    return not any(path.startswith(str(lib)) for lib in libs) and "-packages" not in path


def _is_plain_object(obj: Any) -> bool:
    """An instance of a class the user wrote (or a namespace, a dataclass): its attributes are what a
    re-run can change, and they can be put back."""
    return hasattr(obj, "__dict__") and not isinstance(obj, type) and (
        _is_users_class(type(obj)) or isinstance(obj, types.SimpleNamespace)
        or dataclasses.is_dataclass(obj) or type(obj).__name__ == "Namespace")


def _is_torch_data_reader(obj: Any) -> bool:
    """A DataLoader, Dataset or Sampler: a re-run makes a new iterator from it and changes nothing of
    its own (a sampler's randomness comes from the global generator, which is restored)."""
    return any(c.__module__.startswith("torch.utils.data") for c in type(obj).__mro__[:-1])


_IMMUTABLE_MODULES = ("pathlib", "datetime", "decimal", "fractions", "uuid", "re", "ipaddress")


__all__ = ["signature"]
