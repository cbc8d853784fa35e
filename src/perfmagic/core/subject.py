"""One piece of code under measurement: its compiled form, sync backend, and the blocks timed so far.

:func:`perfmagic.bench` drives one subject; the interleaved A/B comparison drives two, alternating
their blocks. The subject knows *how* to time a block; the drivers decide *when to stop*.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping
from typing import Any

from . import stats as _stats
from .cells import CompiledCell, compile_callable, compile_cell
from ..errors import SetupError
from ..findings import Finding
from .sync import Sync, detect, make

MIN_BLOCK_S = 2e-4  # a block lasts at least this long, and at least 100x the timer's own overhead
DRIFT_TOL = 0.05


class Subject:
    def __init__(self, stmt: str | Callable[[], Any], setup: str, namespace: Mapping[str, Any] | None,
                 filename: str, sync: str, device: str, clock: Callable[[], float]) -> None:
        self.ns: dict[str, Any] = dict(namespace) if namespace is not None else {"__name__": "__perfmagic__"}
        self.setup = setup or ""
        if self.setup.strip():
            try:
                exec(compile(self.setup, "<perfmagic-setup>", "exec"), self.ns)
            except SyntaxError as exc:
                raise SetupError(f"the setup code is not valid Python: {exc.msg} (line {exc.lineno}): {setup!r}") from exc
            except Exception as exc:
                raise SetupError(f"the setup code raised {type(exc).__name__}: {exc}") from exc
        self.cell: CompiledCell = (compile_cell(stmt, self.ns, filename) if isinstance(stmt, str)
                                   else compile_callable(stmt))
        self.sync_choice = sync
        self.sync: Sync = Sync() if sync in ("auto", "none") else make(sync, device)
        self.device = device
        self.clock = clock
        self.notes: list[Any] = []  # Findings (worded by render/findings_core.py) and short text
        if self.cell.mode == "exec":
            self.notes.append(Finding.of("core.exec-mode"))
        self.flusher: Callable[[], None] | None = None
        self.use: Any = None  # the DeviceUse of the cold call (auto sync), see core.devicework
        self.held: dict[str, Any] | None = None  # the device's clock held down when the interval was met (bench)
        self.cold: float | None = None
        self.overhead = 0.0
        self.number = 1
        self.warm: list[tuple[int, float]] = []
        self.raw: list[float] = []
        self.min_block = MIN_BLOCK_S
        self._warm_calls = 0
        self._in_flight: Any = None  # the sampled block still running on the device (sustained pace)

    # ---- timing primitives -----------------------------------------------------------------
    def block(self, n: int) -> float:
        """Time ``n`` calls: flush (untimed), sync-bracketed, device time when the backend has it."""
        if self.flusher is not None:
            self.flusher()
        s, clock, run = self.sync, self.clock, self.cell.run
        tok = s.before()
        t0 = clock()
        v = run(n)
        s.after(v)
        t1 = clock()
        d = s.elapsed(tok)
        return d if d is not None else t1 - t0

    def cold_call(self, flush: bool) -> None:
        """Time the first call on its own; in auto mode, choose the sync backend from what it touched."""
        if self.sync_choice == "auto" and not self.device.startswith("cuda"):
            from .devicework import run_watched

            # which device the work ran on, from the work (not from the process)
            value, self.use, t0 = run_watched(lambda: self.cell.run(1), self.clock)
        else:
            t0 = self.clock()
            value = self.cell.run(1)
        if self.sync_choice == "auto":
            name, why = detect(value, self.device, self.use)
            if name != "none":
                on_work = name == "cuda" and not self.device.startswith("cuda") and self.use is not None
                self.sync = make(name, self.use.device if on_work else self.device)
                if name == "cuda" and not self.device.startswith("cuda"):
                    self.device = str(getattr(self.sync, "device", "cuda"))
                self.notes.append(f"sync {name}: {why}")
                if self.use is not None and self.use.mixed:
                    self.notes.append(Finding.of("core.mixed-cell"))
            elif self.use is not None and "initialised" in self.use.why:
                self.notes.append(Finding.of("core.timed-on-cpu", why=self.use.why))
        else:
            self.sync.after(value)
        self.sync.finish()
        self.cold = self.clock() - t0
        if flush:
            from .flush import make_flusher

            self.flusher, nbytes = make_flusher(self.device)
            self.notes.append(Finding.of("core.flushed", mib=nbytes / 2**20))

    def measure_overhead(self) -> None:
        self.overhead = _stats.median([self.block(0) for _ in range(15)])

    @property
    def target_block(self) -> float:
        return max(100.0 * self.overhead, self.min_block)

    def calls_for(self, per_call: float, prev: int) -> int:
        """Calls per block so that a block lasts ``target_block`` (growing at most 10x a step)."""
        if self.flusher is not None:
            return 1
        n = max(1, math.ceil(self.target_block / max(per_call, 1e-12)))
        return min(n, prev * 10) if prev else n

    # ---- phases ---------------------------------------------------------------------------
    def warm_block(self, cap: int | None = None) -> float:
        n = self.number if cap is None else max(1, min(self.number, cap))
        dt = self.block(n)
        self.warm.append((n, dt))
        self._warm_calls += n
        per_call = dt / n
        # size the next block from the median of the last three, so one preempted block cannot shrink it
        recent = _stats.median([d / k for k, d in self.warm[-3:]])
        self.number = self.calls_for(recent, n)
        return per_call

    @property
    def warm_calls(self) -> int:
        return self._warm_calls

    def warm_drift(self) -> float | None:
        """Relative change between the median per-call time of the last 3 warmup blocks and the 3 before."""
        if len(self.warm) < 6:
            return None
        pcs = [d / k for k, d in self.warm[-6:]]
        before, after = _stats.median(pcs[:3]), _stats.median(pcs[3:])
        return abs(after - before) / before if before > 0 else None

    def warm_stable(self) -> bool:
        d = self.warm_drift()
        return d is not None and d <= DRIFT_TOL

    def sample(self) -> float:
        if self._sustained():
            return self._sample_sustained()
        dt = self.block(self.number)
        self.raw.append(dt)
        return dt

    def _sustained(self) -> bool:
        return getattr(self.sync, "pace", "isolated") == "sustained" and self.flusher is None

    def _sample_sustained(self) -> float:
        """Launch the next block, then wait for the one before it: the device never waits for the host
        between samples (the first sample launches two)."""
        s, n, run = self.sync, self.number, self.cell.run
        if self._in_flight is None:
            self._in_flight = s.enqueue(lambda: run(n))
        nxt = s.enqueue(lambda: run(n))
        dt = s.wait(self._in_flight)
        self._in_flight = nxt
        self.raw.append(dt)
        return dt

    def per_call(self) -> list[float]:
        return [d / self.number for d in self.raw]

    def finish(self) -> None:
        try:
            if self._in_flight is not None:  # the last launched block: waited for, and a sample like the rest
                tok, self._in_flight = self._in_flight, None
                self.raw.append(self.sync.wait(tok))
            self.sync.finish()
        except Exception:  # pragma: no cover - a device error after an interrupt
            pass


def cuda_present() -> bool:
    """Whether a CUDA device exists, without importing torch when the user has not."""
    import os

    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            return bool(torch.cuda.is_available())
        except Exception:
            return False
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/proc/driver/nvidia/version")
