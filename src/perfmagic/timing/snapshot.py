"""Snapshot and restore: the notebook's state kept as it was through a re-measurement.

A re-measurement re-runs the user's code on the notebook's own objects: a train step re-measured would
keep training the user's model. So :func:`preserved` copies, before the re-measurement, what the run
read (its :class:`~perfmagic.timing.rerun.Capture`) that a re-run can change — module parameters,
buffers and gradients, optimizer and scheduler state, tensors, arrays, mutable containers, the random
generators — on the host, and writes it back in place on exit (an exception and Ctrl-C included), so
the weights and the optimizer state come back bit-identical. What it cannot restore (an iterator, an
open file, an object of a type it does not know) or cannot afford (more than half the free memory) it
refuses up front with :class:`SnapshotError`, naming the objects and the fix.
"""

from __future__ import annotations

import copy
import io
import sys
import types
from collections import deque
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import PerfmagicError
from ..findings import Finding
from .fingerprint import (_IMMUTABLE_MODULES, _MISSING, _NEST, _PLAIN, _is_module, _is_optimizer, _is_plain,
                          _is_plain_object, _is_tensor, _is_torch_data_reader, _torch, _type_name)
from ..core.interrupts import sigint_deferred
from .rerun import Capture

class SnapshotError(PerfmagicError):
    """What a run read cannot be snapshotted and restored around a re-measurement. ``names``: the
    notebook names concerned (what ``preserved(..., skip=)`` takes); ``reasons``: the object (a name,
    or a path inside one: ``batch['x']``, ``trainer.log``) -> why; ``nbytes``: the snapshot's size when
    memory was the reason (else None)."""

    def __init__(self, reasons: dict[str, Any], nbytes: int | None = None) -> None:
        self.reasons = dict(reasons)  # a snapshot.* finding (or text) per path
        self.names = list(dict.fromkeys(_root(p) for p in reasons))
        self.nbytes = nbytes
        super().__init__(str(Finding.of("snapshot.refused", n=len(self.names),
                                        reasons=tuple((k, str(v)) for k, v in self.reasons.items()))))


def _root(path: str) -> str:
    """The notebook name a path inside it starts with: ``trainer.opt`` -> ``trainer``."""
    return path.split("[")[0].split(".")[0]


@dataclass
class _Item:
    name: str
    nbytes: int
    take: Callable[[], Callable[[], None]]   # copies the state, returns the restore


def _nbytes(t: Any) -> int:
    try:
        if t.device.type == "meta":
            return 0
        return int(t.numel()) * int(t.element_size())
    except Exception:  # noqa: BLE001
        return 0


def _host(t: Any) -> Any:
    """A host copy of a tensor's data (None for a meta tensor, which has none)."""
    t = t.detach()
    if t.device.type == "meta":
        return None
    return t.clone() if t.device.type == "cpu" else t.to("cpu", copy=True)


def _tensor_state(t: Any) -> Callable[[], None]:
    """Copy one tensor (and its gradient); return what puts both back into the same tensor object."""
    torch = _torch()
    facts = (tuple(t.shape), tuple(t.stride()) if t.layout == torch.strided else None, t.dtype, t.device)
    data = _host(t)  # always written back: not every in-place write bumps ``_version`` (batch norm's stats)
    grad = getattr(t, "grad", None) if t.is_leaf else None
    saved_grad = None if grad is None else (_host(grad), grad.device)

    def restore() -> None:
        inference = bool(getattr(t, "is_inference", lambda: False)())
        with torch.inference_mode() if inference else torch.no_grad():
            now = (tuple(t.shape), tuple(t.stride()) if t.layout == torch.strided else None, t.dtype, t.device)
            if now == facts and facts[1] is not None:
                if data is not None:
                    t.copy_(data)  # the same storage, the same strides
            elif data is not None and facts[1] is not None:
                fresh = torch.empty_strided(facts[0], facts[1], dtype=facts[2], device=facts[3])
                t.data = fresh.copy_(data)
            elif data is not None:
                t.data = data.to(facts[3])
            if t.is_leaf and (saved_grad is not None or t.grad is not None):
                if saved_grad is None:
                    t.grad = None
                elif t.grad is not None and (t.grad.shape, t.grad.dtype, t.grad.device) == \
                        (saved_grad[0].shape, saved_grad[0].dtype, saved_grad[1]):
                    t.grad.copy_(saved_grad[0])
                else:
                    t.grad = saved_grad[0].to(saved_grad[1])
    return restore


