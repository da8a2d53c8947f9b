"""The sampling benchmark runs (a smoke test on a small graph; it asserts structure, never speed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from workbench.sample import dgl_available

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "sampling.py"


def test_benchmark_quick_run(capsys):
    spec = importlib.util.spec_from_file_location("sampling_benchmark", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = module.main(["--quick"])
    res = out["results"]["workbench"]
    assert res["seeds_per_s"] > 0 and res["sampled_edges"] > 0
    if dgl_available():
        assert {"dgl.sampling", "dgl DataLoader"} <= set(out["results"])
        assert out["ratio_vs_dgl.sampling"] > 0
        # the same batches and fan-outs: the edge counts agree up to sampling noise
        assert abs(out["results"]["dgl.sampling"]["sampled_edges"] - res["sampled_edges"]) < 0.05 * res["sampled_edges"]
    assert "workbench" in capsys.readouterr().out
