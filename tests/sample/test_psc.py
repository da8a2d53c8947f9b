"""The full-graph edge samplers of PSC-GCN (workbench.sample.psc): Eq. 19, Eq. 16, inclusion probabilities."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from workbench.sample import SAMPLERS
from workbench.sample.psc import PartEdges, estimator_variance, kkt_probabilities, segment_sum


def _edges(num_inner=30, num_halo=40, deg=12, seed=0) -> PartEdges:
    """Every inner target: a self-loop plus ``deg`` distinct random sources among inner and halo slots."""
    gen = torch.Generator().manual_seed(seed)
    n = num_inner + num_halo
    src = torch.stack([torch.randperm(n, generator=gen)[:deg] for _ in range(num_inner)])    # (num_inner, deg)
    tgt = torch.arange(num_inner).repeat_interleave(deg)
    src = src.flatten()
    keep = src != tgt
    tgt = torch.cat([tgt[keep], torch.arange(num_inner)])
    src = torch.cat([src[keep], torch.arange(num_inner)])
    w = torch.rand(tgt.numel(), generator=gen) * 0.5 + 0.05
    return PartEdges(target=tgt, source=src, weight=w, num_inner=num_inner, num_halo=num_halo)


def test_kkt_solution_is_the_constrained_optimum():
    scipy = pytest.importorskip("scipy.optimize")
    rng = np.random.default_rng(1)
    for _ in range(6):
        n = int(rng.integers(3, 12))
        s = rng.random(n) ** 3 + 0.01
        budget = float(rng.uniform(0.5, n - 0.1))
        p = kkt_probabilities(torch.zeros(n, dtype=torch.long), torch.tensor(s), torch.tensor([budget], dtype=torch.float64)).numpy()
        assert p.sum() == pytest.approx(budget, rel=1e-9) and (p > 0).all() and (p <= 1 + 1e-12).all()
        f = lambda q: float((s ** 2 * (1 / q - 1)).sum())
        ref = scipy.minimize(f, np.full(n, budget / n), bounds=[(1e-6, 1)] * n, method="SLSQP",
                             constraints=[{"type": "eq", "fun": lambda q: q.sum() - budget}])
        assert f(p) <= ref.fun + 1e-6


def test_many_targets_at_once_equal_one_at_a_time():
    gen = torch.Generator().manual_seed(3)
    seg = torch.randint(0, 7, (80,), generator=gen)
    s = torch.rand(80, generator=gen, dtype=torch.float64) + 0.01
    budget = torch.bincount(seg, minlength=7).to(torch.float64) * 0.3
    p = kkt_probabilities(seg, s, budget)
    for i in range(7):
        m = seg == i
        alone = kkt_probabilities(torch.zeros(int(m.sum()), dtype=torch.long), s[m], budget[i:i + 1])
        assert torch.allclose(p[m], alone)


@pytest.mark.parametrize("name", ["psc", "uniform_edge", "nodewise", "bns"])
def test_epsilon_one_keeps_every_edge_with_its_weight(name):
    e = _edges()
    s = SAMPLERS.build(name, epsilon=1.0)
    p = s.probabilities(e, torch.ones(e.num_inner + e.num_halo))
    keep = s.draw(e, p, 0, 0)
    assert bool(keep.all()) and torch.equal(s.weights(e, p, keep), e.weight.float())
    assert torch.equal(s.inclusion(e, p), (torch.bincount(e.source[e.boundary] - e.num_inner,
                                                           minlength=e.num_halo) > 0).double())


def _y_sq(e: PartEdges, h: torch.Tensor) -> torch.Tensor:
    return e.weight.double() ** 2 * h[e.source]


def test_empirical_variance_matches_eq16_and_beats_uniform():
    """Var over repeated draws of Z_i = sum_j chi_j / p_ij P_ij H_j W (one layer, fixed H W) against Eq. 16."""
    e = _edges(seed=2)
    gen = torch.Generator().manual_seed(5)
    hw = torch.randn(e.num_inner + e.num_halo, 4, generator=gen, dtype=torch.float64) \
        * torch.rand(e.num_inner + e.num_halo, 1, generator=gen, dtype=torch.float64) * 3   # (n, F): rows of H W
    h = hw.pow(2).sum(1)                                                                    # h_j = ||H_j W||^2
    exact = torch.zeros(e.num_inner, 4, dtype=torch.float64).index_add_(0, e.target, e.weight.double()[:, None] * hw[e.source])
    out = {}
    for name in ("psc", "uniform_edge"):
        s = SAMPLERS.build(name, epsilon=0.3, a_inner=1.0, delta=0.0) if name == "psc" else SAMPLERS.build(name, epsilon=0.3)
        p = s.probabilities(e, h)
        other = ~e.self_loop
        assert float(segment_sum(p[other], e.target[other], e.num_inner).sum()) == pytest.approx(
            0.3 * float(e.degrees().sum()), rel=1e-9)                                       # budget eps |N_i|
        draws = 3000
        sq = torch.zeros(e.num_inner, dtype=torch.float64)
        for d in range(draws):
            keep = s.draw(e, p, d, 0)
            w = s.weights(e, p, keep).double()
            z = torch.zeros(e.num_inner, 4, dtype=torch.float64).index_add_(0, e.target, w[:, None] * hw[e.source])
            sq += (z - exact).pow(2).sum(1)
        empirical = float(sq.sum()) / draws
        analytic = float(estimator_variance(e, p, _y_sq(e, h)).sum())
        assert empirical == pytest.approx(analytic, rel=0.08)
        out[name] = analytic
    assert out["psc"] < out["uniform_edge"]


def test_expected_boundary_rows_match_the_realised_mean():
    e = _edges(seed=4)
    h = torch.rand(e.num_inner + e.num_halo, dtype=torch.float64) + 0.1
    for name in ("psc", "uniform_edge", "nodewise", "bns"):
        s = SAMPLERS.build(name, epsilon=0.2)
        p = s.probabilities(e, h)
        expected = float(s.inclusion(e, p).sum())
        realised = np.mean([int(e.sampled_boundary(s.draw(e, p, d, 1)).sum()) for d in range(1500)])
        assert realised == pytest.approx(expected, rel=0.03), name


def test_inner_priority_moves_probability_to_inner_sources():
    e = _edges(seed=6)
    h = torch.ones(e.num_inner + e.num_halo, dtype=torch.float64)
    base = SAMPLERS.build("psc", epsilon=0.3, a_inner=1.0)
    favoured = SAMPLERS.build("psc", epsilon=0.3, a_inner=4.0)
    assert float(favoured.inclusion(e, favoured.probabilities(e, h)).sum()) < \
        float(base.inclusion(e, base.probabilities(e, h)).sum())


def test_nodewise_keeps_exactly_k_and_bns_keeps_every_inner_edge():
    e = _edges(seed=7)
    s = SAMPLERS.build("nodewise", epsilon=0.25)
    keep = s.draw(e, s.probabilities(e), 3, 0)
    other = ~e.self_loop
    kept = torch.bincount(e.target[keep & other], minlength=e.num_inner)
    assert torch.equal(kept, torch.clamp(torch.round(0.25 * e.degrees().double()), min=1).long())
    b = SAMPLERS.build("bns", epsilon=0.25)
    keep = b.draw(e, b.probabilities(e), 3, 0)
    assert bool(keep[~e.boundary].all()) and 0 < int(keep[e.boundary].sum()) < int(e.boundary.sum())


def test_draws_are_seeded_and_weights_unbiased():
    e = _edges(seed=8)
    s = SAMPLERS.build("psc", epsilon=0.4, seed=3)
    gen = torch.Generator().manual_seed(0)   # not the global generator: earlier tests must not change the draw
    p = s.probabilities(e, torch.rand(e.num_inner + e.num_halo, dtype=torch.float64, generator=gen))
    assert torch.equal(s.draw(e, p, 5, 2), SAMPLERS.build("psc", epsilon=0.4, seed=3).draw(e, p, 5, 2))
    assert not torch.equal(s.draw(e, p, 5, 2), s.draw(e, p, 6, 2))
    mean = torch.stack([s.weights(e, p, s.draw(e, p, d, 0)).double() for d in range(2000)]).mean(0)
    assert torch.allclose(mean, e.weight.double(), rtol=0.25, atol=0.02)
