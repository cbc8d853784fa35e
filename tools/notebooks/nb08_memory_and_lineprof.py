"""08_memory_and_lineprof: %%memory and %%lineprof."""

from nbbuild import check, code, magic, md, solution

NAME = "08_memory_and_lineprof"

MEM = r"^memory: peak \+\S+ \S+ above the start"

CELLS = [
    md("""
    # `%%memory` and `%%lineprof`: memory over a run, time per line

    Two questions a timing cannot answer:

    - **How much memory does this cell need at its peak, and which line causes the peak?** A job that
      fits in memory on average can still fail at one short-lived spike. `%%memory` runs the cell once
      and shows the memory over time, the true peak of each statement, and the places that still hold
      memory at the end.
    - **Which line of this function takes the time?** `%%lineprof -f FUNC` runs the cell once with
      line_profiler on the functions you name, and shows hits and time per line, in the output.

    Sizes are small (peaks of a few hundred MB at most) so the notebook runs in well under a minute on a
    small machine, including one with 2 GB of RAM. The numbers in the text are printed by code cells.
    """),
    code("""
    %load_ext perfmagic
    """),
    code("""
    import numpy as np
    import perfmagic

    rng = np.random.default_rng(0)

    def load_chunks(n):
        \"\"\"n chunks of 1 MiB, as a reader of a binary file would return them.\"\"\"
        return [bytearray(2**20) for _ in range(n)]

    def standardize(a):
        return (a - a.mean()) / a.std()
    """),
    md("""
    ## `%%memory`: the peak and its line

    The cell below loads 32 MiB of chunks, standardizes a 40 MB array, and on its last line builds and
    drops a 100 MiB buffer — a spike that lasts only as long as that line.
    """),
    magic("""
    %%memory
    chunks = load_chunks(32)
    x = rng.random(5_000_000)
    z = standardize(x)
    size = len(bytearray(100 * 2**20))
    """, MEM, r"per statement", r"true peak"),
    md("""
    ### Reading the output

    - **The headline**: the peak above the memory at the cell's start, the line where it happened, the
      increment (what is still held at the end), and the run time.
    - **RSS**: the process's resident memory at the start, the highest value the sampler saw, the **true
      peak** from the kernel's high-water mark (VmHWM on Linux), and the end. A true peak above the
      sampled maximum means a spike was shorter than the sampling interval.
    - **Per statement**: for each top-level line, its own peak above the memory at its start (and, with
      tracemalloc, its traced peak), and its time.
    - **Where RSS grew**: the lines of your code (with their function) that were running when the sampler
      saw memory grow, and how much growth each was charged.
    - With `--trace on`, **traced** (what tracemalloc saw of Python's and NumPy's allocations) and the
      **top allocation sites**: the lines whose blocks were still allocated at the end.
    - The chart: RSS over time, with the peak marked.

    ### How it measures

    A background thread samples RSS every 10 ms (`--interval`). That alone misses short spikes, so
    before each top-level statement the kernel's high-water mark and tracemalloc's peak are **reset**,
    and read again after it: a peak a thousand times shorter than the sampling interval is still caught
    and charged to its line. The same thread notes which line of your code is running at each sample and
    charges it the growth since the previous sample: a few microseconds per sample, so the cell runs at
    full speed. tracemalloc, which records every allocation exactly, slows code that allocates many small
    objects 20–200×, so it runs only when asked: `--trace on` from the first line, `--trace auto` once
    memory has grown 16 MiB. Unlike `%%gpubench`, the cell runs once, in the notebook's namespace: its
    assignments persist.
    """),
    md("""
    `-o` returns the `MemoryResult`. Here the same cell again, from the same starting point (its arrays
    deleted first), to read the figures:
    """),
    code("""
    del chunks, x, z
    """),
    magic("""
    %%memory -o --no-plot
    chunks = load_chunks(32)
    x = rng.random(5_000_000)
    z = standardize(x)
    size = len(bytearray(100 * 2**20))
    """, MEM, r"per statement"),
    code("""
    r = _
    mib = 2**20
    print(f"peak {r.peak_bytes / mib:.1f} MiB above the start, at {r.peak_statement.label}: "
          f"{r.peak_statement.text}")
    print(f"sampled maximum {r.sampled_peak_bytes / mib:.1f} MiB, true peak {r.hwm_peak_bytes / mib:.1f} MiB "
          f"(the sampler missed a spike: {r.missed_peak})")
    for st in r.statements:
        print(f"  {st.label:12s} RSS +{(st.rss_peak_bytes or 0) / mib:6.1f} MiB  {st.text}")
    """),
    md("""
    ## A change that lowers the peak

    `standardize` keeps `a - a.mean()` alive while `a.std()` builds a temporary of its own as large as
    the input (NumPy computes the deviations to square them), and the division then makes another array.
    Taking the standard deviation first, then subtracting and dividing in place, never holds more than one
    array the size of the input besides the input itself:
    """),
    code("""
    def standardize_in_place(a):
        s = a.std()          # its temporary is freed before `out` exists
        out = a - a.mean()
        out /= s
        return out

    assert np.allclose(standardize(x), standardize_in_place(x))
    """),
    magic("""
    %%memory -o --no-plot
    total = float(standardize(x).sum())
    """, MEM),
    code("""
    two_temps = _
    """),
    magic("""
    %%memory -o --no-plot
    total = float(standardize_in_place(x).sum())
    """, MEM),
    code("""
    one_temp = _
    print(f"standardize:          peak +{two_temps.peak_bytes / mib:.1f} MiB")
    print(f"standardize_in_place: peak +{one_temp.peak_bytes / mib:.1f} MiB")
    print(f"(the input is {x.nbytes / mib:.1f} MiB)")
    del chunks, z
    """),
    md("""
    The options: `--no-trace` for the least overhead (RSS and true peaks only, no line located), `--trace on`
    to attribute every allocation exactly from the first line, `--top N` allocation sites, `--interval 5ms` for a finer
    timeline. With torch imported and a GPU present, `%%memory` also follows CUDA memory (allocated and
    reserved over time, the peak from `max_memory_allocated`, and the blocks live at the peak);
    `--device cpu` turns that off.
    """),
    code("""
    import torch

    if torch.cuda.is_available():
        res = perfmagic.memory("y = torch.randn(4096, 4096, device='cuda'); w = y @ y; del y",
                               globals=globals())
        print(res)
    else:
        print("no CUDA device here: on a GPU this cell reports the CUDA peak of a 4096² matmul")
    """),
    md("""
    ## `%%lineprof`: time per line

    `dedupe` keeps the first occurrence of every item. Which line costs the time?
    """),
    code("""
    def dedupe(items):
        seen = []
        out = []
        for item in items:
            if item not in seen:
                seen.append(item)
                out.append(item)
        return out

    items = rng.integers(0, 2_000, size=6_000).tolist()
    """),
    magic("""
    %%lineprof -f dedupe
    dedupe(items)
    """, r"^lineprof: hottest line .* in dedupe\(\)", r"% Time\s+Line contents"),
    md("""
    ### Reading the output

    - **The headline**: the hottest line, its share of its function's time, and how often it ran.
    - **Hottest lines**: the top lines across the profiled functions (`--top N`), by share.
    - **The table** per function: each line's hits, total time, time per hit, and share of the function's
      time, hot lines marked `>`; the HTML version shades them.

    line_profiler times every line of the functions named with `-f` (and only those) while the cell runs
    once. Functions defined in the notebook are shown with their own source (`In [n]`). `-f` takes any
    expression: a function, `obj.method`, `module.func`, a decorated function, or a whole class (all its
    methods); repeat it for several.
    """),
    magic("""
    %%lineprof -f dedupe -o
    dedupe(items)
    """, r"^lineprof: hottest line"),
    code("""
    lp = _
    prof = lp.functions[0]
    hottest = max(prof.lines, key=lambda ln: ln.time_s)
    source = prof.source[hottest.lineno - prof.first_lineno].strip()
    print(f"{prof.name}: {prof.total_s * 1e3:.1f} ms; hottest line {hottest.lineno}: `{source}` "
          f"({hottest.hits:,} hits, {hottest.time_s / prof.total_s:.0%} of the function)")
    """),
    md("""
    Membership in a list scans it, so the test grows with the number of distinct items seen. A set
    answers in constant time:
    """),
    code("""
    class Deduper:
        def __init__(self):
            self.seen = set()

        def run(self, items):
            out = []
            for item in items:
                if item not in self.seen:
                    self.seen.add(item)
                    out.append(item)
            return out

    assert Deduper().run(items) == dedupe(items)
    """),
    magic("""
    %%lineprof -f Deduper
    Deduper().run(items)
    """, r"^lineprof: hottest line .* in Deduper\.", r"Deduper\.run\(\)"),
    md("""
    A class given to `-f` profiles all its methods. The line-by-line time is only comparable *within* a
    profile: line_profiler adds a fixed cost to every line executed, which inflates cheap lines most. To
    compare the two versions' speed, time them with `%%gpubench` (notebooks `01` and `02`).

    ## From a script

    `perfmagic.memory(fn_or_code)` and `perfmagic.lineprof(fn_or_code, funcs=[...])` return the same
    result objects:
    """),
    code("""
    m = perfmagic.memory(lambda: standardize(x).sum())
    print(m)
    print()
    lp2 = perfmagic.lineprof(lambda: dedupe(items[:2_000]), [dedupe], top=3)
    print(lp2.verdict())
    """),
    md("""
    ### Exercise 1: a planted 80 MB peak

    `build_table()` below builds a table of ten million float64 values, writes every one of them, and
    returns their sum: **80 MB** (80,000,000 bytes) at its peak, planted, so the right answer is known.

    **Task.** Run a cell with `%%memory` (`--no-plot` is fine) whose lines are `names = [f"col{i}" for i
    in range(100)]`, then `total = build_table()`, then `n = len(names)`. Before running it, say which
    line holds the peak and how large it is. Keep the result: `-o`, then `ex1 = _` in the next cell.

    **You are done when** the check cell prints `exercise 1: passed`. It checks, on `ex1`:

    - the **peak within 10% of 80 MB** (72–88 MB above the cell's start), and
    - the **peak statement** is the line that holds it.

    *Hint:* `np.ones` writes the pages it allocates, so all of them count in the process's memory
    (RSS); the table is dropped when `build_table()` returns.

    Write your attempt in the empty cell below. The solution follows it, collapsed (click the bar or
    the "…" to open it): it runs with the rest of the notebook, so *Run All* replaces your `ex1` with
    its own. To check your attempt, run the check cell right after it.
    """),
    code("""
    def build_table():
        table = np.ones(10_000_000)   # 10 million float64, written: 80 MB
        return float(table.sum())
    """),
    code("""
    # Exercise 1: your code here (a %%memory ... -o cell, then ex1 = _ in the next cell)
    """),
    solution("""
    %%memory -o --no-plot
    names = [f"col{i}" for i in range(100)]
    total = build_table()
    n = len(names)
    """, MEM, r"per statement"),
    solution("""
    # Expected: a peak of about 80 MB (76 MiB) at `total = build_table()`: ten million 8-byte floats, all
    # written, live until build_table returns; the list of 100 names is a few kB. The increment (what is
    # still held at the end) is close to zero: the table is freed on return, but the peak is what the job
    # needs to fit in memory.
    ex1 = _
    """),
    check("""
    planted = 80_000_000
    assert ex1.peak_bytes is not None and abs(ex1.peak_bytes - planted) <= 0.10 * planted, (
        f"the peak is {(ex1.peak_bytes or 0) / 1e6:.1f} MB above the start; expected 80 MB ± 10% (72–88 MB), "
        "the planted table. Did the cell call build_table() once?")
    assert "build_table" in ex1.peak_statement.text, (
        f"the peak is charged to {ex1.peak_statement.label}: {ex1.peak_statement.text!r}; expected the line "
        "that calls build_table()")
    print(f"exercise 1: passed (peak {ex1.peak_bytes / 1e6:.1f} MB at {ex1.peak_statement.label}: "
          f"{ex1.peak_statement.text})")
    """, 1),
    md("""
    ### Exercise 2: the slow line

    `handle(requests)` normalises each request, formats it as JSON, looks it up in a cache service and
    collects the answers. One line is planted to be slow: the lookup waits 0.3 ms for the service
    (a sleep stands in for it); everything else takes microseconds.

    **Task.** Guess the slowest line first, then find it with `%%lineprof` on `handle`, running
    `handle(REQUESTS)`. Keep the result: `-o`, then `ex2 = _` in the next cell.

    **You are done when** the check cell prints `exercise 2: passed`. It checks that the **hottest line**
    in `ex2` is the planted one, in `handle`, with **at least half** of the function's time.

    *Hint:* `-f` names the function to profile; the line that *calls* a slow function carries that
    function's time.

    Write your attempt in the empty cell below. The solution follows it, collapsed (click the bar or
    the "…" to open it): it runs with the rest of the notebook, so *Run All* replaces your `ex2` with
    its own. To check your attempt, run the check cell right after it.
    """),
    code("""
    import json
    import time

    def lookup(payload):
        time.sleep(0.0003)   # the cache service: 0.3 ms a request
        return len(payload)

    def handle(requests):
        answers = []
        for r in requests:
            key = r.strip().lower()
            payload = json.dumps({"key": key, "size": len(r), "tags": ["web", "v2"]})
            answer = lookup(payload)
            answers.append((key, answer))
        return answers

    REQUESTS = [f"  Item-{i}  " for i in range(150)]
    """),
    code("""
    # Exercise 2: your code here (a %%lineprof ... -o cell, then ex2 = _ in the next cell)
    """),
    solution("""
    %%lineprof -f handle -o
    handle(REQUESTS)
    """, r"^lineprof: hottest line .* in handle\(\)"),
    solution("""
    # Expected: `answer = lookup(payload)`, with nearly all of handle's time (150 × 0.3 ms = 45 ms against
    # microseconds for the rest): the line that calls lookup carries its waiting. json.dumps looks heavier
    # but costs a few microseconds a call.
    ex2 = _
    """),
    check("""
    hot = ex2.hot_lines(1)[0]
    assert hot.function == "handle" and "lookup(" in hot.text, (
        f"the hottest line is {hot.label} in {hot.function}(): {hot.text!r}; expected the line of handle() that "
        "calls lookup(payload). Did you profile handle (-f handle)?")
    assert hot.share >= 0.5, (
        f"that line has {hot.share:.0%} of handle's time; expected at least half: 150 waits of 0.3 ms")
    print(f"exercise 2: passed ({hot.label}: {hot.text} — {hot.share:.0%} of {hot.function}(), {hot.hits} hits)")
    """, 2),
    md("""
    ## Pitfalls

    - **RSS is not what your objects use**: allocators keep freed memory for reuse, so the RSS at the end
      can stay high after `del`. With `--trace on`, read the traced figures for Python-level allocations.
    - **A sampled timeline misses short spikes**; the per-statement true peaks do not. When the two
      disagree, trust the true peak.
    - **The memory available to the job** is what matters: a peak that fits on your machine may not fit
      in a container with a smaller limit.
    - **Sampled growth lines are sampled**: a line that allocates quickly, followed by a slow one in the
      same loop, can give its growth to the slow line. Read them as "in this function, around here".
    - **tracemalloc slows allocation-heavy code**; the run time shown by `%%memory --trace on` includes it.
    - **line_profiler's overhead** is per line executed: cheap lines in tight loops look more expensive
      than they are. Use it to find the hot line, then measure the fix with a timer.
    - **Only the functions named with `-f` are profiled**: a function they call is one line, unless you
      name it too.
    """),
]
