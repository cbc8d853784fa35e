"""The `!` lines of an output: the two that matter most shown, the rest folded (render/warnings.py), and the
outputs that use it (BenchResult, roofline, scaling), on results built by hand."""

from __future__ import annotations

from typing import Any

from perfmagic.render.bundle import mimebundle
from perfmagic.render.warnings import fold_line, folded_html, rank, shown_and_folded, warning_lines

OVERSUB = ("thread oversubscription: the cell's thread pools (BLAS/OpenMP 2 threads) exceed the ~0.7 of 2 cores "
           "other processes left free (1.3 busy): its threads wait for each other. Fix: "
           "threadpoolctl.threadpool_limits(1) / torch.set_num_threads(1), or stop the neighbour")
LOAD = "other processes used 1.3 of 2 usable cores during the measurement: results may be slow and noisy"
STATE = ("this machine ran in its slow state during the last 10 of 30 samples (1.55× the others): a fixed reference "
         "loop took 31 µs vs 19 µs at its fastest, not because of other processes (0.03 cores). An interleaved A/B "
         "(%perf compare, --vs) cancels it; this single number does not")
SPREAD = "spread is high: the IQR is 22% of the median — the machine or the code is noisy"
COLD = ("the first call took 9× a warm call (9 ms) with no other load (0.03 cores): lazy init, JIT, autotuning or "
        "cold caches; it is reported apart, not in the samples")


def test_ranks_put_what_invalidates_the_number_first_then_load_then_speed_state_then_the_rest() -> None:
    assert [rank(w) for w in (OVERSUB, LOAD, STATE, SPREAD, COLD)] == [0, 1, 2, 3, 4]
    assert rank("GPU clocks throttled (reasons: hw_slowdown)") == 0
    assert rank("failed at n=192,000: MemoryError") == 0
    shown, folded = shown_and_folded([COLD, SPREAD, STATE, LOAD, OVERSUB])
    assert shown == [OVERSUB, LOAD] and folded == [STATE, SPREAD, COLD]
    # equal ranks keep their order; duplicates go; a limit of 0 folds all
    assert shown_and_folded(["b note", "a note", "b note"]) == (["b note", "a note"], [])
    assert shown_and_folded([LOAD, COLD], limit=0) == ([], [LOAD, COLD])
    assert shown_and_folded([]) == ([], [])


def test_text_lines_show_two_wrapped_within_100_columns_and_one_fold_line() -> None:
    lines = warning_lines([COLD, SPREAD, STATE, LOAD, OVERSUB])
    bangs = [ln for ln in lines if ln.startswith("  ! ")]
    assert len(bangs) == 2 and bangs[0].startswith("  ! thread oversubscription") and LOAD[:40] in bangs[1]
    assert all(len(ln) <= 100 for ln in lines), lines
    assert lines[-1].startswith("  (+3 more: this machine ran in its slow") and "spread is high" in lines[-1]
    # continuation lines sit under the text, not under the `!`
    assert lines[1].startswith("    ") and not lines[1].startswith("    !")
    # two or fewer: nothing folded, no fold line
    two = warning_lines([COLD, LOAD])
    assert two[0] == "  ! " + LOAD and two[1].startswith("  ! the first call") and len(two) == 3, two
    assert not any(ln.startswith("  (+") for ln in two)
    assert warning_lines([]) == []


def test_the_fold_line_stays_within_100_columns_however_many_are_folded() -> None:
    many = [f"warning number {i} with a rather long first clause that goes on: detail" for i in range(40)]
    line = fold_line(many)
    assert line is not None and len(line) <= 100 and line.startswith("  (+40 more: ")
    assert fold_line([]) is None


def test_html_gives_the_folded_ones_for_a_details_section() -> None:
    title, body = folded_html([COLD, SPREAD, LOAD, OVERSUB, "<b>x</b>"])
    assert title == "3 more warnings" and "<li>" in body and "&lt;b&gt;x&lt;/b&gt;" in body
    assert folded_html([LOAD, COLD]) is None


def _bench(warnings: tuple[str, ...]) -> Any:
    from perfmagic.timing.results import BenchResult

    return BenchResult(code="x", raw=tuple([1e-3] * 20), number=1, cold_s=9e-3, warnings=warnings,
                       policy={"confidence": 0.95})


def test_bench_text_shows_the_two_that_matter_and_html_folds_the_rest() -> None:
    r = _bench((COLD, SPREAD, STATE, LOAD, OVERSUB))
    text = r.text()
    bangs = [ln for ln in text.splitlines() if ln.startswith("  ! ")]
    assert len(bangs) == 2 and "thread oversubscription" in bangs[0] and "other processes used" in bangs[1], text
    assert all(len(ln) <= 100 for ln in text.splitlines()[1:]), text
    assert "(+3 more: " in text
    page = mimebundle(r, plot=False)["text/html"]
    assert "3 more warnings</summary>" in page and "lazy init, JIT" in page
    few = _bench((SPREAD, COLD))
    assert "more: " not in few.text() and "more warning" not in mimebundle(few, plot=False)["text/html"]
    assert sum(ln.startswith("  ! ") for ln in few.text().splitlines()) == 2


def test_scaling_text_shows_two_and_folds_the_rest() -> None:
    from dataclasses import replace

    from perfmagic.scaling.sweep import ScalingPoint, analyse
    from perfmagic.timing.results import BenchResult

    def pt(n: int, t: float) -> ScalingPoint:
        return ScalingPoint(n, (BenchResult(code="x", raw=(t,) * 12, number=1, cold_s=t),), own_cores=float(n))

    r = analyse([pt(1, 4e-3), pt(2, 2.1e-3)], code="f()", cores=2, others_cores=0.0)
    r = replace(r, warnings=(SPREAD, COLD, LOAD, OVERSUB))
    text = r.text()
    bangs = [ln for ln in text.splitlines() if ln.startswith("  ! ")]
    assert len(bangs) == 2 and "oversubscription" in bangs[0] and "other processes used" in bangs[1], text
    assert any(ln.startswith("  (+2 more: spread is high; the first call took") for ln in text.splitlines()), text
    assert all(len(ln) <= 100 for ln in text.splitlines()[1:]), text


def test_rank_sweep_gathers_every_bang_item_in_the_ranks_words() -> None:
    from types import SimpleNamespace

    from perfmagic.render.ranks import all_warnings

    sc = SimpleNamespace(warnings=("the thread pools exceed the free cores: planted", "other processes kept 1.2 of "
                                   "2 cores busy: planted", "only 3 worker counts measured"), others_cores=1.2)
    r = SimpleNamespace(excluded=[(3, "were descheduled by the OS")], warnings=("a rank warning",), scaling=sc,
                        needs_cores=False, cores=2)
    got = all_warnings(r)
    assert got[0] == "3* ranks not fitted: they were descheduled by the OS" and got[1] == "a rank warning"
    assert not any("exceed the" in w for w in got)  # said once, in the ranks' own words
    assert "so the load did not hold them back" in got[2] and got[3] == "only 3 world sizes measured"
    shown = warning_lines(got)
    assert shown[0].startswith("  ! 3* ranks not fitted") and shown[-1].startswith("  (+2 more: ")
