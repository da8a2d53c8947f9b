"""Stages added from outside the package (the docs' worked examples): the ``loss`` and ``evaluate`` snippets of
docs/architecture.rst, as printed, pass the conformance checks, and installed as a plugin (a distribution naming
the modules in the ``workbench.stages`` entry-point group) they run from the CLI with ``--set``; a combination a
method cannot serve is refused before start with the one message template."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.testing import check_stage

DOCS = Path(__file__).parents[2] / "docs"


@pytest.fixture
def snippet_losses(tmp_path, monkeypatch):
    """The snippet imported as printed (its methods registered for the test, removed after)."""
    from workbench.train.objective import LOSSES

    (tmp_path / "docs_losses.py").write_text((DOCS / "snippets" / "losses.py").read_text())
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        yield importlib.import_module("docs_losses")
    finally:
        for name in ("label_smoothing", "margin"):
            LOSSES.pop(name, None)
        sys.modules.pop("docs_losses", None)


def test_the_docs_losses_pass_the_conformance_checks(snippet_losses):
    assert ".. literalinclude:: snippets/losses.py" in (DOCS / "architecture.rst").read_text()
    check_stage(snippet_losses.LabelSmoothing)     # its shares add up, it trains on 2 ranks
    check_stage(snippet_losses.MarginRanking)      # the same, with a schedule's link pairs


def test_label_smoothing_zero_is_cross_entropy(snippet_losses):
    import torch

    from workbench.train.objective import LOSSES, NodeTargets

    logits, labels = torch.randn(6, 3, generator=torch.Generator().manual_seed(0)), torch.arange(6) % 3
    rows = torch.tensor([True, False, True, True, False, True])
    plain = LOSSES.build("cross_entropy").loss(NodeTargets(logits, labels, rows, 10))
    smooth = LOSSES.build("label_smoothing", smoothing=0.0).loss(NodeTargets(logits, labels, rows, 10))
    assert abs(float(plain) - float(smooth)) < 1e-7


@pytest.fixture
def snippet_evaluators(tmp_path, monkeypatch):
    """The evaluator snippet imported as printed (registered for the test, removed after)."""
    from workbench.train.evaluation import EVALUATORS

    (tmp_path / "docs_evaluators.py").write_text((DOCS / "snippets" / "evaluators.py").read_text())
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        yield importlib.import_module("docs_evaluators")
    finally:
        EVALUATORS.pop("every_few", None)
        sys.modules.pop("docs_evaluators", None)


def test_the_docs_evaluator_passes_the_conformance_checks(snippet_evaluators):
    assert ".. literalinclude:: snippets/evaluators.py" in (DOCS / "architecture.rst").read_text()
    check_stage(snippet_evaluators.EveryFew)      # global metrics in range; training left alone


@pytest.fixture
def plugin_env(tmp_path):
    """An environment in which the snippets are an installed plugin: the modules and a distribution whose
    entry_points.txt names them in the ``workbench.stages`` group, on PYTHONPATH (what ``pip install`` leaves)."""
    (tmp_path / "wb_losses.py").write_text((DOCS / "snippets" / "losses.py").read_text())
    (tmp_path / "wb_evaluators.py").write_text((DOCS / "snippets" / "evaluators.py").read_text())
    dist = tmp_path / "wb_stages-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: wb-stages\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[workbench.stages]\nlosses = wb_losses\nevaluators = wb_evaluators\n")
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "TQDM_DISABLE": "1"}


def _workbench(env, *args, out):
    return subprocess.run([sys.executable, "-m", "workbench", *args], capture_output=True, text=True, env=env,
                          timeout=300, cwd=out)


def test_a_plugin_loss_runs_from_the_cli_and_a_combination_it_cannot_serve_is_refused(plugin_env, tmp_path):
    listed = _workbench(plugin_env, "stages", "loss", out=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "label_smoothing: loss.smoothing=0.1" in listed.stdout and "margin:" in listed.stdout

    run = _workbench(plugin_env, "run", "full_graph", "--graph", "karate", "--epochs", "3", "--runner", "local", "--workers", "2",
                     "--json", "--out", str(tmp_path / "runs"), "--set", "loss.method=label_smoothing",
                     "--set", "loss.smoothing=0.2", out=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout)
    assert summary["stages"]["loss"] == {"method": "label_smoothing", "smoothing": 0.2}
    assert len(summary["losses"]) == 3 and summary["losses"][-1] < summary["losses"][0]

    refused = _workbench(plugin_env, "run", "full_graph", "--graph", "karate", "--epochs", "1", "--runner", "local",
                         "--out", str(tmp_path / "runs"), "--set", "loss.method=margin", out=tmp_path)
    assert refused.returncode != 0
    assert ("The 'loss.method' parameter of RunConfig must be a method that full-graph training (sample.method=none) "
            "can use: 'margin' needs steps that sample each seed's positive and negative partners") in refused.stderr
    assert "Traceback" not in refused.stderr and not list((tmp_path / "runs").glob("*margin*"))


def test_a_plugin_evaluator_runs_from_the_cli_and_a_trainer_it_cannot_serve_is_refused(plugin_env, tmp_path):
    listed = _workbench(plugin_env, "stages", "evaluate", out=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "every_few: evaluate.every=5" in listed.stdout and "whole_part:" in listed.stdout

    run = _workbench(plugin_env, "run", "sancus", "--graph", "karate", "--epochs", "4", "--runner", "local",
                     "--workers", "2", "--json", "--out", str(tmp_path / "runs"), "--set", "evaluate.method=every_few",
                     "--set", "evaluate.every=2", out=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout)
    assert summary["stages"]["evaluate"] == {"method": "every_few", "every": 2}
    # fresh forwards in epochs 0, 2 and 3 only: the evaluation broadcasts of three epochs, each the training's
    fresh = summary["bytes_by_kind"]["eval_bcast_fwd"]
    assert fresh == 3 * summary["predicted_bytes_per_epoch_by_kind"]["bcast_fwd"]

    refused = _workbench(plugin_env, "run", "distdgl", "--graph", "karate", "--epochs", "1", "--runner", "local",
                         "--out", str(tmp_path / "refused"), "--set", "evaluate.method=every_few", out=tmp_path)
    assert refused.returncode != 0
    assert ("The 'evaluate.method' parameter of RunConfig must be a method that mini-batch training") in refused.stderr
    assert "'every_few' needs steps whose forward computes every owned row's logits" in refused.stderr
    assert "Traceback" not in refused.stderr and not (tmp_path / "refused").exists()
