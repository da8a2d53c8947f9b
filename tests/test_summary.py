"""The run summary (:mod:`workbench.summary`): a read-only mapping of the flat JSON keys, made of typed fields and
the fragments the run's pieces contribute; SANCUS's keys only in runs with a staleness policy."""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Mapping

import pytest
import torch

from workbench.compose import RunConfig
from workbench.summary import FragmentCollision, RunSummary, merge_fragments
from workbench.testing import run_program

STALENESS_KEYS = {"staleness", "epsilon", "broadcast_skipped", "broadcasts_skipped", "broadcast_rounds", "max_age",
                  "cache_bytes"}


def _summary(**fragments) -> RunSummary:
    return RunSummary.counted(program="full_graph", world_size=2, losses=[1.0, 0.5],
                              accuracy={"train": 0.5, "val": 0.25, "test": float("nan")}, bytes_per_epoch=64,
                              bytes_by_epoch=[64, 64], fragments=fragments)


def test_a_read_only_mapping_of_the_flat_keys():
    s = _summary(exchange={"exchange": "halo", "comm_reduction": 0.0}, data={"split_sizes": {"train": 3}})
    assert isinstance(s, Mapping) and not isinstance(s, dict)
    assert s["losses"] == [1.0, 0.5] and s["exchange"] == "halo" and s["split_sizes"] == {"train": 3}
    assert s.get("staleness") is None and "staleness" not in s and "comm_reduction" in s
    keys = list(s)
    assert keys[:3] == ["program", "world_size", "epochs"] and keys[-3:] == ["exchange", "comm_reduction",
                                                                            "split_sizes"]
    assert len(s) == len(keys) == len(set(keys))
    assert "partition" not in s and "peak_rss_mb" not in s   # fields left None are no keys
    assert dict(s) == s.to_dict() and s == s.to_dict()
    with pytest.raises(TypeError):
        s["losses"] = []                                   # noqa: no item assignment
    with pytest.raises(AttributeError):
        s.losses = []                                      # frozen fields
    with pytest.raises(TypeError):
        s.fragment("exchange")["exchange"] = "block_row"   # fragments are read-only views
    assert s.fragment("exchange") == {"exchange": "halo", "comm_reduction": 0.0}
    assert list(s.fragments) == ["exchange", "data"] and s.owner("split_sizes") == "data" and s.owner("losses") is None
    with pytest.raises(KeyError):
        s.fragment("staleness")


def test_to_dict_is_json_safe_and_round_trips():
    import numpy as np

    s = _summary(sample={"fanouts": (5, 5), "rate": np.float64(0.5), "counts": np.array([1, 2])})
    d = s.to_dict()
    assert d["fanouts"] == [5, 5] and type(d["rate"]) is float and d["counts"] == [1, 2]
    assert json.loads(json.dumps(d)) == {k: v for k, v in d.items() if k != "accuracy"} | {
        "accuracy": {"train": 0.5, "val": 0.25, "test": pytest.approx(float("nan"), nan_ok=True)}}
    d["losses"].append(9.0)                               # a copy: the summary keeps its own
    assert s["losses"] == [1.0, 0.5]


def test_pickles_and_copies():
    s = _summary(exchange={"exchange": "halo"})
    for other in (pickle.loads(pickle.dumps(s)), copy.deepcopy(s), copy.copy(s)):
        assert other.to_dict().keys() == s.to_dict().keys() and other["exchange"] == "halo"
        assert list(other.fragments) == ["exchange"]


