"""Scaling across ranks: time one training step with torch.distributed at several world sizes.

``amdahl_ranks(code, ranks=[1, 2, 4], backend="gloo")`` starts, for each world size, a fresh process group
with torch's own multiprocessing (``torch.multiprocessing.start_processes``) and runs the step in every
rank (:mod:`perfmagic.ranks.worker`: lockstep samples after a barrier, a profiled few steps for the
time in collectives, an all-reduce link sweep); rank 0 gathers what every rank measured. Then, per world
size: the step (slowest rank) and its CI, per-rank medians, the straggler ratio, the share of the step in
collectives, the step's all-reduce bus bandwidth against the measured link roof, strong or weak scaling
efficiency; and over the world sizes, Amdahl/USL fitted by :func:`perfmagic.scaling.sweep.analyse`.

**Start method.** ``fork`` on CPU (gloo) when CUDA is not initialised in this process: the notebook's
names (functions defined in cells, models, tensors) reach the ranks as they are, without pickling. CUDA
cannot be re-initialised in a forked child, so NCCL (and gloo after CUDA was touched here) uses ``spawn``:
then the ranks get the setup and cell *source* and only the names they read that pickle and re-load in a
fresh process (importable functions and classes, tensors, numbers...). A name that cannot be sent is
refused before anything starts, naming it and the fix (define it in the setup, import it from a module,
or use fork).

**Honesty.** Ranks beyond the usable cores that kept most of them busy oversubscribe: they are measured
and shown but not fitted ("cannot tell beyond ..."); other processes' load is measured around each world
size (the ranks' own CPU subtracted) and handed to ``analyse``, which says "cannot tell" when it leaves
too little free. Each rank uses 1 torch thread when forked (OpenMP cannot start threads in a child forked
after the kernel used them; torchrun's default too), ``max(1, cores // world)`` when spawned.

**Teardown.** Every world size ends with its process group destroyed in each rank and every child
joined; a rank that raises fails its world size with its traceback (the other ranks are terminated);
a world size that hangs past ``timeout`` is killed; Ctrl-C kills the ranks, fits what was measured and
raises :class:`~perfmagic.errors.BenchInterrupted` carrying it. When the smallest world size fails (the
step is broken, not the scaling) :class:`RankFailed` is raised with the rank's traceback.
"""

from __future__ import annotations

import ast
import inspect
import json
import math
import multiprocessing
import numbers
import os
import pickle
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from ..core import stats as _stats
from ..errors import BadOptionError, BenchInterrupted, PerfmagicError
from ..findings import Finding
from .result import CONTENDED_CORES, RankPoint, RanksResult, RankStats
from .worker import RankSpec, rank_main

BACKENDS = ("gloo", "nccl")
START_METHODS = ("fork", "spawn", "forkserver")
MAX_RANKS_PER_CORE = 4
DEFAULT_BUDGET = 1.0


class RankFailed(PerfmagicError):
    """A rank raised (or died). ``traceback`` is what the rank printed; ``world`` and ``rank`` say where."""

    def __init__(self, world: int, rank: int | None, message: str, traceback: str | None) -> None:
        self.world, self.rank, self.traceback = world, rank, traceback
        where = f"rank {rank} of {world}" if rank is not None else f"world size {world}"
        super().__init__(f"{where} failed: {message}" + (f"\n{traceback.rstrip()}" if traceback else ""))


def check_backend(backend: str | None) -> str:
    """The backend to use: ``None`` -> NCCL when CUDA is available, else gloo; refuses what cannot run here."""
    import torch
    import torch.distributed as dist

    if not dist.is_available():
        raise BadOptionError("backend", backend, "a torch build with torch.distributed",
                             "install a torch wheel built with distributed support")
    cuda = torch.cuda.is_available()
    if backend is None:
        backend = "nccl" if cuda and dist.is_nccl_available() else "gloo"
    if backend not in BACKENDS:
        raise BadOptionError("backend", backend, "one of " + ", ".join(BACKENDS), "e.g. backend='gloo' on CPUs")
    if backend == "nccl" and not (cuda and dist.is_nccl_available()):
        raise BadOptionError("backend", backend, "gloo on this machine (NCCL needs CUDA GPUs, and none is "
                             "available here)", "use backend='gloo' (--backend gloo)")
    if backend == "gloo" and not dist.is_gloo_available():
        raise BadOptionError("backend", backend, "a backend this torch build has", "use backend='nccl' on GPUs")
    return backend


