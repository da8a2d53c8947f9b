"""The halo exchange plan and its autograd exchange."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from workbench.communicate.inprocess import InProcessGroup
from workbench.testing import tiny_graph
from workbench.layout.halo import (build_halo_plans, comm_rows_from_parts, local_index, predicted_halo_bytes)


def _parts(n: int, p: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, p, (n,), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("directed", [False, True])
def test_plan_matches_in_neighbours(directed):
    g = tiny_graph(directed=directed)
    part = _parts(g.num_nodes, 3)
    plans = build_halo_plans(g, part, 3)
    src, dst = g.edges()
    for plan in plans:
        r = plan.rank
        assert torch.equal(plan.inner_gid, (part == r).nonzero().flatten())
        need = torch.unique(src[(part[dst] == r) & (part[src] != r)])
        assert torch.equal(torch.sort(plan.halo_gid).values, need)
        assert torch.equal(part[plan.halo_gid], plan.halo_owner)
        # what rank q sends to r is exactly r's halo slice owned by q, in the same order
        for q in range(3):
            if q == r:
                continue
            sent = plans[q].inner_gid[plans[q].send_local_nid[r]]
            off = plan.recv_offsets
            assert torch.equal(sent, plan.halo_gid[off[q]:off[q + 1]])


def test_comm_rows_match_partition_stage():
    from workbench.partition import partition

    g = tiny_graph()
    result = partition(g, 3, method="random", seed=0)
    ours = comm_rows_from_parts(g, torch.as_tensor(result.node_part), 3)
    np.testing.assert_array_equal(ours, np.asarray(result.comm_rows_matrix()))


def test_local_index():
    part = torch.tensor([1, 0, 1, 0, 2])
    assert local_index(part, 3).tolist() == [0, 0, 1, 1, 0]


def test_predicted_bytes_formula():
    assert predicted_halo_bytes(10, [6, 16]) == {"halo_fwd": 10 * 22 * 4, "halo_bwd": 10 * 16 * 4,
                                                 "total": 10 * 38 * 4}


def test_exchange_forward_and_transposed_backward():
    """Gradients of the halo rows land on their owners (the transpose of the forward pattern)."""
    g = tiny_graph(directed=True)
    part = _parts(g.num_nodes, 2)
    plans = build_halo_plans(g, part, 2)
    group = InProcessGroup(2, timeout=30)
    x_global = torch.randn(g.num_nodes, 3, generator=torch.Generator().manual_seed(0))
    weight_global = torch.randn(g.num_nodes, 3, generator=torch.Generator().manual_seed(1))
    grads = [None, None]

    def body(rank):
        plan = plans[rank]
        comm = group.communicator(rank)
        h = x_global[plan.inner_gid].clone().requires_grad_(True)
        full = plan.exchange(h, comm, layer=1)
        gids = torch.cat([plan.inner_gid, plan.halo_gid])
        assert torch.equal(full.detach(), x_global[gids])
        (full * weight_global[gids]).sum().backward()
        grads[rank] = (plan.inner_gid, h.grad)

    ts = [threading.Thread(target=body, args=(r,)) for r in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    # d/dx_v of sum over all replicas of x_v * w_v = w_v times (1 + number of parts holding v as halo)
    copies = torch.ones(g.num_nodes)
    for plan in plans:
        copies[plan.halo_gid] += 1
    for gids, grad in grads:
        torch.testing.assert_close(grad, weight_global[gids] * copies[gids, None])