def test_a_key_contributed_twice_is_an_error():
    with pytest.raises(FragmentCollision, match="'losses' of fragment 'exchange' is already the summary's"):
        _summary(exchange={"losses": [0.0]})
    with pytest.raises(FragmentCollision, match="'max_age' of fragment 'staleness'.*fragment 'exchange'"):
        _summary(exchange={"max_age": 1}, staleness={"max_age": 2})
    s = _summary(exchange={"max_age": 1})
    with pytest.raises(FragmentCollision, match="fragment 'exchange' contributed twice"):
        s.with_fragments({"exchange": {"other": 1}})
    with pytest.raises(FragmentCollision):
        s.with_fragments({"run": {"world_size": 2}})
    assert s.with_fragments({"run": {"runner": "local"}})["runner"] == "local" and "runner" not in s
    with pytest.raises(FragmentCollision):
        merge_fragments({"sync": {"num_syncs": 1}}, {"sync": {"num_syncs": 1}})


def test_repr_is_short_and_html_is_a_table():
    s = _summary(exchange={"exchange": "halo", "predicted_bytes_by_epoch": [64, 64]}, staleness={"max_age": 1})
    text = repr(s)
    assert text == ("RunSummary(program='full_graph', world_size=2, epochs=2, loss=0.5, train_acc=0.5, val_acc=0.25, "
                    "test_acc=nan, bytes_per_epoch=64, fragments=[exchange, staleness])")
    page = s._repr_html_()
    assert page.startswith("<table") and page.endswith("</table>")
    assert "[staleness]" in page and "max_age=1" in page and "predicted_bytes_by_epoch=list of 2" in page
    assert "&#x27;halo&#x27;" in page                    # escaped


@pytest.fixture(scope="module")
def graph():
    from workbench.testing import tiny_graph

    return tiny_graph(num_nodes=60, seed=0)


def _run(graph, exchange, method="halo"):
    part = torch.arange(graph.num_nodes) % 2
    cfg = RunConfig.compose(graph="tiny", epochs=3, model={"hidden": 8}, exchange={"method": method, **exchange})
    return run_program(cfg.build(graph=graph, node_part=part), 2)


@pytest.mark.parametrize("method", ["halo", "block_row"])
def test_staleness_keys_only_with_a_staleness_policy(graph, method):
    (exact, ranks, _), (stale, stale_ranks, _) = _run(graph, {}, method), _run(
        graph, {"staleness": "epoch-fixed", "epsilon": 1}, method)
    assert not STALENESS_KEYS & set(exact) and "staleness" not in exact.fragments
    assert all("staleness" not in r["fragments"] for r in ranks)
    assert exact["predicted_bytes_by_epoch"] == exact["bytes_by_epoch"] and exact["comm_reduction"] == 0.0
    assert STALENESS_KEYS <= set(stale) and set(stale.fragment("staleness")) == STALENESS_KEYS
    assert stale["staleness"] == "epoch-fixed" and stale["broadcasts_skipped"] > 0 and stale["max_age"] == 1
    assert all("staleness" in r["fragments"] for r in stale_ranks)
    assert set(exact) == set(stale) - STALENESS_KEYS
    assert json.loads(json.dumps(stale.to_dict()))["broadcast_skipped"] == stale["broadcast_skipped"]


def test_pinned_input_alone_is_a_policy_without_a_bound(graph):
    """``pin_static_input`` with staleness ``none`` skips rounds (layer 0's after the first epoch): its rounds,
    ages and cache are reported, and no ``epsilon`` (no bound is in force)."""
    (pinned, _, _) = _run(graph, {"pin_static_input": True})
    assert pinned["staleness"] == "none" and "epsilon" not in pinned
    assert pinned["broadcasts_skipped"] > 0 and pinned["cache_bytes"] > 0


def test_every_figure_belongs_to_a_field_or_one_fragment(graph):
    (summary, _, _) = _run(graph, {})
    fields = [k for k in summary if summary.owner(k) is None]
    assert {"losses", "bytes_by_epoch", "stages", "peak_rss_mb", "time_breakdown"} <= set(fields)
    assert summary.owner("comm_reduction") == "exchange" and summary.owner("split_sizes") == "data"
    assert summary.fragment("exchange")["exchange"] == "halo"
