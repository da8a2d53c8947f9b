"""Compare two runs' trained models from their summaries, with tolerances that hold on any CPU.

A run's summary keeps three checksums of each weight tensor ``w`` (``summary["param_checksums"]``, written by
:func:`workbench.train.recorder.summarize_ranks`): ``[Σ w, Σ w², Σ |w|]``. The signed sum is the one to be careful
with: weights of both signs cancel (a sum of 0.068 from terms of size 0.1), so a *relative* tolerance on it
compares rounding noise, which another CPU's SIMD width, BLAS or thread count changes. Every comparison here is
scaled by the size of the weights instead:

- ``Σ w`` within ``rtol × Σ |w|`` (``|Σ a - Σ b| ≤ Σ |a - b|``, so weights equal to ``rtol`` elementwise always
  pass, whatever the signs);
- ``Σ w²`` within ``2 rtol × Σ w²`` (the squared norm moves twice as much as the norm);
- ``Σ |w|`` within ``rtol × Σ |w|``.

``rtol=0`` asks for the same numbers to the bit (two runs that must compute the same thing in the same order).

Example:
    >>> a = {"param_checksums": {"w": [0.068, 28.4, 120.0]}}
    >>> b = {"param_checksums": {"w": [0.0681, 28.4, 120.0]}}     # the sum moved by 1.5e-3 of itself
    >>> assert_same_weights(a, b, rtol=1e-5)                       # 1e-4 of a weight mass of 120: equal
    >>> assert_same_weights({"param_checksums": {"w": [0.08, 28.4, 120.0]}}, a, rtol=1e-5)
    Traceback (most recent call last):
    ...
    AssertionError: weights 'w': sum 0.08 against 0.068, differs by 0.012 > 1e-05 x sum|w| = 0.0012
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

__all__ = ["assert_same_weights", "assert_same_run", "weight_checksums"]

_WHAT = ("sum", "sum of squares", "sum|w|")


def weight_checksums(run: Mapping[str, Any]) -> dict[str, list[float]]:
    """The ``{name: [Σ w, Σ w², Σ |w|]}`` of a run's summary (or of such a dict itself).

    Example:
        >>> list(weight_checksums({"param_checksums": {"conv.0.weight": [0.1, 2.0, 3.0]}}))
        ['conv.0.weight']
    """
    sums = run["param_checksums"] if "param_checksums" in run else run
    for name, values in sums.items():
        if len(values) != 3:
            raise ValueError(f"weights {name!r}: expected the checksums [sum, sum of squares, sum|w|], got {values} "
                             "(a summary written before sum|w| was recorded?)")
    return dict(sums)


def assert_same_weights(got: Mapping[str, Any], expected: Mapping[str, Any], rtol: float = 1e-5) -> None:
    """``got``'s trained weights equal ``expected``'s, tensor by tensor, to ``rtol`` of their size.

    Args:
        got, expected: run summaries (or their ``param_checksums``).
        rtol: the tolerance relative to each tensor's ``Σ |w|`` (see the module docstring); ``0``: bit for bit.

    Raises:
        AssertionError: naming the tensor, the checksum, both values and the bound.
    """
    a, b = weight_checksums(got), weight_checksums(expected)
    assert a.keys() == b.keys(), f"the runs trained different weights: {sorted(a)} against {sorted(b)}"
    for name in b:
        mass, squares = max(a[name][2], b[name][2]), max(a[name][1], b[name][1])
        bounds = ((rtol * mass, f"{rtol:g} x sum|w|"), (2 * rtol * squares, f"2 x {rtol:g} x sum of squares"),
                  (rtol * mass, f"{rtol:g} x sum|w|"))
        for what, x, y, (bound, of) in zip(_WHAT, a[name], b[name], bounds):
            if not abs(x - y) <= bound:
                raise AssertionError(f"weights {name!r}: {what} {x:.8g} against {y:.8g}, differs by "
                                     f"{abs(x - y):.3g} > {of} = {bound:.3g}")


def assert_same_run(got: Mapping[str, Any], expected: Mapping[str, Any], rtol: float = 1e-5) -> None:
    """``got``'s losses (each to ``rtol`` of itself: a loss does not cancel) and weights
    (:func:`assert_same_weights`) equal ``expected``'s; ``rtol=0``: bit for bit.

    Example:
        >>> run = {"losses": [1.25, 0.5], "param_checksums": {"w": [-0.01, 4.0, 9.0]}}
        >>> assert_same_run(run, run, rtol=0)
    """
    _same_losses(got["losses"], expected["losses"], rtol)
    assert_same_weights(got, expected, rtol)


def _same_losses(got: Sequence[float], expected: Sequence[float], rtol: float) -> None:
    assert len(got) == len(expected), f"{len(got)} losses against {len(expected)}"
    for epoch, (x, y) in enumerate(zip(got, expected)):
        if not (x == y or math.isclose(x, y, rel_tol=rtol, abs_tol=0.0)):
            raise AssertionError(f"loss of epoch {epoch}: {x!r} against {y!r} (rtol {rtol:g})")
