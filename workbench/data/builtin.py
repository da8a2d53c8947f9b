"""networkx's small real graphs as workbench graphs: Zachary's karate club and Les Misérables.

Both come undirected and cleaned, with one-hot identity (or degree) features, labels and seeded masks.

Example:
    >>> g = KarateConfig().generate()
    >>> g.num_nodes, g.num_undirected_edges, g.num_classes
    (34, 78, 2)
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Literal, Optional

import numpy as np
import torch

from workbench._validation import Config, ErrorCollector
from workbench.constraints import Interval
from workbench.data.cleaning import clean_graph
from workbench.data.synthetic import check_split_ratios, random_split
from workbench.graph import Graph

__all__ = ["KarateConfig", "LesMisConfig"]


@dataclasses.dataclass(kw_only=True)
class _BuiltinConfig(Config):
    features: Literal["onehot", "degree"] = "onehot"
    """Node features: 'onehot' (identity matrix, one column per vertex) or 'degree' (one-hot degree)."""
    train_ratio: Annotated[float, Interval(0, 1)] = 0.5
    """Fraction of vertices in the training split."""
    val_ratio: Annotated[float, Interval(0, 1)] = 0.2
    """Fraction of vertices in the validation split."""
    test_ratio: Annotated[float, Interval(0, 1)] = 0.3
    """Fraction of vertices in the test split."""
    seed: Annotated[int, Interval(0, None)] = 0
    """Seed of the random split."""

    def _validate(self, errs: ErrorCollector) -> None:
        check_split_ratios(errs, self)

    name = "builtin"

    def _nx_graph(self):  # pragma: no cover - overridden
        raise NotImplementedError

    def _labels(self, nxg, nodes: list) -> np.ndarray:  # pragma: no cover - overridden
        raise NotImplementedError

    def generate(self, *, progress: Optional[bool] = None) -> Graph:
        """Build the graph (``progress`` is accepted for a uniform interface and ignored: it is tiny)."""
        self.validate()
        nxg = self._nx_graph()
        nodes = list(nxg.nodes)
        index = {v: i for i, v in enumerate(nodes)}
        pairs = np.array([(index[u], index[v]) for u, v in nxg.edges], dtype=np.int64)
        n = len(nodes)
        src = np.concatenate([pairs[:, 0], pairs[:, 1]])
        dst = np.concatenate([pairs[:, 1], pairs[:, 0]])
        if self.features == "onehot":
            x = torch.eye(n, dtype=torch.float32)
        else:
            deg = np.bincount(dst, minlength=n)
            x = torch.zeros(n, int(deg.max()) + 1, dtype=torch.float32)
            x[torch.arange(n), torch.from_numpy(deg)] = 1.0
        tr, va, te = random_split(n, self.train_ratio, self.val_ratio, self.test_ratio, seed=self.seed)
        g = Graph.from_edges(src, dst, num_nodes=n, directed=False, features=x,
                             labels=torch.from_numpy(self._labels(nxg, nodes)), train_mask=tr, val_mask=va,
                             test_mask=te, name=self.name)
        return clean_graph(g)[0]


@dataclasses.dataclass(kw_only=True)
class KarateConfig(_BuiltinConfig):
    """Zachary's karate club (34 members, 78 friendships); labels = the club each member joined (0 = Mr. Hi).

    Example:
        >>> KarateConfig(features="degree").generate().num_features
        18
    """

    name = "karate"

    def _nx_graph(self):
        import networkx as nx

        return nx.karate_club_graph()

    def _labels(self, nxg, nodes: list) -> np.ndarray:
        return np.array([0 if nxg.nodes[v]["club"] == "Mr. Hi" else 1 for v in nodes], dtype=np.int64)


@dataclasses.dataclass(kw_only=True)
class LesMisConfig(_BuiltinConfig):
    """Les Misérables co-appearance network (77 characters, 254 edges; weights ignored); labels = the
    communities found by greedy modularity maximisation (deterministic), largest first.

    Example:
        >>> LesMisConfig().generate().num_classes
        5
    """

    name = "lesmis"

    def _nx_graph(self):
        import networkx as nx

        return nx.les_miserables_graph()

    def _labels(self, nxg, nodes: list) -> np.ndarray:
        from networkx.algorithms.community import greedy_modularity_communities

        comms = sorted(greedy_modularity_communities(nxg), key=lambda c: (-len(c), min(map(str, c))))
        label = {v: k for k, c in enumerate(comms) for v in c}
        return np.array([label[v] for v in nodes], dtype=np.int64)
