"""The composed run config: sections, dotted and flat names, method switches, errors all at once."""

from __future__ import annotations

import pickle

import pytest

from workbench._validation import ParamError
from workbench.compose import RunConfig


def test_defaults_and_sections():
    cfg = RunConfig.compose(graph="karate")
    assert [cfg.method(s) for s in ("partition", "sample", "cache", "exchange", "model")] == \
        ["metis", "none", "none", "halo", "gcn"]
    assert cfg.to_dict()["partition"]["method"] == "metis" and cfg.to_dict()["sample"] is None
    assert cfg.with_strings(cfg.to_strings()) == cfg
    assert pickle.loads(pickle.dumps(cfg)) == cfg


def test_dotted_and_flat_names_set_the_same_fields():
    a = RunConfig.compose(graph="karate").with_strings({"train.epochs": "3", "model.hidden": "8",
                                                        "exchange.staleness": "epoch-fixed"})
    b = RunConfig.compose(graph="karate").with_strings({"epochs": "3", "hidden": "8", "staleness": "epoch-fixed"})
    assert a == b and a.train.epochs == 3 and a.exchange.staleness == "epoch-fixed"


def test_method_switch_keeps_shared_fields_and_options_reach_the_stage():
    cfg = RunConfig.compose(graph="karate", seed=5)
    assert cfg.partition.seed == cfg.train.seed == 5                  # the run's seed seeds every stage
    rand = cfg.with_strings({"partition.method": "random"})
    assert rand.method("partition") == "random" and rand.partition.seed == 5
    metis = rand.with_strings({"partition.method": "metis", "partition.balance_train": "true"})
    assert metis.partition.balance_train is True
    block = cfg.replace(exchange="block_row", staleness="variation-gap", epsilon=0.1, weight_grad="cagnet")
    assert block.method("exchange") == "block_row" and block.exchange.weight_grad == "cagnet"
    assert block.replace(exchange="halo").exchange.staleness == "variation-gap"   # staleness kept across exchanges


def test_partition_options_reach_the_partitioner():
    from workbench.data import load_graph

    g = load_graph("sbm:num_nodes=200,num_blocks=4,avg_degree=6,num_features=4,seed=0")
    cfg = RunConfig.compose(graph="sbm", epochs=1).with_strings({"partition.balance_train": "true"})
    _, node_part, result = cfg.build(graph=g).trainer._load_and_partition(2)
    assert result.options["balance_train"] is True and int(node_part.max()) == 1


def test_errors_are_reported_at_once_with_the_valid_names():
    with pytest.raises(ParamError) as info:
        RunConfig.compose(graph="karate").with_strings(
            {"model.method": "gat", "model.num_layers": "7", "train.lr": "-1", "exchange.staleness": "often"})
    text = str(info.value)
    assert "4 invalid parameters" in text
    assert "'model.method' parameter of RunConfig must be one of ['gcn', 'sage']" in text
    for name in ("'num_layers'", "'lr'", "'staleness'"):
        assert name in text
    with pytest.raises(ParamError, match=r"no option 'exchange.epsilonn' \(did you mean 'exchange.epsilon'\?\)"):
        RunConfig.compose().with_strings({"exchange.epsilonn": "1"})
    with pytest.raises(ParamError, match=r"option of partition.method=metis"):
        RunConfig.compose(partition="random").with_strings({"balance_train": "true"})


def test_optional_sections():
    cfg = RunConfig.compose(graph="karate")
    with pytest.raises(ParamError, match="'sample.method' parameter .* before sample options"):
        cfg.with_strings({"sample.fanouts": "10,5"})
    with pytest.raises(ParamError, match=r"'exchange.method' parameter of RunConfig must be one of \['block_row', "
                                         r"'halo', 'prefetch'\]: full-graph training"):
        cfg.with_strings({"exchange.method": "none"}).build()   # judged with the program (workbench.composition)
    with pytest.raises(ParamError, match="'partition.method' parameter of RunConfig must be one of"):
        cfg.with_strings({"partition.method": "none"})


