"""Write notebooks/09_pool_class_results.ipynb (pooling a class's ``%perf export`` files), without outputs.

    .venv/bin/python tools/notebooks/make_09_pool_class_results.py
    .venv/bin/python notebooks/run.py --check notebooks/09_pool_class_results.ipynb

Edit the text here, not in the .ipynb: the cell metadata (the ``expect`` regexes that ``run.py --check``
enforces, stable cell ids) is generated with it. The notebook reads a folder of exports (``FOLDER``);
left at ``None`` (CI, offline, a teacher trying it out) it first makes a small demo class itself: three
"students", each with a ledger of their own, time two planted changes with ``%%gpubench --vs baseline``
and ``%perf export`` them. docs/teaching.md ("Pooling the class's results") points here.
"""

from __future__ import annotations

import os
from pathlib import Path

from nbformat.v4 import new_code_cell, new_markdown_cell

TARGET = (Path(os.environ.get("PERFMAGIC_NB_OUT") or Path(__file__).resolve().parents[2] / "notebooks")
          / "09_pool_class_results.ipynb")

cells: list = []


def md(text: str) -> None:
    cells.append(new_markdown_cell(text.strip("\n")))


def code(text: str, expect: list[str] | None = None) -> None:
    meta: dict = {}
    if expect:
        meta["perfmagic"] = {"expect": expect}
    cells.append(new_code_cell(text.strip("\n"), metadata=meta))


# ------------------------------------------------------------------------------------------------
md(r"""
# Pooling the class's results

Each student ends the workshop (`10_one_change_at_a_time`) with one line,

```
%perf export results-NAME.csv
```

and hands the file in: a shared folder on the JupyterHub, an upload form, a memory stick. The file holds
every run of the student's ledger, one row each (`.json` works too: the same runs, nested). This
notebook reads a folder of such files into **one table**, every student's gain for every change they
judged, and **one plot**, so that the class sees which verdicts hold on every machine and which do not.
The large changes should agree; a change near the 10% bar may not, and that is the lesson.

Set `FOLDER` below to the folder of files. A student's name is the file name without `results-` and
the extension. Left at `None`, the notebook first makes a small demo class of its own (section 1), so
it runs anywhere, offline, in under a minute.
""")

code(r"""
import json
import os
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.ticker import NullFormatter

FOLDER = None   # e.g. "class-results": a folder of results-NAME.csv / results-NAME.json from %perf export
BAR = 1.10      # the method's bar: a change is kept when its whole interval is faster than this
""")

md(r"""
## 1. A demo class (only when no folder is given)

Three students, each on "their own machine": each gets a ledger of their own (perfmagic reads the
ledger folder from `PERFMAGIC_LEDGER_DIR` at every magic, so setting it switches ledgers), times a
baseline, judges two changes with `%%gpubench --vs baseline`, and exports the ledger with `%perf
export`, as a student's last cell would. The changes are planted, so the right answers are known:

* **half the nap**: `time.sleep(0.002)` instead of `time.sleep(0.004)`, about 2× faster;
* **the same nap, written differently**: `time.sleep(0.004 * 1.0)`, no real change.

One student exports `.json` instead of `.csv`: the reader below takes both. The magics' own outputs
are captured (each student would have seen them in their notebook); one line per student is shown.
""")

code(r"""
%load_ext perfmagic
""")

