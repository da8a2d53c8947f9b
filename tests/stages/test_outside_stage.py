"""A stage written outside the package is checked by ``workbench.testing`` as a registered one is.

The classes below are not in any registry (the exchange is registered only while its check runs, and the
registry is as before afterwards); the broken ones are caught with a message naming the stage and what failed.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from workbench._validation import ErrorCollector
from workbench.cache import CACHES, Cache
from workbench.partition import PARTITIONERS, Partitioner
from workbench.stages import REGISTRIES
from workbench.testing import (StageCheckFailed, check_config, check_exchange, check_stage, parametrize_with_checks,
                               registered, stage_checks, stage_kind)


class Halves(Partitioner):
    """Contiguous id ranges: the first ``n / k`` ids in part 0, and so on."""

    name = "outside-halves"

    def _partition(self, graph, num_parts):
        return torch.arange(graph.num_nodes) * num_parts // graph.num_nodes


class Unseeded(Halves):
    """Broken: ignores its seed (a fresh random assignment every call)."""

    name = "outside-unseeded"

    def _partition(self, graph, num_parts):
        return torch.randint(0, num_parts, (graph.num_nodes,))


class HighestId(Cache):
    """A static cache of the highest remote ids."""

    name = "outside-highest-id"

    @dataclasses.dataclass(kw_only=True)
    class Config(Cache.Config):
        offset: int = 0
        """Added to every score (has no effect on the order)."""

        def _validate(self, errs: ErrorCollector) -> None:
            super()._validate(errs)
            errs.check(isinstance(self.offset, int) and not isinstance(self.offset, bool), "offset", "an int",
                       self.offset)

    def scores(self, num_nodes, *, graph=None, degrees=None, probabilities=None):
        return torch.arange(num_nodes, dtype=torch.float64) + self.config.offset


class Greedy(HighestId):
    """Broken: caches every candidate whatever ``ratio`` says."""

    name = "outside-greedy"

    def capacity(self, num_candidates):
        return num_candidates


class Unvalidated(HighestId):
    """Broken: a typed field its ``_validate`` never checks."""

    name = "outside-unvalidated"

    @dataclasses.dataclass(kw_only=True)
    class Config(Cache.Config):
        boost: int = 1
        """Never checked."""


def test_outside_classes_are_in_no_registry():
    for cls in (Halves, Unseeded, HighestId, Greedy, Unvalidated):
        assert cls.name not in REGISTRIES[stage_kind(cls)]
    assert stage_kind(Halves) == "partition" and stage_kind(HighestId) == "cache"


@parametrize_with_checks([Halves, HighestId, HighestId(ratio=0.5, offset=3)])
def test_outside_stage_conforms(stage, check):
    check(stage)


def test_check_stage_passes_a_good_outside_stage():
    check_stage(Halves)
    check_stage(HighestId)
    assert "check_selectable" not in [getattr(c, "__name__", "") for c in stage_checks(Halves)]  # not registered


def test_an_unseeded_partitioner_is_caught():
    with pytest.raises(AssertionError, match=r"^partition method 'outside-unseeded' \(Unseeded\) failed "
                                             r"check_partitioner: 2 parts: the same seed gave two different "
                                             r"assignments$"):
        check_stage(Unseeded)


def test_a_cache_that_ignores_its_ratio_is_caught():
    with pytest.raises(StageCheckFailed, match=r"^cache method 'outside-greedy' \(Greedy\) failed "
                                               r"check_cache_ratio_zero: ratio 0: rank 0 holds \d+ rows$"):
        check_stage(Greedy)


def test_a_field_its_validate_never_checks_is_caught():
    with pytest.raises(AssertionError, match=r"^cache method 'outside-unvalidated' \(Unvalidated\) failed "
                                             r"check_config_rejects_bad_values: "
                                             r"Unvalidated.Config\(boost='bogus-value'\) was accepted"):
        check_stage(Unvalidated)
    with pytest.raises(AssertionError, match=r"^config Unvalidated.Config failed check_config_rejects_bad_values"):
        check_config(Unvalidated.Config)


def test_an_outside_exchange_runs_registered_only_while_checked():
    from workbench.compose import load_stage_modules

    load_stage_modules()
    base = REGISTRIES["exchange"]["halo"]

    class OutsideHalo(base):
        name = "outside-halo"

    check_exchange(OutsideHalo)
    assert "outside-halo" not in REGISTRIES["exchange"]
    with registered(PARTITIONERS["block"]) as name:   # an already registered name is put back as it was
        assert name == "block"
    assert PARTITIONERS["block"].name == "block" and set(CACHES) >= {"none", "degree"}


def test_the_docs_example_of_a_new_method_passes_the_conformance_checks(tmp_path, monkeypatch):
    """The "Adding a method" snippet of docs/architecture.rst, as printed (the page includes the file
    docs/snippets/stripes.py verbatim): registered, checked, refused a bad value."""
    import importlib
    from pathlib import Path

    from workbench.partition.base import PARTITIONERS
    from workbench.testing import check_stage

    docs = Path(__file__).parents[2] / "docs"
    assert ".. literalinclude:: snippets/stripes.py" in (docs / "architecture.rst").read_text()
    code = (docs / "snippets" / "stripes.py").read_text()
    (tmp_path / "readme_stripes.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        module = importlib.import_module("readme_stripes")
        check_stage(module.Stripes)
        assert PARTITIONERS["stripes"] is module.Stripes
    finally:
        PARTITIONERS.pop("stripes", None)
