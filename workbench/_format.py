"""Numbers and exceptions as people read them in messages and progress lines, and a console that may go away."""

from __future__ import annotations

import sys
from typing import Any, Optional

__all__ = ["format_bytes", "describe", "Console", "console"]


def format_bytes(n: float) -> str:
    """``1.2 MiB``, ``5.3 KiB``, ``512 B`` (binary units).

    Example:
        >>> format_bytes(512), format_bytes(5427), format_bytes(3 << 20)
        ('512 B', '5.3 KiB', '3.0 MiB')
    """
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def describe(exc: BaseException) -> str:
    """``Type: message`` of ``exc``, never empty after the colon: an exception without text (a bare
    ``TimeoutError()``; asyncio's timeouts have none) still says what it was in the messages that quote it.

    Example:
        >>> describe(ConnectionResetError(104, "Connection reset by peer"))
        'ConnectionResetError: [Errno 104] Connection reset by peer'
        >>> describe(TimeoutError())
        'TimeoutError (no message)'
    """
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else f"{type(exc).__name__} (no message)"


class Console:
    """A text stream for progress bars and run lines that never raises: once a write or flush fails (the reader
    of a pipe went away: ``workbench run ... 2>&1 | head``; a closed terminal), it drops what follows.

    Why: tqdm holds its global lock while it draws and does not release it when the draw raises, so one
    ``BrokenPipeError`` in a listener left every later bar or line (on any rank's thread) waiting for that lock,
    and the run hung. Other attributes are the wrapped stream's (``isatty``, ``encoding``, ...).

    Example:
        >>> import io
        >>> class Gone(io.StringIO):
        ...     def write(self, s): raise BrokenPipeError(32, "Broken pipe")
        >>> c = Console(Gone())
        >>> c.write("epoch 1"), c.broken
        (0, True)
    """

    def __init__(self, stream: Any):
        self.stream = stream
        self.broken = False

    def write(self, text: str) -> int:
        if self.broken:
            return 0
        try:
            return self.stream.write(text)
        except (OSError, ValueError):   # BrokenPipeError, a closed file
            self.broken = True
            return 0

    def flush(self) -> None:
        if self.broken:
            return
        try:
            self.stream.flush()
        except (OSError, ValueError):
            self.broken = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


_CONSOLES: dict[int, Console] = {}


def console(stream: Optional[Any] = None) -> Console:
    """The :class:`Console` of ``stream`` (default ``sys.stderr``), one per stream, so that a broken stream is
    known broken to every bar and line that writes to it."""
    stream = sys.stderr if stream is None else stream
    if isinstance(stream, Console):
        return stream
    found = _CONSOLES.get(id(stream))
    if found is None or found.stream is not stream:
        found = _CONSOLES[id(stream)] = Console(stream)
    return found
