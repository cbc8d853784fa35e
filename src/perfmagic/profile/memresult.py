"""What ``%%memory`` found: :class:`MemoryResult` (raw samples kept, every peak derived or measured
directly), its statements and allocation sites, and the attribution of tracemalloc snapshots and
CUDA allocator history to sites.

Text, figure and HTML are drawn by :mod:`perfmagic.render.memory`; the methods here delegate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from ..findings import Finding
from ..result import Displayed
from .cellcode import code_kind, source_label, source_line

DEFAULT_INTERVAL_S = 0.01
AUTO_TRACE_BYTES = 16 * 2**20  # trace="auto": start tracemalloc once RSS has grown this much
GROWTH_MIN_BYTES = 256 * 2**10  # a sampled growth site below this (and below 1% of the growth) is not listed
MISSED_MIN_BYTES = 8 * 2**20   # a peak this much above the sampled maximum is reported as missed


@dataclass(frozen=True)
class StatementMemory:
    """One top-level statement: its time span and the peaks above its own starting level."""

    label: str
    text: str
    start_s: float
    end_s: float
    traced_peak_bytes: int | None   # tracemalloc peak above the statement's start
    traced_net_bytes: int | None
    rss_peak_bytes: int | None      # VmHWM after the statement minus RSS at its start
    cuda_peak_bytes: int | None = None
    offset_traced_bytes: int = 0    # traced level at the statement's start, above the cell's start
    offset_rss_bytes: int = 0
    offset_cuda_bytes: int = 0


@dataclass(frozen=True)
class AllocSite:
    label: str          # "In [3] line 5" / "pkg/mod.py:12"
    text: str           # the source line
    size_bytes: int
    count: int
    kind: str           # "cell" | "user" | "library"


@dataclass(frozen=True, repr=False)
class MemoryResult(Displayed):
    """Memory over one run. Raw samples are kept; every peak is derived from them or measured directly."""

    primary_metric: ClassVar[str] = "peak_bytes"
    renderer: ClassVar[str] = "memory"

    def sites_html(self) -> str:
        """The allocation sites as an HTML table (:func:`perfmagic.render.memory.sites_html`)."""
        from ..render.memory import sites_html

        return sites_html(self)

    def statements_html(self) -> str:
        """The statements' peaks as an HTML table (:func:`perfmagic.render.memory.statements_html`)."""
        from ..render.memory import statements_html

        return statements_html(self)
    auto_trace_bytes: ClassVar[int] = AUTO_TRACE_BYTES  # read by the renderer (it imports no analysis)

    t_s: tuple[float, ...]
    rss_bytes: tuple[int, ...]
    cuda_allocated_bytes: tuple[int, ...] = ()
    cuda_reserved_bytes: tuple[int, ...] = ()
    statements: tuple[StatementMemory, ...] = ()
    sites: tuple[AllocSite, ...] = ()          # blocks still allocated at the end, by site
    where: tuple[int, ...] = ()                # per sample: index into where_sites of the line running, -1 none
    where_sites: tuple[tuple[str, str, str], ...] = ()  # (label, source line, kind) of the lines sampled
    cuda_sites: tuple[AllocSite, ...] = ()     # CUDA blocks live at the CUDA peak (allocator history)
    wall_s: float = 0.0
    interval_s: float = DEFAULT_INTERVAL_S
    first_sample_s: float | None = None        # cell start -> first sample of the background thread
    rss_method: str = "statm"                  # statm | psutil | unavailable
    hwm_method: str = "vmhwm"                  # vmhwm (true peak) | unavailable
    tracing: str = "on"                        # sample | on | auto-started | auto-idle | already running | off
    trace_started_s: float | None = None       # when tracemalloc began (trace="auto")
    nframe: int = 0
    traced_net_bytes: int | None = None
    traced_total_net_bytes: int | None = None  # everything traced, including untracked sites
    device: str = "cpu"
    cuda_base_bytes: int | None = None
    cuda_peak_abs_bytes: int | None = None     # max_memory_allocated over the run
    cuda_reserved_peak_bytes: int | None = None
    code: str = ""
    status: str = "ok"                         # ok | error | interrupted
    error: str | None = None
    notes: tuple[Finding, ...] = ()            # worded by render/ (an older row's text stays a str)

    # ---- derived ----------------------------------------------------------------------------
    @property
    def rss_start(self) -> int | None:
        return self.rss_bytes[0] if self.rss_bytes else None

    @property
    def rss_end(self) -> int | None:
        return self.rss_bytes[-1] if self.rss_bytes else None

    @property
    def sampled_peak_bytes(self) -> int | None:
        """Highest sampled RSS above the start."""
        if not self.rss_bytes:
            return None
        return max(self.rss_bytes) - self.rss_bytes[0]

    @property
    def hwm_peak_bytes(self) -> int | None:
        """True RSS peak above the start: the kernel's high-water mark, statement by statement."""
        vals = [s.offset_rss_bytes + s.rss_peak_bytes for s in self.statements if s.rss_peak_bytes is not None]
        return max(vals) if vals and self.hwm_method == "vmhwm" else None

    @property
    def rss_peak_bytes(self) -> int | None:
        xs = [x for x in (self.hwm_peak_bytes, self.sampled_peak_bytes) if x is not None]
        return max(xs) if xs else None

    @property
    def traced_peak_bytes(self) -> int | None:
        vals = [s.offset_traced_bytes + s.traced_peak_bytes for s in self.statements if s.traced_peak_bytes is not None]
        return max(vals) if vals else None

    @property
    def cuda_peak_bytes(self) -> int | None:
        if self.cuda_peak_abs_bytes is None or self.cuda_base_bytes is None:
            return None
        return max(self.cuda_peak_abs_bytes - self.cuda_base_bytes, 0)

    @property
    def cuda_increment_bytes(self) -> int | None:
        if not self.cuda_allocated_bytes:
            return None
        return self.cuda_allocated_bytes[-1] - self.cuda_allocated_bytes[0]

    @property
    def host_peak_bytes(self) -> int | None:
        """The host peak above the start: the largest of the RSS peaks and tracemalloc's."""
        xs = [x for x in (self.rss_peak_bytes, self.traced_peak_bytes) if x is not None]
        return max(xs) if xs else None

    @property
    def peak_bytes(self) -> int | None:
        """The headline peak: CUDA's on a CUDA run, else the host's."""
        return self.cuda_peak_bytes if self.device.startswith("cuda") and self.cuda_peak_bytes is not None \
            else self.host_peak_bytes

    @property
    def increment_bytes(self) -> int | None:
        if self.device.startswith("cuda") and self.cuda_increment_bytes is not None:
            return self.cuda_increment_bytes
        if self.rss_start is None or self.rss_end is None:
            return None
        return self.rss_end - self.rss_start

    @property
    def missed_peak_bytes(self) -> int:
        """How far the true peak (VmHWM or traced) rose above the highest RSS sample."""
        sampled = self.sampled_peak_bytes or 0
        true = max(x for x in (self.hwm_peak_bytes, self.traced_peak_bytes, 0) if x is not None)
        return max(true - sampled, 0)

    @property
    def missed_peak(self) -> bool:
        sampled = self.sampled_peak_bytes or 0
        return self.missed_peak_bytes >= max(MISSED_MIN_BYTES, 0.1 * max(sampled, 0))

    @property
    def growth_sites(self) -> tuple[AllocSite, ...]:
        """Where RSS grew: each sample's growth over the previous one, charged to the line running at it.

        ``size_bytes`` is the growth summed over the samples charged to that line (drops are not
        subtracted: memory freed elsewhere must not hide a line that allocates), ``count`` the samples
        taken on it. A sample that found no line of user code (the cell was between statements, or it
        is the end sample) charges its growth to the statement that ran most of the interval: to the
        last line sampled in that statement if there is one, else to the statement's own line.
        """
        if not self.where or len(self.where) != len(self.rss_bytes):
            return ()
        spans = [(st.start_s, st.end_s) for st in self.statements]

        def statement_at(t0: float, t1: float) -> int | None:
            best, idx = 0.0, None
            for i, (a, b) in enumerate(spans):
                ov = min(b, t1) - max(a, t0)
                if ov > best:
                    best, idx = ov, i
            return idx

        def statement_of(t: float) -> int | None:
            return next((i for i, (a, b) in enumerate(spans) if a <= t <= b), None)

        grew: dict[Any, list[int]] = {}
        last: tuple[int, int | None] | None = None  # (site, statement) of the last located sample
        for k in range(1, len(self.rss_bytes)):
            w, d = self.where[k], max(self.rss_bytes[k] - self.rss_bytes[k - 1], 0)
            if w >= 0:
                last = (w, statement_of(self.t_s[k]))
                a = grew.setdefault(w, [0, 0])
                a[0] += d
                a[1] += 1
            elif d and self.tracing != "off":  # located nothing: charge the statement that ran meanwhile
                i = statement_at(self.t_s[k - 1], self.t_s[k])
                if i is None:
                    continue
                key: Any = last[0] if last is not None and last[1] == i else ("statement", i)
                grew.setdefault(key, [0, 0])[0] += d
        out = []
        for key, (size, n) in grew.items():
            if size <= 0:
                continue
            if isinstance(key, tuple):
                st = self.statements[key[1]]
                out.append(AllocSite(st.label, st.text, size, n, "cell"))
            else:
                out.append(AllocSite(*self.where_sites[key][:2], size, n, self.where_sites[key][2]))
        out.sort(key=lambda s: (-s.size_bytes, -s.count))
        return tuple(out)

    @property
    def main_growth_sites(self) -> tuple[AllocSite, ...]:
        """The growth sites worth listing: at least ``GROWTH_MIN_BYTES`` and 1% of all sampled growth."""
        floor = max(GROWTH_MIN_BYTES, 0.01 * self.sampled_growth_bytes)
        return tuple(s for s in self.growth_sites if s.size_bytes >= floor)

    @property
    def sampled_growth_bytes(self) -> int:
        """All growth between consecutive samples (the total the growth sites share)."""
        return sum(max(b - a, 0) for a, b in zip(self.rss_bytes, self.rss_bytes[1:]))

    @property
    def sampled_freed_bytes(self) -> int:
        """All drops between consecutive samples: gross growth − freed = the sampled end increment."""
        return sum(max(a - b, 0) for a, b in zip(self.rss_bytes, self.rss_bytes[1:]))

    @property
    def peak_statement(self) -> StatementMemory | None:
        def key(s: StatementMemory) -> float:
            if self.device.startswith("cuda") and s.cuda_peak_bytes is not None:
                return s.offset_cuda_bytes + s.cuda_peak_bytes
            return max(s.offset_rss_bytes + (s.rss_peak_bytes or 0), s.offset_traced_bytes + (s.traced_peak_bytes or 0))
        return max(self.statements, key=key) if self.statements else None

    # ---- text, figure, HTML: perfmagic.render.memory (the renderer) ---------------------------

    # ---- data ---------------------------------------------------------------------------------
    def metrics(self) -> dict[str, float | int | str | None]:
        from ..render.memory import site_name

        top = self.sites[0] if self.sites else None
        grown = self.main_growth_sites[0] if not top and self.main_growth_sites else None
        st = self.peak_statement
        return {
            "peak_bytes": self.peak_bytes, "increment_bytes": self.increment_bytes,
            "rss_peak_bytes": self.rss_peak_bytes, "rss_sampled_peak_bytes": self.sampled_peak_bytes,
            "rss_hwm_peak_bytes": self.hwm_peak_bytes, "traced_peak_bytes": self.traced_peak_bytes,
            "traced_net_bytes": self.traced_net_bytes, "missed_peak_bytes": self.missed_peak_bytes,
            "cuda_peak_bytes": self.cuda_peak_bytes, "cuda_increment_bytes": self.cuda_increment_bytes,
            "cuda_reserved_peak_bytes": self.cuda_reserved_peak_bytes,
            "top_site": site_name(top.label, top.text) if top else
                        site_name(grown.label, grown.text, sampled=True) if grown else None,
            "top_site_bytes": top.size_bytes if top else grown.size_bytes if grown else None,
            "peak_at": st.label if st is not None else None,
            "wall_s": self.wall_s, "n_samples": len(self.t_s), "interval_s": self.interval_s,
            "first_sample_s": self.first_sample_s, "device": self.device, "tracing": self.tracing,
            "rss_gross_growth_bytes": self.sampled_growth_bytes if len(self.rss_bytes) > 1 else None,
            "rss_freed_bytes": self.sampled_freed_bytes if len(self.rss_bytes) > 1 else None,
        }

    def samples(self) -> dict[str, list[float]]:
        d: dict[str, list[float]] = {"t_s": list(self.t_s), "rss_bytes": [float(x) for x in self.rss_bytes]}
        if self.cuda_allocated_bytes:
            d["cuda_allocated_bytes"] = [float(x) for x in self.cuda_allocated_bytes]
            d["cuda_reserved_bytes"] = [float(x) for x in self.cuda_reserved_bytes]
        return d

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["metrics"] = self.metrics()
        d["notes"] = [str(n) for n in self.notes]  # as text (asdict made each finding a dict)
        return d



