"""Typed errors of a distributed run, raised on the client by :meth:`RunHandle.wait`.

Each names the rank, the worker address (``None`` for thread ranks) and the step (the epoch the
rank was in, when known), and carries the remote traceback as text. They pickle, so a Dask worker
can raise them and the client receives the same type.

Example:
    >>> err = RankFailed(rank=1, worker="tcp://127.0.0.1:4242", step=2, message="ValueError: boom")
    >>> print(err)
    rank 1 (worker tcp://127.0.0.1:4242) failed at step 2: ValueError: boom
"""

from __future__ import annotations

from typing import Optional

__all__ = ["RunError", "RankFailed", "WorkerLost", "RendezvousTimeout", "SchedulerLost"]


class RunError(RuntimeError):
    """Base of the run errors.

    Attributes:
        rank: the rank that failed (``None`` when not tied to one rank).
        worker: the Dask worker address of that rank (``None`` for thread ranks).
        step: the epoch the rank was in (``None`` when unknown); for a lost worker, one past the last
            epoch it reported.
        message: one line describing what happened.
        remote_traceback: the traceback from the rank, as text (may be empty).
    """

    what = "failed"

    def __init__(self, *, rank: Optional[int] = None, worker: Optional[str] = None, step: Optional[int] = None,
                 message: str = "", remote_traceback: str = ""):
        self.rank = rank
        self.worker = worker
        self.step = step
        self.message = message
        self.remote_traceback = remote_traceback
        super().__init__(self._text())

    def _text(self) -> str:
        who = "run" if self.rank is None else f"rank {self.rank}"
        where = f" ({self._where()})" if self.worker else ""
        when = f" at step {self.step}" if self.step is not None else ""
        tail = f": {self.message}" if self.message else ""
        return f"{who}{where} {self.what}{when}{tail}"

    def _where(self) -> str:
        return f"worker {self.worker}"

    def _kwargs(self) -> dict:
        return {"rank": self.rank, "worker": self.worker, "step": self.step, "message": self.message,
                "remote_traceback": self.remote_traceback}

    def __reduce__(self):
        return _rebuild, (type(self), self._kwargs())

    def details(self) -> str:
        """The message plus the remote traceback (what the CLI prints)."""
        if not self.remote_traceback:
            return str(self)
        return f"{self}\n--- remote traceback (rank {self.rank}) ---\n{self.remote_traceback.rstrip()}"


def _rebuild(cls, kwargs):
    return cls(**kwargs)


class RankFailed(RunError):
    """A rank raised an exception in the program.

    Attributes:
        exc_type: the name of the original exception type.
        in_communication: ``True`` when it was raised by the transport (often a consequence of
            another rank failing first), ``False`` for the rank's own code.
    """

    def __init__(self, *, exc_type: str = "", in_communication: bool = False, **kwargs):
        self.exc_type = exc_type
        self.in_communication = in_communication
        super().__init__(**kwargs)

    def _kwargs(self) -> dict:
        return {**super()._kwargs(), "exc_type": self.exc_type, "in_communication": self.in_communication}


class WorkerLost(RunError):
    """The worker process running a rank died, left the cluster, or went silent during the run.

    ``message`` says what was seen: the scheduler dropped the worker (its process died, or its connection to
    the scheduler closed), or no heartbeat of the worker reached the scheduler for the run's ``liveness``
    seconds (its link or its host is down).

    Attributes:
        host: the name of the worker's host, as the worker reported it when the run started (``None`` when
            unknown).

    Example:
        >>> print(WorkerLost(rank=1, worker="tcp://10.0.0.2:4242", host="node2", step=3,
        ...                  message="no heartbeat from the worker for 15 s (its link or host is down)"))
        rank 1 (worker tcp://10.0.0.2:4242 on node2) was lost at step 3: no heartbeat from the worker for 15 s \
(its link or host is down)
    """

    what = "was lost"

    def __init__(self, *, host: Optional[str] = None, **kwargs):
        self.host = host
        super().__init__(**kwargs)

    def _where(self) -> str:
        return f"worker {self.worker} on {self.host}" if self.host else f"worker {self.worker}"

    def _kwargs(self) -> dict:
        return {**super()._kwargs(), "host": self.host}


class RendezvousTimeout(RunError):
    """The ranks did not all join the process group within the timeout.

    Attributes:
        init_method: the rendezvous address (``tcp://host:port``).
        timeout_s: the timeout that expired.
    """

    what = "timed out in the rendezvous"

    def __init__(self, *, init_method: str = "", timeout_s: Optional[float] = None, **kwargs):
        self.init_method = init_method
        self.timeout_s = timeout_s
        super().__init__(**kwargs)

    def _kwargs(self) -> dict:
        return {**super()._kwargs(), "init_method": self.init_method, "timeout_s": self.timeout_s}


class SchedulerLost(RunError):
    """The client lost the Dask scheduler during the run (its host cut off, or the scheduler died).

    Attributes:
        scheduler: the scheduler's address.
    """

    what = "lost its scheduler"

    def __init__(self, *, scheduler: str = "", **kwargs):
        self.scheduler = scheduler
        super().__init__(**kwargs)

    def _kwargs(self) -> dict:
        return {**super()._kwargs(), "scheduler": self.scheduler}
