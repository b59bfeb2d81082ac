"""The header: command line, settings read from the runs, confounds between clients."""

from __future__ import annotations

from conftest import make_run, write_run

from sluice_report import analyse


def test_header_from_fixture(built_report):
    report, html_path, _ = built_report
    h = report.header
    assert h.run_date == "2026-11-22 10:00:00 UTC"  # from the directory name
    assert h.command.startswith("./scripts/run-all.sh --clients all")
    assert h.command_source == "session.json" and ("warm-up", "3s") in h.settings
    assert h.machines == ["2 CPUs (AMD EPYC), 24 GiB, kernel 6.1.0, Node v20.20.2"]
    assert ("valkey", "9.1.2") in h.versions
    html = html_path.read_text(encoding="utf-8")
    assert "<code>./scripts/run-all.sh --clients all --workload all --runs 3" in html


def test_fallback_when_nothing_names_the_command(tmp_path):
    write_run(tmp_path, make_run())
    h = analyse(tmp_path).header
    assert h.command is None and h.command_source.startswith("not recorded")
    assert ("implementations", "valkey-glide") in h.settings


def test_unequal_client_timeouts_are_flagged(tmp_path):
    a = make_run("valkey-glide")
    a["clientSettings"] = {"client": "valkey-glide", "settings": {"requestTimeoutMs": 1000}}
    b = make_run("fastify-rate-limit")
    b["clientSettings"] = {"client": "ioredis", "commandTimeoutMs": 250}
    write_run(tmp_path, a), write_run(tmp_path, b)
    warnings = analyse(tmp_path).warnings
    assert any("command timeout ms differs" in w and "1000 (valkey-glide)" in w
               and "250 (fastify-rate-limit)" in w for w in warnings), warnings


def test_different_machines_and_versions_are_flagged(tmp_path):
    a, b = make_run(run=1), make_run(run=2)
    b["machine"]["cpus"] = 8
    b["versions"]["valkey"] = "8.1.0"
    write_run(tmp_path, a), write_run(tmp_path, b)
    report = analyse(tmp_path)
    assert len(report.header.machines) == 2
    assert any("disagree on the valkey version: 9.1.2, 8.1.0" in w for w in report.warnings)


# --- client settings: same names in each library's words, null in-flight is not a setting ----


def _settings_dir(tmp_path, peer_settings=None, iovalkey_inflight=None):
    for impl in ("valkey-glide", "iovalkey", "fastify-rate-limit"):
        data = make_run(impl)
        if impl == "fastify-rate-limit" and peer_settings is not None:
            data["clientSettings"] = peer_settings
        if impl == "iovalkey" and iovalkey_inflight is not None:
            data["clientSettings"]["settings"]["inflightRequestsLimit"] = iovalkey_inflight
        write_run(tmp_path, data)
    return analyse(tmp_path)


def test_equal_settings_raise_no_warning_and_null_inflight_is_not_a_setting(built_report):
    report, html_path, _ = built_report
    assert not any("differs between implementations" in w for w in report.warnings)
    cmp = {c.label: c for c in report.header.client_comparison}
    assert not any(c.unequal for c in cmp.values())
    assert cmp["command timeout ms"].values == [
        ("1000", ["valkey-glide", "iovalkey", "ioredis", "fastify-rate-limit"])]
    assert cmp["connect timeout ms"].values == [
        ("5000", ["valkey-glide", "iovalkey", "ioredis", "fastify-rate-limit"])]
    # glide has a limit; iovalkey and ioredis record null (no such setting); the peer's
    # ioredis records nothing: neither is a difference.
    assert cmp["in-flight limit"].values == [
        ("1000", ["valkey-glide"]),
        ("n/a: not a setting of this library", ["iovalkey", "ioredis", "fastify-rate-limit"])]
    html = html_path.read_text(encoding="utf-8")
    run = html[html.index('<h2 id="run">'):html.index('<h2 id="how">')]
    assert "Client settings compared" in run and "differs" not in run
    assert "inflightRequestsLimit n/a: not a setting of this library" in run
    assert "inflightRequestsLimit null" not in html


