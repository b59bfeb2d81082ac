"""Units, failed runs and ratios, through the same path the report takes."""

from __future__ import annotations

import csv

import pytest
from conftest import HIGH_VARIANCE_RUNS, WALL, make_run, write_run

from sluice_report import analyse, generate
from sluice_report.aggregate import group
from sluice_report.load import load_dir
from sluice_report.ratios import apply_ratios, peer_vs_sluice


def _configs(directory):
    configs = group(load_dir(directory).runs)
    apply_ratios(configs)
    return {c.key[:3] + (c.connections,): c for c in configs}


def _write(directory, impl, mode, workload, rates, **kw):
    for run, rps in enumerate(rates, 1):
        write_run(directory, make_run(impl, mode, workload, rps, run=run, runs=len(rates),
                                      wall=10.0, **kw))


# --- units -------------------------------------------------------------------------------


def test_rates_are_the_run_files_own_medians(tmp_path):
    # The harness states each run's rate (counts over its own measured window); the report
    # takes the median of what the files state and recomputes nothing.
    for run, stated in enumerate([3900.0, 4000.0, 4150.0], 1):
        data = make_run("ioredis", "standalone", "light", 4000.0, run=run)
        data["rates"]["requestsPerSec"] = stated
        write_run(tmp_path, data)
    report, _, csv_path = generate(tmp_path)
    cfg = report.configs[0]
    assert (cfg.req.median, cfg.req.min, cfg.req.max) == (4000.0, 3900.0, 4150.0)
    row = next(csv.DictReader(csv_path.open()))
    assert float(row["req_per_s_median"]) == pytest.approx(4000.0)


def test_2xx_429_and_errors_are_kept_apart(tmp_path):
    data = make_run("iovalkey", "standalone", "flood", 1000.0, wall=10.0, limited_share=0.9)
    data["counts"].update(errors=20, timeouts=5)
    data["rates"].update(errorsPerSec=2.0)
    write_run(tmp_path, data)
    cfg = analyse(tmp_path).configs[0]
    assert cfg.req.median == pytest.approx(1000.0)
    assert cfg.ok_per_s.median == pytest.approx(100.0)
    assert cfg.limited_per_s.median == pytest.approx(900.0)
    assert cfg.errors_per_s.median == pytest.approx(2.0)
    assert cfg.rejected_share.median == pytest.approx(0.9)


# --- failed runs -------------------------------------------------------------------------


def test_failed_run_is_excluded_counted_and_listed(results_dir):
    report = analyse(results_dir)
    cfg = next(c for c in report.configs if c.key[:3] == ("iovalkey", "cluster", "light"))
    assert (len(cfg.runs), len(cfg.ok), len(cfg.failed)) == (3, 2, 1)
    assert cfg.status == "partial"
    # Runs 1 and 3 only: 3500 x 0.98 and 3500 x 1.03 (the failed run 2 was at 100 req/s).
    assert cfg.req.median == pytest.approx((3430 + 3605) / 2, rel=1e-4)
    assert cfg.req.min == pytest.approx(3430, rel=1e-4)
    assert cfg.failed[0].failure_reasons == ["12 connection errors"]


def test_all_failed_configuration_keeps_a_row_marked_failed(results_dir):
    report, html_path, csv_path = generate(results_dir)
    cfg = next(c for c in report.configs if c.key[:3] == ("valkey-glide", "cluster", "heavy"))
    assert cfg.status == "failed" and cfg.req.median is None and len(cfg.failed) == 3
    rows = [r for r in csv.DictReader(csv_path.open())
            if (r["implementation"], r["mode"], r["workload"]) == ("valkey-glide", "cluster", "heavy")]
    assert len(rows) == 1
    assert rows[0]["status"] == "failed" and rows[0]["failed_runs"] == "3"
    assert rows[0]["ok_runs"] == "0" and rows[0]["req_per_s_median"] == ""
    html = html_path.read_text()
    for n in (1, 2, 3):
        assert f"valkey-glide_cluster_heavy_50c_10s_run{n}.json" in html
    assert "CLUSTERDOWN: the cluster is down" in html
    # The partly failed configuration's run is listed too, with its reason.
    failed_section = html[html.index('<h2 id="failed">'):html.index('<h2 id="unreadable">')]
    assert "iovalkey_cluster_light_50c_10s_run2.json" in failed_section
    assert "12 connection errors" in failed_section
    unreadable = html[html.index('<h2 id="unreadable">'):html.index('<h2 id="warnings">')]
    assert "iovalkey_standalone_heavy_50c_10s_run4.json" in unreadable
    assert "invalid JSON" in unreadable


