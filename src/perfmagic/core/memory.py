"""Peak memory of one call, measured in a separate, untimed pass.

Tracing allocations slows Python code several-fold, so memory is never measured while timing. After
the timed samples, the engine runs the code once more under:

* ``tracemalloc``: the peak of traced Python allocations above the level before the call
  (NumPy reports its buffers to tracemalloc; torch CPU tensors do not, which RSS covers);
* RSS: the kernel's high-water mark ``VmHWM`` is reset by writing ``5`` to ``/proc/self/clear_refs``
  (Linux ≥ 4.0) and read after the call, so short-lived peaks are caught without a sampling thread.
  Where that is not possible, the RSS increase after the call is reported and labelled as such;
* CUDA: ``torch.cuda.reset_peak_memory_stats`` before, ``max_memory_allocated`` after a synchronize,
  minus ``memory_allocated`` before (the baseline).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class MemoryReport:
    traced_peak_bytes: int | None
    rss_peak_increase_bytes: int | None
    rss_method: str  # "vmhwm" (true peak) | "after-before" | "unavailable"
    cuda_peak_bytes: int | None = None
    cuda_reserved_bytes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_LIBC: Any = None


def malloc_trim() -> None:
    """Give freed heap memory back to the system (glibc), so the next run's RSS growth is its own (~1 ms)."""
    global _LIBC
    if _LIBC is None:
        try:
            import ctypes

            _LIBC = ctypes.CDLL("libc.so.6")
            _LIBC.malloc_trim.argtypes = [ctypes.c_size_t]
        except (OSError, AttributeError):
            _LIBC = False
    if _LIBC:
        try:
            _LIBC.malloc_trim(0)
        except Exception:  # pragma: no cover
            pass


#: where Linux shows a virtio balloon's negotiated features, one character per feature bit
BALLOON_FEATURES = "/sys/bus/virtio/drivers/virtio_balloon"
FREE_PAGE_REPORTING_BIT = 5  # VIRTIO_BALLOON_F_REPORTING


def host_reclaims_freed_memory(root: str = BALLOON_FEATURES) -> bool:
    """Whether this machine is a VM whose balloon reports freed memory to the host (virtio-balloon free
    page reporting): memory freed for a few seconds goes back to the host, and touching it again costs the
    host's page fault (docs/methodology.md, "Cost models and estimates": 1 GiB after a pause took 1.3-2.4
    ns/byte against 0.11-0.7 right after). False where there is no such balloon or it cannot be read."""
    import glob

    for path in glob.glob(root + "/virtio*/features"):
        try:
            with open(path) as fh:
                bits = fh.read().strip()
        except OSError:
            continue
        if len(bits) > FREE_PAGE_REPORTING_BIT and bits[FREE_PAGE_REPORTING_BIT] == "1":
            return True
    return False


VMSTAT = "/proc/vmstat"
HUGE_PAGE = 2 * 2**20  # the transparent huge page of x86-64 and arm64 (4 KiB base pages)


def vm_pages(path: str = VMSTAT) -> tuple[int | None, int | None]:
    """``(pages allocated, huge pages faulted)`` since boot, machine-wide: the sum of the ``pgalloc_*``
    counters (in 4 KiB pages: a huge page counts 512) and ``thp_fault_alloc``; None for what the kernel
    does not count. Read before and after a run, the differences are the fresh memory the run had the
    kernel hand out (its own pages and the page cache of files it wrote) and the part of it in huge pages
    (NumPy asks for them for arrays of 4 MiB and more)."""
    alloc = huge = None
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith("pgalloc_"):
                    alloc = (alloc or 0) + int(line.split()[1])
                elif line.startswith("thp_fault_alloc "):
                    huge = int(line.split()[1])
    except (OSError, ValueError):
        return None, None
    return alloc, huge


def huge_page_faults(path: str = VMSTAT) -> int | None:
    """Transparent huge pages faulted in since boot, machine-wide (``thp_fault_alloc``; :func:`vm_pages`)."""
    return vm_pages(path)[1]


SMALL_PAGE = 4096