def check_ranks(ranks: Any, backend: str, cores: int) -> list[int]:
    """Sorted distinct world sizes, each ≥ 1 and startable here (≤ 4 per usable core; ≤ the GPUs for NCCL)."""
    fix = "e.g. ranks=[1, 2, 4]"
    if isinstance(ranks, numbers.Integral) and not isinstance(ranks, bool):
        ranks = [ranks]
    if isinstance(ranks, (str, bytes)) or not hasattr(ranks, "__iter__"):
        raise BadOptionError("ranks", ranks, "a list of world sizes (integers >= 1)", fix)
    ws = list(ranks)
    if not ws:
        raise BadOptionError("ranks", ranks, "at least one world size", fix)
    for w in ws:
        if isinstance(w, bool) or not isinstance(w, numbers.Integral):
            raise BadOptionError("ranks", ranks, "integer world sizes (no fractions, no text)", fix)
        if w < 1:
            raise BadOptionError("ranks", ranks, "world sizes >= 1", fix)
    out = sorted({int(w) for w in ws})
    if backend == "nccl":
        import torch

        gpus = torch.cuda.device_count()
        if out[-1] > gpus:
            raise BadOptionError("ranks", ranks, f"at most {gpus} rank(s) with NCCL: one GPU per rank, and "
                                 f"{gpus} GPU(s) are visible", f"e.g. ranks={[w for w in out if w <= gpus] or [1]}")
    elif out[-1] > MAX_RANKS_PER_CORE * cores:
        raise BadOptionError("ranks", ranks, f"at most {MAX_RANKS_PER_CORE * cores} ranks on this machine's {cores} "
                             f"usable core(s) ({MAX_RANKS_PER_CORE} per core; more only measure the scheduler)",
                             f"e.g. ranks={[2 ** k for k in range(8) if 2 ** k <= cores]}, or run torchrun on more "
                             "machines")
    return out


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the OS picks it); each world size gets its own."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _names(source: str) -> set[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def _sendable(value: Any) -> bool:
    """Would ``value`` arrive intact in a spawned process? (Pickles, and not by reference to the notebook.)"""
    mod = getattr(value, "__module__", None) if callable(value) else None
    if mod in ("__main__", "__perfmagic__") or (mod or "").startswith("__ipython"):
        return False
    try:
        pickle.dumps(value)
    except Exception:  # noqa: BLE001 - anything that does not pickle is simply not sendable
        return False
    return True


def spawn_namespace(code: Any, setup: str, globals: Mapping[str, Any] | None) -> dict[str, Any]:
    """The names a spawned rank needs (read by the code or setup, not builtins), refused when they cannot go."""
    import builtins
    import types

    if callable(code) and not _sendable(code):
        raise BadOptionError("code", getattr(code, "__qualname__", code), "a function importable from a module "
                             "under spawn (a notebook-defined function cannot be re-loaded in a fresh process)",
                             "pass the step as source code, import it from a .py module, or use "
                             "start_method='fork' on CPU")
    if not globals:
        return {}
    needed = (_names(code) if isinstance(code, str) else set()) | _names(setup)
    out: dict[str, Any] = {}
    bad: list[str] = []
    for name in sorted(needed):
        if name not in globals or hasattr(builtins, name) and globals[name] is getattr(builtins, name):
            continue
        v = globals[name]
        if isinstance(v, types.ModuleType):
            out[name] = _ModuleRef(v.__name__)
        elif _sendable(v):
            out[name] = v
        else:
            bad.append(name)
    if bad:
        raise BadOptionError("namespace", ", ".join(bad), "names a spawned rank can receive (they do not pickle, "
                             "or were defined in the notebook)", "create them in the setup code, import them from "
                             "a .py module, or use start_method='fork' on CPU")
    return out


class _ModuleRef:
    """A module sent by name: re-imported by the rank (``worker.py`` resolves it)."""

    def __init__(self, name: str) -> None:
        self.name = name


def _resolve(ns: dict[str, Any]) -> dict[str, Any]:
    import importlib

    return {k: importlib.import_module(v.name) if isinstance(v, _ModuleRef) else v for k, v in ns.items()}


def _entry(rank: int, spec: RankSpec) -> None:
    spec.namespace = _resolve(spec.namespace)
    rank_main(rank, spec)


_PRIMED: list[bool] = []


