"""A noisy neighbour you start and stop yourself: busy processes beside a measurement.

Verdicts must hold on a shared 2-core box, so tests, benchmarks and workshops plant the noise::

    from perfmagic.core.neighbours import busy_neighbours

    with busy_neighbours(1) as nb:       # one process spinning on a core for the block
        r = perfmagic.bench("float(np.dot(a, a))", globals=ns)
    nb.others_cores                       # the load other processes put on the machine meanwhile

Each neighbour is a separate Python process (``subprocess``, no fork of this one) that spins in a
loop, or with ``memory=True`` streams through a 64 MiB buffer (a memory-bandwidth hog). They are
stopped by PID when the block ends, also after an exception or Ctrl-C, and waited for, so none
outlives the block; and should this process be killed inside the block, each neighbour sees its
parent gone (within a few ms) and stops, so none spins on as an orphan.

From a shell, the same harness runs any command beside busy neighbours, e.g. the unit tests beside
one (``make unit-busy``)::

    python -m perfmagic.core.neighbours 1 -- python -m pytest -q
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

# each neighbour also watches its parent: when the process that started it is gone (killed, so the
# block never ended) it is re-parented, and it stops instead of spinning on as an orphan
_WATCH = "import os\nparent = os.getppid()\n"
_SPIN = _WATCH + "while os.getppid() == parent:\n    for _ in range(200_000):\n        pass\n"
_STREAM = (_WATCH + "b = bytearray(64 * 2**20)\nm = memoryview(b)\n"
           "while os.getppid() == parent:\n    m[:] = b'\\x01' * len(b)\n    bytes(m)\n")


_PLANTED: set[int] = set()  # PIDs of the neighbours running now, from any busy_neighbours block


def planted_pids() -> frozenset[int]:
    """The PIDs of the busy neighbours running now. They are children of this process but stand for
    other users' work: an analysis that subtracts its own child processes' CPU (a process pool in the
    cell) must still count these as other processes' load."""
    return frozenset(_PLANTED)


@dataclass
class Neighbours:
    """The running neighbours: their PIDs, and after the block the load others put on the machine."""

    pids: list[int] = field(default_factory=list)
    others_cores: float | None = None  # cores kept busy by processes other than this one, over the block
    seconds: float = 0.0
    neighbour_cores: float | None = None  # cores the neighbours themselves kept busy, over the block


@contextlib.contextmanager
def busy_neighbours(n: int = 1, *, memory: bool = False, settle_s: float = 0.2) -> Iterator[Neighbours]:
    """Run ``n`` busy processes for the duration of the block (see the module docstring).

    ``settle_s``: wait this long after starting them, so they are spinning when the block begins."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"n: got {n!r}; expected a number of processes >= 0, e.g. 1")
    from .load import LoadProbe, processes_cpu_s

    procs: list[subprocess.Popen] = []
    info = Neighbours()
    try:
        for _ in range(n):
            procs.append(subprocess.Popen([sys.executable, "-c", _STREAM if memory else _SPIN],
                                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
        info.pids = [p.pid for p in procs]
        _PLANTED.update(info.pids)
        if procs:
            time.sleep(settle_s)
        probe = LoadProbe()
        probe.start()
        cpu0 = processes_cpu_s(info.pids)
        t0 = time.perf_counter()
        try:
            yield info
        finally:
            info.others_cores = probe.stop()
            info.seconds = time.perf_counter() - t0
            cpu1 = processes_cpu_s(info.pids)
            if cpu0 is not None and cpu1 is not None and info.seconds > 0:
                info.neighbour_cores = (cpu1 - cpu0) / info.seconds
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:  # pragma: no cover - a kill that did not land
                pass
        _PLANTED.difference_update(p.pid for p in procs)


def main(argv: list[str] | None = None) -> int:
    """``python -m perfmagic.core.neighbours N [--memory] -- COMMAND ...``: run COMMAND beside N busy
    processes; exit with COMMAND's status and say how much load the neighbours put on the machine."""
    import argparse

    from ..render import neighbours as words

    parser = argparse.ArgumentParser(
        prog="python -m perfmagic.core.neighbours",
        description="Run a command beside N busy-loop processes (a planted noisy neighbour).")
    parser.add_argument("n", type=int, help="number of busy processes, e.g. 1")
    parser.add_argument("--memory", action="store_true",
                        help="neighbours stream through 64 MiB buffers (bandwidth hogs) instead of spinning")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="the command to run, after --, e.g. -- python -m pytest -q")
    args = parser.parse_args(argv)
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        parser.error(words.NO_COMMAND)
    if args.n < 0:
        parser.error(words.bad_count(args.n))
    with busy_neighbours(args.n, memory=args.memory) as nb:
        rc = subprocess.call(cmd)
    print(words.summary(args.n, cmd, nb.seconds, nb.neighbour_cores, nb.others_cores, rc), file=sys.stderr)
    return rc


__all__ = ["Neighbours", "busy_neighbours", "main", "planted_pids"]


if __name__ == "__main__":  # pragma: no cover - exercised through the CLI test
    sys.exit(main())
