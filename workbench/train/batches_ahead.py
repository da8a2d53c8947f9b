"""Overlap for the mini-batch trainer: the batches of a fixed plan prepared ahead on one background thread
(``train.batches_ahead``; :class:`~workbench.train.minibatch.MiniBatchSteps`, whose module docstring says why it
is exact): :class:`BatchesAhead`, the thread, and :class:`SampledAhead`, what it prepares for the trainer.

On several ranks owner-routed sampling and KVStore pulls are collectives, so the thread runs them on the rank's
side communicator ``sample`` (:meth:`~workbench.communicate.base.Communicator.side`: a ``new_group`` and a socket
mesh of its own on ``torch.distributed``, a second group for thread ranks), never on the communicator whose
gradient and metrics all-reduces the loop's thread runs meanwhile. Every rank's plan is the same sequence of
batches (each trainer takes the same number of steps per split, wrapping its own batches:
:meth:`~workbench.sample.split.SeedSplit.num_steps`), so every rank's thread makes the same collective calls in the
same order on the side communicator; each tags its traffic with the batch's epoch and phase (``eval_`` for
evaluation batches), in the rank's one traffic counter, so bytes by kind and epoch are the inline run's.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from collections import defaultdict
from typing import Any, Callable, Hashable, Iterable, Optional

from workbench._validation import ErrorCollector

__all__ = ["BatchesAhead", "SampledAhead", "check_batches_ahead"]


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

    With ``collective`` (the items are made by collectives with the other ranks' threads, which run the same plan),
    :meth:`close` still prepares the items up to ``depth`` past the last one taken: the other ranks' threads may be
    inside those items' collectives, and every rank that closes after the same number of items ends at the same
    item (a stopped run stops all ranks after the same epoch).
    """

    def __init__(self, plan: Iterable[tuple[Hashable, tuple]], produce: Callable[..., Any], depth: int,
                 name: str = "batches-ahead", collective: bool = False):
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        self._plan, self._produce = iter(plan), produce
        self._depth, self._collective = depth, collective
        self._slots = threading.Semaphore(depth)
        self._ready: queue.SimpleQueue = queue.SimpleQueue()
        self._closed = False
        self._taken, self._stop_at = 0, 0
        self._failed: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def _work(self) -> None:
        try:
            for i, (key, args) in enumerate(self._plan):
                self._slots.acquire()
                if self._closed and (not self._collective or i >= self._stop_at):
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
        self._taken += 1
        self._slots.release()
        return item

    def close(self, timeout: float = 60.0) -> None:
        """Stop the thread after the item it is preparing (if any; ``collective``: after the items up to ``depth``
        past the last one taken); idempotent."""
        if not self._closed:
            self._stop_at = self._taken + self._depth
        self._closed = True
        self._slots.release()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)


_END = object()
"""The key a :class:`BatchesAhead` puts after the plan's last item."""


class SampledAhead:
    """The mini-batch trainer's batches prepared ahead (:class:`BatchesAhead` over its plan): each batch sampled
    (owner-routed), its input rows pulled (through the cache for training batches, the plain store for evaluation
    ones) on the side communicator ``steps.sample_comm``, and its block aggregators built.

    The thread tags the side communicator's traffic with each batch's epoch and phase, adds its seconds to the
    loop's timer as overlapped (``sample``: sampling and the aggregators; ``fetch``: the pull), and keeps the cache's
    counts per epoch of the pulls (:meth:`cache_counts`), since it pulls the next epoch's batches before this
    one's statistics are read.
    """

    def __init__(self, steps: Any, depth: int):
        self.steps, self.comm = steps, steps.sample_comm
        self._cache_counts: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.worker = BatchesAhead(self.plan(), self.prepare, depth, name=f"rank{steps.ctx.rank}-batches-ahead",
                                   collective=steps.ctx.world_size > 1)

    def plan(self):
        """``(key, args of prepare)`` of every batch of the run, in the order the loop takes them: each epoch's
        training steps, its validation batches, after the last epoch the test batches."""
        steps, shard = self.steps, self.steps.shard
        last = steps.config.epochs - 1
        for epoch in range(steps.config.epochs):
            for step, seeds in enumerate(steps._split_batches(shard.train_split, epoch)[0]):
                yield (epoch, "train", step), (seeds, epoch, step, True)
            for split in (shard.val_split,) + ((shard.test_split,) if epoch == last else ()):
                tag = steps._eval_tag(split)
                for i, seeds in enumerate(steps._split_batches(split, epoch)[0]):
                    yield (epoch, tag, i), (seeds, epoch, steps.eval_step, False)

    def prepare(self, seeds: Any, epoch: int, step: int, training: bool) -> tuple:
        """``(minibatch, input rows, aggregators)`` of one batch (on the thread)."""
        steps, comm = self.steps, self.comm
        features = steps.features if training else steps.store
        comm.set_epoch(epoch)
        t0 = time.perf_counter()
        with comm.phase("" if training else "eval_"):
            mb = steps.sampler.sample(seeds, steps.source, epoch=epoch, step=step)
            t1 = time.perf_counter()
            x = steps.pull_rows(features, mb.input_gid)
        t2 = time.perf_counter()
        aggregators = steps.aggregators(mb)
        if training and steps.cache is not None:
            counts = self._cache_counts[epoch]
            for k, v in steps.cache.take_counts().items():
                counts[k] += v
        timer = steps.timer
        timer.overlapped("sample", (t1 - t0) + (time.perf_counter() - t2))
        timer.overlapped("fetch", t2 - t1)
        return mb, x, aggregators

    def get(self, key: Hashable) -> Any:
        return self.worker.get(key)

    def cache_counts(self, epoch: int) -> dict[str, int]:
        """The cache's counts of ``epoch``'s training pulls (all made once its training steps are done)."""
        return self._cache_counts.pop(epoch, defaultdict(int))   # no pull that epoch: every count 0

    def close(self) -> None:
        """Stop the thread. On a failing rank (an exception other than a stop on its way) the side communicator is
        aborted first (thread ranks) or closed, so no thread waits on its peers for the transport's timeout."""
        exc = sys.exc_info()[1]
        from workbench.runtime.program import StopRequested

        if exc is not None and not isinstance(exc, StopRequested) and self.steps.ctx.world_size > 1:
            group = getattr(self.comm, "group", None)
            if hasattr(group, "abort"):
                group.abort(exc)
            else:
                self.comm.close()
            self.worker.close(timeout=5.0)
        else:
            self.worker.close()


def check_batches_ahead(errs: ErrorCollector, cfg: Any, world_size: int, backend: Optional[str] = None) -> None:
    """Refuse ``train.batches_ahead`` where the batches-ahead thread cannot run beside the loop: on several ranks
    over NCCL (``backend``, known on the ranks), whose kernels of two communicators issued from two threads in a
    different order on each rank may wait for each other on the device (gloo and thread ranks run the collectives of
    different groups independently). Where it is read at all is declared (``TrainLoopConfig.field_requires``: batches
    the trainer samples itself, not a schedule's workers) and checked by ``workbench.composition``."""
    ahead = getattr(cfg.train, "batches_ahead", 0)
    errs.check(not ahead or world_size == 1 or backend != "nccl", "train.batches_ahead",
               f"0 on {world_size} NCCL ranks: batches are prepared ahead over gloo or thread ranks (the sampling "
               "thread's collectives and the loop's would be two NCCL communicators used from two threads)", ahead)
