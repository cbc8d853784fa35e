"""04_amdahl: %%amdahl (workers, --threads, --weak) and %littles."""

from nbbuild import check, code, magic, md, solution

NAME = "04_amdahl"

VERDICT = (r"^((others kept [\d.]+ of \d+ cores busy · )?(best (scaled )?speedup|no speedup from threads"
           r"|the time does not change)|cannot tell: others kept)")

CELLS = [
    md("""
    # `%%amdahl` and `%littles`: how many workers are worth it?

    Adding workers speeds up only the part of a job that runs in parallel. `%%amdahl` **measures** the
    cell at several worker counts and answers: what speedup each count gives, how efficient it is, what
    the serial part is, where adding workers stops paying, and whether more workers would even make it
    slower. `%littles` does the arithmetic of Little's law: how many tasks must be in flight for a target
    throughput.

    The workloads here wait (sleeps stand in for I/O or a remote call) or run briefly, so the notebook
    runs in about a minute on a 2-core machine. The numbers in the text are printed by code cells.
    """),
    code("""
    %load_ext perfmagic
    """),
    code("""
    import time
    from concurrent.futures import ThreadPoolExecutor

    import perfmagic

    pool = ThreadPoolExecutor(max_workers=8)

    SERIAL, PARALLEL = 0.004, 0.016   # seconds: a serial fraction of 20%, planted

    def job(workers, serial=SERIAL, parallel=PARALLEL):
        time.sleep(serial)                                   # the part that cannot be split
        list(pool.map(lambda _: time.sleep(parallel / workers), range(workers)))  # split in `workers` pieces
    """),
    md("""
    ## A sweep over worker counts

    `%%amdahl workers=1,2,3,4,6,8` runs the cell with the variable `workers` set to each count. The counts
    are visited in interleaved rounds (`--rounds`), each point timed by the `%%gpubench` engine within
    `-b` seconds per count and round, so a slow spell of the machine spreads over all points instead of
    bending the curve.
    """),
    magic("""
    %%amdahl workers=1,2,3,4,6,8 -b 0.25 --rounds 2 -o
    job(workers)
    """, VERDICT, r"Karp–Flatt", r"serial fraction S = "),
    code("""
    sweep = _
    planted = SERIAL / (SERIAL + PARALLEL)
    print(f"planted serial fraction {planted:.2f}; fitted S = {sweep.serial_fraction:.3f} "
          f"-> ceiling {sweep.ceiling:.1f}× on any number of workers")
    print("speedups:", ", ".join(f"N={n}: {s:.2f}×" for n, s in zip(sweep.ns, sweep.speedups)))
    print(f"worth it up to {sweep.recommended_workers} workers; better-supported model: {sweep.best_model}")
    """),
    md("""
    ### Reading the output

    - **The headline**: the best speedup measured, where, and at what efficiency; the fitted serial
      fraction *S* with its ceiling 1/*S*; and the count beyond which workers stop paying (efficiency
      below 50% or no further rise).
    - **The table**, one row per count: median time with its 95% interval, speedup against N = 1,
      efficiency (speedup ÷ N) and the Karp–Flatt serial fraction.
    - **The fits**: Amdahl's *S* (with its uncertainty) and what it implies; the Universal Scalability
      Law's contention σ and coherency κ, and its peak N\\* when it has one; which model the data support
      better (AICc: lower is better; with few counts the choice is weak, and a note says so).
    - **Warnings**: counts above the usable cores, and other processes that kept cores busy during the
      sweep.

    ### The laws behind it

    - **Amdahl**: with a serial fraction *S*, the speedup on *N* workers is at most
      1 / (*S* + (1 − *S*)/*N*), and never more than 1/*S* however many workers you add.
    - **Karp–Flatt**: from a measured speedup ψ on *N* workers, *e* = (1/ψ − 1/*N*) / (1 − 1/*N*) estimates
      the serial fraction. Constant *e*: true serial code. *e* growing with *N*: overhead — contention,
      coordination, oversubscription — and a note says so.
    - **Universal Scalability Law**: C(*N*) = *N* / (1 + σ(*N* − 1) + κ*N*(*N* − 1)). σ is contention
      (queueing for a shared resource), κ coherency (workers keeping each other up to date). With κ > 0
      throughput peaks at *N*\\* = √((1 − σ)/κ) and *falls* beyond: more workers, slower.

    ## Shrinking the serial part beats adding workers

    Halve the serial part of the same job and sweep again:
    """),
    magic("""
    %%amdahl workers=1,2,3,4,6,8 -b 0.25 --rounds 2 -o
    job(workers, serial=SERIAL / 2)
    """, VERDICT, r"Karp–Flatt"),
    code("""
    leaner = _
    for name, r in [("serial part as planted", sweep), ("serial part halved", leaner)]:
        s = r.serial_fraction
        ceiling = f"ceiling {r.ceiling:.1f}×" if s else "no ceiling in sight"
        print(f"{name:24s} S = {s:.3f}, {ceiling}; speedup at N = 8: {r.speedups[-1]:.2f}×")
    """),
    md("""
    The ceiling 1/*S* moves with the serial part and with nothing else: on the first job, no number of
    workers gets past it. Making the serial part smaller raised the ceiling for every worker count at
    once.

    ## Threads and the GIL

    Sleeps release Python's global interpreter lock, so threads overlap them. Pure-Python computation
    holds the lock: threads take turns and the work does not run in parallel. `%%amdahl` recognizes this
    (no speedup, about one core busy, threads in the cell) and says so instead of fitting a curve:
    """),
    code("""
    def py_work(n):
        s = 0
        for i in range(n):
            s += i * i
        return s
    """),
    magic("""
    %%amdahl workers=1,2,4 -b 0.25 --rounds 2
    list(pool.map(lambda _: py_work(60_000 // workers), range(workers)))
    """, VERDICT, r"Karp–Flatt"),
    md("""
    For Python-bound work, use processes (`ProcessPoolExecutor`, `multiprocessing`) or code that releases
    the lock (NumPy, torch and other native code). For work that waits (network, disk), threads or
    `asyncio` are fine.

    ## Library threads: `--threads`

    `--threads 1,2` sets torch's and the BLAS/OpenMP thread pools to each count around the cell and
    restores them afterwards (the cell needs no variable). Here a matrix multiply. On a machine with free
    cores, a second thread helps a large matmul; on a machine shared with other work, a second thread may
    wait for a core another process holds — the warning lines say how busy the machine was.
    """),
    code("""
    import torch

    a = torch.randn(384, 384)
    """),
    magic("""
    %%amdahl --threads 1,2 -b 0.3 --rounds 2
    a @ a
    """, VERDICT, r"Karp–Flatt"),
    md("""
    torch's own threads do not hold the GIL, and `%%amdahl` names the GIL only on evidence: while the
    threads run, a sampler times how long it waits for the GIL (Python bytecode keeps it for 5 ms at a
    time, torch and NumPy kernels leave it free). When other processes leave less than about one and a
    half cores free, the verdict starts with `cannot tell: others kept …`: no speedup could show, whatever
    the code. Measure thread counts on a quiet machine.
    """),
    md("""
    ## Weak scaling: `--weak`

    Amdahl assumes the problem stays the same size while workers are added (*strong* scaling). Often the
    point of more workers is a bigger problem in the same time: each worker gets its own full share.
    `--weak` reports the *scaled* speedup and fits Gustafson's law, *S* + (1 − *S*)·*N*. Here each of the
    `workers` pieces is a full share of work:
    """),
    magic("""
    %%amdahl workers=1,2,4,8 -b 0.25 --rounds 2 --weak
    time.sleep(SERIAL); list(pool.map(lambda _: time.sleep(PARALLEL), range(workers)))
    """, VERDICT, r"Gustafson"),
    md("""
    ## Little's law: `%littles`

    Concurrency = throughput × latency. To sustain a throughput λ when each task takes W, about λ·W tasks
    must be in flight. Give two of `throughput=`, `latency=`, `concurrency=`; `%littles` solves for the
    third. For waiting (I/O-bound) work, say `--io`:
    """),
    magic("""
    %littles throughput=400/s latency=25ms --io
    """, r"needed concurrency: 10 tasks in flight"),
    md("""
    Without `--io` the work is taken to be CPU-bound, and the worker count is capped by the cores this
    machine has **free right now** (installed cores that other processes keep busy do not count); the
    output then says which throughput is reachable:
    """),
    magic("""
    %littles throughput=400/s latency=25ms
    """, r"needed concurrency: 10 tasks in flight", r"workers: \d+"),
    md("""
    The latency can come from a measurement: `run=RUN` takes a run's median from the ledger. Here one
    task is timed with `%%gpubench`, then sized for a target of 200 tasks per second:
    """),
    code("""
    %%gpubench -l one-task -b 1 --no-plot -o -q
    py_work(20_000)
    """),
    magic("""
    task = _  # -o -q: the BenchResult, nothing displayed
    print(f"one task: {task.median * 1e3:.2f} ms median (run #{task.run_id})")
    """, r"one task: \d+\.\d+ ms median \(run #\d+\)"),
    magic("""
    %littles throughput=200/s run={task.run_id}
    """, r"latency = run #\d+", r"workers: \d+"),
    magic("""
    %littles concurrency=5 latency=40ms
    """, r"throughput: 125 tasks/s"),
    md("""
    The last line is the bound a pool of 5 connections puts on any number of workers: 5 in flight at
    40 ms each is 125 tasks per second, whatever else you add.
    """),
    md("""
    ## Across processes: ranks

    Threads stop paying at the GIL and the cores; training loops then scale with **ranks**
    (torch.distributed: DDP, `torchrun`). `%%amdahl --ranks` runs the cell — one step — in a fresh
    process group per world size and measures every rank in lockstep: the job's step is the slowest
    rank's, the *straggler* column compares each rank's busy time, *comm* is the share of the step spent
    in collectives, *busbw* the all-reduce bandwidth against the link roof measured beside it. Here a
    step with the same planted 20% serial part: every rank does the serial sleep, splits the parallel one,
    then all-reduces a small "gradient". Sleeps need no cores, so 4 ranks fit a 2-core machine:
    """),
    magic("""
    %%amdahl --ranks 1,2,4 -b 0.4 --setup "import torch, torch.distributed as dist; g = torch.zeros(1000)"
    time.sleep(SERIAL)                        # every rank: the part that cannot be split
    time.sleep(PARALLEL / world_size)         # this rank's share of the parallel part
    dist.all_reduce(g)                        # the exchange every DDP step makes
    """, r"^ranks \(gloo\): ", r"^\s+ranks\s+step\s+95% CI", r"link roof \(all-reduce sweep"),
    md("""
    The fit across world sizes should find the planted serial fraction again (about 0.2, a ceiling near
    5×). On a real model the step is compute: each rank then needs its own cores, and the sweep marks
    the world sizes that oversubscribe them instead of fitting them (`docs/ranks.md`).

    ## From a script

    `perfmagic.amdahl(fn, workers=[...])` calls `fn(N)` at each count (or takes code and `var=`), and
    `perfmagic.littles(...)` solves Little's law:
    """),
    code("""
    res = perfmagic.amdahl(job, workers=[1, 2, 4], budget=0.2, rounds=2)
    print(res.text())
    print()
    print(perfmagic.littles(throughput=100, latency=1.0).text())
    """),
    md("""
    ### Exercise 1: where is the ceiling?

    A nightly batch makes twelve calls to a remote service, half a millisecond each (a sleep stands
    in for each call). Four come first and cannot be split: log in, list the files, and so on. The
    other eight are split evenly among the workers, which wait at the same time, so `batch_job(workers)`
    takes the time one worker's batch takes — the same planted model as the ranks example above. The
    serial fraction is therefore known in advance.

    **Task.** Predict the serial fraction *S* and the ceiling 1/*S*: can any number of workers make the
    batch 4× faster? Then sweep `batch_job(workers)` over `workers=1,2,4,8` with `%%amdahl`
    (`-b 0.12 --rounds 3`), and keep the result: `-o`, then `ex1 = _` in the next cell.

    **You are done when** the check cell prints `exercise 1: passed`. It checks that `ex1` has a
    reliable Amdahl fit whose **serial fraction is within ±0.1 of the planted one** (count the calls
    that cannot be split), and prints the ceiling it implies.

    *Hint:* *S* is the share of the one-worker time that no worker count can shorten; the sleeps are all
    the same length.

    Write your attempt in the empty cell below. The solution follows it, collapsed (click the bar or
    the "…" to open it): it runs with the rest of the notebook, so *Run All* replaces your `ex1` with
    its own. To check your attempt, run the check cell right after it.
    """),
    code("""
    CALL = 0.0005                 # one call to the service: 0.5 ms
    SERIAL_CALLS, SPLIT_CALLS = 4, 8

    def batch_job(workers):
        for _ in range(SERIAL_CALLS):               # log in, list the files: cannot be split
            time.sleep(CALL)
        for _ in range(SPLIT_CALLS // workers):     # this worker's share; the others wait meanwhile
            time.sleep(CALL)
    """),
    code("""
    # Exercise 1: your code here (a %%amdahl ... -o cell, then ex1 = _ in the next cell)
    """),
    solution("""
    %%amdahl workers=1,2,4,8 -b 0.12 --rounds 3 -o --no-plot
    batch_job(workers)
    """, VERDICT, r"serial fraction S = "),
    solution("""
    # Expected: S = 4/12 = 0.33, a ceiling of 1/S = 3x. Four of the twelve calls happen before the work
    # can be split, so no number of workers gets the batch below those four: 8 workers give at most
    # 1 / (1/3 + (2/3)/8) = 2.4x, and 4x is out of reach whatever the count. To go further, shrink the
    # serial part (fewer calls before the split, or overlap them), not the worker count.
    ex1 = _
    """),
    check("""
    planted = SERIAL_CALLS / (SERIAL_CALLS + SPLIT_CALLS)
    s = ex1.serial_fraction
    assert s is not None, (
        f"no reliable Amdahl fit ({ex1.verdict()}): sweep at least 3 worker counts, e.g. workers=1,2,4,8; "
        "on a busy machine, run the sweep again")
    assert abs(s - planted) <= 0.1, (
        f"the fitted serial fraction is {s:.3f}; expected {planted:.3f} ± 0.1, the planted one "
        f"({SERIAL_CALLS} of {SERIAL_CALLS + SPLIT_CALLS} calls cannot be split). Did the cell run batch_job(workers)?")
    print(f"exercise 1: passed (S = {s:.3f}, planted {planted:.3f}: a ceiling of {ex1.ceiling:.1f}×; "
          f"measured at N = {ex1.ns[-1]}: {ex1.speedups[-1]:.2f}×)")
    """, 1),
    md("""
    ## Pitfalls

    - **Count the free cores, not the installed ones.** Worker counts above the usable cores
      oversubscribe CPU-bound work; other processes take cores too (the `!` lines say how many).
    - **Rising Karp–Flatt** means overhead, not serial code: fewer, larger tasks or less shared state
      help, more workers do not.
    - **Threads do not parallelize Python code** (the GIL); processes or native code do.
    - **Start below the free cores and increase while measuring**; the sweep tells you where it stops
      paying.
    - **A fit on four points is weak**: measure at least six counts before trusting the choice between
      Amdahl and the USL.
    - **Little's law needs the latency under load**, not on an idle machine: queueing makes tasks slower
      as concurrency grows.
    """),
]
