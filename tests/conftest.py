"""The shared fixtures come from the public harness: ``workbench.testing.fixtures``.

``karate``, ``small_sbm`` (session graphs, read-only), the factories ``random_graph``, ``multigraph``, ``planted``
and ``tiny``, the module-scoped ``dask_client`` (an embedded 2-worker ``LocalCluster``) and
``edges_to_part_zero`` (a vertex-cut partitioner registered for one test): see that module.
"""

pytest_plugins = ["workbench.testing.fixtures"]
