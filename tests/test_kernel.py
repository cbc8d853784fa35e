"""A real kernel (ipykernel through nbclient) runs the magics from notebook cells."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

pytestmark = pytest.mark.slow


def _run(cells: list[str], cwd: Path) -> list:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    env_backup = os.environ.get("PERFMAGIC_LEDGER_DIR")
    os.environ.pop("PERFMAGIC_LEDGER_DIR", None)  # the kernel must find the ledger itself
    try:
        nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                resources={"metadata": {"path": str(cwd)}}).execute()
    finally:
        if env_backup is not None:
            os.environ["PERFMAGIC_LEDGER_DIR"] = env_backup
    return nb.cells


def _texts(cell) -> str:
    out = []
    for o in cell.outputs:
        out.append(o.get("text", ""))
        out.append(o.get("data", {}).get("text/plain", ""))
    return "\n".join(out)


def test_gpubench_in_a_real_kernel_and_rows_survive_a_restart(tmp_path: Path) -> None:
    cells = _run(["%load_ext perfmagic",
                  "import time, sys",
                  "%%gpubench -l nap\ntime.sleep(0.005)",
                  "heavy = [m for m in ('pandas',) if m in sys.modules]; heavy"], tmp_path)
    out = cells[2].outputs
    assert len(out) == 1 and out[0].output_type == "display_data"
    data = out[0].data
    assert "median" in data["text/plain"] and "run #1" in data["text/plain"]
    assert "image/png" in data  # static fallback for nbconvert, GitHub, ...
    assert "<details" in data["text/html"] and "data:image/png;base64," in data["text/html"]  # self-contained
    assert "application/vnd.jupyter.widget-view+json" not in data  # no live view unless asked (result.widget())
    assert (tmp_path / ".perfmagic" / "ledger.sqlite").exists()
    # a new kernel process (a restart) sees the row
    cells = _run(["%load_ext perfmagic", "%perf", "import perfmagic; len(perfmagic.ledger())"], tmp_path)
    assert "nap" in _texts(cells[1]) and "1 run" in _texts(cells[1])
    assert _texts(cells[2]).strip() == "1"


def test_errors_in_a_real_kernel(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in (
        "%load_ext perfmagic", "%%gpubench --nope\n1", "%%gpubench\n1/0")])
    client = nbclient.NotebookClient(nb, timeout=60, kernel_name="python3", allow_errors=True,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    usage = _texts(nb.cells[1])  # IPython prints a UsageError as one message on stderr, no traceback
    assert "UsageError" in usage and "--nope" in usage and "valid options" in usage
    assert "Traceback" not in usage
    err = nb.cells[2].outputs[-1]
    assert err.output_type == "error" and err.ename == "ZeroDivisionError"
    tb = "\n".join(err.traceback)
    assert "1/0" in tb and "perfmagic/" not in tb


def test_tour_runner_leaves_static_html(tmp_path: Path) -> None:
    import shutil
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in (
        "%load_ext perfmagic", "%%gpubench -l x\nsum(range(100))")])
    path = tmp_path / "mini.ipynb"
    nbformat.write(nb, path)
    shutil.copy(root / "notebooks" / "run.py", tmp_path / "run.py")
    res = subprocess.run([sys.executable, str(tmp_path / "run.py"), str(path)], capture_output=True, text=True,
                         timeout=300, env={k: v for k, v in os.environ.items() if k != "PERFMAGIC_LEDGER_DIR"})
    assert res.returncode == 0, res.stderr
    html = (tmp_path / "mini.html").read_text()
    assert "data:image/png;base64" in html and "median" in html
    executed = nbformat.read(tmp_path / "_executed" / "mini.ipynb", 4)
    data = executed.cells[1].outputs[0].data
    assert "application/vnd.jupyter.widget-view+json" not in data  # no dead widget view left behind
    led = tmp_path / "_executed" / ".perfmagic-mini" / "ledger.sqlite"  # a fresh ledger per run
    assert led.exists()
    import sqlite3

    con = sqlite3.connect(led)
    (nbname,) = con.execute("select notebook from runs").fetchone()
    assert nbname and nbname.endswith("mini.ipynb")


def test_roofline_widget_in_a_real_kernel(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("torch")
    from perfmagic.roofs import ceilings as _ceilings

    monkeypatch.setenv("PERFMAGIC_CACHE_DIR", str(tmp_path / "cache"))
    fp, _ = _ceilings.machine_fingerprint("cpu")
    _ceilings.save(_ceilings.Ceilings(device="cpu", fingerprint=fp, measured_utc="2026-11-22T00:00:00Z",
                                      compute={"float32": 250e9, "float64": 120e9, "bfloat16": 140e9},
                                      bandwidth_Bps=20e9))
    cells = _run(["%load_ext perfmagic", "import torch\nx = torch.randn(256, 256)", "%%roofline -l mm\nx @ x"],
                 tmp_path)
    data = cells[2].outputs[-1].data
    assert data["text/plain"].startswith("compute-bound")
    assert "image/png" in data and "application/vnd.jupyter.widget-view+json" not in data


def test_amdahl_in_a_real_kernel(tmp_path: Path) -> None:
    cells = _run(["%load_ext perfmagic",
                  "import time\ndef job(workers):\n    time.sleep(0.004 + 0.012 / workers)",
                  "%%amdahl workers=1,2,4 -b 0.2 --rounds 1\njob(workers)"], tmp_path)
    data = cells[2].outputs[-1].data
    assert data["text/plain"].startswith("best speedup")
    assert "image/png" in data and "application/vnd.jupyter.widget-view+json" not in data


def test_estimate_in_a_real_kernel(tmp_path: Path) -> None:
    cells = _run(["%load_ext perfmagic",
                  "def work(k):\n    x = 0\n    for _ in range(k):\n        x += 1\n    return x",
                  # --force: the full run goes ahead whatever the gate says (a noisy episode on the VM made a
                  # re-time differ by ±72% and the estimate refused, fc14): this test is about the kernel's output
                  "%%estimate n=2_000_000 --limit 1m --run --force -b 1s\nwork(n)"], tmp_path)
    out = [o for o in cells[2].outputs if o.output_type == "display_data"]
    data = out[-1].data
    assert data["text/plain"].startswith("estimate for n=2,000,000") and "actual full run" in data["text/plain"]
    assert "image/png" in data and "<details" in data["text/html"]
    assert "application/vnd.jupyter.widget-view+json" not in data  # self-contained: no live view by default


def _interrupt_after(cells: list[str], cwd: Path, after_s: float) -> list[dict]:
    """Run ``cells`` in a real kernel; Ctrl-C (``interrupt_kernel``, SIGINT) the last one ``after_s`` in.
    Returns the IOPub messages of the last cell."""
    import time

    from jupyter_client.manager import start_new_kernel

    env_backup = os.environ.pop("PERFMAGIC_LEDGER_DIR", None)
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(cwd))
    try:
        for c in cells[:-1]:
            reply = kc.execute_interactive(c, timeout=60)
            assert reply["content"]["status"] == "ok", reply["content"]
        msg_id = kc.execute(cells[-1])
        time.sleep(after_s)
        km.interrupt_kernel()
        out = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msg = kc.get_iopub_msg(timeout=60)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            out.append(msg)
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
        return out
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        if env_backup is not None:
            os.environ["PERFMAGIC_LEDGER_DIR"] = env_backup


@pytest.mark.parametrize("cell, headline", [
    ("%%gpubench -b 60 -p 0.00001 --no-plot\ntime.sleep(random.random() * 0.004)", "INTERRUPTED"),
    # -b 8: warmup of noisy code may take up to 30% of the budget (2.4 s); Ctrl-C comes once pairs are timed
    ("%%gpubench --vs 1 -b 8 -p 0.00001 --no-plot\ntime.sleep(random.random() * 0.004)", "A/B"),
])
def test_ctrl_c_in_a_real_kernel_shows_the_partial_result_then_one_line(tmp_path: Path, cell, headline) -> None:
    # the Ctrl-C comes at 3.5 s: the measurement must still run then, so the pair's early stop on a clear
    # verdict is off in this kernel (fc15: A and B alike, "same" was clear before 3.5 s and nothing was interrupted)
    no_early_stop = "import perfmagic.timing.pair as _pair\n_pair._decisive = lambda *a, **k: False"
    msgs = _interrupt_after(["%load_ext perfmagic", "import time, random", no_early_stop,
                             "%%gpubench -l base -b 0.3 -q\ntime.sleep(random.random() * 0.004)", cell], tmp_path,
                            after_s=3.5)
    shown = "\n".join(m["content"].get("data", {}).get("text/plain", "") for m in msgs
                      if m["msg_type"] in ("display_data", "execute_result"))
    assert headline in shown, shown
    errors = [m["content"] for m in msgs if m["msg_type"] == "error"]
    assert len(errors) == 1 and errors[0]["traceback"] == [errors[0]["traceback"][0]]
    line = errors[0]["traceback"][0]
    assert line.startswith("KeyboardInterrupt: perfmagic:") and "recorded as interrupted" in line, line
    import sqlite3

    con = sqlite3.connect(tmp_path / ".perfmagic" / "ledger.sqlite")
    statuses = [r[0] for r in con.execute("SELECT status FROM runs ORDER BY id")]
    con.close()
    assert statuses[0] == "ok" and set(statuses[1:]) == {"interrupted"}, statuses
