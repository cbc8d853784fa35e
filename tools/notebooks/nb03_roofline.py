"""03_roofline: %%roofline and %roofline."""

from nbbuild import check, code, magic, md, solution

NAME = "03_roofline"

CELLS = [
    md("""
    # `%%roofline`: compute-bound or bandwidth-bound?

    Before optimizing a piece of code, find out **which resource limits it**. A cell is
    *compute-bound* when the arithmetic units are busy all the time: fewer or cheaper operations help
    (vectorization, lower precision, tensor cores, a better algorithm). It is *bandwidth-bound* (perfmagic
    prints `memory-bound`) when the cores mostly wait for data from memory: moving fewer bytes helps
    (fusing passes, avoiding temporaries, a better layout, smaller types). Tuning the resource that is not
    the limit changes nothing.

    The **roofline model** makes this a calculation. With *I* the arithmetic intensity of the code — FLOPs
    per byte moved — the best rate it can reach is

    > attainable FLOP/s = min(peak FLOP/s, *I* × peak bytes/s)

    The two roofs meet at the **ridge point**, *I* = peak FLOP/s ÷ peak bytes/s. Code with an intensity
    left of the ridge is bandwidth-bound on this machine; right of it, compute-bound.

    `%%roofline` times the cell (through the same engine as `%%gpubench`), counts its FLOPs and bytes,
    and places it under the roofs **measured on this machine**. The budgets are small so the notebook runs
    in about a minute; the first use of the roofs on a machine adds their measurement (about 15 s on a
    CPU), after which they are cached. Numbers quoted below are printed by code cells.
    """),
    code("""
    %load_ext perfmagic
    """),
    code("""
    import numpy as np
    import perfmagic
    import torch

    torch.manual_seed(0)
    np.random.seed(0)
    """),
    md("""
    ## The roofs of this machine: `%roofline`

    The line magic alone shows the roofs: for each data type, the best matrix-multiply rate over a
    sweep of sizes (torch and NumPy), and the best streaming bandwidth (copy, add and triad kernels over
    arrays much larger than the last-level cache). They are measured once per machine and cached
    (`~/.cache/perfmagic/ceilings`); `%roofline --calibrate` measures them again, for instance after the
    machine was busy during the first measurement (a `!` line says so).
    """),
    magic("""
    %roofline
    """, r"^ceilings of \w+", r"ridge\s+\S+ FLOP/B", r"bandwidth\s+\S+ [kMGT]?B/s"),
    code("""
    roofs = perfmagic.ceilings()
    for dtype, peak in roofs.compute.items():
        print(f"{dtype:9s} peak {peak / 1e9:8.2f} GFLOP/s   ridge {roofs.ridge(dtype):6.3g} FLOP/B")
    print(f"bandwidth {roofs.bandwidth_Bps / 1e9:.2f} GB/s")
    """),
    md("""
    Each ridge above is the intensity a cell of that data type needs before the arithmetic, not the
    memory, becomes its limit.

    ## A matrix multiply

    Multiplying two *n*×*n* float32 matrices does 2*n*³ FLOPs and, at best, reads two matrices and writes
    one: 12*n*² bytes. Its intensity, *n*/6 FLOP/B, grows with *n*.
    """),
    code("""
    n = 512
    x = torch.randn(n, n)
    y = torch.randn(n, n)
    """),
    magic("""
    %%roofline -l matmul-512 -b 0.5 -o
    x @ y
    """, r"^compute-bound: ", r"work per call: .* FLOP \(counted\)"),
    code("""
    mm = _
    print(f"intensity {mm.intensity:.1f} FLOP/B vs ridge {mm.ridge:.2f} FLOP/B -> {mm.bound}-bound")
    print(f"achieved {mm.flops_per_s / 1e9:.2f} GFLOP/s = {mm.fraction_of_roof:.0%} of the "
          f"{mm.peak_flops_per_s / 1e9:.1f} GFLOP/s {mm.dtype} roof")
    """),
    md("""
    ### Reading the output

    In the output above:

    1. **The verdict line**: the bound, the cell's intensity against the ridge for its data type, and the
       achieved rate as a share of the roof that limits it.
    2. **Work per call**: the FLOPs and bytes of one call and whether they were *counted* or *given*, and
       the median time of a call.
    3. **Achieved and attainable**: what the cell reached, and what the roofline allows at its intensity.
    4. **Next, in order**: what to try, for this bound. When the cell reaches only a small share of its
       roof, the first advice is that the hardware is not the limit yet: overheads are (Python, small
       tensors, many tiny kernels, threads on a busy machine) — profile before tuning for the roof.
    5. **Notes** say how the numbers were obtained; **`!` lines** are doubts (a loaded machine, roofs
       measured under load).

    The chart places the point under the roofs, with this notebook's earlier roofline runs.

    **How it counts.** FLOPs come from torch's `FlopCounterMode` (a multiply-add is 2 FLOPs), plus
    perfmagic's formulas for elementwise ops that torch counts as zero. Bytes come from perfmagic's own
    dispatch mode: the distinct input and output tensors of every op. That is the *algorithmic* traffic,
    a lower bound on what really crosses the memory bus when the data does not fit in cache.
    """),
    md("""
    ## An elementwise chain

    `p * 2 + q` on large vectors does two FLOPs per element but reads and writes several bytes per FLOP.
    Its intensity is far left of any ridge:
    """),
    code("""
    N = 4_000_000               # 16 MB per float32 vector
    p = torch.randn(N)
    q = torch.randn(N)
    """),
    magic("""
    %%roofline -l two-pass -b 0.5 -o
    p * 2 + q
    """, r"^memory-bound: ", r"reduce data movement"),
    code("""
    two_pass = _
    print(f"{two_pass.flops:.3g} FLOP and {two_pass.bytes / 2**20:.1f} MiB per call: intensity "
          f"{two_pass.intensity:.3f} FLOP/B, ridge {two_pass.ridge:.2f} FLOP/B")
    """),
    md("""
    The advice above no longer mentions faster arithmetic: it would not help. What helps is moving fewer
    bytes. `p * 2` writes a temporary vector that `+ q` reads back — two passes over memory. One
    `torch.add(q, p, alpha=2)` computes the same in a single pass, with no temporary.

    ## One change moves the point
    """),
    magic("""
    %%roofline -l fused -b 0.5 -o
    torch.add(q, p, alpha=2)
    """, r"^memory-bound: "),
    code("""
    fused = _
    assert torch.allclose(p * 2 + q, torch.add(q, p, alpha=2))
    for r in (two_pass, fused):
        print(f"{r.label:9s} {r.bytes / 2**20:6.1f} MiB per call, intensity {r.intensity:.3f} FLOP/B, "
              f"{r.time_s * 1e3:7.2f} ms, {r.bytes_per_s / 1e9:5.2f} GB/s")
    print(f"time ratio fused / two-pass: {fused.time_s / two_pass.time_s:.2f}")
    """),
    md("""
    The same FLOPs over fewer bytes: the point moves right (higher intensity), and if the time fell, up.
    The chart of the `fused` run shows both points. Fewer bytes is also fewer allocations: the
    temporary of the two-pass version is a fresh 16 MB buffer on every call.

    To judge whether the gain is *real*, time both with `%%gpubench` and compare them (notebook
    `02_one_change_at_a_time`); the roofline says *why* a change can help, not whether it did beyond the
    noise.
    """),
    md("""
    ## Code without torch ops: `--flops` and `--bytes`

    perfmagic counts only torch operations. For NumPy or plain Python, give the work of one call as
    Python expressions, and the data type with `--dtype` (the float32 roof is used otherwise). Here
    `np.add(b, c, out=a)` reads two float64 arrays and writes one, one FLOP per element:
    """),
    code("""
    m = 2_000_000
    a64 = np.empty(m)
    b64 = np.random.rand(m)
    c64 = np.random.rand(m)
    """),
    magic("""
    %%roofline -l numpy-add --flops m --bytes 24*m --dtype float64 -b 0.5 --no-plot
    np.add(b64, c64, out=a64)
    """, r"^memory-bound: ", r"\(given\)"),
    md("""
    Without `--flops`/`--bytes`, a cell without torch ops stops with a one-line error that says what to
    give.

    ## The result object and the script form

    `-o` returns a `RooflineResult`: `intensity`, `ridge`, `bound`, `flops_per_s`, `bytes_per_s`,
    `fraction_of_roof`, `advice`, and the `BenchResult` of the timing in `.bench`. From a script:
    `perfmagic.roofline(code, globals=..., flops=..., bytes=...)` and `perfmagic.ceilings()`.
    """),
    code("""
    res = perfmagic.roofline("x @ y", globals={"x": x, "y": y}, budget=0.5, label="matmul-script")
    print(res.verdict())
    print("first advice:", res.advice[0])
    print(f"timing: {res.bench.median * 1e3:.2f} ms median over {res.bench.n_samples} samples")
    """),
    md("""
    ## On a GPU

    With CUDA tensors the cell is timed with CUDA events, and the roofs are measured on the GPU: cuBLAS
    matmul rates for float32, TF32, float16, bfloat16 (and fp8 on recent GPUs), and device-memory
    bandwidth. The ridge of a GPU lies much further right than a CPU's, so more code is bandwidth-bound
    there. The cell below runs only where a GPU is present (the first GPU calibration takes a while).
    """),
    code("""
    if torch.cuda.is_available():
        xg = torch.randn(4096, 4096, device="cuda")
        yg = torch.randn(4096, 4096, device="cuda")
        pg = torch.randn(2**26, device="cuda")
        for stmt in ("xg @ yg", "pg * 2 + pg"):
            rg = perfmagic.roofline(stmt, globals=globals(), budget=1.0)
            print(rg.verdict())
    else:
        print("no CUDA device here: on a GPU this cell places a 4096² matmul and an elementwise chain "
              "under the GPU's own measured roofs")
    """),
    md("""
    ### Exercise 1: place an add under the roofs

    Adding two vectors is as simple as arithmetic gets, and its work per element is known exactly.

    **Task.** Before running anything, work out for `u + v` on the float32 vectors below: the FLOPs and
    the bytes moved per element, the arithmetic intensity, and on which side of this machine's ridge
    (printed by `%roofline` above) it falls. Then place `u + v` under the roofs with `%%roofline`
    (`-b 0.3`), and keep the result: `-o`, then `ex1 = _` in the next cell.

    **You are done when** the check cell prints `exercise 1: passed`. It checks, on `ex1`:

    - the **counted intensity within 10%** of the one you worked out (FLOPs per element ÷ bytes per
      element: a structural truth, not a timing, so it does not depend on the machine's noise), and
    - the **bound** that this intensity implies against the ridge of `ex1`'s data type.

    *Hint:* each element is read from two vectors and written to a third; a float32 is 4 bytes. The
    ridge of float32 is printed in the first cells of this notebook.

    Write your attempt in the empty cell below. The solution follows it, collapsed (click the bar or
    the "…" to open it): it runs with the rest of the notebook, so *Run All* replaces your `ex1` with
    its own. To check your attempt, run the check cell right after it.
    """),
    code("""
    u = torch.randn(4_000_000)   # float32, 16 MB each: much larger than the last-level cache
    v = torch.randn(4_000_000)
    """),
    code("""
    # Exercise 1: your code here (a %%roofline ... -o cell, then ex1 = _ in the next cell)
    """),
    solution("""
    %%roofline -l ex1-add -b 0.3 -o --no-plot
    u + v
    """, r"^memory-bound: "),
    solution("""
    # Expected: memory-bound. An add does 1 FLOP per element and moves 12 bytes (two 4-byte reads, one
    # 4-byte write): 1/12 = 0.083 FLOP/B, far left of the float32 ridge (several FLOP/B on a CPU, more on
    # a GPU), so the bandwidth roof binds. Faster arithmetic cannot help; moving fewer bytes can.
    ex1 = _
    """),
    check("""
    expected = 1 / 12   # FLOP/B: 1 FLOP and 3 × 4 bytes per float32 element
    assert abs(ex1.intensity - expected) <= 0.1 * expected, (
        f"the counted intensity is {ex1.intensity:.4f} FLOP/B ({ex1.flops:.3g} FLOP, {ex1.bytes:.3g} B per call); "
        f"expected {expected:.4f} ± 10% for u + v on float32. Did the cell run u + v and nothing else?")
    assert ex1.bound == "memory" and ex1.intensity < ex1.ridge, (
        f"classified {ex1.bound}-bound at {ex1.intensity:.3f} FLOP/B against a ridge of {ex1.ridge:.2f} FLOP/B; "
        "expected memory-bound: the intensity lies left of the ridge")
    print(f"exercise 1: passed (intensity {ex1.intensity:.3f} FLOP/B, ridge {ex1.ridge:.2f} FLOP/B: "
          f"{ex1.bound}-bound; {ex1.bytes_per_s / 1e9:.1f} GB/s achieved)")
    """, 1),
    md("""
    ## Pitfalls

    - **Counted bytes are a lower bound.** They assume each tensor crosses memory once. Code that misses
      the cache (strided access, reuse after eviction) moves more, and its real intensity is lower.
    - **Small working sets live in cache**: an array that fits in the last-level cache can stream faster
      than the DRAM roof, and the point then sits above the bandwidth line. Judge bandwidth with data much
      larger than the cache.
    - **A low share of the roof** means overheads dominate — interpreter, dispatch, allocation, threads
      competing with other processes. Profile (`%%flame`, notebook `07_flame`) before tuning for the roof.
    - **Roofs measured on a busy machine are too low**; re-measure on a quiet one with
      `%roofline --calibrate`. A cell that reaches more than 100% of a roof is the usual sign: the roof
      was measured under load, or the data came from cache.
    - **Pick the right roof.** The compute roof depends on the data type; `--dtype` chooses it when the
      counted ops cannot (NumPy code).
    - **The roofline tells why, not whether.** Confirm a change with a before/after comparison.
    """),
]
