"""Pluggable device synchronisation used at block boundaries.

Device work is asynchronous: a timer that does not wait for the device measures the *launch*, not
the work. Every block of calls is bracketed by a :class:`Sync`::

    token = sync.before()        # CUDA: record a start event on the current stream
    t0 = clock(); run(n); value  # the user's code, n times
    sync.after(value)            # CUDA: record an end event, wait for it; JAX: block_until_ready(value)
    t1 = clock()
    dt = sync.elapsed(token)     # CUDA: event time (device timeline); others: None -> wall time t1 - t0

Backends: ``none`` (CPU), ``cuda`` (torch CUDA events + final synchronize), ``mps``
(``torch.mps.synchronize``), ``jax`` (``block_until_ready`` on the cell's value), ``cupy``
(current stream synchronize). :func:`detect` picks one from what the cell touched; users override.
"""

from __future__ import annotations

import sys
from typing import Any

from ..errors import BadOptionError
from ..findings import Finding

SYNC_CHOICES = ("auto", "none", "cuda", "mps", "jax", "cupy")


class Sync:
    """No synchronisation: the CPU runs the code synchronously."""

    name = "none"
    device_timed = False

    def before(self) -> Any:
        return None

    def after(self, value: Any) -> None:
        return None

    def elapsed(self, token: Any) -> float | None:
        return None

    def finish(self) -> None:
        """A full device synchronize (end of a measurement, before reading memory counters)."""
        return None


class CudaSync(Sync):
    """CUDA through torch: events on the current stream time the device; ``after`` waits for the end event.

    ``pace`` is how the sampled blocks follow each other on the device: ``"isolated"`` waits for each
    block before the host launches the next (the device idles for the host's gap between blocks);
    ``"sustained"`` launches the next block before it waits for the last (:meth:`enqueue` and
    :meth:`wait`), so the device runs the samples back to back, as it runs a training loop's kernels.
    """

    name = "cuda"
    device_timed = True
    pace = "sustained"  # isolated blocks read 2-4% fast against a back-to-back replay (bench_gpu, H100)

    def __init__(self, device: str = "cuda") -> None:
        import torch

        self._torch = torch
        self.device = torch.device(device)
        if self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)

    def before(self) -> Any:
        stream = self._torch.cuda.current_stream(self.device)
        self._start.record(stream)
        return self._start

    def after(self, value: Any) -> None:
        self._end.record(self._torch.cuda.current_stream(self.device))
        self._end.synchronize()

    def elapsed(self, token: Any) -> float | None:
        return float(token.elapsed_time(self._end)) / 1e3  # elapsed_time is in milliseconds

    def finish(self) -> None:
        self._torch.cuda.synchronize(self.device)

    def enqueue(self, run: Any) -> tuple[Any, Any]:
        """Launch one block (``run()``) between a fresh pair of events, without waiting for it."""
        stream = self._torch.cuda.current_stream(self.device)
        start = self._torch.cuda.Event(enable_timing=True)
        end = self._torch.cuda.Event(enable_timing=True)
        start.record(stream)
        run()
        end.record(stream)
        return start, end

    def wait(self, token: tuple[Any, Any]) -> float:
        """Wait for a block from :meth:`enqueue` and return its device time in seconds."""
        start, end = token
        end.synchronize()
        return float(start.elapsed_time(end)) / 1e3


class MpsSync(Sync):
    name = "mps"

    def __init__(self) -> None:
        import torch

        self._torch = torch

    def after(self, value: Any) -> None:
        self._torch.mps.synchronize()

    finish = lambda self: self._torch.mps.synchronize()  # noqa: E731


class JaxSync(Sync):
    """JAX dispatches asynchronously; ``block_until_ready`` on the cell's last value waits for it."""

    name = "jax"

    def __init__(self) -> None:
        import jax

        self._jax = jax

    def after(self, value: Any) -> None:
        if value is not None:
            self._jax.block_until_ready(value)

    def finish(self) -> None:
        try:
            self._jax.effects_barrier()
        except Exception:  # pragma: no cover - older JAX
            pass


class CupySync(Sync):
    name = "cupy"

    def __init__(self) -> None:
        import cupy

        self._cupy = cupy

    def after(self, value: Any) -> None:
        self._cupy.cuda.get_current_stream().synchronize()

    def finish(self) -> None:
        self._cupy.cuda.Device().synchronize()


def _module_of(value: Any) -> str:
    return (type(value).__module__ or "").split(".", 1)[0]


def cuda_in_use() -> bool:
    """True when torch is imported and CUDA has been initialised in this process (never imports torch)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        return bool(torch.cuda.is_available() and torch.cuda.is_initialized())
    except Exception:
        return False


def _returns(array: str) -> str:
    """The reason for a backend chosen from the cell's value (``jax``, ``cupy``, ``cuda``, ``mps``): text,
    since callers quote it in the notes they store; render/findings_core.py words it."""
    return str(Finding.of("core.returns-array", array=array))


def detect(value: Any, device: str, use: Any = None) -> tuple[str, str]:
    """Choose a backend from the cell's last value and what its call did (``use``: a
    :class:`~perfmagic.core.devicework.DeviceUse` from watching the call).

    Returns ``(name, reason)``. Never imports a framework the cell did not import. That the process
    initialised CUDA earlier is no reason: a CPU cell in a notebook that used a GPU is a CPU measurement.
    """
    if device.startswith("cuda"):
        return "cuda", f"device {device}"
    if device == "mps":
        return "mps", "device mps"
    mod = _module_of(value)
    if mod in ("jax", "jaxlib"):
        return "jax", _returns("jax")
    if mod == "cupy":
        return "cupy", _returns("cupy")
    if mod == "torch":
        dev = getattr(value, "device", None)
        kind = getattr(dev, "type", None)
        if kind in ("cuda", "mps"):
            return kind, _returns(kind)
    if use is not None and use.cuda:
        return "cuda", use.why
    return "none", (use.why if use is not None else "no device work detected")


def make(name: str, device: str = "cpu") -> Sync:
    """Build a backend by name; a name whose framework is missing is a :class:`BadOptionError`."""
    if name not in SYNC_CHOICES or name == "auto":
        raise BadOptionError("--sync", name, "one of " + ", ".join(SYNC_CHOICES))
    try:
        if name == "none":
            return Sync()
        if name == "cuda":
            return CudaSync(device if device.startswith("cuda") else "cuda")
        if name == "mps":
            return MpsSync()
        if name == "jax":
            return JaxSync()
        return CupySync()
    except ImportError as exc:
        raise BadOptionError("--sync", name, "a backend whose framework is installed",
                             f"{exc.name or name} is not importable; use --sync none or install it") from None
