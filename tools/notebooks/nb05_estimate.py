"""05_estimate: %%estimate, scaling and per-iteration forms, the gate, --run."""

from nbbuild import check, code, magic, md, solution

NAME = "05_estimate"

CELLS = [
    md("""
    # `%%estimate`: how long will the full run take?

    The expensive mistake is not a slow program; it is a job started at full size that was never going to
    finish in time, or in memory. The habit that prevents it: **run it small, measure, multiply out,
    then decide**. A step that takes 150 ms looks harmless until it is multiplied by 119 slices and 2,000
    epochs — about ten hours, not ten minutes.

    `%%estimate` does this for a cell:

    - **scaling form**, `%%estimate n=FULL`: the cell uses a size `n`; it is run at doubling sizes, a cost
      model is fitted, and the time and peak memory at the full size are predicted with an interval;
    - **per-iteration form**, `%%estimate --total UNITS`: the cell is one unit of a job (one step, one
      file, one slice); a few warmed-up units give the total;
    - `--limit` adds a **gate** (will it fit the time the full run may take, and the memory available
      now?), and `--run` runs the full job when the gate allows it and records predicted against actual.

    As in every perfmagic magic, `-b/--budget` is the time spent *measuring*; `--limit` is the time the
    *full run* may take. Budgets and sizes are small so the notebook runs in about a minute on a small CPU machine. The numbers
    quoted in the text are printed by code cells.
    """),
    code("""
    %load_ext perfmagic
    """),
    code("""
    import random
    import time

    import perfmagic

    random.seed(0)
    data = [random.random() for _ in range(2_000_000)]
    """),
    md("""
    ## The scaling form

    Sorting all of `data` is the "full run"; the cell sorts the first `n` items. `n=len(data)` names the
    variable the cell uses and the full size; `--limit 1m` asks whether the full run fits in a minute;
    `--run` then runs it, so that the prediction can be checked. The measuring normally stops at 10% of
    the predicted full run; this full run is only a second or two, so `--max-fraction 25%` lets the
    measuring reach sizes closer to it.
    """),
    magic("""
    %%estimate n=len(data) --limit 1m --max-fraction 25% --run -o
    sorted(data[:n])
    """, r"^estimate for n=2,000,000: ",
        r"(time model: |measured at the full size)",  # a fast machine may reach the full size while measuring
        r"gate: "),
    code("""
    est = _
    print(f"measured {len(est.points)} sizes up to n = {est.largest_measured:,} in {est.spent_s:.2f} s")
    if est.reliable:
        print(f"predicted {est.predicted_s:.3f} s (90% interval {est.low_s:.3f}–{est.high_s:.3f} s); "
              f"gate: {est.verdict}")
    if est.actual is not None:
        print(f"actual full run {est.actual.seconds:.3f} s: error {est.time_error():+.0%}")
    else:
        print(f"the full run was not started (gate: {est.verdict})")
    """),
    md("""
    ### Reading the output

    - **The headline**: the predicted time of the full run with its 90% interval, the predicted peak
      memory, and the gate's verdict: *WILL FIT*, *WILL NOT FIT*, *BORDERLINE* (the interval crosses the
      limit or the memory available), or, without a limit, whether it fits in memory.
    - **Time model**: the cost model chosen, its constant `a` (per-call overhead), and the sizes it was
      fitted on, as a share of the full size. Other models the data supported about as well are listed as
      "plausible too".
    - **Memory model**: the same for the peak memory (RSS high-water mark above the level before each
      run; on CUDA, `max_memory_allocated`).
    - **Measured**: how many sizes, how long it took, and that time as a share of the predicted full run.
      On a fast machine the measuring may reach the full size itself (it goes on to larger sizes while the
      interval is wide, within the budget and the share of the full run): the headline then says *measured
      at the full size*, there is no model to extrapolate, and the interval is the run-to-run variation.
    - **Gate**: the limit, the memory available *now*, and the reason when it will not fit; then the
      **largest size that fits**.
    - With `--run`, **actual full run**: the real time and peak, with the error of the prediction. The
      ledger keeps both, so `%perf` shows predicted against actual. When the gate rules the run out (or
      cannot decide), the full run is not started unless you add `--force`.

    ### How it measures

    The cell runs at doubling sizes (with a few repeats at each), stopping after a few seconds
    (`-b/--budget`, 3 s by default) or once the measuring would exceed a share of the predicted full run
    (`--max-fraction`, 10%). Each run's wall time and peak memory are recorded. The models tried are
    a + b·n, a + b·n log n, a + b·n², a + b·n³, a + b·n^k and a + b·n^k log n, and the one with the lowest
    AICc wins. The constant `a` matters: small sizes are dominated by fixed overheads, and a model without
    it under-predicts the full run. When the 90% interval spans more than 10×, the estimate says
    *unreliable* instead of printing a number.

    ## A quadratic job, and the gate

    Counting close pairs by comparing every point with every other costs time proportional to n².
    Doubling the data quadruples the time — the kind of job where a guess goes badly wrong.
    """),
    code("""
    pts = [random.random() for _ in range(40_000)]

    def close_pairs(xs, eps=1e-4):
        count = 0
        for i in range(len(xs)):
            xi = xs[i]
            for j in range(i):
                if abs(xi - xs[j]) < eps:
                    count += 1
        return count
    """),
    magic("""
    %%estimate n=len(pts) --limit 5s -o
    close_pairs(pts[:n])
    """, r"^estimate for n=40,000: ", r"time model: a \+ b·n", r"gate: (will not fit|unknown)"),
    code("""
    quad = _
    best = quad.time_fit.best
    power = f"n^{best.k:.2f}" if best.k else best.name
    print(f"model: {power}; measured for {quad.spent_s:.2f} s, up to n = {quad.largest_measured:,}")
    if quad.reliable:
        print(f"predicted {quad.predicted_s:.1f} s against a {quad.limit_s:.0f} s limit; "
              f"largest n that fits: {quad.largest_fit:,.0f} of {quad.full:,.0f}")
    else:
        print("the measured sizes were too noisy to extrapolate: the estimate says so instead of guessing")
    """),
    md("""
    The gate above answers before anyone waits for the full run, says why, and names the largest size
    that would fit. When the measured sizes are too noisy to extrapolate (a busy machine), it says
    *unreliable* and the gate *unknown* instead of guessing: measure longer or on a quieter machine. Where the local slope of the time (between consecutive sizes) is still rising at
    the largest size measured, a `!` line says so: the cost may grow faster beyond the sizes measured
    (a working set leaving the cache, for example), so the prediction is then a lower bound.

    ## The per-iteration form

    The cell is one unit of the job; `--total` is the number of units. Here a step of a few milliseconds
    (a sleep stands in for the work) in a job of 119 slices × 2,000 epochs:
    """),
    magic("""
    %%estimate --total 119*2000 --limit 10m -o
    time.sleep(0.005)
    """, r"^estimate for 238,000 units: .*WILL NOT FIT", r"per unit: "),
    code("""
    it = _
    per_unit = sum(it.unit_times) / len(it.unit_times)
    print(f"{per_unit * 1e3:.2f} ms per unit × {it.full:,.0f} units = {it.predicted_s / 60:.1f} min "
          f"predicted; at most {it.largest_fit:,.0f} units fit in {it.limit_s / 60:.0f} min")
    """),
    md("""
    The first unit is timed apart (a cold start would otherwise inflate the total), then a few warmed-up
    units give the mean, the spread and the units per second.

    ### Memory that grows from unit to unit

    A loop that keeps something from every step — a list of losses on the GPU, a cache that is never
    trimmed — grows until it fails, usually hours in. The per-iteration form measures the memory after each
    unit and extrapolates the growth over the job:
    """),
    code("""
    kept = []
    """),
    magic("""
    %%estimate --total 119*2000 --limit 1h -b 0.5
    kept.append(bytearray(200_000)); time.sleep(0.001)
    """, r"memory grows .* per unit", r"WILL NOT FIT"),
    code("""
    print(f"the estimate itself ran {len(kept)} units, which kept {sum(map(len, kept)) / 1e6:.0f} MB; freeing them")
    kept.clear()
    """),
    md("""
    ## Mistakes the estimate catches

    A cell that does not use its size variable cannot be extrapolated. `%%estimate` notes that the code
    never mentions `n`, and warns when the time does not change with it:
    """),
    magic("""
    %%estimate n=10**6 -b 0.5 --no-plot
    time.sleep(0.002)
    """, r"the code does not mention 'n'"),
    md("""
    A size far beyond memory is caught too. The measuring never runs a size that would need more than half
    of the memory available now (the estimate must not be what kills the kernel on a small pod), and when
    the sizes it did run show memory growing in proportion to `n`, that rate continued to the full size is
    a floor on what the full run needs: the gate says *WILL NOT FIT* even when no time can be printed
    (when the sizes do give a reliable fit, its memory model says how much is needed).
    """),
    magic("""
    %%estimate n=10**12 -b 1 --no-plot
    buf = bytearray(n)  # n zero bytes, written: memory in proportion to n
    """, r"WILL NOT FIT",
        # no time to print: the floor from the sizes' memory; a reliable fit: its memory model says it
        r"(it grew in proportion to n over the sizes measured|memory: \+[\d.]+ [KMGT]iB needed)"),
    md("""
    Options for the other cases: `--sizes 1000,2000,4000` measures chosen sizes instead of doubling ones;
    `-b 5s` allows more time for measuring (larger sizes give a better extrapolation);
    `--max-fraction 5%` caps the measuring against the predicted full run; `--no-memory` skips the memory
    measurement; `--force` runs the full job with `--run` even when the gate says no.

    ## From a script

    `perfmagic.estimate(fn, n=FULL)` calls `fn(n)` at each size; `perfmagic.estimate(step, total=UNITS)`
    calls `step()` per unit. Both return the same `EstimateResult`:
    """),
    code("""
    res = perfmagic.estimate(lambda n: sorted(data[:n]), n=len(data), limit=60, budget=1.0)
    print(res)
    print()
    step = perfmagic.estimate(lambda: time.sleep(0.005), total=119 * 2000, limit=3600)
    print(step.headline())
    """),
    md("""
    ## On a GPU

    With CUDA tensors each size is synchronized before its time is read, and the peak memory comes from
    `torch.cuda.max_memory_allocated`; the gate then compares it with the GPU's free memory. The cell
    below runs only where a GPU is present.
    """),
    code("""
    import torch

    if torch.cuda.is_available():
        def matmul(n):
            x = torch.randn(n, n, device="cuda")
            return x @ x
        gpu_est = perfmagic.estimate(matmul, n=16_384, limit=60, budget=2.0)
        print(gpu_est)
    else:
        print("no CUDA device here: on a GPU this cell predicts the time and GPU memory of a "
              "16384² matmul from smaller ones")
    """),
    md("""
    ### Exercise 1: a quadratic job, predicted then run

    `all_pairs(n)` compares every pair of `n` records through a service that answers in bulk: 50 ns per
    pair, planted as a sleep, so that the right answer is known. The full run has 4,000 records.

    **Task.** Before running anything: how long should the full run take, and what happens to the time
    when `n` doubles? Then estimate the full run with `%%estimate` (`n=4000`, a limit of 2 seconds,
    measured at the sizes 500, 1000, 1500 and 2000), and let it run the full job so that the prediction
    can be checked (`--run`). Keep the result: `-o`, then `ex1 = _` in the next cell.

    **You are done when** the check cell prints `exercise 1: passed`. It checks, on `ex1`:

    - the **cost model** grows as *n*² (its exponent within 1.8–2.2), and
    - the **actual full run lies inside the predicted 90% interval**, and
    - the gate's **verdict** is the one the planted time implies against the 2 s limit.

    *Hint:* the scaling form names the variable and the full size on the magic line
    (`%%estimate n=4000 ...`), and the cell uses `n`; `--sizes` takes the sizes to measure. Sizes of a
    few milliseconds and more keep the fixed overheads and the machine's noise small against the work
    (the first pitfall below).

    Write your attempt in the empty cell below. The solution follows it, collapsed (click the bar or
    the "…" to open it): it runs with the rest of the notebook, so *Run All* replaces your `ex1` with
    its own. To check your attempt, run the check cell right after it.
    """),
    code("""
    PER_PAIR = 5e-8   # seconds per pair of records: 50 ns

    def all_pairs(n):
        time.sleep(PER_PAIR * n * n)   # n² pairs
    """),
    code("""
    # Exercise 1: your code here (a %%estimate ... -o cell, then ex1 = _ in the next cell)
    """),
    solution("""
    %%estimate n=4000 --sizes 500,1000,1500,2000 --limit 2s --run -o --no-plot
    all_pairs(n)
    """, r"^estimate for n=4,000: .*WILL FIT", r"time model: a \+ b·n", r"actual full run"),
    solution("""
    # Expected: a quadratic model (a + b·n²), a prediction of about 0.8 s (5e-8 s × 4000²) with an interval
    # around it, WILL FIT against the 2 s limit, and an actual full run of about 0.8 s inside the interval.
    # Doubling n quadruples the time: sizes up to half of n already pin the curve, because the job really
    # follows one cost model (in real code, a change of regime above the sizes measured would not show).
    ex1 = _
    """),
    check("""
    assert ex1.reliable and ex1.time_fit is not None, (
        f"the estimate is not reliable ({ex1.headline()}): measure larger sizes (--sizes 500,1000,1500,2000), "
        "or again on a quieter machine")
    k = ex1.time_fit.best.exponent()
    assert 1.8 <= k <= 2.2, (
        f"the time model {ex1.time_fit.best.describe()} grows as n^{k:.2f}; expected n² (1.8–2.2): "
        "all_pairs(n) sleeps for n² pairs. Did the cell call all_pairs(n) with the magic's n?")
    assert ex1.actual is not None and ex1.actual.status == "ok", (
        "no full run was made: add --run to the magic line (and a --limit it fits in)")
    assert ex1.low_s <= ex1.actual.seconds <= ex1.high_s, (
        f"the full run took {ex1.actual.seconds:.3f} s, outside the predicted interval "
        f"{ex1.low_s:.3f}–{ex1.high_s:.3f} s (predicted {ex1.predicted_s:.3f} s)")
    assert ex1.verdict == "will fit", (
        f"the gate says {ex1.verdict!r}; expected 'will fit': about 0.8 s against a 2 s limit (--limit 2s)")
    print(f"exercise 1: passed (n^{k:.2f}; predicted {ex1.predicted_s:.3f} s, 90% interval "
          f"{ex1.low_s:.3f}–{ex1.high_s:.3f} s; actual {ex1.actual.seconds:.3f} s, error {ex1.time_error():+.0%}; "
          f"{ex1.verdict})")
    """, 1),
    md("""
    ## Pitfalls

    - **Small sizes lie**: fixed overheads dominate them. Measure sizes large enough that the work, not the
      overhead, sets the time; the reported share of the full size tells you how far the extrapolation
      reaches.
    - **Costs change regime** when the data leaves a cache level or the RAM (swapping). A rising local
      slope is the warning; measure closer to the full size before trusting the number.
    - **The memory available now** is what the gate uses; other jobs may take it before yours runs.
    - **Cold starts and warm-ups** are not in a per-unit mean; an epoch that reloads data has its own
      cold start per epoch.
    - **Gate with a subset**: scale progressively (5 → 50 → full items), checking results and the
      extrapolated time at each stage, and keep a fast end-to-end test of the critical path.
    """),
]
