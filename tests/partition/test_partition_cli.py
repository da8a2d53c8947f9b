"""``workbench partition`` and ``workbench export-distdgl``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from workbench.cli import main

KEYS = ["num_nodes", "num_edges", "num_parts", "edge_cut", "cut_ratio", "replication_factor", "vertex_balance",
        "edge_balance", "comm_volume_rows", "max_part_comm_volume_rows", "num_messages"]


def test_partition_prints_a_table(capsys):
    assert main(["partition", "karate", "--parts", "3", "--method", "random"]) == 0
    out = capsys.readouterr().out
    assert "edge_cut" in out and "replication_factor" in out and "halo" in out


def test_partition_json_and_out(tmp_path, capsys):
    rc = main(["partition", "karate", "--parts", "2", "--method", "metis", "--seed", "1", "--json",
               "--out", str(tmp_path / "p")])
    assert rc == 0
    d = json.loads(capsys.readouterr().out)
    assert all(k in d for k in KEYS) and d["num_nodes"] == 34 and d["num_parts"] == 2
    a = np.load(tmp_path / "p" / "assignment.npy")
    assert a.dtype == np.int64 and a.shape == (34,) and set(a.tolist()) == {0, 1}
    assert json.loads((tmp_path / "p" / "metrics.json").read_text())["edge_cut"] == d["edge_cut"]


def test_partition_set_option(capsys):
    assert main(["partition", "karate", "--parts", "2", "--json", "--set", "balance_train=true",
                 "--set", "imbalance=0.05"]) == 0
    assert json.loads(capsys.readouterr().out)["num_parts"] == 2


@pytest.mark.parametrize("argv,message", [
    (["--parts", "50"], "num_nodes=34"),
    (["--parts", "0"], "'--parts' parameter"),
    (["--parts", "2", "--method", "metys"], "did you mean 'metis'"),
    (["--parts", "2", "--set", "bogus=1"], "has no option 'bogus'"),
    (["--parts", "2", "--set", "imbalance=lots"], "'imbalance' parameter"),
])
def test_errors_exit_2_with_one_message(capsys, argv, message):
    assert main(["partition", "karate", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_help_on_every_subcommand(capsys):
    for cmd in ("partition", "export-distdgl"):
        with pytest.raises(SystemExit) as info:
            main([cmd, "--help"])
        assert info.value.code == 0
        assert "--parts" in capsys.readouterr().out


def test_export_distdgl_command(tmp_path, capsys):
    try:
        import dgl
    except Exception:
        pytest.skip("DGL does not import")
    rc = main(["export-distdgl", "karate", "--parts", "2", "--method", "metis", "--out", str(tmp_path)])
    assert rc == 0 and "wrote" in capsys.readouterr().out
    config = tmp_path / "karate.json"
    for p in range(2):
        part_g = dgl.distributed.load_partition(str(config), p)[0]
        assert int(part_g.ndata["inner_node"].sum()) > 0
