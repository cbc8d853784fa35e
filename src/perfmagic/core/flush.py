"""Cache flushing between samples (``flush=True``), done outside the timed region.

Small kernels re-run on warm caches look faster than they will in a real program, where other work
evicts their data. Flushing writes a buffer twice the size of the cache before each sample:

* CPU: a buffer of 2 × the last-level cache (read from sysfs by :func:`perfmagic.core.env.cache_sizes`),
  overwritten with ``memoryview`` slice assignment (a memmove: every line is written, so evicted).
* CUDA: a ``torch.int8`` buffer of 2 × the device's L2 (``get_device_properties().L2_cache_size``),
  ``zero_()``-ed on the current stream *before* the start event is recorded, so it is not timed.
"""

from __future__ import annotations

from collections.abc import Callable


def make_flusher(device: str) -> tuple[Callable[[], None], int]:
    """Return ``(flush, nbytes)`` for the device."""
    if device.startswith("cuda"):
        import torch

        dev = torch.device(device)
        props = torch.cuda.get_device_properties(dev)
        nbytes = 2 * int(getattr(props, "L2_cache_size", 0) or 50 * 2**20)
        buf = torch.empty(nbytes, dtype=torch.int8, device=dev)

        def flush_cuda() -> None:
            buf.zero_()

        return flush_cuda, nbytes

    from .env import cache_sizes

    nbytes = 2 * int(cache_sizes().get("llc_bytes") or 32 * 2**20)
    dst = bytearray(nbytes)
    src = memoryview(bytes(nbytes))  # zero-filled source
    dst_view = memoryview(dst)
    toggle = [0]

    def flush_cpu() -> None:
        toggle[0] ^= 1
        dst_view[:] = src
        dst[toggle[0]] = toggle[0]  # keep the write observable

    return flush_cpu, nbytes
