"""Export a partition in DistDGL's on-disk format, keeping the workbench's assignment exactly.

``dgl.distributed.partition_graph`` always computes its own assignment, so the format is written here
from :meth:`PartitionResult.relabel` (DGL is imported only inside :func:`export_distdgl`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch

from workbench._validation import ErrorCollector
from workbench.graph import Graph
from workbench.partition.base import PartitionResult

__all__ = ["export_distdgl", "DEFAULT_NTYPE", "DEFAULT_ETYPE"]

DEFAULT_NTYPE = "_N"
DEFAULT_ETYPE = "_N:_E:_N"  # DGL's canonical (src, etype, dst) of a homogeneous graph, as a string


def _node_data(graph: Graph) -> dict[str, torch.Tensor]:
    out = {}
    for field, name in (("features", "feat"), ("labels", "label"), ("train_mask", "train_mask"),
                        ("val_mask", "val_mask"), ("test_mask", "test_mask")):
        value = getattr(graph, field)
        if value is not None:
            out[name] = value
    return out


def _part_structure(graph: Graph, result: PartitionResult) -> dict[str, Any]:
    """New node/edge ids and per-part index arrays, all vectorised."""
    relabel = result.relabel()
    src, dst = graph.edges()  # original edge id = position in CSR order
    new_src, new_dst = relabel.new_of_old[src], relabel.new_of_old[dst]
    orig_eid_of_new = torch.argsort(new_dst, stable=True)  # inner edges of a part become contiguous
    edge_part = result.node_part[dst][orig_eid_of_new]
    edge_offsets = torch.zeros(result.num_parts + 1, dtype=torch.int64)
    torch.cumsum(torch.bincount(edge_part, minlength=result.num_parts), 0, out=edge_offsets[1:])
    return {"relabel": relabel, "new_src": new_src[orig_eid_of_new], "new_dst": new_dst[orig_eid_of_new],
            "orig_eid_of_new": orig_eid_of_new, "edge_offsets": edge_offsets}


def export_distdgl(graph: Graph, result: PartitionResult, out_dir: str | os.PathLike,
                   graph_name: Optional[str] = None) -> Path:
    """Write ``result`` in the DistDGL partition format (1-hop halo, homogeneous graph).

    ``dgl.distributed.load_partition(out_dir / f"{graph_name}.json", part_id)`` loads every part; its
    inner vertices (``inner_node == 1``) are exactly ``result.inner_nodes(part_id)`` after mapping their
    ``_ID`` through ``orig_nids.npy`` (or reading ``orig_id``). Layout::

        out_dir/
          {graph_name}.json   # partition config: graph_name, num_nodes, num_edges, part_method, num_parts,
                              #   halo_hops=1, node_map {"_N": [[start, end) per part]} and
                              #   edge_map {"_N:_E:_N": [...]} in new (shuffled) ids, ntypes, etypes,
                              #   part-i: {node_feats, edge_feats, part_graph} paths relative to out_dir
          orig_nids.npy       # int64 (N,): original vertex id of each new id
          orig_eids.npy       # int64 (E,): original edge id (CSR position in the workbench graph) per new id
          part{i}/graph.dgl   # local graph: inner vertices first (new-id order), then halo vertices;
                              #   ndata _ID (new global id), inner_node (uint8), part_id, orig_id;
                              #   edata _ID (new global id), inner_edge (uint8, all 1), orig_id.
                              #   Edges are the in-edges of the inner vertices (edge -> its destination's part)
          part{i}/node_feat.dgl  # "_N/feat", "_N/label", "_N/{train,val,test}_mask" of the inner vertices
          part{i}/edge_feat.dgl  # empty (the workbench graph has no edge data)

    Args:
        graph: the partitioned graph (``result.graph``).
        result: an edge-cut partition of ``graph``.
        out_dir: output folder (created).
        graph_name: name of the config file and graph; default ``graph.name``.

    Returns:
        The path of the partition config JSON.

    Example:
        >>> from workbench.partition import partition  # doctest: +SKIP
        >>> r = partition("karate", 2)  # doctest: +SKIP
        >>> export_distdgl(r.graph, r, "out/karate-2")  # doctest: +SKIP
        PosixPath('out/karate-2/karate.json')
    """
    graph_name = graph.name if graph_name is None else graph_name
    errs = ErrorCollector("export_distdgl")
    errs.check(result.kind == "edge-cut", "result", "an edge-cut partition (DistDGL stores a part per vertex)",
               result.kind)
    errs.check(result.graph is graph or (result.graph.num_nodes, result.graph.num_edges) == (graph.num_nodes, graph.num_edges),
               "graph", "the graph that was partitioned", repr(graph))
    errs.check(isinstance(graph_name, str) and graph_name != "" and "/" not in graph_name, "graph_name",
               "a non-empty file name", graph_name)
    errs.raise_if_any()

    import dgl
    from dgl.data.utils import save_tensors

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    s = _part_structure(graph, result)
    relabel, e_off = s["relabel"], s["edge_offsets"]
    n_off = relabel.part_offsets
    node_data = _node_data(graph)
    meta: dict[str, Any] = {
        "graph_name": graph_name, "num_nodes": graph.num_nodes, "num_edges": graph.num_edges,
        "part_method": result.method, "num_parts": result.num_parts, "halo_hops": 1,
        "node_map": {DEFAULT_NTYPE: [[int(n_off[i]), int(n_off[i + 1])] for i in range(result.num_parts)]},
        "edge_map": {DEFAULT_ETYPE: [[int(e_off[i]), int(e_off[i + 1])] for i in range(result.num_parts)]},
        "ntypes": {DEFAULT_NTYPE: 0}, "etypes": {DEFAULT_ETYPE: 0},
    }
    np.save(out / "orig_nids.npy", relabel.old_of_new.numpy())
    np.save(out / "orig_eids.npy", s["orig_eid_of_new"].numpy())
    for i in range(result.num_parts):
        lo, hi = int(n_off[i]), int(n_off[i + 1])
        halo_new = torch.sort(relabel.new_of_old[result.halo_nodes(i)]).values
        nids = torch.cat([torch.arange(lo, hi), halo_new])
        eids = torch.arange(int(e_off[i]), int(e_off[i + 1]))
        e_src, e_dst = s["new_src"][eids], s["new_dst"][eids]
        is_inner_src = (e_src >= lo) & (e_src < hi)
        local_src = torch.where(is_inner_src, e_src - lo, (hi - lo) + torch.searchsorted(halo_new, e_src))
        part = dgl.graph((local_src, e_dst - lo), num_nodes=nids.numel())
        part.ndata[dgl.NID] = nids
        part.ndata["inner_node"] = (torch.arange(nids.numel()) < hi - lo).to(torch.uint8)
        part.ndata["part_id"] = relabel.part_of_new(nids)
        part.ndata["orig_id"] = relabel.old_of_new[nids]
        part.edata[dgl.EID] = eids
        part.edata["inner_edge"] = torch.ones(eids.numel(), dtype=torch.uint8)
        part.edata["orig_id"] = s["orig_eid_of_new"][eids]

        part_dir = out / f"part{i}"
        part_dir.mkdir(exist_ok=True)
        inner_orig = relabel.old_of_new[lo:hi]
        save_tensors(str(part_dir / "node_feat.dgl"),
                     {f"{DEFAULT_NTYPE}/{k}": v[inner_orig] for k, v in node_data.items()})
        save_tensors(str(part_dir / "edge_feat.dgl"), {})
        dgl.save_graphs(str(part_dir / "graph.dgl"), [part])
        meta[f"part-{i}"] = {"node_feats": f"part{i}/node_feat.dgl", "edge_feats": f"part{i}/edge_feat.dgl",
                             "part_graph": f"part{i}/graph.dgl"}
    config = out / f"{graph_name}.json"
    config.write_text(json.dumps(meta, indent=4) + "\n")
    return config
