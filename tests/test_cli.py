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
