"""`%perf compare` as a user meets it: labels per cell, budgets sized to the calls, errors that name the
fix, an exception or Ctrl-C inside the re-measurement."""

from __future__ import annotations

import re

import pytest


def _usage(res) -> str:
    assert type(res.error_in_exec).__name__ == "UsageError", res.error_in_exec
    return str(res.error_in_exec)


# ---- default labels: one history per cell -----------------------------------------------------------

def test_default_labels_are_unique_per_cell_and_survive_an_edit(shell) -> None:
    import perfmagic

    ip = shell.ip
    ip.run_cell("%%gpubench -b 0.1 -q\nsum(range(50))\n", cell_id="cell-aaaa-1111")
    ip.run_cell("%%gpubench -b 0.1 -q\nsum(range(50))\n", cell_id="cell-bbbb-2222")  # another cell, same line
    ip.run_cell("%%gpubench -b 0.1 -q\nsum(range(50))\nsum(range(9))\n", cell_id="cell-aaaa-1111")  # edited
    labels = list(perfmagic.ledger().sort_values("id")["label"])
    assert labels == ["sum(range(50)) [cell cell-aaa]", "sum(range(50)) [cell cell-bbb]",
                      "sum(range(50)) [cell cell-aaa]"]
    shell.run("%%gpubench -b 0.1 -q\nsum(range(50))\n")  # no cell id (a terminal, nbclient): the first line
    assert perfmagic.ledger().sort_values("id")["label"].iloc[-1] == "sum(range(50))"


# ---- the budget sized to the calls ------------------------------------------------------------------

@pytest.mark.slow
def test_a_slow_step_gets_enough_pairs_under_the_default_budget() -> None:
    import time

    from perfmagic.timing.pair import AUTO_PAIRS, DEFAULT_PAIR_BUDGET, bench_pair

    # 0.2 s pairs: the fixed 2 s budget gave 5-6 pairs after warmup; sized to the calls it gives 12
    pr = bench_pair("time.sleep(0.09)", "time.sleep(0.11)", globals={"time": time}, memory=False)
    assert pr.a.n_samples >= AUTO_PAIRS - 2 and pr.a.policy["budget_s"] > DEFAULT_PAIR_BUDGET
    assert pr.comparison.verdict == "slower"
    fixed = bench_pair("time.sleep(0.09)", "time.sleep(0.11)", globals={"time": time}, memory=False, budget=1.0)
    assert fixed.a.policy["budget_s"] == 1.0 and fixed.a.n_samples < AUTO_PAIRS  # a given budget is kept


def test_an_undecided_budget_says_how_long_a_decision_takes() -> None:
    import random
    import time

    from perfmagic.timing.pair import bench_pair

    ns = {"time": time, "random": random}
    noisy = "time.sleep(0.002 * random.lognormvariate(0, 0.6))"
    pr = bench_pair(noisy, noisy.replace("0.002", "0.0024"), globals=ns, budget=0.06, memory=False)
    if pr.comparison.verdict != "inconclusive":  # a lucky draw decided it: then there is nothing to advise
        assert pr.advice() is None
        return
    advice = pr.advice()
    assert advice and advice in pr.text()
    # a draw near the ±10% bar (the planted 1.2 read as ~1.11 beside a busy neighbour) asks for a longer run
    # too, never "no budget will settle it" while its interval is wide
    assert "no budget will settle it" not in advice, advice
    if "is near the" in advice:
        assert re.search(r"measure longer to see which side it settles on \(e\.g\. -b \d+s\)", advice), advice
        return
    m = re.search(r"it needs ~(\d+) s \(about (\d+) pairs of ([\d.]+) ms\); run with -b (\d+)s", advice or "")
    assert m, advice
    assert int(m.group(4)) == int(m.group(1)) and int(m.group(2)) > pr.a.n_samples


# ---- bad input: one line, naming the fix -----------------------------------------------------------

def test_runs_of_different_magics(shell, roofs) -> None:
    shell.run("%%gpubench -l s -b 0.1 -q\nsum(range(100))\n")
    shell.run("%%roofline -l s --flops 100 --bytes 800 -b 0.2 --no-plot\nsum(range(100))\n")
    msg = _usage(shell.run("%perf compare 1 2"))
    assert "run #1 is a %%gpubench run and run #2 a %%roofline run" in msg and "%perf compare A 2" in msg


def test_a_deleted_run_and_a_run_kept_in_memory_only(shell) -> None:
    shell.run("%%gpubench -l s -b 0.1 -q\nsum(range(100))\n")
    shell.run("%%gpubench -l s -b 0.1 -q\nsum(range(100))\n")
    shell.run("%%gpubench -l s -b 0.1 -q\nsum(range(100))\n")
    shell.run("%perf forget 1")
    msg = _usage(shell.run("%perf compare 1 3"))
    assert "no run with id 1" in msg and "removed with %perf forget" in msg and "%perf lists the runs" in msg
    msg = _usage(shell.run("%perf compare -1 3"))
    assert "kept in memory only" in msg and "negative ids" in msg
    assert "\n" not in msg


def test_a_run_from_another_notebook(shell, ledger_dir) -> None:
    from perfmagic.storage.ledger import Ledger

    shell.run("%%gpubench -l s -b 0.1 -q\nsum(range(100))\n")
    other = Ledger(ledger_dir, notebook="other.ipynb")
    row = other.get(1)
    row = {k: row[k] for k in ("magic", "label", "options", "metrics", "samples", "env", "status", "primary_metric")}
    ref = other.record(code="%%gpubench -l s\nsum(range(100))", **row)
    msg = _usage(shell.run(f"%perf compare {ref.id} 1"))
    assert "was measured in notebook 'other.ipynb'" in msg and f"%perf compare {ref.id} 1 --historical" in msg
    res = shell.run(f"%perf compare {ref.id} 1 --historical")  # the fix works
    assert res.error_in_exec is None and "historical comparison" in shell.text()


