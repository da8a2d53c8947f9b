"""The graph data layer: readers, cleaning, seeded generators and the graph spec strings.

:func:`load_graph` is the one entry point wherever a graph is named (a path, ``karate``,
``sbm:num_nodes=20000,num_blocks=16,seed=0``, ...).

Example:
    >>> from workbench.data import load_graph, GENERATORS
    >>> sorted(GENERATORS)[:3]
    ['chunglu', 'files', 'karate']
    >>> load_graph("rmat:scale=8,edge_factor=4,seed=0").num_nodes
    256
"""

from __future__ import annotations

from workbench.data.builtin import KarateConfig, LesMisConfig
from workbench.data.cleaning import CleaningReport, clean_graph, symmetrize
from workbench.data.readers import DataFormatError, read_dgl_binary, read_edge_list, read_ogb_node_dataset
from workbench.data.spec import GENERATORS, GraphSource, describe_spec, load_graph, parse_spec
from workbench.data.synthetic import (ChungLuConfig, PapersLikeConfig, ProductsLikeConfig, RedditLikeConfig,
                                      RMATConfig, SBMConfig, random_split)

__all__ = [
    "load_graph",
    "describe_spec",
    "parse_spec",
    "GENERATORS",
    "GraphSource",
    "read_edge_list",
    "read_ogb_node_dataset",
    "read_dgl_binary",
    "DataFormatError",
    "clean_graph",
    "symmetrize",
    "CleaningReport",
    "SBMConfig",
    "RMATConfig",
    "ChungLuConfig",
    "ProductsLikeConfig",
    "RedditLikeConfig",
    "PapersLikeConfig",
    "KarateConfig",
    "LesMisConfig",
    "random_split",
]
