"""Number formatting for sentences and tables: one style everywhere in the report."""

from __future__ import annotations

from typing import Callable, Optional

DASH = "–"  # shown for a figure that does not exist (never as zero)


def rate(v: Optional[float]) -> str:
    """req/s: whole numbers with thousands separators; small rates keep one decimal."""
    if v is None:
        return DASH
    return f"{v:,.1f}" if abs(v) < 100 else f"{v:,.0f}"


def num(v: Optional[float], digits: int = 2) -> str:
    return DASH if v is None else f"{v:,.{digits}f}"


def ms(v: Optional[float]) -> str:
    if v is None:
        return DASH
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}" if abs(v) < 1 else f"{v:.1f}"


def pct(fraction: Optional[float], digits: int = 1) -> str:
    return DASH if fraction is None else f"{fraction * 100:.{digits}f}%"


def _or_dash(show: Callable[[float], str]) -> Callable[[Optional[float]], str]:
    """A formatter that shows a missing value as the dash."""
    return lambda v: DASH if v is None else show(v)


ratio = _or_dash(lambda v: f"{v:.2f}")
times = _or_dash(lambda v: f"{v:.2f}×")
mib = _or_dash(lambda v: f"{v / 2**20:,.0f}")  # from bytes
cpu = _or_dash(lambda v: f"{v:.0f}")
seconds = _or_dash(lambda v: f"{v:.1f}")
count = _or_dash(lambda v: f"{v:g}")


def join_and(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def plural(n: int, word: str, many: Optional[str] = None) -> str:
    return f"{n} {word if n == 1 else (many or word + 's')}"
