#!/usr/bin/env python3
"""Benchmark report: reads a results directory, writes report.html and summary.csv.

    scripts/generate_report.py [RESULTS_DIR] [--out DIR]

RESULTS_DIR defaults to results/latest under the project root. The work is done by the
sluice_report package next to this file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# Importable from any working directory, without installing anything.
sys.path.insert(0, str(HERE))

from sluice_report import ReportError, generate  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Write report.html (one offline file) and summary.csv for a benchmark "
                    "results directory.")
    parser.add_argument("results_dir", nargs="?", type=Path, default=ROOT / "results" / "latest",
                        help="directory of run files (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=None,
                        help="where to write the two files (default: the results directory)")
    args = parser.parse_args(argv)

    results_dir = args.results_dir.resolve()
    try:
        report, html_path, csv_path = generate(results_dir, args.out.resolve() if args.out else None)
    except ReportError as e:
        print(f"generate_report: error: {e}", file=sys.stderr)
        return 2
    for u in report.unreadable:
        print(f"generate_report: unreadable file {u.file}: {u.reason}", file=sys.stderr)
    failed = sum(1 for r in report.results.runs if not r.ok)
    if failed:
        print(f"generate_report: {failed} failed run(s) listed in the report, not aggregated",
              file=sys.stderr)
    print(html_path)
    print(csv_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
