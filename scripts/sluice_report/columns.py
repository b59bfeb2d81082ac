"""summary.csv columns, as docs/REPORT-COLUMNS.md defines them (its table is the one place)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

DOC = Path(__file__).resolve().parents[2] / "docs" / "REPORT-COLUMNS.md"
ROW_RE = re.compile(r"^\| `(?P<name>[a-z0-9_]+)` \| (?P<unit>[^|]+) \| (?P<meaning>.+) \|$")


class Column(NamedTuple):
    name: str
    unit: str
    meaning: str


def _read() -> tuple[Column, ...]:
    rows = (ROW_RE.match(line) for line in DOC.read_text(encoding="utf-8").splitlines())
    return tuple(Column(m["name"], m["unit"].strip(), m["meaning"].strip()) for m in rows if m)


# Every "median" is over the configuration's ok runs only; a failed run never enters a figure.
COLUMNS: tuple[Column, ...] = _read()
COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in COLUMNS)
