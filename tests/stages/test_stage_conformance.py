"""Conformance of every registered stage method, through the public harness (``workbench.testing``).

Parametrised over ``workbench.stages.REGISTRIES`` when the tests are collected, so a method registered
later (a sampler, a cache policy, a partitioner) runs through the same checks with no edit here: what each
kind must do is :mod:`workbench.testing.checks` (config validation with the one message template, the
``--set`` round trip, listed and selectable; valid seeded partitions, well-formed seeded blocks, cache rows
and bytes, exchanges reproducing the single-process run with the predicted bytes, seeded models). The
dashboard form (``widgets``, which the core may not import) is checked here.
"""

from __future__ import annotations

import pytest

from workbench.compose import STAGE_SECTIONS, RunConfig, load_stage_modules
from workbench.stages import REGISTRIES
from workbench.testing import check_config, parametrize_with_checks
from workbench.train.loop import TrainLoopConfig

load_stage_modules()
METHODS = [(kind, name) for kind in sorted(STAGE_SECTIONS.values()) for name in sorted(REGISTRIES.get(kind, {}))]


def test_every_stage_kind_has_a_registry():
    assert set(STAGE_SECTIONS.values()) <= set(REGISTRIES)
    assert {"metis", "random", "block"} <= set(REGISTRIES["partition"])
    assert {"halo", "block_row"} <= set(REGISTRIES["exchange"]) and {"gcn", "sage"} <= set(REGISTRIES["model"])


@parametrize_with_checks([REGISTRIES[kind][name] for kind, name in METHODS])
def test_registered_method_conforms(stage, check):
    check(stage)


def test_train_loop_config_conforms():
    check_config(TrainLoopConfig)


def _select(section: str, name: str) -> RunConfig:
    """A run config with ``section.method=name`` (a cache needs a sampler: the first registered one)."""
    settings = {f"{section}.method": name}
    if section in ("cache", "schedule") and name != "none":
        settings["sample.method"] = sorted(REGISTRIES["sample"])[0]
    return RunConfig.compose(graph="karate").with_strings(settings)


@pytest.mark.parametrize("kind,name", [m for m in METHODS if m[1] != "none"])
def test_method_appears_in_the_dashboard_form(kind, name):
    pytest.importorskip("panel")
    from widgets.control import section_widgets

    section = next(s for s, k in STAGE_SECTIONS.items() if k == kind)
    cfg = _select(section, name)
    widgets = section_widgets(cfg, section)
    assert name in widgets[f"{section}.method"].options and widgets[f"{section}.method"].value == name
    assert {f"{section}.{f}" for f in REGISTRIES[kind][name].Config.field_names()} <= set(widgets)
