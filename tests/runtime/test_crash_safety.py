"""A crashed run loses nothing: ``kill -9`` of the client mid ``local`` run, and of a worker mid ``dask`` run.

The run log on disk parses up to the last event written (a torn last line is skipped), ``workbench runs``
lists the run (unfinished, or failed when the client lived to record the lost worker) and ``RunView`` opens it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workbench.cli import main
from workbench.events import EpochEnd, RunFinished, iter_run_log
from workbench.runtime import WorkerLost, launch
from workbench.testing.tiny_program import TinyConfig

ROOT = Path(__file__).resolve().parents[2]


def _wait_for_epochs(log: Path, count: int, proc=None, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and log.read_text().count('"type": "epoch",') >= count:
            return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the run ended early: {proc.stderr.read()[-2000:]}")
        time.sleep(0.2)
    raise AssertionError("no epochs in the run log")


def _check_listed_and_viewable(out: Path, run_dir: Path, statuses: set, capsys) -> None:
    assert main(["runs", str(out)]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    (row,) = [r for r in rows if r[0] == run_dir.name]
    assert row[4] in statuses, row
    from widgets.views import RunView

    view = RunView(run_dir, runs_dir=None, live=False)
    assert view.store.epochs_done >= 1 and view.store.status != "finished"
    view.__panel__()


def test_client_killed_mid_local_run(tmp_path, capsys):
    out = tmp_path / "runs"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TQDM_DISABLE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "workbench", "run", "full_graph", "--runner", "local",
                             "--workers", "2", "--epochs", "100000", "--out", str(out), "--graph",
                             "sbm:num_nodes=200,num_blocks=2,avg_degree=4,num_features=4,seed=0"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        run_dir = None
        deadline = time.monotonic() + 60
        while run_dir is None and time.monotonic() < deadline:
            found = [p for p in out.glob("*/events.jsonl")] if out.exists() else []
            run_dir = found[0].parent if found else None
            time.sleep(0.2)
        assert run_dir is not None
        _wait_for_epochs(run_dir / "events.jsonl", 4, proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    with open(run_dir / "events.jsonl", "a") as f:   # as if the kill tore the line being written
        f.write('{"type": "epoch", "rank": 0, "ep')
    events = list(iter_run_log(run_dir))
    assert events[0].type == "run_started" and not any(isinstance(e, RunFinished) for e in events)
    assert len([e for e in events if isinstance(e, EpochEnd)]) >= 4
    json.loads((run_dir / "config.json").read_text())
    _check_listed_and_viewable(out, run_dir, {"unfinished"}, capsys)


@pytest.mark.slow
def test_worker_killed_mid_dask_run(dask_client, tmp_path, capsys):
    handle = launch(TinyConfig(epochs=400, sleep_s=0.05), runner="dask", scheduler=dask_client, out=tmp_path,
                    timeout=8)   # the surviving rank gives up on its peer after 8 s
    _wait_for_epochs(Path(handle.log_dir) / "events.jsonl", 4)
    pids = dask_client.run(os.getpid)
    victim = sorted(pids)[1]
    os.kill(pids[victim], signal.SIGKILL)
    t0 = time.monotonic()
    with pytest.raises(WorkerLost):
        handle.wait(60)
    print(f"worker loss reported after {time.monotonic() - t0:.1f} s")
    events = list(iter_run_log(handle.log_dir))
    assert len([e for e in events if isinstance(e, EpochEnd)]) >= 4
    assert events[-1].type == "run_finished" and events[-1].status == "failed"
    _check_listed_and_viewable(tmp_path, Path(handle.log_dir), {"failed"}, capsys)
