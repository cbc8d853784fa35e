"""A job launched elsewhere: ``torchrun --standalone --nproc_per_node 2`` runs a script that calls
``perfmagic.distributed_bench``; rank 0 writes one ledger row with per-rank statistics, read back here."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import os, time, torch, torch.distributed as dist, perfmagic
    if os.environ.get("PM_INIT") == "1":            # the job's own group, or none: both handled
        dist.init_process_group("gloo")
    setup = '''
    t = torch.ones(16)
    def step():
        time.sleep(0.004 + (0.012 if rank == 1 else 0.0))   # rank 1 is planted 12 ms slower
        dist.all_reduce(t)
    '''
    r = perfmagic.distributed_bench("step()", setup, globals={"time": time, "torch": torch, "dist": dist},
                                    budget=0.3, label="planted job", link=False)
    print("RANK", dist.get_rank(), "RUN", r.run_id, "WORLD", r.points[0].world, flush=True)
    if os.environ.get("PM_INIT") == "1":            # a job that made its group ends it, as torch asks:
        dist.barrier()                               # a rank leaving first with the group alive can abort
        dist.destroy_process_group()                 # in gloo's teardown (seen on a fresh-clone CI run)
""")


@pytest.mark.parametrize("own_group", [False, True])
def test_torchrun_job_writes_one_row_with_per_rank_statistics(tmp_path, monkeypatch, own_group) -> None:
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    led = tmp_path / "ledger"
    env = {**os.environ, "PERFMAGIC_LEDGER_DIR": str(led), "PM_INIT": "1" if own_group else "0",
           "OMP_NUM_THREADS": "1"}
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    out = subprocess.run([torchrun, "--standalone", "--nproc_per_node", "2", str(script)], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = sorted(x for x in out.stdout.splitlines() if x.startswith("RANK"))
    assert lines == ["RANK 0 RUN 1 WORLD 2", "RANK 1 RUN None WORLD 2"], out.stdout
    monkeypatch.setenv("PERFMAGIC_LEDGER_DIR", str(led))
    import perfmagic

    df = perfmagic.ledger("distributed")
    assert len(df) == 1                               # one row per job, not one per rank
    row = df.iloc[0]
    assert row["world_size"] == 2 and row["label"] == "planted job"
    r0, r1 = row["rank0_median_s"], row["rank1_median_s"]
    # rank 0 waits for rank 1 in the all-reduce: their steps look alike; the job's is the slowest rank's
    assert 0.012 < r1 and abs(r0 / r1 - 1) < 0.25 and row["median_s"] >= max(r0, r1) * 0.999
    # busy time: rank 0 ≈ 4 ms, rank 1 ≈ 16 ms -> slowest/median ≈ 16/10 = 1.6
    assert 1.3 <= row["straggler_ratio"] <= 1.85 and row["straggler_rank"] == 1, row.to_dict()
    samples = perfmagic.Ledger(str(led)).rows()[0]["samples"]["points"][0]["ranks"]
    assert [s["rank"] for s in samples] == [0, 1] and len(samples[0]["times"]) == len(samples[1]["times"]) >= 10
