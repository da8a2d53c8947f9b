"""The shared fixtures come from the public harness: ``workbench.testing.fixtures``.

``karate``, ``small_sbm`` (session graphs, read-only), the factories ``random_graph``, ``multigraph``, ``planted``
and ``tiny``, the module-scoped ``dask_client`` (an embedded 2-worker ``LocalCluster``) and
``edges_to_part_zero`` (a vertex-cut partitioner registered for one test): see that module.

``make test`` runs the suite on two pytest-xdist workers (``-n 2 --dist loadgroup``), grouped by
:data:`XDIST_GROUPS`: the tests that drive chromium (``tests/ui``) are one group, which one worker takes from the
start, one test after another, while the other worker takes the rest (about half of the suite's minutes each;
never two browsers, JupyterLab servers or docs builds at once on a two-core machine, and each module-scoped
fixture built once). The tests on emulated hosts (network namespaces, veth pairs, shaped links) join the same
group: chromium watches the host's interfaces and aborts its page loads with ``ERR_NETWORK_CHANGED`` when a veth
pair comes or goes (CI met this on a docs page), and no two emulated clusters may share the cores whose time their
links model. The groups go by path, through a scheduler
of our own (:func:`pytest_xdist_make_scheduler`): xdist's ``xdist_group`` marks rename the test ids, which
pytest 9 no longer lets a plugin do.
"""

import os
from typing import Optional

import pytest

# The reproduction's time claims run on an emulated cluster (reproduce.emulated) wherever root can build one:
# not in the tests outside the ``host`` group, whose veth pairs would abort the browser's page loads on the other
# worker. tests/reproduce/test_emulated_times.py (in that group) switches it back on for its own runs.
os.environ["WORKBENCH_REPRODUCE_EMULATED"] = "0"

pytest_plugins = ["workbench.testing.fixtures"]

#: xdist groups by test file: a path prefix (from the repository root) and the group its files join
XDIST_GROUPS = (
    ("tests/ui/", "host"),
    ("tests/runtime/test_netcluster", "host"),
    ("tests/runtime/test_netmodel_calibrated.py", "host"),
    ("tests/runtime/test_scheduler_file.py", "host"),
    ("tests/reproduce/test_emulated_times.py", "host"),
)


def xdist_group(nodeid: str) -> Optional[str]:
    """The group of a test id (``tests/ui/test_docs.py::test_x`` -> ``host``), or ``None``."""
    return next((group for prefix, group in XDIST_GROUPS if nodeid.startswith(prefix)), None)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup``: every test its own unit of work but the groups', each group one unit; the largest
    units first (xdist's ``loadscope`` reordering), so the host group starts at once and sets the pace."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group(nodeid) or nodeid

    return GroupScheduling(config, log)
