"""The error every reader raises on a malformed graph file: :class:`DataFormatError`.

It sits below the readers (:mod:`workbench.data.readers`, :mod:`workbench.data.safe_io`,
:mod:`workbench.data.folders`, ...) so that each can raise it without importing another reader;
``workbench.data.readers.DataFormatError`` and ``workbench.data.DataFormatError`` are the same class.

Example:
    >>> raise DataFormatError("read_edge_list", "edges.txt", "two vertex ids per line", "0", line=3)
    Traceback (most recent call last):
    ...
    workbench.data.errors.DataFormatError: The 'path' parameter of read_edge_list must be two vertex ids per line (file 'edges.txt', line 3). Got '0' instead.
"""

from __future__ import annotations

import os
from typing import Any, Optional, Union

from workbench._validation import ParamError, param_error

__all__ = ["DataFormatError"]

PathLike = Union[str, os.PathLike]


class DataFormatError(ParamError):
    """A graph file is malformed. ``path``, ``line`` (1-based, or ``None``), ``field`` and ``value`` say where."""

    def __init__(self, owner: str, path: PathLike, constraint: str, value: Any, *, line: Optional[int] = None,
                 field: Optional[str] = None, param: str = "path"):
        self.path, self.line, self.field, self.value = str(path), line, field, value
        where = f"file {str(path)!r}"
        if line is not None:
            where += f", line {line}"
        if field is not None:
            where += f", {field}"
        super().__init__([param_error(param, owner, f"{constraint} ({where})", value)])
