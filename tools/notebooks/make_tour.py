"""Write notebooks/00_tour.ipynb from the cells below (outputs are produced by `make tour`, never by hand)."""

import os
from pathlib import Path

import nbformat as nbf

md, code = nbf.v4.new_markdown_cell, nbf.v4.new_code_cell
cells = [
    md("# perfmagic tour\n\n"
       "perfmagic turns a notebook into a performance lab: it measures the code in this kernel the way a careful "
       "performance engineer would — warm up, synchronize the device, measure until the number is trustworthy — "
       "and records every result in a per-notebook ledger, so one change at a time can be judged with "
       "before/after numbers.\n\n"
       "Every figure below was produced by running this notebook (`make tour`), on whatever machine ran it: "
       "read your own numbers, not ours."),
    code("%load_ext perfmagic"),
    md("## `%%gpubench`: time a cell\n\n"
       "The first (cold) call is timed apart; the cell is warmed up until timings stop drifting; then it runs in "
       "calibrated blocks until the 95% confidence interval of the median is within ±1%, or the budget "
       "(about 1 s) is spent; with the default budget, ±2.5% is enough after 0.1 s (`stopped: time`). Setup code goes on the magic line, as with `%%timeit`. On a machine without CUDA it "
       "says so in one line and times on the CPU."),
    code("import time"),
    code("%%gpubench -l sleep-5ms\ntime.sleep(0.005)"),
    md("`--bytes`, `--flops` and `--items` declare the work of one call (Python expressions evaluated in the "
       "notebook) and turn time into throughput. Here a NumPy add reads two arrays and writes one:"),
    code("import numpy as np\nn = 2_000_000\na = np.random.rand(n)\nb = np.random.rand(n)"),
    code("%%gpubench -l numpy-add --bytes 3*a.nbytes\na + b"),
    md("A torch matmul, with its FLOP count (2·n³). With a CUDA device, the same cell with `device=\"cuda\"` is "
       "timed with CUDA events and synchronized, and its peak memory comes from `torch.cuda.max_memory_allocated`."),
    code("import torch\nm = 512\nx = torch.randn(m, m)\ny = torch.randn(m, m)"),
    code("%%gpubench -l matmul-512 --flops 2*m**3\nx @ y"),
    md("## `%%roofline`: compute- or bandwidth-bound?\n\n"
       "The roofline places the cell against this machine's *measured* roofs: the best matmul rate per dtype "
       "and the best streaming bandwidth (measured once, about 15 s on a CPU, then cached per machine; "
       "`%roofline --calibrate` re-measures). FLOPs and bytes of torch code are counted automatically "
       "(bytes = the input and output tensors of every op: algorithmic traffic, a lower bound on DRAM traffic)."),
    code("%roofline"),
    code("%%roofline -l matmul-512\nx @ y"),
    md("For code without torch ops, give the work per call. A NumPy add of two large arrays reads two and writes one:"),
    code("%%roofline -l numpy-add --flops n --bytes 3*a.nbytes\na + b"),
    md("On a shared host the memory bandwidth can change phase with nothing on this machine to show for it "
       "(on our test VM a triad reads ~35 GB/s for minutes, then ~60). So a CPU cell that is not clearly "
       "compute-bound is bracketed by a ~0.1 s triad probe (the roof's own kernel), compared with the bandwidth "
       "roof: a cell timed in another phase gets a `!` line, and its fraction against the roof of *its own* "
       "phase beside the fraction of the roof as measured."),
    md("## `%%amdahl`: how many workers are worth it?\n\n"
       "The cell runs at each worker count (interleaved rounds, each point timed by the engine); the sweep reports "
       "speedup, efficiency and the Karp–Flatt serial fraction per point, and fits Amdahl's law (serial fraction S, "
       "ceiling 1/S) and the Universal Scalability Law (contention σ, coherency κ, peak N*). Here a job with a planted "
       "serial part (sleeps release the GIL, so threads overlap):"),
    code("from concurrent.futures import ThreadPoolExecutor\n\n"
         "pool = ThreadPoolExecutor(8)\n\n"
         "def job(workers, serial=0.006, parallel=0.024):\n"
         "    time.sleep(serial)  # the serial part\n"
         "    list(pool.map(lambda _: time.sleep(parallel / workers), range(workers)))"),
    code("%%amdahl workers=1,2,3,4,6,8 -b 0.3 --rounds 2\njob(workers)"),
    md("`--threads` sweeps torch's and BLAS's thread counts instead of a variable. A verdict needs evidence: "
       "with two counts no model is fitted (two points cannot back a serial fraction), a GIL diagnosis needs "
       "sampled proof that Python bytecode held the GIL (a torch conv runs in native code, which releases it), "
       "and when other processes keep the cores busy the sweep says it cannot tell rather than blame the code:"),
    code("conv = torch.nn.Conv2d(32, 64, 3)\nimg = torch.randn(8, 32, 96, 96)"),
    code("%%amdahl --threads 1,2 -b 0.3\nwith torch.no_grad():\n    conv(img)"),
    md("Threads stop paying at the GIL and the cores; a training loop then scales with **ranks** "
       "(torch.distributed: DDP, `torchrun`). `%%amdahl --ranks` runs the cell — one training step — in a fresh "
       "process group per world size (gloo on CPUs, NCCL on GPUs), each rank timed by the engine, and reports the "
       "per-rank step, the straggler, the share of the step in collectives and the all-reduce bandwidth against a "
       "measured link roof. `--setup` builds the model inside each rank, after its process group is up:"),
    code("from torch import nn\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n\n"
         "def make_ddp(world_size, batch=256, width=256):\n"
         "    torch.manual_seed(0)\n"
         "    model = DDP(nn.Linear(width, width))\n"
         "    opt = torch.optim.SGD(model.parameters(), lr=0.01)\n"
         "    return model, opt, torch.randn(batch // world_size, width)  # a fixed global batch: strong scaling"),
    code('%%amdahl --ranks 1,2 --setup "model, opt, x = make_ddp(world_size)"\n'
         'opt.zero_grad()\nmodel(x).sum().backward()\nopt.step()'),
    md("Little's law sizes concurrency: to serve 400 tasks/s when each takes as long as a measured run, how many "
       "workers? For CPU-bound work the answer is capped by the cores this machine has free:"),
    code("%littles throughput=400/s latency=25ms --io"),
    md("## `%%estimate`: how long will the full run take?\n\n"
       "Before running a job at full size, run it small: `%%estimate n=FULL` runs the cell at doubling sizes "
       "(at most a few seconds, and at most 10% of the predicted full run), fits a cost model by AICc and predicts "
       "the full run's time and peak memory with an interval; `--limit` adds the gate. Here a sort of 2 million "
       "numbers (n log n), estimated and then run (`--run`; `--force` runs it even when the gate is unsure) so the "
       "ledger keeps predicted vs actual. A job this short (its interval ends under a third of the budget) costs "
       "less to measure than to predict, so it is measured at its full size: a prediction from 12% of the size "
       "cannot see its data leave the cache:"),
    code("import random\ndata = [random.random() for _ in range(2_000_000)]"),
    code("%%estimate n=len(data) --limit 1m --run --force\nsorted(data[:n])"),
    md("The per-iteration form: the cell is one step of a job of `--total` steps (here 119 slices × 2000 epochs "
       "of a 5 ms step). The gate compares the predicted total with a 10-minute limit and says how many steps would "
       "fit in it:"),
    code("%%estimate --total 119*2000 --limit 10m\ntime.sleep(0.005)"),
    md("## `%%dataloader_check`: is the loop waiting for data?\n\n"
       "The cell is one training step that uses `batch`. The magic measures, per step, the time blocked waiting for "
       "the next batch against the compute, after the workers' start-up; it times the loader alone and the step alone "
       "on a cached batch, audits the DataLoader's settings, and `--sweep` rebuilds the loader at each setting. Here a "
       "dataset with 3 ms of simulated I/O per item:"),
    code("import torch\nfrom torch.utils.data import DataLoader, Dataset\n\n"
         "class SlowDisk(Dataset):  # 3 ms of \"I/O\" per item\n"
         "    def __len__(self):\n        return 512\n"
         "    def __getitem__(self, i):\n        time.sleep(0.003)\n        return torch.randn(16)\n\n"
         "train_loader = DataLoader(SlowDisk(), batch_size=8)  # num_workers=0: loading blocks every step"),
    code("%%dataloader_check train_loader --steps 12 --sweep num_workers=0,2,4 --sweep-steps 8\n"
         "time.sleep(0.006)  # stands in for a 6 ms training step on `batch`"),
    md("## `%%flame`: where does the time go?\n\n"
       "A sampling flame graph of the cell (py-spy attached to this kernel, or an in-process sampler where it cannot "
       "attach). IPython's own frames are cut away, so the root is the cell; click to zoom, hover for file:line. "
       "The graph is plain HTML and inline JavaScript: it works offline and in exported HTML."),
    code("def parse(lines):\n    return [tuple(int(x) for x in ln.split(\",\")) for ln in lines]\n\n"
         "def total(rows):\n    return sum(a * b for a, b in rows)\n\n"
         "lines = [f\"{i},{i % 7}\" for i in range(300_000)]"),
    code("%%flame\nrows = parse(lines)\ntotal(rows)"),
    md("## `%%memory` and `%%lineprof`\n\n"
       "`%%memory` samples RSS in a thread and resets the kernel's high-water mark per statement, so a peak too "
       "short for any sampler is still caught and tied to its line:"),
    code("def load(n):\n    return [bytearray(2**20) for _ in range(n)]\n\n"
         "def slow(n):\n    out = []\n    for i in range(n):\n        out.append(i * i)\n    return sum(out)"),
    code("%%memory\ndata = load(32)\nn = len(bytearray(150 * 2**20))   # short-lived: caught by VmHWM, tied to this line"),
    md("`%%lineprof -f FUNC` runs line_profiler on functions — including ones defined in this notebook — and shows "
       "the table in the output (never the pager), hot lines shaded:"),
    code("%%lineprof -f slow\nslow(300_000)"),
    md("## The cold call\n\n"
       "`%timeit` silently drops a slow first call. perfmagic reports it apart and warns when it dwarfs a warm call "
       "(lazy initialisation, JIT, autotuning, caches):"),
    code("cache = {}\n\ndef lookup(k):\n    if k not in cache:\n        time.sleep(0.2)  # an expensive first computation\n"
         "        cache[k] = k * 2\n    return cache[k]"),
    code("%%gpubench -l cached-lookup\nlookup(3)"),
    md("## The result object\n\n"
       "`-o` returns the result; it keeps every raw sample, and the statistics are derived from them."),
    code("%%gpubench -o -l sum-range\nsum(range(1000))"),
    code("r = _\nprint(f\"median {r.median * 1e6:.2f} µs, CI {r.ci[0] * 1e6:.2f}–{r.ci[1] * 1e6:.2f} µs, \"\n"
         "      f\"{r.n_samples} samples × {r.number} calls, cold call {r.cold_s * 1e6:.1f} µs\")\nr.raw[:5]"),
    md("## The same engine from a script\n\n"
       "The magic is a thin front end over `perfmagic.bench`, which a `.py` file can call directly:"),
    code("import perfmagic\n\nres = perfmagic.bench(\"sorted(data)\", setup=\"import random; data = random.sample(range(10**5), 10**4)\")\n"
         "print(res.text())"),
    md("## One change at a time\n\n"
       "The method: measure a baseline, change one thing, measure again, keep the change only if the gain is "
       "real — by default more than 10%, with the whole confidence interval past that bar. A sum of squares in "
       "pure Python is the baseline:"),
    code("values = [float(i % 97) for i in range(20_000)]\narr = np.array(values)"),
    code("%%gpubench -l sum-of-squares --baseline --no-plot\nsum(v * v for v in values)"),
    md("The change: let NumPy do it (vectorization, step 6 of the optimization order)."),
    code("%%gpubench -l sum-of-squares --no-plot\nfloat(np.dot(arr, arr))"),
    md("`%perf compare` judges the latest run against its label's baseline: the ratio of medians with a confidence "
       "interval, the verdict, and everything else that differs between the two runs (the code diff, options, "
       "environment). Both runs were measured in this kernel and their data is unchanged, so it **re-measures** "
       "A and B interleaved (A B B A …) in this process, with A's functions as they were: machine drift hits both "
       "sides alike. When that is impossible (another kernel, data changed in place) it says why and compares the "
       "recorded samples instead (*historical*, with a wider interval). Beside a *faster* or *slower* verdict it "
       "also says **where the change went**: the stacks of both sides were sampled while they ran, so each "
       "function's time in A and in B, and their difference Δ with a 99% interval over the pairs, come from the "
       "same pairs as the verdict. A function is named (`*`) only when its interval excludes 0 (with torch code, "
       "also when the change in the torch ops it called, profiled after the pairs, excludes 0: its line under "
       "it); the HTML adds a "
       "differential flame graph (red: B spends more, blue: less). `--where` shows it for any verdict. A move "
       "too small for the samples is not named: the text says *cannot tell, because …* and the budget that "
       "would tell a move of that size (`%perf compare --where -b 3` samples for the whole 3 s):"),
    code("%perf compare"),
    md("**Beside a noisy neighbour.** A verdict must hold on a shared 2-core box too. `perfmagic.busy_neighbours(1)` "
       "starts one process that spins on a core for the length of the block, and stops it afterwards; the last "
       "line says how many cores it kept busy. Both sides of each pair meet the same neighbour. This `np.dot` of "
       "20,000 values is not single-threaded: OpenBLAS, NumPy's usual BLAS, splits a dot product of more than "
       "10,000 elements over the threads of its pool, so beside the neighbour those threads "
       "can end up waiting for each other on the one free core. perfmagic names that *thread oversubscription* "
       "only when it sees it: a pool larger than the cores the neighbour left free, and at least two of the "
       "cell's threads taking CPU time. Then the output lists the pools' sizes, measures A and B again with the "
       "pools limited to the free cores, and gives the verdict for that thread count, saying so. Without that "
       "line, the verdict is for the pools at their full size. Which of the two happened is in the output below:"),
    code("with perfmagic.busy_neighbours(1) as nb:\n    %perf compare\nprint(f\"the neighbour kept {nb.others_cores:.1f} "
         "cores busy while it ran\")"),
    md("`--vs` does the same from the cell itself: it re-runs the baseline's code **interleaved** with the cell "
       "(A B B A …) and compares pair by pair; like `%perf compare`, it says where the change went beside a "
       "*faster* or *slower* verdict (`--where`: for any verdict). Here an A/A check — the same code on both sides — must come out as "
       "*no real change*:"),
    code("%%gpubench -l sum-of-squares --vs baseline --no-plot\nsum(v * v for v in values)"),
    code("%perf plot sum-of-squares"),
    md("## The ledger\n\n"
       "Every run is a row in `.perfmagic/ledger.sqlite` beside the notebook: it survives kernel restarts. "
       "`%perf` shows this notebook's runs, newest first; `%perf export runs.csv` writes them; "
       "`%perf forget RUN` removes one."),
    code("%perf"),
    md("A row reads back as the result it was: `%perf show N` (or `perfmagic.run(N)` in a script) rebuilds run "
       "N from the ledger, with its raw samples, its text and its figure, also after a restart of the kernel. "
       "Run #1 is the first `%%gpubench` of this tour:"),
    code("%perf show 1 --no-plot"),
    md("The *vs baseline* column shows each run's change against its label's baseline, with the verdict; the "
       "*trend* column draws the label's history, with its first and last values. `perfmagic.ledger()` gives "
       "the same runs as a DataFrame: the common columns of every magic, and with a magic's name "
       "(`perfmagic.ledger(\"gpubench\")`) that magic's own metrics."),
    code("df = perfmagic.ledger()\ndf[[\"magic\", \"label\", \"status\", \"primary_metric\", \"value\", \"unit\", \"vs_baseline\"]]"),
    md("## `%perf next`: what to try next\n\n"
       "The ledger now holds a profile, a roofline, a DataLoader check and comparisons. `%perf next` reads the "
       "evidence about the latest label's code — a profile or roofline of *other* code is listed as *not about this "
       "code*, never used — and proposes **one** experiment in the method's order (algorithm → data structure → I/O → memory → concurrency → "
       "vectorization → compute → caching), with the runs it rests on, the expected gain (its upper bound from a "
       "measurement) and the command that tests it; the next comparison of that label checks the prediction. "
       "`%perf target LABEL 50ms` makes it say *stop* once a run meets the target, and `%perf guard RUN PATH "
       "--module M` writes a pytest file that fails when an accepted gain is lost (the workshop notebook ends with one)."),
    code("%perf next"),
]