code(r"""
from IPython.utils.capture import capture_output

PLANTED = [  # (label, code, what the right verdict is)
    ("nap", "time.sleep(0.004)", "the baseline"),
    ("nap", "time.sleep(0.002)", "half the nap: about 2× faster"),
    ("nap", "time.sleep(0.004 * 1.0)", "the same nap: no real change"),
]


def demo_student(name, folder, suffix=".csv"):
    # one student's session: their own ledger, a baseline, two changes judged --vs baseline, then the export
    ip = get_ipython()
    before = os.environ.get("PERFMAGIC_LEDGER_DIR")
    os.environ["PERFMAGIC_LEDGER_DIR"] = str(folder / f".ledger-{name}")
    try:
        with capture_output():
            (label, base, _), *changes = PLANTED
            ip.run_cell_magic("gpubench", f"-l {label} -b 0.3 --baseline --no-plot --no-memory", base)
            for label, change, _ in changes:
                ip.run_cell_magic("gpubench", f"-l {label} -b 0.6 --vs baseline --no-plot --no-memory", change)
            ip.run_line_magic("perf", f"export {folder / f'results-{name}{suffix}'}")
    finally:
        if before is None:
            os.environ.pop("PERFMAGIC_LEDGER_DIR", None)
        else:
            os.environ["PERFMAGIC_LEDGER_DIR"] = before
    print(f"{name}: {len(PLANTED)} cells timed, exported to results-{name}{suffix}")


if FOLDER is None:
    FOLDER = Path(tempfile.mkdtemp(prefix="class-results-"))
    for name, suffix in (("ada", ".csv"), ("alan", ".csv"), ("grace", ".json")):
        demo_student(name, FOLDER, suffix)
    print(f"demo class in {FOLDER}")
else:
    print(f"reading the class's files from {FOLDER}")
""", expect=[r"^(grace: 3 cells timed, exported to results-grace\.json|reading the class's files from )"])

# ------------------------------------------------------------------------------------------------
md(r"""
## 2. One table of every run

`%perf export` writes `.csv` with one column per metric (`metric.median_s`, `metric.ci_low_s`, …) and
the options as JSON text, or `.json` with each run as it is in the ledger (`metrics` and `options` as
objects). `read_export` brings both to the same shape; a column `student` says whose run it is.
""")

code(r"""
def read_export(path):
    # one %perf export file -> a DataFrame: one row per run, metric.<name> columns, options as a dict
    if path.suffix == ".json":
        rows = json.loads(path.read_text())
        flat = [{**{k: v for k, v in r.items() if k != "metrics"},
                 **{f"metric.{k}": v for k, v in (r.get("metrics") or {}).items()}} for r in rows]
        df = pd.DataFrame(flat)
    else:
        df = pd.read_csv(path)
        df["options"] = [json.loads(o) if isinstance(o, str) and o else {} for o in df["options"]]
    df["options"] = [o if isinstance(o, dict) else {} for o in df["options"]]
    df["student"] = path.stem.removeprefix("results-")
    return df


files = sorted(p for p in Path(FOLDER).iterdir() if p.suffix in (".csv", ".json"))
runs = pd.concat([read_export(p) for p in files], ignore_index=True)
print(f"{len(files)} files, {runs.student.nunique()} students, {len(runs)} runs "
      f"({', '.join(f'{m} {n}' for m, n in runs.magic.value_counts().items())})")
runs[["student", "id", "magic", "label", "metric.median_s", "code"]]
""", expect=[r"^\d+ files, \d+ students, \d+ runs \(gpubench \d+"])

md(r"""
## 3. One row per judged change

A change was judged with `%%gpubench --vs RUN`: its run B names the run it was measured **interleaved**
with, A (the baseline measured again, pair by pair with B), in its column `interleaved_with` (exports
of perfmagic before the run record kept it in `options.interleaved_with`: both are read). So every run
that names one is a change, and its A is in the same student's file. A change is named by its label
and the first line of its code (the cell's code, after the `%%gpubench` line).

The gain is A's median over B's. Its interval here is built from the two medians' own 95% intervals
(A's low end over B's high end, to A's high end over B's low end), since the export keeps each run's
summary, not the pairing: it is usually wider than the *paired* interval the student's own verdict
used. The verdict column reads that interval against the same bar (faster: all of it above 1.10×;
slower: all of it below 1/1.10; no real change: all of it within the two; otherwise inconclusive), so
it may say *inconclusive* where the student's own, paired verdict was decided.
""")

