"""How NetCluster shares this machine's cores among its emulated hosts (no root needed)."""

from __future__ import annotations

import os

import pytest

from workbench.runtime.netcluster import NetCluster, _host_cpus


def test_each_host_gets_its_own_share_of_the_cores_when_there_is_one_per_host():
    mine = sorted(os.sched_getaffinity(0))
    shares = _host_cpus(len(mine), "auto")
    assert [len(s) for s in shares] == [1] * len(mine) and sorted(c for s in shares for c in s) == mine
    assert _host_cpus(len(mine) + 1, "auto") == [None] * (len(mine) + 1)     # too few cores: all shared
    assert _host_cpus(1, "shared") == [None]
    if len(mine) >= 4:
        assert [len(s) for s in _host_cpus(2, "auto")] == [len(mine) // 2] * 2


def test_an_unknown_cpus_setting_is_refused_naming_it():
    with pytest.raises(ValueError, match="'cpus' parameter of NetCluster must be 'auto' or 'shared'. Got 'all'"):
        NetCluster(hosts=2, cpus="all", workers=False)
    assert "cores per host" in repr(NetCluster(hosts=1, workers=False))
