"""Measures of a whole run, from its summary: the share of communication and the time to a target accuracy.

Added to every run's summary by :func:`workbench.runtime.launch.launch` (the ``train.target_accuracy`` setting
asks for the time to accuracy).
"""

from __future__ import annotations

from typing import Any

__all__ = ["run_measures"]


def run_measures(summary: dict, target_accuracy: Any = None) -> dict:
    """What a run cost, from its summary: ``comm_share`` (communication time / epoch time, summed over epochs; the
    slowest rank's per epoch, as the summary keeps them), ``modelled_comm_share`` where the run had a network model
    (modelled communication over measured compute plus modelled communication), and, for a ``target_accuracy``,
    ``time_to_accuracy_s`` / ``time_to_accuracy_epoch``: the training wall time (the epochs' times, evaluation
    included) until the first epoch whose validation accuracy reaches it (None when none does). Epoch time
    misleads when one method needs more epochs (Bajaj et al., PVLDB 18(4), 2025); time to accuracy does not.

    Example:
        >>> s = {"epoch_times": [1.0, 1.0, 2.0], "comm_s": [0.5, 0.25, 0.25], "compute_s": [0.5, 0.75, 1.75],
        ...      "accuracy_by_epoch": {"val": [0.5, 0.7, 0.9]}}
        >>> run_measures(s, 0.7)
        {'comm_share': 0.25, 'time_to_accuracy_s': 2.0, 'time_to_accuracy_epoch': 1, 'target_accuracy': 0.7}
        >>> run_measures(s, 0.95)["time_to_accuracy_s"] is None
        True
    """
    out: dict = {}
    times = [float(t) for t in summary.get("epoch_times") or []]
    total = sum(times)
    comm = summary.get("comm_s")
    if comm is not None and total > 0:
        out["comm_share"] = sum(float(c) for c in comm) / total
    modelled, compute = summary.get("modelled_comm_s"), summary.get("compute_s")
    if modelled and compute:
        denom = sum(float(c) for c in compute) + sum(float(m) for m in modelled)
        out["modelled_comm_share"] = sum(float(m) for m in modelled) / denom if denom > 0 else 0.0
    if target_accuracy is not None:
        val = (summary.get("accuracy_by_epoch") or {}).get("val") or []
        reached = next((e for e, acc in enumerate(val) if acc is not None and acc == acc and acc >= target_accuracy),
                       None)
        out.update(time_to_accuracy_s=None if reached is None else sum(times[:reached + 1]),
                   time_to_accuracy_epoch=reached, target_accuracy=float(target_accuracy))
    return out
