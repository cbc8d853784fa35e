"""02_one_change_at_a_time: %perf, baselines, %perf compare, --vs, verdicts, what changed."""

from nbbuild import check, code, magic, md, solution

NAME = "02_one_change_at_a_time"

MEDIAN = r"median\s+\(\d+% CI"

CELLS = [
    md("""
    # One change at a time: `%perf`, baselines and verdicts

    The method this notebook follows:

    1. measure a **baseline**;
    2. form **one hypothesis** about the biggest cost and make **one change**;
    3. measure again under the same conditions;
    4. **keep the change only if the gain is real** — by default, more than 10%, with the whole
       confidence interval past that bar;
    5. repeat until the gains stop paying for the effort.

    perfmagic keeps every measurement in a ledger beside the notebook (`.perfmagic/ledger.sqlite`), marks
    baselines, and judges a later run against its baseline with a verdict that accounts for noise. The
    numbers quoted in the text are printed by code cells from this run; the budgets are small so the
    notebook runs in about a minute on a small CPU machine.
    """),
    code("""
    %load_ext perfmagic
    """),
    code("""
    import random
    import tempfile
    from pathlib import Path

    import numpy as np  # loaded before the first run, so that every run records the same BLAS set-up
    import perfmagic

    random.seed(1)
    haystack = [random.randrange(10**9) for _ in range(2_000)]
    queries = random.sample(haystack, 100) + [random.randrange(10**9) for _ in range(100)]
    """),
    md("""
    ## 1. The baseline

    The task: count how many of 200 queries occur in a collection of 2,000 numbers. The first version
    keeps the collection in a list. `--baseline` marks this run as the reference of its label
    (`membership`); every later run with that label is compared with it. `-o` returns the result so that
    later cells can refer to it, and `-q` keeps the display to one copy.
    """),
    magic("""
    %%gpubench -l membership --baseline -b 0.5 --no-plot -o
    sum(q in haystack for q in queries)
    """, r"is now the baseline of 'membership'", MEDIAN),
    code("""
    before = _
    """),
    md("""
    ## 2. One hypothesis, one change

    `q in haystack` on a list compares `q` with the elements one by one: a lookup costs time proportional
    to the list's length. A set finds an element by its hash, in about constant time. The hypothesis:
    *the scans dominate, and a set removes them*. The change touches nothing but the container (step 2 of
    the optimization order: the data structure, before any low-level tuning).
    """),
    code("""
    hayset = set(haystack)
    """),
    magic("""
    %%gpubench -l membership -b 0.5 --no-plot -o
    sum(q in hayset for q in queries)
    """, MEDIAN),
    code("""
    after = _
    """),
    md("""
    ## 3. Is the gain real? `%perf compare`

    Without arguments, `%perf compare` judges the latest run against its label's baseline
    (`%perf compare A B` takes two run ids). When both runs were measured in this kernel and the data
    they read is unchanged, it re-measures them interleaved (A B B A …) in this process, A with the
    functions it called when it ran: the honest comparison. Otherwise it says why and compares the
    recorded samples (`--historical` and `--rerun` force either).
    """),
    magic("""
    %perf compare
    """, r"vs A #\d+ membership: .*faster.*: accept", r"the code \(1 place\)", r"^\s+\+sum\(q in hayset for q in queries\)"),
    md("""
    Reading the comparison above:

    - **The headline**: B (the new run) against A (the baseline), as a speed ratio with its 95%
      confidence interval, then the verdict. *faster … accept* needs the **whole** interval beyond the
      minimum effect (10% by default, `--min-effect`).
    - **The numbers**: both medians, the time ratio B/A with its interval, and how many samples each side
      had. The interval comes from a block bootstrap of the raw samples of both runs.
    - **Same-process A/B**: A and B were re-measured interleaved, so machine drift cancels. A
      *historical* comparison (runs from another kernel, or data changed since) cannot see how the
      machine drifted in between: it admits the between-run noise this machine has shown for identical
      code (its earlier re-measurements), says how much, and answers *cannot tell* rather than guess.
    - **What changed**: the code diff between the two cells, and any option or environment difference.
      One change is what makes the verdict mean something. On a shared machine a large difference in
      the load from other processes is listed as well: it is a difference in the conditions of the two
      measurements.

    The same comparison from Python, with the numbers this run produced:
    """),
    code("""
    cmp = perfmagic.compare(before, after)
    c = cmp.comparison
    print(f"median {before.median * 1e3:.3f} ms -> {after.median * 1e6:.2f} µs; "
          f"time ratio B/A {c.ratio:.4f} (95% CI {c.ci_low:.4f}–{c.ci_high:.4f})")
    print(f"speed-up {1 / c.ratio:,.0f}×; verdict: {cmp.verdict}; kind: {cmp.kind}; accept: {c.accept}")
    """),
    md("""
    ## 4. A verdict drift cannot fool: `--vs`

    Two runs taken minutes apart also differ by whatever the machine did in between: another process,
    a frequency change, a thermal limit. `--vs RUN` (or `--vs baseline`) re-runs the other side's code
    **interleaved** with this cell in the same process — A B B A A B … — and compares the samples pair by
    pair. A slow stretch of the machine hits both members of a pair and cancels out of their ratio. The
    other side's code must still run in this namespace (here it needs `haystack` and `queries`).
    """),
    magic("""
    %%gpubench -l membership -b 0.5 --no-plot --vs baseline
    sum(q in hayset for q in queries)
    """, r"same-process A/B", r"faster \(95% CI .*\): accept"),
    md("""
    The first block above is the comparison — its note says both sides were measured interleaved — and the
    second is the new run itself. Both sides are recorded in the ledger; the re-measured A is a new run
    too.

    ## An A/A check

    Before trusting a setup to detect small effects, compare the code **with itself**. Here the
    baseline's own code runs against the baseline. The right answer is *no real change*; on a busy
    machine with a small budget it may also be *inconclusive — measure longer*. A *faster* or *slower*
    verdict in an A/A check means the measurement is not ready to judge small changes.
    """),
    magic("""
    %%gpubench -l membership -b 0.5 --no-plot --vs baseline -o
    sum(q in haystack for q in queries)
    """, r"an A/A comparison", r"same-process A/B"),
    code("""
    aa = _  # with --vs, -o returns the comparison
    print(f"A/A verdict: {aa.verdict}; time ratio {aa.comparison.ratio:.3f} "
          f"(95% CI {aa.comparison.ci_low:.3f}–{aa.comparison.ci_high:.3f}), {aa.kind}")
    """),
    md("""
    ## The four verdicts

    With a minimum effect *m* (10% unless `--min-effect` says otherwise) and the interval of the time
    ratio B/A:

    | the whole interval lies … | verdict |
    |---|---|
    | below 1/(1+*m*) | **faster … accept**: keep the change |
    | above 1+*m* | **slower … reject**: drop it |
    | inside [1/(1+*m*), 1+*m*] | **no real change**: the change is not worth its complexity for speed |
    | across a bar | **inconclusive — measure longer**: the data cannot tell yet |

    *Inconclusive* is an answer, not a failure: it says that the budget was too small for the effect
    you are looking for. Raise `-b` rather than reading the median alone.
    """),
    md("""
    ## What changed — and when a comparison no longer isolates one change

    Suppose the set version is re-measured with the garbage collector on (`--gc`). Now two things differ
    from the baseline: the code and an option.
    """),
    magic("""
    %%gpubench -l membership -b 0.5 --no-plot --gc -o
    sum(q in hayset for q in queries)
    """, MEDIAN),
    code("""
    gc_run = _
    """),
    magic("""
    %perf compare
    """, r"more than one thing changed", r"option gc: False -> True"),
    md("""
    The comparison above still gives a verdict, but its *what changed* section now lists both the code
    and the option and warns that the comparison no longer isolates one change. The same holds for the
    environment: a different torch version, thread count or machine between A and B is listed there too.
    The running conditions (the load from other processes, GPU clocks) are printed apart when they moved:
    nobody chose them, so they do not count as a second change, but they say how far to trust a close verdict.
    """),
    md("""
    ## The ledger: `%perf`

    `%perf` lists this notebook's runs, newest first: the result with its interval, the change against
    the label's baseline with its verdict, and a sparkline of the label's history.
    """),
    magic("""
    %perf -n 8
    """, r"^id\s+(when\s+)?magic\s+label", r"membership"),
    md("""
    ## Moving on: a new baseline, history, export, forget

    The set version was accepted, so it becomes the reference for the next change. `%perf baseline RUN`
    marks a run (by default the latest) as its label's baseline. Line magics expand `{...}`, so the run id
    can come from a result object:
    """),
    magic("""
    %perf baseline {after.run_id}
    """, r"is now the baseline of 'membership'"),
    magic("""
    %perf plot membership
    """, r"history of 'membership'"),
    md("""
    The run with `--gc` only muddled the comparison; `%perf forget RUN` removes it from the ledger.
    `%perf export PATH` writes the runs to CSV or JSON (here into a temporary folder):
    """),
    magic("""
    %perf forget {gc_run.run_id}
    """, r"forgot run #\d+"),
    code("""
    out_dir = Path(tempfile.mkdtemp())
    """),
    magic("""
    %perf export {out_dir}/membership_runs.csv
    """, r"wrote .*membership_runs\.csv"),
    md("""
    `perfmagic.ledger("gpubench")` returns the same rows as a pandas DataFrame, one column per metric of
    `%%gpubench`, indexed by run id (`perfmagic.ledger()` alone: the common columns of every magic):
    """),
    code("""
    df = perfmagic.ledger("gpubench")
    df[df.label == "membership"][["status", "median_s", "ci_low_s", "ci_high_s", "n_samples", "code"]]
    """),
    md("""
    ## The same workflow from a script

    `perfmagic.bench` measures (notebook `01_gpubench`), `perfmagic.compare(a, b)` judges two results or
    two run ids, and `perfmagic.bench_pair(a, b)` runs the interleaved A/B:
    """),
    code("""
    pair = perfmagic.bench_pair("sum(q in haystack for q in queries)", "sum(q in hayset for q in queries)",
                                globals=globals(), budget=0.5)
    print(pair.text())
    """),
    md("""
    ### Exercise 1: fetch each key once

    `report()` below looks up four keys from a remote service, one call each; two of the four are
    repeats. `report_cached()` fetches each distinct key once and reuses the answer. The lookup's cost is
    planted — a sleep of 1 ms stands in for the network — so the true effect of the change is known:
    it removes two of the four lookups.

    **Task.** Follow the method: mark `report()` as the baseline of a new label, `ex-report`; then
    judge `report_cached()` against it with `--vs baseline` (interleaved, same process), with `-b 0.3`
    for both. Keep the comparison: `-o` on the `--vs` cell, then `ex1 = _` in the next cell. Before you
    run it, predict the verdict and the time ratio B/A.

    **You are done when** the check cell prints `exercise 1: passed`. It checks, on `ex1`:

    - the **verdict**: the one the planted change implies, with the whole interval past the 10% bar,
      and
    - the **time ratio B/A within ±0.1** of the share of lookups the change keeps (count them).

    *Hint:* the cells of section 1 and section 4 above show both steps; only the label and the code
    change.

    Write your attempt in the empty cell below (add cells as you need). The solution follows it,
    collapsed (click the bar or the "…" to open it): it runs with the rest of the notebook, so *Run All*
    replaces your `ex1` with its own. To check your attempt, run the check cell right after it.
    """),
    code("""
    import time

    KEYS = ["id", "name", "id", "name"]   # four lookups, two distinct keys

    def fetch(key):
        time.sleep(0.001)   # a remote lookup: 1 ms
        return key.upper()

    def report():
        return [fetch(k) for k in KEYS]

    def report_cached():
        answers = {}
        for k in KEYS:
            if k not in answers:
                answers[k] = fetch(k)
        return [answers[k] for k in KEYS]

    assert report() == report_cached()
    """),
    code("""
    # Exercise 1: your code here (a --baseline cell, a --vs baseline -o cell, then ex1 = _)
    """),
    solution("""
    %%gpubench -l ex-report --baseline -b 0.3 --no-plot
    report()
    """, r"is now the baseline of 'ex-report'", MEDIAN),
    solution("""
    %%gpubench -l ex-report -b 0.3 --no-plot --vs baseline -o
    report_cached()
    """, r"same-process A/B", r"vs A #\d+ ex-report: .*faster.*: accept"),
    solution("""
    # Expected: faster, about 2x, accept. Of the four 1 ms lookups, report_cached() makes two (the two
    # distinct keys): the time ratio B/A is about 2/4 = 0.5, and its interval lies far below the 10% bar
    # (1/1.1 = 0.91), so the change is kept. The dictionary costs microseconds against milliseconds.
    ex1 = _   # with --vs, -o returns the comparison
    """),
    check("""
    c = ex1.comparison
    planted = len(set(KEYS)) / len(KEYS)   # the share of lookups report_cached() still makes
    assert ex1.verdict == "faster" and c.accept, (
        f"the verdict is {ex1.verdict!r} (accept: {c.accept}); expected 'faster' with accept: the change "
        f"removes half the lookups. Was B report_cached() and A the baseline report()?")
    assert abs(c.ratio - planted) <= 0.1, (
        f"the time ratio B/A is {c.ratio:.3f}; expected {planted:.2f} ± 0.1, the share of lookups kept")
    print(f"exercise 1: passed ({ex1.verdict}, accept; time ratio B/A {c.ratio:.3f}, "
          f"95% CI {c.ci_low:.3f}–{c.ci_high:.3f}; planted {planted:.2f})")
    """, 1),
    md("""
    ## Pitfalls

    - **Two changes at once** cannot be told apart: the comparison says so, believe it.
    - **A median alone is not a verdict.** Two medians always differ; only the interval says whether the
      difference is larger than the noise.
    - **Historical comparisons** (runs minutes or days apart) cannot see machine drift. For small effects,
      use `--vs` so that both sides share the same moments of the machine.
    - **Run an A/A check** before hunting small gains: if the same code comes out *faster* than itself,
      the setup is too noisy for the effect you want.
    - **Inconclusive means measure longer**, not "probably faster".
    - **Pick the minimum effect before measuring** (`--min-effect`): a gain too small to matter is not
      worth its complexity, however certain.
    - **Environment differences** (library versions, thread counts, another machine) appear in *what
      changed*; a comparison across machines compares the machines.
    """),
]