# ---- the user's exception, and Ctrl-C, inside the re-measurement -------------------------------------

TICK = ("import random, time\ndef tick(f=1.0):\n    time.sleep(random.random() * 0.002 * f)\n    tick.n += 1\n    if tick.n == tick.stop:\n"
        "        raise tick.error\ntick.n, tick.stop, tick.error = 0, -1, None\n")


def _two_runs(shell) -> None:
    shell.run(TICK)
    shell.run("%%gpubench -l t -b 0.1 -q\ntick()\n")
    shell.run("%%gpubench -l t -b 0.1 -q\ntick(1.1)\n")  # on the 10% bar, noisy: no early stop


def test_an_exception_while_re_measuring_is_the_users(shell, capsys) -> None:
    _two_runs(shell)
    shell.run("tick.stop, tick.error = tick.n + 12, ValueError('boom while re-measuring')")
    capsys.readouterr()
    res = shell.run("%perf compare 1 2 --rerun -b 20")
    assert isinstance(res.error_in_exec, ValueError) and "boom while re-measuring" in str(res.error_in_exec)
    import perfmagic

    assert len(perfmagic.ledger()) == 2  # nothing half-measured was recorded as a comparison


def test_ctrl_c_while_re_measuring_ends_in_one_line(shell, capsys) -> None:
    import perfmagic

    _two_runs(shell)
    stop, seen = 1500, set()
    for _ in range(6):  # Ctrl-C after `stop` more calls: too early hits the warmup, too late the end
        shell.run(f"tick.stop, tick.error = tick.n + {stop}, KeyboardInterrupt")
        capsys.readouterr()
        res = shell.run("%perf compare 1 2 --rerun -b 6")
        out = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
        if res.error_in_exec is None:  # finished first: interrupt sooner
            seen.add("finished")
            stop //= 2
            continue
        assert isinstance(res.error_in_exec, KeyboardInterrupt)
        shown = [ln for ln in out.splitlines() if "KeyboardInterrupt" in ln]
        assert len(shown) == 1 and "perf compare interrupted" in shown[0], out
        assert "Traceback" not in out
        if "before one A/B pair" in shown[0]:  # still warming up: nothing recorded; interrupt later
            assert "nothing recorded" in shown[0]
            seen.add("warmup")
            stop *= 2
            continue
        assert "recorded as interrupted" in shown[0] and "A/B interleaved in one process" in shell.text()
        assert list(perfmagic.ledger()["status"]).count("interrupted") == 2  # both sides, as measured
        break
    else:
        pytest.fail(f"never interrupted among the pairs ({sorted(seen)})")


def test_advice_near_the_bar_says_no_budget_only_when_the_interval_is_narrow() -> None:
    from types import SimpleNamespace as NS

    from perfmagic.timing.pair import PairResult

    def advice(ratio: float, lo: float, hi: float) -> str:
        c = NS(ratio=ratio, ci_low=lo, ci_high=hi, verdict="inconclusive", min_effect=0.10)
        side = NS(stop_reason="budget", n_samples=12, raw=[0.002] * 12)
        return PairResult.advice(NS(comparison=c, a=side, b=side))

    wide = advice(1.112, 0.95, 1.35)        # a few noisy pairs: could still settle on either side
    assert "no budget will settle it" not in wide and "measure longer" in wide and "-b " in wide
    narrow = advice(1.101, 1.085, 1.118)    # already tight around the bar: no run will decide it
    assert "no budget will settle it" in narrow
    far = advice(1.3, 1.05, 1.6)            # clear of the bar: how long a decision takes
    assert "it needs ~" in far


# ---- the budget sized to the noise of slow calls (a training step) -----------------------------------

def test_pairs_needed_follows_the_spread_and_the_distance_to_the_bar() -> None:
    import math

    from perfmagic.timing.pair import pairs_needed

    spread = [-2.0, -1.0, -0.4, 0.4, 1.0, 2.0]                          # MAD 1.0: sigma = 1.48 units
    far = [math.log(1.4) + 0.03 * u for u in spread]                    # 40% slower, 4% noise: decided now
    assert pairs_needed(far, 0.10) == 6
    near = [math.log(1.13) + 0.05 * u for u in spread]                  # 13%: 3% from the bar, 7% noise
    assert 40 <= pairs_needed(near, 0.10) <= 200
    noisier = [math.log(1.13) + 0.10 * u for u in spread]
    assert 3.5 < pairs_needed(noisier, 0.10) / pairs_needed(near, 0.10) < 4.5   # twice the noise: 4x the pairs
    assert pairs_needed([math.log(1.1) + 0.05 * u for u in spread], 0.10) == 10_000   # centred on the bar


def test_slow_pairs_stop_as_soon_as_the_verdict_is_clear() -> None:
    import random
    import time

    from perfmagic.timing.pair import DECISIVE_MIN_SLOW, bench_pair

    # 60 ms vs 90 ms (+50%), each call ±5% at random (so the 1% precision cannot stop it first), 8 s
    # given: a step this slow used to run 30 pairs (4.5 s) before it could stop early
    ns = {"time": time, "random": random.Random(5)}
    pr = bench_pair("time.sleep(0.06 * random.uniform(0.95, 1.05))", "time.sleep(0.09 * random.uniform(0.95, 1.05))",
                    globals=ns, memory=False, budget=8.0)
    assert pr.comparison.verdict == "slower", pr.text()
    assert pr.a.stop_reason == "verdict clear" and DECISIVE_MIN_SLOW <= pr.a.n_samples <= 20, pr.text()
