"""The time claims measured on emulated hosts (:mod:`reproduce.emulated`): the quick runs give a positive
time for every variant and seed, and every ratio a claim reads. Only the structure is checked, never a speed
ratio (tests never depend on speed). Needs root (network namespaces, tc); joins the ``host`` xdist group
(``tests/conftest.py``) like every test on emulated hosts."""

from __future__ import annotations

import math

import pytest

from reproduce import emulated
from workbench.runtime.netcluster import unavailable_reason

REASON = unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")


@pytest.fixture(autouse=True)
def _emulated_on(monkeypatch):
    """tests/conftest.py switches the emulated cluster off for the suite; these tests run in its host group."""
    monkeypatch.delenv(emulated.SWITCH, raising=False)


def _check(result, variants, ratios, epochs):
    assert isinstance(result, dict), result
    assert result["variants"] == variants and result["seeds"] == [0]
    assert result["setting"]["hosts"] == emulated.HOSTS and result["setting"]["link"] == emulated.LINK
    (run,) = result["per_seed"]
    assert run["seed"] == 0 and set(run["variants"]) == set(variants)
    for name, f in run["variants"].items():
        assert f["median_s"] > 0 and f["wall_median_s"] > 0, name
        assert len(f["times_s"]) == epochs and all(t > 0 for t in f["times_s"]), name
        assert f["train_bytes"] > 0 and 0 <= f["comm_share"] <= 1, name
    assert set(result["ratios"]) == ratios
    for name, values in result["ratios"].items():
        assert len(values) == 1 and all(v is None or math.isfinite(v) for v in values), name
    assert result["wall_s"] > 0 and len(result["load_average"]) == 2


def test_distdgl_epochs_measures_every_partition():
    result = emulated.distdgl_epochs(quick=True, seeds=(0,))
    _check(result, emulated.DISTDGL_VARIANTS, {"random/metis", "metis/metis+mc"}, result["setting"]["epochs"])
    run = result["per_seed"][0]["variants"]
    assert run["random"]["train_bytes"] > run["metis"]["train_bytes"]   # a count, not a speed: min-cut is local


def test_distdgl_epochs_on_papers_like_measures_the_inversion_variants():
    result = emulated.distdgl_epochs(quick=True, seeds=(0,), graph="papers")
    _check(result, emulated.PAPERS_VARIANTS, {"metis/random", "metis+mc/random", "metis own/random own"},
           result["setting"]["epochs"])
    assert result["setting"]["graph"].startswith("papers-like:") and "labelled_blocks=8" in result["setting"]["graph"]


def test_psc_epochs_measures_every_variant():
    result = emulated.psc_epochs(quick=True, seeds=(0,))
    _check(result, emulated.PSC_VARIANTS, {"sync/psc", "sync/psc eps=0.01", "sync/pipegcn", "tau2_vs_tau1",
                                                  "convergence sync/psc"},
           result["setting"]["iterations"])
    run = result["per_seed"][0]["variants"]
    assert run["psc"]["train_bytes"] < run["sync"]["train_bytes"]      # ε = 0.1 sends fewer rows (a count)
    assert all(len(f["val_acc"]) == result["setting"]["iterations"] for f in run.values())
