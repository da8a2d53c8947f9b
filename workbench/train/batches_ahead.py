"""Overlap for the mini-batch trainer: the batches of a fixed plan prepared ahead on one background thread
(``train.batches_ahead``; :class:`~workbench.train.minibatch.MiniBatchSteps`, whose module docstring says when it is
exact and why it runs on one rank only).
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Hashable, Iterable, Optional

from workbench._validation import ErrorCollector

__all__ = ["BatchesAhead", "check_batches_ahead"]


class BatchesAhead:
    """Prepares the items of a fixed plan in order on one background thread, at most ``depth`` ahead of the
    consumer, which takes them in the same order by key.

    ``plan`` yields ``(key, args)`` in the order the consumer will ask for the keys; the thread calls
    ``produce(*args)`` for each, one at a time, so whatever state ``produce`` touches (a dynamic cache) sees the
    same calls in the same order as a run without the thread. While the consumer works on item ``i``, items
    ``i + 1 .. i + depth`` are being prepared or wait ready. An exception of ``produce`` is raised by the
    :meth:`get` that asks for its item; asking for a key out of the plan's order is an error (a bug, never a
    silent reorder). :meth:`close` stops the thread (a stopped or failed run).

    Example:
        >>> p = BatchesAhead(((i, (i,)) for i in range(5)), lambda i: i * i, depth=2)
        >>> [p.get(i) for i in range(5)]
        [0, 1, 4, 9, 16]
        >>> p.close()
    """

    def __init__(self, plan: Iterable[tuple[Hashable, tuple]], produce: Callable[..., Any], depth: int,
                 name: str = "batches-ahead"):
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        self._plan, self._produce = iter(plan), produce
        self._slots = threading.Semaphore(depth)
        self._ready: queue.SimpleQueue = queue.SimpleQueue()
        self._closed = False
        self._failed: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def _work(self) -> None:
        try:
            for key, args in self._plan:
                self._slots.acquire()
                if self._closed:
                    return
                self._ready.put((key, self._produce(*args), None))
        except BaseException as exc:  # noqa: BLE001 - raised in the consumer's thread by get()
            self._ready.put((None, None, exc))
            return
        self._ready.put((_END, None, None))

    def get(self, key: Hashable) -> Any:
        """The item of ``key`` (waits for the thread when it is not ready yet)."""
        if self._failed is not None:
            raise self._failed
        got, item, exc = self._ready.get()
        if exc is not None:
            self._failed = exc
            raise exc
        if got != key:
            self._failed = RuntimeError(f"BatchesAhead: asked for {key!r}, the plan's next item is "
                                        f"{'its end' if got is _END else repr(got)}")
            raise self._failed
        self._slots.release()
        return item

    def close(self, timeout: float = 60.0) -> None:
        """Stop the thread after the item it is preparing (if any); idempotent."""
        self._closed = True
        self._slots.release()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)


_END = object()
"""The key a :class:`BatchesAhead` puts after the plan's last item."""


def check_batches_ahead(errs: ErrorCollector, cfg: Any, world_size: int) -> None:
    """Refuse ``train.batches_ahead`` on more than one rank, where the batches-ahead thread cannot keep the run exact (see
    the module docstring); where it is read at all is declared (``TrainLoopConfig.field_requires``: batches the
    trainer samples itself, not a schedule's workers) and checked by ``workbench.composition``."""
    ahead = getattr(cfg.train, "batches_ahead", 0)
    errs.check(not ahead or world_size == 1, "train.batches_ahead",
               f"0 on {world_size} ranks: batches are prepared ahead on one rank only (there, sampling and feature "
               "pulls need no collective; on several they are collectives on the rank's communicator, which a "
               "second thread of every rank would enter in a different order than the gradient all-reduce)",
               ahead)
