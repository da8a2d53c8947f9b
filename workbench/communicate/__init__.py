"""The communicate stage: one counted SPMD interface, two backends, and a network cost model.

* :class:`~workbench.communicate.base.Communicator`: the verbs (send/recv/isend/irecv, broadcast,
  all_reduce, all_gather, all_to_all, barrier), each counting bytes per (epoch, src, dst, kind, layer).
* :class:`~workbench.communicate.inprocess.InProcessGroup`: thread ranks over in-memory channels.
* :class:`~workbench.communicate.torchdist.TorchDistCommunicator`: ``torch.distributed`` (gloo/NCCL).
* :func:`~workbench.communicate.netmodel.modelled_seconds`: counted traffic -> modelled seconds per epoch
  (the sender bound; :func:`~workbench.communicate.netmodel.transport_seconds`: the transport model).
* :mod:`~workbench.communicate.netprobe`: ``workbench netprobe``, a calibrated model measured between workers.
"""

from __future__ import annotations

from workbench.communicate.base import Communicator, TrafficCounter, Work, tensor_bytes
from workbench.communicate.inprocess import (CommunicationAborted, CommunicationError, CommunicationTimeout,
                                             InProcessCommunicator, InProcessGroup)
from workbench.communicate.netmodel import (NETWORK_PRESETS, NetworkModel, modelled_seconds, resolve_network,
                                            transport_seconds)

__all__ = ["Communicator", "TrafficCounter", "Work", "tensor_bytes", "InProcessGroup", "InProcessCommunicator",
           "CommunicationError", "CommunicationAborted", "CommunicationTimeout", "NetworkModel", "NETWORK_PRESETS",
           "modelled_seconds", "transport_seconds", "resolve_network"]
