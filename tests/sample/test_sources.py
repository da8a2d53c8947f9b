"""Owner-routed sampling (DistDGL) equals local sampling edge for edge, and its traffic is counted exactly."""

from __future__ import annotations

import pickle
import socket

import pytest
import torch

from workbench.partition import partition
from workbench.sample import SAMPLERS, LocalSource, OwnerRoutedSource, split_seeds
from workbench.sample.base import block_samplers
from workbench.sample.epoch import run_thread_ranks, sample_epoch
from workbench.testing import build_sampler, check_minibatch, same_minibatch

EXACT = [m for m in block_samplers() if SAMPLERS[m].exact_routing]


def _setup(g, world, method="neighbor", **options):
    node_part = partition(g, world, method="random", seed=1).node_part
    sampler = build_sampler(method, **{"fanouts": (3, 2, 2), "batch_size": 16, "seed": 4, **options})
    split = split_seeds(torch.nonzero(g.train_mask).flatten(), node_part, world)
    return node_part, sampler, split


@pytest.mark.parametrize("method", EXACT)
@pytest.mark.parametrize("world", [1, 2, 3])
@pytest.mark.parametrize("replace", [False, True])
def test_owner_routed_equals_local(small_sbm, method, world, replace):
    node_part, sampler, split = _setup(small_sbm, world, method, replace=replace)
    stats, kept = sample_epoch(small_sbm, node_part, sampler, split, epoch=2, keep=True)
    local = LocalSource(small_sbm)
    steps = split.num_steps(16)
    for r in range(world):
        assert len(kept[r]) == steps and stats[r].num_batches == steps
        for step, mb in enumerate(kept[r]):
            ref = sampler.sample(mb.seeds, local, epoch=2, step=step)
            assert same_minibatch(mb, ref), (r, step)
            check_minibatch(mb, small_sbm, sampler.config.fanouts, replace)


@pytest.mark.parametrize("method", block_samplers())
def test_owner_routed_blocks_are_well_formed_for_every_method(small_sbm, method):
    node_part, sampler, split = _setup(small_sbm, 2, method)
    _, kept = sample_epoch(small_sbm, node_part, sampler, split, keep=True)
    for mbs in kept:
        for mb in mbs:
            check_minibatch(mb, small_sbm, sampler.config.fanouts, False)


@pytest.mark.parametrize("world", [2, 3])
def test_request_and_response_bytes_are_exact(small_sbm, world):
    """sample_req: 8 bytes per frontier id owned elsewhere (counted by the requester); sample_resp: 16 bytes per
    edge returned to another rank (counted by the owner). Local requests cost nothing."""
    node_part, sampler, split = _setup(small_sbm, world)
    stats, kept = sample_epoch(small_sbm, node_part, sampler, split, keep=True)
    req = [0] * world
    resp = [0] * world
    for r in range(world):
        for mb in kept[r]:
            for b in mb.blocks:
                owner_dst = node_part[b.dst_gid]
                req[r] += 8 * int((owner_dst != r).sum())
                edge_owner = owner_dst[b.edge_dst]
                for q in range(world):
                    if q != r:
                        resp[q] += 16 * int((edge_owner == q).sum())
    for r in range(world):
        assert stats[r].bytes_by_kind.get("sample_req", 0) == req[r]
        assert stats[r].bytes_by_kind.get("sample_resp", 0) == resp[r]
    assert sum(req) > 0 and sum(resp) > 0


def test_every_rank_calls_the_collectives_even_without_seeds(small_sbm):
    """A part without training vertices still takes part in every step (empty requests)."""
    node_part = (torch.arange(small_sbm.num_nodes) % 2).long()
    train = torch.nonzero(small_sbm.train_mask & (node_part == 0)).flatten()
    split = split_seeds(train, node_part, 2)
    assert split.seeds[1].numel() == 0
    sampler = build_sampler("neighbor", fanouts=(2, 2), batch_size=8)
    stats = sample_epoch(small_sbm, node_part, sampler, split)
    assert stats[1].num_seeds == 0 and stats[1].num_batches == stats[0].num_batches > 0
    assert stats[1].bytes_by_kind.get("sample_resp", 0) > 0      # it served rank 0's requests


def test_a_failing_rank_does_not_hang_the_others():
    def body(comm):
        if comm.rank == 1:
            raise RuntimeError("boom")
        comm.all_to_all([torch.zeros(1)] * 2, kind="x")

    with pytest.raises(RuntimeError, match="boom"):
        run_thread_ranks(2, body, timeout=20)


# ------------------------------------------------------------------------------------------------ gloo
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _gloo_rank(rank: int, world: int, port: int, out_dir: str) -> None:
    import os

    from workbench.communicate.torchdist import TorchDistCommunicator, init_process_group, shutdown_process_group
    from workbench.data import load_graph
    from workbench.sample import NeighborSampler

    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    init_process_group("gloo", f"tcp://127.0.0.1:{port}", rank, world, timeout_s=60)
    try:
        g = load_graph("sbm:num_nodes=200,num_blocks=4,avg_degree=8,num_features=16,seed=0")
        node_part = (torch.arange(g.num_nodes) * 7 % world).long()
        split = split_seeds(torch.nonzero(g.train_mask).flatten(), node_part, world)
        sampler = NeighborSampler(fanouts=(3, 2), batch_size=16, seed=4)
        comm = TorchDistCommunicator()
        source = OwnerRoutedSource.from_partition(g, node_part, comm)
        mbs = [sampler.sample(s, source, epoch=1, step=i)
               for i, s in enumerate(split.batches(rank, epoch=1, batch_size=16, seed=4))]
        out = {"blocks": [[(b.src_gid, b.num_dst, b.edge_src, b.edge_dst) for b in mb.blocks] for mb in mbs],
               "seeds": [mb.seeds for mb in mbs], "bytes": comm.counter.bytes_by_kind()}
        with open(os.path.join(out_dir, f"{rank}.pkl"), "wb") as f:
            pickle.dump(out, f)
    finally:
        shutdown_process_group()


@pytest.mark.timeout(120)
def test_gloo_backend_samples_the_same_edges(tmp_path, small_sbm):
    import torch.multiprocessing as mp

    world = 2
    mp.spawn(_gloo_rank, args=(world, _free_port(), str(tmp_path)), nprocs=world, join=True)
    node_part = (torch.arange(small_sbm.num_nodes) * 7 % world).long()
    split = split_seeds(torch.nonzero(small_sbm.train_mask).flatten(), node_part, world)
    sampler = build_sampler("neighbor", fanouts=(3, 2), batch_size=16, seed=4)
    stats, kept = sample_epoch(small_sbm, node_part, sampler, split, epoch=1, keep=True)
    for r in range(world):
        with open(tmp_path / f"{r}.pkl", "rb") as f:
            got = pickle.load(f)
        assert len(got["blocks"]) == len(kept[r])
        for blocks, mb in zip(got["blocks"], kept[r]):
            for (src, nd, es, ed), b in zip(blocks, mb.blocks):
                assert torch.equal(src, b.src_gid) and nd == b.num_dst
                assert torch.equal(es, b.edge_src) and torch.equal(ed, b.edge_dst)
        assert got["bytes"] == stats[r].bytes_by_kind
