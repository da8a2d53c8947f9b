"""The gloo backend passes the same conformance check as the in-process one (ranks are spawned processes)."""

from __future__ import annotations

import pickle
import socket

import pytest
import torch.multiprocessing as mp
from comm_conformance import check, gloo_rank_main


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("world_size", [2, 3])
def test_gloo_every_verb_values_and_bytes(tmp_path, world_size):
    mp.spawn(gloo_rank_main, args=(world_size, _free_port(), str(tmp_path)), nprocs=world_size, join=True)
    results = []
    for r in range(world_size):
        with open(tmp_path / f"{r}.pkl", "rb") as f:
            results.append(pickle.load(f))
    check(results)
