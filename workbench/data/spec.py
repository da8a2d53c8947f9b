"""Graph spec strings and :func:`load_graph`, the one entry point wherever a graph is named.

A spec is one of:

- a :class:`~workbench.graph.Graph` (returned as it is);
- a path: a directory holding ``raw/edge.csv.gz`` (an OGB node-property dataset), a partition folder
  (``manifest.json``, :mod:`workbench.data.partfolder`), a ``*.bin`` file (``dgl.save_graphs``; raw id pairs
  when a ``FILE.bin.json`` sidecar is beside it, :mod:`workbench.data.edgefiles`), a ``*.npy`` file (an ``(E, 2)``
  edge array, read as ``files:edges=FILE.npy``), or any other file (an edge list, ``.gz`` allowed);
- a name from :data:`GENERATORS`, optionally with settings: ``karate``, ``lesmis``,
  ``sbm:num_nodes=20000,num_blocks=16,seed=0``, ``rmat:scale=12,edge_factor=8``,
  ``products-like:num_nodes=50000``.

Settings are the fields of the generator's config dataclass (``describe_spec("sbm")`` lists them with
their help); unknown names or values that do not convert raise one :class:`ParamError` listing the
valid choices.

Example:
    >>> g = load_graph("sbm:num_nodes=300,num_blocks=3,avg_degree=6,seed=0")
    >>> g.num_nodes, g.directed
    (300, False)
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from pathlib import Path
from typing import Optional, Union

from workbench._validation import Config, ParamError, param_error, parse_settings
from workbench.data.builtin import KarateConfig, LesMisConfig
from workbench.data.cleaning import CleaningReport, clean_graph
from workbench.data.folders import FilesConfig, is_array_folder, is_saint_folder
from workbench.data.partfolder import PartsConfig, is_part_folder, parse_parts_spec
from workbench.data.readers import read_dgl_binary, read_edge_list, read_ogb_node_dataset
from workbench.data.synthetic import (ChungLuConfig, PapersLikeConfig, ProductsLikeConfig, RedditLikeConfig,
                                      RMATConfig, SBMConfig)
from workbench.graph import Graph

__all__ = ["GENERATORS", "GraphSource", "load_graph", "parse_spec", "describe_spec", "ParsedSpec"]

GraphSpec = Union[str, os.PathLike, Graph]


@dataclasses.dataclass(frozen=True)
class GraphSource:
    """A named graph source: its config class (whose fields are the spec's settings) and a one-line summary."""

    name: str
    config_cls: type
    summary: str
    kind: str = "generator"
    """'generator' (synthetic, seeded), 'builtin' (a small real graph) or 'files' (read from disk)."""


GENERATORS: dict[str, GraphSource] = {
    s.name: s
    for s in (
        GraphSource("sbm", SBMConfig, "planted-partition SBM with community-correlated features"),
        GraphSource("rmat", RMATConfig, "R-MAT power-law graph (Graph500 quadrant probabilities)"),
        GraphSource("chunglu", ChungLuConfig, "Chung-Lu graph with power-law expected degrees"),
        GraphSource("products-like", ProductsLikeConfig, "shaped like ogbn-products (split 8.03/1.61/90.37 %)"),
        GraphSource("reddit-like", RedditLikeConfig, "shaped like Reddit (split 66/10/24 %)"),
        GraphSource("papers-like", PapersLikeConfig, "shaped like ogbn-papers100M (split 1.09/0.11/0.19 %)"),
        GraphSource("karate", KarateConfig, "Zachary's karate club (34 vertices)", kind="builtin"),
        GraphSource("lesmis", LesMisConfig, "Les Miserables co-appearances (77 vertices)", kind="builtin"),
        GraphSource("files", FilesConfig, "an edge list with features, labels and a split from .npy files attached",
                    kind="files"),
        GraphSource("parts", PartsConfig, "a partition folder (workbench partition --stream --out DIR "
                                          "--with-features ...): parts:DIR or parts:dir=DIR,select=0+1", kind="files"),
    )
}
"""Every named graph source, by spec name. Add an entry to make a new generator reachable by name."""


@dataclasses.dataclass(frozen=True)
class ParsedSpec:
    """What a spec resolves to: ``kind`` is 'graph', 'named', 'ogb', 'planetoid', 'saint', 'arrays', 'dgl' or
    'edge_list'."""

    kind: str
    text: str
    path: Optional[Path] = None
    config: Optional[Config] = None


def parse_spec(spec: GraphSpec) -> ParsedSpec:
    """Resolve a spec without loading anything; all setting errors are raised at once.

    Example:
        >>> parse_spec("rmat:scale=10,seed=3").config.scale
        10
    """
    if isinstance(spec, Graph):
        return ParsedSpec("graph", spec.name)
    if isinstance(spec, os.PathLike):
        return _parse_path(Path(spec))
    if not isinstance(spec, str) or not spec.strip():
        raise ParamError([param_error("spec", "load_graph", _SPEC_HELP, spec)])
    text = spec.strip()
    head, sep, tail = text.partition(":")
    name = head.strip().lower()
    if name == "parts" and sep:   # parts:DIR (a path, not NAME=VALUE) or parts:dir=DIR,select=...
        return ParsedSpec("named", text, config=parse_parts_spec(tail))
    if name in GENERATORS:
        source = GENERATORS[name]
        settings = parse_settings([p for p in tail.split(",") if p.strip()], owner=name) if sep else {}
        config = source.config_cls().with_strings(settings)
        return ParsedSpec("named", text, config=config)
    if os.path.exists(text):
        return _parse_path(Path(text))
    hint = difflib.get_close_matches(name, list(GENERATORS), n=1)
    extra = f" (did you mean {hint[0]!r}?)" if hint else ""
    raise ParamError([param_error("spec", "load_graph", f"{_SPEC_HELP}{extra}", spec)])


_SPEC_HELP = (f"an existing path (edge list, OGB, Planetoid, GraphSAINT or arrays folder, DGL .bin, (E, 2) edge .npy) "
              f"or a graph name from {list(GENERATORS)} with optional settings, e.g. 'sbm:num_nodes=2000,seed=0'")


_FOLDER_HELP = ("a file, or a folder holding a graph: OGB (raw/edge.csv.gz), Planetoid (ind.<name>.graph, "
                "also in raw/ or <Name>/raw/), GraphSAINT (role.json, class_map.json, adj_full.npz or "
                "edge_list.csv) or your own arrays (edges.npy, edges.txt or edges.csv)")


def _parse_path(path: Path) -> ParsedSpec:
    if path.is_dir():
        from workbench.data.planetoid import find_planetoid

        if is_part_folder(path):
            return ParsedSpec("named", str(path), config=PartsConfig(dir=str(path)))
        if (path / "raw" / "edge.csv.gz").is_file():
            return ParsedSpec("ogb", str(path), path=path)
        if is_saint_folder(path):
            return ParsedSpec("saint", str(path), path=path)
        if is_array_folder(path):
            return ParsedSpec("arrays", str(path), path=path)
        if find_planetoid(path) is not None:
            return ParsedSpec("planetoid", str(path), path=path)
        raise ParamError([param_error("spec", "load_graph", _FOLDER_HELP, str(path))])
    if not path.exists():
        raise ParamError([param_error("spec", "load_graph", "an existing path", str(path))])
    if path.suffix == ".bin":
        from workbench.data.edgefiles import sidecar_path

        if sidecar_path(path).is_file():   # raw pairs with a sidecar (workbench.data.edgefiles), not DGL's format
            return ParsedSpec("named", str(path), config=FilesConfig(edges=str(path)))
        return ParsedSpec("dgl", str(path), path=path)
    if path.suffix == ".npy":   # an (E, 2) edge array, sidecar optional (workbench generate --out FILE.npy)
        return ParsedSpec("named", str(path), config=FilesConfig(edges=str(path)))
    return ParsedSpec("edge_list", str(path), path=path)


def load_graph(spec: GraphSpec, *, clean: bool = True, progress: Optional[bool] = None,
               return_report: bool = False) -> Union[Graph, tuple[Graph, Optional[CleaningReport]]]:
    """Load or generate a graph from a spec (see the module docstring for the forms).

    Files are cleaned when ``clean`` is true (self-loops and duplicate edges removed, reverse edges
    added; the result is undirected) and the :class:`CleaningReport` is kept on the graph as
    ``g.cleaning_report``. Generated and built-in graphs are clean by construction; a :class:`Graph`
    passed in is returned as it is.

    Args:
        spec: a Graph, a path, or a graph name with optional ``key=value`` settings.
        clean: clean graphs read from files.
        progress: progress bars for reading or generation (``None``: only for large inputs).
        return_report: return ``(graph, report)``; the report is ``None`` when nothing was cleaned.

    Returns:
        The graph (or ``(graph, report)``).

    Raises:
        ParamError: an unknown name, unknown settings, values of the wrong type or range (all listed at
            once), a missing path, or a malformed file (naming the file, line and field).

    Example:
        >>> g = load_graph("karate")
        >>> g.num_nodes, g.num_classes, int(g.train_mask.sum())
        (34, 2, 17)
    """
    parsed = parse_spec(spec)
    report: Optional[CleaningReport] = None
    if parsed.kind == "graph":
        g = spec
    elif parsed.kind == "named":
        g = parsed.config.generate(progress=progress)
        g.name = parsed.text
        if clean and isinstance(parsed.config, FilesConfig):   # read from files: clean and report as files are
            g, report = clean_graph(g, source=parsed.config.edges)
            g.cleaning_report = report
    else:
        if parsed.kind == "ogb":
            g = read_ogb_node_dataset(parsed.path, progress=progress)
        elif parsed.kind == "planetoid":
            from workbench.data.planetoid import read_planetoid

            g = read_planetoid(parsed.path)
        elif parsed.kind == "saint":
            from workbench.data.folders import read_saint_folder

            g = read_saint_folder(parsed.path, progress=progress)
        elif parsed.kind == "arrays":
            from workbench.data.folders import read_array_folder

            g = read_array_folder(parsed.path, progress=progress)
        elif parsed.kind == "dgl":
            g = read_dgl_binary(parsed.path)
        else:
            g = read_edge_list(parsed.path, progress=progress)
        if clean:
            g, report = clean_graph(g, source=str(parsed.path))
            g.cleaning_report = report
    return (g, report) if return_report else g


def describe_spec(spec: GraphSpec) -> str:
    """A human-readable account of what a spec names: the source, and for named graphs every setting
    with its value and help.

    Example:
        >>> print(describe_spec("karate").splitlines()[0])
        karate: Zachary's karate club (34 vertices) [builtin]
    """
    parsed = parse_spec(spec)
    if parsed.kind == "graph":
        return f"an in-memory graph: {spec!r}"
    if parsed.kind != "named":
        what = {"ogb": "OGB node-property dataset directory", "dgl": "DGL binary graph file (dgl.save_graphs)",
                "planetoid": "Planetoid citation dataset (ind.<name>.* pickles, read restricted)",
                "saint": "GraphSAINT folder (adj_full.npz or edge_list.csv, feats.npy, class_map.json, role.json)",
                "arrays": "folder of your own arrays (edges, features.npy, labels.npy, split)",
                "edge_list": "edge-list text file"}[parsed.kind]
        return f"{parsed.path}: {what}"
    name = next((k for k, src in GENERATORS.items() if type(parsed.config) is src.config_cls),   # a path, too
                parsed.text.partition(":")[0].strip().lower())
    source = GENERATORS[name]
    docs = source.config_cls.field_docs()
    lines = [f"{name}: {source.summary} [{source.kind}]"]
    for f in dataclasses.fields(parsed.config):
        lines.append(f"  {f.name}={getattr(parsed.config, f.name)!r}  {docs.get(f.name, '')}".rstrip())
    return "\n".join(lines)

