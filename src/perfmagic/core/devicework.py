"""Which device a cell's work ran on, read from the work itself.

A notebook that used CUDA once has CUDA initialised for the rest of its life; that says nothing about
the cell being measured now. :func:`watch` wraps one call (the cold call) and records what the call
itself did:

* the torch ops it ran and the devices of their tensors (a ``TorchFunctionMode`` for the one call, where
  CUDA is already initialised and ``torch.compile`` is not in play: Dynamo guards on the mode stack);
* CUDA allocations made during the call (the caching allocator's counter, read only when CUDA was
  already initialised, so reading it initialises nothing);
* whether the call itself initialised CUDA (it was not initialised before, it is after).

On a machine without a CUDA device none of this runs: the call cannot have used one. Nothing here
imports torch or initialises CUDA; the mode costs a few microseconds per torch op, paid by the cold
call only.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any

from ..findings import Finding


@dataclass(frozen=True)
class DeviceUse:
    """What one call ran on: ``cuda`` (device work seen), ``cpu_ops`` (torch ops on CPU tensors seen),
    ``index`` (the CUDA device of that work, when seen) and ``why`` (the evidence, in words: the sentence of a
    ``core.*`` finding, kept as text because callers quote it in the notes they store)."""

    cuda: bool = False
    cpu_ops: bool = False
    index: int | None = None
    why: str = "no device work detected"

    @property
    def mixed(self) -> bool:
        return self.cuda and self.cpu_ops

    @property
    def device(self) -> str:
        """The CUDA device to time and measure on: ``cuda:N`` where the work showed N, else ``cuda``."""
        return f"cuda:{self.index}" if self.index is not None else "cuda"


def _cuda_possible(torch: Any) -> bool:
    try:
        return bool(torch.cuda.is_available())
    except Exception:
        return False


def _initialised(torch: Any) -> bool:
    try:
        return bool(torch.cuda.is_initialized())
    except Exception:
        return False


def _alloc_count(torch: Any) -> int | None:
    """CUDA allocations made so far by this process, all devices (None where they cannot be read)."""
    try:
        return sum(int(torch.cuda.memory_stats(i).get("allocation.all.allocated", 0))
                   for i in range(torch.cuda.device_count()))
    except Exception:
        return None


def _synchronize(torch: Any) -> None:
    try:
        torch.cuda.synchronize()
    except Exception:
        pass


def _pending(torch: Any) -> bool:
    """Whether the current CUDA stream still has work queued (a kernel the call launched that no torch op
    or allocation shows, e.g. ``torch.cuda._sleep`` or an extension's own launch). A kernel that finished
    before this check is missed; its launch then cost about what it ran."""
    try:
        return not bool(torch.cuda.current_stream().query())
    except Exception:
        return False


def _compiled_code(torch: Any) -> bool:
    """Whether ``torch.compile`` has compiled anything in this process (then the function mode would be
    part of what Dynamo guards on). Dynamo merely imported, as many libraries do, is not that."""
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is None:
        return False
    try:
        counters = dynamo.utils.counters
        return bool(sum(counters["stats"].values()) or sum(counters["frames"].values()))
    except Exception:
        return True  # cannot tell: keep out of Dynamo's way


def _spy_class(torch: Any) -> Any:
    from torch.overrides import TorchFunctionMode

    Tensor = torch.Tensor

    class _Spy(TorchFunctionMode):
        """Notes the device types of the tensors every torch op of the call reads or returns."""

        def __init__(self) -> None:
            super().__init__()
            self.kinds: set[str] = set()
            self.index: int | None = None
            self.ops = 0

        def _see(self, x: Any, depth: int = 0) -> None:
            if isinstance(x, Tensor):
                dev = x.device
                self.kinds.add(dev.type)
                if dev.type == "cuda" and self.index is None:
                    self.index = dev.index
            elif depth < 2 and isinstance(x, (list, tuple)):
                for y in x[:16]:
                    self._see(y, depth + 1)
            elif depth < 2 and isinstance(x, dict):
                for y in list(x.values())[:16]:
                    self._see(y, depth + 1)

        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            self.ops += 1
            if len(self.kinds) < 2:  # once both kinds are seen there is nothing more to learn
                self._see(args)
                if kwargs:
                    self._see(kwargs)
                self._see(out)
            return out

    return _Spy


def run_watched(call: Callable[[], Any], clock: Callable[[], float]) -> tuple[Any, DeviceUse, float]:
    """``call()`` under a :class:`watch`: its value, the :class:`DeviceUse`, and the clock reading to time
    the call from (taken before it, moved on by what reading the evidence cost afterwards)."""
    with watch() as w:
        t0 = clock()
        value = call()
        w.value(value)
    return value, w.use, t0 + w.cost_s


class watch:
    """``with watch() as w: value = cell()`` then ``w.use``: the :class:`DeviceUse` of that call.

    ``w.use`` also reads the call's returned value when given to :meth:`value` (a CUDA tensor returned
    by an op the mode could not see, e.g. from a C extension)."""

    def __init__(self) -> None:
        self.use = DeviceUse()
        self._torch: Any = None
        self._spy: Any = None
        self._init0 = False
        self._alloc0: int | None = None
        self._value_cuda: int | None | bool = False
        self.cost_s = 0.0

    def __enter__(self) -> "watch":
        torch = sys.modules.get("torch")
        self._torch = torch
        if torch is None or not _cuda_possible(torch):
            return self
        self._init0 = _initialised(torch)
        if self._init0:
            self._alloc0 = _alloc_count(torch)
        if self._init0:
            # work still queued from earlier cells must not read as this call's (see _pending)
            _synchronize(torch)
        if not self._init0 or _compiled_code(torch):
            # not initialised yet: whether the call initialises it tells. With torch.compile in play the
            # mode would be part of what Dynamo guards on (the next call, without it, would recompile):
            # the allocation counter and the returned value tell instead
            return self
        try:
            self._spy = _spy_class(torch)()
            self._spy.__enter__()
        except Exception:  # an old torch without function modes: the allocation counter still tells
            self._spy = None
        return self

    def value(self, v: Any) -> None:
        dev = getattr(v, "device", None)
        if (type(v).__module__ or "").startswith("torch") and getattr(dev, "type", None) == "cuda":
            self._value_cuda = dev.index if dev.index is not None else True

    def __exit__(self, *exc: Any) -> None:
        import time

        t0 = time.perf_counter()
        try:
            self._read(exc)
        finally:
            self.cost_s = time.perf_counter() - t0  # what reading the evidence took (a caller timing the call
            # around this block subtracts it)

    def _read(self, exc: Any) -> None:
        torch0 = self._torch
        pending = bool(self._init0 and torch0 is not None and _pending(torch0))
        spy, self._spy = self._spy, None
        if spy is not None:
            spy.__exit__(*exc)
        torch = self._torch if self._torch is not None else sys.modules.get("torch")
        kinds = set(spy.kinds) if spy is not None else set()
        cpu_ops = "cpu" in kinds
        index = spy.index if spy is not None else None
        seen: dict[str, Any] = {}  # the evidence of CUDA work: the values of a core.on-cuda finding
        if "cuda" in kinds:
            seen["ops"] = index or 0
        if self._value_cuda is not False:
            if index is None and self._value_cuda is not True:
                index = int(self._value_cuda)
            seen["returns"] = True
        if torch is not None and _cuda_possible(torch):
            if not self._init0:
                if _initialised(torch):
                    seen["initialised"] = True
            elif self._alloc0 is not None:
                now = _alloc_count(torch)
                if now is not None and now > self._alloc0:
                    seen["allocations"] = now - self._alloc0
            if pending and not seen:
                seen["pending"] = True
        if seen:
            why = Finding.of("core.on-cuda", cpu_ops=cpu_ops, **seen)
            self.use = DeviceUse(True, cpu_ops, index, str(why))
        elif cpu_ops:
            why = Finding.of("core.cpu-ops-only", cuda_initialised=self._init0)
            self.use = DeviceUse(False, True, None, str(why))
        elif self._init0:
            self.use = DeviceUse(why=str(Finding.of("core.no-cuda-work")))


__all__ = ["DeviceUse", "watch", "run_watched"]
