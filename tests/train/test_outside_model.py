"""A model stage written outside the package, with its own ``Â`` (edge weights, node scales, self-loops), trains
in every layout: the run holds the model stage as an object, built once from the config, so no layout, shard or
aggregator looks its name up (a lookup of it in the registry fails while the run prepares and trains; the summary
records its name as for a built-in model).

The model is GCN-like with a row-normalised ``Â = D̄_in^{-1} (A + I)``: neither GCN's symmetric weights nor
GraphSAGE's (no self-loop), so a layout that fell back to a built-in model would train something else. It is also
the mean over the in-neighbours and the vertex itself that a block aggregator takes with self-loops, so a mini-batch
run over all neighbours in one batch per epoch trains it exactly as well. Every run is compared with one dense
single-process reference written here: losses per epoch, weights by the norm of their difference.
"""

from __future__ import annotations

import dataclasses
import pickle
import threading

import pytest
import torch

from workbench.compose import RunConfig
from workbench.events import ListSink
from workbench.runtime.runners import RunEnv, run_inprocess
from workbench.stages import Registry, registry
from workbench.testing import registered, rel_error, tiny_graph
from workbench.train.loop import make_optimizer
from workbench.train.models import ModelStage, edge_weights, node_scales, with_self_loops
from workbench.train.objective import node_loss

NAME = "outside_mean_self"
EPOCHS = 4


