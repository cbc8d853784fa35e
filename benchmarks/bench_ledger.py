"""The ledger at 1k, 10k and 100k runs: how long the commands that read it take, and its size on disk.

A ledger of N runs is written once per size from one real ``%%gpubench`` run of this machine, as the magic
records it (``Ledger.record`` with the magic line in its own field, the cell body as ``code``, the result's
``kind`` and ``payload`` from ``result.to_record``: what ``perfmagic.run(N)`` rebuilds it from; its options,
metrics, 30 raw samples and environment), with labels cycling over 40 names and
the samples jittered per row (and kept on ``perf_counter``'s grid, a whole number of 2**-38 s, as real
timings are), as a sweep loop over weeks of use leaves it. Then, in a fresh IPython
shell (perfmagic loaded, the ledger folder set by ``PERFMAGIC_LEDGER_DIR``), each command is timed
three times and the median kept:

* ``%perf`` (the table of the notebook's runs), ``%perf next``, ``%perf target LABEL 5ms``,
  ``perfmagic.ledger()`` (the pandas frame), ``%perf compare A B --historical``;
* a new ``%%gpubench`` row: the time of ``Ledger.record`` for one more run;
* bytes per run on disk (the file and its WAL, after a checkpoint).

Issue 30's targets at 100k runs: the first four ≤ 0.5 s, the historical compare ≤ 1 s, a new row ≤ 10 ms,
≤ 1 KB per run for a 30-sample ``%%gpubench``.

    .venv/bin/python benchmarks/bench_ledger.py             # 1k, 10k, 100k
    .venv/bin/python benchmarks/bench_ledger.py --quick     # a smoke test: 20 and 50 runs, 1 timing each
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

TARGETS = {"%perf": 0.5, "%perf next": 0.5, "%perf target": 0.5, "perfmagic.ledger()": 0.5,
           "%perf compare (historical)": 1.0, "new row (record)": 0.010}
LABELS = [f"kernel{i}" for i in range(40)]


def template() -> dict:
    """One real %%gpubench run of this machine, recorded through the magic into a scratch ledger: the
    fields ``Ledger.record`` took for it (its ``RunRecord``: magic line, body, kind, payload, ...) and its
    ``env_hash``."""
    from IPython.core.interactiveshell import InteractiveShell

    with tempfile.TemporaryDirectory() as d:
        os.environ["PERFMAGIC_LEDGER_DIR"] = d
        from perfmagic.storage import session

        session.forget_ledgers()
        ip = InteractiveShell.instance()
        ip.run_line_magic("load_ext", "perfmagic")
        res = ip.run_cell("%%gpubench -l t --no-plot -q -b 0.5\nsum(range(2000))")
        if not res.success:
            raise RuntimeError(f"%%gpubench failed: {res.error_in_exec or res.error_before_exec!r}")
        from perfmagic.storage.ledger import Ledger

        led = Ledger(directory=d)
        stored = led.rows(notebook=None)[0]
        row = led.record_of(stored["id"]).ledger_fields()  # what the magic's record_run passed to Ledger.record
        if not row.get("magic_line") or row["code"].lstrip().startswith("%%"):
            raise RuntimeError(f"the %%gpubench row does not keep its magic line apart: {row['magic_line']!r}, "
                               f"{row['code'][:80]!r}")
        row["env_hash"] = stored["env_hash"]
        # a 30-sample run with 40 warmup blocks, as the target names: how many of each a run of this machine
        # takes varies from run to run (41 to 163 warmup blocks seen), and the bytes per run with it
        row["samples"] = dict(row["samples"], raw=row["samples"]["raw"][:30], warmup=row["samples"]["warmup"][:40])
        ip.run_line_magic("unload_ext", "perfmagic")
        session.forget_ledgers()
    return row


def write_ledger(directory: Path, n: int, tpl: dict, seed: int = 0) -> None:
    """n rows like ``tpl`` written through the ledger's own insert path (one transaction per 5,000)."""
    from perfmagic.storage.codec import storage_row
    from perfmagic.storage.ledger import Ledger

    rng = random.Random(seed)
    led = Ledger(directory=directory)  # no notebook: the one a shell with PERFMAGIC_LEDGER_DIR reads
    raw = list(tpl["samples"]["raw"])
    batch: list[dict] = []
    for i in range(n):
        label = LABELS[i % len(LABELS)]
        s = dict(tpl["samples"])
        f = 1 + 0.05 * rng.random()
        # jittered, then put back on perf_counter's grid (a whole number of ulps of ~1e4 s, as real timings are)
        s["raw"] = [round(x * f * (1 + 0.02 * rng.random()) * 2.0 ** 38) * 2.0 ** -38 for x in raw]
        m = dict(tpl["metrics"])
        m["median_s"] = statistics.median(s["raw"]) / max(int(s.get("number") or 1), 1)
        line = tpl["magic_line"].replace("-l t ", f"-l {label} ")
        batch.append({**tpl, "label": label, "magic_line": line, "options": {**tpl["options"], "label": label},
                      "metrics": m, "samples": s, "session": "pid 1"})
        if len(batch) == 5000 or i == n - 1:
            led._write([storage_row(None, **r) for r in batch])  # record()'s insert, 5,000 rows a transaction
            batch.clear()


