"""Runtime test harness: the tiny test program on ``sys.path`` and a module-scoped Dask cluster.

``dask_client``: a ``LocalCluster`` with 2 CPU worker processes (one thread each) on 127.0.0.1, no
dashboard port clash (``:0``), shared by the tests of one module (a cluster start costs seconds).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


@pytest.fixture(scope="module")
def dask_client():
    from distributed import Client

    from workbench.runtime.dask_runner import start_local_cluster

    cluster = start_local_cluster(2)
    client = Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()