def _preimport() -> None:
    """Do here, once, what every forked rank would otherwise do for itself: import the profiler and DDP, and
    start torch.profiler's CPU backend once (its first start costs about 1 s of CPU per process: 4 ranks on
    2 cores paid 2.3 s per world size; a rank forked after it starts in about 10 ms)."""
    if _PRIMED:
        return
    import importlib

    for mod in ("torch.distributed", "torch.profiler", "torch.nn.parallel", "torch.autograd.profiler_util"):
        try:
            importlib.import_module(mod)
        except ImportError:  # pragma: no cover - a torch build without them fails later, with its own error
            pass
    try:
        from torch.profiler import ProfilerActivity, profile

        from .worker import quiet_stderr

        with quiet_stderr(), profile(activities=[ProfilerActivity.CPU]):
            pass
    except Exception:  # noqa: BLE001 - only a speed-up: each rank starts its own profiler anyway
        pass
    _PRIMED.append(True)


def _teardown(ctx: Any) -> None:
    """Every child of this world size gone: SIGTERM, 2 s, SIGKILL, joined."""
    procs = list(getattr(ctx, "processes", []))
    for p in procs:
        if p.is_alive():
            p.terminate()
    end = time.monotonic() + 2.0
    for p in procs:
        p.join(max(0.0, end - time.monotonic()))
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join(5.0)


_FALLOUT = ("gloo/transport", "Connection closed by peer", "Connection reset by peer", "Broken pipe",
            "NCCL communicator was aborted", "ProcessGroupNCCL", "DistBackendError", "Socket Timeout")


def _root_cause(ctx: Any, first: tuple[int, str]) -> tuple[int, str]:
    """The rank whose own exception failed the world size. The first rank to exit is often a bystander
    whose collective broke when the failing rank tore its group down ("Connection closed by peer"):
    prefer a traceback that is not such fallout."""
    found: list[tuple[int, str]] = []
    for i, path in enumerate(getattr(ctx, "error_files", []) or []):
        try:
            if path and os.path.getsize(path) > 0:
                with open(path, "rb") as f:
                    found.append((i, str(pickle.load(f))))
        except (OSError, pickle.UnpicklingError, EOFError):
            continue
    own = [(i, tb) for i, tb in found if not any(m in tb for m in _FALLOUT)]
    if own:
        return min(own)
    return first


_OWN_FRAMES = ("/torch/multiprocessing/", os.sep + os.path.join("perfmagic", "ranks") + os.sep)  # the rank code: ranks/


def user_traceback(tb: str) -> str:
    """The rank's traceback from the user's first frame on: the frames of torch's process wrapper and of
    perfmagic's rank code in front of it say nothing about the failure."""
    lines = tb.splitlines()
    if not lines or not lines[0].startswith("Traceback"):
        return tb
    blocks: list[list[str]] = []
    for ln in lines[1:]:
        if ln.startswith("  File ") or not blocks:
            blocks.append([ln])
        else:
            blocks[-1].append(ln)
    k = 0
    while k < len(blocks) - 1 and blocks[k][0].startswith("  File ") and any(m in blocks[k][0] for m in _OWN_FRAMES):
        k += 1
    return "\n".join([lines[0], *(ln for b in blocks[k:] for ln in b)])


