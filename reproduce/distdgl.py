"""DistDGL's claims (Zheng et al., IA3 2020) beside this workbench's numbers.

Fig. 16's partitioning ablation (random vs METIS vs METIS with multi-constraint balance) is **measured**: the
recipe's ranks train on 2 emulated hosts with shaped 100 Mbit/s links (:mod:`reproduce.emulated`, over
the seeds; not reproducible where no emulated cluster can run, i.e. without root), on products-like for the
2.14x and +4 % claims and the training bytes behind them, on papers-like for the papers100M inversion (each
owner samples for every trainer there, the work the paper blames). Beside each measured ratio the note gives
what a **modelled epoch** says (a what-if at the paper's network and 4 trainers, which this machine's 2 cores
cannot host as 4 emulated machines): the ``distdgl`` recipe trains one or two epochs on 4 thread trainers for
each partition; each rank's epoch is ``compute + owner's sampling + communication``, with communication from its
counted training traffic (sampling requests, feature pulls, all-reduce) under the 100GbE network model
(:func:`workbench.communicate.netmodel.modelled_seconds`, the paper's 100 Gbps), compute = its trainer's sampled
edges x one cost per sampled edge calibrated on this machine (the model's forward, backward and optimizer
seconds over all runs of the graph, so every partition gets the same rate), and the owner's sampling = the edges
it samples as an owner (for its own trainer and, counted from its ``sample_resp`` bytes, for the others) x one
calibrated sampling cost per edge. The epoch is the slowest rank's. Only the ratios mean anything.

The graphs are the products-like and papers-like generators; on papers-like the labelled vertices sit in 8 of
the 172 communities (``labelled_blocks=8``), the skew that makes plain METIS slower than random on
ogbn-papers100M. The trainers split the training vertices by the recipe's balanced split (Fig. 7, equal
shares, own part first); the inversion is also measured with ``sample.split=own`` (each trainer its part's
training vertices: the load imbalance the paper blames). Batches hold ``n_train / (4 x 4)`` seeds so that a
balanced trainer runs 4 steps (the paper's trainers run hundreds of steps; the recipe's 128 would give one step
at this scale); evaluation uses 100 vertices per split (the modelled epoch counts training only).

Example:
    >>> setting(quick=True)
    'products-like 3000 vertices; papers-like 10000 vertices (labelled_blocks=8); 4 trainers, 1 epoch'
"""

from __future__ import annotations

from collections import defaultdict

from reproduce import emulated
from reproduce.core import SEEDS, Check, Claim, measured_in, not_reproducible, over_seeds, run_config

TITLE = "DistDGL: METIS partitions, owner-routed sampling, synchronous SGD"
PARTS = 4
TRAIN_KINDS = ("sample_req", "sample_resp", "feature_req", "feature", "allreduce")
NETWORK = "100GbE"


def _scale(quick: bool) -> tuple[int, int, int]:
    """(products-like vertices, papers-like vertices, epochs)."""
    return (3000, 10000, 1) if quick else (10000, 40000, 2)


def setting(quick: bool) -> str:
    a, b, e = _scale(quick)
    return (f"products-like {a} vertices; papers-like {b} vertices (labelled_blocks=8); {PARTS} trainers, "
            f"{e} epoch{'s' if e > 1 else ''}")


def _graph(spec: str):
    import torch

    from workbench.data import load_graph

    g = load_graph(spec)

    def first(mask, n=100):
        keep = torch.zeros_like(mask)
        keep[torch.nonzero(mask).flatten()[:n]] = True
        return keep

    return g.with_data(val_mask=first(g.val_mask), test_mask=first(g.test_mask))


def _partitions():
    from workbench.partition import MetisPartitioner, RandomPartitioner

    return {"random": RandomPartitioner.Config(seed=0), "metis": MetisPartitioner.Config(seed=0),
            "metis+mc": MetisPartitioner.Config(seed=0, balance_train=True)}


