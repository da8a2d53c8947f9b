"""Harness for training-program tests: tiny graphs and an in-process SPMD runner."""

from __future__ import annotations

import threading


import torch

from workbench.events import ListSink
from workbench.graph import Graph


def tiny_graph(num_nodes: int = 60, num_blocks: int = 3, p_in: float = 0.25, p_out: float = 0.02,
               num_features: int = 6, directed: bool = False, seed: int = 0) -> Graph:
    """A small planted-partition graph with community labels, noisy features and a 50/25/25 split."""
    gen = torch.Generator().manual_seed(seed)
    block = torch.arange(num_nodes) % num_blocks
    same = block[:, None] == block[None, :]
    prob = torch.where(same, torch.tensor(p_in), torch.tensor(p_out))
    adj = torch.rand(num_nodes, num_nodes, generator=gen) < prob
    adj.fill_diagonal_(False)
    if not directed:
        adj = torch.triu(adj, 1)
        adj = adj | adj.T
    dst, src = adj.nonzero(as_tuple=True)
    feats = torch.randn(num_nodes, num_features, generator=gen) + torch.nn.functional.one_hot(
        block, num_features).float() * 1.5
    perm = torch.randperm(num_nodes, generator=gen)
    train = torch.zeros(num_nodes, dtype=torch.bool)
    val = torch.zeros_like(train)
    test = torch.zeros_like(train)
    train[perm[: num_nodes // 2]] = True
    val[perm[num_nodes // 2: 3 * num_nodes // 4]] = True
    test[perm[3 * num_nodes // 4:]] = True
    return Graph.from_edges(src, dst, num_nodes, directed=directed, features=feats, labels=block,
                            train_mask=train, val_mask=val, test_mask=test, name="tiny")


def run_inprocess(program, world_size: int):
    """prepare -> run_rank on ``world_size`` thread ranks -> summarize. Returns (summary, results, events)."""
    from workbench.runtime.runners import RunEnv, run_inprocess as run_ranks

    sink = ListSink()
    payloads = program.prepare(world_size, sink.emit)
    env = RunEnv(run_id="t", world_size=world_size, emit=sink.emit, stop_flag=threading.Event(), timeout_s=60,
                 device="cpu")
    results = [o.result for o in sorted(run_ranks(program, payloads, env), key=lambda o: o.rank)]
    return program.summarize(results), results, sink.events


def rel_error(a: torch.Tensor, b: torch.Tensor) -> float:
    """``|a - b| / |b|`` (Frobenius), guarded against ``b = 0``."""
    return float((a - b).norm() / max(float(b.norm()), 1e-12))


def assert_same_training(single, multi, tol=1e-5):
    """Losses and every rank's weights of ``multi`` equal ``single``'s (``run_inprocess`` results) to ``tol``."""
    (s1, r1, _), (sp, rp, _) = single, multi
    for a, b in zip(sp["losses"], s1["losses"]):
        assert abs(a - b) <= tol * abs(b)
    for name, ref in r1[0]["params"].items():
        for r in rp:
            assert rel_error(r["params"][name], ref) <= tol, name