def _tensor_bytes(t: Any) -> int:
    g = getattr(t, "grad", None) if t.is_leaf else None
    return _nbytes(t) + (_nbytes(g) if g is not None else 0)


def _plain_attrs(obj: Any) -> dict[str, Any]:
    return {k: v for k, v in vars(obj).items() if isinstance(v, _PLAIN)}


def _module_item(name: str, m: Any, seen: set[int]) -> _Item:
    subs = [s for _, s in m.named_modules()]
    tensors = []
    for s in subs:
        for t in list(s._parameters.values()) + list(s._buffers.values()):
            if t is not None and id(t) not in seen:
                seen.add(id(t))
                tensors.append(t)

    def take() -> Callable[[], None]:
        # the structure first (a re-run may replace a layer or a parameter), then each tensor's data
        dicts = [(s, dict(s._modules), dict(s._parameters), dict(s._buffers), _plain_attrs(s)) for s in subs]
        restores = [_tensor_state(t) for t in tensors]

        def restore() -> None:
            for s, mods, params, bufs, attrs in dicts:
                for d, saved in ((s._modules, mods), (s._parameters, params), (s._buffers, bufs)):
                    if [(k, id(v)) for k, v in d.items()] != [(k, id(v)) for k, v in saved.items()]:
                        d.clear()
                        d.update(saved)
                for k, v in attrs.items():
                    if vars(s).get(k, _MISSING) is not v:
                        object.__setattr__(s, k, v)
            for r in restores:
                r()
        return restore
    return _Item(name, sum(_tensor_bytes(t) for t in tensors), take)



def _deep_host(obj: Any) -> Any:
    """A deep copy in which every tensor is a host copy (a state_dict's tensors are live references)."""
    if _is_tensor(obj):
        return _host(obj)
    if type(obj) is dict:
        return {k: _deep_host(v) for k, v in obj.items()}
    if type(obj) in (list, tuple):
        return type(obj)(_deep_host(v) for v in obj)
    return copy.deepcopy(obj)


def _state_bytes(obj: Any) -> int:
    if _is_tensor(obj):
        return _nbytes(obj)
    if isinstance(obj, dict):
        return sum(_state_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_state_bytes(v) for v in obj)
    return 0


def _optimizer_item(name: str, opt: Any) -> _Item:
    """Hyperparameters and per-parameter state, restored in place (the same state tensors, so a
    compiled or CUDA-graphed step keeps pointing at them); state a re-run created is dropped."""
    torch = _torch()

    def take() -> Callable[[], None]:
        groups = [(g, list(g["params"]), {k: copy.deepcopy(v) for k, v in g.items() if k != "params"})
                  for g in opt.param_groups]
        group_list = list(opt.param_groups)
        state = {p: {k: ((_host(v), v.device, v.dtype) if _is_tensor(v) else copy.deepcopy(v)) for k, v in st.items()}
                 for p, st in opt.state.items()}

        def restore() -> None:
            opt.param_groups[:] = group_list
            for g, params, hyper in groups:
                g["params"][:] = params
                for k in [k for k in g if k != "params" and k not in hyper]:
                    del g[k]
                g.update(hyper)
            for p in [p for p in opt.state if p not in state]:
                del opt.state[p]
            with torch.no_grad():
                for p, saved in state.items():
                    live = opt.state[p]
                    for k in [k for k in live if k not in saved]:
                        del live[k]
                    for k, v in saved.items():
                        if isinstance(v, tuple) and len(v) == 3 and _is_tensor(v[0]):
                            cur = live.get(k)
                            if _is_tensor(cur) and cur.shape == v[0].shape and cur.dtype == v[2] \
                                    and cur.device == v[1]:
                                cur.copy_(v[0])
                            else:
                                live[k] = v[0].to(device=v[1], dtype=v[2])
                        else:
                            live[k] = v
        return restore
    nbytes = sum(_state_bytes(st) for st in opt.state.values())
    return _Item(name, nbytes, take)


