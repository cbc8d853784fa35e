"""06_dataloader_check: is the training loop waiting for data?"""

from nbbuild import check, code, magic, md, solution

NAME = "06_dataloader_check"

CELLS = [
    md("""
    # `%%dataloader_check`: is the training loop waiting for data?

    A training step that waits for its next batch wastes the hardware it runs on — often a GPU far more
    expensive than the CPU cores feeding it. The check is simple to state: **what share of each step is
    spent blocked waiting for data?** Above about 0.3, the loop is *input-bound*: the loader, not the
    model, sets the pace, and a faster model would change nothing.

    `%%dataloader_check LOADER` runs the cell as the body of `for batch in LOADER: ...` and measures, per
    step, the time blocked in `next()` against the compute. It also times the loader alone and the step
    alone, audits the DataLoader's settings, and with `--sweep` rebuilds the loader at several settings.

    The workloads are tiny (sleeps stand in for disk reads) so the notebook runs in about a minute on a
    small CPU machine. The numbers quoted in the text are printed by code cells.
    """),
    code("""
    %load_ext perfmagic
    """),
    code("""
    import time

    import perfmagic
    import torch
    from torch.utils.data import DataLoader, Dataset

    torch.manual_seed(0)
    # A model this small gains nothing from several intra-op threads, and on a small machine shared with
    # the loader (and other work) a thread that has to be woken for every step adds milliseconds of
    # scheduling delay to each one. One thread keeps the step's time its own.
    torch.set_num_threads(1)

    class SlowDisk(Dataset):
        \"\"\"256 samples of 32 features; reading one takes 2 ms (a sleep stands in for the disk).\"\"\"

        def __len__(self):
            return 256

        def __getitem__(self, i):
            time.sleep(0.002)
            return torch.randn(32), i % 2

    model = torch.nn.Linear(32, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    loader = DataLoader(SlowDisk(), batch_size=8)   # num_workers=0: batches load in the training process
    """),
    md("""
    ## The check

    The cell is one training step; the magic binds `batch` to each batch in turn.
    """),
    magic("""
    %%dataloader_check loader --steps 12
    x, y = batch
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    """, r"^input-bound: \d+% of each step waits for data", r"loader alone: ", r"num_workers: 0"),
    md("""
    ### Reading the output

    - **The verdict**: input-bound or compute-bound, the share of each step spent waiting, and the mean
      wait, compute and step time over the steady-state steps.
    - **Start-up**: the time to the first batch (worker start-up, when there are workers), and how many
      warm-up batches were not counted.
    - **Loader alone**: batches per second with no compute at all — the fastest this loader can feed any
      model.
    - **Compute alone**: the step on one cached batch, i.e. with infinitely fast data; the ratio says how
      much faster the loop could be if loading cost nothing. A short step can run slower in the loop
      than back to back, because its caches and the CPU go cold while the loader works. Where the
      loop's compute is over 1.5× the step alone, the check times the step again after pauses as long
      as the loop's wait for data, and says whether that accounts for the gap (above: the step back to
      back, after a pause, and in the loop).
    - **Headroom**: which of the two sets the pace of a loop where loading overlaps compute.
    - **Configuration**: one line per setting checked, `!` for a problem with its expected effect, `·`
      for information, `✓` for fine: worker count against usable cores, pinned memory and non-blocking
      copies (with CUDA), persistent workers, prefetch depth, batch size, collate cost.

    ### How it measures

    1. `iter(loader)` and the first batch are timed on their own: that is the workers' start-up.
    2. Then come warm-up batches that are not counted: with workers, at least
       `num_workers × prefetch_factor` + 2. Workers prefetch batches while the first steps run, and
       those ready-made batches would make the wait look shorter than it is in steady state.
    3. For each of `--steps` steps, the time blocked in `next()` and the time of the step (synchronized
       on a GPU, so queued GPU work counts where it happens).
    4. A fresh pass over the loader without compute (*loader alone*), and the step repeated on one cached
       batch (*compute alone*).
    5. The audit, then the sweep if asked for. Every worker is shut down at the end, also after an error.
    """),
    code("""
    print(f"dataset: {len(loader.dataset)} samples, batches of {loader.batch_size}, "
          f"{loader.num_workers} workers")
    """),
    md("""
    ## Which setting fixes it? `--sweep`

    `--sweep num_workers=0,2,4` rebuilds the DataLoader with the same dataset and arguments at each value
    and measures the loop there (`--sweep-steps` steps each). Repeat `--sweep` for a grid.
    """),
    magic("""
    %%dataloader_check loader --steps 8 --sweep num_workers=0,2,4 --sweep-steps 8 -o
    x, y = batch
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    """, r"sweep:", r"^\s+best: (num_workers=\d|cannot tell, because other processes used)"),
    code("""
    swept = _
    for point in swept.sweep:
        print(f"{point.label:14s} step {point.step_s * 1e3:6.2f} ms, waiting {point.data_wait_fraction:4.0%}, "
              f"{point.throughput:7.1f} samples/s")
    best = swept.best
    print(f"best setting: {best.label}")
    """),
    md("""
    The reading of disk-bound items here waits rather than computes, so workers beyond the cores can still
    help. Work that *computes* in the workers (decoding, augmentation) stops improving at about the number
    of free cores: the sweep shows where the plateau starts, and the output says when it coincides with
    the core count.

    ## After the fix

    Two workers, kept alive between epochs, with a deeper prefetch. The step is made longer too (a sleep
    stands in for the forward and backward pass of a larger model), as in most real training:
    """),
    code("""
    fixed_loader = DataLoader(SlowDisk(), batch_size=8, num_workers=2, persistent_workers=True, prefetch_factor=4)
    """),
    magic("""
    %%dataloader_check fixed_loader --steps 10 -o
    x, y = batch
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    time.sleep(0.02)   # stands in for the rest of a real training step
    """, r"^(compute|input)-bound: ", r"persistent_workers: True", r"start-up: first batch after .*workers"),
    code("""
    after = _
    print(f"data wait: {after.data_wait_fraction:.0%} of the step (input-bound above 30%: {after.input_bound})")
    from perfmagic.render.dataloader import speed_change  # "1.3× faster", "1.1× slower" or "no gain"
    print(f"step {after.step_s * 1e3:.1f} ms; loader alone {after.loader_batches_per_s:.0f} batches/s; "
          f"infinitely fast data: {speed_change(after.speedup_if_data_free)}")
    print(f"worker start-up before the first batch: {after.first_batch_s * 1e3:.0f} ms")
    """),
    md("""
    The findings of the audit are available as objects too:
    """),
    code("""
    for finding in after.findings():
        print(finding.text())
    """),
    md("""
    ## From a script

    `perfmagic.dataloader_check(loader, step_fn)` runs the same analysis, with `step_fn(batch)` as the
    step:
    """),
    code("""
    def train_step(batch):
        x, y = batch
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    res = perfmagic.dataloader_check(loader, train_step, steps=8)
    print(res)
    """),
    md("""
    ## On a GPU

    With CUDA the check also reports the share of each step the GPU sat idle (from CUDA events around
    the step), times the host-to-device copy of a batch, and checks whether that copy can overlap compute:
    it needs **pinned** host memory (`pin_memory=True`) *and* a **non-blocking** copy
    (`.to(device, non_blocking=True)`) in the step. The cell below runs only where a GPU is present.
    """),
    code("""
    if torch.cuda.is_available():
        gpu_model = torch.nn.Linear(32, 2).cuda()
        gpu_opt = torch.optim.SGD(gpu_model.parameters(), lr=0.01)
        gpu_loader = DataLoader(SlowDisk(), batch_size=8, num_workers=2, pin_memory=True)

        def gpu_step(batch):
            x, y = batch
            x, y = x.to("cuda", non_blocking=True), y.to("cuda", non_blocking=True)
            loss = torch.nn.functional.cross_entropy(gpu_model(x), y)
            gpu_opt.zero_grad()
            loss.backward()
            gpu_opt.step()

        print(perfmagic.dataloader_check(gpu_loader, gpu_step, steps=10))
    else:
        print("no CUDA device here: on a GPU this cell adds the GPU idle share and the "
              "pinned-memory / non_blocking audit")
    """),
    md("""
    ### Exercise 1: who sets the pace?

    A new loader: `Thumbnails` decodes each image in `__getitem__`, 1 ms per item (planted: a sleep
    stands in for the decoder), in batches of 16, in the training process (`num_workers=0`). The
    training step is the small model above plus 6 ms of other work (planted too). So each step should
    wait about 16 ms for its batch and compute for about 6 ms.

    **Task.** Predict the verdict and the share of each step spent waiting. Then check the loop with
    `%%dataloader_check thumbs` (`--steps 6`), the cell being the training step below, and keep the
    result: `-o`, then `ex1 = _` in the next cell.

    **You are done when** the check cell prints `exercise 1: passed`. It checks, on `ex1`:

    - the **verdict** the planted times imply (input-bound or compute-bound),
    - the **data-wait share within ±0.15** of the planted one (wait ÷ (wait + compute)), and
    - the **loader alone slower per batch than the step alone**, which is why.

    *Hint:* the step is the cell body, with `batch` bound to each batch; copy the training step of the
    first check above and add `time.sleep(0.006)`.

    Write your attempt in the empty cell below. The solution follows it, collapsed (click the bar or
    the "…" to open it): it runs with the rest of the notebook, so *Run All* replaces your `ex1` with
    its own. To check your attempt, run the check cell right after it.
    """),
    code("""
    class Thumbnails(Dataset):
        \"\"\"192 images of 32 features; decoding one takes 1 ms (a sleep stands in for the decoder).\"\"\"

        def __len__(self):
            return 192

        def __getitem__(self, i):
            time.sleep(0.001)
            return torch.randn(32), i % 2

    thumbs = DataLoader(Thumbnails(), batch_size=16)   # num_workers=0
    PLANTED_WAIT, PLANTED_COMPUTE = 16 * 0.001, 0.006   # seconds per step: decoding, the rest of the step
    """),
    code("""
    # Exercise 1: your code here (a %%dataloader_check thumbs ... -o cell, then ex1 = _ in the next cell)
    """),
    solution("""
    %%dataloader_check thumbs --steps 6 -o --no-plot
    x, y = batch
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    time.sleep(0.006)   # the rest of the step
    """, r"^input-bound: \d+% of each step waits for data", r"loader alone: "),
    solution("""
    # Expected: input-bound, about 73% of each step waiting. Each batch is 16 decodes of 1 ms, read in the
    # training process, against a step of about 6 ms: 16 / (16 + 6) = 0.73 of the step waits, far above
    # the 0.3 bar. The loader alone delivers a batch in ~16 ms, the step alone takes ~6 ms: the loader sets
    # the pace, and a faster model would gain little: at most (16 + 6) / 16 = 1.4x even if it took no time
    # at all. Loading in workers (num_workers=2 or more), overlapped with the step, is the change to try.
    ex1 = _
    """),
    check("""
    planted = PLANTED_WAIT / (PLANTED_WAIT + PLANTED_COMPUTE)
    assert ex1.input_bound, (
        f"judged compute-bound ({ex1.data_wait_fraction:.0%} of each step waits); expected input-bound: "
        f"16 decodes of 1 ms per batch against a ~6 ms step. Was the loader thumbs?")
    assert abs(ex1.data_wait_fraction - planted) <= 0.15, (
        f"{ex1.data_wait_fraction:.0%} of each step waits for data; expected {planted:.0%} ± 15 points, the planted "
        "16 ms of decoding against 6 ms of step. Did the step include time.sleep(0.006)?")
    per_batch = 1 / ex1.loader_batches_per_s
    assert per_batch > ex1.compute_only_step_s, (
        f"the loader alone takes {per_batch * 1e3:.1f} ms a batch, the step alone "
        f"{ex1.compute_only_step_s * 1e3:.1f} ms; "
        "expected the loader to be the slower one")
    print(f"exercise 1: passed (input-bound: {ex1.data_wait_fraction:.0%} of each step waits, planted {planted:.0%}; "
          f"loader alone {per_batch * 1e3:.1f} ms a batch, step alone {ex1.compute_only_step_s * 1e3:.1f} ms)")
    """, 1),
    md("""
    ## Pitfalls

    - **A naive timer is fooled by prefetching**: the first steps get batches the workers prepared in
      advance. Measure the steady state, after the warm-up.
    - **Worker start-up is paid every epoch** unless `persistent_workers=True`; with short epochs it can
      dominate.
    - **More workers than free cores** do not help CPU-bound loading, and they take cores from the
      training process itself.
    - **`pin_memory` without `non_blocking=True`** (or the reverse) gives no overlap of copy and compute.
    - **Datasets defined in a notebook** work in worker processes on Linux (workers are forked). Where
      workers are *spawned* (macOS and Windows by default), the dataset class must be importable from a
      module.
    - **Compare the step in the loop with the step alone.** When the step is much slower inside the loop
      than on a cached batch, something else is paying: cold caches after each load, or intra-op threads
      that went to sleep while the loop waited for data and must be woken on a busy machine (this notebook
      uses one torch thread for that reason).
    - **Fix the biggest cost first**: if the loader alone is slower than the step alone, no model-side
      optimization will speed up training.
    """),
]