def _run_world(world: int, spec_kw: dict[str, Any], method: str, timeout: float, tmp: str) -> RankPoint:
    import torch.multiprocessing as tmp_mp
    from torch.multiprocessing import ProcessExitedException, ProcessRaisedException

    from ..core.load import LoadProbe

    out = os.path.join(tmp, f"world{world}.json")
    threads = spec_kw.pop("threads")
    spec = RankSpec(world=world, port=free_port(), out_path=out, threads=threads, **spec_kw)
    probe = LoadProbe().start()
    t0 = time.perf_counter()
    before = {id(p) for p in multiprocessing.active_children()}
    try:
        ctx = tmp_mp.start_processes(_entry, args=(spec,), nprocs=world, join=False, start_method=method)
    except BaseException:  # Ctrl-C while starting: the ranks already started must not outlive this call
        _teardown(SimpleNamespace(processes=[p for p in multiprocessing.active_children() if id(p) not in before]))
        raise
    error = tb = None
    try:
        while not ctx.join(timeout=0.05, grace_period=2.0):
            if time.perf_counter() - t0 > timeout:
                error = str(Finding.of("ranks.timed-out", timeout=timeout))  # a point's error is one line of text
                break
    except ProcessRaisedException as exc:
        msg = str(exc).strip()
        first = (exc.error_index, msg.split("following error:", 1)[-1].strip())
        _teardown(ctx)
        idx, tb = _root_cause(ctx, first)
        tb = user_traceback(tb)
        last = tb.strip().splitlines()[-1] if tb.strip() else msg
        error = f"rank {idx} raised {last}"
        spec_kw["_failed_rank"] = idx
    except ProcessExitedException as exc:
        error = str(Finding.of("ranks.died", rank=exc.error_index, error=str(exc).strip()))
        spec_kw["_failed_rank"] = exc.error_index
    finally:
        _teardown(ctx)
    wall = time.perf_counter() - t0
    others = probe.stop()
    if error is not None or not os.path.exists(out):
        return RankPoint(world=world, error=error or "rank 0 wrote no result", traceback=tb,
                         others_cores=others, wall_s=wall, threads=threads)
    with open(out) as f:
        data = json.load(f)
    ranks = []
    kids_cpu = 0.0
    for d in data["ranks"]:
        kids_cpu += d.get("cpu_s") or 0.0
        ranks.append(RankStats.from_gathered(d))
    if others is not None:  # the ranks are this process's children: their CPU is not other processes' load
        others = max(0.0, others - kids_cpu / max(wall, 1e-9))
    return RankPoint(world=world, ranks=tuple(ranks), link=tuple((int(b), float(bw)) for b, bw in data["link"]),
                     others_cores=others, wall_s=wall, threads=threads)


def amdahl_ranks(
    code: str | Callable[[], Any],
    ranks: Sequence[int] = (1, 2, 4),
    *,
    backend: str | None = "gloo",
    setup: str = "",
    globals: Mapping[str, Any] | None = None,
    budget: float | None = None,
    weak: bool = False,
    start_method: str | None = None,
    timeout: float | None = None,
    link: bool = True,
    progress: Callable[[float, str], None] | None = None,
    filename: str | None = None,
) -> RanksResult:
    """Time one step (``code``: source, or a callable taking no arguments) at each world size in ``ranks``.

    ``setup`` runs once in each rank after its process group is up (build the DDP model there: it needs
    the group); the step and setup see ``rank``, ``world_size``, ``local_rank``, ``device`` and the names
    of ``globals``. ``budget``: seconds of samples per world size (default 1 s; at least 10 samples).
    ``weak=True``: the work per rank is fixed, so the global work grows with the ranks (scaled speedup,
    Gustafson). ``timeout``: seconds before a world size is declared hung (default 120 s + 10 × budget).
    """
    __tracebackhide__ = True
    from ..core.load import usable_cores
    from ..timing.bench import check_budget
    from ..timing.results import BenchResult
    from ..scaling.result import ScalingPoint
    from ..scaling.sweep import analyse

    if not isinstance(code, str) and not callable(code):
        raise BadOptionError("code", code, "the step as source code (a string) or a callable with no arguments")
    if not isinstance(setup, str):
        raise BadOptionError("setup", setup, "source code (a string)", "e.g. setup='model = DDP(net)'")
    backend = check_backend(backend)
    cores = usable_cores()
    worlds = check_ranks(ranks, backend, cores)
    _check_budget(budget, check_budget)
    per = float(budget) if budget is not None else DEFAULT_BUDGET
    if start_method is None:
        torch = sys.modules.get("torch")
        cuda_used = torch is not None and torch.cuda.is_initialized()
        start_method = "spawn" if backend == "nccl" or cuda_used or sys.platform != "linux" else "fork"
    if start_method not in START_METHODS:
        raise BadOptionError("start_method", start_method, "one of " + ", ".join(START_METHODS))
    if start_method == "fork" and backend == "nccl":
        raise BadOptionError("start_method", start_method, "spawn with NCCL (CUDA cannot start in a forked child)",
                             "leave start_method=None")
    if start_method == "fork":
        ns = dict(globals) if globals is not None else {}
        _preimport()
    else:
        ns = spawn_namespace(code, setup, globals)
    limit = float(timeout) if timeout is not None else 120.0 + 10 * per
    from ..core.cells import register_source

    fname = filename or "<perfmagic-ranks>"
    if isinstance(code, str):
        register_source(code, fname)
    points: list[RankPoint] = []
    interrupted = False
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="perfmagic-ranks-") as tmp:
        try:
            for i, w in enumerate(worlds):
                # a forked rank runs torch on 1 thread (torchrun's default, OMP_NUM_THREADS=1): OpenMP cannot
                # start its threads in a child forked after the kernel used them (the rank hangs in its first
                # parallel region; the DataLoader's forked workers use 1 thread for the same reason)
                threads = 1 if start_method == "fork" else max(1, cores // w)
                kw = dict(backend=backend, code=code, setup=setup, namespace=ns, threads=threads,
                          budget_s=per, filename=fname, link=link)
                p = _run_world(w, kw, start_method, limit, tmp)
                points.append(p)
                if p.error is not None and not any(q.ok for q in points):
                    raise RankFailed(w, kw.get("_failed_rank"), p.error, p.traceback)
                if progress is not None:
                    progress((i + 1) / len(worlds), f"{w} rank(s): " + (p.error or f"{p.median * 1e3:.3g} ms"))
        except KeyboardInterrupt:
            interrupted = True
    return _finish(points, backend=backend, method=start_method, weak=weak, code=code, setup=setup, per=per,
                   cores=cores, interrupted=interrupted, wall=time.perf_counter() - t_start,
                   analyse=analyse, ScalingPoint=ScalingPoint, BenchResult=BenchResult)


def _check_budget(budget: Any, check_budget: Callable[[Any], None]) -> None:
    """Refuse a budget per world size that is not a number of seconds in (0, 24 h] (``check_budget``: the
    bench's check, which refuses the longer ones)."""
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, (int, float)) or not budget > 0
                               or math.isinf(budget)):
        raise BadOptionError("budget", budget, "a positive number of seconds per world size, at most 24 h",
                             "e.g. budget=0.5 (or --budget 2s)")
    check_budget(budget)