# ---- sites --------------------------------------------------------------------------------------

def _site_for(frames: list[tuple[str, int]], fmap: Mapping[str, int] | None,
              internal_stops: bool = True) -> tuple[str, int, str] | None:
    """The frame to charge, innermost first: user code, else the innermost library frame.

    None (not charged) when perfmagic's or IPython's own code allocated it: an internal frame is met
    before any user frame (``internal_stops=False``: internal frames are passed over, see
    :func:`_history_site`).
    """
    lib = None
    for fn, ln in frames:
        kind = code_kind(fn, fmap)
        if kind in ("cell", "user"):
            return fn, ln, kind
        if kind == "internal":
            if internal_stops:
                return None
            continue
        if lib is None:
            lib = (fn, ln, kind)
    return lib


def tracemalloc_sites(snapshot: Any, before: Any, fmap: Mapping[str, int] | None) -> tuple[list[AllocSite], int]:
    """Net allocations by site (see module docstring) and the net traced total they come from."""
    if before is not None:
        stats = [(s.traceback, s.size_diff, s.count_diff) for s in snapshot.compare_to(before, "traceback")]
    else:
        stats = [(s.traceback, s.size, s.count) for s in snapshot.statistics("traceback")]
    agg: dict[tuple[str, int], list[Any]] = {}
    total = 0
    for tb, size, count in stats:
        frames = [(f.filename, f.lineno) for f in reversed(list(tb))]  # innermost first
        site = _site_for(frames, fmap)
        if site is None:
            continue
        total += size
        a = agg.setdefault((site[0], site[1]), [0, 0, site[2]])
        a[0] += size
        a[1] += count
    out = [AllocSite(source_label(f, ln, fmap), source_line(f, ln), size, count, kind)
           for (f, ln), (size, count, kind) in agg.items() if size > 0]
    out.sort(key=lambda s: -s.size_bytes)
    return out, total


