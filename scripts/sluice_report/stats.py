"""Pure statistics over a handful of runs. No I/O, no knowledge of the run format."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

# Runs whose throughput CV exceeds this are flagged: their differences may be noise.
HIGH_CV = 0.10


def _clean(values: Iterable[Optional[float]]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(v)]


def median(values: Sequence[float]) -> Optional[float]:
    xs = sorted(_clean(values))
    n = len(xs)
    if n == 0:
        return None
    mid = n // 2
    return xs[mid] if n % 2 else (xs[mid - 1] + xs[mid]) / 2


def minimum(values: Sequence[float]) -> Optional[float]:
    xs = _clean(values)
    return min(xs) if xs else None


def maximum(values: Sequence[float]) -> Optional[float]:
    xs = _clean(values)
    return max(xs) if xs else None


def mean(values: Sequence[float]) -> Optional[float]:
    xs = _clean(values)
    return math.fsum(xs) / len(xs) if xs else None


def sample_stddev(values: Sequence[float]) -> Optional[float]:
    """Standard deviation with n-1 (runs are a sample); None below 2 values."""
    xs = _clean(values)
    if len(xs) < 2:
        return None
    m = math.fsum(xs) / len(xs)
    return math.sqrt(math.fsum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def cv(values: Sequence[float]) -> Optional[float]:
    """Coefficient of variation (sample stddev / mean), as a fraction."""
    sd = sample_stddev(values)
    m = mean(values)
    if sd is None or m is None or m == 0:
        return None
    return sd / abs(m)


def is_high_variance(cv_value: Optional[float], threshold: float = HIGH_CV) -> Optional[bool]:
    """True above the threshold; None when the spread is unknown (fewer than 2 runs)."""
    if cv_value is None:
        return None
    return cv_value > threshold


@dataclass(frozen=True)
class Spread:
    """One metric over N runs: what every figure in the report is made of."""

    n: int
    median: Optional[float]
    min: Optional[float]
    max: Optional[float]
    stddev: Optional[float]
    cv: Optional[float]

    @property
    def high_variance(self) -> Optional[bool]:
        return is_high_variance(self.cv)


EMPTY = Spread(0, None, None, None, None, None)


def spread(values: Iterable[Optional[float]]) -> Spread:
    xs = _clean(values)
    if not xs:
        return EMPTY
    return Spread(len(xs), median(xs), minimum(xs), maximum(xs), sample_stddev(xs), cv(xs))


def ratio(numerator: Optional[float], denominator: Optional[float]) -> Optional[float]:
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator
