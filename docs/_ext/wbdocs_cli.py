"""``.. workbench-cli::``: the ``--help`` of ``workbench`` and of every subcommand, from the parsers themselves.

``workbench.cli.build_parser()`` builds the same parser the console command uses (core subcommands and those
registered by installed packages through the ``workbench.commands`` entry points, such as ``serve``), so
the reference cannot drift from the code. Nested subcommands (``workbench cluster up``) get their own
section. Help is wrapped at 100 columns (``COLUMNS`` is set in ``conf.py``).
"""

from __future__ import annotations

import argparse

from docutils import nodes
from docutils.parsers.rst import Directive


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _section(document, title: str, parser: argparse.ArgumentParser, ids: str) -> nodes.section:
    section = nodes.section(ids=[ids], names=[nodes.fully_normalize_name(title)])
    section += nodes.title(text=title)
    block = nodes.literal_block(text=parser.format_help().rstrip("\n"))
    block["language"] = "none"
    block["classes"].append("cli-help")
    section += block
    document.note_implicit_target(section, section)
    return section


class WorkbenchCLI(Directive):
    has_content = False

    def run(self):
        from workbench.cli import build_parser

        document = self.state.document
        root = build_parser()
        out = [nodes.literal_block(text=root.format_help().rstrip("\n"), language="none", classes=["cli-help"])]
        for name, sub in _subcommands(root).items():
            section = _section(document, f"workbench {name}", sub, f"cli-{name}")
            for child_name, child in _subcommands(sub).items():
                section += _section(document, f"workbench {name} {child_name}", child, f"cli-{name}-{child_name}")
            out.append(section)
        return out


def setup(app):
    app.add_directive("workbench-cli", WorkbenchCLI)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
