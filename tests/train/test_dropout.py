"""Dropout keyed by global vertex id: distributed training equals one process with dropout on; Kipf's setup."""

from __future__ import annotations

import torch

from workbench.compose import RunConfig
from workbench.testing import rel_error as _rel, run_program, tiny_graph
from workbench.train.models import GNNModel, dropout_mask


def test_mask_is_a_function_of_the_global_id_and_keeps_1_minus_p():
    ids = torch.arange(2000)
    full = dropout_mask(7, 3, 1, ids, 16, 0.5)
    perm = torch.randperm(2000, generator=torch.Generator().manual_seed(0))
    assert torch.equal(dropout_mask(7, 3, 1, ids[perm], 16, 0.5), full[perm])
    assert abs(float(full.float().mean()) - 0.5) < 0.01
    assert not torch.equal(dropout_mask(7, 4, 1, ids, 16, 0.5), full)   # a new mask each epoch
    assert not torch.equal(dropout_mask(7, 3, 0, ids, 16, 0.5), full)   # ... and each layer


def test_dropout_is_off_in_eval():
    x = torch.randn(10, 4)
    m = GNNModel("gcn", in_dim=4, hidden=8, out_dim=3, num_layers=2, seed=0, dropout=0.5)
    ref = GNNModel("gcn", in_dim=4, hidden=8, out_dim=3, num_layers=2, seed=0)
    assert not torch.allclose(m(x, lambda h, i: h), ref(x, lambda h, i: h))
    m.eval()
    assert torch.allclose(m(x, lambda h, i: h), ref(x, lambda h, i: h))


def test_distributed_equals_single_process_with_dropout():
    g = tiny_graph()
    cfg = RunConfig.compose(graph="tiny", partition="random", epochs=4, seed=3,
                            model={"dropout": 0.5, "init": "glorot"}, train={"weight_decay": 5e-4,
                                                                             "weight_decay_layers": "first"})
    (s1, r1, _), (s2, r2, _) = run_program(cfg.build(graph=g), 1), run_program(cfg.build(graph=g), 2)
    for a, b in zip(s2["losses"], s1["losses"]):
        assert abs(a - b) <= 1e-5 * abs(b)
    assert s2["accuracy"] == s1["accuracy"]
    for name, ref in r1[0]["params"].items():
        assert _rel(r2[1]["params"][name], ref) <= 1e-5, name
    # the no-dropout pass for accuracy is evaluation traffic: the epoch's bytes stay exactly the prediction
    assert s2["bytes_per_epoch"] == s2["predicted_bytes_per_epoch"] > 0
    assert s2["bytes_by_kind"]["eval_halo_fwd"] == s2["bytes_by_kind"]["halo_fwd"]
    plain = run_program(RunConfig.compose(graph="tiny", partition="random", epochs=4, seed=3).build(graph=g), 1)[0]
    assert plain["losses"][1] != s1["losses"][1]


def test_kipf_recipe_is_the_papers_setup():
    from recipes.full_graph import kipf

    cfg = kipf()
    assert (cfg.model.hidden, cfg.model.num_layers, cfg.model.dropout, cfg.model.init) == (16, 2, 0.5, "glorot")
    assert (cfg.train.epochs, cfg.train.lr, cfg.train.optimizer) == (200, 0.01, "adam")
    assert (cfg.train.weight_decay, cfg.train.weight_decay_layers) == (5e-4, "first")


def test_dropout_is_refused_where_blocks_run_without_it():
    """Mini-batch blocks and model averaging run without dropout: ``model.dropout`` is refused there at build
    (``ModelStage.Config.field_requires``), before a rank would warn and train without it."""
    import pytest

    from workbench._validation import ParamError

    with pytest.raises(ParamError, match=r"'model.dropout' parameter of RunConfig must be 0.0 with mini-batch "
                                         r"training .* Got 0.5"):
        RunConfig.compose(graph="karate", sample="neighbor", model={"method": "sage", "dropout": 0.5}).build()
    RunConfig.compose(graph="karate", model={"method": "gcn", "dropout": 0.5}).build()   # full-graph reads it
