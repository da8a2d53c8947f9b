"""SANCUS skip-broadcast: a communicator that wraps a communicator and may skip broadcast rounds
(and the pieces of a point-to-point ``all_to_all`` exchange, for halo staleness).

A staleness-aware exchange is a communicator wrapping a communicator (house rule: caches and
communication policies wrap what they replace). Training code calls
``comm.broadcast(buf, src=j, kind="bcast_fwd", layer=l)`` exactly as in the CAGNET baseline; with this
wrapper in between, a round whose root is STALE is *skipped*: nothing moves, receivers get their cached
historical copy of the root's block (:class:`HistoricalCache`, one copy per (layer, root) with the
epoch it was computed in as version stamp) and the root keeps using its own fresh block.

Flags are agreed before each layer's broadcast rounds with :meth:`SkipBroadcastCommunicator.agree`:
one all-gather of ``world_size`` booleans per rank (kind ``control``), ACTIVE where any rank asks for
it, and ACTIVE wherever no copy was ever broadcast. Every rank therefore executes the same rounds: no
deadlock. Only the kinds in ``skip_kinds`` (default ``bcast_fwd``) may be skipped; gradient broadcasts
(``bcast_bwd``) and every other verb pass through unchanged and counted.

``all_to_all`` of a skippable kind (``halo_fwd`` for halo exchange with staleness) follows the same
rule per *sender*: a STALE sender sends nothing (its pieces are emptied, so nothing is counted) and
every receiver reuses the piece that sender last sent it (decisions H1, H2 in
:mod:`workbench.train.staleness`).

Inside :meth:`SkipBroadcastCommunicator.fresh` (an evaluation pass) every round is executed and nothing
is cached: the cache, the versions and the sent blocks stay as training left them.

Example:
    >>> import threading, torch
    >>> from workbench.communicate.inprocess import InProcessGroup
    >>> group, got = InProcessGroup(2), {}
    >>> def body(rank):
    ...     comm = SkipBroadcastCommunicator(group.communicator(rank))
    ...     for epoch in range(2):
    ...         comm.set_epoch(epoch)
    ...         comm.agree(0, torch.tensor([epoch == 0, False]))   # rank 0's block: fresh only at epoch 0
    ...         buf = torch.full((2,), epoch + 1.0) if rank == 0 else torch.zeros(2)
    ...         got[(rank, epoch)] = comm.broadcast(buf, src=0, kind="bcast_fwd", layer=0).tolist()
    >>> ts = [threading.Thread(target=body, args=(r,)) for r in range(2)]
    >>> for t in ts: t.start()
    >>> for t in ts: t.join()
    >>> got[(1, 0)], got[(1, 1)]   # epoch 1 was skipped: rank 1 reuses the cached epoch-0 block
    ([1.0, 1.0], [1.0, 1.0])
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Optional, Sequence

import torch

from workbench.communicate.base import Communicator, Work

__all__ = ["SkipBroadcastCommunicator", "HistoricalCache", "CachedBlock"]


@dataclasses.dataclass
class CachedBlock:
    """A historical block: the rows and the epoch they were computed (broadcast) in."""

    rows: torch.Tensor
    version: int


class HistoricalCache:
    """Freshest received copy per (layer, root rank), with version stamps."""

    def __init__(self) -> None:
        self.blocks: dict[tuple[int, int], CachedBlock] = {}

    def put(self, layer: int, root: int, rows: torch.Tensor, version: int) -> None:
        self.blocks[(layer, root)] = CachedBlock(rows.detach().clone(), version)

    def get(self, layer: int, root: int) -> Optional[CachedBlock]:
        return self.blocks.get((layer, root))

    def nbytes(self) -> int:
        return sum(b.rows.numel() * b.rows.element_size() for b in self.blocks.values())


class SkipBroadcastCommunicator(Communicator):
    """Wraps ``inner``; skips broadcast rounds of STALE roots and serves the cached copy instead.

    Args:
        inner: the communicator that really moves data (its counter is shared, so skipped rounds
            simply never appear in the traffic).
        skip_kinds: broadcast kinds that may be skipped (gradients never are).

    Attributes:
        cache: the historical-embedding cache of other ranks' blocks.
        versions: ``versions[(layer, root)]`` = epoch of the last executed round of that root, known to
            every rank (all ranks receive every executed round), including the root itself.
        sent: ``sent[layer]`` = this rank's block as last broadcast (what the others hold).
        active: the agreed flags of the current epoch, ``active[layer][root]``.
        skipped: ``(epoch, layer, root)`` of every skipped round.
    """

    backend = "skip-broadcast"

    def __init__(self, inner: Communicator, *, skip_kinds: Sequence[str] = ("bcast_fwd",)):
        super().__init__(inner.rank, inner.world_size, inner.counter)
        self.inner = inner
        self.skip_kinds = tuple(skip_kinds)
        self.cache = HistoricalCache()
        self.versions: dict[tuple[int, int], int] = {}
        self.sent: dict[int, torch.Tensor] = {}
        self.active: dict[int, list[bool]] = {}
        self.skipped: list[tuple[int, int, int]] = []
        self._fresh = False

    @contextlib.contextmanager
    def fresh(self):
        """Inside: every round executed, nothing skipped and nothing cached (an evaluation pass; the cache,
        versions and sent blocks stay as training left them)."""
        old, self._fresh = self._fresh, True
        try:
            yield self
        finally:
            self._fresh = old

    def set_epoch(self, epoch: int) -> None:
        super().set_epoch(epoch)
        self.inner.set_epoch(epoch)
        self.active = {}

    # ------------------------------------------------------------------------------------------------ flags
    def agree(self, layer: int, proposals: torch.Tensor) -> list[bool]:
        """Agree the ACTIVE roots of ``layer`` for this epoch (one tiny all-gather, kind ``control``).

        Args:
            layer: the layer whose input blocks are about to be broadcast.
            proposals: ``(world_size,)`` bools: which roots this rank wants ACTIVE.

        Returns:
            The agreed flags (``True`` = ACTIVE), identical on every rank.
        """
        device = getattr(self.inner, "device", None) or torch.device("cpu")   # NCCL gathers device tensors
        mine = torch.as_tensor(proposals, dtype=torch.uint8).reshape(self.world_size).to(device)
        if self.world_size > 1:
            votes = torch.stack(self.all_gather(mine, kind="control", layer=layer)).amax(dim=0).cpu()
        else:
            votes = mine
        flags = [bool(votes[j]) or (layer, j) not in self.versions for j in range(self.world_size)]
        self.active[layer] = flags
        return flags

    def age(self, layer: int, root: int) -> Optional[int]:
        """Epochs since ``root``'s block of ``layer`` was last broadcast (None if never)."""
        v = self.versions.get((layer, root))
        return None if v is None else self.epoch - v

    # ------------------------------------------------------------------------------------------------ verbs
    def broadcast(self, tensor: torch.Tensor, src: int, *, kind: str, layer: int = -1) -> torch.Tensor:
        if self._fresh:
            return super().broadcast(tensor, src, kind=kind, layer=layer)
        flags = self.active.get(layer)
        if kind in self.skip_kinds and flags is not None and not flags[src]:
            self.skipped.append((self.epoch, layer, src))
            if self.rank == src:
                return tensor
            cached = self.cache.get(layer, src)
            assert cached is not None, "a root is only skipped after it was broadcast once"
            tensor.copy_(cached.rows)
            return tensor
        out = super().broadcast(tensor, src, kind=kind, layer=layer)
        if kind in self.skip_kinds:
            self.versions[(layer, src)] = self.epoch
            if self.rank == src:
                self.sent[layer] = tensor.detach().clone()
            else:
                self.cache.put(layer, src, out, self.epoch)
        return out

    def all_to_all(self, tensors: Sequence[torch.Tensor], *, kind: str, layer: int = -1) -> list[torch.Tensor]:
        flags = self.active.get(layer)
        if kind not in self.skip_kinds or flags is None or self._fresh:
            return super().all_to_all(tensors, kind=kind, layer=layer)
        me = self.rank
        sends = [t if flags[me] else t[:0] for t in tensors]   # a STALE sender sends nothing
        out = list(super().all_to_all(sends, kind=kind, layer=layer))
        if flags[me]:
            self.versions[(layer, me)] = self.epoch
        for j in range(self.world_size):
            if j == me:
                continue
            if flags[j]:
                self.versions[(layer, j)] = self.epoch
                self.cache.put(layer, j, out[j], self.epoch)
            else:
                self.skipped.append((self.epoch, layer, j))
                cached = self.cache.get(layer, j)
                assert cached is not None, "a sender is only skipped after it sent once"
                out[j] = cached.rows.clone()
        return out

    # ------------------------------------------------------------------------------------------------ backend
    def _send(self, tensor: torch.Tensor, dst: int) -> None:
        self.inner._send(tensor, dst)

    def _recv(self, tensor: torch.Tensor, src: int) -> torch.Tensor:
        return self.inner._recv(tensor, src)

    def _isend(self, tensor: torch.Tensor, dst: int) -> Work:
        return self.inner._isend(tensor, dst)

    def _irecv(self, tensor: torch.Tensor, src: int) -> Work:
        return self.inner._irecv(tensor, src)

    def _broadcast(self, tensor: torch.Tensor, src: int) -> torch.Tensor:
        return self.inner._broadcast(tensor, src)

    def _all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        return self.inner._all_reduce(tensor)

    def _all_gather(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        return self.inner._all_gather(tensor)

    def _all_to_all(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        return self.inner._all_to_all(tensors)

    def _barrier(self) -> None:
        self.inner._barrier()

    def _side(self, name: str, counter) -> Communicator:
        """The inner communicator's side ``name``, plain: a side thread's traffic (sampling) is never skipped."""
        return self.inner._side(name, counter)

    def close(self) -> None:
        self._close_sides()
        self.inner.close()
