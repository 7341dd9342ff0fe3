"""Small statistics for benchmark tables: a rate with its 95% confidence interval."""

from __future__ import annotations

import math

__all__ = ["wilson_interval"]


def wilson_interval(successes: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of ``successes / total`` (95% for z = 1.96), as fractions.

    Unlike the normal approximation it stays inside [0, 1] and is sensible for 0/n and n/n,
    which small benchmark cells often are.
    """
    if total <= 0:
        return (0.0, 0.0)
    p = successes / total
    denominator = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denominator
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))
