"""07_flame: %%flame, a sampling flame graph of a cell."""

from nbbuild import check, code, magic, md, solution

NAME = "07_flame"

HEADLINE = r"^flame: .* has \d+% of the self time · \d+ samples"
SAMPLER = r"^  sampler: (py-spy|in-process)"

CELLS = [
    md("""
    # `%%flame`: where does the time go?

    A timing says *how long*; a profile says *where*. `%%flame` runs the cell once under a **sampling
    profiler**: many times a second it records the call stack the cell is in, and the share of samples in
    which a function appears estimates the share of time spent there. Sampling adds almost no overhead to
    the code (unlike tracing every call), so the profile shows the program as it normally runs.

    The result is a **flame graph** — every bar a function, its width its share of the samples, stacked on
    the function that called it — plus two tables of the top functions. The graph is plain HTML with
    inline JavaScript: click a bar to zoom, hover for the file and line, search by name; it works offline
    and in exported HTML.

    The workloads are sized to run in well under a second per profile, so the notebook takes about a
    minute on a small CPU machine. The numbers quoted in the text are printed by code cells.
    """),
    code("""
    %load_ext perfmagic
    """),
    code("""
    import random
    import time
    from collections import Counter
    from datetime import datetime

    import perfmagic

    random.seed(0)
    PATHS = [f"/api/item/{i}" for i in range(50)] + ["/login", "/search", "/cart"]
    log = [f"2024-03-{random.randint(1, 28):02d} 12:{random.randint(0, 59):02d}:07 GET "
           f"{random.choice(PATHS)} {random.choice([200, 200, 200, 404, 500])} {random.randint(1, 900)}ms"
           for _ in range(40_000)]

    def parse(line):
        date, clock, method, path, status, latency = line.split()
        when = datetime.strptime(f"{date} {clock}", "%Y-%m-%d %H:%M:%S")
        return when, path, int(status), int(latency[:-2])

    def slowest_paths(lines, k=3):
        records = [parse(line) for line in lines]
        total = Counter()
        for when, path, status, latency in records:
            if status == 200:
                total[path] += latency
        return total.most_common(k)
    """),
    md("""
    ## A first profile

    The cell summarizes a web server log: parse every line, add up the latency per path, keep the worst
    three.
    """),
    magic("""
    %%flame
    slowest_paths(log)
    """, HEADLINE, SAMPLER, r"top functions by self time"),
    md("""
    ### Reading the output

    - **The headline** names the function with the most **self time** (time spent in the function's own
      code, not in what it calls), where it is, and how many samples the profile holds against the cell's
      run time.
    - **Top functions by self time**: where the processor actually was. This is where to look for the
      cost.
    - **Top functions by total time** (self time plus everything called from the function): which of
      your calls leads to the cost. The cell itself is at the root, with 100%.
    - **The sampler line**: which sampler ran, at what rate, and why when it was not the first choice.
    - **The graph**: the root (the cell) spans the full width; every function sits on the one that called
      it, as wide as its share of the samples. Wide bars with nothing on top are the self time.

    Functions defined in this notebook read `In [n]:line`; library functions read `file.py:line`.
    IPython's own frames are cut away.

    ### How it samples

    perfmagic first tries **py-spy**, attached from outside to this kernel's process in non-blocking mode:
    it reads the Python stack from memory without stopping the program. Where py-spy is missing or may
    not attach (containers without the ptrace permission, macOS), an **in-process sampler** — a thread
    that reads the cell thread's stack — takes over, and the sampler line says why. The choice is
    recorded with the result.
    """),
    md("""
    ## From the profile to a change

    Profile with `-o` to read the top function from the result:
    """),
    magic("""
    %%flame -o
    slowest_paths(log)
    """, HEADLINE, SAMPLER),
    code("""
    before = _
    top = before.functions()[0]
    print(f"{top.name} ({top.where}): {top.self_frac:.0%} of the self time over {before.n_samples} samples; "
          f"the cell ran {before.wall_s * 1e3:.0f} ms")
    for f in before.functions()[:5]:
        print(f"  {f.name:32s} self {f.self_frac:5.1%}  total {f.total_frac:5.1%}  {f.where}")
    """),
    md("""
    In the profile above, the parsing of the timestamp (`strptime` and the functions under it, in the
    standard library's `_strptime.py`) typically takes a large share, and the summary never uses the
    timestamp. The hypothesis: *parsing a field nobody reads is the biggest cost*. The change: parse only
    what is used.
    """),
    code("""
    def parse_lean(line):
        _, _, _, path, status, latency = line.split()
        return path, int(status), int(latency[:-2])

    def slowest_paths_lean(lines, k=3):
        total = Counter()
        for path, status, latency in map(parse_lean, lines):
            if status == 200:
                total[path] += latency
        return total.most_common(k)

    assert slowest_paths_lean(log) == slowest_paths(log)
    """),
    md("""
    The lean version runs in a fraction of the time. The default rate (1,500 samples a second, at most
    2,000 with `--rate`) still gives a cell of 0.1 s about 150 samples; where the sampler falls behind
    (other processes hold the cores), the output says so:
    """),
    magic("""
    %%flame -o
    slowest_paths_lean(log)
    """, HEADLINE, SAMPLER),
    code("""
    after = _
    print(f"cell time: {before.wall_s * 1e3:.0f} ms before, {after.wall_s * 1e3:.0f} ms after "
          f"(one run each: a profile, not a benchmark); {after.n_samples} samples after")
    if after.functions():
        top_after = after.functions()[0]
        print(f"top function after the change: {top_after.name} ({top_after.self_frac:.0%} of the self time)")
    """),
    md("""
    A profile is one run under a sampler: it points at the cost, it does not measure a gain. To decide
    whether the change is worth keeping, compare the two versions with `%%gpubench` and `%perf compare`
    (notebooks `01` and `02`).

    ## Waiting time: `--idle`

    By default py-spy drops samples in which the thread is waiting (sleep, I/O, a lock): the graph shows
    where the processor works. `--idle` keeps them, to see where the *wall-clock* time goes — for a cell
    that waits on a network or disk, that is the question.
    """),
    code("""
    def fetch(n):
        time.sleep(0.002 * n)   # stands in for a network call
        return n

    def report(lines):
        fetch(100)
        return slowest_paths_lean(lines)
    """),
    magic("""
    %%flame --idle
    report(log)
    """, HEADLINE, SAMPLER),
    md("""
    With py-spy, the sampler line says `idle threads included`, and `fetch` now holds the time it
    spent sleeping. (The in-process sampler always samples wall-clock time, so for it `--idle` changes
    nothing.)

    ## Other options

    - `--sampler inprocess` forces the in-process sampler (`--sampler py-spy` fails instead of falling
      back);
    - `--rate 200` samples 200 times a second (default 1500, at most 2000): fewer samples, less overhead;
    - `--top 5` shortens the tables;
    - `--native` (py-spy) adds C/C++/Rust frames — inside NumPy or torch, for example — at the price of
      pausing the program at each sample;
    - `--subprocesses` (py-spy) also samples child processes, such as DataLoader workers.
    """),
    magic("""
    %%flame --sampler inprocess --rate 200 --top 5 --no-plot
    slowest_paths(log)
    """, HEADLINE, r"^  sampler: in-process sampler"),
    md("""
    ## The result object and the script form

    `-o` returns a `FlameResult`: `functions()` (name, location, self and total time and share),
    `folded()` (the stacks in the folded format other flame-graph tools read), `sampler`, `n_samples`,
    `wall_s`. From a script, `perfmagic.flame(fn_or_code)` profiles a zero-argument callable or code:
    """),
    code("""
    fr = perfmagic.flame(lambda: slowest_paths(log), rate=200)
    print(fr)
    stacks = fr.folded()
    heaviest = max(stacks, key=stacks.get)
    print(f"\\n{len(stacks)} distinct stacks; the heaviest ({stacks[heaviest] * 1e3:.0f} ms):\\n  {heaviest}")
    """),
    md("""
    ### Exercise 1: where does the wall-clock time go?

    `nightly()` downloads rows, then tidies them. The download is planted: 150 ms of waiting for the
    network (a sleep stands in for it), against much less tidying, which is real Python work. The
    question a user asks is *why does `nightly()` take so long?*: wall-clock time.

    **Task.** Profile `nightly()` with `%%flame` so that the profile answers that question, and keep the
    result: `-o`, then `ex1 = _` in the next cell. Predict the top function first.

    **You are done when** the check cell prints `exercise 1: passed`. It checks that the **top function
    by self time** in `ex1` is the planted one, the function that holds the wall-clock time, with **at
    least half of the self time**.

    *Hint:* profile with the defaults first and look at the top function. Then read the section on
    waiting time above: which option keeps the samples of a thread that waits?

    Write your attempt in the empty cell below. The solution follows it, collapsed (click the bar or
    the "…" to open it): it runs with the rest of the notebook, so *Run All* replaces your `ex1` with
    its own. To check your attempt, run the check cell right after it.
    """),
    code("""
    ROWS = [f"2024-03-07 row {i}" for i in range(50_000)]   # what the server sends

    def download():
        time.sleep(0.15)   # the network: 150 ms of waiting
        return ROWS

    def tidy(rows):
        return sorted(row.upper().replace("ROW", "record") for row in rows)

    def nightly():
        return tidy(download())
    """),
    code("""
    # Exercise 1: your code here (a %%flame ... -o cell, then ex1 = _ in the next cell)
    """),
    solution("""
    %%flame --idle -o --no-plot
    nightly()
    """, HEADLINE, SAMPLER),
    solution("""
    # Expected: download, with most of the self time (150 ms of waiting against some milliseconds of
    # tidying). Without --idle, py-spy keeps only the samples where the thread runs, and the top function
    # is the tidying: right for "where does the processor work", wrong for "why does it take so long".
    # The in-process sampler (the fallback) always samples wall-clock time and finds download either way.
    ex1 = _
    """),
    check("""
    top = ex1.functions()[0]
    assert top.name == "download", (
        f"the top function by self time is {top.name} ({top.self_frac:.0%}, sampler {ex1.sampler}, idle samples "
        f"kept: {ex1.idle}); expected download, which waits 150 ms for the network. The default profile drops "
        "waiting samples: add --idle")
    assert top.self_frac >= 0.5, (
        f"download has {top.self_frac:.0%} of the self time; expected at least 50%: 150 ms of waiting against "
        "much less tidying")
    print(f"exercise 1: passed ({top.name} has {top.self_frac:.0%} of the self time over {ex1.n_samples} samples, "
          f"{ex1.sampler} sampler)")
    """, 1),
    md("""
    ## Pitfalls

    - **Samples are statistics.** A function seen in three samples could be anywhere between a little
      and a lot; profile a cell that runs long enough (a few hundred milliseconds or more), or raise
      `--rate`.
    - **Profile a representative input.** With a tiny input, start-up and overheads dominate the graph;
      with the real size, the algorithm does.
    - **Self time is where to cut; total time is where to look from.** A function with a large total and
      little self time only calls the expensive code.
    - **Native code is invisible** without `--native`: time inside a C extension is charged to the Python
      line that called it.
    - **Waiting is invisible** by default: add `--idle` when the question is wall-clock time.
    - **A profile is not a benchmark**: one run, under a sampler. Confirm a change with a before/after
      comparison.
    """),
]
