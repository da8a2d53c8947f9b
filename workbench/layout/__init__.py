"""Where a part's rows live and which rows travel: the layout of a partition that both training and sampling read.

* :mod:`workbench.layout.halo`: the halo plan of owner-compute training on an edge-cut partition (inner and halo
  rows, what each part sends each other part, the predicted bytes) and ``local_index`` (global to local ids).

It imports nothing of ``workbench.train`` or ``workbench.sample``: samplers (their feature sources and epochs) and
exchanges both build on it, so neither imports the other for it.
"""
