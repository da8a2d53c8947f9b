"""Every run reports its communication share, and its time to a target accuracy when ``train.target_accuracy`` asks."""

from __future__ import annotations

import pytest

from workbench._validation import ParamError
from workbench.runtime import launch


def test_time_to_accuracy_and_comm_share_in_every_summary():
    from recipes import catgnn, full_graph

    s = launch(full_graph.recipe(epochs=12).with_strings({"train.target_accuracy": "0.4"}), runner="local",
               workers=2).wait()
    val = s["accuracy_by_epoch"]["val"]
    first = next(e for e, a in enumerate(val) if a >= 0.4)
    assert s["time_to_accuracy_epoch"] == first and s["target_accuracy"] == 0.4
    assert s["time_to_accuracy_s"] == pytest.approx(sum(s["epoch_times"][:first + 1]))
    assert 0 < s["comm_share"] < 1 and s["comm_share"] == pytest.approx(sum(s["comm_s"]) / sum(s["epoch_times"]))
    never = launch(catgnn.recipe(epochs=2, num_parts=2).with_strings({"train.target_accuracy": "0.99"}),
                   runner="local", workers=2).wait()
    assert never["time_to_accuracy_s"] is None and never["time_to_accuracy_epoch"] is None
    assert "time_to_accuracy_s" not in launch(full_graph.recipe(epochs=1), runner="single").wait()
    with pytest.raises(ParamError, match="'target_accuracy' parameter"):
        full_graph.recipe().with_strings({"train.target_accuracy": "1.5"})
