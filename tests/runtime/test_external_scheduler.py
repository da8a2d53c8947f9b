"""A run on an existing Dask cluster given by its scheduler address (not the embedded LocalCluster,
not a ``Client`` object).

The module starts a real separate cluster as subprocesses (``dask scheduler`` on 127.0.0.1 with a free
port read back from its scheduler file, two single-threaded ``dask worker`` processes), then:

- ``launch(..., runner="dask", scheduler="tcp://...")`` gives the same losses, weights and halo bytes as
  the in-process ``local`` runner, and the ranks really ran on that cluster's workers;
- ``workbench run ... --scheduler tcp://...`` in a subprocess exits 0 and writes the run log;
- an address where no scheduler listens fails fast (default connect bound, not Dask's 30 s) with one
  ``ParamError`` naming the ``scheduler`` parameter and the value.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from recipes import full_graph
from workbench._validation import ParamError
from workbench.events import RunFinished, RunStarted, read_run_log
from workbench.runtime import launch
from workbench.testing import assert_same_run

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
GRAPH = "sbm:num_nodes=300,num_blocks=3,avg_degree=6,num_features=8,seed=3"
EPOCHS, HIDDEN, SEED = 4, 8, 1
NO_SCHEDULER = "tcp://127.0.0.1:1"  # nothing listens on port 1


def _config():
    return full_graph.recipe(graph=GRAPH, epochs=EPOCHS, model={"hidden": HIDDEN}, seed=SEED)


def _close(a, b, rtol=1e-5):
    np.testing.assert_allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), rtol=rtol, atol=1e-7)


def _tail(path: Path, n: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return ""


def _stop(procs: list) -> None:
    """Terminate every process (workers first, as listed reversed), then kill the ones still alive."""
    for proc, _log in reversed(procs):
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + 15
    for proc, _log in reversed(procs):
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def scheduler_address(tmp_path_factory):
    """The address of a running scheduler with 2 registered single-threaded workers (subprocesses)."""
    from distributed import Client

    folder = tmp_path_factory.mktemp("external-cluster")
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    procs: list = []

    def spawn(name: str, args: list) -> subprocess.Popen:
        log = folder / f"{name}.log"
        with open(log, "wb") as fh:
            proc = subprocess.Popen([sys.executable, "-m", *args], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                    stdout=fh, stderr=subprocess.STDOUT)
        procs.append((proc, log))
        return proc

    def logs() -> str:
        return "\n".join(f"--- {log.name} (exit {proc.poll()}) ---\n{_tail(log)}" for proc, log in procs)

    try:
        scheduler_file = folder / "scheduler.json"
        scheduler = spawn("scheduler", ["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
                                        "--dashboard-address", "127.0.0.1:0", "--scheduler-file", str(scheduler_file)])
        address, deadline = None, time.monotonic() + 60
        while address is None:
            if scheduler.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the dask scheduler did not start\n{logs()}")
            try:
                address = json.loads(scheduler_file.read_text())["address"]
            except (OSError, ValueError, KeyError):  # not written yet, or half-written
                time.sleep(0.1)
        for i in range(2):
            spawn(f"worker{i}", ["distributed.cli.dask_worker", address, "--host", "127.0.0.1", "--nworkers", "1",
                                 "--nthreads", "1", "--no-nanny", "--no-dashboard", "--death-timeout", "60",
                                 "--name", f"external-{i}"])
        with Client(address, timeout=30, set_as_default=False) as client:
            try:
                client.wait_for_workers(2, timeout=120)
            except Exception as exc:  # noqa: BLE001 - report the processes' own output
                pytest.fail(f"2 dask workers did not register ({exc})\n{logs()}")
        assert address.startswith("tcp://127.0.0.1:")
        yield address
    finally:
        _stop(procs)


@pytest.fixture(scope="module")
def local_reference() -> dict:
    return launch(_config(), runner="local", workers=2, out=None, blocking=True).wait()


def test_run_by_scheduler_address_matches_local(scheduler_address, local_reference, tmp_path):
    from distributed import Client

    handle = launch(_config(), runner="dask", workers=2, scheduler=scheduler_address, out=tmp_path, timeout=60)
    summary = handle.wait(180)
    assert handle.status == "finished" and summary["runner"] == "dask" and summary["world_size"] == 2
    assert_same_run(summary, local_reference)
    assert summary["bytes_per_epoch"] == local_reference["bytes_per_epoch"] > 0
    assert summary["bytes_by_kind"] == local_reference["bytes_by_kind"]
    assert handle.dashboard_link.startswith("http://127.0.0.1:")  # the external scheduler's dashboard
    # the ranks ran on the external cluster's two workers: both got the run's torch plugin
    with Client(scheduler_address, timeout=30, set_as_default=False) as client:
        plugged = client.run(lambda dask_worker: "workbench-torch" in dask_worker.plugins)
    assert len(plugged) == 2 and all(plugged.values()), plugged
    _, events = read_run_log(handle.log_dir)
    assert isinstance(events[-1], RunFinished) and events[-1].status == "finished"


def test_cli_run_with_scheduler_option(scheduler_address, local_reference, tmp_path):
    out = tmp_path / "runs"
    proc = subprocess.run(
        [sys.executable, "-m", "workbench", "run", "full_graph", "--runner", "dask", "--workers", "2",
         "--scheduler", scheduler_address, "--graph", GRAPH, "--epochs", str(EPOCHS), "--seed", str(SEED),
         "--set", f"model.hidden={HIDDEN}", "--timeout", "60", "--out", str(out), "--json"],
        cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=240,
        env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["runner"] == "dask" and summary["world_size"] == 2
    _close(summary["losses"], local_reference["losses"])
    (run_dir,) = list(out.iterdir())
    assert json.loads((run_dir / "config.json").read_text())["config"]["model"]["hidden"] == HIDDEN   # composed
    _, events = read_run_log(run_dir)
    assert isinstance(events[0], RunStarted) and events[0].runner == "dask" and events[0].world_size == 2
    assert isinstance(events[-1], RunFinished) and events[-1].status == "finished"


def test_unreachable_scheduler_is_one_quick_param_error(tmp_path):
    t0 = time.monotonic()
    handle = launch(_config(), runner="dask", workers=2, scheduler=NO_SCHEDULER, out=tmp_path)  # default timeout
    with pytest.raises(ParamError, match=r"^The 'scheduler' parameter of launch must be .*address of a running "
                                         r"Dask scheduler.* Got 'tcp://127\.0\.0\.1:1' instead\.$") as info:
        handle.wait(60)
    assert time.monotonic() - t0 < 25  # bounded at 10 s to connect (Dask alone retries for 30 s)
    assert len(info.value.errors) == 1 and "within 10 s" in str(info.value)
    _, events = read_run_log(handle.log_dir)
    assert events[-1].status == "failed" and "'scheduler' parameter" in events[-1].error

    # a malformed address fails at once, the same way
    bad = "tcp://127.0.0.1:notaport"
    handle = launch(_config(), runner="dask", workers=2, scheduler=bad, out=None, timeout=5)
    with pytest.raises(ParamError, match=r"'scheduler' parameter of launch .*within 5 s.* Got "
                                         r"'tcp://127\.0\.0\.1:notaport' instead"):
        handle.wait(30)
