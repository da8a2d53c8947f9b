"""How one full-graph forward runs: the ``step`` stage, one registered method per way to run it.

The full-graph trainer (:class:`~workbench.train.full_graph.FullGraphTrainer`) gives its
:class:`~workbench.train.full_graph_loop.FullGraphSteps` the component this stage attaches on a rank
(:meth:`Step.attach`): its ``logits(model, x, exchange, node_ids)`` is the step's forward.

The methods (:data:`STEPS`):

==============  ==========================================================  ==========================================
method          how                                                         needs
==============  ==========================================================  ==========================================
``whole_part``  every layer's aggregation on the whole part through the     nothing (``memory_budget`` set:
                exchange (the default); ``memory_budget``: the whole       ``whole-part layers``, ``p2p halo
                part's working set must fit in it                           layers``)
``binned``      G3's bins: each layer's halo rows through the ``halo``      ``whole-part layers``: full-graph
                exchange's per-layer plan, then the layer bin by bin        training; ``p2p halo layers``: ``halo``
                (exact; :mod:`workbench.train.bins_program`), bins of at    without staleness
                most ``bin_limit`` vertices and half of ``memory_budget``
==============  ==========================================================  ==========================================

The settings of G3 are the ``binned`` method's (``--set step.method=binned --set step.bin_limit=16``); under a
sampler, or on an exchange other than plain ``halo``, the one composition check refuses it before anything loads.

Example:
    >>> from workbench.compose import RunConfig
    >>> cfg = RunConfig.compose(graph="karate", step={"method": "binned", "bin_limit": 4})
    >>> cfg.method("step"), cfg.step.bin_limit, cfg.step.memory_budget, cfg.step.pipeline
    ('binned', 4, 'auto', 'multi-level')
    >>> RunConfig.compose(graph="karate").method("step")
    'whole_part'
    >>> RunConfig.compose(graph="karate", step={"method": "binned", "memory_budget": None})
    Traceback (most recent call last):
    ...
    workbench._validation.ParamError: The 'bin_limit' parameter of Binned.Config must be a vertex count > 0, or 0 together with memory_budget (bins sized to half the budget). Got 0 instead.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, ClassVar, Optional, Union

from workbench._validation import ErrorCollector
from workbench.constraints import Interval, OneOf, Options
from workbench.stages import Stage, registry
from workbench.train.full_graph_loop import WholePartStep

__all__ = ["STEPS", "PIPELINES", "Step", "WholePart", "Binned", "step_of"]

STEPS = registry("step")
"""The ``step`` registry: how one full-graph forward runs."""

PIPELINES = ("sequential", "inter", "intra", "multi-level")
"""G3 pipeline variants (``step.pipeline``; :mod:`workbench.sim.bins_pipeline`)."""

_G3_NEEDS = frozenset({"whole-part layers", "p2p halo layers"})


class Step(Stage):
    """Base of the ``step`` methods: :meth:`attach` makes the rank's step component (``logits``,
    ``after_backward``, ``result``) from its shard.

    ``bin_limit`` and ``memory_budget`` (:attr:`bin_limit`, :attr:`memory_budget`) are what the trainer plans
    before the ranks start: bins (``bin_limit`` not None) and a budget the parts or bins must fit."""

    kind = "step"

    @property
    def bin_limit(self) -> Optional[int]:
        """Most vertices per bin (0: no vertex cap, bins sized by the budget); ``None``: no bins."""
        return getattr(self.config, "bin_limit", None)

    @property
    def memory_budget(self) -> Any:
        """Device memory in bytes, ``auto`` or ``None`` (unlimited)."""
        return getattr(self.config, "memory_budget", None)

    def planned(self) -> bool:
        """Whether the trainer plans bins or checks a budget before the ranks start (G3's planning path)."""
        return self.bin_limit is not None or self.memory_budget is not None

    def attach(self, ctx: Any, shard: Any) -> Any:
        """The rank's step component (what :class:`~workbench.train.full_graph_loop.FullGraphSteps` calls)."""
        raise NotImplementedError


@STEPS.register
class WholePart(Step):
    """Every layer's aggregation on the whole part through the exchange (the default)."""

    name = "whole_part"

    @dataclasses.dataclass(kw_only=True)
    class Config(Step.Config):
        field_requires: ClassVar[dict[str, frozenset[str]]] = {"memory_budget": _G3_NEEDS}
        """``memory_budget`` is checked against the halo exchange's parts (``workbench.composition``)."""

        memory_budget: Annotated[Optional[int], OneOf(None, Interval(1, None, unit="bytes"))] = None
        """Device memory in bytes: the whole part's working set must fit in it (refused before any worker starts;
        ``step.method=binned`` packs bins into half of it instead); None = unlimited."""

    def attach(self, ctx: Any, shard: Any) -> Any:
        return WholePartStep()


@STEPS.register
class Binned(Step):
    """G3's bins: each layer's halo rows through the ``halo`` exchange's per-layer plan, then the layer bin by bin
    (exact for any bin size), each bin's compute and packing timed for the simulated pipelines
    (:class:`~workbench.train.bins_program.BinnedStep`); the summary gains ``g3``."""

    name = "binned"
    requires = _G3_NEEDS

    @dataclasses.dataclass(kw_only=True)
    class Config(Step.Config):
        bin_limit: Annotated[int, Interval(0, None)] = 0
        """G3 bins: 0 packs each layer's vertices into bins of at most half of memory_budget; k > 0 also caps a
        bin at k vertices (exact for any value)."""
        pipeline: Annotated[str, Options(*PIPELINES)] = "multi-level"
        """G3 pipeline variant of the headline simulated epoch time: ``sequential``, ``inter``, ``intra`` or
        ``multi-level`` (every variant is reported)."""
        memory_budget: Annotated[Optional[Union[int, str]],
                                 OneOf(None, "auto", Interval(1, None, unit="bytes"))] = "auto"
        """Device memory in bytes: a bin holds at most half of it; ``auto`` (the default) = sized from the graph
        (half the largest part's working set, at least 4 x the largest vertex with its neighbours; the summary
        says which); None = unlimited (then bin_limit > 0 caps the bins)."""

        def _validate(self, errs: ErrorCollector) -> None:
            errs.check(not (self.bin_limit == 0 and self.memory_budget is None), "bin_limit",
                       "a vertex count > 0, or 0 together with memory_budget (bins sized to half the budget)",
                       self.bin_limit)

    def attach(self, ctx: Any, shard: Any) -> Any:
        from workbench.train.bins_program import BinnedStep   # compiles numba kernels: binned runs only

        if getattr(shard, "bins", None) is None:
            raise AssertionError(f"rank {ctx.rank}: step.method=binned without a bin schedule in its shard")
        return BinnedStep(shard.bins, ctx.kernel)


def step_of(config: Any) -> Step:
    """The ``step`` stage of a run config (``whole_part`` for a config without that section)."""
    if getattr(config, "step", None) is None:
        return WholePart()
    return STEPS.build(config.method("step"), config.step)
