"""The tidy pandas views of the ledger (storage/frame.py) and the ``%perf`` table (render/ledger.py)."""

from __future__ import annotations

import math

import pytest

from perfmagic.render.ledger import ledger_bundle, result_text, sparkline
from perfmagic.storage.frame import ledger_frame, metric_unit
from perfmagic.storage.ledger import Ledger

pd = pytest.importorskip("pandas")


def _bench(led, label, median, **kw):
    return led.record(magic="gpubench", label=label, code=f"%%gpubench -l {label}\nwork({median})\n",
                      options={}, samples=None, env={}, primary_metric="median_s",
                      metrics={"median_s": median, "ci_low_s": median * 0.99, "ci_high_s": median * 1.01,
                               "n_samples": 40, "number": 3}, **kw).id


@pytest.fixture
def led(tmp_path):
    led = Ledger(tmp_path, notebook="nb.ipynb")
    a = _bench(led, "mm", 0.004)
    led.set_baseline("mm", a)
    _bench(led, "mm", 0.002)
    led.record(magic="roofline", label="mm", code="x", options={}, samples=None, env={},
               primary_metric="median_s", metrics={"median_s": 0.002, "flops": 2 * 512**3, "bound": "compute",
                                                   "fraction_of_roof": 0.4})
    led.record(magic="flame", label="hot", code="hot()", options={}, samples=None, env={},
               primary_metric="top_self_fraction",
               metrics={"top_self_fraction": 0.4922, "n_samples": 812, "top1_self_name": "hot (In [3]:2)"})
    led.record(magic="memory", label="big", code="b = bytearray(1 << 20)", options={}, samples=None, env={},
               primary_metric="peak_bytes", metrics={"peak_bytes": 1 << 20, "increment_bytes": 1 << 20},
               status="interrupted")
    return led


def test_common_view_has_the_shared_columns_with_dtypes(led):
    df = ledger_frame(ledger=led)
    assert list(df.columns) == ["created", "magic", "label", "status", "primary_metric", "value", "unit",
                                "vs_baseline", "role", "code"]
    assert df["role"].isna().all() and df["role"].dtype == "string"  # no --vs re-measurement here
    assert df.index.name == "id" and str(df.index.dtype) == "Int64" and len(df) == 5
    assert str(df["created"].dt.tz) == "UTC"
    assert isinstance(df["magic"].dtype, pd.CategoricalDtype) and isinstance(df["status"].dtype, pd.CategoricalDtype)
    assert df["label"].dtype == "string" and df["code"].dtype == "string" and df["value"].dtype == "float64"
    assert df["magic"].tolist() == ["gpubench", "gpubench", "roofline", "flame", "memory"]
    assert df["unit"].tolist() == ["s", "s", "s", "fraction", "B"]
    assert df["value"].tolist() == [0.004, 0.002, 0.002, 0.4922, float(1 << 20)]
    assert df["status"].tolist()[-1] == "interrupted"
    # B/A of the primary metric against the label's baseline, for gpubench runs only
    ratio = df["vs_baseline"].tolist()
    assert ratio[0] == 1.0 and ratio[1] == pytest.approx(0.5)
    assert all(math.isnan(x) for x in ratio[2:])  # a roofline run of the same label is not compared
    assert list(ledger_frame(ledger=led, newest_first=True).index) == list(df.index)[::-1]


