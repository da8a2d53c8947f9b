"""The cache conformance body on torch.distributed gloo ranks (spawned processes): same rows, same bytes."""

from __future__ import annotations

import pickle
import socket

import pytest
import torch.multiprocessing as mp
from cache_harness import WIDTH, exercise_cache, gloo_rank_main, run_ranks

from workbench.cache import ID_BYTES


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timeout(120)
def test_gloo_degree_cache_matches_in_process(tmp_path):
    world_size, method, ratio = 2, "degree", 0.3
    mp.spawn(gloo_rank_main, args=(world_size, _free_port(), str(tmp_path), method, ratio), nprocs=world_size,
             join=True)
    gloo = []
    for r in range(world_size):
        with open(tmp_path / f"{r}.pkl", "rb") as f:
            gloo.append(pickle.load(f))
    local = run_ranks(world_size, lambda comm: exercise_cache(comm, method, ratio))
    for a, b in zip(gloo, local):
        assert a["rows_ok"] and a["cached"] == b["cached"] and a["bytes"] == b["bytes"]
        assert [s["misses"] for s in a["stats"]] == [s["misses"] for s in b["stats"]]
    misses = sum(s["misses"] for r in gloo for s in r["stats"])
    fetched = sum(r["bytes"][e].get("feature", 0) + r["bytes"][e].get("feature_req", 0) for r in gloo for e in (0, 1))
    assert fetched == misses * (WIDTH * 4 + ID_BYTES)
