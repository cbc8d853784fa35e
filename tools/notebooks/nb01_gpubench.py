"""01_gpubench: timing a cell with %%gpubench."""

from nbbuild import check, code, magic, md, solution

NAME = "01_gpubench"

MEDIAN = r"median\s+\(\d+% CI"

CELLS = [
    md("""
    # `%%gpubench`: timing a cell

    `%%gpubench` answers one question: **how long does one call of this cell take** — on the GPU when the
    cell uses one, otherwise on the CPU — and how sure can you be of that number. It reports the
    median time per call with a 95% confidence interval, the first (cold) call apart, the peak memory of
    one call, and it records the run in this notebook's ledger so that later changes can be compared
    with it (notebook `02_one_change_at_a_time`).

    This notebook runs top to bottom on a small CPU machine in about a minute: the budgets are kept
    small (`-b 0.3` = 0.3 s per measurement). Every number quoted below is printed by a code cell from
    the measurement just made; yours will differ, and the text tells you how to read them.
    """),
    code("""
    %load_ext perfmagic
    """),
    code("""
    import random
    import time

    import numpy as np
    import perfmagic

    random.seed(0)
    xs = [random.random() for _ in range(20_000)]
    """),
    md("""
    ## A first measurement

    The cell below is the code to time; the options go on the magic line: `-l` names the measurement
    (its *label* in the ledger), `-b` caps the time the whole measurement may take.
    """),
    magic("""
    %%gpubench -l sort-20k -b 0.5
    sorted(xs)
    """, MEDIAN, r"cold call", r"stopped: (precision|budget)"),
    md("""
    ## Reading the output

    Line by line, in the output just above:

    1. **The headline**: the *median* time of one call, then the 95% confidence interval of that median
       and its half-width relative to the median (`±…%`), then how many samples were timed and how many
       calls each sample ran (`N samples × k calls`). The label and the run number in the ledger close
       the line. When there are too few samples for a 95% interval, the line says which coverage it could
       give instead (`NN% CI, too few samples for 95%`).
    2. **Spread and the cold call**: the interquartile range (IQR) of the per-call times, the fastest
       call, and the first call of the cell, timed on its own and never mixed into the samples, with its
       ratio to a warm call.
    3. **Peak memory** of one extra, untimed call: the growth of Python objects (tracemalloc) and of the
       process (RSS high-water mark). On a CUDA device, `torch.cuda.max_memory_allocated` comes first.
    4. **Where and how long**: the device, how the device was synchronized (`sync: none` on a CPU), the
       wall time the whole measurement took, and why it stopped: `precision` (the interval reached the
       target, ±1% by default), `time` (with the default budget: an interval within ±2.5% after 0.1 s, so
       a quick cell answers quickly; `-b 1` keeps the ±1% target) or `budget` (time ran out first).
    5. `note:` lines say what was decided for you (here: no CUDA device, so the CPU was timed);
       `!` lines are **doubts** about the number — a loaded machine, too few samples, a high spread. Read
       them before you quote the median.

    The figure shows every sample in the order it was taken, the warmup included, so drift and outliers
    are visible at a glance.

    The median, not the mean: timing noise is one-sided (the machine can only slow a call down), and a
    few slow outliers move the mean but hardly the median. The interval is *distribution-free*: it comes
    from the order statistics of the samples, with no assumption that the times are normal.
    """),
    md("""
    ## How it measures

    The steps, in order (the docstring of `perfmagic.timing.bench` writes them out in full):

    1. **Compile once**, outside any timed region. Setup code (after the options, as with `%%timeit`) runs
       once.
    2. **Cold call**: the first call is timed alone. Lazy initialisation, JIT compilation, autotuning and
       cold caches all land here.
    3. **Synchronization**: from what the cold call touched, pick how to wait for the device (CUDA events
       when the cell used a CUDA tensor; nothing on a CPU).
    4. **Timer overhead**: empty blocks are timed, so the timer's own cost is known.
    5. **Warmup** until the per-call time stops drifting (the last three blocks within 5% of the three
       before, at least 5 calls), or until 30% of the budget is spent — then a `!` line says the timings
       were still drifting.
    6. **Block calibration**: a fast cell is run *k* times per sample, so that the timer costs less than
       1% of a sample.
    7. **Sampling** until the 95% interval of the median is within the precision target, or the budget is
       spent. The garbage collector is off while timing (as in `timeit`) unless you pass `--gc`.
    8. **Memory** in one extra untimed call, then the **environment** (CPU, threads, load of other
       processes, versions, a fixed reference workload for drift) is recorded with the result.
    """),
    md("""
    ## The cold call

    `%timeit` drops a slow first call without a word. Here the first call of `encode` builds a vocabulary
    (a sleep stands in for reading a file); every later call finds it in the cache. `-o` returns the
    result object, so the next cell can quote its numbers; `-q` stops a second copy of the display.
    """),
    code("""
    import functools

    @functools.cache
    def vocabulary():
        time.sleep(0.1)  # stands in for loading a file on first use
        return {w: i for i, w in enumerate("the quick brown fox jumps over a lazy dog".split())}

    def encode(word):
        return vocabulary()[word]
    """),
    magic("""
    %%gpubench -l encode -b 0.5 -o
    encode("fox")
    """, MEDIAN, r"the first call took [\d,.]+( million)?× a warm"),
    code("""
    cold = _
    print(f"first call {cold.cold_s * 1e3:.1f} ms, a warm call {cold.median * 1e9:.0f} ns: "
          f"{cold.cold_s / cold.median:,.0f}× slower")
    """),
    md("""
    The `!` line above flags the cold call because it dwarfs a warm one. Both numbers matter, for
    different questions: a service that answers millions of requests cares about the warm median; a
    script that calls `encode` once pays the cold call. If your real workload runs the code once, time the
    cold call — the median of warm calls answers a question you did not ask.
    """),
    md("""
    ## Warmup

    Between the cold call and the samples, the cell is run in warmup blocks until the per-call time
    settles. The result keeps those blocks: `(calls, seconds)` pairs. `-w N` runs exactly `N` warmup
    calls instead (`-w 0`: none).
    """),
    magic("""
    %%gpubench -l sort-20k -b 0.3 -o --no-plot
    sorted(xs)
    """, MEDIAN),
    code("""
    r = _
    per_call = [s / k for k, s in r.warmup]
    print(f"warmup: {sum(k for k, _ in r.warmup)} calls in {len(r.warmup)} blocks; "
          f"first block {per_call[0] * 1e3:.3f} ms per call, last {per_call[-1] * 1e3:.3f} ms; "
          f"median of the samples {r.median * 1e3:.3f} ms")
    """),
    md("""
    ## Precision, budget, and when to trust the interval

    Two options decide when sampling stops: `-p` (the precision target, the half-width of the interval
    relative to the median, default 1%) and `-b` (the time budget of the whole measurement). Without
    `-b`, the default of about a second may stretch only until the minimum number of samples is in, and
    after 0.1 s an interval within ±2.5% is accepted (`stopped: time`); with `-b` the target holds.
    Below, a loose target (±10%) and a tight one (±1%) on the same cell:
    """),
    magic("""
    %%gpubench -l sort-20k -b 0.3 -p 10% -o --no-plot
    sorted(xs)
    """, MEDIAN, r"stopped: (precision|budget)"),
    code("""
    loose = _
    """),
    magic("""
    %%gpubench -l sort-20k -b 0.6 -p 1% -o --no-plot
    sorted(xs)
    """, MEDIAN, r"stopped: (precision|budget)"),
    code("""
    tight = _
    for name, res in [("±10% target", loose), ("±1% target", tight)]:
        lo, hi = res.ci
        print(f"{name}: {res.n_samples:4d} samples, median {res.median * 1e3:.3f} ms, "
              f"CI {lo * 1e3:.3f}–{hi * 1e3:.3f} ms (±{res.rel_ci:.1%}), stopped by {res.stop_reason}")
    """),
    md("""
    A run stopped by `budget` did not reach its target: its interval is wider than you asked for, and a
    `!` line says so. Do not tighten your conclusions beyond the interval — give it more budget instead.
    On a machine shared with other work, the `!` line about other processes tells you the medians may be
    slow and noisy; the interval covers the noise it saw, not the load that came and went.
    """),
    md("""
    ## Throughput: `--items`, `--flops`, `--bytes`

    Time alone does not say whether a cell is fast *for what it does*. Declare the work of one call — a
    Python expression evaluated in the notebook — and the result adds a throughput line. Adding two
    float64 arrays reads two arrays and writes one:
    """),
    code("""
    a = np.random.rand(1_000_000)
    b = np.random.rand(1_000_000)
    """),
    magic("""
    %%gpubench -l numpy-add -b 0.3 --bytes 3*a.nbytes --items a.size --no-plot
    a + b
    """, MEDIAN, r"throughput: .*items/s", r"throughput: .*B/s"),
    md("""
    The `throughput:` line above divides the declared work by the median. Bytes per second can be held
    against the machine's memory bandwidth, FLOP/s against its compute peak: that comparison is what
    `%%roofline` automates (notebook `03_roofline`).
    """),
    md("""
    ## Cold caches: `--flush`

    Repeating the same call on the same data keeps that data in the CPU caches, so a benchmark can be
    faster than the first pass over fresh data in a real program. `--flush` writes a buffer twice the size
    of the last-level cache before every sample (outside the timed region) and runs one call per sample.
    """),
    code("""
    v = np.random.rand(500_000)  # 4 MB: fits in the last-level cache of most machines
    """),
    magic("""
    %%gpubench -l sum-warm-cache -b 0.3 -o --no-plot
    v.sum()
    """, MEDIAN),
    code("""
    warm = _
    """),
    magic("""
    %%gpubench -l sum-flushed -b 1 --flush -o --no-plot
    v.sum()
    """, MEDIAN, r"cache flushed before every sample"),
    code("""
    flushed = _
    print(f"warm caches {warm.median * 1e6:.1f} µs, flushed {flushed.median * 1e6:.1f} µs per call "
          f"({flushed.median / warm.median:.2f}×; {flushed.n_samples} flushed samples)")
    """),
    md("""
    Flushing costs time that is not measured, so a flushed run gets fewer samples from the same budget;
    give it a larger one, as above.
    """),
    md("""
    ## The garbage collector: `--gc`

    Like `timeit`, `%%gpubench` switches the cyclic garbage collector off while it times, so that a
    collection triggered by *earlier* code does not land in a random sample. Code that allocates many
    container objects pays for collections in real life, though; `--gc` keeps the collector on.
    """),
    code("""
    def make_records(n):
        return [{"id": i, "tags": [i % 3, i % 5]} for i in range(n)]
    """),
    magic("""
    %%gpubench -l records -b 0.3 -o --no-plot
    make_records(5_000)
    """, MEDIAN),
    code("""
    gc_off = _
    """),
    magic("""
    %%gpubench -l records -b 0.3 --gc -o --no-plot
    make_records(5_000)
    """, MEDIAN),
    code("""
    gc_on = _
    print(f"GC off {gc_off.median * 1e3:.3f} ms, GC on {gc_on.median * 1e3:.3f} ms per call "
          f"(ratio {gc_on.median / gc_off.median:.2f})")
    """),
    md("""
    Whichever way the ratio went on this machine, the point is that the choice is yours and recorded: the
    ledger keeps the option with the run, and `%perf compare` lists it among the things that changed.
    """),
    md("""
    ## Setup code, and names that stay local

    Code after the options on the magic line is *setup*: it runs once before timing, as with `%%timeit`.
    Names the timed cell assigns stay local to the measurement — the cell is compiled as a function —
    so timing a cell never changes the notebook's variables.
    """),
    magic("""
    %%gpubench -l sort-5k -b 0.3 --no-plot  data = [random.random() for _ in range(5_000)]
    result = sorted(data)
    """, MEDIAN),
    code("""
    print("'data' defined in the notebook:", "data" in globals())
    print("'result' defined in the notebook:", "result" in globals())
    """),
    md("""
    Keep setup cheap: it is part of the measurement's wall time. Heavy preparation (loading a data set,
    building a model) belongs in an ordinary cell before the magic.
    """),
    md("""
    ## The result object

    `-o` returns a `BenchResult`: frozen data that keeps every raw sample; the statistics are computed
    from the samples whenever you ask for them.
    """),
    code("""
    r = tight
    lo, hi = r.ci
    print(f"median {r.median * 1e3:.3f} ms, 95% CI {lo * 1e3:.3f}–{hi * 1e3:.3f} ms, "
          f"IQR {r.iqr * 1e3:.3f} ms, min {r.min * 1e3:.3f} ms")
    print(f"{r.n_samples} samples of {r.number} call(s); cold call {r.cold_s * 1e3:.3f} ms; "
          f"stopped: {r.stop_reason}; run #{r.run_id} in the ledger")
    print("first raw block times (s):", [round(t, 6) for t in r.raw[:5]])
    print("metrics recorded in the ledger:", sorted(r.metrics()))
    """),
    md("""
    `r.times` gives the per-call times, `r.throughput` the declared work per second, `r.env` the machine
    it ran on, `r.to_dict()` everything at once. `perfmagic.ledger()` returns every recorded run of this
    notebook as a pandas DataFrame, one row per run with the common columns; `perfmagic.ledger("gpubench")`
    adds that magic's own metrics:
    """),
    code("""
    perfmagic.ledger("gpubench")[["label", "median_s", "ci_low_s", "ci_high_s", "cold_s", "n_samples"]].tail()
    """),
    md("""
    ## The same measurement from a script

    The magic is a thin front end over `perfmagic.bench`, which any `.py` file can call: code as a
    string (with `setup=` and `globals=`) or a zero-argument callable. It returns the same `BenchResult`;
    the magic adds the display and the ledger row.
    """),
    code("""
    res = perfmagic.bench("sorted(xs)", globals={"xs": xs}, budget=0.5, label="sort-20k-script")
    print(res.text())
    res2 = perfmagic.bench(lambda: sorted(xs), budget=0.5)
    print(f"\\nas a callable: {res2.median * 1e3:.3f} ms median over {res2.n_samples} samples")
    """),
    md("""
    ## Synchronizing a GPU

    GPU work is *asynchronous*: `a @ b` on a CUDA tensor queues a kernel and returns at once, long before
    the GPU has finished. A host timer around it measures the launch, not the work. `%%gpubench` brackets
    every block of calls with CUDA events and waits for the last one, so the time is the device's; it
    detects this from the cold call (a CUDA tensor touched, or a CUDA context initialised) and says
    `sync: cuda` in the device line. The peak memory then comes from `torch.cuda.max_memory_allocated`,
    reset before the extra call.

    Options for the unusual cases: `-d cuda:1` picks a device, `--sync jax` waits with
    `block_until_ready` on the cell's value (make the array the cell's last expression), `--sync cupy`
    synchronizes CuPy's stream, `--sync none` turns waiting off (to see what an unsynchronized timer would
    report). The cell below shows the difference on a GPU and says so where there is none.
    """),
    code("""
    import torch

    if torch.cuda.is_available():
        g = torch.randn(4096, 4096, device="cuda")
        g @ g
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        g @ g                            # returns as soon as the kernel is queued
        t1 = time.perf_counter()
        torch.cuda.synchronize()         # waits for the GPU to finish
        t2 = time.perf_counter()
        print(f"host timer without a sync: {(t1 - t0) * 1e3:.3f} ms; with a sync: {(t2 - t0) * 1e3:.3f} ms")
        gpu = perfmagic.bench("g @ g", globals={"g": g}, budget=0.5, flops=2 * 4096**3)
        print(gpu.text())
    else:
        print("no CUDA device here: on a GPU this cell compares a host timer with and without a sync, "
              "then times the same matmul with CUDA events")
    """),
    md("""
    ### Exercise 1: a query, warm and cold

    `query(q)` below asks a server for an answer. The first call also opens the connection, which is
    then kept (`functools.cache`). Both waits are planted — sleeps stand in for the network — so the
    right numbers are known in advance: the answer takes **2 ms**, opening the connection **30 ms**.

    **Task.** Time `query("ping")` with `%%gpubench` (`-b 0.3` is enough) so that the median is the
    time of a warm query and the cold call includes opening the connection. Keep the result: `-o`,
    then `ex1 = _` in the next cell.

    **You are done when** the check cell prints `exercise 1: passed`. It checks, on `ex1`:

    - the **median within 15% of 2 ms** (1.7–2.3 ms: the OS wakes a sleeping thread a little late,
      never early), and
    - the **cold call at least 30 ms**: the connection was opened inside the measurement.

    *Hint:* if `query` ran before in this kernel, the connection is already open and the cold call
    is just another warm one. Setup code after the options runs once, before the cold call:
    `connect.cache_clear()` there opens the connection afresh.

    Write your attempt in the empty cell below. The solution follows it, collapsed (click the bar or
    the "…" to open it): it runs with the rest of the notebook, so *Run All* replaces your `ex1` with
    its own. To check your attempt, run the check cell right after it.
    """),
    code("""
    import functools
    import time

    @functools.cache
    def connect():
        time.sleep(0.030)   # opening the connection: 30 ms, on the first call only
        return "connection"

    def query(q):
        connect()
        time.sleep(0.002)   # the server's answer: 2 ms
        return q
    """),
    code("""
    # Exercise 1: your code here (a %%gpubench ... -o cell, then ex1 = _ in the next cell)
    """),
    solution("""
    %%gpubench -l ex1-query -b 0.3 -o --no-plot  connect.cache_clear()
    query("ping")
    """, MEDIAN, r"cold call"),
    solution("""
    # Expected: a warm median of about 2 ms (the planted answer, plus ~0.1 ms of wake-up) and a cold call
    # of about 32 ms, ~15x a warm one: the first call opens the connection (30 ms) and then waits for its
    # answer. The setup `connect.cache_clear()` runs before the cold call, so the cold call is really cold
    # however often the cell runs; the median leaves the cold call out, by design.
    ex1 = _
    """),
    check("""
    assert ex1.cold_s >= 0.030, (
        f"the cold call took {ex1.cold_s * 1e3:.1f} ms; expected at least 30 ms, the planted connection. "
        "The connection was already open: clear it in the setup, after the options: connect.cache_clear()")
    assert 1.7e-3 <= ex1.median <= 2.3e-3, (
        f"the median is {ex1.median * 1e3:.3f} ms; expected 2 ms ± 15% (1.7–2.3 ms), the planted answer "
        "time. Did the cell time query('ping') and nothing else?")
    print(f"exercise 1: passed (warm median {ex1.median * 1e3:.2f} ms, cold call {ex1.cold_s * 1e3:.1f} ms: "
          f"{ex1.cold_s / ex1.median:.0f}× a warm query)")
    """, 1),
    md("""
    ## Pitfalls

    - **Read the `!` lines.** A loaded machine, a run stopped by the budget, or a high spread make the
      median less trustworthy than its digits suggest. Measure again on a quieter machine or with more
      budget before drawing a conclusion.
    - **Warm is not the whole story.** The median excludes the cold call by design; if your program calls
      the code once, the cold call is the number that matters.
    - **Caches flatter repeated calls.** The same data, call after call, stays in cache; `--flush` shows
      the cold-cache cost.
    - **Very short cells** are run many times per sample; a `!` line says when the timer's own cost is
      still a visible share of a sample.
    - **The GC is off** while timing unless you pass `--gc`; allocation-heavy code may be slower in real
      use.
    - **Assignments in the timed cell do not persist**: compute results you need in an ordinary cell.
    - **On a GPU, never time with a host timer alone**: without a synchronize you measure the launch.
    - **A number alone is not a comparison.** To decide whether a change helped, compare runs with
      `%perf compare` or `--vs`: notebook `02_one_change_at_a_time`.
    """),
]
