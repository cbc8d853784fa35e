"""Thread oversubscription is named, with its fix, beside a noisy neighbour we start ourselves; and
the neighbour harness leaves nothing running."""

from __future__ import annotations

import os

import pytest

from perfmagic.core.env import oversubscription
from perfmagic.core.neighbours import busy_neighbours

ENV2 = {"blas": [{"internal_api": "openblas", "num_threads": 2}], "torch_threads": 2}


def test_the_rule_on_planted_numbers() -> None:
    w = oversubscription(ENV2, others_cores=1.0, own_cores=1.4, usable_cores=2)
    assert w and "thread oversubscription" in w and "threadpool_limits(1)" in w and "torch.set_num_threads(1)" in w
    assert oversubscription(ENV2, others_cores=0.1, own_cores=1.9, usable_cores=2) is None  # quiet machine
    assert oversubscription(ENV2, others_cores=1.0, own_cores=0.99, usable_cores=2) is None  # one busy thread
    one = {"blas": [{"internal_api": "openblas", "num_threads": 1}], "torch_threads": 1}
    assert oversubscription(one, others_cores=1.0, own_cores=1.2, usable_cores=2) is None  # limited already
    assert oversubscription(ENV2, others_cores=1.0, own_cores=1.4, usable_cores=8) is None  # cores to spare
    # a pool that fights mostly waits: half a core busy, but two threads took CPU time
    assert oversubscription(ENV2, others_cores=1.5, own_cores=0.5, usable_cores=2, active_threads=2)
    assert oversubscription(ENV2, others_cores=1.5, own_cores=0.5, usable_cores=2, active_threads=1) is None


def test_the_probe_counts_the_threads_that_ran() -> None:
    import threading
    import time

    from perfmagic.core.env import LoadProbe

    def spin(t: float) -> None:
        end = time.perf_counter() + t
        while time.perf_counter() < end:
            pass

    p = LoadProbe().start()
    spin(0.15)
    p.stop()
    assert p.active_threads == 1
    done = threading.Event()

    def worker() -> None:  # a pool thread: it works, then waits for the next task (alive at stop())
        spin(0.15)
        done.wait()

    th = threading.Thread(target=worker)
    p = LoadProbe().start()
    th.start()
    spin(0.15)
    p.stop()
    done.set()
    th.join()
    assert p.active_threads == 2


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def test_neighbours_load_the_machine_and_stop_after_the_block() -> None:
    with busy_neighbours(1) as nb:
        pids = list(nb.pids)
        assert len(pids) == 1 and _alive(pids[0])
        import time

        time.sleep(0.5)
    assert nb.others_cores is not None and nb.others_cores > 0.6, nb.others_cores
    assert not _alive(pids[0])
    with pytest.raises(KeyboardInterrupt), busy_neighbours(1) as nb2:
        raise KeyboardInterrupt  # stopped on Ctrl-C too
    assert not _alive(nb2.pids[0])
    with pytest.raises(ValueError, match="processes >= 0"), busy_neighbours(-1):
        pass


@pytest.mark.slow
def test_oversubscribed_dot_is_named_beside_a_busy_neighbour() -> None:
    """The tour's headline case: np.dot with 2 BLAS threads while one neighbour spins on a 2-core box."""
    np = pytest.importorskip("numpy")
    threadpoolctl = pytest.importorskip("threadpoolctl")
    if len(os.sched_getaffinity(0)) != 2:
        pytest.skip("the planted case is for a 2-core machine")
    import perfmagic

    ns = {"np": np, "a": np.ones(4_000_000)}  # large enough that OpenBLAS runs both threads
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        pools = [p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
        if not pools or max(pools) < 2:
            pytest.skip("no BLAS pool with 2 threads here")
        named = []
        for _ in range(3):  # the best of three: a planted truth, on a machine whose speed swings
            with busy_neighbours(1):
                r = perfmagic.bench("float(np.dot(a, a))", globals=ns, budget=1.0)
            named.append(any("thread oversubscription" in w for w in r.warnings))
            if named[-1]:
                break
        assert any(named), r.warnings
        quiet = perfmagic.bench("float(np.dot(a, a))", globals=ns, budget=0.5)
        others = quiet.env.get("others_cores") or 0.0
        if others < 0.5:  # no neighbour of ours, and the machine is quiet: nothing to name
            assert not any("thread oversubscription" in w for w in quiet.warnings), quiet.warnings
