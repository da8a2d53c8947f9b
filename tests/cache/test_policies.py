"""Conformance of every registered cache method (``CACHES``), on 1, 2 and 3 in-process ranks.

Each method must: return exactly the asked rows (duplicates, owned, remote, empty lists); move only its
misses through the store, counted at the transport as ``rows x width x 4 + ids x 8``; respect its
capacity; be deterministic; hold nothing at ratio 0 (= ``none``); and at ratio 1.0 move no feature bytes
in training once filled (static) or once warm (dynamic: the second epoch repeats the first's requests).
"""

from __future__ import annotations

import pytest
import torch
from cache_harness import WIDTH, exercise_cache, run_ranks

from workbench._validation import ParamError
from workbench.cache import CACHES, ID_BYTES, capacity_for
from workbench.events import CacheStats, event_from_dict

ROW = WIDTH * 4 + ID_BYTES
METHODS = sorted(CACHES)


def _run(world_size, method, ratio, **kw):
    return run_ranks(world_size, lambda comm: exercise_cache(comm, method, ratio, **kw))


def _fetched(results, epoch):
    return sum(r["bytes"][epoch].get("feature", 0) + r["bytes"][epoch].get("feature_req", 0) for r in results)


def test_the_registry_lists_the_methods():
    assert {"none", "degree", "random", "inclusion", "lru", "fifo"} <= set(CACHES)


@pytest.mark.parametrize("world_size", [1, 2, 3])
@pytest.mark.parametrize("method", METHODS)
def test_rows_bytes_capacity_and_stats(method, world_size):
    ratio = 0.3
    results = _run(world_size, method, ratio)
    for r in results:
        assert r["rows_ok"]
        cap = 0 if method == "none" else capacity_for(ratio, r["num_candidates"])
        assert r["capacity"] == cap
        assert max(r["sizes"]) <= cap
        if not CACHES[method].dynamic:
            assert len(r["cached0"]) == cap and r["cached"] == r["cached0"]  # static: content never moves
        for st in r["stats"]:
            assert st["hits"] + st["misses"] == st["remote_rows"]
            assert st["bytes_saved"] == st["hits"] * ROW
            assert st["policy"] == method and st["ratio"] == ratio and st["refresh_bytes"] == 0
            assert st["fill_bytes"] == r["fill_bytes"]
    for epoch in (0, 1):  # misses only, counted at the transport by the communicator
        assert _fetched(results, epoch) == sum(r["stats"][epoch]["misses"] for r in results) * ROW
    fill = sum(r["bytes"][1].get("cache_fill", 0) + r["bytes"][0].get("cache_fill", 0) for r in results)
    assert fill == sum(r["fill_bytes"] for r in results)
    assert fill == (0 if CACHES[method].dynamic or method == "none" else sum(r["capacity"] for r in results) * ROW)
    if world_size == 1:
        assert all(st["remote_rows"] == 0 for st in results[0]["stats"])


@pytest.mark.parametrize("method", METHODS)
def test_ratio_zero_is_none(method):
    got, base = _run(3, method, 0.0), _run(3, "none", 0.5)
    for a, b in zip(got, base):
        assert a["capacity"] == 0 and a["fill_bytes"] == 0
        assert a["bytes"] == b["bytes"]
        assert [(s["hits"], s["misses"]) for s in a["stats"]] == [(0, s["misses"]) for s in b["stats"]]


@pytest.mark.parametrize("method", [m for m in METHODS if m != "none"])
def test_ratio_one_fetches_nothing_in_training(method):
    results = _run(3, method, 1.0)
    warm = 1 if CACHES[method].dynamic else 0  # a dynamic cache admits the first epoch's misses
    for epoch in range(warm, 2):
        assert _fetched(results, epoch) == 0
        assert all(r["stats"][epoch]["misses"] == 0 for r in results)
    assert any(r["stats"][1]["hits"] for r in results)
    if not CACHES[method].dynamic:
        assert all(r["fill_bytes"] == r["num_candidates"] * ROW for r in results)


@pytest.mark.parametrize("method", METHODS)
def test_deterministic_for_a_seed(method):
    a, b = _run(2, method, 0.4, seed=3), _run(2, method, 0.4, seed=3)
    strip = lambda rs: [(r["cached"], r["bytes"], [{k: v for k, v in s.items() if k != "time"} for s in r["stats"]])
                        for r in rs]
    assert strip(a) == strip(b)


def test_random_seed_changes_the_content():
    a, b = _run(2, "random", 0.4, seed=1), _run(2, "random", 0.4, seed=2)
    assert a[0]["cached"] != b[0]["cached"]


def test_degree_keeps_the_highest_degrees_ties_by_id():
    from cache_harness import degrees_for, node_part_for
    r = _run(2, "degree", 0.25)[0]
    deg = degrees_for()
    others = (node_part_for(2) != 0).nonzero().flatten().tolist()
    want = sorted(sorted(others, key=lambda v: (-int(deg[v]), v))[:r["capacity"]])
    assert r["capacity"] > 0 and r["cached"] == want


def test_config_errors_use_the_template():
    with pytest.raises(ParamError, match=r"The 'ratio' parameter of .*Config must be a number in \[0, 1\]. Got 1.5"):
        CACHES.build("degree", ratio=1.5)
    with pytest.raises(ParamError, match=r"must be one of \['degree', 'fifo', 'inclusion', 'lru', 'none', 'random'"):
        CACHES.build("belady")
    with pytest.raises(ParamError, match="direction"):
        CACHES.build("degree", direction="both")
    assert "ratio" in CACHES.describe()["lru"] and "seed" in CACHES.describe()["random"]


def test_old_cache_events_read_back():
    old = {"type": "cache", "run_id": "r", "time": 1.0, "rank": 1, "epoch": 2, "hits": 3, "misses": 4,
           "bytes_saved": 5}
    ev = event_from_dict(old)
    assert isinstance(ev, CacheStats) and (ev.hits, ev.policy, ev.ratio, ev.refresh_bytes) == (3, "", None, 0)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("bad", [-0.1, 1.01, "half", True])
def test_every_method_rejects_a_bad_ratio(method, bad):
    with pytest.raises(ParamError, match=rf"The 'ratio' parameter of {CACHES[method].__name__}.Config must be a "
                                         rf"number in \[0, 1\]. Got {bad!r} instead."):
        CACHES.build(method, ratio=bad)
