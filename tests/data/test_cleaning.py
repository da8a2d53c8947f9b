from __future__ import annotations

import numpy as np
import pytest
import torch

from workbench.data.cleaning import CleaningReport, clean_graph, symmetrize
from workbench.graph import Graph


def _edge_set(g: Graph) -> list[tuple[int, int]]:
    s, d = g.edges()
    return sorted(zip(s.tolist(), d.tolist()))


def _brute(edges: list[tuple[int, int]], remove_self_loops: bool, dedupe: bool, sym: bool):
    loops = sum(1 for s, d in edges if s == d) if remove_self_loops else 0
    kept = [(s, d) for s, d in edges if not (remove_self_loops and s == d)]
    dups = 0
    if dedupe:
        dups = len(kept) - len(set(kept))
        kept = sorted(set(kept))
    added = []
    if sym:
        present = set(kept)
        added = sorted({(d, s) for s, d in kept if (d, s) not in present})
    return loops, dups, len(added), sorted(kept + added)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("flags", [(True, True, True), (True, True, False), (False, True, True),
                                   (True, False, False), (True, False, True), (False, False, False)])
def test_counts_match_brute_force(seed, flags):
    rng = np.random.default_rng(seed)
    n, m = 12, 60
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    g = Graph.from_edges(src, dst, num_nodes=n, labels=torch.arange(n))
    out, rep = clean_graph(g, remove_self_loops=flags[0], dedupe=flags[1], symmetrize=flags[2])
    loops, dups, added, expected = _brute(list(zip(src.tolist(), dst.tolist())), *flags)
    assert (rep.self_loops_removed, rep.duplicates_removed, rep.edges_added_by_symmetrization) == (loops, dups, added)
    assert rep.edges_in == m and rep.edges_out == out.num_edges == len(expected)
    assert _edge_set(out) == expected
    assert out.directed == (not flags[2])
    assert torch.equal(out.labels, g.labels)  # node data kept
    deg = np.bincount(np.array([s for s, _ in expected] + [d for _, d in expected], dtype=np.int64), minlength=n)
    assert rep.num_isolated_nodes == int((deg == 0).sum())


def test_report_repr_and_dict():
    g = Graph.from_edges(torch.tensor([0, 0, 1]), torch.tensor([0, 1, 1]), num_nodes=3, name="tiny")
    _, rep = clean_graph(g)
    assert isinstance(rep, CleaningReport)
    assert rep.changed
    text = str(rep)
    assert "self-loops removed 2" in text and "tiny" in text
    assert rep.to_dict()["edges_out"] == 2
    assert "<table>" in rep._repr_html_()


def test_clean_graph_is_idempotent(random_graph):
    g = random_graph(50, 200, seed=1)
    again, rep = clean_graph(g)
    assert not rep.changed
    assert torch.equal(again.indptr, g.indptr) and torch.equal(again.indices, g.indices)


def test_symmetrize_arrays():
    s, d = symmetrize(torch.tensor([0, 0, 2]), torch.tensor([1, 1, 2]), 3)
    assert sorted(zip(s.tolist(), d.tolist())) == [(0, 1), (1, 0), (2, 2)]
    s, d = symmetrize(np.array([0, 0]), np.array([1, 1]), 2, dedupe=False)
    assert sorted(zip(s.tolist(), d.tolist())) == [(0, 1), (0, 1), (1, 0)]


def test_empty_graph():
    g = Graph.from_edges(torch.tensor([], dtype=torch.int64), torch.tensor([], dtype=torch.int64), num_nodes=4)
    out, rep = clean_graph(g)
    assert out.num_nodes == 4 and out.num_edges == 0 and rep.num_isolated_nodes == 4
