"""The cache conformance body on torch.distributed gloo ranks (spawned processes): same rows, same bytes."""

from __future__ import annotations

import functools

import pytest

from workbench.cache import ID_BYTES
from workbench.testing import exercise_cache, run_gloo_ranks, run_ranks
from workbench.testing.cache_harness import WIDTH


@pytest.mark.timeout(120)
def test_gloo_degree_cache_matches_in_process():
    world_size, method, ratio = 2, "degree", 0.3
    gloo = run_gloo_ranks(world_size, functools.partial(exercise_cache, method=method, ratio=ratio))
    local = run_ranks(world_size, lambda comm: exercise_cache(comm, method, ratio))
    for a, b in zip(gloo, local):
        assert a["rows_ok"] and a["cached"] == b["cached"] and a["bytes"] == b["bytes"]
        assert [s["misses"] for s in a["stats"]] == [s["misses"] for s in b["stats"]]
    misses = sum(s["misses"] for r in gloo for s in r["stats"])
    fetched = sum(r["bytes"][e].get("feature", 0) + r["bytes"][e].get("feature_req", 0) for r in gloo for e in (0, 1))
    assert fetched == misses * (WIDTH * 4 + ID_BYTES)
