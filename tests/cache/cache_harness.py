"""Shared helpers of the cache tests: a tiny partitioned feature table and SPMD thread ranks.

``run_ranks(world_size, body)`` runs ``body(comm)`` on in-process thread ranks and returns what each
returned; ``make_store(comm, ...)`` builds the rank's :class:`FeatureStore` from one global table.
``exercise_cache`` is the conformance body that also runs on gloo ranks (spawned processes).
"""

from __future__ import annotations

import threading

import torch

from workbench.cache import CACHES, FeatureStore
from workbench.communicate.inprocess import InProcessGroup

NUM_NODES = 60
WIDTH = 3


def table(num_nodes: int = NUM_NODES, width: int = WIDTH) -> torch.Tensor:
    """Row ``v`` = ``[v, v + 0.5, v + 0.25, ...]``: every row is recognisable."""
    return torch.arange(num_nodes, dtype=torch.float32)[:, None] + torch.arange(width) / (2.0 ** torch.arange(width))


def node_part_for(world_size: int, num_nodes: int = NUM_NODES, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, world_size, (num_nodes,), generator=gen)


def degrees_for(num_nodes: int = NUM_NODES) -> torch.Tensor:
    return (torch.arange(num_nodes) * 37) % 11  # ties on purpose


def probabilities_for(num_nodes: int = NUM_NODES) -> torch.Tensor:
    return ((torch.arange(num_nodes) * 13) % 17) / 16.0


def make_store(comm, node_part: torch.Tensor, feats: torch.Tensor) -> FeatureStore:
    owned = (node_part == comm.rank).nonzero().flatten()
    perm = torch.randperm(owned.numel(), generator=torch.Generator().manual_seed(comm.rank))
    return FeatureStore(owned[perm], feats[owned[perm]], node_part, comm)  # any order of owned rows


def requests(rank: int, step: int, num_nodes: int = NUM_NODES) -> torch.Tensor:
    """A random id list with duplicates; every third step of rank 1 is empty."""
    if rank == 1 and step % 3 == 2:
        return torch.empty(0, dtype=torch.int64)
    gen = torch.Generator().manual_seed(1000 * rank + step)
    k = int(torch.randint(1, 40, (1,), generator=gen))
    return torch.randint(0, num_nodes, (k,), generator=gen)


def run_ranks(world_size: int, body):
    group = InProcessGroup(world_size, timeout=60)
    results, errors = [None] * world_size, [None] * world_size

    def target(rank):
        try:
            results[rank] = body(group.communicator(rank))
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            errors[rank] = exc
            group.abort(exc)

    threads = [threading.Thread(target=target, args=(r,), daemon=True) for r in range(world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a rank hung"
    for e in errors:
        if e is not None:
            raise e
    return results


def exercise_cache(comm, method: str, ratio: float, *, epochs: int = 2, steps: int = 5, seed: int = 0) -> dict:
    """Build ``method`` at ``ratio`` over this rank's store, pull ``steps`` lists per epoch; report everything."""
    p = comm.world_size
    node_part, feats = node_part_for(p), table()
    store = make_store(comm, node_part, feats)
    options = {"seed": seed} if method == "random" else {}
    cached = CACHES.build(method, ratio=ratio, **options).wrap(
        store, degrees=degrees_for(), probabilities=probabilities_for())
    out = {"capacity": cached.capacity, "fill_bytes": cached.fill_bytes, "cached0": cached.cached_gid.tolist(),
           "rows_ok": True, "sizes": [], "stats": [], "bytes": {}, "num_candidates": int(cached.candidates.numel())}
    for epoch in range(epochs):
        comm.set_epoch(epoch)
        for step in range(steps):
            ids = requests(comm.rank, step)
            rows = cached.pull(ids)
            out["rows_ok"] &= rows.shape == (ids.numel(), WIDTH) and torch.equal(rows, feats[ids])
            out["sizes"].append(cached.size)
        out["stats"].append(cached.epoch_stats(epoch).to_dict())
        out["bytes"][epoch] = comm.counter.bytes_by_kind(epoch)
    out["cached"] = cached.cached_gid.tolist()
    return out


def gloo_rank_main(rank: int, world_size: int, port: int, out_dir: str, method: str, ratio: float) -> None:
    """One spawned gloo rank: :func:`exercise_cache`, pickled to ``out_dir/<rank>.pkl``."""
    import os
    import pickle

    from workbench.communicate.torchdist import TorchDistCommunicator, init_process_group, shutdown_process_group

    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    init_process_group("gloo", f"tcp://127.0.0.1:{port}", rank, world_size, timeout_s=60)
    try:
        res = exercise_cache(TorchDistCommunicator(), method, ratio)
        with open(os.path.join(out_dir, f"{rank}.pkl"), "wb") as f:
            pickle.dump(res, f)
    finally:
        shutdown_process_group()
