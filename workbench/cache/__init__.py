"""The cache stage: DistDGL's feature KVStore and the caches that wrap its pull.

* :class:`~workbench.cache.kvstore.FeatureStore`: each rank's feature rows and a counted ``pull(gids)``
  (ids out as ``feature_req``, rows back as ``feature``; one ``all_to_all`` each).
* :class:`~workbench.cache.policies.Cache` methods in ``CACHES`` (``none``, ``degree``, ``random``,
  ``inclusion``, ``lru``, ``fifo``): ``CACHES.build(method, ratio=...).wrap(store, ...)`` gives a
  :class:`~workbench.cache.policies.CachedFeatureStore` with the same ``pull`` and per-epoch
  :class:`~workbench.events.CacheStats`.
* :func:`~workbench.cache.curve.hit_rate_curve`: hit rate against ratio per static policy from a stream
  of requested ids, without a trainer.
"""

from __future__ import annotations

from workbench.cache.curve import ORACLE, hit_rate_curve
from workbench.cache.kvstore import ID_BYTES, FeatureStore, PullBuffers, RangeBook, TableBook, as_partition_book
from workbench.cache.policies import (CACHES, Cache, CachedFeatureStore, DegreeCache, FIFOCache, InclusionCache,
                                      LRUCache, NoCache, RandomCache, capacity_for, rank_candidates)

__all__ = ["FeatureStore", "RangeBook", "TableBook", "as_partition_book", "ID_BYTES", "Cache", "CACHES",
           "CachedFeatureStore", "NoCache", "DegreeCache", "RandomCache", "InclusionCache", "LRUCache", "FIFOCache",
           "capacity_for", "rank_candidates", "hit_rate_curve", "ORACLE"]
