"""Conformance of every registered stage method (like the communicator's comm_conformance).

Parametrised over ``workbench.stages.REGISTRIES`` when the tests are collected, so a method registered
later (a sampler, a cache policy, a partitioner) runs through the same checks with no edit here:

* its ``Config`` validates its defaults and rejects a value of the wrong type (or an unknown choice) in
  every typed field with the one message template naming that field;
* the config round-trips through its ``--set`` strings;
* it appears in ``workbench stages``, in the run config's method choices and in the dashboard form
  (a method registered as ``none`` is what an empty optional section means);
* partitioners return a valid, seeded assignment; exchanges reproduce the single-process run and the
  bytes of every epoch are the predicted ones (exact, and under a staleness policy); models are seeded.
"""

from __future__ import annotations

import re
import typing

import pytest
import torch

from workbench._validation import ParamError
from workbench.compose import STAGE_SECTIONS, RunConfig, as_text, describe_stages, load_stage_modules
from workbench.stages import REGISTRIES
from workbench.train.loop import TrainLoopConfig

load_stage_modules()
METHODS = [(kind, name) for kind in sorted(STAGE_SECTIONS.values()) for name in sorted(REGISTRIES.get(kind, {}))]
CONFIGS = [pytest.param(REGISTRIES[k][n].Config, id=f"{k}:{n}") for k, n in METHODS] + [
    pytest.param(TrainLoopConfig, id="train")]
TEMPLATE = r"The '{field}' parameter of [\w.]+ must be .+\. Got .+ instead\."
BAD = "bogus-value"


def _typed_fields(cls) -> list[str]:
    """Fields whose type (or documented ``choices``) lets any config reject ``BAD``."""
    hints, docs, out = typing.get_type_hints(cls), cls.field_docs(), []
    for name in cls.field_names():
        tp = hints[name]
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        base = args[0] if typing.get_origin(tp) is typing.Union and len(args) == 1 else tp
        if base in (int, float, bool) or typing.get_origin(base) in (tuple, list):
            out.append(name)
        elif base is str and len(re.findall(r"``([A-Za-z0-9_\-]+)``", docs.get(name, ""))) >= 2:
            out.append(name)
    return out


def test_every_stage_kind_has_a_registry():
    assert set(STAGE_SECTIONS.values()) <= set(REGISTRIES)
    assert {"metis", "random", "block"} <= set(REGISTRIES["partition"])
    assert {"halo", "block_row"} <= set(REGISTRIES["exchange"]) and {"gcn", "sage"} <= set(REGISTRIES["model"])


@pytest.mark.parametrize("cls", CONFIGS)
def test_defaults_validate_and_bad_values_name_the_field(cls):
    cfg = cls()
    assert cfg.validate() is cfg
    for field in _typed_fields(cls):
        with pytest.raises(ParamError) as info:
            cls(**{field: BAD})
        assert any(re.fullmatch(TEMPLATE.format(field=field), e) for e in info.value.errors), info.value.errors


@pytest.mark.parametrize("cls", CONFIGS)
def test_config_round_trips_through_strings(cls):
    cfg = cls()
    again = cfg.with_strings({f: as_text(getattr(cfg, f)) for f in cls.field_names()})
    assert again.to_dict() == cfg.to_dict()
    for name in cls.field_names():
        assert cls.field_docs().get(name), f"{cls.__qualname__}.{name} has no attribute docstring (help text)"


def _select(section: str, name: str) -> RunConfig:
    """A run config with ``section.method=name`` (a cache needs a sampler: the first registered one)."""
    settings = {f"{section}.method": name}
    if section in ("cache", "schedule") and name != "none":
        settings["sample.method"] = sorted(REGISTRIES["sample"])[0]
    return RunConfig.compose(graph="karate").with_strings(settings)


@pytest.mark.parametrize("kind,name", [m for m in METHODS if m[1] != "none"])
def test_method_is_listed_and_selectable(kind, name):
    section = next(s for s, k in STAGE_SECTIONS.items() if k == kind)
    assert re.search(rf"^  {re.escape(name)}: ", describe_stages(), re.M)
    assert name in RunConfig.method_choices(section)
    cfg = _select(section, name)
    assert cfg.method(section) == name
    assert cfg.to_strings()[f"{section}.method"] == name
    with pytest.raises(ParamError, match=rf"'{section}.method' parameter of RunConfig must be one of \[.*{name}"):
        cfg.with_strings({f"{section}.method": "no-such-method"})


