"""The latency statistic every report prints."""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["p95"]


def p95(values: Sequence[float]) -> float:
    """The 95th percentile by nearest rank (the ``ceil(0.95 n)``-th smallest value); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return float(ordered[math.ceil(0.95 * len(ordered)) - 1])