code(r"""
def verdict(low, high, bar=BAR):
    if low > bar:
        return "faster"
    if high < 1 / bar:
        return "slower"
    if low >= 1 / bar and high <= bar:
        return "no real change"
    return "inconclusive"


def interleaved_with(b):
    # the run B was measured with: its own column, or the option key of an older export
    a = b.get("interleaved_with")
    if a is None or pd.isna(a):
        a = b.options.get("interleaved_with")
    return None if a is None or pd.isna(a) else int(a)


rows = []
for student, mine in runs.groupby("student"):
    by_id = mine.set_index("id")
    for _, b in mine[mine.magic == "gpubench"].iterrows():
        a_id = interleaved_with(b)
        if a_id is None or a_id not in by_id.index:
            continue
        a = by_id.loc[a_id]
        gain = a["metric.median_s"] / b["metric.median_s"]
        low = a["metric.ci_low_s"] / b["metric.ci_high_s"]
        high = a["metric.ci_high_s"] / b["metric.ci_low_s"]
        code = [ln for ln in str(b.code).splitlines() if ln.strip() and not ln.lstrip().startswith("%")]
        rows.append(dict(label=b.label, change=code[0] if code else "", student=student,
                         gain=gain, low=low, high=high, verdict=verdict(low, high)))
pooled = pd.DataFrame(rows)

cell = pooled.assign(shown=[f"{r.gain:.2f}× ({r.low:.2f}–{r.high:.2f}) {r.verdict}" for r in pooled.itertuples()])
table = cell.pivot_table(index=["label", "change"], columns="student", values="shown", aggfunc="first")
agree = pooled.groupby(["label", "change"])["verdict"].agg(lambda v: f"yes: {v.iloc[0]}" if v.nunique() == 1
                                                           else "no: " + ", ".join(sorted(set(v))))
table["every student"] = agree
with pd.option_context("display.width", 220, "display.max_colwidth", 40):
    print(table.to_string())
""", expect=[r"^nap\s+time\.sleep\(0\.002\)\s+.*yes: faster$",
             r"^\s+time\.sleep\(0\.004 \* 1\.0\)\s+.*(yes|no): "])

md(r"""
## 4. One plot

One row per change, one point per student, with its interval; the dashed line is "no change" (1×),
the dotted one the bar. A change whose points all sit right of the bar was a real gain on every machine
in the class; points that straddle it are the place for the discussion: a machine with fewer free
cores, a noisy neighbour, a shorter budget.
""")

code(r"""
changes = list(dict.fromkeys(zip(pooled.label, pooled.change)))
students = sorted(pooled.student.unique())
fig, ax = plt.subplots(figsize=(8, 1.2 + 0.9 * len(changes)))
for k, student in enumerate(students):
    mine = pooled[pooled.student == student]
    y = [changes.index((r.label, r.change)) + (k - (len(students) - 1) / 2) * 0.15 for r in mine.itertuples()]
    ax.errorbar(mine.gain, y, xerr=[mine.gain - mine.low, mine.high - mine.gain], fmt="o", capsize=3, label=student)
ax.axvline(1.0, color="grey", ls="--", lw=1)
ax.axvline(BAR, color="grey", ls=":", lw=1)
ax.set_xscale("log")
lo, hi = min(pooled.low.min(), 1.0) / 1.15, max(pooled.high.max(), BAR) * 1.15
ax.set_xlim(lo, hi)
ticks = [t for t in (0.25, 0.5, 0.75, 1, BAR, 1.5, 2, 3, 4, 6, 8, 16, 32) if lo <= t <= hi]
ax.set_xticks(ticks, [f"{t:g}×" for t in ticks])
ax.xaxis.set_minor_formatter(NullFormatter())
ax.set_yticks(range(len(changes)), [f"{label}: {change}" for label, change in changes])
ax.invert_yaxis()
ax.set_xlabel("speed-up, A's median / B's median (log scale; bars: from the two medians' 95% intervals)")
ax.set_title("every student's gain for every change")
ax.legend(title="student", loc="best", fontsize="small")
fig.tight_layout()
plt.show()
print(f"plotted {len(changes)} change(s) × {len(students)} student(s)")
""", expect=[r"^plotted \d+ change\(s\) × \d+ student\(s\)"])

md(r"""
For the class's own files, set `FOLDER` in the first cell and run all cells: section 1 then only says
where it reads from. In the workshop the changes are judged on two labels, `epoch` (the whole loop)
and `compute` (the step alone); the exercises' runs appear too, under the code the student wrote.
""")


def main() -> None:
    from nbbuild import write_notebook  # this script's folder is on sys.path when it runs

    write_notebook(cells, TARGET)


if __name__ == "__main__":
    main()
