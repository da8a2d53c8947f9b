"""The gloo backend passes the same conformance check as the in-process one (ranks are spawned processes)."""

from __future__ import annotations

import pytest

from workbench.testing import check_communicator_results, exercise_communicator, run_gloo_ranks


@pytest.mark.timeout(120)
@pytest.mark.parametrize("exchange", ["sockets", "gloo"])
@pytest.mark.parametrize("world_size", [2, 3])
def test_gloo_every_verb_values_and_bytes(world_size, exchange):
    check_communicator_results(run_gloo_ranks(world_size, exercise_communicator, exchange=exchange))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("exchange", ["sockets", "gloo"])
def test_gloo_side_communicator_runs_beside_the_main_one(exchange):
    """``comm.side("sample")``: a second gloo group (and a second socket mesh) whose collectives one thread runs
    while another runs all-reduces on the main communicator; values right, bytes in the rank's one counter."""
    from workbench.testing.communicator import check_side_communicator_results, exercise_side_communicator

    check_side_communicator_results(run_gloo_ranks(2, exercise_side_communicator, exchange=exchange))
