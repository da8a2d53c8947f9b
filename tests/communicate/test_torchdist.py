"""The gloo backend passes the same conformance check as the in-process one (ranks are spawned processes)."""

from __future__ import annotations

import pytest

from workbench.testing import check_communicator_results, exercise_communicator, run_gloo_ranks


@pytest.mark.timeout(120)
@pytest.mark.parametrize("exchange", ["sockets", "gloo"])
@pytest.mark.parametrize("world_size", [2, 3])
def test_gloo_every_verb_values_and_bytes(world_size, exchange):
    check_communicator_results(run_gloo_ranks(world_size, exercise_communicator, exchange=exchange))