def test_magic_gives_only_that_magics_metrics_with_proper_dtypes(led):
    df = ledger_frame("gpubench", ledger=led)
    assert len(df) == 2 and set(df["magic"]) == {"gpubench"}
    assert {"median_s", "ci_low_s", "ci_high_s", "n_samples", "number"} <= set(df.columns)
    assert "flops" not in df.columns and "top_self_fraction" not in df.columns
    assert df["n_samples"].dtype == "Int64" and df["median_s"].dtype == "float64"
    assert df["median_s"].tolist() == [0.004, 0.002]
    roof = ledger_frame(magic="roofline", ledger=led)
    assert roof.iloc[0]["bound"] == "compute" and roof["bound"].dtype == "string"
    assert roof.iloc[0]["flops"] == 2 * 512**3 and roof["flops"].dtype == "Int64"
    assert "median_s" in roof.columns and "n_samples" not in roof.columns
    assert ledger_frame("lineprof", ledger=led).empty  # a magic with no runs yet
    with pytest.raises(ValueError, match="roofline"):
        ledger_frame("roof", ledger=led)
    with pytest.raises(ValueError, match="'long'"):
        ledger_frame(view="tall", ledger=led)


def test_long_view_is_one_row_per_run_and_metric(led):
    df = ledger_frame(view="long", ledger=led)
    assert list(df.columns) == ["id", "created", "magic", "label", "status", "metric", "value", "text", "unit"]
    assert df["id"].dtype == "Int64" and df["value"].dtype == "float64"
    assert len(df) == 5 * 2 + 4 + 3 + 2  # every metric of every run: gpubench x2, roofline, flame, memory
    flame = df[df["magic"] == "flame"].set_index("metric")
    assert flame.loc["top_self_fraction", "unit"] == "fraction"
    assert flame.loc["top1_self_name", "text"] == "hot (In [3]:2)" and math.isnan(flame.loc["top1_self_name", "value"])
    assert flame.loc["n_samples", "value"] == 812 and flame.loc["n_samples", "unit"] == "count"
    wide = df.pivot(index="id", columns="metric", values="value")
    assert wide.loc[2, "median_s"] == 0.002


def test_all_notebooks_adds_the_notebook_column(led, tmp_path):
    other = Ledger(tmp_path, notebook="other.ipynb")
    _bench(other, "mm", 0.001)
    assert len(ledger_frame(ledger=led)) == 5 and "notebook" not in ledger_frame(ledger=led).columns
    df = ledger_frame(ledger=led, all_notebooks=True)
    assert len(df) == 6 and df.columns[1] == "notebook" and df["notebook"].iloc[-1] == "other.ipynb"
    assert math.isnan(df["vs_baseline"].iloc[-1])  # "mm" has no baseline in the other notebook
    assert other.baselines() == {} and led.baselines(notebook=None) == {("nb.ipynb", "mm"): 1}


def test_metric_units():
    assert [metric_unit(k) for k in ("median_s", "peak_bytes", "flops_per_s", "items_per_s", "hot_fraction",
                                     "n_samples", "S", "bandwidth_Bps", "bound")] == [
        "s", "B", "FLOP/s", "items/s", "fraction", "count", "fraction", "B/s", None]


def test_perf_table_fits_the_width_and_says_what_each_number_is(led):
    rows = led.rows()
    long_label = "a-very-long-label-that-describes-the-experiment-in-detail"
    _bench(led, long_label, 0.003)
    rows = led.rows()
    changes = {2: "-50.0% faster  ▁█", 1: "baseline"}
    for width in (80, 100, 140):
        out = ledger_bundle(rows, total=len(rows), where=str(led.path), notebook="nb.ipynb", changes=changes,
                            width=width)
        text = out["text/plain"]
        assert all(len(line) <= width for line in text.splitlines()), (width, text)
        table = {ln.split()[0]: ln for ln in text.splitlines() if ln[:1].isdigit()}
        assert set(table) == {"1", "2", "3", "4", "5", "6"}
        assert "baseline" in table["1"] and "faster" in table["2"]
        assert "49% of samples in hot()" in table["4"]  # a flame row says what its fraction is
        assert "peak +1.0 MiB" in table["5"] and "interrupted" in table["5"]
        assert "…" in table["6"] or long_label in table["6"]
        assert "6 runs" in text and text.splitlines()[2].startswith("id ")
        assert "0.4922" not in text
        assert "a-very-long-label" in out["text/html"] and long_label in out["text/html"]
        assert "#1a7f37" in out["text/html"]  # faster, in the accept colour
    narrow = ledger_bundle(rows, total=len(rows), where="x", notebook=None, changes=changes, width=80)["text/plain"]
    assert long_label not in narrow  # cut to fit
    # the trend: a sparkline with the values it spans beside it, never alone
    assert not any(ch in narrow for ch in "▁▂▃▄▅▆▇█")  # no room for the trend: no bare sparkline either
    wide = ledger_bundle(rows, total=len(rows), where="x", notebook=None, changes=changes, width=200)["text/plain"]
    row2 = next(ln for ln in wide.splitlines() if ln.startswith("2 "))
    assert "4→2 ms" in row2 and sparkline([0.004, 0.002]) in row2
    assert sparkline([0.004, 0.002]) == "█▁" and "▁█" not in row2  # the verdict's own sparkline is dropped
    assert "-50.0% faster  █▁ 4→2 ms" in row2 and "trend:" in wide and "trend:" not in narrow