def test_high_variance_configuration_is_flagged(results_dir):
    configs = analyse(results_dir).configs
    cfg = next(c for c in configs if c.key[:3] == ("quotas-off", "cluster", "light"))
    assert cfg.high_variance is True
    assert cfg.req.min == pytest.approx(HIGH_VARIANCE_RUNS[1], rel=1e-3)
    assert cfg.req.max == pytest.approx(HIGH_VARIANCE_RUNS[3], rel=1e-3)
    others = [c for c in configs if c is not cfg and c.req.cv is not None]
    assert not any(c.high_variance for c in others)


# --- ratios --------------------------------------------------------------------------------


@pytest.fixture
def ratio_dir(tmp_path):
    _write(tmp_path, "quotas-off", "standalone", "light", [3900, 4000, 4100])
    _write(tmp_path, "valkey-glide", "standalone", "light", [2900, 3000, 3300])
    _write(tmp_path, "iovalkey", "standalone", "light", [3600, 3500, 3700])
    _write(tmp_path, "fastify-rate-limit", "standalone", "light", [2400, 2400, 2400])
    # Other scenarios that must not leak into the standalone light 50c ratios.
    _write(tmp_path, "quotas-off", "cluster", "light", [8000, 8000, 8000])
    _write(tmp_path, "quotas-off", "standalone", "light", [9000, 9000, 9000], connections=100)
    _write(tmp_path, "fastify-rate-limit", "standalone", "heavy", [100, 100, 100])
    return tmp_path


def test_quotas_off_ratio_same_mode_workload_connections(ratio_dir):
    c = _configs(ratio_dir)
    assert c[("valkey-glide", "standalone", "light", 50)].ratio_vs_quotas_off == pytest.approx(0.75)
    assert c[("iovalkey", "standalone", "light", 50)].ratio_vs_quotas_off == pytest.approx(0.9)
    assert c[("fastify-rate-limit", "standalone", "light", 50)].ratio_vs_quotas_off == pytest.approx(0.6)
    assert c[("quotas-off", "standalone", "light", 50)].ratio_vs_quotas_off is None
    assert c[("fastify-rate-limit", "standalone", "heavy", 50)].ratio_vs_quotas_off is None


def test_client_against_best_client(ratio_dir):
    c = _configs(ratio_dir)
    assert c[("iovalkey", "standalone", "light", 50)].ratio_vs_best_client == pytest.approx(1.0)
    assert c[("valkey-glide", "standalone", "light", 50)].ratio_vs_best_client == pytest.approx(3000 / 3600)
    assert c[("quotas-off", "standalone", "light", 50)].ratio_vs_best_client is None


def test_peer_against_each_sluice_client(ratio_dir):
    configs = group(load_dir(ratio_dir).runs)
    apply_ratios(configs)
    cmps = {(p.scenario, p.client): p.peer_over_client for p in peer_vs_sluice(configs)}
    assert cmps == {
        (("standalone", "light", 50), "valkey-glide"): pytest.approx(2400 / 3000),
        (("standalone", "light", 50), "iovalkey"): pytest.approx(2400 / 3600),
    }
    c = {x.key[:3] + (x.connections,): x for x in configs}
    assert c[("valkey-glide", "standalone", "light", 50)].ratio_vs_peer == pytest.approx(1.25)
    assert c[("iovalkey", "standalone", "light", 50)].ratio_vs_peer == pytest.approx(1.5)


def test_fixture_ratios_by_hand(results_dir):
    c = _configs(results_dir)
    # Medians are the BASE figures (run 2 has jitter 1.0); requests are rounded to whole
    # responses over WALL seconds, hence rel=1e-4.
    assert c[("iovalkey", "standalone", "light", 50)].ratio_vs_quotas_off == pytest.approx(3976 / 4640, rel=1e-4)
    assert c[("ioredis", "standalone", "light", 50)].ratio_vs_best_client == pytest.approx(3070 / 3976, rel=1e-4)
    assert c[("valkey-glide", "standalone", "light", 50)].ratio_vs_peer == pytest.approx(3159 / 2500, rel=1e-4)
    assert WALL == 10.02
