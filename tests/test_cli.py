"""The console command: help on every subcommand, errors as one clear line with exit code 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from workbench.cli import build_parser, main


def _subcommands():
    parser = build_parser()
    for action in parser._subparsers._group_actions:  # argparse keeps subparsers here
        return sorted(action.choices)
    return []


def test_top_level_help(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    assert "partition" in capsys.readouterr().out


@pytest.mark.parametrize("command", _subcommands())
def test_every_subcommand_has_help(command, capsys):
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    assert "usage: workbench " + command in capsys.readouterr().out


def test_python_dash_m_entry_point():
    out = subprocess.run([sys.executable, "-m", "workbench", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("workbench ")


def test_a_run_whose_console_goes_away_still_ends(tmp_path):
    """`workbench run ... 2>&1 | head -1` hung: tqdm keeps its lock when a draw raises (BrokenPipeError), and
    the next bar or epoch line, on a rank's thread, waited for it for ever. The console now drops what
    follows a failed write; the run ends and its log says finished."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "workbench", "run", "distdgl", "--graph",
                             "sbm:num_nodes=300,num_blocks=4,avg_degree=6,num_features=8,seed=0", "--epochs", "3",
                             "--runner", "local", "--workers", "2", "--out", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**__import__("os").environ,
                                                                                   "TQDM_DISABLE": "0"})
    proc.stdout.readline()
    proc.stdout.close()                                     # the reader goes away, as `head -1` does
    assert proc.wait(timeout=120) in (0, 1)
    (log,) = tmp_path.glob("*/events.jsonl")
    assert '"status": "finished"' in log.read_text()