def _history_site(frames: list[tuple[str, int]], fmap: Mapping[str, int] | None) -> tuple[str, int, str] | None:
    """The frame of an allocator-history stack to charge a CUDA block to: the first cell or user frame, else
    the first library frame, else None. Unlike :func:`_site_for`, an internal frame does not stop the
    search: perfmagic allocates no CUDA memory while it records, so a block with a cell's frame anywhere in
    its stack is the cell's. (On an H200 with torch 2.11, 2026-11-28, the first frame met was an internal
    one and every block was charged to "<unknown>".)"""
    return _site_for(frames, fmap, internal_stops=False)


def cuda_history_sites(snap: Any, device_index: int, fmap: Mapping[str, int] | None) -> list[AllocSite]:
    """Replay the allocator history to the moment of the highest live total; group live blocks by site."""
    traces = (snap.get("device_traces") or [[]])
    events = traces[device_index] if device_index < len(traces) else []
    live, total, best, best_i = {}, 0, -1, -1
    for i, e in enumerate(events):
        a = e.get("action")
        if a == "alloc":
            live[e["addr"]] = e["size"]
            total += e["size"]
            if total > best:
                best, best_i = total, i
        elif a in ("free_requested",) and e["addr"] in live:
            total -= live.pop(e["addr"])
    blocks: dict[int, Any] = {}
    for e in events[: best_i + 1]:
        if e.get("action") == "alloc":
            blocks[e["addr"]] = e
        elif e.get("action") == "free_requested":
            blocks.pop(e["addr"], None)
    agg: dict[tuple[str, int], list[Any]] = {}
    for e in blocks.values():
        frames = [(f.get("filename", "?"), int(f.get("line", 0))) for f in e.get("frames", [])]
        site = _history_site(frames, fmap)
        if site is None:  # the history kept no stack for this block, or none that names a cell, a file of
            continue      # the user's or a library: nothing to charge it to (not "unknown")
        a = agg.setdefault((site[0], site[1]), [0, 0, site[2]])
        a[0] += e["size"]
        a[1] += 1
    out = [AllocSite(source_label(f, ln, fmap), source_line(f, ln), s, c, k) for (f, ln), (s, c, k) in agg.items()]
    out.sort(key=lambda s: -s.size_bytes)
    return out

