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
    # a flag nothing would read is refused, not ignored; a malformed --khop before the partition is printed
    (["--parts", "2", "--directed"], "'--directed' parameter of workbench partition must be False (its default) "
                                     "without --stream"),
    (["--parts", "2", "--chunk-edges", "5"], "'--chunk-edges' parameter"),
    (["--parts", "2", "--bucket-edges", "0"], "'--bucket-edges' parameter of workbench partition must be 8388608 "
                                              "(its default) without --stream --with-features or --folder"),
    (["--parts", "2", "--halo-features", "reference"], "'--halo-features' parameter"),
    (["--parts", "2", "--khop", "a"], "'--khop' parameter of workbench partition must be fan-outs such as 10,10"),
    (["--parts", "2", "--khop", "0,0"], "Got '0,0' instead"),
    (["--parts", "2", "--method", "hdrf", "--khop", "10,10"], "must be used with an in-memory edge-cut partition"),
    (["--parts", "2", "--stream", "--khop", "10,10"], "'--khop' parameter"),
    (["--parts", "2", "--stream", "--feature-width", "8"], "'--feature-width' parameter"),
])
def test_errors_exit_2_with_one_message(capsys, argv, message):
    assert main(["partition", "karate", *argv]) == 2
    out, err = capsys.readouterr()
    assert message in err and "Traceback" not in err and out == ""


@pytest.mark.parametrize("argv,flag", [
    (["partition", "karate", "--parts", "2", "--out", "{file}"], "--out"),
    (["partition", "karate", "--parts", "2", "--folder", "{file}"], "--folder"),
    (["partition", "karate", "--parts", "2", "--folder", "{file}/sub"], "--folder"),
    (["export-distdgl", "karate", "--parts", "2", "--out", "{file}"], "--out"),
])
def test_out_folder_that_is_a_file_is_refused_before_loading(tmp_path, capsys, monkeypatch, argv, flag):
    afile = tmp_path / "afile"
    afile.write_text("")

    def no_loading(*args, **kwargs):
        raise AssertionError("the graph was loaded before the arguments were checked")

    monkeypatch.setattr("workbench.data.load_graph", no_loading)
    argv = [a.replace("{file}", str(afile)) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"The '{flag}' parameter of workbench {argv[0]} must be a folder" in err and str(afile) in err
    assert "Traceback" not in err and err.count("error:") == 1
    assert afile.is_file() and afile.read_text() == ""


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
