"""``workbench reproduce``: every paper's reproducible claims beside this workbench's numbers.

One module per system (:data:`SYSTEMS`), each with ``claims(quick=False) -> list[Claim]``; the record and the
one verdict rule are in :mod:`reproduce.core`, the tables, JSON and HTML pages in
:mod:`reproduce.report`. The ``workbench reproduce`` command loads this package by name (the core never
imports ``reproduce``). The claims run the recipes' configs (package ``recipes``, which never imports this one).

Example:
    >>> from reproduce import Claim, SYSTEMS
    >>> SYSTEMS[0], Claim("d.x", "ratio above 1", "Fig. 16", paper=2.14, bound=1.0, relation=">", measured=1.3).verdict
    ('distdgl', 'holds')
"""

from reproduce.core import SYSTEMS, VERDICTS, Claim, explain, run_system, run_systems, verdict
from reproduce.report import command, format_table, to_json, write_html

__all__ = ["SYSTEMS", "VERDICTS", "Claim", "explain", "verdict", "run_system", "run_systems", "format_table",
           "to_json", "write_html", "command"]

#: not recipe variants: ``workbench run`` lists the package's functions, and these are helpers
__helpers__ = tuple(__all__)
