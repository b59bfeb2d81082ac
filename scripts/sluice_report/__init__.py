"""The benchmark report: results/<timestamp>/*.json -> report.html + summary.csv.

Modules, one job each: load (read and validate run files), stats (median, spread, CV),
aggregate (runs -> configurations), ratios (side-by-side comparisons), findings (sentences
from the data), charts (plotly figures), render (the HTML template), csvout (summary.csv),
columns (the CSV's documentation), header (run metadata), report (ties them together).
"""

from .report import Report, ReportError, analyse, generate, write

__all__ = ["Report", "ReportError", "analyse", "generate", "write"]
