"""The notebooks' figures (widgets.plots): they render with Bokeh, log axes print the measured values, and a
paper's number outside the measured range stays visible."""

from __future__ import annotations

import holoviews as hv
import numpy as np
import pandas as pd
import pytest
from bokeh.models import FixedTicker, LogScale, PrintfTickFormatter

from widgets.plots import (bar_plot, degree_ccdf, line_plot, normalised_vs_parts, split_bars, training_curves,
                           volume_vs_parts)
from workbench.partition.volume import PAPER_TABLE2


@pytest.fixture
def compare_frame():
    rows = []
    for g, scale in (("mesh", 1.0), ("power-law", 3.0)):
        for P in (4, 8, 16):
            for method, f in (("random", 1.0), ("metis", 0.4), ("hypergraph", 0.3)):
                rows.append({"graph": g, "P": P, "method": method, "comm_volume_rows": scale * f * 100 * P,
                             "max_send_volume_rows": scale * f * 40 * P ** 0.5, "total_messages": P * (P - 1) * f,
                             "max_part_messages": (P - 1) * f})
    return pd.DataFrame(rows)


def _figures(obj):
    from bokeh.plotting import figure

    model = hv.render(obj, backend="bokeh")
    return list(model.select({"type": figure}))


def test_line_plot_log_axis_prints_measured_values_and_shows_the_mark():
    df = pd.DataFrame({"P": [4, 8, 16] * 2, "method": ["metis"] * 3 + ["hypergraph"] * 3,
                       "speed-up": [1.1, 1.3, 1.6, 1.2, 1.4, 1.5]})
    fig = hv.render(line_plot(df, "P", "speed-up", by="method", logx=True, marks={"paper: 11.66x": 11.66}))
    assert isinstance(fig.x_scale, LogScale)
    assert isinstance(fig.xaxis[0].ticker, FixedTicker) and list(fig.xaxis[0].ticker.ticks) == [4, 8, 16]
    assert isinstance(fig.xaxis[0].formatter, PrintfTickFormatter)
    assert fig.y_range.end > 11.66 > fig.y_range.start     # the mark is inside the drawn range
    assert fig.x_range.start < 4 and fig.x_range.end > 16  # first and last ticks show
    assert [r.label["value"] for r in fig.legend[0].items] == ["metis", "hypergraph"]


def test_bar_plot_mark_on_categorical_axis():
    df = pd.DataFrame({"variant": ["sequential", "inter", "multi-level"], "speed-up": [1.0, 1.05, 1.3]})
    fig = hv.render(bar_plot(df, "variant", "speed-up", marks={"paper": 11.66}))
    assert list(fig.x_range.factors) == ["sequential", "inter", "multi-level"]   # the text adds no category
    assert fig.y_range.start == 0 and fig.y_range.end > 11.66


def test_volume_and_normalised_figures(compare_frame):
    vol = volume_vs_parts(compare_frame)
    assert len(vol) == 2 and len(vol[0]) == 6                  # a panel per graph; 3 methods x total, max
    norm = normalised_vs_parts(compare_frame, PAPER_TABLE2)
    assert len(norm) == 2
    figs = _figures(norm)
    assert len(figs) == 2 and all(f.x_range.end > 512 for f in figs)    # the paper's P shows on the axis
    stars = [e for e in norm[0] if isinstance(e, hv.Scatter)]
    assert sorted(float(s.data.iloc[0, 1]) for s in stars) == [PAPER_TABLE2["hypergraph"][0], PAPER_TABLE2["metis"][0]]
    # geo-mean over graphs of HP / RP total volume = 0.3 at every P
    geo = [e for e in norm[0] if isinstance(e, hv.Curve) and e.label == "HP geo-mean"][0]
    assert np.allclose(geo.dimension_values(1), 0.3)
    assert len(_figures(vol)) == 2


def test_degree_split_and_training_figures():
    from workbench.data import load_graph

    g = load_graph("sbm:num_nodes=200,num_blocks=4,avg_degree=6,seed=0")
    ccdf = degree_ccdf({"sbm": g})
    curve = [e for e in ccdf if isinstance(e, hv.Curve)][0]
    assert curve.dimension_values(1)[0] == 1.0 and np.all(np.diff(curve.dimension_values(1)) < 0)
    bars = split_bars({"sbm": g})
    assert bars.data["vertices"].sum() == g.num_nodes
    tc = training_curves({"losses": [1.0, 0.7, 0.5], "accuracy_by_epoch": {"train": [0.3, 0.6, 0.8],
                                                                             "val": [0.3, 0.5, 0.6]}})
    for obj in (ccdf, bars, tc):
        assert _figures(obj)