def test_result_text_names_every_number():
    assert result_text({"magic": "gpubench", "primary_metric": "median_s",
                        "metrics": {"median_s": 0.005, "ci_low_s": 0.0049, "ci_high_s": 0.0051,
                                    "n_samples": 40, "number": 3}}) == "median 5 ms ±2.0% (40 × 3 calls)"
    assert result_text({"magic": "lineprof", "primary_metric": "total_s",
                        "metrics": {"total_s": 1.5, "hot_fraction": 0.91, "hot_line": "In [3] line 4 f(): x"}}) \
        == "total 1.5 s, 91% in In [3] line 4 f()"
    assert result_text({"magic": "amdahl", "metrics": {"S": 0.31, "max_speedup": 2.9}}).startswith(
        "serial fraction S=0.31")
    assert result_text({"magic": "custom", "primary_metric": "items_per_s", "metrics": {"items_per_s": 12.5}}) \
        == "items_per_s 12.5 items/s"


def test_perf_magic_fits_the_terminal(shell, monkeypatch):
    monkeypatch.setenv("COLUMNS", "72")
    shell.run("%%gpubench -q -l a-rather-long-label-for-this-one-experiment\nsum(range(1000))\n")
    shell.run("%perf")
    text = shell.text()
    lines = text.splitlines()
    assert all(len(line) <= 72 for line in lines), text
    row = next(line for line in lines if line.startswith("1 "))
    assert "a-rather-long-label-for-this-one-experiment" not in row and "…" in row
    assert "median" in row and "calls)" in row  # the number says what it is
    assert "a-rather-long-label-for-this-one-experiment" in shell.bundles[0]["text/html"]


def test_a_column_that_says_ok_on_every_row_is_left_out():
    # a loaded run needs more samples: "(1069 × 15 calls)" made the result 40 wide and, at 72 columns,
    # the result was cut; the status column, "ok" on every row, gave its room
    from perfmagic.render.ledger import _fit

    row = ["1", "12:00", "gpubench", "a-rather-long-label-for-this-one-experiment", "ok",
           "median 12.35 µs ±12.5% (1069 × 15 calls)", "", "", "sum(range(1000))"]
    cols, widths = _fit([row], 72)
    assert "status" not in cols and sum(widths) + 2 * (len(cols) - 1) <= 72
    assert widths[cols.index("result")] == len(row[5])       # whole
    failed = [row, row[:4] + ["failed"] + row[5:]]
    assert "status" in _fit(failed, 100)[0]                  # a status that differs is shown