def _run_all(spec: str, epochs: int, split: str | None = None, names: tuple = ("random", "metis", "metis+mc")) -> dict:
    """Partition name -> (summary, per-rank sampled edges, per-rank model seconds, per-rank comm seconds);
    ``split``: the training split (None: the recipe's, DistDGL's balanced split)."""
    from recipes import distdgl
    from workbench.communicate.netmodel import modelled_seconds
    from workbench.events import SampleStats, Traffic

    graph = _graph(spec)
    batch = max(1, int(graph.train_mask.sum()) // (PARTS * 4))
    out = {}
    for name, part in _partitions().items():
        if name not in names:
            continue
        cfg = distdgl.recipe(graph=graph, epochs=epochs, num_parts=PARTS, partition=part, sample={"batch_size": batch})
        if split is not None:
            cfg = cfg.with_strings({"sample.split": split})
        summary, events = run_config(cfg, PARTS, events=True)
        edges, served, received = defaultdict(float), defaultdict(float), defaultdict(float)
        for ev in events:
            if isinstance(ev, SampleStats):
                edges[ev.rank] += ev.sampled_edges / epochs
            elif isinstance(ev, Traffic) and ev.kind == "sample_resp":   # (src, dst) int64 pairs: 16 bytes an edge
                served[ev.src_rank] += ev.bytes / 16 / epochs
                received[ev.dst_rank] += ev.bytes / 16 / epochs
        # the sampling each rank does as an owner: its own trainer's edges it owns, and those it serves to others
        owner_edges = {r: edges.get(r, 0.0) - received.get(r, 0.0) + served.get(r, 0.0)
                       for r in set(edges) | set(served)}
        comm = defaultdict(float)
        for per_rank in modelled_seconds(events, NETWORK, kinds=TRAIN_KINDS, per_rank=True).values():
            for r, s in per_rank.items():
                comm[r] += s / epochs
        tb = summary["time_breakdown"]["by_rank"]
        model = {r: sum(sum(tb[r][p]) for p in ("forward", "backward", "optimizer")) / epochs for r in range(len(tb))}
        sampling = sum(sum(tb[r].get("sample", [])) for r in range(len(tb))) / epochs
        out[name] = (summary, dict(edges), model, dict(comm), owner_edges, sampling)
    return {"runs": out, "batch": batch}


def _epochs(runs: dict) -> tuple[dict, dict, float]:
    """Modelled epoch and communication seconds per partition, and the calibrated seconds per sampled edge.

    A rank's modelled epoch: its trainer's model compute (its sampled edges x one calibrated cost an edge), the
    sampling it does as an owner (the edges of every frontier vertex it owns, its own trainer's and those it
    serves to the others, x one calibrated sampling cost an edge: the owner's work the paper blames for the
    papers100M inversion), and its modelled communication; the epoch is the slowest rank's."""
    total_model = sum(sum(v[2].values()) for v in runs.values())
    total_edges = sum(sum(v[1].values()) for v in runs.values())
    rate = total_model / max(total_edges, 1.0)
    sample_rate = sum(v[5] for v in runs.values()) / max(total_edges, 1.0)
    epoch, comm = {}, {}
    for name, (_, edges, _, c, owner, _) in runs.items():
        ranks = set(edges) | set(c) | set(owner)
        epoch[name] = max(edges.get(r, 0.0) * rate + owner.get(r, 0.0) * sample_rate + c.get(r, 0.0) for r in ranks)
        comm[name] = max(c.values()) if c else 0.0
    return epoch, comm, rate


def _remote_fraction(summary: dict) -> float:
    return sum(summary["remote_feature_rows"]) / max(sum(summary["input_nodes"]), 1)


def _measured_epochs(timed, modelled: dict, model_note: str) -> list[Claim]:
    """Fig. 16's two epoch-time ratios, measured on emulated hosts (:func:`reproduce.emulated.distdgl_epochs`),
    or not reproducible with the reason where no emulated cluster runs (the modelled ratios in the note)."""
    model = (f"the 100 Gbps model gives random ÷ METIS {modelled['random'] / modelled['metis']:.3f} and METIS ÷ "
             f"METIS+mc {modelled['metis'] / modelled['metis+mc']:.3f} ({model_note})")
    texts = (("distdgl.epoch_metis_vs_random", "epoch time measured on emulated hosts: random ÷ METIS at least the "
              "paper's 2.14x (products)", 2.14, "random/metis"),
             ("distdgl.epoch_multiconstraint", "epoch time measured on emulated hosts: METIS ÷ METIS with "
              "multi-constraint balance at least the paper's +4 % (products)", 1.04, "metis/metis+mc"))
    if isinstance(timed, str):
        return [not_reproducible(cid, text, "Fig. 16", paper, "x", f"{timed}; {model}") for cid, text, paper, _ in texts]
    runs = timed["per_seed"]
    per_run = "; ".join(f"seed {r['seed']}: " + ", ".join(
        f"{k} {v['median_s'] * 1e3:.0f} ms ({v['train_bytes'] / 1e6:.1f} MB, comm {v['comm_share']:.0%})"
        for k, v in r["variants"].items()) for r in runs)
    note = (f"{timed['setting']['text']}; {timed['cluster']}; per epoch, the slowest rank's training time "
            f"(evaluation left out): {per_run}; load average {timed['load_average'][0]:.1f}-"
            f"{timed['load_average'][1]:.1f} on {timed['setting']['cores']} cores. A 3-hop sample with fan-outs "
            "15,10,5 spans most of a small graph, so METIS saves fewer bytes here than on products; the paper's "
            f"network is 100 Gbit/s between machines of 96 vCPUs. For comparison, {model}")
    return [Claim(cid, text, "Fig. 16", paper=paper, null=1.0, relation=">", unit="x",
                  **over_seeds(timed["ratios"][key]),
                  note=(note if i == 0 else f"{measured_in(texts[0][0], timed['ratios'][key])}. For comparison, {model}"))
            for i, (cid, text, paper, key) in enumerate(texts)]


def _papers_claims(timed, modelled: dict, own_modelled: dict, pap_note: str, own_note: str) -> list[Claim]:
    """The papers100M inversion and its cure, measured on emulated hosts (:func:`reproduce.emulated.
    distdgl_epochs` with ``graph="papers"``), or not reproducible with the reason (the modelled ratios in the
    note)."""
    model = {"metis/random": modelled["metis"] / modelled["random"],
             "metis+mc/random": modelled["metis+mc"] / modelled["random"],
             "metis own/random own": own_modelled["metis"] / own_modelled["random"]}
    texts = (("distdgl.papers_inversion", "skewed labels (papers100M-like): plain METIS slower than random "
              "(epoch time measured on emulated hosts, METIS ÷ random above 1)", "Fig. 16 (no number given)", ">",
              "metis/random", pap_note),
             ("distdgl.papers_inversion_own", "skewed labels, without the balanced split: plain METIS slower than "
              "random (epoch time measured on emulated hosts, METIS ÷ random above 1)",
              "Fig. 16 (the paper's cause: imbalanced partitions)", ">", "metis own/random own", own_note),
             ("distdgl.papers_multiconstraint", "skewed labels: multi-constraint METIS restores the benefit (epoch "
              "time measured on emulated hosts, METIS+mc ÷ random below 1)", "Fig. 16 (no number given)", "<",
              "metis+mc/random", pap_note))
    if isinstance(timed, str):
        return [not_reproducible(cid, text, source, None, "x", f"{timed}; the {NETWORK} model (4 trainers) gives "
                                 f"{model[key]:.3f} ({note})") for cid, text, source, _, key, note in texts]
    per_run = "; ".join(f"seed {r['seed']}: " + ", ".join(
        f"{k} {v['median_s'] * 1e3:.0f} ms ({v['train_bytes'] / 1e6:.1f} MB, {v.get('steps')} steps, comm "
        f"{v['comm_share']:.0%})" for k, v in r["variants"].items()) for r in timed["per_seed"])
    st = timed["setting"]
    own = ("; with split=own every trainer runs as many steps as the one with the most training vertices (the "
           "other repeats its batches), so METIS's skew of the labelled communities between the parts adds steps, "
           "sampling and bytes (the steps in distdgl.papers_inversion's note), and how far METIS skews them changes "
           "with the graph's size (the "
           "generator does not place the labelled communities), so the verdict can move between the quick and "
           "the full run")
    head = (f"{st['text']}; {timed['cluster']}; {st['train_vertices']} training vertices, batches of {st['batch']} "
            f"seeds; per epoch, the slowest rank's training time (evaluation left out): {per_run}; load average "
            f"{timed['load_average'][0]:.1f}-{timed['load_average'][1]:.1f} on {st['cores']} cores. Each owner "
            "samples for every trainer here for real, the work the paper blames; at 100 Mbit/s the links carry most "
            "of an epoch (comm share above), where the paper's 100 Gbit/s leaves the owners' sampling and compute "
            "to decide. For comparison, the ")
    return [Claim(cid, text, source, paper=None, null=1.0, relation=rel, unit="x",
                  **over_seeds(timed["ratios"][key]),
                  note=(head if i == 0 else f"{measured_in(texts[0][0], timed['ratios'][key])}. For comparison, the ")
                  + f"{NETWORK} model (4 trainers, what-if) gives {model[key]:.3f} ({note})" + (own if "own" in key else ""))
            for i, (cid, text, source, rel, key, note) in enumerate(texts)]


def _bytes_claim(timed, modelled_comm: dict) -> Claim:
    """Training bytes per epoch, random ÷ METIS, counted at the transport in the emulated runs (the cause of
    METIS's faster epoch the paper gives); not reproducible where they cannot run."""
    cid, text, source = ("distdgl.comm_metis_vs_random", "training bytes per epoch (sampling, feature rows, "
                         "all-reduce) counted on emulated hosts: random ÷ METIS above 1 (products)",
                         "Fig. 16 (the cause of METIS's 2.14x)")
    model = (f"the {NETWORK} model's communication seconds (4 trainers) give random ÷ METIS "
             f"{modelled_comm['random'] / modelled_comm['metis']:.3f}")
    if isinstance(timed, str):
        return not_reproducible(cid, text, source, None, "x", f"{timed}; {model}")
    per = "; ".join(f"seed {r['seed']}: " + ", ".join(f"{k} {v['train_bytes'] / 1e6:.2f} MB"
                                                       for k, v in r["variants"].items()) for r in timed["per_seed"])
    return Claim(cid, text, source, paper=None, null=1.0, relation=">", unit="x",
                 **over_seeds(timed["per_seed"], lambda r: r["variants"]["random"]["train_bytes"]
                              / r["variants"]["metis"]["train_bytes"]),
                 note=f"{timed['setting']['text']}; bytes per epoch, all ranks: {per}; a count, not a time. For "
                      f"comparison, {model}")


def claims(quick: bool = False) -> list[Claim]:
    """Every DistDGL claim, measured (``quick``: smaller graphs, one epoch)."""
    n_products, n_papers, epochs = _scale(quick)
    prod = _run_all(f"products-like:num_nodes={n_products},seed=0", epochs)
    pap = _run_all(f"papers-like:num_nodes={n_papers},labelled_blocks=8,seed=0", epochs)
    pap_own = _run_all(f"papers-like:num_nodes={n_papers},labelled_blocks=8,seed=0", epochs, split="own",
                       names=("random", "metis"))
    e1, c1, rate1 = _epochs(prod["runs"])
    e2, _, rate2 = _epochs(pap["runs"])
    e3, _, rate3 = _epochs(pap_own["runs"])
    fmt_ms = lambda d: ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in d.items())  # noqa: E731
    model_note = (f"modelled epochs ({NETWORK}, compute {rate1 * 1e6:.2f} µs per sampled edge calibrated here, and "
                  "each owner's sampling of the edges it serves): "
                  f"{fmt_ms(e1)}; communication alone: {fmt_ms(c1)}; batch {prod['batch']} seeds")
    steps2 = {k: v[0]["steps"][0] for k, v in pap["runs"].items()}
    pap_note = (f"modelled epochs ({NETWORK}, {rate2 * 1e6:.2f} µs per sampled edge): {fmt_ms(e2)}; steps per "
                f"epoch {steps2}; batch {pap['batch']} seeds; the balanced split (Fig. 7) gives every trainer an "
                "equal share, so METIS's skew becomes remote seeds: cheap on a 100 Gbps network, but the owner of "
                "the labelled communities samples for every trainer (the cause the paper gives)")
    steps3 = {k: v[0]["steps"][0] for k, v in pap_own["runs"].items()}
    busiest = {k: max(v[1].values()) for k, v in pap_own["runs"].items()}
    busiest_owner = {k: max(v[4].values()) for k, v in pap_own["runs"].items()}
    own_note = (f"split=own, each trainer its part's training vertices: modelled epochs ({NETWORK}, "
                f"{rate3 * 1e6:.2f} µs per sampled edge): {fmt_ms(e3)}; steps per epoch {steps3} (short trainers "
                "repeat batches); sampled edges of the busiest trainer per epoch: "
                + ", ".join(f"{k} {v:.0f}" for k, v in busiest.items())
                + "; of the busiest owner (edges it samples for every trainer): "
                + ", ".join(f"{k} {v:.0f}" for k, v in busiest_owner.items())
                + ". The verdict moves with the graph's size because where METIS puts the 8 labelled communities "
                "decides the skew (the generator does not control it): at 10,000 vertices (quick; 109 training "
                "vertices, batches of 6) METIS gives one part 66 training vertices and another none (2.4x the mean), "
                "at 40,000 (full; 436, batches of 27) its largest part holds 150 (1.38x the mean)")
    balance = {}
    for label, bundle in (("products-like", prod), ("papers-like", pap)):
        parts = bundle["runs"]["metis+mc"][0].get("partition_metrics", {})
        balance[label] = parts.get("train_balance")
    if None in balance.values():
        from workbench.partition import partition

        for label, spec in (("products-like", f"products-like:num_nodes={n_products},seed=0"),
                            ("papers-like", f"papers-like:num_nodes={n_papers},labelled_blocks=8,seed=0")):
            balance[label] = partition(_graph(spec), PARTS, method="metis", seed=0,
                                       balance_train=True).metrics().train_balance
    timed = emulated.distdgl_epochs(quick=quick, seeds=SEEDS)
    timed_papers = emulated.distdgl_epochs(quick=quick, seeds=SEEDS, graph="papers")
    remote = {k: _remote_fraction(v[0]) for k, v in prod["runs"].items()}
    metis = prod["runs"]["metis"][0]
    rows = (sum(metis["input_nodes"]), sum(metis["remote_feature_rows"]))
    return [
        _bytes_claim(timed, c1),
        *_measured_epochs(timed, e1, model_note),
        *_papers_claims(timed_papers, e2, e3, pap_note, own_note),
        Claim("distdgl.remote_rows", "remote input rows per sampled mini-batch: METIS ÷ random below 1 (products)",
              "DistDGL's METIS partitioning (min-cut keeps neighbourhoods local)", paper=None, null=1.0, relation="<",
              measured=remote["metis"] / remote["random"], unit="ratio",
              note="fraction of input rows another part owns: " + ", ".join(f"{k} {v:.3f}" for k, v in
                                                                          remote.items())),
        Claim("distdgl.data_copy_vs_euler", "feature rows copied over the network per epoch: Euler (every row over "
              "TCP/IP) ÷ DistDGL (only the rows METIS puts on another part; local rows from shared memory), "
              "products", "§5.1.1, Fig. 15(b) ('more than 5x speedup' in data copy over Euler, 'because DistDGL "
              "uses METIS ... and trainers are co-located with the partition data')", paper=5.0, null=1.0,
              relation=">", measured=rows[0] / max(rows[1], 1), unit="x",
              note=f"METIS partition, 4 trainers: {rows[1]} of {rows[0]} input rows are remote "
                   f"({rows[1] / max(rows[0], 1):.3f}); Euler is not run here: it is read as copying every input "
                   "row through TCP/IP (the paper's explanation), and a local copy is counted free, so this is the "
                   "most co-location can save at this scale; with fan-outs 15,10,5 a 3-hop sample spans most of "
                   "a small graph, so most rows stay remote whatever the partition (distdgl.remote_rows)"),
        Check("distdgl.train_balance", "multi-constraint METIS keeps the training vertices per part within its "
              "allowed imbalance: how far max ÷ mean exceeds 1.03 (worst of the two graphs; 0 = within)",
              measured=max(0.0, max(balance.values()) - 1.03), expected=0.0,
              note=f"{balance}; 0.03 = METIS's allowed imbalance per constraint (a setting, so a check, not a "
                   "claim). It passes at the quick run's size and misses at the full run's by 2 vertices: on "
                   "products-like at 3,000 vertices the largest part holds 62 of 241 training vertices (1.029, "
                   "within the 62 that 1.03 allows), at 10,000 it holds 208 of 803 (1.036, 2 beyond 206); there the "
                   "validation and test constraints (cut to 100 vertices, 25 a part) are within 1.03 only when "
                   "exactly equal (one vertex more is 26 ÷ 25 = 1.04, where METIS ends on both), and METIS's "
                   "multi-constraint refinement treats the tolerances as targets, not guarantees"),
        not_reproducible("distdgl.vs_euler", "2.2x faster than Euler at every batch size (4 machines)", "Fig. 15",
                         2.2, "x", "needs Euler on TensorFlow 1.12 and 4 m5n.24xlarge machines"),
        not_reproducible("distdgl.papers_epoch", "13 s per epoch of GraphSAGE on 100M vertices with 16 machines",
                         "§1 (from the original paper)", 13.0, "s", "absolute time on 16 machines; a 100M-vertex "
                                                                     "graph"),
        not_reproducible("distdgl.linear_scaling", "linear speed-up to 16 machines without accuracy loss", "§1",
                         16.0, "x", "needs 16 machines; this one has 2 cores"),
    ]