@pytest.mark.parametrize("kind,name", [m for m in METHODS if m[1] != "none"])
def test_method_appears_in_the_dashboard_form(kind, name):
    pytest.importorskip("panel")
    from widgets.control import section_widgets

    section = next(s for s, k in STAGE_SECTIONS.items() if k == kind)
    cfg = _select(section, name)
    widgets = section_widgets(cfg, section)
    assert name in widgets[f"{section}.method"].options and widgets[f"{section}.method"].value == name
    assert {f"{section}.{f}" for f in REGISTRIES[kind][name].Config.field_names()} <= set(widgets)


# ------------------------------------------------------------------------------------------------ per kind
def _graph():
    from workbench.graph import Graph

    gen = torch.Generator().manual_seed(0)
    n = 40
    src = torch.randint(0, n, (160,), generator=gen)
    dst = torch.randint(0, n, (160,), generator=gen)
    keep = src != dst
    return Graph.from_edges(src[keep], dst[keep], n, directed=False)


@pytest.mark.parametrize("name", sorted(REGISTRIES["partition"]))
@pytest.mark.parametrize("num_parts", [2, 3])
def test_partitioner_returns_a_valid_seeded_assignment(name, num_parts):
    g = _graph()
    stage = REGISTRIES["partition"].build(name, seed=1)
    a, b = stage.partition(g, num_parts), REGISTRIES["partition"].build(name, seed=1).partition(g, num_parts)
    part = a.node_part if a.node_part is not None else a.edge_part
    assert part.dtype == torch.int64 and part.shape == ((g.num_nodes,) if a.kind == "edge-cut" else (g.num_edges,))
    assert int(part.min()) >= 0 and int(part.max()) < num_parts
    assert torch.equal(part, b.node_part if b.node_part is not None else b.edge_part)


@pytest.mark.parametrize("name", sorted(REGISTRIES["model"]))
def test_model_is_seeded_and_has_its_widths(name):
    stage = REGISTRIES["model"].build(name, hidden=5, num_layers=3)
    a, b = stage.build(in_dim=4, out_dim=2, seed=7), stage.build(in_dim=4, out_dim=2, seed=7)
    assert a.input_widths == stage.input_widths(4) == [4, 5, 5]
    x = torch.randn(6, 4)
    assert torch.equal(a(x, lambda h, layer: h), b(x, lambda h, layer: h))


def _exchange_run(name, world_size, **exchange):
    from train_helpers import run_inprocess, tiny_graph

    g = tiny_graph(num_nodes=60, directed=True, seed=5)
    part = torch.arange(g.num_nodes) % world_size
    cfg = RunConfig.compose(graph="tiny", exchange=name, model="sage", num_layers=3, hidden=8, epochs=4, seed=2,
                            **exchange)
    return run_inprocess(cfg.build(graph=g, node_part=None if world_size == 1 else part), world_size)


@pytest.fixture(autouse=True)
def _train_helpers_on_path():
    import sys
    from pathlib import Path

    here = str(Path(__file__).resolve().parents[1] / "train")
    if here not in sys.path:
        sys.path.insert(0, here)


@pytest.mark.parametrize("name", sorted(REGISTRIES["exchange"]))
def test_exchange_reproduces_the_single_process_run_with_predicted_bytes(name):
    single, _, _ = _exchange_run(name, 1)
    multi, results, events = _exchange_run(name, 3)
    assert multi["losses"] == pytest.approx(single["losses"], rel=1e-5)
    for key, sums in single["param_checksums"].items():
        assert multi["param_checksums"][key] == pytest.approx(sums, rel=1e-5, abs=1e-6)
    assert multi["bytes_by_epoch"] == multi["predicted_bytes_by_epoch"] == [multi["predicted_bytes_per_epoch"]] * 4
    assert multi["bytes_per_epoch_by_kind"] == multi["predicted_bytes_per_epoch_by_kind"]


@pytest.mark.parametrize("name", sorted(REGISTRIES["exchange"]))
@pytest.mark.parametrize("staleness,epsilon", [("epoch-fixed", 1), ("variation-gap", 0.05)])
def test_exchange_staleness_policy_keeps_bytes_predicted(name, staleness, epsilon):
    from workbench.events import Staleness

    try:
        REGISTRIES["exchange"][name].Config(staleness=staleness, epsilon=epsilon)
    except ParamError:  # an exchange with its own staleness (prefetch: tau) refuses SANCUS's policies
        pytest.skip(f"{name} takes no staleness={staleness!r}")
    summary, results, events = _exchange_run(name, 3, staleness=staleness, epsilon=epsilon)
    assert summary["bytes_by_epoch"] == summary["predicted_bytes_by_epoch"]
    assert summary["broadcasts_skipped"] > 0 and summary["comm_reduction"] > 0
    if staleness == "epoch-fixed":
        assert summary["max_age"] == epsilon
    assert len([e for e in events if isinstance(e, Staleness)]) == 3 * 3 * 4