def _finish(points: list[RankPoint], *, backend: str, method: str, weak: bool, code: Any, setup: str,
            per: float, cores: int, interrupted: bool, wall: float, analyse: Any, ScalingPoint: Any,
            BenchResult: Any) -> RanksResult:
    src = code if isinstance(code, str) else (_source(code))
    excluded: list[tuple[int, Finding]] = []
    warnings: list[Finding] = []
    notes: list[Finding] = []
    if method == "fork":
        notes.append(Finding.of("ranks.fork-threads"))
    sps = []
    for p in points:
        if p.ok and p.world > cores:
            busy = p.busy_cores or 0.0
            if busy >= CONTENDED_CORES * cores:
                excluded.append((p.world, Finding.of("ranks.oversubscribed", cores=cores, busy=busy)))
                continue
            notes.append(Finding.of("ranks.waits-fitted", world=p.world, cores=cores, busy=busy))
        if p.ok:
            sps.append(ScalingPoint(p.world, (BenchResult(code=src, raw=p.step_times, number=1,
                                                          cold_s=max((r.cold_s or 0.0) for r in p.ranks),
                                                          label=f"ranks={p.world}"),),
                                    None, p.busy_cores, p.others_cores))
        elif p.error is not None:
            sps.append(ScalingPoint(p.world, (), p.error))
    others = [p.others_cores for p in points if p.others_cores is not None]
    scaling = analyse(sps, mode="variable", var="ranks", weak=weak, code=src, rounds=1, budget_per_point_s=per,
                      status="interrupted" if interrupted else "ok",
                      others_cores=_stats.median(others) if others else None, wall_s=wall, cores=cores) \
        if sps else None
    over = [p.world for p in points if p.world > cores]
    if over:
        warnings.append(Finding.of("ranks.over-cores", over=over, cores=cores))
    for p in points:
        bad = [r.rank for r in p.ranks if r.profile_error]
        if bad:
            warnings.append(Finding.of("ranks.profiler-failed", world=p.world, bad=bad,
                                       error=p.ranks[bad[0]].profile_error))
    result = RanksResult(points=tuple(points), backend=backend, start_method=method, weak=weak, code=src,
                         setup=setup, budget_per_point_s=per, cores=cores,
                         device="cuda" if backend == "nccl" else "cpu", scaling=scaling, excluded=tuple(excluded),
                         status="interrupted" if interrupted else "ok", warnings=tuple(warnings),
                         notes=tuple(notes), wall_s=wall)
    if interrupted:
        raise BenchInterrupted(result if result.good else None)
    return result


def _source(fn: Any) -> str:
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return getattr(fn, "__qualname__", repr(fn))


__all__ = ["amdahl_ranks", "RankFailed", "check_backend", "check_ranks", "free_port", "spawn_namespace",
           "BACKENDS", "START_METHODS"]
