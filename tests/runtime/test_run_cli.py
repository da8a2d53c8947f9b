"""``workbench run`` / ``workbench runs`` and recipe discovery."""

from __future__ import annotations

import json
import textwrap

import pytest

from workbench._validation import ParamError
from workbench.cli import main
from workbench.runtime.recipes import available_recipes, load_recipe

RECIPE = textwrap.dedent('''
    """A test recipe file."""
    from workbench.testing.tiny_program import TinyConfig

    def recipe(**overrides):
        return TinyConfig(**{"epochs": 2, **overrides})

    def long(**overrides):
        return recipe(**{"epochs": 4, **overrides})
''')


@pytest.fixture
def recipe_file(tmp_path):
    path = tmp_path / "tiny_recipe.py"
    path.write_text(RECIPE)
    return path


def test_repository_recipes_are_discovered():
    names = available_recipes()
    assert "full_graph" in names
    with pytest.raises(ParamError, match=r"'recipe' parameter of workbench run must be one of \[.*'full_graph'"):
        load_recipe("full_grap")


def test_recipe_file_and_variants(recipe_file):
    assert load_recipe(str(recipe_file))().epochs == 2
    assert load_recipe(f"{recipe_file}:long")().epochs == 4
    with pytest.raises(ParamError, match=r"one of \['long', 'recipe'\]"):
        load_recipe(f"{recipe_file}:short")


@pytest.mark.parametrize("spec,valid", [
    ("catgnn:sync_sweep", "'minibatch', 'no_full_neighbours', 'recipe', 'sage'"),
    ("hp_gcn:volume_table", "['gp_baseline', 'recipe', 'rp_baseline', 'transform_first']"),
    ("hp_gcn:batch_plans", "['gp_baseline', 'recipe', 'rp_baseline', 'transform_first']"),
    ("hp_gcn:DEFAULT_GRAPH", "['gp_baseline', 'recipe', 'rp_baseline', 'transform_first']"),
])
def test_helpers_are_not_variants(spec, valid, tmp_path, capsys):
    with pytest.raises(ParamError, match="must be a variant of") as info:
        load_recipe(spec)
    listed = str(info.value).split("one of ")[1].split("]")[0]   # the valid variants, no helper among them
    assert valid.strip("[]") in listed and "sync_sweep" not in listed and "volume_table" not in listed
    assert main(["run", spec, "--out", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and valid in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists()


def test_run_json_prints_the_summary(recipe_file, tmp_path, capsys):
    code = main(["run", str(recipe_file), "--runner", "local", "--workers", "2", "--out", str(tmp_path / "runs"),
                 "--json", "--set", "seed=3", "--epochs", "3"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["epochs"] == 3 and summary["num_ranks"] == 2
    (run_dir,) = list((tmp_path / "runs").iterdir())
    assert json.loads((run_dir / "config.json").read_text())["config"]["seed"] == 3


def test_run_prints_progress_per_epoch_and_runs_lists_it(recipe_file, tmp_path, capsys):
    assert main(["run", str(recipe_file), "--runner", "single", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "epoch 1/2" in out and "epoch 2/2" in out and "finished" in out
    assert main(["runs", str(tmp_path)]) == 0
    assert "tiny_recipe" in capsys.readouterr().out


def test_bad_settings_exit_2_listing_valid_options(recipe_file, tmp_path, capsys):
    out = tmp_path / "runs"
    assert main(["run", str(recipe_file), "--set", "epoch=3", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "did you mean 'epochs'" in err and "Valid options:" in err
    assert main(["run", str(recipe_file), "--set", "epochs=many", "--out", str(out)]) == 2
    assert "'epochs' parameter of TinyConfig" in capsys.readouterr().err
    assert not out.exists()  # nothing started, no run folder


def test_workers_the_run_would_not_use_exit_2_before_the_run(tmp_path, capsys):
    out = tmp_path / "runs"
    common = ["run", "full_graph", "--graph", "karate", "--epochs", "1", "--out", str(out)]
    assert main([*common, "--workers", "4", "--set", "num_parts=2"]) == 2
    assert ("The '--workers' parameter of workbench run must be 2 or left out (num_parts=2 sets the number of "
            "ranks). Got 4 instead.") in capsys.readouterr().err
    assert main([*common, "--runner", "single", "--workers", "3"]) == 2
    assert "The '--workers' parameter of workbench run must be 1 or left out" in capsys.readouterr().err
    assert not out.exists()  # nothing started, no run folder
    assert main([*common, "--set", "num_parts=3"]) == 0        # left out: num_parts decides
    assert "on 3 rank(s)" in capsys.readouterr().out


def test_out_that_is_a_file_is_refused_before_the_run(recipe_file, tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("")
    assert main(["run", str(recipe_file), "--runner", "single", "--out", str(afile)]) == 2
    out, err = capsys.readouterr()
    assert "The '--out' parameter of workbench run must be a folder" in err and str(afile) in err
    assert "Traceback" not in err and "epoch" not in out


def test_failed_run_exits_1_with_the_remote_traceback(recipe_file, tmp_path, capsys):
    code = main(["run", str(recipe_file), "--runner", "local", "--set", "fail_rank=1", "--out", str(tmp_path)])
    assert code == 1
    err = capsys.readouterr().err
    assert "rank 1 failed at step 1" in err and "remote traceback" in err