class MeanWithSelf(ModelStage):
    """``Â = D̄_in^{-1} (A + I)``: each vertex's mean over its in-neighbours and itself; one weight per layer."""

    name = NAME
    self_loops = True

    @staticmethod
    def edge_weights(dst_in_degree: torch.Tensor, src_out_degree: torch.Tensor) -> torch.Tensor:
        return 1.0 / (dst_in_degree.to(torch.float32) + 1.0)

    @staticmethod
    def node_scales(row_in_degree: torch.Tensor, col_out_degree: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return 1.0 / (row_in_degree.to(torch.float32) + 1.0), torch.ones(len(col_out_degree))

    @dataclasses.dataclass(kw_only=True)
    class Config(ModelStage.Config):
        pass


@pytest.fixture
def outside_model():
    """The model registered from outside the package for the test (the registry is as before afterwards)."""
    with registered(MeanWithSelf) as name:
        yield name


def _config(**sections) -> RunConfig:
    """The run config, the model chosen as on the command line (``--set model.method=...``)."""
    cfg = RunConfig.compose(graph="tiny", epochs=EPOCHS, seed=0, train={"optimizer": "sgd", "lr": 0.5}, **sections)
    return cfg.with_strings({"model.method": NAME, "model.hidden": "8"})


class _NoLookup(Registry):
    """The model registry while a run prepares and trains: a lookup of the outside model by name fails."""

    def __getitem__(self, name):
        assert name != NAME, f"the run looked the model {name!r} up by name"
        return super().__getitem__(name)

    def get(self, name, default=None):
        assert name != NAME, f"the run looked the model {name!r} up by name"
        return super().get(name, default)


def _run_unregistered(program, world_size: int) -> tuple[dict, list, list]:
    """``prepare`` and the ranks (threads) with every lookup of the model by name failing: the run holds the stage
    object (the config still names a registered model; validating it is no lookup); then the summary, which records
    the name."""
    reg, sink = registry("model"), ListSink()
    reg.__class__ = _NoLookup   # get_class and build look up through __getitem__
    try:
        payloads = program.prepare(world_size, sink.emit)
        env = RunEnv(run_id="t", world_size=world_size, emit=sink.emit, stop_flag=threading.Event(), timeout_s=60.0,
                     device="cpu")
        results = [o.result for o in sorted(run_inprocess(program, payloads, env), key=lambda o: o.rank)]
    finally:
        reg.__class__ = Registry
    return program.summarize(results), results, payloads


def _dense_reference(g, cfg) -> tuple[list[float], dict]:
    """Full-batch training on the whole graph in this process, ``Â`` written out densely from the degrees."""
    n = g.num_nodes
    src, dst = g.edges()
    a = torch.zeros(n, n)
    a.index_put_((dst, src), torch.ones(src.numel()), accumulate=True)
    a = (a + torch.eye(n)) / (g.in_degrees().to(torch.float32) + 1.0)[:, None]
    model = MeanWithSelf(hidden=8).build(in_dim=g.num_features, out_dim=g.num_classes, seed=cfg.train.seed)
    opt = make_optimizer(cfg.train.optimizer, model.parameters(), cfg.train.lr, cfg.train.weight_decay)
    train = g.train_mask & (g.labels >= 0)
    losses = []
    for _ in range(EPOCHS):
        opt.zero_grad()
        loss = node_loss(model(g.features, lambda h, layer: a @ h), g.labels, train, int(train.sum()))
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return losses, {k: v.detach().clone() for k, v in model.state_dict().items()}


def _assert_like(summary: dict, params: dict, reference: tuple, tol: float = 1e-5) -> None:
    losses, weights = reference
    for epoch, (got, want) in enumerate(zip(summary["losses"], losses, strict=True)):
        assert abs(got - want) <= tol * abs(want), f"loss of epoch {epoch}: {got} against the reference {want}"
    assert params.keys() == weights.keys()
    for k, want in weights.items():
        err = rel_error(params[k], want)   # |got - want| / |want|, Frobenius
        assert err <= tol, f"{k}: |got - want| / |want| = {err:.3g} > {tol}"


def test_the_helpers_take_the_stage_or_its_class_and_refuse_a_name():
    stage = MeanWithSelf(hidden=8)
    s, d = with_self_loops(stage, torch.tensor([1, 2]), torch.tensor([0, 0]), torch.arange(3))
    assert s.tolist() == [1, 2, 0, 1, 2] and d.tolist() == [0, 0, 0, 1, 2]
    deg = torch.tensor([2, 0, 0])
    w = edge_weights(MeanWithSelf, s, d, deg[d], torch.zeros_like(s))
    r, c = node_scales(stage, deg, torch.zeros(3))
    torch.testing.assert_close(w, r[d] * c[s])
    assert w.tolist() == pytest.approx([1 / 3] * 3 + [1.0, 1.0])
    with pytest.raises(TypeError, match="model stage"):
        edge_weights(NAME, s, d, deg[d], deg[s])


@pytest.mark.parametrize("layout,world_size,sections", [
    ("halo", 2, {}),
    ("block_row", 2, {"exchange": "block_row"}),
    ("model_avg, one part", 1, {"sync": {"method": "model_avg", "interval": 1}, "num_parts": 1}),
    ("minibatch, all neighbours", 2, {"sample": {"method": "neighbor", "fanouts": (-1, -1), "batch_size": 4096}}),
    ("model_avg minibatch, one part", 1, {"sync": {"method": "model_avg", "interval": 1}, "num_parts": 1,
                                          "sample": {"method": "neighbor", "fanouts": (-1, -1), "batch_size": 4096}}),
])
def test_an_outside_model_trains_as_the_dense_reference(outside_model, layout, world_size, sections):
    g = tiny_graph()
    cfg = _config(**sections)
    assert cfg.method("model") == NAME and type(cfg.model) is MeanWithSelf.Config
    node_part = None if world_size == 1 else torch.arange(g.num_nodes) % world_size
    program = cfg.build(graph=g, node_part=node_part)
    assert type(program.trainer.model_stage) is MeanWithSelf
    summary, results, _ = _run_unregistered(program, world_size)
    assert summary["model"] == NAME and summary["stages"]["model"]["method"] == NAME
    reference = _dense_reference(g, cfg)
    for r in results:
        _assert_like(summary, r["params"], reference, tol=1e-4 if "minibatch" in layout else 1e-5)


@pytest.mark.parametrize("sample", [None, {"method": "neighbor", "fanouts": (3, 3), "batch_size": 8}])
def test_an_outside_model_averages_parts_on_two_ranks_as_on_one(outside_model, sample):
    """Model averaging of 2 parts, each trained on its own subgraph's ``Â`` (full batch or sampled blocks): 2 ranks
    train what 1 rank training both parts trains."""
    g = tiny_graph()
    cfg = _config(sync={"method": "model_avg", "interval": 2}, num_parts=2, sample=sample)
    part = torch.arange(g.num_nodes) % 2
    one = _run_unregistered(cfg.build(graph=g, node_part=part), 1)
    two = _run_unregistered(cfg.build(graph=g, node_part=part), 2)
    assert two[0]["model"] == NAME and two[0]["bytes_by_kind"]["model_avg"] > 0
    _assert_like(two[0], two[1][0]["params"], (one[0]["losses"], one[1][0]["params"]))


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    from workbench.cli import main

    d = tmp_path_factory.mktemp("parts") / "pf"
    assert main(["partition", "sbm:num_nodes=300,num_blocks=3,seed=0", "--parts", "2", "--method", "random",
                 "--folder", str(d)]) == 0
    return d


@pytest.mark.parametrize("sections", [{}, {"exchange": "block_row"}, {"sync": {"method": "model_avg"}},
                                      {"sample": {"method": "neighbor", "fanouts": (3, 3), "batch_size": 16}}])
def test_ranks_reading_their_parts_build_the_outside_model_from_the_object_they_are_sent(outside_model, folder,
                                                                                       sections):
    """On a partition folder the client hands each rank a reference to its part carrying the model stage (it
    pickles, as Dask sends it); the ranks build their shards with it and train as the same partition in memory."""
    from workbench.data.partfolder import PartFolder, read_part_graph

    g, owner = read_part_graph(folder), torch.from_numpy(PartFolder(folder).owner_part())
    memory = _run_unregistered(_config(**sections).build(graph=g, node_part=owner), 2)
    ours = _run_unregistered(_config(**sections).replace(graph=f"parts:{folder}").build(), 2)
    _assert_like(ours[0], ours[1][0]["params"], (memory[0]["losses"], memory[1][0]["params"]))
    assert ours[0]["model"] == NAME
    for payload in ours[2]:
        sent = pickle.loads(pickle.dumps(payload))
        stages = [sent.model] if hasattr(sent, "model") else [s.model for s in sent.shards]
        for stage in stages:
            assert type(stage) is MeanWithSelf and stage.config == MeanWithSelf.Config(hidden=8)
