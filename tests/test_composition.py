"""Stages declare what they need and provide; a run lacking a need is refused before any worker starts.

The cross-paper settings that crashed on a rank (an inclusion cache without inclusion probabilities) or
were silently ignored (a cache under a ByteGNN schedule, staleness on an exchange that a mini-batch trainer
never calls, a schedule on edge-sampled training) are refused by :func:`check_composition`, through the
CLI as one line with exit status 2, and nothing is loaded or started.
"""

from __future__ import annotations

import inspect
import re

import pytest

from workbench._validation import ParamError
from workbench.cli import main
from workbench.compose import STAGE_SECTIONS, RunConfig, load_stage_modules
from workbench.stage_listing import composition_matrix
from workbench.composition import CAPABILITIES, check_composition
from workbench.composition import TRAINERS as TRAINER_CLASSES
from workbench.runtime.recipes import _load_module, available_recipes, load_recipe, recipe_variants
from workbench.stages import registry

REFUSED = [
    ("bytegnn", {"cache.method": "inclusion"}, "cache.method", "inclusion probabilities"),
    ("distdgl", {"exchange.method": "halo", "exchange.staleness": "epoch-fixed"}, "exchange.method",
     "layer embeddings"),
    ("psc_gcn", {"schedule.method": "fifo"}, "schedule.method", "worker processes"),
    ("g3", {"sample.method": "neighbor"}, "step.method", "whole parts"),   # G3 bins under sampling
    ("distdgl", {"step.method": "binned", "step.bin_limit": "16"}, "step.method", "whole parts"),
    ("distdgl", {"step.memory_budget": "4096"}, "step.memory_budget", "whole parts"),   # a whole part's budget
]


@pytest.mark.parametrize("recipe,settings,name,words", REFUSED, ids=[f"{r[0]}-{r[2]}" for r in REFUSED])
def test_cross_paper_settings_that_crashed_or_were_ignored_are_refused(recipe, settings, name, words):
    cfg = load_recipe(recipe)().with_strings(settings)
    with pytest.raises(ParamError) as info:
        check_composition(cfg)
    assert f"'{name}'" in str(info.value) and words in str(info.value)
    with pytest.raises(ParamError):
        cfg.build()


@pytest.mark.parametrize("recipe,settings,name,words", REFUSED[:2], ids=["bytegnn-inclusion", "distdgl-halo"])
def test_cli_refuses_in_one_line_before_anything_starts(tmp_path, capsys, recipe, settings, name, words):
    argv = ["run", recipe, "--graph", "karate", "--runner", "local", "--workers", "2", "--epochs", "1",
            "--out", str(tmp_path / "runs")]
    for k, v in settings.items():
        argv += ["--set", f"{k}={v}"]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and name in err and words in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())   # no run log: nothing ran