def size_on_disk(directory: Path) -> int:
    import sqlite3

    f = directory / "ledger.sqlite"
    con = sqlite3.connect(f)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    return sum(p.stat().st_size for p in directory.iterdir() if p.name.startswith("ledger.sqlite"))


CHILD = r"""
import json, os, sys, time, statistics
from IPython.core.interactiveshell import InteractiveShell
from IPython.core.displaypub import CapturingDisplayPublisher
ip = InteractiveShell.instance()
ip.display_pub = CapturingDisplayPublisher()
ip.run_line_magic("load_ext", "perfmagic")
import perfmagic
from perfmagic.storage.session import current_ledger
led = current_ledger(ip.user_ns)
ids = [r["id"] for r in led.rows(limit=2)]
a, b = ids[1], ids[0]
import contextlib, io
def t(fn):
    out = []
    for _ in range(3):
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            t0 = time.perf_counter(); r = fn(); out.append(time.perf_counter() - t0)
        if hasattr(r, "error_in_exec") and r.error_in_exec is not None:
            raise r.error_in_exec
    return statistics.median(out)
res = {}
res["%perf"] = t(lambda: ip.run_cell("%perf"))
res["%perf next"] = t(lambda: ip.run_cell("%perf next kernel1"))
res["%perf target"] = t(lambda: ip.run_cell("%perf target kernel1 5ms"))
res["perfmagic.ledger()"] = t(lambda: perfmagic.ledger())
res["%perf compare (historical)"] = t(lambda: ip.run_cell(f"%perf compare {a} {b} --historical"))
row = led.rows(limit=1)[0]
fields = {**led.record_of(row["id"]).ledger_fields(), "label": "new"}  # magic line apart, kind, payload: as record_run
def one():
    return led.record(**fields, env_hash=row["env_hash"], session="pid 1")
res["new row (record)"] = t(one)
print("LEDGER_BENCH " + json.dumps(res))
"""


def time_commands(directory: Path, reps: int = 3) -> dict:
    import subprocess

    env = dict(os.environ, PERFMAGIC_LEDGER_DIR=str(directory))
    p = subprocess.run([sys.executable, "-c", CHILD.replace("range(3)", f"range({reps})")], capture_output=True,
                       text=True, env=env, timeout=1800)
    for line in p.stdout.splitlines():
        if line.startswith("LEDGER_BENCH "):
            return json.loads(line.split(" ", 1)[1])
    raise RuntimeError(p.stdout[-2000:] + p.stderr[-4000:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    C.add_args(ap, "ledgers of 20 and 50 runs, each command timed once (smoke test; never written to the docs)")
    ap.add_argument("--sizes", default=None, help="comma-separated ledger sizes (default 1000,10000,100000)")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")] if args.sizes else ([20, 50] if args.quick else
                                                                       [1000, 10000, 100000])
    t0 = time.perf_counter()
    load0 = C.loadavg()
    tpl = template()
    results = {}
    for n in sizes:
        with tempfile.TemporaryDirectory() as d:
            folder = Path(d) / ".perfmagic"
            tw = time.perf_counter()
            write_ledger(folder, n, tpl)
            write_s = time.perf_counter() - tw
            per_run = size_on_disk(folder) / n
            res = time_commands(folder, 1 if args.quick else 3)
            res["bytes per run"] = per_run
            res["write s"] = write_s
            results[n] = res
            print(n, json.dumps(res), flush=True)
    cols = list(TARGETS) + ["bytes per run"]
    rows = []
    for c in cols:
        cells = []
        for n in sizes:
            v = results[n][c]
            cells.append(f"{v:,.0f} B" if c == "bytes per run" else C.fmt_time(v))
        target = "≤ 1 KB" if c == "bytes per run" else f"≤ {C.fmt_time(TARGETS[c])}"
        big = results[sizes[-1]][c]
        met = big <= (1024 if c == "bytes per run" else TARGETS[c])
        rows.append([f"`{c}`" if c.startswith("%") else c, *cells, target, "met" if met else "**not met**"])
    table = C.md_table(["command", *[f"{n:,} runs" for n in sizes], f"target at {sizes[-1]:,}", "verdict"], rows)
    body = (C.header("The ledger at 1k, 10k and 100k runs (issue 30)") +
            "\nEach ledger is written from one real `%%gpubench` run of this machine (30 samples and 40 warmup blocks kept; 40 labels; samples "
            "jittered per row; the magic line, kind and payload stored as `%%gpubench` stores them). Each command: median of 3 in a fresh IPython shell with perfmagic loaded. "
            f"Load average {load0} at the start, {C.loadavg()} at the end; total {time.perf_counter() - t0:.0f} s.\n\n"
            + table + "\n")
    C.RESULTS.mkdir(parents=True, exist_ok=True)
    (C.RESULTS / "ledger.json").write_text(json.dumps({str(k): v for k, v in results.items()}, indent=1))
    C.publish("ledger", body, args, row="`%perf`, `%perf next`, `%perf target`, `perfmagic.ledger()`, a historical "
              "`%perf compare` and one new row on ledgers of 1k, 10k and 100k runs; bytes per run on disk")


if __name__ == "__main__":
    main()