def test_null_inflight_for_iovalkey_is_not_flagged(tmp_path):
    report = _settings_dir(tmp_path)
    assert not any("in-flight" in w for w in report.warnings), report.warnings
    assert not any("differs" in w for w in report.header.client_confounds)


def test_real_inflight_difference_is_flagged(tmp_path):
    # A number where glide has 1000 is a real setting that differs.
    report = _settings_dir(tmp_path, iovalkey_inflight=64)
    assert any("client in-flight limit differs" in w and "1000 (valkey-glide)" in w
               and "64 (iovalkey)" in w for w in report.warnings), report.warnings


def test_peer_timeouts_in_ioredis_own_names_are_compared(tmp_path):
    peer = {"implementation": "fastify-rate-limit", "client": "ioredis", "mode": "standalone",
            "commandTimeout": 1000, "connectTimeout": 5000}
    report = _settings_dir(tmp_path, peer_settings=peer)
    assert report.header.client_confounds == []
    cmp = {c.label: c for c in report.header.client_comparison}
    assert "fastify-rate-limit" in cmp["command timeout ms"].values[0][1]
    assert "fastify-rate-limit" in cmp["connect timeout ms"].values[0][1]


def test_peer_with_other_timeouts_is_flagged_everywhere(tmp_path):
    # The shape the peer wrote before it was given the sluice clients' timeouts.
    peer = {"implementation": "fastify-rate-limit", "client": "ioredis", "mode": "standalone",
            "commandTimeoutMs": 250, "connectTimeoutMs": 2000, "undici": {"connections": 128}}
    report = _settings_dir(tmp_path, peer_settings=peer)
    confounds = report.header.client_confounds
    assert len(confounds) == 2, confounds
    assert "command timeout ms differs" in confounds[0]
    assert "1000 (valkey-glide, iovalkey)" in confounds[0] and "250 (fastify-rate-limit)" in confounds[0]
    assert "connect timeout ms differs" in confounds[1] and "2000 (fastify-rate-limit)" in confounds[1]
    assert not any("in-flight" in w for w in confounds)
    texts = [f.text for f in report.findings if f.topic == "Client settings"]
    assert any("command timeout ms is not the same" in t and "250 (fastify-rate-limit)" in t
               for t in texts), texts
    from sluice_report import write
    html = write(report, tmp_path / "out")[0].read_text(encoding="utf-8")
    assert "⚠ Client settings differ between implementations" in html


def test_workers_and_single_box_pinning_are_run_settings(tmp_path):
    """`workers` as asked and as served, and the cores the run pinned, read from the runs."""
    a = make_run("iovalkey")
    a["config"].update(workers="auto", cpus=[0, 1])
    a["gatewayWorkers"] = 2
    b = make_run("iovalkey")
    b["config"].update(cpus=[0, 1], loadCpus=[1])
    b["gatewayWorkers"] = 1
    write_run(tmp_path, a, "iovalkey-auto_standalone_light_50c_10s_run1.json")
    write_run(tmp_path, b)
    report = analyse(tmp_path)
    settings = dict(report.header.settings)
    assert settings["gateway workers"] == "1, auto (2 processes)"
    assert settings["CPUs (single box)"] == (
        "relay, gateway and Valkey pinned to CPUs 0,1, "
        "relay, gateway and Valkey pinned to CPUs 0,1; load generator on CPUs 1")
    # workers: auto is a configuration of its own, named as its file is.
    assert settings["implementations"] == "iovalkey, iovalkey-auto"
    assert not [w for w in report.warnings if "file name says" in w]


def test_unpinned_runs_say_so(tmp_path):
    write_run(tmp_path, make_run())
    settings = dict(analyse(tmp_path).header.settings)
    assert settings["CPUs (single box)"] == "not pinned"
