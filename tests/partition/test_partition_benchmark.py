"""The partition benchmark runs (a smoke test on a small graph; it asserts structure, never speed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

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