def test_a_method_whose_library_does_not_import_is_refused_before_start(tmp_path, capsys, monkeypatch):
    """Without DGL (a newer torch) ``sample.method=dgl`` is refused by the composition check with the one
    template, through the CLI in one line, not by the rank that would build the sampler; the matrix lists it."""
    import workbench.sample.samplers as samplers

    monkeypatch.setattr(samplers, "dgl_available", lambda: False)
    with pytest.raises(ParamError, match=r"^The 'sample.method' parameter of RunConfig must be a method whose "
                                         r"library imports here: 'dgl' needs DGL .*Got 'dgl' instead\.$"):
        check_composition(RunConfig.compose(graph="karate", sample="dgl"))
    out = tmp_path / "runs"
    assert main(["run", "distdgl", "--graph", "karate", "--runner", "local", "--workers", "2", "--epochs", "1",
                 "--set", "sample.method=dgl", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs DGL" in err and "Traceback" not in err
    assert not out.exists() or not any(out.iterdir())   # no run log: nothing ran
    rows = [r for r in composition_matrix() if r["sample"] == "dgl"]
    assert rows and all(r["status"] == "refused" and "needs DGL" in r["why"] for r in rows)


def test_every_recipe_variant_composes():
    for name in available_recipes():
        module = _load_module(name)
        for variant in recipe_variants(module):
            fn = getattr(module, variant)
            if any(p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD
                   for p in inspect.signature(fn).parameters.values()):
                continue   # a helper that needs data (hp_gcn's byte formulas), not a run
            cfg = fn()
            if isinstance(cfg, RunConfig):
                check_composition(cfg)


def test_declarations_name_known_capabilities_and_each_need_has_a_provider():
    load_stage_modules()
    programs = list(TRAINER_CLASSES.values())
    provided = set().union(*(p.provides for p in programs))
    for kind in STAGE_SECTIONS.values():
        for name, cls in registry(kind).items():
            assert set(getattr(cls, "requires", ())) <= set(CAPABILITIES), (kind, name)
            given = cls.provides_for(cls.Config()) if hasattr(cls, "provides_for") else getattr(cls, "provides", ())
            assert set(given) <= set(CAPABILITIES), (kind, name)
            provided |= set(given)
    assert provided == set(CAPABILITIES)
    for program in programs:
        assert program.trainer != "this trainer" and set(program.provides) <= set(CAPABILITIES)


TINY = "sbm:num_nodes=200,num_blocks=3,avg_degree=6,num_features=8,seed=0"


def _cell(row: dict) -> RunConfig:
    cfg = RunConfig.compose(graph=TINY, sample=None if row["sample"] == "none" else row["sample"], epochs=1)
    cfg = cfg.replace(**{row["section"]: None if row["method"] == "none" else row["method"]})
    return cfg.with_strings({"schedule.workers": "1"}) if cfg.schedule is not None else cfg


MATRIX = composition_matrix()


def _first_cells() -> dict:
    """Cell id -> the id of the first cell with the same config (a section's default method is the same run in
    every section: ``neighbor-sync-allreduce`` is ``neighbor-loss-cross_entropy``), so each config runs once."""
    first, out = {}, {}
    for r in MATRIX:
        cell = f"{r['sample']}-{r['section']}-{r['method']}"
        key = repr(sorted(_cell(r).to_strings().items())) if r["status"] == "composes" else cell
        out[cell] = first.setdefault(key, cell)
    return out


FIRST = _first_cells()


@pytest.mark.parametrize("row", MATRIX, ids=[f"{r['sample']}-{r['section']}-{r['method']}" for r in MATRIX])
def test_every_matrix_cell_runs_or_is_refused_before_start(row):
    """Generated from the registries: a method registered tomorrow is a new cell the day it is registered."""
    from workbench.runtime.launch import launch

    if row["status"] == "refused":
        assert row["why"]
        with pytest.raises(ParamError, match=r"(^|\n  - )The '.*' parameter of RunConfig must be .*\. Got .* "
                                             r"instead\.$"):   # more than one where a method is unavailable here
            _cell(row).build()
        return
    cell = f"{row['sample']}-{row['section']}-{row['method']}"
    if FIRST[cell] != cell:   # the same run as an earlier cell: it composes, it ran there
        _cell(row).build()
        return
    summary = launch(_cell(row), runner="local", workers=2).wait()
    assert summary["world_size"] == 2 and len(summary["losses"]) == 1
    if summary["predicted_bytes_per_epoch"]:
        assert summary["bytes_by_epoch"][-1] == summary["predicted_bytes_per_epoch"]


def test_matrix_holds_the_issues_cells_and_prints(capsys):
    cells = {(r["sample"], r["section"], r["method"]): r["status"] for r in MATRIX}
    assert cells[("neighbor", "cache", "inclusion")] == cells[("psc", "cache", "inclusion")] == "composes"
    assert cells[("neighbor", "schedule", "fifo")] == "composes" and cells[("psc", "schedule", "fifo")] == "refused"
    assert cells[("neighbor", "schedule", "launch-score")] == "composes"
    assert cells[("neighbor", "exchange", "halo")] == "refused"
    assert cells[("none", "exchange", "block_row")] == "composes"
    assert cells[("none", "sync", "model_avg")] == cells[("neighbor", "sync", "model_avg")] == "composes"
    assert cells[("psc", "sync", "model_avg")] == "refused"
    assert cells[("neighbor", "loss", "cross_entropy")] == "composes" and cells[("neighbor", "loss", "link")] == "refused"
    assert cells[("none", "step", "binned")] == "composes" and cells[("neighbor", "step", "binned")] == "refused"
    assert cells[("psc", "step", "binned")] == "refused" and cells[("neighbor", "step", "whole_part")] == "composes"
    assert main(["stages", "--matrix"]) == 0
    out = capsys.readouterr().out
    assert "sample.method=neighbor" in out and "cache.method=inclusion" in out and "refused: " in out


def test_summary_names_the_refiner_and_every_stage(tmp_path):
    from workbench.runtime.launch import launch

    cfg = load_recipe("distdgl")(graph=TINY, epochs=1).with_strings({"partition.refine": "g3"})
    summary = launch(cfg, runner="single").wait()
    assert summary["partition"] == "metis+g3" and summary["stages"]["partition"]["refine"] == "g3"
    assert summary["stages"]["sample"]["method"] == "neighbor" and summary["stages"]["exchange"] is None
    assert summary["stages"]["step"] == {"method": "whole_part", "memory_budget": None}


def test_switching_the_sample_method_brings_the_trainers_exchange():
    cfg = RunConfig.compose(graph="karate", sample="neighbor")
    assert cfg.exchange is None and cfg.notes() == ["exchange.method=none (from sample.method)"]
    assert cfg.replace(sample="psc").method("exchange") == "prefetch"
    assert load_recipe("distdgl")().replace(sample=None).method("exchange") == "halo"
    with pytest.raises(ParamError, match="'exchange.method'"):   # given with the switch: judged, never replaced
        RunConfig.compose(graph="karate", sample="neighbor", exchange="halo").build()


def test_inclusion_cache_under_neighbour_sampling_presamples_its_probabilities():
    """GNNLab's PreSC: the trainer pre-samples an epoch (keys -1, ...: no training draw repeated, traffic
    counted as presample_*) and caches the remote vertices most often an input; on a power-law graph it
    hits far more than a random cache of the same size (degree is close: Chung-Lu inclusion follows degree)."""
    from workbench.runtime.launch import launch

    graph = "chunglu:num_nodes=3000,avg_degree=10,seed=0"
    hits = {}
    for policy in ("random", "inclusion"):
        cfg = load_recipe("distdgl")(graph=graph, epochs=1).with_strings(
            {"cache.method": policy, "cache.ratio": "0.1", "sample.fanouts": "5,5", "sample.batch_size": "64"})
        summary = launch(cfg, runner="local", workers=2).wait()
        hits[policy] = summary["cache_hit_rate"][0]
        presampled = {k for k in summary["bytes_by_kind"] if k.startswith("presample_")}
        assert presampled == ({"presample_sample_req", "presample_sample_resp"} if policy == "inclusion" else set())
    assert hits["inclusion"] > 2 * hits["random"]
    with pytest.raises(ParamError, match="'presample_epochs' parameter"):
        RunConfig.compose(graph="karate", sample="neighbor", cache="inclusion").with_strings(
            {"cache.presample_epochs": "0"})


@pytest.mark.parametrize("policy", ["degree", "lru"])
def test_a_cache_under_a_bytegnn_schedule_counts_as_in_distdgl(policy):
    """The scheduled batches are the inline trainer's batches, so with the input rows pulled through the
    feature source the hits, misses and feature bytes equal those of the same run sampling inline (they
    were sent as a fill and never used: hit rate 0), and the losses are the same."""
    from workbench.runtime.launch import launch

    cfg = load_recipe("bytegnn")(graph="chunglu:num_nodes=3000,avg_degree=10,seed=0", epochs=2).with_strings(
        {"schedule.workers": "1", "cache.method": policy, "cache.ratio": "0.1"})
    scheduled = launch(cfg, runner="local", workers=2).wait()
    inline = launch(cfg.replace(schedule=None), runner="local", workers=2).wait()
    assert scheduled["cache_hit_rate"] == inline["cache_hit_rate"] and min(scheduled["cache_hit_rate"]) > 0.05
    for kind in ("feature_req", "feature", "cache_fill"):
        assert scheduled["bytes_by_kind"].get(kind) == inline["bytes_by_kind"].get(kind), kind
    assert scheduled["losses"] == pytest.approx(inline["losses"], rel=1e-5)


@pytest.mark.parametrize("recipe,method,field,default", [("bytegnn", "spring", "variant", "paper"),
                                                         ("hp_gcn", "metis", "objective", "cut")])
def test_switching_a_method_drops_a_shared_name_the_new_method_refuses(recipe, method, field, default):
    """Found by a CLI matrix of recipes x cross-paper settings: `workbench run bytegnn --set
    partition.method=spring` was refused ("variant ... Got 'patched'"): ByteGNN's partitioner's variant was kept
    for SPRING, whose variants are others. A shared name keeps its value only where the new method accepts it."""
    cfg = load_recipe(recipe)().with_strings({"partition.method": method})
    assert cfg.method("partition") == method and getattr(cfg.partition, field) == default
    assert cfg.partition.seed == load_recipe(recipe)().partition.seed   # a value it accepts is kept


CROSS = [{"partition.method": "random"}, {"partition.method": "spring"}, {"partition.method": "hdrf"},
         {"partition.method": "metis"}, {"partition.refine": "g3"}, {"sample.method": "neighbor"},
         {"sample.method": "psc"}, {"sample.method": "none"}, {"cache.method": "degree"},
         {"cache.method": "inclusion"}, {"cache.method": "lru"}, {"exchange.method": "halo"},
         {"exchange.method": "block_row"}, {"exchange.method": "prefetch"}, {"exchange.staleness": "epoch-fixed"},
         {"schedule.method": "fifo"}, {"sync.method": "model_avg"}, {"sync.method": "allreduce"},
         {"model.method": "sage"}, {"step.method": "binned", "step.bin_limit": "16"}]


@pytest.mark.parametrize("recipe", ["distdgl", "bytegnn", "sancus", "hp_gcn", "catgnn", "psc_gcn", "g3", "full_graph"])
def test_every_recipe_takes_every_cross_paper_setting_or_refuses_it_with_the_template(recipe):
    """Each recipe x each cross-paper setting (160 cells; all of them ran through `workbench run` once, 1 epoch on
    2 ranks: 102 ran, 58 were refused, two of them wrongly (fixed: a switched method kept a value it refuses), none
    crashed): building the program either succeeds or raises the one template
    naming a setting of the run, never another exception."""
    template = r"The '[a-z_]+(\.[a-z_]+)?' parameter of [A-Za-z.]+ must be .*\. Got .* instead\."
    for settings in CROSS:
        try:
            load_recipe(recipe)().with_strings(settings).build()
        except ParamError as exc:
            assert all(re.fullmatch(template, e, flags=re.S) for e in exc.errors), \
                (settings, exc.errors)


TRAINERS = {"full-graph halo": {}, "full-graph block_row": {"exchange.method": "block_row"},
            "G3 bins": {"step.method": "binned", "step.bin_limit": "16", "step.memory_budget": "none"},
            "mini-batch": {"sample.method": "neighbor"},
            "edge-sampled": {"sample.method": "psc"}, "model averaging": {"sync.method": "model_avg"}}


@pytest.mark.parametrize("partition", RunConfig.method_choices("partition"))
def test_every_partitioner_trains_under_every_trainer(partition):
    """Generated from the partition registry: each partitioner (edge-cut, or vertex-cut with owners) runs one epoch
    on 2 ranks under full-graph training (halo, block_row, G3 bins), mini-batch, edge-sampled training and model
    averaging (a schedule's trainer is the mini-batch one). A cell that cannot compose is refused before start."""
    from workbench.runtime.launch import launch

    for trainer, settings in TRAINERS.items():
        cfg = RunConfig.compose(graph=TINY, epochs=1).with_strings({"partition.method": partition, **settings})
        summary = launch(cfg, runner="local", workers=2, out=None).wait()
        assert summary["world_size"] == 2 and len(summary["losses"]) == 1, trainer
        assert summary["partition"].split("+")[0] == partition, (trainer, summary["partition"])
