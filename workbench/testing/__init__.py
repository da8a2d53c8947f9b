"""The workbench's test harness, public: tiny graphs, ranks and a Dask cluster, conformance checks per stage kind.

A stage written outside this repository is checked as scikit-learn's ``check_estimator`` checks an estimator::

    from workbench.testing import check_stage, parametrize_with_checks

    check_stage(MyPartitioner)                  # AssertionError naming the stage and what failed

    @parametrize_with_checks([MyPartitioner, MyCache])     # one pytest case per check
    def test_my_stages(stage, check):
        check(stage)

Pytest fixtures (``karate``, ``small_sbm``, ``random_graph``, ``dask_client``, ...) come with
``pytest_plugins = ["workbench.testing.fixtures"]`` in a ``conftest.py``. Importing this package does not
import pytest (only :mod:`workbench.testing.fixtures` and :func:`parametrize_with_checks` do), nor DGL.

Modules: :mod:`~workbench.testing.graphs` (tiny seeded graphs), :mod:`~workbench.testing.ranks` (thread, gloo
and Dask ranks, a program run), :mod:`~workbench.testing.checks` and :mod:`~workbench.testing.config_checks`
(conformance per stage kind), :mod:`~workbench.testing.communicator`, :mod:`~workbench.testing.cache_harness`,
:mod:`~workbench.testing.sampling` (the harness of each), :mod:`~workbench.testing.compare` (two runs' losses and
weights, with tolerances that hold on any CPU), :mod:`~workbench.testing.tiny_program` (a tiny SPMD
program for runner tests), :mod:`~workbench.testing.fixtures` (the pytest plugin).

Example:
    >>> from workbench.cache import CACHES
    >>> check_stage(CACHES["degree"])
    >>> [check_name(c) for c in stage_checks(CACHES["lru"])][-4:]
    ['check_cache', 'check_cache_ratio_zero', 'check_cache_ratio_one', 'check_cache_deterministic']
"""

from workbench.testing.cache_harness import exercise_cache
from workbench.testing.checks import (check_loss_shares, check_loss_trains, check_cache, check_cache_deterministic, check_cache_ratio_one,
                                      check_cache_ratio_zero, check_exchange, check_exchange_staleness, check_model,
                                      check_name, check_partitioner, check_sampler, check_sampler_seeded,
                                      check_schedule, check_selectable, check_stage, parametrize_with_checks,
                                      registered, stage_checks)
from workbench.testing.compare import assert_same_run, assert_same_weights, weight_checksums
from workbench.testing.communicator import (check_communicator, check_communicator_results, exercise_communicator,
                                            expected_bytes)
from workbench.testing.config_checks import StageCheckFailed, check_config, stage_kind, stage_label
from workbench.testing.graphs import karate, multigraph, planted_graph, random_graph, small_sbm, tiny_graph
from workbench.testing.ranks import (assert_same_training, free_port, local_cluster, rel_error, run_gloo_ranks,
                                     run_program, run_ranks)
from workbench.testing.sampling import build_sampler, check_minibatch, edge_set, same_minibatch

__all__ = [
    # tiny graphs
    "tiny_graph", "random_graph", "multigraph", "planted_graph", "karate", "small_sbm",
    # ranks and clusters
    "run_ranks", "run_gloo_ranks", "free_port", "local_cluster", "run_program", "rel_error", "assert_same_training",
    # comparing two runs (by the weights' size, never a relative tolerance on a sum that cancels)
    "assert_same_run", "assert_same_weights", "weight_checksums",
    # conformance
    "check_stage", "stage_checks", "check_name", "parametrize_with_checks", "registered", "stage_kind", "stage_label",
    "StageCheckFailed", "check_config", "check_selectable", "check_partitioner", "check_sampler",
    "check_sampler_seeded", "check_cache", "check_cache_ratio_zero", "check_cache_ratio_one",
    "check_cache_deterministic", "check_exchange", "check_exchange_staleness", "check_model", "check_schedule",
    "check_loss_shares", "check_loss_trains",
    "check_communicator", "check_communicator_results", "exercise_communicator", "expected_bytes",
    "exercise_cache", "build_sampler", "check_minibatch", "same_minibatch", "edge_set",
]
