"""Chart contents: what each figure plots, read from the plotly figure itself."""

from __future__ import annotations

import pytest
from conftest import FEED_CPU, make_run, write_run

from sluice_report import analyse, charts
from sluice_report.names import ROLES


def _traces(built):
    assert not isinstance(built, str), built
    _, _, fig = built
    return fig.data


def test_feed_is_a_process_role_in_cpu_and_memory(built_report):
    report, _, _ = built_report
    assert ROLES.index("relay") < ROLES.index("feed") < ROLES.index("valkey")
    for builder in (charts.cpu, charts.rss):
        names = [t.name for t in _traces(builder(report.configs)) if t.showlegend]
        assert names == ["gateway", "peer", "relay", "feed", "valkey"]
    feed = [t for t in _traces(charts.cpu(report.configs)) if t.name == "feed"]
    ys = [y for t in feed for y in t.y if y is not None]
    assert ys and all(y == pytest.approx(FEED_CPU) for y in ys)
    adaptive = next(c for c in report.configs if c.workload == "adaptive-lead")
    assert adaptive.cpu["feed"].median == pytest.approx(FEED_CPU)


def test_valkey_chart_bars_round_trips_and_marks_executed_commands(tmp_path):
    write_run(tmp_path, make_run("valkey-glide", rps=1000.0, wall=10.0))
    write_run(tmp_path, make_run("valkey-glide", "standalone", "flood", 1000.0, wall=10.0,
                                 limited_share=0.9))
    write_run(tmp_path, make_run("quotas-off", rps=1000.0, wall=10.0))
    built = charts.valkey_round_trips(analyse(tmp_path).configs)
    title, caption, fig = built
    assert title == "Valkey round trips per response"
    bars = [t for t in fig.data if t.type == "bar"]
    marks = [t for t in fig.data if t.type == "scatter"]
    assert [t.name for t in bars] == ["round trips (script calls)"]
    assert [t.name for t in marks] == ["commands executed inside Valkey"]
    by_x = dict(zip(zip(*bars[0].x), bars[0].y))
    assert by_x[("light", "glide")] == pytest.approx(1.0)
    assert by_x[("flood", "glide")] == pytest.approx(0.1)
    assert by_x[("light", "off")] == 0.0
    executed = dict(zip(zip(*marks[0].x), marks[0].y))
    assert executed[("light", "glide")] == pytest.approx(4.0)
    assert "round trips" in caption and "commands Valkey executed" in caption