def _state_dict_item(name: str, obj: Any) -> _Item:
    def take() -> Callable[[], None]:
        saved = _deep_host(obj.state_dict())
        return lambda: obj.load_state_dict(saved)
    return _Item(name, _state_bytes(obj.state_dict()), take)


def _get_set_item(name: str, obj: Any, get: str, put: str) -> _Item:
    def take() -> Callable[[], None]:
        saved = getattr(obj, get)()
        return lambda: getattr(obj, put)(saved)
    return _Item(name, 0, take)


def _array_item(name: str, arr: Any) -> _Item:
    def take() -> Callable[[], None]:
        import numpy as np

        saved = arr.copy()

        def restore() -> None:
            if arr.shape != saved.shape:
                arr.resize(saved.shape, refcheck=False)
            np.copyto(arr, saved)
        return restore
    return _Item(name, int(arr.nbytes), take)


def _shallow_item(name: str, obj: Any, deep: bool = False) -> _Item:
    """A mutable container's (or a plain object's) own slots; what they hold is planned on its own
    (``deep``: plain values nested deeper than that, copied whole)."""
    def take() -> Callable[[], None]:
        if isinstance(obj, (list, bytearray, deque)):
            saved: Any = obj[:] if not isinstance(obj, deque) else list(obj)
        elif isinstance(obj, MutableMapping):
            saved = dict(obj.items())
        elif isinstance(obj, set):
            saved = obj.copy()
        else:
            saved = dict(vars(obj))
        if deep:
            saved = copy.deepcopy(saved)
        return lambda: _refill(obj, saved)   # looked up when it runs (a test patches it)
    return _Item(name, 0, take)


def _refill(obj: Any, saved: Any) -> None:
    """Put a container's (or a plain object's) slots back, in the same object."""
    if isinstance(obj, (list, bytearray)):
        obj[:] = saved
    elif isinstance(obj, deque):
        obj.clear()
        obj.extend(saved)
    elif isinstance(obj, (MutableMapping, set)):
        obj.clear()
        obj.update(saved)
    else:
        vars(obj).clear()
        vars(obj).update(saved)



