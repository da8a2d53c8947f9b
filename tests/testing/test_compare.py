"""Comparing two runs' models (workbench.testing.compare): by the weights' size, so that a comparison passes on
any CPU where the weights agree, and fails where they do not."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from workbench.compose import RunConfig
from workbench.testing import assert_same_run, assert_same_weights, run_program, tiny_graph, weight_checksums


def _summary(**weights: torch.Tensor) -> dict:
    """A summary's checksums as the recorder writes them ([Σ w, Σ w², Σ |w|] in float64)."""
    return {"param_checksums": {k: [float(w.double().sum()), float(w.double().pow(2).sum()),
                                    float(w.double().abs().sum())] for k, w in weights.items()}}


@pytest.fixture
def cancelling() -> torch.Tensor:
    """Weights of both signs whose sum is 1e-4 of their mass, as trained weights are (0.068 of terms ~0.1)."""
    v = torch.rand(2000, generator=torch.Generator().manual_seed(0)) * 0.2
    w = torch.cat([v, -v])
    w[0] += 1e-4 * float(w.abs().sum())
    return w


def test_rounding_noise_passes_where_a_relative_tolerance_on_the_sum_fails(cancelling):
    """The failure a fresh AMD machine showed: each weight off by 1e-6 of itself (another SIMD width or BLAS) moves
    the cancelling sum by 1e-2 of itself. A relative tolerance on [sum, sum of squares] fails; the norm rule passes."""
    noisy = cancelling + 1e-6 * cancelling.abs()
    a, b = _summary(w=noisy), _summary(w=cancelling)
    with pytest.raises(AssertionError):   # what a dozen tests did until now
        np.testing.assert_allclose(a["param_checksums"]["w"][:2], b["param_checksums"]["w"][:2], rtol=1e-5, atol=1e-7)
    assert_same_weights(a, b, rtol=1e-5)


def test_a_real_difference_fails_and_names_the_weight(cancelling):
    moved = cancelling.clone()
    moved[7] += 1e-3 * float(cancelling.abs().sum())       # one weight moved by 1e-3 of the tensor's mass
    with pytest.raises(AssertionError, match=r"weights 'layer.0': sum .* > 1e-05 x sum\|w\|"):
        assert_same_weights(_summary(**{"layer.0": moved}), _summary(**{"layer.0": cancelling}))
    with pytest.raises(AssertionError, match="different weights"):
        assert_same_weights(_summary(a=cancelling), _summary(b=cancelling))


def test_rtol_zero_is_bit_for_bit(cancelling):
    run = {"losses": [0.9, 0.7], **_summary(w=cancelling)}
    assert_same_run(run, run, rtol=0)
    nudged = {"losses": [0.9, 0.7], **_summary(w=torch.nextafter(cancelling, torch.tensor(1.0)))}
    with pytest.raises(AssertionError):
        assert_same_run(nudged, run, rtol=0)
    with pytest.raises(AssertionError, match="loss of epoch 1"):
        assert_same_run({**run, "losses": [0.9, 0.7000001]}, run, rtol=1e-8)


def test_a_run_summary_carries_the_three_checksums_of_its_weights():
    cfg = RunConfig.compose(graph="tiny", epochs=2, model={"hidden": 4}, seed=0)
    summary, results, _ = run_program(cfg.build(graph=tiny_graph()), 1)
    sums = weight_checksums(summary)
    assert sums.keys() == results[0]["params"].keys()
    for name, w in results[0]["params"].items():
        w = w.double()
        assert sums[name] == [float(w.sum()), float(w.pow(2).sum()), float(w.abs().sum())]
    with pytest.raises(ValueError, match="sum of squares, sum\\|w\\|"):
        weight_checksums({"param_checksums": {"w": [0.1, 2.0]}})   # a summary from before Σ|w| was recorded
