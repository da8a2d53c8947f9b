"""The result of a streaming partitioner: :class:`StreamPartition` (owners, the part of every line, saving) and
its :class:`StreamMetrics` (replication, balance, halo rows, time and memory).
"""

from __future__ import annotations

import dataclasses
import html
import json
import os
from pathlib import Path
from typing import Any, Optional

import numpy as np

from workbench.partition.base import _json_safe
from workbench.partition.streaming.state import _Assignment

__all__ = ["StreamMetrics", "StreamPartition"]


# ------------------------------------------------------------------------------------------- result

def _balance(counts: np.ndarray) -> float:
    mean = counts.mean() if counts.size else 0.0
    return float(counts.max() / mean) if mean > 0 else 1.0


@dataclasses.dataclass(eq=False)
class StreamMetrics:
    """The quality and cost metrics of a streaming partition (CATGNN reports only the replication factor).

    ``replication_factor`` is the vertex-cut RF of the line assignment that ``edge_assignment.npy`` holds:
    for every vertex, the parts holding one of its lines (a vertex with no line counts once, on its owner),
    over ``num_nodes``. A vertex-cut method's lines sit in their assigned parts; an owner result's (SPRING,
    clustering) on their destination's owner, ``owner[v]``, so the number compares across methods.
    ``replication_factor_completed`` is the same after neighbour completion (owned + halo, the RF CATGNN
    reports). Balances are ``max / mean`` over parts of lines (that assignment / after completion), owned
    vertices and owned training vertices.
    """

    shape: str
    num_nodes: int
    num_lines: int
    num_parts: int
    replication_factor: float
    replication_factor_completed: float
    edge_balance: float
    edge_balance_completed: float
    owner_balance: float
    train_balance: Optional[float]
    part_lines: np.ndarray
    part_lines_completed: np.ndarray
    part_owned: np.ndarray
    part_vertices_completed: np.ndarray
    part_train: Optional[np.ndarray]
    comm_rows: np.ndarray
    """``(P, P)`` halo rows part ``p`` sends part ``q`` in one layer after completion (owned rows to replicas)."""
    phase_s: dict
    elapsed_s: float
    edges_per_s: float
    peak_rss_mb: float
    """Peak RSS of the whole process during the run (MiB; includes the interpreter and libraries)."""
    rss_start_mb: float
    """RSS when the run started (MiB): ``peak_rss_mb - rss_start_mb`` is what the run added."""
    state_bytes: int
    """Bytes of the per-vertex and per-part state arrays: the most they held at once during the method's passes."""

    def to_dict(self) -> dict[str, Any]:
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            out[f.name] = v.tolist() if isinstance(v, np.ndarray) else v
        return out

    def summary(self) -> dict[str, Any]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in self.to_dict().items()
                if not isinstance(v, (list, dict))}

    def table(self):
        import pandas as pd

        cols = {"owned": self.part_owned, "vertices_completed": self.part_vertices_completed,
                "lines_completed": self.part_lines_completed}
        if self.part_lines is not None:
            cols["lines"] = self.part_lines
        if self.part_train is not None:
            cols["train_vertices"] = self.part_train
        df = pd.DataFrame(cols)
        df.index.name = "part"
        return df

    def __repr__(self) -> str:
        rf = "-" if self.replication_factor is None else f"{self.replication_factor:.3f}"
        return (f"StreamMetrics({self.shape}, parts={self.num_parts}, rf={rf}, "
                f"rf_completed={self.replication_factor_completed:.3f}, owner_balance={self.owner_balance:.3f}, "
                f"edges_per_s={self.edges_per_s:,.0f}, peak_rss_mb={self.peak_rss_mb:.1f})")


@dataclasses.dataclass(eq=False, repr=False)
class StreamPartition:
    """The result of a streaming partitioner: owners, metrics and (optionally) the part of every line.

    ``owner`` ``(num_nodes,)`` is each vertex's owner part (completion included). ``line_part`` (when kept)
    is the part of each line in stream order: the assigned part for vertex-cut, the owner-side part
    ``owner[dst]`` for owner results.
    """

    method: str
    shape: str
    num_parts: int
    owner: np.ndarray
    metrics: StreamMetrics
    options: dict
    source: str
    line_part: Optional[np.ndarray] = None
    _assignment: Optional[_Assignment] = None

    def save(self, out_dir: str | os.PathLike) -> Path:
        """Write the partition.

        Layout::

            out_dir/
              edge_assignment.npy  # int64 (num_lines,): part of each edge line, in file order
                                   # (vertex-cut: the assigned part; owner: owner[dst], the owner side)
              owner.npy            # int64 (num_nodes,): owner part of each vertex (completion included)
              metrics.json         # StreamMetrics.to_dict() + method, shape, options, source

        Returns:
            The output directory.
        """
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        if self.line_part is not None:
            np.save(out / "edge_assignment.npy", self.line_part.astype(np.int64, copy=False))
        elif self._assignment is not None:
            self._assignment.save_npy(out / "edge_assignment.npy")
        np.save(out / "owner.npy", self.owner.astype(np.int64, copy=False))
        info = self.metrics.to_dict()
        info.update(method=self.method, shape=self.shape, options=_json_safe(self.options), source=self.source)
        (out / "metrics.json").write_text(json.dumps(info, indent=2) + "\n")
        return out

    def to_event(self):
        """A :class:`workbench.events.PartitionComputed` for the partition view (owned vertices, halo =
        completed minus owned, the completed result's halo rows per pair of parts)."""
        from workbench.events import PartitionComputed

        m = self.metrics
        metrics = {k: v for k, v in m.summary().items() if v is not None}   # both RFs: lines and completed
        metrics["comm_volume_rows"] = int(m.comm_rows.sum())
        return PartitionComputed(method=self.method, num_parts=self.num_parts, metrics=metrics,
                                 part_sizes=m.part_owned.tolist(),
                                 halo_sizes=(m.part_vertices_completed - m.part_owned).tolist(),
                                 comm_rows=m.comm_rows.tolist())

    def line_parts(self) -> Optional[np.ndarray]:
        """The part of every line (``(num_lines,)`` int64, read from the temporary file if there is one), or
        ``None`` when the assignment was not kept."""
        if self.line_part is not None:
            return self.line_part
        return None if self._assignment is None else self._assignment.to_array()

    def close(self) -> None:
        """Remove the temporary assignment file, if any."""
        if self._assignment is not None:
            self._assignment.close()
            self._assignment = None

    def __repr__(self) -> str:
        return f"StreamPartition({self.method!r}, {self.shape}, num_parts={self.num_parts}, {self.metrics!r})"

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><td style='text-align:left'>{html.escape(k)}</td><td>{html.escape(str(v))}</td></tr>"
                       for k, v in self.metrics.summary().items())
        return (f"<b>StreamPartition</b> <code>{html.escape(self.method)}</code> ({self.shape}, "
                f"{self.num_parts} parts)<div style='display:flex;gap:2em'><table>{rows}</table>"
                f"<div>{self.metrics.table().to_html()}</div></div>")
