"""HP-GCN's claims (Demirci et al., PVLDB 16(4) 2022) beside this workbench's numbers.

Exact claims (km1 is the exchange's volume, the toy example) are checked on the partitions and a short training
run; Table 2's claims are checked on four small graphs (a mesh, an SBM, a power-law graph, a directed citation
graph) at the largest part count run here, as geo-means normalised to random partitioning exactly like the paper
(:func:`workbench.partition.compare.table2`). The paper's Table 2 is at P = 512 on real graphs, so its
magnitudes are shown, while the verdict checks the direction (HP/GP below 1). Run times are modelled from the
exact per-part rows and messages (:func:`~workbench.partition.compare.modelled_comm_seconds`, 10GbE).

Example:
    >>> setting(quick=True)
    '4 graphs of 400 vertices, P = 4, 8; training on a 300-vertex SBM'
"""

from __future__ import annotations

import numpy as np

from reproduce.core import Check, Claim, geomean, not_reproducible, run_config

TITLE = "HP-GCN: hypergraph-partitioned full-batch GCN"
_SMALL = "sbm:num_nodes=300,num_blocks=4,avg_degree=6,num_features=8,seed=0"


def setting(quick: bool) -> str:
    n, parts = _scale(quick)
    return f"4 graphs of {n} vertices, P = {', '.join(map(str, parts))}; training on a 300-vertex SBM"


def _scale(quick: bool):
    return (400, (4, 8)) if quick else (3000, (4, 16, 64))


def _graphs(n: int) -> dict:
    from workbench.data import load_graph
    from workbench.data.shapes import citation_graph, grid_graph

    return {"mesh": grid_graph(int(n ** 0.5)),
            "sbm": load_graph(f"sbm:num_nodes={n},num_blocks=16,avg_degree=10,num_features=0,seed=0"),
            "power-law": load_graph(f"chunglu:num_nodes={n},avg_degree=10,num_features=0,seed=0"),
            "citation (directed)": citation_graph(n, out_degree=5, seed=0)}


def _toy_km1() -> tuple[int, int]:
    """The paper's toy example (Figs. 1-2: 6 vertices, 3 parts): (km1, graph-model volume)."""
    import torch

    from workbench.graph import Graph
    from workbench.partition.volume import column_nets, km1

    u, v = torch.tensor([0, 0, 1, 1, 2, 3, 3]), torch.tensor([1, 4, 3, 5, 3, 4, 5])
    toy = Graph.from_edges(torch.cat([u, v]), torch.cat([v, u]), 6, directed=False, name="toy")
    part = np.array([0, 0, 1, 1, 2, 2])
    src, dst = (t.numpy() for t in toy.edges())
    graph_model = int((part[src] != part[dst]).sum())     # 2 x the undirected edge cut
    return km1(column_nets(toy), part), graph_model


def _exchange_claims() -> list[Claim]:
    from recipes import hp_gcn
    from workbench.data import load_graph
    from workbench.partition import partition
    from workbench.layout.halo import build_halo_plans

    g = load_graph(_SMALL)
    r = partition(g, 4, method="hypergraph", seed=0)
    plans = build_halo_plans(g, r.node_part, 4)
    rows = sum(p.num_halo for p in plans)
    summary = run_config(hp_gcn.recipe(graph=_SMALL, epochs=2, model={"hidden": 8}), workers=4)
    dims = [g.num_features, 8, g.num_classes]
    formula = hp_gcn.fold_bytes_per_epoch(r.stats["km1"], dims)
    km1_toy, graph_toy = _toy_km1()
    from recipes import sancus

    cagnet = run_config(sancus.cagnet_baseline(graph=_SMALL, epochs=2, model={"hidden": 8}, num_parts=4), workers=4)
    return [
        Claim("hp_gcn.vs_cagnet_bytes", "CAGNET's communication over HP-GCN's (bytes per training epoch, the same "
              "graph, model and 4 parts)", "§5, Fig. 4a (CAGNET's communication time 8.3x HP's)", paper=8.3,
              null=1.0, relation=">", measured=cagnet["bytes_per_epoch"] / summary["bytes_per_epoch"], unit="x",
              note=f"CAGNET 1-D (block-row broadcast of every row, recipes.sancus.cagnet_baseline) "
                   f"{cagnet['bytes_per_epoch']} B vs HP-GCN's halo exchange on the hypergraph partition "
                   f"{summary['bytes_per_epoch']} B per epoch, 300-vertex SBM, GCN 2 x 8; exact counts at the "
                   "transport. The paper's 8.3x is communication time on 512 processors (bytes and message "
                   "latencies); here only the bytes are compared"),
        Check("hp_gcn.km1_rows", "rows the halo exchange moves per SpMM ÷ the partition's connectivity-1 (km1, §4.3)",
              measured=rows / r.stats["km1"], expected=1.0,
              note=f"{rows} rows vs km1 {r.stats['km1']} (300-vertex SBM, P = 4); exact, so tolerance 0"),
        Check("hp_gcn.bytes_formula", "bytes one training epoch moved ÷ km1 x (Σ widths) x 4 (the fold form, Eq. 11)",
              measured=summary["bytes_per_epoch"] / formula, expected=1.0,
              note=f"{summary['bytes_per_epoch']} B measured at the transport vs {formula} B predicted; the "
                   "paper's expand form (Algorithm 2) would move more (documented in recipes.hp_gcn)"),
        Check("hp_gcn.toy_km1", "toy example: km1 of Figs. 1-2's partition, counted from the figures (the paper "
              "prints the graph model's 10, not this 9)", measured=km1_toy, expected=9,
              note=f"graph model counts {graph_toy} on the same partition (the paper: 10)"),
    ]


