"""The partition benchmark runs (a smoke test on a small graph; it asserts structure, never speed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "partition.py"


def test_benchmark_quick_run(capsys):
    spec = importlib.util.spec_from_file_location("partition_benchmark", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = module.main(["--quick", "--parts", "4"])
    assert out["ratio_vs_pymetis"]["pymetis (raw)"] == 1.0
    assert "workbench metis" in out["median_s"] and out["metrics_s"] > 0
    assert out["metrics"]["num_parts"] == 4
    assert "workbench overhead over raw pymetis" in capsys.readouterr().out


def test_benchmark_only_kaminpar_reports_ratios(capsys):
    pytest.importorskip("kaminpar")
    spec = importlib.util.spec_from_file_location("partition_benchmark", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = module.main(["--quick", "--parts", "4", "--only-kaminpar", "--kaminpar-threads", "1"])
    (name, k), = out["kaminpar"].items()
    assert set(out["best_s"]) == {"pymetis (raw)", name}
    assert k["time_ratio"] > 0 and 0 < k["cut_ratio"] < 2 and k["metis_edge_cut"] == out["metis_edge_cut"]
    assert "KaMinPar against raw pymetis" in capsys.readouterr().out
