"""A discrete-event account of pipelined full-graph iterations (PSC-GCN digest §8): simulated time per
iteration for synchronous (tau = 0), PipeGCN-like (tau = 1) and PSC (tau >= 1, sampled) runs.

Model (one serial link per worker, nothing else shared):

* every iteration, forward layer ``l`` first *issues* the fetch of the boundary rows the draw ``t + tau``
  needs (``fetch_bytes[l]``, on the worker's link), then computes; it may start computing only when the
  fetch issued ``tau`` iterations earlier for the same layer has finished (tau = 0: the one just issued,
  i.e. synchronous). Before ``t = tau`` there is nothing to wait for (warm-up: zeros);
* backward layer ``l >= 1`` computes, issues the send of its boundary gradients (``grad_bytes[l]``) and
  waits for the gradients sent ``tau`` iterations earlier;
* the weight-gradient all-reduce (``allreduce_bytes``) goes through the link last and synchronises the
  workers: the next iteration starts when the slowest worker's all-reduce is done.

A transfer issued at time ``x`` starts at ``max(x, link_free)`` and takes ``latency_s + bytes / bandwidth``
(FIFO on the link). With one link per worker the steady state tends to ``max(compute, comm)`` for every
tau >= 1 (the digest's caveat): only ratios between configurations are meaningful.

Example:
    >>> c = IterationCost(fwd_s=[1.0, 1.0], bwd_s=[2.0, 2.0], fetch_bytes=[30, 30], grad_bytes=[0, 30],
    ...                   allreduce_bytes=0)
    >>> simulate_pipeline([[c] * 4], tau=0, bandwidth_Bps=10.0)     # sync: 3 + 3 + 3 s of waiting per iteration
    [15.0, 15.0, 15.0, 15.0]
    >>> simulate_pipeline([[c] * 4], tau=1, bandwidth_Bps=10.0)[-1]  # comm (9 s) behind compute (6 s)
    9.0
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

__all__ = ["IterationCost", "simulate_pipeline", "time_to_accuracy"]


@dataclasses.dataclass
class IterationCost:
    """What one worker does in one iteration: compute seconds and bytes per layer (input layer first)."""

    fwd_s: list
    """Forward compute seconds of each layer."""
    bwd_s: list
    """Backward compute seconds of each layer."""
    fetch_bytes: list
    """Bytes fetched for each layer's boundary rows (issued this iteration, used tau later)."""
    grad_bytes: list
    """Bytes of boundary gradients sent by each layer's backward (layer 0: none)."""
    allreduce_bytes: float = 0.0
    """Bytes the worker moves in the weight-gradient all-reduce."""


def simulate_pipeline(costs: Sequence[Sequence[IterationCost]], tau: int, bandwidth_Bps: float,
                      latency_s: float = 0.0, record: Optional[dict] = None) -> list[float]:
    """Simulated seconds of every iteration (barrier to barrier). ``costs[worker][iteration]``.

    ``record`` (a dict), when given, receives ``blocked_s``: per iteration, the most seconds any worker waited
    for a fetch or gradients issued ``tau`` iterations earlier (the fetches that blocked compute), and
    ``compute_s``: per iteration, the most compute seconds of a worker."""
    num_workers, num_iter = len(costs), len(costs[0]) if costs else 0
    link_free = [0.0] * num_workers
    done_f: list[dict] = [dict() for _ in range(num_workers)]
    done_b: list[dict] = [dict() for _ in range(num_workers)]
    start, out = 0.0, []
    blocked_all, compute_all = [], []

    def send(n: int, at: float, nbytes: float) -> float:
        if nbytes <= 0:
            return at
        s = max(at, link_free[n])
        link_free[n] = s + latency_s + nbytes / bandwidth_Bps
        return link_free[n]

    for t in range(num_iter):
        ends, blocked, compute = [], [], []
        for n in range(num_workers):
            c = costs[n][t]
            clock = start
            waited = 0.0
            layers = len(c.fwd_s)
            for layer in range(layers):
                done_f[n][(t, layer)] = send(n, clock, c.fetch_bytes[layer])
                need = done_f[n].pop((t - tau, layer), clock) if t >= tau else clock
                waited += max(need - clock, 0.0)
                clock = max(clock, need) + c.fwd_s[layer]
            for layer in reversed(range(layers)):
                clock += c.bwd_s[layer]
                if layer > 0:
                    done_b[n][(t, layer)] = send(n, clock, c.grad_bytes[layer])
                    need = done_b[n].pop((t - tau, layer), clock) if t >= tau else clock
                    waited += max(need - clock, 0.0)
                    clock = max(clock, need)
            ends.append(send(n, clock, c.allreduce_bytes))
            blocked.append(waited)
            compute.append(sum(c.fwd_s) + sum(c.bwd_s))
        end = max(ends)
        out.append(end - start)
        blocked_all.append(max(blocked))
        compute_all.append(max(compute))
        start = end
    if record is not None:
        record.update(blocked_s=blocked_all, compute_s=compute_all)
    return out


def time_to_accuracy(iteration_s: Sequence[float], accuracy: Sequence[Optional[float]],
                     target: float) -> Optional[float]:
    """Simulated seconds until ``accuracy`` first reaches ``target`` (None if never).

    Example:
        >>> time_to_accuracy([1.0, 1.0, 1.0], [0.2, 0.7, 0.9], 0.7)
        2.0
    """
    total = 0.0
    for s, a in zip(iteration_s, accuracy):
        total += s
        if a is not None and a >= target:
            return total
    return None
