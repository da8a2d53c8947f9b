from typing import Annotated
import dataclasses, torch
from workbench.constraints import Interval
from workbench.partition.base import PARTITIONERS, Partitioner

@PARTITIONERS.register
class Stripes(Partitioner):
    name = "stripes"                       # --set partition.method=stripes

    @dataclasses.dataclass(kw_only=True)
    class Config(Partitioner.Config):
        width: Annotated[int, Interval(1, None)] = 1
        """Consecutive vertex ids per stripe."""

    def _partition(self, graph, num_parts):   # -> (num_nodes,) part of each vertex
        return (torch.arange(graph.num_nodes) // self.config.width) % num_parts

