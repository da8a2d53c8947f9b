"""A partition folder from any in-memory partition: ``workbench partition GRAPH --parts P --method M
--folder DIR`` writes the parts :class:`~workbench.partition.base.PartitionResult` gives, with the graph's
features, labels and split, for the graph spec ``parts:DIR`` (:mod:`workbench.data.partfolder`).

The writer is the streaming one (:func:`~workbench.partition.streaming.folders.write_part_folders`, whose docstring
has the tree and the manifest's fields), fed the graph's edges from memory and the result's owner map, so a folder
is the same whichever partitioner made it; ``manifest["method"]`` names that partitioner.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

from workbench._validation import ErrorCollector

__all__ = ["write_result_folder", "folder_graph_errors"]


def folder_graph_errors(graph, errs: ErrorCollector, name: str = "graph") -> None:
    """Add to ``errs`` what keeps ``graph`` from a partition folder: no features, features that are not floats,
    or no labels (a folder holds every part's feature rows and labels)."""
    feats, labels = graph.features, graph.labels
    errs.check(feats is not None and feats.dim() == 2 and feats.is_floating_point(), name,
               "a graph with (N, F) float features (a partition folder holds each part's feature rows)",
               f"{graph.name}: " + ("no features" if feats is None else f"features {feats.dtype} {tuple(feats.shape)}"))
    errs.check(labels is not None and labels.dim() == 1, name,
               "a graph with (N,) labels (a partition folder holds each part's labels)",
               f"{graph.name}: " + ("no labels" if labels is None else f"labels {tuple(labels.shape)}"))


def write_result_folder(result, out_dir: Any, *, source: str = "", bucket_edges: int = 1 << 23,
                        temp_budget_bytes: int = 4 << 30, log: Optional[Callable[[str], None]] = None) -> dict:
    """Write ``result``'s parts of ``result.graph`` as a partition folder in ``out_dir``.

    The owner map is ``result.owner_part`` (a vertex-cut result: each vertex's master replica, the edge-cut view a
    folder stores); features, labels and the train/val/test masks are the graph's (no masks: the writer's seeded
    0.6/0.2/0.2 split of the labelled vertices), saved to a temporary directory that is removed afterwards, so the
    folder's halo rows are copied (``halo_features="copy"``). Besides the parts and ``manifest.json`` it holds
    ``owner.npy`` (int64) and ``metrics.json`` (the result's exact metrics). The manifest records ``method``,
    ``options``, ``kind``, ``seed``, the result's metrics (under ``stream_metrics``) and ``source``;
    ``inputs`` and ``split_files`` name no files (the inputs were temporary).

    Args:
        result: a :class:`~workbench.partition.base.PartitionResult` whose graph has float features and labels.
        out_dir: the folder (created; existing parts are overwritten).
        source: the graph spec, recorded in the manifest.
        bucket_edges, temp_budget_bytes, log: as :func:`~workbench.partition.streaming.folders.write_part_folders`.

    Returns:
        The manifest.

    Raises:
        ParamError: a graph without float features or labels, a part that owns no vertex (before anything is
            written).

    Example:
        >>> import tempfile
        >>> from workbench.data.partfolder import PartFolder
        >>> from workbench.partition import partition
        >>> r = partition("sbm:num_nodes=200,num_blocks=2,seed=0", 2, method="block")
        >>> with tempfile.TemporaryDirectory() as d:
        ...     m = write_result_folder(r, d)
        ...     pf = PartFolder(d)
        ...     pf.method, pf.num_parts, bool((pf.owner_part() == r.node_part.numpy()).all())
        ('block', 2, True)
    """
    from workbench.partition.base import _json_safe
    from workbench.partition.streaming.folders import write_part_folders
    from workbench.partition.streaming.stream import GraphEdgeStream

    graph = result.graph
    errs = ErrorCollector("write_result_folder")
    folder_graph_errors(graph, errs, "result")
    owner = result.owner_part.numpy().astype(np.int64)
    owned = np.bincount(owner, minlength=result.num_parts)
    errs.check(bool((owned > 0).all()), "result", "a partition whose every part owns a vertex (a folder's parts "
               "are its owners)", f"{result.method}: parts {np.flatnonzero(owned == 0).tolist()} own none")
    errs.raise_if_any()
    out = Path(out_dir)
    metrics = result.metrics().to_dict()
    with tempfile.TemporaryDirectory(prefix="workbench-folder-") as tmp:
        inputs = {"features": Path(tmp) / "features.npy", "labels": Path(tmp) / "labels.npy"}
        np.save(inputs["features"], np.ascontiguousarray(graph.features.numpy()))
        np.save(inputs["labels"], np.ascontiguousarray(graph.labels.numpy()))
        for k in ("train", "val", "test"):
            mask = getattr(graph, f"{k}_mask")
            if mask is not None:
                inputs[k] = Path(tmp) / f"{k}.npy"
                np.save(inputs[k], mask.numpy().astype(bool))
        manifest = write_part_folders(
            GraphEdgeStream(graph), owner.astype(np.int16 if result.num_parts < 2 ** 15 else np.int32), out,
            features=inputs["features"], labels=inputs["labels"], train=inputs.get("train"),
            val=inputs.get("val"), test=inputs.get("test"), method=result.method,
            options=_json_safe(result.options), metrics=metrics, source=source or graph.name,
            bucket_edges=bucket_edges, temp_budget_bytes=temp_budget_bytes, halo_features="copy", log=log)
    # the temporary inputs are gone: the manifest names none of them
    manifest.update(inputs={"features": None, "labels": None}, split_files={k: None for k in ("train", "val", "test")},
                    kind=result.kind, seed=result.seed)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    np.save(out / "owner.npy", owner)
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    return manifest
