"""Cache methods (``CACHES``): what each policy keeps, its config errors, old events.

The conformance every method must pass (the asked rows on 1-3 in-process ranks, only misses moved and counted
at the transport as ``rows x width x 4 + ids x 8``, capacity, stats, determinism, nothing held at ratio 0 and
no feature bytes at ratio 1.0 once filled or warm) is :func:`workbench.testing.check_cache` and its siblings,
run for every registered method by ``tests/stages/test_stage_conformance.py``.
"""

from __future__ import annotations

import pytest

from workbench._validation import ParamError
from workbench.cache import CACHES, capacity_for
from workbench.events import CacheStats, event_from_dict
from workbench.testing import exercise_cache, run_ranks
from workbench.testing.cache_harness import degrees_for, node_part_for

METHODS = sorted(CACHES)


def _run(world_size, method, ratio, **kw):
    return run_ranks(world_size, lambda comm: exercise_cache(comm, method, ratio, **kw))


def test_the_registry_lists_the_methods():
    assert {"none", "degree", "random", "inclusion", "lru", "fifo"} <= set(CACHES)


@pytest.mark.parametrize("method", METHODS)
def test_capacity_is_ratio_times_the_candidates(method):
    assert CACHES.build(method, ratio=0.3).capacity(57) == (0 if method == "none" else capacity_for(0.3, 57))


def test_random_seed_changes_the_content():
    a, b = _run(2, "random", 0.4, seed=1), _run(2, "random", 0.4, seed=2)
    assert a[0]["cached"] != b[0]["cached"]


def test_degree_keeps_the_highest_degrees_ties_by_id():
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
