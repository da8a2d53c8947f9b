"""The composed run config: sections, dotted names, section dicts, the two shorthands, method switches, errors all
at once; a name without its section is refused."""

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


def test_dotted_names_section_dicts_and_shorthands_set_the_same_fields():
    a = RunConfig.compose(graph="karate").with_strings({"train.epochs": "3", "model.hidden": "8",
                                                        "exchange.staleness": "epoch-fixed"})
    b = RunConfig.compose(graph="karate").with_strings({"epochs": "3", "model": {"hidden": "8"},
                                                        "exchange": {"staleness": "epoch-fixed"}})
    c = RunConfig.compose(graph="karate", epochs=3, model={"hidden": 8}, exchange={"staleness": "epoch-fixed"})
    d = RunConfig.compose(graph="karate", **{"train.epochs": 3, "model.hidden": 8, "exchange.staleness": "epoch-fixed"})
    assert a == b == c == d and a.train.epochs == 3 and a.exchange.staleness == "epoch-fixed"
    assert RunConfig.compose(train={"epochs": 3}) == RunConfig.compose(epochs=3)


def test_a_section_dict_switches_its_method_first_then_sets_the_fields_of_the_chosen_method():
    cfg = RunConfig.compose(graph="karate", sample={"method": "neighbor", "fanouts": (5, 5), "batch_size": 8})
    assert (cfg.method("sample"), cfg.sample.fanouts, cfg.sample.batch_size) == ("neighbor", (5, 5), 8)
    assert cfg == RunConfig.compose(graph="karate", **{"sample.method": "neighbor", "sample.fanouts": (5, 5),
                                                       "sample.batch_size": 8})
    assert cfg.notes() == RunConfig.compose(graph="karate", sample="neighbor").replace(
        **{"sample.fanouts": (5, 5), "sample.batch_size": 8}).notes()
    assert RunConfig.compose(sample={"method": "none"}).sample is None
    strings = RunConfig.compose().with_strings({"sync": {"method": "model_avg", "interval": "5"}})
    assert (strings.method("sync"), strings.sync.interval) == ("model_avg", 5)
    with pytest.raises(ParamError, match=r"RunConfig has no option 'model.hiden' \(did you mean 'model.hidden'\?\)"):
        RunConfig.compose(model={"hiden": 16})
    with pytest.raises(ParamError, match="'train' parameter of RunConfig must be a TrainLoopConfig or a dict"):
        RunConfig.compose(train="fast")


def test_a_name_without_its_section_is_refused_naming_the_dotted_names_it_could_mean():
    with pytest.raises(ParamError) as info:
        RunConfig.compose(graph="karate", hidden=16, staleness="epoch-fixed", fanouts=(5, 5), hiden=3, epochs=2)
    assert info.value.errors == [
        "The 'hidden' parameter of RunConfig must be a section, a dotted name or a shorthand (epochs, seed): write "
        "model.hidden. Got 16 instead.",
        "The 'staleness' parameter of RunConfig must be a section, a dotted name or a shorthand (epochs, seed): write "
        "exchange.staleness. Got 'epoch-fixed' instead.",
        "The 'fanouts' parameter of RunConfig must be a section, a dotted name or a shorthand (epochs, seed): write "
        "sample.fanouts (with sample.method=dgl or neighbor). Got (5, 5) instead.",
        "The 'hiden' parameter of RunConfig must be a section, a dotted name or a shorthand (epochs, seed) (did you "
        "mean 'model.hidden'?). Got 3 instead."]
    with pytest.raises(ParamError, match=r"'epsilon' parameter of RunConfig must be a section, a dotted name or a "
                                         r"shorthand \(epochs, seed\): write exchange.epsilon. Got '2' instead"):
        RunConfig.compose().with_strings({"epsilon": "2"})


def test_method_switch_keeps_shared_fields_and_options_reach_the_stage():
    cfg = RunConfig.compose(graph="karate", seed=5)
    assert cfg.partition.seed == cfg.train.seed == 5                  # the run's seed seeds every stage
    rand = cfg.with_strings({"partition.method": "random"})
    assert rand.method("partition") == "random" and rand.partition.seed == 5
    metis = rand.with_strings({"partition.method": "metis", "partition.balance_train": "true"})
    assert metis.partition.balance_train is True
    block = cfg.replace(exchange={"method": "block_row", "staleness": "variation-gap", "epsilon": 0.1,
                                  "weight_grad": "cagnet"})
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
        RunConfig.compose(partition="random").with_strings({"partition.balance_train": "true"})


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


def test_recipe_overrides_are_settings_and_seed_seeds_every_section():
    from recipes import sancus

    cfg = sancus.recipe().with_strings({"exchange.staleness": "variation-gap", "exchange.epsilon": "0.02",
                                        "partition": "random"})
    assert (cfg.method("exchange"), cfg.exchange.staleness, cfg.method("partition")) == \
        ("block_row", "variation-gap", "random")
    assert set(RunConfig.field_names()) == {"graph", "num_parts", *RunConfig.section_names()}   # no flat names
    seeded = RunConfig.compose(sample="neighbor", seed=7)
    assert seeded.train.seed == seeded.partition.seed == seeded.sample.seed == 7
    assert sancus.recipe(model={"hidden": 8}, epochs=2).model.hidden == 8


