"""summary.csv: documented header, one row per configuration, numbers that parse."""

from __future__ import annotations

import csv
import math

import pytest
from conftest import FEED_CPU, FEED_RSS, make_run, write_lease_results, write_run

from sluice_report import columns, generate
from sluice_report.columns import COLUMN_NAMES, COLUMNS

NUMERIC = [c.name for c in COLUMNS if c.unit not in ("-", "true/false")]


def _rows(csv_path):
    with csv_path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        return reader.fieldnames, list(reader)


def test_header_is_exactly_the_documented_columns(built_report):
    _, _, csv_path = built_report
    header, _ = _rows(csv_path)
    assert tuple(header) == COLUMN_NAMES
    assert len(set(COLUMN_NAMES)) == len(COLUMN_NAMES)


def test_one_row_per_configuration(built_report):
    report, _, csv_path = built_report
    _, rows = _rows(csv_path)
    keys = [(r["implementation"], r["mode"], r["workload"], r["connections"], r["duration_s"])
            for r in rows]
    assert len(keys) == len(set(keys)) == len(report.configs)
    # 5 x 2 light + 6 flood + 5 heavy + 1 all-failed heavy + 4 nostr + 3 adaptive
    assert len(rows) == 29
    assert sum(int(r["runs"]) for r in rows) == 87


def test_numeric_columns_parse_and_flags_are_booleans(built_report):
    _, _, csv_path = built_report
    _, rows = _rows(csv_path)
    for r in rows:
        for name in NUMERIC:
            if r[name] != "":
                assert math.isfinite(float(r[name])), (name, r[name])
        assert r["high_variance"] in ("true", "false", "")
        assert r["in_memory_block"] in ("true", "false", "")
        assert r["status"] in ("ok", "partial", "failed")
        assert int(r["ok_runs"]) + int(r["failed_runs"]) == int(r["runs"])


def test_row_values_by_hand(built_report):
    _, _, csv_path = built_report
    _, rows = _rows(csv_path)
    by = {(r["implementation"], r["mode"], r["workload"]): r for r in rows}
    glide = by[("valkey-glide", "standalone", "flood")]
    assert float(glide["req_per_s_median"]) == pytest.approx(5351, abs=0.1)
    assert float(glide["rejected_share_pct"]) == pytest.approx(90.0, abs=0.01)
    assert float(glide["valkey_cmds_per_request"]) == pytest.approx(0.4, abs=1e-3)
    assert float(glide["valkey_round_trips_per_request"]) == pytest.approx(0.1, abs=1e-3)
    assert float(glide["gateway_rss_mib"]) == pytest.approx(90.0)
    off = by[("quotas-off", "cluster", "light")]
    assert off["high_variance"] == "true" and float(off["req_per_s_cv_pct"]) > 10
    assert off["client"] == "" and off["ratio_vs_quotas_off"] == ""
    lead = by[("ioredis", "standalone", "adaptive-lead")]
    assert lead["law"] == "lead" and lead["latency_p50_ms"] == ""
    assert float(lead["adaptive_peak_u_over_target"]) == pytest.approx(0.96, abs=1e-3)
    assert float(lead["adaptive_emergency_entries"]) == 0
    partial = by[("iovalkey", "cluster", "light")]
    assert (partial["status"], partial["ok_runs"], partial["failed_runs"]) == ("partial", "2", "1")


def test_column_docs_are_one_source(built_report):
    _, html_path, _ = built_report
    html = html_path.read_text(encoding="utf-8")
    # Every row of the documented table is a column, read whole (64 of them today).
    doc_rows = [line for line in columns.DOC.read_text(encoding="utf-8").splitlines()
                if line.startswith("| `")]
    assert len(COLUMNS) == len(doc_rows) >= 60
    for c in COLUMNS:
        assert f"<code>{c.name}</code>" in html and c.unit and c.meaning
        assert c.meaning.split(" ")[0] in html


def test_feed_role_columns(built_report):
    _, _, csv_path = built_report
    header, rows = _rows(csv_path)
    assert header.index("feed_cpu_pct") == header.index("relay_rss_mib") + 1
    assert header.index("feed_rss_mib") == header.index("feed_cpu_pct") + 1
    for r in rows:
        if r["workload"].startswith("adaptive-"):
            assert float(r["feed_cpu_pct"]) == pytest.approx(FEED_CPU)
            assert float(r["feed_rss_mib"]) == pytest.approx(FEED_RSS / 2**20)
        else:
            # Not sampled outside the adaptive scenario: empty, never 0.
            assert r["feed_cpu_pct"] == "" and r["feed_rss_mib"] == ""