def minor_faults() -> int | None:
    """This process's page faults served without I/O since it started (``ru_minflt``): each first touch of
    a fresh 4 KiB page is one (a huge page too, counted once); None where there is no ``getrusage``."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return None
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)


def io_bytes(path: str = "/proc/self/io") -> int | None:
    """Bytes this process has passed through ``read`` and ``write`` calls since it started (``rchar`` +
    ``wchar``): read before and after a run, the most page cache the run can have filled (a file written or
    read for the first time); None where the kernel does not count it. The machine-wide page counters
    (:func:`vm_pages`) also count what other processes allocate meanwhile."""
    try:
        with open(path) as fh:
            got = dict(line.split(":", 1) for line in fh if ":" in line)
        return int(got["rchar"]) + int(got["wchar"])
    except (OSError, ValueError, KeyError):
        return None


@dataclass(frozen=True)
class PageCounters:
    """The page counters read around a run (:meth:`read`): machine-wide pages allocated and huge pages
    faulted (:func:`vm_pages`), this process's page faults (:func:`minor_faults`) and I/O bytes
    (:func:`io_bytes`); None for what the kernel does not count."""

    alloc: int | None
    huge: int | None
    minor: int | None
    io: int | None

    @classmethod
    def read(cls) -> PageCounters:
        alloc, huge = vm_pages()
        return cls(alloc, huge, minor_faults(), io_bytes())

    def fresh_since(self, before: PageCounters) -> tuple[int | None, int | None, int | None]:
        """The fresh memory a run between ``before`` and these readings had handed out, bytes: (huge pages,
        4 KiB pages of its own, all pages the kernel handed out meanwhile, its page cache too). The
        machine-wide counts also hold other processes' pages, so they are bounded by this process's own:
        a huge page it faulted is one of its faults, and the page cache it filled is at most what it read and
        wrote (a pure-Python loop beside another process writing files was said to fill 3.6 GiB of page
        cache, and priced for its first touch)."""
        def delta(a: int | None, b: int | None) -> int | None:
            return b - a if a is not None and b is not None else None

        dh, minor, io = delta(before.huge, self.huge), delta(before.minor, self.minor), delta(before.io, self.io)
        if dh is not None and minor is not None:
            dh = min(dh, minor)
        huge_b = dh * HUGE_PAGE if dh is not None else None
        small_b = max(minor - (dh or 0), 0) * SMALL_PAGE if minor is not None else None
        alloc_b = delta(before.alloc, self.alloc)
        alloc_b = alloc_b * SMALL_PAGE if alloc_b is not None else None
        if alloc_b is not None and io is not None:
            alloc_b = min(alloc_b, (huge_b or 0) + (small_b or 0) + max(io, 0))
        return huge_b, small_b, alloc_b


@dataclass(frozen=True)
class FreshTouch:
    """What first touching fresh memory costs on this machine now (:func:`probe_fresh_memory`): the
    nanoseconds per byte of each 16 MiB chunk of one fresh array, in the order touched. On a VM whose host
    takes freed memory back, the guest hands out the memory it still has backed first (``warm``: cheap),
    then memory the host took back (``cold``: each touch is the host's page fault too). The edge is the
    first of two cold chunks in a row (a lone dear chunk among warm ones is not it)."""

    chunk_bytes: int
    ns_per_byte: tuple[float, ...]
    stopped: str  # "cold chunks" | "size" | "time"
    warm_ref: float | None = None  # ns/byte of a chunk touched right after the same chunk was freed: warm
    small_warm: int | None = None  # free memory in blocks below the reporting order (:func:`unreported_free_bytes`)

    def small_cold(self, small: float) -> float:
        """The part of ``small`` bytes in 4 KiB pages beyond the free blocks the host never took back
        (``small_warm``): the kernel hands 4 KiB pages out of those first (all of it where they were not read)."""
        return max(small - (self.small_warm or 0), 0.0)

    @property
    def warm_ns(self) -> float:
        """The warm rate (:func:`warm_rate`)."""
        return warm_rate(self.ns_per_byte, self.warm_ref)

    def is_cold(self, x: float) -> bool:
        return x > COLD_FACTOR * self.warm_ns

    @property
    def edge(self) -> int | None:
        """The index of the first chunk of cold memory (two cold chunks in a row, or a cold last chunk)."""
        xs = self.ns_per_byte
        for i, x in enumerate(xs):
            if self.is_cold(x) and (i + 1 == len(xs) or self.is_cold(xs[i + 1])):
                return i
        return None

    @property
    def cold_ns(self) -> tuple[float, ...]:
        """The cold chunks from the edge on (none where the probe did not reach cold memory)."""
        e = self.edge
        return () if e is None else tuple(x for x in self.ns_per_byte[e:] if self.is_cold(x))

    @property
    def warm_bytes(self) -> int:
        """The memory handed out before the edge (all of it where the probe did not reach cold memory)."""
        e = self.edge
        return (len(self.ns_per_byte) if e is None else e) * self.chunk_bytes

    @property
    def touched_bytes(self) -> int:
        return len(self.ns_per_byte) * self.chunk_bytes


COLD_FACTOR = 4.0  # a chunk this many times dearer per byte than the cheapest came from memory the host took back


def warm_rate(chunks: Sequence[float], ref: float | None) -> float:
    """The warm rate of a walk: its cheapest chunk, or the warm reference ``ref`` where even the cheapest chunk is
    over ``2 × COLD_FACTOR`` times dearer (a walk that started in cold memory: all of 370 MiB at 2.1-2.8 ns/byte
    against 0.1). A reference merely cheaper than every chunk is not the warm rate: one at 0.05 ns/byte beside
    warm chunks of 0.14-0.21 read those as cold, and "cold memory at 0.21 ns/byte" cost the full run nothing."""
    low = min(chunks) if chunks else ref
    if low is None:
        return 0.0
    return ref if ref is not None and low > 2 * COLD_FACTOR * ref else low
PROBE_CHUNK = 16 * 2**20
PROBE_COLD_CHUNKS = 4  # the probe stops after this many cold chunks: their cost per byte is what it is for
REF_BYTES = 48 * 2**20  # the warm reference's array (above glibc's largest mmap threshold: a fresh mapping)


def probe_fresh_memory(max_bytes: int, time_s: float = 1.0, chunk: int = PROBE_CHUNK,
                       cold_chunks: int = PROBE_COLD_CHUNKS) -> FreshTouch | None:
    """Touch one fresh NumPy array (huge pages where the kernel gives them, as NumPy arrays get) chunk by
    chunk, timing each chunk's first write, until ``cold_chunks`` chunks came out cold, ``max_bytes`` were
    touched or ``time_s`` passed; then free it. Warm memory costs ~0.1 ns/byte in huge pages, so walking
    through gigabytes of it takes a few tenths of a second; the cold chunks are what is measured. A chunk
    touched right after the same chunk was freed first is the warm reference (the walk may start in cold
    memory: after a pause, all of 370 MiB came out at 2.1-2.8 ns/byte). (4 KiB
    pages cost more warm, ~0.7 ns/byte here, but the host's part of a cold touch was the same per byte:
    3.0 − 0.7 for 4 KiB pages, 2.2 − 0.1 for huge ones; so one walk, in the cheap pages, serves both.)
    None without NumPy or below one chunk."""
    import time

    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy comes with the analysis stack
        return None
    k = min(int(max_bytes), 2**40) // chunk
    if k < 1:
        return None
    # the warm reference: 48 MiB touched, freed, and touched again: the second touch faults in the pages just
    # freed, which the host still backs (a walk that starts in cold memory has no warm chunk of its own).
    # 48 MiB: above glibc's largest mmap threshold (32 MiB), so each array is a fresh mapping; a smaller one
    # can come back from the heap without a fault, and a rewrite is not a first touch
    ref = 0.0
    for _ in range(2):
        b = np.empty(REF_BYTES // 8)
        t0 = time.perf_counter()
        b[:] = 1.0
        ref = (time.perf_counter() - t0) * 1e9 / REF_BYTES
        del b
    small = unreported_free_bytes()  # (read before the walk: the walk's huge pages come from larger blocks)
    a = np.empty(k * chunk // 8)  # mapped, not yet touched: each chunk's first write faults its pages in
    per = chunk // 8
    out: list[float] = []
    stopped = "size"
    t_end = time.perf_counter() + time_s
    try:
        for i in range(k):
            t0 = time.perf_counter()
            a[i * per:(i + 1) * per] = 1.0
            t1 = time.perf_counter()
            out.append((t1 - t0) * 1e9 / chunk)
            warm = warm_rate(out, ref)  # as FreshTouch.is_cold reads it, with the chunks so far
            if sum(x > COLD_FACTOR * warm for x in out) >= cold_chunks:
                stopped = "cold chunks"
                break
            if t1 > t_end:
                stopped = "time"
                break
    finally:
        del a
    return FreshTouch(chunk, tuple(out), stopped, ref, small)


BUDDYINFO = "/proc/buddyinfo"
REPORTING_ORDER = "/sys/module/page_reporting/parameters/page_reporting_order"
DEFAULT_REPORTING_ORDER = 9  # the kernel's default: pageblock_order, 2 MiB blocks of 4 KiB pages


def unreported_free_bytes(buddyinfo: str = BUDDYINFO, order_path: str = REPORTING_ORDER) -> int | None:
    """The free memory in blocks smaller than free page reporting's order (``/proc/buddyinfo``; the order
    from ``page_reporting_order``, 2 MiB blocks by default). The balloon reports only free blocks of that
    order and larger, so the host still backs these. The kernel hands out single 4 KiB pages (the page
    cache of a file written, memory not in transparent huge pages) from the smallest free blocks first:
    that much of such memory comes warm; huge pages come from the larger, reported blocks. None where
    unreadable (not Linux)."""
    import os

    try:
        with open(order_path) as fh:
            order = int(fh.read().strip())
    except (OSError, ValueError):
        order = DEFAULT_REPORTING_ORDER
    try:
        page = os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        page = 4096
    total = 0
    try:
        with open(buddyinfo) as fh:
            for line in fh:
                counts = line.split()[4:]  # "Node 0, zone Normal c0 c1 ...": free blocks of order 0, 1, ...
                total += sum(int(c) * page * 2**o for o, c in enumerate(counts) if o < order)
    except (OSError, ValueError):
        return None
    return total


def status_kib(field: str) -> int | None:
    """A memory field of ``/proc/self/status`` in bytes (``VmRSS``, ``VmHWM``), or None where unreadable."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def reset_hwm() -> bool:
    """Reset the RSS high-water mark (``VmHWM``) through ``/proc/self/clear_refs``; False where not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def current_rss() -> int | None:
    rss = status_kib("VmRSS")
    if rss is None:
        try:
            import psutil

            rss = int(psutil.Process().memory_info().rss)
        except Exception:
            return None
    return rss


def measure(run_once: Callable[[], Any], finish: Callable[[], None], device: str) -> MemoryReport:
    """Run ``run_once`` a single time and report its peak memory above the starting level."""
    import tracemalloc

    torch = sys.modules.get("torch") if device.startswith("cuda") else None
    cuda_base = None
    if torch is not None:
        finish()
        torch.cuda.reset_peak_memory_stats(device)
        cuda_base = int(torch.cuda.memory_allocated(device))
    # freed heap back to the system first: else a run that reuses pages an earlier cell freed (and the
    # allocator kept) shows no RSS increase at all
    malloc_trim()
    rss_before = current_rss()
    hwm_ok = reset_hwm() and status_kib("VmHWM") is not None
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        traced_base = tracemalloc.get_traced_memory()[0]
        run_once()
        finish()
        traced_peak = max(tracemalloc.get_traced_memory()[1] - traced_base, 0)
    finally:
        if started:
            tracemalloc.stop()
    rss_inc: int | None
    if hwm_ok and rss_before is not None:
        hwm = status_kib("VmHWM") or 0
        rss_inc, method = max(hwm - rss_before, 0), "vmhwm"
    elif rss_before is not None:
        after = current_rss() or rss_before
        rss_inc, method = max(after - rss_before, 0), "after-before"
    else:
        rss_inc, method = None, "unavailable"
    cuda_peak = cuda_reserved = None
    if torch is not None and cuda_base is not None:
        cuda_peak = max(int(torch.cuda.max_memory_allocated(device)) - cuda_base, 0)
        cuda_reserved = int(torch.cuda.max_memory_reserved(device))
    return MemoryReport(traced_peak, rss_inc, method, cuda_peak, cuda_reserved)
