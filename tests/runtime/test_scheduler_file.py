"""A Dask cluster found through its scheduler file (``workbench run --scheduler-file FILE``,
``launch(scheduler_file=...)``), the way MPI, dask-jobqueue's ``SLURMRunner`` or a hand-started cluster hands
it over.

Everywhere: a file that is missing, not a file, not JSON or without an address, a scheduler given both ways, or
a file with a non-Dask runner is refused before anything starts (no run folder, no worker), naming the parameter
and the value. As root, on the emulated cluster (network namespaces, links shaped with tbf): the scheduler writes
the file, the workers find the scheduler through it, and ``workbench run full_graph --scheduler-file F --workers
2 --json`` trains across the two hosts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest

from workbench._validation import ParamError
from workbench.cli import main
from workbench.runtime import launch
from workbench.runtime.netcluster import NetCluster, parse_rate, unavailable_reason

ROOT = Path(__file__).resolve().parents[2]
GRAPH = "sbm:num_nodes=3000,num_blocks=4,avg_degree=10,num_features=64,seed=0"


def _config():
    from recipes import full_graph

    return full_graph.recipe(graph="karate", epochs=2)


@pytest.fixture
def bad_files(tmp_path):
    (tmp_path / "not-json.json").write_text("tcp://10.0.0.1:8786\n")
    (tmp_path / "no-address.json").write_text(json.dumps({"type": "Scheduler", "id": "x"}))
    (tmp_path / "folder.json").mkdir()
    return {"missing": (tmp_path / "missing.json", "that exists"),
            "folder": (tmp_path / "folder.json", "that is a file"),
            "not-json": (tmp_path / "not-json.json", "that parses as JSON"),
            "no-address": (tmp_path / "no-address.json", "holds a string 'address'")}


@pytest.mark.parametrize("case", ["missing", "folder", "not-json", "no-address"])
def test_a_bad_scheduler_file_is_refused_before_anything_starts(case, bad_files, tmp_path):
    path, why = bad_files[case]
    out = tmp_path / "runs"
    with pytest.raises(ParamError, match=r"^The 'scheduler_file' parameter of launch must be a Dask scheduler file") as e:
        launch(_config(), runner="dask", workers=2, scheduler_file=path, out=out)
    assert why in str(e.value) and f"Got {str(path)!r} instead" in str(e.value)
    assert not out.exists()   # no run log: the run never started


def test_the_cli_names_the_option_and_the_value(bad_files, tmp_path, capsys):
    path, _ = bad_files["missing"]
    out = tmp_path / "runs"
    assert main(["run", "full_graph", "--scheduler-file", str(path), "--workers", "2", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "The '--scheduler-file' parameter of workbench run must be a Dask scheduler file" in err, err
    assert f"Got {str(path)!r} instead" in err and not out.exists()


def test_scheduler_and_scheduler_file_together_are_refused(bad_files, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["run", "full_graph", "--scheduler", "tcp://127.0.0.1:8786", "--scheduler-file", "s.json"])
    assert e.value.code == 2
    assert "argument --scheduler-file: not allowed with argument --scheduler" in capsys.readouterr().err
    path, _ = bad_files["no-address"]
    assert main(["run", "full_graph", "--runner", "local", "--scheduler-file", str(path)]) == 2
    assert ("The '--runner' parameter of workbench run must be 'dask' (or left out) when --scheduler or "
            "--scheduler-file is given. Got 'local' instead.") in capsys.readouterr().err
    with pytest.raises(ParamError, match=r"'scheduler_file' parameter of launch must be None when a scheduler is "
                                         r"given .* Got .*no-address\.json' instead"):
        launch(_config(), runner="dask", scheduler="tcp://127.0.0.1:8786", scheduler_file=path, out=None)
    with pytest.raises(ParamError, match=r"'scheduler_file' parameter of launch must be None unless runner='dask'"):
        launch(_config(), runner="local", scheduler_file=path, out=None)


def test_a_file_whose_scheduler_does_not_answer_is_one_param_error(tmp_path):
    path = tmp_path / "scheduler.json"
    path.write_text(json.dumps({"address": "tcp://127.0.0.1:1", "type": "Scheduler"}))   # nothing listens there
    handle = launch(_config(), runner="dask", workers=2, scheduler_file=path, out=None, timeout=3)
    with pytest.raises(ParamError, match=r"'scheduler_file' parameter of launch must be the file of a running Dask "
                                         r"scheduler; the one it names, tcp://127\.0\.0\.1:1, did not answer"):
        handle.wait(60)


@pytest.mark.skipif(unavailable_reason() is not None, reason=unavailable_reason() or "")
def test_a_cli_run_finds_the_emulated_cluster_through_its_scheduler_file(tmp_path):
    out = tmp_path / "runs"
    with NetCluster(hosts=2, bandwidth="100mbit", scheduler_file=True) as cluster:
        assert json.loads(cluster.scheduler_file.read_text())["address"] == cluster.scheduler_address
        proc = subprocess.run(
            [sys.executable, "-m", "workbench", "run", "full_graph", "--scheduler-file", str(cluster.scheduler_file),
             "--workers", "2", "--json", "--graph", GRAPH, "--epochs", "3", "--timeout", "30", "--out", str(out)],
            cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
            env=dict(os.environ, OMP_NUM_THREADS="1", TQDM_DISABLE="1"))
        assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
        from distributed import Client

        with Client(scheduler_file=str(cluster.scheduler_file), timeout=10, set_as_default=False) as client:
            plugged = client.run(lambda dask_worker: "workbench-torch" in dask_worker.plugins)
    s = json.loads(proc.stdout.strip().splitlines()[-1])
    # the ranks ran on the two emulated hosts' workers (the run's torch plugin is on both, and only there) ...
    assert sorted(urlparse(a).hostname for a in plugged) == sorted(h.address for h in cluster.hosts), plugged
    assert all(plugged.values()), plugged
    assert s["runner"] == "dask" and s["world_size"] == 2 and s["process_group"] == "gloo on cpu"
    assert len(s["losses"]) == 3 and s["bytes_per_epoch"] == s["predicted_bytes_per_epoch"] > 0
    # ... and their halo exchange crossed the 100 Mbit/s links: each rank sends half the epoch's bytes through
    # its own link, which loopback would do in a fraction of that time
    bound = s["bytes_per_epoch"] / 2 * 8 / parse_rate("100mbit")
    assert max(s["comm_s"][1:]) >= 0.9 * bound, (s["comm_s"], bound)
    (run_dir,) = list(out.iterdir())
    assert json.loads((run_dir / "config.json").read_text())["recipe"] == "full_graph"