def test_a_method_is_chosen_by_method_or_the_section_name_only():
    """``SECTION.method=NAME`` and ``SECTION=NAME`` choose a method; ``cache.policy`` / ``schedule.policy`` no longer
    do (no cache or schedule method has a field of that name)."""
    cfg = RunConfig.compose(graph="karate", sample="neighbor")
    assert cfg.with_strings({"cache.method": "degree"}).method("cache") == "degree"
    assert cfg.with_strings({"cache": "degree"}).method("cache") == "degree"
    with pytest.raises(ParamError, match="RunConfig has no option 'cache.policy'"):
        cfg.with_strings({"cache": "lru", "cache.policy": "degree"})
    with pytest.raises(ParamError, match="RunConfig has no option 'schedule.policy'"):
        cfg.with_strings({"schedule": "fifo", "schedule.policy": "fixed-depth"})


def test_flat_legacy_recipe_names_still_work():
    from recipes import sancus

    cfg = sancus.recipe().with_strings({"staleness": "variation-gap", "epsilon": "0.02", "partition": "random"})
    assert (cfg.method("exchange"), cfg.exchange.staleness, cfg.method("partition")) == \
        ("block_row", "variation-gap", "random")
    assert {"epochs", "hidden", "staleness", "partition", "balance_train"} <= set(RunConfig.field_names())


def test_fanouts_alone_set_the_layer_count():
    """DGL's examples take the number of layers from the fan-outs; both given must agree."""
    from recipes import bytegnn, distdgl

    cfg = distdgl.recipe().with_strings({"sample.fanouts": "5,5"})           # the recipe has 3 layers
    assert cfg.model.num_layers == 2 and cfg.notes() == ["model.num_layers=2 (from sample.fanouts)"]
    assert cfg.with_strings({"model.hidden": "16"}).notes() == cfg.notes()   # later settings keep the note
    assert cfg.with_strings(cfg.to_strings()).notes() == cfg.notes()         # and the round trip
    assert distdgl.recipe(fanouts=(4, 4)).model.num_layers == distdgl.gcn(fanouts=(4, 4)).model.num_layers == 2
    assert bytegnn.recipe(fanouts=(3, 3, 3)).model.num_layers == 3
    built = RunConfig.compose(graph="karate", sample="neighbor", fanouts=(5, 5, 5))
    assert built.model.num_layers == 3 and built.notes() == ["model.num_layers=3 (from sample.fanouts)",
                                                             "exchange.method=none (from sample.method)"]
    assert built.with_strings(built.to_strings()).notes() == built.notes()
    assert built.replace(exchange="halo").notes() == ["model.num_layers=3 (from sample.fanouts)"]
    assert distdgl.recipe().notes() == [] and distdgl.recipe(fanouts=(1, 2, 3)).notes() == []   # nothing changed
    assert distdgl.recipe(fanouts=(5, 5), num_layers=2).model.num_layers == 2                       # both, agreeing


def test_the_derived_settings_are_named_rules_each_leaving_its_note():
    from workbench.compose_settings import DERIVED_RULES

    assert [rule.target for rule in DERIVED_RULES] == ["model.num_layers", "exchange.method"]
    cfg = RunConfig.compose(graph="karate", sample="neighbor", fanouts=(5, 5, 5))
    assert [note.partition("=")[0] for note in cfg.notes()] == [rule.target for rule in DERIVED_RULES]
    assert cfg.with_strings({"model.num_layers": "3", "exchange.method": "none"}).notes() == cfg.notes()  # same values
    assert cfg.with_strings({"sample.fanouts": "5,5", "model.num_layers": "2", "exchange.method": "prefetch"}
                            ).notes() == []   # the user's own values replace both


def test_fanouts_and_layers_set_to_different_counts_are_one_error_naming_both():
    from recipes import distdgl

    for settings in ({"sample.fanouts": "5,5", "model.num_layers": "3"}, {"fanouts": "5,5", "num_layers": "4"}):
        with pytest.raises(ParamError) as info:
            distdgl.recipe().with_strings(settings)
        assert len(info.value.errors) == 1
        assert "'sample.fanouts'" in str(info.value) and f"model.num_layers={settings.get('num_layers', '3')}" \
            in str(info.value)
    with pytest.raises(ParamError, match=r"'sample.fanouts' parameter of RunConfig must be one fan-out per model "
                                         r"layer \(model.num_layers=2; set sample.fanouts alone"):
        distdgl.recipe().with_strings({"model.num_layers": "2"})             # the layers alone: refused at once
    with pytest.raises(ParamError, match=r"'num_layers' .* Got 5 instead.*taken from sample.fanouts=5,5,5,5,5"):
        distdgl.recipe(fanouts=(5, 5, 5, 5, 5))
