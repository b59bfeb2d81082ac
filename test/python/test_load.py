"""Reading run files: good, malformed, unknown schema, missing fields, cross-checks."""

from __future__ import annotations

import json

import pytest
from conftest import make_run, write_run

from sluice_report.load import (Invalid, Run, Unreadable, is_run_file_name, load_dir, load_file,
                                parse_run)


def test_good_file_parses_with_every_field(tmp_path):
    path = write_run(tmp_path, make_run("iovalkey", "cluster", "flood", 2000.0, run=2,
                                        limited_share=0.9))
    run = load_file(path)
    assert isinstance(run, Run), run
    assert run.key == ("iovalkey", "cluster", "flood", 50, 10.0, "reference")
    assert run.ok and run.run == 2 and run.runs_expected == 3
    assert run.client == "iovalkey" and run.transport == "http"
    assert run.counts["requests"] == round(2000.0 * 10.02)
    assert run.counts["limited429"] == round(run.counts["requests"] * 0.9)
    assert run.latency["p50"] == pytest.approx(25.0)
    # Cluster: the gateway, the relay and six Valkey nodes, summed per role.
    assert [p.role for p in run.processes].count("valkey") == 6
    assert run.role_sum("valkey", "cpu_mean") == pytest.approx(6 * (15 * 0.1 + 0.5))
    # Flood with the in-memory block: 0.1 round trips per response, each an EVALSHA that runs
    # SET, PTTL and INCRBY inside Valkey: 0.4 commands executed.
    assert run.valkey_per_request("scriptCallsPerRequest") == pytest.approx(0.1, abs=1e-3)
    assert run.valkey_per_request("perRequest") == pytest.approx(0.4, abs=1e-3)
    assert run.warnings == []


def test_malformed_json_is_unreadable_with_position(tmp_path):
    path = tmp_path / "ioredis_standalone_light_50c_10s_run1.json"
    path.write_text('{"schema": "sluice-bench-run/1", ', encoding="utf-8")
    result = load_file(path)
    assert isinstance(result, Unreadable)
    assert result.file == path.name
    assert result.reason.startswith("invalid JSON") and "line 1" in result.reason


@pytest.mark.parametrize("schema", ["sluice-bench-run/2", None, "ratelimit-bench"])
def test_unknown_schema_is_unreadable(tmp_path, schema):
    data = make_run()
    data["schema"] = schema
    result = load_file(write_run(tmp_path, data))
    assert isinstance(result, Unreadable)
    assert "unknown schema" in result.reason and repr(schema) in result.reason


@pytest.mark.parametrize("drop, expected", [
    (("wallSeconds",), "missing field wallSeconds"),
    (("counts", "limited429"), "missing field counts.limited429"),
    (("config", "implementation"), "missing field config.implementation"),
    (("config", "connections"), "missing field config.connections"),
    (("processes",), "missing field processes"),
])
def test_missing_fields_are_named(tmp_path, drop, expected):
    data = make_run()
    target = data
    for part in drop[:-1]:
        target = target[part]
    del target[drop[-1]]
    result = load_file(write_run(tmp_path, data, name="run.json"))
    assert isinstance(result, Unreadable)
    assert expected in result.reason


def test_wrong_types_are_rejected():
    data = make_run()
    data["wallSeconds"] = 0
    with pytest.raises(Invalid, match="wallSeconds"):
        parse_run(data, "x.json")
    data = make_run()
    data["counts"]["requests"] = True  # bool is not a count
    with pytest.raises(Invalid, match="counts.requests"):
        parse_run(data, "x.json")
    data = make_run()
    data["status"] = "partial"
    with pytest.raises(Invalid, match="status"):
        parse_run(data, "x.json")


def test_failed_run_without_counts_still_loads():
    data = make_run(status="failed", reasons=["Valkey unreachable"])
    data["counts"] = data["rates"] = data["wallSeconds"] = None
    run = parse_run(data, "x.json")
    assert not run.ok and run.counts is None and run.rate("requestsPerSec") is None
    assert run.failure_reasons == ["Valkey unreachable"]


@pytest.mark.parametrize("name", ["wallSeconds", "counts", "rates"])
def test_ok_run_must_state_its_figures(name):
    data = make_run()
    data[name] = None
    with pytest.raises(Invalid, match=f"missing field {name} \\(an ok run states it\\)"):
        parse_run(data, "x.json")


def test_a_file_against_itself_warns_without_rejecting():
    data = make_run(rps=1000.0, wall=12.5)  # 10 s asked for
    data["failureReasons"] = []
    run = parse_run(data, "iovalkey_standalone_light_50c_10s_run1.json")  # name disagrees
    text = " | ".join(run.warnings)
    assert "file name says" in text and "config says" in text
    assert "measured window 12.50 s differs from the 10 s asked for" in text


def test_a_lease_file_name_is_checked_against_its_config():
    data = make_run("iovalkey+lease", "cluster", run=2)
    run = parse_run(data, "iovalkey+lease_cluster_light_50c_10s_run2.json")
    assert run.warnings == [] and run.leases["overAdmitted"] == 0
    run = parse_run(data, "iovalkey+lease_standalone_light_50c_10s_run2.json")
    assert any("file name says ('iovalkey+lease', 'standalone'" in w for w in run.warnings)


def test_load_dir_separates_runs_from_unreadable(results_dir):
    rd = load_dir(results_dir)
    assert len(rd.unreadable) == 1
    assert rd.unreadable[0].file == "iovalkey_standalone_heavy_50c_10s_run4.json"
    assert len(rd.runs) == 87
    assert rd.readme and "run-all.sh" in rd.readme
    assert rd.log and "FAILED" in rd.log


def test_non_object_json(tmp_path):
    path = tmp_path / "a.json"
    path.write_text(json.dumps([1, 2]), encoding="utf-8")
    result = load_file(path)
    assert isinstance(result, Unreadable) and result.reason == "not a JSON object"


# --- round trips (valkey.scriptCalls) --------------------------------------------------------


def test_round_trips_and_executed_commands_are_apart():
    data = make_run("valkey-glide", rps=1000.0, wall=10.0)  # 10,000 responses
    assert data["valkey"]["commands"] == {"fcall": 10000, "set": 10000, "pttl": 10000,
                                          "incrby": 10000}
    run = parse_run(data, "x.json")
    assert run.valkey_per_request("scriptCallsPerRequest") == pytest.approx(1.0)
    assert run.valkey_per_request("perRequest") == pytest.approx(4.0)
    off = parse_run(make_run("quotas-off", rps=1000.0, wall=10.0), "x.json")
    assert off.valkey_per_request("scriptCallsPerRequest") == 0.0


# --- which files are run files ----------------------------------------------------------------


@pytest.mark.parametrize("name, is_run", [
    ("valkey-glide_cluster_light_50c_10s_run1.json", True),
    ("adaptive_run12.json", True),
    ("gateway-bench.json", False),
    ("adaptive.json", False),
    ("notes_run.json", False),
    ("x_run1.json.bak", False),
    ("summary_run1.csv", False),
])
def test_run_file_names(name, is_run):
    assert is_run_file_name(name) is is_run


def test_other_json_files_are_ignored_not_unreadable(results_dir):
    # The fixture holds gateway-bench.json and notes.json (not even JSON) besides the runs.
    assert (results_dir / "gateway-bench.json").exists() and (results_dir / "notes.json").exists()
    rd = load_dir(results_dir)
    assert [u.file for u in rd.unreadable] == ["iovalkey_standalone_heavy_50c_10s_run4.json"]
    assert all(is_run_file_name(r.file) for r in rd.runs)
