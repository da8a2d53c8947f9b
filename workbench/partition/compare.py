"""RP vs GP vs HP on several graphs and part counts, in the layout of Table 2 of Demirci et al. (PVLDB 2022).

:func:`compare_methods` partitions every graph with every method and part count and records the four
per-SpMM metrics (:data:`workbench.partition.volume.TABLE2_KEYS`); :func:`table2` normalises them to random
partitioning (RP) and lays them out as the paper's Table 2 (HP row, GP row, HP/GP row per graph, a geo-mean
row, and the paper's geo-means beside); :func:`claim_check` lists where "HP total volume <= GP total volume"
and "HP max volume < GP max volume" hold or not; :func:`modelled_comm_seconds` turns per-part rows and
messages into an alpha-beta epoch time (:mod:`workbench.communicate.netmodel`).

Example:
    >>> from workbench.data.shapes import grid_graph
    >>> df = compare_methods({"grid": grid_graph(8)}, [2], methods=("random", "block"))
    >>> sorted(df.method), int(df[df.method == "block"].comm_volume_rows.iloc[0])
    (['block', 'random'], 16)
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from workbench.partition.volume import PAPER_TABLE2, TABLE2_KEYS, send_metrics

__all__ = ["compare_methods", "table2", "claim_check", "modelled_comm_seconds", "LABELS"]

LABELS = {"random": "RP", "metis": "GP", "hypergraph": "HP", "stochastic-hypergraph": "SHP"}
COLUMNS = {"comm_volume_rows": "Vol avg", "max_send_volume_rows": "Vol max", "total_messages": "Msg avg",
           "max_part_messages": "Msg max"}


def compare_methods(graphs: Mapping[str, Any], parts: Sequence[int], methods: Sequence[str] = ("random", "metis",
                    "hypergraph"), seed: int = 0, options: Mapping[str, dict] | None = None):
    """One row per (graph, P, method): the four metrics per SpMM, the partitioner's time and balance.

    ``options[method]`` are extra partitioner options (e.g. ``{"metis": {"imbalance": 0.01}}``).
    """
    import pandas as pd

    from workbench.partition.base import partition

    rows = []
    for gname, graph in graphs.items():
        for p in parts:
            for method in methods:
                r = partition(graph, int(p), method=method, seed=seed, **dict((options or {}).get(method, {})))
                m = send_metrics(r.metrics().comm_rows)
                rows.append({"graph": gname, "P": int(p), "method": method,
                             **{k: m[k] for k in TABLE2_KEYS}, "max_recv_volume_rows": m["max_recv_volume_rows"],
                             "elapsed_s": r.elapsed_s, "vertex_balance": r.metrics().vertex_balance,
                             "part_send_rows": m["part_send_rows"], "part_messages": m["part_messages"]})
    return pd.DataFrame(rows)


def _normalised(df):
    base = df[df.method == "random"].set_index(["graph", "P"])[list(TABLE2_KEYS)]
    out = df.set_index(["graph", "P"])[["method", *TABLE2_KEYS]].copy()
    for k in TABLE2_KEYS:
        out[k] = out[k] / base[k].reindex(out.index).to_numpy()
    return out.reset_index()


def table2(df, P: int, hp: str = "hypergraph", gp: str = "metis"):
    """Table 2 layout at ``P`` parts: per graph the HP, GP and HP/GP rows normalised to RP; then the
    geo-mean rows and the paper's geo-means (P = 512) for comparison."""
    import pandas as pd

    n = _normalised(df[df.P == P])
    rows = []
    for gname in dict.fromkeys(n.graph):
        g = n[n.graph == gname].set_index("method")
        a, b = g.loc[hp, list(TABLE2_KEYS)].astype(float), g.loc[gp, list(TABLE2_KEYS)].astype(float)
        rows += [(gname, LABELS.get(hp, hp), *a), (gname, LABELS.get(gp, gp), *b),
                 (gname, "HP/GP", *(a / b.replace(0, np.nan)))]
    t = pd.DataFrame(rows, columns=["graph", "row", *[COLUMNS[k] for k in TABLE2_KEYS]])
    geo = []
    for label in (LABELS.get(hp, hp), LABELS.get(gp, gp), "HP/GP"):
        sub = t[t.row == label].iloc[:, 2:].astype(float)
        geo.append(("geo-mean", label, *[_geomean(sub[c]) for c in sub]))
    geo += [("paper P=512", "HP", *PAPER_TABLE2["hypergraph"]), ("paper P=512", "GP", *PAPER_TABLE2["metis"]),
            ("paper P=512", "HP/GP", *[h / g for h, g in zip(PAPER_TABLE2["hypergraph"], PAPER_TABLE2["metis"])])]
    t = pd.concat([t, pd.DataFrame(geo, columns=t.columns)], ignore_index=True)
    return t.set_index(["graph", "row"]).round(3)


def _geomean(values) -> float:
    v = np.asarray(values, float)
    v = v[np.isfinite(v) & (v > 0)]
    return float(np.exp(np.log(v).mean())) if v.size else math.nan


def claim_check(df, hp: str = "hypergraph", gp: str = "metis"):
    """Per (graph, P): HP and GP total and max send volume (rows), and whether each claim holds."""
    a = df[df.method == hp].set_index(["graph", "P"])
    b = df[df.method == gp].set_index(["graph", "P"])
    out = a[["comm_volume_rows", "max_send_volume_rows"]].rename(columns=lambda c: "HP " + c)
    out["GP comm_volume_rows"] = b["comm_volume_rows"]
    out["GP max_send_volume_rows"] = b["max_send_volume_rows"]
    out["HP total <= GP total"] = out["HP comm_volume_rows"] <= out["GP comm_volume_rows"]
    out["HP max / GP max"] = (out["HP max_send_volume_rows"] / out["GP max_send_volume_rows"]).round(3)
    return out


def modelled_comm_seconds(part_send_rows: Sequence[int], part_messages: Sequence[int], row_width_sum: int,
                          num_spmm: int, network: Any = "10GbE") -> float:
    """Alpha-beta epoch time of the slowest sender: ``max_r (num_spmm * msgs_r * latency + rows_r *
    row_width_sum * 4 / bandwidth)``; ``row_width_sum`` = total exchanged width of one epoch's SpMMs.

    Example:
        >>> round(modelled_comm_seconds([1000, 10], [2, 1], 100, 3, "10GbE") * 1e6, 1)
        440.0
    """
    from workbench.communicate.netmodel import resolve_network

    net = resolve_network(network)
    rows = np.asarray(part_send_rows, float)
    msgs = np.asarray(part_messages, float)
    t = num_spmm * msgs * net.latency_s + rows * row_width_sum * 4 / net.bandwidth_Bps
    return float(t.max()) if t.size else 0.0
