"""%%flame and perfmagic.profile.flame: planted hot spots, stripped IPython frames, both samplers, faults, cleanup."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import pytest

from perfmagic.profile import flame as _flame
from perfmagic.profile import samplers as _samplers
from perfmagic.errors import BenchInterrupted, PerfmagicError


# ---- planted workloads --------------------------------------------------------------------------
def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1


def planted_hot() -> None:
    end = time.perf_counter() + 0.32
    while time.perf_counter() < end:
        pass


def planted_cold() -> None:
    end = time.perf_counter() + 0.04
    while time.perf_counter() < end:
        pass


def planted_work() -> None:
    for _ in range(2):
        planted_hot()
        planted_cold()


HOT_CELL = """\
def hot():
    end = time.perf_counter() + 0.3
    while time.perf_counter() < end:
        pass

def cold():
    end = time.perf_counter() + 0.03
    while time.perf_counter() < end:
        pass
"""


# ---- leftovers: checked after every test ----------------------------------------------------------
def _children() -> list[tuple[int, str]]:
    me, out = os.getpid(), []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as fh:
                s = fh.read()
        except OSError:
            continue
        comm = s[s.index("(") + 1:s.rindex(")")]
        ppid = int(s[s.rindex(")") + 2:].split()[1])
        if ppid == me:
            out.append((int(d), comm))
    return out


def _flame_tmpdirs() -> set[str]:
    return {n for n in os.listdir(tempfile.gettempdir()) if n.startswith("perfmagic-flame-")}


@pytest.fixture(autouse=True)
def no_leftovers(tmp_path: Any, monkeypatch: Any) -> Any:
    monkeypatch.chdir(tmp_path)
    # a private temp folder: another process's flame run in the shared /tmp is not this test's leftover
    private = tmp_path.parent / f"{tmp_path.name}-tmp"
    private.mkdir(exist_ok=True)
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    before_dirs = _flame_tmpdirs()
    before_files = set(os.listdir(tmp_path))
    yield
    assert not [c for c in _children() if "py-spy" in c[1] or "fake" in c[1]], "a py-spy process was left running"
    assert not [t for t in threading.enumerate() if t.name == "perfmagic-flame-sampler"], "sampler thread left"
    assert _flame_tmpdirs() <= before_dirs, "a perfmagic-flame temp dir was left behind"
    extra = set(os.listdir(tmp_path)) - before_files - {".perfmagic", "fakebin"}
    assert not extra, f"files left in the working directory: {extra}"


_PYSPY: dict[str, Any] = {}


def pyspy_or_skip() -> None:
    """Skip unless py-spy can attach to this very process here (needs SYS_PTRACE or Yama scope <= 1)."""
    if "ok" not in _PYSPY:
        try:
            _flame.flame(lambda: _spin(0.05), sampler="py-spy")
            _PYSPY["ok"], _PYSPY["why"] = True, ""
        except PerfmagicError as exc:
            _PYSPY["ok"], _PYSPY["why"] = False, str(exc)
    if not _PYSPY["ok"]:
        pytest.skip(f"py-spy cannot attach to this process here: {_PYSPY['why']}")


def _fake_pyspy(tmp_path: Any, body: str) -> str:
    d = tmp_path / "fakebin"
    d.mkdir(exist_ok=True)
    p = d / "fake-py-spy"
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return str(p)


# ---- engine -------------------------------------------------------------------------------------
@pytest.mark.parametrize("sampler", ["py-spy", "inprocess"])
def test_planted_hot_function_tops_the_graph(sampler: str) -> None:
    if sampler == "py-spy":
        pyspy_or_skip()
    r = _flame.flame(planted_work, sampler=sampler, rate=200)
    assert r.sampler == sampler and r.status == "ok" and r.fallback_reason is None
    top = r.top(3)
    assert top[0].name == "planted_hot", r.text()
    assert top[0].self_frac > 0.6, r.text()  # planted: 8/9 of the time
    # the root is the function: every stack starts at planted_work, nothing above it
    roots = {r.frames[st[0]][0] for st in r.stacks}
    assert roots == {"planted_work"}, roots
    # planted 0.72 s at 200 Hz; loose for a loaded machine (the in-process sampler is also slowed by the
    # GIL: a busy thread hands it over only every switch interval, 5 ms)
    assert r.n_samples >= (0.4 * 0.72 * 200 if sampler == "py-spy" else 20), r.n_samples
    m = r.metrics()
    assert m["top1_self_name"].startswith("planted_hot (test_flame.py:") and m["sampler"] == sampler
    assert abs(sum(r.weights) - r.sampled_s) < 1e-9 and r.sampled_s <= r.wall_s * 1.03
    assert r.samples_dict()["stack"] and len(r.samples_dict()["stack"]) == len(r.samples_dict()["seconds"])


def test_code_string_and_tree() -> None:
    r = _flame.flame("for _ in range(2):\n    planted_hot()\n", globals={"planted_hot": planted_hot},
                     sampler="inprocess")
    tree = r.tree()
    (cell,) = tree["children"]
    assert cell["name"] == "cell" and cell["children"][0]["name"] == "planted_hot"
    assert abs(tree["total"] - r.sampled_s) < 1e-9
    assert any(k.startswith("cell (cell line 2);planted_hot") for k in r.folded())


def test_bad_options_name_value_and_choices() -> None:
    with pytest.raises(PerfmagicError, match=r"sampler: got 'pyspy'; expected auto \| py-spy \| inprocess"):
        _flame.flame("1", sampler="pyspy")
    with pytest.raises(PerfmagicError, match="rate: got 0"):
        _flame.flame("1", rate=0)
    with pytest.raises(PerfmagicError, match="native.*py-spy"):
        _flame.flame("1", sampler="inprocess", native=True)
    with pytest.raises(SyntaxError):
        _flame.flame("def (")


def test_top_level_await_is_refused_clearly() -> None:
    with pytest.raises(PerfmagicError, match="top-level 'await'"):
        _flame.flame("import asyncio\nawait asyncio.sleep(0)\n")


def test_fallback_when_pyspy_missing(monkeypatch: Any) -> None:
    monkeypatch.setattr(_flame, "find_py_spy", lambda: None)
    r = _flame.flame(planted_work, native=True)
    assert r.sampler == "inprocess"
    assert "not installed" in r.fallback_reason
    assert "py-spy not used: py-spy is not installed" in r.text()
    assert any("native ignored: needs py-spy" in n for n in r.notes)
    assert r.top(1)[0].name == "planted_hot"
    with pytest.raises(PerfmagicError, match="not installed.*inprocess"):
        _flame.flame(planted_hot, sampler="py-spy")


def test_fallback_when_pyspy_denied(tmp_path: Any) -> None:
    fake = _fake_pyspy(tmp_path, 'echo "Error: Permission Denied: Try running again with elevated permissions"; exit 1')
    r = _flame.flame(planted_work, py_spy=fake)
    assert r.sampler == "inprocess" and "Permission Denied" in r.fallback_reason
    assert "\n" not in r.fallback_reason  # one line
    assert r.top(1)[0].name == "planted_hot"
    with pytest.raises(PerfmagicError, match="could not attach"):
        _flame.flame(planted_hot, sampler="py-spy", py_spy=fake)


def test_pyspy_that_never_starts_is_killed(tmp_path: Any, monkeypatch: Any) -> None:
    fake = _fake_pyspy(tmp_path, "exec sleep 30")
    monkeypatch.setattr(_samplers, "START_TIMEOUT_S", 0.5)
    t = time.perf_counter()
    r = _flame.flame(lambda: _spin(0.05), py_spy=fake)
    assert time.perf_counter() - t < 5
    assert r.sampler == "inprocess" and "did not start sampling within 0.5 s" in r.fallback_reason
    assert not [c for c in _children() if c[1] == "sleep"], "the fake py-spy that never started is still running"


@pytest.mark.parametrize("sampler", ["py-spy", "inprocess"])
def test_exception_keeps_profile_then_raises(sampler: str) -> None:
    if sampler == "py-spy":
        pyspy_or_skip()

    def boom() -> None:
        planted_hot()
        raise ValueError("planted")

    with pytest.raises(ValueError, match="planted"):
        _flame.flame(boom, sampler=sampler)
    r = _flame.flame(boom, sampler=sampler, on_error="return")
    assert r.status == "failed" and r.error == "ValueError: planted" and isinstance(r.exception, ValueError)
    assert r.top(1)[0].name == "planted_hot"


@pytest.mark.parametrize("sampler", ["py-spy", "inprocess"])
def test_ctrl_c_gives_partial_result(sampler: str) -> None:
    if sampler == "py-spy":
        pyspy_or_skip()

    def interrupted() -> None:
        planted_hot()
        raise KeyboardInterrupt

    with pytest.raises(BenchInterrupted) as ei:
        _flame.flame(interrupted, sampler=sampler)
    r = ei.value.result
    assert r.status == "interrupted" and "[INTERRUPTED]" in r.text()
    assert r.top(1)[0].name == "planted_hot"


def test_cell_shorter_than_one_interval_says_so() -> None:
    r = _flame.flame("x = 1", sampler="inprocess", rate=10)
    assert r.n_samples == 0
    assert "less than one sample interval (100 ms at 10 Hz)" in r.text()
    assert r.metrics()["top_self_fraction"] is None
    assert r.figure_png() is None


def test_speedscope_parsing_cuts_ipython_frames_and_groups_threads() -> None:
    me = _flame._THIS_FILE
    doc = {"shared": {"frames": [
        {"name": "run_cell", "file": "/x/site-packages/IPython/core/interactiveshell.py", "line": 3000},
        {"name": "_flame_cell_root", "file": me, "line": 10},
        {"name": "<module>", "file": "/tmp/ipykernel_1/abc.py", "line": 2},
        {"name": "hot", "file": "/tmp/ipykernel_1/def.py", "line": 3},
        {"name": "select", "file": "/usr/lib/python3.11/selectors.py", "line": 468},
        {"name": "worker", "file": "/home/u/w.py", "line": 7},
        {"name": 'process 99:"python -c work"', "file": "", "line": 0},
    ]}, "profiles": [
        {"type": "sampled", "name": 'Thread 11 "MainThread"', "samples": [[0, 1, 2, 3], [0, 1, 2], [0]],
         "weights": [0.01, 0.01, 0.01]},
        {"type": "sampled", "name": 'Thread 12 "Thread-1"', "samples": [[4], [5]], "weights": [0.01, 0.01]},
        {"type": "sampled", "name": 'Process 99 Thread 99 ""', "samples": [[6, 5]], "weights": [0.01]},
        {"type": "sampled", "name": 'Thread 13 "blas"', "samples": [[7, 8]], "weights": [0.01]},
    ]}
    doc["shared"]["frames"] += [{"name": "inner_thread", "file": "/x/libopenblas.so", "line": 0},
                                {"name": "dgemm_kernel", "file": "/x/libopenblas.so", "line": 0}]
    raw, outside = _flame.parse_speedscope(doc, pid=7, tid=11, all_threads=True)
    assert outside == 1
    stacks = [[f[0] for f in st] for st, _ in raw]
    assert stacks == [["<module>", "hot"], ["<module>"], ["thread Thread-1", "worker"],
                      ['process 99:"python -c work"', "worker"], ["thread blas", "inner_thread", "dgemm_kernel"]]
    # by default only the cell's thread (and child processes, which only --subprocesses records) is graphed
    others: dict[str, list[int]] = {}
    raw, outside = _flame.parse_speedscope(doc, pid=7, tid=11, others=others)
    assert [[f[0] for f in st] for st, _ in raw] == [["<module>", "hot"], ["<module>"],
                                                     ['process 99:"python -c work"', "worker"]]
    assert others == {"Thread-1": [1, 1], "blas": [1, 0]}  # [busy, waiting]: the selectors.select sample waits


def test_all_threads_draws_a_thread_only_when_mostly_busy() -> None:
    """Planted: an event-loop thread caught once between two waits (1 busy sample of 20) is not drawn;
    a worker busy in 6 of 20 (waiting for the GIL the rest) is, with all its busy samples."""
    me = _flame._THIS_FILE
    frames = [{"name": "_flame_cell_root", "file": me, "line": 10},
              {"name": "<module>", "file": "/tmp/ipykernel_1/abc.py", "line": 2},
              {"name": "loop", "file": "/home/u/loop.py", "line": 5},
              {"name": "epoll_wait", "file": "/lib/libc.so.6", "line": 0},
              {"name": "work", "file": "/home/u/w.py", "line": 7},
              {"name": "take_gil", "file": "/x/libpython3.11.so", "line": 0}]
    doc = {"shared": {"frames": frames}, "profiles": [
        {"type": "sampled", "name": 'Thread 11 "MainThread"', "samples": [[0, 1]] * 4},
        {"type": "sampled", "name": 'Thread 12 "events"', "samples": [[2]] + [[2, 3]] * 19},
        {"type": "sampled", "name": 'Thread 13 "pool"', "samples": [[4]] * 6 + [[4, 5]] * 14},
    ]}
    others: dict[str, list[int]] = {}
    raw, _ = _flame.parse_speedscope(doc, pid=7, tid=11, all_threads=True, others=others)
    heads = [st[0][0] for st, _ in raw]
    assert heads.count("thread pool") == 6 and "thread events" not in heads, heads
    assert others == {"events": [1, 19], "pool": [6, 14]}
    # beside a busy neighbour the event loop is caught runnable more often (5 of 20): its CPU time decides
    doc["profiles"][1]["samples"] = [[2]] * 5 + [[2, 3]] * 15
    raw, _ = _flame.parse_speedscope(doc, pid=7, tid=11, all_threads=True)
    assert "thread events" in [st[0][0] for st, _ in raw]          # by samples alone it would be drawn ...
    raw, _ = _flame.parse_speedscope(doc, pid=7, tid=11, all_threads=True, thread_cores={12: 0.004, 13: 0.6})
    heads = [st[0][0] for st, _ in raw]
    assert "thread events" not in heads and heads.count("thread pool") == 6, heads   # ... it used 0.4% of a core


def _kernel_doc(cell_tid: int = 11, n: int = 40) -> dict[str, Any]:
    """A planted py-spy --native profile of a kernel: the cell thread busy in a native conv for ``n``
    samples; IOPub (tornado/asyncio in epoll_wait), heartbeat (zmq poll), a pipe watcher (read) and a
    native-only thread in epoll_wait for ``n`` samples each; a pool thread the cell started busy for 10."""
    me = _flame._THIS_FILE
    fr = [("run_cell", "/x/site-packages/IPython/core/interactiveshell.py", 3000), ("_flame_cell_root", me, 10),
          ("<module>", "/tmp/ipykernel_1/abc.py", 2), ("conv", "/x/torch/nn/conv.py", 560),
          ("at::native::conv2d", "/x/torch/lib/libtorch_cpu.so", 0),
          ("_thread_main", "/x/site-packages/ipykernel/iostream.py", 90),
          ("run_forever", "/usr/lib/python3.11/asyncio/base_events.py", 600),
          ("select", "/usr/lib/python3.11/selectors.py", 468), ("epoll_wait", "/usr/lib/x86_64-linux-gnu/libc.so.6", 0),
          ("run", "/x/site-packages/ipykernel/heartbeat.py", 100), ("zmq_poll", "/x/site-packages/zmq/libzmq.so", 0),
          ("poll", "/usr/lib/x86_64-linux-gnu/libc.so.6", 0),
          ("_watch_pipe_fd", "/x/site-packages/ipykernel/iostream.py", 200), ("read", "/usr/lib/libc.so.6", 0),
          ("start_thread", "/usr/lib/libc.so.6", 0),
          ("_worker", "/usr/lib/python3.11/concurrent/futures/thread.py", 80), ("crunch", "/home/u/job.py", 5)]
    idx = {f: i for i, f in enumerate(fr)}

    def st(*names: str) -> list[int]:
        return [next(i for f, i in idx.items() if f[0] == nm) for nm in names]

    return {"shared": {"frames": [{"name": a, "file": b, "line": c} for a, b, c in fr]}, "profiles": [
        {"type": "sampled", "name": f'Thread {cell_tid} "MainThread"',
         "samples": [st("run_cell", "_flame_cell_root", "<module>", "conv", "at::native::conv2d")] * n},
        {"type": "sampled", "name": 'Thread 12 "IOPub"',
         "samples": [st("_thread_main", "run_forever", "select", "epoll_wait")] * n},
        {"type": "sampled", "name": 'Thread 13 "Heartbeat"', "samples": [st("run", "zmq_poll", "poll")] * n},
        {"type": "sampled", "name": 'Thread 14 "Thread-2 (_watch_pipe_fd)"', "samples": [st("_watch_pipe_fd", "read")] * n},
        {"type": "sampled", "name": 'Thread 15 "zmq-io"', "samples": [st("start_thread", "epoll_wait")] * n},
        {"type": "sampled", "name": 'Thread 16 "ThreadPoolExecutor-0_0"',
         "samples": [st("_worker", "crunch")] * 10},
    ]}


def test_native_profile_graphs_the_cell_thread_not_the_kernels_waiting_threads() -> None:
    """The issue: %%flame --native gave 26% of the self time to epoll_wait (the kernel's idle threads)."""
    others: dict[str, list[int]] = {}
    raw, outside = _flame.parse_speedscope(_kernel_doc(), pid=7, tid=11, others=others)
    leaves = {st[-1][0] for st, _ in raw}
    assert leaves == {"at::native::conv2d"} and len(raw) == 40 and outside == 0
    assert others == {"IOPub": [0, 40], "Heartbeat": [0, 40], "Thread-2 (_watch_pipe_fd)": [0, 40],
                      "zmq-io": [0, 40], "ThreadPoolExecutor-0_0": [10, 0]}
    # --all-threads: the busy pool thread joins the graph; the waiting kernel threads still do not
    raw, _ = _flame.parse_speedscope(_kernel_doc(), pid=7, tid=11, all_threads=True)
    heads = sorted({st[0][0] for st, _ in raw})
    assert heads == ["<module>", "thread ThreadPoolExecutor-0_0"]
    assert not any(fr[0] in ("epoll_wait", "poll", "read") for st, _ in raw for fr in st)
    # --all-threads --idle: the waits are what was asked for (the all-infrastructure IOPub/heartbeat stacks
    # are kernel machinery and stay out; a native-only thread waiting is shown)
    raw, _ = _flame.parse_speedscope(_kernel_doc(), pid=7, tid=11, all_threads=True, idle=True)
    assert any(st[-1][0] == "epoll_wait" for st, _ in raw)
    # a different cell thread id: nothing of the main thread is the cell
    raw, outside = _flame.parse_speedscope(_kernel_doc(cell_tid=11), pid=7, tid=99)
    assert raw == [] and outside == 0


@pytest.mark.parametrize("stack, waiting", [
    ([("select", "/usr/lib/python3.11/selectors.py", 1), ("epoll_wait", "/lib/libc.so.6", 0)], True),
    ([("epoll_wait", "/lib/libc.so.6", 0)], True),
    ([("__futex_abstimed_wait_common", "/lib/libc.so.6", 0)], True),
    ([("dgemm_kernel", "/x/libopenblas.so", 0)], False),
    ([("crunch", "/home/u/job.py", 3), ("read", "/lib/libc.so.6", 0)], True),  # a user thread blocked in read
    ([("crunch", "/home/u/job.py", 3)], False),
    ([("crunch", "/home/u/job.py", 3), ("pthread_cond_timedwait", "/lib/libc.so.6", 0), ("0x7f", "/lib/libc.so.6", 0)], True),
    ([("_worker", "/usr/lib/python3.11/concurrent/futures/thread.py", 80)], True),
    ([], True),
])
def test_idle_stack_classifier(stack: list[Any], waiting: bool) -> None:
    assert _flame.idle_stack(stack) is waiting


def test_other_threads_are_counted_and_said_in_the_text() -> None:
    from perfmagic.profile.flameresult import FlameResult

    base = dict(frames=(("hot", "/tmp/ipykernel_1/a.py", 3),), stacks=((0,),) * 40, weights=(0.04,) * 40,
                sampler="py-spy", rate_hz=25.0, wall_s=1.6, native=True)
    r = FlameResult(**base, other_threads=(("IOPub", 0, 40), ("Heartbeat", 0, 40)))
    t = r.text()
    assert t.startswith("flame: hot (a.py:3) has 100% of the self time")
    assert "other threads: 2, all waiting: 80 samples of waiting threads" in t and "left out" in t
    assert "the cell thread only" in t and "py-spy 25 Hz" in t
    r = FlameResult(**base, other_threads=(("pool-0", 10, 0), ("IOPub", 0, 40)))
    t = r.text()
    assert "1 busy for 10 samples (20% of all busy samples: pool-0)" in t and "--all-threads adds them" in t
    assert max(len(ln) for ln in t.splitlines()) <= 100
    assert r.metrics()["other_thread_busy_samples"] == 10 and r.metrics()["other_thread_waiting_samples"] == 40


def test_native_default_rate_and_all_threads_options() -> None:
    with pytest.raises(PerfmagicError, match="all_threads.*py-spy"):
        _flame.flame("1", sampler="inprocess", all_threads=True)
    r = _flame.flame(planted_work, sampler="inprocess")
    assert r.rate_hz == _flame.DEFAULT_RATE == 1500 and r.other_threads == ()


def test_pyspy_native_samples_only_the_cell_thread() -> None:
    """Real py-spy --native with busy and waiting threads beside the cell: only the cell is graphed."""
    pyspy_or_skip()
    import selectors
    import socket

    stop = threading.Event()
    a, b = socket.socketpair()

    def waiter() -> None:  # like the kernel's IOPub thread: an event loop in epoll_wait
        sel = selectors.DefaultSelector()
        sel.register(a, selectors.EVENT_READ)
        while not stop.is_set():
            sel.select(0.05)

    def busy_thread_fn() -> None:
        while not stop.is_set():
            _spin(0.01)

    ts = [threading.Thread(target=waiter, name="waiter", daemon=True),
          threading.Thread(target=busy_thread_fn, name="busy-helper", daemon=True)]
    for t in ts:
        t.start()
    try:
        # once first, unchecked: py-spy --native reads the unwind tables of every large library it meets, and
        # on a fresh clone's cold page cache that took ~0.6 s of a 0.72 s cell (2 samples at 25 Hz)
        _flame.flame(planted_hot, sampler="py-spy", native=True)
        r = _flame.flame(planted_work, sampler="py-spy", native=True)
        r_all = _flame.flame(planted_work, sampler="py-spy", native=True, all_threads=True)
    finally:
        stop.set()
        for t in ts:
            t.join(2)
        a.close()
        b.close()
    assert r.rate_hz == _flame.NATIVE_RATE and r.native and not r.all_threads
    assert r.n_samples >= 3, r.text()
    assert not any(r.frames[st[0]][0].startswith("thread ") for st in r.stacks)
    names = {r.frames[i][0] for st in r.stacks for i in st}
    assert "planted_hot" in names and "busy_thread_fn" not in names
    assert dict((n, b_) for n, b_, _ in r.other_threads).get("busy-helper", 0) > 0, r.other_threads
    heads = {r_all.frames[st[0]][0] for st in r_all.stacks}
    assert "thread busy-helper" in heads and "thread waiter" not in heads, heads


def test_pyspy_subprocesses_are_sampled() -> None:
    pyspy_or_skip()
    # 3 s: py-spy looks for new child processes about once a second and then attaches to them; beside the rest
    # of the suite on a loaded 2-core VM that took over 0.6 s, and once (a fresh-clone CI run, 2026-11-28) over
    # the 1.5 s this child used to run: it then sampled nothing at all
    code = "import time\ne = time.perf_counter() + 3.0\nwhile time.perf_counter() < e: pass\n"

    def parent() -> None:
        subprocess.run([sys.executable, "-c", code], check=True)

    r = _flame.flame(parent, sampler="py-spy", subprocesses=True)
    names = {r.frames[st[0]][0] for st in r.stacks}
    assert any(n.startswith("process ") for n in names), names


# ---- HTML ---------------------------------------------------------------------------------------
def _result() -> Any:
    return _flame.flame(planted_work, sampler="inprocess")


def test_flame_result_follows_the_result_protocol() -> None:
    from perfmagic.result import Result

    r = _result()
    assert isinstance(r, Result) and r.primary_metric == "top_self_fraction"
    assert r.metrics()[r.primary_metric] == r.top(1)[0].self_frac > 0
    assert r.samples() == r.samples_dict() and len(r.samples()["stack"]) == len(r.samples()["seconds"])
    assert r.headline() == r.text().splitlines()[0]
    assert repr(r) == f"<FlameResult: {r.headline()}>" and r.to_dict()["samples"] == r.samples()
    bundle = r._repr_mimebundle_()
    htm = bundle["text/html"]
    assert {"text/plain", "text/html", "image/png"} <= set(bundle) and bundle["text/plain"] == r.text()
    # the interactive graph is the page itself (open, not folded); the function table is folded under it
    assert htm.index("<script>") < htm.index("<details") and "All functions by self time" in htm
    assert "planted_hot" in r.html_sections()[0][1]


def test_html_is_self_contained_and_ids_unique() -> None:
    from perfmagic.render.flame_html import flame_html

    r = _result()
    a, b = flame_html(r, png=r.figure_png()), flame_html(r)
    for h in (a, b):
        assert "http://" not in h and "https://" not in h and "//cdn" not in h
        assert not re.search(r"""(src|href)\s*=\s*['"]?(?!data:)[a-z]+:""", h, re.I)
        assert "<script>" in h and "planted_hot" in h
    ida = re.search(r"id='(pmflame-[0-9a-f]+)'", a).group(1)
    idb = re.search(r"id='(pmflame-[0-9a-f]+)'", b).group(1)
    assert ida != idb and a.count(ida) >= 3
    assert "data:image/png;base64," in a and "data:image/png" not in b


_DOM_STUB = r"""
function El(tag){this.tag=tag;this.children=[];this.style={};this.dataset={};this.className="";this.textContent="";
  this.clientWidth=800;this.value="";}
El.prototype.appendChild=function(c){this.children.push(c);return c;};
Object.defineProperty(El.prototype,"innerHTML",{set:function(v){this.children=[];},get:function(){return "";}});
El.prototype.querySelector=function(sel){return this.q[sel]||(this.q[sel]=new El(sel));};
El.prototype.getBoundingClientRect=function(){return {left:0,top:0,width:800};};
var box=new El("div"); box.q={};
var document={getElementById:function(id){return id===UID?box:null;},createElement:function(t){return new El(t);}};
var window={};
"""


def test_flame_javascript_runs_zooms_and_searches(tmp_path: Any) -> None:
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.skip("node is not installed: the inline JavaScript is not executed here")
    from perfmagic.render.flame_html import flame_html

    h = flame_html(_result())
    uid = re.search(r"id='(pmflame-[0-9a-f]+)'", h).group(1)
    js = re.search(r"<script>(.*)</script>", h, re.S).group(1)
    test = f"""
var UID={json.dumps(uid)};
{_DOM_STUB}
{js}
var g=box.q[".pmf-graph"], names=g.children.map(function(e){{return e.textContent;}});
var out={{n:g.children.length, names:names, live:box.q[".pmf-live"].style.display,
         stat:box.q[".pmf-static"].style.display, info:box.q[".pmf-info"].textContent}};
var hot=g.children.filter(function(e){{return e.textContent==="planted_hot";}})[0];
hot.onmousemove({{clientX:10,clientY:10}}); out.tip=box.q[".pmf-tip"].textContent;
var q=box.q["input"]; q.value="COLD"; q.oninput(); out.search=box.q[".pmf-info"].textContent;
out.hits=g.children.filter(function(e){{return e.className.indexOf("pmf-hit")>=0;}}).length;
hot=g.children.filter(function(e){{return e.textContent==="planted_hot";}})[0];
hot.onclick(); out.zoom=box.q[".pmf-info"].textContent;
console.log(JSON.stringify(out));
"""
    f = tmp_path / "fakebin"
    f.mkdir(exist_ok=True)
    (f / "t.js").write_text(test)
    p = subprocess.run([node, str(f / "t.js")], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["live"] == "block" and out["stat"] == "none"
    assert "planted_hot" in out["names"] and "planted_work" in out["names"] and out["n"] >= 4
    assert "test_flame.py" in out["tip"] and "total" in out["tip"] and "self" in out["tip"]
    assert "zoomed on planted_hot" in out["zoom"]
    assert '"cold" matches' in out["search"] and out["hits"] >= 1


# ---- the magic ----------------------------------------------------------------------------------
def _frame_files(r: Any) -> set[str]:
    return {r.frames[i][1] for st in r.stacks for i in st}


@pytest.mark.parametrize("sampler", ["py-spy", "inprocess"])
def test_magic_planted_hot_and_ipython_frames_stripped(shell: Any, sampler: str) -> None:
    if sampler == "py-spy":
        pyspy_or_skip()
    shell.run("import time")
    n_defs = shell.run(HOT_CELL).execution_count
    res = shell.run(f"%%flame -o -q --sampler {sampler} -l planted\nhot()\nhot()\ncold()\n")
    assert res.error_in_exec is None, res.error_in_exec
    r, n_cell = res.result, res.execution_count
    assert r.text().startswith(f"flame: hot (In [{n_defs}] line "), r.text()
    files = _frame_files(r)
    assert not [f for f in files if re.search(r"/(IPython|ipykernel|perfmagic)/", f)], files
    (cell,) = r.tree()["children"]
    assert cell["name"] == f"cell In [{n_cell}]"
    kids = {c["name"] for c in cell["children"]}
    assert "hot" in kids and kids <= {"hot", "cold"}, kids  # cold (30 ms) may get no sample on a loaded machine
    bundle = r._repr_mimebundle_()
    assert {"text/plain", "text/html"} <= set(bundle)
    assert "http://" not in bundle["text/html"] and "https://" not in bundle["text/html"]
    import perfmagic

    row = perfmagic.ledger("flame").iloc[-1]  # the wide view: one column per metric
    assert row["magic"] == "flame" and row["status"] == "ok" and row["label"] == "planted"
    assert row["primary_metric"] == "top_self_fraction" and row["top_self_fraction"] > 0.6
    assert row["top1_self_name"].startswith(f"hot (In [{n_defs}] line ") and row["sampler"] == sampler


def test_magic_displays_text_html_png(shell: Any) -> None:
    shell.run("import time")
    shell.run(HOT_CELL)
    res = shell.run("%%flame --sampler inprocess\nhot()\n")
    assert res.error_in_exec is None
    (bundle,) = shell.bundles
    assert {"text/plain", "text/html", "image/png"} <= set(bundle)
    assert bundle["text/plain"].startswith("flame: hot (In [") and "run #" in bundle["text/plain"]
    assert "run #" in bundle["text/html"] and "<script>" in bundle["text/html"]
    assert "http://" not in bundle["text/html"] and "https://" not in bundle["text/html"]


def test_magic_cell_lines_map_to_in_n(shell: Any) -> None:
    shell.run("import time")
    shell.run(HOT_CELL)
    res = shell.run("%%flame -o -q --sampler inprocess\nx = 1\nhot()\n")
    r = res.result
    cell_stats = [f for f in r.functions() if f.name.startswith("cell In [")]
    assert cell_stats and cell_stats[0].where == f"In [{res.execution_count}] line 3"  # line 3 of the cell


def test_magic_fallback_reason_shown(shell: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(_flame, "find_py_spy", lambda: None)
    shell.run("import time")
    shell.run(HOT_CELL)
    res = shell.run("%%flame\nhot()\n")
    assert res.error_in_exec is None
    assert "in-process sampler" in shell.text() and "py-spy not used: py-spy is not installed" in shell.text()
    res = shell.run("%%flame --sampler py-spy\nhot()\n")
    assert "%%flame: py-spy is not installed" in str(res.error_in_exec)


def test_magic_exception_shows_profile_then_users_error(shell: Any) -> None:
    shell.run("import time")
    shell.run(HOT_CELL)
    res = shell.run("%%flame --sampler inprocess\nhot()\n1/0\n")
    assert isinstance(res.error_in_exec, ZeroDivisionError)
    assert "the cell raised ZeroDivisionError" in shell.text() and "hot (In [" in shell.text()
    import perfmagic

    assert perfmagic.ledger().iloc[-1]["status"] == "failed"


def test_magic_ctrl_c(shell: Any) -> None:
    shell.run("import time")
    shell.run(HOT_CELL)
    res = shell.run("%%flame --sampler auto\nhot()\nraise KeyboardInterrupt\n")
    assert isinstance(res.error_in_exec, KeyboardInterrupt)
    assert "[INTERRUPTED]" in shell.text() and "hot (In [" in shell.text()
    import perfmagic

    assert perfmagic.ledger().iloc[-1]["status"] == "interrupted"


def test_magic_bad_input(shell: Any) -> None:
    from IPython.core.error import UsageError

    for line, msg in (("--rate 0", "must be at least 1"), ("--rate 5000", "at most 2000"),
                      ("--sampler pyspy", "invalid choice"), ("--bogus", "valid options"),
                      ("--sampler inprocess --native", "native: got True"),
                      ("--sampler inprocess --all-threads", "all_threads: got True")):
        res = shell.run(f"%%flame {line}\nx = 1\n")
        assert isinstance(res.error_in_exec, UsageError), line
        assert msg in str(res.error_in_exec), (line, str(res.error_in_exec))
    res = shell.run("%%flame\nimport asyncio\nawait asyncio.sleep(0)\n")
    assert isinstance(res.error_in_exec, UsageError) and "top-level 'await'" in str(res.error_in_exec)
    res = shell.run("%%flame --sampler inprocess --rate 10\nx = 1\n")
    assert res.error_in_exec is None and "less than one sample interval" in shell.text()
    assert shell.run("x").result == 1  # the shell still works


def test_magic_no_plot_and_help(shell: Any) -> None:
    shell.run("import time")
    shell.run(HOT_CELL)
    shell.run("%%flame --no-plot --sampler inprocess\nhot()\n")
    bundle = shell.bundles[-1]
    assert set(bundle) == {"text/plain", "text/html"}  # no PNG, no graph: the text and its static page
    assert "<script" not in bundle["text/html"] and "<img" not in bundle["text/html"]
    assert bundle["text/plain"].startswith("flame: hot (In [") and "run #" in bundle["text/html"]
    doc = shell.ip.find_cell_magic("flame").__doc__
    assert "--subprocesses" in doc and "--sampler" in doc
    assert "--all-threads" in doc and "25 with --native" in " ".join(doc.split())


def test_yama_ptracer_set_for_pyspy_and_cleared(tmp_path: Any, monkeypatch: Any) -> None:
    calls: list[int] = []
    monkeypatch.setattr(_samplers, "yama_scope", lambda: 1)
    monkeypatch.setattr(_samplers, "_prctl_ptracer", lambda pid: calls.append(pid) or True)
    fake = _fake_pyspy(tmp_path, 'echo "py-spy> Sampling process 100 times a second. Press Control-C to exit."\n'
                                 'trap "exit 0" INT\nwhile true; do sleep 0.05; done')
    r = _flame.flame(lambda: _spin(0.05), py_spy=fake)
    assert r.sampler == "py-spy" and r.n_samples == 0 and any("wrote no profile" in n for n in r.notes)
    assert len(calls) == 2 and calls[0] > 0 and calls[1] == 0  # py-spy's pid, then cleared


@pytest.mark.slow
def test_flame_in_a_real_kernel(tmp_path: Any) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    cells = ["%load_ext perfmagic", "import time\n" + HOT_CELL, "%%flame\nhot()\ncold()",
             "%%flame\nhot()\n1/0",
             "import os\n[open(f'/proc/{p}/comm').read().strip() for p in os.listdir('/proc') if p.isdigit() and "
             "open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()[1] == str(os.getpid())]"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    env_backup = os.environ.pop("PERFMAGIC_LEDGER_DIR", None)
    try:
        nbclient.NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                                resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        if env_backup is not None:
            os.environ["PERFMAGIC_LEDGER_DIR"] = env_backup
    (out,) = nb.cells[2].outputs
    data = out["data"]
    assert data["text/plain"].startswith("flame: hot (In [2] line "), data["text/plain"]
    assert "cell In [3]" in data["text/html"] and "<script>" in data["text/html"]
    assert "http://" not in data["text/html"] and "https://" not in data["text/html"]
    assert "/ipykernel/" not in data["text/html"] and "/IPython/" not in data["text/html"]
    err = nb.cells[3].outputs[-1]
    assert nb.cells[3].outputs[0]["data"]["text/plain"].startswith("flame: hot (In [2] line ")
    assert err.output_type == "error" and err.ename == "ZeroDivisionError"
    tb = "\n".join(err.traceback)
    assert "1/0" in tb and "profile/flame.py" not in tb
    left = nb.cells[4].outputs[0]["data"]["text/plain"]
    assert "py-spy" not in left, left
    assert sorted(os.listdir(tmp_path)) == [".perfmagic"]


def test_deep_recursion_is_elided_not_crashing() -> None:
    def rec(k: int) -> None:
        if k:
            return rec(k - 1)
        end = time.perf_counter() + 0.15
        while time.perf_counter() < end:
            pass

    r = _flame.flame(lambda: rec(600), sampler="inprocess")
    assert r.n_samples and max(len(st) for st in r.stacks) <= _flame.MAX_DEPTH + 1
    assert any(r.frames[i][0].startswith("… ") for st in r.stacks for i in st)
    assert r.figure_png() and "<script>" in r.html()


# -- the default rate: >= 100 samples for a cell of 0.1 s (issue 27) ----------------------------------


@pytest.mark.parametrize("sampler", ["py-spy", "inprocess"])
def test_a_tenth_of_a_second_gets_at_least_100_samples(sampler: str) -> None:
    """A 0.12 s cell (spinning in Python, holding the GIL) at the default rate: >= 100 samples, so a
    function that holds them all is known to hold > 95% of the time; an explicit --rate is kept."""
    if sampler == "py-spy" and not _pyspy_works():
        pytest.skip("py-spy cannot attach here")
    switch = sys.getswitchinterval()
    counts = []
    for _ in range(3):  # a shared 2-core box: the best of three runs
        r = _flame.flame(lambda: _spin(0.12), sampler=sampler)
        assert r.sampler == sampler and r.rate_hz == _flame.DEFAULT_RATE
        counts.append(r.n_samples)
        if r.n_samples >= 100:
            break
    if max(counts) < 100:
        # when other processes hold both cores (a shared 2-core box under other test runs) the sampler is
        # not scheduled, whatever the rate; the profile then says so
        assert any(n.startswith(f"{sampler} fell behind") for n in r.notes), (counts, r.notes)
        print(f"{sampler}: {counts} samples in 0.12 s on a loaded machine (load {os.getloadavg()[0]:.1f})")
    assert sys.getswitchinterval() == switch   # the in-process sampler gave the GIL interval back
    top = r.top(1)[0]
    assert top.name == "_spin" and top.self_frac > 0.9
    assert _flame.flame(lambda: _spin(0.05), sampler=sampler, rate=50).rate_hz == 50


def test_the_default_rate_gives_100_samples_in_a_tenth_of_a_second() -> None:
    assert _flame.DEFAULT_RATE * 0.1 >= 1.5 * 100 and _flame.DEFAULT_RATE <= _flame.MAX_RATE


def test_a_long_run_keeps_at_most_max_samples_weighted_by_block() -> None:
    raw = [((("f", "a.py", 1),) if i % 4 else (("g", "a.py", 2),), 0.001) for i in range(25_000)]
    kept, k = _flame.thin(raw, cap=10_000)
    assert k == 3 and len(kept) == 8_334
    assert sum(w for _, w in kept) == pytest.approx(25.0)
    g = sum(w for st, w in kept if st[0][0] == "g") / 25.0
    assert 0.2 < g < 0.3   # g holds a quarter of the samples: the thinned share stays near it
    assert _flame.thin(raw[:50])[1] == 1


def _pyspy_works() -> bool:
    try:
        r = _flame.flame(lambda: _spin(0.01), sampler="py-spy", rate=100)
    except PerfmagicError:
        return False
    return r.sampler == "py-spy"


def test_magic_flame_of_a_tenth_of_a_second_has_100_samples(shell: Any) -> None:
    from perfmagic.storage.session import current_ledger

    shell.run("import time\ndef spin(s):\n    t = time.perf_counter()\n    while time.perf_counter() - t < s:\n"
              "        pass")
    for _ in range(3):
        res = shell.run("%%flame -l spin --no-plot\nspin(0.12)")
        assert res.error_in_exec is None, shell.text()
        m = current_ledger(shell.ip.user_ns).rows(magic="flame")[0]["metrics"]
        if m["n_samples"] >= 100:
            break
    assert m["rate_hz"] == _flame.DEFAULT_RATE, m
    assert m["n_samples"] >= 100 or "fell behind" in shell.text(), (m, shell.text())
    res = shell.run("%%flame --rate 200 --no-plot\nspin(0.05)")
    assert current_ledger(shell.ip.user_ns).rows(magic="flame")[0]["metrics"]["rate_hz"] == 200