# What each checked cell must print: regexes that `notebooks/run.py --check` searches (MULTILINE) in the
# cell's text output. Keyed by the cell's source; a key that matches no cell is an error.
EXPECT = {
    '%%gpubench -l sleep-5ms\ntime.sleep(0.005)': [
        r"median\s+\(95% CI",
        r"\[label sleep-5ms, run #\d+\]",
        r"cold call [\d.]+ [mµn]?s",
    ],
    '%%gpubench -l numpy-add --bytes 3*a.nbytes\na + b': [
        r"median\s+\(95% CI",
        r"^\s+throughput: [\d.]+ [kMGT]?B/s$",
    ],
    '%%gpubench -l matmul-512 --flops 2*m**3\nx @ y': [
        r"median\s+\(95% CI",
        r"^\s+throughput: [\d.]+ [kMGT]?FLOP/s$",
    ],
    '%roofline': [
        r"^ceilings of \S+ \(\S+, fingerprint \w+",
        r"^\s+float32\s+[\d.]+ [kMGT]?FLOP/s\s+ridge",
        r"^\s+bandwidth\s+[\d.]+ [kMGT]?B/s",
    ],
    '%%roofline -l matmul-512\nx @ y': [
        r"^compute-bound: [\d.]+ FLOP/B vs ridge [\d.]+ FLOP/B \(float32, \w+\)",
        r"work per call: 2\.684e\+08 FLOP \(counted\)",
        r"^\s+next, in order:",
    ],
    '%%roofline -l numpy-add --flops n --bytes 3*a.nbytes\na + b': [
        r"^memory-bound: 0\.0417 FLOP/B vs ridge",
        r"of the [\d.]+ [kMGT]?B/s bandwidth roof",
        r"\d\. reduce data movement",
    ],
    '%%amdahl workers=1,2,3,4,6,8 -b 0.3 --rounds 2\njob(workers)': [
        r"^best speedup [\d.]+× at N = \d+",
        r"^\s+Amdahl: serial fraction S = [\d.]+ ± ",
        r"^\s+USL: contention σ = ",
        r"^\s+model choice \(AICc\): (amdahl|usl)",
    ],
    '%%amdahl --threads 1,2 -b 0.3\nwith torch.no_grad():\n    conv(img)': [
        r"(2 counts: no model fitted|^cannot tell: others kept|^no speedup from threads, and not the GIL)",
        r"note: (evidence at N ≥ 2: the process kept [\d.]+ cores busy|2 worker counts: a model with 1–2 parameters)",
    ],
    '%%amdahl --ranks 1,2 --setup "model, opt, x = make_ddp(world_size)"\nopt.zero_grad()\nmodel(x).sum().backward()\nopt.step()': [
        r"^ranks \(gloo\): ",
        r"^\s+ranks\s+step\s+95% CI\s+speedup",
        r"link roof \(all-reduce sweep",
    ],
    '%perf next': [
        r"^(next: |already fast enough|cannot tell)",
    ],
    '%littles throughput=400/s latency=25ms --io': [
        r"^needed concurrency: 10 tasks in flight",
        r"I/O-bound",
    ],
    '%%estimate n=len(data) --limit 1m --run --force\nsorted(data[:n])': [
        r"^estimate for n=2,000,000: ",
        r"(^\s+time model: a \+ b·|measured at the full size)",  # a slow (loaded) machine measures it
        r"^\s+gate: [\w ]+ \(limit 60 s",
        r"actual full run: ",
    ],
    '%%estimate --total 119*2000 --limit 10m\ntime.sleep(0.005)': [
        r"^estimate for 238,000 units: ",
        r"^\s+per unit: [\d.]+ ms mean",
        r"gate: will not fit \(limit 10 min",
        r"the most units that fit: [\d,]+",
    ],
    '%%dataloader_check train_loader --steps 12 --sweep num_workers=0,2,4 --sweep-steps 8\ntime.sleep(0.006)  # stands in for a 6 ms training step on `batch`': [
        r"^input-bound: \d+% of each step waits for data",
        r"^\s+! num_workers: 0: ",
        r"^\s+best: (num_workers=\d|cannot tell, because other processes used)",
    ],
    '%%flame\nrows = parse(lines)\ntotal(rows)': [
        r"^flame: .+ has \d+% of the self time · \d+ samples",
        r"top functions by self time",
        r"\bparse\b.*In \[\d+\] line 2",
    ],
    '%%memory\ndata = load(32)\nn = len(bytearray(150 * 2**20))   # short-lived: caught by VmHWM, tied to this line': [
        r"^memory: peak \+[\d.]+ [KMG]iB above the start at In \[\d+\] line 2",
        r"^\s+per statement \(peak above its own start\):",
        r"In \[\d+\] line 2\s+RSS \+\s*[\d.]+ MiB.*bytearray\(150",
    ],
    '%%lineprof -f slow\nslow(300_000)': [
        r"^lineprof: hottest line In \[\d+\] line \d+ in slow\(\)",
        r"Line\s+Hits\s+Time\s+Per hit",
        r"out\.append\(i \* i\)",
    ],
    '%%gpubench -l cached-lookup\nlookup(3)': [
        r"median\s+\(95% CI",
        r"cold call 2\d\d(\.\d+)? ms",
        r"the first call took [\d,.]+( million)?× a warm",  # a `!` line, or folded in "(+N more" beside two weightier ones
    ],
    '%%gpubench -o -l sum-range\nsum(range(1000))': [
        r"median\s+\(95% CI",
        r"\[label sum-range, run #\d+\]",
    ],
    'r = _\nprint(f"median {r.median * 1e6:.2f} µs, CI {r.ci[0] * 1e6:.2f}–{r.ci[1] * 1e6:.2f} µs, "\n      f"{r.n_samples} samples × {r.number} calls, cold call {r.cold_s * 1e6:.1f} µs")\nr.raw[:5]': [
        r"^median [\d.]+ µs, CI [\d.]+–[\d.]+ µs, \d+ samples × \d+ calls, cold call",
    ],
    'import perfmagic\n\nres = perfmagic.bench("sorted(data)", setup="import random; data = random.sample(range(10**5), 10**4)")\nprint(res.text())': [
        r"median\s+\(95% CI",
        r"stopped: (precision|budget|time)",
    ],
    '%%gpubench -l sum-of-squares --baseline --no-plot\nsum(v * v for v in values)': [
        r"run #\d+ is now the baseline of 'sum-of-squares'",
        r"median\s+\(95% CI",
    ],
    '%%gpubench -l sum-of-squares --no-plot\nfloat(np.dot(arr, arr))': [
        r"median\s+\(95% CI",
        r"\[label sum-of-squares, run #\d+\]",
    ],
    '%perf compare': [
        r"re-measured A #\d+ and B #\d+ interleaved in this process",
        # on a loaded box BLAS threads can fight a neighbour and flip the headline: then it must be named
        r"(^B #\d+ sum-of-squares vs A #\d+ sum-of-squares: [\d.]+× faster \(95% CI .+\): accept|thread oversubscription)",
        r"^\s+-sum\(v \* v for v in values\)$",
        r"^\s+\+float\(np\.dot\(arr, arr\)\)$",
        # where it went: the cell's generator expression (A's loop) is gone, or too few samples to tell
        r"(?s)^Where the change went: (B − A = −.*^\s+\* <cell>\.<genexpr> |cannot tell)",
    ],
    'with perfmagic.busy_neighbours(1) as nb:\n    %perf compare\nprint(f"the neighbour kept {nb.others_cores:.1f} cores busy while it ran")': [
        r"re-measured A #\d+ and B #\d+ interleaved in this process",
        r"(^B #\d+ sum-of-squares vs A #\d+ sum-of-squares: [\d.]+× faster \(95% CI .+\): accept|thread oversubscription)",
        r"the neighbour kept (0\.[5-9]|1\.\d|2\.0) cores busy while it ran",
    ],
    '%%gpubench -l sum-of-squares --vs baseline --no-plot\nsum(v * v for v in values)': [
        r"vs A #\d+ sum-of-squares: no real change",
        r"same-process A/B",
        r"nothing changed between the two runs but time",
    ],
    '%perf plot sum-of-squares': [
        r"^history of 'sum-of-squares' \(\d+ runs; baseline #\d+\)",
    ],
    '%perf': [
        r"^perfmagic ledger of (\S*/)?00_tour\.ipynb",
        r"\b\d+ runs\b",
        r"\bsum-of-sq\S*\s.*\bbaseline\b",
    ],
    '%perf show 1 --no-plot': [
        r"\[label sleep-5ms, run #1\]",
        r"median\s+\(95% CI",
    ],
    'df = perfmagic.ledger()\ndf[["magic", "label", "status", "primary_metric", "value", "unit", "vs_baseline"]]': [
        r"median_s",
        r"\bsum-of-squares\b",
    ],
}

for i, cell in enumerate(cells):
    cell["id"] = f"tour-{i:02d}"  # stable ids: regenerating gives no diff noise
    if cell["cell_type"] == "code" and cell["source"] in EXPECT:
        cell["metadata"]["perfmagic"] = {"expect": EXPECT.pop(cell["source"])}
if EXPECT:
    raise SystemExit(f"expectations for cells that are not in the tour: {list(EXPECT)}")
nb = nbf.v4.new_notebook(cells=cells, metadata={
    "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
    "language_info": {"name": "python"}})
out = Path(os.environ.get("PERFMAGIC_NB_OUT") or Path(__file__).resolve().parents[2] / "notebooks") / "00_tour.ipynb"
out.write_text(nbf.writes(nb), encoding="utf-8")
print(f"wrote {out}")
