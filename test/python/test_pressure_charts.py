"""Memory / target and m over time, drawn from the closed-loop benchmarks' own files (bench
oom, spike, fleet, step): one chart per run, the target line on it; a run whose file has no
series is named with the reason and drawn as nothing; a directory with only those files (no
run files) still gets its report."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import write_pressure_files
from sluice_report import generate
from sluice_report.charts import PRESSURE_TITLE
from sluice_report.pressure import NO_SERIES, load_pressure_runs


def test_every_closed_loop_run_is_read_per_node(tmp_path: Path):
    write_pressure_files(tmp_path)
    runs = {r.title: r for r in load_pressure_runs(tmp_path)}
    assert set(runs) == {
        "Fleet: routing headroom", "Spike: spike, feed tick fast", "Spike: burst, feed tick slow",
        "OOM, reference relay: spam flood, none", "Step response: lead, step"}
    fleet = runs["Fleet: routing headroom"]
    assert fleet.file == "fleet/fleet-bench.json"
    assert [n.name for n in fleet.nodes] == ["relay-a", "relay-b", "relay-c (degraded)"]
    assert fleet.marks == [(20.0, "relay-c's drain cut to 0.25")]
    oom = runs["OOM, reference relay: spam flood, none"]
    # u is the working set over the target; the flood and the kill are marked.
    assert max(oom.nodes[0].u) == 1.2
    assert (35.2, "OOM kill") in oom.marks and (10.0, "flood") in oom.marks
    assert runs["Spike: burst, feed tick slow"].why_none == NO_SERIES


def test_the_report_draws_one_chart_per_run_with_the_target_line(built_report):
    report, html_path, _ = built_report
    drawn = [c for c in report.charts.charts if c.id.startswith("chart-pressure-")]
    assert [c.title for c in drawn] == [
        f"{PRESSURE_TITLE}: {t}" for t in (
            "OOM, reference relay: spam flood, none", "Spike: spike, feed tick fast",
            "Step response: lead, step", "Fleet: routing headroom")]
    html = html_path.read_text(encoding="utf-8")
    for c in drawn:
        assert f'data-chart="{c.id}"' in html
    # The target line, and the verdict at a glance in the caption.
    fig = next(c for c in drawn if "OOM" in c.title)
    assert '"y0":1.0' in fig.html.replace(" ", "") and "target" in fig.html
    assert "Over target: relay (peak 1.20 x)" in fig.caption
    step = next(c for c in drawn if "Step" in c.title)
    assert "Never over target (peak 0.90 x)" in step.caption


def test_a_run_without_series_is_named_and_not_drawn(built_report):
    report, html_path, _ = built_report
    left = [o for o in report.charts.omitted if "Spike: burst" in o.title]
    assert len(left) == 1 and left[0].reason == NO_SERIES
    html = html_path.read_text(encoding="utf-8")
    assert "Spike: burst, feed tick slow (spike-bench.json): not drawn, no time series" in html


def test_a_directory_with_only_closed_loop_files_gets_a_report(tmp_path: Path):
    write_pressure_files(tmp_path)
    report, html_path, _ = generate(tmp_path)
    assert len(report.charts.charts) == 4
    assert all(c.id.startswith("chart-pressure-") for c in report.charts.charts)
    assert "Step response: lead, step" in html_path.read_text(encoding="utf-8")


def test_files_without_series_render_without_a_chart_saying_so(tmp_path: Path):
    write_pressure_files(tmp_path, series=False)
    report, html_path, _ = generate(tmp_path)
    assert report.charts.charts == []
    left = [o for o in report.charts.omitted if o.title.startswith(PRESSURE_TITLE)]
    assert len(left) == 5 and {o.reason for o in left} == {NO_SERIES}
    html = html_path.read_text(encoding="utf-8")
    assert 'data-charts="0"' in html
    assert html.count(NO_SERIES) == 5


def test_other_json_files_are_not_taken_for_closed_loop_runs(tmp_path: Path):
    (tmp_path / "notes.json").write_text("{not json", encoding="utf-8")
    (tmp_path / "other.json").write_text(json.dumps({"kind": "clients-bench"}), encoding="utf-8")
    assert load_pressure_runs(tmp_path) == []