def test_round_trip_and_executed_command_columns(built_report):
    _, _, csv_path = built_report
    _, rows = _rows(csv_path)
    by = {(r["implementation"], r["mode"], r["workload"]): r for r in rows}
    trips, executed = "valkey_round_trips_per_request", "valkey_cmds_per_request"
    glide = by[("valkey-glide", "standalone", "light")]
    assert float(glide[trips]) == pytest.approx(1.0) and float(glide[executed]) == pytest.approx(4.0)
    peer = by[("fastify-rate-limit", "standalone", "light")]
    assert float(peer[trips]) == pytest.approx(1.0) and float(peer[executed]) == pytest.approx(3.0)
    off = by[("quotas-off", "standalone", "light")]
    assert off[trips] == "0.0000" and off[executed] == "0.0000"  # no scripts: 0, not empty
    flood = by[("ioredis", "cluster", "flood")]
    assert float(flood[trips]) == pytest.approx(0.1, abs=1e-3)


def _by_config(csv_path):
    _, rows = _rows(csv_path)
    return {(r["implementation"], r["mode"], r["workload"]): r for r in rows}


def test_lease_columns_by_hand(lease_report):
    _, _, csv_path = lease_report
    by = _by_config(csv_path)
    lease = by[("iovalkey+lease", "standalone", "light")]
    assert lease["client"] == "iovalkey"
    assert lease["lease_over_admitted"] == "0"  # checked and none: 0, not empty
    # conftest.lease_accounting: 2% of the points leased lapsed or were held at the end.
    assert float(lease["lease_unspent_share_pct"]) == pytest.approx(2.0, abs=0.01)
    # A lease take carries many writes: one round trip per 20 responses, 4 commands each.
    assert float(lease["valkey_round_trips_per_request"]) == pytest.approx(0.05, abs=1e-3)
    assert float(lease["valkey_cmds_per_request"]) == pytest.approx(0.2, abs=1e-3)
    # Gateway CPU (80 + req/s / 200)% over the window / responses, mean over the three runs.
    expected = sum((80 + 4408 * j / 200) * 10 / (4408 * j) for j in (0.98, 1.0, 1.03)) / 3
    assert float(lease["front_cpu_ms_per_request"]) == pytest.approx(expected, rel=1e-3)
    assert float(lease["ratio_vs_quotas_off"]) == pytest.approx(4408 / 4640, abs=1e-3)
    assert float(lease["ratio_vs_peer"]) == pytest.approx(4408 / 2500, abs=1e-3)
    assert float(lease["ratio_vs_peer_paired_mean"]) == pytest.approx(4408 / 2500, abs=1e-3)
    flood = by[("iovalkey+lease", "standalone", "flood")]
    assert float(flood["valkey_round_trips_per_request"]) == pytest.approx(0.02, abs=1e-3)
    assert float(flood["lease_unspent_share_pct"]) == pytest.approx(2.0, abs=0.05)
    # Without leases there is nothing to account: empty, never 0.
    for impl in ("iovalkey", "quotas-off", "fastify-rate-limit"):
        row = by[(impl, "standalone", "light")]
        assert row["lease_over_admitted"] == "" and row["lease_unspent_share_pct"] == ""


def test_lease_over_admission_is_summed_over_ok_runs_only(tmp_path):
    over = {("iovalkey+lease", "standalone", "light", 1): 3,
            ("iovalkey+lease", "standalone", "light", 3): 4}
    d = write_lease_results(tmp_path / "s", over)
    # A failed run's over-admission is a finding, not part of the aggregate.
    write_run(d, make_run("valkey-glide+lease", rps=4176.0, run=2, status="failed",
                          reasons=["12 connection errors"], over_admitted=5))
    _, _, csv_path = generate(d)
    by = _by_config(csv_path)
    assert by[("iovalkey+lease", "standalone", "light")]["lease_over_admitted"] == "7"
    assert by[("iovalkey+lease", "cluster", "light")]["lease_over_admitted"] == "0"
    assert by[("valkey-glide+lease", "standalone", "light")]["lease_over_admitted"] == "0"


def test_lease_run_without_its_accounting_is_empty_and_warned(tmp_path):
    data = make_run("ioredis+lease", rps=3000.0)
    data["leases"] = None
    write_run(tmp_path, data)
    report, _, csv_path = generate(tmp_path)
    (row,) = _by_config(csv_path).values()
    assert row["lease_over_admitted"] == "" and row["lease_unspent_share_pct"] == ""
    assert any("+lease run without its lease accounting" in w for w in report.warnings)