def _plan(name: str, obj: Any, seen: set[int], items: list[_Item], refused: dict[str, Any],
          depth: int = _NEST) -> None:
    """What to copy so that ``obj`` comes back as it is now; what cannot be goes to ``refused``."""
    if id(obj) in seen or isinstance(obj, _PLAIN) or isinstance(obj, (type, types.ModuleType, types.FunctionType,
                                                                      types.BuiltinFunctionType, types.MethodType)):
        return
    seen.add(id(obj))
    torch, np = _torch(), sys.modules.get("numpy")
    if torch is not None and isinstance(obj, (torch.dtype, torch.device, torch.layout, torch.memory_format)) \
            or np is not None and isinstance(obj, np.dtype) or type(obj).__module__ in _IMMUTABLE_MODULES:
        return
    if isinstance(obj, (tuple, frozenset)):  # immutable, but what it holds may not be
        if _is_plain(obj):
            return
        for i, v in enumerate(obj):
            _plan(f"{name}[{i}]", v, seen, items, refused, depth - 1)
        return
    if _is_tensor(obj):
        seen.add(id(obj))
        items.append(_Item(name, _tensor_bytes(obj), lambda o=obj: _tensor_state(o)))
    elif _is_module(obj):
        items.append(_module_item(name, obj, seen))
    elif _is_optimizer(obj):
        items.append(_optimizer_item(name, obj))
    elif hasattr(obj, "state_dict") and hasattr(obj, "load_state_dict"):
        items.append(_state_dict_item(name, obj))
    elif hasattr(obj, "get_state") and hasattr(obj, "set_state"):      # torch.Generator, np.random.RandomState
        items.append(_get_set_item(name, obj, "get_state", "set_state"))
    elif hasattr(obj, "getstate") and hasattr(obj, "setstate"):        # random.Random
        items.append(_get_set_item(name, obj, "getstate", "setstate"))
    elif hasattr(obj, "bit_generator"):                                # np.random.Generator
        bg = obj.bit_generator
        items.append(_Item(name, 0, lambda: (lambda s=copy.deepcopy(bg.state): setattr(bg, "state", s))))
    elif isinstance(getattr(obj, "__array_interface__", None), dict) and hasattr(obj, "flags"):
        if obj.flags.writeable:
            items.append(_array_item(name, obj))
    elif isinstance(obj, (io.IOBase,)) or hasattr(obj, "fileno") and hasattr(obj, "read"):
        refused[name] = Finding.of("snapshot.file", type=_type_name(obj))
    elif isinstance(obj, Iterator):
        refused[name] = Finding.of("snapshot.iterator", type=_type_name(obj))
    elif _is_torch_data_reader(obj):
        return  # before the plain objects: a user's Dataset holds data a re-run only reads
    elif isinstance(obj, (list, MutableMapping, set, bytearray, deque)) or _is_plain_object(obj):
        values = obj.values() if isinstance(obj, Mapping) else () if isinstance(obj, bytearray) else \
            vars(obj).values() if not isinstance(obj, (list, set, deque)) else obj
        if all(isinstance(v, _PLAIN) for v in values):
            items.append(_shallow_item(name, obj))
            return  # numbers and strings: the shallow copy is the whole state
        if depth <= 0 and _is_plain(obj):
            items.append(_shallow_item(name, obj, deep=True))  # nested deeper: copied, values kept
            return
        items.append(_shallow_item(name, obj))
        if depth <= 0:
            refused[name] = Finding.of("snapshot.too-deep", type=_type_name(obj), levels=_NEST)
            return
        if isinstance(obj, MutableMapping):
            kids: Any = ((f"{name}[{k!r}]", v) for k, v in obj.items())
        elif isinstance(obj, (list, set, deque)):
            kids = ((f"{name}[{i}]", v) for i, v in enumerate(obj))
        else:
            kids = ((f"{name}.{k}", v) for k, v in vars(obj).items())
        for sub, v in kids:
            _plan(sub, v, seen, items, refused, depth - 1)
    elif hasattr(obj, "__array_interface__"):
        return  # read-only arrays and numpy scalars
    else:
        refused[name] = Finding.of("snapshot.opaque", type=_type_name(obj))


def _rng_item() -> _Item:
    """The global random generators a re-run draws from (dropout, shuffling, torch.randn in the cell)."""
    def take() -> Callable[[], None]:
        import random

        saved: list[tuple[Callable[[Any], Any], Any]] = [(random.setstate, random.getstate())]
        torch = _torch()
        if torch is not None:
            saved.append((torch.set_rng_state, torch.get_rng_state()))
            if torch.cuda.is_available() and torch.cuda.is_initialized():
                saved.append((torch.cuda.set_rng_state_all, torch.cuda.get_rng_state_all()))
        np = sys.modules.get("numpy")
        if np is not None:
            saved.append((np.random.set_state, np.random.get_state()))

        def restore() -> None:
            for put, state in saved:
                put(state)
        return restore
    return _Item("random generators", 0, take)