def test_wide_view_and_csv_export_carry_the_magic_line_and_the_relations(tmp_path) -> None:
    """An A/B pair's B names its A in its own column (not inside the user's options), in the wide frame
    and in the CSV export; old exports kept it in options, and a run with none reads <NA>."""
    led = Ledger(tmp_path, notebook="nb.ipynb")
    a = _bench(led, "mm", 0.004)
    b = led.record(magic="gpubench", label="mm", code="work(2)\n", magic_line="-l mm --vs 1", options={"vs": a},
                   samples=None, env={}, primary_metric="median_s", metrics={"median_s": 0.002},
                   interleaved_with=a, thread_limit=1).id
    f = ledger_frame("gpubench", ledger=led)
    assert f.loc[b, "interleaved_with"] == a and f.loc[b, "thread_limit"] == 1 and f.loc[b, "magic_line"] == "-l mm --vs 1"
    assert pd.isna(f.loc[a, "interleaved_with"]) and pd.isna(f.loc[a, "rerun_of"])
    assert "interleaved_with" not in f.loc[b, "options"]
    out = led.export(tmp_path / "runs.csv")
    csv = pd.read_csv(out).set_index("id")
    assert csv.loc[b, "interleaved_with"] == a and pd.isna(csv.loc[a, "interleaved_with"])


def test_rows_the_packed_read_cannot_pack_read_back_as_stored(led):
    """The common view reads each run's id, time, magic and status packed into one integer: a magic or a
    status a newer perfmagic wrote, a time that does not parse and an id past 2**24 must come back as
    they are stored, next to the ordinary runs."""
    import sqlite3

    rid = _bench(led, "mm", 0.003)
    con = sqlite3.connect(led.path)
    with con:
        con.execute("UPDATE runs SET magic = 'newmagic', status = 'queued' WHERE id = ?", (rid,))
        con.execute("UPDATE runs SET created_utc = 'not a time' WHERE id = 3")
        con.execute("UPDATE runs SET id = 16777300 WHERE id = 2")
    con.close()
    df = ledger_frame(ledger=led)
    assert list(df.index) == [1, 3, 4, 5, rid, 16777300]
    assert pd.isna(df.loc[3, "created"]) and not pd.isna(df.loc[4, "created"])
    assert df.loc[rid, "magic"] == "newmagic" and pd.isna(df.loc[rid, "status"])  # as pandas makes an unknown category
    assert df.loc[16777300, "value"] == 0.002 and df.loc[16777300, "label"] == "mm"
    assert df.loc[16777300, "vs_baseline"] == pytest.approx(0.5)
    assert df["magic"].tolist()[:4] == ["gpubench", "roofline", "flame", "memory"]


def test_vs_baseline_is_the_same_process_pair_where_there_is_one(tmp_path):
    """The A/A of the tour (notebook 00): the baseline measured at 563 µs, re-measured at 1.002 ms beside a
    run of the same code at 1.037 ms. The %perf table said +6.4% (A/B); the frame's vs_baseline said 1.84,
    a ratio across the machine's states that the A/B cancels. Both say the pair's B/A now."""
    led = Ledger(tmp_path, notebook="nb.ipynb")

    def rec(median, **options):
        return led.record(magic="gpubench", label="sq", code="sum(v * v for v in values)", options=options,
                          samples=None, env={}, primary_metric="median_s", metrics={"median_s": median}).id

    base = rec(563e-6)
    led.set_baseline("sq", base)
    later = rec(700e-6)  # measured alone: only history to compare with
    a = rec(1.002e-3, remeasured_from=base)
    b = rec(1.037e-3, interleaved_with=a)
    df = ledger_frame(ledger=led)
    assert df.loc[later, "vs_baseline"] == pytest.approx(700 / 563)
    assert math.isnan(df.loc[a, "vs_baseline"])  # the A side re-measured: no point of the label's history
    assert df.loc[b, "vs_baseline"] == pytest.approx(1.037 / 1.002)
    # a %perf compare of the baseline and `later` (both re-measured, interleaved): `later` is judged on it
    a2 = rec(0.9e-3, remeasured_from=base)
    b2 = rec(0.99e-3, remeasured_from=later, interleaved_with=a2)
    df = ledger_frame(ledger=led)
    assert df.loc[later, "vs_baseline"] == pytest.approx(0.99 / 0.9)
    assert math.isnan(df.loc[b2, "vs_baseline"])
