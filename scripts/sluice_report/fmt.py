"""Number formatting for sentences and tables: one style everywhere in the report."""

from __future__ import annotations

from typing import Optional

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


def ratio(v: Optional[float]) -> str:
    return DASH if v is None else f"{v:.2f}"


def times(v: Optional[float]) -> str:
    return DASH if v is None else f"{v:.2f}×"


def mib(v_bytes: Optional[float]) -> str:
    return DASH if v_bytes is None else f"{v_bytes / 2**20:,.0f}"


def cpu(v: Optional[float]) -> str:
    return DASH if v is None else f"{v:.0f}"


def seconds(v: Optional[float]) -> str:
    return DASH if v is None else f"{v:.1f}"


def count(v: Optional[float]) -> str:
    return DASH if v is None else f"{v:g}"


def join_and(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def plural(n: int, word: str, many: Optional[str] = None) -> str:
    return f"{n} {word if n == 1 else (many or word + 's')}"
