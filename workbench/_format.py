"""Numbers as people read them in messages and progress lines."""

from __future__ import annotations

__all__ = ["format_bytes"]


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