class Snapshot:
    """The state of what a run read, copied once (host memory); :meth:`restore` puts it back in place.
    Used as a context manager it restores on exit, whatever ended the block (exception, Ctrl-C)."""

    def __init__(self, items: list[_Item], skipped: Sequence[str] = ()) -> None:
        self.names: tuple[str, ...] = tuple(dict.fromkeys(i.name for i in items if i.name != "random generators"))
        self.nbytes: int = sum(i.nbytes for i in items)
        self.skipped: tuple[str, ...] = tuple(skipped)   # names left unprotected on request (``skip=``)
        self._items = items
        self._restores: list[Callable[[], None]] | None = None

    def take(self) -> Snapshot:
        if self._restores is None:
            self._restores = [i.take() for i in self._items]
        return self

    def restore(self) -> None:
        """Put everything back (once); every item is tried, the first failure is raised afterwards."""
        restores, self._restores = self._restores, None
        if not restores:
            return
        failed: list[tuple[str, BaseException]] = []
        with sigint_deferred():
            for item, r in zip(self._items, restores):
                try:
                    r()
                except Exception as exc:  # noqa: BLE001 - put the rest back, then say which failed
                    failed.append((item.name, exc))
        if failed:
            name, exc = failed[0]
            raise PerfmagicError(f"could not restore `{name}` after the re-measurement ({type(exc).__name__}: "
                                 f"{exc}); its state is what the re-run left") from exc

    def __enter__(self) -> Snapshot:
        return self.take()

    def __exit__(self, *exc: Any) -> None:
        self.restore()


def _available_bytes() -> int | None:
    from ..core.container import available_memory

    return available_memory()[0]


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def preserved(caps: Capture | Sequence[Capture], ns: Mapping[str, Any], *, skip: Sequence[str] = (),
              limit_bytes: int | None = None) -> Snapshot:
    """Snapshot (now, on the host) the state of everything ``caps`` read from ``ns`` that a re-run can
    change, to be restored in place when the returned :class:`Snapshot` is left::

        with preserved([cap_a, cap_b], user_ns) as snap:   # SnapshotError here: nothing was run
            bench_pair(...)                                  # snap.nbytes: what the copy holds
        # weights, optimizer state, tensors, arrays, containers and the random generators are back

    Raises :class:`SnapshotError` (before copying anything) for objects that cannot be restored (an
    iterator, an open file, an object of an unknown type) or when the copy would need more than
    ``limit_bytes`` (default: half the memory available now). ``skip``: names to leave unprotected
    (the user asked for ``--rerun`` anyway)."""
    caps = [caps] if isinstance(caps, Capture) else list(caps)
    names = sorted({n for c in caps for n in c.data if n in ns and n not in skip})
    items: list[_Item] = []
    refused: dict[str, Any] = {}
    seen: set[int] = set()
    modules_first = sorted(names, key=lambda n: not _is_module(ns[n]))  # a model's tensors before their views
    for n in modules_first:
        _plan(n, ns[n], seen, items, refused)
    if refused:
        raise SnapshotError(refused)
    items.append(_rng_item())
    snap = Snapshot(items, skipped=[n for n in skip if n in ns])
    limit_why = "the limit given"
    if limit_bytes is None:
        avail = _available_bytes()
        limit_bytes, limit_why = (avail // 2 if avail is not None else None), "half the memory available now"
    if limit_bytes is not None and snap.nbytes > limit_bytes:
        big = sorted({_root(i.name) for i in items if i.nbytes}, key=names.index)
        raise SnapshotError({n: f"({_type_name(ns[n])}) is part of a {_size(snap.nbytes)} snapshot, more than the "
                                f"{_size(limit_bytes)} it may take ({limit_why})"
                             for n in big}, nbytes=snap.nbytes)
    return snap.take()


__all__ = ["Snapshot", "SnapshotError", "preserved"]
