"""Simulators: models that account for time on a simulated clock; they never run training.

* :mod:`~workbench.sim.pipeline_time`: pipelined full-graph iterations (PSC-GCN, PipeGCN) replayed on one serial
  link per worker, from each iteration's measured compute and counted bytes; live, :class:`PipelineSimulator`
  behind the ``PipelineTimeline`` events.
* :mod:`~workbench.sim.bins_pipeline`: G3's pipeline variants (packer, copy engines, compute, network) from the
  binned executor's per-bin costs.
* :mod:`~workbench.sim.simclock`: ByteGNN's coarse and fine schedulers (the real policies, ready queue and DAGs)
  on a discrete-event clock, with no processes.

Training code feeds them measured costs (:mod:`workbench.train.edge_sampled`, :mod:`workbench.train.bins_program`);
they import no trainer. This package imports none of its modules, so importing one loads only what it needs.
"""