RATIO_DERIVED = "HP ÷ GP: the quotient of Table 2's geo-mean HP and GP rows (each normalised to RP)"


def _table2_claims(quick: bool) -> list[Claim]:
    from workbench.partition import partition
    from workbench.partition.compare import compare_methods, modelled_comm_seconds, table2
    from workbench.partition.volume import PAPER_TABLE2, column_nets, expected_batch_volume

    n, parts = _scale(quick)
    graphs = _graphs(n)
    df = compare_methods(graphs, parts, options={"metis": {"imbalance": 0.01}})
    P = max(parts)
    t = table2(df, P)
    geo = t.xs("geo-mean")
    hp_gp = geo.loc["HP/GP"]
    paper_ratio = [h / g for h, g in zip(PAPER_TABLE2["hypergraph"], PAPER_TABLE2["metis"])]
    per_graph = t.drop(index=["geo-mean", "paper P=512"], level="graph")
    skewed = [per_graph.loc[(name, "HP/GP"), "Vol max"] for name in ("power-law", "citation (directed)")]
    where = f"geo-mean over 4 graphs of {n} vertices at P = {P} (paper: 8 graphs, P = 512)"

    comm = {}
    for row in df[df.P == P].itertuples():
        comm[(row.graph, row.method)] = modelled_comm_seconds(row.part_send_rows, row.part_messages, 3 * 64, 3)
    rp_hp = {gname: comm[(gname, "random")] / comm[(gname, "hypergraph")] for gname in graphs}
    rp_over_hp = geomean(list(rp_hp.values()))
    msg = {gname: per_graph.loc[(gname, "HP/GP"), "Msg avg"] for gname in graphs}

    g = graphs["sbm"]
    s = max(2, g.num_nodes // 10)
    full = column_nets(g)
    hp = partition(g, P, method="hypergraph", seed=0)
    shp = partition(g, P, method="stochastic-hypergraph", batch_size=s, seed=0)
    e_hp = expected_batch_volume(full, hp.node_part.numpy(), s, P)
    e_shp = expected_batch_volume(full, shp.node_part.numpy(), s, P)
    return [
        Claim("hp_gcn.vol_avg_hp_gp", "total (avg) send volume: HP ÷ GP below 1", "Table 2 geo-mean HP/GP",
              paper=round(paper_ratio[0], 2), null=1.0, relation="<", measured=float(hp_gp["Vol avg"]),
              unit="ratio", note=where, derived=RATIO_DERIVED),
        Claim("hp_gcn.vol_max_hp_gp", "max send volume: HP ÷ GP below 1", "Table 2 geo-mean HP/GP",
              paper=round(paper_ratio[1], 2), null=1.0, relation="<", measured=float(hp_gp["Vol max"]),
              unit="ratio", note=where, derived=RATIO_DERIVED),
        Claim("hp_gcn.vol_max_skewed", "max send volume HP ÷ GP below 1 on skewed graphs (worst of the power-law "
              "and directed citation graphs)", "§5 text, Table 2 (flickr 0.09, com-Youtube 0.20)", paper=0.2,
              null=1.0, relation="<", measured=float(max(skewed)), unit="ratio",
              note=f"HP/GP max: power-law {skewed[0]:.3f}, citation {skewed[1]:.3f} at P = {P}; km1 minimises the "
                   "total, not the max, and GP here has unit vertex weights while HP balances row nnz"),
        Claim("hp_gcn.vol_hp_rp", "total send volume: HP ÷ RP below 1", "Table 2 geo-mean HP row",
              paper=PAPER_TABLE2["hypergraph"][0], null=1.0, relation="<",
              measured=float(geo.loc["HP", "Vol avg"]), unit="ratio", note=where),
        Claim("hp_gcn.msg_hp_gp", "messages (avg): HP ÷ GP at most 1", "Table 2 geo-mean HP/GP",
              paper=round(paper_ratio[2], 2), null=1.0, relation="<", measured=float(hp_gp["Msg avg"]),
              unit="ratio", derived=RATIO_DERIVED,
              note=f"{where}; HP/GP per graph: " + ", ".join(f"{k} {v:.3f}" for k, v in msg.items())
                   + ". The verdict moves with the part count: at P = 8 (quick, 400 vertices) every part of the SBM, "
                     "power-law and citation graphs sends to all 7 others under both partitions (HP/GP = 1 exactly), "
                     "so the mesh alone (1.077) decides the geo-mean, 1.019; at P = 64 (full, 3,000 vertices) parts "
                     "reach fewer than 63 others and HP needs fewer messages on three graphs (0.92-0.98), 0.981"),
        Claim("hp_gcn.rp_over_hp_time", "modelled communication time RP ÷ HP above 1 (a trend under the network "
              "model; the paper's 2.12x is whole run time)", "§5, Table 2 (R = 0.47, i.e. 2.12x)", paper=2.12, null=1.0,
              relation=">", measured=rp_over_hp, unit="x", derived="1 / R with R = 0.47, the paper's run-time ratio",
              note=f"alpha-beta 10GbE model of the slowest sender, widths 64 x 3 SpMMs, {where}; RP ÷ HP per graph: "
                   + ", ".join(f"{k} {v:.3f}" for k, v in rp_hp.items())
                   + ". The verdict moves with the part count because the model is latency-bound at this size "
                     "(a message costs 3 x 20 µs, a sender's bytes 0.01-0.3 ms): at P = 8 (quick) RP and HP both "
                     "send 7 messages per SpMM on three graphs, so mostly the bandwidth terms differ (0.99-1.37 "
                     "per graph, 1.15); at P = 64 (full) random parts send to 59-63 others while the mesh's HP "
                     "parts send to 5.5 on average, 6.9x on the mesh alone (1.0-1.2 on the others), 1.70"),
        Claim("hp_gcn.shp_vs_hp", "expected rows per mini-batch SpMM: HP ÷ SHP above 1 (HP induces ~10 % more)",
              "§5, Fig. 5", paper=1.10, null=1.0, relation=">", measured=e_hp / e_shp, unit="ratio",
              note=f"exact expectation over batches of {s} of {n} vertices on the SBM, P = {P} (the paper: 20K of "
                   f"335K on com-Amazon, PaToH with unit weights, ε = 0.03): HP {e_hp:.1f}, SHP {e_shp:.1f} rows, "
                   f"SHP from {shp.stats.get('num_sampled_nets')} sampled nets. The verdict moves with the part "
                   "count: Eq. 14 samples N = (P - 1)² / (2θ²) ln(2/δ) nets, 3,400 at P = 8 (quick: 8.5 per vertex, "
                   "2,188 of them with more than one pin), too thin a sample for SHP to beat HP on a fresh batch "
                   "(8.4 rows against 7.6; 9.4 and 9.3 with seeds 1 and 2); at P = 64 (full) 275,400 nets, 92 per "
                   "vertex (174,326 with more than one pin), and SHP moves 162 rows against HP's 185"),
    ]


def claims(quick: bool = False) -> list[Claim]:
    """Every HP-GCN claim, measured (``quick``: smaller graphs and part counts)."""
    return [*_exchange_claims(), *_table2_claims(quick),
            not_reproducible("hp_gcn.speedup_dgl", "speed-up over single-node DGL (geo-mean)", "Table 2, S column",
                             10.60, "x", "absolute run times of 512 CPU processes against DGL; this machine has 2 "
                                         "cores"),
            not_reproducible("hp_gcn.papers100m", "communication volume about 10x below RP on ogbn-papers100M",
                             "Table 3", 10.0, "x", "111M vertices on 27 GPUs; the data cannot be downloaded here"),
            not_reproducible("hp_gcn.cora_accuracy", "about 75 % accuracy on Cora whatever the number of GPUs",
                             "Fig. 4c", 0.75, "accuracy", "Cora is not shipped with any installed package and "
                                                          "nothing is downloaded")]
