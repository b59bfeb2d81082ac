"""From a results directory to report.html and summary.csv."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .aggregate import Config, group
from .charts import ChartSet, build_charts, pressure_charts
from .csvout import write_summary
from .findings import Finding, key_findings
from .header import Header, build_header
from .headline import Headline
from .headline import build as build_headline
from . import fmt
from .load import ResultsDir, Unreadable, load_dir, other_json_files, run_files
from .pressure import PressureRun, load_pressure_runs
from .ratios import apply_ratios
from .render import render


class ReportError(Exception):
    """Nothing to report on; the message says why."""


@dataclass
class Report:
    results: ResultsDir
    configs: list[Config]
    header: Header
    findings: list[Finding]
    charts: ChartSet
    warnings: list[str]
    headline: Headline
    pressure: list[PressureRun]

    @property
    def unreadable(self) -> list[Unreadable]:
        return self.results.unreadable


def analyse(results_dir: Path) -> Report:
    if not results_dir.is_dir():
        raise ReportError(f"results directory not found: {results_dir}")
    # The closed-loop benchmarks' own files (bench oom, spike, fleet, step): drawn over time.
    pressure = load_pressure_runs(results_dir)
    if not run_files(results_dir) and not pressure:
        others = [p.name for p in other_json_files(results_dir)]
        note = (f" ({fmt.plural(len(others), 'other .json file')} ignored, not named like a run: "
                f"{', '.join(others)})" if others else "")
        raise ReportError(f"no run files (*_run<N>.json) in {results_dir}, nor a file of "
                          f"bench oom, spike, fleet or step{note}")
    rd = load_dir(results_dir)
    if not rd.runs and not pressure:
        reasons = "; ".join(f"{u.file}: {u.reason}" for u in rd.unreadable)
        raise ReportError(f"none of the {len(rd.unreadable)} run files in {results_dir} is "
                          f"readable ({reasons})")
    configs = group(rd.runs)
    apply_ratios(configs)
    headline = build_headline(configs)
    header = build_header(rd)
    warnings = [*header.warnings,
                *(f"{r.file}: {w}" for r in rd.runs for w in r.warnings),
                *(w for c in configs for w in c.warnings)]
    findings = key_findings(configs, rd.runs, rd.unreadable, warnings,
                            header.client_comparison)
    charts = build_charts(configs)
    drawn = pressure_charts(pressure)
    charts = ChartSet(charts.charts + drawn.charts, charts.omitted + drawn.omitted)
    return Report(rd, configs, header, findings, charts, warnings, headline, pressure)


def write(report: Report, out_dir: Path) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    html_path, csv_path = out_dir / "report.html", out_dir / "summary.csv"
    html = render(header=report.header, configs=report.configs, runs=report.results.runs,
                  unreadable=report.unreadable, findings=report.findings, charts=report.charts,
                  warnings=report.warnings, headline=report.headline)
    html_path.write_text(html, encoding="utf-8")
    write_summary(report.configs, csv_path)
    return html_path, csv_path


def generate(results_dir: Path, out_dir: Optional[Path] = None) -> tuple[Report, Path, Path]:
    report = analyse(results_dir)
    html_path, csv_path = write(report, out_dir or results_dir)
    return report, html_path, csv_path