def test_fanouts_alone_set_the_layer_count():
    """DGL's examples take the number of layers from the fan-outs; both given must agree."""
    from recipes import bytegnn, distdgl

    cfg = distdgl.recipe().with_strings({"sample.fanouts": "5,5"})           # the recipe has 3 layers
    assert cfg.model.num_layers == 2 and cfg.notes() == ["model.num_layers=2 (from sample.fanouts)"]
    assert cfg.with_strings({"model.hidden": "16"}).notes() == cfg.notes()   # later settings keep the note
    assert cfg.with_strings(cfg.to_strings()).notes() == cfg.notes()         # and the round trip
    assert distdgl.recipe(sample={"fanouts": (4, 4)}).model.num_layers == 2
    assert distdgl.gcn(sample={"fanouts": (4, 4)}).model.num_layers == 2
    assert bytegnn.recipe(sample={"fanouts": (3, 3, 3)}).model.num_layers == 3
    built = RunConfig.compose(graph="karate", sample={"method": "neighbor", "fanouts": (5, 5, 5)})
    assert built.model.num_layers == 3 and built.notes() == ["model.num_layers=3 (from sample.fanouts)",
                                                             "exchange.method=none (from sample.method)"]
    assert built.with_strings(built.to_strings()).notes() == built.notes()
    assert built.replace(exchange="halo").notes() == ["model.num_layers=3 (from sample.fanouts)"]
    assert distdgl.recipe().notes() == [] and distdgl.recipe(sample={"fanouts": (1, 2,
                                                                                 3)}).notes() == []  # nothing changed
    assert distdgl.recipe(sample={"fanouts": (5, 5)}, model={"num_layers": 2}).model.num_layers == 2    # both, agreeing


def test_the_derived_settings_are_named_rules_each_leaving_its_note():
    from workbench.compose_settings import DERIVED_RULES

    assert [rule.target for rule in DERIVED_RULES] == ["model.num_layers", "exchange.method"]
    cfg = RunConfig.compose(graph="karate", sample={"method": "neighbor", "fanouts": (5, 5, 5)})
    assert [note.partition("=")[0] for note in cfg.notes()] == [rule.target for rule in DERIVED_RULES]
    assert cfg.with_strings({"model.num_layers": "3", "exchange.method": "none"}).notes() == cfg.notes()  # same values
    assert cfg.with_strings({"sample.fanouts": "5,5", "model.num_layers": "2", "exchange.method": "prefetch"}
                            ).notes() == []   # the user's own values replace both


def test_fanouts_and_layers_set_to_different_counts_are_one_error_naming_both():
    from recipes import distdgl

    for settings, layers in (({"sample.fanouts": "5,5", "model.num_layers": "3"}, "3"),
                             ({"sample": {"fanouts": "5,5"}, "model": {"num_layers": "4"}}, "4")):
        with pytest.raises(ParamError) as info:
            distdgl.recipe().with_strings(settings)
        assert len(info.value.errors) == 1
        assert "'sample.fanouts'" in str(info.value) and f"model.num_layers={layers}" \
            in str(info.value)
    with pytest.raises(ParamError, match=r"'sample.fanouts' parameter of RunConfig must be one fan-out per model "
                                         r"layer \(model.num_layers=2; set sample.fanouts alone"):
        distdgl.recipe().with_strings({"model.num_layers": "2"})             # the layers alone: refused at once
    with pytest.raises(ParamError, match=r"'num_layers' .* Got 5 instead.*taken from sample.fanouts=5,5,5,5,5"):
        distdgl.recipe(sample={"fanouts": (5, 5, 5, 5, 5)})


def test_a_setting_given_twice_with_two_values_is_refused():
    """One of the two values would be lost: ``epochs`` beside ``train.epochs``, a section's method by two names, a
    section dict beside a dotted name, ``--set`` twice. The same value twice, and a section's own seed beside the
    ``seed`` shorthand (the section's wins, as documented), are fine."""
    from workbench._validation import parse_settings

    run = RunConfig.compose(graph="karate")
    with pytest.raises(ParamError, match=r"'epochs' parameter .* must be given once: train.epochs is also given as "
                                         r"train.epochs='2'. Got '1'"):
        run.with_strings({"epochs": "1", "train.epochs": "2"})
    with pytest.raises(ParamError, match=r"'partition' parameter .* given once: partition.method is also given as "
                                         r"partition.method='random'"):
        run.replace(**{"partition.method": "random", "partition": "hash"})
    with pytest.raises(ParamError, match=r"'model.hidden' .* given once: model.hidden is also given as "
                                         r"model\['hidden'\]=8. Got 16"):
        run.replace(model={"hidden": 8}, **{"model.hidden": 16})
    with pytest.raises(ParamError, match=r"'train.epochs' parameter of --set must be given once"):
        parse_settings(["train.epochs=1", "train.epochs=2"])
    assert run.with_strings({"epochs": "2", "train.epochs": "2"}).train.epochs == 2
    both = run.with_strings({"seed": "3", "partition.seed": "9"})
    assert (both.partition.seed, both.train.seed) == (9, 3)
